//! The deploy prototxts of the shared corpus (`corpus/caffe/nets/SOURCES.md`): each
//! parses (with its fork schema from `nets/forks/` where SOURCES.md names one), V1
//! nets upgrade, CRLF files parse, and errors name the line, the column and `--proto`.

use std::path::{Path, PathBuf};

use tensorfmt_caffe::{infer_shapes, parse_net, CaffeError, NetDef, Schema};
use tensorfmt_core::ReadOptions;

fn nets_dir() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe").map(|d| d.join("nets"))
}

/// The fork schema each net needs (SOURCES.md, "Fork schemas").
fn fork_of(net: &str) -> Option<&'static str> {
    Some(match net {
        "pspnet50_ade20k" => "hszhao_PSPNet_caffe.proto",
        "enet_cityscapes" => "TimoSaemann_caffe-enet_caffe.proto",
        "segnet_driving_webdemo" => "alexgkendall_caffe-segnet_caffe.proto",
        "shufflenet_1x_g3" | "shufflenet_v2_1x" => "farmingyard_ShuffleNet_caffe.proto.snippet",
        _ => return None,
    })
}

fn all_nets(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".prototxt").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

fn parse_file(dir: &Path, net: &str, schema: &Schema) -> Result<NetDef, CaffeError> {
    let text = std::fs::read_to_string(dir.join(format!("{net}.prototxt"))).unwrap();
    parse_net(&text, schema, &ReadOptions::default())
}

