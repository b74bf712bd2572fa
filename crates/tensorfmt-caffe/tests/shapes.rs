//! Caffe's shape rules over the corpus nets and hand-checked cases.

use std::path::{Path, PathBuf};

use tensorfmt_caffe::{
    infer_shapes, parse_net, random_weights, CaffeError, NetDef, NetShapes, Schema,
};
use tensorfmt_core::ReadOptions;

fn nets_dir() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe").map(|d| d.join("nets"))
}

fn fork_of(net: &str) -> Option<&'static str> {
    Some(match net {
        "pspnet50_ade20k" => "hszhao_PSPNet_caffe.proto",
        "enet_cityscapes" => "TimoSaemann_caffe-enet_caffe.proto",
        "segnet_driving_webdemo" => "alexgkendall_caffe-segnet_caffe.proto",
        "shufflenet_1x_g3" | "shufflenet_v2_1x" => "farmingyard_ShuffleNet_caffe.proto.snippet",
        _ => return None,
    })
}

fn load(dir: &Path, net: &str) -> NetDef {
    let schema = match fork_of(net) {
        Some(f) => Schema::compile(&dir.join("forks").join(f), &Default::default()).unwrap(),
        None => Schema::builtin().clone(),
    };
    let text = std::fs::read_to_string(dir.join(format!("{net}.prototxt"))).unwrap();
    parse_net(&text, &schema, &ReadOptions::default()).unwrap()
}

/// Input shapes the corpus nets need beyond what they declare (SOURCES.md).
fn overrides(net: &str) -> Vec<(String, Vec<usize>)> {
    match net {
        "openpose_coco_linevec" => vec![("image".into(), vec![1, 3, 368, 368])],
        _ => vec![],
    }
}

fn shapes(dir: &Path, net: &str) -> (NetDef, NetShapes) {
    let def = load(dir, net);
    let s = infer_shapes(&def, &overrides(net)).unwrap_or_else(|e| panic!("{net}: {e}"));
    (def, s)
}

