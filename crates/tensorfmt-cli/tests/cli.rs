//! End-to-end tests of the `tensorfmt` binary on the `testdata/core` samples:
//! output of `inspect` (text and JSON), conversions, overwrite refusal, exit codes,
//! and bad input.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;
use tensorfmt::{DType, ReadOptions, Tensor};

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/core")
        .join(name)
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = cargo_bin_cmd!("tensorfmt");
    for a in args {
        cmd.arg(a);
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit code, stdout, stderr; and never a panic or a Debug dump.
fn check(out: &Output) -> (i32, String, String) {
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(
        !se.contains("panicked") && !se.contains("RUST_BACKTRACE"),
        "{se}"
    );
    assert!(!se.contains("Error {") && !se.contains("Format {"), "{se}");
    (out.status.code().unwrap_or(-1), so, se)
}

fn read(path: &Path, name: &str) -> Tensor {
    tensorfmt::open(path, &ReadOptions::default())
        .unwrap()
        .read_tensor(name)
        .unwrap()
}

#[test]
fn inspect_text() {
    let (code, out, err) = check(&run(&[&"inspect", &sample("f32_2x3.npy")]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("format:  npy"), "{out}");
    assert!(out.contains("kind:    array"), "{out}");
    assert!(out.contains("descr: <f4"), "{out}");
    assert!(out.contains("f32_2x3  f32  [2, 3]"), "{out}");
    assert!(!out.contains("min "), "no stats without --stats: {out}");
    let (code, out, _) = check(&run(&[&"inspect", &"--stats", &sample("f32_2x3.npy")]));
    assert_eq!(code, 0);
    assert!(
        out.contains("min -1.25  max 100  mean 17.5  sum 105  nonzero 5"),
        "{out}"
    );
}

#[test]
fn inspect_json() {
    let (code, out, err) = check(&run(&[&"inspect", &"--json", &sample("mixed.npz")]));
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["format"], "npz");
    assert_eq!(v["kind"], "archive (stored and deflated)");
    assert_eq!(v["header"]["member_count"], 3);
    assert_eq!(v["header"]["members"]["bias"]["compressed"], true);
    let names: Vec<&str> = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["weights", "bias", "flags"]);
    assert_eq!(v["tensors"][0]["dtype"], "f32");
    assert_eq!(v["tensors"][0]["shape"], serde_json::json!([2, 3]));
    assert!(v["tensors"][0].get("stats").is_none());
    assert_eq!(v["warnings"], serde_json::json!([]));

    let (code, out, _) = check(&run(&[
        &"inspect",
        &sample("model.safetensors"),
        &"--json",
        &"--stats",
    ]));
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["format"], "safetensors");
    assert_eq!(v["header"]["__metadata__"]["format"], "pt");
    let bias = &v["tensors"][0];
    assert_eq!(bias["name"], "layer.bias");
    assert_eq!(bias["stats"]["sum"], 7.25);
    assert_eq!(bias["stats"]["min"], -1.0);
    assert_eq!(bias["stats"]["max"], 8.0);
    assert_eq!(bias["stats"]["nonzero"], 3);
    assert_eq!(v["tensors"][2]["stats"]["nonzero"], 1);
}

#[test]
fn convert_round_trip_npy_npz_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let npz = dir.path().join("a.npz");
    let st = dir.path().join("a.safetensors");
    let npy = dir.path().join("back.npy");
    let original = read(&sample("i16_fortran_2x3.npy"), "i16_fortran_2x3");
    for (from, to) in [
        (sample("i16_fortran_2x3.npy"), npz.clone()),
        (npz.clone(), st.clone()),
        (st.clone(), npy.clone()),
    ] {
        let (code, out, err) = check(&run(&[&"convert", &from, &to]));
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("wrote 1 tensor"), "{out}");
    }
    assert_eq!(read(&npz, "i16_fortran_2x3"), original);
    assert_eq!(read(&st, "i16_fortran_2x3"), original);
    assert_eq!(read(&npy, "back"), original);

    // A whole archive, and an explicit --to with a dtype change.
    let st2 = dir.path().join("mixed.out");
    let (code, _, err) = check(&run(&[
        &"convert",
        &sample("mixed.npz"),
        &st2,
        &"--to",
        &"safetensors",
        &"--dtype",
        &"f64",
    ]));
    assert_eq!(code, 0, "{err}");
    let w = read(&st2, "weights");
    assert_eq!(w.dtype(), DType::F64);
    assert_eq!(w.to_vec::<f64>().unwrap()[5], 100.0);
    assert_eq!(
        read(&st2, "bias").to_vec::<f64>().unwrap(),
        vec![-1.0, 0.0, 7.0]
    );
}

