//! Issue 30's YOLOv2, MVN, Interp and recurrent lowerings: the emitted structure and
//! the bad-input cases (shapes that disagree: an error naming the layer and the two
//! numbers, nothing lowered). The numbers themselves are checked in Python against
//! real Caffe, OpenCV 4 and the ports' definitions
//! (`crates/tensorfmt-py/tests/test_caffe_yolo_mvn_recurrent.py`).

use std::collections::HashMap;

use prost::Message;
use tensorfmt_caffe::{parse_net, Schema};
use tensorfmt_core::{Order, Tensor};
use tensorfmt_lower::{lower, LowerError, LowerOptions, Lowered};
use tensorfmt_onnx::proto::ModelProto;

type Blobs = HashMap<String, Vec<Tensor>>;

fn t(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    Tensor::from_vec(
        (0..n).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect(),
        dims.to_vec(),
        Order::RowMajor,
    )
    .unwrap()
}

fn lower_text(
    text: &str,
    blobs: &[(&str, Vec<Tensor>)],
    opts: &LowerOptions,
) -> Result<Lowered, String> {
    let net = parse_net(text, Schema::builtin(), &Default::default()).map_err(|e| e.to_string())?;
    let mut b: Blobs = blobs
        .iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect();
    lower(&net, &mut b, opts).map_err(|e: LowerError| e.to_string())
}

