//! # tensorfmt-lower
//!
//! Caffe nets (a deploy prototxt read by `tensorfmt-caffe` into a [`NetDef`], joined
//! with a caffemodel's blobs by layer name) lowered to ONNX models (opset
//! [`tensorfmt_onnx::OPSET`]) written by `tensorfmt-onnx`. It sits above both format
//! crates, which know nothing of each other.
//!
//! How a net is lowered:
//! - every layer type must have a lowering in the registry ([`supported_layers`]);
//!   otherwise the error lists **every** unsupported layer (name and type) before
//!   anything is written;
//! - each blob write gets a fresh SSA value (in-place `ReLU`, `BatchNorm`, `Scale`,
//!   `Dropout` ...); the last write of a blob carries the blob's own name, so graph
//!   inputs and outputs are named after the net's blobs;
//! - each layer computes its tops' shapes with **Caffe's** rule, and the ONNX nodes it
//!   emits are run through **ONNX's** shape rules; a disagreement is an error naming the
//!   layer (this is how ceil-mode pooling, Flatten and Deconvolution mistakes are caught
//!   before any runtime sees the model). Only verified shapes go into `value_info`;
//! - graph outputs are the blobs no later layer consumes (or [`LowerOptions::outputs`]),
//!   and nodes that do not feed an output are pruned;
//! - [`LowerOptions::stop_before`] cuts the net before the layers named (by name or
//!   type) and everything that reads what they compute; the graph then outputs the blobs
//!   the cut part reads (`Lowered::stopped` lists the cut layers). SSD's `DetectionOutput`
//!   is lowered (NonMaxSuppression); stopping before it keeps its inputs as outputs for
//!   runtimes without NonMaxSuppression.
//!
//! ```
//! use tensorfmt_caffe::{parse_net, Schema};
//! let net = parse_net("input: 'x' input_shape { dim: 1 dim: 2 dim: 3 dim: 3 } \
//!     layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'x' } \
//!     layer { name: 'p' type: 'Pooling' bottom: 'x' top: 'p' \
//!             pooling_param { pool: MAX kernel_size: 2 stride: 2 } }", Schema::builtin(), &Default::default())?;
//! let mut no_blobs = std::collections::HashMap::new();
//! let lowered = tensorfmt_lower::lower(&net, &mut no_blobs, &Default::default())?;
//! let g = lowered.model.graph.as_ref().unwrap();
//! assert_eq!(g.output[0].name, "p");
//! // Caffe's ceil mode: 3x3 pooled 2/2 gives 2x2 (ONNX's floor rule would give 1x1).
//! assert_eq!(lowered.shapes["p"], vec![1, 2, 2, 2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod builder;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod layers;
mod rpn;
mod state_dict;
mod stop;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use tensorfmt_caffe::{LayerBlobs, LayerDef, NetDef, Schema};
use tensorfmt_core::ReadOptions;
use tensorfmt_onnx::proto::{
    tensor_shape_proto::{dimension::Value as DimValue, Dimension},
    type_proto, GraphProto, ModelProto, OperatorSetIdProto, StringStringEntryProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

pub use builder::Value;
pub use error::{LowerError, UnsupportedLayer};
pub use layers::supported_layers;
pub use rpn::RpnOptions;
pub use state_dict::{state_dict, torch_name, Naming};

use builder::Builder;
use error::Fail;

/// Where a lowering takes each layer's blobs from: a caffemodel's
/// [`LayerBlobs`], or a map from layer name to tensors (hand-built and random nets).
pub trait BlobSource {
    /// The blobs of the next layer named `name` (each name consumed once per layer).
    fn take(&mut self, name: &str) -> Option<Vec<tensorfmt_core::Tensor>>;
    /// Layers with blobs nobody took, as `name (type)` strings.
    fn unused(&self) -> Vec<String>;
}

impl BlobSource for LayerBlobs {
    fn take(&mut self, name: &str) -> Option<Vec<tensorfmt_core::Tensor>> {
        LayerBlobs::take(self, name)
    }
    fn unused(&self) -> Vec<String> {
        self.remaining()
            .iter()
            // A weights-only caffemodel (V2 with no type) names no type.
            .map(|(n, k)| {
                if k.is_empty() {
                    n.to_string()
                } else {
                    format!("{n} ({k})")
                }
            })
            .collect()
    }
}

impl BlobSource for HashMap<String, Vec<tensorfmt_core::Tensor>> {
    fn take(&mut self, name: &str) -> Option<Vec<tensorfmt_core::Tensor>> {
        self.remove(name)
    }
    fn unused(&self) -> Vec<String> {
        let mut v: Vec<String> = self.keys().cloned().collect();
        v.sort();
        v
    }
}

/// Options of [`lower`] (the CLI's `--input-shape`, `--outputs`, `--dynamic-batch`).
#[derive(Debug, Clone, Default)]
pub struct LowerOptions {
    /// Input shapes replacing the prototxt's, by input blob name.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Blobs to expose as graph outputs instead of the net's outputs.
    pub outputs: Vec<String>,
    /// A symbolic batch dimension (`N`) on inputs and outputs.
    pub dynamic_batch: bool,
    /// Refuse what would otherwise be a warning (unused caffemodel layers).
    pub strict: bool,
    /// Layer names or types to stop before (`--stop-before DetectionOutput`): those
    /// layers and every layer that reads what they compute are not converted, and the
    /// blobs they read from the rest become the graph outputs. Each entry must match a
    /// layer of the net.
    pub stop_before: Vec<String>,
    /// Bounds of the conversion: `max_computed` (the constants it computes, in all).
    pub limits: tensorfmt_core::Limits,
    /// Overrides of the proposal layers' test-time RPN constants (the CLI's `--rpn`).
    pub rpn: RpnOptions,
    /// Where [`convert_files`] writes the weights: inside the model while it fits
    /// protobuf's 2 GiB (the default), or always in `OUT.onnx.data` beside it
    /// (`--set external_data=true`).
    pub external_data: tensorfmt_onnx::ExternalData,
}

/// The result of [`lower`].
#[derive(Debug, Clone)]
pub struct Lowered {
    /// The ONNX model.
    pub model: ModelProto,
    /// Graph output names: the blobs' names, except a net input rewritten in place
    /// (`bottom: "data" top: "data"`), whose last version is `<blob>/<layer>` (the graph
    /// input keeps the blob's name).
    pub outputs: Vec<String>,
    /// Caffe shapes of every blob's final version, by blob name.
    pub shapes: HashMap<String, Vec<usize>>,
    /// Layers cut by [`LowerOptions::stop_before`] (name, type), in net order: those
    /// named and those reading what they compute.
    pub stopped: Vec<(String, String)>,
    /// Things that were accepted but deserve a note (unused caffemodel layers, ...).
    pub warnings: Vec<String>,
}

/// Element count cap of any blob: Caffe's `count()` must fit an `int`.
const MAX_BLOB_COUNT: u64 = i32::MAX as u64;

fn check_shape(shape: &[usize]) -> Result<(), String> {
    let mut n: u64 = 1;
    for &d in shape {
        n = n.saturating_mul(d as u64);
    }
    if n > MAX_BLOB_COUNT {
        return Err(format!(
            "blob shape {shape:?} has {n} elements, more than Caffe's limit of {MAX_BLOB_COUNT}"
        ));
    }
    Ok(())
}

/// `1,3,224,224`, as `--input-shape` takes it.
fn dims_text(d: &[usize]) -> String {
    d.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

fn layer_err(l: &LayerDef, reason: impl Into<String>) -> LowerError {
    LowerError::Layer {
        layer: l.name.clone(),
        kind: l.kind.clone(),
        line: l.line,
        reason: reason.into(),
    }
}

/// Inputs a deploy prototxt declares with 1 x 1 spatial dims as placeholders "defined
/// at run time" (OpenPose's `input_dim: 1 ... 1 1`), not given by `--input-shape`: the
/// hint a shape error on such a net needs.
fn placeholder_inputs(net: &NetDef, given: &[(String, Vec<usize>)]) -> Option<String> {
    let names: Vec<String> = net
        .inputs
        .iter()
        .filter(|i| i.shape.len() >= 3 && i.shape[2..].iter().all(|&d| d == 1))
        .filter(|i| !given.iter().any(|(n, _)| n == &i.name))
        .map(|i| format!("{} {:?}", i.name, i.shape))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "the net declares input {} with 1 x 1 spatial dims, a placeholder set at run time: give the real size with --input-shape NAME=N,C,H,W (Python: input_shape=)",
            names.join(", ")
        )
    })
}

