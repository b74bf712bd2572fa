//! The friendly reading API: file-kind detection and sniffing, size limits, typed
//! readers for models, mean files, BlobProtoVector and SolverState, the typed topology
//! views decoded with prost, and utilities on loaded weights.

use std::path::Path;

use bytes::Bytes;
use prost::Message;
use tensorfmt_core::{Limits, ReadOptions};

use crate::error::{CaffeError, Result};
use crate::proto;
use crate::raw::{self, Budget, MixedLayers, Model, NetVersion, RawBlob, RawLayer, RawSolverState};
use crate::wire::{Cursor, LEN, VARINT};

/// The HDF5 signature (`.caffemodel.h5` snapshots).
pub const HDF5_SIGNATURE: [u8; 8] = [0x89, b'H', b'D', b'F', 0x0d, 0x0a, 0x1a, 0x0a];

/// Caffe's `kProtoReadBytesLimit` (INT_MAX, "2 GB minus 1 byte").
pub const CAFFE_READ_LIMIT: u64 = i32::MAX as u64;

/// Options of the typed readers.
///
/// Files larger than [`CaffeReadOptions::max_file_bytes`] (default: Caffe's own limit,
/// 2 GiB - 1 byte) are refused before any parsing: C++ protobuf cannot write a message of
/// 2 GiB or more, so a larger file was not written by Caffe. Raise the limit to read
/// files from other writers (the parser itself has no 2 GiB restriction).
///
/// [`CaffeReadOptions::limits`] caps the rest: `max_items` bounds the layers and blobs
/// (all of them, nested ones included) a file may hold, `max_rank` the axes of a blob
/// shape (below Caffe's own 32), `max_alloc` any owned buffer built from the file (the
/// values of unpacked or repeated float runs; a single packed run is a zero-copy slice
/// of the file and allocates nothing). Every declared length is also checked against
/// the bytes present first.
///
/// ```
/// use tensorfmt_caffe::{read_model_with, CaffeError, CaffeReadOptions};
/// let opts = CaffeReadOptions { max_file_bytes: 4, ..CaffeReadOptions::default() };
/// let err = read_model_with(bytes::Bytes::from_static(b"\x0a\x03abc"), &opts).unwrap_err();
/// assert!(matches!(err, CaffeError::TooLarge { size: 5, limit: 4 }));
/// // From the facade's options: their limits, and `strict` picks the mixed-layers policy.
/// let facade = tensorfmt_core::ReadOptions { strict: true, ..Default::default() };
/// let o = CaffeReadOptions::from(&facade);
/// assert_eq!(o.max_file_bytes, tensorfmt_caffe::CAFFE_READ_LIMIT);
/// assert_eq!(o.mixed_layers, tensorfmt_caffe::MixedLayers::Refuse);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaffeReadOptions {
    /// Largest file accepted, in bytes.
    pub max_file_bytes: u64,
    /// What to do with a net holding both `layer` and `layers`.
    pub mixed_layers: MixedLayers,
    /// Caps on items, rank and allocations (default: [`Limits::default`]).
    pub limits: Limits,
}

impl Default for CaffeReadOptions {
    fn default() -> Self {
        CaffeReadOptions {
            max_file_bytes: CAFFE_READ_LIMIT,
            mixed_layers: MixedLayers::Refuse,
            limits: Limits::default(),
        }
    }
}

impl From<&ReadOptions> for CaffeReadOptions {
    /// The facade's options: `limits` as given; the file-size limit stays Caffe's
    /// 2 GiB - 1 (a mapped file is not an allocation; raise it through the typed API);
    /// `strict` refuses nets mixing `layer` and `layers`, as Caffe does, while the
    /// default reads their `layers` (as OpenCV did) with a warning.
    fn from(o: &ReadOptions) -> Self {
        CaffeReadOptions {
            max_file_bytes: CAFFE_READ_LIMIT,
            mixed_layers: if o.strict {
                MixedLayers::Refuse
            } else {
                MixedLayers::PreferV1
            },
            limits: o.limits,
        }
    }
}

