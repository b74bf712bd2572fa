//! [`VectorSpace`]: a batch is an `(n, dim)` matrix.

use super::batch::check_rows;
use super::dtype_rule::{check_cast, check_space_dtype, resolve, DEFAULT_FLOAT};
use super::error::Result;
use tensorfmt_core::{DType, Order, Tensor};

/// A batch of `dim`-dimensional vectors: a rank-2 tensor of shape `(n, dim)`.
///
/// Dense only (tensorfmt has no sparse tensors).
///
/// ```
/// use tensorfmt_core::{DType, Order, Tensor};
/// use tensorfmt_spaces::VectorSpace;
/// let s = VectorSpace::new(3).with_dtype(Some(DType::F64))?;
/// assert_eq!(s.to_string(), "VectorSpace(dim=3, dtype=float64)");
/// s.validate(&Tensor::zeros(DType::F32, [4, 3], Order::RowMajor)?)?;
/// assert!(s.validate(&Tensor::zeros(DType::F32, [4, 2], Order::RowMajor)?).is_err());
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VectorSpace {
    dim: usize,
    dtype: Option<DType>,
}

impl VectorSpace {
    /// A space of `dim`-vectors with the default float dtype ([`DEFAULT_FLOAT`]).
    pub fn new(dim: usize) -> VectorSpace {
        VectorSpace {
            dim,
            dtype: Some(DEFAULT_FLOAT),
        }
    }

    /// The same space with another dtype (`None` = any; `bool` is refused).
    pub fn with_dtype(self, dtype: Option<DType>) -> Result<VectorSpace> {
        check_space_dtype(dtype)?;
        Ok(VectorSpace { dtype, ..self })
    }

    /// The width of each example.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The dtype (`None` = any).
    pub fn dtype(&self) -> Option<DType> {
        self.dtype
    }

    /// Checks a batch: the dtype rule, rank 2, width `dim`.
    pub fn validate(&self, t: &Tensor) -> Result<()> {
        check_cast(self, t.dtype(), self.dtype)?;
        check_rows(self, t, self.dim)?;
        Ok(())
    }

    /// Zeros of shape `(n, dim)` in `dtype`, or the space's dtype when `None`.
    pub fn origin_batch(&self, n: usize, dtype: Option<DType>) -> Result<Tensor> {
        let d = resolve(self, dtype, self.dtype)?;
        Ok(Tensor::zeros(d, [n, self.dim], Order::RowMajor)?)
    }

    /// One zero example, shape `(dim,)`, in the space's dtype (or `dtype`).
    pub fn origin(&self, dtype: Option<DType>) -> Result<Tensor> {
        let d = resolve(self, dtype, self.dtype)?;
        Ok(Tensor::zeros(d, [self.dim], Order::RowMajor)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpaceError;

    fn t(dtype: DType, dims: &[usize]) -> Tensor {
        Tensor::zeros(dtype, dims, Order::RowMajor).unwrap()
    }

    #[test]
    fn validation_errors_in_order() {
        let s = VectorSpace::new(3).with_dtype(Some(DType::I32)).unwrap();
        // The dtype rule comes first, even before the rank.
        assert!(matches!(
            s.validate(&t(DType::F32, &[2])),
            Err(SpaceError::DtypeUnsafe { .. })
        ));
        assert!(matches!(
            s.validate(&t(DType::Bool, &[2, 3])),
            Err(SpaceError::DtypeUnsafe { .. })
        ));
        assert!(matches!(
            s.validate(&t(DType::I64, &[2])),
            Err(SpaceError::RankMismatch {
                expected: 2,
                actual: 1,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&t(DType::U8, &[2, 4])),
            Err(SpaceError::ShapeMismatch {
                axis: 1,
                expected: 3,
                actual: 4,
                ..
            })
        ));
        s.validate(&t(DType::U64, &[0, 3])).unwrap();
        // Float narrowing and int -> float are allowed.
        let f = VectorSpace::new(3).with_dtype(Some(DType::F16)).unwrap();
        f.validate(&t(DType::F64, &[1, 3])).unwrap();
        f.validate(&t(DType::I64, &[1, 3])).unwrap();
        f.validate(&t(DType::Bool, &[1, 3])).unwrap();
    }

    #[test]
    fn origins() {
        let s = VectorSpace::new(4);
        assert_eq!(s.origin_batch(0, None).unwrap().dims(), &[0, 4]);
        let o = s.origin_batch(2, Some(DType::I8)).unwrap();
        assert_eq!((o.dtype(), o.dims()), (DType::I8, &[2usize, 4][..]));
        assert_eq!(s.origin(None).unwrap().dims(), &[4]);
        assert_eq!(s.origin(None).unwrap().dtype(), DEFAULT_FLOAT);
        let any = VectorSpace::new(4).with_dtype(None).unwrap();
        assert!(matches!(
            any.origin_batch(1, None),
            Err(SpaceError::InvalidArgument(_))
        ));
        assert!(VectorSpace::new(1).with_dtype(Some(DType::Bool)).is_err());
        assert_ne!(any, s);
    }
}
