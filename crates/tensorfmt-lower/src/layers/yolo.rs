//! The YOLOv2 Caffe ports' layers: `Reorg` (gklz1982/caffe-yolov2 and its fork
//! BirdeeChen/caffe_yolo_v2, Darknet's `reorg_cpu`) and BirdeeChen's `Region`. OpenCV
//! 4 cannot configure a Caffe `Region` and drops `reorg_param`, so these follow the
//! ports' sources (references in `crates/tensorfmt-py/tests/caffe_refs.py`).

use super::LayerCx;
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
