//! The graph under construction: ONNX nodes and initializers with unique value names,
//! attribute helpers, and ONNX's own shape rules for the ops the lowering emits (the
//! second shape rule every layer's Caffe shape is checked against).

use std::collections::{HashMap, HashSet};

use tensorfmt_core::{Limits, Order, Tensor};
use tensorfmt_onnx::proto::{
    attribute_proto::AttributeType, AttributeProto, NodeProto, TensorProto,
};

/// A value of the graph: its name and (static) shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// ONNX value name.
    pub name: String,
    /// Shape (Caffe's, verified against ONNX's rule).
    pub shape: Vec<usize>,
}

/// An attribute value.
pub(crate) enum A {
    I(i64),
    F(f32),
    Is(Vec<i64>),
    S(&'static str),
}

/// Builds one attribute.
pub(crate) fn attr(name: &str, v: A) -> AttributeProto {
    let mut a = AttributeProto {
        name: name.into(),
        ..Default::default()
    };
    match v {
        A::I(i) => {
            a.i = Some(i);
            a.set_type(AttributeType::Int);
        }
        A::F(f) => {
            a.f = Some(f);
            a.set_type(AttributeType::Float);
        }
        A::S(v) => {
            a.s = v.as_bytes().to_vec().into();
            a.set_type(AttributeType::String);
        }
        A::Is(v) => {
            a.ints = v;
            a.set_type(AttributeType::Ints);
        }
    }
    a
}

/// A set of unique names. A name already taken gets the first free `_1`, `_2`, ...
/// suffix, counted on from where the last collision of the same base stopped: a net
/// whose 15,000 layers are all named `r` costs one step per name, not 15,000.
#[derive(Default)]
pub(crate) struct Names {
    used: HashSet<String>,
    /// The next suffix to try, per base name that has collided.
    next: HashMap<String, usize>,
}

impl Names {
    /// Takes `name` as given (graph inputs, blob names); whether it was free.
    pub fn reserve(&mut self, name: &str) -> bool {
        self.used.insert(name.to_string())
    }

    /// `base` if free, else `base_<i>` for the first free i from the base's counter.
    pub fn fresh(&mut self, base: &str) -> String {
        if self.used.insert(base.to_string()) {
            return base.to_string();
        }
        let next = self.next.entry(base.to_string()).or_insert(1);
        loop {
            let n = format!("{base}_{next}");
            *next += 1;
            if self.used.insert(n.clone()) {
                return n;
            }
        }
    }
}

/// Nodes, initializers and names.
#[derive(Default)]
pub(crate) struct Builder {
    pub nodes: Vec<NodeProto>,
    pub inits: Vec<TensorProto>,
    names: Names,
    node_names: Names,
    /// Constant int64 initializers by name (shapes for Reshape, sizes for Split).
    pub ints: HashMap<String, Vec<i64>>,
    /// Small constant f32 initializers by name (Resize scales), for the shape rules.
    pub floats: HashMap<String, Vec<f32>>,
    /// Shapes of every initializer.
    pub init_shapes: HashMap<String, Vec<usize>>,
    /// The conversion's limits: `max_computed` bounds the constants computed here.
    pub limits: Limits,
    /// Bytes of the constants computed so far ([`Builder::f32s`], [`Builder::i64s`]).
    computed: u64,
    /// Bytes of every initializer so far (computed or a caffemodel blob's).
    model: u64,
    /// A node was refused for `Limits::max_nodes` (the driver reports it after the
    /// layer; [`Builder::node`] has no error to return).
    pub over_nodes: bool,
}

impl Builder {
    /// Reserves a name that must stay exactly as given (graph inputs, blob names).
    pub fn reserve(&mut self, name: &str) {
        self.names.reserve(name);
    }

    /// A fresh value name based on `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        self.names.fresh(base)
    }

