//! The registry: one lowering function per Caffe layer type, grouped by family
//! (`conv`, `pool`, `act`, `norm`, `shape`, `ssd`, `fork`, `rcnn`).
//!
//! # The shape of a lowering
//!
//! ```text
//! fn pooling(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>>
//! ```
//!
//! A lowering gets one [`LayerCx`] and reads everything from it:
//!
//! | field / method | what |
//! |---|---|
//! | `cx.layer`, `cx.name()`, `cx.param()` | the layer (`LayerDef`): name, type, line, typed parameters (prost `LayerParameter`) |
//! | `cx.ins` | its bottoms, in order: ONNX value `name` and Caffe `shape` |
//! | `cx.tops` | the ONNX value names its tops must be written to, in order |
//! | `cx.caffe` | `tensorfmt-caffe`'s `LayerShapes` of the layer: `tops` (the shapes to return), `params` (each blob's shape), `geometry` |
//! | `cx.conv_geom()`, `cx.pool_geom()` | the convolution / pooling geometry Caffe's shape rule validated |
//! | `cx.blob(i, &shape)`, `cx.blobs_at_most(n)`, `cx.blobs` | blob `i` as f32, checked against the shape Caffe expects |
//! | `cx.op`, `cx.op_to`, `cx.op_to_many`, `cx.identity`, `cx.reshape_to`, `cx.scalar_chain` | nodes (named `<layer>/<Op>`) |
//! | `cx.init`, `cx.f32s`, `cx.i64s`, `cx.scalar`, `cx.fresh` | initializers (named `<layer>/<what>`) and fresh value names |
//! | `cx.g.masks` | net-wide state: values holding max-pooling indices |
//!
//! It emits ONNX nodes whose last ones write `cx.tops`, and returns the tops' shapes
//! by Caffe's rule (usually `cx.caffe.tops.clone()` or the bottom's shape); the driver
//! checks them against `cx.caffe.tops` and against ONNX's shape rules for the nodes
//! emitted, so a lowering that disagrees with Caffe fails, naming the layer.
//!
//! The number of bottoms, tops and (where it does not depend on the parameters)
//! blobs is declared once, in the layer's [`Lowering`] entry of [`REGISTRY`], and
//! checked before the function runs: a lowering may index `cx.ins[0]` and
//! `cx.tops[0]` when its entry says there is one. Where the blob count depends on the
//! parameters (`bias_term`), the entry says [`Blobs::ByParams`] and the lowering calls
//! `cx.blobs_at_most(n)`.
//!
//! Errors: `Fail::new(reason)` for a broken layer (the conversion stops, naming the
//! layer), `Fail::not_lowered(reason)` for parameters no lowering handles (the walk
//! goes on and every such layer is listed at once). Never a panic.
//!
//! # How to add a layer
//!
//! 1. Write `fn my_layer(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>>` in the
//!    family module it belongs to (a new module for a new family), with a doc comment
//!    naming the original source (BVLC / fork file) it follows. Read parameters as
//!    prost types with their defaults: `cx.param().my_param.clone().unwrap_or_default()`
//!    (`p.field()` applies the schema's `[default = ...]`); a fork field the builtin
//!    schema lacks goes into `proto/caffe.proto` first (see ARCHITECTURE.md, "fork
//!    schemas").
//! 2. Add one [`Lowering`] line to [`REGISTRY`]: type string, bottoms, tops, blobs.
//! 3. Caffe's shape rule for the type goes into `tensorfmt-caffe`'s `shapes.rs`
//!    (`KNOWN_LAYER_TYPES`, and an arm in `other_shapes`, or in `layer_shapes` with a
//!    `Geometry` when it has a kernel geometry); the lowering must agree with it.
//! 4. Document it: a `### Type` section under "ONNX lowering" in
//!    `docs/caffe-layers.md` (a test checks every registry key has one), and the README
//!    layer table.
//! 5. Test it: a per-layer case in `crates/tensorfmt-py/tests/test_caffe_layers.py`
//!    (against OpenCV 4, or the original program's definition in numpy), and a Rust
//!    test in `crates/tensorfmt-lower/tests/layers.rs` for its errors.

