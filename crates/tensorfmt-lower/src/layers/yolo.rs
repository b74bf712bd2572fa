//! The YOLOv2 Caffe ports' layers: `Reorg` (gklz1982/caffe-yolov2 and its fork
//! BirdeeChen/caffe_yolo_v2, Darknet's `reorg_cpu`) and BirdeeChen's `Region`. OpenCV
//! 4 cannot configure a Caffe `Region` and drops `reorg_param`, so these follow the
//! ports' sources (references in `crates/tensorfmt-py/tests/caffe_refs.py`).

use tensorfmt_core::{Order, Tensor};
use tensorfmt_onnx::proto::{
    attribute_proto::AttributeType, type_proto, AttributeProto, GraphProto, NodeProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// `Reorg` (the ports' `reorg_cpu(bottom, W, H, C, N, stride, reverse, top)`,
/// BirdeeChen `math_functions.cpp:63-86`, Darknet's): without `reverse` the loops run
/// over the input's `(c, h, w)` and read the input as if it were `[C/s², H s, W s]`,
/// so the output (`[N, C s², H/s, W/s]`) is `x.reshape(N, C/s², H, s, W, s)`
/// transposed `[0, 3, 5, 1, 2, 4]` — Darknet's channel order, not ONNX
/// `SpaceToDepth`'s; with `reverse` each input channel `(dy s + dx) C/s² + c` moves to
/// `(c, h s + dy, w s + dx)`: `x.reshape(N, s, s, C/s², H, W)` transposed `[0, 3, 4, 1,
/// 5, 2]`. Reshape, Transpose, Reshape (the batch copied).
pub(crate) fn reorg(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let rp = cx.param().reorg_param.unwrap_or_default();
    let s = rp.stride.unwrap_or(2) as usize;
    let x = ins[0].shape.clone();
    let out = cx.caffe.tops.first().cloned().ok_or("no Caffe shape")?;
    let (n, c, h, w) = (x[0], x[1], x[2], x[3]);
    let (six, perm): ([usize; 6], [usize; 6]) = if rp.reverse() {
        ([n, s, s, c / (s * s), h, w], [0, 3, 4, 1, 5, 2])
    } else {
        ([n, c / (s * s), h, s, w, s], [0, 3, 5, 1, 2, 4])
    };
    let r = cx.reshape_to(&ins[0].name, &x, &six, None)?;
    let t = cx.op(
        "Transpose",
        vec![r],
        vec![attr(
            "perm",
            A::Is(perm.iter().map(|&p| p as i64).collect()),
        )],
    );
    let moved: Vec<usize> = perm.iter().map(|&p| six[p]).collect();
    cx.reshape_to(&t, &moved, &out, Some(&tops[0]))?;
    Ok(vec![out])
}

/// BirdeeChen/caffe_yolo_v2's `Region` (`region_layer.cpp` `Forward_cpu`): Darknet's
/// `flatten` of `[N, A (5 + classes), H W]` to `[N, H W, A (5 + classes)]` (the top
/// keeps the shape `[N, C, H, W]`, its memory in the new order), the logistic on each
/// box's objectness (entry 4) and, with `softmax`, a softmax over its class scores
/// (entries 5 on); x, y, w, h stay raw (the port's `DetectionOutput` or its Python
/// `region_tool.py` decodes them with the anchors).
///
/// The port reads `softmax` into a member it never initialises from `region_param`
/// (undefined); this follows `region_param.softmax` (default false), what the
/// prototxts ask for. It indexes entries 4 and 5 whatever `coords` says: `coords`
/// other than 4 is not lowered.
///
/// Reshape `[N, C, H W]`, Transpose `[0, 2, 1]`, Reshape `[N, H W A, 5 + classes]`,
/// Slice / Sigmoid / Softmax(axis 2) / Concat, Reshape `[N, C, H, W]`.
pub(crate) fn region(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let rp = cx.param().region_param.clone().unwrap_or_default();
    if rp.coords() != 4 {
        return Err(Fail::not_lowered(format!(
            "coords {}: the port's Region reads entries 4 and 5 as if coords were 4",
            rp.coords()
        )));
    }
    let x = ins[0].shape.clone();
    let (n, c, h, w) = (x[0], x[1], x[2], x[3]);
    let size = 5 + rp.classes() as usize;
    let boxes = h * w * rp.boxes_of_each_grid() as usize;
    let r = cx.reshape_to(&ins[0].name, &x, &[n, c, h * w], None)?;
    let t = cx.op(
        "Transpose",
        vec![r],
        vec![attr("perm", A::Is(vec![0, 2, 1]))],
    );
    let rows = cx.reshape_to(&t, &[n, h * w, c], &[n, boxes, size], None)?;
    let part = |cx: &mut LayerCx<'_>, a: i64, b: i64| -> LResult<String> {
        let starts = cx.i64s("starts", vec![a])?;
        let ends = cx.i64s("ends", vec![b])?;
        let axes = cx.i64s("axes", vec![2])?;
        Ok(cx.op("Slice", vec![rows.clone(), starts, ends, axes], vec![]))
    };
    let xywh = part(cx, 0, 4)?;
    let obj = part(cx, 4, 5)?;
    let obj = cx.op("Sigmoid", vec![obj], vec![]);
    let mut pieces = vec![xywh, obj];
    if size > 5 {
        let classes = part(cx, 5, size as i64)?;
        pieces.push(if rp.softmax() {
            cx.op("Softmax", vec![classes], vec![attr("axis", A::I(2))])
        } else {
            classes
        });
    }
    let all = cx.op("Concat", pieces, vec![attr("axis", A::I(2))]);
    cx.reshape_to(&all, &[n, boxes, size], &x, Some(&tops[0]))?;
    Ok(vec![x])
}