pub(crate) fn precheck(data: &[u8], opts: &CaffeReadOptions) -> Result<()> {
    if data.len() as u64 > opts.max_file_bytes {
        return Err(CaffeError::TooLarge {
            size: data.len() as u64,
            limit: opts.max_file_bytes,
        });
    }
    if data.starts_with(&HDF5_SIGNATURE) {
        return Err(CaffeError::Hdf5);
    }
    Ok(())
}

/// Reads a `.caffemodel` (NetParameter, V0/V1/V2) with the default options.
pub fn read_model(data: Bytes) -> Result<Model> {
    read_model_with(data, &CaffeReadOptions::default())
}

/// Reads a `.caffemodel` with options.
pub fn read_model_with(data: Bytes, opts: &CaffeReadOptions) -> Result<Model> {
    precheck(&data, opts)?;
    raw::parse_net(&data, opts.mixed_layers, &mut Budget::new(opts.limits))
}

/// Reads a single BlobProto (a `.binaryproto` mean file) with the default options.
pub fn read_blob_proto(data: Bytes) -> Result<RawBlob> {
    read_blob_proto_with(data, &CaffeReadOptions::default())
}

/// Reads a single BlobProto with options.
///
/// ```
/// use tensorfmt_caffe::{read_blob_proto_with, CaffeError, CaffeReadOptions};
/// use tensorfmt_core::Limits;
/// // Two unpacked floats (field 5, wire type 5) must be gathered into an owned buffer.
/// let blob = [0x2d, 0, 0, 0x80, 0x3f, 0x2d, 0, 0, 0, 0x40];
/// let tiny = CaffeReadOptions { limits: Limits { max_alloc: 4, ..Limits::default() }, ..Default::default() };
/// let err = read_blob_proto_with(bytes::Bytes::copy_from_slice(&blob), &tiny).unwrap_err();
/// assert!(matches!(err, CaffeError::Limit { what: "allocation", value: 8, limit: 4, .. }));
/// ```
pub fn read_blob_proto_with(data: Bytes, opts: &CaffeReadOptions) -> Result<RawBlob> {
    precheck(&data, opts)?;
    raw::parse_blob(
        &data,
        0..data.len(),
        "BlobProto",
        &mut Budget::new(opts.limits),
    )
}

/// Reads a BlobProtoVector with the default options.
pub fn read_blob_vector(data: Bytes) -> Result<Vec<RawBlob>> {
    read_blob_vector_with(data, &CaffeReadOptions::default())
}

/// Reads a BlobProtoVector with options.
pub fn read_blob_vector_with(data: Bytes, opts: &CaffeReadOptions) -> Result<Vec<RawBlob>> {
    precheck(&data, opts)?;
    raw::parse_blob_vector(&data, &mut Budget::new(opts.limits))
}

/// Reads a `.solverstate` with the default options.
pub fn read_solver_state(data: Bytes) -> Result<RawSolverState> {
    read_solver_state_with(data, &CaffeReadOptions::default())
}

/// Reads a `.solverstate` with options.
pub fn read_solver_state_with(data: Bytes, opts: &CaffeReadOptions) -> Result<RawSolverState> {
    precheck(&data, opts)?;
    raw::parse_solver_state(&data, &mut Budget::new(opts.limits))
}

/// Maps a file (see [`tensorfmt_core::io::map_file`]) after checking its size against
/// `opts.max_file_bytes`, so an oversized file is refused without being mapped.
pub fn map_path(path: &Path, opts: &CaffeReadOptions) -> Result<Bytes> {
    let len = std::fs::metadata(path)
        .map_err(|e| tensorfmt_core::Error::io(path, e))?
        .len();
    if len > opts.max_file_bytes {
        return Err(CaffeError::TooLarge {
            size: len,
            limit: opts.max_file_bytes,
        });
    }
    Ok(tensorfmt_core::io::map_file(path)?)
}

/// The kind of Caffe protobuf file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// NetParameter (`.caffemodel`).
    Model,
    /// A single BlobProto (`.binaryproto` mean file).
    Mean,
    /// BlobProtoVector.
    BlobVector,
    /// SolverState (`.solverstate`).
    SolverState,
}

