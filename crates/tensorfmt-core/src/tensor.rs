//! [`Tensor`]: dtype + shape + order over shared little-endian bytes.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use half::slice::HalfFloatSliceExt;

use crate::stats::Stats;
use crate::{DType, Element, Error, Order, Result, Shape};

/// An n-dimensional array: a [`DType`], a [`Shape`], an [`Order`] and the elements as
/// little-endian bytes in a [`Bytes`] buffer.
///
/// Because the storage is `Bytes`, a tensor can share memory with a file buffer or an
/// mmap (see [`crate::io::map_file`]): slicing a frame out of a mapped file copies
/// nothing. Typed access borrows when the bytes happen to be aligned for the element
/// type ([`Tensor::as_slice`]) and copies otherwise ([`Tensor::to_vec`]).
///
/// ```
/// use tensorfmt_core::{DType, Order, Tensor};
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], Order::RowMajor)?;
/// assert_eq!(t.dtype(), DType::F32);
/// assert_eq!(t.get::<f32>(&[1, 0])?, 4.0);
/// let c = t.to_order(Order::ColumnMajor)?;
/// assert_eq!(c.to_vec::<f32>()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// let h = t.cast(DType::F16)?;
/// assert_eq!(h.cast(DType::F32)?.to_vec::<f32>()?, t.to_vec::<f32>()?);
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Shape,
    order: Order,
    data: Bytes,
}

/// Keeps a typed `Vec` alive behind a `Bytes` without copying it.
struct VecOwner<T: Element>(Vec<T>);

impl<T: Element> AsRef<[u8]> for VecOwner<T> {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// Wraps a typed vector as bytes without copying.
pub(crate) fn vec_into_bytes<T: Element>(v: Vec<T>) -> Bytes {
    Bytes::from_owner(VecOwner(v))
}

impl Tensor {
    /// A tensor from typed elements (no copy: the `Vec` becomes the storage).
    ///
    /// Fails with [`Error::ByteLength`] when `data.len()` is not the shape's element count.
    pub fn from_vec<T: Element>(
        data: Vec<T>,
        shape: impl Into<Shape>,
        order: Order,
    ) -> Result<Tensor> {
        let shape = shape.into();
        let n = shape.numel()?;
        if n != data.len() {
            return Err(Error::ByteLength {
                dtype: T::DTYPE,
                shape: shape.to_string(),
                expected: shape.byte_len(T::DTYPE.size())?,
                actual: data.len() * T::DTYPE.size(),
            });
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            order,
            data: vec_into_bytes(data),
        })
    }

    /// A tensor over little-endian bytes (no copy). The length must match exactly.
    pub fn from_bytes(
        dtype: DType,
        shape: impl Into<Shape>,
        order: Order,
        data: impl Into<Bytes>,
    ) -> Result<Tensor> {
        let shape = shape.into();
        let data = data.into();
        let expected = shape.byte_len(dtype.size())?;
        if expected != data.len() {
            return Err(Error::ByteLength {
                dtype,
                shape: shape.to_string(),
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor {
            dtype,
            shape,
            order,
            data,
        })
    }

    /// A rank-1 `bool` tensor from Rust bools (stored as bytes 0 and 1).
    pub fn from_bools(data: &[bool]) -> Tensor {
        let bytes: Vec<u8> = data.iter().map(|&b| b as u8).collect();
        Tensor {
            dtype: DType::Bool,
            shape: Shape::new([data.len()]),
            order: Order::RowMajor,
            data: Bytes::from(bytes),
        }
    }

    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: impl Into<Shape>, order: Order) -> Result<Tensor> {
        let shape = shape.into();
        let n = shape.byte_len(dtype.size())?;
        Ok(Tensor {
            dtype,
            shape,
            order,
            data: Bytes::from(vec![0u8; n]),
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Dims (shorthand for `shape().dims()`).
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Memory order of the bytes.
    pub fn order(&self) -> Order {
        self.order
    }

    /// Number of elements (the shape was checked at construction, so this cannot overflow).
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// Consumes the tensor, returning its bytes.
    pub fn into_bytes(self) -> Bytes {
        self.data
    }

    /// True when the storage is aligned for a borrowed typed view of this dtype.
    pub fn is_aligned(&self) -> bool {
        (self.data.as_ptr() as usize).is_multiple_of(align_of_dtype(self.dtype))
    }

    fn check_type<T: Element>(&self) -> Result<()> {
        let ok = T::DTYPE == self.dtype || (self.dtype == DType::Bool && T::DTYPE == DType::U8);
        if ok {
            Ok(())
        } else {
            Err(Error::DTypeMismatch {
                actual: self.dtype,
                requested: T::DTYPE,
            })
        }
    }

    /// A borrowed typed view (zero copy). Fails with [`Error::Misaligned`] when the bytes
    /// are not aligned for `T` (e.g. a frame at an odd file offset); use [`Tensor::to_vec`]
    /// or [`Tensor::typed`] then. `bool` tensors are viewed as `u8`.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_type::<T>()?;
        bytemuck::try_cast_slice(&self.data).map_err(|_| Error::Misaligned {
            dtype: self.dtype,
            align: std::mem::align_of::<T>(),
            addr: self.data.as_ptr() as usize,
        })
    }

    /// The elements as an owned vector (always works; one bulk copy).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        match self.as_slice::<T>() {
            // Aligned: one memcpy into the new allocation.
            Ok(s) => Ok(s.to_vec()),
            // Misaligned: one bulk byte copy into a zeroed, aligned vector.
            Err(Error::Misaligned { .. }) => {
                let mut out = vec![T::zeroed(); self.numel()];
                bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&self.data);
                Ok(out)
            }
            Err(e) => Err(e),
        }
    }