    /// Errors unless `bytes` more of computed constants stay within
    /// `Limits::max_computed` (nothing is counted: the constant's own
    /// [`Builder::f32s`] / [`Builder::i64s`] does). Lowerings that compute a large
    /// constant ask first, from its size, before computing it.
    pub fn check_computed(&self, bytes: u64) -> tensorfmt_core::Result<()> {
        self.limits
            .check_computed(self.computed.saturating_add(bytes))
    }

    /// Bytes of computed constants so far.
    pub fn computed(&self) -> u64 {
        self.computed
    }

    /// Counts `bytes` of computed constants against `Limits::max_computed`.
    pub(crate) fn charge_computed(&mut self, bytes: u64) -> tensorfmt_core::Result<()> {
        self.check_computed(bytes)?;
        self.computed += bytes;
        Ok(())
    }

    /// Errors when one more node or initializer would exceed `Limits::max_nodes`: what
    /// a layer lowers to varies (one node to a few dozen), so the graph is bounded as it
    /// grows, not from the layer count.
    pub fn check_nodes(&self) -> tensorfmt_core::Result<()> {
        let built = (self.nodes.len() as u64).saturating_add(self.inits.len() as u64);
        self.limits.check_nodes(built.saturating_add(1))
    }

    /// Adds an initializer (the tensor's bytes are shared) and returns its name. The
    /// initializers' total is bounded by `Limits::max_alloc` (a model past protobuf's
    /// 2 GiB is written with its payloads in an external data file), their count with
    /// the nodes' by `Limits::max_nodes`.
    pub fn init(&mut self, base: &str, t: &Tensor) -> tensorfmt_core::Result<String> {
        if let Err(e) = self.check_nodes() {
            self.over_nodes = true;
            return Err(e);
        }
        let total = self.model.saturating_add(t.bytes().len() as u64);
        if total > self.limits.max_alloc {
            return Err(tensorfmt_core::Error::Invalid(format!(
                "the model's initializers would total {total} bytes, over the limit of {} \
                 (Limits::max_alloc)",
                self.limits.max_alloc
            )));
        }
        self.model = total;
        let name = self.fresh(base);
        self.init_shapes.insert(name.clone(), t.dims().to_vec());
        self.inits.push(tensorfmt_onnx::tensor_to_proto(&name, t)?);
        Ok(name)
    }

    /// An f32 initializer.
    pub fn f32s(
        &mut self,
        base: &str,
        data: Vec<f32>,
        dims: Vec<usize>,
    ) -> tensorfmt_core::Result<String> {
        self.charge_computed((data.len() as u64).saturating_mul(4))?;
        let small = (data.len() <= 16).then(|| data.clone());
        let t = Tensor::from_vec(data, dims, Order::RowMajor)?;
        let name = self.init(base, &t)?;
        if let Some(v) = small {
            self.floats.insert(name.clone(), v);
        }
        Ok(name)
    }

    /// A 1-D int64 initializer.
    pub fn i64s(&mut self, base: &str, data: Vec<i64>) -> tensorfmt_core::Result<String> {
        let n = data.len();
        self.charge_computed((n as u64).saturating_mul(8))?;
        let t = Tensor::from_vec(data.clone(), [n], Order::RowMajor)?;
        let name = self.init(base, &t)?;
        self.ints.insert(name.clone(), data);
        Ok(name)
    }

    /// Appends a node; past `Limits::max_nodes` none is added and `over_nodes` is set
    /// (the driver fails the conversion after the layer).
    pub fn node(
        &mut self,
        op: &str,
        name: &str,
        inputs: Vec<String>,
        outputs: Vec<String>,
        attrs: Vec<AttributeProto>,
    ) {
        if self.over_nodes || self.check_nodes().is_err() {
            self.over_nodes = true;
            return;
        }
        let unique = self.node_names.fresh(name);
        self.nodes.push(NodeProto {
            input: inputs,
            output: outputs,
            name: unique,
            op_type: op.to_string(),
            attribute: attrs,
            ..Default::default()
        });
    }
}

fn ints(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.ints.clone())
}
fn int(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.i)
}

