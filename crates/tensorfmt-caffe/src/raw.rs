//! Raw on-disk structures and their hand-written wire parsers: [`RawBlob`] (a BlobProto
//! whose float/double arrays stay little-endian byte slices of the file), [`RawLayer`]
//! (a V2, V1 or V0 layer: name, type, blobs, and every other field kept as raw byte
//! ranges for byte-exact rewriting), [`Model`], [`RawSolverState`].
//!
//! Packed payloads are never decoded element by element: a single packed run is a
//! zero-copy [`Bytes`] slice of the file; repeated runs and the legal unpacked encoding
//! (one key per value) are gathered into one owned buffer.

use std::ops::Range;

use bytes::Bytes;
use tensorfmt_core::{DType, Limits, Order, Tensor};

use crate::error::{CaffeError, Result};
use crate::wire::{expect_wire, Cursor, Key, FIXED32, FIXED64, LEN, VARINT};

/// Caffe's `kMaxBlobAxes`.
pub const MAX_BLOB_AXES: usize = 32;

/// What one parse may still allocate and scan: the [`Limits`] of the read plus the
/// number of items (layers, blobs) seen so far.
#[derive(Debug)]
pub(crate) struct Budget {
    pub limits: Limits,
    items: u64,
}

impl Budget {
    pub fn new(limits: Limits) -> Budget {
        Budget { limits, items: 0 }
    }

    fn limit(path: &str, offset: usize, what: &'static str, value: u64, limit: u64) -> CaffeError {
        CaffeError::Limit {
            path: path.to_string(),
            offset: offset as u64,
            what,
            value,
            limit,
        }
    }

    /// Counts one more layer or blob against `max_items`.
    pub fn item(&mut self, path: &str, offset: usize) -> Result<()> {
        self.items += 1;
        if self.items > self.limits.max_items {
            return Err(Self::limit(
                path,
                offset,
                "item count",
                self.items,
                self.limits.max_items,
            ));
        }
        Ok(())
    }

    /// Checks an owned buffer of `bytes` against `max_alloc` before it is allocated.
    pub fn alloc(&self, bytes: u64, path: &str, offset: usize) -> Result<()> {
        if bytes > self.limits.max_alloc {
            return Err(Self::limit(
                path,
                offset,
                "allocation",
                bytes,
                self.limits.max_alloc,
            ));
        }
        Ok(())
    }

    /// Checks a blob's number of axes against `max_rank`.
    pub fn rank(&self, rank: u64, path: &str, offset: usize) -> Result<()> {
        if rank > self.limits.max_rank as u64 {
            return Err(Self::limit(
                path,
                offset,
                "rank",
                rank,
                self.limits.max_rank as u64,
            ));
        }
        Ok(())
    }
}

/// Little-endian values gathered from one repeated float or double field.
#[derive(Default)]
struct ValuesBuilder {
    first: Option<Bytes>,
    owned: Option<Vec<u8>>,
}

impl ValuesBuilder {
    fn len(&self) -> usize {
        match (&self.owned, &self.first) {
            (Some(o), _) => o.len(),
            (None, Some(f)) => f.len(),
            (None, None) => 0,
        }
    }

    /// The owned buffer after `extra` more bytes, checked against `max_alloc` first.
    fn grow(
        &mut self,
        extra: usize,
        budget: &Budget,
        path: &str,
        at: usize,
    ) -> Result<&mut Vec<u8>> {
        let total = self.len() as u64 + extra as u64;
        budget.alloc(total, path, at)?;
        if self.owned.is_none() {
            let f = self.first.take().unwrap_or_default();
            let mut o = Vec::new();
            o.try_reserve(total as usize).map_err(|_| {
                Budget::limit(path, at, "allocation", total, budget.limits.max_alloc)
            })?;
            o.extend_from_slice(&f);
            self.owned = Some(o);
        }
        Ok(self.owned.as_mut().expect("set above"))
    }

    /// A packed run: kept as a zero-copy slice when it is the only one.
    fn push_packed(&mut self, run: Bytes, budget: &Budget, path: &str, at: usize) -> Result<()> {
        if self.owned.is_none() && self.first.is_none() {
            self.first = Some(run);
            return Ok(());
        }
        self.grow(run.len(), budget, path, at)?
            .extend_from_slice(&run);
        Ok(())
    }

    /// One unpacked value (gathered into the owned buffer).
    fn push_one(&mut self, value: &[u8], budget: &Budget, path: &str, at: usize) -> Result<()> {
        self.grow(value.len(), budget, path, at)?
            .extend_from_slice(value);
        Ok(())
    }

    fn finish(self) -> Bytes {
        match (self.owned, self.first) {
            (Some(o), _) => Bytes::from(o),
            (None, Some(f)) => f,
            (None, None) => Bytes::new(),
        }
    }
}

/// Where a BlobProto's values come from, for error messages and dtype selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSource {
    /// `double_data` (field 8), f64.
    DoubleData,
    /// `data` (field 5), f32.
    Data,
    /// `raw_data` (field 12) with `raw_data_type` FLOAT16, f16.
    RawF16,
    /// `raw_data` with `raw_data_type` FLOAT, f32.
    RawF32,
    /// `raw_data` with `raw_data_type` DOUBLE, f64.
    RawF64,
}

impl ValueSource {
    /// The element type of the values.
    pub fn dtype(self) -> DType {
        match self {
            ValueSource::DoubleData | ValueSource::RawF64 => DType::F64,
            ValueSource::Data | ValueSource::RawF32 => DType::F32,
            ValueSource::RawF16 => DType::F16,
        }
    }

    /// Field name, as in caffe.proto.
    pub fn field(self) -> &'static str {
        match self {
            ValueSource::DoubleData => "double_data",
            ValueSource::Data => "data",
            _ => "raw_data",
        }
    }
}