    /// Borrowed when aligned, copied otherwise.
    pub fn typed<T: Element>(&self) -> Result<Cow<'_, [T]>> {
        match self.as_slice::<T>() {
            Ok(s) => Ok(Cow::Borrowed(s)),
            Err(Error::Misaligned { .. }) => self.to_vec().map(Cow::Owned),
            Err(e) => Err(e),
        }
    }

    /// One element by multi-index (in logical axes; the order is taken into account).
    pub fn get<T: Element>(&self, index: &[usize]) -> Result<T> {
        self.check_type::<T>()?;
        let off = self.order.offset(&self.shape, index)? * self.dtype.size();
        Ok(bytemuck::pod_read_unaligned(
            &self.data[off..off + self.dtype.size()],
        ))
    }

    /// One element by multi-index, converted to `f64` whatever the dtype.
    pub fn get_f64(&self, index: &[usize]) -> Result<f64> {
        let off = self.order.offset(&self.shape, index)? * self.dtype.size();
        let b = &self.data[off..off + self.dtype.size()];
        Ok(with_element!(self.dtype, T => {
            bytemuck::pod_read_unaligned::<T>(b).to_f64()
        }))
    }

    /// The same elements under another shape with the same element count (zero copy).
    /// The memory order is kept, so a column-major tensor is reshaped in column-major order.
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.numel()? != self.numel() {
            return Err(Error::BadReshape {
                from: self.shape.to_string(),
                to: shape.to_string(),
            });
        }
        Ok(Tensor {
            shape,
            ..self.clone()
        })
    }

    /// The same bytes declared with another memory order (zero copy). This reinterprets:
    /// use [`Tensor::to_order`] to keep the logical elements.
    pub fn with_order(&self, order: Order) -> Tensor {
        Tensor {
            order,
            ..self.clone()
        }
    }

    /// Elements `start..end` along the outermost memory axis (axis 0 of a row-major
    /// tensor, the last axis of a column-major one), without copying.
    ///
    /// ```
    /// use tensorfmt_core::{Order, Tensor};
    /// let t = Tensor::from_vec((0..12).collect::<Vec<i32>>(), [4, 3], Order::RowMajor)?;
    /// let s = t.slice_outer(1, 3)?;
    /// assert_eq!(s.dims(), &[2, 3]);
    /// assert_eq!(s.to_vec::<i32>()?, (3..9).collect::<Vec<i32>>());
    /// # Ok::<(), tensorfmt_core::Error>(())
    /// ```
    pub fn slice_outer(&self, start: usize, end: usize) -> Result<Tensor> {
        let axis = match self.order {
            Order::RowMajor => 0,
            Order::ColumnMajor => self.shape.rank().wrapping_sub(1),
        };
        let Some(&len) = self.shape.dims().get(axis) else {
            return Err(Error::Invalid("cannot slice a rank-0 tensor".into()));
        };
        if start > end || end > len {
            return Err(Error::IndexOutOfBounds {
                index: vec![start, end],
                shape: self.shape.to_string(),
            });
        }
        let inner = self.data.len().checked_div(len).unwrap_or(0);
        let mut dims = self.shape.dims().to_vec();
        dims[axis] = end - start;
        Ok(Tensor {
            dtype: self.dtype,
            shape: Shape::new(dims),
            order: self.order,
            data: self.data.slice(start * inner..end * inner),
        })
    }

    /// Converts every element to another dtype.
    ///
    /// Rules: same dtype is a zero-copy clone; int -> int wraps like numpy's `astype`;
    /// float -> int saturates (NaN -> 0); anything -> bool is `!= 0`; bool -> number is
    /// 0 or 1; a narrowing cast to a float type rounds **once**, to nearest even, from
    /// the exact source value, as numpy does (int64 -> f32 is not routed through f64,
    /// f64 -> f16 not through f32); f32 <-> f16/bf16 use `half`'s bulk slice conversions.
    pub fn cast(&self, to: DType) -> Result<Tensor> {
        if to == self.dtype {
            return Ok(self.clone());
        }
        let data = match (self.dtype, to) {
            (DType::F32, DType::F16) => {
                let src = self.typed::<f32>()?;
                let mut out = vec![half::f16::ZERO; src.len()];
                out.convert_from_f32_slice(&src);
                vec_into_bytes(out)
            }
            (DType::F32, DType::BF16) => {
                let src = self.typed::<f32>()?;
                let mut out = vec![half::bf16::ZERO; src.len()];
                out.convert_from_f32_slice(&src);
                vec_into_bytes(out)
            }
            (DType::F16, DType::F32) => {
                let src = self.typed::<half::f16>()?;
                let mut out = vec![0f32; src.len()];
                src.convert_to_f32_slice(&mut out);
                vec_into_bytes(out)
            }
            (DType::BF16, DType::F32) => {
                let src = self.typed::<half::bf16>()?;
                let mut out = vec![0f32; src.len()];
                src.convert_to_f32_slice(&mut out);
                vec_into_bytes(out)
            }
            (_, DType::Bool) => {
                let out: Vec<u8> = with_element!(self.dtype, S => {
                    let src = self.typed::<S>()?;
                    src.iter().map(|&v| (v.to_f64() != 0.0) as u8).collect()
                });
                Bytes::from(out)
            }
            (from, to) if (from.is_int() || from == DType::Bool) && to.is_int() => {
                with_element!(from, S => with_element!(to, D => {
                    let src = self.typed::<S>()?;
                    let out: Vec<D> = src.iter().map(|&v| D::from_i128_wrapping(v.to_i128())).collect();
                    vec_into_bytes(out)
                }))
            }
            // Integers to f32 round once from the exact value (not via f64).
            (from, DType::F32) if from.is_int() || from == DType::Bool => {
                with_element!(from, S => {
                    let src = self.typed::<S>()?;
                    let out: Vec<f32> = src.iter().map(|&v| v.to_i128() as f32).collect();
                    vec_into_bytes(out)
                })
            }
            // Anything else to f16 / bf16: round to odd at a wider precision, then to
            // nearest even, which rounds once from the exact value (see `round_to_odd`).
            (from, DType::F16 | DType::BF16) => with_element!(from, S => {
                let src = self.typed::<S>()?;
                let exact = from.is_int() || from == DType::Bool;
                let odd = |v: S| -> f32 {
                    let x = if exact { round_to_odd::int_to_f64(v.to_i128()) } else { v.to_f64() };
                    round_to_odd::f64_to_f32(x)
                };
                if to == DType::F16 {
                    vec_into_bytes(src.iter().map(|&v| half::f16::from_f32(odd(v))).collect::<Vec<_>>())
                } else {
                    vec_into_bytes(src.iter().map(|&v| half::bf16::from_f32(odd(v))).collect::<Vec<_>>())
                }
            }),
            (from, to) => with_element!(from, S => with_element!(to, D => {
                let src = self.typed::<S>()?;
                let out: Vec<D> = src.iter().map(|&v| D::from_f64(v.to_f64())).collect();
                vec_into_bytes(out)
            })),
        };
        Tensor::from_bytes(to, self.shape.clone(), self.order, data)
    }

    /// The same logical tensor laid out in another memory order (one strided copy;
    /// a clone when the order is already right).
    pub fn to_order(&self, order: Order) -> Result<Tensor> {
        if order == self.order || self.shape.rank() < 2 {
            return Ok(Tensor {
                order,
                ..self.clone()
            });
        }
        let dims = self.shape.dims();
        let src_strides = self.order.strides(&self.shape)?;
        // The output is produced row-major over `out_dims`; a column-major result of
        // dims D is the row-major layout of reversed D.
        let (out_dims, strides): (Vec<usize>, Vec<usize>) = match order {
            Order::RowMajor => (dims.to_vec(), src_strides),
            Order::ColumnMajor => (
                dims.iter().rev().copied().collect(),
                src_strides.into_iter().rev().collect(),
            ),
        };
        let data = strided_copy(self.dtype, &self.data, &out_dims, &strides);
        Tensor::from_bytes(self.dtype, self.shape.clone(), order, data)
    }

    /// Reorders the axes: axis `i` of the result is axis `axes[i]` of `self`.
    /// The result has the same memory order as `self`.
    ///
    /// ```
    /// use tensorfmt_core::{Order, Tensor};
    /// let t = Tensor::from_vec((0..6).collect::<Vec<u8>>(), [2, 3], Order::RowMajor)?;
    /// let p = t.permute(&[1, 0])?;
    /// assert_eq!(p.dims(), &[3, 2]);
    /// assert_eq!(p.to_vec::<u8>()?, vec![0, 3, 1, 4, 2, 5]);
    /// assert!(t.permute(&[0, 0]).is_err());
    /// # Ok::<(), tensorfmt_core::Error>(())
    /// ```
    pub fn permute(&self, axes: &[usize]) -> Result<Tensor> {
        let rank = self.shape.rank();
        let mut seen = vec![false; rank];
        let valid = axes.len() == rank
            && axes
                .iter()
                .all(|&a| a < rank && !std::mem::replace(&mut seen[a], true));
        if !valid {
            return Err(Error::BadPermutation {
                axes: axes.to_vec(),
                rank,
            });
        }
        let dims = self.shape.dims();
        let src_strides = self.order.strides(&self.shape)?;
        let new_dims: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
        let new_strides: Vec<usize> = axes.iter().map(|&a| src_strides[a]).collect();
        let (out_dims, strides) = match self.order {
            Order::RowMajor => (new_dims.clone(), new_strides),
            Order::ColumnMajor => (
                new_dims.iter().rev().copied().collect(),
                new_strides.into_iter().rev().collect(),
            ),
        };
        let data = strided_copy(self.dtype, &self.data, &out_dims, &strides);
        Tensor::from_bytes(self.dtype, new_dims, self.order, data)
    }

    /// Summary statistics (min, max, mean, sum in f64, non-zeros, NaNs).
    pub fn stats(&self) -> Stats {
        with_element!(self.dtype, T => {
            match self.typed::<T>() {
                Ok(v) => Stats::of(&v),
                // Unreachable: with_element picks the tensor's own type.
                Err(_) => Stats::default(),
            }
        })
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({} {} {}, {} bytes)",
            self.dtype,
            self.shape,
            self.order,
            self.data.len()
        )
    }
}

