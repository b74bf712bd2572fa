//! What a legacy file holds besides its tensors, carried through safetensors and npz.
//!
//! A PVP, PINK, primitiv or Caffe file says more than its tensors: header fields, frame
//! times, comment blocks, layer definitions, solver fields, unknown protobuf fields,
//! even the byte order of MessagePack maps. Converting it to safetensors or npz keeps
//! the tensors as tensors and the rest as the file's **skeleton**: its bytes with the
//! tensors' bytes cut out, plus where each cut was. The skeleton travels in the
//! target's metadata (safetensors `__metadata__["tensorfmt.source"]`, npz member
//! `__tensorfmt__.npy`, a 0-d bytes array that `np.load` / `np.savez` carry along), as
//! JSON with a readable copy of the header beside the base64 skeleton.
//!
//! Converting back to the original format splices the tensors into the skeleton, so
//! `X -> safetensors -> X` and `X -> npz -> X` give back the very same bytes whatever
//! the original writer did (hash-ordered maps, padding, unknown fields). A file edited
//! in numpy in between keeps its metadata when every tensor keeps its name, dtype and
//! shape; the bytes a reader computes rather than finds verbatim in the file (a PVP
//! file's `time`, a sparse frame's entries) are checked by reading the spliced file
//! back, and when they no longer agree the conversion falls back to writing from the
//! tensors alone and says so.
//!
//! The rule for a cut is generic: a tensor chunk whose bytes are a slice of the mapped
//! input (a zero-copy read) is cut out; everything else stays in the skeleton. A
//! skeleton larger than [`MAX_SKELETON`] (a big sparse movie) is not recorded; the
//! conversion says so.
//!
//! ```
//! use tensorfmt::{Document, Format};
//! let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
//! let dir = tempfile::tempdir()?;
//! let st = dir.path().join("x.safetensors");
//! Document::open(&src)?.convert_to(&st, Format::Safetensors)?;
//! let back = dir.path().join("x.pvp");
//! Document::open(&st)?.convert_to(&back, Format::Pvp)?;
//! assert_eq!(std::fs::read(&back)?, std::fs::read(&src)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};
use tensorfmt_core::{
    DType, Error, FieldValue, Order, Result, Shape, Tensor, TensorFile, WriteOptions,
};

use crate::document::Document;
use crate::formats::{self, Format, Target, WriteReport};

/// The safetensors `__metadata__` key (and npz member stem `__tensorfmt__`) that
/// carries a legacy file's skeleton.
pub const KEY: &str = "tensorfmt.source";

/// The npz member name (without `.npy`) that carries the skeleton.
pub const NPZ_MEMBER: &str = "__tensorfmt__";

/// The largest skeleton recorded (bytes outside the tensors); beyond it the metadata
/// would outgrow what safetensors readers accept in a header (100 MB in the Python
/// package).
pub const MAX_SKELETON: usize = 16 << 20;

/// Version of the JSON layout.
const VERSION: u64 = 1;

/// What [`record`] found for a document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// The JSON to store under [`KEY`], when the document's format has anything to
    /// carry and it fits.
    pub json: Option<String>,
    /// Why nothing was recorded for a legacy file (too large, a partial read).
    pub note: Option<String>,
}

/// What [`restore`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Restored {
    /// The original file was rebuilt from the skeleton and the tensors.
    Written(WriteReport),
    /// The document carries no skeleton for this target (or options ask for a change).
    NotRecorded,
    /// The document carries a skeleton that no longer fits its tensors; why.
    Refused(String),
}

/// One cut: `count` runs of `len` bytes, the `i`-th at `file_offset + i * stride` in
/// the original file and at `tensor_offset + i * len` in the row-major bytes of tensor
/// number `tensor`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cut {
    file_offset: u64,
    len: u64,
    tensor: usize,
    tensor_offset: u64,
    count: u64,
    stride: u64,
}

