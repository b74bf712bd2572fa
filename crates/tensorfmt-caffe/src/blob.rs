//! [`Blob`]: Caffe's in-memory array (spec §4, §5), with its shape rules, lazily
//! allocated zero-filled storage (the host side of SyncedMemory), capacity-reusing
//! reshape, the accessors (`count`, `offset`, canonical axes, legacy num/channels/
//! height/width) and FromProto / ToProto / ShapeEquals.

use std::fmt::Debug;

use crate::error::{CaffeError, Result};
use crate::raw::{check_shape, decode_f32, decode_f64, shape_string, RawBlob, ValueSource};

/// Element types a [`Blob`] can hold (Caffe's `Dtype`: float or double).
pub trait BlobElement: bytemuck::Pod + Default + PartialEq + Debug + Send + Sync + 'static {
    /// Whether ToProto writes `double_data` (f64) rather than `data` (f32).
    const IS_DOUBLE: bool;
    /// Conversion from f64 (`double_data`).
    fn from_f64(v: f64) -> Self;
    /// Conversion from f32 (`data`).
    fn from_f32(v: f32) -> Self;
    /// `self - other` (for [`Blob::update`]).
    fn minus(self, other: Self) -> Self;
}

impl BlobElement for f32 {
    const IS_DOUBLE: bool = false;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn minus(self, other: f32) -> f32 {
        self - other
    }
}

impl BlobElement for f64 {
    const IS_DOUBLE: bool = true;
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn from_f32(v: f32) -> f64 {
        f64::from(v)
    }
    fn minus(self, other: f64) -> f64 {
        self - other
    }
}

/// Where the newest copy of a [`SyncedMemory`] is (host side only: we have no device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Nothing allocated yet; the first access allocates and zero-fills.
    Uninitialized,
    /// Host memory is allocated and current.
    AtCpu,
}

/// Lazily allocated storage of `size` elements (Caffe's SyncedMemory, host side).
///
/// ```
/// use tensorfmt_caffe::{Head, SyncedMemory};
/// let mut m = SyncedMemory::<f32>::new(3);
/// assert_eq!(m.head(), Head::Uninitialized);
/// assert_eq!(m.cpu_data(), &[0.0, 0.0, 0.0]);
/// assert_eq!(m.head(), Head::AtCpu);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SyncedMemory<T> {
    buf: Option<Vec<T>>,
    size: usize,
}

impl<T: BlobElement> SyncedMemory<T> {
    /// Storage for `size` elements, not yet allocated.
    pub fn new(size: usize) -> SyncedMemory<T> {
        SyncedMemory { buf: None, size }
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The head state.
    pub fn head(&self) -> Head {
        if self.buf.is_some() {
            Head::AtCpu
        } else {
            Head::Uninitialized
        }
    }

    fn ensure_cpu(&mut self) -> &mut Vec<T> {
        let size = self.size;
        self.buf.get_or_insert_with(|| vec![T::default(); size])
    }

    /// Read access (allocates zeros on first access, as `to_cpu()` does).
    pub fn cpu_data(&mut self) -> &[T] {
        self.ensure_cpu()
    }

    /// Write access (allocates zeros on first access).
    pub fn mutable_cpu_data(&mut self) -> &mut [T] {
        self.ensure_cpu()
    }

    /// The host data if allocated, without allocating.
    pub fn peek(&self) -> Option<&[T]> {
        self.buf.as_deref()
    }
}

/// Caffe's Blob: an N-D array (at most 32 axes) with data and diff.
///
/// ```
/// use tensorfmt_caffe::Blob;
/// let mut b = Blob::<f32>::new();
/// assert_eq!(b.count(), 0);
/// b.reshape(&[2, 3, 4, 5])?;
/// assert_eq!(b.count(), 120);
/// assert_eq!(b.count_range(1, 3)?, 12);
/// assert_eq!(b.canonical_axis_index(-1)?, 3);
/// assert_eq!(b.offset_nchw(1, 2, 3, 4)?, 119);
/// assert_eq!(b.shape_string(), "2 3 4 5 (120)");
/// assert!(b.data().iter().all(|&v| v == 0.0)); // zero-filled on first access
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Blob<T: BlobElement> {
    shape: Vec<usize>,
    count: usize,
    capacity: usize,
    data: Option<SyncedMemory<T>>,
    diff: Option<SyncedMemory<T>>,
}

impl<T: BlobElement> Default for Blob<T> {
    fn default() -> Self {
        Blob::new()
    }
}

fn blob_err(msg: String) -> CaffeError {
    CaffeError::Blob(msg)
}

impl<T: BlobElement> Blob<T> {
    /// A default-constructed blob: 0 axes, count 0, nothing allocated.
    pub fn new() -> Blob<T> {
        Blob {
            shape: Vec::new(),
            count: 0,
            capacity: 0,
            data: None,
            diff: None,
        }
    }

