//! Faster R-CNN and R-FCN (issue 30 item 2): the proposal layers (OpenCV's C++
//! `Proposal`, py-faster-rcnn's Python `ProposalLayer`), `ROIPooling`, `PSROIPooling`
//! on small nets: structure, the data-dependent RoI count (symbolic `R`, checked at
//! another count), the RPN overrides, and the bad inputs of item 7 (an error naming
//! the layer and the two numbers, nothing written). The numbers are checked in Python
//! (`crates/tensorfmt-py/tests/test_caffe_rcnn.py`).

mod common;

use std::collections::HashMap;

use common::{dims, ops};

use tensorfmt_caffe::{infer_shapes, parse_net, random_weights, Schema};
use tensorfmt_core::Tensor;
use tensorfmt_lower::{lower, LowerError, LowerOptions, Lowered, RpnOptions};

fn lower_text(text: &str, opts: &LowerOptions) -> Result<Lowered, LowerError> {
    let net = parse_net(text, Schema::builtin(), &Default::default()).map_err(LowerError::from)?;
    let shapes = infer_shapes(&net, &opts.input_shapes)?;
    let mut blobs: HashMap<String, Vec<Tensor>> =
        random_weights(&net, &shapes, 3).into_iter().collect();
    lower(&net, &mut blobs, opts)
}

fn outputs(l: &Lowered) -> Vec<(String, Vec<String>)> {
    l.model
        .graph
        .as_ref()
        .unwrap()
        .output
        .iter()
        .map(|v| (v.name.clone(), dims(v)))
        .collect()
}

const PY_PROPOSAL: &str = "type: 'Python' python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' param_str: \"'feat_stride': 16\" }";
const CPP_PROPOSAL: &str =
    "type: 'Proposal' proposal_param { ratio: 0.5 ratio: 1 ratio: 2 scale: 8 scale: 16 scale: 32 }";