fn align_of_dtype(d: DType) -> usize {
    with_element!(d, T => std::mem::align_of::<T>())
}

/// Copies elements of `dtype` from `src` into a new row-major buffer of `out_dims`,
/// where output axis `i` advances the source by `src_strides[i]` elements.
fn strided_copy(dtype: DType, src: &[u8], out_dims: &[usize], src_strides: &[usize]) -> Bytes {
    match dtype.size() {
        1 => Bytes::from(strided_copy_typed::<u8>(src, out_dims, src_strides)),
        2 => vec_into_bytes(strided_copy_typed::<u16>(src, out_dims, src_strides)),
        4 => vec_into_bytes(strided_copy_typed::<u32>(src, out_dims, src_strides)),
        _ => vec_into_bytes(strided_copy_typed::<u64>(src, out_dims, src_strides)),
    }
}

/// Reads element `i` of type `T` from little-endian bytes at any alignment.
#[inline]
fn load<T: Element>(src: &[u8], i: usize) -> T {
    let s = std::mem::size_of::<T>();
    bytemuck::pod_read_unaligned(&src[i * s..(i + 1) * s])
}

/// The strided copy behind `to_order` and `permute`. It reads the source bytes at
/// whatever alignment they have (mapped files put tensors at arbitrary offsets), so no
/// aligned staging copy is made.
fn strided_copy_typed<T: Element + Default>(
    src: &[u8],
    out_dims: &[usize],
    src_strides: &[usize],
) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let n: usize = out_dims.iter().product();
    let mut out = vec![T::default(); n];
    if n == 0 {
        return out;
    }
    // Drop unit axes and merge output axes that are contiguous in the source too.
    let mut dims: Vec<usize> = Vec::new();
    let mut strides: Vec<usize> = Vec::new();
    for (&d, &s) in out_dims.iter().zip(src_strides) {
        if d == 1 {
            continue;
        }
        if let (Some(ld), Some(ls)) = (dims.last_mut(), strides.last_mut()) {
            if *ls == s * d {
                *ld *= d;
                *ls = s;
                continue;
            }
        }
        dims.push(d);
        strides.push(s);
    }
    let r = dims.len();
    if r == 0 {
        out[0] = load(src, 0);
        return out;
    }
    let last = r - 1;
    if strides[last] == 1 {
        // Contiguous inner runs: one memcpy each.
        let run = dims[last];
        let mut idx = vec![0usize; last];
        for chunk in out.chunks_exact_mut(run) {
            let base: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
            bytemuck::cast_slice_mut::<T, u8>(chunk)
                .copy_from_slice(&src[base * size..(base + run) * size]);
            odometer(&mut idx, &dims[..last]);
        }
        return out;
    }
    // The source's unit-stride axis becomes output axis k. Copy in tiles over
    // (k, last), each moved as 8 x 8 register blocks: eight contiguous source reads of
    // eight elements, then eight contiguous output writes. Tiles are small (16) because
    // power-of-two matrix sides alias in the cache.
    let Some(k) = strides.iter().position(|&s| s == 1) else {
        // No unit stride (cannot happen for a dense source); plain gather.
        gather(src, &mut out, &dims, &strides);
        return out;
    };
    let mut out_strides = vec![1usize; r];
    for i in (0..last).rev() {
        out_strides[i] = out_strides[i + 1] * dims[i + 1];
    }
    let outer_axes: Vec<usize> = (0..last).filter(|&a| a != k).collect();
    let outer_dims: Vec<usize> = outer_axes.iter().map(|&a| dims[a]).collect();
    let outer_count: usize = outer_dims.iter().product();
    let mut idx = vec![0usize; outer_axes.len()];
    const TILE: usize = 16;
    const B: usize = 8;
    let (dk, dl, sl, ok) = (dims[k], dims[last], strides[last], out_strides[k]);
    for _ in 0..outer_count {
        let mut sbase = 0;
        let mut obase = 0;
        for (j, &a) in outer_axes.iter().enumerate() {
            sbase += idx[j] * strides[a];
            obase += idx[j] * out_strides[a];
        }
        if dl < B {
            // Few output columns (e.g. bc01 -> b01c, channels last): each column is a
            // contiguous source run, scattered down the output at stride `ok`.
            for j in 0..dl {
                let start = (sbase + j * sl) * size;
                let run = src[start..start + dk * size].chunks_exact(size);
                for (dst, e) in out[obase + j..].iter_mut().step_by(ok).zip(run) {
                    *dst = bytemuck::pod_read_unaligned(e);
                }
            }
            odometer(&mut idx, &outer_dims);
            continue;
        }
        if dk < B {
            // Few source rows (e.g. b01c -> bc01): each output row gathers one element
            // of every `sl`-element source group, from a region that stays in cache.
            for a in 0..dk {
                let o = obase + a * ok;
                let from = &src[(sbase + a) * size..];
                let picks = from.chunks(size).step_by(sl);
                for (dst, e) in out[o..o + dl].iter_mut().zip(picks) {
                    *dst = bytemuck::pod_read_unaligned(e);
                }
            }
            odometer(&mut idx, &outer_dims);
            continue;
        }
        for a0 in (0..dk).step_by(TILE) {
            let a1 = (a0 + TILE).min(dk);
            for b0 in (0..dl).step_by(TILE) {
                let b1 = (b0 + TILE).min(dl);
                let mut b = b0;
                while b + B <= b1 {
                    let mut a = a0;
                    while a + B <= a1 {
                        // blk[j][i] = source element (k = a + i, last = b + j)
                        let mut blk = [[T::default(); B]; B];
                        for (j, col) in blk.iter_mut().enumerate() {
                            let start = (sbase + a + (b + j) * sl) * size;
                            let run = &src[start..start + B * size];
                            for (x, e) in col.iter_mut().zip(run.chunks_exact(size)) {
                                *x = bytemuck::pod_read_unaligned(e);
                            }
                        }
                        #[allow(clippy::needless_range_loop)] // i indexes the block's inner axis
                        for i in 0..B {
                            let o = obase + (a + i) * ok + b;
                            for (j, dst) in out[o..o + B].iter_mut().enumerate() {
                                *dst = blk[j][i];
                            }
                        }
                        a += B;
                    }
                    for aa in a..a1 {
                        let o = obase + aa * ok + b;
                        for (j, dst) in out[o..o + B].iter_mut().enumerate() {
                            *dst = load(src, sbase + aa + (b + j) * sl);
                        }
                    }
                    b += B;
                }
                for bb in b..b1 {
                    for aa in a0..a1 {
                        out[obase + aa * ok + bb] = load(src, sbase + aa + bb * sl);
                    }
                }
            }
        }
        odometer(&mut idx, &outer_dims);
    }
    out
}