    /// A blob reshaped to `dims`.
    pub fn with_shape(dims: &[i64]) -> Result<Blob<T>> {
        let mut b = Blob::new();
        b.reshape(dims)?;
        Ok(b)
    }

    /// Caffe's Reshape: at most 32 axes, dims non-negative, count at most i32::MAX
    /// (checked while the running count is non-zero). Storage is replaced by new,
    /// zero-reading storage only when the count exceeds the capacity; shrinking keeps
    /// the buffer and its leading values.
    pub fn reshape(&mut self, dims: &[i64]) -> Result<()> {
        let dims = check_shape(dims, "Blob::reshape")?;
        let count = dims.iter().product();
        self.shape = dims;
        self.count = count;
        if count > self.capacity || self.data.is_none() {
            self.capacity = self.capacity.max(count);
            self.data = Some(SyncedMemory::new(self.capacity));
            self.diff = Some(SyncedMemory::new(self.capacity));
        }
        Ok(())
    }

    /// Reshape to the legacy 4-D form.
    pub fn reshape_legacy(
        &mut self,
        num: i32,
        channels: i32,
        height: i32,
        width: i32,
    ) -> Result<()> {
        self.reshape(&[num.into(), channels.into(), height.into(), width.into()])
    }

    /// Reshape to another blob's shape.
    pub fn reshape_like<U: BlobElement>(&mut self, other: &Blob<U>) -> Result<()> {
        let dims: Vec<i64> = other.shape.iter().map(|&d| d as i64).collect();
        self.reshape(&dims)
    }

    /// The dims.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of axes.
    pub fn num_axes(&self) -> usize {
        self.shape.len()
    }

    /// Product of all dims (0 for a default blob, 1 for a 0-axis reshaped blob).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Allocated element capacity (never shrinks).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Product of the dims in `start..end`; requires `start <= end <= num_axes`.
    pub fn count_range(&self, start: usize, end: usize) -> Result<usize> {
        if start > end || end > self.num_axes() {
            return Err(blob_err(format!(
                "count({start}, {end}) out of range for {}-D Blob",
                self.num_axes()
            )));
        }
        Ok(self.shape[start..end].iter().product())
    }

    /// `count_range(start, num_axes)`.
    pub fn count_from(&self, start: usize) -> Result<usize> {
        self.count_range(start, self.num_axes())
    }

    /// Caffe's CanonicalAxisIndex: `-num_axes <= i < num_axes`, negative from the end.
    pub fn canonical_axis_index(&self, axis: isize) -> Result<usize> {
        let n = self.num_axes() as isize;
        if axis < -n || axis >= n {
            return Err(blob_err(format!(
                "axis {axis} out of range for {n}-D Blob with shape {}",
                self.shape_string()
            )));
        }
        Ok(if axis < 0 { axis + n } else { axis } as usize)
    }

    /// The dim of a (possibly negative) axis.
    pub fn shape_at(&self, axis: isize) -> Result<usize> {
        Ok(self.shape[self.canonical_axis_index(axis)?])
    }

    /// Caffe's LegacyShape: at most 4 axes, `-4 <= i < 4`, 1 outside the real axes.
    pub fn legacy_shape(&self, index: isize) -> Result<usize> {
        if self.num_axes() > 4 {
            return Err(blob_err(
                "Cannot use legacy accessors on Blobs with > 4 axes.".into(),
            ));
        }
        if !(-4..4).contains(&index) {
            return Err(blob_err(format!(
                "legacy shape index {index} outside [-4, 4)"
            )));
        }
        let n = self.num_axes() as isize;
        if index >= n || index < -n {
            return Ok(1);
        }
        self.shape_at(index)
    }

