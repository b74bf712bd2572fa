//! The registry: one lowering function per Caffe layer type, grouped by family
//! (`conv`, `pool`, `act`, `norm`, `shape`, `ssd`, `detection`, `fork`, `mvn`, `yolo`,
//! `recurrent`, `rcnn`).
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
//! | `cx.init`, `cx.f32s`, `cx.i64s`, `cx.constant`, `cx.scalar`, `cx.fresh` | initializers (named `<layer>/<what>`; `init` for tensors of the caffemodel, the others for constants the lowering computes) and fresh value names (unique: a taken name gets the next `_<n>` of its base's counter) |
//! | `cx.check_computed(what, bytes)` | before computing a constant whose size grows with the input: the conversion's budget (`Limits::max_computed`), which `f32s`/`i64s`/`constant` charge |
//! | `cx.g.masks` | net-wide state: values holding max-pooling indices |
//! | `cx.g.dynamic` | tops whose size is known only at run time (DetectionOutput's rows, a proposal layer's RoIs): axis and dim name; Caffe's shape is the bound |
//! | `cx.g.from_dynamic` | values computed from those (kept by the driver): a constant must not hold their size |
//! | `cx.g.rpn` | the user's overrides of the proposal layers' RPN constants |
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
//!    family module it belongs to (a new module for a new family; it imports the
//!    context from `super::context`, never from this registry), with a doc comment
//!    naming the original source (BVLC / fork file) it follows. Read parameters as
//!    prost types with their defaults: `cx.param().my_param.clone().unwrap_or_default()`
//!    (`p.field()` applies the schema's `[default = ...]`); a fork field the builtin
//!    schema lacks goes into `proto/caffe.proto` first (see ARCHITECTURE.md, "fork
//!    schemas").
//! 2. Add one [`Lowering`] line to [`REGISTRY`]: type string, bottoms, tops, blobs.
//!    A fork layer that reuses another layer's type string (the YOLOv2 ports'
//!    `DetectionOutput`) goes into `VARIANTS` instead, with the `LayerDef` test that
//!    tells it apart (and the same test guards its arm in `shapes.rs`).
//! 3. Caffe's shape rule for the type goes into `tensorfmt-caffe`'s `shapes.rs`, with
//!    the checks of the layer's `LayerSetUp` (the parameters Caffe refuses are refused
//!    there, once, for `infer_shapes` and the lowering; non-finite floats that would
//!    make every output NaN too)
//!    (`KNOWN_LAYER_TYPES`, and an arm in `other_shapes`, or in `layer_shapes` with a
//!    `Geometry` when it has a kernel geometry); the lowering must agree with it.
//! 4. Document it: a `### Type` section under "ONNX lowering" in
//!    `docs/caffe-layers.md` (a test checks every registry key has one), and the README
//!    layer table.
//! 5. Test it: a per-layer case in `crates/tensorfmt-py/tests/test_caffe_layers.py`
//!    (against OpenCV 4, or the original program's definition in numpy), and a Rust
//!    test in `crates/tensorfmt-lower/tests/layers.rs` for its errors; add the type and
//!    its parameter fields to the random nets of `tests/hostile.rs` (never "a lowering
//!    bug") and `crates/tensorfmt-py/tests/test_hostile.py` (every model onnx.checker
//!    accepts and onnxruntime runs, also with `--dynamic-batch`).

use std::ops::RangeInclusive;

use tensorfmt_caffe::LayerDef;

use crate::error::{Fail, LResult};

mod act;
mod context;
mod conv;
mod detection;
mod fork;
mod mvn;
mod norm;
mod pool;
mod rcnn;
mod recurrent;
mod shape;
mod ssd;
mod yolo;

pub(crate) use context::{Graph, LayerCx};

