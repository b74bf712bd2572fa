//! Fork schemas built in: every fork field family parses without `--proto` and reaches
//! the typed parameters; field names that collide on one number both parse; a
//! caffemodel's contested numbers decode by the fork its layers point to (or are an
//! error saying it cannot tell); genuinely unknown fields are still errors.

use std::path::{Path, PathBuf};

use tensorfmt_caffe::forks::FORK_FIELDS;
use tensorfmt_caffe::{
    layer_params, parse_net, read_model, CaffeError, LayerDef, NetDef, ParamMessage, ParamValue,
    Schema,
};

fn parse(text: &str) -> NetDef {
    parse_net(text, Schema::builtin(), &Default::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn layer<'a>(net: &'a NetDef, kind: &str) -> &'a LayerDef {
    net.layers
        .iter()
        .find(|l| l.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} layer"))
}

fn nets_dir() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe").map(|d| d.join("nets"))
}

#[test]
fn ssd_fields_parse_without_a_fork_schema() {
    // weiliu89's training and deploy fields, including DetectionOutput's visualize,
    // visualize_threshold and save_file (the face detector of issue 30 used them).
    let net = parse(
        r#"name: "ssd"
layer { name: "data" type: "AnnotatedData" top: "data" top: "label"
  include { phase: TEST }
  transform_param { mean_value: 104 mean_value: 117 mean_value: 123
    resize_param { prob: 1 resize_mode: WARP height: 300 width: 300 interp_mode: LINEAR }
    emit_constraint { emit_type: CENTER } crop_h: 300 crop_w: 300
    distort_param { brightness_prob: 0.5 brightness_delta: 32 }
    expand_param { prob: 0.5 max_expand_ratio: 4 }
    noise_param { prob: 0 saltpepper_param { fraction: 0 } } }
  data_param { source: "lmdb" batch_size: 1 backend: LMDB }
  annotated_data_param { batch_sampler { sampler { min_scale: 0.3 max_scale: 1 }
      sample_constraint { min_jaccard_overlap: 0.1 } max_sample: 1 max_trials: 50 }
    label_map_file: "labelmap.prototxt" anno_type: BBOX } }
layer { name: "p" type: "Permute" bottom: "data" top: "p" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "n" type: "Normalize" bottom: "data" top: "n"
  norm_param { across_spatial: false scale_filler { type: "constant" value: 20 } channel_shared: false } }
layer { name: "pb" type: "PriorBox" bottom: "n" bottom: "data" top: "pb"
  prior_box_param { min_size: 30 max_size: 60 aspect_ratio: 2 flip: true clip: false
    variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 step: 8 offset: 0.5 } }
layer { name: "loss" type: "MultiBoxLoss" bottom: "p" bottom: "label" top: "loss"
  include { phase: TEST }
  multibox_loss_param { loc_loss_type: SMOOTH_L1 conf_loss_type: SOFTMAX loc_weight: 1
    num_classes: 21 share_location: true match_type: PER_PREDICTION overlap_threshold: 0.5
    use_prior_for_matching: true background_label_id: 0 use_difficult_gt: true
    neg_pos_ratio: 3 neg_overlap: 0.5 code_type: CENTER_SIZE ignore_cross_boundary_bbox: false
    mining_type: MAX_NEGATIVE } }
layer { name: "det" type: "DetectionOutput" bottom: "p" bottom: "n" bottom: "pb" top: "det"
  detection_output_param { num_classes: 2 share_location: true background_label_id: 0
    nms_param { nms_threshold: 0.45 top_k: 400 }
    save_output_param { output_directory: "out" output_name_prefix: "comp4_det_test_"
      output_format: "VOC" label_map_file: "labelmap.prototxt"
      name_size_file: "test_name_size.txt" num_test_image: 4952
      resize_param { prob: 1 resize_mode: WARP height: 300 width: 300 } }
    code_type: CENTER_SIZE keep_top_k: 200 confidence_threshold: 0.01
    visualize: true visualize_threshold: 0.6 save_file: "dets.txt" } }
layer { name: "eval" type: "DetectionEvaluate" bottom: "det" bottom: "label" top: "eval"
  detection_evaluate_param { num_classes: 21 background_label_id: 0 overlap_threshold: 0.5
    evaluate_difficult_gt: false name_size_file: "test_name_size.txt" } }
layer { name: "video" type: "VideoData" top: "frame" include { phase: TRAIN }
  video_data_param { video_type: WEBCAM device_id: 0 } }
"#,
    );
    let det = layer(&net, "DetectionOutput")
        .param
        .detection_output_param
        .clone()
        .unwrap();
    assert_eq!(
        (
            det.visualize(),
            det.visualize_threshold(),
            det.save_file(),
            det.normalized_bbox()
        ),
        (true, 0.6, "dets.txt", true)
    );
    assert_eq!(
        det.save_output_param
            .unwrap()
            .resize_param
            .unwrap()
            .height(),
        300
    );
    let loss = layer(&net, "MultiBoxLoss")
        .param
        .multibox_loss_param
        .unwrap();
    assert_eq!((loss.num_classes(), loss.neg_pos_ratio()), (21, 3.0));
    assert!(!layer(&net, "Normalize")
        .param
        .norm_param
        .clone()
        .unwrap()
        .across_spatial());
    let t = net.transform.as_ref().unwrap();
    assert_eq!(t.mean_values, [104.0, 117.0, 123.0]);
}