use std::collections::HashSet;
use std::ops::RangeInclusive;

use tensorfmt_caffe::proto::LayerParameter;
use tensorfmt_caffe::{ConvGeom, Geometry, LayerDef, LayerShapes, PoolGeom};
use tensorfmt_core::{DType, Tensor};
use tensorfmt_onnx::proto::AttributeProto;

use crate::builder::{Builder, Value};
use crate::error::{Fail, LResult};

mod act;
mod conv;
mod fork;
mod norm;
mod pool;
pub(crate) mod rcnn;
mod shape;
mod ssd;

/// A layer lowering: see the module documentation.
pub(crate) type LowerFn = fn(&mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>>;

/// The graph under construction and what outlives one layer.
#[derive(Default)]
pub(crate) struct Graph {
    /// Nodes, initializers, value names.
    pub b: Builder,
    /// Values holding ONNX max-pooling indices (a Caffe pooling mask top): only
    /// Upsample may read them.
    pub masks: HashSet<String>,
    /// Values computed from a data-dependent row count (a proposal layer's RoIs,
    /// `Builder::rows`): the driver adds each layer's tops when a bottom is one.
    pub data_dependent: HashSet<String>,
    /// Overrides of the proposal layers' RPN constants (`LowerOptions::rpn`).
    pub rpn: rcnn::RpnOptions,
}

/// Everything one layer's lowering reads, and the graph it writes to.
pub(crate) struct LayerCx<'a> {
    /// The graph (nodes, initializers, pooling masks).
    pub g: &'a mut Graph,
    /// The layer: name, type, typed parameters (`param`), fork fields.
    pub layer: &'a LayerDef,
    /// Its bottoms: ONNX value name and Caffe shape, in order.
    pub ins: &'a [Value],
    /// The ONNX value names its tops must be written to, in order.
    pub tops: &'a [String],
    /// The layer's shapes by Caffe's rules (`tensorfmt-caffe`'s `infer_shapes`):
    /// `tops` (what the lowering must return), `params` (the shape of each blob Caffe
    /// gives the layer) and the validated kernel `geometry` of convolution and pooling.
    pub caffe: &'a LayerShapes,
    /// Its blobs from the caffemodel, as stored (read them with [`LayerCx::blob`]).
    pub blobs: &'a [Tensor],
}

/// How many blobs a layer type takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Blobs {
    /// At most this many (checked before the lowering runs).
    AtMost(usize),
    /// A number that depends on the parameters: the lowering checks it with
    /// [`LayerCx::blobs_at_most`].
    ByParams,
}

/// One registry entry: a Caffe type, what it takes, and its lowering.
pub(crate) struct Lowering {
    /// The Caffe type string (`layer { type: ... }`).
    pub kind: &'static str,
    /// Number of bottoms accepted.
    pub bottoms: RangeInclusive<usize>,
    /// Number of tops accepted.
    pub tops: RangeInclusive<usize>,
    /// Number of blobs accepted.
    pub blobs: Blobs,
    /// The lowering.
    pub lower: LowerFn,
}

/// Any number (of bottoms or tops) from `n` on.
const fn from(n: usize) -> RangeInclusive<usize> {
    n..=usize::MAX
}

const fn entry(
    kind: &'static str,
    bottoms: RangeInclusive<usize>,
    tops: RangeInclusive<usize>,
    blobs: Blobs,
    lower: LowerFn,
) -> Lowering {
    Lowering {
        kind,
        bottoms,
        tops,
        blobs,
        lower,
    }
}

use Blobs::{AtMost, ByParams};

/// No blobs.
const NONE: Blobs = AtMost(0);

