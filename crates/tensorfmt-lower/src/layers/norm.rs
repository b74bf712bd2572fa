//! BatchNorm, Scale, Bias, LRN and SSD's Normalize (BVLC `batch_norm_layer.cpp`,
//! `scale_layer.cpp`, `bias_layer.cpp`, `lrn_layer.cpp`; weiliu89 `normalize_layer.cpp`).

use tensorfmt_caffe::proto::lrn_parameter::NormRegion;

use super::context::{axis, LayerCx};
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// `BatchNorm` (inference, `use_global_stats`): mean and variance are the stored sums
/// divided by the scale factor (blob 2; a zero factor zeroes both, as Caffe), then
/// BatchNormalization with scale 1 and bias 0 (or NVIDIA's `scale_bias` blobs 3, 4).
pub(crate) fn batch_norm(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().batch_norm_param.unwrap_or_default();
    if p.use_global_stats == Some(false) {
        return Err(Fail::not_lowered(
            "use_global_stats: false normalises with the batch's own statistics; only stored statistics are lowered",
        ));
    }
    let x = &ins[0].shape;
    if x.len() < 2 {
        return Err(Fail::new(format!("input shape {x:?} has no channel axis")));
    }
    let c = x[1];
    cx.blobs_at_most(if p.scale_bias() { 5 } else { 3 })?;
    let mean = cx.blob(0, &[c])?.to_vec::<f32>()?;
    let var = cx.blob(1, &[c])?.to_vec::<f32>()?;
    let sf = cx.blob(2, &[1])?.to_vec::<f32>()?[0];
    let factor = if sf == 0.0 { 0.0 } else { 1.0 / sf };
    let mean: Vec<f32> = mean.iter().map(|v| v * factor).collect();
    let var: Vec<f32> = var.iter().map(|v| v * factor).collect();
    let (gamma, beta) = if p.scale_bias() {
        (
            cx.blob(3, &[c])?.to_vec::<f32>()?,
            cx.blob(4, &[c])?.to_vec::<f32>()?,
        )
    } else {
        (vec![1.0; c], vec![0.0; c])
    };
    let inputs = vec![
        ins[0].name.clone(),
        cx.f32s("scale", gamma, vec![c])?,
        cx.f32s("bias", beta, vec![c])?,
        cx.f32s("mean", mean, vec![c])?,
        cx.f32s("var", var, vec![c])?,
    ];
    cx.op_to(
        "BatchNormalization",
        inputs,
        &tops[0],
        vec![attr("epsilon", A::F(p.eps()))],
    );
    Ok(vec![x.clone()])
}

/// Broadcast shape of a factor covering `x[a..a+len]`: its dims then trailing 1s.
fn broadcast_dims(x: &[usize], a: usize, dims: &[usize]) -> Vec<usize> {
    let mut d = dims.to_vec();
    d.resize(x.len() - a, 1);
    d
}

/// Shared by Scale and Bias: the factor's shape `x[axis..axis+num_axes]` and its value
/// name, from a blob or from bottom 1.
fn factor(
    cx: &mut LayerCx<'_>,
    ax: i32,
    num_axes: i32,
    what: &str,
) -> LResult<(String, usize, usize)> {
    let ins = cx.ins;
    let x = &ins[0].shape;
    if ins.len() == 2 {
        let f = &ins[1].shape;
        let a = axis(i64::from(ax), x.len())?;
        if a + f.len() > x.len() || x[a..a + f.len()] != f[..] {
            return Err(Fail::new(format!(
                "{what} shape {f:?} does not match input {x:?} at axis {a}"
            )));
        }
        let target = broadcast_dims(x, a, f);
        let name = if target == *f {
            ins[1].name.clone()
        } else {
            cx.reshape_to(&ins[1].name, f, &target, None)?
        };
        return Ok((name, a, f.len()));
    }
    // Caffe: axis may equal the rank when num_axes is 0 (a scalar factor).
    let a = if num_axes == 0 && ax as i64 == x.len() as i64 {
        x.len()
    } else {
        axis(i64::from(ax), x.len())?
    };
    let n = if num_axes < 0 {
        if num_axes != -1 {
            return Err(Fail::new(format!("num_axes {num_axes} (must be >= -1)")));
        }
        x.len() - a
    } else {
        num_axes as usize
    };
    if a + n > x.len() {
        return Err(Fail::new(format!(
            "axis {a} + num_axes {n} exceeds the input's {} axes",
            x.len()
        )));
    }
    let dims = &x[a..a + n];
    let t = cx.blob(0, dims)?;
    let t = t.reshape(broadcast_dims(x, a, dims))?;
    Ok((cx.init(what, &t)?, a, n))
}