/// One BlobProto as stored: every field of the schema, arrays as little-endian bytes.
///
/// Empty arrays mean "absent" (repeated fields have no presence in protobuf); the
/// legacy dims and `shape` keep their presence, which the shape rules depend on.
///
/// ```
/// use tensorfmt_caffe::RawBlob;
/// let b = RawBlob::from_f32(&[4], &[1.0, 2.0, 3.0, 4.0]);
/// assert_eq!(b.shape_dims("blob")?, vec![4]);
/// assert_eq!(b.data_f32(), vec![1.0, 2.0, 3.0, 4.0]);
/// let again = tensorfmt_caffe::read_blob_proto(b.to_bytes().into())?;
/// assert_eq!(again, b);
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawBlob {
    /// Legacy `num` (field 1).
    pub num: Option<i32>,
    /// Legacy `channels` (field 2).
    pub channels: Option<i32>,
    /// Legacy `height` (field 3).
    pub height: Option<i32>,
    /// Legacy `width` (field 4).
    pub width: Option<i32>,
    /// `shape.dim` (field 7); `None` when `shape` is absent.
    pub shape: Option<Vec<i64>>,
    /// `data` (field 5), f32 little-endian.
    pub data: Bytes,
    /// `diff` (field 6), f32 little-endian.
    pub diff: Bytes,
    /// `double_data` (field 8), f64 little-endian.
    pub double_data: Bytes,
    /// `double_diff` (field 9), f64 little-endian.
    pub double_diff: Bytes,
    /// `raw_data_type` (field 10, NVIDIA/OpenCV extension).
    pub raw_data_type: Option<i32>,
    /// `raw_data` (field 12, NVIDIA/OpenCV extension).
    pub raw_data: Option<Bytes>,
}

/// `raw_data_type` values (OpenCV's `BlobProto.Type`).
pub mod raw_type {
    /// f64.
    pub const DOUBLE: i32 = 0;
    /// f32.
    pub const FLOAT: i32 = 1;
    /// IEEE half.
    pub const FLOAT16: i32 = 2;
}

fn f32_bytes(values: &[f32]) -> Bytes {
    Bytes::from(bytemuck::cast_slice::<f32, u8>(values).to_vec())
}

/// Decodes little-endian f32 bytes into an owned vector in one bulk copy.
pub fn decode_f32(bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / 4;
    let mut out = vec![0f32; n];
    bytemuck::cast_slice_mut::<f32, u8>(&mut out).copy_from_slice(&bytes[..n * 4]);
    out
}

/// Decodes little-endian f64 bytes into an owned vector in one bulk copy.
pub fn decode_f64(bytes: &[u8]) -> Vec<f64> {
    let n = bytes.len() / 8;
    let mut out = vec![0f64; n];
    bytemuck::cast_slice_mut::<f64, u8>(&mut out).copy_from_slice(&bytes[..n * 8]);
    out
}

impl RawBlob {
    /// A new-style blob (`shape` + `data`), as Caffe's ToProto writes an f32 blob.
    pub fn from_f32(shape: &[i64], values: &[f32]) -> RawBlob {
        RawBlob {
            shape: (!shape.is_empty()).then(|| shape.to_vec()),
            data: f32_bytes(values),
            ..RawBlob::default()
        }
    }

    /// Whether any of the legacy num/channels/height/width fields is present.
    pub fn has_legacy(&self) -> bool {
        self.num.is_some()
            || self.channels.is_some()
            || self.height.is_some()
            || self.width.is_some()
    }

    /// The blob shape by Caffe's FromProto rules (§4.2): the legacy fields, if any is
    /// present, give exactly 4 axes (absent ones 0) and win over `shape`; otherwise
    /// `shape.dim`; otherwise no axes. Checked like Caffe's Reshape, and stricter: at
    /// most 32 axes, no negative dim, every dim within i32, count at most i32::MAX.
    pub fn shape_dims(&self, path: &str) -> Result<Vec<usize>> {
        let dims: Vec<i64> = if self.has_legacy() {
            [self.num, self.channels, self.height, self.width]
                .iter()
                .map(|d| i64::from(d.unwrap_or(0)))
                .collect()
        } else {
            self.shape.clone().unwrap_or_default()
        };
        check_shape(&dims, path)
    }

    /// The shape modern Caffe would give a legacy blob: `(1, 1, M, N)` becomes `[M, N]`
    /// and `(1, 1, 1, N)` becomes `[N]` (InnerProduct weights and biases of V1 nets);
    /// other legacy shapes and new-style shapes are returned as [`RawBlob::shape_dims`].
    pub fn legacy_squeezed_shape(&self, path: &str) -> Result<Vec<usize>> {
        let dims = self.shape_dims(path)?;
        if !self.has_legacy() {
            return Ok(dims);
        }
        Ok(match dims[..] {
            [1, 1, 1, n] => vec![n],
            [1, 1, m, n] => vec![m, n],
            _ => dims,
        })
    }

    /// Which array holds the values: `double_data` wins over `data` (Caffe); a blob with
    /// neither but with `raw_data` uses that, as its `raw_data_type` says: FLOAT,
    /// FLOAT16 or DOUBLE. INT, UINT, a value outside the enum or no type at all
    /// (protobuf's default, DOUBLE, which no writer means) are refused: no reader
    /// defines their element width (OpenCV: "Unexpected blob data type"), and reading
    /// their bytes as floats gave 1.4e-45 for the integer 1.
    pub fn value_source(&self) -> Result<ValueSource> {
        self.source_at("BlobProto")
    }