fn gather<T: Element>(src: &[u8], out: &mut [T], dims: &[usize], strides: &[usize]) {
    let mut idx = vec![0usize; dims.len()];
    for o in out.iter_mut() {
        let s: usize = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
        *o = load(src, s);
        odometer(&mut idx, dims);
    }
}

/// Advances a row-major multi-index by one.
fn odometer(idx: &mut [usize], dims: &[usize]) {
    for i in (0..idx.len()).rev() {
        idx[i] += 1;
        if idx[i] < dims[i] {
            return;
        }
        idx[i] = 0;
    }
}

/// Round-to-odd helpers for casts that narrow in two steps: rounding to odd at a
/// precision of at least `p + 2` bits, then to nearest even at `p` bits, gives the
/// correctly rounded result (Boldo & Melquiond, "Emulation of FMA and correctly rounded
/// sums: proved algorithms using rounding to odd", 2008). f32 has 24 bits, enough for
/// f16 (11) and bf16 (8); f64 has 53, enough for f32. (`half`'s own f64 -> f16/bf16
/// conversions go through f32 or drop the low mantissa bits, which rounds twice.)
mod round_to_odd {
    /// `x` truncated toward zero to f32, with the last bit set when that was inexact.
    pub(super) fn f64_to_f32(x: f64) -> f32 {
        if x.is_nan() {
            return f32::NAN;
        }
        let t = x as f32; // to nearest even
        if f64::from(t) == x {
            return t;
        }
        let mut bits = t.to_bits();
        if f64::from(t).abs() > x.abs() {
            bits -= 1; // one step toward zero (also turns an overflow to inf into MAX)
        }
        f32::from_bits(bits | 1)
    }

