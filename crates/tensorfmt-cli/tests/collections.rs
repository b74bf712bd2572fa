//! Whole collections (issue 14): directories, globs and several inputs; a pool of
//! workers; failures reported per file; JSON lines; reruns that skip what is done; a
//! killed run that resumes to the same tree as a clean one.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{json, testdata, tf};

/// A tree of mixed formats with two broken files.
fn tree(root: &Path) {
    let sub = root.join("run1").join("deep");
    std::fs::create_dir_all(&sub).unwrap();
    for (dir, file) in [
        ("pvp", "dense_f32.pvp"),
        ("pvp", "sparse_values_dt4.pvp"),
        ("caffe", "v2_tiny.caffemodel"),
        ("som", "data_f32_2x3.bin"),
        ("core", "mixed.npz"),
        ("primitiv", "parameter_2x3_stats.data"),
    ] {
        std::fs::copy(testdata(dir, file), root.join("run1").join(file)).unwrap();
        std::fs::copy(testdata(dir, file), sub.join(file)).unwrap();
    }
    let dense = std::fs::read(testdata("pvp", "dense_f32.pvp")).unwrap();
    std::fs::write(sub.join("broken.pvp"), &dense[..100]).unwrap();
    std::fs::write(root.join("run1").join("garbage.npz"), b"not a zip").unwrap();
    std::fs::write(root.join("run1").join("notes.txt"), b"not a tensor file").unwrap();
}