    /// [`RawBlob::value_source`], errors naming the blob at `path`.
    fn source_at(&self, path: &str) -> Result<ValueSource> {
        if !self.double_data.is_empty() {
            Ok(ValueSource::DoubleData)
        } else if !self.data.is_empty() || self.raw_data.is_none() {
            Ok(ValueSource::Data)
        } else {
            match self.raw_data_type {
                Some(raw_type::FLOAT16) => Ok(ValueSource::RawF16),
                Some(raw_type::DOUBLE) => Ok(ValueSource::RawF64),
                Some(raw_type::FLOAT) => Ok(ValueSource::RawF32),
                t => Err(CaffeError::RawType {
                    path: path.to_string(),
                    value: match t {
                        Some(3) => "INT (3)".into(),
                        Some(4) => "UINT (4)".into(),
                        Some(v) => v.to_string(),
                        None => "absent".into(),
                    },
                }),
            }
        }
    }

    /// The little-endian bytes of the values (see [`RawBlob::value_source`]).
    pub fn value_bytes(&self) -> Result<&Bytes> {
        self.bytes_of(self.value_source()?)
    }

    fn bytes_of(&self, src: ValueSource) -> Result<&Bytes> {
        Ok(match src {
            ValueSource::DoubleData => &self.double_data,
            ValueSource::Data => &self.data,
            _ => self.raw_data.as_ref().expect("raw source implies raw_data"),
        })
    }

    /// The values as a row-major tensor with `shape` (zero copy from the file bytes),
    /// after checking the exact count (Caffe: "data length must equal count").
    pub fn tensor_with_shape(&self, shape: Vec<usize>, path: &str) -> Result<Tensor> {
        let src = self.source_at(path)?;
        let dtype = src.dtype();
        let bytes = self.bytes_of(src)?;
        let expected = shape.iter().product::<usize>() as u64;
        let actual = (bytes.len() / dtype.size()) as u64;
        if expected != actual || bytes.len() % dtype.size() != 0 {
            return Err(CaffeError::Count {
                path: path.to_string(),
                field: src.field(),
                shape: shape_string(&shape),
                expected,
                actual,
            });
        }
        Ok(Tensor::from_bytes(
            dtype,
            shape,
            Order::RowMajor,
            bytes.clone(),
        )?)
    }

    /// The values as a tensor with Caffe's shape ([`RawBlob::shape_dims`]).
    pub fn tensor(&self, path: &str) -> Result<Tensor> {
        let shape = self.shape_dims(path)?;
        self.tensor_with_shape(shape, path)
    }

    /// The diff as a tensor (`double_diff` wins over `diff`), `None` when absent; its
    /// length must equal the count.
    pub fn diff_tensor(&self, path: &str) -> Result<Option<Tensor>> {
        let (bytes, dtype, field) = if !self.double_diff.is_empty() {
            (&self.double_diff, DType::F64, "double_diff")
        } else if !self.diff.is_empty() {
            (&self.diff, DType::F32, "diff")
        } else {
            return Ok(None);
        };
        let shape = self.shape_dims(path)?;
        let expected = shape.iter().product::<usize>() as u64;
        let actual = (bytes.len() / dtype.size()) as u64;
        if expected != actual {
            return Err(CaffeError::Count {
                path: path.to_string(),
                field,
                shape: shape_string(&shape),
                expected,
                actual,
            });
        }
        Ok(Some(Tensor::from_bytes(
            dtype,
            shape,
            Order::RowMajor,
            bytes.clone(),
        )?))
    }

    /// `data` decoded to f32 in one bulk copy (no count check).
    pub fn data_f32(&self) -> Vec<f32> {
        decode_f32(&self.data)
    }

    /// `double_data` decoded to f64 in one bulk copy (no count check).
    pub fn double_data_f64(&self) -> Vec<f64> {
        decode_f64(&self.double_data)
    }
}

/// Caffe's `shape_string`: each dim followed by a space, then `(count)`.
///
/// ```
/// assert_eq!(tensorfmt_caffe::shape_string(&[20, 1, 5, 5]), "20 1 5 5 (500)");
/// assert_eq!(tensorfmt_caffe::shape_string(&[]), "(1)");
/// ```
pub fn shape_string(dims: &[usize]) -> String {
    let mut s = String::new();
    let mut count: u128 = 1;
    for d in dims {
        s.push_str(&format!("{d} "));
        count = count.saturating_mul(*d as u128);
    }
    s.push_str(&format!("({count})"));
    s
}

/// Caffe's Reshape checks, stricter where §4.9 says so.
pub(crate) fn check_shape(dims: &[i64], path: &str) -> Result<Vec<usize>> {
    let err = |reason: String| CaffeError::Shape {
        path: path.to_string(),
        reason,
    };
    if dims.len() > MAX_BLOB_AXES {
        return Err(err(format!(
            "{} axes, at most {MAX_BLOB_AXES} allowed",
            dims.len()
        )));
    }
    let mut count: i64 = 1;
    let mut out = Vec::with_capacity(dims.len());
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 {
            return Err(err(format!("dim {i} is negative ({d})")));
        }
        if d > i64::from(i32::MAX) {
            return Err(err(format!("dim {i} ({d}) does not fit in a 32-bit int")));
        }
        if count != 0 {
            if d > i64::from(i32::MAX) / count {
                return Err(err("blob size exceeds INT_MAX".into()));
            }
            count *= d;
        }
        out.push(d as usize);
    }
    Ok(out)
}

fn int32(v: u64) -> i32 {
    // protobuf int32: the low 32 bits of the (sign-extended) varint.
    v as u32 as i32
}