    /// `v` truncated toward zero to f64, with the last bit set when that was inexact.
    pub(super) fn int_to_f64(v: i128) -> f64 {
        let t = v as f64; // to nearest even
                          // |v| < 2^127, so `t` is at most 2^127 and `t as i128` saturates only there.
        if t as i128 == v && t.abs() < 2f64.powi(127) {
            return t;
        }
        let mut bits = t.to_bits();
        if t.abs() >= 2f64.powi(127) || (t as i128).unsigned_abs() > v.unsigned_abs() {
            bits -= 1;
        }
        f64::from_bits(bits | 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn construction_checks_lengths() {
        assert!(matches!(
            Tensor::from_vec(vec![1f32; 5], [2, 3], Order::RowMajor),
            Err(Error::ByteLength { .. })
        ));
        assert!(matches!(
            Tensor::from_bytes(DType::F32, [2], Order::RowMajor, vec![0u8; 7]),
            Err(Error::ByteLength { .. })
        ));
        assert!(matches!(
            Tensor::zeros(DType::F64, [usize::MAX, 2], Order::RowMajor),
            Err(Error::Overflow { .. })
        ));
        let s = Tensor::from_vec(vec![7i64], Shape::scalar(), Order::RowMajor).unwrap();
        assert_eq!(s.get::<i64>(&[]).unwrap(), 7);
    }

    #[test]
    fn misaligned_views_error_and_copies_work() {
        let raw = Bytes::from(vec![0u8, 0, 0, 128, 63, 0, 0, 0, 64]);
        let t = Tensor::from_bytes(DType::F32, [2], Order::RowMajor, raw.slice(1..9)).unwrap();
        // One of the two views is misaligned whatever the allocation's alignment.
        let t2 = Tensor::from_bytes(DType::F32, [2], Order::RowMajor, {
            let mut v = vec![0u8; 9];
            v[1..].copy_from_slice(&raw[1..9]);
            Bytes::from(v).slice(1..9)
        })
        .unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert_eq!(t2.typed::<f32>().unwrap().to_vec(), vec![1.0, 2.0]);
        let owned = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor).unwrap();
        let shifted =
            Tensor::from_bytes(DType::U8, [7], Order::RowMajor, owned.bytes().slice(1..8)).unwrap();
        let as_f32 = Tensor::from_bytes(
            DType::F32,
            [1],
            Order::RowMajor,
            shifted.bytes().slice(0..4),
        )
        .unwrap();
        assert!(matches!(
            as_f32.as_slice::<f32>(),
            Err(Error::Misaligned { .. })
        ));
        assert!(as_f32.to_vec::<f32>().is_ok());
    }

    #[test]
    fn dtype_mismatch_is_an_error() {
        let t = Tensor::from_vec(vec![1f32], [1], Order::RowMajor).unwrap();
        assert!(matches!(
            t.as_slice::<f64>(),
            Err(Error::DTypeMismatch { .. })
        ));
        assert!(t.get::<i32>(&[0]).is_err());
        assert!(t.get::<f32>(&[1]).is_err());
    }

    /// Casts to a narrower float round once, from the exact source value, as numpy's
    /// `astype` does (issue 26 item 5): no detour through f64 or f32.
    #[test]
    fn narrowing_float_casts_round_once() {
        // 2^60 + 2^36 + 1: via f64 it becomes 2^60 + 2^36, a tie that rounds to even.
        let v = (1i64 << 60) + (1 << 36) + 1;
        let want = 1.152_921_6e18_f32; // 2^60 + 2^37, the nearest f32
        assert_eq!(want.to_bits(), ((1u64 << 60) as f32).to_bits() + 1);
        let i = Tensor::from_vec(vec![v, -v], [2], Order::RowMajor).unwrap();
        assert_eq!(
            i.cast(DType::F32).unwrap().to_vec::<f32>().unwrap(),
            vec![want, -want]
        );
        let u = Tensor::from_vec(vec![v as u64], [1], Order::RowMajor).unwrap();
        assert_eq!(
            u.cast(DType::F32).unwrap().to_vec::<f32>().unwrap(),
            vec![want]
        );
        // 1 + 2^-11 + 2^-40: via f32 it becomes 1 + 2^-11, a tie that rounds to 1.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        let f = Tensor::from_vec(vec![x, -x], [2], Order::RowMajor).unwrap();
        let h = f.cast(DType::F16).unwrap().to_vec::<half::f16>().unwrap();
        assert_eq!(
            h,
            vec![
                half::f16::from_f32(1.000_976_6),
                half::f16::from_f32(-1.000_976_6)
            ]
        );
        // bf16 (8 significant bits): 1 + 2^-8 + 2^-40 rounds up, and the i64
        // 2^60 + 2^52 + 1 (a tie once rounded to f64) rounds up too.
        let y = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        let b = Tensor::from_vec(vec![y], [1], Order::RowMajor).unwrap();
        assert_eq!(
            b.cast(DType::BF16).unwrap().to_vec::<half::bf16>().unwrap(),
            vec![half::bf16::from_f32(1.0078125)]
        );
        let w = (1i64 << 60) + (1 << 52) + 1;
        let bi = Tensor::from_vec(vec![w], [1], Order::RowMajor).unwrap();
        assert_eq!(
            bi.cast(DType::BF16)
                .unwrap()
                .to_vec::<half::bf16>()
                .unwrap()[0]
                .to_f64(),
            2f64.powi(60) + 2f64.powi(53)
        );
        // Edge values keep numpy's results: overflow to inf, ties to even, subnormals,
        // NaN stays NaN, signed zero.
        let e = Tensor::from_vec(
            vec![
                65520.0f64,
                65519.99,
                2f64.powi(-25),
                2f64.powi(-25) * 1.000001,
                f64::NAN,
                -0.0,
                1e300,
            ],
            [7],
            Order::RowMajor,
        )
        .unwrap();
        let h = e.cast(DType::F16).unwrap().to_vec::<half::f16>().unwrap();
        assert!(h[0].is_infinite() && h[1] == half::f16::MAX);
        assert_eq!(h[2].to_bits(), 0);
        assert_eq!(h[3].to_bits(), 1);
        assert!(h[4].is_nan());
        assert_eq!(h[5].to_bits(), 0x8000);
        assert!(h[6].is_infinite());
        let ints =
            Tensor::from_vec(vec![65519i64, 65520, 2049, 2051], [4], Order::RowMajor).unwrap();
        let h = ints
            .cast(DType::F16)
            .unwrap()
            .to_vec::<half::f16>()
            .unwrap();
        assert_eq!(h[0], half::f16::MAX);
        assert!(h[1].is_infinite());
        assert_eq!((h[2].to_f64(), h[3].to_f64()), (2048.0, 2052.0));
    }

    /// Random f64 and i64 values: every cast to f16 / bf16 / f32 gives the nearest
    /// representable value (ties to even), checked exactly against both neighbours.
    #[test]
    fn narrowing_float_casts_are_nearest() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Nearest check in f64 arithmetic: both candidates and x are f64, the
        // differences of nearby values are exact (Sterbenz) or far from a tie.
        fn nearest(x: f64, r: f64, below: f64, above: f64, r_even: bool) -> bool {
            let d = (x - r).abs();
            let (db, da) = ((x - below).abs(), (x - above).abs());
            d < db.min(da) || (d == db.min(da) && (r_even || (d != db && d != da)))
        }
        for _ in 0..20000 {
            let bits = next();
            // f64 values near f16's range: exponent in [-26, 16].
            let e = (bits >> 52) % 43;
            let x = f64::from_bits((bits & 0x800f_ffff_ffff_ffff) | ((1023 + e - 26) << 52));
            let t = Tensor::from_vec(vec![x], [1], Order::RowMajor).unwrap();
            let h = t.cast(DType::F16).unwrap().to_vec::<half::f16>().unwrap()[0];
            if h.is_finite() {
                let b = h.to_bits();
                let step = |d: i32| half::f16::from_bits((b as i32 + d) as u16).to_f64();
                let (lo, hi) = if x >= 0.0 {
                    (step(-1), step(1))
                } else {
                    (step(1), step(-1))
                };
                assert!(nearest(x, h.to_f64(), lo, hi, b & 1 == 0), "{x:e} -> {h}");
            } else {
                assert!(x.abs() >= 65520.0, "{x:e} -> {h}");
            }
            let bf = t.cast(DType::BF16).unwrap().to_vec::<half::bf16>().unwrap()[0];
            let b = bf.to_bits();
            let step = |d: i32| half::bf16::from_bits((b as i32 + d) as u16).to_f64();
            let (lo, hi) = if x >= 0.0 {
                (step(-1), step(1))
            } else {
                (step(1), step(-1))
            };
            assert!(nearest(x, bf.to_f64(), lo, hi, b & 1 == 0), "{x:e} -> {bf}");
            // i64 -> f32: exact i128 arithmetic.
            let v = next() as i64 >> (next() % 40);
            let f = Tensor::from_vec(vec![v], [1], Order::RowMajor)
                .unwrap()
                .cast(DType::F32)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()[0];
            let fb = f.to_bits();
            let r = f as i128;
            let n = |d: i32| f32::from_bits((fb as i64 + d as i64) as u32) as i128;
            let (d, d1, d2) = (
                (v as i128 - r).abs(),
                (v as i128 - n(-1)).abs(),
                (v as i128 - n(1)).abs(),
            );
            assert!(
                d < d1.min(d2) || (d == d1.min(d2) && fb & 1 == 0),
                "{v} -> {f}"
            );
        }
    }

