//! [`Conv2DSpace`]: a batch is a 4-D tensor with named axes `b`, `c`, `0`, `1`.

use super::axes::{Axes, Axis};
use super::dtype_rule::{check_cast, check_space_dtype, resolve, DEFAULT_FLOAT};
use super::error::{Result, SpaceError};
use tensorfmt_core::{DType, Order, Tensor};

/// A batch of `rows x cols` images with `channels` channels, as a rank-4 tensor whose
/// axes are laid out as [`Axes`] says (default `b 0 1 c`, NHWC).
///
/// ```
/// use tensorfmt_spaces::{Axes, Conv2DSpace};
/// let s = Conv2DSpace::new(32, 32, 3)?.with_axes(Axes::BC01);
/// assert_eq!(s.to_string(), "Conv2DSpace(shape=(32, 32), num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)");
/// assert_eq!(s.total_dimension(), 3072);
/// assert_eq!(s.batch_shape(256), [256, 3, 32, 32]);
/// assert!(Conv2DSpace::new(0, 32, 3).is_err());
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Conv2DSpace {
    rows: usize,
    cols: usize,
    channels: usize,
    axes: Axes,
    dtype: Option<DType>,
}

impl Conv2DSpace {
    /// A space of `rows x cols x channels` images, axes `b 0 1 c`, default float dtype.
    /// All three sizes must be positive and their product must fit in `usize`.
    pub fn new(rows: usize, cols: usize, channels: usize) -> Result<Conv2DSpace> {
        if rows == 0 || cols == 0 || channels == 0 {
            return Err(SpaceError::InvalidArgument(format!(
                "Conv2DSpace needs positive rows, cols and channels, got {rows}x{cols}x{channels}"
            )));
        }
        rows.checked_mul(cols)
            .and_then(|x| x.checked_mul(channels))
            .ok_or_else(|| {
                SpaceError::InvalidArgument(format!(
                    "Conv2DSpace {rows}x{cols}x{channels} has a total dimension that overflows"
                ))
            })?;
        Ok(Conv2DSpace {
            rows,
            cols,
            channels,
            axes: Axes::B01C,
            dtype: Some(DEFAULT_FLOAT),
        })
    }

    /// The same space with another axes order.
    pub fn with_axes(self, axes: Axes) -> Conv2DSpace {
        Conv2DSpace { axes, ..self }
    }

    /// The same space with another dtype (`None` = any; `bool` is refused).
    pub fn with_dtype(self, dtype: Option<DType>) -> Result<Conv2DSpace> {
        check_space_dtype(dtype)?;
        Ok(Conv2DSpace { dtype, ..self })
    }

    /// Image rows (axis `0`).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Image columns (axis `1`).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Channels (axis `c`).
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The axes order.
    pub fn axes(&self) -> Axes {
        self.axes
    }

    /// The dtype (`None` = any).
    pub fn dtype(&self) -> Option<DType> {
        self.dtype
    }

    /// `rows * cols * channels` (checked at construction).
    pub fn total_dimension(&self) -> usize {
        self.rows * self.cols * self.channels
    }

    /// Length of `axis` in a batch of `n` examples.
    pub fn axis_len(&self, axis: Axis, n: usize) -> usize {
        match axis {
            Axis::Batch => n,
            Axis::Channel => self.channels,
            Axis::Row => self.rows,
            Axis::Col => self.cols,
        }
    }

    /// The shape of a batch of `n` examples, in axes order.
    pub fn batch_shape(&self, n: usize) -> [usize; 4] {
        self.axes.as_array().map(|a| self.axis_len(a, n))
    }

    /// Checks a batch: the dtype rule, rank 4, then the channel, row and column axis
    /// lengths (the batch axis may have any length).
    pub fn validate(&self, t: &Tensor) -> Result<()> {
        check_cast(self, t.dtype(), self.dtype)?;
        if t.shape().rank() != 4 {
            return Err(SpaceError::RankMismatch {
                space: self.to_string(),
                expected: 4,
                actual: t.shape().rank(),
            });
        }
        for (axis, label) in [
            (Axis::Channel, "channels"),
            (Axis::Row, "rows"),
            (Axis::Col, "cols"),
        ] {
            let i = self.axes.position(axis);
            let expected = self.axis_len(axis, 0);
            if t.dims()[i] != expected {
                return Err(SpaceError::ShapeMismatch {
                    space: self.to_string(),
                    axis: i,
                    label,
                    expected,
                    actual: t.dims()[i],
                });
            }
        }
        Ok(())
    }

