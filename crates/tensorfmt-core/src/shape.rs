//! [`Shape`] (any rank, overflow-checked) and memory [`Order`].

use std::fmt;

use crate::{Error, Result};

/// The extent of each axis of a tensor. Rank 0 (a scalar, one element) is allowed.
///
/// Element counts are computed with checked arithmetic: a shape read from a hostile
/// header cannot make us overflow.
///
/// ```
/// use tensorfmt_core::Shape;
/// let s = Shape::new([2, 3, 4]);
/// assert_eq!(s.rank(), 3);
/// assert_eq!(s.numel().unwrap(), 24);
/// assert_eq!(Shape::scalar().numel().unwrap(), 1);
/// assert_eq!(s.to_string(), "[2, 3, 4]");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(Vec<usize>);

impl Shape {
    /// A shape from its dims.
    pub fn new(dims: impl Into<Vec<usize>>) -> Shape {
        Shape(dims.into())
    }

    /// The rank-0 shape.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    /// The dims.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for rank 0), or [`Error::Overflow`].
    pub fn numel(&self) -> Result<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| {
            acc.checked_mul(d).ok_or(Error::Overflow {
                what: "element count",
            })
        })
    }

    /// Number of bytes for elements of `elem_size` bytes, or [`Error::Overflow`].
    pub fn byte_len(&self, elem_size: usize) -> Result<usize> {
        self.numel()?.checked_mul(elem_size).ok_or(Error::Overflow {
            what: "byte length",
        })
    }

    /// Consumes the shape, returning its dims.
    pub fn into_dims(self) -> Vec<usize> {
        self.0
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Shape {
        Shape(v)
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Shape {
        Shape(v.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Shape {
        Shape(v.to_vec())
    }
}

impl AsRef<[usize]> for Shape {
    fn as_ref(&self) -> &[usize] {
        &self.0
    }
}

/// How a tensor's elements are laid out in memory.
///
/// ```
/// use tensorfmt_core::{Order, Shape};
/// let s = Shape::new([2, 3]);
/// assert_eq!(Order::RowMajor.strides(&s).unwrap(), vec![3, 1]);
/// assert_eq!(Order::ColumnMajor.strides(&s).unwrap(), vec![1, 2]);
/// assert_eq!(Order::ColumnMajor.offset(&s, &[1, 2]).unwrap(), 5);
/// assert!(Order::RowMajor.offset(&s, &[2, 0]).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// C order: the last axis varies fastest (numpy's default).
    #[default]
    RowMajor,
    /// Fortran order: the first axis varies fastest (primitiv, Matlab).
    ColumnMajor,
}

impl Order {
    /// Element strides (in elements, not bytes) of `shape` in this order.
    pub fn strides(self, shape: &Shape) -> Result<Vec<usize>> {
        let dims = shape.dims();
        let mut strides = vec![0usize; dims.len()];
        let mut acc = 1usize;
        let overflow = || Error::Overflow { what: "strides" };
        match self {
            Order::RowMajor => {
                for i in (0..dims.len()).rev() {
                    strides[i] = acc;
                    acc = acc.checked_mul(dims[i]).ok_or_else(overflow)?;
                }
            }
            Order::ColumnMajor => {
                for i in 0..dims.len() {
                    strides[i] = acc;
                    acc = acc.checked_mul(dims[i]).ok_or_else(overflow)?;
                }
            }
        }
        Ok(strides)
    }

    /// Linear element offset of a multi-index, checked against rank and bounds.
    pub fn offset(self, shape: &Shape, index: &[usize]) -> Result<usize> {
        let out_of_bounds = || Error::IndexOutOfBounds {
            index: index.to_vec(),
            shape: shape.to_string(),
        };
        if index.len() != shape.rank() || index.iter().zip(shape.dims()).any(|(i, d)| i >= d) {
            return Err(out_of_bounds());
        }
        let strides = self.strides(shape)?;
        // In bounds, so every partial sum is below numel, which fits (strides succeeded).
        Ok(index.iter().zip(&strides).map(|(i, s)| i * s).sum())
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::RowMajor => "row-major",
            Order::ColumnMajor => "column-major",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflowing_shapes_are_errors() {
        assert!(Shape::new([usize::MAX, 2]).numel().is_err());
        assert!(Shape::new([usize::MAX / 2, 1]).byte_len(4).is_err());
        assert!(Order::RowMajor
            .strides(&Shape::new([usize::MAX, 3]))
            .is_err());
        assert_eq!(Shape::new([0, usize::MAX]).numel().unwrap(), 0);
    }

    #[test]
    fn offsets() {
        let s = Shape::new([2, 3, 4]);
        assert_eq!(Order::RowMajor.offset(&s, &[1, 2, 3]).unwrap(), 23);
        assert_eq!(
            Order::ColumnMajor.offset(&s, &[1, 2, 3]).unwrap(),
            1 + 2 * 2 + 3 * 6
        );
        assert!(Order::RowMajor.offset(&s, &[1, 2]).is_err());
        assert!(Order::RowMajor.offset(&s, &[0, 0, 4]).is_err());
        assert_eq!(Order::RowMajor.offset(&Shape::scalar(), &[]).unwrap(), 0);
    }
}
