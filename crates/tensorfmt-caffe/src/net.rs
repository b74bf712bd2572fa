//! The net definition model: a deploy prototxt parsed, upgraded as Caffe's
//! `UpgradeNetAsNeeded` does and filtered for the TEST phase ([`parse_net`]), and a
//! caffemodel's blobs by layer name ([`layer_blobs`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use prost::Message as _;
use prost_reflect::{DynamicMessage, ReflectMessage, Value};
use tensorfmt_core::{Limits, ReadOptions, Tensor};

use crate::error::{CaffeError, Result};
use crate::proto::{self, LayerParameter};
use crate::prototxt::{self, fork_value, ForkValue, Schema};
use crate::raw::{Model, NetVersion};

/// Layer types that read data from files or memory in Caffe. In a deploy net that keeps
/// them (after phase filtering) their tops become net inputs, as the `Input` layer's do.
pub const DATA_LAYER_TYPES: [&str; 8] = [
    "Data",
    "ImageData",
    "MemoryData",
    "HDF5Data",
    "WindowData",
    "DummyData",
    "AnnotatedData",
    "VideoData",
];

/// How [`parse_net_with`] reads a net.
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// Caps: the prototxt size (times [`prototxt::PROTOTXT_ALLOC_FACTOR`]) against
    /// `max_alloc`, the layer count against `max_layers`.
    pub limits: Limits,
    /// Refuse what Caffe refuses but OpenCV reads (a net with both `layer` and
    /// `layers`: Caffe refuses it, OpenCV reads `layers` and drops `layer`).
    pub strict: bool,
    /// The net state layers are filtered with: phase (TEST for a deploy net), level,
    /// stages. `stages` are added to those of the prototxt's own `state`.
    pub phase: proto::Phase,
    /// Net state level (Caffe's default 0).
    pub level: i32,
    /// Net state stages.
    pub stages: Vec<String>,
}

impl Default for NetOptions {
    fn default() -> NetOptions {
        NetOptions {
            limits: Limits::default(),
            strict: false,
            phase: proto::Phase::Test,
            level: 0,
            stages: Vec::new(),
        }
    }
}

impl From<&ReadOptions> for NetOptions {
    fn from(o: &ReadOptions) -> NetOptions {
        NetOptions {
            limits: o.limits,
            strict: o.strict,
            ..NetOptions::default()
        }
    }
}

/// A net input: an `Input` layer's top (or a net `input` field upgraded into one, or a
/// data layer's top).
#[derive(Debug, Clone, PartialEq)]
pub struct NetInput {
    /// Blob name.
    pub name: String,
    /// Declared shape (N, C, H, W usually); empty when the net does not declare one.
    pub shape: Vec<i64>,
    /// 1-based line where the input was declared (0 when unknown).
    pub line: usize,
}

/// Preprocessing hints of a data layer's `transform_param` (mean, scale, crop).
#[derive(Debug, Clone, PartialEq)]
pub struct Transform {
    /// The layer that declared them.
    pub layer: String,
    /// Multiplier applied after the mean subtraction (default 1).
    pub scale: f32,
    /// Mean file (a `.binaryproto`), if any.
    pub mean_file: Option<String>,
    /// Per-channel mean values (one value: all channels).
    pub mean_values: Vec<f32>,
    /// Center crop size (0: none).
    pub crop_size: u32,
    /// Random mirroring (training only).
    pub mirror: bool,
    /// Force 3 color channels.
    pub force_color: bool,
    /// Force 1 channel.
    pub force_gray: bool,
}

impl Transform {
    fn from_param(layer: &str, t: &proto::TransformationParameter) -> Transform {
        Transform {
            layer: layer.to_string(),
            scale: t.scale(),
            mean_file: t.mean_file.clone(),
            mean_values: t.mean_value.clone(),
            crop_size: t.crop_size(),
            mirror: t.mirror(),
            force_color: t.force_color(),
            force_gray: t.force_gray(),
        }
    }
}