/// A Faster R-CNN in miniature: a 16-stride feature map (4 x 5), the RPN head, the
/// proposal layer `proposal`, ROIPooling and two InnerProduct heads, then OpenCV's
/// post-processing reshapes (a DetectionOutput's inputs).
fn faster_rcnn(proposal: &str, tail: &str) -> String {
    format!(
        "input: 'data' input_shape {{ dim: 1 dim: 3 dim: 64 dim: 80 }}
input: 'im_info' input_shape {{ dim: 1 dim: 3 }}
layer {{ name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' convolution_param {{ num_output: 8 kernel_size: 16 stride: 16 }} }}
layer {{ name: 'rpn_cls_score' type: 'Convolution' bottom: 'conv' top: 'rpn_cls_score' convolution_param {{ num_output: 18 kernel_size: 1 }} }}
layer {{ name: 'rpn_bbox_pred' type: 'Convolution' bottom: 'conv' top: 'rpn_bbox_pred' convolution_param {{ num_output: 36 kernel_size: 1 }} }}
layer {{ name: 'rpn_cls_score_reshape' type: 'Reshape' bottom: 'rpn_cls_score' top: 'rpn_cls_score_reshape' reshape_param {{ shape {{ dim: 0 dim: 2 dim: -1 dim: 0 }} }} }}
layer {{ name: 'rpn_cls_prob' type: 'Softmax' bottom: 'rpn_cls_score_reshape' top: 'rpn_cls_prob' }}
layer {{ name: 'rpn_cls_prob_reshape' type: 'Reshape' bottom: 'rpn_cls_prob' top: 'rpn_cls_prob_reshape' reshape_param {{ shape {{ dim: 0 dim: 18 dim: -1 dim: 0 }} }} }}
layer {{ name: 'proposal' {proposal} bottom: 'rpn_cls_prob_reshape' bottom: 'rpn_bbox_pred' bottom: 'im_info' top: 'rois' }}
layer {{ name: 'roi_pool' type: 'ROIPooling' bottom: 'conv' bottom: 'rois' top: 'pool' roi_pooling_param {{ pooled_w: 2 pooled_h: 3 spatial_scale: 0.0625 }} }}
layer {{ name: 'fc' type: 'InnerProduct' bottom: 'pool' top: 'fc' inner_product_param {{ num_output: 10 }} }}
layer {{ name: 'relu' type: 'ReLU' bottom: 'fc' top: 'fc' }}
layer {{ name: 'cls_score' type: 'InnerProduct' bottom: 'fc' top: 'cls_score' inner_product_param {{ num_output: 3 }} }}
layer {{ name: 'bbox_pred' type: 'InnerProduct' bottom: 'fc' top: 'bbox_pred' inner_product_param {{ num_output: 12 }} }}
layer {{ name: 'cls_prob' type: 'Softmax' bottom: 'cls_score' top: 'cls_prob' }}
{tail}"
    )
}

const OPENCV_TAIL: &str = "
layer { name: 'cls_prob_reshape' type: 'Reshape' bottom: 'cls_prob' top: 'cls_prob_reshape' reshape_param { shape { dim: 1 dim: -1 } } }
layer { name: 'bbox_pred_reshape' type: 'Reshape' bottom: 'bbox_pred' top: 'bbox_pred_reshape' reshape_param { shape { dim: 1 dim: -1 } } }
layer { name: 'proposal_crop' type: 'Slice' bottom: 'rois' top: 'proposal_batch_ids' top: 'proposal_bboxes' slice_param { axis: 1 slice_point: 1 } }
layer { name: 'proposal_reshape' type: 'Reshape' bottom: 'proposal_bboxes' top: 'proposal_reshape' reshape_param { shape { dim: 1 dim: 1 dim: -1 } } }
layer { name: 'detection_out' type: 'DetectionOutput' bottom: 'bbox_pred_reshape' bottom: 'cls_prob_reshape' bottom: 'proposal_reshape' top: 'detection_out'
  detection_output_param { num_classes: 3 share_location: false background_label_id: 0 nms_param { nms_threshold: 0.3 } code_type: CENTER_SIZE keep_top_k: 100 variance_encoded_in_target: true normalized_bbox: false } }";

#[test]
fn python_proposal_layer_lowers_with_a_symbolic_roi_count() {
    let l = lower_text(&faster_rcnn(PY_PROPOSAL, ""), &Default::default()).unwrap();
    // The bound of Caffe's rule: 4 x 5 cells x 9 anchors = 180 > 300? no: min(300, 6000, 180).
    assert_eq!(l.shapes["rois"], vec![180, 5]);
    assert_eq!(l.shapes["cls_prob"], vec![180, 3]);
    assert_eq!(
        outputs(&l),
        [
            ("bbox_pred".to_string(), vec!["R".to_string(), "12".into()]),
            ("cls_prob".into(), vec!["R".into(), "3".into()])
        ]
    );
    let ops = ops(&l);
    for op in [
        "NonMaxSuppression",
        "TopK",
        "Compress",
        "MaxRoiPool",
        "Range",
    ] {
        assert!(ops.iter().any(|o| o == op), "{op} missing: {ops:?}");
    }
    // value_info never states the bound as a fixed size for RoI-dependent values.
    let g = l.model.graph.as_ref().unwrap();
    for v in &g.value_info {
        assert!(
            !dims(v).contains(&"180".to_string()),
            "{}: {:?}",
            v.name,
            dims(v)
        );
    }
    assert!(g
        .value_info
        .iter()
        .any(|v| v.name == "pool" && dims(v) == ["R", "8", "3", "2"]));
}

#[test]
fn opencv_proposal_and_its_post_processing_follow_the_roi_count() {
    // OpenCV's nets end in a DetectionOutput fed by [1, R*k] blobs: lowered, its rows
    // a run-time size of their own.
    let l = lower_text(&faster_rcnn(CPP_PROPOSAL, OPENCV_TAIL), &Default::default()).unwrap();
    let mut got = outputs(&l);
    got.sort();
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        [
            (
                "detection_out".to_string(),
                s(&["1", "1", "detections", "7"])
            ),
            // OpenCV's nets leave the batch ids unconsumed: an output too.
            ("proposal_batch_ids".into(), s(&["R", "1"])),
        ]
    );
    assert!(l.stopped.is_empty());
    assert!(ops(&l).iter().filter(|o| *o == "NonMaxSuppression").count() >= 2);
    let g = l.model.graph.as_ref().unwrap();
    let info = |name: &str| {
        g.value_info
            .iter()
            .find(|v| v.name == name)
            .map(dims)
            .unwrap_or_default()
    };
    assert_eq!(info("bbox_pred_reshape"), s(&["1", "R*12"]));
    assert_eq!(info("proposal_reshape"), s(&["1", "1", "R*4"]));
    // --stop-before DetectionOutput: its R-sized inputs are the outputs.
    let cut = LowerOptions {
        stop_before: vec!["DetectionOutput".into()],
        ..Default::default()
    };
    let l = lower_text(&faster_rcnn(CPP_PROPOSAL, OPENCV_TAIL), &cut).unwrap();
    let mut got = outputs(&l);
    got.sort();
    assert_eq!(
        got,
        [
            ("bbox_pred_reshape".to_string(), s(&["1", "R*12"])),
            ("cls_prob_reshape".into(), s(&["1", "R*3"])),
            ("proposal_batch_ids".into(), s(&["R", "1"])),
            ("proposal_reshape".into(), s(&["1", "1", "R*4"])),
        ]
    );
    assert_eq!(
        l.stopped,
        [("detection_out".to_string(), "DetectionOutput".to_string())]
    );
    // --outputs: the blobs issue 30 compares with OpenCV.
    let opts = LowerOptions {
        outputs: vec!["rois".into(), "cls_prob".into(), "bbox_pred".into()],
        ..Default::default()
    };
    let l = lower_text(&faster_rcnn(CPP_PROPOSAL, OPENCV_TAIL), &opts).unwrap();
    assert_eq!(outputs(&l)[0], ("rois".to_string(), s(&["R", "5"])));
}

#[test]
fn rpn_constants_are_overridable() {
    let find = |l: &Lowered, what: &str| -> Vec<u8> {
        let g = l.model.graph.as_ref().unwrap();
        g.initializer
            .iter()
            .find(|t| t.name.ends_with(what))
            .map(|t| t.raw_data.to_vec())
            .unwrap_or_default()
    };
    let text = faster_rcnn(PY_PROPOSAL, "");
    let default = lower_text(&text, &Default::default()).unwrap();
    assert_eq!(find(&default, "post_nms_top_n"), 300i64.to_le_bytes());
    assert_eq!(find(&default, "pre_nms_top_n"), 6000i64.to_le_bytes());
    let mut rpn = RpnOptions::default();
    rpn.set("post_nms_top_n", "50").unwrap();
    rpn.set("min_size", "0").unwrap();
    let l = lower_text(
        &text,
        &LowerOptions {
            rpn,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(find(&l, "post_nms_top_n"), 50i64.to_le_bytes());
    // min_size 0: no Compress.
    assert!(!ops(&l).iter().any(|o| o == "Compress"));
    // Overrides on a net without a proposal layer are a warning.
    let mut rpn = RpnOptions::default();
    rpn.set("nms_thresh", "0.5").unwrap();
    let l = lower_text(
        "input: 'x' input_shape { dim: 1 dim: 2 } layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' }",
        &LowerOptions { rpn, ..Default::default() },
    )
    .unwrap();
    assert!(
        l.warnings.iter().any(|w| w.contains("no proposal layer")),
        "{:?}",
        l.warnings
    );
}

#[test]
fn dynamic_batch_is_refused_with_the_reason() {
    let opts = LowerOptions {
        dynamic_batch: true,
        ..Default::default()
    };
    let e = lower_text(&faster_rcnn(PY_PROPOSAL, ""), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--dynamic-batch") && e.contains("batch of 1 image"),
        "{e}"
    );
}

fn psroi(channels: usize, rois: &str) -> String {
    format!(
        "input: 'x' input_shape {{ dim: 2 dim: {channels} dim: 10 dim: 12 }}
input: 'rois' input_shape {{ {rois} }}
layer {{ name: 'ps' type: 'PSROIPooling' bottom: 'x' bottom: 'rois' top: 'ps' psroi_pooling_param {{ spatial_scale: 0.0625 output_dim: 2 group_size: 3 }} }}
layer {{ name: 'ave' type: 'Pooling' bottom: 'ps' top: 'ave' pooling_param {{ pool: AVE kernel_size: 3 stride: 3 }} }}"
    )
}

#[test]
fn psroi_pooling_shapes_are_checked_by_onnx_rules() {
    let l = lower_text(&psroi(18, "dim: 7 dim: 5"), &Default::default()).unwrap();
    assert_eq!(l.shapes["ps"], vec![7, 2, 3, 3]);
    let g = l.model.graph.as_ref().unwrap();
    // Verified by ONNX's rules (Gather on the flattened integral image), so in value_info.
    assert!(g
        .value_info
        .iter()
        .any(|v| v.name == "ps" && dims(v) == ["7", "2", "3", "3"]));
    assert_eq!(ops(&l).iter().filter(|o| *o == "Gather").count(), 4);
    // RoIs as a graph input of [R, 5, 1, 1] (a 4-D blob) are read as rows too. A
    // dynamic batch is the first input's (the feature map's): the RoI count, another
    // input's first axis, does not change with it, so the output keeps its 7 rows.
    let opts = LowerOptions {
        dynamic_batch: true,
        ..Default::default()
    };
    let l = lower_text(&psroi(18, "dim: 7 dim: 5 dim: 1 dim: 1"), &opts).unwrap();
    assert_eq!(
        outputs(&l),
        [(
            "ave".to_string(),
            vec!["7".into(), "2".into(), "1".into(), "1".into()]
        )]
    );
    let g = l.model.graph.as_ref().unwrap();
    assert_eq!(dims(&g.input[0]), ["N", "18", "10", "12"]);
    assert_eq!(dims(&g.input[1]), ["7", "5", "1", "1"]);
}

/// Item 7: an error naming the layer and the two numbers; nothing written.
#[test]
fn bad_inputs_name_the_layer_and_both_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(String, &[&str])> = vec![
        // Proposal without im_info.
        (
            faster_rcnn(PY_PROPOSAL, "").replace("bottom: 'rpn_bbox_pred' bottom: 'im_info' top: 'rois'", "bottom: 'rpn_bbox_pred' top: 'rois'"),
            &["\"proposal\"", "3 bottoms", "got 2"],
        ),
        // ROIs of the wrong width.
        (psroi(18, "dim: 7 dim: 4"), &["\"ps\"", "4 values per RoI", "needs 5"]),
        (
            "input: 'x' input_shape { dim: 1 dim: 2 dim: 8 dim: 8 } input: 'r' input_shape { dim: 3 dim: 6 }
             layer { name: 'rp' type: 'ROIPooling' bottom: 'x' bottom: 'r' top: 'y' roi_pooling_param { pooled_h: 2 pooled_w: 2 } }".into(),
            &["\"rp\"", "6 values per RoI", "needs 5"],
        ),
        // PSROIPooling channels.
        (psroi(20, "dim: 7 dim: 5"), &["\"ps\"", "input channels 20", "output_dim 2 × group_size² 9"]),
        // param_str that is not a Python dict literal.
        (
            faster_rcnn(PY_PROPOSAL, "").replace("\"'feat_stride': 16\"", "\"feat_stride: scales\""),
            &["\"proposal\"", "not a Python dict literal"],
        ),
        // Scores and deltas channels that disagree.
        (
            faster_rcnn(PY_PROPOSAL, "").replace("num_output: 36", "num_output: 40"),
            &["\"proposal\"", "box deltas have 40 channels", "need 36"],
        ),
        (
            faster_rcnn(&CPP_PROPOSAL.replace("scale: 32", ""), ""),
            &["\"proposal\"", "scores have 18 channels", "6 anchors", "need 12"],
        ),
    ];
    for (text, want) in cases {
        let proto = dir.path().join("net.prototxt");
        std::fs::write(&proto, &text).unwrap();
        let model = dir.path().join("w.caffemodel");
        let out = dir.path().join("out.onnx");
        // Random weights for the layers Caffe's rules accept; a net they refuse has none,
        // and the error names the prototxt (as convert's does).
        if let Err(e) =
            tensorfmt_lower::write_random_weights(&proto, None, &model, 1, &[], &Default::default())
        {
            let e = e.to_string();
            assert!(e.contains(&proto.display().to_string()), "{e}");
        }
        if !model.exists() {
            tensorfmt_caffe::write_weights_model(
                &mut std::fs::File::create(&model).unwrap(),
                None,
                &[],
            )
            .unwrap();
        }
        let src = tensorfmt_lower::Sources {
            caffemodel: &model,
            prototxt: &proto,
            fork_proto: None,
        };
        let e = tensorfmt_lower::convert_files(src, &out, &Default::default(), &Default::default())
            .unwrap_err()
            .to_string();
        for w in want {
            assert!(e.contains(w), "{w:?} not in {e}");
        }
        assert!(!out.exists(), "{e}: something was written");
        std::fs::remove_file(&model).unwrap();
    }
}

#[test]
fn other_python_layers_are_listed_as_unsupported_with_module_and_layer() {
    let text = faster_rcnn(PY_PROPOSAL, "").replace(
        "module: 'rpn.proposal_layer' layer: 'ProposalLayer'",
        "module: 'roi_data_layer.layer' layer: 'RoIDataLayer'",
    );
    let net = parse_net(&text, Schema::builtin(), &Default::default()).unwrap();
    let mut no_blobs: HashMap<String, Vec<Tensor>> = HashMap::new();
    match lower(&net, &mut no_blobs, &Default::default()) {
        Err(LowerError::Unsupported { layers }) => {
            let s = layers.iter().map(|l| l.to_string()).collect::<Vec<_>>();
            assert_eq!(s, ["proposal (Python: roi_data_layer.layer.RoIDataLayer)"]);
        }
        r => panic!(
            "expected an unsupported-layer error, got {:?}",
            r.map(|l| l.outputs)
        ),
    }
}

/// The published Faster R-CNN and R-FCN nets parse and get Caffe's shapes (their
/// numbers are checked in Python against OpenCV 4 and py-faster-rcnn's code).
#[test]
fn published_nets_have_caffe_shapes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/nets");
    for (name, rois) in [
        ("py_faster_rcnn_zf_test", 300),
        ("py_faster_rcnn_vgg16_test", 300),
        ("opencv_faster_rcnn_zf", 300),
        ("opencv_faster_rcnn_vgg16", 300),
        ("py_rfcn_resnet50_test_agnostic", 300),
        ("opencv_rfcn_pascal_voc_resnet50", 300),
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.prototxt"))).unwrap();
        let net = parse_net(&text, Schema::builtin(), &Default::default()).unwrap();
        let shapes = infer_shapes(&net, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(shapes.blob("rois").unwrap(), [rois, 5], "{name}");
    }
}

/// Constants computed at conversion (anchors, PSROIPooling's channel offsets) are
/// bounded before they are computed: absurd counts are refused, not allocated.
#[test]
fn computed_constants_are_bounded() {
    let many: String = (1..=5000).map(|i| format!("scale: {i} ")).collect();
    let ratios: String = (1..=5000)
        .map(|i| format!("ratio: {} ", i as f32 / 100.0))
        .collect();
    let a = 5000 * 5000;
    let text = format!(
        "input: 'c' input_shape {{ dim: 1 dim: {} dim: 1 dim: 1 }} input: 'b' input_shape {{ dim: 1 dim: {} dim: 1 dim: 1 }}
         input: 'i' input_shape {{ dim: 1 dim: 3 }}
         layer {{ name: 'p' type: 'Proposal' bottom: 'c' bottom: 'b' bottom: 'i' top: 'rois' proposal_param {{ {many} {ratios} }} }}",
        2 * a,
        4 * a
    );
    let e = lower_text(&text, &Default::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"p\"") && e.contains("anchors would be a constant of 400000000 bytes"),
        "{e}"
    );
    let e = lower_text(
        "input: 'x' input_shape { dim: 1 dim: 40000000 dim: 1 dim: 1 } input: 'r' input_shape { dim: 1 dim: 5 }
         layer { name: 'ps' type: 'PSROIPooling' bottom: 'x' bottom: 'r' top: 'y' psroi_pooling_param { spatial_scale: 1 output_dim: 40000000 group_size: 1 } }",
        &Default::default(),
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("\"ps\"") && e.contains("channel offsets would be a constant"),
        "{e}"
    );
}
