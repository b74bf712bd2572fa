//! Writers: BlobProto encoding (fields in number order, packed arrays, exactly what
//! Caffe's C++ protobuf emits), the layer/net rewriter that keeps every non-blob byte,
//! weights-only caffemodels built from tensors, mean files, BlobProtoVector and
//! SolverState.

use std::io::{self, Write};
use std::path::Path;

use tensorfmt_core::{DType, Order, Tensor};

use crate::error::{CaffeError, Result};
use crate::raw::{Model, NetPiece, NetVersion, Piece, RawBlob, RawLayer, RawSolverState};
use crate::wire::{put_key, put_varint, varint_len, LEN, VARINT};

fn int32_varint(v: i32) -> u64 {
    // protobuf int32: negative values are sign-extended to 64 bits.
    i64::from(v) as u64
}

fn shape_content_len(dims: &[i64]) -> usize {
    if dims.is_empty() {
        return 0;
    }
    let packed: usize = dims.iter().map(|&d| varint_len(d as u64)).sum();
    1 + varint_len(packed as u64) + packed
}

fn len_field(field: u32, len: usize) -> usize {
    varint_len(u64::from(field) << 3) + varint_len(len as u64) + len
}

/// Encoded length of a BlobProto.
pub(crate) fn blob_len(b: &RawBlob) -> usize {
    let mut n = 0;
    for v in [b.num, b.channels, b.height, b.width].into_iter().flatten() {
        n += 1 + varint_len(int32_varint(v));
    }
    for (field, bytes) in [
        (5, &b.data),
        (6, &b.diff),
        (8, &b.double_data),
        (9, &b.double_diff),
    ] {
        if !bytes.is_empty() {
            n += len_field(field, bytes.len());
        }
    }
    if let Some(dims) = &b.shape {
        n += len_field(7, shape_content_len(dims));
    }
    if let Some(t) = b.raw_data_type {
        n += 1 + varint_len(int32_varint(t));
    }
    if let Some(r) = &b.raw_data {
        n += len_field(12, r.len());
    }
    n
}

/// A key and a length, written in one call.
fn write_len_header<W: Write>(w: &mut W, field: u32, len: u64) -> io::Result<()> {
    let mut h = Vec::with_capacity(16);
    put_key(&mut h, field, LEN);
    put_varint(&mut h, len);
    w.write_all(&h)
}

/// A length-delimited field whose contents are written as they are (payloads are
/// never copied into an intermediate buffer).
fn write_bytes_field<W: Write>(w: &mut W, field: u32, bytes: &[u8]) -> io::Result<()> {
    write_len_header(w, field, bytes.len() as u64)?;
    w.write_all(bytes)
}

/// A writer that only counts: the length of a message before it is written.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes a BlobProto's fields (no outer key): 1-4, 5, 6, 7, 8, 9, 10, 12. The value
/// arrays go to `w` straight from their (usually mapped) bytes.
pub(crate) fn write_blob<W: Write>(b: &RawBlob, w: &mut W) -> io::Result<()> {
    let mut small = Vec::new();
    for (field, v) in [(1, b.num), (2, b.channels), (3, b.height), (4, b.width)] {
        if let Some(v) = v {
            put_key(&mut small, field, VARINT);
            put_varint(&mut small, int32_varint(v));
        }
    }
    w.write_all(&small)?;
    for (field, bytes) in [(5, &b.data), (6, &b.diff)] {
        if !bytes.is_empty() {
            write_bytes_field(w, field, bytes)?;
        }
    }
    if let Some(dims) = &b.shape {
        let mut shape = Vec::new();
        put_key(&mut shape, 7, LEN);
        put_varint(&mut shape, shape_content_len(dims) as u64);
        if !dims.is_empty() {
            let packed: usize = dims.iter().map(|&d| varint_len(d as u64)).sum();
            put_key(&mut shape, 1, LEN);
            put_varint(&mut shape, packed as u64);
            for &d in dims {
                put_varint(&mut shape, d as u64);
            }
        }
        w.write_all(&shape)?;
    }
    for (field, bytes) in [(8, &b.double_data), (9, &b.double_diff)] {
        if !bytes.is_empty() {
            write_bytes_field(w, field, bytes)?;
        }
    }
    if let Some(t) = b.raw_data_type {
        let mut small = Vec::new();
        put_key(&mut small, 10, VARINT);
        put_varint(&mut small, int32_varint(t));
        w.write_all(&small)?;
    }
    if let Some(r) = &b.raw_data {
        write_bytes_field(w, 12, r)?;
    }
    Ok(())
}