#[test]
fn every_corpus_net_parses() {
    let Some(dir) = nets_dir() else { return };
    let nets = all_nets(&dir);
    assert_eq!(nets.len(), 45, "{nets:?}");
    let mut failures = Vec::new();
    for net in &nets {
        let schema = match fork_of(net) {
            Some(f) => Schema::compile(&dir.join("forks").join(f), &Default::default()).unwrap(),
            None => Schema::builtin().clone(),
        };
        match parse_file(&dir, net, &schema) {
            Ok(def) => {
                assert!(!def.layers.is_empty(), "{net}");
                assert!(!def.inputs.is_empty(), "{net}: no inputs");
                eprintln!(
                    "{net}: {} inputs {:?}, {} layers",
                    def.inputs.len(),
                    def.inputs[0].shape,
                    def.layers.len()
                );
            }
            Err(e) => failures.push(format!("{net}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn fork(dir: &Path, name: &str) -> Schema {
    Schema::compile(&dir.join("forks").join(name), &Default::default()).unwrap()
}

#[test]
fn every_fork_schema_compiles() {
    let Some(dir) = nets_dir() else { return };
    for f in std::fs::read_dir(dir.join("forks")).unwrap() {
        let path = f.unwrap().path();
        let schema = Schema::compile(&path, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!schema.is_builtin());
        assert!(schema.has_field("LayerParameter", "convolution_param"));
    }
    assert!(fork(&dir, "farmingyard_ShuffleNet_caffe.proto.snippet")
        .has_field("LayerParameter", "shuffle_channel_param"));
    assert!(fork(&dir, "hszhao_PSPNet_caffe.proto").has_field("LayerParameter", "interp_param"));
}

#[test]
fn ssd_nets_parse_with_the_builtin_schema_and_with_weiliu89s() {
    let Some(dir) = nets_dir() else { return };
    let ssd = fork(&dir, "weiliu89_caffe_ssd_caffe.proto");
    for net in ["ssd300_vgg16_voc0712", "mobilenet_ssd"] {
        let a = parse_file(&dir, net, Schema::builtin()).unwrap();
        let b = parse_file(&dir, net, &ssd).unwrap();
        assert_eq!(a.layers.len(), b.layers.len());
        // The typed parameters agree whichever schema parsed them (fields by name).
        for (x, y) in a.layers.iter().zip(&b.layers) {
            assert_eq!(
                x.param.prior_box_param, y.param.prior_box_param,
                "{net} {}",
                x.name
            );
            assert_eq!(x.param.permute_param, y.param.permute_param);
            assert_eq!(x.param.convolution_param, y.param.convolution_param);
        }
        let prior = a.layers.iter().find(|l| l.kind == "PriorBox").unwrap();
        assert!(!prior
            .param
            .prior_box_param
            .as_ref()
            .unwrap()
            .min_size
            .is_empty());
        // DetectionOutput has include { phase: TEST } and is kept for a deploy net.
        assert!(
            a.layers.iter().any(|l| l.kind == "DetectionOutput"),
            "{net}"
        );
    }
    // OpenCV's `clip` of DetectionOutputParameter is in the builtin schema only.
    let face = parse_file(&dir, "opencv_face_detector", Schema::builtin()).unwrap();
    let det = face
        .layers
        .iter()
        .find(|l| l.kind == "DetectionOutput")
        .unwrap();
    assert_eq!(
        det.param.detection_output_param.as_ref().unwrap().clip,
        Some(true)
    );
    let err = parse_file(&dir, "opencv_face_detector", &ssd).unwrap_err();
    assert!(
        matches!(&err, CaffeError::UnknownField { field, .. } if field == "clip"),
        "{err}"
    );
}

#[test]
fn v1_nets_upgrade_to_v2() {
    let Some(dir) = nets_dir() else { return };
    let vgg = parse_file(&dir, "vgg19", Schema::builtin()).unwrap();
    assert_eq!(vgg.name, "VGG_ILSVRC_19_layers");
    assert_eq!(vgg.inputs.len(), 1);
    assert_eq!(
        (vgg.inputs[0].name.as_str(), vgg.inputs[0].line),
        ("data", 2)
    );
    assert_eq!(vgg.inputs[0].shape, vec![10, 3, 224, 224]);
    let first = &vgg.layers[0];
    assert_eq!(
        (first.name.as_str(), first.kind.as_str(), first.line),
        ("conv1_1", "Convolution", 7)
    );
    let conv = first.param.convolution_param.as_ref().unwrap();
    assert_eq!(
        (
            conv.num_output(),
            conv.pad.as_slice(),
            conv.kernel_size.as_slice()
        ),
        (64, &[1][..], &[3][..])
    );
    let kinds: std::collections::BTreeSet<&str> =
        vgg.layers.iter().map(|l| l.kind.as_str()).collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "Convolution",
            "Dropout",
            "InnerProduct",
            "Pooling",
            "ReLU",
            "Softmax"
        ]
    );
    // fork_field reads V1 parameters too.
    assert_eq!(
        first
            .fork_field("convolution_param", "num_output")
            .unwrap()
            .as_i64(),
        Some(64)
    );
    for net in ["age_net", "gender_net"] {
        let def = parse_file(&dir, net, Schema::builtin()).unwrap();
        assert_eq!(def.layers.len(), 19);
        let lrn = def.layers.iter().find(|l| l.kind == "LRN").unwrap();
        assert_eq!(lrn.param.lrn_param.as_ref().unwrap().local_size(), 5);
        assert_eq!(def.output_blobs().len(), 1, "{net}");
    }
}

#[test]
fn crlf_nets_parse_with_the_same_lines() {
    let Some(dir) = nets_dir() else { return };
    for net in ["vgg16", "shufflenet_1x_g3"] {
        let text = std::fs::read_to_string(dir.join(format!("{net}.prototxt"))).unwrap();
        assert!(text.contains("\r\n"), "{net} is CRLF in the corpus");
        let schema = match fork_of(net) {
            Some(f) => fork(&dir, f),
            None => Schema::builtin().clone(),
        };
        let crlf = parse_net(&text, &schema, &ReadOptions::default()).unwrap();
        let lf = parse_net(
            &text.replace("\r\n", "\n"),
            &schema,
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(crlf, lf);
    }
    // Error positions in a CRLF file count lines, and columns without the '\r'.
    let err = parse_net(
        "name: 'x'\r\nlayer {\r\n  nme: 'c'\r\n}\r\n",
        Schema::builtin(),
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CaffeError::UnknownField {
                line: 3,
                column: 3,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn unknown_fields_name_the_field_the_line_and_the_proto_option() {
    let Some(dir) = nets_dir() else { return };
    // SegNet's training data layer (its deploy net's fields are built in).
    let err = parse_net(
        "name: 'segnet'\nlayer {\n  name: 'data'\n  type: 'DenseImageData'\n  dense_image_data_param { source: 'train.txt' }\n}\n",
        Schema::builtin(),
        &Default::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, CaffeError::UnknownField { field, line: 5, column: 3, .. } if field == "dense_image_data_param"),
        "{err:?}"
    );
    assert!(
        msg.contains("`dense_image_data_param`")
            && msg.contains("line 5:3")
            && msg.contains("--proto FORK.proto"),
        "{msg}"
    );
    // With a fork schema the message names that schema instead of suggesting --proto.
    let psp = fork(&dir, "hszhao_PSPNet_caffe.proto");
    let err = parse_net(
        "layer { name: 'u' upsample_param { scale: 2 } }",
        &psp,
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("hszhao_PSPNet_caffe.proto") && !err.contains("--proto"),
        "{err}"
    );
}

#[test]
fn syntax_errors_give_line_and_column() {
    let cases: [(&str, usize, usize); 5] = [
        ("layer {\n  name: 'a'\n  type 'ReLU'\n}\n", 3, 8),
        ("layer {\n  name: 'a'\n", 3, 1),
        ("layer { name: \"a }\n", 1, 19),
        (
            "layer {\n  convolution_param { num_output: -3 }\n}\n",
            2,
            35,
        ),
        ("layer {\n  pooling_param { pool: MEDIAN }\n}\n", 2, 25),
    ];
    for (text, line, column) in cases {
        match parse_net(text, Schema::builtin(), &Default::default()) {
            Err(CaffeError::Prototxt {
                line: l,
                column: c,
                message,
            }) => {
                assert_eq!((l, c), (line, column), "{text:?}: {message}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn fork_fields_are_readable() {
    let Some(dir) = nets_dir() else { return };
    let segnet = parse_file(
        &dir,
        "segnet_driving_webdemo",
        &fork(&dir, "alexgkendall_caffe-segnet_caffe.proto"),
    )
    .unwrap();
    let up = segnet
        .layers
        .iter()
        .find(|l| l.name == "upsample5")
        .unwrap();
    assert_eq!(up.bottoms, ["pool5", "pool5_mask"]);
    assert_eq!(
        up.fork_field("upsample_param", "scale").unwrap().as_i64(),
        Some(2)
    );
    assert_eq!(
        up.fork_field("upsample_param", "upsample_w")
            .unwrap()
            .as_i64(),
        Some(30)
    );
    assert_eq!(
        up.fork_field("upsample_param", "upsample_h")
            .unwrap()
            .as_i64(),
        Some(23)
    );
    let bn = segnet.layers.iter().find(|l| l.kind == "BN").unwrap();
    assert!(bn.has_param("bn_param"));
    assert_eq!(
        bn.fork_field("bn_param", "bn_mode").unwrap().as_str(),
        Some("INFERENCE")
    );
    // Typed parameters the builtin schema knows are still filled from the fork's message.
    assert_eq!(bn.param.param.len(), 2);
    assert_eq!(bn.param.param[1].decay_mult(), 0.0);

    let psp = parse_file(
        &dir,
        "pspnet50_ade20k",
        &fork(&dir, "hszhao_PSPNet_caffe.proto"),
    )
    .unwrap();
    let interp = psp
        .layers
        .iter()
        .find(|l| l.name == "conv6_interp")
        .unwrap();
    assert_eq!(
        interp
            .fork_field("interp_param", "zoom_factor")
            .unwrap()
            .as_i64(),
        Some(8)
    );
    let pyramid = psp.layers.iter().find(|l| l.kind == "Interp").unwrap();
    assert_eq!(
        pyramid
            .fork_field("interp_param", "height")
            .unwrap()
            .as_i64(),
        Some(60)
    );

    let shuffle = parse_file(
        &dir,
        "shufflenet_1x_g3",
        &fork(&dir, "farmingyard_ShuffleNet_caffe.proto.snippet"),
    )
    .unwrap();
    let sc = shuffle
        .layers
        .iter()
        .find(|l| l.kind == "ShuffleChannel")
        .unwrap();
    assert_eq!(
        sc.fork_field("shuffle_channel_param", "group")
            .unwrap()
            .as_i64(),
        Some(3)
    );
    let dw = shuffle
        .layers
        .iter()
        .find(|l| l.kind == "ConvolutionDepthwise")
        .unwrap();
    assert!(dw.param.convolution_param.is_some());

    let enet = parse_file(
        &dir,
        "enet_cityscapes",
        &fork(&dir, "TimoSaemann_caffe-enet_caffe.proto"),
    )
    .unwrap();
    let up = enet.layers.iter().find(|l| l.kind == "Upsample").unwrap();
    assert_eq!(
        up.fork_field("upsample_param", "scale").unwrap().as_i64(),
        Some(2)
    );
}

#[test]
fn phase_rules_filter_for_a_deploy_net() {
    let text = r#"
name: "phases"
layer { name: "train_data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
        transform_param { mirror: true } data_param { source: "x" batch_size: 4 } }
layer { name: "test_data" type: "MemoryData" top: "data" top: "label" include { phase: TEST }
        transform_param { scale: 0.00390625 mean_value: 104 mean_value: 117 mean_value: 123 crop_size: 227 }
        memory_data_param { batch_size: 2 channels: 3 height: 227 width: 227 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 10 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" exclude { phase: TEST } }
layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc" include { phase: TEST stage: "val" } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" include { phase: TEST not_stage: "val" } }
"#;
    let net = parse_net(text, Schema::builtin(), &Default::default()).unwrap();
    let names: Vec<&str> = net.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ip", "prob"]);
    assert_eq!(
        net.inputs
            .iter()
            .map(|i| (i.name.as_str(), i.shape.clone()))
            .collect::<Vec<_>>(),
        [("data", vec![2, 3, 227, 227]), ("label", vec![2, 1, 1, 1])]
    );
    let t = net.transform.as_ref().unwrap();
    assert_eq!(
        (
            t.layer.as_str(),
            t.scale,
            t.mean_values.as_slice(),
            t.crop_size
        ),
        ("test_data", 0.00390625, &[104.0, 117.0, 123.0][..], 227)
    );
    // With the stage "val", Accuracy is kept and Softmax dropped.
    let opts = tensorfmt_caffe::NetOptions {
        stages: vec!["val".into()],
        ..Default::default()
    };
    let val = tensorfmt_caffe::parse_net_with(text, Schema::builtin(), &opts).unwrap();
    assert_eq!(
        val.layers
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["ip", "acc"]
    );
    // The TRAIN phase keeps the other data layer and the loss.
    let opts = tensorfmt_caffe::NetOptions {
        phase: tensorfmt_caffe::proto::Phase::Train,
        ..Default::default()
    };
    let train = tensorfmt_caffe::parse_net_with(text, Schema::builtin(), &opts).unwrap();
    assert_eq!(
        train
            .layers
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["ip", "loss"]
    );
    assert!(train.transform.unwrap().mirror);
}

#[test]
fn input_declarations_upgrade_like_caffe() {
    let dims = "input: 'a' input: 'b' input_dim: 1 input_dim: 3 input_dim: 4 input_dim: 4 input_dim: 1 input_dim: 1 input_dim: 2 input_dim: 2\n\
                layer { name: 'r' type: 'ReLU' bottom: 'a' top: 'r' }";
    let net = parse_net(dims, Schema::builtin(), &Default::default()).unwrap();
    assert_eq!(
        net.inputs
            .iter()
            .map(|i| i.shape.clone())
            .collect::<Vec<_>>(),
        [vec![1, 3, 4, 4], vec![1, 1, 2, 2]]
    );
    let shapes = "input: 'a' input_shape { dim: 1 dim: 2 }\nlayer { name: 'r' type: 'ReLU' bottom: 'a' top: 'r' }";
    let net = parse_net(shapes, Schema::builtin(), &Default::default()).unwrap();
    assert_eq!(net.inputs[0].shape, [1, 2]);
    // Wrong counts are errors naming the line.
    let bad = "name: 'n'\ninput: 'a' input_dim: 1 input_dim: 3\nlayer { name: 'r' type: 'ReLU' bottom: 'a' top: 'r' }";
    let err = parse_net(bad, Schema::builtin(), &Default::default()).unwrap_err();
    assert!(
        matches!(&err, CaffeError::Net { line: 2, message } if message.contains("4 per input")),
        "{err:?}"
    );
    // An Input layer with one shape for two tops gives both that shape.
    let layer = "layer { name: 'in' type: 'Input' top: 'x' top: 'y' input_param { shape { dim: 2 dim: 5 } } }";
    let net = parse_net(layer, Schema::builtin(), &Default::default()).unwrap();
    assert_eq!(
        net.inputs
            .iter()
            .map(|i| i.shape.clone())
            .collect::<Vec<_>>(),
        [vec![2, 5], vec![2, 5]]
    );
    assert!(net.layers.is_empty());
    // Inputs without dims: Caffe drops them (a legacy caffemodel) and then fails on the
    // unknown bottom; they stay inputs without a shape, which an override gives (issue 34).
    let net = parse_net(
        "input: 'a'\nlayer { name: 'r' type: 'ReLU' bottom: 'a' top: 'a' }",
        Schema::builtin(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(net.inputs.len(), 1);
    assert!(net.inputs[0].shape.is_empty() && net.warnings.is_empty());
    let e = infer_shapes(&net, &[]).unwrap_err().to_string();
    assert!(e.contains("declares no shape"), "{e}");
    let shapes = infer_shapes(&net, &[("a".into(), vec![1, 2])]).unwrap();
    assert_eq!(shapes.blob("a"), Some(&[1, 2][..]));
}

#[test]
fn batch_norm_three_param_form_is_upgraded() {
    let text = "layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'x' param { lr_mult: 1 } param { lr_mult: 1 } param { lr_mult: 1 } }";
    let net = parse_net(text, Schema::builtin(), &Default::default()).unwrap();
    assert!(net.layers[0]
        .param
        .param
        .iter()
        .all(|p| p.lr_mult() == 0.0 && p.decay_mult() == 0.0));
}

#[test]
fn mixed_layer_lists_follow_caffe_when_strict_and_opencv_otherwise() {
    let text = "layer { name: 'new' type: 'ReLU' bottom: 'x' top: 'x' }\nlayers { name: 'old' type: RELU bottom: 'x' top: 'x' }";
    let strict = ReadOptions {
        strict: true,
        ..Default::default()
    };
    let err = parse_net(text, Schema::builtin(), &strict).unwrap_err();
    assert!(err.to_string().contains("both `layer`"), "{err}");
    let net = parse_net(text, Schema::builtin(), &Default::default()).unwrap();
    assert_eq!(
        net.layers
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["old"]
    );
    assert_eq!(net.layers[0].line, 2);
    assert_eq!(net.warnings.len(), 1);
}

const V0_NET: &str = r#"name: "CaffeNet"
input: "data"
input_dim: 10 input_dim: 3 input_dim: 227 input_dim: 227
layers {
  layer { name: "pad1" type: "padding" pad: 2 }
  bottom: "data" top: "pad1"
}
layers {
  layer { name: "conv1" type: "conv" num_output: 96 kernelsize: 11 stride: 4 biasterm: false
          weight_filler { type: "gaussian" std: 0.01 } }
  bottom: "pad1" top: "conv1"
}
layers { layer { name: "relu1" type: "relu" } bottom: "conv1" top: "conv1" }
layers { layer { name: "pool1" type: "pool" pool: AVE kernelsize: 3 stride: 2 } bottom: "conv1" top: "pool1" }
layers { layer { name: "norm1" type: "lrn" local_size: 3 alpha: 0.0001 beta: 0.75 } bottom: "pool1" top: "norm1" }
layers { layer { name: "fc" type: "innerproduct" num_output: 10 } bottom: "norm1" top: "fc" }
layers { layer { name: "drop" type: "dropout" dropout_ratio: 0.25 } bottom: "fc" top: "fc" }
layers { layer { name: "prob" type: "softmax" } bottom: "fc" top: "prob" }
"#;

#[test]
fn v0_nets_upgrade_like_caffe() {
    let net = parse_net(V0_NET, Schema::builtin(), &Default::default()).unwrap();
    let kinds: Vec<(&str, &str)> = net
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("conv1", "Convolution"),
            ("relu1", "ReLU"),
            ("pool1", "Pooling"),
            ("norm1", "LRN"),
            ("fc", "InnerProduct"),
            ("drop", "Dropout"),
            ("prob", "Softmax")
        ]
    );
    // The padding layer is folded into conv1, which now reads `data`.
    let conv = &net.layers[0];
    assert_eq!(
        (conv.bottoms.as_slice(), conv.line),
        (&["data".to_string()][..], 8)
    );
    let cp = conv.param.convolution_param.as_ref().unwrap();
    assert_eq!(
        (
            cp.num_output(),
            cp.pad.as_slice(),
            cp.kernel_size.as_slice(),
            cp.stride.as_slice(),
            cp.bias_term()
        ),
        (96, &[2][..], &[11][..], &[4][..], false)
    );
    assert_eq!(cp.weight_filler.as_ref().unwrap().std(), 0.01);
    let pp = net.layers[2].param.pooling_param.as_ref().unwrap();
    assert_eq!(
        (pp.pool(), pp.kernel_size(), pp.stride()),
        (
            tensorfmt_caffe::proto::pooling_parameter::PoolMethod::Ave,
            3,
            2
        )
    );
    assert_eq!(
        net.layers[3].param.lrn_param.as_ref().unwrap().local_size(),
        3
    );
    assert_eq!(
        net.layers[5]
            .param
            .dropout_param
            .as_ref()
            .unwrap()
            .dropout_ratio(),
        0.25
    );
    let shapes = tensorfmt_caffe::infer_shapes(&net, &[]).unwrap();
    assert_eq!(shapes.blob("conv1"), Some(&[10, 96, 56, 56][..])); // (227 + 4 - 11) / 4 + 1
    assert_eq!(shapes.blob("prob"), Some(&[10, 10][..]));
    assert!(net.warnings.is_empty(), "{:?}", net.warnings);

    // A parameter that does not apply is dropped with a warning; bad padding is an error.
    let odd = "input: 'x' input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
               layers { layer { name: 'r' type: 'relu' num_output: 3 } bottom: 'x' top: 'y' }";
    let net = parse_net(odd, Schema::builtin(), &Default::default()).unwrap();
    assert!(net.warnings[0].contains("num_output"), "{:?}", net.warnings);
    let bad = "input: 'x' input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
               layers { layer { name: 'p' type: 'padding' pad: 1 } bottom: 'x' top: 'p' }
               layers { layer { name: 'r' type: 'relu' } bottom: 'p' top: 'y' }";
    let err = parse_net(bad, Schema::builtin(), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 3") && err.contains("non-convolutional"),
        "{err}"
    );
    let unknown = "layers { layer { name: 'q' type: 'quux' } }";
    let err = parse_net(unknown, Schema::builtin(), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown V0 layer type \"quux\""), "{err}");
    let dangling = "layers { layer { name: 'c' type: 'conv' } bottom: 'nowhere' top: 'c' }";
    let err = parse_net(dangling, Schema::builtin(), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown blob input \"nowhere\""), "{err}");
    let bad_enum = "layers { name: 'l' type: 1000 }";
    let err = parse_net(bad_enum, Schema::builtin(), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[test]
fn corpus_caffemodels_join_their_prototxts() {
    let Some(dir) = nets_dir() else { return };
    let caffe = dir.parent().unwrap();
    for (net, model) in [
        ("cifar10_quick", "v1_cifar10_quick_iter_4000.caffemodel"),
        ("cifar10_full", "v1_cifar10_full_iter_70000.caffemodel"),
        ("mnist_lenet", "v2_lenet_iter_10000.caffemodel"),
        ("mtcnn_det1", "mtcnn_det1.caffemodel"),
        ("mtcnn_det4", "mtcnn_det4.caffemodel"),
    ] {
        let def = parse_file(&dir, net, Schema::builtin()).unwrap();
        let bytes = tensorfmt_core::io::map_file(caffe.join(model)).unwrap();
        let m = tensorfmt_caffe::read_model(bytes).unwrap();
        let mut blobs = tensorfmt_caffe::layer_blobs(&m).unwrap();
        let mut joined = 0;
        for l in &def.layers {
            if let Some(b) = blobs.take(&l.name) {
                joined += 1;
                if l.kind == "InnerProduct" {
                    // Legacy (1, 1, M, N) weights come out as [M, N].
                    assert_eq!(b[0].dims().len(), 2, "{net} {}", l.name);
                    assert_eq!(b[1].dims().len(), 1, "{net} {}", l.name);
                    let n = l.param.inner_product_param.as_ref().unwrap().num_output() as usize;
                    assert_eq!(b[0].dims()[0], n);
                }
            }
        }
        assert!(joined > 0, "{net}");
        assert!(
            blobs.remaining().is_empty(),
            "{net}: unjoined {:?}",
            blobs.remaining()
        );
    }
}
