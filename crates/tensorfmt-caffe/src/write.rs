//! Writers: BlobProto encoding (fields in number order, packed arrays, exactly what
//! Caffe's C++ protobuf emits), the layer/net rewriter that keeps every non-blob byte,
//! weights-only caffemodels built from tensors, mean files, BlobProtoVector and
//! SolverState.

use std::io::Write;
use std::path::Path;

use tensorfmt_core::io::AtomicFile;
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

fn put_bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a BlobProto's fields (no outer key): 1-4, 5, 6, 7, 8, 9, 10, 12.
pub(crate) fn encode_blob(b: &RawBlob, out: &mut Vec<u8>) {
    for (field, v) in [(1, b.num), (2, b.channels), (3, b.height), (4, b.width)] {
        if let Some(v) = v {
            put_key(out, field, VARINT);
            put_varint(out, int32_varint(v));
        }
    }
    for (field, bytes) in [(5, &b.data), (6, &b.diff)] {
        if !bytes.is_empty() {
            put_bytes_field(out, field, bytes);
        }
    }
    if let Some(dims) = &b.shape {
        put_key(out, 7, LEN);
        put_varint(out, shape_content_len(dims) as u64);
        if !dims.is_empty() {
            let packed: usize = dims.iter().map(|&d| varint_len(d as u64)).sum();
            put_key(out, 1, LEN);
            put_varint(out, packed as u64);
            for &d in dims {
                put_varint(out, d as u64);
            }
        }
    }
    for (field, bytes) in [(8, &b.double_data), (9, &b.double_diff)] {
        if !bytes.is_empty() {
            put_bytes_field(out, field, bytes);
        }
    }
    if let Some(t) = b.raw_data_type {
        put_key(out, 10, VARINT);
        put_varint(out, int32_varint(t));
    }
    if let Some(r) = &b.raw_data {
        put_bytes_field(out, 12, r);
    }
}

fn put_blob_field(out: &mut Vec<u8>, field: u32, b: &RawBlob) {
    put_key(out, field, LEN);
    put_varint(out, blob_len(b) as u64);
    encode_blob(b, out);
}

/// Emits a message's pieces with `blobs` in place of its Blob pieces. Blobs beyond the
/// original count follow the last original blob (or go where `blob_field` belongs in
/// field-number order); missing ones are dropped.
fn emit_pieces(
    file: &[u8],
    pieces: &[Piece],
    blobs: &[RawBlob],
    blob_field: u32,
    out: &mut Vec<u8>,
) {
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
                    extra
                        .iter()
                        .for_each(|b| put_blob_field(out, blob_field, b));
                    extra_done = true;
                }
                out.extend_from_slice(&file[range.clone()]);
            }
            Piece::Blob { field, index } => {
                if let Some(b) = own_blobs.get(*index) {
                    put_blob_field(out, *field, b);
                }
                seen += 1;
                if seen == originals && !extra_done {
                    extra.iter().for_each(|b| put_blob_field(out, *field, b));
                    extra_done = true;
                }
            }
            Piece::Nested { field, pieces } => {
                let mut inner = Vec::new();
                emit_pieces(file, pieces, blobs, 50, &mut inner);
                put_bytes_field(out, *field, &inner);
            }
        }
    }
    if !extra_done {
        extra
            .iter()
            .for_each(|b| put_blob_field(out, blob_field, b));
    }
}

/// A layer's message bytes (no outer key) with its current blobs.
pub(crate) fn encode_layer(file: &[u8], layer: &RawLayer) -> Vec<u8> {
    let mut out = Vec::new();
    match layer.version {
        NetVersion::V2 => emit_pieces(file, &layer.pieces, &layer.blobs, 7, &mut out),
        NetVersion::V1 => emit_pieces(file, &layer.pieces, &layer.blobs, 6, &mut out),
        // The blobs live in the nested V0 layer (field 50); emit_pieces hands them down.
        NetVersion::V0 => emit_pieces(file, &layer.pieces, &layer.blobs, 6, &mut out),
    }
    out
}

/// Serializes a net: every non-layer field and every non-blob layer field verbatim,
/// blobs re-encoded from [`RawLayer::blobs`]. Layers appended to `net.layers` after
/// reading are written at the end.
pub(crate) fn encode_net(net: &Model) -> Vec<u8> {
    let file: &[u8] = &net.file;
    let mut out = Vec::with_capacity(file.len());
    let mut written = vec![false; net.layers.len()];
    let put_layer = |i: usize, out: &mut Vec<u8>| {
        let l = &net.layers[i];
        let field = if l.version == NetVersion::V2 { 100 } else { 2 };
        put_bytes_field(out, field, &encode_layer(file, l));
    };
    for p in &net.pieces {
        match p {
            NetPiece::Raw(r) => out.extend_from_slice(&file[r.clone()]),
            NetPiece::Layer(i) if *i < net.layers.len() => {
                put_layer(*i, &mut out);
                written[*i] = true;
            }
            NetPiece::Layer(_) => {}
        }
    }
    for (i, done) in written.iter().enumerate() {
        if !done {
            put_layer(i, &mut out);
        }
    }
    out
}

/// Serializes a SolverState (fields 1-4 in number order).
pub(crate) fn encode_solver_state(s: &RawSolverState) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(v) = s.iter {
        put_key(&mut out, 1, VARINT);
        put_varint(&mut out, int32_varint(v));
    }
    if let Some(n) = &s.learned_net {
        put_bytes_field(&mut out, 2, n.as_bytes());
    }
    for b in &s.history {
        put_blob_field(&mut out, 3, b);
    }
    if let Some(v) = s.current_step {
        put_key(&mut out, 4, VARINT);
        put_varint(&mut out, int32_varint(v));
    }
    out
}

/// Serializes a BlobProtoVector.
pub(crate) fn encode_blob_vector(blobs: &[RawBlob]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in blobs {
        put_blob_field(&mut out, 1, b);
    }
    out
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
    if let Some(n) = name {
        put_bytes_field(&mut out, 1, n.as_bytes());
    }
    for l in layers {
        let mut body = Vec::new();
        put_bytes_field(&mut body, 1, l.name.as_bytes());
        if let Some(t) = &l.type_name {
            put_bytes_field(&mut body, 2, t.as_bytes());
        }
        for b in &l.blobs {
            put_blob_field(&mut body, 7, b);
        }
        put_bytes_field(&mut out, 100, &body);
    }
    out
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

/// A mean-file blob as `compute_image_mean` writes it: the legacy 4-D fields
/// (num, channels, height, width; a tensor of rank < 4 is padded with leading 1s) and
/// f32 `data`. Tensors of rank > 4 use the new-style `shape`.
pub fn mean_blob_from_tensor(t: &Tensor) -> Result<RawBlob> {
    let mut b = blob_from_tensor(t)?;
    if !b.double_data.is_empty() {
        b.data = Tensor::from_bytes(
            DType::F64,
            [b.double_data.len() / 8],
            Order::RowMajor,
            b.double_data.clone(),
        )?
        .cast(DType::F32)?
        .into_bytes();
        b.double_data = Default::default();
    }
    let dims = t.dims();
    if dims.len() <= 4 {
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

/// Writes bytes atomically.
pub(crate) fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)
        .map_err(|e| tensorfmt_core::Error::io(path, e))?;
    f.commit()?;
    Ok(())
}