impl FileKind {
    /// The kind named by a `ReadOptions::kind` / `WriteOptions::kind` string:
    /// `caffemodel` (or `model`), `binaryproto` (or `mean`), `blobprotovector`,
    /// `solverstate`.
    ///
    /// ```
    /// use tensorfmt_caffe::FileKind;
    /// assert_eq!(FileKind::from_name("mean"), Some(FileKind::Mean));
    /// assert_eq!(FileKind::from_name("som"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<FileKind> {
        Some(match name {
            "caffemodel" | "model" => FileKind::Model,
            "binaryproto" | "mean" => FileKind::Mean,
            "blobprotovector" => FileKind::BlobVector,
            "solverstate" => FileKind::SolverState,
            _ => return None,
        })
    }

    /// Name used by `WriteOptions::kind` and in `inspect`.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Model => "caffemodel",
            FileKind::Mean => "binaryproto",
            FileKind::BlobVector => "blobprotovector",
            FileKind::SolverState => "solverstate",
        }
    }
}

/// Top-level fields seen by a scan: (field, wire type, value range for LEN fields).
struct Scan {
    fields: Vec<(u32, u8, std::ops::Range<usize>)>,
    /// Fields appear in non-decreasing number order (what Caffe's writers produce).
    ordered: bool,
    /// The scan stopped at the end of `head` inside a field that fits in the file.
    cut: bool,
}

fn scan(head: &[u8], file_len: u64) -> Option<Scan> {
    let mut c = Cursor::new(head, 0, head.len());
    let mut s = Scan {
        fields: Vec::new(),
        ordered: true,
        cut: false,
    };
    let mut last = 0;
    while !c.at_end() {
        let Ok(Some(k)) = c.key("") else {
            s.cut = true;
            break;
        };
        s.ordered &= k.field >= last;
        last = k.field;
        let start = c.pos;
        let ok = match k.wire_type {
            LEN => {
                let at = c.pos;
                match c.varint("") {
                    Ok(len) => {
                        let end = (c.pos as u64).checked_add(len)?;
                        if end > file_len {
                            return None;
                        }
                        if end > head.len() as u64 {
                            s.fields.push((k.field, k.wire_type, c.pos..head.len()));
                            s.cut = true;
                            break;
                        }
                        c.pos = end as usize;
                        let _ = at;
                        s.fields
                            .push((k.field, k.wire_type, c.pos - len as usize..c.pos));
                        true
                    }
                    Err(_) => {
                        s.cut = true;
                        break;
                    }
                }
            }
            _ => match c.skip(k, "", 0) {
                Ok(()) => {
                    s.fields.push((k.field, k.wire_type, start..c.pos));
                    true
                }
                Err(CaffeError::Truncated { .. }) if (head.len() as u64) < file_len => {
                    s.cut = true;
                    break;
                }
                Err(_) => false,
            },
        };
        if !ok {
            return None;
        }
    }
    if !s.cut && (head.len() as u64) < file_len {
        // The head ended exactly at a field boundary: fine, more follows.
        s.cut = true;
    }
    Some(s)
}

fn printable(b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok_and(|s| !s.chars().any(char::is_control))
}

