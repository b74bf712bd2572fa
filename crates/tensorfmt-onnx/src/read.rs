//! Reading ONNX model files: a wire-level walk of `ModelProto` and `GraphProto` that
//! locates every initializer (with its byte offset) and decodes only the small messages
//! it needs with prost. Initializer payloads (`raw_data`) stay slices of the input.

use std::path::Path;

use bytes::Bytes;
use prost::Message;
use tensorfmt_core::{Limits, ReadOptions, Tensor};

use crate::error::{OnnxError, Result};
use crate::external::{Beside, ExternalFiles, Unread};
use crate::proto::{
    OperatorSetIdProto, SparseTensorProto, StringStringEntryProto, TensorProto, ValueInfoProto,
};
use crate::tensor::{is_external, read_tensor, sparse_from_proto, SparseInitializer};
use crate::wire::{self, Field};

/// An ONNX model file as read by [`read_model_file`]: its header and its initializers.
#[derive(Debug, Clone, Default)]
pub struct ModelFile {
    /// `ModelProto.ir_version`.
    pub ir_version: i64,
    /// `producer_name`.
    pub producer_name: String,
    /// `producer_version`.
    pub producer_version: String,
    /// `opset_import` as (domain, version); `""` is the default ONNX domain.
    pub opsets: Vec<(String, i64)>,
    /// `metadata_props` in file order.
    pub metadata: Vec<(String, String)>,
    /// `graph.name`.
    pub graph_name: String,
    /// Number of `graph.node` entries.
    pub nodes: usize,
    /// Names of `graph.input`.
    pub inputs: Vec<String>,
    /// Names of `graph.output`.
    pub outputs: Vec<String>,
    /// `graph.initializer` in file order: (name, tensor). A name is the one in the
    /// file for the initializer onnxruntime uses under it; an empty name, and each
    /// initializer onnxruntime does not use because another one has its name, become
    /// their place (`graph.initializer[3]`, with `~1`, `~2`... if a tensor is named
    /// that already), each named in `warnings`. The `graph` field may occur more than
    /// once (protobuf merges the occurrences: `cat a.onnx b.onnx`): its initializers
    /// are those of all of them, in file order.
    pub initializers: Vec<(String, Tensor)>,
    /// The external data files initializers were read from (their `location`s, each
    /// once, in first-use order); empty for a self-contained model.
    pub external_files: Vec<String>,
    /// Initializers in external data files that were not read
    /// ([`read_model_file_described`]); their files are in `external_files` too.
    pub unread: Vec<Unread>,
    /// The `graph.sparse_initializer`s (named as `initializers` are; they follow the
    /// dense ones), checked but not densified until read
    /// ([`SparseInitializer::to_dense`]).
    pub sparse: Vec<SparseInitializer>,
    /// What was read differently from the file's own word, one line each:
    /// initializers left out (element types without a tensorfmt dtype: strings,
    /// complex, 8-bit floats, 4-bit integers; segmented tensors), renamed ones (no
    /// name, or a name another initializer has), subgraphs not read.
    pub warnings: Vec<String>,
    /// Initializers left out for their element type or their segment (each named in
    /// `warnings`).
    pub left_out: usize,
    /// Nodes holding subgraphs (the bodies of If, Loop, Scan): their initializers are
    /// not read.
    pub subgraph_nodes: usize,
    /// A digest of everything in the model but the exported tensors' own records (the
    /// graph, nodes, attributes, shapes, doc strings, tensors left out, subgraphs'
    /// initializers...; FNV-1a, 64 bits, hex), so that two models of equal tensors
    /// differ in it exactly when they differ otherwise; where a tensor's bytes are
    /// stored (inline or in an external file) does not change it. `None` for a model
    /// read by [`read_model_file_described`] (its image holds only what was fetched).
    pub structure: Option<String>,
}

/// One initializer of a [`ModelFile`], read or not.
pub(crate) enum Slot<'a> {
    /// Read: its name and tensor.
    Read(&'a str, &'a Tensor),
    /// In an external data file that was not read.
    Unread(&'a Unread),
    /// A sparse initializer, densified when read.
    Sparse(&'a SparseInitializer),
}

impl ModelFile {
    /// Every initializer in graph order, the unread ones (at their `index`) among the
    /// read ones, then the sparse ones.
    pub(crate) fn slots(&self) -> Vec<Slot<'_>> {
        let mut read = self.initializers.iter();
        let mut unread = self.unread.iter().peekable();
        (0..self.initializers.len() + self.unread.len())
            .filter_map(|i| match unread.peek() {
                Some(u) if u.index == i => unread.next().map(Slot::Unread),
                _ => read.next().map(|(n, t)| Slot::Read(n, t)),
            })
            .chain(self.sparse.iter().map(Slot::Sparse))
            .collect()
    }
}

