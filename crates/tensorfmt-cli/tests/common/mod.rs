//! Helpers shared by the CLI integration tests: running the binary, fixture paths.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::cargo::cargo_bin_cmd;

/// `testdata/<dir>/<name>` of the workspace.
pub fn testdata(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(dir)
        .join(name)
}

/// Runs `tensorfmt` with the arguments.
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = cargo_bin_cmd!("tensorfmt");
    cmd.args(args);
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit code, stdout, stderr; and never a panic or a Debug dump.
pub fn check(out: &Output) -> (i32, String, String) {
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(
        !se.contains("panicked") && !se.contains("RUST_BACKTRACE"),
        "{se}"
    );
    assert!(!se.contains("Error {") && !se.contains("Format {"), "{se}");
    (out.status.code().unwrap_or(-1), so, se)
}

/// Runs and checks in one go.
pub fn tf<I, S>(args: I) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    check(&run(args))
}

/// Parses stdout as JSON, with the output in the panic message.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// A path as an `OsStr` argument.
pub fn p(path: &Path) -> &OsStr {
    path.as_os_str()
}

/// Arguments of mixed types (`&str`, `PathBuf`, `&Path`) as one `Vec<OsString>`.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        vec![$(std::ffi::OsString::from(AsRef::<std::ffi::OsStr>::as_ref(&$a))),*]
    };
}