pub(crate) fn classify(head: &[u8], file_len: u64, strict: bool) -> Option<FileKind> {
    if head.is_empty() || head.starts_with(&HDF5_SIGNATURE) {
        return None;
    }
    let s = scan(head, file_len)?;
    if s.fields.is_empty() || (strict && !s.ordered) {
        return None;
    }
    let all = |ok: &dyn Fn(u32, u8) -> bool| s.fields.iter().all(|&(f, w, _)| ok(f, w));
    let has = |field: u32, wt: u8| s.fields.iter().any(|&(f, w, _)| f == field && w == wt);
    // BlobProto: legacy dims, arrays, shape; some values present.
    let blob_ok = all(&|f, w| match f {
        1..=4 | 10 => w == VARINT,
        5 | 6 => w == LEN || w == 5,
        8 | 9 => w == LEN || w == 1,
        7 | 12 => w == LEN,
        _ => false,
    });
    // A blob of no values (count 0) has its shape alone, which no other message has as
    // a length-delimited field 7; content sniffing (strict) still asks for values.
    if blob_ok
        && (has(5, LEN) || has(8, LEN) || has(5, 5) || has(12, LEN) || (!strict && has(7, LEN)))
    {
        return Some(FileKind::Mean);
    }
    // SolverState: iter / current_step varints, learned_net, history blobs.
    let solver_ok = all(&|f, w| match f {
        1 | 4 => w == VARINT,
        2 | 3 => w == LEN,
        _ => false,
    });
    let text_ok = |field: u32| {
        s.fields
            .iter()
            .filter(|(f, _, _)| *f == field)
            .all(|(_, _, r)| printable(&head[r.clone()]) || r.end == head.len())
    };
    if solver_ok && (has(1, VARINT) || has(4, VARINT)) && text_ok(2) {
        return Some(FileKind::SolverState);
    }
    // NetParameter: name, layers, inputs, flags, layer.
    let net_ok = all(&|f, w| match f {
        1 | 2 | 3 | 6 | 8 | 100 => w == LEN,
        4 => w == VARINT || w == LEN,
        5 | 7 => w == VARINT,
        _ => false,
    });
    let has_layers = has(2, LEN) || has(100, LEN);
    // BlobProtoVector: only field 1, each entry a blob (a net's name is text instead).
    if all(&|f, w| f == 1 && w == LEN) {
        let blobs = s.fields.iter().all(|(_, _, r)| {
            let inner = &head[r.clone()];
            let complete = !(s.cut && r.end == head.len());
            if complete {
                classify(inner, inner.len() as u64, strict) == Some(FileKind::Mean)
            } else {
                matches!(
                    inner.first(),
                    Some(0x08 | 0x10 | 0x18 | 0x20 | 0x2a | 0x3a | 0x42)
                ) && !printable(inner)
            }
        });
        if blobs {
            return Some(FileKind::BlobVector);
        }
    }
    if net_ok && text_ok(1) && (has_layers || (!strict && has(1, LEN))) {
        return Some(FileKind::Model);
    }
    None
}

/// The kind of a whole Caffe protobuf file, from its top-level field structure
/// (protobuf has no magic number), or `None` when it looks like none of them.
///
/// ```
/// use tensorfmt_caffe::{detect_kind, FileKind};
/// // num=1 channels=1 height=1 width=1, data = [1.0]
/// let mean = [0x08, 1, 0x10, 1, 0x18, 1, 0x20, 1, 0x2a, 4, 0, 0, 0x80, 0x3f];
/// assert_eq!(detect_kind(&mean), Some(FileKind::Mean));
/// assert_eq!(detect_kind(b"\x93NUMPY"), None);
/// ```
pub fn detect_kind(data: &[u8]) -> Option<FileKind> {
    classify(data, data.len() as u64, false)
}

/// Conservative content check on the first bytes of a file: a plausible NetParameter,
/// BlobProto, SolverState or BlobProtoVector, every top-level field in field-number
/// order (as Caffe writes them) and every declared length within `file_len`.
///
/// ```
/// let head = [0x0a, 3, b'n', b'e', b't', 0xa2, 0x06, 0x02, 0x0a, 0x00];
/// assert!(tensorfmt_caffe::sniff(&head, head.len() as u64));
/// assert!(!tensorfmt_caffe::sniff(b"PK\x03\x04 a zip file", 100));
/// ```
pub fn sniff(head: &[u8], file_len: u64) -> bool {
    let head = &head[..head.len().min(4096)];
    if (head.len() as u64) > file_len {
        return false;
    }
    classify(head, file_len, true).is_some()
}

/// Checks the blobs of a model load into Caffe: shapes valid and counts exact.
pub(crate) fn layer_path(layer: &RawLayer, index: usize) -> String {
    match layer.version {
        NetVersion::V2 => format!("layer[{index}]"),
        NetVersion::V1 => format!("layers[{index}]"),
        NetVersion::V0 => format!("layers[{index}].layer"),
    }
}