impl Cut {
    fn pieces(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.count).map(|i| {
            (
                self.file_offset + i * self.stride,
                self.tensor_offset + i * self.len,
            )
        })
    }
}

/// One tensor of the original file: what the cuts refer to and what must match.
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    name: String,
    dtype: DType,
    shape: Shape,
    /// Every byte of the tensor was cut from a zero-copy read (so the spliced file
    /// holds it verbatim and it need not be read back).
    covered: bool,
    /// The cuts hold the tensor's column-major bytes.
    column_major: bool,
}

/// A parsed skeleton.
#[derive(Debug, Clone, PartialEq)]
struct Skeleton {
    format: Format,
    kind: String,
    size: u64,
    tensors: Vec<Listed>,
    cuts: Vec<Cut>,
    bytes: Vec<u8>,
}

fn is_legacy(f: Format) -> bool {
    matches!(
        f,
        Format::Pvp | Format::Som | Format::Primitiv | Format::Caffe
    )
}

/// A header field as JSON (what `inspect --json` prints).
///
/// ```
/// use tensorfmt::FieldValue;
/// let v = FieldValue::Map(vec![("nx".into(), FieldValue::UInt(4))]);
/// assert_eq!(tensorfmt::provenance::field_json(&v).to_string(), r#"{"nx":4}"#);
/// ```
pub fn field_json(v: &FieldValue) -> Value {
    match v {
        FieldValue::Bool(b) => json!(b),
        FieldValue::Int(i) => json!(i),
        FieldValue::UInt(u) => json!(u),
        FieldValue::Float(f) => json!(f),
        FieldValue::Text(s) => json!(s),
        FieldValue::List(l) => Value::Array(l.iter().map(field_json).collect()),
        FieldValue::Map(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), field_json(v))).collect())
        }
    }
}

/// Records the skeleton of a whole legacy document for a conversion to safetensors or
/// npz. Decodes nothing it does not have to: a tensor whose dense size exceeds the file
/// cannot be stored verbatim and is not walked (a sparse movie stays sparse); the others
/// are walked chunk by chunk, which for the zero-copy readers touches no data.
///
/// ```
/// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
/// let doc = tensorfmt::Document::open(&src)?;
/// let rec = tensorfmt::provenance::record(&doc)?;
/// assert!(rec.json.unwrap().contains("\"format\":\"pvp\""));
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn record(doc: &Document) -> Result<Recording> {
    // The skeleton is read from the mapping before any output exists, so no
    // `AtomicFile` sees a fault here: an input that shrank meanwhile must fail now,
    // or zeros read from it would be published with the output.
    let faults = tensorfmt_core::io::guarded_faults();
    let recording = record_mapped(doc)?;
    if tensorfmt_core::io::guarded_faults() != faults {
        return Err(Error::InputChanged {
            path: doc.path().display().to_string(),
        });
    }
    Ok(recording)
}