/// One layer of an upgraded, filtered net.
#[derive(Debug, Clone)]
pub struct LayerDef {
    /// Layer name.
    pub name: String,
    /// V2 type string (`Convolution`, `ReLU`, fork types such as `Upsample`).
    pub kind: String,
    /// Input blob names.
    pub bottoms: Vec<String>,
    /// Output blob names (in-place layers repeat a bottom).
    pub tops: Vec<String>,
    /// The typed, upgraded parameters (fields of the builtin schema; a fork schema's
    /// other fields are read with [`LayerDef::fork_field`]). Boxed: the struct is about
    /// 5 KB, moved once from the parse into the net.
    pub param: Box<LayerParameter>,
    /// 1-based line of the layer's `layer {` / `layers {` (0 for synthesized layers).
    pub line: usize,
    /// The layer as a fork schema parsed it (its fields the builtin schema lacks); `None`
    /// for the builtin schema, whose typed `param` holds everything.
    dynamic: Option<Arc<DynamicMessage>>,
}

impl PartialEq for LayerDef {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.kind == other.kind
            && self.bottoms == other.bottoms
            && self.tops == other.tops
            && self.param == other.param
            && self.line == other.line
    }
}

impl LayerDef {
    /// A layer from typed parameters (tests, synthetic nets): name, type, bottoms and
    /// tops are taken from `param`.
    ///
    /// ```
    /// use tensorfmt_caffe::{proto, LayerDef};
    /// let l = LayerDef::from_param(proto::LayerParameter {
    ///     name: Some("relu".into()), r#type: Some("ReLU".into()),
    ///     bottom: vec!["x".into()], top: vec!["x".into()], ..Default::default() });
    /// assert_eq!((l.kind.as_str(), l.tops[0].as_str()), ("ReLU", "x"));
    /// ```
    pub fn from_param(param: LayerParameter) -> LayerDef {
        LayerDef {
            name: param.name().to_string(),
            kind: param.r#type().to_string(),
            bottoms: param.bottom.clone(),
            tops: param.top.clone(),
            param: Box::new(param),
            line: 0,
            dynamic: None,
        }
    }

    /// A field of one of the layer's parameter messages as the parsing schema defines
    /// it, including fields only a fork schema knows: `fork_field("upsample_param",
    /// "scale")`, `fork_field("interp_param", "zoom_factor")`,
    /// `fork_field("shuffle_channel_param", "group")`, `fork_field("bn_param",
    /// "bn_mode")`. `None` when the layer has no `param_field` message or the schema
    /// has no such field; the field's default when the message is present without it.
    ///
    /// ```
    /// use tensorfmt_caffe::{parse_net, ForkValue, Schema};
    /// let text = "layer { name: 'p' type: 'Pooling' bottom: 'x' top: 'y' \
    ///             pooling_param { kernel_size: 3 } }";
    /// let net = parse_net(text, Schema::builtin(), &Default::default())?;
    /// let p = &net.layers[0];
    /// assert_eq!(p.fork_field("pooling_param", "kernel_size"), Some(ForkValue::UInt(3)));
    /// assert_eq!(p.fork_field("pooling_param", "stride"), Some(ForkValue::UInt(1)));
    /// assert_eq!(p.fork_field("pooling_param", "pool").unwrap().as_str(), Some("MAX"));
    /// assert_eq!(p.fork_field("upsample_param", "scale"), None);
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn fork_field(&self, param_field: &str, field: &str) -> Option<ForkValue> {
        let pm = self.param_message(param_field)?;
        let f = pm.descriptor().get_field_by_name(field)?;
        let v = pm.get_field(&f);
        Some(fork_value(&v, &f.kind()))
    }

    /// [`LayerDef::fork_field`] only when the prototxt sets the field (protobuf
    /// `has_field`), `None` when it is left at its default.
    ///
    /// ```
    /// use tensorfmt_caffe::{parse_net, Schema};
    /// let text = "layer { name: 'p' type: 'Pooling' pooling_param { kernel_size: 3 } }";
    /// let net = parse_net(text, Schema::builtin(), &Default::default())?;
    /// assert!(net.layers[0].fork_field_if_set("pooling_param", "kernel_size").is_some());
    /// assert!(net.layers[0].fork_field_if_set("pooling_param", "stride").is_none());
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn fork_field_if_set(&self, param_field: &str, field: &str) -> Option<ForkValue> {
        let pm = self.param_message(param_field)?;
        let f = pm.descriptor().get_field_by_name(field)?;
        if !pm.has_field(&f) {
            return None;
        }
        Some(fork_value(&pm.get_field(&f), &f.kind()))
    }