/// Appends a BlobProto's fields to a buffer.
pub(crate) fn encode_blob(b: &RawBlob, out: &mut Vec<u8>) {
    write_blob(b, out).expect("writing to a Vec cannot fail");
}

// A blob's encoding lives here, with the other writers: `raw` (the reading side)
// does not depend on `write`.
impl RawBlob {
    /// Serializes this blob as a BlobProto message (fields in number order, packed
    /// arrays), exactly as Caffe's C++ protobuf would.
    ///
    /// ```
    /// let b = tensorfmt_caffe::RawBlob::from_f32(&[2], &[1.0, 2.0]);
    /// assert_eq!(b.to_bytes().len(), b.encoded_len());
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        encode_blob(self, &mut out);
        out
    }

    /// [`RawBlob::to_bytes`] into any writer, the value arrays straight from their bytes.
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> Result<()> {
        Ok(write_blob(self, &mut { w })?)
    }

    /// The length of [`RawBlob::to_bytes`].
    pub fn encoded_len(&self) -> usize {
        blob_len(self)
    }
}

fn write_blob_field<W: Write>(w: &mut W, field: u32, b: &RawBlob) -> io::Result<()> {
    write_len_header(w, field, blob_len(b) as u64)?;
    write_blob(b, w)
}

/// Emits a message's pieces with `blobs` in place of its Blob pieces. Blobs beyond the
/// original count follow the last original blob (or go where `blob_field` belongs in
/// field-number order); missing ones are dropped.
fn emit_pieces<W: Write>(
    file: &[u8],
    pieces: &[Piece],
    blobs: &[RawBlob],
    blob_field: u32,
    out: &mut W,
) -> io::Result<()> {
    let originals = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Blob { .. }))
        .count();
    let extra = blobs.get(originals..).unwrap_or(&[]);
    // A V1 layer wrapping a V0 layer: the blobs belong to the nested message only.
    let has_nested = pieces.iter().any(|p| matches!(p, Piece::Nested { .. }));
    let mut extra_done = extra.is_empty() || has_nested;
    let mut seen = 0;
    let own_blobs: &[RawBlob] = if has_nested { &[] } else { blobs };
    for p in pieces {
        match p {
            Piece::Raw { field, range } => {
                if !extra_done && originals == 0 && *field > blob_field {
                    for b in extra {
                        write_blob_field(out, blob_field, b)?;
                    }
                    extra_done = true;
                }
                out.write_all(&file[range.clone()])?;
            }
            Piece::Blob { field, index } => {
                if let Some(b) = own_blobs.get(*index) {
                    write_blob_field(out, *field, b)?;
                }
                seen += 1;
                if seen == originals && !extra_done {
                    for b in extra {
                        write_blob_field(out, *field, b)?;
                    }
                    extra_done = true;
                }
            }
            Piece::Nested { field, pieces } => {
                let mut len = Counter(0);
                emit_pieces(file, pieces, blobs, 50, &mut len)?;
                write_len_header(out, *field, len.0)?;
                emit_pieces(file, pieces, blobs, 50, out)?;
            }
        }
    }
    if !extra_done {
        for b in extra {
            write_blob_field(out, blob_field, b)?;
        }
    }
    Ok(())
}