/// Parses one BlobProto from `file[range]`.
pub(crate) fn parse_blob(
    file: &Bytes,
    range: Range<usize>,
    path: &str,
    budget: &mut Budget,
) -> Result<RawBlob> {
    let mut c = Cursor::new(file, range.start, range.end);
    let mut rank: u64 = 0;
    let mut b = RawBlob::default();
    let mut data = ValuesBuilder::default();
    let mut diff = ValuesBuilder::default();
    let mut ddata = ValuesBuilder::default();
    let mut ddiff = ValuesBuilder::default();
    while let Some(k) = c.key(path)? {
        match k.field {
            1..=4 => {
                expect_wire(k, &[VARINT], "varint (int32)", path)?;
                let v = Some(int32(c.varint(path)?));
                match k.field {
                    1 => b.num = v,
                    2 => b.channels = v,
                    3 => b.height = v,
                    _ => b.width = v,
                }
            }
            5 | 6 => {
                let target = if k.field == 5 { &mut data } else { &mut diff };
                repeated_fixed(&mut c, k, file, 4, target, path, budget)?;
            }
            8 | 9 => {
                let target = if k.field == 8 { &mut ddata } else { &mut ddiff };
                repeated_fixed(&mut c, k, file, 8, target, path, budget)?;
            }
            7 => {
                expect_wire(k, &[LEN], "length-delimited (BlobShape)", path)?;
                let r = c.len_delimited(path)?;
                let dims = b.shape.get_or_insert_with(Vec::new);
                rank += parse_blob_shape(file, r, dims, path)?;
            }
            #[cfg(feature = "raw-data")]
            10 => {
                expect_wire(k, &[VARINT], "varint (enum)", path)?;
                b.raw_data_type = Some(int32(c.varint(path)?));
            }
            #[cfg(feature = "raw-data")]
            12 => {
                expect_wire(k, &[LEN], "length-delimited (bytes)", path)?;
                let r = c.len_delimited(path)?;
                b.raw_data = Some(file.slice(r));
            }
            _ => c.skip(k, path, 0)?,
        }
    }
    // Caffe's own cap (32 axes) is a shape error found later; `max_rank` is checked
    // here, before anything is built from the shape.
    let rank = if b.has_legacy() { 4 } else { rank };
    if rank <= MAX_BLOB_AXES as u64 {
        budget.rank(rank, path, range.start)?;
    }
    b.data = data.finish();
    b.diff = diff.finish();
    b.double_data = ddata.finish();
    b.double_diff = ddiff.finish();
    Ok(b)
}

/// A packed run (wire type 2) or one unpacked value (wire type 5 / 1).
fn repeated_fixed(
    c: &mut Cursor<'_>,
    k: Key,
    file: &Bytes,
    size: usize,
    target: &mut ValuesBuilder,
    path: &str,
    budget: &Budget,
) -> Result<()> {
    let single = if size == 4 { FIXED32 } else { FIXED64 };
    let expected = if size == 4 {
        "length-delimited (packed) or fixed32"
    } else {
        "length-delimited (packed) or fixed64"
    };
    expect_wire(k, &[LEN, single], expected, path)?;
    if k.wire_type == LEN {
        let r = c.len_delimited(path)?;
        if r.len() % size != 0 {
            return Err(CaffeError::Wire {
                path: path.to_string(),
                offset: r.start as u64,
                reason: format!(
                    "packed field {} has {} bytes, not a multiple of {size}",
                    k.field,
                    r.len()
                ),
            });
        }
        let at = r.start;
        target.push_packed(file.slice(r), budget, path, at)?;
    } else {
        let at = c.fixed(size, path, if size == 4 { "fixed32" } else { "fixed64" })?;
        target.push_one(&file[at..at + size], budget, path, at)?;
    }
    Ok(())
}

fn parse_blob_shape(
    file: &[u8],
    range: Range<usize>,
    dims: &mut Vec<i64>,
    path: &str,
) -> Result<u64> {
    let mut c = Cursor::new(file, range.start, range.end);
    let mut seen = 0u64;
    // Beyond Caffe's 32 axes the dims are counted, not kept: the shape check rejects
    // them, and storage stays bounded whatever the file declares.
    let mut keep = |dims: &mut Vec<i64>, d: u64| {
        seen += 1;
        if dims.len() <= MAX_BLOB_AXES {
            dims.push(d as i64);
        }
    };
    while let Some(k) = c.key(path)? {
        if k.field != 1 {
            c.skip(k, path, 0)?;
            continue;
        }
        expect_wire(k, &[LEN, VARINT], "varint or packed varints (int64)", path)?;
        if k.wire_type == VARINT {
            let d = c.varint(path)?;
            keep(dims, d);
        } else {
            let r = c.len_delimited(path)?;
            let mut inner = Cursor::new(file, r.start, r.end);
            while !inner.at_end() {
                let d = inner.varint(path)?;
                keep(dims, d);
            }
        }
    }
    Ok(seen)
}

/// The net format generation of a layer / a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NetVersion {
    /// `layers` (field 2) holding a nested V0LayerParameter (before March 2014).
    V0,
    /// `layers` (field 2), V1LayerParameter with enum types (2014 - Feb 2015).
    V1,
    /// `layer` (field 100), LayerParameter with string types (since Feb 2015).
    V2,
}

impl std::fmt::Display for NetVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NetVersion::V0 => "V0",
            NetVersion::V1 => "V1",
            NetVersion::V2 => "V2",
        })
    }
}

/// A piece of a message kept for rewriting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    /// One field copied verbatim (key included).
    Raw { field: u32, range: Range<usize> },
    /// The blob `index` of the layer, under `field`.
    Blob { field: u32, index: usize },
    /// A nested message (V1 `layer` = 1 holding a V0 layer) re-emitted with its length.
    Nested { field: u32, pieces: Vec<Piece> },
}

