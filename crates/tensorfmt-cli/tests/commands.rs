//! `formats`, `completions`, `render`, the `--help` examples, and `--quiet` / `--json`
//! / `--kind` / `--strict` on `inspect`, `convert` and `validate`.

mod common;

use common::{json, testdata, tf};

#[test]
fn formats_text_and_json() {
    let (code, out, err) = tf(["formats"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "npy ",
        "npz ",
        "safetensors ",
        "pvp ",
        "som ",
        "primitiv ",
        "caffe ",
        "(.caffemodel, .binaryproto, .blobprotovector, .solverstate)",
        "[--to pvp:sparse]",
        "[--to som-data]",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
    let (code, out, _) = tf(["formats", "--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    let formats = v["formats"].as_array().unwrap();
    let names: Vec<&str> = formats
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "npy",
            "npz",
            "safetensors",
            "pvp",
            "som",
            "primitiv",
            "onnx",
            "caffe"
        ]
    );
    for f in formats {
        assert_eq!(f["enabled"], true, "{f}");
        assert_eq!(f["reads"], true);
        assert_eq!(f["writes"], true);
        assert!(!f["extensions"].as_array().unwrap().is_empty());
        assert!(!f["description"].as_str().unwrap().is_empty());
        for k in f["write_kinds"].as_array().unwrap() {
            assert!(k["to"].is_string() && k["name"].is_string() && k["description"].is_string());
        }
        for k in f["read_kinds"].as_array().unwrap() {
            assert!(k.get("to").is_none());
        }
    }
    let caffe = &formats[7];
    assert_eq!(
        caffe["extensions"],
        serde_json::json!([
            "caffemodel",
            "binaryproto",
            "blobprotovector",
            "solverstate"
        ])
    );
    let kinds: Vec<&str> = caffe["write_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"caffemodel") && kinds.contains(&"binaryproto"));
}

#[test]
fn completions_for_every_shell() {
    for (shell, needle) in [
        ("bash", "_tensorfmt()"),
        ("zsh", "#compdef tensorfmt"),
        ("fish", "complete -c tensorfmt"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[tensorfmt]"),
    ] {
        let (code, out, err) = tf(["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            out.contains(needle),
            "{shell}: {}",
            &out[..out.len().min(300)]
        );
        // Subcommands are completed.
        assert!(out.contains("diff") && out.contains("convert"), "{shell}");
    }
    let (code, _, _) = tf(["completions", "tcsh"]);
    assert_eq!(code, 2);
    let (code, _, _) = tf(["completions"]);
    assert_eq!(code, 2);
}

#[test]
fn every_help_has_an_example() {
    for sub in [
        "inspect",
        "convert",
        "validate",
        "diff",
        "render",
        "formats",
        "completions",
    ] {
        for flag in ["--help", "-h"] {
            let (code, out, _) = tf([sub, flag]);
            assert_eq!(code, 0, "{sub}");
            assert!(
                out.contains("Example:") && out.contains(&format!("$ tensorfmt {sub}")),
                "{sub} {flag}:\n{out}"
            );
        }
    }
    let (_, out, _) = tf(["diff", "--help"]);
    assert!(
        out.contains("0 equal within tolerance, 1 different, 2 trouble"),
        "{out}"
    );
    let (_, out, _) = tf(["--help"]);
    assert!(out.contains("Exit codes:"), "{out}");
    for sub in ["diff", "formats", "completions", "render"] {
        assert!(out.contains(sub), "{out}");
    }
}

#[test]
fn convert_quiet_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("m.npz");
    let (code, out, err) = tf(args![
        "convert",
        "-q",
        testdata("core", "mixed.npz"),
        dir.path().join("w.npy")
    ]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "", ""),
        "no note either when quiet"
    );
    let (code, out, err) = tf(args![
        "convert",
        "--json",
        testdata("core", "model.safetensors"),
        out_path
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["format"], "npz");
    assert_eq!(v["kind"], serde_json::Value::Null);
    assert_eq!(
        v["tensors"],
        serde_json::json!(["layer.bias", "embed.weight", "mask"])
    );
    assert!(v["output"].as_str().unwrap().ends_with("m.npz"));
    assert!(v["input"].as_str().unwrap().ends_with("model.safetensors"));
    assert_eq!(v["bytes"], 3 * 4 + 4 * 2 + 2);
    let (code, out, _) = tf(args![
        "convert",
        "--json",
        testdata("caffe", "mean_legacy.binaryproto"),
        dir.path().join("mean.out"),
        "--to",
        "binaryproto"
    ]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["kind"], "binaryproto");
    // --json and --quiet together: usage error.
    let (code, _, _) = tf(args![
        "convert",
        "--json",
        "-q",
        testdata("core", "mixed.npz"),
        dir.path().join("x.npz")
    ]);
    assert_eq!(code, 2);
    // Overwrite refusal holds with --json too, and nothing is printed on stdout.
    let (code, out, err) = tf(args![
        "convert",
        "--json",
        testdata("core", "mixed.npz"),
        out_path
    ]);
    assert_eq!(code, 2);
    assert!(out.is_empty() && err.contains("--force"), "{err}");
}

#[test]
fn validate_quiet_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let good = testdata("core", "f32_2x3.npy");
    let bytes = std::fs::read(&good).unwrap();
    let bad = dir.path().join("cut.npy");
    std::fs::write(&bad, &bytes[..bytes.len() - 3]).unwrap();
    let missing = dir.path().join("missing.pvp");
    // Quiet: only failures.
    let (code, out, _) = tf(args![
        "validate",
        "-q",
        good,
        testdata("pvp", "dense_f32.pvp")
    ]);
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, out, _) = tf(args!["validate", "--quiet", good, bad]);
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 1);
    assert!(out.contains("cut.npy: error: "), "{out}");
    // JSON: one result per file, in order.
    let (code, out, _) = tf(args![
        "validate",
        "--json",
        good,
        bad,
        missing,
        testdata("caffe", "v2_tiny.caffemodel")
    ]);
    assert_eq!(code, 1);
    let v = json(&out);
    assert_eq!(v["ok"], false);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 4);
    assert_eq!(files[0]["ok"], true);
    assert_eq!(files[0]["format"], "npy");
    assert_eq!(files[0]["kind"], "array");
    assert_eq!(files[0]["error"], serde_json::Value::Null);
    assert_eq!(files[0]["warnings"], serde_json::json!([]));
    assert_eq!(files[1]["ok"], false);
    assert!(
        files[1]["error"]
            .as_str()
            .unwrap()
            .contains("npy: at byte 128"),
        "{}",
        files[1]
    );
    assert_eq!(files[1]["format"], serde_json::Value::Null);
    assert!(files[2]["error"].as_str().unwrap().contains("missing.pvp"));
    assert_eq!(files[3]["format"], "caffe");
    let (code, out, _) = tf(args!["validate", "--json", good]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["ok"], true);
}