fn record_mapped(doc: &Document) -> Result<Recording> {
    if !is_legacy(doc.file_format()) {
        return Ok(Recording::default());
    }
    let Some(data) = doc.source_bytes() else {
        return Ok(Recording {
            json: None,
            note: Some(format!(
                "{}: only part of the file was read (frames or CSR export), so its header \
                 and layout are not kept in the metadata",
                doc.path().display()
            )),
        });
    };
    let base = data.as_ptr() as usize;
    let end = base + data.len();
    let mut tensors = Vec::new();
    let mut pieces: Vec<(u64, u64, usize, u64)> = Vec::new();
    // First the tensors whose chunks view the file: their places are known for free.
    for (index, info) in doc.tensors().into_iter().enumerate() {
        let dense = info.shape.byte_len(info.dtype.size()).ok();
        let mut cut = 0u64;
        if dense.is_some_and(|d| d <= data.len()) {
            let mut offset = 0u64;
            for chunk in doc.read_chunks(&info.name)? {
                let chunk = chunk?;
                let b = chunk.bytes();
                let p = b.as_ptr() as usize;
                // Zero copy (row-major, as chunks are by contract): the file's own bytes.
                let row_major = chunk.order() == Order::RowMajor || chunk.dims().len() < 2;
                if row_major && !b.is_empty() && p >= base && p + b.len() <= end {
                    pieces.push(((p - base) as u64, b.len() as u64, index, offset));
                    cut += b.len() as u64;
                }
                offset += b.len() as u64;
            }
        }
        tensors.push((info, cut, dense));
    }
    // Then the tensors their readers copied (unaligned, or between per-patch headers),
    // looked for only in the bytes the views left: a dense PVP movie's `time` is sought
    // in its frame headers, not in every page of the movie.
    pieces.sort_by_key(|p| p.0);
    let haystack = Haystack::new(data, &pieces);
    // Where the search for the next copied tensor starts: tensors come in file order.
    let mut cursor = 0usize;
    let mut column_major = vec![false; tensors.len()];
    for (index, (info, cut, dense)) in tensors.iter().enumerate() {
        if !(dense.is_some_and(|d| d > 0 && d <= haystack.bytes.len()) && *cut == 0) {
            continue;
        }
        // A wrong match is harmless while the values stay (the same bytes go back), and
        // such tensors are checked after splicing. Row-major first; then column-major
        // (primitiv, Fortran-minded writers).
        let t = doc.read_tensor(&info.name)?.to_order(Order::RowMajor)?;
        let elem = t.dtype().size();
        let hay = &haystack.bytes[..];
        let mut found = search(hay, t.bytes(), t.dims(), elem, cursor);
        if found.is_none() && t.dims().iter().filter(|&&d| d > 1).count() > 1 {
            let c = t.to_order(Order::ColumnMajor)?;
            let reversed: Vec<usize> = t.dims().iter().rev().copied().collect();
            found = search(hay, c.bytes(), &reversed, elem, cursor);
            if found.is_some() {
                column_major[index] = true;
            }
        }
        if let Some(found) = found {
            cursor = found.last().map_or(cursor, |p| (p.0 + p.1) as usize);
            for (at, len, off) in found {
                haystack.add_piece(at, len, off, index, &mut pieces);
            }
        }
    }
    // Two tensors viewing the same bytes: the first keeps the cut.
    pieces.sort_by_key(|p| p.0);
    let mut kept: Vec<(u64, u64, usize, u64)> = Vec::with_capacity(pieces.len());
    let mut dropped = vec![false; tensors.len()];
    for p in pieces {
        match kept.last() {
            Some(last) if p.0 < last.0 + last.1 => dropped[p.2] = true,
            _ => kept.push(p),
        }
    }
    let mut cut_by_tensor = vec![0u64; tensors.len()];
    for p in &kept {
        cut_by_tensor[p.2] += p.1;
    }
    let listed: Vec<Listed> = tensors
        .into_iter()
        .enumerate()
        .map(|(i, (info, _, dense))| Listed {
            column_major: column_major[i],
            covered: !dropped[i] && dense == Some(cut_by_tensor[i] as usize),
            name: info.name,
            dtype: info.dtype,
            shape: info.shape,
        })
        .collect();
    let cut_total: u64 = kept.iter().map(|p| p.1).sum();
    let skeleton_len = data.len() as u64 - cut_total;
    if skeleton_len > MAX_SKELETON as u64 {
        return Ok(Recording {
            json: None,
            note: Some(format!(
                "{}: {} MiB of the file lie outside its tensors (more than the {} MiB \
                 that travel in metadata), so converting back gives the same tensors, \
                 not the same file",
                doc.path().display(),
                skeleton_len >> 20,
                MAX_SKELETON >> 20
            )),
        });
    }
    let mut bytes = Vec::with_capacity(skeleton_len as usize);
    let mut at = 0usize;
    for p in &kept {
        bytes.extend_from_slice(&data[at..p.0 as usize]);
        at = (p.0 + p.1) as usize;
    }
    bytes.extend_from_slice(&data[at..]);
    let skeleton = Skeleton {
        format: doc.file_format(),
        kind: doc.kind(),
        size: data.len() as u64,
        tensors: listed,
        cuts: runs(&kept),
        bytes,
    };
    let header = Value::Object(
        doc.header()
            .iter()
            .map(|(k, v)| (k.clone(), field_json(v)))
            .collect(),
    );
    Ok(Recording {
        json: Some(to_json(&skeleton, header).to_string()),
        note: None,
    })
}