/// Records one verbatim field. Adjacent fields merge into one piece (bounding memory by
/// the number of blob fields, not by the number of fields a hostile file repeats) when
/// both lie on the same side of every blob field number, so the rewriter's placement
/// of added blobs (before the first raw field numbered above the blob field) is unchanged.
fn push_raw(pieces: &mut Vec<Piece>, key: Key, end: usize) {
    if let Some(Piece::Raw { field, range }) = pieces.last_mut() {
        let side = |f: u32| [6u32, 7, 50].map(|b| f > b);
        if range.end == key.at && side(*field) == side(key.field) {
            range.end = end;
            return;
        }
    }
    pieces.push(Piece::Raw {
        field: key.field,
        range: key.at..end,
    });
}

/// One layer of a net, whatever its version.
#[derive(Debug, Clone, PartialEq)]
pub struct RawLayer {
    /// The list it came from (V2 `layer`, V1 `layers`, V1 `layers` with a V0 layer inside).
    pub version: NetVersion,
    /// Layer name (for V0 nets, the nested V0 layer's name).
    pub name: String,
    /// The modern (V2) type string: as stored for V2, mapped from the V1 enum or the V0
    /// string as Caffe's upgrade does. Empty for V1 NONE and for V0 `padding` layers.
    pub type_name: String,
    /// The V1 enum value, for V1 layers.
    pub v1_type: Option<i32>,
    /// The V0 type string, for V0 layers.
    pub v0_type: Option<String>,
    /// The weights: V2 field 7, V1 field 6, V0 field 50.
    pub blobs: Vec<RawBlob>,
    /// Byte offset of the layer's key in the file.
    pub offset: u64,
    pub(crate) pieces: Vec<Piece>,
    /// Where `name` lies in the file as read (`None` when the layer has no name field).
    pub(crate) name_range: Option<Range<usize>>,
}

impl RawLayer {
    /// An empty record of a layer (of any version) whose key is at byte `at`: the
    /// V2, V1 and V0 walkers fill it through the field readers below.
    fn new(version: NetVersion, at: usize) -> RawLayer {
        RawLayer {
            version,
            name: String::new(),
            type_name: String::new(),
            v1_type: None,
            v0_type: None,
            blobs: Vec::new(),
            offset: at as u64,
            pieces: Vec::new(),
            name_range: None,
        }
    }

    /// A string field (name or type), kept verbatim; the name's place is recorded for
    /// the rewriter.
    fn string_field(&mut self, c: &mut Cursor, k: Key, path: &str, name: bool) -> Result<String> {
        expect_wire(k, &[LEN], "length-delimited (string)", path)?;
        let s = c.string(path)?;
        if name {
            self.name_range = Some(c.pos - s.len()..c.pos);
        }
        push_raw(&mut self.pieces, k, c.pos);
        Ok(s)
    }

    /// A blob field (BlobProto under `k.field`): parsed into `blobs`, its place kept.
    fn blob_field(
        &mut self,
        file: &Bytes,
        c: &mut Cursor,
        k: Key,
        path: &str,
        budget: &mut Budget,
    ) -> Result<()> {
        expect_wire(k, &[LEN], "length-delimited (BlobProto)", path)?;
        let r = c.len_delimited(path)?;
        let index = self.blobs.len();
        let bpath = format!("{path}.blobs[{index}]");
        budget.item(&bpath, k.at)?;
        self.blobs.push(parse_blob(file, r, &bpath, budget)?);
        self.pieces.push(Piece::Blob {
            field: k.field,
            index,
        });
        Ok(())
    }

    /// Any other field, kept verbatim.
    fn other_field(&mut self, c: &mut Cursor, k: Key, path: &str) -> Result<()> {
        c.skip(k, path, 0)?;
        push_raw(&mut self.pieces, k, c.pos);
        Ok(())
    }

    /// The layer's non-blob fields, verbatim (for a V0 layer, the outer V1 fields).
    pub fn param_bytes(&self, file: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &self.pieces {
            if let Piece::Raw { range, .. } = p {
                out.extend_from_slice(&file[range.clone()]);
            }
        }
        out
    }
}

/// V1 `LayerType` enum value to the V2 type string (Caffe's `UpgradeV1LayerType`).
pub fn v1_type_name(value: i32) -> Option<&'static str> {
    const NAMES: [&str; 40] = [
        "",
        "Accuracy",
        "BNLL",
        "Concat",
        "Convolution",
        "Data",
        "Dropout",
        "EuclideanLoss",
        "Flatten",
        "HDF5Data",
        "HDF5Output",
        "Im2col",
        "ImageData",
        "InfogainLoss",
        "InnerProduct",
        "LRN",
        "MultinomialLogisticLoss",
        "Pooling",
        "ReLU",
        "Sigmoid",
        "Softmax",
        "SoftmaxWithLoss",
        "Split",
        "TanH",
        "WindowData",
        "Eltwise",
        "Power",
        "SigmoidCrossEntropyLoss",
        "HingeLoss",
        "MemoryData",
        "ArgMax",
        "Threshold",
        "DummyData",
        "Slice",
        "MVN",
        "AbsVal",
        "Silence",
        "ContrastiveLoss",
        "Exp",
        "Deconvolution",
    ];
    usize::try_from(value)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
}

/// V0 type string to the V1 enum value (Caffe's `UpgradeV0LayerType`).
pub fn v0_type_to_v1(name: &str) -> Option<i32> {
    Some(match name {
        "accuracy" => 1,
        "bnll" => 2,
        "concat" => 3,
        "conv" => 4,
        "data" => 5,
        "dropout" => 6,
        "euclidean_loss" => 7,
        "flatten" => 8,
        "hdf5_data" => 9,
        "hdf5_output" => 10,
        "im2col" => 11,
        "images" => 12,
        "infogain_loss" => 13,
        "innerproduct" => 14,
        "lrn" => 15,
        "multinomial_logistic_loss" => 16,
        "pool" => 17,
        "relu" => 18,
        "sigmoid" => 19,
        "softmax" => 20,
        "softmax_loss" => 21,
        "split" => 22,
        "tanh" => 23,
        "window_data" => 24,
        _ => return None,
    })
}

