//! [`IndexSpace`]: a batch is an `(n, dim)` matrix of integer labels in `[0, max_labels)`.

use bytes::Bytes;

use super::batch::check_rows;
use super::dtype_rule::{check_cast, resolve};
use super::error::{Result, SpaceError};
use tensorfmt_core::{DType, Order, Tensor};

/// A batch of `dim` integer labels per example, each in `[0, max_labels)`.
///
/// Unlike Pylearn2, validation range-checks the labels: a negative label or one
/// `>= max_labels` is an error (upstream wraps negatives silently).
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// use tensorfmt_spaces::{IndexSpace, OneHot};
/// let s = IndexSpace::new(5, 3)?;
/// assert_eq!(s.to_string(), "IndexSpace(dim=3, max_labels=5, dtype=int64)");
/// let labels = Tensor::from_vec(vec![4i64, 0, 2], [1, 3], Order::RowMajor)?;
/// let merged = s.one_hot(&labels, OneHot::Merge, None)?;
/// assert_eq!(merged.to_vec::<f32>()?, vec![1.0, 0.0, 1.0, 0.0, 1.0]);
/// let bad = Tensor::from_vec(vec![4i64, 0, 5], [1, 3], Order::RowMajor)?;
/// assert!(s.validate(&bad).is_err());
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexSpace {
    max_labels: usize,
    dim: usize,
    dtype: Option<DType>,
}

/// How [`IndexSpace::one_hot`] lays out the labels of one example.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OneHot {
    /// Width `max_labels`: a 1 in column `label` for each label of the row (multi-hot;
    /// duplicates are capped at 1).
    Merge,
    /// Width `dim * max_labels`: a 1 in column `j * max_labels + label_j` for each
    /// position `j` (one-hot blocks in position order).
    Concatenate,
}

impl IndexSpace {
    /// `dim` labels per example in `[0, max_labels)`, dtype `i64`. Both must be at least
    /// 1 and `dim * max_labels` must fit in `usize`.
    pub fn new(max_labels: usize, dim: usize) -> Result<IndexSpace> {
        if max_labels == 0 || dim == 0 {
            return Err(SpaceError::InvalidArgument(format!(
                "IndexSpace needs max_labels >= 1 and dim >= 1, got max_labels={max_labels}, dim={dim}"
            )));
        }
        if dim.checked_mul(max_labels).is_none() {
            return Err(SpaceError::InvalidArgument(format!(
                "IndexSpace one-hot width {dim} x {max_labels} overflows"
            )));
        }
        Ok(IndexSpace {
            max_labels,
            dim,
            dtype: Some(DType::I64),
        })
    }

    /// The same space with another dtype: an integer dtype, or `None` (any integer).
    pub fn with_dtype(self, dtype: Option<DType>) -> Result<IndexSpace> {
        if let Some(d) = dtype {
            if !d.is_int() {
                return Err(SpaceError::InvalidArgument(format!(
                    "the dtype of an IndexSpace must be an integer type, not {d}"
                )));
            }
        }
        Ok(IndexSpace { dtype, ..self })
    }

    /// Number of distinct labels.
    pub fn max_labels(&self) -> usize {
        self.max_labels
    }

    /// Labels per example; also the total dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The dtype (`None` = any integer).
    pub fn dtype(&self) -> Option<DType> {
        self.dtype
    }

    /// Width of the one-hot form of one example in `mode`.
    pub fn one_hot_width(&self, mode: OneHot) -> usize {
        match mode {
            OneHot::Merge => self.max_labels,
            // Checked at construction.
            OneHot::Concatenate => self.dim * self.max_labels,
        }
    }

    /// Checks a batch: the dtype rule (an integer batch when the dtype is any), rank 2,
    /// width `dim`, then every label in `[0, max_labels)`.
    pub fn validate(&self, t: &Tensor) -> Result<()> {
        check_cast(self, t.dtype(), self.dtype)?;
        if !t.dtype().is_int() {
            return Err(SpaceError::WrongKind {
                space: self.to_string(),
                expected: "an integer tensor",
                actual: format!("{} tensor {}", t.dtype(), t.shape()),
            });
        }
        check_rows(self, t, self.dim)?;
        let max = self.max_labels as i128;
        if let Some(i) = labels(t)?.iter().position(|&l| l < 0 || l >= max) {
            return Err(SpaceError::LabelOutOfRange {
                space: self.to_string(),
                row: i / self.dim,
                position: i % self.dim,
                label: labels(t)?[i],
                max_labels: self.max_labels,
            });
        }
        Ok(())
    }

    /// The one-hot (`Concatenate`) or multi-hot (`Merge`) form of a label batch, as an
    /// `(n, width)` matrix of 0 and 1 in `dtype` (default: [`DEFAULT_FLOAT`](super::DEFAULT_FLOAT)).
    /// The batch is validated first.
    pub fn one_hot(&self, t: &Tensor, mode: OneHot, dtype: Option<DType>) -> Result<Tensor> {
        self.validate(t)?;
        let dtype = resolve(self, dtype, Some(super::DEFAULT_FLOAT))?;
        let n = t.dims()[0];
        let width = self.one_hot_width(mode);
        let len = n
            .checked_mul(width)
            .ok_or(tensorfmt_core::Error::Overflow {
                what: "one-hot batch size",
            })?;
        let mut out = vec![0u8; len];
        for (i, &l) in labels(t)?.iter().enumerate() {
            let (row, pos) = (i / self.dim, i % self.dim);
            // Validated: 0 <= l < max_labels.
            let col = match mode {
                OneHot::Merge => l as usize,
                OneHot::Concatenate => pos * self.max_labels + l as usize,
            };
            out[row * width + col] = 1;
        }
        let u8s = Tensor::from_bytes(DType::U8, [n, width], Order::RowMajor, Bytes::from(out))?;
        Ok(u8s.cast(dtype)?)
    }

