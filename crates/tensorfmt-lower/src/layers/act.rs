//! Element-wise activations and Softmax (BVLC `relu_layer.cpp`, `prelu_layer.cpp`,
//! `power_layer.cpp`, `exp_layer.cpp`, `log_layer.cpp`, `threshold_layer.cpp`,
//! `bnll_layer.cpp`, `elu_layer.cpp`, `softmax_layer.cpp`; Dropout is the identity at
//! test time, unless the Faster R-CNN fork's `scale_train: false` asks for a scale).

use super::context::{axis, LayerCx};
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// One ONNX op from bottom 0 to top 0, same shape.
fn unary(cx: &mut LayerCx<'_>, op: &str, attrs: Vec<tensorfmt_onnx::proto::AttributeProto>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    cx.op_to(op, vec![ins[0].name.clone()], &tops[0], attrs);
    Ok(vec![ins[0].shape.clone()])
}

/// `ReLU`: Relu, or LeakyRelu(alpha = negative_slope).
pub(crate) fn relu(cx: &mut LayerCx<'_>) -> Out {
    let slope = cx
        .param()
        .relu_param
        .as_ref()
        .map(|p| p.negative_slope())
        .unwrap_or(0.0);
    if slope == 0.0 {
        unary(cx, "Relu", vec![])
    } else {
        unary(cx, "LeakyRelu", vec![attr("alpha", A::F(slope))])
    }
}

/// `PReLU`: PRelu with the slope blob (`[C]`, or `[1]` when channel_shared)
/// broadcast as `[C, 1, ...]`.
pub(crate) fn prelu(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let x = &ins[0].shape;
    if x.len() < 2 {
        return Err(Fail::new(format!("input shape {x:?} has no channel axis")));
    }
    let shared = cx
        .param()
        .prelu_param
        .as_ref()
        .map(|p| p.channel_shared())
        .unwrap_or(false);
    let c = if shared { 1 } else { x[1] };
    let slope = cx.blob(0, &[c])?;
    let mut dims = vec![c];
    dims.resize(x.len() - 1, 1);
    let slope = slope.reshape(dims)?;
    let s = cx.init("slope", &slope)?;
    cx.op_to("PRelu", vec![ins[0].name.clone(), s], &tops[0], vec![]);
    Ok(vec![x.clone()])
}

/// `Sigmoid`.
pub(crate) fn sigmoid(cx: &mut LayerCx<'_>) -> Out {
    unary(cx, "Sigmoid", vec![])
}

/// `TanH`.
pub(crate) fn tanh(cx: &mut LayerCx<'_>) -> Out {
    unary(cx, "Tanh", vec![])
}

/// `ELU`: Elu(alpha).
pub(crate) fn elu(cx: &mut LayerCx<'_>) -> Out {
    let alpha = cx
        .param()
        .elu_param
        .as_ref()
        .map(|p| p.alpha())
        .unwrap_or(1.0);
    unary(cx, "Elu", vec![attr("alpha", A::F(alpha))])
}

/// `AbsVal`: Abs.
pub(crate) fn absval(cx: &mut LayerCx<'_>) -> Out {
    unary(cx, "Abs", vec![])
}

/// `BNLL`: log(1 + exp(x)) = Softplus.
pub(crate) fn bnll(cx: &mut LayerCx<'_>) -> Out {
    unary(cx, "Softplus", vec![])
}

/// `Dropout`: the identity at test time (BVLC scales by 1 / (1 - ratio) during
/// training). The Faster R-CNN fork's `scale_train: false` scales at test time instead:
/// x * (1 - ratio), as that fork and OpenCV's importer compute it.
pub(crate) fn dropout(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().dropout_param.unwrap_or_default();
    if p.scale_train() {
        return unary(cx, "Identity", vec![]);
    }
    let keep = 1.0 - p.dropout_ratio();
    if !(keep > 0.0 && keep <= 1.0) {
        return Err(Fail::new(format!(
            "dropout_ratio {} with scale_train: false leaves no scale (1 - ratio must be in (0, 1])",
            p.dropout_ratio()
        )));
    }
    let steps: &[(&str, f32)] = if keep == 1.0 { &[] } else { &[("Mul", keep)] };
    cx.scalar_chain(&ins[0].name, steps, &[], &tops[0])?;
    Ok(vec![ins[0].shape.clone()])
}

/// `Power`: (shift + scale * x) ^ power.
pub(crate) fn power(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().power_param.unwrap_or_default();
    let mut steps = Vec::new();
    if p.scale() != 1.0 {
        steps.push(("Mul", p.scale()));
    }
    if p.shift() != 0.0 {
        steps.push(("Add", p.shift()));
    }
    if p.power() != 1.0 {
        steps.push(("Pow", p.power()));
    }
    cx.scalar_chain(&ins[0].name, &steps, &[], &tops[0])?;
    Ok(vec![ins[0].shape.clone()])
}

fn ln_base(base: f32) -> LResult<f32> {
    if base == -1.0 {
        return Ok(1.0);
    }
    if base <= 0.0 {
        return Err(Fail::new(format!("base {base} must be positive or -1 (e)")));
    }
    Ok(base.ln())
}

/// `Exp`: base ^ (shift + scale * x) = exp(ln(base) * (shift + scale * x)).
pub(crate) fn exp(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().exp_param.unwrap_or_default();
    let lb = ln_base(p.base())?;
    let mut steps = Vec::new();
    if p.scale() * lb != 1.0 {
        steps.push(("Mul", p.scale() * lb));
    }
    if p.shift() != 0.0 {
        steps.push(("Add", p.shift() * lb));
    }
    cx.scalar_chain(&ins[0].name, &steps, &["Exp"], &tops[0])?;
    Ok(vec![ins[0].shape.clone()])
}

/// `Log`: log_base(shift + scale * x).
pub(crate) fn log(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().log_param.unwrap_or_default();
    let lb = ln_base(p.base())?;
    let mut steps = Vec::new();
    if p.scale() != 1.0 {
        steps.push(("Mul", p.scale()));
    }
    if p.shift() != 0.0 {
        steps.push(("Add", p.shift()));
    }
    if lb == 1.0 {
        cx.scalar_chain(&ins[0].name, &steps, &["Log"], &tops[0])?;
    } else {
        let inner = cx.fresh(&format!("{}/log", cx.name()));
        cx.scalar_chain(&ins[0].name, &steps, &["Log"], &inner)?;
        cx.scalar_chain(&inner, &[("Mul", 1.0 / lb)], &[], &tops[0])?;
    }
    Ok(vec![ins[0].shape.clone()])
}

/// `Threshold`: 1 where x > threshold, else 0.
pub(crate) fn threshold(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let t = cx
        .param()
        .threshold_param
        .as_ref()
        .map(|p| p.threshold())
        .unwrap_or(0.0);
    let c = cx.scalar(t)?;
    let g = cx.op("Greater", vec![ins[0].name.clone(), c], vec![]);
    cx.op_to("Cast", vec![g], &tops[0], vec![attr("to", A::I(1))]);
    Ok(vec![ins[0].shape.clone()])
}

/// `Softmax` along `axis` (default 1); opset 13+ Softmax normalises one axis, as Caffe.
pub(crate) fn softmax(cx: &mut LayerCx<'_>) -> Out {
    let ins = cx.ins;
    let a = cx
        .param()
        .softmax_param
        .as_ref()
        .map(|p| p.axis())
        .unwrap_or(1);
    let a = axis(i64::from(a), ins[0].shape.len())?;
    unary(cx, "Softmax", vec![attr("axis", A::I(a as i64))])
}