/// A layer lowering: see the module documentation.
pub(crate) type LowerFn = fn(&mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>>;

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
    entry(
        "PriorBoxClustered",
        2..=2,
        1..=1,
        NONE,
        ssd::prior_box_clustered,
    ),
    entry(
        "DetectionOutput",
        3..=4,
        1..=1,
        NONE,
        detection::detection_output,
    ),
    entry("BN", 1..=1, 1..=1, ByParams, fork::bn),
    entry("Upsample", 1..=2, 1..=1, NONE, fork::upsample),
    entry("Interp", 1..=2, 1..=1, NONE, fork::interp),
    entry("MVN", 1..=1, 1..=1, NONE, mvn::mvn),
    entry("Reorg", 1..=1, 1..=1, NONE, yolo::reorg),
    entry("Region", 1..=1, 1..=1, NONE, yolo::region),
    entry("LSTM", 2..=5, 1..=3, ByParams, recurrent::lstm),
    entry("RNN", 2..=4, 1..=2, ByParams, recurrent::rnn),
    entry("Proposal", 3..=3, 1..=2, NONE, rcnn::proposal),
    entry("ROIPooling", 2..=2, 1..=1, NONE, rcnn::roi_pooling),
    entry("PSROIPooling", 2..=2, 1..=1, NONE, rcnn::psroi_pooling),
];

/// Every Caffe layer type with a lowering, in registry order, then the types lowered
/// only in one fork's form (`Python`, as py-faster-rcnn's proposal layer).
///
/// ```
/// let types = tensorfmt_lower::supported_layers();
/// assert!(types.contains(&"Convolution") && types.contains(&"DetectionOutput"));
/// ```
pub fn supported_layers() -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = REGISTRY.iter().map(|l| l.kind).collect();
    for (_, v) in VARIANTS {
        // A type lowered only in a fork's form (`Python`: py-faster-rcnn's proposal).
        if !kinds.contains(&v.kind) {
            kinds.push(v.kind);
        }
    }
    kinds
}

pub(crate) fn lookup(kind: &str) -> Option<&'static Lowering> {
    REGISTRY.iter().find(|l| l.kind == kind)
}

/// A test telling one fork's layer from another's of the same type string.
type IsVariant = fn(&LayerDef) -> bool;

/// Layers of one type string that forks gave different layers: told apart by their
/// parameters (`LayerDef` decides), each with its own lowering and counts. A `Python`
/// layer is lowered only as py-faster-rcnn's proposal layer (its module and class
/// name it); any other is unsupported, listed with its module (`no_lowering_reason`).
const VARIANTS: &[(IsVariant, Lowering)] = &[
    (
        LayerDef::is_yolo_detection_output,
        entry(
            "DetectionOutput",
            1..=1,
            1..=1,
            NONE,
            yolo::detection_output,
        ),
    ),
    (
        tensorfmt_caffe::is_python_proposal,
        entry("Python", 3..=3, 1..=2, NONE, rcnn::proposal),
    ),
];

/// The lowering of `l`: its type's, or the fork variant its parameters name.
pub(crate) fn lookup_layer(l: &LayerDef) -> Option<&'static Lowering> {
    VARIANTS
        .iter()
        .find(|(is, _)| is(l))
        .map(|(_, v)| v)
        .or_else(|| lookup(&l.kind))
}

/// Why a layer without a lowering has none, where its type alone does not say it: a
/// `Python` layer names its module and class (`rpn.anchor_target_layer.AnchorTargetLayer`).
pub(crate) fn no_lowering_reason(l: &LayerDef) -> Option<String> {
    (l.kind == "Python").then(|| tensorfmt_caffe::python_layer_name(l))
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn counts_read_as_words() {
        assert_eq!(count_text(&(1..=1)), "1");
        assert_eq!(count_text(&(1..=2)), "1 or 2");
        assert_eq!(count_text(&from(2)), "at least 2");
        assert_eq!(count_text(&(1..=3)), "1 to 3");
    }

    #[test]
    fn registry_keys_are_unique() {
        let mut seen = HashSet::new();
        for l in REGISTRY {
            assert!(seen.insert(l.kind), "{} twice", l.kind);
            assert!(!l.bottoms.is_empty() && !l.tops.is_empty(), "{}", l.kind);
        }
    }
}