/// One name-matched layer pair of [`Model::match_layers`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LayerMatch {
    /// Source layers matched to a target name (source index, name).
    pub matched: Vec<(usize, String)>,
    /// Source layers with blobs whose name is not among the targets ("Ignoring source layer").
    pub unmatched_source: Vec<String>,
    /// Target names with no source layer.
    pub unmatched_target: Vec<String>,
}

impl Model {
    /// The first layer named `name` (Caffe's CopyTrainedLayersFrom: first match wins).
    pub fn layer(&self, name: &str) -> Option<&RawLayer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// Mutable access to the first layer named `name`.
    pub fn layer_mut(&mut self, name: &str) -> Option<&mut RawLayer> {
        self.layers.iter_mut().find(|l| l.name == name)
    }

    /// Replaces the blobs of the first layer named `name`.
    pub fn set_blobs(&mut self, name: &str, blobs: Vec<RawBlob>) -> Result<()> {
        let l = self
            .layer_mut(name)
            .ok_or_else(|| CaffeError::NoSuchLayer(name.to_string()))?;
        l.blobs = blobs;
        Ok(())
    }

    /// Serializes the model: every non-blob byte as read, blobs re-encoded. A model read
    /// and written unchanged is byte-identical, fields from Caffe forks included.
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::write::encode_net(self)
    }

    /// Writes [`Model::to_bytes`] to any writer, one layer at a time: blob payloads go
    /// straight from their bytes, so memory does not grow with the model.
    ///
    /// ```
    /// use tensorfmt_caffe::{encode_weights_model, read_model, RawBlob, WeightsLayer};
    /// use tensorfmt_core::testing::FailAfter;
    /// let bytes = encode_weights_model(None, &[WeightsLayer {
    ///     name: "a".into(), type_name: None, blobs: vec![RawBlob::from_f32(&[1], &[1.0])] }]);
    /// let model = read_model(bytes.clone().into())?;
    /// let mut out = Vec::new();
    /// model.write_to(&mut out)?;
    /// assert_eq!(out, bytes);
    /// assert!(model.write_to(&mut FailAfter::new(5)).is_err());
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> Result<()> {
        Ok(crate::write::write_net(self, &mut { w })?)
    }

    /// Writes the model atomically (temporary file, then rename): a failure part-way
    /// leaves the old file, or none, under `path`. Rewriting the file the model was
    /// read from (mapped) is safe: the old file is replaced, not overwritten.
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::write::write_path(path, |w| self.write_to(w))
    }

    /// The original file bytes.
    pub fn file_bytes(&self) -> &Bytes {
        &self.file
    }

    /// The NetParameter without its layers, decoded with the generated prost types
    /// (name, inputs, input shapes, state, flags).
    pub fn net_parameter(&self) -> Result<proto::NetParameter> {
        let mut bytes = Vec::new();
        for p in &self.pieces {
            if let raw::NetPiece::Raw(r) = p {
                bytes.extend_from_slice(&self.file[r.clone()]);
            }
        }
        proto::NetParameter::decode(bytes.as_slice()).map_err(|source| CaffeError::Prost {
            path: "NetParameter".into(),
            source,
        })
    }

    /// A V2 layer's fields other than blobs, decoded with prost (bottom, top, phase,
    /// param specs, ...).
    pub fn layer_parameter(&self, index: usize) -> Result<proto::LayerParameter> {
        let l = self.layer_at(index)?;
        proto::LayerParameter::decode(l.param_bytes(&self.file).as_slice()).map_err(|source| {
            CaffeError::Prost {
                path: layer_path(l, index),
                source,
            }
        })
    }

    /// A V1 (or V0-wrapping) layer's fields other than blobs, decoded with prost.
    pub fn v1_layer_parameter(&self, index: usize) -> Result<proto::V1LayerParameter> {
        let l = self.layer_at(index)?;
        proto::V1LayerParameter::decode(l.param_bytes(&self.file).as_slice()).map_err(|source| {
            CaffeError::Prost {
                path: layer_path(l, index),
                source,
            }
        })
    }

    fn layer_at(&self, index: usize) -> Result<&RawLayer> {
        self.layers
            .get(index)
            .ok_or_else(|| CaffeError::NoSuchLayer(format!("#{index}")))
    }

    /// Checks every blob as Caffe's FromProto would: valid shape, exact value count, and
    /// a diff (if any) of the same count.
    pub fn validate(&self) -> Result<()> {
        for (i, l) in self.layers.iter().enumerate() {
            for (j, b) in l.blobs.iter().enumerate() {
                let path = format!("{}.blobs[{j}]", layer_path(l, i));
                b.tensor(&path)?;
                b.diff_tensor(&path)?;
            }
        }
        Ok(())
    }

    /// Matches the layers with blobs to `targets` by name as Caffe's
    /// `CopyTrainedLayersFrom` does (first source layer of a name wins).
    pub fn match_layers(&self, targets: &[&str]) -> LayerMatch {
        let mut m = LayerMatch::default();
        let mut used = std::collections::HashSet::new();
        for (i, l) in self.layers.iter().enumerate() {
            if l.blobs.is_empty() {
                continue;
            }
            if targets.contains(&l.name.as_str()) && used.insert(l.name.clone()) {
                m.matched.push((i, l.name.clone()));
            } else {
                m.unmatched_source.push(l.name.clone());
            }
        }
        m.unmatched_target = targets
            .iter()
            .filter(|t| !used.contains(**t))
            .map(|t| t.to_string())
            .collect();
        m
    }
}