    #[test]
    fn casts() {
        let t = Tensor::from_vec(vec![-1.5f32, 0.0, 2.7, 300.0], [4], Order::RowMajor).unwrap();
        assert_eq!(
            t.cast(DType::I8).unwrap().to_vec::<i8>().unwrap(),
            vec![-1, 0, 2, 127]
        );
        assert_eq!(
            t.cast(DType::U8).unwrap().to_vec::<u8>().unwrap(),
            vec![0, 0, 2, 255]
        );
        assert_eq!(
            t.cast(DType::Bool).unwrap().to_vec::<u8>().unwrap(),
            vec![1, 0, 1, 1]
        );
        let i = Tensor::from_vec(vec![257i32, -1], [2], Order::RowMajor).unwrap();
        assert_eq!(
            i.cast(DType::U8).unwrap().to_vec::<u8>().unwrap(),
            vec![1, 255]
        );
        let big = Tensor::from_vec(vec![u64::MAX], [1], Order::RowMajor).unwrap();
        assert_eq!(
            big.cast(DType::I64).unwrap().to_vec::<i64>().unwrap(),
            vec![-1]
        );
        let b = Tensor::from_bools(&[true, false]);
        assert_eq!(
            b.cast(DType::F64).unwrap().to_vec::<f64>().unwrap(),
            vec![1.0, 0.0]
        );
        let h = t.cast(DType::BF16).unwrap().cast(DType::F64).unwrap();
        assert_eq!(h.to_vec::<f64>().unwrap()[3], 300.0);
    }