#[test]
fn inspect_kind_and_strict() {
    // --kind reaches the Caffe reader: a kind hint that does not fit is an error.
    let model = testdata("caffe", "v2_tiny.caffemodel");
    let (code, out, err) = tf(args!["inspect", "--json", "--kind", "caffemodel", model]);
    assert_eq!(code, 0, "{err}");
    assert!(json(&out)["kind"].as_str().unwrap().starts_with("model"));
    // An unknown kind is a usage error, before the file is read.
    let (code, _, err) = tf(args!["inspect", "--kind", "nonsense", model]);
    assert_eq!(code, 2);
    assert!(err.contains("nonsense"), "{err}");
    // --strict: Caffe refuses nets with both `layer` and `layers`; so does strict mode.
    let mixed = testdata("caffe", "mixed_layers.caffemodel");
    let (code, _, err) = tf(args!["inspect", mixed]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = tf(args!["inspect", "--strict", mixed]);
    assert_eq!(code, 1, "{err}");
    let (code, _, _) = tf(args!["validate", "--strict", mixed]);
    assert_eq!(code, 1);
    // validate asks what the original accepts; --lenient only whether we read it.
    let (code, _, _) = tf(args!["validate", &mixed]);
    assert_eq!(code, 1);
    let (code, _, _) = tf(args!["validate", "--lenient", mixed]);
    assert_eq!(code, 0);
}

fn png_size(path: &std::path::Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
    let be = |o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn render_som_quiet_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("som.png");
    let (code, out, err) = tf(args!["render", testdata("som", "som_cart_3x2.bin"), png]);
    assert_eq!(code, 0, "{err}");
    let (w, h) = png_size(&png);
    assert_eq!(out, format!("{}: {w}x{h} PNG\n", png.display()));
    let png2 = dir.path().join("counts.png");
    let (code, out, _) = tf(args![
        "render",
        "-q",
        testdata("som", "map_cart_2x3.bin"),
        png2,
        "--counts"
    ]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(png2.exists());
    let png3 = dir.path().join("j.png");
    let (code, out, _) = tf(args![
        "render",
        "--json",
        testdata("som", "som_hex3.bin"),
        png3
    ]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(
        (
            v["width"].as_u64().unwrap() as u32,
            v["height"].as_u64().unwrap() as u32
        ),
        png_size(&png3)
    );
    assert!(v["file"].as_str().unwrap().ends_with("som_hex3.bin"));
    assert!(v["output"].as_str().unwrap().ends_with("j.png"));
    // Not renderable: 1, and no file.
    let bad = dir.path().join("bad.png");
    let (code, _, err) = tf(args!["render", testdata("core", "mixed.npz"), bad]);
    assert_eq!(code, 1);
    assert!(err.starts_with("tensorfmt: error: "), "{err}");
    assert!(!bad.exists());
}

#[test]
fn render_draws_a_legend_and_escapes_names() {
    let dir = tempfile::tempdir().unwrap();
    // A file name with ESC and a newline: the picture and the message stay whole.
    let evil = dir.path().join("m\u{1b}[31m\nx.binaryproto");
    std::fs::copy(testdata("caffe", "mean_legacy.binaryproto"), &evil).unwrap();
    let png = dir.path().join("p\nq.png");
    let (code, out, err) = tf(args!["render", &evil, &png]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out:?}");
    assert!(
        out.starts_with(&format!("{}", dir.path().join("p\\nq.png").display())),
        "{out:?}"
    );
    // 2x2 mean enlarged 8x = 48 px, plus the title band (36 px) above it; the canvas
    // is widened for the title.
    let (w, h) = png_size(&png);
    assert_eq!(h, 48 + 36, "{w}x{h}");
    assert!(w > 48 * 3, "{w}x{h}");
}

#[test]
fn render_pvp_weights_and_frames() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["kernel_f32.pvp", "nonshared_f32.pvp", "kernel_byte.pvp"] {
        let png = dir.path().join(format!("{f}.png"));
        let (code, _, err) = tf(args!["render", testdata("pvp", f), png]);
        assert_eq!(code, 0, "{f}: {err}");
        let (w, h) = png_size(&png);
        assert!(w > 0 && h > 0);
    }
    // Activity frames: each frame is its own picture; out of range is an error.
    let frame = |k: &str| {
        let png = dir.path().join(format!("frame{k}.png"));
        let r = tf(args![
            "render",
            testdata("pvp", "dense_f32.pvp"),
            png,
            "--frame",
            k
        ]);
        (r, png)
    };
    let ((code, _, err), f0) = frame("0");
    assert_eq!(code, 0, "{err}");
    let ((code, _, _), f1) = frame("1");
    assert_eq!(code, 0);
    // The fixture's frames differ by an offset only: per-frame scaling draws them
    // alike, and only the legend (frame, time, range) tells them apart.
    let bare = |k| {
        let o = tensorfmt::render::RenderOptions {
            frame: Some(k),
            ..Default::default()
        };
        tensorfmt::render::render_picture(&testdata("pvp", "dense_f32.pvp"), &o)
            .unwrap()
            .image
    };
    assert_eq!(bare(0), bare(1));
    assert_ne!(std::fs::read(&f0).unwrap(), std::fs::read(&f1).unwrap());
    // A file whose frame 1 is frame 0 reversed draws two different pictures.
    let ramp: Vec<f32> = (0..12)
        .map(|i| i as f32)
        .chain((0..12).rev().map(|i| i as f32))
        .collect();
    let values =
        tensorfmt::Tensor::from_vec(ramp, [2, 2, 3, 2], tensorfmt::Order::RowMajor).unwrap();
    let pvp = dir.path().join("two.pvp");
    tensorfmt::save(
        &pvp,
        tensorfmt::Format::Pvp,
        &[("values".into(), values)],
        &Default::default(),
    )
    .unwrap();
    let (a, b) = (dir.path().join("a.png"), dir.path().join("b.png"));
    assert_eq!(tf(args!["render", pvp, a, "--frame", "0"]).0, 0);
    assert_eq!(tf(args!["render", pvp, b, "--frame", "1"]).0, 0);
    assert_eq!(png_size(&a), png_size(&b));
    assert_ne!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "frames differ"
    );
    // A frame the file does not have is a usage error (as an unknown --tensor).
    let ((code, _, err), f99) = frame("99");
    assert_eq!(code, 2);
    assert!(err.contains("99"), "{err}");
    assert!(!f99.exists());
    let sparse = dir.path().join("sparse.png");
    assert_eq!(
        tf(args![
            "render",
            testdata("pvp", "sparse_values_dt4.pvp"),
            sparse,
            "--frame",
            "0"
        ])
        .0,
        0
    );
}

#[test]
fn render_caffe_filters() {
    let dir = tempfile::tempdir().unwrap();
    let model = testdata("caffe", "v2_tiny.caffemodel");
    let png = dir.path().join("conv1.png");
    let (code, out, err) = tf(args!["render", "--json", model, png, "--layer", "conv1"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(
        (
            v["width"].as_u64().unwrap() as u32,
            v["height"].as_u64().unwrap() as u32
        ),
        png_size(&png)
    );
    // Without --layer the error names the candidates (a usage error).
    let (code, _, err) = tf(args!["render", model, dir.path().join("x.png")]);
    assert_eq!(code, 2);
    assert!(err.contains("conv1"), "{err}");
    let (code, _, err) = tf(args![
        "render",
        model,
        dir.path().join("y.png"),
        "--layer",
        "nope"
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("nope") || err.contains("conv1"), "{err}");
    // A mean file renders as an image.
    let mean = dir.path().join("mean.png");
    assert_eq!(
        tf(args![
            "render",
            testdata("caffe", "mean_legacy.binaryproto"),
            mean
        ])
        .0,
        0
    );
}

/// Every key of a JSON value, recursively.
fn keys(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                keys(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

#[test]
fn docs_describe_every_json_field() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mixed = testdata("core", "mixed.npz");
    let outputs = [
        args![
            "inspect",
            "--json",
            "--stats",
            testdata("core", "f32_2x3.npy")
        ],
        args!["convert", "--json", mixed, dir.path().join("o.safetensors")],
        args!["validate", "--json", mixed],
        args![
            "diff",
            "--json",
            mixed,
            testdata("core", "model.safetensors")
        ],
        args!["diff", "--json", mixed, mixed],
        args![
            "render",
            "--json",
            testdata("som", "som_hex3.bin"),
            dir.path().join("r.png")
        ],
        args!["formats", "--json"],
    ];
    let mut all = std::collections::BTreeSet::new();
    for a in &outputs {
        let (code, out, err) = tf(a);
        assert!(code == 0 || (a[0] == "diff" && code == 1), "{a:?}: {err}");
        let mut k = std::collections::BTreeSet::new();
        // The raw header fields of `inspect` are the file's, not ours.
        let mut v = json(&out);
        if let Some(h) = v.get_mut("header") {
            *h = serde_json::json!({});
            k.insert("header".to_string());
        }
        keys(&v, &mut k);
        all.extend(k);
    }
    for k in &all {
        assert!(
            doc.contains(&format!("`{k}`")),
            "docs/cli.md does not describe the JSON field {k:?}"
        );
    }
    for sub in [
        "inspect",
        "convert",
        "validate",
        "diff",
        "render",
        "formats",
        "completions",
    ] {
        assert!(doc.contains(&format!("## `{sub}`")), "{sub}");
    }
}

#[test]
fn no_progress_bar_when_piped() {
    // 24 MiB: above the bar threshold, but stderr is a pipe here.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.npy");
    let t = tensorfmt::Tensor::zeros(tensorfmt::DType::F32, [6 << 20], tensorfmt::Order::RowMajor)
        .unwrap();
    tensorfmt::save(
        &big,
        tensorfmt::Format::Npy,
        &[("big".into(), t)],
        &Default::default(),
    )
    .unwrap();
    let st = dir.path().join("big.safetensors");
    for a in [
        args!["convert", big, st],
        args!["validate", big, st],
        args!["diff", big, st],
        args!["inspect", "--stats", big],
    ] {
        let (code, _, err) = tf(&a);
        assert_eq!((code, err.as_str()), (0, ""), "{a:?}");
    }
}

#[test]
fn converting_a_file_without_tensors_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = testdata("caffe", "mixed_layers.caffemodel");
    for out in ["empty.caffemodel", "empty.npy"] {
        let target = dir.path().join(out);
        let (code, _, err) = tf(["convert".as_ref(), source.as_os_str(), target.as_os_str()]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("holds no tensors"), "{err}");
        assert!(!target.exists());
    }
    // An npz carries the file's structure beside its (zero) tensors, so
    // the conversion is worth making: it gives the file back.
    let npz = dir.path().join("empty.npz");
    let back = dir.path().join("back.caffemodel");
    for a in [args!["convert", source, npz], args!["convert", npz, back]] {
        let (code, _, err) = tf(&a);
        assert_eq!(code, 0, "{a:?}: {err}");
    }
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(&source).unwrap()
    );
}

/// A legacy PINK file that fits two readings (v1 data `[3, 1, 2, 2]` or v1 mapping of
/// 3 entries over a 1x2x2 SOM: the same 64 bytes).
fn ambiguous_legacy_pink(path: &std::path::Path) {
    let mut b = Vec::new();
    for v in [3i32, 1, 2, 2] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for v in 0..12 {
        b.extend_from_slice(&(v as f32).to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// `render` and `som-map` could not read an ambiguous legacy PINK file: neither took
/// `--kind`, and render ignored the name's hint (`.map`) that inspect, validate and
/// convert use; the error said "name the kind", which the user could not do.
#[test]
fn render_and_som_map_read_ambiguous_legacy_pink_files() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("m.map");
    let bin = dir.path().join("m.bin");
    ambiguous_legacy_pink(&map);
    ambiguous_legacy_pink(&bin);
    let (code, out, err) = tf(args!["inspect", &map]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mapping"), "{out}");
    // The name's hint, as inspect takes it.
    let png = dir.path().join("a.png");
    let (code, _, err) = tf(args!["render", &map, &png]);
    assert_eq!(code, 0, "{err}");
    // Without a hint the error says how to name the kind, and --kind does.
    let (code, _, err) = tf(args!["render", &bin, dir.path().join("b.png")]);
    assert_eq!(code, 1);
    assert!(err.contains("--kind"), "{err}");
    let (code, _, err) = tf(args![
        "render",
        &bin,
        dir.path().join("b.png"),
        "--kind",
        "mapping"
    ]);
    assert_eq!(code, 0, "{err}");
    // --kind comes before the name, and picks what the options apply to.
    let (code, _, err) = tf(args![
        "render",
        &map,
        dir.path().join("c.png"),
        "--kind",
        "data",
        "--frame",
        "-1"
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = tf(args![
        "render",
        &map,
        dir.path().join("d.png"),
        "--kind",
        "data",
        "--counts"
    ]);
    assert_eq!(code, 2, "--counts is for mappings: {err}");
    // som-map reads its DATA argument as a data file and SOM as a SOM.
    let som = testdata("som", "som_cart_3x2.bin");
    let (code, out, err) = tf(args![
        "som-map",
        &bin,
        &som,
        dir.path().join("o.map"),
        "-n",
        "1",
        "--json"
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["entries"], 3);
    let (code, _, err) = tf(args![
        "som-map",
        &map,
        &som,
        dir.path().join("p.map"),
        "-n",
        "1"
    ]);
    assert_eq!(code, 0, "the DATA role outranks the name: {err}");
}

/// `--frames A:B` is read as a Python slice (as docs/cli.md says, and as Python's
/// `frames=slice(A, B)`): negative positions count from the end, and an end before the
/// start is empty (a file of no frames, as Python writes), not a usage error.
#[test]
fn frames_are_python_slices() {
    let dir = tempfile::tempdir().unwrap();
    let pvp = testdata("pvp", "dense_f32.pvp"); // 3 frames
    let frames = |range: &str| -> Vec<usize> {
        let out = dir.path().join(format!("f{}.npz", range.replace(':', "_")));
        let (code, _, err) = tf(args!["convert", &pvp, &out, "--frames", range]);
        assert_eq!(code, 0, "{range}: {err}");
        let doc = tensorfmt::Document::open(&out).unwrap();
        let dims = doc.entry("values").unwrap().shape().dims().to_vec();
        dims
    };
    assert_eq!(frames("-1:")[0], 1);
    assert_eq!(frames(":-1")[0], 2);
    assert_eq!(frames("-2:-1")[0], 1);
    assert_eq!(frames("-9:")[0], 3);
    assert_eq!(frames("1:-9")[0], 0);
    assert_eq!(frames("2:1")[0], 0);
    assert_eq!(frames("0:100")[0], 3);
    // The frames chosen are the last ones.
    let last = dir.path().join("last.npz");
    assert_eq!(tf(args!["convert", &pvp, &last, "--frames", "-1:"]).0, 0);
    let time = |p: &std::path::Path| {
        let doc = tensorfmt::Document::open(p).unwrap();
        let t = doc.entry("time").unwrap().read().unwrap();
        t.to_vec::<f64>().unwrap()
    };
    assert_eq!(time(&last), [time(&pvp)[2]]);
    // Not a number, or a file without frames: refused as before.
    let (code, _, err) = tf(args![
        "convert",
        &pvp,
        dir.path().join("x.npz"),
        "--frames",
        "a:"
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = tf(args![
        "convert",
        testdata("core", "f32_2x3.npy"),
        dir.path().join("y.npz"),
        "--frames",
        "-1:"
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("frame"), "{err}");
}

/// The success line counted the tensors given, not those written: a lone array
/// converted to PVP said "wrote 1 tensor" while the file holds `values` and `time`.
#[test]
fn the_wrote_line_counts_the_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("v.npy");
    let t = tensorfmt::Tensor::from_vec(vec![0f32; 12], [2, 2, 3, 1], tensorfmt::Order::RowMajor)
        .unwrap();
    tensorfmt::save(
        &npy,
        tensorfmt::Format::Npy,
        &[("v".into(), t)],
        &Default::default(),
    )
    .unwrap();
    let pvp = dir.path().join("v.pvp");
    let (code, out, err) = tf(args!["convert", &npy, &pvp]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrote 2 tensors as pvp"), "{out}");
    assert!(out.contains("values") && out.contains("time"), "{out}");
    let (code, out, _) = tf(args!["convert", &npy, dir.path().join("w.pvp"), "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["written"].as_array().unwrap().len(), 2);
}

/// Argument problems of `render` are usage errors (exit 2), as an out-of-range
/// `--frame` already was: a Caffe model without `--layer`, an unknown layer, an
/// `--arbor` (or `--layer N`) the weight file does not have.
#[test]
fn render_argument_problems_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("x.png");
    let model = testdata("caffe", "v2_tiny.caffemodel");
    let kernel = testdata("pvp", "kernel_f32.pvp");
    for (args, needle) in [
        (args!["render", &model, &png], "conv1"),
        (args!["render", &model, &png, "--layer", "nope"], "conv1"),
        (args!["render", &model, &png, "--layer", "ip"], "conv1"),
        (args!["render", &kernel, &png, "--arbor", "5"], "arbor 5"),
        (args!["render", &kernel, &png, "--layer", "5"], "arbor 5"),
        (args!["render", &kernel, &png, "--layer", "conv1"], "arbor"),
    ] {
        let (code, _, err) = tf(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!png.exists());
    }
    assert_eq!(tf(args!["render", &kernel, &png, "--arbor", "0"]).0, 0);
}

/// Converting onto an existing directory said "use --force to overwrite it", and with
/// --force failed renaming over it. A directory is never an output: said so, exit 2,
/// with or without --force (render and som-map likewise).
#[test]
fn an_output_that_is_a_directory_is_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let dd = dir.path().join("dd");
    std::fs::create_dir(&dd).unwrap();
    let pvp = testdata("pvp", "dense_f32.pvp");
    for force in [false, true] {
        let mut a = args!["convert", &pvp, &dd, "--to", "npz"];
        if force {
            a.push("--force".into());
        }
        let (code, _, err) = tf(&a);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("is a directory"), "{err}");
        assert!(!err.contains("--force"), "{err}");
    }
    let png = dir.path().join("p.png");
    std::fs::create_dir(&png).unwrap();
    let (code, _, err) = tf(args!["render", &pvp, &png, "--force"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a directory"), "{err}");
    assert!(dd.is_dir() && png.is_dir());
}
