//! `cargo xtask wheel [--out DIR]`: the Python package as one abi3 wheel.
//!
//! The extension is built against CPython's stable ABI (pyo3's `abi3-py39` feature), so
//! the one wheel installs into every CPython >= 3.9 of the same platform: a lab builds
//! it once on a machine with Rust and installs it everywhere else with `pip install
//! tensorfmt-*.whl`, no Rust needed there. maturin comes from `target/py-venv` (made by
//! `cargo xtask test`) or from `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::project_root;

/// Builds the wheel into `out` (default `target/wheels`) and prints its path.
pub fn run(args: &[String]) -> Result<(), String> {
    let root = project_root();
    let out = match args.iter().position(|a| a == "--out") {
        Some(i) => PathBuf::from(
            args.get(i + 1)
                .ok_or("--out needs a directory: cargo xtask wheel --out DIR")?,
        ),
        None => root.join("target").join("wheels"),
    };
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--out" => {
                rest.next();
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?}: cargo xtask wheel [--out DIR]"
                ))
            }
        }
    }
    let venv_bin = root.join("target").join("py-venv").join("bin");
    let maturin = if venv_bin.join("maturin").exists() {
        venv_bin.join("maturin")
    } else {
        PathBuf::from("maturin")
    };
    // maturin looks for a Python interpreter on PATH: the venv's first.
    let path = format!(
        "{}:{}",
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let status = Command::new(&maturin)
        .current_dir(&root)
        .env("PATH", path)
        .args(["build", "--release", "--manifest-path"])
        .arg(Path::new("crates").join("tensorfmt-py").join("Cargo.toml"))
        .arg("--out")
        .arg(&out)
        .status()
        .map_err(|e| {
            format!(
                "cannot run {}: {e} (pip install 'maturin>=1.5,<2', or run `cargo xtask test` once)",
                maturin.display()
            )
        })?;
    if !status.success() {
        return Err(format!("maturin build failed ({status})"));
    }
    // maturin writes (or rewrites in place) one wheel: the newest in `out`.
    let wheel = wheels(&out)
        .into_iter()
        .max_by_key(|w| std::fs::metadata(w).and_then(|m| m.modified()).ok())
        .ok_or_else(|| {
            format!(
                "maturin reported success but {} holds no wheel",
                out.display()
            )
        })?;
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if !name.contains("-abi3-") {
        return Err(format!(
            "{} is not an abi3 wheel: the stable-ABI feature of pyo3 is off",
            wheel.display()
        ));
    }
    println!("{}", wheel.display());
    eprintln!(
        "xtask: install it on any machine of this platform with: pip install {}",
        wheel.display()
    );
    Ok(())
}

/// The `.whl` files in `dir`.
fn wheels(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "whl"))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("tensorfmt-"))
                })
                .collect()
        })
        .unwrap_or_default()
}