/// Writes a layer's message (no outer key) with its current blobs.
fn write_layer<W: Write>(file: &[u8], layer: &RawLayer, out: &mut W) -> io::Result<()> {
    // V0: the blobs live in the nested V0 layer (field 50); emit_pieces hands them down.
    let blob_field = if layer.version == NetVersion::V2 {
        7
    } else {
        6
    };
    emit_pieces(file, &layer.pieces, &layer.blobs, blob_field, out)
}

/// Writes a net: every non-layer field and every non-blob layer field verbatim, blobs
/// re-encoded from [`RawLayer::blobs`]. Layers appended to `net.layers` after reading
/// are written at the end. Each layer's length is counted first, so nothing is
/// buffered: memory stays flat whatever the model's size.
pub(crate) fn write_net<W: Write>(net: &Model, out: &mut W) -> io::Result<()> {
    let file: &[u8] = &net.file;
    let mut written = vec![false; net.layers.len()];
    let put_layer = |i: usize, out: &mut W| -> io::Result<()> {
        let l = &net.layers[i];
        let field = if l.version == NetVersion::V2 { 100 } else { 2 };
        let mut len = Counter(0);
        write_layer(file, l, &mut len)?;
        write_len_header(out, field, len.0)?;
        write_layer(file, l, out)
    };
    for p in &net.pieces {
        match p {
            NetPiece::Raw(r) => out.write_all(&file[r.clone()])?,
            NetPiece::Layer(i) if *i < net.layers.len() => {
                put_layer(*i, out)?;
                written[*i] = true;
            }
            NetPiece::Layer(_) => {}
        }
    }
    for (i, done) in written.iter().enumerate() {
        if !done {
            put_layer(i, out)?;
        }
    }
    Ok(())
}