fn decode<M: Message + Default>(data: &Bytes, f: &Field, path: &str) -> Result<M> {
    M::decode(data.slice(f.start..f.end)).map_err(|source| OnnxError::Prost {
        path: path.into(),
        offset: f.start as u64,
        source,
    })
}

/// [`decode`] of a message after checking what it can cost: packed varints decode to
/// at most 8 bytes per input byte.
pub(crate) fn decode_bounded<M: Message + Default>(
    data: &Bytes,
    f: &Field,
    path: &str,
    limits: &Limits,
) -> Result<M> {
    wire::expect(f, 2, path)?;
    let worst = ((f.end - f.start) as u64).saturating_mul(8);
    if worst > limits.max_alloc {
        return Err(OnnxError::Limit {
            path: path.into(),
            offset: f.offset as u64,
            what: "allocation",
            value: worst,
            limit: limits.max_alloc,
        });
    }
    decode(data, f, path)
}

fn string(data: &Bytes, f: &Field, path: &str) -> Result<String> {
    wire::expect(f, 2, path)?;
    std::str::from_utf8(&data[f.start..f.end])
        .map(str::to_string)
        .map_err(|_| OnnxError::Wire {
            path: path.into(),
            offset: f.start as u64,
            reason: "string is not valid UTF-8".into(),
        })
}

fn item_limit(limits: &Limits, n: u64, path: &str, offset: usize) -> Result<()> {
    if n > limits.max_items {
        return Err(OnnxError::Limit {
            path: path.into(),
            offset: offset as u64,
            what: "item count",
            value: n,
            limit: limits.max_items,
        });
    }
    Ok(())
}

/// Reads an ONNX model (a `ModelProto`): header fields, graph inputs and outputs, and
/// every initializer as a tensor (zero copy from `raw_data`). Nodes are counted, not
/// decoded. `options.limits` caps the items scanned (`max_items`), tensor ranks and the
/// buffers sized from the file (`max_alloc`).
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor)?;
/// let mut buf = Vec::new();
/// tensorfmt_onnx::write_tensors(&mut buf, &[("w".into(), t)])?;
/// let m = tensorfmt_onnx::read_model_file(buf.into(), &Default::default())?;
/// assert_eq!(m.initializers[0].0, "w");
/// assert_eq!(m.initializers[0].1.to_vec::<f32>()?, vec![1.0, 2.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_file(data: Bytes, options: &ReadOptions) -> Result<ModelFile> {
    read_model(data, options, ExternalFiles::new(Beside::Refused))
}

/// [`read_model_file`] of a model that lies in `model_dir`: initializers kept in
/// external data files beside it are read (mapped, zero copy) under ONNX's loader's
/// rules for their location (see the `external` module); [`read_model_file`] refuses
/// them.
///
/// ```
/// use tensorfmt_onnx::proto::{StringStringEntryProto as Entry, TensorProto};
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("w.bin"), [0u8, 0, 128, 63, 0, 0, 0, 64])?; // 1.0, 2.0
/// let entry = |k: &str, v: &str| Entry { key: k.into(), value: v.into() };
/// let t = TensorProto {
///     name: "w".into(), dims: vec![2], data_type: 1, data_location: 1,
///     external_data: vec![entry("location", "w.bin"), entry("length", "8")],
///     ..Default::default()
/// };
/// let mut m = tensorfmt_onnx::weights_model(&[])?;
/// m.graph.as_mut().unwrap().initializer.push(t);
/// let mut buf = Vec::new();
/// tensorfmt_onnx::write_model(&mut buf, &m)?;
/// let opts = Default::default();
/// let read = tensorfmt_onnx::read_model_file_at(buf.clone().into(), &opts, dir.path())?;
/// assert_eq!(read.initializers[0].1.to_vec::<f32>()?, vec![1.0, 2.0]);
/// assert!(tensorfmt_onnx::read_model_file(buf.into(), &opts).is_err()); // no directory
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_file_at(
    data: Bytes,
    options: &ReadOptions,
    model_dir: &Path,
) -> Result<ModelFile> {
    read_model(data, options, ExternalFiles::new(Beside::Dir(model_dir)))
}