fn ok(text: &str, blobs: &[(&str, Vec<Tensor>)]) -> Lowered {
    lower_text(text, blobs, &Default::default()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The error of lowering `text`, which must name every piece of `needles`.
fn err(text: &str, blobs: &[(&str, Vec<Tensor>)], needles: &[&str]) -> String {
    let e = lower_text(text, blobs, &Default::default()).expect_err(text);
    for n in needles {
        assert!(e.contains(n), "{e:?} lacks {n:?}");
    }
    e
}

fn count(l: &Lowered, op: &str) -> usize {
    l.model
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .filter(|n| n.op_type == op)
        .count()
}

fn input(name: &str, dims: &[usize]) -> String {
    let d: Vec<String> = dims.iter().map(|d| format!("dim: {d}")).collect();
    format!("input: '{name}' input_shape {{ {} }}\n", d.join(" "))
}

// ---- Reorg, Region ----

#[test]
fn reorg_is_reshape_transpose_reshape_with_the_ports_stride() {
    let l = ok(
        &(input("x", &[1, 8, 6, 4])
            + "layer { name: 'r' type: 'Reorg' bottom: 'x' top: 'r' reorg_param { stride: 2 } }"),
        &[],
    );
    assert_eq!(l.shapes["r"], [1, 32, 3, 2]);
    let g = l.model.graph.as_ref().unwrap();
    let ops: Vec<&str> = g.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["Reshape", "Transpose", "Reshape"]);
    assert_eq!(g.node[1].attribute[0].ints, [0, 3, 5, 1, 2, 4]);
    let l = ok(
        &(input("x", &[1, 18, 2, 3]) + "layer { name: 'r' type: 'Reorg' bottom: 'x' top: 'r' reorg_param { stride: 3 reverse: true } }"),
        &[],
    );
    assert_eq!(l.shapes["r"], [1, 2, 6, 9]);
    // An unset stride is 2 (choasup's default, OpenCV's).
    let l = ok(
        &(input("x", &[1, 4, 2, 2]) + "layer { name: 'r' type: 'Reorg' bottom: 'x' top: 'r' }"),
        &[],
    );
    assert_eq!(l.shapes["r"], [1, 16, 1, 1]);
}

#[test]
fn reorg_stride_must_divide_the_map() {
    err(
        &(input("x", &[1, 8, 13, 12])
            + "layer { name: 'r' type: 'Reorg' bottom: 'x' top: 'r' reorg_param { stride: 2 } }"),
        &[],
        &["\"r\"", "Reorg", "stride 2", "height 13"],
    );
    err(
        &(input("x", &[1, 8, 12, 12]) + "layer { name: 'r' type: 'Reorg' bottom: 'x' top: 'r' reorg_param { stride: 3 reverse: true } }"),
        &[],
        &["\"r\"", "8 input channels", "stride² = 9"],
    );
    err(
        &(input("x", &[1, 8, 12, 12])
            + "layer { name: 'r' type: 'Reorg' bottom: 'x' top: 'r' reorg_param { stride: 0 } }"),
        &[],
        &["\"r\"", "stride must be positive"],
    );
}

#[test]
fn region_channels_must_be_boxes_times_entries() {
    let text = |c: usize, coords: u32| {
        input("x", &[1, c, 3, 3])
            + &format!("layer {{ name: 'reg' type: 'Region' bottom: 'x' top: 'y' region_param {{ classes: 20 coords: {coords} boxes_of_each_grid: 5 softmax: true }} }}")
    };
    let l = ok(&text(125, 4), &[]);
    assert_eq!(l.shapes["y"], [1, 125, 3, 3]);
    assert_eq!((count(&l, "Sigmoid"), count(&l, "Softmax")), (1, 1));
    err(
        &text(120, 4),
        &[],
        &["\"reg\"", "Region", "120 input channels", "= 125"],
    );
    // coords other than 4: the port still reads entries 4 and 5.
    let e = err(&text(130, 5), &[], &["reg (Region: coords 5"]);
    assert!(e.contains("unsupported"), "{e}");
}

// ---- the YOLO ports' DetectionOutput ----

const BIASES: &str = "biases: 1 biases: 2 biases: 3 biases: 4";

fn yolo_det(shape: &[usize], params: &str) -> String {
    input("x", shape) + &format!("layer {{ name: 'det' type: 'DetectionOutput' bottom: 'x' top: 'det' detection_output_param {{ {params} }} }}")
}

#[test]
fn yolo_detection_output_is_lowered_with_a_loop_and_a_runtime_row_count() {
    let l = ok(
        &yolo_det(
            &[1, 2 * 8, 3, 3],
            &format!("side: 3 classes: 3 num_box: 2 {BIASES}"),
        ),
        &[],
    );
    assert!(l.stopped.is_empty());
    assert_eq!((count(&l, "Loop"), count(&l, "NonMaxSuppression")), (1, 0));
    let g = l.model.graph.as_ref().unwrap();
    use tensorfmt_onnx::proto::tensor_shape_proto::dimension::Value as Dim;
    let Some(tensorfmt_onnx::proto::type_proto::Value::TensorType(tt)) =
        g.output[0].r#type.as_ref().and_then(|t| t.value.clone())
    else {
        panic!()
    };
    let dims: Vec<Option<Dim>> = tt.shape.unwrap().dim.into_iter().map(|d| d.value).collect();
    assert_eq!(dims[2], Some(Dim::DimParam("detections".into())));
    assert_eq!(dims[3], Some(Dim::DimValue(7)));
    // The model round-trips through protobuf with its loop body.
    let bytes = l.model.encode_to_vec();
    let back = ModelProto::decode(bytes.as_slice()).unwrap();
    let lp = back
        .graph
        .unwrap()
        .node
        .into_iter()
        .find(|n| n.op_type == "Loop")
        .unwrap();
    assert!(lp.attribute[0].g.as_ref().unwrap().node.len() > 20);
    // SSD's DetectionOutput (three bottoms, num_classes) keeps SSD's lowering.
    let ssd = input("loc", &[1, 16]) + &input("conf", &[1, 8]) + &input("prior", &[1, 2, 16])
        + "layer { name: 'd' type: 'DetectionOutput' bottom: 'loc' bottom: 'conf' bottom: 'prior' top: 'd' detection_output_param { num_classes: 2 } }";
    let s = ok(&ssd, &[]);
    assert_eq!((count(&s, "Loop"), count(&s, "NonMaxSuppression")), (0, 1));
}

#[test]
fn yolo_detection_output_bad_input_names_the_numbers() {
    err(
        &yolo_det(
            &[1, 2 * 8, 5, 5],
            &format!("side: 3 classes: 3 num_box: 2 {BIASES}"),
        ),
        &[],
        &["\"det\"", "side 3", "5 x 5"],
    );
    err(
        &yolo_det(
            &[2, 2 * 8, 3, 3],
            &format!("side: 3 classes: 3 num_box: 2 {BIASES}"),
        ),
        &[],
        &["\"det\"", "batch of 1", "got 2"],
    );
    err(
        &yolo_det(
            &[1, 15, 3, 3],
            &format!("side: 3 classes: 3 num_box: 2 {BIASES}"),
        ),
        &[],
        &["\"det\"", "15 input channels", "= 16"],
    );
    err(
        &yolo_det(
            &[1, 2 * 8, 3, 3],
            "side: 3 classes: 3 num_box: 2 biases: 1 biases: 2 biases: 3",
        ),
        &[],
        &["\"det\"", "3 biases", "needs 4"],
    );
    // What would run to an empty ArgMax or NaN rows (the ports check none of it).
    err(
        &yolo_det(
            &[1, 10, 3, 3],
            &format!("side: 3 classes: 0 num_box: 2 {BIASES}"),
        ),
        &[],
        &["\"det\"", "classes 0"],
    );
    err(
        &yolo_det(
            &[1, 2 * 8, 3, 3],
            &format!("side: 3 classes: 3 num_box: 2 nms_threshold: nan {BIASES}"),
        ),
        &[],
        &["\"det\"", "nms_threshold NaN"],
    );
    err(
        &yolo_det(
            &[1, 2 * 8, 3, 3],
            "side: 3 classes: 3 num_box: 2 biases: 1 biases: inf biases: 3 biases: 4",
        ),
        &[],
        &["\"det\"", "bias inf"],
    );
    // A dynamic batch: the ports take one image.
    let e = lower_text(
        &yolo_det(
            &[1, 2 * 8, 3, 3],
            &format!("side: 3 classes: 3 num_box: 2 {BIASES}"),
        ),
        &[],
        &LowerOptions {
            dynamic_batch: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.contains("--dynamic-batch") && e.contains("batch of 1"),
        "{e}"
    );
}

// ---- MVN, Interp ----

#[test]
fn mvn_reduces_over_planes_or_samples_and_adds_eps_after_the_root() {
    let l = ok(
        &(input("x", &[2, 3, 4, 5])
            + "layer { name: 'm' type: 'MVN' bottom: 'x' top: 'm' mvn_param { eps: 0.5 } }"),
        &[],
    );
    let g = l.model.graph.as_ref().unwrap();
    let ops: Vec<&str> = g.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(
        ops,
        [
            "ReduceMean",
            "Sub",
            "Mul",
            "ReduceMean",
            "Sqrt",
            "Add",
            "Div"
        ]
    );
    assert_eq!(g.node[0].attribute[0].ints, [2, 3]);
    let l = ok(&(input("x", &[2, 3, 4]) + "layer { name: 'm' type: 'MVN' bottom: 'x' top: 'm' mvn_param { across_channels: true normalize_variance: false } }"), &[]);
    let g = l.model.graph.as_ref().unwrap();
    assert_eq!(g.node.len(), 2);
    assert_eq!(g.node[0].attribute[0].ints, [1, 2]);
    err(
        &(input("x", &[1, 2, 3, 4, 5]) + "layer { name: 'm' type: 'MVN' bottom: 'x' top: 'm' }"),
        &[],
        &["\"m\"", "5 axes", "at most 4"],
    );
}

#[test]
fn interp_crops_then_resizes() {
    let l = ok(
        &(input("x", &[1, 2, 5, 7]) + "layer { name: 'i' type: 'Interp' bottom: 'x' top: 'y' interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -1 } }"),
        &[],
    );
    assert_eq!(l.shapes["y"], [1, 2, 5, 9]);
    assert_eq!((count(&l, "Slice"), count(&l, "Resize")), (1, 1));
    let l = ok(&(input("x", &[1, 2, 5, 7]) + "layer { name: 'i' type: 'Interp' bottom: 'x' top: 'y' interp_param { shrink_factor: 2 } }"), &[]);
    assert_eq!(l.shapes["y"], [1, 2, 3, 4]);
    err(
        &(input("x", &[1, 2, 5, 7]) + "layer { name: 'i' type: 'Interp' bottom: 'x' top: 'y' interp_param { zoom_factor: 2 pad_beg: -3 pad_end: -3 } }"),
        &[],
        &["\"i\"", "cropped to nothing"],
    );
}

// ---- LSTM, RNN ----

fn lstm_text(x: &[usize], cont: &[usize], extra: &str, params: &str) -> String {
    input("x", x) + &input("cont", cont) + extra
        + &format!("layer {{ name: 'lstm' type: 'LSTM' bottom: 'x' bottom: 'cont' {} top: 'h' {} recurrent_param {{ {params} }} }}",
            if extra.contains("'h0'") { "bottom: 'h0' bottom: 'c0'" } else { "" },
            if params.contains("expose_hidden") { "top: 'hT' top: 'cT'" } else { "" })
}

fn lstm_blobs(h: usize, d: usize) -> Vec<Tensor> {
    vec![t(&[4 * h, d]), t(&[4 * h]), t(&[4 * h, h])]
}

#[test]
fn lstm_unrolls_one_onnx_lstm_per_step() {
    let l = ok(
        &lstm_text(&[5, 3, 2, 2], &[5, 3], "", "num_output: 4"),
        &[("lstm", lstm_blobs(4, 4))],
    );
    assert_eq!(l.shapes["h"], [5, 3, 4]);
    assert_eq!((count(&l, "LSTM"), count(&l, "Mul")), (5, 10));
    let g = l.model.graph.as_ref().unwrap();
    let w = g.initializer.iter().find(|i| i.name == "lstm/W").unwrap();
    assert_eq!(w.dims, [1, 16, 4]);
    // expose_hidden: h_T and c_T tops, the states read from h0 / c0.
    let hidden = input("h0", &[1, 3, 4]) + &input("c0", &[1, 3, 4]);
    let l = ok(
        &lstm_text(
            &[2, 3, 4],
            &[2, 3],
            &hidden,
            "num_output: 4 expose_hidden: true",
        ),
        &[("lstm", lstm_blobs(4, 4))],
    );
    assert_eq!(
        (l.shapes["hT"].clone(), l.shapes["cT"].clone()),
        (vec![1, 3, 4], vec![1, 3, 4])
    );
}

#[test]
fn rnn_is_plain_gemm_and_tanh_steps() {
    let text = input("x", &[4, 2, 3]) + &input("cont", &[4, 2])
        + "layer { name: 'rnn' type: 'RNN' bottom: 'x' bottom: 'cont' top: 'o' recurrent_param { num_output: 5 } }";
    let blobs = vec![t(&[5, 3]), t(&[5]), t(&[5, 5]), t(&[5, 5]), t(&[5])];
    let l = ok(&text, &[("rnn", blobs)]);
    assert_eq!(l.shapes["o"], [4, 2, 5]);
    assert_eq!(
        (count(&l, "RNN"), count(&l, "Gemm"), count(&l, "Tanh")),
        (0, 6, 5)
    );
}

#[test]
fn recurrent_bad_input_names_the_layer_and_the_shapes() {
    let blobs = [("lstm", lstm_blobs(4, 4))];
    // cont not [T, N].
    err(
        &lstm_text(&[5, 3, 4], &[5, 2], "", "num_output: 4"),
        &blobs,
        &["\"lstm\"", "LSTM", "cont [5, 2]", "[T, N] = [5, 3]"],
    );
    err(
        &lstm_text(&[5, 3, 4], &[5, 3, 1], "", "num_output: 4"),
        &blobs,
        &["\"lstm\"", "cont [5, 3, 1]"],
    );
    // x without the stream axis.
    err(
        &lstm_text(&[5], &[5, 1], "", "num_output: 4"),
        &blobs,
        &["\"lstm\"", "at least 2 axes"],
    );
    // Initial states of the wrong size.
    let hidden = input("h0", &[1, 3, 5]) + &input("c0", &[1, 3, 4]);
    err(
        &lstm_text(
            &[2, 3, 4],
            &[2, 3],
            &hidden,
            "num_output: 4 expose_hidden: true",
        ),
        &blobs,
        &["\"lstm\"", "h_0 [1, 3, 5]", "[1, 3, 4]"],
    );
    // num_output 0, and a blob of the wrong shape.
    err(
        &lstm_text(&[2, 3, 4], &[2, 3], "", "num_output: 0"),
        &blobs,
        &["\"lstm\"", "num_output must be positive"],
    );
    err(
        &lstm_text(&[2, 3, 4], &[2, 3], "", "num_output: 4"),
        &[("lstm", vec![t(&[16, 5]), t(&[16]), t(&[16, 4])])],
        &["lstm", "shape is 16 5"],
    );
    // A static input whose first axis is not N.
    let st = input("xs", &[2, 6]);
    let text = input("x", &[2, 3, 4]) + &input("cont", &[2, 3]) + &st
        + "layer { name: 'lstm' type: 'LSTM' bottom: 'x' bottom: 'cont' bottom: 'xs' top: 'h' recurrent_param { num_output: 4 } }";
    err(&text, &blobs, &["\"lstm\"", "static input [2, 6]", "N = 3"]);
    // More steps than are unrolled.
    let long = lstm_text(&[20_000, 1, 1], &[20_000, 1], "", "num_output: 1");
    err(
        &long,
        &[("lstm", lstm_blobs(1, 1))],
        &["\"lstm\"", "20000 time steps", "16384"],
    );
    // --dynamic-batch makes T (axis 0) symbolic: the unrolled steps cannot follow.
    let e = lower_text(
        &lstm_text(&[2, 3, 4], &[2, 3], "", "num_output: 4"),
        &blobs,
        &LowerOptions {
            dynamic_batch: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.contains("--dynamic-batch") && e.contains("lstm"), "{e}");
}

// ---- ONNX attributes with value 0 are written ----

#[test]
fn zero_valued_attributes_survive_encoding() {
    // Concat along axis 0 and AVE pooling's count_include_pad 0: proto3 would drop the
    // zero, and OpenCV's ONNX importer refuses an attribute without its value.
    let text = input("x", &[1, 2, 5, 5])
        + "layer { name: 'c' type: 'Concat' bottom: 'x' bottom: 'x' top: 'c' concat_param { axis: 0 } }
           layer { name: 'p' type: 'Pooling' bottom: 'c' top: 'p' pooling_param { pool: AVE kernel_size: 3 pad: 1 } }";
    let l = ok(&text, &[]);
    let back = ModelProto::decode(l.model.encode_to_vec().as_slice()).unwrap();
    let g = back.graph.unwrap();
    let attr = |op: &str, name: &str| {
        g.node
            .iter()
            .find(|n| n.op_type == op)
            .unwrap()
            .attribute
            .iter()
            .find(|a| a.name == name)
            .unwrap()
            .i
    };
    assert_eq!(attr("Concat", "axis"), Some(0));
    assert_eq!(attr("AveragePool", "count_include_pad"), Some(0));
}

// ---- hostile sizes: no constant grows with the input, names cost O(1) ----

#[test]
fn huge_maps_and_batches_make_no_huge_constants() {
    // 2000 x 2000 cells of 5 boxes: 2e7 rows, whose grids would be 400 MB of constants.
    let l = ok(&yolo_det(&[1, 30, 2000, 2000], "side: 2000 classes: 1 num_box: 5 biases: 1 biases: 1 biases: 1 biases: 1 biases: 1 biases: 1 biases: 1 biases: 1 biases: 1 biases: 1"), &[]);
    assert!(
        l.model.encoded_len() < 1 << 20,
        "{} bytes",
        l.model.encoded_len()
    );
    // 2^24 streams of 4 hidden units: a stored zero state would be 256 MB.
    let text = lstm_text(&[2, 1 << 24, 1], &[2, 1 << 24], "", "num_output: 4");
    let l = ok(&text, &[("lstm", lstm_blobs(4, 1))]);
    assert!(
        l.model.encoded_len() < 1 << 20,
        "{} bytes",
        l.model.encoded_len()
    );
}

#[test]
fn unrolling_costs_linear_time() {
    // Many values of one base name (a Mul per step): each fresh name is O(1).
    let time = |t: usize| {
        let text = lstm_text(&[t, 1, 1], &[t, 1], "", "num_output: 1");
        let start = std::time::Instant::now();
        let l = ok(&text, &[("lstm", lstm_blobs(1, 1))]);
        assert_eq!(count(&l, "LSTM"), t);
        start.elapsed().as_secs_f64()
    };
    let (small, big) = (time(500), time(4000));
    assert!(
        big < 8.0 * small.max(0.05) + 1.0,
        "500 steps {small:.3}s, 4000 steps {big:.3}s"
    );
}

/// Mutations of a net holding every layer of this file go through the fuzz target's
/// body: a model or an error, never a panic, in bounded time.
#[test]
fn mutated_nets_never_panic() {
    let base = input("data", &[1, 24, 4, 4])
        + &input("x", &[3, 2, 4])
        + &input("cont", &[3, 2])
        + "layer { name: 'm' type: 'MVN' bottom: 'data' top: 'm' mvn_param { across_channels: true eps: 0.5 } }
layer { name: 'i' type: 'Interp' bottom: 'm' top: 'i' interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -1 } }
layer { name: 'r' type: 'Reorg' bottom: 'data' top: 'r' reorg_param { stride: 2 } }
layer { name: 'g' type: 'Region' bottom: 'data' top: 'g' region_param { classes: 3 coords: 4 boxes_of_each_grid: 3 softmax: true } }
layer { name: 'det' type: 'DetectionOutput' bottom: 'data' top: 'det' detection_output_param { side: 4 classes: 3 num_box: 3 biases: 1 biases: 2 biases: 3 biases: 4 biases: 5 biases: 6 } }
layer { name: 'l' type: 'LSTM' bottom: 'x' bottom: 'cont' top: 'h' recurrent_param { num_output: 3 } }
layer { name: 'n' type: 'RNN' bottom: 'x' bottom: 'cont' top: 'o' recurrent_param { num_output: 2 } }
";
    use tensorfmt_lower::fuzzing::prototxt_to_onnx;
    assert!(prototxt_to_onnx(&base), "the unmutated net converts");
    const TOKENS: [&str; 10] = [
        "{",
        "}",
        "0",
        "-1",
        "4294967296",
        "dim: 0",
        "stride: 3",
        "expose_hidden: true",
        "reverse: true",
        "side: 2",
    ];
    let mut seed = 0x5eed_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let start = std::time::Instant::now();
    for _ in 0..150 {
        let mut t = base.clone();
        for _ in 0..(1 + next() % 3) {
            let at = (next() as usize) % (t.len() + 1);
            if next() % 2 == 0 {
                t.insert_str(at, TOKENS[(next() as usize) % TOKENS.len()]);
            } else {
                let end = (at + (next() as usize) % 24).min(t.len());
                t.replace_range(at..end, "");
            }
        }
        prototxt_to_onnx(&t);
    }
    assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
}

#[test]
fn mvn_eps_must_be_finite() {
    for eps in ["nan", "inf"] {
        err(
            &(input("x", &[1, 3, 2, 2])
                + &format!(
                    "layer {{ name: 'm' type: 'MVN' bottom: 'x' top: 'm' mvn_param {{ eps: {eps} }} }}"
                )),
            &[],
            &["\"m\"", "mvn_param.eps must be finite"],
        );
    }
}