    /// Whether the layer sets the parameter message `param_field` (e.g. `bn_param`).
    pub fn has_param(&self, param_field: &str) -> bool {
        self.param_message(param_field).is_some()
    }

    /// The whole parameter message `param_field` as set in the prototxt (set fields only).
    pub fn fork_param(&self, param_field: &str) -> Option<ForkValue> {
        let pm = self.param_message(param_field)?;
        Some(fork_value(
            &Value::Message(pm.clone()),
            &prost_reflect::Kind::Message(pm.descriptor()),
        ))
    }

    fn param_message(&self, param_field: &str) -> Option<DynamicMessage> {
        let decoded;
        let dm = match &self.dynamic {
            Some(dm) => dm.as_ref(),
            None => {
                // A layer parsed with the builtin schema (or upgraded from V0, or built
                // from typed parameters) keeps no dynamic message: its typed parameters
                // hold every field the schema has, read back through the builtin
                // descriptor when asked (a few layer types ask; every layer would
                // otherwise keep a second copy of its parameters).
                let desc = Schema::builtin()
                    .pool
                    .get_message_by_name("caffe.LayerParameter")?;
                decoded =
                    DynamicMessage::decode(desc, self.param.encode_to_vec().as_slice()).ok()?;
                &decoded
            }
        };
        let pf = dm.descriptor().get_field_by_name(param_field)?;
        if pf.is_list() || !dm.has_field(&pf) {
            return None;
        }
        match dm.get_field(&pf).as_ref() {
            Value::Message(m) => Some(m.clone()),
            _ => None,
        }
    }
}

/// A deploy net: inputs, layers (upgraded to V2, filtered for the TEST phase, `Input`
/// and data layers turned into [`NetInput`]s) and preprocessing hints.
#[derive(Debug, Clone, PartialEq)]
pub struct NetDef {
    /// The net's `name` (may be empty).
    pub name: String,
    /// Net inputs in declaration order.
    pub inputs: Vec<NetInput>,
    /// The computing layers in order (no `Input` or data layers).
    pub layers: Vec<LayerDef>,
    /// A data layer's `transform_param`, if the net keeps one.
    pub transform: Option<Transform>,
    /// What was read although Caffe would refuse it (lenient mode).
    pub warnings: Vec<String>,
}

impl NetDef {
    /// The net's output blobs as Caffe computes them: every blob produced (input or
    /// top) that no later layer consumes, in order of production.
    ///
    /// ```
    /// use tensorfmt_caffe::{parse_net, Schema};
    /// let text = "input: 'x' input_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8 \
    ///   layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y' \
    ///           convolution_param { num_output: 4 kernel_size: 3 } } \
    ///   layer { name: 'r' type: 'ReLU' bottom: 'y' top: 'y' }";
    /// let net = parse_net(text, Schema::builtin(), &Default::default())?;
    /// assert_eq!(net.inputs[0].shape, vec![1, 3, 8, 8]);
    /// assert_eq!(net.output_blobs(), vec!["y".to_string()]);
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn output_blobs(&self) -> Vec<String> {
        self.output_blobs_ignoring(&[])
    }