#[test]
fn opencv_fields_parse_and_both_names_of_detection_output_field_10_parse() {
    // OpenCV's normalized_bbox and clip next to weiliu89's visualize (field 10 in both
    // forks): names, not numbers, in a prototxt.
    let net = parse(
        r#"input: "rpn" input_shape { dim: 1 dim: 18 dim: 14 dim: 14 }
layer { name: "proposal" type: "Proposal" bottom: "rpn" top: "rois"
  proposal_param { feat_stride: 16 base_size: 16 min_size: 16 ratio: 0.5 ratio: 1 ratio: 2
    scale: 8 scale: 16 scale: 32 pre_nms_topn: 6000 post_nms_topn: 300 nms_thresh: 0.7 } }
layer { name: "ps" type: "PSROIPooling" bottom: "rpn" bottom: "rois" top: "ps"
  psroi_pooling_param { spatial_scale: 0.0625 output_dim: 21 group_size: 7 } }
layer { name: "pb" type: "PriorBox" bottom: "rpn" bottom: "rpn" top: "pb"
  prior_box_param { width: 10 width: 20 height: 10 height: 20 offset_h: 0.25 offset_w: 0.5 clip: true } }
layer { name: "pool" type: "Pooling" bottom: "rpn" top: "pool" pooling_param { kernel_size: 2 ceil_mode: false } }
layer { name: "det" type: "DetectionOutput" bottom: "rpn" bottom: "rpn" bottom: "pb" top: "det"
  detection_output_param { num_classes: 21 normalized_bbox: false clip: true visualize: false } }
"#,
    );
    let det = layer(&net, "DetectionOutput")
        .param
        .detection_output_param
        .clone()
        .unwrap();
    assert_eq!(
        (det.normalized_bbox(), det.clip(), det.visualize),
        (false, true, Some(false))
    );
    let prop = layer(&net, "Proposal")
        .param
        .proposal_param
        .clone()
        .unwrap();
    assert_eq!(
        (
            prop.feat_stride(),
            prop.ratio.len(),
            prop.scale.len(),
            prop.post_nms_topn(),
            prop.nms_thresh()
        ),
        (16, 3, 3, 300, 0.7)
    );
    let ps = layer(&net, "PSROIPooling")
        .param
        .psroi_pooling_param
        .unwrap();
    assert_eq!((ps.output_dim(), ps.group_size()), (21, 7));
    let pb = layer(&net, "PriorBox")
        .param
        .prior_box_param
        .clone()
        .unwrap();
    assert_eq!(
        (pb.width.len(), pb.offset_h, pb.offset_w),
        (2, vec![0.25], vec![0.5])
    );
    assert!(!layer(&net, "Pooling")
        .param
        .pooling_param
        .unwrap()
        .ceil_mode());
    // Defaults where the prototxt is silent (the lowering reads these).
    let p = tensorfmt_caffe::proto::ProposalParameter::default();
    assert_eq!((p.pre_nms_topn(), p.min_size()), (6000, 16));
    let d = tensorfmt_caffe::proto::DetectionOutputParameter::default();
    assert_eq!(
        (d.normalized_bbox(), d.clip(), d.visualize()),
        (true, false, false)
    );
}