    /// `legacy_shape(0)`.
    pub fn num(&self) -> Result<usize> {
        self.legacy_shape(0)
    }
    /// `legacy_shape(1)`.
    pub fn channels(&self) -> Result<usize> {
        self.legacy_shape(1)
    }
    /// `legacy_shape(2)`.
    pub fn height(&self) -> Result<usize> {
        self.legacy_shape(2)
    }
    /// `legacy_shape(3)`.
    pub fn width(&self) -> Result<usize> {
        self.legacy_shape(3)
    }

    /// `((n * C + c) * H + h) * W + w` with Caffe's bounds (`n <= num`, ..., one past the
    /// end allowed; indices are unsigned, so Caffe's missing `c >= 0` checks cannot bite).
    pub fn offset_nchw(&self, n: usize, c: usize, h: usize, w: usize) -> Result<usize> {
        let (nn, cc, hh, ww) = (self.num()?, self.channels()?, self.height()?, self.width()?);
        if n > nn || c > cc || h > hh || w > ww {
            return Err(blob_err(format!(
                "offset ({n}, {c}, {h}, {w}) out of bounds for {}",
                self.shape_string()
            )));
        }
        Ok(((n * cc + c) * hh + h) * ww + w)
    }

    /// Row-major offset of `indices` (fewer than the axes allowed: missing trailing ones
    /// are 0; each given index strictly below its dim).
    pub fn offset(&self, indices: &[usize]) -> Result<usize> {
        if indices.len() > self.num_axes() {
            return Err(blob_err(format!(
                "{} indices for a {}-D Blob",
                indices.len(),
                self.num_axes()
            )));
        }
        let mut off = 0;
        for (i, &d) in self.shape.iter().enumerate() {
            off *= d;
            if let Some(&idx) = indices.get(i) {
                if idx >= d {
                    return Err(blob_err(format!(
                        "index {idx} out of range for axis {i} of {}",
                        self.shape_string()
                    )));
                }
                off += idx;
            }
        }
        Ok(off)
    }

    /// Caffe's shape string: `"20 1 5 5 (500)"`; a default blob gives `"(0)"`.
    pub fn shape_string(&self) -> String {
        let mut s = String::new();
        for d in &self.shape {
            s.push_str(&format!("{d} "));
        }
        s.push_str(&format!("({})", self.count));
        s
    }

    /// The data (zero-filled storage allocated on first access).
    pub fn data(&mut self) -> &[T] {
        let count = self.count;
        match &mut self.data {
            Some(m) => &m.cpu_data()[..count],
            None => &[],
        }
    }

    /// Mutable data.
    pub fn mutable_data(&mut self) -> &mut [T] {
        let count = self.count;
        match &mut self.data {
            Some(m) => &mut m.mutable_cpu_data()[..count],
            None => &mut [],
        }
    }

    /// The diff (zero-filled storage allocated on first access).
    pub fn diff(&mut self) -> &[T] {
        let count = self.count;
        match &mut self.diff {
            Some(m) => &m.cpu_data()[..count],
            None => &[],
        }
    }

    /// Mutable diff.
    pub fn mutable_diff(&mut self) -> &mut [T] {
        let count = self.count;
        match &mut self.diff {
            Some(m) => &mut m.mutable_cpu_data()[..count],
            None => &mut [],
        }
    }

    /// The head state of the data storage (`None` before the first reshape).
    pub fn data_head(&self) -> Option<Head> {
        self.data.as_ref().map(SyncedMemory::head)
    }

    /// The head state of the diff storage.
    pub fn diff_head(&self) -> Option<Head> {
        self.diff.as_ref().map(SyncedMemory::head)
    }

    /// The SGD step: `data -= diff`.
    pub fn update(&mut self) {
        let diff = self.diff().to_vec();
        for (d, g) in self.mutable_data().iter_mut().zip(diff) {
            *d = d.minus(g);
        }
    }

    /// Caffe's ShapeEquals: a legacy proto compares right-aligned against the legacy
    /// accessors (missing leading axes are 1, at most 4 axes); a new-style proto must
    /// match `shape.dim` exactly (absent shape = no axes).
    pub fn shape_equals(&self, proto: &RawBlob) -> bool {
        if proto.has_legacy() {
            if self.num_axes() > 4 {
                return false;
            }
            let want = [proto.num, proto.channels, proto.height, proto.width];
            return want.iter().zip(-4isize..0).all(|(w, i)| {
                self.legacy_shape(i).ok().map(|d| d as i64) == Some(i64::from(w.unwrap_or(0)))
            });
        }
        let dims = proto.shape.as_deref().unwrap_or(&[]);
        dims.len() == self.shape.len() && dims.iter().zip(&self.shape).all(|(&a, &b)| a == b as i64)
    }