impl RawSolverState {
    /// Serializes the solver state (fields 1-4 in number order).
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::write::encode_solver_state(self)
    }

    /// [`RawSolverState::to_bytes`] into any writer.
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> Result<()> {
        Ok(crate::write::write_solver_state(self, &mut { w })?)
    }
}

/// BatchNorm's stored statistics made effective: `blobs[0]` (mean) and `blobs[1]`
/// (variance) times `1 / blobs[2][0]`, or 0 when that factor is 0 (spec §4.7).
///
/// ```
/// use tensorfmt_caffe::{batch_norm_stats, RawBlob};
/// let blobs = [RawBlob::from_f32(&[2], &[2.0, 4.0]), RawBlob::from_f32(&[2], &[8.0, 6.0]),
///              RawBlob::from_f32(&[1], &[2.0])];
/// assert_eq!(batch_norm_stats(&blobs)?, (vec![1.0, 2.0], vec![4.0, 3.0]));
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
pub fn batch_norm_stats(blobs: &[RawBlob]) -> Result<(Vec<f32>, Vec<f32>)> {
    if blobs.len() != 3 {
        return Err(CaffeError::Blob(format!(
            "BatchNorm has 3 blobs (mean, variance, factor), got {}",
            blobs.len()
        )));
    }
    let load = |b: &RawBlob| -> Result<Vec<f32>> {
        let mut blob = crate::Blob::<f32>::new();
        blob.from_proto(b, true)?;
        Ok(blob.data().to_vec())
    };
    let factor = load(&blobs[2])?;
    let f = *factor
        .first()
        .ok_or_else(|| CaffeError::Blob("BatchNorm factor blob is empty".into()))?;
    let scale = if f == 0.0 { 0.0 } else { 1.0 / f };
    let mean = load(&blobs[0])?.into_iter().map(|v| v * scale).collect();
    let var = load(&blobs[1])?.into_iter().map(|v| v * scale).collect();
    Ok((mean, var))
}

/// Transposes a row-major `[rows, cols]` matrix (InnerProduct weights stored with
/// `transpose: true` are `[K, N]` instead of `[N, K]`).
///
/// ```
/// assert_eq!(tensorfmt_caffe::transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3)?,
///            vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
pub fn transpose(values: &[f32], rows: usize, cols: usize) -> Result<Vec<f32>> {
    if rows.checked_mul(cols) != Some(values.len()) {
        return Err(CaffeError::Blob(format!(
            "{} values are not a {rows}x{cols} matrix",
            values.len()
        )));
    }
    let mut out = vec![0f32; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    Ok(out)
}