#[test]
fn faster_rcnn_rfcn_deeplab_shufflenet_yolo_and_bvlc_fields_parse() {
    let net = parse(
        r#"input: "data" input_shape { dim: 1 dim: 8 dim: 16 dim: 16 }
input: "im_info" input_shape { dim: 1 dim: 3 }
layer { name: "proposal" type: "Python" bottom: "data" bottom: "im_info" top: "rois"
  python_param { module: "rpn.proposal_layer" layer: "ProposalLayer" param_str: "'feat_stride': 16" } }
layer { name: "roi_pool5" type: "ROIPooling" bottom: "data" bottom: "rois" top: "pool5"
  roi_pooling_param { pooled_w: 7 pooled_h: 7 spatial_scale: 0.0625 } }
layer { name: "drop" type: "Dropout" bottom: "pool5" top: "pool5" dropout_param { dropout_ratio: 0.5 scale_train: false } }
layer { name: "loss_bbox" type: "SmoothL1Loss" bottom: "pool5" bottom: "pool5" top: "loss_bbox"
  include { phase: TEST } smooth_l1_loss_param { sigma: 3 } }
layer { name: "ohem" type: "BoxAnnotatorOHEM" bottom: "pool5" top: "ohem" include { phase: TEST }
  box_annotator_ohem_param { roi_per_img: 128 ignore_label: -1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "pool5" bottom: "ohem" top: "loss" include { phase: TEST }
  loss_param { normalization: PRE_FIXED pre_fixed_normalizer: 2 } }
layer { name: "interp" type: "Interp" bottom: "data" top: "interp" interp_param { zoom_factor: 8 pad_beg: 0 pad_end: 0 } }
layer { name: "shuffle" type: "ShuffleChannel" bottom: "data" top: "shuffle" shuffle_channel_param { group: 4 } }
layer { name: "reorg" type: "Reorg" bottom: "data" top: "reorg" reorg_param { stride: 2 reverse: false } }
layer { name: "region" type: "Region" bottom: "reorg" top: "region"
  region_param { classes: 20 coords: 4 boxes_of_each_grid: 5 softmax: true } }
layer { name: "rloss" type: "RegionLoss" bottom: "region" top: "rloss" include { phase: TEST }
  region_loss_param { side: 13 num_class: 20 coords: 4 num: 5 softmax: 1 biases: 1.08 biases: 1.19 } }
layer { name: "lstm" type: "LSTM" bottom: "data" bottom: "im_info" top: "lstm"
  recurrent_param { num_output: 16 expose_hidden: false weight_filler { type: "uniform" } } }
layer { name: "mvn" type: "MVN" bottom: "data" top: "mvn" mvn_param { normalize_variance: false across_channels: true eps: 1e-5 } }
layer { name: "swish" type: "Swish" bottom: "data" top: "swish" swish_param { beta: 2 } }
layer { name: "clip" type: "Clip" bottom: "data" top: "clip" clip_param { min: -1 max: 1 } }
"#,
    );
    let py = layer(&net, "Python").param.python_param.clone().unwrap();
    assert_eq!(
        (py.module(), py.layer(), py.param_str()),
        ("rpn.proposal_layer", "ProposalLayer", "'feat_stride': 16")
    );
    let roi = layer(&net, "ROIPooling").param.roi_pooling_param.unwrap();
    assert_eq!((roi.pooled_h(), roi.spatial_scale()), (7, 0.0625));
    assert!(!layer(&net, "Dropout")
        .param
        .dropout_param
        .unwrap()
        .scale_train());
    assert_eq!(
        layer(&net, "SmoothL1Loss")
            .param
            .smooth_l1_loss_param
            .unwrap()
            .sigma(),
        3.0
    );
    let loss = layer(&net, "SoftmaxWithLoss").param.loss_param.unwrap();
    assert_eq!(
        (loss.normalization(), loss.pre_fixed_normalizer()),
        (
            tensorfmt_caffe::proto::loss_parameter::NormalizationMode::PreFixed,
            2.0
        )
    );
    assert_eq!(
        layer(&net, "Interp")
            .param
            .interp_param
            .unwrap()
            .zoom_factor,
        Some(8)
    );
    assert_eq!(
        layer(&net, "ShuffleChannel")
            .param
            .shuffle_channel_param
            .unwrap()
            .group(),
        4
    );
    assert_eq!(layer(&net, "Reorg").param.reorg_param.unwrap().stride(), 2);
    let region = layer(&net, "Region").param.region_param.clone().unwrap();
    assert_eq!(
        (
            region.classes(),
            region.boxes_of_each_grid(),
            region.softmax()
        ),
        (20, 5, true)
    );
    assert_eq!(
        layer(&net, "RegionLoss")
            .param
            .region_loss_param
            .clone()
            .unwrap()
            .biases,
        [1.08, 1.19]
    );
    let rec = layer(&net, "LSTM").param.recurrent_param.clone().unwrap();
    assert_eq!((rec.num_output(), rec.expose_hidden()), (16, false));
    let mvn = layer(&net, "MVN").param.mvn_param.unwrap();
    assert_eq!(
        (mvn.normalize_variance(), mvn.across_channels()),
        (false, true)
    );
    assert_eq!(layer(&net, "Swish").param.swish_param.unwrap().beta(), 2.0);
    assert_eq!(layer(&net, "Clip").param.clip_param.unwrap().max, 1.0);
}

#[test]
fn public_fork_nets_parse_without_proto() {
    let Some(dir) = nets_dir() else { return };
    for net in [
        "opencv_face_detector",
        "ssd300_vgg16_voc0712",
        "mobilenet_ssd",
        "shufflenet_1x_g3",
        "shufflenet_v2_1x",
        "segnet_driving_webdemo",
        "enet_cityscapes",
        "pspnet50_ade20k",
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{net}.prototxt"))).unwrap();
        let parsed = parse_net(&text, Schema::builtin(), &Default::default())
            .unwrap_or_else(|e| panic!("{net}: {e}"));
        assert!(!parsed.layers.is_empty());
    }
    // The face detector sets OpenCV's `clip` in DetectionOutput; with weiliu89's own
    // DetectionOutput fields (visualize ...) added, it is the net of issue 30's report.
    let text = std::fs::read_to_string(dir.join("opencv_face_detector.prototxt")).unwrap();
    let with_ssd_fields = text.replacen(
        "    clip: 1\n",
        "    clip: 1\n    visualize: false\n    visualize_threshold: 0.6\n    save_file: \"faces.txt\"\n",
        1,
    );
    assert_ne!(with_ssd_fields, text);
    let det = parse(&with_ssd_fields)
        .layers
        .into_iter()
        .find(|l| l.kind == "DetectionOutput")
        .unwrap()
        .param
        .detection_output_param
        .unwrap();
    assert_eq!(
        (det.clip(), det.visualize(), det.save_file()),
        (true, false, "faces.txt")
    );
}

#[test]
fn genuinely_unknown_fields_are_still_errors() {
    let unknown = |text: &str| match parse_net(text, Schema::builtin(), &Default::default()) {
        Err(CaffeError::UnknownField {
            field,
            message,
            line,
            ..
        }) => (field, message, line),
        other => panic!("{text}: {other:?}"),
    };
    // A misspelt fork field, a misspelt parameter message, the fork fields still left
    // to --proto (training layers: PSPNet's SegAccuracy, SegNet/ENet's DenseImageData),
    // and a field of another fork's message put in the wrong one.
    assert_eq!(
        unknown("layer { name: 'd' type: 'DetectionOutput'\n detection_output_param { visualise: true } }"),
        ("visualise".into(), "DetectionOutputParameter".into(), 2)
    );
    assert_eq!(
        unknown("layer { name: 'p' type: 'Proposal' proposal_parm { feat_stride: 16 } }"),
        ("proposal_parm".into(), "LayerParameter".into(), 1)
    );
    assert_eq!(
        unknown("layer { name: 'a' type: 'SegAccuracy' seg_accuracy_param { } }").0,
        "seg_accuracy_param"
    );
    assert_eq!(
        unknown("layer { name: 'd' type: 'DenseImageData' dense_image_data_param { } }").0,
        "dense_image_data_param"
    );
    assert_eq!(
        unknown("layer { name: 'b' type: 'BN' bn_param { bn_mod: INFERENCE } }"),
        ("bn_mod".into(), "BNParameter".into(), 1)
    );
    assert_eq!(
        unknown("layer { name: 'r' type: 'Reorg' reorg_param { group: 2 } }"),
        ("group".into(), "ReorgParameter".into(), 1)
    );
    let err = parse_net(
        "layer { name: 'd' type: 'DetectionOutput' detection_output_param { visualise: true } }",
        Schema::builtin(),
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--proto"), "{err}");
}

// ---- caffemodels: contested numbers decode by the fork the net points to ----

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, body: &[u8]) {
    key(out, field, 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

/// A V2 layer: name, type, and the given (number, message bytes) parameter fields.
fn v2_layer(name: &str, kind: &str, params: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut l = Vec::new();
    bytes_field(&mut l, 1, name.as_bytes());
    bytes_field(&mut l, 2, kind.as_bytes());
    for (n, body) in params {
        bytes_field(&mut l, *n, body);
    }
    l
}

fn model(layers: &[Vec<u8>]) -> Vec<Option<tensorfmt_caffe::Result<ParamMessage>>> {
    let mut net = Vec::new();
    for l in layers {
        bytes_field(&mut net, 100, l);
    }
    let model = read_model(net.into()).unwrap();
    layer_params(&model)
}

fn param<'a>(p: &'a ParamMessage, field: &str) -> &'a ParamMessage {
    match p.get(field) {
        Some(ParamValue::Message(m)) => m,
        other => panic!("{field}: {other:?} in {p:?}"),
    }
}

fn ok(r: &Option<tensorfmt_caffe::Result<ParamMessage>>) -> &ParamMessage {
    r.as_ref().unwrap().as_ref().unwrap()
}

#[test]
fn caffemodel_fields_decode_by_the_fork_the_net_points_to() {
    // DetectionOutputParameter with num_classes 2 and field 10 = 1.
    let mut det = Vec::new();
    varint_field(&mut det, 1, 2);
    varint_field(&mut det, 10, 1);
    // weiliu89's numbering (detection_output_param 204): field 10 is `visualize`.
    let ssd = model(&[v2_layer("det", "DetectionOutput", &[(204, det.clone())])]);
    let d = param(ok(&ssd[0]), "detection_output_param");
    assert_eq!(d.get("visualize"), Some(&ParamValue::Bool(true)));
    assert_eq!(d.get("normalized_bbox"), None);
    // OpenCV's numbering (147 on a DetectionOutput layer): field 10 is `normalized_bbox`.
    let cv = model(&[v2_layer("det", "DetectionOutput", &[(147, det.clone())])]);
    let d = param(ok(&cv[0]), "detection_output_param");
    assert_eq!(d.get("normalized_bbox"), Some(&ParamValue::Bool(true)));
    assert_eq!(d.get("num_classes"), Some(&ParamValue::UInt(2)));
    assert_eq!(d.get("visualize"), None);
    // 147 on a Swish layer is BVLC's swish_param (beta = 2.0f as fixed32).
    let mut swish = Vec::new();
    key(&mut swish, 1, 5);
    swish.extend_from_slice(&2.0f32.to_le_bytes());
    let bvlc = model(&[v2_layer("s", "Swish", &[(147, swish)])]);
    assert_eq!(
        param(ok(&bvlc[0]), "swish_param").get("beta"),
        Some(&ParamValue::Float(2.0))
    );

    // PoolingParameter field 13 (kernel_size 2, field 13 = 1): BVLC's round_mode FLOOR in a
    // net nothing points elsewhere; OpenCV's ceil_mode true in a net whose other layers
    // are OpenCV-numbered.
    let mut pool = Vec::new();
    varint_field(&mut pool, 2, 2);
    varint_field(&mut pool, 13, 1);
    let plain = model(&[v2_layer("p", "Pooling", &[(121, pool.clone())])]);
    let p = param(ok(&plain[0]), "pooling_param");
    assert_eq!(p.get("round_mode"), Some(&ParamValue::Enum(1)));
    assert_eq!(p.get("ceil_mode"), None);
    let opencv_net = model(&[
        v2_layer("p", "Pooling", &[(121, pool.clone())]),
        v2_layer("det", "DetectionOutput", &[(147, det.clone())]),
    ]);
    let p = param(ok(&opencv_net[0]), "pooling_param");
    assert_eq!(p.get("ceil_mode"), Some(&ParamValue::Bool(true)));
    assert_eq!(p.get("round_mode"), None);

    // DeepLab's interp_param is 143, BVLC's input_param: the layer type decides.
    let mut interp = Vec::new();
    varint_field(&mut interp, 3, 8); // zoom_factor
    let deeplab = model(&[v2_layer("i", "Interp", &[(143, interp)])]);
    assert_eq!(
        param(ok(&deeplab[0]), "interp_param").get("zoom_factor"),
        Some(&ParamValue::Int(8))
    );
    let mut input = Vec::new();
    let mut shape = Vec::new();
    key(&mut shape, 1, 2);
    varint(&mut shape, 1);
    shape.push(3);
    bytes_field(&mut input, 1, &shape);
    let bvlc_input = model(&[v2_layer("in", "Input", &[(143, input)])]);
    assert!(ok(&bvlc_input[0]).get("input_param").is_some());

    // OpenCV's proposal_param is 201, weiliu89's multibox_loss_param.
    let mut prop = Vec::new();
    varint_field(&mut prop, 1, 8); // feat_stride
    let proposal = model(&[v2_layer("prop", "Proposal", &[(201, prop.clone())])]);
    assert_eq!(
        param(ok(&proposal[0]), "proposal_param").get("feat_stride"),
        Some(&ParamValue::UInt(8))
    );
    let mbox = model(&[v2_layer("loss", "MultiBoxLoss", &[(201, prop)])]);
    assert!(ok(&mbox[0]).get("multibox_loss_param").is_some());

    // OpenCV's DetectionOutputParameter numbers fields 1..9 as weiliu89 does: in a net
    // that also points to the YOLO ports (a Reorg under 147), OpenCV's 147 on a
    // DetectionOutput still reads field 1 as num_classes, as it reads 10 as OpenCV's.
    let mut cv_det = Vec::new();
    varint_field(&mut cv_det, 1, 21);
    varint_field(&mut cv_det, 10, 0);
    let mut reorg = Vec::new();
    varint_field(&mut reorg, 1, 2);
    let mixed = model(&[
        v2_layer("r", "Reorg", &[(147, reorg)]),
        v2_layer("det", "DetectionOutput", &[(147, cv_det)]),
    ]);
    let d = param(ok(&mixed[1]), "detection_output_param");
    assert_eq!(d.get("num_classes"), Some(&ParamValue::UInt(21)), "{d:?}");
    assert_eq!(d.get("normalized_bbox"), Some(&ParamValue::Bool(false)));
    assert_eq!(d.get("side"), None);

    // A contested number on a layer whose type none of its meanings belongs to, in a
    // net that points to no fork: cannot tell.
    let unknown_type = model(&[v2_layer("x", "MyLayer", &[(147, det.clone())])]);
    let err = unknown_type[0].as_ref().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(err, CaffeError::AmbiguousField { number: 147, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("swish_param (BVLC Caffe)")
            && msg.contains("detection_output_param (OpenCV's opencv-caffe.proto)")
            && msg.contains("\"MyLayer\""),
        "{msg}"
    );
    // The same layer in a net whose other layers are OpenCV-numbered: OpenCV's meaning.
    let pointed = model(&[
        v2_layer("x", "MyLayer", &[(147, det.clone())]),
        v2_layer("det", "DetectionOutput", &[(147, det)]),
    ]);
    assert!(ok(&pointed[0]).get("detection_output_param").is_some());
}

#[test]
fn segmentation_fork_caffemodels_decode_by_their_numbering() {
    // BNParameter fields 1 (a FillerParameter with value 1.0 = field 3, fixed32), 3 and 5:
    // SegNet/ENet's scale_filler and bn_mode INFERENCE under bn_param 45; PSPNet's
    // slope_filler, momentum (here a fixed32 0.5) and frozen under its bn_param 152.
    let mut filler = Vec::new();
    key(&mut filler, 3, 5);
    filler.extend_from_slice(&1.0f32.to_le_bytes());
    let mut segnet_bn = Vec::new();
    bytes_field(&mut segnet_bn, 1, &filler);
    varint_field(&mut segnet_bn, 3, 1);
    let seg = model(&[v2_layer("bn", "BN", &[(45, segnet_bn)])]);
    let b = param(ok(&seg[0]), "bn_param");
    assert!(b.get("scale_filler").is_some() && b.get("slope_filler").is_none());
    assert_eq!(b.get("bn_mode"), Some(&ParamValue::Enum(1)));
    let mut psp_bn = Vec::new();
    bytes_field(&mut psp_bn, 1, &filler);
    key(&mut psp_bn, 3, 5);
    psp_bn.extend_from_slice(&0.5f32.to_le_bytes());
    varint_field(&mut psp_bn, 5, 1);
    let psp = model(&[v2_layer("bn", "BN", &[(152, psp_bn)])]);
    let b = param(ok(&psp[0]), "bn_param");
    assert!(b.get("slope_filler").is_some() && b.get("scale_filler").is_none());
    assert_eq!(b.get("momentum"), Some(&ParamValue::Float(0.5)));
    assert_eq!(b.get("frozen"), Some(&ParamValue::Bool(true)));
    assert_eq!(b.get("bn_mode"), None);
    // UpsampleParameter scale 4: SegNet's 137 (BVLC's embed_param on an Embed layer),
    // ENet's 147 (BVLC's swish_param on a Swish layer).
    let mut up = Vec::new();
    varint_field(&mut up, 1, 4);
    for number in [137, 147] {
        let m = model(&[v2_layer("u", "Upsample", &[(number, up.clone())])]);
        assert_eq!(
            param(ok(&m[0]), "upsample_param").get("scale"),
            Some(&ParamValue::UInt(4)),
            "{number}"
        );
    }
    let embed = model(&[v2_layer("e", "Embed", &[(137, up)])]);
    assert!(ok(&embed[0]).get("embed_param").is_some());
}

#[test]
fn yolo_port_caffemodels_decode_by_their_numbering() {
    // BirdeeChen/caffe_yolo_v2 (gklz1982's numbering): reorg_param 147, region_param 148,
    // and its own DetectionOutputParameter under SSD's 204: side 1, classes 2, num_box 3,
    // coords 4, confidence_threshold 5, nms_threshold 6, biases 7.
    let mut reorg = Vec::new();
    varint_field(&mut reorg, 1, 2);
    let mut region = Vec::new();
    varint_field(&mut region, 1, 20);
    varint_field(&mut region, 3, 5);
    varint_field(&mut region, 4, 1);
    let mut det = Vec::new();
    varint_field(&mut det, 2, 20);
    varint_field(&mut det, 3, 5);
    for (n, v) in [(5u64, 0.25f32), (6, 0.375), (7, 1.5), (7, 2.25)] {
        key(&mut det, n, 5);
        det.extend_from_slice(&v.to_le_bytes());
    }
    let yolo = model(&[
        v2_layer("reorg", "Reorg", &[(147, reorg)]),
        v2_layer("region", "Region", &[(148, region)]),
        v2_layer("det", "DetectionOutput", &[(204, det.clone())]),
    ]);
    assert_eq!(
        param(ok(&yolo[0]), "reorg_param").get("stride"),
        Some(&ParamValue::UInt(2))
    );
    let r = param(ok(&yolo[1]), "region_param");
    assert_eq!(
        (
            r.get("classes"),
            r.get("boxes_of_each_grid"),
            r.get("softmax")
        ),
        (
            Some(&ParamValue::UInt(20)),
            Some(&ParamValue::UInt(5)),
            Some(&ParamValue::Bool(true))
        )
    );
    let d = param(ok(&yolo[2]), "detection_output_param");
    assert_eq!(d.get("classes"), Some(&ParamValue::UInt(20)));
    assert_eq!(d.get("num_box"), Some(&ParamValue::UInt(5)));
    assert_eq!(d.get("nms_threshold"), Some(&ParamValue::Float(0.375)));
    assert_eq!(
        d.get("confidence_threshold"),
        Some(&ParamValue::Float(0.25))
    );
    assert_eq!(
        d.get("biases"),
        Some(&ParamValue::List(vec![
            ParamValue::Float(1.5),
            ParamValue::Float(2.25)
        ]))
    );
    assert_eq!(d.get("share_location"), None);
    // The same DetectionOutput bytes with nothing pointing to the YOLO ports: SSD's
    // fields, as before (field 2 is share_location; fixed32 7 does not fit keep_top_k).
    let alone = model(&[v2_layer("det", "DetectionOutput", &[(204, det)])]);
    let d = param(ok(&alone[0]), "detection_output_param");
    assert_eq!(d.get("share_location"), Some(&ParamValue::Bool(true)));
    assert_eq!(d.get("classes"), None);
}

#[test]
fn wire_types_a_fork_uses_differently_are_unknown_fields() {
    // The MTCNN caffemodels' Caffe writes LossParameter field 4 as a varint; R-FCN's
    // field 4 is a float. Neither fails to decode: without R-FCN layers the field is
    // unknown, with them a varint does not fit R-FCN's float and is left out too.
    let mut loss = Vec::new();
    varint_field(&mut loss, 4, 1);
    let mtcnn = model(&[v2_layer("loss", "SoftmaxWithLoss", &[(101, loss.clone())])]);
    assert_eq!(param(ok(&mtcnn[0]), "loss_param").fields, vec![]);
    let mut psroi = Vec::new();
    varint_field(&mut psroi, 2, 21);
    let rfcn = model(&[
        v2_layer("loss", "SoftmaxWithLoss", &[(101, loss)]),
        v2_layer("ps", "PSROIPooling", &[(10001, psroi)]),
    ]);
    assert_eq!(param(ok(&rfcn[0]), "loss_param").fields, vec![]);
    // R-FCN's float at 4, in an R-FCN net: pre_fixed_normalizer.
    let mut loss = Vec::new();
    key(&mut loss, 4, 5);
    loss.extend_from_slice(&2.0f32.to_le_bytes());
    let mut psroi = Vec::new();
    varint_field(&mut psroi, 2, 21);
    let rfcn = model(&[
        v2_layer("loss", "SoftmaxWithLoss", &[(101, loss)]),
        v2_layer("ps", "PSROIPooling", &[(10001, psroi)]),
    ]);
    assert_eq!(
        param(ok(&rfcn[0]), "loss_param").get("pre_fixed_normalizer"),
        Some(&ParamValue::Float(2.0))
    );
}

/// docs/caffe-layers.md lists every number forks give several meanings.
#[test]
fn docs_list_every_collision() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/caffe-layers.md"),
    )
    .unwrap();
    let section = doc
        .split("### Field numbers forks disagree on")
        .nth(1)
        .expect("docs/caffe-layers.md has a collisions section")
        .split("\n## ")
        .next()
        .unwrap();
    for e in FORK_FIELDS {
        let contested = FORK_FIELDS
            .iter()
            .filter(|o| o.message == e.message && o.number == e.number)
            .count()
            > 1;
        if contested {
            let row = format!("| `{}` {} |", e.message, e.number);
            assert!(section.contains(&row), "missing row {row}");
            assert!(
                section.contains(&format!("`{}`", e.field)),
                "{} not named",
                e.field
            );
        }
    }
}