/// Where copied tensors are sought: the file's bytes outside the zero-copy pieces,
/// gathered into one buffer with the file offset of each run. The whole file (no copy)
/// when nothing was viewed, or when the rest is too large to gather.
struct Haystack<'a> {
    bytes: std::borrow::Cow<'a, [u8]>,
    /// `(offset in bytes, offset in the file, length)`, in order.
    runs: Vec<(u64, u64, u64)>,
}

impl<'a> Haystack<'a> {
    /// Gathering more than this would cost more than the search it narrows.
    const MAX_GATHERED: u64 = 64 << 20;

    fn new(data: &'a [u8], sorted_pieces: &[(u64, u64, usize, u64)]) -> Haystack<'a> {
        let whole = || Haystack {
            bytes: std::borrow::Cow::Borrowed(data),
            runs: vec![(0, 0, data.len() as u64)],
        };
        if sorted_pieces.is_empty() {
            return whole();
        }
        let mut runs = Vec::new();
        let (mut at, mut gathered) = (0u64, 0u64);
        for &(offset, len, _, _) in sorted_pieces {
            if offset > at {
                runs.push((gathered, at, offset - at));
                gathered += offset - at;
            }
            at = at.max(offset + len);
        }
        if (data.len() as u64) > at {
            runs.push((gathered, at, data.len() as u64 - at));
            gathered += data.len() as u64 - at;
        }
        if gathered > Self::MAX_GATHERED {
            return whole();
        }
        let mut bytes = Vec::with_capacity(gathered as usize);
        for &(_, file_offset, len) in &runs {
            bytes.extend_from_slice(&data[file_offset as usize..(file_offset + len) as usize]);
        }
        Haystack {
            bytes: std::borrow::Cow::Owned(bytes),
            runs,
        }
    }

    /// Adds a found piece (`len` bytes at `at` in the haystack, `tensor_offset` into
    /// the tensor) to `pieces` in file offsets, split where it spans two runs.
    fn add_piece(
        &self,
        at: u64,
        len: u64,
        tensor_offset: u64,
        tensor: usize,
        pieces: &mut Vec<(u64, u64, usize, u64)>,
    ) {
        let first = self.runs.partition_point(|r| r.0 + r.2 <= at);
        let (mut at, mut left, mut off) = (at, len, tensor_offset);
        for &(start, file_offset, run_len) in &self.runs[first..] {
            if left == 0 {
                break;
            }
            let take = left.min(start + run_len - at);
            pieces.push((file_offset + (at - start), take, tensor, off));
            at += take;
            off += take;
            left -= take;
        }
    }
}

/// Finds `bytes` (a row-major tensor of `dims`) in `file` from `from` on: whole, or
/// else as consecutive slices along axis 0, 1, ... (weights between patch headers),
/// each found after the previous one. Returns `(file offset, length, tensor offset)`
/// pieces. The scan per level is at most one pass over the file.
fn search(
    file: &[u8],
    bytes: &[u8],
    dims: &[usize],
    elem: usize,
    from: usize,
) -> Option<Vec<(u64, u64, u64)>> {
    const MAX_PIECES: usize = 1 << 16;
    for level in 0..dims.len().max(1) {
        let piece = dims.get(level..).map_or(1, |d| d.iter().product::<usize>()) * elem;
        if piece == 0 || bytes.len() / piece > MAX_PIECES {
            return None;
        }
        // Pieces of a few bytes match anywhere; not worth cutting.
        if piece < 16 && level > 0 {
            return None;
        }
        let mut at = from;
        let mut found = Vec::with_capacity(bytes.len() / piece);
        for (k, p) in bytes.chunks(piece).enumerate() {
            match memchr::memmem::find(file.get(at..)?, p) {
                Some(i) => {
                    found.push(((at + i) as u64, p.len() as u64, (k * piece) as u64));
                    at += i + p.len();
                }
                None => break,
            }
        }
        if found.len() * piece >= bytes.len() {
            return Some(found);
        }
    }
    None
}

/// Merges cut pieces (sorted by file offset) into regular runs.
fn runs(pieces: &[(u64, u64, usize, u64)]) -> Vec<Cut> {
    let mut out: Vec<Cut> = Vec::new();
    for &(file_offset, len, tensor, tensor_offset) in pieces {
        if let Some(c) = out.last_mut() {
            let same = c.tensor == tensor
                && c.len == len
                && tensor_offset == c.tensor_offset + c.count * len;
            if same && c.count == 1 && file_offset >= c.file_offset + len {
                c.stride = file_offset - c.file_offset;
                c.count = 2;
                continue;
            }
            if same && c.count > 1 && file_offset == c.file_offset + c.count * c.stride {
                c.count += 1;
                continue;
            }
        }
        out.push(Cut {
            file_offset,
            len,
            tensor,
            tensor_offset,
            count: 1,
            stride: len,
        });
    }
    out
}

fn to_json(s: &Skeleton, header: Value) -> Value {
    json!({
        "tensorfmt": VERSION,
        "format": s.format.name(),
        "kind": s.kind,
        "size": s.size,
        "header": header,
        "tensors": s.tensors.iter().map(|t| json!({
            "name": t.name,
            "dtype": t.dtype.name(),
            "shape": t.shape.dims(),
            "covered": t.covered,
            "order": if t.column_major { "F" } else { "C" },
        })).collect::<Vec<_>>(),
        "cuts": s.cuts.iter().map(|c| json!([
            c.file_offset, c.len, c.tensor, c.tensor_offset, c.count, c.stride
        ])).collect::<Vec<_>>(),
        "skeleton": base64_encode(&s.bytes),
    })
}

fn parse(text: &str) -> std::result::Result<Skeleton, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let u = |v: &Value, what: &str| v.as_u64().ok_or_else(|| format!("{what} is not a count"));
    if v.get("tensorfmt").and_then(Value::as_u64) != Some(VERSION) {
        return Err(format!("unknown layout version {}", v["tensorfmt"]));
    }
    let format: Format = v["format"]
        .as_str()
        .ok_or("no format")?
        .parse()
        .map_err(|e: Error| e.to_string())?;
    let mut tensors = Vec::new();
    for t in v["tensors"].as_array().ok_or("no tensor list")? {
        let dims = t["shape"]
            .as_array()
            .ok_or("a tensor without a shape")?
            .iter()
            .map(|d| u(d, "a dimension").map(|d| d as usize))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        tensors.push(Listed {
            name: t["name"].as_str().ok_or("a tensor without a name")?.into(),
            dtype: DType::from_name(t["dtype"].as_str().ok_or("a tensor without a dtype")?)
                .map_err(|e| e.to_string())?,
            shape: Shape::new(dims),
            covered: t["covered"].as_bool().unwrap_or(false),
            column_major: t["order"] == "F",
        });
    }
    let size = u(&v["size"], "size")?;
    let bytes = base64_decode(v["skeleton"].as_str().ok_or("no skeleton")?)?;
    let mut cuts = Vec::new();
    let mut cut_total = 0u64;
    let mut end = 0u64;
    for c in v["cuts"].as_array().ok_or("no cut list")? {
        let f = c
            .as_array()
            .filter(|f| f.len() == 6)
            .ok_or("a cut is not 6 numbers")?;
        let n: Vec<u64> = f
            .iter()
            .map(|x| u(x, "a cut field"))
            .collect::<std::result::Result<_, _>>()?;
        let cut = Cut {
            file_offset: n[0],
            len: n[1],
            tensor: n[2] as usize,
            tensor_offset: n[3],
            count: n[4],
            stride: n[5],
        };
        // Checked here so that splicing cannot run out of the skeleton or a tensor.
        let t = tensors.get(cut.tensor).ok_or("a cut names no tensor")?;
        let tensor_len = t
            .shape
            .byte_len(t.dtype.size())
            .map_err(|e| e.to_string())? as u64;
        let last = cut.count.checked_sub(1).ok_or("an empty cut")?;
        let ok = cut.len > 0
            && cut.stride >= cut.len
            && cut.file_offset >= end
            && cut
                .stride
                .checked_mul(last)
                .and_then(|s| s.checked_add(cut.file_offset))
                .and_then(|s| s.checked_add(cut.len))
                .is_some_and(|e| {
                    end = e;
                    e <= size
                })
            && cut
                .len
                .checked_mul(cut.count)
                .and_then(|l| l.checked_add(cut.tensor_offset))
                .is_some_and(|e| e <= tensor_len);
        if !ok {
            return Err("a cut runs outside the file or its tensor".into());
        }
        cut_total += cut.len * cut.count;
        cuts.push(cut);
    }
    if cut_total.checked_add(bytes.len() as u64) != Some(size) {
        return Err(format!(
            "skeleton of {} bytes and cuts of {cut_total} do not make {size}",
            bytes.len()
        ));
    }
    Ok(Skeleton {
        format,
        kind: v["kind"].as_str().unwrap_or_default().into(),
        size,
        tensors,
        cuts,
        bytes,
    })
}

