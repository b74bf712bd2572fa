//! SSD's DetectionOutput, PriorBox's OpenCV forms, PriorBoxClustered and `stop_before`:
//! the emitted structure and shapes, and the bad inputs of issue 30 item 7 (an error
//! naming the layer and both numbers). The numbers themselves are checked in Python
//! against weiliu89's layer in numpy and OpenCV 4 (`tests/test_caffe_detection.py`).

mod common;

use std::collections::HashMap;

use common::output_dims;

use tensorfmt_caffe::{parse_net, Schema};
use tensorfmt_core::{Order, Tensor};
use tensorfmt_lower::{lower, LowerError, LowerOptions, Lowered};

fn net(text: &str, opts: &LowerOptions) -> Result<Lowered, LowerError> {
    net_with(text, HashMap::new(), opts)
}

fn net_with(
    text: &str,
    mut blobs: HashMap<String, Vec<Tensor>>,
    opts: &LowerOptions,
) -> Result<Lowered, LowerError> {
    let net = parse_net(text, Schema::builtin(), &Default::default()).unwrap();
    lower(&net, &mut blobs, opts)
}

fn ops(l: &Lowered) -> Vec<&str> {
    let g = l.model.graph.as_ref().unwrap();
    g.node.iter().map(|n| n.op_type.as_str()).collect()
}

