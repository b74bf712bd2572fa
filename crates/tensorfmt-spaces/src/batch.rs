//! [`Batch`]: the data of one mini-batch, shaped like its space, and the column
//! slicing / concatenation used by vector <-> composite conversions.

use bytes::Bytes;

use std::fmt::Display;

use super::error::{Result, SpaceError};
use tensorfmt_core::{DType, Order, Tensor};

/// One mini-batch: a tensor for an elementary space, a tuple of batches (same nesting)
/// for a [`CompositeSpace`](super::CompositeSpace), nothing for the
/// [`NullSpace`](super::NullSpace).
///
/// ```
/// use tensorfmt_core::{DType, Order, Tensor};
/// use tensorfmt_spaces::Batch;
/// let x = Tensor::zeros(DType::F32, [4, 3], Order::RowMajor)?;
/// let b = Batch::tuple([Batch::from(x.clone()), Batch::None]);
/// assert_eq!(b.children().unwrap()[0].as_tensor(), Some(&x));
/// assert_eq!(b.kind(), "tuple of 2");
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Batch {
    /// Data for an elementary space.
    Tensor(Tensor),
    /// Data for a composite space, one entry per component.
    Tuple(Vec<Batch>),
    /// No data (the null space).
    None,
}

impl Batch {
    /// A tuple batch.
    pub fn tuple(items: impl IntoIterator<Item = Batch>) -> Batch {
        Batch::Tuple(items.into_iter().collect())
    }

    /// The tensor, for an elementary batch.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Batch::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The tensor, for an elementary batch.
    pub fn into_tensor(self) -> Option<Tensor> {
        match self {
            Batch::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The items, for a tuple batch.
    pub fn children(&self) -> Option<&[Batch]> {
        match self {
            Batch::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// A short description for error messages (`f32 tensor [4, 3]`, `tuple of 2`, `none`).
    pub fn kind(&self) -> String {
        match self {
            Batch::Tensor(t) => format!("{} tensor {}", t.dtype(), t.shape()),
            Batch::Tuple(v) => format!("tuple of {}", v.len()),
            Batch::None => "none".to_string(),
        }
    }
}

impl From<Tensor> for Batch {
    fn from(t: Tensor) -> Batch {
        Batch::Tensor(t)
    }
}

/// Casts to `dtype` when given (a dtype-agnostic target keeps the batch dtype).
pub(crate) fn cast_to(t: Tensor, dtype: Option<DType>) -> Result<Tensor> {
    match dtype {
        Some(d) if d != t.dtype() => Ok(t.cast(d)?),
        _ => Ok(t),
    }
}

/// Splits a row-major `(n, sum(widths))` matrix into `(n, width)` matrices, left to
/// right: one bulk copy per row and piece (a clone when there is a single piece).
pub(crate) fn split_columns(t: &Tensor, widths: &[usize]) -> Result<Vec<Tensor>> {
    let t = t.to_order(Order::RowMajor)?;
    let (n, total) = (t.dims()[0], t.dims()[1]);
    if widths.len() == 1 {
        return Ok(vec![t]);
    }
    let es = t.dtype().size();
    let src: &[u8] = t.bytes();
    let row_bytes = total * es;
    let mut out = Vec::with_capacity(widths.len());
    let mut start = 0usize;
    for &w in widths {
        let wb = w * es;
        let mut buf = Vec::with_capacity(n * wb);
        for r in 0..n {
            let o = r * row_bytes + start;
            buf.extend_from_slice(&src[o..o + wb]);
        }
        out.push(Tensor::from_bytes(
            t.dtype(),
            [n, w],
            Order::RowMajor,
            Bytes::from(buf),
        )?);
        start += wb;
    }
    Ok(out)
}

/// Concatenates `(n, w_k)` matrices of one dtype along axis 1 into a row-major matrix.
pub(crate) fn concat_columns(pieces: &[Tensor], n: usize, dtype: DType) -> Result<Tensor> {
    if let [one] = pieces {
        return Ok(one.to_order(Order::RowMajor)?);
    }
    let es = dtype.size();
    let rows: Vec<Tensor> = pieces
        .iter()
        .map(|p| p.to_order(Order::RowMajor))
        .collect::<tensorfmt_core::Result<_>>()?;
    let total: usize = rows.iter().map(|p| p.dims()[1]).sum();
    let mut buf = Vec::with_capacity(n * total * es);
    for r in 0..n {
        for p in &rows {
            let wb = p.dims()[1] * es;
            buf.extend_from_slice(&p.bytes()[r * wb..(r + 1) * wb]);
        }
    }
    Ok(Tensor::from_bytes(
        dtype,
        [n, total],
        Order::RowMajor,
        Bytes::from(buf),
    )?)
}

/// A batch of rows of `width` values (Vector and Index spaces): rank 2, axis 1 `width`.
pub(crate) fn check_rows(space: &dyn Display, t: &Tensor, width: usize) -> Result<()> {
    if t.shape().rank() != 2 {
        return Err(SpaceError::RankMismatch {
            space: space.to_string(),
            expected: 2,
            actual: t.shape().rank(),
        });
    }
    if t.dims()[1] != width {
        return Err(SpaceError::ShapeMismatch {
            space: space.to_string(),
            axis: 1,
            label: "width",
            expected: width,
            actual: t.dims()[1],
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_concat_are_inverse() {
        let t = Tensor::from_vec((0..12).collect::<Vec<i16>>(), [2, 6], Order::RowMajor).unwrap();
        let parts = split_columns(&t, &[1, 0, 3, 2]).unwrap();
        assert_eq!(parts[0].to_vec::<i16>().unwrap(), vec![0, 6]);
        assert_eq!(parts[1].dims(), &[2, 0]);
        assert_eq!(parts[2].to_vec::<i16>().unwrap(), vec![1, 2, 3, 7, 8, 9]);
        assert_eq!(parts[3].to_vec::<i16>().unwrap(), vec![4, 5, 10, 11]);
        assert_eq!(concat_columns(&parts, 2, DType::I16).unwrap(), t);
        let c = t.to_order(Order::ColumnMajor).unwrap();
        assert_eq!(split_columns(&c, &[6]).unwrap()[0], t);
        assert_eq!(
            split_columns(&c, &[3, 3]).unwrap(),
            split_columns(&t, &[3, 3]).unwrap()
        );
    }
}