/// `Scale`: x * scale (blob 0 or bottom 1, covering `axis..axis+num_axes`), plus an
/// optional bias (`bias_term`: the next blob).
pub(crate) fn scale(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().scale_param.clone().unwrap_or_default();
    let bias_term = p.bias_term();
    let own = usize::from(ins.len() == 1);
    cx.blobs_at_most(own + usize::from(bias_term))?;
    let (s, a, n) = factor(cx, p.axis(), p.num_axes(), "scale")?;
    let x = &ins[0].shape;
    if bias_term {
        let dims = &x[a..a + n];
        let b = cx.blob(own, dims)?.reshape(broadcast_dims(x, a, dims))?;
        let b = cx.init("bias", &b)?;
        let y = cx.op("Mul", vec![ins[0].name.clone(), s], vec![]);
        cx.op_to("Add", vec![y, b], &tops[0], vec![]);
    } else {
        cx.op_to("Mul", vec![ins[0].name.clone(), s], &tops[0], vec![]);
    }
    Ok(vec![x.clone()])
}

/// `Bias`: x + bias (blob 0 or bottom 1).
pub(crate) fn bias(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().bias_param.clone().unwrap_or_default();
    cx.blobs_at_most(usize::from(ins.len() == 1))?;
    let (b, _, _) = factor(cx, p.axis(), p.num_axes(), "bias")?;
    cx.op_to("Add", vec![ins[0].name.clone(), b], &tops[0], vec![]);
    Ok(vec![ins[0].shape.clone()])
}

/// `LRN`. ACROSS_CHANNELS: ONNX LRN (both divide alpha by size) with bias = k.
/// WITHIN_CHANNEL: Caffe's own decomposition, x * (1 + alpha * avg_{n x n}(x^2))^-beta
/// with the average over a zero-padded window (divisor n^2; k is not used).
pub(crate) fn lrn(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().lrn_param.unwrap_or_default();
    let n = p.local_size() as usize;
    if n % 2 == 0 {
        return Err(Fail::new(format!("local_size {n} must be odd")));
    }
    let x = &ins[0].shape;
    if x.len() != 4 {
        return Err(Fail::new(format!("input shape {x:?}: LRN needs 4 axes")));
    }
    match p.norm_region() {
        NormRegion::AcrossChannels => {
            let attrs = vec![
                attr("size", A::I(n as i64)),
                attr("alpha", A::F(p.alpha())),
                attr("beta", A::F(p.beta())),
                attr("bias", A::F(p.k())),
            ];
            cx.op_to("LRN", vec![ins[0].name.clone()], &tops[0], attrs);
        }
        NormRegion::WithinChannel => {
            let pad = ((n - 1) / 2) as i64;
            let sq = cx.op(
                "Mul",
                vec![ins[0].name.clone(), ins[0].name.clone()],
                vec![],
            );
            let avg = cx.op(
                "AveragePool",
                vec![sq],
                vec![
                    attr("kernel_shape", A::Is(vec![n as i64, n as i64])),
                    attr("pads", A::Is(vec![pad; 4])),
                    attr("count_include_pad", A::I(1)),
                ],
            );
            let alpha = cx.scalar(p.alpha())?;
            let t = cx.op("Mul", vec![avg, alpha], vec![]);
            let one = cx.scalar(1.0)?;
            let t = cx.op("Add", vec![t, one], vec![]);
            let nb = cx.scalar(-p.beta())?;
            let t = cx.op("Pow", vec![t, nb], vec![]);
            cx.op_to("Mul", vec![ins[0].name.clone(), t], &tops[0], vec![]);
        }
    }
    Ok(vec![x.clone()])
}

/// SSD's `Normalize`: x / sqrt(sum(x^2) + eps) * scale, the sum over channels (or over
/// C, H, W with `across_spatial`), the scale per channel or shared.
pub(crate) fn normalize(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().norm_param.clone().unwrap_or_default();
    let x = &ins[0].shape;
    if x.len() != 4 {
        return Err(Fail::new(format!(
            "input shape {x:?}: Normalize needs 4 axes"
        )));
    }
    let c = if p.channel_shared() { 1 } else { x[1] };
    let s = cx.blob(0, &[c])?;
    let s = s.reshape(if p.channel_shared() {
        vec![1]
    } else {
        vec![c, 1, 1]
    })?;
    let s = cx.init("scale", &s)?;
    let axes = cx.i64s(
        "axes",
        if p.across_spatial() {
            vec![1, 2, 3]
        } else {
            vec![1]
        },
    )?;
    let sq = cx.op(
        "Mul",
        vec![ins[0].name.clone(), ins[0].name.clone()],
        vec![],
    );
    let sum = cx.op("ReduceSum", vec![sq, axes], vec![attr("keepdims", A::I(1))]);
    let eps = cx.scalar(p.eps())?;
    let sum = cx.op("Add", vec![sum, eps], vec![]);
    let norm = cx.op("Sqrt", vec![sum], vec![]);
    let y = cx.op("Div", vec![ins[0].name.clone(), norm], vec![]);
    cx.op_to("Mul", vec![y, s], &tops[0], vec![]);
    Ok(vec![x.clone()])
}