fn det_net(loc: usize, conf: usize, prior: &[usize], params: &str) -> String {
    let dims = |d: &[usize]| {
        d.iter()
            .map(|x| format!("dim: {x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "input: 'loc' input_shape {{ dim: 2 dim: {loc} }}\n\
         input: 'conf' input_shape {{ dim: 2 dim: {conf} }}\n\
         input: 'prior' input_shape {{ {} }}\n\
         layer {{ name: 'det' type: 'DetectionOutput' bottom: 'loc' bottom: 'conf' bottom: 'prior' top: 'det'\n\
           detection_output_param {{ num_classes: 3 {params} }} }}\n",
        dims(prior)
    )
}

const PARAMS: &str = "nms_param { nms_threshold: 0.45 top_k: 4 } keep_top_k: 5 code_type: CENTER_SIZE confidence_threshold: 0.1";

#[test]
fn detection_output_is_nonmaxsuppression_with_a_runtime_row_count() {
    for dynamic_batch in [false, true] {
        let l = net(
            &det_net(40, 30, &[1, 2, 40], PARAMS),
            &LowerOptions {
                dynamic_batch,
                ..Default::default()
            },
        )
        .unwrap();
        let ops = ops(&l);
        for op in [
            "NonMaxSuppression",
            "TopK",
            "ScatterND",
            "GatherND",
            "Compress",
        ] {
            assert!(ops.contains(&op), "{op} missing: {ops:?}");
        }
        assert_eq!(ops.iter().filter(|&&o| o == "NonMaxSuppression").count(), 1);
        assert_eq!(l.outputs, ["det"]);
        assert!(l.stopped.is_empty());
        // Caffe's shape is the bound; the ONNX output leaves the row count symbolic.
        assert_eq!(l.shapes["det"], vec![1, 1, 5, 7]);
        assert_eq!(output_dims(&l, 0), ["1", "1", "detections", "7"]);
        let g = l.model.graph.as_ref().unwrap();
        assert!(g.value_info.iter().all(|v| v.name != "det"));
        let meta: Vec<&str> = l
            .model
            .metadata_props
            .iter()
            .map(|p| p.key.as_str())
            .collect();
        assert!(!meta.contains(&"tensorfmt.stopped_before"));
    }
    // No pre-NMS top_k below the priors, no keep_top_k: neither TopK.
    let l = net(
        &det_net(
            40,
            30,
            &[1, 2, 40],
            "nms_param { nms_threshold: 0.45 top_k: 10 }",
        ),
        &Default::default(),
    )
    .unwrap();
    assert!(!ops(&l).contains(&"TopK"), "{:?}", ops(&l));
    assert_eq!(l.shapes["det"], vec![1, 1, 1, 7]);
}

fn err(text: &str) -> String {
    net(text, &Default::default()).unwrap_err().to_string()
}

#[test]
fn counts_that_disagree_name_the_layer_and_both_numbers() {
    // 10 priors: loc needs 40 per image, conf 30.
    let e = err(&det_net(44, 30, &[1, 2, 40], PARAMS));
    assert!(
        e.contains("\"det\" (DetectionOutput)")
            && e.contains("the location bottom has 44 values per image, the priors need 40 (10 priors x 4 coordinates, shared locations)"),
        "{e}"
    );
    let e = err(&det_net(40, 31, &[1, 2, 40], PARAMS));
    assert!(
        e.contains("the confidence bottom has 31 values per image, the priors need 30 (10 priors x 3 classes)"),
        "{e}"
    );
    let e = err(&det_net(40, 30, &[1, 2, 42], PARAMS));
    assert!(e.contains("the prior bottom has shape [1, 2, 42]"), "{e}");
    // Caffe reads the prior's axis 2: trailing axes of 1 keep the layout (OpenCV's VGG16
    // Faster R-CNN reshapes its proposals to [1, 1, R*4, 1]); any other is refused.
    net(
        &det_net(40, 30, &[1, 2, 40, 1], PARAMS),
        &LowerOptions::default(),
    )
    .unwrap();
    let e = err(&det_net(40, 30, &[1, 2, 20, 2], PARAMS));
    assert!(
        e.contains("the prior bottom has shape [1, 2, 20, 2]"),
        "{e}"
    );
    // Locations per class (share_location false): 10 x 3 x 4.
    let e = err(&det_net(40, 30, &[1, 2, 40], "share_location: false"));
    assert!(
        e.contains("the priors need 120 (10 priors x 3 classes x 4 coordinates)"),
        "{e}"
    );
    let e = err(&det_net(40, 30, &[1, 2, 40], "").replace("num_classes: 3", ""));
    assert!(e.contains("must specify num_classes"), "{e}");
    // A 1-channel prior only with the variances in the target.
    let e = err(&det_net(40, 30, &[1, 1, 40], PARAMS));
    assert!(
        e.contains("1 channel(s): 2 (boxes, variances) expected"),
        "{e}"
    );
    net(
        &det_net(
            40,
            30,
            &[1, 1, 40],
            &format!("{PARAMS} variance_encoded_in_target: true"),
        ),
        &Default::default(),
    )
    .unwrap();
}

#[test]
fn a_keep_top_k_beyond_what_the_net_can_keep_is_legal() {
    // Caffe sizes DetectionOutput's top at the forward: keep_top_k 2^31 - 1 is legal and
    // keeps at most priors x classes rows (10 x 3 here).
    let l = net(
        &det_net(
            40,
            30,
            &[1, 2, 40],
            "nms_param { nms_threshold: 0.45 } keep_top_k: 2147483647",
        ),
        &Default::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(ops(&l).contains(&"NonMaxSuppression"));
}

#[test]
fn what_caffe_refuses_or_onnx_cannot_express_is_refused() {
    // eta < 1 (adaptive NMS): listed as not lowered, with the reason.
    match net(
        &det_net(
            40,
            30,
            &[1, 2, 40],
            "nms_param { nms_threshold: 0.45 eta: 0.5 }",
        ),
        &Default::default(),
    ) {
        Err(LowerError::Unsupported { layers }) => {
            assert_eq!(layers.len(), 1);
            assert!(layers[0]
                .reason
                .as_deref()
                .unwrap()
                .contains("nms_param.eta 0.5"));
        }
        other => panic!("{other:?}"),
    }
    let e = err(&det_net(40, 30, &[1, 2, 40], "nms_param { eta: 1.5 }"));
    assert!(e.contains("eta 1.5 must be in (0, 1]"), "{e}");
    let e = err(&det_net(
        40,
        30,
        &[1, 2, 40],
        "nms_param { nms_threshold: -0.1 }",
    ));
    assert!(e.contains("must be non negative"), "{e}");
    let e = err(&det_net(40, 30, &[1, 2, 40], "background_label_id: -1"));
    assert!(e.contains("background_label_id -1"), "{e}");
    // Pixel clip needs the image as a fourth bottom.
    let e = err(&det_net(
        40,
        30,
        &[1, 2, 40],
        "clip: true normalized_bbox: false",
    ));
    assert!(e.contains("4th bottom"), "{e}");
}

const PRIORS: &str = "input: 'x' input_shape { dim: 1 dim: 4 dim: 3 dim: 5 }\n\
                      input: 'img' input_shape { dim: 1 dim: 3 dim: 30 dim: 40 }\n";

fn priors(kind: &str, params: &str) -> Result<Vec<f32>, LowerError> {
    let l = net(
        &format!("{PRIORS}layer {{ name: 'm' type: '{kind}' bottom: 'x' bottom: 'img' top: 'm' prior_box_param {{ {params} }} }}"),
        &Default::default(),
    )?;
    let g = l.model.graph.as_ref().unwrap();
    let t =
        tensorfmt_onnx::tensor_from_proto(&g.initializer[0], "m", 0, &Default::default()).unwrap();
    Ok(t.to_vec::<f32>().unwrap())
}

#[test]
fn prior_box_opencv_forms_and_prior_box_clustered() {
    // Explicit sizes: 2 per cell, 15 cells, boxes then variances.
    let v = priors(
        "PriorBox",
        "width: 10 width: 4 height: 6 height: 8 clip: false",
    )
    .unwrap();
    assert_eq!(v.len(), 2 * 15 * 2 * 4);
    // Cell (0, 0), centre (4, 5) (step 40/5, 30/3): the 10 x 6 box.
    assert_eq!(&v[..4], &[-1.0 / 40.0, 2.0 / 30.0, 9.0 / 40.0, 8.0 / 30.0]);
    // Offset lists: each size at each offset pair.
    let v = priors(
        "PriorBox",
        "width: 10 height: 6 clip: false offset_h: 0.25 offset_h: 0.75 offset_w: 0.5 offset_w: 0.5",
    )
    .unwrap();
    assert_eq!(v.len(), 2 * 15 * 2 * 4);
    assert_eq!(v[1], (0.25 * 10.0 - 3.0) / 30.0);
    assert_eq!(v[5], (0.75 * 10.0 - 3.0) / 30.0);
    // An unset clip: false for PriorBox (weiliu89), true for PriorBoxClustered (OpenCV).
    let p = priors("PriorBox", "width: 10 height: 6").unwrap();
    let c = priors("PriorBoxClustered", "width: 10 height: 6").unwrap();
    assert!(p[0] < 0.0 && c[0] == 0.0);
    assert_eq!(
        priors("PriorBoxClustered", "width: 10 height: 6 clip: false").unwrap(),
        p
    );
    // What OpenCV refuses, and three offset pairs (OpenCV's output is inconsistent).
    let e = priors("PriorBox", "width: 10 height: 6 min_size: 4")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("explicit width/height together with min_size"),
        "{e}"
    );
    let e = priors("PriorBox", "width: 10 width: 3 height: 6")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("width and height must be given the same number of times"),
        "{e}"
    );
    let e = priors(
        "PriorBox",
        "width: 10 height: 6 offset_h: 0.1 offset_h: 0.2 offset_h: 0.3 offset_w: 0.1 offset_w: 0.2 offset_w: 0.3",
    )
    .unwrap_err();
    assert!(
        matches!(&e, LowerError::Unsupported { layers } if layers[0].reason.as_deref().unwrap().contains("3 offset_h/offset_w pairs")),
        "{e}"
    );
    let e = priors(
        "PriorBox",
        "width: 10 height: 6 offset_h: 0.1 offset_w: 0.1 offset_w: 0.2",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("1 offset_h but 2 offset_w"), "{e}");
}

const CHAIN: &str = "input: 'data' input_shape { dim: 1 dim: 2 dim: 6 dim: 6 }\n\
    layer { name: 'c1' type: 'Convolution' bottom: 'data' top: 'c1' convolution_param { num_output: 3 kernel_size: 3 } }\n\
    layer { name: 'r1' type: 'ReLU' bottom: 'c1' top: 'c1' }\n\
    layer { name: 'p' type: 'Pooling' bottom: 'c1' top: 'p' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n\
    layer { name: 'c2' type: 'Convolution' bottom: 'p' top: 'c2' convolution_param { num_output: 4 kernel_size: 1 } }\n\
    layer { name: 'side' type: 'Sigmoid' bottom: 'data' top: 'side' }\n\
    layer { name: 'cat' type: 'Concat' bottom: 'c2' bottom: 'p' top: 'cat' }\n";

fn chain_blobs() -> HashMap<String, Vec<Tensor>> {
    let t = |d: &[usize]| {
        Tensor::from_vec(
            vec![0.5f32; d.iter().product()],
            d.to_vec(),
            Order::RowMajor,
        )
        .unwrap()
    };
    HashMap::from([
        ("c1".to_string(), vec![t(&[3, 2, 3, 3]), t(&[3])]),
        ("c2".to_string(), vec![t(&[4, 3, 1, 1]), t(&[4])]),
    ])
}

fn stop(names: &[&str]) -> LowerOptions {
    LowerOptions {
        stop_before: names.iter().map(|s| s.to_string()).collect(),
        strict: true, // the cut layers' blobs are not "unused"
        ..Default::default()
    }
}

#[test]
fn stop_before_cuts_the_layers_named_and_what_reads_them() {
    let l = net_with(CHAIN, chain_blobs(), &stop(&["c2"])).unwrap();
    // The net's outputs the rest still computes, then what the cut part reads.
    assert_eq!(l.outputs, ["side", "p"]);
    assert_eq!(
        l.stopped,
        [
            ("c2".to_string(), "Convolution".to_string()),
            ("cat".to_string(), "Concat".to_string())
        ]
    );
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    let meta: HashMap<&str, &str> = l
        .model
        .metadata_props
        .iter()
        .map(|p| (p.key.as_str(), p.value.as_str()))
        .collect();
    assert_eq!(
        meta["tensorfmt.stopped_before"],
        "c2 (Convolution), cat (Concat)"
    );
    // By type, an in-place layer: the convolution's own values are the output.
    let l = net_with(CHAIN, chain_blobs(), &stop(&["ReLU"])).unwrap();
    assert_eq!(l.outputs, ["side", "c1"]);
    assert_eq!(ops(&l), ["Conv", "Sigmoid"]);
    // Several at once; a name matching nothing is an error.
    let l = net_with(CHAIN, chain_blobs(), &stop(&["side", "cat"])).unwrap();
    assert_eq!(l.outputs, ["data", "c2", "p"]);
    let e = net_with(CHAIN, chain_blobs(), &stop(&["nope"])).unwrap_err();
    assert!(
        e.to_string()
            .contains("stop before \"nope\": no layer of the net has that name or type"),
        "{e}"
    );
    // A tail that does not convert (a type nothing knows) is cut before it is needed.
    let odd = format!("{CHAIN}layer {{ name: 'odd' type: 'Mystery' bottom: 'cat' top: 'odd' }}\n");
    assert!(matches!(
        net_with(&odd, chain_blobs(), &LowerOptions::default()),
        Err(LowerError::Unsupported { .. })
    ));
    let l = net_with(&odd, chain_blobs(), &stop(&["Mystery"])).unwrap();
    assert_eq!(l.outputs, ["side", "cat"]);
    // Without the option nothing is cut.
    let l = net_with(CHAIN, chain_blobs(), &LowerOptions::default()).unwrap();
    assert_eq!(l.outputs, ["side", "cat"]);
    assert!(l.stopped.is_empty());
}

#[test]
fn stop_before_detection_output_keeps_its_inputs() {
    let text = det_net(40, 30, &[1, 2, 40], PARAMS);
    let l = net(&text, &stop(&["DetectionOutput"])).unwrap();
    assert_eq!(l.outputs, ["loc", "conf", "prior"]);
    assert!(!ops(&l).contains(&"NonMaxSuppression"));
    assert_eq!(
        l.stopped,
        [("det".to_string(), "DetectionOutput".to_string())]
    );
    assert!(tensorfmt_lower::supported_layers().contains(&"DetectionOutput"));
    assert!(tensorfmt_lower::supported_layers().contains(&"PriorBoxClustered"));
}

#[test]
fn no_constant_grows_with_num_classes() {
    // Two billion classes on one prior: Caffe's counts agree, and the graph stays small
    // (the background mask is made at run time).
    let text = "input: 'loc' input_shape { dim: 1 dim: 4 }\n\
                input: 'conf' input_shape { dim: 1 dim: 2000000000 }\n\
                input: 'prior' input_shape { dim: 1 dim: 2 dim: 4 }\n\
                layer { name: 'det' type: 'DetectionOutput' bottom: 'loc' bottom: 'conf' bottom: 'prior' top: 'det'\n\
                  detection_output_param { num_classes: 2000000000 keep_top_k: 10 nms_param { top_k: 5 } } }\n";
    let t = std::time::Instant::now();
    let l = net(text, &Default::default()).unwrap();
    let mut bytes = Vec::new();
    tensorfmt_onnx::write_model(&mut bytes, &l.model).unwrap();
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    assert!(t.elapsed().as_secs() < 5);
}

/// Each size known only at run time (a DetectionOutput's rows) is checked in one pass
/// over the graph for all of them, not a pass per size: 160 layers cost about four
/// times 40 (400 took 14.7 s before, quadratic).
#[test]
fn run_time_sizes_cost_linear_time() {
    let time = |n: usize| {
        let mut text = String::from(
            "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }
layer { name: 'loc' type: 'Input' top: 'loc' input_param { shape { dim: 1 dim: 64 } } }
layer { name: 'conf' type: 'Input' top: 'conf' input_param { shape { dim: 1 dim: 48 } } }
layer { name: 'pb' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'p' prior_box_param { min_size: 4 } }
",
        );
        for i in 0..n {
            text += &format!("layer {{ name: 'd{i}' type: 'DetectionOutput' bottom: 'loc' bottom: 'conf' bottom: 'p' top: 'y{i}' detection_output_param {{ num_classes: 3 keep_top_k: 10 }} }}\n");
        }
        let start = std::time::Instant::now();
        let l = net(&text, &LowerOptions::default()).unwrap();
        assert_eq!(l.outputs.len(), n);
        start.elapsed().as_secs_f64()
    };
    let (small, big) = (time(40), time(160));
    assert!(
        big < 8.0 * small.max(0.05) + 1.0,
        "40 layers {small:.3}s, 160 layers {big:.3}s"
    );
}
