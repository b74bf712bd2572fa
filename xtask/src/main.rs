//! Repository automation, run as `cargo xtask <command>`.
//!
//! - `cargo xtask codegen [--check]`: regenerates the checked-in prost code from
//!   `proto/*.proto` with protox + prost-build (no system protoc).
//! - `cargo xtask fixtures [--check]`: regenerates the golden fixtures in `testdata/`
//!   from tiny byte-level builders that do not use our own writers (an independent
//!   oracle: a bug shared by our reader and writer cannot pass unnoticed).
//!
//! - `cargo xtask test [--python-only] [PYTEST ARGS]`: every test, Rust (`cargo test
//!   --workspace`) and Python (the package built into `target/py-venv`, then pytest).
//! - `cargo xtask wheel [--out DIR]`: the Python package as one abi3 wheel (every
//!   CPython >= 3.9 of this platform), in `target/wheels` by default.
//!
//! `--check` changes nothing and fails when a file is stale; `cargo test` runs both
//! checks (see the tests at the bottom of `codegen.rs` and `fixtures/mod.rs`), and the
//! tidy rules in `tidy.rs`.

mod codegen;
mod codegen_onnx;
mod fixtures;
mod module_graph;
mod test;
mod tidy;
mod util;
mod wheel;

use std::process::ExitCode;

const HELP: &str = "usage: cargo xtask <codegen|fixtures> [--check] | cargo xtask test [--python-only] [PYTEST ARGS] | cargo xtask wheel [--out DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let result = match args.first().map(String::as_str) {
        Some("codegen") => codegen::run(check).and_then(|()| codegen_onnx::run(check)),
        Some("fixtures") => fixtures::run(check),
        Some("test") => test::run(&args[1..]),
        Some("wheel") => wheel::run(&args[1..]),
        _ => {
            eprintln!("{HELP}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