/// Every Caffe layer type with a lowering: (type, bottoms, tops, blobs, function).
const REGISTRY: &[Lowering] = &[
    entry("Convolution", 1..=1, 1..=1, ByParams, conv::convolution),
    entry(
        "ConvolutionDepthwise",
        1..=1,
        1..=1,
        ByParams,
        conv::depthwise,
    ),
    entry("Deconvolution", 1..=1, 1..=1, ByParams, conv::deconvolution),
    entry("InnerProduct", 1..=1, 1..=1, ByParams, conv::inner_product),
    entry("Pooling", 1..=1, 1..=2, NONE, pool::pooling),
    entry("ReLU", 1..=1, 1..=1, NONE, act::relu),
    entry("PReLU", 1..=1, 1..=1, AtMost(1), act::prelu),
    entry("Sigmoid", 1..=1, 1..=1, NONE, act::sigmoid),
    entry("TanH", 1..=1, 1..=1, NONE, act::tanh),
    entry("ELU", 1..=1, 1..=1, NONE, act::elu),
    entry("AbsVal", 1..=1, 1..=1, NONE, act::absval),
    entry("BNLL", 1..=1, 1..=1, NONE, act::bnll),
    entry("Power", 1..=1, 1..=1, NONE, act::power),
    entry("Exp", 1..=1, 1..=1, NONE, act::exp),
    entry("Log", 1..=1, 1..=1, NONE, act::log),
    entry("Threshold", 1..=1, 1..=1, NONE, act::threshold),
    entry("Dropout", 1..=1, 1..=1, NONE, act::dropout),
    entry("Softmax", 1..=1, 1..=1, NONE, act::softmax),
    entry("BatchNorm", 1..=1, 1..=1, ByParams, norm::batch_norm),
    entry("Scale", 1..=2, 1..=1, ByParams, norm::scale),
    entry("Bias", 1..=2, 1..=1, ByParams, norm::bias),
    entry("LRN", 1..=1, 1..=1, NONE, norm::lrn),
    entry("Normalize", 1..=1, 1..=1, AtMost(1), norm::normalize),
    entry("Concat", from(1), 1..=1, NONE, shape::concat),
    entry("Slice", 1..=1, from(1), NONE, shape::slice),
    entry("Split", 1..=1, from(1), NONE, shape::split),
    entry("Eltwise", from(2), 1..=1, NONE, shape::eltwise),
    entry("Flatten", 1..=1, 1..=1, NONE, shape::flatten),
    entry("Reshape", 1..=1, 1..=1, NONE, shape::reshape),
    entry("Crop", 2..=2, 1..=1, NONE, shape::crop),
    entry("ArgMax", 1..=1, 1..=1, NONE, shape::argmax),
    entry("Silence", from(0), 0..=0, NONE, shape::silence),
    entry("Permute", 1..=1, 1..=1, NONE, shape::permute),
    entry("ShuffleChannel", 1..=1, 1..=1, NONE, shape::shuffle_channel),
    entry("Axpy", 3..=3, 1..=1, NONE, shape::axpy),
    entry("PriorBox", 2..=2, 1..=1, NONE, ssd::prior_box),
    entry("BN", 1..=1, 1..=1, ByParams, fork::bn),
    entry("Upsample", 1..=2, 1..=1, NONE, fork::upsample),
    entry("Interp", 1..=2, 1..=1, NONE, fork::interp),
    entry("Proposal", 3..=3, 1..=2, NONE, rcnn::proposal),
    entry("Python", from(0), from(0), NONE, rcnn::proposal),
    entry("ROIPooling", 2..=2, 1..=1, NONE, rcnn::roi_pooling),
    entry("PSROIPooling", 2..=2, 1..=1, NONE, rcnn::psroi_pooling),
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
        .map(|l| l.kind)
        .chain(STOP.iter().copied())
        .collect()
}

pub(crate) fn lookup(kind: &str) -> Option<&'static Lowering> {
    REGISTRY.iter().find(|l| l.kind == kind)
}

pub(crate) fn is_stop(kind: &str) -> bool {
    STOP.contains(&kind)
}

