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
use crate::tensor::{is_external, sparse_from_proto, tensor_from_proto};
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
    /// `graph.initializer` in file order: (name, tensor). Empty names become
    /// `initializer[i]`.
    pub initializers: Vec<(String, Tensor)>,
    /// The external data files initializers were read from (their `location`s, each
    /// once, in first-use order); empty for a self-contained model.
    pub external_files: Vec<String>,
    /// Initializers in external data files that were not read
    /// ([`read_model_file_described`]); their files are in `external_files` too.
    pub unread: Vec<Unread>,
    /// The names of the initializers that were `graph.sparse_initializer`s, densified
    /// (they follow the dense ones in `initializers`).
    pub sparse: Vec<String>,
    /// Initializers left out: element types without a tensorfmt dtype (strings,
    /// complex, 8-bit floats, 4-bit integers), one line each.
    pub warnings: Vec<String>,
    /// Initializers left out for their element type (each named in `warnings`).
    pub left_out: usize,
    /// Nodes holding subgraphs (the bodies of If, Loop, Scan): their initializers are
    /// not read.
    pub subgraph_nodes: usize,
}

/// One initializer of a [`ModelFile`], read or not.
pub(crate) enum Slot<'a> {
    /// Read: its name and tensor.
    Read(&'a str, &'a Tensor),
    /// In an external data file that was not read.
    Unread(&'a Unread),
}