/// The skeleton JSON a safetensors or npz document carries, if any.
///
/// ```
/// let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/model.safetensors");
/// let doc = tensorfmt::Document::open(&p)?;
/// assert!(tensorfmt::provenance::carried(&doc).is_none());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn carried(file: &dyn TensorFile) -> Option<String> {
    fn find(fields: &[(String, FieldValue)]) -> Option<String> {
        fields.iter().find_map(|(k, v)| match v {
            FieldValue::Text(s) if k == KEY => Some(s.clone()),
            FieldValue::Map(m) if k == "__metadata__" => find(m),
            _ => None,
        })
    }
    match file.format() {
        "safetensors" | "npz" => find(&file.header()),
        _ => None,
    }
}

/// Whether `options` ask for nothing beyond the target format (`skip_fsync` aside).
fn asks_nothing(target: &Target, options: &WriteOptions) -> bool {
    target.kind.is_none()
        && options.kind.is_none()
        && !options.hex
        && options.dtype.is_none()
        && options.extra.is_empty()
}

/// Rebuilds the original legacy file from a safetensors or npz document that carries
/// its skeleton, when `target` is that file's format and nothing else is asked. The
/// tensors must keep their names, dtypes and shapes (values may change); bytes the
/// original's reader computes rather than finds verbatim are compared after splicing.
///
/// ```
/// use tensorfmt::{provenance::{restore, Restored}, Document, Format, Target};
/// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
/// let dir = tempfile::tempdir()?;
/// let npz = dir.path().join("x.npz");
/// Document::open(&src)?.convert_to(&npz, Format::Npz)?;
/// let out = dir.path().join("x.pvp");
/// let done = restore(&Document::open(&npz)?, &out, &Target::new(Format::Pvp), &Default::default())?;
/// assert!(matches!(done, Restored::Written(_)));
/// assert_eq!(std::fs::read(&out)?, std::fs::read(&src)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn restore(
    doc: &Document,
    path: &Path,
    target: &Target,
    options: &WriteOptions,
) -> Result<Restored> {
    let Some(text) = carried(doc.file()) else {
        return Ok(Restored::NotRecorded);
    };
    if !asks_nothing(target, options) {
        return Ok(Restored::NotRecorded);
    }
    let skeleton = match parse(&text) {
        Ok(s) => s,
        Err(why) => {
            return Ok(Restored::Refused(format!(
                "the metadata {KEY:?} is not readable ({why}); written from the tensors alone"
            )))
        }
    };
    if skeleton.format != target.format {
        return Ok(Restored::NotRecorded);
    }
    let fallback = |why: String| {
        Ok(Restored::Refused(format!(
            "the original {} file's header and layout were not kept: {why}; written from \
             the tensors alone",
            skeleton.format
        )))
    };
    let infos = doc.tensors();
    for t in &skeleton.tensors {
        match infos.iter().find(|i| i.name == t.name) {
            None => return fallback(format!("tensor {:?} is missing", t.name)),
            Some(i) if i.dtype != t.dtype || i.shape != t.shape => {
                return fallback(format!(
                    "tensor {:?} is {} {}, the original's was {} {}",
                    t.name, i.dtype, i.shape, t.dtype, t.shape
                ))
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = infos
        .iter()
        .find(|i| !skeleton.tensors.iter().any(|t| t.name == i.name))
    {
        return fallback(format!(
            "tensor {:?} was not in the original file",
            extra.name
        ));
    }
    let mut out = tensorfmt_core::io::AtomicFile::create(path)?.sync(!options.skip_fsync);
    let mut loaded: HashMap<usize, Tensor> = HashMap::new();
    let mut written = 0u64;
    let mut from_skeleton = 0usize;
    let io = |e: std::io::Error| Error::io_op(path, "writing", e);
    for cut in &skeleton.cuts {
        if let std::collections::hash_map::Entry::Vacant(slot) = loaded.entry(cut.tensor) {
            let listed = &skeleton.tensors[cut.tensor];
            let order = if listed.column_major {
                Order::ColumnMajor
            } else {
                Order::RowMajor
            };
            slot.insert(doc.read_tensor(&listed.name)?.to_order(order)?);
        }
        let tensor = loaded[&cut.tensor].bytes();
        if (tensor.len() as u64) < cut.tensor_offset + cut.len * cut.count {
            let name = &skeleton.tensors[cut.tensor].name;
            return fallback(format!("tensor {name:?} holds fewer bytes than its shape"));
        }
        for (file_offset, tensor_offset) in cut.pieces() {
            let gap = (file_offset - written) as usize;
            out.write_all(&skeleton.bytes[from_skeleton..from_skeleton + gap])
                .map_err(io)?;
            from_skeleton += gap;
            let at = tensor_offset as usize;
            out.write_all(&tensor[at..at + cut.len as usize])
                .map_err(io)?;
            written = file_offset + cut.len;
        }
        // Tensors are read once each; cuts of one tensor are usually one run.
        if !skeleton
            .cuts
            .iter()
            .any(|c| c.tensor == cut.tensor && c.file_offset > cut.file_offset)
        {
            loaded.remove(&cut.tensor);
        }
    }
    out.write_all(&skeleton.bytes[from_skeleton..])
        .map_err(io)?;
    out.flush().map_err(io)?;
    // What the skeleton holds of a tensor (computed by the reader, not cut) must still
    // be what the document says.
    let uncovered: Vec<&Listed> = skeleton.tensors.iter().filter(|t| !t.covered).collect();
    if !uncovered.is_empty() {
        let data = tensorfmt_core::io::map_file(out.temp_path())?;
        let back = formats::open_bytes(data, skeleton.format, None, &Default::default());
        let back = match back {
            Ok(b) => b,
            Err(e) => return fallback(format!("the spliced file does not read back ({e})")),
        };
        for t in uncovered {
            let theirs = doc.read_tensor(&t.name)?.to_order(Order::RowMajor)?;
            let ours = back
                .read_tensor(&t.name)
                .and_then(|x| x.to_order(Order::RowMajor));
            if ours.as_ref().ok() != Some(&theirs) {
                return fallback(format!(
                    "tensor {:?} changed, and the {} format does not store it as plain bytes",
                    t.name, skeleton.format
                ));
            }
        }
    }
    out.commit()?;
    let report = formats::report(path, target.format, infos.len(), options)?;
    Ok(Restored::Written(report))
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(B64[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> std::result::Result<Vec<u8>, String> {
    let s = text.as_bytes();
    if s.len() % 4 != 0 {
        return Err("base64 length is not a multiple of 4".into());
    }
    let value = |c: u8| -> std::result::Result<u32, String> {
        B64.iter()
            .position(|&b| b == c)
            .map(|p| p as u32)
            .ok_or_else(|| format!("{:?} is not a base64 digit", c as char))
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (k, q) in s.chunks(4).enumerate() {
        let last = k + 1 == s.len() / 4;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err("misplaced base64 padding".into());
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length() {
        for n in 0..20usize {
            let data: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let s = base64_encode(&data);
            assert_eq!(base64_decode(&s).unwrap(), data, "{s}");
        }
        assert_eq!(base64_encode(b"Man"), "TWFu");
        assert_eq!(base64_encode(b"Ma"), "TWE=");
        assert_eq!(base64_encode(b"M"), "TQ==");
        assert!(base64_decode("TQ=").is_err());
        assert!(base64_decode("T===").is_err());
        assert!(base64_decode("TQ==TWFu").is_err());
        assert!(base64_decode("TW!u").is_err());
    }

    #[test]
    fn regular_pieces_merge_into_runs() {
        // Three frames of 16 bytes behind 8-byte frame headers, then another tensor.
        let pieces = [
            (88, 16, 0, 0),
            (112, 16, 0, 16),
            (136, 16, 0, 32),
            (200, 4, 1, 0),
        ];
        let r = runs(&pieces);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].count, r[0].stride), (3, 24));
        assert_eq!(
            r[0].pieces().collect::<Vec<_>>(),
            [(88, 0), (112, 16), (136, 32)]
        );
        assert_eq!((r[1].file_offset, r[1].count), (200, 1));
    }

    #[test]
    fn hostile_metadata_is_refused_not_trusted() {
        let good = Skeleton {
            format: Format::Pvp,
            kind: "k".into(),
            size: 12,
            tensors: vec![Listed {
                name: "v".into(),
                dtype: DType::F32,
                shape: Shape::new([1]),
                covered: true,
                column_major: false,
            }],
            cuts: vec![Cut {
                file_offset: 4,
                len: 4,
                tensor: 0,
                tensor_offset: 0,
                count: 1,
                stride: 4,
            }],
            bytes: vec![0; 8],
        };
        let text = to_json(&good, Value::Null).to_string();
        assert_eq!(parse(&text).unwrap(), good);
        let mut bad = good.clone();
        bad.cuts[0].tensor_offset = 1; // runs past the 4-byte tensor
        assert!(parse(&to_json(&bad, Value::Null).to_string()).is_err());
        let mut bad = good.clone();
        bad.cuts[0].count = u64::MAX; // overflow
        assert!(parse(&to_json(&bad, Value::Null).to_string()).is_err());
        let mut bad = good.clone();
        bad.size = 13; // bytes do not add up
        assert!(parse(&to_json(&bad, Value::Null).to_string()).is_err());
        let mut bad = good;
        bad.cuts[0].tensor = 5;
        assert!(parse(&to_json(&bad, Value::Null).to_string()).is_err());
        assert!(parse("{\"tensorfmt\": 99}").is_err());
        assert!(parse("not json").is_err());
    }
}