/// "1", "1 or 2", "at least 2", "1 to 3".
fn count_text(r: &RangeInclusive<usize>) -> String {
    let (a, b) = (*r.start(), *r.end());
    if a == b {
        a.to_string()
    } else if b == usize::MAX {
        format!("at least {a}")
    } else if b == a + 1 {
        format!("{a} or {b}")
    } else {
        format!("{a} to {b}")
    }
}

impl Lowering {
    /// Checks the declared counts, then runs the lowering.
    pub(crate) fn run(&self, cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
        if !self.bottoms.contains(&cx.ins.len()) {
            return Err(Fail::new(format!(
                "takes {} bottom(s), got {}",
                count_text(&self.bottoms),
                cx.ins.len()
            )));
        }
        if !self.tops.contains(&cx.tops.len()) {
            return Err(Fail::new(format!(
                "takes {} top(s), got {}",
                count_text(&self.tops),
                cx.tops.len()
            )));
        }
        if let Blobs::AtMost(n) = self.blobs {
            cx.blobs_at_most(n)?;
        }
        (self.lower)(cx)
    }
}

impl<'a> LayerCx<'a> {
    /// The convolution geometry Caffe's shape rule validated (kernel, stride, pad,
    /// dilation, group, ...).
    pub fn conv_geom(&self) -> LResult<&'a ConvGeom> {
        match &self.caffe.geometry {
            Some(Geometry::Conv(g)) => Ok(g),
            _ => Err(Fail::new("no convolution geometry from Caffe's shape rule")),
        }
    }

    /// The pooling geometry Caffe's shape rule validated (kernel, stride, pad,
    /// rounding, output size).
    pub fn pool_geom(&self) -> LResult<&'a PoolGeom> {
        match &self.caffe.geometry {
            Some(Geometry::Pool(g)) => Ok(g),
            _ => Err(Fail::new("no pooling geometry from Caffe's shape rule")),
        }
    }

    /// The layer's typed parameters (the builtin schema's `LayerParameter`).
    pub fn param(&self) -> &LayerParameter {
        &self.layer.param
    }

    /// The layer's name (the prefix of every node and initializer it emits).
    pub fn name(&self) -> &str {
        &self.layer.name
    }

    /// Blob `i` as f32 with the shape Caffe expects (legacy shapes with extra 1s are
    /// accepted, as Caffe's `ShapeEquals` does).
    pub fn blob(&self, i: usize, expected: &[usize]) -> LResult<Tensor> {
        let t = self.blobs.get(i).cloned().ok_or_else(|| {
            Fail::new(format!(
                "needs blob {i} of shape {expected:?}, the caffemodel has {} blob(s) for this layer",
                self.blobs.len()
            ))
        })?;
        let t = if t.dtype() == DType::F32 {
            t
        } else {
            t.cast(DType::F32)?
        };
        Ok(tensorfmt_caffe::conform_blob(
            t,
            expected,
            &self.layer.name,
            i,
        )?)
    }

    /// Checks that the layer has no more blobs than it uses.
    pub fn blobs_at_most(&self, n: usize) -> LResult<()> {
        if self.blobs.len() > n {
            return Err(Fail::new(format!(
                "has {} blobs in the caffemodel, expected at most {n}",
                self.blobs.len()
            )));
        }
        Ok(())
    }

    /// An initializer named `<layer>/<what>` holding `t`.
    pub fn init(&mut self, what: &str, t: &Tensor) -> LResult<String> {
        let base = format!("{}/{what}", self.layer.name);
        Ok(self.g.b.init(&base, t)?)
    }

    /// An f32 initializer named `<layer>/<what>`.
    pub fn f32s(&mut self, what: &str, data: Vec<f32>, shape: Vec<usize>) -> LResult<String> {
        let base = format!("{}/{what}", self.layer.name);
        Ok(self.g.b.f32s(&base, data, shape)?)
    }

    /// An int64 initializer (1-D) named `<layer>/<what>`.
    pub fn i64s(&mut self, what: &str, data: Vec<i64>) -> LResult<String> {
        let base = format!("{}/{what}", self.layer.name);
        Ok(self.g.b.i64s(&base, data)?)
    }

    /// A constant f32 scalar (shape `[]`).
    pub fn scalar(&mut self, v: f32) -> LResult<String> {
        self.f32s("const", vec![v], vec![])
    }

    /// A node with one fresh output.
    pub fn op(&mut self, op: &str, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        let out = self
            .g
            .b
            .fresh(&format!("{}/{}", self.layer.name, op.to_ascii_lowercase()));
        self.op_to(op, inputs, &out, attrs);
        out
    }

    /// A node writing `out`.
    pub fn op_to(&mut self, op: &str, inputs: Vec<String>, out: &str, attrs: Vec<AttributeProto>) {
        self.op_to_many(op, inputs, vec![out.to_string()], attrs);
    }

    /// A node writing several outputs.
    pub fn op_to_many(
        &mut self,
        op: &str,
        inputs: Vec<String>,
        outs: Vec<String>,
        attrs: Vec<AttributeProto>,
    ) {
        let name = format!("{}/{}", self.layer.name, op);
        self.g.b.node(op, &name, inputs, outs, attrs);
    }

    /// A fresh value name `base` (made unique).
    pub fn fresh(&mut self, base: &str) -> String {
        self.g.b.fresh(base)
    }

    /// A Reshape of `x` (shape `from`) to `to`; dim 0 is copied (`0`) when it does not
    /// change and inferred (`-1`) when it does (the batch folded into it or out of it),
    /// so that a symbolic batch stays symbolic wherever the other dims do not hold it
    /// (`--dynamic-batch` checks the result).
    pub fn reshape_to(
        &mut self,
        x: &str,
        from: &[usize],
        to: &[usize],
        out: Option<&str>,
    ) -> LResult<String> {
        let mut spec: Vec<i64> = to.iter().map(|&d| d as i64).collect();
        if !from.is_empty() && !to.is_empty() {
            spec[0] = if from[0] == to[0] { 0 } else { -1 };
        }
        let s = self.i64s("shape", spec)?;
        Ok(match out {
            Some(o) => {
                self.op_to("Reshape", vec![x.into(), s], o, vec![]);
                o.to_string()
            }
            None => self.op("Reshape", vec![x.into(), s], vec![]),
        })
    }

    /// An Identity node writing `out`.
    pub fn identity(&mut self, x: &str, out: &str) {
        self.op_to("Identity", vec![x.into()], out, vec![]);
    }

    /// Emits `x op c` for each (op, c) in order, then each unary op of `tail`, the last
    /// writing `top`; an Identity when there is nothing to do.
    pub fn scalar_chain(
        &mut self,
        x: &str,
        steps: &[(&str, f32)],
        tail: &[&str],
        top: &str,
    ) -> LResult<()> {
        let total = steps.len() + tail.len();
        if total == 0 {
            self.identity(x, top);
            return Ok(());
        }
        let mut cur = x.to_string();
        let mut k = 0;
        for (op, c) in steps {
            k += 1;
            let c = self.scalar(*c)?;
            if k == total {
                self.op_to(op, vec![cur.clone(), c], top, vec![]);
            } else {
                cur = self.op(op, vec![cur, c], vec![]);
            }
        }
        for op in tail {
            k += 1;
            if k == total {
                self.op_to(op, vec![cur.clone()], top, vec![]);
            } else {
                cur = self.op(op, vec![cur], vec![]);
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_words() {
        assert_eq!(count_text(&(1..=1)), "1");
        assert_eq!(count_text(&(1..=2)), "1 or 2");
        assert_eq!(count_text(&from(2)), "at least 2");
        assert_eq!(count_text(&(1..=3)), "1 to 3");
    }

    #[test]
    fn registry_keys_are_unique_and_not_stop_types() {
        let mut seen = HashSet::new();
        for l in REGISTRY {
            assert!(seen.insert(l.kind), "{} twice", l.kind);
            assert!(!is_stop(l.kind));
            assert!(!l.bottoms.is_empty() && !l.tops.is_empty(), "{}", l.kind);
        }
    }
}