/// Serializes a net into a buffer (see [`write_net`]).
pub(crate) fn encode_net(net: &Model) -> Vec<u8> {
    let mut out = Vec::with_capacity(net.file.len());
    write_net(net, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// Writes a SolverState (fields 1-4 in number order).
pub(crate) fn write_solver_state<W: Write>(s: &RawSolverState, w: &mut W) -> io::Result<()> {
    if let Some(v) = s.iter {
        let mut small = Vec::new();
        put_key(&mut small, 1, VARINT);
        put_varint(&mut small, int32_varint(v));
        w.write_all(&small)?;
    }
    if let Some(n) = &s.learned_net {
        write_bytes_field(w, 2, n.as_bytes())?;
    }
    for b in &s.history {
        write_blob_field(w, 3, b)?;
    }
    if let Some(v) = s.current_step {
        let mut small = Vec::new();
        put_key(&mut small, 4, VARINT);
        put_varint(&mut small, int32_varint(v));
        w.write_all(&small)?;
    }
    Ok(())
}

/// Serializes a SolverState into a buffer.
pub(crate) fn encode_solver_state(s: &RawSolverState) -> Vec<u8> {
    let mut out = Vec::new();
    write_solver_state(s, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// Writes a BlobProtoVector.
pub(crate) fn write_blob_vector<W: Write>(blobs: &[RawBlob], w: &mut W) -> io::Result<()> {
    for b in blobs {
        write_blob_field(w, 1, b)?;
    }
    Ok(())
}

/// One layer of a weights-only caffemodel.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightsLayer {
    /// Layer name.
    pub name: String,
    /// V2 type string, when known (`Convolution`, `InnerProduct`, ...).
    pub type_name: Option<String>,
    /// The blobs in order.
    pub blobs: Vec<RawBlob>,
}

/// Encodes a weights-only V2 caffemodel: `name` (if any), then one `layer` per entry
/// with its name, type (when known) and blobs. Caffe's `CopyTrainedLayersFrom` matches
/// layers by name, so such a file loads into a full net definition.
///
/// ```
/// use tensorfmt_caffe::{encode_weights_model, read_model, RawBlob, WeightsLayer};
/// let bytes = encode_weights_model(Some("tiny"), &[WeightsLayer {
///     name: "ip".into(),
///     type_name: Some("InnerProduct".into()),
///     blobs: vec![RawBlob::from_f32(&[1, 2], &[0.5, 1.5])],
/// }]);
/// let model = read_model(bytes.into())?;
/// assert_eq!(model.layer("ip").unwrap().type_name, "InnerProduct");
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
pub fn encode_weights_model(name: Option<&str>, layers: &[WeightsLayer]) -> Vec<u8> {
    let mut out = Vec::new();
    write_weights_model(&mut out, name, layers).expect("writing to a Vec cannot fail");
    out
}

/// [`encode_weights_model`] into any writer, blob payloads written straight from their
/// bytes (no intermediate buffer of the file).
///
/// ```
/// use tensorfmt_caffe::{encode_weights_model, write_weights_model, RawBlob, WeightsLayer};
/// let layers = [WeightsLayer { name: "ip".into(), type_name: None,
///                              blobs: vec![RawBlob::from_f32(&[2], &[1.0, 2.0])] }];
/// let mut out = Vec::new();
/// write_weights_model(&mut out, Some("n"), &layers)?;
/// assert_eq!(out, encode_weights_model(Some("n"), &layers));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_weights_model<W: Write>(
    w: &mut W,
    name: Option<&str>,
    layers: &[WeightsLayer],
) -> io::Result<()> {
    if let Some(n) = name {
        write_bytes_field(w, 1, n.as_bytes())?;
    }
    let body = |l: &WeightsLayer, w: &mut dyn Write| -> io::Result<()> {
        let mut w = w;
        write_bytes_field(&mut w, 1, l.name.as_bytes())?;
        if let Some(t) = &l.type_name {
            write_bytes_field(&mut w, 2, t.as_bytes())?;
        }
        for b in &l.blobs {
            write_blob_field(&mut w, 7, b)?;
        }
        Ok(())
    };
    for l in layers {
        let mut len = Counter(0);
        body(l, &mut len)?;
        write_len_header(w, 100, len.0)?;
        body(l, w)?;
    }
    Ok(())
}

/// A new-style blob from a tensor, as Caffe's ToProto writes it: `shape` (absent for a
/// 0-axis tensor) plus `data` for f32 or `double_data` for f64; other dtypes are
/// converted to f32.
pub fn blob_from_tensor(t: &Tensor) -> Result<RawBlob> {
    let t = t.to_order(Order::RowMajor)?;
    let shape: Vec<i64> = t.dims().iter().map(|&d| d as i64).collect();
    crate::raw::check_shape(&shape, "tensor")?;
    let mut b = RawBlob {
        shape: (!shape.is_empty()).then_some(shape),
        ..RawBlob::default()
    };
    match t.dtype() {
        DType::F64 => b.double_data = t.into_bytes(),
        DType::F32 => b.data = t.into_bytes(),
        _ => b.data = t.cast(DType::F32)?.into_bytes(),
    }
    Ok(b)
}

/// How a blob's shape is written: Caffe's legacy 4-D fields or the N-D `shape` field.
/// Readers (Caffe's FromProto, pycaffe's `blobproto_to_array`) give the two different
/// shapes: legacy `(1, 1, 1, 3)` is `(1, 1, 1, 3)` to pycaffe, `shape { dim: 3 }` is
/// `(3,)`, so a file written anew keeps the convention of the one it replaces
/// (the `blob_shape` setting, [`crate::SETTINGS`]).
///
/// ```
/// use tensorfmt_caffe::{mean_blob_from_tensor, ShapeFields};
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], Order::RowMajor)?;
/// let legacy = mean_blob_from_tensor(&t)?;
/// assert_eq!((legacy.num, legacy.width, &legacy.shape), (Some(1), Some(3), &None));
/// assert_eq!(tensorfmt_caffe::ShapeFields::of(&legacy), ShapeFields::Legacy);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeFields {
    /// `num`, `channels`, `height`, `width` (a tensor of rank < 4 padded with leading
    /// 1s); a tensor of rank > 4 has no such form and is written with `shape`.
    Legacy,
    /// The N-D `shape` field (absent for a 0-axis tensor), as Caffe's ToProto writes.
    Shape,
}