impl ModelFile {
    /// Every initializer in graph order, the unread ones (at their `index`) among the
    /// read ones.
    pub(crate) fn slots(&self) -> Vec<Slot<'_>> {
        let mut read = self.initializers.iter();
        let mut unread = self.unread.iter().peekable();
        (0..self.initializers.len() + self.unread.len())
            .filter_map(|i| match unread.peek() {
                Some(u) if u.index == i => unread.next().map(Slot::Unread),
                _ => read.next().map(|(n, t)| Slot::Read(n, t)),
            })
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
fn decode_bounded<M: Message + Default>(
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

/// An initializer's name: as given, or its `path` when empty or already taken.
fn unique_name(given: &str, path: &str, used: &mut std::collections::HashSet<String>) -> String {
    let name = if given.is_empty() || used.contains(given) {
        path.to_string()
    } else {
        given.to_string()
    };
    used.insert(name.clone());
    name
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

fn read_model(
    data: Bytes,
    options: &ReadOptions,
    mut external: ExternalFiles<'_>,
) -> Result<ModelFile> {
    let limits = &options.limits;
    let mut m = ModelFile::default();
    let mut saw_graph = false;
    for f in wire::fields(&data, 0, data.len(), "ModelProto")? {
        match f.number {
            1 => {
                wire::expect(&f, 0, "ir_version")?;
                m.ir_version = f.value as i64;
            }
            2 => m.producer_name = string(&data, &f, "producer_name")?,
            3 => m.producer_version = string(&data, &f, "producer_version")?,
            7 => {
                wire::expect(&f, 2, "graph")?;
                saw_graph = true;
                read_graph(&data, &f, limits, &mut external, &mut m)?;
            }
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
    if m.ir_version <= 0 || !saw_graph {
        return Err(OnnxError::NotOnnx(format!(
            "a ModelProto needs ir_version and graph (ir_version {}, graph {})",
            m.ir_version,
            if saw_graph { "present" } else { "absent" }
        )));
    }
    Ok(m)
}

fn read_graph(
    data: &Bytes,
    g: &Field,
    limits: &Limits,
    external: &mut ExternalFiles<'_>,
    m: &mut ModelFile,
) -> Result<()> {
    let mut items: u64 = 0;
    let mut used = std::collections::HashSet::new();
    // Sparse initializers go after the dense ones, so that the dense ones keep their
    // graph positions among the unread (external) ones.
    let mut sparse = Vec::new();
    for f in wire::fields(data, g.start, g.end, "graph")? {
        items += 1;
        item_limit(limits, items, "graph", f.offset)?;
        match f.number {
            1 => {
                wire::expect(&f, 2, "graph.node")?;
                m.nodes += 1;
                if holds_subgraph(data, &f)? {
                    m.subgraph_nodes += 1;
                }
            }
            2 => m.graph_name = string(data, &f, "graph.name")?,
            5 => {
                let i = m.initializers.len() + m.unread.len();
                let path = format!("graph.initializer[{i}]");
                let p: TensorProto = decode_bounded(data, &f, &path, limits)?;
                if let Some(why) = unsupported(p.data_type) {
                    // One such weight does not make the others unreadable.
                    m.warnings
                        .push(format!("{path} ({:?}) left out: {why}", p.name));
                    m.left_out += 1;
                    continue;
                }
                let name = unique_name(&p.name, &path, &mut used);
                let at = f.offset as u64;
                if is_external(&p) && external.describes() {
                    let index = m.initializers.len() + m.unread.len();
                    let u = external.describe(&p, index, name, &path, at, limits)?;
                    if !m.external_files.contains(&u.location) {
                        m.external_files.push(u.location.clone());
                    }
                    m.unread.push(u);
                    continue;
                }
                let t = if is_external(&p) {
                    let (t, location) = external.tensor(&p, &path, at, limits)?;
                    if !m.external_files.contains(&location) {
                        m.external_files.push(location);
                    }
                    t
                } else {
                    tensor_from_proto(&p, &path, at, limits)?
                };
                m.initializers.push((name, t));
            }
            15 => {
                let path = format!("graph.sparse_initializer[{}]", m.sparse.len());
                let p: SparseTensorProto = decode_bounded(data, &f, &path, limits)?;
                let values_type = p.values.as_ref().map_or(0, |v| v.data_type);
                if let Some(why) = unsupported(values_type) {
                    let name = p
                        .values
                        .as_ref()
                        .map(|v| v.name.as_str())
                        .unwrap_or_default();
                    m.warnings
                        .push(format!("{path} ({name:?}) left out: {why}"));
                    m.left_out += 1;
                    continue;
                }
                let t = sparse_from_proto(&p, &path, f.offset as u64, limits)?;
                let given = p.values.as_ref().map_or("", |v| v.name.as_str());
                let name = unique_name(given, &path, &mut used);
                m.sparse.push(name.clone());
                sparse.push((name, t));
            }
            11 | 12 => {
                let path = if f.number == 11 {
                    "graph.input"
                } else {
                    "graph.output"
                };
                wire::expect(&f, 2, path)?;
                let v: ValueInfoProto = decode(data, &f, path)?;
                if f.number == 11 {
                    m.inputs.push(v.name);
                } else {
                    m.outputs.push(v.name);
                }
            }
            _ => {}
        }
    }
    m.initializers.extend(sparse);
    if m.subgraph_nodes > 0 {
        m.warnings.push(format!(
            "{} node(s) hold subgraphs (If, Loop, Scan bodies), whose own initializers \
             are not read",
            m.subgraph_nodes
        ));
    }
    Ok(())
}

/// Whether a NodeProto has a graph-valued attribute (`AttributeProto.g`, field 6, or
/// `graphs`, field 11): a wire scan, nothing decoded.
fn holds_subgraph(data: &Bytes, node: &Field) -> Result<bool> {
    for a in wire::fields(data, node.start, node.end, "graph.node")? {
        if a.number == 5 && a.wire_type == 2 {
            let inner = wire::fields(data, a.start, a.end, "graph.node.attribute")?;
            if inner
                .iter()
                .any(|f| matches!(f.number, 6 | 11) && f.wire_type == 2)
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Why an initializer of ONNX element type `data_type` cannot be read, when it is a
/// real type without a tensorfmt dtype (UNDEFINED and unknown numbers are format
/// errors of the tensor itself).
fn unsupported(data_type: i32) -> Option<String> {
    use crate::proto::tensor_proto::DataType;
    let t = DataType::try_from(data_type).ok()?;
    (t != DataType::Undefined && crate::tensor::dtype_of(data_type).is_none())
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