/// `net` without the layers listed in `gone` and every layer that reads what they
/// compute (directly or not): what can still be lowered to find more unsupported
/// layers.
fn without_tainted(net: &NetDef, gone: &[UnsupportedLayer]) -> NetDef {
    let gone: HashSet<&str> = gone.iter().map(|u| u.name.as_str()).collect();
    let mut tainted: HashSet<&str> = HashSet::new();
    let mut rest = net.clone();
    rest.layers.clear();
    for l in &net.layers {
        if gone.contains(l.name.as_str()) || l.bottoms.iter().any(|b| tainted.contains(b.as_str()))
        {
            tainted.extend(l.tops.iter().map(String::as_str));
        } else {
            for t in &l.tops {
                tainted.remove(t.as_str());
            }
            rest.layers.push(l.clone());
        }
    }
    rest
}

/// Lowers a parsed net with its caffemodel blobs (taken from `blobs` by layer name) to
/// an ONNX model. Nothing is written; see [`convert_files`] for the whole path.
pub fn lower(
    net: &NetDef,
    blobs: &mut dyn BlobSource,
    opts: &LowerOptions,
) -> Result<Lowered, LowerError> {
    // 0. The cut of stop_before: the rest is lowered as a net of its own.
    let cut = stop::cut(net, &opts.stop_before)?;
    for name in &cut.unique_cut_names {
        blobs.take(name);
    }
    let full = net;
    let net: &NetDef = &cut.kept;
    // An input given two shapes: which one was meant? (Caffe's rules and the lowering
    // once took different ones.)
    let mut given: HashMap<&str, &Vec<usize>> = HashMap::new();
    for (name, shape) in &opts.input_shapes {
        if let Some(first) = given.insert(name.as_str(), shape) {
            return Err(LowerError::Net(format!(
                "--input-shape gives input {name:?} twice ({} and {}); give it once",
                dims_text(first),
                dims_text(shape)
            )));
        }
    }
    // 1. Caffe's own shape rules (tensorfmt-caffe), which every lowered layer must agree
    // with. Where they do not know a layer type either, the layers without a lowering are
    // all that can be said: list them.
    let caffe_shapes = match tensorfmt_caffe::infer_shapes(net, &opts.input_shapes) {
        Ok(s) => s,
        Err(e) => {
            let unknown: Vec<UnsupportedLayer> = net
                .layers
                .iter()
                .filter(|l| layers::lookup_layer(l).is_none())
                .map(|l| UnsupportedLayer {
                    name: l.name.clone(),
                    kind: l.kind.clone(),
                    reason: layers::no_lowering_reason(l),
                })
                .collect();
            if unknown.is_empty() {
                use tensorfmt_core::{Classify, ErrorKind};
                return Err(match placeholder_inputs(net, &opts.input_shapes) {
                    Some(hint) if e.kind() == ErrorKind::Format => {
                        LowerError::Net(format!("{e}; {hint}"))
                    }
                    _ => e.into(),
                });
            }
            // The rest of the net (without those layers and what reads them) may hold
            // layers whose parameters no lowering handles: listed too, at once.
            let mut all = unknown;
            let rest = without_tainted(net, &all);
            let sub = LowerOptions {
                outputs: Vec::new(),
                stop_before: Vec::new(),
                ..opts.clone()
            };
            if let Err(LowerError::Unsupported { layers }) = lower(&rest, blobs, &sub) {
                all.extend(layers);
            }
            let order: HashMap<&str, usize> = net
                .layers
                .iter()
                .enumerate()
                .map(|(i, l)| (l.name.as_str(), i))
                .collect();
            all.sort_by_key(|u| order.get(u.name.as_str()).copied().unwrap_or(usize::MAX));
            return Err(LowerError::Unsupported { layers: all });
        }
    };
    // Layers that cannot be lowered (no lowering for the type, or parameters no lowering
    // handles): the walk goes on past them, their tops standing in with Caffe's shapes,
    // so that every such layer is listed at once. `placeholders` are those stand-ins;
    // a layer that fails on one is a consequence, not another report.
    let mut unsupported: Vec<UnsupportedLayer> = Vec::new();
    let mut placeholders: HashSet<String> = HashSet::new();
    let mut graph = layers::Graph {
        rpn: opts.rpn.clone(),
        ..Default::default()
    };
    graph.b.limits = opts.limits;
    // 2. Inputs.
    let input_names: HashSet<&str> = net.inputs.iter().map(|i| i.name.as_str()).collect();
    for (name, _) in &opts.input_shapes {
        if !input_names.contains(name.as_str()) {
            return Err(LowerError::Net(format!(
                "--input-shape names {name:?}, which is not an input of the net (inputs: {})",
                net.inputs
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let mut current: HashMap<String, Value> = HashMap::new();
    let mut graph_inputs = Vec::new();
    // An ONNX value needs a name ("" is an absent optional input); Caffe takes "".
    if let Some(i) = net.inputs.iter().find(|i| i.name.is_empty()) {
        return Err(LowerError::Net(format!(
            "a net input (line {}) has an empty name, which no ONNX value may have",
            i.line
        )));
    }
    for l in &net.layers {
        if l.tops.iter().chain(&l.bottoms).any(String::is_empty) {
            return Err(layer_err(
                l,
                "a bottom or top has an empty blob name, which no ONNX value may have",
            ));
        }
    }
    for b in net
        .layers
        .iter()
        .flat_map(|l| l.tops.iter())
        .chain(net.inputs.iter().map(|i| &i.name))
    {
        graph.b.reserve(b);
    }
    // The input shapes as Caffe's rules resolved them (the prototxt's, or --input-shape's).
    for (i, (_, shape)) in net.inputs.iter().zip(&caffe_shapes.inputs) {
        let shape = shape.clone();
        if shape.contains(&0) {
            return Err(LowerError::Net(format!(
                "input {:?} has a zero dimension in {shape:?}; give a positive shape with --input-shape {}=...",
                i.name, i.name
            )));
        }
        check_shape(&shape).map_err(|e| LowerError::Net(format!("input {:?}: {e}", i.name)))?;
        let v = Value {
            name: i.name.clone(),
            shape,
        };
        graph_inputs.push(v.clone());
        current.insert(i.name.clone(), v);
    }
    // 3. The last write of each blob keeps the blob's name.
    let mut last_write: HashMap<&str, usize> = HashMap::new();
    for (li, l) in net.layers.iter().enumerate() {
        for t in &l.tops {
            last_write.insert(t.as_str(), li);
        }
    }
    // 4. Layers in order.
    let mut onnx_shapes: HashMap<String, Vec<usize>> = graph_inputs
        .iter()
        .map(|v| (v.name.clone(), v.shape.clone()))
        .collect();
    let mut verified: Vec<Value> = Vec::new();
    // Caffe's shapes of the tops sized at run time (`Graph::dynamic`): their bounds.
    let mut bounds: HashMap<String, Vec<usize>> = HashMap::new();
    // Which layer top each value is: (layer index, top index).
    let mut origin: HashMap<String, (usize, usize)> = HashMap::new();
    for (li, l) in net.layers.iter().enumerate() {
        let mut ins = Vec::with_capacity(l.bottoms.len());
        for b in &l.bottoms {
            match current.get(b) {
                Some(v) => ins.push(v.clone()),
                None => {
                    return Err(layer_err(
                        l,
                        format!("bottom {b:?} is not produced by an input or an earlier layer"),
                    ))
                }
            }
        }
        let tops: Vec<String> = l
            .tops
            .iter()
            .map(|t| {
                if last_write.get(t.as_str()) == Some(&li) && !input_names.contains(t.as_str()) {
                    t.clone()
                } else {
                    graph.b.fresh(&format!("{t}/{}", l.name))
                }
            })
            .collect();
        if l.kind != "Upsample" {
            if let Some(v) = ins.iter().find(|v| graph.masks.contains(&v.name)) {
                return Err(layer_err(
                    l,
                    format!(
                        "reads the pooling mask {:?}, which only an Upsample layer can use",
                        v.name
                    ),
                ));
            }
        }
        let layer_shapes = caffe_shapes
            .layers
            .get(li)
            .ok_or_else(|| layer_err(l, "no shapes from Caffe's shape rules (a lowering bug)"))?;
        let expected = &layer_shapes.tops;
        let layer_blobs = blobs.take(&l.name).unwrap_or_default();
        let first_node = graph.b.nodes.len();
        let lowered = match layers::lookup_layer(l) {
            Some(lowering) => lowering.run(&mut layers::LayerCx {
                g: &mut graph,
                layer: l,
                ins: &ins,
                tops: &tops,
                caffe: layer_shapes,
                blobs: &layer_blobs,
            }),
            None => Err(Fail::not_lowered(
                layers::no_lowering_reason(l).unwrap_or_default(),
            )),
        };
        // The graph is bounded as it grows (`Limits::max_nodes`): past it, nothing more
        // was added and the conversion stops here, whatever the layer's own outcome.
        if graph.b.over_nodes {
            let built = (graph.b.nodes.len() + graph.b.inits.len()) as u64;
            return Err(LowerError::Core(tensorfmt_core::Error::LimitExceeded {
                what: "count of ONNX nodes and initializers",
                value: built.saturating_add(1),
                limit: graph.b.limits.max_nodes,
            }));
        }
        let shapes = match lowered {
            Ok(shapes) => shapes,
            Err(fail) => {
                let after_one = ins.iter().any(|v| placeholders.contains(&v.name));
                if fail.not_lowered {
                    // Its own type or parameters, whatever it reads (a placeholder has
                    // Caffe's shape): another change the net needs.
                    unsupported.push(UnsupportedLayer {
                        name: l.name.clone(),
                        kind: l.kind.clone(),
                        reason: (!fail.reason.is_empty()).then_some(fail.reason),
                    });
                } else if !after_one {
                    return Err(layer_err(l, fail.reason));
                }
                // else: a consequence of an earlier unsupported layer, not another report.
                for (i, (t, name)) in l.tops.iter().zip(&tops).enumerate() {
                    let shape = expected.get(i).cloned().unwrap_or_default();
                    placeholders.insert(name.clone());
                    current.insert(
                        t.clone(),
                        Value {
                            name: name.clone(),
                            shape,
                        },
                    );
                }
                continue;
            }
        };
        // A top computed from a size known only at run time follows it.
        if ins.iter().any(|v| graph.from_dynamic.contains(&v.name))
            || tops.iter().any(|t| graph.dynamic.contains_key(t))
        {
            graph.from_dynamic.extend(tops.iter().cloned());
        }
        let expected = caffe_shapes.layers.get(li).map(|s| &s.tops);
        if expected != Some(&shapes) {
            return Err(layer_err(
                l,
                format!("the lowering computes tops {shapes:?}, Caffe's shape rules give {expected:?} (a lowering bug)"),
            ));
        }
        if shapes.len() != tops.len() {
            return Err(layer_err(
                l,
                format!(
                    "the lowering produced {} tops, the layer has {}",
                    shapes.len(),
                    tops.len()
                ),
            ));
        }
        // ONNX's shape rules over the new nodes; a top sized at run time takes Caffe's
        // shape, its bound (checked below at a larger size).
        for (t, s) in tops.iter().zip(&shapes) {
            if graph.dynamic.contains_key(t) {
                bounds.insert(t.clone(), s.clone());
            }
        }
        propagate(
            &graph.b,
            &graph.b.nodes[first_node..],
            &mut onnx_shapes,
            &bounds,
        );
        for (ti, ((t, name), shape)) in l.tops.iter().zip(&tops).zip(shapes).enumerate() {
            origin.insert(name.clone(), (li, ti));
            check_shape(&shape).map_err(|e| layer_err(l, format!("top {t:?}: {e}")))?;
            if shape.contains(&0) {
                return Err(layer_err(
                    l,
                    format!("top {t:?} would have the empty shape {shape:?}"),
                ));
            }
            match onnx_shapes.get(name) {
                Some(s) if *s == shape => verified.push(Value { name: name.clone(), shape: shape.clone() }),
                Some(s) => {
                    return Err(layer_err(
                        l,
                        format!("ONNX's shape rule gives {s:?} for top {t:?}, Caffe's gives {shape:?} (a lowering bug)"),
                    ))
                }
                None => {}
            }
            current.insert(
                t.clone(),
                Value {
                    name: name.clone(),
                    shape,
                },
            );
        }
    }
    if !unsupported.is_empty() {
        return Err(LowerError::Unsupported {
            layers: unsupported,
        });
    }
    // 5. Outputs.
    let outputs: Vec<String> = if opts.outputs.is_empty() {
        cut.outputs.clone()
    } else {
        opts.outputs.clone()
    };
    let mut out_values = Vec::new();
    let mut out_seen: HashSet<&str> = HashSet::new();
    for o in &outputs {
        if !out_seen.insert(o.as_str()) {
            return Err(LowerError::Net(format!("output {o:?} is asked for twice")));
        }
        let v = current.get(o).ok_or_else(|| {
            // A blob only a cut layer computes: say that the cut took it.
            let cut_by = full.layers.iter().find(|l| {
                l.tops.iter().any(|t| t == o)
                    && cut
                        .stopped
                        .iter()
                        .any(|(n, k)| *n == l.name && *k == l.kind)
            });
            LowerError::Net(match cut_by {
                Some(l) => format!(
                    "output {o:?} is computed by layer {:?} ({}), which --stop-before cuts \
                     from the graph",
                    l.name, l.kind
                ),
                None => format!("output {o:?} is not a blob the lowered graph computes"),
            })
        })?;
        // The last version of a blob carries its name, except a net input rewritten in
        // place (`bottom: "data" top: "data"`): the input keeps the name and the output
        // is the last writer's value, `<blob>/<layer>`.
        if v.name != *o && !input_names.contains(o.as_str()) {
            return Err(LowerError::Net(format!(
                "output {o:?}: its last version is named {:?} (a lowering bug)",
                v.name
            )));
        }
        if graph.masks.contains(&v.name) {
            return Err(LowerError::Net(format!("output {o:?} is a max-pooling mask (ONNX indices, not Caffe's), which cannot be exposed")));
        }
        out_values.push(v.clone());
    }
    if out_values.is_empty() {
        return Err(LowerError::Net("the net has no output blobs".into()));
    }
    // 6. Prune nodes that feed no output.
    let mut needed: HashSet<String> = out_values.iter().map(|v| v.name.clone()).collect();
    let mut keep = vec![false; graph.b.nodes.len()];
    for (i, n) in graph.b.nodes.iter().enumerate().rev() {
        if n.output.iter().any(|o| needed.contains(o)) {
            keep[i] = true;
            needed.extend(n.input.iter().cloned());
        }
    }
    let nodes: Vec<_> = graph
        .b
        .nodes
        .drain(..)
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(n, _)| n)
        .collect();
    let inits: Vec<_> = graph
        .b
        .inits
        .drain(..)
        .filter(|t| needed.contains(&t.name))
        .collect();
    // A symbolic batch must be one: the graph, run at another batch, must give Caffe's
    // shapes for that batch (a constant holding the batch, such as a Reshape target that
    // folds the batch axis, would not). Outputs whose first axis is not the batch
    // (SSD's prior boxes) keep their fixed size.
    let checked = Checked {
        b: &graph.b,
        nodes: &nodes,
        verified: &verified,
        origin: &origin,
        bounds: &bounds,
    };
    // Sizes known only at run time: everything computed from them must follow them.
    let run_time =
        check_run_time_sizes(net, &graph_inputs, &caffe_shapes, &graph.dynamic, &checked)?;
    let batch_axes = if opts.dynamic_batch {
        check_dynamic_batch(
            net,
            &caffe_shapes,
            &graph_inputs,
            &out_values,
            &run_time,
            &graph.from_dynamic,
            &checked,
        )?
    } else {
        HashMap::new()
    };
    let from_dynamic = std::mem::take(&mut graph.from_dynamic);
    let out_names: HashSet<&str> = out_values.iter().map(|v| v.name.as_str()).collect();
    // 7. Warnings: caffemodel layers nobody asked for.
    let mut warnings = net.warnings.clone();
    let proposals = net
        .layers
        .iter()
        .any(|l| l.kind == "Proposal" || tensorfmt_caffe::is_python_proposal(l));
    if !opts.rpn.is_empty() && !proposals {
        warnings
            .push("the RPN constants given (rpn) are unused: the net has no proposal layer".into());
    }
    let unused = blobs.unused();
    if !unused.is_empty() {
        let list = unused.join(", ");
        if opts.strict {
            return Err(LowerError::Net(format!(
                "caffemodel layers not in the net: {list}"
            )));
        }
        warnings.push(format!("ignoring caffemodel layers not in the net: {list}"));
    }
    let infos: Vec<ValueInfoProto> = verified
        .iter()
        .filter(|v| needed.contains(&v.name) && !out_names.contains(v.name.as_str()))
        .map(|v| value_info(v, &[]))
        .collect();
    let mut metadata = vec![("tensorfmt.source".to_string(), "caffe".to_string())];
    if !net.name.is_empty() {
        metadata.push(("caffe.net".into(), net.name.clone()));
    }
    let stopped = cut.stopped;
    if !stopped.is_empty() {
        metadata.push((
            "tensorfmt.stopped_before".into(),
            stopped
                .iter()
                .map(|(n, k)| format!("{n} ({k})"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    if let Some(t) = &net.transform {
        metadata.push(("preprocess.channel_order".into(), "BGR".into()));
        if t.scale != 1.0 {
            metadata.push(("preprocess.scale".into(), t.scale.to_string()));
        }
        if !t.mean_values.is_empty() {
            metadata.push((
                "preprocess.mean_values".into(),
                t.mean_values
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ));
        }
        if let Some(m) = &t.mean_file {
            metadata.push(("preprocess.mean_file".into(), m.clone()));
        }
        if t.crop_size > 0 {
            metadata.push(("preprocess.crop_size".into(), t.crop_size.to_string()));
        }
    }
    let mut graph = GraphProto {
        node: nodes,
        name: if net.name.is_empty() {
            "caffe".into()
        } else {
            net.name.clone()
        },
        initializer: inits,
        input: graph_inputs
            .iter()
            .map(|v| value_info(v, batch_axes.get(&v.name).map_or(&[][..], Vec::as_slice)))
            .collect(),
        output: out_values
            .iter()
            .map(|v| value_info(v, batch_axes.get(&v.name).map_or(&[][..], Vec::as_slice)))
            .collect(),
        value_info: if opts.dynamic_batch {
            Vec::new()
        } else {
            infos
        },
        ..Default::default()
    };
    for v in graph.output.iter_mut().chain(graph.value_info.iter_mut()) {
        match run_time.get(&v.name) {
            Some(axes) => name_run_time_axes(v, Some(axes.as_slice())),
            None if from_dynamic.contains(&v.name) => name_run_time_axes(v, None),
            None => {}
        }
    }
    let model = ModelProto {
        ir_version: tensorfmt_onnx::IR_VERSION,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: tensorfmt_onnx::OPSET,
        }],
        producer_name: "tensorfmt".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(graph),
        metadata_props: metadata
            .into_iter()
            .map(|(key, value)| StringStringEntryProto { key, value })
            .collect(),
        ..Default::default()
    };
    let shapes = current.into_iter().map(|(k, v)| (k, v.shape)).collect();
    let outputs = out_values.into_iter().map(|v| v.name).collect();
    Ok(Lowered {
        model,
        outputs,
        shapes,
        stopped,
        warnings,
    })
}

/// ONNX's shape rules over `nodes`, in order, from the shapes already in `shapes`
/// (graph inputs, earlier values) and the builder's initializers. A value in `fixed` (a
/// top sized at run time) takes that shape instead of its rule's, which cannot follow
/// the data-dependent ops that make it (NonMaxSuppression, Compress).
fn propagate(
    b: &Builder,
    nodes: &[tensorfmt_onnx::proto::NodeProto],
    shapes: &mut HashMap<String, Vec<usize>>,
    fixed: &HashMap<String, Vec<usize>>,
) {
    for n in nodes {
        let in_shapes: Vec<Option<&Vec<usize>>> = n
            .input
            .iter()
            .map(|i| shapes.get(i).or_else(|| b.init_shapes.get(i)))
            .collect();
        let outs = builder::onnx_shapes(n, &in_shapes, &b.ints, &b.floats);
        for (i, o) in n.output.iter().enumerate() {
            match fixed.get(o) {
                Some(s) => {
                    shapes.insert(o.clone(), s.clone());
                }
                None => {
                    if let Some(s) = outs.as_ref().and_then(|outs| outs.get(i)) {
                        shapes.insert(o.clone(), s.clone());
                    }
                }
            }
        }
    }
}

/// What the checks at another size read: the final graph and what the walk verified.
struct Checked<'a> {
    b: &'a Builder,
    /// The final (pruned) nodes.
    nodes: &'a [tensorfmt_onnx::proto::NodeProto],
    /// Values whose ONNX shape equals Caffe's.
    verified: &'a [Value],
    /// Which layer top each value is: (layer index, top index).
    origin: &'a HashMap<String, (usize, usize)>,
    /// The tops sized at run time, at their bound (Caffe's shape).
    bounds: &'a HashMap<String, Vec<usize>>,
}

impl Checked<'_> {
    /// The verified values the final graph computes (a pruned node's are not checked:
    /// nothing runs it), with their layer and top index, tops sized at run time aside
    /// (their shape is declared, not derived).
    fn derived(&self) -> Vec<(&Value, usize, usize)> {
        let computed: HashSet<&str> = self
            .nodes
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        self.verified
            .iter()
            .filter(|v| computed.contains(v.name.as_str()) && !self.bounds.contains_key(&v.name))
            .filter_map(|v| self.origin.get(&v.name).map(|&(li, ti)| (v, li, ti)))
            .collect()
    }

    /// Runs ONNX's shape rules over the final nodes from `start` (the graph inputs at
    /// other sizes; `fixed` for the tops whose shape is declared) and compares every
    /// derived value with Caffe's shape in `caffe` for those sizes. Returns each value
    /// with Caffe's shape, or the first that disagrees: `(its name, layer index, ONNX's
    /// shape, Caffe's)`.
    #[allow(clippy::type_complexity)]
    fn recheck<'s>(
        &'s self,
        caffe: &'s tensorfmt_caffe::NetShapes,
        start: HashMap<String, Vec<usize>>,
        fixed: &HashMap<String, Vec<usize>>,
    ) -> Result<
        Vec<(&'s Value, &'s Vec<usize>)>,
        (&'s str, usize, Option<Vec<usize>>, &'s Vec<usize>),
    > {
        let mut shapes = start;
        propagate(self.b, self.nodes, &mut shapes, fixed);
        let mut out = Vec::new();
        for (v, li, ti) in self.derived() {
            let Some(want) = caffe.layers.get(li).and_then(|s| s.tops.get(ti)) else {
                continue;
            };
            match shapes.get(&v.name) {
                Some(got) if got == want => out.push((v, want)),
                got => return Err((&v.name, li, got.cloned(), want)),
            }
        }
        Ok(out)
    }
}

/// One axis of a value sized at run time, as the graph states it.
#[derive(Debug, Clone, PartialEq)]
enum RunTimeAxis {
    /// A size fixed at conversion.
    Fixed,
    /// A size following one run-time size: its `dim_param` (`R`, or `R*84` for an axis
    /// holding 84 values per RoI).
    Named(String),
    /// A size following several run-time sizes at once: left unknown.
    Unknown,
}

/// Which run-time sizes a value is computed from (`check_run_time_sizes`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Follows<'d> {
    /// One: its growth is that size's.
    One(&'d str),
    /// Several: an axis that grows has no single name.
    Several,
}

impl<'d> Follows<'d> {
    fn join(a: Option<Follows<'d>>, b: Follows<'d>) -> Follows<'d> {
        match a {
            None => b,
            Some(a) if a == b => a,
            Some(_) => Follows::Several,
        }
    }
}

/// Sizes known only at run time (`Graph::dynamic`: DetectionOutput's rows, a proposal
/// layer's RoIs). Propagates ONNX's shape rules over the final nodes once, with every
/// such axis one larger than its bound, and checks every verified value computed from
/// them against Caffe's shapes for those sizes (the declaring layers' tops given as net
/// inputs of that size). A lowering that put a size in a constant fails here, naming the
/// layer. One pass for all the sizes (a pass per size made a net of many DetectionOutput
/// layers cost quadratic time): which sizes each value follows is propagated along the
/// nodes, so a value that follows one size grows as it alone would make it grow. Returns,
/// for each value whose shape follows a run-time size (the declared tops included), what
/// each axis holds.
fn check_run_time_sizes(
    net: &NetDef,
    inputs: &[Value],
    caffe_shapes: &tensorfmt_caffe::NetShapes,
    dynamic: &HashMap<String, Vec<(usize, String)>>,
    c: &Checked<'_>,
) -> Result<HashMap<String, Vec<RunTimeAxis>>, LowerError> {
    let mut axes: HashMap<String, Vec<RunTimeAxis>> = HashMap::new();
    // Declared: the tops of the lowerings that size them.
    let mut sources: Vec<usize> = Vec::new();
    let mut follows: HashMap<&str, Follows<'_>> = HashMap::new();
    for (name, declared) in dynamic {
        let (Some(&(li, _)), Some(bound)) = (c.origin.get(name), c.bounds.get(name)) else {
            continue;
        };
        if !sources.contains(&li) {
            sources.push(li);
        }
        let mut a = vec![RunTimeAxis::Fixed; bound.len()];
        for (axis, dim) in declared {
            if let Some(x) = a.get_mut(*axis) {
                *x = RunTimeAxis::Named(dim.clone());
            }
            let f = Follows::join(follows.get(name.as_str()).copied(), Follows::One(dim));
            follows.insert(name.as_str(), f);
        }
        axes.insert(name.clone(), a);
    }
    if sources.is_empty() {
        return Ok(axes);
    }
    sources.sort_unstable();
    // Which sizes each node output follows: those of its inputs.
    for n in c.nodes {
        let mut f = None;
        for i in &n.input {
            if let Some(&g) = follows.get(i.as_str()) {
                f = Some(Follows::join(f, g));
            }
        }
        if let Some(f) = f {
            for o in &n.output {
                // A declared top keeps its own (its node reads the data it is sized from).
                if !dynamic.contains_key(o) {
                    follows.insert(o.as_str(), f);
                }
            }
        }
    }
    // The declaring layers' tops become inputs, each run-time axis one larger.
    let mut bigger = net.clone();
    let mut fixed: HashMap<String, Vec<usize>> = HashMap::new();
    for (value, &(li, ti)) in c.origin {
        if sources.binary_search(&li).is_err() {
            continue;
        }
        let Some(mut shape) = caffe_shapes
            .layers
            .get(li)
            .and_then(|s| s.tops.get(ti))
            .cloned()
        else {
            continue;
        };
        for (axis, _) in dynamic.get(value).into_iter().flatten() {
            if let Some(x) = shape.get_mut(*axis) {
                *x += 1;
            }
        }
        bigger.inputs.push(tensorfmt_caffe::NetInput {
            name: net.layers[li].tops[ti].clone(),
            shape: shape.iter().map(|&d| d as i64).collect(),
            line: 0,
        });
        fixed.insert(value.clone(), shape);
    }
    for &li in &sources {
        let l = &mut bigger.layers[li];
        l.kind = "Silence".into();
        l.tops.clear();
    }
    let overrides: Vec<(String, Vec<usize>)> = inputs
        .iter()
        .map(|v| (v.name.clone(), v.shape.clone()))
        .collect();
    let caffe = tensorfmt_caffe::infer_shapes(&bigger, &overrides).map_err(|e| {
        LowerError::Net(format!(
            "the net's shapes do not follow its sizes known only at run time: {e}"
        ))
    })?;
    let checked = c
        .recheck(&caffe, overrides.iter().cloned().collect(), &fixed)
        .map_err(|(v, li, got, want)| {
            let size = match follows.get(v) {
                Some(Follows::One(d)) => format!("the size {d:?}"),
                _ => "the sizes".to_string(),
            };
            layer_err(
                &net.layers[li],
                format!(
                    "its ONNX nodes do not follow {size} known only at run time \
                     (one larger than its bound, ONNX's shape rules give {}, Caffe's \
                     {want:?}; a lowering bug)",
                    got.map_or("no shape".to_string(), |s| format!("{s:?}"))
                ),
            )
        })?;
    for (v, want) in checked {
        if want == &v.shape {
            continue;
        }
        let one = match follows.get(v.name.as_str()) {
            Some(Follows::One(d)) => Some(*d),
            _ => None,
        };
        let a = v
            .shape
            .iter()
            .zip(want)
            .map(|(&a, &b)| match (b.checked_sub(a), one) {
                (Some(0), _) => RunTimeAxis::Fixed,
                (Some(1), Some(d)) => RunTimeAxis::Named(d.to_string()),
                (Some(k), Some(d)) => RunTimeAxis::Named(format!("{d}*{k}")),
                // A size that shrinks as a run-time size grows, or follows several.
                _ => RunTimeAxis::Unknown,
            })
            .collect();
        axes.insert(v.name.clone(), a);
    }
    Ok(axes)
}

/// `--dynamic-batch`: the signature with a symbolic batch `N` must hold at every batch.
/// ONNX's shape rules are propagated over the final `nodes` at two larger batches (the
/// declared one + 1 and + 3) and each verified value is checked against Caffe's shapes
/// at those batches: a lowering that baked the batch into a constant fails here, naming
/// the layer. Then every axis of every graph output must either not change with the
/// batch (SSD's prior boxes), or be the batch itself (declared `N`, on whichever axis it
/// landed); an axis that depends on the batch otherwise (a Concat on axis 0 gives 2N, a
/// Flatten from axis 0 gives 12N) has no true declaration with one `N`, and the net is
/// refused. The batch is the first input's first axis, shared by the inputs whose first
/// axis has its size. Returns, per batched input and per output, the axes that are `N`.
fn check_dynamic_batch(
    net: &NetDef,
    declared: &tensorfmt_caffe::NetShapes,
    inputs: &[Value],
    outputs: &[Value],
    run_time: &HashMap<String, Vec<RunTimeAxis>>,
    from_dynamic: &HashSet<String>,
    c: &Checked<'_>,
) -> Result<HashMap<String, Vec<usize>>, LowerError> {
    // The batch is the first input's first axis; the inputs whose first axis has the
    // same size are batched with it, the others (a constant table fed as an input) keep
    // their declared shapes.
    let Some(&b0) = inputs.first().and_then(|v| v.shape.first()) else {
        return Err(LowerError::Net(
            "--dynamic-batch: the net's first input has no axes, so no batch axis".into(),
        ));
    };
    let batched = |v: &Value| v.shape.first() == Some(&b0);
    // Each output's shape at each batch tried: the declared one first.
    let mut out_shapes: Vec<Vec<Vec<usize>>> =
        outputs.iter().map(|v| vec![v.shape.clone()]).collect();
    // Every batch from 1 must run: batch 1 (when the declared one is larger: a Crop of
    // axis 0 at offset 1 needs two images), and two larger ones.
    let tried: Vec<usize> = (b0 > 1)
        .then_some(1)
        .into_iter()
        .chain([b0 + 1, b0 + 3])
        .collect();
    for &at in &tried {
        let bigger: Vec<(String, Vec<usize>)> = inputs
            .iter()
            .map(|v| {
                let mut s = v.shape.clone();
                if batched(v) {
                    s[0] = at;
                }
                (v.name.clone(), s)
            })
            .collect();
        let caffe = tensorfmt_caffe::infer_shapes(net, &bigger).map_err(|e| {
            LowerError::Net(format!(
                "--dynamic-batch: the net does not take a batch of {at}: {e}"
            ))
        })?;
        // The weights are fixed: a layer whose parameter shapes change with the batch
        // (a Permute moved the batch onto the channels a Convolution reads) has no
        // model for another batch.
        for (li, (at_b, at_b0)) in caffe.layers.iter().zip(&declared.layers).enumerate() {
            if at_b.params != at_b0.params {
                return Err(layer_err(
                    &net.layers[li],
                    format!(
                        "--dynamic-batch: its weights' shapes depend on the batch ({:?} at batch \
                         {b0}, {:?} at batch {at}: the batch reaches an axis its weights \
                         cover); convert with a fixed batch (--input-shape) instead",
                        at_b0.params, at_b.params
                    ),
                ));
            }
        }
        c.recheck(&caffe, bigger.iter().cloned().collect(), c.bounds)
            .map_err(|(_, li, got, want)| {
                layer_err(
                    &net.layers[li],
                    format!(
                        "--dynamic-batch: its ONNX nodes do not follow the batch (at batch {at} \
                         ONNX's shape rules give {}, Caffe's {want:?}); convert with a fixed \
                         batch (--input-shape) instead",
                        got.map_or(
                            "no shape (a constant in them holds the declared batch)".to_string(),
                            |s| format!("{s:?}")
                        ),
                    ),
                )
            })?;
        for (v, seen) in outputs.iter().zip(&mut out_shapes) {
            // Caffe's shape at this batch (for an output no ONNX rule verified, e.g. a
            // size known only at run time, the bound Caffe gives).
            let shape = match c.origin.get(&v.name) {
                Some(&(li, ti)) => caffe.layers.get(li).and_then(|s| s.tops.get(ti)).cloned(),
                None => bigger
                    .iter()
                    .find(|(n, _)| *n == v.name)
                    .map(|(_, s)| s.clone()),
            };
            seen.push(shape.unwrap_or_default());
        }
    }
    let batches: Vec<usize> = std::iter::once(b0).chain(tried.iter().copied()).collect();
    let mut axes_of_n: HashMap<String, Vec<usize>> = inputs
        .iter()
        .filter(|v| batched(v))
        .map(|v| (v.name.clone(), vec![0]))
        .collect();
    for (v, seen) in outputs.iter().zip(&out_shapes) {
        // Axes sized at run time are named by their size, not the batch; a value computed
        // from several such sizes has no axis stated at all.
        if from_dynamic.contains(&v.name) && !run_time.contains_key(&v.name) {
            axes_of_n.insert(v.name.clone(), Vec::new());
            continue;
        }
        let run_time_axes: Vec<usize> = run_time
            .get(&v.name)
            .map(|a| {
                a.iter()
                    .enumerate()
                    .filter(|(_, x)| **x != RunTimeAxis::Fixed)
                    .map(|(i, _)| i)
                    .collect()
            })
            .unwrap_or_default();
        let mut n_axes = Vec::new();
        for axis in 0..v.shape.len() {
            if run_time_axes.contains(&axis) {
                continue;
            }
            let dims: Vec<Option<usize>> = seen.iter().map(|s| s.get(axis).copied()).collect();
            if dims.iter().all(|&d| d == dims[0]) {
                continue;
            }
            if dims.iter().zip(&batches).all(|(&d, &n)| d == Some(n)) {
                n_axes.push(axis);
                continue;
            }
            let text: Vec<String> = dims
                .iter()
                .zip(&batches)
                .map(|(d, n)| match d {
                    Some(d) => format!("{d} at batch {n}"),
                    None => format!("no such axis at batch {n}"),
                })
                .collect();
            return Err(LowerError::Net(format!(
                "--dynamic-batch: output {:?} axis {axis} depends on the batch without being it ({}), which no declaration with one symbolic N states; convert with a fixed batch (--input-shape) instead",
                v.name,
                text.join(", ")
            )));
        }
        axes_of_n.insert(v.name.clone(), n_axes);
    }
    Ok(axes_of_n)
}

/// States the axes of `v` sized at run time (`check_run_time_sizes`): a `dim_param` for
/// an axis following one size, no value for one following several. Without `axes` (no
/// shape rule could follow the value), every axis is left unknown rather than stated
/// wrongly.
fn name_run_time_axes(v: &mut ValueInfoProto, axes: Option<&[RunTimeAxis]>) {
    let Some(type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut())
    else {
        return;
    };
    for (i, d) in t
        .shape
        .iter_mut()
        .flat_map(|s| s.dim.iter_mut())
        .enumerate()
    {
        d.value = match axes.map(|a| a.get(i).unwrap_or(&RunTimeAxis::Fixed)) {
            Some(RunTimeAxis::Fixed) => continue,
            Some(RunTimeAxis::Named(n)) => Some(DimValue::DimParam(n.clone())),
            Some(RunTimeAxis::Unknown) | None => None,
        };
    }
}

/// The value's type: f32 of its shape, the axes in `batch_axes` declared `N`.
fn value_info(v: &Value, batch_axes: &[usize]) -> ValueInfoProto {
    let dim = v
        .shape
        .iter()
        .enumerate()
        .map(|(i, &d)| Dimension {
            value: Some(if batch_axes.contains(&i) {
                DimValue::DimParam("N".into())
            } else {
                DimValue::DimValue(d as i64)
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: v.name.clone(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: 1,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Inputs of [`convert_files`].
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// The `.caffemodel` (weights).
    pub caffemodel: &'a Path,
    /// The deploy prototxt.
    pub prototxt: &'a Path,
    /// A fork's `caffe.proto`, compiled at run time for its extra fields.
    pub fork_proto: Option<&'a Path>,
}

/// Reads a caffemodel + deploy prototxt (+ fork schema), lowers the net and writes the
/// ONNX model to `out` atomically (nothing is left behind on error), its weights in
/// `OUT.onnx.data` beside it past protobuf's 2 GiB or as
/// [`LowerOptions::external_data`] asks. Returns the
/// [`Lowered`] description (the model itself included).
///
/// ```no_run
/// use tensorfmt_lower::{convert_files, LowerOptions, Sources};
/// let src = Sources { caffemodel: "lenet.caffemodel".as_ref(), prototxt: "lenet.prototxt".as_ref(), fork_proto: None };
/// let lowered = convert_files(src, "lenet.onnx".as_ref(), &LowerOptions::default(), &Default::default())?;
/// println!("outputs: {:?}", lowered.outputs);
/// # Ok::<(), tensorfmt_lower::LowerError>(())
/// ```
pub fn convert_files(
    src: Sources<'_>,
    out: &Path,
    opts: &LowerOptions,
    read: &ReadOptions,
) -> Result<Lowered, LowerError> {
    // No input is ever an output: the model, or the data file beside it.
    for o in [out.to_path_buf(), tensorfmt_onnx::external_data_path(out)] {
        for input in [Some(src.caffemodel), Some(src.prototxt), src.fork_proto]
            .into_iter()
            .flatten()
        {
            if tensorfmt_core::io::same_file(&o, input) {
                // The caller's argument, not the net: an invalid-argument error.
                return Err(tensorfmt_core::Error::Invalid(format!(
                    "the output {} is the input {}; an input is never overwritten",
                    o.display(),
                    input.display()
                ))
                .into());
            }
        }
    }
    let (net, mut blobs) = load(src, read)?;
    // What the lowering finds is about the net, as the prototxt gives it.
    let lowered = lower(&net, &mut blobs, opts).map_err(|e| e.in_file(src.prototxt))?;
    // Weights that are slices of the mapped caffemodel are copied by the kernel.
    tensorfmt_onnx::save_model_with(out, &lowered.model, opts.external_data, &Default::default())
        .map_err(|e| LowerError::from(e).in_file(out))?;
    Ok(lowered)
}

/// Reads the prototxt (with the fork schema if given) and the caffemodel's blobs.
pub fn load(src: Sources<'_>, read: &ReadOptions) -> Result<(NetDef, LayerBlobs), LowerError> {
    let net = load_net(src.prototxt, src.fork_proto, read)?;
    // Each error names the file it comes from.
    let in_model = |e: LowerError| e.in_file(src.caffemodel);
    let data = tensorfmt_core::io::map_file(src.caffemodel).map_err(|e| in_model(e.into()))?;
    let model =
        tensorfmt_caffe::read_model_with(data, &tensorfmt_caffe::CaffeReadOptions::from(read))
            .map_err(|e| in_model(e.into()))?;
    let blobs = tensorfmt_caffe::layer_blobs(&model).map_err(|e| in_model(e.into()))?;
    Ok((net, blobs))
}

/// Reads a deploy prototxt, with a fork's `caffe.proto` compiled for its extra fields
/// when given.
///
/// ```
/// let net = tensorfmt_lower::load_net("../../testdata/nets/lenet_tiny.prototxt".as_ref(), None, &Default::default())?;
/// assert_eq!((net.name.as_str(), net.layers.len()), ("LeNetTiny", 5));
/// # Ok::<(), tensorfmt_lower::LowerError>(())
/// ```
pub fn load_net(
    prototxt: &Path,
    fork_proto: Option<&Path>,
    read: &ReadOptions,
) -> Result<NetDef, LowerError> {
    let compiled;
    let schema = match fork_proto {
        Some(p) => {
            compiled = Schema::compile(p, &read.limits)?;
            &compiled
        }
        None => Schema::builtin(),
    };
    let text = read_text(prototxt, read)?;
    tensorfmt_caffe::parse_net(&text, schema, read)
        .map_err(|e| LowerError::from(e).in_file(prototxt))
}

/// Writes a caffemodel (atomically) with seeded random weights for every layer of a
/// deploy prototxt that has parameters, shaped by Caffe's own rules (BatchNorm
/// variances positive, scale factor 1), for testing converters and runtimes without the
/// real weights. Returns the names of the layers written.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("w.caffemodel");
/// let layers = tensorfmt_lower::write_random_weights(
///     "../../testdata/nets/lenet_tiny.prototxt".as_ref(), None, &out, 7, &[], &Default::default())?;
/// assert_eq!(layers, ["conv1", "ip1"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_random_weights(
    prototxt: &Path,
    fork_proto: Option<&Path>,
    out: &Path,
    seed: u64,
    input_shapes: &[(String, Vec<usize>)],
    read: &ReadOptions,
) -> Result<Vec<String>, LowerError> {
    let net = load_net(prototxt, fork_proto, read)?;
    let shapes = tensorfmt_caffe::infer_shapes(&net, input_shapes)
        .map_err(|e| LowerError::from(e).in_file(prototxt))?;
    // Every parameter blob is made in memory: their total is checked first.
    let bytes = shapes
        .layers
        .iter()
        .flat_map(|l| l.params.iter())
        .map(|s| {
            s.iter()
                .map(|&d| d as u64)
                .product::<u64>()
                .saturating_mul(4)
        })
        .fold(0u64, u64::saturating_add);
    read.limits.check_alloc(bytes)?;
    // What Caffe could not read is not written (6.4 GB for an LSTM of 20,000 units).
    if bytes > tensorfmt_caffe::MAX_FILE_BYTES {
        return Err(LowerError::Net(format!(
            "the weights would be {bytes} bytes, over Caffe's 2 GiB limit ({} bytes), \
             which Caffe, pycaffe and OpenCV refuse to read; nothing was written",
            tensorfmt_caffe::MAX_FILE_BYTES
        )));
    }
    let weights = tensorfmt_caffe::random_weights(&net, &shapes, seed);
    let kinds: HashMap<&str, &str> = net
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.kind.as_str()))
        .collect();
    let mut layers = Vec::with_capacity(weights.len());
    for (name, blobs) in &weights {
        let raw: Result<Vec<_>, _> = blobs
            .iter()
            .map(tensorfmt_caffe::blob_from_tensor)
            .collect();
        layers.push(tensorfmt_caffe::WeightsLayer {
            name: name.clone(),
            type_name: kinds.get(name.as_str()).map(|k| k.to_string()),
            blobs: raw?,
        });
    }
    tensorfmt_core::io::write_atomic(out, |w| -> Result<(), tensorfmt_core::Error> {
        Ok(tensorfmt_caffe::write_weights_model(
            w,
            Some(&net.name),
            &layers,
        )?)
    })?;
    Ok(weights.into_iter().map(|(n, _)| n).collect())
}

fn read_text(path: &Path, read: &ReadOptions) -> Result<String, LowerError> {
    // A regular file only (a FIFO is refused, not waited on), at most max_alloc bytes.
    let bytes = tensorfmt_core::io::read_file_capped(path, read.limits.max_alloc, "prototxt bytes")
        .map_err(|e| LowerError::from(e).in_file(path))?;
    tensorfmt_caffe::prototxt_text(&bytes).map_err(|why| LowerError::Net(why).in_file(path))
}
