//! `tensorfmt convert MODEL.caffemodel OUT.onnx --prototxt DEPLOY.prototxt`: text and
//! JSON output (every key documented in docs/cli.md), options, and failures that leave
//! nothing behind.

mod common;

use common::{json, tf};
use tensorfmt::testing::corpus_dir;

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
    let again = |extra: &[&str]| {
        let mut a: Vec<std::ffi::OsString> = vec![
            "convert".into(),
            model.clone().into_os_string(),
            out.clone().into_os_string(),
            "--prototxt".into(),
            prototxt.clone().into_os_string(),
        ];
        a.extend(extra.iter().map(|s| s.into()));
        tf(a)
    };
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