    /// [`NetDef::output_blobs`] as if the layers of the types in `kinds` were not in
    /// the net (a blob only a `Silence` layer consumes is an output of the rest).
    ///
    /// ```
    /// use tensorfmt_caffe::{parse_net, Schema};
    /// let text = "input: 'x' input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1 \
    ///   layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' } \
    ///   layer { name: 's' type: 'Silence' bottom: 'y' }";
    /// let net = parse_net(text, Schema::builtin(), &Default::default())?;
    /// assert!(net.output_blobs().is_empty());
    /// assert_eq!(net.output_blobs_ignoring(&["Silence"]), vec!["y".to_string()]);
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn output_blobs_ignoring(&self, kinds: &[&str]) -> Vec<String> {
        let mut order: Vec<String> = Vec::new();
        let mut live: HashMap<String, usize> = HashMap::new();
        let mut alive: Vec<bool> = Vec::new();
        let produce = |name: &str,
                       order: &mut Vec<String>,
                       alive: &mut Vec<bool>,
                       live: &mut HashMap<String, usize>| {
            if let Some(&i) = live.get(name) {
                alive[i] = false;
            }
            live.insert(name.to_string(), order.len());
            order.push(name.to_string());
            alive.push(true);
        };
        for i in &self.inputs {
            produce(&i.name, &mut order, &mut alive, &mut live);
        }
        for l in self
            .layers
            .iter()
            .filter(|l| !kinds.contains(&l.kind.as_str()))
        {
            for b in &l.bottoms {
                if let Some(&i) = live.get(b.as_str()) {
                    alive[i] = false;
                }
            }
            for t in &l.tops {
                produce(t, &mut order, &mut alive, &mut live);
            }
        }
        order
            .into_iter()
            .zip(alive)
            .filter(|(_, a)| *a)
            .map(|(n, _)| n)
            .collect()
    }
}

/// Parses a deploy prototxt with `schema` and Caffe's defaults for a deploy net
/// (phase TEST, level 0, no stages); `options.limits` caps size and layer count,
/// `options.strict` refuses nets mixing `layer` and `layers` as Caffe does.
///
/// Errors name the line and column: malformed text, an unknown field (naming the field
/// and suggesting `--proto FORK.proto`), an unknown V1 layer type, inputs whose shapes
/// do not match their count, a layer with include and exclude rules, a V0 padding layer
/// that feeds neither a convolution nor a pooling.
///
/// ```
/// use tensorfmt_caffe::{parse_net, CaffeError, Schema};
/// let v1 = "name: 'old' input: 'data' input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4\n\
///   layers { name: 'fc' type: INNER_PRODUCT bottom: 'data' top: 'fc'\n\
///            inner_product_param { num_output: 2 } }\n";
/// let net = parse_net(v1, Schema::builtin(), &Default::default())?;
/// assert_eq!((net.layers[0].kind.as_str(), net.layers[0].line), ("InnerProduct", 2));
/// let err = parse_net("layer { name: 'u' upsampel_param { scale: 2 } }", Schema::builtin(),
///                     &Default::default()).unwrap_err();
/// assert!(matches!(err, CaffeError::UnknownField { line: 1, .. }));
/// assert!(err.to_string().contains("--proto"));
/// # Ok::<(), CaffeError>(())
/// ```
pub fn parse_net(text: &str, schema: &Schema, options: &ReadOptions) -> Result<NetDef> {
    parse_net_with(text, schema, &NetOptions::from(options))
}

