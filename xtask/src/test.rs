//! `cargo xtask test`: every test, Rust and Python.
//!
//! 1. `cargo test --workspace`.
//! 2. A virtual environment at `target/py-venv` (created once), with the test
//!    requirements installed by name from PyPI (`pip` skips what is already there).
//! 3. The `tensorfmt` Python package built by maturin and installed into it
//!    (`pip install ./crates/tensorfmt-py`, a release build).
//! 4. `pytest crates/tensorfmt-py/tests`.
//!
//! torch from PyPI is a CUDA build: its CUDA libraries (nvidia-*, cuda-*) are loaded by
//! `import torch` even on a machine without a GPU, but triton (1 GB, only for
//! `torch.compile`) is not; we install torch without triton and without pip's cache
//! (about 4 GB instead of 8), and check that it imports, else try the full install. Where
//! torch cannot be installed at all (no space, no network), the run goes on, pytest is
//! told why through `TENSORFMT_TORCH_UNAVAILABLE`, and the torch tests skip loudly with
//! that reason; a torch that is missing for any other reason fails them under `CI=true`.

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
    // Independent references: OpenCV 4's Caffe importer (5.x removed it), the ONNX
    // checker and runtime for converted networks, bf16 arrays, typing checks, plots.
    "opencv-python-headless<5",
    "onnx",
    "onnxruntime",
    "ml_dtypes",
    "mypy",
    "matplotlib",
    // Property tests (tensorfmt.spaces round trips).
    "hypothesis",
    // primitiv's own reading rules in tests/test_written_files_open.py.
    "msgpack",
    // The xarray engine and the VirtualiZarr parser (issue 31) and what reads their
    // references back: kerchunk (JSON, parquet; its HTTP reads need aiohttp and
    // requests) and Icechunk. VirtualiZarr 2.6+ needs Python 3.12: pip picks 2.5 on 3.11.
    "xarray",
    "sparse",
    "zarr>=3",
    "virtualizarr>=2.5",
    "obstore",
    "kerchunk",
    "fastparquet",
    "aiohttp",
    "requests",
    "icechunk",
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
                    // The cache would double the disk used by every wheel (torch's are GBs).
                    "--no-cache-dir",
                ])
                .args(extra),
        )
    };
    pip(REQUIREMENTS)?;
    let torch_unavailable = match install_torch(&python, &pip) {
        Ok(()) => None,
        Err(e) => {
            eprintln!(
                "xtask: WARNING: torch could not be installed ({e}); the torch tests will skip"
            );
            Some(e)
        }
    };
    pip(&[
        "--no-build-isolation",
        "--force-reinstall",
        "--no-deps",
        "./crates/tensorfmt-py",
    ])?;
    let tests = Path::new("crates").join("tensorfmt-py").join("tests");
    let pytest_args: Vec<&String> = args.iter().filter(|a| *a != "--python-only").collect();
    let mut pytest = Command::new(&python);
    pytest
        .current_dir(&root)
        .env("PATH", &path)
        .env("VIRTUAL_ENV", &venv)
        .args(["-m", "pytest", "-ra", "-p", "no:cacheprovider"])
        .arg(&tests)
        .args(pytest_args);
    match torch_unavailable {
        Some(why) => pytest.env("TENSORFMT_TORCH_UNAVAILABLE", why),
        None => pytest.env_remove("TENSORFMT_TORCH_UNAVAILABLE"),
    };
    status(&mut pytest)
}

/// Whether `python` can import torch.
fn imports_torch(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import torch"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs a torch that imports: the wheel alone, then the dependencies it declares
/// except those `import torch` does not load; the full install if that does not import.
fn install_torch(python: &Path, pip: &dyn Fn(&[&str]) -> Result<(), String>) -> Result<(), String> {
    if imports_torch(python) {
        return Ok(());
    }
    // One retry: a dropped connection during a 900 MB download should not cost the tests.
    let lean = || -> Result<(), String> {
        pip(&["--no-deps", "torch"])?;
        let out = Command::new(python)
            .args(["-c", REQUIREMENTS_BUT_TRITON])
            .output()
            .map_err(|e| format!("cannot read torch's requirements: {e}"))?;
        let reqs = String::from_utf8_lossy(&out.stdout).into_owned();
        let reqs: Vec<&str> = reqs.lines().filter(|l| !l.is_empty()).collect();
        if !reqs.is_empty() {
            eprintln!("xtask: pip will report triton as not installed; that is intended");
            pip(&reqs)?;
        }
        Ok(())
    };
    for attempt in 1..=2 {
        match lean() {
            Ok(()) if imports_torch(python) => return Ok(()),
            Ok(()) => break,
            Err(e) if attempt == 2 => eprintln!("xtask: torch without triton failed: {e}"),
            Err(e) => eprintln!("xtask: torch without triton failed ({e}); trying again"),
        }
    }
    eprintln!("xtask: installing torch with all its dependencies");
    pip(&["torch"]).map_err(|e| format!("{e}; see pip's message above"))?;
    if imports_torch(python) {
        Ok(())
    } else {
        Err("torch installed but `import torch` fails".into())
    }
}

/// Prints torch's declared requirements, one per line, without extras and without triton,
/// which only `torch.compile` imports.
const REQUIREMENTS_BUT_TRITON: &str = r#"
import importlib.metadata as m
try:
    from packaging.requirements import Requirement
except ImportError:  # a venv without pytest yet: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement
for r in m.requires("torch") or []:
    req = Requirement(r)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() == "triton":
        continue
    print(str(req).split(";")[0].strip())
"#;