/// Every file below `root` (relative path -> bytes), but for the record of outputs
/// `.tensorfmt-outputs` (which names inodes).
fn contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == ".tensorfmt-outputs") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn a_tree_converts_reports_broken_files_and_a_rerun_converts_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    tree(&input);
    let out = dir.path().join("out");
    let (code, stdout, err) = tf(args!["convert", "-r", &input, &out, "--to", "safetensors"]);
    assert_eq!(code, 1, "broken files make the exit code 1: {err}");
    assert!(
        err.contains("broken.pvp: error:") && err.contains("garbage.npz: error:"),
        "{err}"
    );
    assert!(
        err.contains("12 converted, 0 up to date, 2 failed"),
        "{err}"
    );
    assert!(
        stdout.contains("-> ") && !stdout.contains("notes"),
        "{stdout}"
    );
    let made = contents(&out);
    assert_eq!(made.len(), 12, "{:?}", made.keys());
    assert!(made.contains_key(Path::new("run1/deep/v2_tiny.safetensors")));
    for rel in made.keys() {
        let original = input.join(rel).with_extension("");
        let back = tensorfmt::Document::open(out.join(rel)).unwrap();
        assert!(!back.names().is_empty(), "{}", original.display());
    }
    // JSON lines, and a rerun converts nothing new.
    let (code, stdout, _) = tf(args![
        "convert",
        "-r",
        &input,
        &out,
        "--to",
        "safetensors",
        "--json",
        "-j",
        "2"
    ]);
    assert_eq!(code, 1);
    let lines: Vec<serde_json::Value> = stdout.lines().map(json).collect();
    assert_eq!(lines.len(), 14);
    let status = |s: &str| lines.iter().filter(|l| l["status"] == s).count();
    assert_eq!(
        (status("skipped"), status("failed"), status("ok")),
        (12, 2, 0)
    );
    for l in &lines {
        for key in [
            "path", "output", "status", "format", "kind", "tensors", "bytes", "seconds", "error",
        ] {
            assert!(l.get(key).is_some(), "{key} missing in {l}");
        }
    }
    assert_eq!(contents(&out), made, "nothing rewritten");
    // --force converts again; touching an input reconverts only that one.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let touched = input.join("run1").join("mixed.npz");
    let data = std::fs::read(&touched).unwrap();
    std::fs::write(&touched, data).unwrap();
    let (_, stdout, _) = tf(args![
        "convert",
        "-r",
        &input,
        &out,
        "--to",
        "safetensors",
        "--json"
    ]);
    let ok: Vec<String> = stdout
        .lines()
        .map(json)
        .filter(|l| l["status"] == "ok")
        .map(|l| l["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert!(ok[0].ends_with("run1/mixed.npz"));
    let (_, stdout, _) = tf(args![
        "convert",
        "-r",
        &input,
        &out,
        "--to",
        "safetensors",
        "--json",
        "--force"
    ]);
    assert_eq!(
        stdout
            .lines()
            .map(json)
            .filter(|l| l["status"] == "ok")
            .count(),
        12
    );
}

#[test]
fn globs_and_several_files_and_the_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    tree(&input);
    let out = dir.path().join("npz");
    let pattern = format!("{}/**/*.pvp", input.display());
    let (code, _, err) = tf(args!["convert", &pattern, &out, "--to", "npz", "--quiet"]);
    assert_eq!(code, 1, "{err}"); // broken.pvp
    let made = contents(&out);
    assert_eq!(made.len(), 4, "{:?}", made.keys());
    assert!(made.contains_key(Path::new("run1/deep/dense_f32.npz")));
    let a = input.join("run1").join("dense_f32.pvp");
    let b = input.join("run1").join("v2_tiny.caffemodel");
    let flat = dir.path().join("flat");
    let (code, _, err) = tf(args!["convert", &a, &b, &flat, "--to", "npz"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(contents(&flat).len(), 2);
    let (code, _, err) = tf(args!["convert", &a, &b, &flat]);
    assert_eq!(code, 2, "several inputs need --to: {err}");
    assert!(err.contains("--to"), "{err}");
    let (code, _, err) = tf(args!["convert", &input, &flat, "--to", "npz"]);
    assert_eq!(code, 2, "a directory needs --recursive: {err}");
    assert!(err.contains("--recursive"), "{err}");
    // validate and the inspect catalogue over the same tree.
    let (code, stdout, _) = tf(args!["validate", "-r", &input, "--quiet"]);
    assert_eq!(code, 1);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    let (code, stdout, _) = tf(args!["inspect", "--json", "-r", &input]);
    assert_eq!(code, 1);
    let lines: Vec<serde_json::Value> = stdout.lines().map(json).collect();
    assert_eq!(lines.len(), 14);
    let good: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("error").is_none()).collect();
    assert_eq!(good.len(), 12);
    for l in good {
        assert!(
            l["format"].is_string() && l["tensors"].is_array() && l["header"].is_object(),
            "{l}"
        );
    }
}

#[test]
fn a_killed_run_resumes_to_the_same_tree_as_a_clean_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    // Enough work that a kill lands in the middle: 24 copies of a 4 MiB movie plus
    // small files.
    let big = input.join("big0.pvp");
    {
        let f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        let mut w = tensorfmt::pvp::write::DenseWriter::new(f, 256, 256, 4).unwrap();
        let frame: Vec<f32> = (0..256 * 256 * 4).map(|i| (i % 13) as f32).collect();
        for k in 0..4 {
            w.write_frame(k as f64, &frame).unwrap();
        }
        w.finish().unwrap();
    }
    for k in 1..24 {
        std::fs::copy(&big, input.join(format!("big{k}.pvp"))).unwrap();
        std::fs::copy(
            testdata("caffe", "v2_tiny.caffemodel"),
            input.join(format!("net{k}.caffemodel")),
        )
        .unwrap();
    }
    let bin = env!("CARGO_BIN_EXE_tensorfmt");
    let resumed = dir.path().join("resumed");
    let mut child = Command::new(bin)
        .args(["convert", "-r", "-j", "1", "--quiet", "--to", "npz"])
        .arg(&input)
        .arg(&resumed)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let partial = contents(&resumed).len();
    let status = Command::new(bin)
        .args(["convert", "-r", "--quiet", "--to", "npz"])
        .arg(&input)
        .arg(&resumed)
        .status()
        .unwrap();
    assert!(status.success());
    let clean = dir.path().join("clean");
    let status = Command::new(bin)
        .args(["convert", "-r", "--quiet", "--to", "npz"])
        .arg(&input)
        .arg(&clean)
        .status()
        .unwrap();
    assert!(status.success());
    let (a, b) = (contents(&resumed), contents(&clean));
    assert_eq!(a.len(), 47, "partial run had {partial}");
    assert!(a == b, "the resumed tree differs from a clean run's");
    assert!(a.keys().all(|k| !k.to_string_lossy().ends_with(".tmp")));
}

/// `validate` over a collection runs on the pool and reports in the order of the files,
/// whatever the number of workers: the same text and JSON with `-j 1` and `-j 4`.
#[test]
fn validate_of_a_tree_runs_in_parallel_and_reports_in_order() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let root = dir.path().join("run1");
    let run = |extra: &[&str]| {
        let mut a: Vec<std::ffi::OsString> =
            vec!["validate".into(), "-r".into(), root.clone().into()];
        a.extend(extra.iter().map(Into::into));
        tf(&a)
    };
    let (code1, text1, _) = run(&["-j", "1"]);
    let (code4, text4, _) = run(&["-j", "4"]);
    assert_eq!((code1, code4), (1, 1), "{text1}");
    assert_eq!(text1, text4);
    let lines: Vec<&str> = text4.lines().collect();
    assert_eq!(lines.len(), 14, "{text4}"); // 6 files twice + 2 broken (notes.txt skipped)
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(
        lines, sorted,
        "reported in the (sorted) order of the expanded inputs"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains(": error: ")).count(),
        2,
        "{text4}"
    );
    let (_, j1, _) = run(&["-j", "1", "--json"]);
    let (_, j4, _) = run(&["-j", "4", "--json"]);
    assert_eq!(json(&j1), json(&j4));
}