#[test]
fn every_corpus_net_infers_shapes() {
    let Some(dir) = nets_dir() else { return };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            e.unwrap()
                .file_name()
                .into_string()
                .unwrap()
                .strip_suffix(".prototxt")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    let mut failures = Vec::new();
    for net in &names {
        let def = load(&dir, net);
        match infer_shapes(&def, &overrides(net)) {
            Ok(s) => {
                assert_eq!(s.layers.len(), def.layers.len());
                let outs: Vec<String> = def
                    .output_blobs()
                    .iter()
                    .map(|o| format!("{o}{:?}", s.blob(o).unwrap()))
                    .collect();
                eprintln!("{net}: {}", outs.join(" "));
            }
            Err(e) => failures.push(format!("{net}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hand_checked_shapes() {
    let Some(dir) = nets_dir() else { return };
    let (_, alex) = shapes(&dir, "bvlc_alexnet");
    assert_eq!(alex.blob("conv1"), Some(&[10, 96, 55, 55][..]));
    assert_eq!(alex.blob("pool5"), Some(&[10, 256, 6, 6][..]));
    assert_eq!(
        alex.layer("conv2").unwrap().params,
        vec![vec![256, 48, 5, 5], vec![256]]
    );
    assert_eq!(
        alex.layer("fc6").unwrap().params,
        vec![vec![4096, 9216], vec![4096]]
    );
    assert_eq!(alex.blob("prob"), Some(&[10, 1000][..]));

    // GoogLeNet: ceil-mode pools (112 -> 56 with kernel 3 stride 2, no pad).
    let (_, g) = shapes(&dir, "bvlc_googlenet");
    assert_eq!(g.blob("conv1/7x7_s2"), Some(&[10, 64, 112, 112][..]));
    assert_eq!(g.blob("pool1/3x3_s2"), Some(&[10, 64, 56, 56][..]));
    assert_eq!(g.blob("pool2/3x3_s2"), Some(&[10, 192, 28, 28][..]));
    assert_eq!(g.blob("inception_3a/output"), Some(&[10, 256, 28, 28][..]));
    assert_eq!(g.blob("pool3/3x3_s2"), Some(&[10, 480, 14, 14][..]));
    assert_eq!(g.blob("pool4/3x3_s2"), Some(&[10, 832, 7, 7][..]));
    assert_eq!(g.blob("pool5/7x7_s1"), Some(&[10, 1024, 1, 1][..]));

    let (def, r) = shapes(&dir, "resnet50");
    assert_eq!(def.output_blobs(), ["prob"]);
    assert_eq!(r.blob("prob"), Some(&[1, 1000][..]));
    assert_eq!(r.blob("pool1"), Some(&[1, 64, 56, 56][..]));
    assert_eq!(
        r.layer("bn_conv1").unwrap().params,
        vec![vec![64], vec![64], vec![1]]
    );
    assert_eq!(
        r.layer("scale_conv1").unwrap().params,
        vec![vec![64], vec![64]]
    );
    assert_eq!(
        r.layer("conv1").unwrap().params,
        vec![vec![64, 3, 7, 7], vec![64]]
    );
    assert_eq!(
        r.layer("res2a_branch1").unwrap().params,
        vec![vec![256, 64, 1, 1]]
    );

    // SqueezeNet 1.0: ceil-mode pool 111 -> 55.
    let (_, sq) = shapes(&dir, "squeezenet_v1_0");
    assert_eq!(sq.blob("pool1"), Some(&[10, 96, 55, 55][..]));
    // FCN-8s: Deconvolution and Crop back to the 500x500 input.
    let (_, fcn) = shapes(&dir, "fcn8s_voc");
    assert_eq!(fcn.blob("score"), Some(&[1, 21, 500, 500][..]));
    assert_eq!(
        fcn.layer("upscore2").unwrap().params,
        vec![vec![21, 21, 4, 4]]
    );
    // SSD: PriorBox and Permute/Flatten/Concat.
    let (_, ssd) = shapes(&dir, "ssd300_vgg16_voc0712");
    assert_eq!(ssd.blob("mbox_priorbox"), Some(&[1, 2, 8732 * 4][..]));
    assert_eq!(ssd.blob("mbox_loc"), Some(&[1, 8732 * 4][..]));
    assert_eq!(ssd.blob("detection_out"), Some(&[1, 1, 200, 7][..]));
    // MobileNet depthwise groups.
    let (_, mb) = shapes(&dir, "mobilenet_v1");
    assert_eq!(
        mb.layer("conv2_1/dw").unwrap().params,
        vec![vec![32, 1, 3, 3]]
    );
    // PSPNet Interp and SegNet Upsample.
    let (_, psp) = shapes(&dir, "pspnet50_ade20k");
    assert_eq!(psp.blob("conv6_interp"), Some(&[1, 150, 473, 473][..]));
    let (_, seg) = shapes(&dir, "segnet_driving_webdemo");
    assert_eq!(seg.blob("pool5_D"), Some(&[1, 512, 23, 30][..]));
    assert_eq!(seg.layer("conv1_1_bn").map(|l| l.params.len()), Some(2));
    let (_, shuffle) = shapes(&dir, "shufflenet_1x_g3");
    assert_eq!(
        shuffle.layer("resx1_conv2").unwrap().params,
        vec![vec![54, 1, 3, 3]]
    );
}

fn net(text: &str) -> NetDef {
    parse_net(text, Schema::builtin(), &Default::default()).unwrap()
}

fn err(text: &str) -> String {
    infer_shapes(&net(text), &[]).unwrap_err().to_string()
}

const IN: &str = "input: 'x' input_shape { dim: 1 dim: 3 dim: 10 dim: 10 }\n";

#[test]
fn pooling_ceil_and_last_window_clip() {
    // (10 + 2*1 - 3) / 2 = 4.5: ceil 5, +1 = 6; (6-1)*2 = 10 >= 10 + 1? no: 6 stays.
    let s = |k: u32, st: u32, p: u32, extra: &str| {
        let n = net(&format!("{IN}layer {{ name: 'p' type: 'Pooling' bottom: 'x' top: 'y' pooling_param {{ kernel_size: {k} stride: {st} pad: {p} {extra} }} }}"));
        infer_shapes(&n, &[]).unwrap().blob("y").unwrap()[2]
    };
    assert_eq!(s(3, 2, 1, ""), 6);
    assert_eq!(s(3, 2, 0, ""), 5); // ceil((10-3)/2)+1 = 5
    assert_eq!(s(2, 2, 1, ""), 6); // ceil(10/2)+1 = 6, (6-1)*2 = 10 < 11: kept
    assert_eq!(s(3, 3, 2, ""), 4); // ceil(11/3)+1 = 5, but (5-1)*3 = 12 >= 10 + 2: clipped
    assert_eq!(s(3, 2, 0, "round_mode: FLOOR"), 4);
    assert_eq!(s(3, 2, 0, "ceil_mode: false"), 4);
    assert_eq!(s(10, 1, 0, ""), 1);
    assert!(err(&format!("{IN}layer {{ name: 'p' type: 'Pooling' bottom: 'x' top: 'y' pooling_param {{ kernel_size: 13 }} }}")).contains("larger than the padded input"));
}

/// The geometry `infer_shapes` exports for the lowering: Caffe's rules, once
/// (BVLC `pooling_layer.cpp` and `base_conv_layer.cpp` where the two copies of them
/// used to differ).
#[test]
fn geometry_follows_bvlc_where_the_old_copies_differed() {
    use tensorfmt_caffe::Geometry;
    let pool = |h: usize, w: usize, params: &str| {
        let n = net(&format!("input: 'x' input_shape {{ dim: 1 dim: 1 dim: {h} dim: {w} }}\n\
            layer {{ name: 'p' type: 'Pooling' bottom: 'x' top: 'y' pooling_param {{ {params} }} }}"));
        match infer_shapes(&n, &[]).map(|s| s.layers[0].geometry.clone()) {
            Ok(Some(Geometry::Pool(g))) => Ok(g),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        }
    };
    // The sizes the lowering's own copy used to test (AlexNet pool1, GoogLeNet ceil/floor).
    assert_eq!(
        pool(55, 55, "kernel_size: 3 stride: 2").unwrap().pooled,
        [27, 27]
    );
    assert_eq!(
        pool(112, 112, "kernel_size: 3 stride: 2").unwrap().pooled,
        [56, 56]
    );
    assert_eq!(
        pool(112, 112, "kernel_size: 3 stride: 2 round_mode: FLOOR")
            .unwrap()
            .pooled,
        [55, 55]
    );
    assert_eq!(
        pool(3, 3, "kernel_size: 2 stride: 2 pad: 1")
            .unwrap()
            .pooled,
        [2, 2]
    ); // last window clipped
       // BVLC clips the last window on both axes when any pad is non-zero
       // (`if (pad_h_ || pad_w_)`): with pad_h 0, pad_w 1 the height is clipped too
       // (ceil((2 - 1) / 3) + 1 = 2, and (2 - 1) * 3 >= 2 + 0). The lowering's copy clipped
       // per axis (as OpenCV does) and gave a height of 2.
    let g = pool(2, 3, "kernel_h: 1 kernel_w: 2 stride: 3 pad_h: 0 pad_w: 1").unwrap();
    assert_eq!((g.pad, g.pooled), ([0, 1], [1, 2]));
    // `pad` together with pad_h/pad_w, or pad_h alone: BVLC's CHECK refuses ("pad is
    // pad OR pad_h and pad_w are required"); the lowering's copy took pad_h/pad_w.
    assert!(pool(4, 4, "kernel_size: 2 pad: 1 pad_h: 1 pad_w: 1")
        .unwrap_err()
        .contains("pad is pad OR pad_h and pad_w"));
    assert!(pool(4, 4, "kernel_size: 2 pad_h: 1")
        .unwrap_err()
        .contains("pad is pad OR pad_h and pad_w"));
    // kernel_size with kernel_h/kernel_w: refused (the lowering's copy used kernel_h/w).
    assert!(pool(4, 4, "kernel_size: 2 kernel_h: 2 kernel_w: 2")
        .unwrap_err()
        .contains("not both"));
    // global pooling with kernel_w only: refused (the lowering's copy checked
    // kernel_size and kernel_h only).
    assert!(pool(4, 4, "global_pooling: true kernel_w: 2")
        .unwrap_err()
        .contains("global_pooling"));
    // round_mode and OpenCV's ceil_mode disagreeing: refused (the lowering's copy took
    // floor).
    assert!(
        pool(4, 4, "kernel_size: 2 round_mode: CEIL ceil_mode: false")
            .unwrap_err()
            .contains("disagree")
    );
    let conv = |params: &str| {
        let n = net(&format!("{IN}layer {{ name: 'c' type: 'Convolution' bottom: 'x' top: 'y' convolution_param {{ num_output: 2 {params} }} }}"));
        match infer_shapes(&n, &[]).map(|s| s.layers[0].geometry.clone()) {
            Ok(Some(Geometry::Conv(g))) => Ok(g),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        }
    };
    // stride_h alone: BVLC reads stride_w() as 0 (no default) and divides by it; refused
    // here. The lowering's copy defaulted the missing side to 1.
    assert!(conv("kernel_size: 3 stride_h: 2")
        .unwrap_err()
        .contains("stride dimensions must be nonzero"));
    // pad_h alone: pad_w() is 0 (its default), as in BVLC.
    assert_eq!(conv("kernel_size: 3 pad_h: 1").unwrap().pad, [1, 0]);
    let g = conv("kernel_size: 3 kernel_size: 1 dilation: 2 group: 1").unwrap();
    assert_eq!((g.extent(0), g.extent(1)), (5, 1));
    assert_eq!((g.kernel, g.dilation), (vec![3, 1], vec![2, 2]));
}

#[test]
fn absurd_and_hostile_shapes_are_errors() {
    // 2^40 elements.
    let big = net("input: 'x' input_shape { dim: 1024 dim: 1024 dim: 1024 dim: 1024 }\nlayer { name: 'r' type: 'ReLU' bottom: 'x' top: 'x' }");
    let e = infer_shapes(&big, &[]).unwrap_err().to_string();
    assert!(e.contains("INT_MAX"), "{e}");
    // A conv whose output explodes: 46341^2 channels... via num_output * spatial.
    let e = err(&format!("{IN}layer {{ name: 'c' type: 'Convolution' bottom: 'x' top: 'y' convolution_param {{ num_output: 4000000000 kernel_size: 1 }} }}"));
    assert!(e.contains("INT_MAX") || e.contains("multiples"), "{e}");
    // Kernel > input.
    let e = err(&format!("{IN}layer {{ name: 'c' type: 'Convolution' bottom: 'x' top: 'y' convolution_param {{ num_output: 2 kernel_size: 11 }} }}"));
    assert!(
        e.contains("line 2") && e.contains("larger than the padded input"),
        "{e}"
    );
    // Dilation makes the kernel too large.
    let e = err(&format!("{IN}layer {{ name: 'c' type: 'Convolution' bottom: 'x' top: 'y' convolution_param {{ num_output: 2 kernel_size: 3 dilation: 5 }} }}"));
    assert!(e.contains("kernel extent 11"), "{e}");
    // A cycle: a layer consuming its own later top.
    let e = err(&format!("{IN}layer {{ name: 'a' type: 'ReLU' bottom: 'b' top: 'a' }}\nlayer {{ name: 'b' type: 'ReLU' bottom: 'a' top: 'b' }}"));
    assert!(
        e.contains("produced only later") && e.contains("\"b\""),
        "{e}"
    );
    let e = err(&format!(
        "{IN}layer {{ name: 'self' type: 'Eltwise' bottom: 'x' bottom: 'z' top: 'z' }}"
    ));
    assert!(e.contains("cycle"), "{e}");
    // Unknown blob.
    assert!(err(&format!(
        "{IN}layer {{ name: 'a' type: 'ReLU' bottom: 'nope' top: 'a' }}"
    ))
    .contains("unknown bottom"));
    // Two producers.
    let e = err(&format!("{IN}layer {{ name: 'a' type: 'ReLU' bottom: 'x' top: 'y' }}\nlayer {{ name: 'b' type: 'Sigmoid' bottom: 'x' top: 'y' }}"));
    assert!(e.contains("multiple sources"), "{e}");
    // Unknown layer types: all listed at once.
    let e = infer_shapes(&net(&format!("{IN}layer {{ name: 'a' type: 'Foo' bottom: 'x' top: 'a' }}\nlayer {{ name: 'b' type: 'Bar' bottom: 'a' top: 'b' }}")), &[]).unwrap_err();
    match e {
        CaffeError::Shapes(list) => {
            assert_eq!(list.len(), 2);
            assert!(
                list[0].contains("\"Foo\"") && list[0].contains("line 2"),
                "{list:?}"
            );
            assert!(
                list[1].contains("\"Bar\"") && list[1].contains("line 3"),
                "{list:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Input without a shape, and a wrong override name.
    let no_shape = net("layer { name: 'in' type: 'Input' top: 'x' }\nlayer { name: 'r' type: 'ReLU' bottom: 'x' top: 'x' }");
    let e = infer_shapes(&no_shape, &[]).unwrap_err().to_string();
    assert!(e.contains("--input-shape x="), "{e}");
    assert!(infer_shapes(&no_shape, &[("x".into(), vec![1, 2])]).is_ok());
    let e = infer_shapes(&no_shape, &[("y".into(), vec![1])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no net input named \"y\""), "{e}");
}

#[test]
fn reshape_flatten_slice_crop_rules() {
    let one = |layer: &str| -> Vec<usize> {
        let n = net(&format!(
            "input: 'x' input_shape {{ dim: 2 dim: 8 dim: 3 dim: 4 }}\n{layer}"
        ));
        infer_shapes(&n, &[]).unwrap().blob("y").unwrap().to_vec()
    };
    let rs = |p: &str| {
        one(&format!(
            "layer {{ name: 'r' type: 'Reshape' bottom: 'x' top: 'y' reshape_param {{ {p} }} }}"
        ))
    };
    assert_eq!(rs("shape { dim: 0 dim: -1 }"), [2, 96]);
    assert_eq!(rs("shape { dim: 0 dim: 2 dim: -1 dim: 4 }"), [2, 2, 12, 4]);
    assert_eq!(
        rs("shape { dim: 4 dim: 2 } axis: 1 num_axes: 1"),
        [2, 4, 2, 3, 4]
    );
    assert_eq!(rs("shape { dim: 1 } axis: 1 num_axes: 0"), [2, 1, 8, 3, 4]);
    assert_eq!(rs("shape { dim: -1 } axis: -3"), [2, 8, 12]);
    let fl = |p: &str| {
        one(&format!(
            "layer {{ name: 'f' type: 'Flatten' bottom: 'x' top: 'y' flatten_param {{ {p} }} }}"
        ))
    };
    assert_eq!(fl(""), [2, 96]);
    assert_eq!(fl("axis: 2"), [2, 8, 12]);
    assert_eq!(fl("axis: 1 end_axis: 2"), [2, 24, 4]);
    let ip = one("layer { name: 'i' type: 'InnerProduct' bottom: 'x' top: 'y' inner_product_param { num_output: 5 axis: 2 } }");
    assert_eq!(ip, [2, 8, 5]);
    let n = net("input: 'x' input_shape { dim: 2 dim: 8 dim: 3 dim: 4 }\nlayer { name: 's' type: 'Slice' bottom: 'x' top: 'a' top: 'b' top: 'c' slice_param { slice_point: 1 slice_point: 5 } }");
    let s = infer_shapes(&n, &[]).unwrap();
    assert_eq!(
        (
            s.blob("a").unwrap()[1],
            s.blob("b").unwrap()[1],
            s.blob("c").unwrap()[1]
        ),
        (1, 4, 3)
    );
    let errs = [
        "layer { name: 'r' type: 'Reshape' bottom: 'x' top: 'y' reshape_param { shape { dim: -1 dim: -1 } } }",
        "layer { name: 'r' type: 'Reshape' bottom: 'x' top: 'y' reshape_param { shape { dim: 5 dim: -1 } } }",
        "layer { name: 'r' type: 'Reshape' bottom: 'x' top: 'y' reshape_param { shape { dim: 0 dim: 0 dim: 0 dim: 0 dim: 0 } } }",
        "layer { name: 's' type: 'Slice' bottom: 'x' top: 'y' top: 'z' top: 'w' }",
        "layer { name: 's' type: 'Slice' bottom: 'x' top: 'y' top: 'z' slice_param { slice_point: 8 } }",
        "layer { name: 'f' type: 'Flatten' bottom: 'x' top: 'y' flatten_param { axis: 3 end_axis: 1 } }",
        "layer { name: 'c' type: 'Concat' bottom: 'x' bottom: 'y0' top: 'y' }",
    ];
    for e in errs {
        let text = format!("input: 'x' input_shape {{ dim: 2 dim: 8 dim: 3 dim: 4 }}\ninput: 'y0' input_shape {{ dim: 2 dim: 8 dim: 4 dim: 4 }}\n{e}");
        let n = parse_net(&text, Schema::builtin(), &Default::default());
        let r = n.and_then(|n| infer_shapes(&n, &[]));
        assert!(r.is_err(), "{e}");
    }
}

#[test]
fn deconvolution_groups_and_dilation() {
    let n = net("input: 'x' input_shape { dim: 1 dim: 6 dim: 5 dim: 5 }\n\
                 layer { name: 'd' type: 'Deconvolution' bottom: 'x' top: 'y' convolution_param { num_output: 6 group: 6 kernel_size: 4 stride: 2 pad: 1 bias_term: false } }\n\
                 layer { name: 'e' type: 'Deconvolution' bottom: 'x' top: 'z' convolution_param { num_output: 4 group: 2 kernel_size: 3 dilation: 2 stride: 1 } }");
    let s = infer_shapes(&n, &[]).unwrap();
    assert_eq!(s.blob("y"), Some(&[1, 6, 10, 10][..])); // 2*(5-1) + 4 - 2
    assert_eq!(s.layer("d").unwrap().params, vec![vec![6, 1, 4, 4]]);
    assert_eq!(s.blob("z"), Some(&[1, 4, 9, 9][..])); // (5-1) + (2*2+1)
    assert_eq!(
        s.layer("e").unwrap().params,
        vec![vec![6, 2, 3, 3], vec![4]]
    );
}

#[test]
fn random_weights_follow_the_shapes_and_write_a_caffemodel() {
    let Some(dir) = nets_dir() else { return };
    let (def, s) = shapes(&dir, "cifar10_quick");
    let w = random_weights(&def, &s, 42);
    assert_eq!(w, random_weights(&def, &s, 42));
    assert_ne!(
        w[0].1[0].to_vec::<f32>().unwrap(),
        random_weights(&def, &s, 43)[0].1[0]
            .to_vec::<f32>()
            .unwrap()
    );
    let layers: Vec<tensorfmt_caffe::WeightsLayer> = w
        .iter()
        .map(|(name, blobs)| tensorfmt_caffe::WeightsLayer {
            name: name.clone(),
            type_name: None,
            blobs: blobs
                .iter()
                .map(|t| tensorfmt_caffe::blob_from_tensor(t).unwrap())
                .collect(),
        })
        .collect();
    let bytes = tensorfmt_caffe::encode_weights_model(Some("random"), &layers);
    let mut back =
        tensorfmt_caffe::layer_blobs(&tensorfmt_caffe::read_model(bytes.into()).unwrap()).unwrap();
    for (l, ls) in def.layers.iter().zip(&s.layers) {
        if ls.params.is_empty() {
            continue;
        }
        let blobs = back.take(&l.name).unwrap();
        let dims: Vec<Vec<usize>> = blobs.iter().map(|b| b.dims().to_vec()).collect();
        assert_eq!(dims, ls.params, "{}", l.name);
    }
}