/// [`read_model_file`] of a model whose directory is out of reach (an object fetched
/// by ranges): initializers in external data files are not read but listed in
/// [`ModelFile::unread`], each with its file, offset and length, checked by their text
/// (the location relative and without `..`, the length the tensor's byte length).
///
/// ```
/// use tensorfmt_onnx::proto::{StringStringEntryProto as Entry, TensorProto};
/// let entry = |k: &str, v: &str| Entry { key: k.into(), value: v.into() };
/// let t = TensorProto {
///     name: "w".into(), dims: vec![2, 3], data_type: 1, data_location: 1,
///     external_data: vec![entry("location", "m.data"), entry("offset", "64")],
///     ..Default::default()
/// };
/// let mut m = tensorfmt_onnx::weights_model(&[])?;
/// m.graph.as_mut().unwrap().initializer.push(t);
/// let mut buf = Vec::new();
/// tensorfmt_onnx::write_model(&mut buf, &m)?;
/// let read = tensorfmt_onnx::read_model_file_described(buf.into(), &Default::default())?;
/// let u = &read.unread[0];
/// assert_eq!((u.location.as_str(), u.offset, u.length, u.nbytes), ("m.data", 64, None, 24));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_file_described(data: Bytes, options: &ReadOptions) -> Result<ModelFile> {
    read_model(data, options, ExternalFiles::new(Beside::Described))
}

/// Protobuf's nesting limit (prost's, and the C++ parser's that onnx and onnxruntime
/// use): a model nested deeper is refused by them, and by this reader.
pub(crate) const MAX_DEPTH: usize = 100;

/// What an initializer record became.
enum Body {
    /// Read (dense, inline or external).
    Read(Tensor),
    /// In an external file, described and not read.
    Unread(Unread),
    /// A sparse initializer, densified when read.
    Sparse(SparseInitializer),
}

/// One exported initializer, before names are settled.
struct Record {
    /// Its name in the file (maybe empty, maybe shared).
    given: String,
    /// Where it is (`graph.initializer[3]`): its name when it cannot have its own.
    path: String,
    body: Body,
}

/// A digest of the model's structure: FNV-1a (64 bits) over every byte but the exported
/// tensors' own records, a nested message bracketed by its field number (so that its
/// length, which changes with how its tensors are stored, does not count).
struct Digest(u64);