    /// Zeros of shape `(n, dim)` in `dtype` or the space's dtype.
    pub fn origin_batch(&self, n: usize, dtype: Option<DType>) -> Result<Tensor> {
        let d = resolve(self, dtype, self.dtype)?;
        Ok(Tensor::zeros(d, [n, self.dim], Order::RowMajor)?)
    }

    /// One zero example, shape `(dim,)`.
    pub fn origin(&self, dtype: Option<DType>) -> Result<Tensor> {
        let d = resolve(self, dtype, self.dtype)?;
        Ok(Tensor::zeros(d, [self.dim], Order::RowMajor)?)
    }
}

/// The labels of an integer tensor in row-major order, exactly (as i128).
pub(crate) fn labels(t: &Tensor) -> Result<Vec<i128>> {
    let t = t.to_order(Order::RowMajor)?;
    Ok(tensorfmt_core::with_element!(t.dtype(), T => {
        t.typed::<T>()?.iter().map(|&v| tensorfmt_core::Element::to_i128(v)).collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab<T: tensorfmt_core::Element>(v: Vec<T>, dims: [usize; 2]) -> Tensor {
        Tensor::from_vec(v, dims, Order::RowMajor).unwrap()
    }

    #[test]
    fn construction() {
        assert!(IndexSpace::new(0, 1).is_err());
        assert!(IndexSpace::new(1, 0).is_err());
        assert!(IndexSpace::new(usize::MAX, 2).is_err());
        let s = IndexSpace::new(10, 1).unwrap();
        assert!(matches!(
            s.clone().with_dtype(Some(DType::F32)),
            Err(SpaceError::InvalidArgument(_))
        ));
        assert!(s.clone().with_dtype(Some(DType::Bool)).is_err());
        assert_eq!(
            s.clone().with_dtype(Some(DType::U8)).unwrap().dtype(),
            Some(DType::U8)
        );
        assert_eq!(s.clone().with_dtype(None).unwrap().dtype(), None);
    }

    #[test]
    fn validation_errors_in_order() {
        let s = IndexSpace::new(5, 2).unwrap();
        assert!(matches!(
            s.validate(&lab(vec![0f32, 1.0], [1, 2])),
            Err(SpaceError::DtypeUnsafe { .. })
        ));
        let any = s.clone().with_dtype(None).unwrap();
        assert!(matches!(
            any.validate(&lab(vec![0f32, 1.0], [1, 2])),
            Err(SpaceError::WrongKind { .. })
        ));
        assert!(matches!(
            s.validate(&Tensor::from_vec(vec![0i64, 1], [2], Order::RowMajor).unwrap()),
            Err(SpaceError::RankMismatch {
                expected: 2,
                actual: 1,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&lab(vec![0i64, 1, 2], [1, 3])),
            Err(SpaceError::ShapeMismatch {
                axis: 1,
                expected: 2,
                actual: 3,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&lab(vec![0i64, 1, 2, -1], [2, 2])),
            Err(SpaceError::LabelOutOfRange {
                row: 1,
                position: 1,
                label: -1,
                max_labels: 5,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&lab(vec![0i8, 5], [1, 2])),
            Err(SpaceError::LabelOutOfRange {
                row: 0,
                position: 1,
                label: 5,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&lab(vec![0u64, u64::MAX], [1, 2])),
            Err(SpaceError::LabelOutOfRange { .. })
        ));
        s.validate(&lab(vec![0u8, 4, 3, 3], [2, 2])).unwrap();
        s.validate(&lab(Vec::<i32>::new(), [0, 2])).unwrap();
    }

    #[test]
    fn spec_example_one_hot() {
        let s = IndexSpace::new(5, 3).unwrap();
        let row = lab(vec![4i64, 0, 2], [1, 3]);
        let c = s
            .one_hot(&row, OneHot::Concatenate, Some(DType::F64))
            .unwrap();
        let ones: Vec<usize> = c
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, &v)| v == 1.0)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(ones, vec![4, 5, 12]);
        // Duplicates are capped at 1 in the merged form.
        let dup = lab(vec![1i64, 1, 3], [1, 3]);
        let m = s.one_hot(&dup, OneHot::Merge, Some(DType::I32)).unwrap();
        assert_eq!(m.to_vec::<i32>().unwrap(), vec![0, 1, 0, 1, 0]);
        assert!(s
            .one_hot(&lab(vec![-1i64, 0, 0], [1, 3]), OneHot::Merge, None)
            .is_err());
    }

    #[test]
    fn origins() {
        let s = IndexSpace::new(5, 3).unwrap();
        assert_eq!(s.origin(None).unwrap().dims(), &[3]);
        assert_eq!(s.origin(None).unwrap().dtype(), DType::I64);
        assert_eq!(s.origin_batch(0, None).unwrap().dims(), &[0, 3]);
    }
}
