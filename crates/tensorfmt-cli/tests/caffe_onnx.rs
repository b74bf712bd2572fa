//! `tensorfmt convert MODEL.caffemodel OUT.onnx --prototxt DEPLOY.prototxt`: text and
//! JSON output (every key documented in docs/cli.md), options, and failures that leave
//! nothing behind.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::{json, tf};
use tensorfmt::testing::corpus_dir;

/// `tensorfmt convert MODEL OUT --prototxt PROTOTXT EXTRA...`: exit code, stdout, stderr.
fn convert_net<S: AsRef<OsStr>>(
    model: &Path,
    out: &Path,
    prototxt: &Path,
    extra: &[S],
) -> (i32, String, String) {
    let mut a: Vec<&OsStr> = vec![
        "convert".as_ref(),
        model.as_os_str(),
        out.as_os_str(),
        "--prototxt".as_ref(),
        prototxt.as_os_str(),
    ];
    a.extend(extra.iter().map(AsRef::as_ref));
    tf(a)
}

#[test]
fn caffe_nets_convert_to_onnx_from_the_command_line() {
    let Some(c) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = c.join("v2_lenet_iter_10000.caffemodel");
    let prototxt = c.join("nets/mnist_lenet.prototxt");
    let out = dir.path().join("lenet.onnx");
    let (code, text, err) = tf([
        "convert".into(),
        model.clone().into_os_string(),
        out.clone().into_os_string(),
        "--prototxt".into(),
        prototxt.clone().into_os_string(),
        "--dynamic-batch".into(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("inputs data[N,1,28,28]; outputs prob[N,10]"),
        "{text}"
    );
    // Refused without --force; JSON with --force and --outputs.
    let again = |extra: &[&str]| convert_net(&model, &out, &prototxt, extra);
    assert_eq!(again(&[]).0, 2);
    let (code, text, err) = again(&[
        "--force",
        "--json",
        "--outputs",
        "ip1,prob",
        "--input-shape",
        "data=2,1,28,28",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&text);
    assert_eq!(
        v["outputs"],
        serde_json::json!(["ip1[2,500]", "prob[2,10]"])
    );
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    for k in v.as_object().unwrap().keys() {
        assert!(
            doc.contains(&format!("`{k}`")),
            "docs/cli.md does not describe {k:?}"
        );
    }
    // An unknown input name is an error and leaves the old file alone.
    let before = std::fs::read(&out).unwrap();
    assert_eq!(again(&["--force", "--input-shape", "nope=1,1,28,28"]).0, 1);
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // The ONNX file inspects as its initializers.
    let (code, text, _) = tf(["inspect".into(), out.into_os_string()]);
    assert_eq!(code, 0);
    assert!(text.contains("conv1/weight"), "{text}");
}

/// The Caffe → ONNX path keeps the promises of every other conversion: a FIFO given as
/// the caffemodel, the prototxt or a fork schema is refused at once (it used to hang),
/// no input is ever the output (compared by identity, not by path text), an existing
/// output (a dangling link included) needs --force, and names from the files are
/// escaped in text output.
#[test]
fn caffe_to_onnx_refuses_special_files_and_never_overwrites_an_input() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let net = "input: 'data' input_shape { dim: 1 dim: 2 dim: 4 dim: 4 }\n\
         layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c'\n\
                 convolution_param { num_output: 2 kernel_size: 3 } }\n";
    // The weights also hold a layer the net lacks, named with an escape sequence: the
    // warning that names it must not reach the terminal raw.
    let weights_net = d.join("weights.prototxt");
    std::fs::write(
        &weights_net,
        format!(
            "{net}layer {{ name: 'x\\033[31m' type: 'Convolution' bottom: 'data' top: 'x'\n\
                 convolution_param {{ num_output: 1 kernel_size: 1 }} }}\n"
        ),
    )
    .unwrap();
    let prototxt = d.join("net.prototxt");
    std::fs::write(&prototxt, net).unwrap();
    let model = d.join("w.caffemodel");
    tensorfmt_lower::write_random_weights(&weights_net, None, &model, 1, &[], &Default::default())
        .unwrap();
    let convert = |model: &Path, prototxt: &Path, out: &Path, extra: &[&str]| {
        convert_net(model, out, prototxt, extra)
    };
    let fifo = d.join("fifo.prototxt");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = d.join("out.onnx");
    let t = std::time::Instant::now();
    for (m, p, extra) in [
        (&model, &fifo, vec![]),
        (&fifo, &prototxt, vec![]),
        (&model, &prototxt, vec!["--proto", fifo.to_str().unwrap()]),
    ] {
        let (code, _, err) = convert(m, p, &out, &extra);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("not a regular file (a FIFO)"), "{err}");
        assert!(!out.exists());
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
    // The output is the prototxt or the caffemodel under another name: refused, even
    // with --force, and the input is untouched.
    let model_bytes = std::fs::read(&model).unwrap();
    let link = d.join("link.onnx");
    std::os::unix::fs::symlink(&model, &link).unwrap();
    let (code, _, err) = convert(&model, &prototxt, &link, &["--force"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("an input is never overwritten"), "{err}");
    assert_eq!(std::fs::read(&model).unwrap(), model_bytes);
    let plink = d.join("p.onnx");
    std::os::unix::fs::symlink(&prototxt, &plink).unwrap();
    let (code, _, err) = convert(&model, &prototxt, &plink, &["--force"]);
    assert_eq!(code, 2, "{err}");
    // A dangling link at the output needs --force.
    let dangling = d.join("dangling.onnx");
    std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
    let (code, _, err) = convert(&model, &prototxt, &dangling, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("exists; use --force"), "{err}");
    // Converted: no raw escape byte reaches the terminal.
    let (code, text, err) = convert(&model, &prototxt, &out, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !text.contains('\u{1b}') && !err.contains('\u{1b}'),
        "{text}{err}"
    );
    assert!(err.contains("x\\u{1b}[31m (Convolution)"), "{err}");
    assert!(text.contains("outputs c[1,2,2,2]"), "{text}");
}

/// A fork's fields the builtin schema lacks need its schema: without `--proto` the error
/// names the field, the line and the option. Built-in fork fields (ShuffleNet's) convert
/// without it, and still with the fork's published snippet. A net with layers no
/// lowering handles fails listing every one of them (type and parameters), exit 1, and
/// writes nothing.
#[test]
fn fork_schemas_and_unsupported_layers_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = "input: 'data' input_shape { dim: 1 dim: 6 dim: 4 dim: 4 }\n";
    let convert = |net: &str, extra: &[&std::ffi::OsStr]| {
        let prototxt = d.join("net.prototxt");
        std::fs::write(&prototxt, format!("{input}{net}")).unwrap();
        let model = d.join("w.caffemodel");
        let out = d.join("net.onnx");
        let _ = std::fs::remove_file(&out);
        // An empty caffemodel: none of these layers has weights.
        std::fs::write(&model, b"").unwrap();
        let r = convert_net(&model, &out, &prototxt, extra);
        (r, out.exists())
    };
    // SegNet's training data layer: a fork field that is not built in.
    let dense = "layer { name: 'd' type: 'DenseImageData' top: 'd' dense_image_data_param { source: 'x' } }\n";
    let ((code, _, err), written) = convert(dense, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("dense_image_data_param") && err.contains("line 2") && err.contains("--proto"),
        "{err}"
    );
    assert!(!written);
    let shuffle = "layer { name: 's' type: 'ShuffleChannel' bottom: 'data' top: 's' shuffle_channel_param { group: 3 } }\n";
    let ((code, text, err), written) = convert(shuffle, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(written && text.contains("outputs s[1,6,4,4]"), "{text}");
    if let Some(c) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") {
        let snippet = c.join("nets/forks/farmingyard_ShuffleNet_caffe.proto.snippet");
        let ((code, text, err), written) =
            convert(shuffle, &["--proto".as_ref(), snippet.as_os_str()]);
        assert_eq!(code, 0, "{err}");
        assert!(written && text.contains("outputs s[1,6,4,4]"), "{text}");
    }
    let unsupported = "layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { pool: STOCHASTIC kernel_size: 2 } }\n\
                       layer { name: 't' type: 'Tile' bottom: 'data' top: 't' tile_param { tiles: 2 } }\n";
    let ((code, _, err), written) = convert(unsupported, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "2 unsupported layer(s): p (Pooling: STOCHASTIC pooling is not lowered), t (Tile)"
        ) && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!written);
}

/// SSD's DetectionOutput converts (a run-time row count in the output's shape), and
/// `--stop-before` keeps the graph before it: its inputs become the outputs, the cut
/// layer is named in text and JSON, and a name that matches no layer is an error that
/// writes nothing.
#[test]
fn detection_output_and_stop_before_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prototxt = d.join("ssd.prototxt");
    std::fs::write(
        &prototxt,
        "input: 'loc' input_shape { dim: 1 dim: 40 }\n\
         input: 'conf' input_shape { dim: 1 dim: 30 }\n\
         input: 'prior' input_shape { dim: 1 dim: 2 dim: 40 }\n\
         layer { name: 'sm' type: 'Sigmoid' bottom: 'conf' top: 'score' }\n\
         layer { name: 'det' type: 'DetectionOutput' bottom: 'loc' bottom: 'score' bottom: 'prior' top: 'det'\n\
           detection_output_param { num_classes: 3 nms_param { nms_threshold: 0.45 top_k: 5 } keep_top_k: 4 code_type: CENTER_SIZE } }\n",
    )
    .unwrap();
    let model = d.join("w.caffemodel");
    std::fs::write(&model, b"").unwrap(); // no layer has weights
    let out = d.join("ssd.onnx");
    let (code, text, err) = convert_net(&model, &out, &prototxt, &["--dynamic-batch"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("outputs det[1,1,detections,7]\n"), "{text}");
    assert!(!text.contains("stops before"), "{text}");
    let (code, text, err) = convert_net(
        &model,
        &out,
        &prototxt,
        &["--force", "--stop-before", "DetectionOutput"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("outputs loc[1,40] score[1,30] prior[1,2,40]")
            && text.contains("the graph stops before det (DetectionOutput)"),
        "{text}"
    );
    let (code, text, err) = convert_net(
        &model,
        &out,
        &prototxt,
        &["--force", "--json", "--stop-before", "det"],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&text);
    assert_eq!(
        v["stopped_before"],
        serde_json::json!(["det (DetectionOutput)"])
    );
    // A layer before: it and everything reading what it computes are cut.
    let (code, text, err) = convert_net(
        &model,
        &out,
        &prototxt,
        &["--force", "--json", "--stop-before", "Sigmoid"],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&text);
    assert_eq!(
        v["stopped_before"],
        serde_json::json!(["sm (Sigmoid)", "det (DetectionOutput)"])
    );
    assert_eq!(
        v["outputs"],
        serde_json::json!(["conf[1,30]", "loc[1,40]", "prior[1,2,40]"])
    );
    let before = std::fs::read(&out).unwrap();
    let (code, _, err) = convert_net(
        &model,
        &out,
        &prototxt,
        &["--force", "--stop-before", "Nope"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("stop before \"Nope\": no layer of the net has that name or type"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

/// Issue 34 §6: every error names the file it comes from: a truncated caffemodel was
/// reported under the prototxt's path (`net.prototxt: NetParameter at byte 6:
/// truncated ...`); the net's own problems stay under the prototxt. `--input-shape`
/// given twice for one input is refused naming it (it was "(a lowering bug)").
#[test]
fn errors_name_the_file_they_come_from() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prototxt = d.join("net.prototxt");
    std::fs::write(
        &prototxt,
        "input: 'data' input_shape { dim: 1 dim: 2 dim: 4 dim: 4 }\n\
         layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c'\n\
                 convolution_param { num_output: 2 kernel_size: 3 } }\n",
    )
    .unwrap();
    let model = d.join("w.caffemodel");
    tensorfmt_lower::write_random_weights(&prototxt, None, &model, 1, &[], &Default::default())
        .unwrap();
    let bytes = std::fs::read(&model).unwrap();
    let cut = d.join("cut.caffemodel");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let out = d.join("out.onnx");
    let (code, _, err) = convert_net(&cut, &out, &prototxt, &[] as &[&str]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cut.caffemodel: ") && err.contains("truncated"),
        "{err}"
    );
    assert!(!err.contains("net.prototxt"), "{err}");
    assert!(!out.exists());
    let (code, _, err) = convert_net(
        &model,
        &out,
        &prototxt,
        &[
            "--input-shape",
            "data=1,2,4,4",
            "--input-shape",
            "data=2,2,4,4",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "net.prototxt: --input-shape gives input \"data\" twice (1,2,4,4 and 2,2,4,4)"
        ),
        "{err}"
    );
    assert!(!out.exists());
    // A prototxt syntax error: the prototxt, once.
    let bad = d.join("bad.prototxt");
    std::fs::write(&bad, "layer {").unwrap();
    let (code, _, err) = convert_net(&model, &out, &bad, &[] as &[&str]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("bad.prototxt").count(), 1, "{err}");
}

/// The conversion flags that mean nothing for a net (`--dtype`, `--frames`, `--sparse`,
/// `--like`, a `--set` other than `external_data`, ...) are refused with `--prototxt`,
/// not silently dropped; `--set external_data=true` puts the weights in `OUT.onnx.data`.
#[test]
fn caffe_to_onnx_refuses_flags_it_would_ignore_and_writes_external_data() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let prototxt = root.join("testdata/nets/lenet_tiny.prototxt");
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("w.caffemodel");
    tensorfmt_lower::write_random_weights(&prototxt, None, &model, 3, &[], &Default::default())
        .unwrap();
    let out = dir.path().join("net.onnx");
    for extra in [
        &["--dtype", "f16"][..],
        &["--frames", "0:1"],
        &["--hex"],
        &["--sparse"],
        &["--dense"],
        &["--tensor", "conv1/0"],
        &["--like", "x.onnx"],
        &["--to", "npz"],
        &["--from", "pvp"],
        &["--kind", "binaryproto"],
        &["--set", "compress=deflate"],
        &["--set", "foo=bar"],
        &["--set", "external_data=maybe"],
    ] {
        let (code, _, err) = convert_net(&model, &out, &prototxt, extra);
        assert_eq!(code, 2, "{extra:?} was accepted: {err}");
        assert!(
            err.contains(extra[0].trim_start_matches("--")) || err.contains("external_data"),
            "{extra:?}: {err}"
        );
        assert!(!out.exists(), "{extra:?} wrote a file");
    }
    let (code, _, err) = convert_net(
        &model,
        &out,
        &prototxt,
        &[
            "--set",
            "external_data=true",
            "--to",
            "onnx",
            "--from",
            "caffe",
            "--kind",
            "caffemodel",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let data = dir.path().join("net.onnx.data");
    assert!(data.is_file());
    let (code, text, err) = tf(["inspect".into(), out.into_os_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("net.onnx.data"), "{text}");
}

/// `OUT.onnx.data` is an output like `OUT.onnx`: an existing one is replaced only with
/// `--force`, and an input given that name is never replaced (it was destroyed: the
/// caffemodel, or the tensors of a plain conversion).
#[test]
fn the_data_file_beside_a_model_is_an_output() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let prototxt = root.join("testdata/nets/lenet_tiny.prototxt");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The caffemodel named as the output's data file.
    let model = d.join("l.onnx.data");
    tensorfmt_lower::write_random_weights(&prototxt, None, &model, 3, &[], &Default::default())
        .unwrap();
    let before = std::fs::read(&model).unwrap();
    let out = d.join("l.onnx");
    for force in [false, true] {
        let mut extra = vec!["--set", "external_data=true"];
        if force {
            extra.push("--force");
        }
        let (code, _, err) = convert_net(&model, &out, &prototxt, &extra);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("never overwritten") || err.contains("--force"),
            "{err}"
        );
        assert_eq!(std::fs::read(&model).unwrap(), before);
        assert!(!out.exists());
    }
    // A plain conversion whose input is the output's data file.
    let st = d.join("q.onnx.data");
    tensorfmt::save(
        &st,
        tensorfmt::Format::Safetensors,
        &[(
            "w".to_string(),
            tensorfmt::Tensor::from_vec(vec![1f32; 512], [512], tensorfmt::Order::RowMajor)
                .unwrap(),
        )],
        &Default::default(),
    )
    .unwrap();
    let before = std::fs::read(&st).unwrap();
    let q = d.join("q.onnx");
    let (code, _, err) = tf([
        "convert".as_ref(),
        st.as_os_str(),
        q.as_os_str(),
        "--from".as_ref(),
        "safetensors".as_ref(),
        "--set".as_ref(),
        "external_data=true".as_ref(),
        "--force".as_ref(),
    ] as [&OsStr; 8]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read(&st).unwrap(), before);
    // An unrelated existing data file: --force replaces it, not its absence.
    let other = d.join("w.caffemodel");
    std::fs::copy(&model, &other).unwrap();
    let b = d.join("b.onnx");
    std::fs::write(d.join("b.onnx.data"), b"precious").unwrap();
    let (code, _, err) = convert_net(&other, &b, &prototxt, &["--set", "external_data=true"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read(d.join("b.onnx.data")).unwrap(), b"precious");
    let (code, _, err) = convert_net(
        &other,
        &b,
        &prototxt,
        &["--set", "external_data=true", "--force"],
    );
    assert_eq!(code, 0, "{err}");
    assert_ne!(std::fs::read(d.join("b.onnx.data")).unwrap(), b"precious");
}

/// A directory walk takes an ONNX model's `m.onnx.data` as part of the model, not as a
/// primitiv file of its own (which failed every `-r` run over converted models).
#[test]
fn directory_walks_leave_a_models_data_file_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("models");
    std::fs::create_dir(&d).unwrap();
    let mut o = tensorfmt::WriteOptions::default();
    o.set("external_data", "true").unwrap();
    let t =
        tensorfmt::Tensor::from_vec(vec![1f32; 512], [512], tensorfmt::Order::RowMajor).unwrap();
    tensorfmt::save(
        &d.join("m.onnx"),
        tensorfmt::Format::Onnx,
        &[("w".to_string(), t)],
        &o,
    )
    .unwrap();
    assert!(d.join("m.onnx.data").is_file());
    let (code, text, err) = tf(["validate".as_ref(), "-r".as_ref(), d.as_os_str()] as [&OsStr; 3]);
    assert_eq!(code, 0, "{text}{err}");
    assert_eq!(text.lines().count(), 1, "{text}");
}