impl Digest {
    fn new() -> Digest {
        Digest(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn open(&mut self, field: u32) {
        self.bytes(&field.to_le_bytes());
        self.bytes(b"{");
    }
    fn close(&mut self) {
        self.bytes(b"}");
    }
}

/// The state of one read: the model so far, the initializers met in every occurrence
/// of `graph` (protobuf merges them into one graph), the structure digest.
struct Reader<'r, 'e> {
    data: &'r Bytes,
    limits: &'r Limits,
    external: ExternalFiles<'e>,
    m: ModelFile,
    records: Vec<Record>,
    /// Dense and sparse records met so far (their paths' indices).
    dense: usize,
    sparse: usize,
    /// Graph fields scanned, in all occurrences.
    items: u64,
    digest: Option<Digest>,
}

fn read_model(
    data: Bytes,
    options: &ReadOptions,
    external: ExternalFiles<'_>,
) -> Result<ModelFile> {
    // A described model is a sparse image (its payloads and nodes' values unfetched):
    // its digest would be of zeros.
    let digest = (!external.describes()).then(Digest::new);
    let mut r = Reader {
        data: &data,
        limits: &options.limits,
        external,
        m: ModelFile::default(),
        records: Vec::new(),
        dense: 0,
        sparse: 0,
        items: 0,
        digest,
    };
    let mut saw_graph = false;
    let (mut functions, mut training_infos) = (0, 0);
    for f in wire::iter(&data, 0, data.len(), "ModelProto") {
        let f = f?;
        if f.number == 7 {
            wire::expect(&f, 2, "graph")?;
            saw_graph = true;
            r.open(7);
            r.read_graph(&f)?;
            r.close();
            continue;
        }
        if f.wire_type == 2 && matches!(f.number, 20 | 25) {
            // training_info, functions: their tensors are not exported, but their
            // external data is part of the model.
            let mut at = if f.number == 20 {
                training_infos += 1;
                vec![Crumb::new("training_info", training_infos - 1, &f)]
            } else {
                functions += 1;
                vec![Crumb::new("functions", functions - 1, &f)]
            };
            let msg = if f.number == 20 {
                Msg::Training
            } else {
                Msg::Function
            };
            r.open(f.number);
            r.walk(msg, &f, &mut at)?;
            r.close();
            continue;
        }
        r.hash(&f);
        let m = &mut r.m;
        match f.number {
            1 => {
                wire::expect(&f, 0, "ir_version")?;
                m.ir_version = f.value as i64;
            }
            2 => m.producer_name = string(&data, &f, "producer_name")?,
            3 => m.producer_version = string(&data, &f, "producer_version")?,
            8 => {
                wire::expect(&f, 2, "opset_import")?;
                let o: OperatorSetIdProto = decode(&data, &f, "opset_import")?;
                m.opsets.push((o.domain, o.version));
            }
            14 => {
                wire::expect(&f, 2, "metadata_props")?;
                let e: StringStringEntryProto = decode(&data, &f, "metadata_props")?;
                m.metadata.push((e.key, e.value));
            }
            _ => {}
        }
    }
    let m = &r.m;
    if m.ir_version <= 0 || !saw_graph {
        return Err(OnnxError::NotOnnx(format!(
            "a ModelProto needs ir_version and graph (ir_version {}, graph {})",
            m.ir_version,
            if saw_graph { "present" } else { "absent" }
        )));
    }
    let mut m = r.finish();
    if m.subgraph_nodes > 0 {
        m.warnings.push(format!(
            "{} node(s) hold subgraphs (If, Loop, Scan bodies), whose own initializers \
             are not read",
            m.subgraph_nodes
        ));
    }
    Ok(m)
}

/// The field `number` of a `msg` that holds a message the walk for tensors goes into:
/// its name, what it is, and which of the counters of [`Reader::walk`] numbers it (the
/// schema's field numbers; shared with [`crate::relocate`]).
pub(crate) fn child(msg: Msg, number: u32) -> Option<(&'static str, Msg, Option<usize>)> {
    Some(match (msg, number) {
        (Msg::Model, 7) => ("graph", Msg::Graph, None),
        (Msg::Model, 20) => ("training_info", Msg::Training, Some(0)),
        (Msg::Model, 25) => ("functions", Msg::Function, Some(1)),
        (Msg::Graph, 1) => ("node", Msg::Node, Some(0)),
        (Msg::Graph, 5) => ("initializer", Msg::Tensor, Some(1)),
        (Msg::Graph, 15) => ("sparse_initializer", Msg::Sparse, Some(2)),
        (Msg::Node, 5) => ("attribute", Msg::Attribute, Some(0)),
        (Msg::Attribute, 5) => ("t", Msg::Tensor, None),
        (Msg::Attribute, 6) => ("g", Msg::Graph, None),
        (Msg::Attribute, 10) => ("tensors", Msg::Tensor, Some(0)),
        (Msg::Attribute, 11) => ("graphs", Msg::Graph, Some(1)),
        (Msg::Attribute, 22) => ("sparse_tensor", Msg::Sparse, None),
        (Msg::Attribute, 23) => ("sparse_tensors", Msg::Sparse, Some(2)),
        (Msg::Sparse, 1) => ("values", Msg::Tensor, None),
        (Msg::Sparse, 2) => ("indices", Msg::Tensor, None),
        (Msg::Function, 7) => ("node", Msg::Node, Some(0)),
        (Msg::Function, 11) => ("attribute_proto", Msg::Attribute, Some(1)),
        (Msg::Training, 1) => ("initialization", Msg::Graph, None),
        (Msg::Training, 2) => ("algorithm", Msg::Graph, None),
        _ => return None,
    })
}

/// Messages the walk for external data goes through (the schema's field numbers in
/// [`Reader::walk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Msg {
    Model,
    Graph,
    Node,
    Attribute,
    Sparse,
    Function,
    Training,
    Tensor,
}

/// One step of the path to a nested tensor: a field, its index, and the name the
/// message has (field 1 of an attribute or function, 3 of a node), found when the path
/// is written, which is only for an error or a warning.
#[derive(Debug, Clone, Copy)]
struct Crumb {
    field: &'static str,
    index: Option<usize>,
    start: usize,
    end: usize,
}

impl Crumb {
    fn new(field: &'static str, index: usize, f: &Field) -> Crumb {
        Crumb {
            field,
            index: Some(index),
            start: f.start,
            end: f.end,
        }
    }
    fn single(field: &'static str, f: &Field) -> Crumb {
        Crumb {
            field,
            index: None,
            start: f.start,
            end: f.end,
        }
    }
}

/// `graph.node[3] ("conv").attribute[0] ("value").t`: where a nested tensor is.
fn path_of(data: &Bytes, crumbs: &[Crumb]) -> String {
    let mut out = String::new();
    for c in crumbs {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(c.field);
        if let Some(i) = c.index {
            out.push_str(&format!("[{i}]"));
        }
        let name_field = match c.field {
            "node" | "graph.node" => 3,
            "attribute" | "attribute_proto" | "functions" => 1,
            _ => continue,
        };
        let name = wire::iter(data, c.start, c.end, "")
            .filter_map(|f| f.ok())
            .filter(|f| f.number == name_field && f.wire_type == 2)
            .last()
            .and_then(|f| std::str::from_utf8(&data[f.start..f.end]).ok());
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            out.push_str(&format!(" ({n:?})"));
        }
    }
    out
}

