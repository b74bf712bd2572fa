//! `tensorfmt convert ... --prototxt` of a Faster R-CNN proposal layer: the symbolic
//! RoI count in the printed shapes, `--rpn KEY=VALUE`, and its usage errors.

mod common;

use common::tf;

/// py-faster-rcnn's proposal layer on its own (no weights needed).
const NET: &str = "input: 'cls' input_shape { dim: 1 dim: 18 dim: 4 dim: 5 }
input: 'bbox' input_shape { dim: 1 dim: 36 dim: 4 dim: 5 }
input: 'im_info' input_shape { dim: 1 dim: 3 }
layer { name: 'proposal' type: 'Python' bottom: 'cls' bottom: 'bbox' bottom: 'im_info' top: 'rois'
  python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' param_str: \"'feat_stride': 16\" } }";

#[test]
fn proposal_net_converts_with_rpn_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let proto = dir.path().join("p.prototxt");
    std::fs::write(&proto, NET).unwrap();
    // A caffemodel without layers: NetParameter { name: "p" }.
    let model = dir.path().join("p.caffemodel");
    std::fs::write(&model, [0x0a, 0x01, b'p']).unwrap();
    let out = dir.path().join("p.onnx");
    let arg = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let base = [
        "convert".to_string(),
        arg(&model),
        arg(&out),
        "--prototxt".into(),
        arg(&proto),
    ];
    let with = |extra: &[&str]| {
        let mut a: Vec<String> = base.to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let (code, text, err) = tf(with(&[
        "--rpn",
        "post_nms_top_n=50",
        "--rpn",
        "TEST.RPN_NMS_THRESH=0.6",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("outputs rois[R,5]"), "{text}");
    assert!(out.exists());
    std::fs::remove_file(&out).unwrap();
    for (bad, why) in [
        ("scales=4", "unknown RPN constant"),
        ("nms_thresh=2", "not a number in [0, 1]"),
        ("post_nms_top_n", "expected KEY=VALUE"),
    ] {
        let (code, _, err) = tf(with(&["--rpn", bad]));
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains(why), "{bad}: {err}");
        assert!(!out.exists());
    }
}