    #[test]
    fn order_and_permute() {
        let t =
            Tensor::from_vec((0..24).collect::<Vec<u16>>(), [2, 3, 4], Order::RowMajor).unwrap();
        let c = t.to_order(Order::ColumnMajor).unwrap();
        for idx in [[0, 0, 0], [1, 2, 3], [0, 1, 2], [1, 0, 3]] {
            assert_eq!(c.get::<u16>(&idx).unwrap(), t.get::<u16>(&idx).unwrap());
        }
        let p = t.permute(&[2, 0, 1]).unwrap();
        assert_eq!(p.dims(), &[4, 2, 3]);
        assert_eq!(
            p.get::<u16>(&[3, 1, 2]).unwrap(),
            t.get::<u16>(&[1, 2, 3]).unwrap()
        );
        let pc = c.permute(&[2, 0, 1]).unwrap();
        assert_eq!(pc.order(), Order::ColumnMajor);
        assert_eq!(pc.get::<u16>(&[3, 1, 2]).unwrap(), 23);
        assert!(matches!(
            t.permute(&[0, 1]),
            Err(Error::BadPermutation { .. })
        ));
        assert!(matches!(
            t.permute(&[0, 1, 3]),
            Err(Error::BadPermutation { .. })
        ));
        assert!(t.reshape([6, 4]).is_ok());
        assert!(matches!(t.reshape([5, 5]), Err(Error::BadReshape { .. })));
    }

    #[test]
    fn large_transpose_uses_tiles_correctly() {
        let (r, c) = (67, 45);
        let t = Tensor::from_vec(
            (0..(r * c) as u32).collect::<Vec<_>>(),
            [r, c],
            Order::RowMajor,
        )
        .unwrap();
        let p = t.permute(&[1, 0]).unwrap();
        let v = p.to_vec::<u32>().unwrap();
        for i in 0..c {
            for j in 0..r {
                assert_eq!(v[i * r + j], (j * c + i) as u32);
            }
        }
    }