/// The body of the NMS loop, built as a graph of its own: nodes, constants, names
/// reserved in the outer graph (subgraph names must not shadow outer ones).
struct Body {
    prefix: String,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
}

impl Body {
    fn name(&mut self, cx: &mut LayerCx<'_>) -> String {
        cx.fresh(&self.prefix)
    }

    fn op(
        &mut self,
        cx: &mut LayerCx<'_>,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> String {
        let out = self.name(cx);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            name: out.clone(),
            op_type: op.to_string(),
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    fn scalar(&mut self, cx: &mut LayerCx<'_>, v: f32) -> LResult<String> {
        let name = self.name(cx);
        let t = Tensor::from_vec(vec![v], Vec::<usize>::new(), Order::RowMajor)?;
        self.inits.push(tensorfmt_onnx::tensor_to_proto(&name, &t)?);
        Ok(name)
    }
}

/// A `ValueInfoProto` of element type `elem` (ONNX's enum: 1 float, 7 int64, 9 bool)
/// and rank `rank` with unnamed dims (`None`: no shape).
fn info(name: &str, elem: i32, rank: Option<usize>) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem,
                shape: rank.map(|r| TensorShapeProto {
                    dim: vec![Default::default(); r],
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

const FLOAT: i32 = 1;
const INT64: i32 = 7;
const BOOL: i32 = 9;

/// The YOLOv2 ports' `DetectionOutput` (gklz1982/caffe-yolov2, BirdeeChen/caffe_yolo_v2
/// `detection_output_layer.cpp`, helpers in `bbox_util.hpp`): Darknet's box decoding
/// and the ports' own NMS, in standard ONNX (a `Loop`, `Compress`; no custom op).
///
/// The bottom `[1, C, side, side]` is read cell by cell as `[side², num_box, 5 +
/// classes]`: objectness `σ(t4)`, class = the first maximum of the softmax of the
/// class scores, `confidence = objectness × its probability`, kept when `>=
/// confidence_threshold` (unset: the ports' 0.01), box `x = (i + σ(t0)) / side`, `y =
/// (j + σ(t1)) / side`, `w = exp(t2) biases[2n] / side`, `h = exp(t3) biases[2n+1] /
/// side`. The ports' NMS is not a greedy NMS by score (ONNX `NonMaxSuppression` cannot
/// express it): in candidate (cell) order, each live box `i` and each later live box
/// `j` whose IoU (of the boxes clipped to [0, 1]) is `>= nms_threshold` remove the one
/// with the lower objectness (`i` on a tie); once `i` is removed it removes nothing
/// more. A `Loop` over the candidates runs that step vectorised over the `j`s. Rows
/// `[0, label, confidence, x, y, w, h]` (centre and size, not corners) in candidate
/// order, `[1, 1, n, 7]` with `n` known at run time; none kept: one row `[0, -1, -1,
/// -1, -1, -1, -1]`, as the ports write.
pub(crate) fn detection_output(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx
        .param()
        .detection_output_param
        .clone()
        .unwrap_or_default();
    let x = ins[0].shape.clone();
    let (c, side) = (x[1], x[2]);
    let classes = p.classes.or(p.num_classes).unwrap_or(20) as usize;
    let boxes = p.num_box() as usize;
    let size = 5 + classes;
    let m = side * side * boxes;
    let thr = p.confidence_threshold.unwrap_or(0.01);
    let nms = p.nms_threshold();
    let out = cx.caffe.tops.first().cloned().ok_or("no Caffe shape")?;
    // Rows in the ports' order: cell (j, i), then box n; kept 4-D, [side, side, boxes,
    // entries], so that the cell and anchor grids broadcast from constants of side and
    // boxes values (not one per row).
    let t = cx.op(
        "Transpose",
        vec![ins[0].name.clone()],
        vec![attr("perm", A::Is(vec![0, 2, 3, 1]))],
    );
    let rows = cx.reshape_to(&t, &[1, side, side, c], &[side, side, boxes, size], None)?;
    let col = |cx: &mut LayerCx<'_>, a: i64, b: i64| -> LResult<String> {
        let starts = cx.i64s("starts", vec![a])?;
        let ends = cx.i64s("ends", vec![b])?;
        let axes = cx.i64s("axes", vec![3])?;
        Ok(cx.op("Slice", vec![rows.clone(), starts, ends, axes], vec![]))
    };
    let (tx, ty, tw, th, to) = (
        col(cx, 0, 1)?,
        col(cx, 1, 2)?,
        col(cx, 2, 3)?,
        col(cx, 3, 4)?,
        col(cx, 4, 5)?,
    );
    let logits = col(cx, 5, size as i64)?;
    let obj = cx.op("Sigmoid", vec![to], vec![]);
    let probs = cx.op("Softmax", vec![logits], vec![attr("axis", A::I(3))]);
    let best = cx.op(
        "ReduceMax",
        vec![probs.clone()],
        vec![attr("axes", A::Is(vec![3])), attr("keepdims", A::I(1))],
    );
    // The first maximum, as class_index_and_score's strict `>` finds it.
    let label = cx.op(
        "ArgMax",
        vec![probs],
        vec![attr("axis", A::I(3)), attr("keepdims", A::I(1))],
    );
    let label = cx.op("Cast", vec![label], vec![attr("to", A::I(FLOAT as i64))]);
    let conf = cx.op("Mul", vec![obj.clone(), best], vec![]);
    let side_c = cx.scalar(side as f32)?;
    let cells: Vec<f32> = (0..side).map(|v| v as f32).collect();
    let gx = cx.f32s("cell_x", cells.clone(), vec![1, side, 1, 1])?;
    let gy = cx.f32s("cell_y", cells, vec![side, 1, 1, 1])?;
    let aw = cx.f32s(
        "anchor_w",
        (0..boxes).map(|n| p.biases[2 * n]).collect(),
        vec![1, 1, boxes, 1],
    )?;
    let ah = cx.f32s(
        "anchor_h",
        (0..boxes).map(|n| p.biases[2 * n + 1]).collect(),
        vec![1, 1, boxes, 1],
    )?;
    let centre = |cx: &mut LayerCx<'_>, g: String, t: String| {
        let s = cx.op("Sigmoid", vec![t], vec![]);
        let a = cx.op("Add", vec![g, s], vec![]);
        cx.op("Div", vec![a, side_c.clone()], vec![])
    };
    let bx = centre(cx, gx, tx);
    let by = centre(cx, gy, ty);
    let extent = |cx: &mut LayerCx<'_>, a: String, t: String| {
        let e = cx.op("Exp", vec![t], vec![]);
        let s = cx.op("Mul", vec![e, a], vec![]);
        cx.op("Div", vec![s, side_c.clone()], vec![])
    };
    let bw = extent(cx, aw, tw);
    let bh = extent(cx, ah, th);
    let zero = cx.scalar(0.0)?;
    let conf_shape = cx.op("Shape", vec![conf.clone()], vec![]);
    let zero_col = cx.op("Expand", vec![zero.clone(), conf_shape], vec![]);
    let table = cx.op(
        "Concat",
        vec![zero_col, label, conf.clone(), bx, by, bw, bh, obj],
        vec![attr("axis", A::I(3))],
    );
    let table = cx.reshape_to(&table, &[side, side, boxes, 8], &[m, 8], None)?;
    // Candidates: confidence >= threshold, in row order.
    let thr_c = cx.scalar(thr)?;
    let keep = cx.op("GreaterOrEqual", vec![conf, thr_c], vec![]);
    let flat_m = cx.i64s("shape", vec![m as i64])?;
    let keep = cx.op("Reshape", vec![keep, flat_m], vec![]);
    let cand = cx.op("Compress", vec![table, keep], vec![attr("axis", A::I(0))]);
    // Per candidate: x, y, w, h, objectness as [K] vectors.
    let split = cx.i64s("split", vec![3, 1, 1, 1, 1, 1])?;
    let base = format!("{}/cand", cx.name());
    let parts: Vec<String> = (0..6).map(|_| cx.fresh(&base)).collect();
    cx.op_to_many(
        "Split",
        vec![cand.clone(), split],
        parts.clone(),
        vec![attr("axis", A::I(1))],
    );
    let flat_k = cx.i64s("shape", vec![-1])?;
    let vecs: Vec<String> = parts[1..]
        .iter()
        .map(|v| cx.op("Reshape", vec![v.clone(), flat_k.clone()], vec![]))
        .collect();
    let (cxv, cyv, cwv, chv, objv) = (&vecs[0], &vecs[1], &vecs[2], &vecs[3], &vecs[4]);
    // setNormalizedBBox: corners clipped to [0, 1], the size 0 for an inverted box.
    let half = cx.scalar(0.5)?;
    let one = cx.scalar(1.0)?;
    let corner = |cx: &mut LayerCx<'_>, c: &str, e: &str, sub: bool, clip: &str| {
        let h = cx.op("Mul", vec![e.to_string(), half.clone()], vec![]);
        let v = cx.op(
            if sub { "Sub" } else { "Add" },
            vec![c.to_string(), h],
            vec![],
        );
        cx.op(
            if sub { "Max" } else { "Min" },
            vec![v, clip.to_string()],
            vec![],
        )
    };
    let xmin = corner(cx, cxv, cwv, true, &zero);
    let xmax = corner(cx, cxv, cwv, false, &one);
    let ymin = corner(cx, cyv, chv, true, &zero);
    let ymax = corner(cx, cyv, chv, false, &one);
    let wdt = cx.op("Sub", vec![xmax.clone(), xmin.clone()], vec![]);
    let hgt = cx.op("Sub", vec![ymax.clone(), ymin.clone()], vec![]);
    let inv_x = cx.op("Less", vec![xmax.clone(), xmin.clone()], vec![]);
    let inv_y = cx.op("Less", vec![ymax.clone(), ymin.clone()], vec![]);
    let inverted = cx.op("Or", vec![inv_x, inv_y], vec![]);
    let area = cx.op("Mul", vec![wdt, hgt], vec![]);
    let area = cx.op("Where", vec![inverted, zero.clone(), area], vec![]);
    // Loop state: alive [K] (bool), and the candidates' corners, sizes, objectness and
    // indices passed through unchanged (explicit state, not outer-scope reads).
    let count = cx.op("Shape", vec![objv.clone()], vec![]);
    let alive0 = {
        let mut a = cx.op("ConstantOfShape", vec![count.clone()], vec![]);
        a = cx.op("Cast", vec![a], vec![attr("to", A::I(BOOL as i64))]);
        // ConstantOfShape's default value is 0: negate for "all alive".
        cx.op("Not", vec![a], vec![])
    };
    let i64_zero = cx.constant("i0", vec![0i64], vec![])?;
    let i64_one = cx.constant("i1", vec![1i64], vec![])?;
    let scalar_shape = cx.i64s("scalar_shape", vec![])?;
    let k_scalar = cx.op("Reshape", vec![count, scalar_shape], vec![]);
    let idx = cx.op("Range", vec![i64_zero, k_scalar.clone(), i64_one], vec![]);

    let mut b = Body {
        prefix: format!("{}/nms_step", cx.name()),
        nodes: vec![],
        inits: vec![],
    };
    let names: Vec<String> = (0..10).map(|_| b.name(cx)).collect();
    let (it, cond_in, alive, bxmin, bymin, bxmax, bymax, barea, bobj, bidx) = (
        &names[0], &names[1], &names[2], &names[3], &names[4], &names[5], &names[6], &names[7],
        &names[8], &names[9],
    );
    let g = |b: &mut Body, cx: &mut LayerCx<'_>, v: &str| {
        b.op(cx, "Gather", &[v, it], vec![attr("axis", A::I(0))])
    };
    let (xi0, yi0, xi1, yi1, ai, oi, ali) = (
        g(&mut b, cx, bxmin),
        g(&mut b, cx, bymin),
        g(&mut b, cx, bxmax),
        g(&mut b, cx, bymax),
        g(&mut b, cx, barea),
        g(&mut b, cx, bobj),
        g(&mut b, cx, alive),
    );
    // JaccardOverlap(i, j): positive intersection width and height, else 0.
    let lo_x = b.op(cx, "Max", &[&xi0, bxmin], vec![]);
    let hi_x = b.op(cx, "Min", &[&xi1, bxmax], vec![]);
    let iw = b.op(cx, "Sub", &[&hi_x, &lo_x], vec![]);
    let lo_y = b.op(cx, "Max", &[&yi0, bymin], vec![]);
    let hi_y = b.op(cx, "Min", &[&yi1, bymax], vec![]);
    let ih = b.op(cx, "Sub", &[&hi_y, &lo_y], vec![]);
    let bzero = b.scalar(cx, 0.0)?;
    let pos_w = b.op(cx, "Greater", &[&iw, &bzero], vec![]);
    let pos_h = b.op(cx, "Greater", &[&ih, &bzero], vec![]);
    let meets = b.op(cx, "And", &[&pos_w, &pos_h], vec![]);
    let inter = b.op(cx, "Mul", &[&iw, &ih], vec![]);
    let sum = b.op(cx, "Add", &[&ai, barea], vec![]);
    let union = b.op(cx, "Sub", &[&sum, &inter], vec![]);
    let iou = b.op(cx, "Div", &[&inter, &union], vec![]);
    let bthr = b.scalar(cx, nms)?;
    let high = b.op(cx, "GreaterOrEqual", &[&iou, &bthr], vec![]);
    let overlaps = b.op(cx, "And", &[&meets, &high], vec![]);
    let later = b.op(cx, "Greater", &[bidx, it], vec![]);
    let live_later = b.op(cx, "And", &[alive, &later], vec![]);
    let cand_j = b.op(cx, "And", &[&live_later, &overlaps], vec![]);
    // obj_i > obj_j: j goes; otherwise i goes, and i removes nothing after that j.
    let beats = b.op(cx, "Greater", &[&oi, bobj], vec![]);
    let not_beats = b.op(cx, "Not", &[&beats], vec![]);
    let stopper = b.op(cx, "And", &[&cand_j, &not_beats], vec![]);
    let stopper_f = b.op(
        cx,
        "Cast",
        &[&stopper],
        vec![attr("to", A::I(FLOAT as i64))],
    );
    let any = b.op(
        cx,
        "ReduceMax",
        &[&stopper_f],
        vec![attr("keepdims", A::I(0))],
    );
    let first = b.op(
        cx,
        "ArgMax",
        &[&stopper_f],
        vec![attr("axis", A::I(0)), attr("keepdims", A::I(0))],
    );
    let stops = b.op(cx, "Greater", &[&any, &bzero], vec![]);
    let before = b.op(cx, "Less", &[bidx, &first], vec![]);
    let no_stop = b.op(cx, "Not", &[&stops], vec![]);
    let in_reach = b.op(cx, "Or", &[&no_stop, &before], vec![]);
    let kill = b.op(cx, "And", &[&cand_j, &beats], vec![]);
    let kill = b.op(cx, "And", &[&kill, &in_reach], vec![]);
    let kill = b.op(cx, "And", &[&kill, &ali], vec![]);
    let self_goes = b.op(cx, "And", &[&ali, &stops], vec![]);
    let is_i = b.op(cx, "Equal", &[bidx, it], vec![]);
    let kill_self = b.op(cx, "And", &[&is_i, &self_goes], vec![]);
    let gone = b.op(cx, "Or", &[&kill, &kill_self], vec![]);
    let stays = b.op(cx, "Not", &[&gone], vec![]);
    let alive_out = b.op(cx, "And", &[alive, &stays], vec![]);
    let passthrough: Vec<(String, i32)> = [
        (cond_in.clone(), BOOL),
        (bxmin.clone(), FLOAT),
        (bymin.clone(), FLOAT),
        (bxmax.clone(), FLOAT),
        (bymax.clone(), FLOAT),
        (barea.clone(), FLOAT),
        (bobj.clone(), FLOAT),
        (bidx.clone(), INT64),
    ]
    .into();
    let mut outs = Vec::new();
    for (v, elem) in &passthrough {
        let o = b.op(cx, "Identity", &[v], vec![]);
        outs.push((o, *elem));
    }
    let mut outputs = vec![
        info(&outs[0].0, BOOL, Some(0)),
        info(&alive_out, BOOL, Some(1)),
    ];
    outputs.extend(outs[1..].iter().map(|(o, e)| info(o, *e, Some(1))));
    let mut inputs = vec![
        info(it, INT64, Some(0)),
        info(cond_in, BOOL, Some(0)),
        info(alive, BOOL, Some(1)),
    ];
    inputs.extend(passthrough[1..].iter().map(|(v, e)| info(v, *e, Some(1))));
    let body = GraphProto {
        node: b.nodes,
        name: b.prefix.clone(),
        initializer: b.inits,
        input: inputs,
        output: outputs,
        ..Default::default()
    };
    let body_attr = AttributeProto {
        name: "body".into(),
        r#type: AttributeType::Graph as i32,
        g: Some(body),
        ..Default::default()
    };
    let base = format!("{}/nms", cx.name());
    let loop_outs: Vec<String> = (0..8).map(|_| cx.fresh(&base)).collect();
    cx.op_to_many(
        "Loop",
        vec![
            k_scalar,
            String::new(),
            alive0,
            xmin,
            ymin,
            xmax,
            ymax,
            area,
            objv.clone(),
            idx,
        ],
        loop_outs.clone(),
        vec![body_attr],
    );
    // Kept: alive and objectness > 0 (the ports' last test), rows without objectness.
    let positive = cx.op("Greater", vec![objv.clone(), zero], vec![]);
    let kept = cx.op("And", vec![loop_outs[0].clone(), positive], vec![]);
    let rows7 = {
        let starts = cx.i64s("starts", vec![0])?;
        let ends = cx.i64s("ends", vec![7])?;
        let axes = cx.i64s("axes", vec![1])?;
        cx.op("Slice", vec![cand, starts, ends, axes], vec![])
    };
    let kept_rows = cx.op("Compress", vec![rows7, kept], vec![attr("axis", A::I(0))]);
    // None kept: the ports' one row [0, -1, ...].
    let none = cx.f32s(
        "no_detection",
        vec![0.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0],
        vec![1, 7],
    )?;
    let padded = cx.op(
        "Concat",
        vec![kept_rows.clone(), none],
        vec![attr("axis", A::I(0))],
    );
    let n_kept = cx.op(
        "Shape",
        vec![kept_rows],
        vec![attr("start", A::I(0)), attr("end", A::I(1))],
    );
    let at_least_one = cx.i64s("one", vec![1])?;
    let n_rows = cx.op("Max", vec![n_kept, at_least_one], vec![]);
    let starts = cx.i64s("starts", vec![0])?;
    let axes = cx.i64s("axes", vec![0])?;
    let rows_out = cx.op("Slice", vec![padded, starts, n_rows, axes], vec![]);
    let shape4 = cx.i64s("shape", vec![1, 1, -1, 7])?;
    cx.op_to("Reshape", vec![rows_out, shape4], &tops[0], vec![]);
    // The row count is known only at run time: Caffe's shape is a bound.
    let dim = cx.fresh("detections");
    cx.g.dynamic.insert(tops[0].clone(), vec![(2, dim)]);
    Ok(vec![out])
}