    /// Zeros for `n` examples (n = 0 allowed) laid out in axes order, in `dtype` or the
    /// space's dtype.
    pub fn origin_batch(&self, n: usize, dtype: Option<DType>) -> Result<Tensor> {
        let d = resolve(self, dtype, self.dtype)?;
        Ok(Tensor::zeros(d, self.batch_shape(n), Order::RowMajor)?)
    }

    /// One zero example: the axis lengths in axes order with `b` dropped.
    pub fn origin(&self, dtype: Option<DType>) -> Result<Tensor> {
        let d = resolve(self, dtype, self.dtype)?;
        let dims: Vec<usize> = self
            .axes
            .as_array()
            .into_iter()
            .filter(|&a| a != Axis::Batch)
            .map(|a| self.axis_len(a, 0))
            .collect();
        Ok(Tensor::zeros(d, dims, Order::RowMajor)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dtype: DType, dims: &[usize]) -> Tensor {
        Tensor::zeros(dtype, dims, Order::RowMajor).unwrap()
    }

    #[test]
    fn construction() {
        assert!(Conv2DSpace::new(3, 0, 1).is_err());
        assert!(Conv2DSpace::new(3, 2, 0).is_err());
        assert!(matches!(
            Conv2DSpace::new(usize::MAX, 2, 1),
            Err(SpaceError::InvalidArgument(_))
        ));
        let a = Conv2DSpace::new(3, 2, 2).unwrap();
        assert_eq!(a.axes(), Axes::B01C);
        // Same data in another axes order is another space.
        assert_ne!(a, a.clone().with_axes(Axes::C01B));
        assert!(a.clone().with_dtype(Some(DType::Bool)).is_err());
    }

    #[test]
    fn validation_errors_in_order() {
        let s = Conv2DSpace::new(3, 2, 5)
            .unwrap()
            .with_axes(Axes::C01B)
            .with_dtype(Some(DType::U8))
            .unwrap();
        assert!(matches!(
            s.validate(&t(DType::F32, &[5, 3, 2, 7])),
            Err(SpaceError::DtypeUnsafe { .. })
        ));
        assert!(matches!(
            s.validate(&t(DType::U8, &[5, 3, 2])),
            Err(SpaceError::RankMismatch {
                expected: 4,
                actual: 3,
                ..
            })
        ));
        // Channels are checked before rows and cols.
        assert!(matches!(
            s.validate(&t(DType::U8, &[4, 9, 9, 7])),
            Err(SpaceError::ShapeMismatch {
                axis: 0,
                label: "channels",
                expected: 5,
                actual: 4,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&t(DType::U8, &[5, 9, 9, 7])),
            Err(SpaceError::ShapeMismatch {
                axis: 1,
                label: "rows",
                expected: 3,
                ..
            })
        ));
        assert!(matches!(
            s.validate(&t(DType::U8, &[5, 3, 9, 7])),
            Err(SpaceError::ShapeMismatch {
                axis: 2,
                label: "cols",
                expected: 2,
                ..
            })
        ));
        s.validate(&t(DType::I64, &[5, 3, 2, 7])).unwrap();
        s.validate(&t(DType::U8, &[5, 3, 2, 0])).unwrap();
    }

    #[test]
    fn origins_follow_axes() {
        let s = Conv2DSpace::new(3, 2, 5).unwrap().with_axes(Axes::C01B);
        assert_eq!(s.origin_batch(0, None).unwrap().dims(), &[5, 3, 2, 0]);
        assert_eq!(s.origin_batch(4, None).unwrap().dims(), &[5, 3, 2, 4]);
        assert_eq!(s.origin(None).unwrap().dims(), &[5, 3, 2]);
        let bc01 = s
            .with_axes(Axes::BC01)
            .with_dtype(Some(DType::F64))
            .unwrap();
        assert_eq!(bc01.origin(None).unwrap().dims(), &[5, 3, 2]);
        assert_eq!(bc01.origin_batch(1, None).unwrap().dtype(), DType::F64);
    }
}