impl Reader<'_, '_> {
    fn hash(&mut self, f: &Field) {
        if let Some(d) = &mut self.digest {
            d.bytes(&self.data[f.offset..f.after]);
        }
    }
    fn open(&mut self, field: u32) {
        if let Some(d) = &mut self.digest {
            d.open(field);
        }
    }
    fn close(&mut self) {
        if let Some(d) = &mut self.digest {
            d.close();
        }
    }

    /// One occurrence of `ModelProto.graph`.
    fn read_graph(&mut self, g: &Field) -> Result<()> {
        let data = self.data;
        let limits = self.limits;
        for f in wire::iter(data, g.start, g.end, "graph") {
            let f = f?;
            self.items += 1;
            item_limit(limits, self.items, "graph", f.offset)?;
            match f.number {
                // Left out (not exported): in the structure, checked as nested tensors.
                5 => {
                    let i = self.dense;
                    self.dense += 1;
                    let path = format!("graph.initializer[{i}]");
                    if !self.initializer(&f, path)? {
                        let mut at = vec![Crumb::new("graph.initializer", i, &f)];
                        self.open(5);
                        self.walk(Msg::Tensor, &f, &mut at)?;
                        self.close();
                    }
                    continue;
                }
                15 => {
                    let i = self.sparse;
                    self.sparse += 1;
                    let path = format!("graph.sparse_initializer[{i}]");
                    if !self.sparse_initializer(&f, path)? {
                        let mut at = vec![Crumb::new("graph.sparse_initializer", i, &f)];
                        self.open(15);
                        self.walk(Msg::Sparse, &f, &mut at)?;
                        self.close();
                    }
                    continue;
                }
                1 => {
                    wire::expect(&f, 2, "graph.node")?;
                    let mut at = vec![Crumb::new("graph.node", self.m.nodes, &f)];
                    self.m.nodes += 1;
                    if holds_subgraph(data, &f)? {
                        self.m.subgraph_nodes += 1;
                    }
                    self.open(1);
                    self.walk(Msg::Node, &f, &mut at)?;
                    self.close();
                    continue;
                }
                _ => self.hash(&f),
            }
            match f.number {
                2 => self.m.graph_name = string(data, &f, "graph.name")?,
                11 | 12 => {
                    let path = if f.number == 11 {
                        "graph.input"
                    } else {
                        "graph.output"
                    };
                    wire::expect(&f, 2, path)?;
                    let v: ValueInfoProto = decode(data, &f, path)?;
                    if f.number == 11 {
                        self.m.inputs.push(v.name);
                    } else {
                        self.m.outputs.push(v.name);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A `graph.initializer`: recorded, or left out with a warning (false: it is not
    /// exported, so it counts in the structure).
    fn initializer(&mut self, f: &Field, path: String) -> Result<bool> {
        let (data, limits) = (self.data, self.limits);
        let p: TensorProto = decode_bounded(data, f, &path, limits)?;
        if let Some(why) = unsupported(&p) {
            // One such weight does not make the others unreadable.
            self.m
                .warnings
                .push(format!("{path} ({:?}) left out: {why}", p.name));
            self.m.left_out += 1;
            return Ok(false);
        }
        let at = f.offset as u64;
        let body = if is_external(&p) && self.external.describes() {
            let u = self
                .external
                .describe(&p, 0, String::new(), &path, at, limits)?;
            self.note_file(&u.location);
            Body::Unread(u)
        } else if is_external(&p) {
            let (t, location) = self.external.tensor(&p, &path, at, limits)?;
            self.note_file(&location);
            Body::Read(t)
        } else {
            let raw = raw_data_present(data, f.start, f.end)?;
            Body::Read(read_tensor(&p, raw, &path, at, limits)?)
        };
        self.records.push(Record {
            given: p.name,
            path,
            body,
        });
        Ok(true)
    }

    /// A `graph.sparse_initializer`, as [`Self::initializer`].
    fn sparse_initializer(&mut self, f: &Field, path: String) -> Result<bool> {
        let (data, limits) = (self.data, self.limits);
        let p: SparseTensorProto = decode_bounded(data, f, &path, limits)?;
        let name = p.values.as_ref().map_or("", |v| v.name.as_str());
        let why = match &p.values {
            Some(v) => unsupported(v),
            None => None,
        };
        if let Some(why) = why {
            self.m
                .warnings
                .push(format!("{path} ({name:?}) left out: {why}"));
            self.m.left_out += 1;
            return Ok(false);
        }
        let raw = (
            nested_raw_data_present(data, f, 1)?,
            nested_raw_data_present(data, f, 2)?,
        );
        let s = sparse_from_proto(&p, raw, &path, f.offset as u64, limits)?;
        self.records.push(Record {
            given: name.to_string(),
            path,
            body: Body::Sparse(s),
        });
        Ok(true)
    }

    fn note_file(&mut self, location: &str) {
        if !self.m.external_files.iter().any(|l| l == location) {
            self.m.external_files.push(location.to_string());
        }
    }

    /// Walks a nested message that is not exported (a node, a function, a training
    /// graph, and what they hold) into the structure digest, and checks every tensor
    /// in it with external data (node attributes, subgraphs at any depth, sparse
    /// tensors, function bodies) as an initializer's would be, listing its file in
    /// `external_files`. Only keys are read, each once: linear in the model.
    fn walk(&mut self, msg: Msg, f: &Field, at: &mut Vec<Crumb>) -> Result<()> {
        let data = self.data;
        // The ModelProto and its graph are above the first crumb.
        if at.len() + 2 > MAX_DEPTH {
            return Err(OnnxError::Wire {
                path: path_of(data, at),
                offset: f.offset as u64,
                reason: format!(
                    "messages nested deeper than {MAX_DEPTH} (protobuf's limit: onnx and \
                     onnxruntime refuse the model)"
                ),
            });
        }
        if msg == Msg::Tensor {
            return self.nested_tensor(f, at);
        }
        let mut counts = [0usize; 4];
        for g in wire::iter(data, f.start, f.end, "nested message") {
            let g = g?;
            let step = if g.wire_type == 2 {
                child(msg, g.number)
            } else {
                None
            };
            let Some((field, next, slot)) = step else {
                self.hash(&g);
                continue;
            };
            let crumb = match slot {
                Some(k) => {
                    counts[k] += 1;
                    Crumb::new(field, counts[k] - 1, &g)
                }
                None => Crumb::single(field, &g),
            };
            at.push(crumb);
            self.open(g.number);
            let r = self.walk(next, &g, at);
            self.close();
            at.pop();
            r?;
        }
        Ok(())
    }

    /// A tensor that is not exported, met by [`Self::walk`] or left out: into the
    /// digest by its fields and its data, wherever that is stored (inline `raw_data`
    /// or an external file: the same digest); when its data is external, its location
    /// is checked (and its file and range, when the model has a directory) and listed.
    fn nested_tensor(&mut self, f: &Field, at: &[Crumb]) -> Result<()> {
        let data = self.data;
        let mut location = 0;
        for g in wire::iter(data, f.start, f.end, "TensorProto") {
            let g = g?;
            match g.number {
                // Storage: data_location, external_data.
                13 => {}
                14 => location = g.value,
                9 if g.wire_type == 2 => {
                    if let Some(d) = &mut self.digest {
                        d.open(9);
                        d.bytes(&data[g.start..g.end]);
                        d.close();
                    }
                }
                _ => self.hash(&g),
            }
        }
        if location != 1 {
            return Ok(());
        }
        let path = path_of(data, at);
        let p: TensorProto = decode_bounded(data, f, &path, self.limits)?;
        let (file, bytes) = self
            .external
            .check(&p, &path, f.offset as u64, self.limits)?;
        self.note_file(&file);
        if let (Some(d), Some(b)) = (&mut self.digest, bytes) {
            d.open(9);
            d.bytes(&b);
            d.close();
        }
        Ok(())
    }

    /// Settles names (onnxruntime's owner of each, the others renamed after the real
    /// names are known) and fills the model's lists.
    fn finish(mut self) -> ModelFile {
        use std::collections::{HashMap, HashSet};
        let records = std::mem::take(&mut self.records);
        let mut m = self.m;
        m.structure = self.digest.map(|d| format!("{:016x}", d.0));
        // The record onnxruntime uses for each name: the last sparse one (sparse
        // initializers are added after the dense ones, each replacing the one before),
        // else the last dense one.
        let mut owner: HashMap<&str, usize> = HashMap::new();
        let mut count: HashMap<&str, (usize, usize)> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            if r.given.is_empty() {
                continue;
            }
            let sparse = matches!(r.body, Body::Sparse(_));
            let c = count.entry(&r.given).or_default();
            if sparse {
                c.1 += 1;
            } else {
                c.0 += 1;
            }
            match owner.get(r.given.as_str()) {
                Some(&o) if matches!(records[o].body, Body::Sparse(_)) && !sparse => {}
                _ => {
                    owner.insert(&r.given, i);
                }
            }
        }
        let mut used: HashSet<String> = owner.keys().map(|n| n.to_string()).collect();
        let mut renamed: HashMap<&str, Vec<String>> = HashMap::new();
        let mut names = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            if !r.given.is_empty() && owner.get(r.given.as_str()) == Some(&i) {
                names.push(r.given.clone());
                continue;
            }
            // A synthetic name, never one a tensor has in the file.
            let mut name = r.path.clone();
            let mut k = 1;
            while used.contains(&name) {
                name = format!("{}~{k}", r.path);
                k += 1;
            }
            used.insert(name.clone());
            if r.given.is_empty() {
                m.warnings.push(format!(
                    "{} has no name (onnxruntime cannot use it): read as {name:?}",
                    r.path
                ));
            } else {
                renamed.entry(&r.given).or_default().push(name.clone());
            }
            names.push(name);
        }
        // One warning per shared name, in file order.
        let mut warned = HashSet::new();
        for r in &records {
            let Some(others) = renamed.get(r.given.as_str()) else {
                continue;
            };
            if !warned.insert(r.given.as_str()) {
                continue;
            }
            let (dense, sparse) = count[r.given.as_str()];
            let o = &records[owner[r.given.as_str()]];
            let refused = if sparse > 1 {
                " (onnxruntime refuses the model: it has the name twice among sparse \
                 initializers)"
            } else {
                ""
            };
            m.warnings.push(format!(
                "{} initializers are named {:?} ({dense} dense, {sparse} sparse){refused}: \
                 {:?} is {}, the one onnxruntime uses; the others, which onnxruntime does \
                 not use, are read as {}",
                dense + sparse,
                r.given,
                r.given,
                o.path,
                others
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (r, name) in records.into_iter().zip(names) {
            match r.body {
                Body::Read(t) => m.initializers.push((name, t)),
                Body::Unread(mut u) => {
                    u.index = m.initializers.len() + m.unread.len();
                    u.info.name = name;
                    m.unread.push(u);
                }
                Body::Sparse(mut s) => {
                    s.name = name;
                    m.sparse.push(s);
                }
            }
        }
        m
    }
}

/// Whether a TensorProto (`data[start..end]`) has a `raw_data` field, empty or not:
/// a present `raw_data` is the tensor's data, whatever typed field is there too (as
/// onnx reads it).
fn raw_data_present(data: &Bytes, start: usize, end: usize) -> Result<bool> {
    for f in wire::iter(data, start, end, "TensorProto") {
        if f?.number == 9 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// [`raw_data_present`] of the TensorProto field `number` of the message `f`.
fn nested_raw_data_present(data: &Bytes, f: &Field, number: u32) -> Result<bool> {
    let mut present = false;
    for g in wire::iter(data, f.start, f.end, "SparseTensorProto") {
        let g = g?;
        if g.number == number && g.wire_type == 2 {
            present |= raw_data_present(data, g.start, g.end)?;
        }
    }
    Ok(present)
}

/// Whether a NodeProto has a graph-valued attribute (`AttributeProto.g`, field 6, or
/// `graphs`, field 11): a wire scan, nothing decoded.
fn holds_subgraph(data: &Bytes, node: &Field) -> Result<bool> {
    for a in wire::iter(data, node.start, node.end, "graph.node") {
        let a = a?;
        if a.number == 5 && a.wire_type == 2 {
            for f in wire::iter(data, a.start, a.end, "graph.node.attribute") {
                let f = f?;
                if matches!(f.number, 6 | 11) && f.wire_type == 2 {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// Why an initializer cannot be read while the others can: a real element type without
/// a tensorfmt dtype (UNDEFINED and unknown numbers are format errors of the tensor
/// itself), or a `segment` (a piece of a tensor split over several records, which no
/// current writer makes and onnx's own `numpy_helper` refuses).
fn unsupported(p: &TensorProto) -> Option<String> {
    use crate::proto::tensor_proto::DataType;
    if p.segment.is_some() {
        return Some("it has a segment (a part of a tensor split over several records), which is not supported".into());
    }
    let t = DataType::try_from(p.data_type).ok()?;
    (t != DataType::Undefined && crate::tensor::dtype_of(p.data_type).is_none())
        .then(|| format!("element type {} has no tensorfmt dtype", t.as_str_name()))
}

/// A cheap content check: an ONNX `ModelProto` starts with `ir_version` (field 1,
/// varint 1..=32) followed by another ModelProto field with its schema's wire type
/// (producer_name, graph, opset_import, ...). Caffe mean files also start with field
/// 1 as a varint, but their field 2 is a varint (`channels`), which ONNX's field 2
/// (`producer_name`, a string) is not.
///
/// ```
/// assert!(tensorfmt_onnx::sniff(&[0x08, 0x08, 0x12, 0x01, b'x'], 5));
/// assert!(!tensorfmt_onnx::sniff(&[0x08, 0x01, 0x10, 0x01], 4)); // a Caffe mean file
/// ```
pub fn sniff(head: &[u8], file_len: u64) -> bool {
    let head = &head[..head.len().min(4096)];
    if head.len() < 4 || (head.len() as u64) > file_len || head[0] != 0x08 {
        return false;
    }
    let mut pos = 1;
    let Ok(v) = wire_varint(head, &mut pos) else {
        return false;
    };
    if !(1..=32).contains(&v) {
        return false;
    }
    // The following fields (as many as the head holds, at most 8) must be ModelProto
    // fields with their schema's wire type; its strings must be text. A Caffe solver
    // state (iter, learned_net, history blobs) fails on the binary history blob.
    let mut seen = 0;
    while pos < head.len() && seen < 8 {
        let Ok(key) = wire_varint(head, &mut pos) else {
            return seen > 0;
        };
        let (number, wt) = (key >> 3, key & 7);
        match (number, wt) {
            (5, 0) => {
                if wire_varint(head, &mut pos).is_err() {
                    return true;
                }
            }
            (2 | 3 | 4 | 6 | 7 | 8 | 14 | 20 | 25 | 26, 2) => {
                let Ok(len) = wire_varint(head, &mut pos) else {
                    return seen > 0;
                };
                if (pos as u64).saturating_add(len) > file_len {
                    return false;
                }
                if matches!(number, 2 | 3 | 4 | 6) {
                    let end = (pos as u64 + len).min(head.len() as u64) as usize;
                    let text = &head[pos..end];
                    let ok = match std::str::from_utf8(text) {
                        Ok(s) => !s
                            .chars()
                            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')),
                        Err(e) => end < pos + len as usize && e.error_len().is_none(),
                    };
                    if !ok {
                        return false;
                    }
                }
                pos = pos.saturating_add(len as usize);
            }
            _ => return false,
        }
        seen += 1;
    }
    seen > 0
}

fn wire_varint(buf: &[u8], pos: &mut usize) -> std::result::Result<u64, ()> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = *buf.get(*pos).ok_or(())?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(())
}