impl ShapeFields {
    /// The convention a blob was written in.
    pub fn of(b: &RawBlob) -> ShapeFields {
        if b.has_legacy() {
            ShapeFields::Legacy
        } else {
            ShapeFields::Shape
        }
    }

    /// The `blob_shape` setting's word for it.
    pub fn name(self) -> &'static str {
        match self {
            ShapeFields::Legacy => "legacy",
            ShapeFields::Shape => "shape",
        }
    }
}

/// [`blob_from_tensor`] with its shape written in the given convention.
pub(crate) fn blob_with(t: &Tensor, fields: ShapeFields) -> Result<RawBlob> {
    let mut b = blob_from_tensor(t)?;
    let dims = t.dims();
    if fields == ShapeFields::Legacy && dims.len() <= 4 {
        let mut legacy = [1i32; 4];
        for (slot, &d) in legacy[4 - dims.len()..].iter_mut().zip(dims) {
            *slot =
                i32::try_from(d).map_err(|_| CaffeError::Write(format!("dim {d} exceeds i32")))?;
        }
        b.shape = None;
        b.num = Some(legacy[0]);
        b.channels = Some(legacy[1]);
        b.height = Some(legacy[2]);
        b.width = Some(legacy[3]);
    }
    Ok(b)
}

/// A mean-file blob as `compute_image_mean` writes it: the legacy 4-D fields
/// (num, channels, height, width; a tensor of rank < 4 is padded with leading 1s) and
/// f32 `data` (a float64 tensor is narrowed). Tensors of rank > 4 use the new-style
/// `shape`. (`save_tensors` stores `double_data` when f64 is asked for.)
pub fn mean_blob_from_tensor(t: &Tensor) -> Result<RawBlob> {
    let t = if t.dtype() == DType::F64 {
        t.cast(DType::F32)?
    } else {
        t.clone()
    };
    blob_with(&t, ShapeFields::Legacy)
}

/// Writes a file atomically: `write` fills a temporary file that replaces `path` only
/// when it succeeds; on any failure the old file (or none) stays under `path`.
pub(crate) fn write_path(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    tensorfmt_core::io::write_atomic(path, |f| write(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt_core::testing::PassThenFail;

    /// The path-level writers (`Model::save`, `save_tensors`) are `write_path` around a
    /// streaming writer: a failure after any number of bytes keeps the old file and
    /// leaves no temporary file; with no old file, none appears.
    #[test]
    fn failing_path_writes_keep_the_old_file() {
        let layers = [WeightsLayer {
            name: "conv".into(),
            type_name: Some("Convolution".into()),
            blobs: vec![
                RawBlob::from_f32(&[4, 3], &[0.5; 12]),
                RawBlob::from_f32(&[4], &[1.0; 4]),
            ],
        }];
        let bytes = encode_weights_model(Some("net"), &layers);
        let model = crate::read_model(bytes.clone().into()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.caffemodel");
        let fresh = dir.path().join("new.caffemodel");
        std::fs::write(&p, b"old contents").unwrap();
        for n in 0..bytes.len() {
            let r = write_path(&p, |w| model.write_to(&mut PassThenFail::new(w, n)));
            assert!(r.is_err(), "{n}");
            assert_eq!(std::fs::read(&p).unwrap(), b"old contents", "{n}");
            let r = write_path(&fresh, |w| {
                write_weights_model(&mut PassThenFail::new(w, n), Some("net"), &layers)?;
                Ok(())
            });
            assert!(r.is_err(), "{n}");
            assert!(!fresh.exists(), "{n}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{n}");
        }
        model.save(&p).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), bytes);
    }
}