#[test]
fn convert_to_npy_picks_one_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.npy");
    let (code, _, err) = check(&run(&[&"convert", &sample("mixed.npz"), &out]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note") && err.contains("--tensor"), "{err}");
    assert_eq!(read(&out, "w").dims(), &[2, 3]);
    let out2 = dir.path().join("b.npy");
    let (code, _, err) = check(&run(&[
        &"convert",
        &sample("mixed.npz"),
        &out2,
        &"--tensor",
        &"bias",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(read(&out2, "b").to_vec::<i64>().unwrap(), vec![-1, 0, 7]);
    let (code, _, err) = check(&run(&[
        &"convert",
        &sample("mixed.npz"),
        &dir.path().join("x.npy"),
        &"--tensor",
        &"nope",
    ]));
    assert_eq!(code, 2);
    assert!(
        err.contains("no tensor named \"nope\"") && err.contains("weights"),
        "{err}"
    );
}

#[test]
fn convert_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("exists.npz");
    std::fs::write(&out, b"precious").unwrap();
    let (code, _, err) = check(&run(&[&"convert", &sample("f32_2x3.npy"), &out]));
    assert_eq!(code, 2);
    assert!(
        err.starts_with("tensorfmt: error: ") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let (code, _, err) = check(&run(&[
        &"convert",
        &sample("f32_2x3.npy"),
        &out,
        &"--force",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(read(&out, "f32_2x3").dims(), &[2, 3]);
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn validate_reports_one_line_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("cut.npy");
    let good = std::fs::read(sample("f32_2x3.npy")).unwrap();
    std::fs::write(&bad, &good[..good.len() - 3]).unwrap();
    let (code, out, _) = check(&run(&[
        &"validate",
        &sample("f32_2x3.npy"),
        &sample("mixed.npz"),
        &sample("model.safetensors"),
    ]));
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 3);
    assert!(out.lines().all(|l| l.ends_with(": ok")), "{out}");
    let (code, out, _) = check(&run(&[&"validate", &sample("f32_2x3.npy"), &bad]));
    assert_eq!(code, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].ends_with(": ok"));
    assert!(
        lines[1].contains(": error: npy: at byte 128: data"),
        "{}",
        lines[1]
    );
}

#[test]
fn exit_codes_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    // Unreadable and unrecognisable input: 1.
    let (code, _, err) = check(&run(&[&"inspect", &dir.path().join("missing.npy")]));
    assert_eq!(code, 1);
    assert!(
        err.starts_with("tensorfmt: error: ") && err.contains("missing.npy"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"just some text").unwrap();
    let (code, _, err) = check(&run(&[&"inspect", &junk]));
    assert_eq!(code, 1);
    assert!(err.contains("cannot tell the file format"), "{err}");
    let fake = dir.path().join("fake.safetensors");
    std::fs::write(&fake, b"\xff\xff\xff\xff\xff\xff\xff\x7f{").unwrap();
    let (code, _, err) = check(&run(&[&"inspect", &fake]));
    assert_eq!(code, 1, "{err}");
    // The file first (review: `diff A B` did not say which side was bad).
    assert!(
        err.starts_with(&format!(
            "tensorfmt: error: {}: safetensors: ",
            fake.display()
        )),
        "{err}"
    );
    // Usage errors: 2.
    for args in [
        vec!["frobnicate"],
        vec![],
        vec!["validate"],
        vec!["convert", "a.npy", "b.npz", "--frames", "x"],
        vec!["convert", "a.npy", "b.npz", "--dtype", "f128"],
        vec!["convert", "a.npy", "b.npz", "--set", "novalue"],
        vec!["convert", "a.npy", "b.npz", "--to", "hdf5"],
    ] {
        let dyn_args: Vec<&dyn AsRef<std::ffi::OsStr>> = args
            .iter()
            .map(|a| a as &dyn AsRef<std::ffi::OsStr>)
            .collect();
        let (code, _, _) = check(&run(&dyn_args));
        assert_eq!(code, 2, "{args:?}");
    }
    let (code, _, err) = check(&run(&[
        &"convert",
        &sample("f32_2x3.npy"),
        &dir.path().join("out.unknown"),
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("--to"), "{err}");
    let (code, out, _) = check(&run(&[&"--help"]));
    assert_eq!(code, 0);
    assert!(out.contains("inspect") && out.contains("convert") && out.contains("validate"));
}

/// Issue 34 item 6: a legal 255-byte output name converts (to ONNX through the
/// lowering's writer too), and an output that cannot be created is named in the error,
/// not its hidden temporary file.
#[test]
fn the_longest_legal_output_name_converts_and_errors_name_the_output() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["npz", "onnx", "safetensors"] {
        let out = dir
            .path()
            .join(format!("{}.{ext}", "n".repeat(254 - ext.len())));
        assert_eq!(out.file_name().unwrap().len(), 255);
        let (code, _, err) = check(&run(&[&"convert", &sample("mixed.npz"), &out]));
        assert_eq!(code, 0, "{ext}: {err}");
        assert!(out.exists());
    }
    let out = dir.path().join("no_such_dir").join("out.npz");
    let (code, _, err) = check(&run(&[&"convert", &sample("mixed.npz"), &out]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&out.display().to_string()), "{err}");
    assert!(!err.contains(".out.npz."), "{err}");
}