fn broadcast(shapes: &[&Vec<usize>]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max()?;
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    (0..rank as i64).contains(&a).then_some(a as usize)
}

/// ONNX's output shapes of `n` (opset 17 rules) from its input shapes; `None` when the
/// rule is not implemented here or the inputs are invalid for the op.
pub(crate) fn onnx_shapes(
    n: &NodeProto,
    ins: &[Option<&Vec<usize>>],
    consts: &HashMap<String, Vec<i64>>,
    floats: &HashMap<String, Vec<f32>>,
) -> Option<Vec<Vec<usize>>> {
    let x = || ins.first().copied().flatten();
    let one = |s: Vec<usize>| Some(vec![s]);
    match n.op_type.as_str() {
        "Relu" | "LeakyRelu" | "Sigmoid" | "Tanh" | "Elu" | "Abs" | "Softplus" | "Exp" | "Log"
        | "Identity" | "Softmax" | "LRN" | "Cast" | "BatchNormalization" | "Sqrt"
        | "Reciprocal" | "Neg" | "Sign" | "Floor" | "Ceil" | "CumSum" => one(x()?.clone()),
        "Add" | "Mul" | "Sub" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "PRelu" | "Greater"
        | "LessOrEqual" | "Or" | "Where" => {
            let all: Option<Vec<&Vec<usize>>> = ins.iter().copied().collect();
            one(broadcast(&all?)?)
        }
        "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" => {
            let x = x()?;
            if x.len() != 4 {
                return None;
            }
            let k = match n.op_type.as_str() {
                "Conv" | "ConvTranspose" => {
                    let w = ins.get(1).copied().flatten()?;
                    vec![w[2] as i64, w[3] as i64]
                }
                _ => ints(n, "kernel_shape")?,
            };
            let pads = ints(n, "pads").unwrap_or(vec![0; 4]);
            let s = ints(n, "strides").unwrap_or(vec![1, 1]);
            let d = ints(n, "dilations").unwrap_or(vec![1, 1]);
            let mut out = vec![x[0], 0, 0, 0];
            out[1] = match n.op_type.as_str() {
                "Conv" => ins.get(1).copied().flatten()?[0],
                "ConvTranspose" => {
                    ins.get(1).copied().flatten()?[1] * int(n, "group").unwrap_or(1) as usize
                }
                _ => x[1],
            };
            for i in 0..2 {
                let h = x[2 + i] as i64;
                let v = if n.op_type == "ConvTranspose" {
                    s[i] * (h - 1) + d[i] * (k[i] - 1) + 1 - pads[i] - pads[i + 2]
                } else {
                    let eff = d[i] * (k[i] - 1) + 1;
                    let num = h + pads[i] + pads[i + 2] - eff;
                    if num < 0 {
                        return None;
                    }
                    if int(n, "ceil_mode") == Some(1) {
                        (num + s[i] - 1) / s[i] + 1
                    } else {
                        num / s[i] + 1
                    }
                };
                if v <= 0 {
                    return None;
                }
                out[2 + i] = v as usize;
            }
            one(out)
        }
        "MaxUnpool" => {
            // Inputs X, I[, output_shape]; without output_shape: (in - 1) * s + k - pads.
            let x = x()?;
            if ins.get(1).copied().flatten()? != x || x.len() != 4 {
                return None;
            }
            if let Some(size) = n.input.get(2).filter(|i| !i.is_empty()) {
                let size = consts.get(size)?;
                let o: Option<Vec<usize>> = size.iter().map(|&d| usize::try_from(d).ok()).collect();
                return one(o?);
            }
            let k = ints(n, "kernel_shape")?;
            let s = ints(n, "strides").unwrap_or(vec![1, 1]);
            let pads = ints(n, "pads").unwrap_or(vec![0; 4]);
            let mut out = x.clone();
            for i in 0..2 {
                let v = (x[2 + i] as i64 - 1) * s[i] + k[i] - pads[i] - pads[i + 2];
                out[2 + i] = usize::try_from(v).ok().filter(|&v| v > 0)?;
            }
            one(out)
        }
        "Resize" => {
            // Inputs X, roi, scales, sizes (opset 13+): sizes as given, else
            // floor(in * scale) in f32, as onnxruntime computes it.
            let x = x()?;
            if let Some(sizes) = n.input.get(3).filter(|i| !i.is_empty()) {
                let o: Option<Vec<usize>> = consts
                    .get(sizes)?
                    .iter()
                    .map(|&d| usize::try_from(d).ok())
                    .collect();
                return one(o?).filter(|o| o[0].len() == x.len());
            }
            let scales = floats.get(n.input.get(2)?)?;
            if scales.len() != x.len() {
                return None;
            }
            let o: Option<Vec<usize>> = x
                .iter()
                .zip(scales)
                .map(|(&d, &s)| {
                    let v = (d as f32 * s).floor();
                    (v >= 1.0).then_some(v as usize)
                })
                .collect();
            one(o?)
        }
        "GlobalMaxPool" | "GlobalAveragePool" => {
            let x = x()?;
            let mut o = x.clone();
            for d in o.iter_mut().skip(2) {
                *d = 1;
            }
            one(o)
        }
        "Gemm" => {
            let a = x()?;
            let b = ins.get(1).copied().flatten()?;
            let ta = int(n, "transA").unwrap_or(0) == 1;
            let tb = int(n, "transB").unwrap_or(0) == 1;
            if a.len() != 2 || b.len() != 2 {
                return None;
            }
            let (m, k1) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
            let (k2, nn) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
            (k1 == k2).then(|| vec![vec![m, nn]])
        }
        "Flatten" => {
            let x = x()?;
            let axis = norm_axis(int(n, "axis").unwrap_or(1), x.len() + 1)?;
            one(vec![x[..axis].iter().product(), x[axis..].iter().product()])
        }
        "Reshape" => {
            let x = x()?;
            let spec = consts.get(n.input.get(1)?)?;
            let total: usize = x.iter().product();
            let mut out = Vec::with_capacity(spec.len());
            let mut infer = None;
            for (i, &d) in spec.iter().enumerate() {
                match d {
                    0 => out.push(*x.get(i)?),
                    -1 => {
                        infer = Some(i);
                        out.push(1);
                    }
                    d if d > 0 => out.push(d as usize),
                    _ => return None,
                }
            }
            if let Some(i) = infer {
                let rest: usize = out.iter().product();
                if rest == 0 || !total.is_multiple_of(rest) {
                    return None;
                }
                out[i] = total / rest;
            }
            (out.iter().product::<usize>() == total).then(|| vec![out])
        }
        "Pad" => {
            let x = x()?;
            let pads = consts.get(n.input.get(1)?)?;
            if pads.len() != 2 * x.len() {
                return None;
            }
            let o: Option<Vec<usize>> = x
                .iter()
                .enumerate()
                .map(|(i, &d)| usize::try_from(d as i64 + pads[i] + pads[i + x.len()]).ok())
                .collect();
            one(o?)
        }
        "Transpose" => {
            let x = x()?;
            let perm = ints(n, "perm")?;
            let o: Option<Vec<usize>> = perm.iter().map(|&p| x.get(p as usize).copied()).collect();
            one(o?)
        }
        "Concat" => {
            let all: Option<Vec<&Vec<usize>>> = ins.iter().copied().collect();
            let all = all?;
            let axis = norm_axis(int(n, "axis")?, all[0].len())?;
            let mut o = all[0].clone();
            o[axis] = 0;
            for s in &all {
                if s.len() != o.len() || s.iter().enumerate().any(|(i, &d)| i != axis && d != o[i])
                {
                    return None;
                }
                o[axis] += s[axis];
            }
            one(o)
        }
        "Split" => {
            let x = x()?;
            let axis = norm_axis(int(n, "axis").unwrap_or(0), x.len())?;
            let sizes = consts.get(n.input.get(1)?)?;
            if sizes.iter().sum::<i64>() != x[axis] as i64 || sizes.len() != n.output.len() {
                return None;
            }
            Some(
                sizes
                    .iter()
                    .map(|&s| {
                        let mut o = x.clone();
                        o[axis] = s as usize;
                        o
                    })
                    .collect(),
            )
        }
        "Slice" => {
            let x = x()?;
            let starts = consts.get(n.input.get(1)?)?;
            let ends = consts.get(n.input.get(2)?)?;
            let axes = consts.get(n.input.get(3)?)?;
            let mut o = x.clone();
            for ((&s, &e), &a) in starts.iter().zip(ends).zip(axes) {
                let a = norm_axis(a, x.len())?;
                let e = e.min(x[a] as i64);
                if s < 0 || e < s {
                    return None;
                }
                o[a] = (e - s) as usize;
            }
            one(o)
        }
        "ArgMax" | "ReduceMax" | "ReduceSum" | "ReduceMean" | "ReduceL2" => {
            let x = x()?;
            let mut o = x.clone();
            let axes: Vec<i64> = match n.op_type.as_str() {
                "ArgMax" => vec![int(n, "axis").unwrap_or(0)],
                "ReduceSum" => consts.get(n.input.get(1)?)?.clone(),
                _ => ints(n, "axes")?,
            };
            for a in axes {
                o[norm_axis(a, x.len())?] = 1;
            }
            if int(n, "keepdims").unwrap_or(1) != 1 {
                return None;
            }
            one(o)
        }
        "ConstantOfShape" => {
            let dims = consts.get(n.input.first()?)?;
            let o: Option<Vec<usize>> = dims.iter().map(|&d| usize::try_from(d).ok()).collect();
            one(o?)
        }
        "LSTM" | "RNN" => {
            // X [seq, batch, input], W [dirs, gates * H, input], R [dirs, gates * H, H];
            // outputs Y [seq, dirs, batch, H], Y_h (and LSTM's Y_c) [dirs, batch, H].
            let x = x()?;
            let w = ins.get(1).copied().flatten()?;
            let r = ins.get(2).copied().flatten()?;
            let h = usize::try_from(int(n, "hidden_size")?).ok()?;
            let gates = if n.op_type == "LSTM" { 4 } else { 1 };
            if x.len() != 3 || w.len() != 3 || r.len() != 3 || w[2] != x[2] {
                return None;
            }
            if w[1] != gates * h || r[1] != gates * h || r[2] != h || r[0] != w[0] {
                return None;
            }
            let state = vec![w[0], x[1], h];
            for i in [5, 6].iter().take(if gates == 4 { 2 } else { 1 }) {
                if let Some(s) = ins.get(*i).copied().flatten() {
                    if *s != state {
                        return None;
                    }
                }
            }
            let mut outs = vec![vec![x[0], w[0], x[1], h], state.clone()];
            if gates == 4 {
                outs.push(state);
            }
            Some(outs)
        }
        "Gather" => {
            let (data, idx) = (x()?, ins.get(1).copied().flatten()?);
            let a = norm_axis(int(n, "axis").unwrap_or(0), data.len())?;
            let mut o = data[..a].to_vec();
            o.extend_from_slice(idx);
            o.extend_from_slice(&data[a + 1..]);
            one(o)
        }
        "MaxRoiPool" => {
            // X [N, C, H, W], rois [R, 5] -> [R, C, pooled_h, pooled_w].
            let (x, rois) = (x()?, ins.get(1).copied().flatten()?);
            let pooled = ints(n, "pooled_shape")?;
            if x.len() != 4 || rois.len() != 2 || rois[1] != 5 || pooled.len() != 2 {
                return None;
            }
            let ph = usize::try_from(pooled[0]).ok()?;
            let pw = usize::try_from(pooled[1]).ok()?;
            one(vec![rois[0], x[1], ph, pw])
        }
        _ => None,
    }
}