/// A collection whose every file fails left an output directory behind (empty but for
/// the record of intents and the folders of the outputs that never came): a run that
/// wrote nothing leaves nothing; a directory that existed before stays.
#[test]
fn a_run_that_writes_nothing_leaves_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(input.join("deep")).unwrap();
    std::fs::write(input.join("garbage.npz"), b"not a zip").unwrap();
    std::fs::write(input.join("deep").join("broken.npz"), b"PK nope").unwrap();
    let out = dir.path().join("out");
    let (code, _, err) = tf(args!["convert", "-r", &input, &out, "--to", "npz"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("0 converted, 0 up to date, 2 failed"), "{err}");
    assert!(!out.exists(), "{err}");
    std::fs::create_dir(&out).unwrap();
    let (code, _, _) = tf(args!["convert", "-r", &input, &out, "--to", "npz"]);
    assert_eq!(code, 1);
    assert!(out.is_dir());
}

/// An output directory inside the input tree (`convert -r d d/out`): a rerun took
/// `d/out/x.npz` as an input (writing `d/out/out/x.npz`) and failed "the output ... is
/// the input" for the real input; each run nested deeper. The walk leaves the output
/// directory out, so a rerun is up to date; likewise for a pattern, and for outputs
/// written beside their inputs (`convert -r d d`), which the record names.
#[test]
fn an_output_directory_inside_the_input_tree_is_not_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::copy(testdata("pvp", "dense_f32.pvp"), d.join("x.pvp")).unwrap();
    std::fs::copy(
        testdata("pvp", "dense_f32.pvp"),
        d.join("sub").join("y.pvp"),
    )
    .unwrap();
    let out = d.join("out");
    let files = |root: &Path| {
        let mut v: Vec<PathBuf> = contents(root).into_keys().collect();
        v.sort();
        v
    };
    let (code, _, err) = tf(args!["convert", "-r", &d, &out, "--to", "npz"]);
    assert_eq!(code, 0, "{err}");
    let first = files(&d);
    for _ in 0..2 {
        let (code, _, err) = tf(args!["convert", "-r", &d, &out, "--to", "npz"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("2 file(s): 0 converted, 2 up to date, 0 failed"),
            "{err}"
        );
        assert_eq!(files(&d), first, "nothing nested");
    }
    assert!(!out.join("out").exists());
    // The same through a pattern, and through another spelling of the output.
    let pattern = format!("{}/**/*.pvp", d.display());
    let dotted = d.join(".").join("out");
    let (code, _, err) = tf(args!["convert", &pattern, &dotted, "--to", "npz"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 converted, 2 up to date"), "{err}");
    let pattern = format!("{}/**/*.npz", d.display());
    let (code, _, err) = tf(args!["convert", &pattern, &out, "--to", "npz"]);
    assert_eq!(code, 1, "no file matches outside the output: {err}");
    // Outputs beside their inputs: the second run knows them as its own.
    let e = dir.path().join("e");
    std::fs::create_dir_all(&e).unwrap();
    std::fs::copy(testdata("pvp", "dense_f32.pvp"), e.join("x.pvp")).unwrap();
    let (code, _, err) = tf(args!["convert", "-r", &e, &e, "--to", "npz"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = tf(args!["convert", "-r", &e, &e, "--to", "npz"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("1 file(s): 0 converted, 1 up to date, 0 failed"),
        "{err}"
    );
    // A file of that name that is not our output is still refused as before.
    std::fs::write(
        e.join("x.npz"),
        std::fs::read(testdata("core", "mixed.npz")).unwrap(),
    )
    .unwrap();
    let (code, _, err) = tf(args!["convert", "-r", &e, &e, "--to", "npz"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is the input"), "{err}");
}

/// An output of a collection that is an existing directory: refused as a directory
/// (not "use --force"), and --force does not try to rename over it.
#[test]
fn a_collection_output_that_is_a_directory_is_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::copy(testdata("pvp", "dense_f32.pvp"), input.join("x.pvp")).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("x.npz")).unwrap();
    for force in [false, true] {
        let mut a = args!["convert", "-r", &input, &out, "--to", "npz"];
        if force {
            a.push("--force".into());
        }
        let (code, _, err) = tf(&a);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("out/x.npz is a directory"), "{err}");
        assert!(
            !err.contains("--force") && !err.contains("renaming"),
            "{err}"
        );
    }
    assert!(out.join("x.npz").is_dir());
}