/// [`parse_net`] with a chosen net state and limits.
pub fn parse_net_with(text: &str, schema: &Schema, options: &NetOptions) -> Result<NetDef> {
    let mut parsed = prototxt::parse_text(text, schema, &options.limits)?;
    // The layer lists are moved out (no copy) and converted one by one, so that errors
    // name the layer; the rest of the NetParameter is converted whole.
    let v2 = take_list(&mut parsed.message, "layer");
    let v1 = take_list(&mut parsed.message, "layers");
    let lines_of = |field: &str| {
        parsed
            .scan
            .top_fields
            .get(field)
            .cloned()
            .unwrap_or_default()
    };
    let net: proto::NetParameter =
        prototxt::to_typed(&parsed.message, schema, "NetParameter", "NetParameter")?;
    let total = (v2.len() as u64).saturating_add(v1.len() as u64);
    if options.limits.check_layers(total).is_err() {
        return Err(CaffeError::Limit {
            path: "NetParameter.layer".into(),
            offset: 0,
            what: "layer count",
            value: total,
            limit: options.limits.max_layers,
        });
    }
    let mut warnings = Vec::new();
    let v2_lines = lines_of("layer");
    let v1_lines = lines_of("layers");
    // (typed layer, its dynamic message (fork schemas only), line). Boxed: moved into the
    // net's layers one by one below, so the two lists do not each hold every layer's
    // parameters (about 5 KB each) at once.
    let mut layers: Vec<(Box<LayerParameter>, Option<Arc<DynamicMessage>>, usize)> = Vec::new();
    let keep_dynamic = |m: DynamicMessage| (!schema.is_builtin()).then(|| Arc::new(m));
    if !v1.is_empty() {
        if !v2.is_empty() {
            let (l2, l1) = (
                v2_lines.first().copied().unwrap_or(0),
                v1_lines.first().copied().unwrap_or(0),
            );
            let msg = format!(
                "the net has both `layer` (first at line {l2}) and `layers` (first at line {l1}); Caffe refuses to upgrade such a NetParameter"
            );
            if options.strict {
                return Err(CaffeError::Net {
                    line: l2,
                    message: msg,
                });
            }
            warnings.push(format!(
                "{msg}; read its `layers` (V1) and ignored `layer`, as OpenCV does"
            ));
        }
        let mut typed_v1 = Vec::with_capacity(v1.len());
        for (i, m) in v1.into_iter().enumerate() {
            let line = v1_lines.get(i).copied().unwrap_or(0);
            let path = format!("layers[{i}]");
            let typed: proto::V1LayerParameter =
                prototxt::to_typed(&m, schema, "V1LayerParameter", &path)?;
            typed_v1.push((typed, m, line));
        }
        if typed_v1.iter().any(|(t, _, _)| t.layer.is_some()) {
            // A V0 net: upgraded to V1 first; fork_field does not apply to its layers.
            let upgraded = crate::upgrade::v0_to_v1(
                typed_v1.into_iter().map(|(t, _, line)| (t, line)).collect(),
                &net.input,
                &mut warnings,
            )?;
            for (mut typed, line) in upgraded {
                crate::upgrade::upgrade_data_transform(&mut typed);
                layers.push((Box::new(crate::upgrade::v1_to_v2(typed, line)?), None, line));
            }
        } else {
            for (mut typed, m, line) in typed_v1 {
                crate::upgrade::upgrade_data_transform(&mut typed);
                let l = crate::upgrade::v1_to_v2(typed, line)?;
                layers.push((Box::new(l), keep_dynamic(m), line));
            }
        }
    } else {
        for (i, m) in v2.into_iter().enumerate() {
            let line = v2_lines.get(i).copied().unwrap_or(0);
            let path = format!("layer[{i}]");
            let l: LayerParameter = prototxt::to_typed(&m, schema, "LayerParameter", &path)?;
            layers.push((Box::new(l), keep_dynamic(m), line));
        }
    }
    let input_line = lines_of("input").first().copied().unwrap_or(0);
    // Net inputs without input_shape or input_dim: Caffe's UpgradeNetInput drops them
    // (a legacy caffemodel's), so the net then fails on them as unknown bottoms. Here
    // they stay inputs without a shape, which a caller can give (`--input-shape`).
    let mut shapeless = Vec::new();
    if let Some(input) = crate::upgrade::input_layer(&net, input_line)? {
        layers.insert(0, (Box::new(input), None, input_line));
    } else {
        shapeless.extend(net.input.iter().map(|name| NetInput {
            name: name.clone(),
            shape: Vec::new(),
            line: input_line,
        }));
    }
    let mut state = net.state.clone().unwrap_or_default();
    state.phase = Some(options.phase as i32);
    state.level = Some(state.level.unwrap_or(0).max(0).max(options.level));
    if options.level != 0 {
        state.level = Some(options.level);
    }
    state.stage.extend(options.stages.iter().cloned());

    let mut out = NetDef {
        name: net.name.clone().unwrap_or_default(),
        inputs: shapeless,
        layers: Vec::with_capacity(layers.len()),
        transform: None,
        warnings,
    };
    for (mut param, dynamic, line) in layers {
        crate::upgrade::upgrade_batch_norm(&mut param);
        if !crate::upgrade::layer_included(&param, &state, line)? {
            continue;
        }
        let name = param.name().to_string();
        let kind = param.r#type().to_string();
        if kind.is_empty() {
            return Err(CaffeError::Net {
                line,
                message: format!("layer {name:?} has no type"),
            });
        }
        if out.transform.is_none() {
            if let Some(t) = &param.transform_param {
                out.transform = Some(Transform::from_param(&name, t));
            }
        }
        if kind == "Input" {
            let shapes = param
                .input_param
                .as_ref()
                .map(|p| p.shape.clone())
                .unwrap_or_default();
            if shapes.len() > 1 && shapes.len() != param.top.len() {
                return Err(CaffeError::Net {
                    line,
                    message: format!(
                        "Input layer {name:?} has {} tops but {} shapes (Caffe: one shape, or one per top)",
                        param.top.len(),
                        shapes.len()
                    ),
                });
            }
            for (i, top) in param.top.iter().enumerate() {
                let shape = shapes
                    .get(if shapes.len() == 1 { 0 } else { i })
                    .map(|s| s.dim.clone())
                    .unwrap_or_default();
                out.inputs.push(NetInput {
                    name: top.clone(),
                    shape,
                    line,
                });
            }
            continue;
        }
        if DATA_LAYER_TYPES.contains(&kind.as_str()) {
            for (i, top) in param.top.iter().enumerate() {
                out.inputs.push(NetInput {
                    name: top.clone(),
                    shape: data_layer_shape(&param, i),
                    line,
                });
            }
            continue;
        }
        out.layers.push(LayerDef {
            name,
            kind,
            bottoms: param.bottom.clone(),
            tops: param.top.clone(),
            param,
            line,
            dynamic,
        });
    }
    // Each bottom and top costs the lowering about 2 KB (a value, its shapes, a node
    // or an output): a Split of 100,000 tops (a 1.4 MB prototxt) took 244 MiB.
    let refs = out
        .layers
        .iter()
        .map(|l| (l.bottoms.len() + l.tops.len()) as u64)
        .fold(out.inputs.len() as u64, u64::saturating_add);
    let limit = options.limits.max_layers.saturating_mul(4);
    if refs > limit {
        return Err(CaffeError::Limit {
            path: "NetParameter.layer".into(),
            offset: 0,
            what: "count of blob references (bottoms and tops)",
            value: refs,
            limit,
        });
    }
    Ok(out)
}

