//! `cargo xtask test`: every test, Rust and Python.
//!
//! 1. `cargo test --workspace`.
//! 2. A virtual environment at `target/py-venv` (created once), with the test
//!    requirements installed by name from PyPI (`pip` skips what is already there).
//! 3. The `tensorfmt` Python package built by maturin and installed into it
//!    (`pip install ./crates/tensorfmt-py`, a release build).
//! 4. `pytest crates/tensorfmt-py/tests`.
//!
//! torch is large (a CUDA build from PyPI); where it cannot be installed the run goes
//! on and the torch tests skip with a loud message (and fail under `CI=true`).

use std::path::Path;
use std::process::Command;

use crate::util::project_root;

/// What the Python tests need, by name.
const REQUIREMENTS: &[&str] = &[
    "maturin>=1.5,<2",
    "numpy",
    "pytest",
    "scipy",
    "safetensors",
    "dask[array]",
    "distributed",
    "protobuf",
];

fn status(cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let s = cmd
        .status()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if s.success() {
        Ok(())
    } else {
        Err(format!("{:?} failed ({s})", cmd.get_program()))
    }
}

/// Runs every test; `args` go to pytest (e.g. `-k zero_copy`).
pub fn run(args: &[String]) -> Result<(), String> {
    let root = project_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if !args.iter().any(|a| a == "--python-only") {
        status(
            Command::new(&cargo)
                .current_dir(&root)
                .args(["test", "--workspace"]),
        )?;
    }
    let venv = root.join("target").join("py-venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let base = std::env::var("TENSORFMT_PYTHON").unwrap_or_else(|_| "python3".into());
        status(Command::new(base).args(["-m", "venv"]).arg(&venv))?;
    }
    // maturin (a build without isolation) and pytest's subprocesses find the venv first.
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let pip = |extra: &[&str]| -> Result<(), String> {
        status(
            Command::new(&python)
                .current_dir(&root)
                .env("PATH", &path)
                .env("VIRTUAL_ENV", &venv)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(extra),
        )
    };
    pip(REQUIREMENTS)?;
    if let Err(e) = pip(&["torch"]) {
        eprintln!("xtask: WARNING: torch could not be installed ({e}); the torch tests will skip");
    }
    pip(&[
        "--no-build-isolation",
        "--force-reinstall",
        "--no-deps",
        "./crates/tensorfmt-py",
    ])?;
    let tests = Path::new("crates").join("tensorfmt-py").join("tests");
    let pytest_args: Vec<&String> = args.iter().filter(|a| *a != "--python-only").collect();
    status(
        Command::new(&python)
            .current_dir(&root)
            .env("PATH", &path)
            .env("VIRTUAL_ENV", &venv)
            .args(["-m", "pytest", "-ra", "-p", "no:cacheprovider"])
            .arg(&tests)
            .args(pytest_args),
    )
}