    /// `to_order` against element-wise indexing, at odd sizes (block remainders) and at
    /// every byte offset (unaligned source bytes, as in a mapped file).
    #[test]
    fn to_order_at_odd_sizes_and_offsets() {
        for (rows, cols) in [
            (1, 1),
            (1, 7),
            (5, 1),
            (3, 2),
            (8, 8),
            (9, 17),
            (33, 31),
            (64, 65),
            (100, 3),
            (130, 72),
        ] {
            for shift in 0..4 {
                let vals: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5 - 3.0).collect();
                let mut raw = vec![0u8; shift];
                for v in &vals {
                    raw.extend_from_slice(&v.to_le_bytes());
                }
                let src = Bytes::from(raw).slice(shift..);
                let col =
                    Tensor::from_bytes(DType::F32, [rows, cols], Order::ColumnMajor, src).unwrap();
                let row = col.to_order(Order::RowMajor).unwrap();
                let vals = &vals;
                let expected: Vec<f32> = (0..rows)
                    .flat_map(|r| (0..cols).map(move |c| vals[c * rows + r]))
                    .collect();
                assert_eq!(
                    row.to_vec::<f32>().unwrap(),
                    expected,
                    "{rows}x{cols}+{shift}"
                );
            }
        }
    }

    /// Every permutation of a rank-4 tensor with small and large axes (the spaces'
    /// channel moves hit the few-rows and few-columns paths), against `get`.
    #[test]
    fn permute_all_axis_orders_against_get() {
        let dims = [11usize, 3, 9, 20];
        let n: usize = dims.iter().product();
        for order in [Order::RowMajor, Order::ColumnMajor] {
            let t = Tensor::from_vec((0..n as u32).collect::<Vec<_>>(), dims, order).unwrap();
            let mut axes = [0usize, 1, 2, 3];
            let mut perms = Vec::new();
            permutations(&mut axes, 0, &mut perms);
            assert_eq!(perms.len(), 24);
            for p in perms {
                let q = t.permute(&p).unwrap();
                let mut idx = vec![0usize; 4];
                for _ in 0..n {
                    let src: Vec<usize> = (0..4)
                        .map(|a| idx[p.iter().position(|&x| x == a).unwrap()])
                        .collect();
                    assert_eq!(
                        q.get::<u32>(&idx).unwrap(),
                        t.get::<u32>(&src).unwrap(),
                        "{p:?} {idx:?} {order:?}"
                    );
                    odometer(&mut idx, q.dims());
                }
            }
        }
    }

    fn permutations(a: &mut [usize; 4], k: usize, out: &mut Vec<[usize; 4]>) {
        if k == a.len() {
            out.push(*a);
            return;
        }
        for i in k..a.len() {
            a.swap(k, i);
            permutations(a, k + 1, out);
            a.swap(k, i);
        }
    }

    fn arb_dims() -> impl Strategy<Value = Vec<usize>> {
        prop::collection::vec(1usize..5, 0..5)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn order_round_trip(dims in arb_dims()) {
            let n: usize = dims.iter().product();
            let t = Tensor::from_vec((0..n as i32).collect::<Vec<_>>(), dims.clone(), Order::RowMajor).unwrap();
            let back = t.to_order(Order::ColumnMajor).unwrap().to_order(Order::RowMajor).unwrap();
            prop_assert_eq!(back, t);
        }

        #[test]
        fn permute_inverse(dims in arb_dims(), seed in any::<u64>(), col in any::<bool>()) {
            let n: usize = dims.iter().product();
            let order = if col { Order::ColumnMajor } else { Order::RowMajor };
            let t = Tensor::from_vec((0..n as i32).collect::<Vec<_>>(), dims.clone(), order).unwrap();
            let mut axes: Vec<usize> = (0..dims.len()).collect();
            let mut s = seed;
            for i in (1..axes.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                axes.swap(i, (s >> 33) as usize % (i + 1));
            }
            let mut inv = vec![0; axes.len()];
            for (i, &a) in axes.iter().enumerate() { inv[a] = i; }
            let back = t.permute(&axes).unwrap().permute(&inv).unwrap();
            prop_assert_eq!(back, t);
        }

        #[test]
        fn f16_round_trip_exact(bits in prop::collection::vec(any::<u16>(), 0..64)) {
            let vals: Vec<half::f16> = bits.into_iter().map(half::f16::from_bits).filter(|v| !v.is_nan()).collect();
            let n = vals.len();
            let t = Tensor::from_vec(vals, [n], Order::RowMajor).unwrap();
            let back = t.cast(DType::F32).unwrap().cast(DType::F16).unwrap();
            prop_assert_eq!(back, t);
        }

        #[test]
        fn int_cast_round_trip(vals in prop::collection::vec(any::<i16>(), 0..64)) {
            let n = vals.len();
            let t = Tensor::from_vec(vals, [n], Order::RowMajor).unwrap();
            for d in [DType::I32, DType::I64, DType::F32, DType::F64] {
                prop_assert_eq!(&t.cast(d).unwrap().cast(DType::I16).unwrap(), &t);
            }
        }
    }
}