/// The shape a data layer declares for its top `i`, where it declares one.
fn data_layer_shape(l: &LayerParameter, i: usize) -> Vec<i64> {
    match l.r#type() {
        "MemoryData" => match &l.memory_data_param {
            Some(p) if i == 0 => vec![
                i64::from(p.batch_size()),
                i64::from(p.channels()),
                i64::from(p.height()),
                i64::from(p.width()),
            ],
            Some(p) if i == 1 => vec![i64::from(p.batch_size()), 1, 1, 1],
            _ => Vec::new(),
        },
        "DummyData" => match &l.dummy_data_param {
            Some(p) if !p.shape.is_empty() => p
                .shape
                .get(if p.shape.len() == 1 { 0 } else { i })
                .map(|s| s.dim.clone())
                .unwrap_or_default(),
            Some(p) if !p.num.is_empty() => {
                let pick = |v: &[u32]| -> i64 {
                    i64::from(
                        v.get(if v.len() == 1 { 0 } else { i })
                            .copied()
                            .unwrap_or(0),
                    )
                };
                vec![
                    pick(&p.num),
                    pick(&p.channels),
                    pick(&p.height),
                    pick(&p.width),
                ]
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Moves the messages of the repeated message field `field` out of `dm`.
fn take_list(dm: &mut DynamicMessage, field: &str) -> Vec<DynamicMessage> {
    match dm.take_field_by_name(field) {
        Some(Value::List(items)) => items
            .into_iter()
            .filter_map(|v| match v {
                Value::Message(m) => Some(m),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A caffemodel's blobs by layer name, for joining with a [`NetDef`] (see
/// [`layer_blobs`]).
#[derive(Debug, Clone)]
pub struct LayerBlobs {
    layers: Vec<(String, String, Vec<Tensor>)>,
    by_name: HashMap<String, VecDeque<usize>>,
    taken: Vec<bool>,
}

impl LayerBlobs {
    /// The blobs of the first not-yet-taken caffemodel layer named `name` that has
    /// blobs (OpenCV's rule: a repeated name consumes its layers in file order).
    pub fn take(&mut self, name: &str) -> Option<Vec<Tensor>> {
        let i = self.by_name.get_mut(name)?.pop_front()?;
        self.taken[i] = true;
        Some(std::mem::take(&mut self.layers[i].2))
    }

    /// Number of caffemodel layers with blobs.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether the caffemodel has no layer with blobs.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Names (and V2 types) of the layers with blobs not taken yet, in file order
    /// (Caffe logs them as "Ignoring source layer").
    pub fn remaining(&self) -> Vec<(&str, &str)> {
        self.layers
            .iter()
            .zip(&self.taken)
            .filter(|(_, t)| !**t)
            .map(|((n, k, _), _)| (n.as_str(), k.as_str()))
            .collect()
    }
}

/// Every layer of a caffemodel (V2, V1 or V0) that has blobs, with its blobs as
/// tensors. Legacy 4-D blobs (`num`/`channels`/`height`/`width`) get the shape modern
/// Caffe gives them: `(1, 1, M, N)` → `[M, N]` and `(1, 1, 1, N)` → `[N]` (V1
/// InnerProduct weights and every bias); other shapes are kept (use
/// [`conform_blob`] to check a blob against the shape a layer expects).
///
/// ```
/// use tensorfmt_caffe::{encode_weights_model, layer_blobs, read_model, RawBlob, WeightsLayer};
/// let bytes = encode_weights_model(None, &[
///     WeightsLayer { name: "a".into(), type_name: None, blobs: vec![RawBlob::from_f32(&[1], &[1.0])] },
///     WeightsLayer { name: "a".into(), type_name: None, blobs: vec![RawBlob::from_f32(&[1], &[2.0])] },
/// ]);
/// let mut blobs = layer_blobs(&read_model(bytes.into())?)?;
/// assert_eq!(blobs.take("a").unwrap()[0].to_vec::<f32>()?, vec![1.0]);
/// assert_eq!(blobs.take("a").unwrap()[0].to_vec::<f32>()?, vec![2.0]);
/// assert!(blobs.take("a").is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn layer_blobs(model: &Model) -> Result<LayerBlobs> {
    let mut out = LayerBlobs {
        layers: Vec::new(),
        by_name: HashMap::new(),
        taken: Vec::new(),
    };
    for (i, l) in model.layers.iter().enumerate() {
        if l.blobs.is_empty() {
            continue;
        }
        let list = match l.version {
            NetVersion::V2 => "layer",
            _ => "layers",
        };
        let mut tensors = Vec::with_capacity(l.blobs.len());
        for (j, b) in l.blobs.iter().enumerate() {
            let path = format!("{list}[{i}].blobs[{j}]");
            let shape = b.legacy_squeezed_shape(&path)?;
            tensors.push(b.tensor_with_shape(shape, &path)?);
        }
        out.by_name
            .entry(l.name.clone())
            .or_default()
            .push_back(out.layers.len());
        out.layers
            .push((l.name.clone(), l.type_name.clone(), tensors));
        out.taken.push(false);
    }
    Ok(out)
}

/// Checks a blob against the shape a layer expects: equal shapes pass; a blob with the
/// same element count whose shape differs only by leading/inner 1s (legacy 4-D blobs)
/// is reshaped; anything else is Caffe's "shape mismatch" error.
///
/// ```
/// use tensorfmt_caffe::conform_blob;
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec(vec![0f32; 4], vec![1, 1, 1, 4], Order::RowMajor)?;
/// assert_eq!(conform_blob(t, &[4], "conv1", 1)?.dims(), &[4]);
/// let t = Tensor::from_vec(vec![0f32; 4], vec![2, 2], Order::RowMajor)?;
/// assert!(conform_blob(t, &[4, 1], "ip", 0).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn conform_blob(t: Tensor, expected: &[usize], layer: &str, index: usize) -> Result<Tensor> {
    if t.dims() == expected {
        return Ok(t);
    }
    let strip = |d: &[usize]| d.iter().copied().filter(|&x| x != 1).collect::<Vec<_>>();
    if strip(t.dims()) == strip(expected) {
        return Ok(t.reshape(expected.to_vec())?);
    }
    Err(CaffeError::Blob(format!(
        "Cannot copy param {index} weights from layer '{layer}'; shape mismatch. Source param shape is {}; target param shape is {}",
        crate::raw::shape_string(t.dims()),
        crate::raw::shape_string(expected)
    )))
}
