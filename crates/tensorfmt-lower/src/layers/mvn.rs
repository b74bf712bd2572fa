//! BVLC `MVN` (mean-variance normalization).

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::LResult;

type Out = LResult<Vec<Vec<usize>>>;

/// `MVN` (BVLC `mvn_layer.cpp:30-71`): `x - mean` over each `(n, c)` plane, or over
/// each `n` with `across_channels`; with `normalize_variance` divided by
/// `sqrt(mean((x - mean)²)) + eps`, eps added after the square root as Caffe adds it
/// (ONNX `MeanVarianceNormalization` puts a fixed epsilon inside the root, OpenCV 4
/// its `eps` inside: neither is Caffe's arithmetic).
///
/// `ReduceMean(axes, keepdims)`, `Sub`, then `Mul`, `ReduceMean`, `Sqrt`, `Add(eps)`,
/// `Div`. A plane of one element (a 2-axis input without `across_channels`) has
/// itself as its mean.
pub(crate) fn mvn(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().mvn_param.unwrap_or_default();
    let x = &ins[0].shape;
    let first = if p.across_channels() { 1 } else { 2 };
    let axes: Vec<i64> = (first..x.len() as i64).collect();
    let mean = |cx: &mut LayerCx<'_>, v: String| -> String {
        if axes.is_empty() {
            v
        } else {
            cx.op(
                "ReduceMean",
                vec![v],
                vec![attr("axes", A::Is(axes.clone())), attr("keepdims", A::I(1))],
            )
        }
    };
    let m = mean(cx, ins[0].name.clone());
    if !p.normalize_variance() {
        cx.op_to("Sub", vec![ins[0].name.clone(), m], &tops[0], vec![]);
        return Ok(vec![x.clone()]);
    }
    let d = cx.op("Sub", vec![ins[0].name.clone(), m], vec![]);
    let sq = cx.op("Mul", vec![d.clone(), d.clone()], vec![]);
    let var = mean(cx, sq);
    let std = cx.op("Sqrt", vec![var], vec![]);
    let eps = cx.scalar(p.eps())?;
    let den = cx.op("Add", vec![std, eps], vec![]);
    cx.op_to("Div", vec![d, den], &tops[0], vec![]);
    Ok(vec![x.clone()])
}