fn parse_v2_layer(
    file: &Bytes,
    range: Range<usize>,
    at: usize,
    path: &str,
    budget: &mut Budget,
) -> Result<RawLayer> {
    let mut c = Cursor::new(file, range.start, range.end);
    let mut layer = RawLayer::new(NetVersion::V2, at);
    while let Some(k) = c.key(path)? {
        match k.field {
            1 => layer.name = layer.string_field(&mut c, k, path, true)?,
            2 => layer.type_name = layer.string_field(&mut c, k, path, false)?,
            7 => layer.blob_field(file, &mut c, k, path, budget)?,
            _ => layer.other_field(&mut c, k, path)?,
        }
    }
    Ok(layer)
}

fn parse_v1_layer(
    file: &Bytes,
    range: Range<usize>,
    at: usize,
    path: &str,
    budget: &mut Budget,
) -> Result<RawLayer> {
    let mut c = Cursor::new(file, range.start, range.end);
    let mut layer = RawLayer::new(NetVersion::V1, at);
    let mut v0: Option<RawLayer> = None;
    while let Some(k) = c.key(path)? {
        match k.field {
            4 => layer.name = layer.string_field(&mut c, k, path, true)?,
            5 => {
                expect_wire(k, &[VARINT], "varint (enum LayerType)", path)?;
                layer.v1_type = Some(int32(c.varint(path)?));
                push_raw(&mut layer.pieces, k, c.pos);
            }
            6 => layer.blob_field(file, &mut c, k, path, budget)?,
            1 => {
                expect_wire(k, &[LEN], "length-delimited (V0LayerParameter)", path)?;
                let r = c.len_delimited(path)?;
                let inner =
                    parse_v0_layer(file, r, k.at, &format!("{path}.layer"), v0.take(), budget)?;
                v0 = Some(inner);
                // Placeholder; the nested pieces are attached after the loop.
                layer.pieces.push(Piece::Nested {
                    field: 1,
                    pieces: Vec::new(),
                });
            }
            _ => layer.other_field(&mut c, k, path)?,
        }
    }
    if let Some(v0) = v0 {
        // proto2 merges repeated occurrences of a message field into one; keep the
        // merged nested layer at the first occurrence and drop the later placeholders.
        let mut seen = false;
        let mut v0_pieces = Some(v0.pieces);
        layer.pieces.retain_mut(|p| match p {
            Piece::Nested { pieces, .. } => {
                if seen {
                    return false;
                }
                seen = true;
                *pieces = v0_pieces.take().unwrap_or_default();
                true
            }
            _ => true,
        });
        if !layer.blobs.is_empty() {
            return Err(CaffeError::Wire {
                path: path.to_string(),
                offset: at as u64,
                reason: "V1 layer has both its own blobs and a nested V0 layer".into(),
            });
        }
        layer.version = NetVersion::V0;
        layer.name = v0.name;
        layer.name_range = v0.name_range;
        layer.blobs = v0.blobs;
        let v0_type = v0.v0_type.unwrap_or_default();
        layer.type_name = if v0_type == "padding" {
            String::new()
        } else {
            let v1 = v0_type_to_v1(&v0_type).ok_or_else(|| CaffeError::UnknownV0Type {
                path: path.to_string(),
                name: v0_type.clone(),
            })?;
            v1_type_name(v1).unwrap_or_default().to_string()
        };
        layer.v0_type = Some(v0_type);
    } else if let Some(t) = layer.v1_type {
        layer.type_name = v1_type_name(t)
            .ok_or_else(|| CaffeError::UnknownLayerType {
                path: path.to_string(),
                value: t,
            })?
            .to_string();
    }
    Ok(layer)
}

/// A V0 layer; `merge` is an earlier occurrence of the same nested field.
fn parse_v0_layer(
    file: &Bytes,
    range: Range<usize>,
    at: usize,
    path: &str,
    merge: Option<RawLayer>,
    budget: &mut Budget,
) -> Result<RawLayer> {
    let mut c = Cursor::new(file, range.start, range.end);
    let mut layer = merge.unwrap_or_else(|| RawLayer::new(NetVersion::V0, at));
    while let Some(k) = c.key(path)? {
        match k.field {
            1 => layer.name = layer.string_field(&mut c, k, path, true)?,
            2 => layer.v0_type = Some(layer.string_field(&mut c, k, path, false)?),
            50 => layer.blob_field(file, &mut c, k, path, budget)?,
            _ => layer.other_field(&mut c, k, path)?,
        }
    }
    Ok(layer)
}

/// What to do with a NetParameter holding both `layer` and `layers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MixedLayers {
    /// Refuse, as Caffe does ("Refusing to upgrade inconsistent NetParameter").
    #[default]
    Refuse,
    /// Use `layers` (V1) and ignore `layer`, as OpenCV's importer did. The ignored
    /// layers are still kept verbatim when the model is written back.
    PreferV1,
}

/// A top-level piece of a NetParameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NetPiece {
    Raw(Range<usize>),
    Layer(usize),
}

/// A digest of a net's structure: every byte of the NetParameter but its blobs (the
/// topology, layer parameters, phase, the net's own fields), in file order, a layer's
/// fields bracketed so that moving a field between layers counts. Two files of equal
/// tensors differ in what Caffe runs exactly when this differs (up to the encoding: a
/// structure re-encoded by another writer differs too). FNV-1a (64 bits), stable
/// across builds, streamed: no memory per layer.
///
/// ```
/// use tensorfmt_caffe::{encode_weights_model, read_model, RawBlob, WeightsLayer};
/// let layer = |t: &str| WeightsLayer {
///     name: "ip".into(), type_name: Some(t.into()), blobs: vec![RawBlob::from_f32(&[1], &[2.0])],
/// };
/// let digest = |t: &str| read_model(encode_weights_model(Some("n"), &[layer(t)]).into()).unwrap().structure();
/// assert_eq!(digest("InnerProduct"), digest("InnerProduct"));
/// assert_ne!(digest("InnerProduct"), digest("Convolution"));
/// ```
#[derive(Debug, Clone, Copy)]
pub(crate) struct StructureDigest(u64);

