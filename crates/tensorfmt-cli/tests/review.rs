//! What a reviewer acting as a new user found in the command line: `validate --json` of
//! a file only the lenient reader accepts, directories named as files, `render`'s
//! options (negative frames, output names, options that do not apply, `--arbor`),
//! errors that name their file once, `-` as an output, the `--to` values, the
//! synopses of docs/cli.md and README.md, and `kind_id` beside `kind`.

mod common;

use std::path::Path;

use common::{json, testdata, tf};

fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel),
    )
    .unwrap()
}

/// The first 200 bytes of a 3-frame dense PVP file: frame 2 is cut short.
fn cut_pvp(dir: &Path) -> std::path::PathBuf {
    let cut = dir.join("cut.pvp");
    let bytes = std::fs::read(testdata("pvp", "dense_f32.pvp")).unwrap();
    std::fs::write(&cut, &bytes[..200]).unwrap();
    cut
}

#[test]
fn validate_json_reports_what_the_lenient_reader_found() {
    let dir = tempfile::tempdir().unwrap();
    let cut = cut_pvp(dir.path());
    let (code, out, err) = tf(args!["validate", "--json", cut]);
    assert_eq!(code, 1, "{err}");
    let f = &json(&out)["files"][0];
    assert_eq!(f["ok"], false);
    assert_eq!(f["readable"], true);
    assert_eq!(f["format"], "pvp", "{f}");
    assert_eq!(f["kind"], "dense activity", "{f}");
    assert_eq!(f["kind_id"], "dense", "{f}");
    let warnings = f["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 2, "{f}");
    assert!(f["error"].as_str().unwrap().contains("original program"));
    // Unreadable: nothing known.
    let bad = dir.path().join("bad.npy");
    std::fs::write(&bad, b"xx").unwrap();
    let (_, out, _) = tf(args!["validate", "--json", bad]);
    let f = &json(&out)["files"][0];
    assert_eq!(
        (f["readable"].clone(), f["kind_id"].clone()),
        (false.into(), serde_json::Value::Null)
    );
}

#[test]
fn inspect_and_validate_json_give_the_kind_id() {
    for (dir, name, id) in [
        ("pvp", "dense_f32.pvp", "dense"),
        ("som", "map_hex3.bin", "som-mapping"),
        ("core", "f32_2x3.npy", "npy"),
    ] {
        let f = testdata(dir, name);
        let (code, out, err) = tf(args!["inspect", "--json", f]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(v["kind_id"], id, "{name}");
        assert!(v["kind"].is_string());
        let (code, out, err) = tf(args!["validate", "--json", f]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(json(&out)["files"][0]["kind_id"], id, "{name}");
    }
    // The catalogue of a collection too.
    let (code, out, _) = tf(args![
        "inspect",
        "--json",
        testdata("pvp", "dense_f32.pvp"),
        testdata("som", "map_hex3.bin")
    ]);
    assert_eq!(code, 0);
    let ids: Vec<String> = out
        .lines()
        .map(|l| json(l)["kind_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["dense", "som-mapping"]);
}

#[test]
fn a_directory_named_as_a_file_is_refused_as_documented() {
    let d = testdata("core", "");
    let d = d.as_path();
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n);
    // Commands that take -r: a usage error with the hint.
    for a in [
        args!["inspect", d],
        args!["inspect", "--json", d],
        args!["validate", d],
        args!["validate", "--json", d],
        args!["convert", d, out("o"), "--to", "npz"],
        args!["convert", d, out("o.npz")],
    ] {
        let (code, _, err) = tf(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(
            err.contains("is a directory; use --recursive (-r) to take the files below it"),
            "{a:?}: {err}"
        );
    }
    assert!(!out("o").exists() && !out("o.npz").exists());
    // Commands without -r: not a regular file (exit 1; diff's trouble is 2).
    let som = testdata("som", "som_hex3.bin");
    for (a, want) in [
        (args!["diff", d, som], 2),
        (args!["diff", som, d], 2),
        (args!["render", d, out("r.png")], 1),
        (args!["som-map", d, som, out("o.map")], 1),
        (args!["som-map", som, d, out("o.map")], 1),
    ] {
        let (code, _, err) = tf(&a);
        assert_eq!(code, want, "{a:?}: {err}");
        assert!(
            err.contains(": not a regular file (a directory); nothing was read"),
            "{a:?}: {err}"
        );
    }
    let doc = repo_file("docs/cli.md");
    for needle in [
        "is a directory; use --recursive (-r) to take the files below it",
        "not a regular file (a directory); nothing was read",
    ] {
        assert!(doc.contains(needle), "docs/cli.md lacks {needle:?}");
    }
}

fn png_of(args: Vec<std::ffi::OsString>, png: &Path) -> Vec<u8> {
    let (code, _, err) = tf(&args);
    assert_eq!(code, 0, "{args:?}: {err}");
    std::fs::read(png).unwrap()
}

#[test]
fn render_counts_negative_frames_from_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let pvp = testdata("pvp", "dense_f32.pvp"); // 3 frames
    let (a, b) = (dir.path().join("a.png"), dir.path().join("b.png"));
    let last = png_of(args!["render", pvp, a, "--frame", "-1"], &a);
    let two = png_of(args!["render", pvp, b, "--frame", "2"], &b);
    assert_eq!(last, two);
    let first = png_of(args!["render", pvp, a, "--frame=-3", "--force"], &a);
    let zero = png_of(args!["render", pvp, b, "--frame", "0", "--force"], &b);
    assert_eq!(first, zero);
    for k in ["-4", "3"] {
        let c = dir.path().join("c.png");
        let (code, _, err) = tf(args!["render", pvp, c, "--frame", k]);
        assert_eq!(code, 2, "{k}: {err}");
        assert!(
            err.contains(&format!("--frame {k}")) && err.contains("3 frames"),
            "{err}"
        );
        // Both ranges inclusive (it said "0..3, or -3..-1": one exclusive, one not).
        assert!(
            err.contains("has 3 frames (0 to 2, or -3 to -1 from the end)"),
            "{err}"
        );
        assert!(!c.exists());
    }
    // SOM data entries count the same way.
    let data = testdata("som", "data_f32_2x3.bin"); // 2 entries
    let a1 = png_of(args!["render", data, a, "--frame", "-1", "--force"], &a);
    let b1 = png_of(args!["render", data, b, "--frame", "1", "--force"], &b);
    assert_eq!(a1, b1);
}

#[test]
fn render_writes_only_png_names() {
    let dir = tempfile::tempdir().unwrap();
    let som = testdata("som", "som_hex3.bin");
    for name in ["som.jpg", "som", "som.PNG.txt"] {
        let out = dir.path().join(name);
        let (code, _, err) = tf(args!["render", som, out]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(".png"), "{err}");
        assert!(!out.exists(), "{name}");
    }
    let out = dir.path().join("som.PNG");
    let (code, _, err) = tf(args!["render", som, out]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn render_refuses_options_that_do_not_apply_to_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.png");
    let cases = [
        (
            testdata("som", "som_hex3.bin"),
            vec!["--counts"],
            "--counts",
        ),
        (
            testdata("som", "som_hex3.bin"),
            vec!["--frame", "0"],
            "--frame",
        ),
        (
            testdata("som", "som_hex3.bin"),
            vec!["--layer", "x"],
            "--layer",
        ),
        (
            testdata("som", "data_f32_2x3.bin"),
            vec!["--counts"],
            "--counts",
        ),
        (
            testdata("som", "map_hex3.bin"),
            vec!["--counts", "--frame", "1"],
            "--frame",
        ),
        (
            testdata("som", "map_hex3.bin"),
            vec!["--arbor", "0"],
            "--arbor",
        ),
        (
            testdata("pvp", "dense_f32.pvp"),
            vec!["--counts"],
            "--counts",
        ),
        (
            testdata("pvp", "dense_f32.pvp"),
            vec!["--arbor", "0"],
            "--arbor",
        ),
        (
            testdata("caffe", "v2_tiny.caffemodel"),
            vec!["--frame", "0"],
            "--frame",
        ),
        (
            testdata("caffe", "v2_tiny.caffemodel"),
            vec!["--arbor", "0"],
            "--arbor",
        ),
    ];
    for (file, opts, named) in cases {
        let mut a = args!["render", file, out];
        a.extend(opts.iter().map(std::ffi::OsString::from));
        let (code, _, err) = tf(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(named), "{a:?}: {err}");
        assert!(!out.exists());
    }
}

#[test]
fn render_takes_the_arbor_as_arbor_or_layer() {
    let dir = tempfile::tempdir().unwrap();
    let w = testdata("pvp", "kernel_f32.pvp");
    let (a, b) = (dir.path().join("a.png"), dir.path().join("b.png"));
    let by_arbor = png_of(args!["render", w, a, "--arbor", "0"], &a);
    let by_layer = png_of(args!["render", w, b, "--layer", "0"], &b);
    assert_eq!(by_arbor, by_layer);
    let (code, out, _) = tf(["render", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--arbor"), "{out}");
}

#[test]
fn errors_name_their_file_once() {
    let dir = tempfile::tempdir().unwrap();
    // A deflated npz member larger than --max-alloc, converted to a kind that needs it whole.
    let npy = dir.path().join("big.npy");
    let t = tensorfmt::Tensor::zeros(tensorfmt::DType::F32, [1 << 20], tensorfmt::Order::RowMajor)
        .unwrap();
    tensorfmt::save(
        &npy,
        tensorfmt::Format::Npy,
        &[("big".into(), t)],
        &Default::default(),
    )
    .unwrap();
    let defl = dir.path().join("defl.npz");
    let (code, _, err) = tf(args!["convert", npy, defl, "--set", "compress=deflate"]);
    assert_eq!(code, 0, "{err}");
    let o = dir.path().join("o.bin");
    let (code, _, err) = tf(args![
        "convert",
        "--max-alloc",
        "64K",
        defl,
        o,
        "--to",
        "som-data"
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("exceeds the limit"), "{err}");
    assert!(err.contains(&format!("{}: ", defl.display())), "{err}");
    assert!(!o.exists());

    // som-map of a missing file: named once.
    let nope = dir.path().join("nope.bin");
    let som = testdata("som", "som_hex3.bin");
    let (code, _, err) = tf(args!["som-map", nope, som, dir.path().join("o.map")]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("nope.bin").count(), 1, "{err}");

    // A bad file in a collection: its line names it once.
    let bad = dir.path().join("bad.npy");
    std::fs::write(&bad, b"xx").unwrap();
    let good = testdata("core", "f32_2x3.npy");
    let missing = dir.path().join("missing.npy");
    for (a, name) in [
        (args!["validate", missing], "missing.npy"),
        (args!["inspect", bad, good], "bad.npy"),
        (
            args!["convert", bad, good, dir.path().join("out"), "--to", "npz"],
            "bad.npy",
        ),
    ] {
        let (code, out, err) = tf(&a);
        assert_eq!(code, 1, "{a:?}: {err}");
        let all = format!("{out}{err}");
        assert_eq!(all.matches(name).count(), 1, "{a:?}: {all}");
    }
    // JSON's `error` stands alone (the whole message), beside `file`.
    let (_, out, _) = tf(args!["inspect", "--json", bad, good]);
    let line = json(out.lines().find(|l| l.contains("error")).unwrap());
    assert!(
        line["error"].as_str().unwrap().contains("bad.npy"),
        "{line}"
    );

    // An unknown --kind is a usage error that lists the kinds.
    let (code, _, err) = tf(args![
        "inspect",
        "--kind",
        "bogus",
        testdata("caffe", "v2_tiny.caffemodel")
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown kind \"bogus\""), "{err}");
    for k in ["caffemodel", "solverstate", "som-data", "rotflip"] {
        assert!(err.contains(k), "{err}");
    }
    assert!(!err.contains("not a Caffe file"), "{err}");
    // The kinds the readers take are accepted.
    for k in [
        "caffemodel",
        "model",
        "binaryproto",
        "som",
        "som-data",
        "data",
        "mapping",
        "rotflip",
    ] {
        let (code, _, err) = tf(args!["inspect", "--kind", k, good]);
        assert_eq!(code, 0, "{k}: {err}");
    }
}

#[test]
fn render_errors_name_the_file() {
    // A sparse PVP whose frame is 24584 x 24584: the picture is refused, naming the file.
    let dir = tempfile::tempdir().unwrap();
    let pvp = dir.path().join("huge.pvp");
    let mut h: Vec<i32> = vec![
        80, 20, 6, 24584, 24584, 1, 1, 0, 8, 4, 1, 1, 24584, 24584, 0, 0, 1, 1,
    ];
    h.extend([0, 0]); // time as a double
    let mut bytes: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
    // One frame: time, count 0.
    bytes.extend(0f64.to_le_bytes());
    bytes.extend(0i32.to_le_bytes());
    std::fs::write(&pvp, &bytes).unwrap();
    let png = dir.path().join("x.png");
    let (code, _, err) = tf(args!["render", pvp, png]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("huge.pvp"), "{err}");
    assert_eq!(err.matches("huge.pvp").count(), 1, "{err}");
    assert!(!png.exists());
}

#[test]
fn dash_is_not_an_output_name() {
    let dir = tempfile::tempdir().unwrap();
    let npy = testdata("core", "f32_2x3.npy");
    let som = testdata("som", "som_hex3.bin");
    let data = testdata("som", "data_f32_2x3.bin");
    for a in [
        args!["convert", npy, "-", "--to", "npy"],
        args!["convert", npy, "-"],
        args!["render", som, "-"],
        args!["som-map", data, som, "-"],
    ] {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("tensorfmt");
        let o = cmd.args(&a).current_dir(dir.path()).output().unwrap();
        let (code, _, err) = common::check(&o);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains("\"-\""), "{a:?}: {err}");
        assert!(!dir.path().join("-").exists(), "{a:?}");
    }
}

#[test]
fn every_to_value_that_formats_lists_is_accepted() {
    let (code, out, _) = tf(["formats", "--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    let (_, help, _) = tf(["convert", "--help"]);
    assert!(help.contains("tensorfmt formats"), "{help}");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.npy");
    let mut seen = 0;
    for f in v["formats"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        assert!(help.contains(name), "--help lacks {name}: {help}");
        let kinds = f["write_kinds"].as_array().unwrap();
        let mut tos: Vec<&str> = kinds.iter().map(|k| k["to"].as_str().unwrap()).collect();
        tos.push(name);
        for to in tos {
            assert!(help.contains(to), "--help lacks {to}");
            // Past clap's parsing, the missing input is the only trouble.
            let (code, _, err) = tf(args!["convert", missing, dir.path().join("o"), "--to", to]);
            assert_eq!(code, 1, "--to {to}: {err}");
            assert!(err.contains("missing.npy"), "--to {to}: {err}");
            seen += 1;
        }
    }
    assert!(seen > 20, "{seen}");
}

/// The options of a subcommand, from its `--help`: each long name with its short one.
fn long_options(sub: &str) -> Vec<(String, Option<String>)> {
    let (code, out, _) = tf([sub, "--help"]);
    assert_eq!(code, 0);
    let mut found = Vec::new();
    for line in out.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        // The option itself, not its help text (clap puts two spaces between them).
        let t = t.split("  ").next().unwrap_or("");
        let mut short = None;
        for word in t.split([' ', ',', '=', '[', '<']) {
            if let Some(name) = word.strip_prefix("--") {
                if !name.is_empty() && !["help", "version"].contains(&name) {
                    found.push((format!("--{name}"), short.take()));
                }
            } else if word.len() == 2 && word.starts_with('-') {
                short = Some(word.to_string());
            }
        }
    }
    found
}

/// The lines of the first ``` block after `from` in `text`.
fn block_after<'a>(text: &'a str, from: &str) -> &'a str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not found"));
    let rest = &text[start..];
    let open = rest.find("```").unwrap();
    let body = &rest[open + 3..];
    let body = &body[body.find('\n').unwrap() + 1..];
    &body[..body.find("```").unwrap()]
}

#[test]
fn synopses_name_every_option() {
    let cli = repo_file("docs/cli.md");
    let cli_synopsis = block_after(&cli, "# The `tensorfmt` command");
    let readme = repo_file("README.md");
    let readme_synopsis = block_after(&readme, "## Command line");
    // The synopsis lines of one subcommand (its first line and the indented ones after).
    let lines_of = |synopsis: &str, sub: &str| -> String {
        let mut out = String::new();
        let mut inside = false;
        for l in synopsis.lines() {
            if l.starts_with("tensorfmt ") {
                inside = l.split_whitespace().nth(1) == Some(sub);
            }
            if inside {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    };
    // The README's lines leave the options every reading command shares to one line.
    let shared = ["--kind", "--strict", "--max-alloc"];
    for o in shared {
        assert!(
            readme_synopsis.contains(o),
            "README.md's synopsis lacks {o}"
        );
    }
    for sub in [
        "inspect", "convert", "validate", "diff", "render", "som-map", "formats",
    ] {
        let options = long_options(sub);
        for (name, synopsis) in [
            ("docs/cli.md", cli_synopsis),
            ("README.md", readme_synopsis),
        ] {
            let lines = lines_of(synopsis, sub);
            assert!(!lines.is_empty(), "{name}'s synopsis lacks {sub}");
            for (long, short) in &options {
                if name == "README.md" && shared.contains(&long.as_str()) {
                    continue;
                }
                let named = |o: &str| {
                    [" ", "]", "|", "\n"]
                        .iter()
                        .any(|end| lines.contains(&format!("{o}{end}")))
                };
                let known = named(long) || short.as_deref().is_some_and(named);
                assert!(
                    known,
                    "{name}: the synopsis of {sub} lacks {long}:\n{lines}"
                );
            }
        }
    }
    for sub in ["som-map", "completions"] {
        assert!(
            !lines_of(cli_synopsis, sub).is_empty(),
            "docs/cli.md lacks {sub}"
        );
        assert!(
            !lines_of(readme_synopsis, sub).is_empty(),
            "README lacks {sub}"
        );
    }
}

#[test]
fn docs_json_examples_show_every_documented_key() {
    let cli = repo_file("docs/cli.md");
    let diff = &cli[cli.find("## `diff`").unwrap()..];
    let json_example = &diff[diff.find("```json").unwrap()..];
    assert!(
        json_example.contains("\"header\""),
        "the diff JSON example lacks header"
    );
    let inspect = &cli[cli.find("## `inspect`").unwrap()..cli.find("## `convert`").unwrap()];
    assert!(
        inspect.contains("`onnx`"),
        "inspect's format list lacks onnx"
    );
    assert!(inspect.contains("`kind_id`"));
}

#[test]
fn errors_met_while_reading_data_name_the_file() {
    // A deflated npz whose member data is damaged: it opens (the zip directory is
    // intact) and fails when the data is read.
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("z.npy");
    let values: Vec<f32> = (0..100_000).map(|i| i as f32).collect();
    let t = tensorfmt::Tensor::from_vec(values, [100_000], tensorfmt::Order::RowMajor).unwrap();
    tensorfmt::save(
        &npy,
        tensorfmt::Format::Npy,
        &[("z".into(), t)],
        &Default::default(),
    )
    .unwrap();
    let good = dir.path().join("good.npz");
    let (code, _, err) = tf(args!["convert", npy, good, "--set", "compress=deflate"]);
    assert_eq!(code, 0, "{err}");
    let mut bytes = std::fs::read(&good).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let bad = dir.path().join("bad.npz");
    std::fs::write(&bad, &bytes).unwrap();
    for (a, want) in [
        (args!["diff", bad, good], 2),
        (args!["diff", good, bad], 2),
        (args!["inspect", "--stats", bad], 1),
        (args!["inspect", "--stats", "--json", bad, good], 1),
        (args!["convert", bad, dir.path().join("o.safetensors")], 1),
    ] {
        let (code, out, err) = tf(&a);
        assert_eq!(code, want, "{a:?}: {err}");
        let all = format!("{out}{err}");
        assert!(all.contains("bad.npz"), "{a:?}: {all}");
        assert!(!err.contains("bad.npz: bad.npz"), "{a:?}: {err}");
    }
}

#[test]
fn a_bad_setting_value_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.npz");
    let (code, _, err) = tf(args![
        "convert",
        testdata("core", "f32_2x3.npy"),
        out,
        "--set",
        "compress=lzma"
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--set compress=lzma") && err.contains("lzma"),
        "{err}"
    );
    assert!(!out.exists());
}
