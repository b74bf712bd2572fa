//! The registry: one lowering function per Caffe layer type, grouped by family
//! (`conv`, `pool`, `act`, `norm`, `shape`, `ssd`). Each function reads its typed
//! parameters, checks its blobs against the shapes Caffe expects, emits ONNX nodes whose
//! last ones write the layer's tops, and returns the tops' shapes by Caffe's rule.

use tensorfmt_caffe::LayerDef;
use tensorfmt_core::{DType, Tensor};

use crate::builder::Value;
use crate::error::{Fail, LResult};
use crate::Cx;

mod act;
mod conv;
mod fork;
mod norm;
mod pool;
mod shape;
mod ssd;

/// A layer lowering: (context, layer, bottom values, top value names, the layer's
/// blobs) → the tops' shapes.
pub(crate) type LowerFn =
    fn(&mut Cx, &LayerDef, &[Value], &[String], Vec<Tensor>) -> LResult<Vec<Vec<usize>>>;

const REGISTRY: &[(&str, LowerFn)] = &[
    ("Convolution", conv::convolution),
    ("ConvolutionDepthwise", conv::depthwise),
    ("Deconvolution", conv::deconvolution),
    ("InnerProduct", conv::inner_product),
    ("Pooling", pool::pooling),
    ("ReLU", act::relu),
    ("PReLU", act::prelu),
    ("Sigmoid", act::sigmoid),
    ("TanH", act::tanh),
    ("ELU", act::elu),
    ("AbsVal", act::absval),
    ("BNLL", act::bnll),
    ("Power", act::power),
    ("Exp", act::exp),
    ("Log", act::log),
    ("Threshold", act::threshold),
    ("Dropout", act::dropout),
    ("Softmax", act::softmax),
    ("BatchNorm", norm::batch_norm),
    ("Scale", norm::scale),
    ("Bias", norm::bias),
    ("LRN", norm::lrn),
    ("Normalize", norm::normalize),
    ("Concat", shape::concat),
    ("Slice", shape::slice),
    ("Split", shape::split),
    ("Eltwise", shape::eltwise),
    ("Flatten", shape::flatten),
    ("Reshape", shape::reshape),
    ("Crop", shape::crop),
    ("ArgMax", shape::argmax),
    ("Silence", shape::silence),
    ("Permute", shape::permute),
    ("ShuffleChannel", shape::shuffle_channel),
    ("Axpy", shape::axpy),
    ("PriorBox", ssd::prior_box),
    ("BN", fork::bn),
    ("Upsample", fork::upsample),
    ("Interp", fork::interp),
];

/// Layer types the graph stops before (their bottoms become graph outputs).
const STOP: &[&str] = &["DetectionOutput"];

/// Every Caffe layer type with a lowering, in registry order, then the types the graph
/// stops before.
///
/// ```
/// let types = tensorfmt_lower::supported_layers();
/// assert!(types.contains(&"Convolution") && types.contains(&"PriorBox"));
/// ```
pub fn supported_layers() -> Vec<&'static str> {
    REGISTRY
        .iter()
        .map(|(k, _)| *k)
        .chain(STOP.iter().copied())
        .collect()
}

pub(crate) fn lookup(kind: &str) -> Option<LowerFn> {
    REGISTRY.iter().find(|(k, _)| *k == kind).map(|(_, f)| *f)
}

pub(crate) fn is_stop(kind: &str) -> bool {
    STOP.contains(&kind)
}

/// Checks the number of bottoms.
pub(crate) fn arity(ins: &[Value], allowed: &[usize]) -> LResult<()> {
    if allowed.contains(&ins.len()) {
        Ok(())
    } else {
        Err(Fail::new(format!(
            "takes {allowed:?} bottom(s), got {}",
            ins.len()
        )))
    }
}

/// Caffe's CanonicalAxisIndex.
pub(crate) fn axis(a: i64, rank: usize) -> LResult<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(Fail::new(format!(
            "axis {a} out of range for a {rank}-axis blob"
        )));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// Blob `i` of the layer as f32 with the shape Caffe expects (legacy shapes with extra
/// 1s are accepted, as Caffe's `ShapeEquals` does).
pub(crate) fn blob(
    layer: &LayerDef,
    blobs: &[Tensor],
    i: usize,
    expected: &[usize],
) -> LResult<Tensor> {
    let t = blobs.get(i).cloned().ok_or_else(|| {
        Fail::new(format!(
            "needs blob {i} of shape {expected:?}, the caffemodel has {} blob(s) for this layer",
            blobs.len()
        ))
    })?;
    let t = if t.dtype() == DType::F32 {
        t
    } else {
        t.cast(DType::F32)?
    };
    Ok(tensorfmt_caffe::conform_blob(t, expected, &layer.name, i)?)
}

/// Checks that a layer has no more blobs than it uses.
pub(crate) fn at_most(blobs: &[Tensor], n: usize) -> LResult<()> {
    if blobs.len() > n {
        return Err(Fail::new(format!(
            "has {} blobs in the caffemodel, expected at most {n}",
            blobs.len()
        )));
    }
    Ok(())
}

/// A constant f32 scalar (shape `[]`).
pub(crate) fn scalar(cx: &mut Cx, v: f32) -> LResult<String> {
    let base = format!("{}/const", cx.layer);
    Ok(cx.b.f32s(&base, vec![v], vec![])?)
}

/// Emits `x op c` for each (op, c) in order, the last writing `top`; an Identity
/// when there is nothing to do.
pub(crate) fn scalar_chain(
    cx: &mut Cx,
    x: &str,
    steps: &[(&str, f32)],
    tail: &[&str],
    top: &str,
) -> LResult<()> {
    let total = steps.len() + tail.len();
    if total == 0 {
        cx.identity(x, top);
        return Ok(());
    }
    let mut cur = x.to_string();
    let mut k = 0;
    for (op, c) in steps {
        k += 1;
        let c = scalar(cx, *c)?;
        if k == total {
            cx.op_to(op, vec![cur.clone(), c], top, vec![]);
        } else {
            cur = cx.op(op, vec![cur, c], vec![]);
        }
    }
    for op in tail {
        k += 1;
        if k == total {
            cx.op_to(op, vec![cur.clone()], top, vec![]);
        } else {
            cur = cx.op(op, vec![cur], vec![]);
        }
    }
    Ok(())
}
