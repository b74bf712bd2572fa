//! The lowering context: the graph under construction ([`Graph`]) and what one layer's
//! lowering reads and writes ([`LayerCx`]), apart from the registry (`layers/mod.rs`) so
//! that the families import the context and the registry imports the families, with no
//! circle between them.

use std::collections::{HashMap, HashSet};

use tensorfmt_caffe::proto::LayerParameter;
use tensorfmt_caffe::{ConvGeom, Geometry, LayerDef, LayerShapes, PoolGeom};
use tensorfmt_core::{DType, Tensor};
use tensorfmt_onnx::proto::AttributeProto;

use crate::builder::{Builder, Value};
use crate::error::{Fail, LResult};
use crate::rpn::RpnOptions;

/// The graph under construction and what outlives one layer.
#[derive(Default)]
pub(crate) struct Graph {
    /// Nodes, initializers, value names.
    pub b: Builder,
    /// Values holding ONNX max-pooling indices (a Caffe pooling mask top): only
    /// Upsample may read them.
    pub masks: HashSet<String>,
    /// The input plane (height, width) of the pooling that made each mask: ONNX's
    /// indices address it, so an Upsample reading the mask must restore that size.
    pub mask_inputs: HashMap<String, [usize; 2]>,
    /// Tops whose size along some axes is known only at run time (DetectionOutput's
    /// row count, a proposal layer's RoI count): value name -> (axis, ONNX
    /// `dim_param`), declared by the lowering that makes them. Caffe's shape is their
    /// bound: ONNX's shape rules take it for them, and the driver checks that whatever
    /// is computed from them follows each named size (at the bound and one larger) and
    /// names the axes that do in the graph's outputs and `value_info`.
    pub dynamic: HashMap<String, Vec<(usize, String)>>,
    /// The values computed from a `dynamic` top (the driver adds a layer's tops when
    /// one of its bottoms is one): a lowering reading one must not put its size in a
    /// constant (Reshape keeps Caffe's `0` / `-1` for it).
    pub from_dynamic: HashSet<String>,
    /// Overrides of the proposal layers' RPN constants (`LowerOptions::rpn`).
    pub rpn: RpnOptions,
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

    /// Blob `i` as f32 with the shape Caffe expects (a shape differing only by axes of
    /// size 1 is accepted, as OpenCV 4 does and Caffe's `ShapeEquals` does for legacy
    /// 4-D blobs).
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

    /// A constant computed by the lowering (any element type), named `<layer>/<what>`,
    /// charged to the conversion's budget of computed constants like [`LayerCx::f32s`].
    pub fn constant<T: tensorfmt_core::Element>(
        &mut self,
        what: &str,
        data: Vec<T>,
        shape: Vec<usize>,
    ) -> LResult<String> {
        let bytes = (data.len() as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        self.g.b.charge_computed(bytes)?;
        let t = Tensor::from_vec(data, shape, tensorfmt_core::Order::RowMajor)?;
        self.init(what, &t)
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

    /// Errors unless a constant of `bytes` more, computed by this lowering, stays within
    /// the conversion's budget of computed constants (`Limits::max_computed`, shared by
    /// every layer). Ask before computing a constant whose size grows with the input
    /// (PriorBox's boxes): [`LayerCx::f32s`] and [`LayerCx::i64s`] count what they store
    /// against the same budget anyway, but only once it has been computed.
    pub fn check_computed(&self, what: &str, bytes: u64) -> LResult<()> {
        self.g.b.check_computed(bytes).map_err(|_| {
            Fail::new(format!(
                "{what} would be a constant of {bytes} bytes, bringing the constants computed \
                 at conversion to {} bytes, over the limit of {} in all (Limits::max_computed)",
                self.g.b.computed().saturating_add(bytes),
                self.g.b.limits.max_computed
            ))
        })
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