    /// Caffe's FromProto. With `reshape`, the shape comes from the proto (§4.2);
    /// without, the blob must already [`shape_equals`](Blob::shape_equals) it. Values:
    /// `double_data` if non-empty, else `data` (else FP16/FP32 `raw_data`), length equal
    /// to the count. Diff: `double_diff`, else `diff`, else left untouched (as Caffe).
    pub fn from_proto(&mut self, proto: &RawBlob, reshape: bool) -> Result<()> {
        let path = "BlobProto";
        if reshape {
            let dims: Vec<i64> = proto.shape_dims(path)?.iter().map(|&d| d as i64).collect();
            self.reshape(&dims)?;
        } else if !self.shape_equals(proto) {
            return Err(blob_err(format!(
                "shape mismatch (reshape not set): blob {} vs proto {}",
                self.shape_string(),
                proto
                    .shape_dims(path)
                    .map(|d| shape_string(&d))
                    .unwrap_or_else(|e| e.to_string())
            )));
        }
        let count = self.count;
        let src = proto.value_source()?;
        let values: Vec<T> = match src {
            ValueSource::DoubleData | ValueSource::RawF64 => decode_f64(proto.value_bytes()?)
                .into_iter()
                .map(T::from_f64)
                .collect(),
            ValueSource::Data | ValueSource::RawF32 => decode_f32(proto.value_bytes()?)
                .into_iter()
                .map(T::from_f32)
                .collect(),
            ValueSource::RawF16 => proto
                .value_bytes()?
                .chunks_exact(2)
                .map(|c| {
                    T::from_f32(tensorfmt_core::half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                })
                .collect(),
        };
        if values.len() != count {
            return Err(CaffeError::Count {
                path: path.into(),
                field: src.field(),
                shape: self.shape_string(),
                expected: count as u64,
                actual: values.len() as u64,
            });
        }
        self.mutable_data().copy_from_slice(&values);
        let diff: Option<(Vec<T>, &'static str)> = if !proto.double_diff.is_empty() {
            Some((
                decode_f64(&proto.double_diff)
                    .into_iter()
                    .map(T::from_f64)
                    .collect(),
                "double_diff",
            ))
        } else if !proto.diff.is_empty() {
            Some((
                decode_f32(&proto.diff)
                    .into_iter()
                    .map(T::from_f32)
                    .collect(),
                "diff",
            ))
        } else {
            None
        };
        if let Some((d, field)) = diff {
            if d.len() != count {
                return Err(CaffeError::Count {
                    path: path.into(),
                    field,
                    shape: self.shape_string(),
                    expected: count as u64,
                    actual: d.len() as u64,
                });
            }
            self.mutable_diff().copy_from_slice(&d);
        }
        Ok(())
    }

    /// A new blob from a proto (FromProto with reshape).
    pub fn from_raw(proto: &RawBlob) -> Result<Blob<T>> {
        let mut b = Blob::new();
        b.from_proto(proto, true)?;
        Ok(b)
    }

    /// Caffe's ToProto on a fresh message: new-style `shape` (absent for 0 axes), then
    /// `data` (f32) or `double_data` (f64), and the diff only when `write_diff`.
    pub fn to_proto(&self, write_diff: bool) -> RawBlob {
        let zeros = vec![T::default(); self.count];
        let pick = |m: &Option<SyncedMemory<T>>| -> bytes::Bytes {
            let v = m
                .as_ref()
                .and_then(SyncedMemory::peek)
                .map(|s| &s[..self.count])
                .unwrap_or(&zeros);
            bytes::Bytes::copy_from_slice(bytemuck::cast_slice(v))
        };
        let mut p = RawBlob {
            shape: (!self.shape.is_empty()).then(|| self.shape.iter().map(|&d| d as i64).collect()),
            ..RawBlob::default()
        };
        let (data, diff) = (pick(&self.data), write_diff.then(|| pick(&self.diff)));
        if T::IS_DOUBLE {
            p.double_data = data;
            p.double_diff = diff.unwrap_or_default();
        } else {
            p.data = data;
            p.diff = diff.unwrap_or_default();
        }
        p
    }
}