impl StructureDigest {
    pub(crate) fn new() -> StructureDigest {
        StructureDigest(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    /// A top-level field of the net (its key and value).
    pub(crate) fn raw(&mut self, file: &[u8], r: Range<usize>) {
        self.bytes(&file[r]);
    }
    /// A layer: its fields but the blobs.
    pub(crate) fn layer(&mut self, file: &[u8], l: &RawLayer) {
        self.bytes(b"\x00layer{");
        self.pieces(file, &l.pieces);
        self.bytes(b"}");
    }
    fn pieces(&mut self, file: &[u8], pieces: &[Piece]) {
        for p in pieces {
            match p {
                Piece::Raw { range, .. } => self.bytes(&file[range.clone()]),
                Piece::Blob { .. } => {}
                Piece::Nested { field, pieces } => {
                    self.bytes(&field.to_le_bytes());
                    self.bytes(b"{");
                    self.pieces(file, pieces);
                    self.bytes(b"}");
                }
            }
        }
    }
    /// The digest as the header shows it.
    pub(crate) fn hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

/// A parsed NetParameter (`.caffemodel`): name, version and layers with their blobs;
/// every other byte is kept so [`Model::to_bytes`] writes the file back exactly, with
/// whatever blobs the layers hold by then.
///
/// ```
/// use tensorfmt_caffe::{encode_weights_model, read_model, RawBlob, WeightsLayer};
/// let bytes = encode_weights_model(Some("net"), &[WeightsLayer {
///     name: "conv1".into(), type_name: Some("Convolution".into()),
///     blobs: vec![RawBlob::from_f32(&[1, 1, 1, 1], &[2.0]), RawBlob::from_f32(&[1], &[0.0])],
/// }]);
/// let mut model = read_model(bytes.clone().into())?;
/// assert_eq!(model.to_bytes(), bytes);
/// model.layers[0].blobs[0] = RawBlob::from_f32(&[1, 1, 1, 1], &[3.0]);
/// assert_eq!(read_model(model.to_bytes().into())?.layers[0].blobs[0].data_f32(), vec![3.0]);
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Model {
    /// The whole file.
    pub(crate) file: Bytes,
    /// `name` (field 1).
    pub name: Option<String>,
    /// The version of the layers (V2 when the net has no layers at all).
    pub version: NetVersion,
    /// The layers in file order.
    pub layers: Vec<RawLayer>,
    pub(crate) pieces: Vec<NetPiece>,
    /// Things read despite Caffe refusing them (a mixed net read as V1).
    pub(crate) warnings: Vec<String>,
}

impl Model {
    /// A digest of the net's structure (every byte but the blobs: topology, layer
    /// parameters, phase; FNV-1a, hex), as the header's `structure` field shows it.
    pub fn structure(&self) -> String {
        let mut d = StructureDigest::new();
        for p in &self.pieces {
            match p {
                NetPiece::Raw(r) => d.raw(&self.file, r.clone()),
                NetPiece::Layer(i) => d.layer(&self.file, &self.layers[*i]),
            }
        }
        d.hex()
    }

    /// What was read although Caffe would refuse it (with
    /// [`MixedLayers::PreferV1`], the ignored `layer` list), each with its offset.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// One top-level item of a NetParameter, in file order, as [`walk_net`] meets it.
pub(crate) enum NetItem {
    /// The `name` field (its whole key and value).
    Name(Range<usize>),
    /// A layer of the list in use.
    Layer(RawLayer),
    /// Any other field (its whole key and value), an ignored layer list included.
    Raw(Range<usize>),
}

/// What [`walk_net`] finds besides the layers.
pub(crate) struct NetHead {
    pub name: Option<String>,
    pub version: NetVersion,
    pub warnings: Vec<String>,
}

/// Walks a NetParameter, handing each top-level item to `visit` as it is parsed, so a
/// caller keeps what it needs of a layer (the typed [`Model`] keeps all of it; the
/// tensor view a few words) and memory does not have to grow with the layer count.
pub(crate) fn walk_net(
    file: &Bytes,
    mixed: MixedLayers,
    budget: &mut Budget,
    visit: &mut dyn FnMut(NetItem) -> Result<()>,
) -> Result<NetHead> {
    let path = "NetParameter";
    // First pass over the top level only: find which layer lists are present.
    let mut c = Cursor::new(file, 0, file.len());
    let (mut first_v1, mut first_v2) = (None, None);
    while let Some(k) = c.key(path)? {
        match k.field {
            2 => first_v1 = first_v1.or(Some(k.at)),
            100 => first_v2 = first_v2.or(Some(k.at)),
            _ => {}
        }
        c.skip(k, path, 0)?;
    }
    let mut warnings = Vec::new();
    let use_v2 = match (first_v1, first_v2) {
        (Some(v1), Some(v2)) => match mixed {
            MixedLayers::Refuse => {
                return Err(CaffeError::MixedLayers {
                    v2_offset: v2 as u64,
                    v1_offset: v1 as u64,
                })
            }
            MixedLayers::PreferV1 => {
                warnings.push(format!(
                    "both layer (first at byte {v2}) and layers (first at byte {v1}) are present: \
                     Caffe refuses this net; read its layers (V1) and ignored layer, as OpenCV did"
                ));
                false
            }
        },
        (Some(_), None) => false,
        _ => true,
    };
    let mut head = NetHead {
        name: None,
        version: if use_v2 {
            NetVersion::V2
        } else {
            NetVersion::V1
        },
        warnings,
    };
    let mut i = 0usize;
    let mut c = Cursor::new(file, 0, file.len());
    while let Some(k) = c.key(path)? {
        match k.field {
            1 => {
                expect_wire(k, &[LEN], "length-delimited (string)", path)?;
                head.name = Some(c.string("NetParameter.name")?);
                visit(NetItem::Name(k.at..c.pos))?;
            }
            100 if use_v2 => {
                expect_wire(k, &[LEN], "length-delimited (LayerParameter)", path)?;
                let r = c.len_delimited(path)?;
                let lpath = format!("layer[{i}]");
                budget.item(&lpath, k.at)?;
                visit(NetItem::Layer(parse_v2_layer(
                    file, r, k.at, &lpath, budget,
                )?))?;
                i += 1;
            }
            2 if !use_v2 => {
                expect_wire(k, &[LEN], "length-delimited (V1LayerParameter)", path)?;
                let r = c.len_delimited(path)?;
                let lpath = format!("layers[{i}]");
                budget.item(&lpath, k.at)?;
                let layer = parse_v1_layer(file, r, k.at, &lpath, budget)?;
                if layer.version == NetVersion::V0 {
                    head.version = NetVersion::V0;
                }
                visit(NetItem::Layer(layer))?;
                i += 1;
            }
            _ => {
                c.skip(k, path, 0)?;
                visit(NetItem::Raw(k.at..c.pos))?;
            }
        }
    }
    Ok(head)
}

pub(crate) fn parse_net(file: &Bytes, mixed: MixedLayers, budget: &mut Budget) -> Result<Model> {
    let mut layers = Vec::new();
    let mut pieces = Vec::new();
    let head = walk_net(file, mixed, budget, &mut |item| {
        match item {
            NetItem::Name(r) | NetItem::Raw(r) => push_net_raw(&mut pieces, r),
            NetItem::Layer(l) => {
                pieces.push(NetPiece::Layer(layers.len()));
                layers.push(l);
            }
        }
        Ok(())
    })?;
    Ok(Model {
        file: file.clone(),
        name: head.name,
        version: head.version,
        layers,
        pieces,
        warnings: head.warnings,
    })
}

fn push_net_raw(pieces: &mut Vec<NetPiece>, r: Range<usize>) {
    if let Some(NetPiece::Raw(last)) = pieces.last_mut() {
        if last.end == r.start {
            last.end = r.end;
            return;
        }
    }
    pieces.push(NetPiece::Raw(r));
}

/// A parsed SolverState (fields 1-4; unknown fields are skipped).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSolverState {
    /// `iter` (field 1).
    pub iter: Option<i32>,
    /// `learned_net` (field 2).
    pub learned_net: Option<String>,
    /// `history` (field 3): one blob per learnable parameter.
    pub history: Vec<RawBlob>,
    /// `current_step` (field 4).
    pub current_step: Option<i32>,
}

/// Walks a SolverState: its scalar fields go into the returned state (with no
/// history), each history blob to `visit` as it is parsed.
pub(crate) fn walk_solver_state(
    file: &Bytes,
    budget: &mut Budget,
    visit: &mut dyn FnMut(RawBlob) -> Result<()>,
) -> Result<RawSolverState> {
    let path = "SolverState";
    let mut s = RawSolverState::default();
    let mut n = 0usize;
    let mut c = Cursor::new(file, 0, file.len());
    while let Some(k) = c.key(path)? {
        match k.field {
            1 | 4 => {
                expect_wire(k, &[VARINT], "varint (int32)", path)?;
                let v = Some(int32(c.varint(path)?));
                if k.field == 1 {
                    s.iter = v;
                } else {
                    s.current_step = v;
                }
            }
            2 => {
                expect_wire(k, &[LEN], "length-delimited (string)", path)?;
                s.learned_net = Some(c.string("SolverState.learned_net")?);
            }
            3 => {
                expect_wire(k, &[LEN], "length-delimited (BlobProto)", path)?;
                let r = c.len_delimited(path)?;
                let bpath = format!("history[{n}]");
                budget.item(&bpath, k.at)?;
                visit(parse_blob(file, r, &bpath, budget)?)?;
                n += 1;
            }
            _ => c.skip(k, path, 0)?,
        }
    }
    Ok(s)
}

pub(crate) fn parse_solver_state(file: &Bytes, budget: &mut Budget) -> Result<RawSolverState> {
    let mut history = Vec::new();
    let mut s = walk_solver_state(file, budget, &mut |b| {
        history.push(b);
        Ok(())
    })?;
    s.history = history;
    Ok(s)
}

/// Walks a BlobProtoVector, handing each blob to `visit` as it is parsed.
pub(crate) fn walk_blob_vector(
    file: &Bytes,
    budget: &mut Budget,
    visit: &mut dyn FnMut(RawBlob) -> Result<()>,
) -> Result<()> {
    let path = "BlobProtoVector";
    let mut n = 0usize;
    let mut c = Cursor::new(file, 0, file.len());
    while let Some(k) = c.key(path)? {
        if k.field == 1 {
            expect_wire(k, &[LEN], "length-delimited (BlobProto)", path)?;
            let r = c.len_delimited(path)?;
            let bpath = format!("blobs[{n}]");
            budget.item(&bpath, k.at)?;
            visit(parse_blob(file, r, &bpath, budget)?)?;
            n += 1;
        } else {
            c.skip(k, path, 0)?;
        }
    }
    Ok(())
}

pub(crate) fn parse_blob_vector(file: &Bytes, budget: &mut Budget) -> Result<Vec<RawBlob>> {
    let mut blobs = Vec::new();
    walk_blob_vector(file, budget, &mut |b| {
        blobs.push(b);
        Ok(())
    })?;
    Ok(blobs)
}
