//! [`Space`]: any of the five kinds of space, and the methods every space has, with
//! [`CompositeSpace`] (a tuple of spaces) and [`NullSpace`]: `Space` and
//! `CompositeSpace` are one recursive type, so they live together.

use super::batch::Batch;
use super::error::{Result, SpaceError};
use super::{Conv2DSpace, IndexSpace, VectorSpace};
use tensorfmt_core::{DType, Tensor};

/// The space of no data: its batch is [`Batch::None`]. Cost terms that need no data
/// ask for `(NullSpace, "")`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NullSpace;

/// How one mini-batch is formatted.
///
/// ```
/// use tensorfmt_core::DType;
/// use tensorfmt_spaces::{Axes, Conv2DSpace, Space, VectorSpace};
/// let conv = Space::from(Conv2DSpace::new(2, 2, 3)?.with_axes(Axes::BC01));
/// let pair = Space::composite([conv.clone(), Space::vector(10)]);
/// assert_eq!(pair.total_dimension()?, 22);
/// let batch = pair.origin_batch(5)?;
/// assert_eq!(pair.batch_size(&batch)?, 5);
/// assert_eq!(batch.children().unwrap()[0].as_tensor().unwrap().dims(), &[5, 3, 2, 2]);
/// let f64s = pair.with_dtype(Some(DType::F64))?;
/// assert_eq!(f64s.components().unwrap()[1].dtype(), Some(DType::F64));
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Space {
    /// `(n, dim)` matrices.
    Vector(VectorSpace),
    /// 4-D image batches with named axes.
    Conv2D(Conv2DSpace),
    /// `(n, dim)` integer labels.
    Index(IndexSpace),
    /// Tuples of sub-batches.
    Composite(CompositeSpace),
    /// No data.
    Null(NullSpace),
}

impl From<VectorSpace> for Space {
    fn from(s: VectorSpace) -> Space {
        Space::Vector(s)
    }
}
impl From<Conv2DSpace> for Space {
    fn from(s: Conv2DSpace) -> Space {
        Space::Conv2D(s)
    }
}
impl From<IndexSpace> for Space {
    fn from(s: IndexSpace) -> Space {
        Space::Index(s)
    }
}
impl From<CompositeSpace> for Space {
    fn from(s: CompositeSpace) -> Space {
        Space::Composite(s)
    }
}
impl From<NullSpace> for Space {
    fn from(s: NullSpace) -> Space {
        Space::Null(s)
    }
}

fn wrong_kind(space: &Space, expected: &'static str, batch: &Batch) -> SpaceError {
    SpaceError::WrongKind {
        space: space.to_string(),
        expected,
        actual: batch.kind(),
    }
}

impl Space {
    /// `VectorSpace::new(dim)` as a space.
    pub fn vector(dim: usize) -> Space {
        Space::Vector(VectorSpace::new(dim))
    }

    /// A composite of `components`.
    pub fn composite(components: impl IntoIterator<Item = Space>) -> Space {
        Space::Composite(CompositeSpace::new(components))
    }

    /// The null space.
    pub fn null() -> Space {
        Space::Null(NullSpace)
    }

    /// The components of a composite space.
    pub fn components(&self) -> Option<&[Space]> {
        match self {
            Space::Composite(c) => Some(c.components()),
            _ => None,
        }
    }

    /// The dtype of an elementary space (`None` = any); `None` for composite and null
    /// spaces (see [`Space::leaves`] for the dtypes inside a composite).
    pub fn dtype(&self) -> Option<DType> {
        match self {
            Space::Vector(s) => s.dtype(),
            Space::Conv2D(s) => s.dtype(),
            Space::Index(s) => s.dtype(),
            Space::Composite(_) | Space::Null(_) => None,
        }
    }

    /// The same space with `dtype` on every elementary leaf (null leaves are left
    /// alone). Index leaves keep their integer-only rule, so a float dtype fails there.
    pub fn with_dtype(&self, dtype: Option<DType>) -> Result<Space> {
        Ok(match self {
            Space::Vector(s) => s.clone().with_dtype(dtype)?.into(),
            Space::Conv2D(s) => s.clone().with_dtype(dtype)?.into(),
            Space::Index(s) => s.clone().with_dtype(dtype)?.into(),
            Space::Composite(c) => Space::composite(
                c.components()
                    .iter()
                    .map(|s| s.with_dtype(dtype))
                    .collect::<Result<Vec<_>>>()?,
            ),
            Space::Null(n) => Space::Null(*n),
        })
    }

    /// The elementary and null leaves, depth-first, left to right.
    pub fn leaves(&self) -> Vec<&Space> {
        match self {
            Space::Composite(c) => c.components().iter().flat_map(Space::leaves).collect(),
            s => vec![s],
        }
    }

    /// True for any non-composite space, or a composite with no composite child.
    pub fn is_flat(&self) -> bool {
        match self {
            Space::Composite(c) => c.is_flat(),
            _ => true,
        }
    }

    /// The axis of a batch tensor that indexes examples: `axes.index('b')` for a
    /// Conv2D space, 0 for every other space (as Pylearn2's `get_batch_axis`).
    ///
    /// ```
    /// use tensorfmt_spaces::{Axes, Conv2DSpace, Space};
    /// assert_eq!(Space::from(Conv2DSpace::new(2, 2, 3)?.with_axes(Axes::C01B)).batch_axis(), 3);
    /// assert_eq!(Space::vector(3).batch_axis(), 0);
    /// # Ok::<(), tensorfmt_spaces::SpaceError>(())
    /// ```
    pub fn batch_axis(&self) -> usize {
        match self {
            Space::Conv2D(s) => s.axes().position(super::Axis::Batch),
            _ => 0,
        }
    }

    /// Number of values per example. The null space has none (an error); composites
    /// sum their components and skip null ones. An index space counts `dim` (not the
    /// one-hot width).
    pub fn total_dimension(&self) -> Result<usize> {
        match self {
            Space::Vector(s) => Ok(s.dim()),
            Space::Conv2D(s) => Ok(s.total_dimension()),
            Space::Index(s) => Ok(s.dim()),
            Space::Composite(c) => c.total_dimension(),
            Space::Null(_) => Err(SpaceError::NoTotalDimension(self.to_string())),
        }
    }

    /// Checks that `batch` is a valid batch of this space (kind, rank, sizes, dtype rule,
    /// label range), recursively for composites. Batch sizes of composite components are
    /// not cross-checked here (see [`Space::batch_size`]).
    pub fn validate(&self, batch: &Batch) -> Result<()> {
        match (self, batch) {
            (Space::Vector(s), Batch::Tensor(t)) => s.validate(t),
            (Space::Conv2D(s), Batch::Tensor(t)) => s.validate(t),
            (Space::Index(s), Batch::Tensor(t)) => s.validate(t),
            (Space::Vector(_) | Space::Conv2D(_) | Space::Index(_), b) => {
                Err(wrong_kind(self, "a tensor", b))
            }
            (Space::Composite(c), Batch::Tuple(items)) => {
                if items.len() != c.len() {
                    return Err(SpaceError::StructureMismatch(format!(
                        "{self} expects {} elements in a batch, got {}",
                        c.len(),
                        items.len()
                    )));
                }
                c.components()
                    .iter()
                    .zip(items)
                    .try_for_each(|(s, b)| s.validate(b))
            }
            (Space::Composite(_), b) => Err(wrong_kind(self, "a tuple", b)),
            (Space::Null(_), Batch::None) => Ok(()),
            (Space::Null(_), b) => Err(wrong_kind(self, "none", b)),
        }
    }

    /// Number of examples in a valid batch. Composite components that carry data must
    /// agree; null components and composites without data count 0.
    pub fn batch_size(&self, batch: &Batch) -> Result<usize> {
        self.validate(batch)?;
        Ok(self.batch_size_unchecked(batch)?.unwrap_or(0))
    }

    /// The batch size of a validated batch, `None` when the space carries no data.
    pub(crate) fn batch_size_unchecked(&self, batch: &Batch) -> Result<Option<usize>> {
        match (self, batch) {
            (Space::Conv2D(s), Batch::Tensor(t)) => {
                Ok(Some(t.dims()[s.axes().position(super::Axis::Batch)]))
            }
            (Space::Vector(_) | Space::Index(_), Batch::Tensor(t)) => Ok(Some(t.dims()[0])),
            (Space::Composite(c), Batch::Tuple(items)) => {
                let mut size: Option<usize> = None;
                for (s, b) in c.components().iter().zip(items) {
                    if let Some(n) = s.batch_size_unchecked(b)? {
                        match size {
                            Some(first) if first != n => {
                                return Err(SpaceError::BatchSizeMismatch {
                                    space: self.to_string(),
                                    first,
                                    then: n,
                                })
                            }
                            _ => size = Some(n),
                        }
                    }
                }
                Ok(size)
            }
            _ => Ok(None),
        }
    }

    /// Zeros for `n` examples (n = 0 allowed) in each leaf's own dtype; a null space
    /// gives [`Batch::None`]. A leaf without a dtype is an error: use
    /// [`Space::origin_batch_as`].
    pub fn origin_batch(&self, n: usize) -> Result<Batch> {
        self.origin_batch_dtype(n, None)
    }

    /// Zeros for `n` examples, every leaf in `dtype`.
    pub fn origin_batch_as(&self, n: usize, dtype: DType) -> Result<Batch> {
        self.origin_batch_dtype(n, Some(dtype))
    }

    fn origin_batch_dtype(&self, n: usize, dtype: Option<DType>) -> Result<Batch> {
        Ok(match self {
            Space::Vector(s) => s.origin_batch(n, dtype)?.into(),
            Space::Conv2D(s) => s.origin_batch(n, dtype)?.into(),
            Space::Index(s) => s.origin_batch(n, dtype)?.into(),
            Space::Composite(c) => Batch::Tuple(
                c.components()
                    .iter()
                    .map(|s| s.origin_batch_dtype(n, dtype))
                    .collect::<Result<_>>()?,
            ),
            Space::Null(_) => Batch::None,
        })
    }

    /// One zero example (no batch axis) in the leaf's dtype; tuples for composites,
    /// none for the null space.
    pub fn origin(&self) -> Result<Batch> {
        Ok(match self {
            Space::Vector(s) => s.origin(None)?.into(),
            Space::Conv2D(s) => s.origin(None)?.into(),
            Space::Index(s) => s.origin(None)?.into(),
            Space::Composite(c) => Batch::Tuple(
                c.components()
                    .iter()
                    .map(Space::origin)
                    .collect::<Result<_>>()?,
            ),
            Space::Null(_) => Batch::None,
        })
    }

    /// Validates a tensor batch of an elementary space and returns it.
    pub(crate) fn tensor<'a>(&self, batch: &'a Batch) -> Result<&'a Tensor> {
        batch
            .as_tensor()
            .ok_or_else(|| wrong_kind(self, "a tensor", batch))
    }
}

/// An ordered tuple of spaces (possibly empty, possibly nested); a batch is a
/// [`Batch::Tuple`](super::Batch::Tuple) with one entry per component.
///
/// ```
/// use tensorfmt_spaces::{CompositeSpace, Space, VectorSpace};
/// let c = CompositeSpace::new([Space::from(VectorSpace::new(3)), Space::Null(Default::default())]);
/// assert_eq!(c.to_string(), "CompositeSpace(VectorSpace(dim=3, dtype=float32), NullSpace)");
/// assert_eq!(c.total_dimension()?, 3);
/// assert_eq!(c.restrict(&[0])?, Space::from(VectorSpace::new(3)));
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CompositeSpace {
    components: Vec<Space>,
}

impl CompositeSpace {
    /// A composite of `components`, in order.
    pub fn new(components: impl IntoIterator<Item = Space>) -> CompositeSpace {
        CompositeSpace {
            components: components.into_iter().collect(),
        }
    }

    /// The components, in order.
    pub fn components(&self) -> &[Space] {
        &self.components
    }

    /// Number of components.
    pub fn len(&self) -> usize {
        self.components.len()
    }

    /// True when there are no components.
    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    /// Sum of the components' total dimensions; null components count for nothing
    /// (Pylearn2 fails there instead).
    pub fn total_dimension(&self) -> Result<usize> {
        self.components.iter().try_fold(0usize, |acc, c| {
            let d = match c {
                Space::Null(_) => 0,
                c => c.total_dimension()?,
            };
            acc.checked_add(d).ok_or_else(|| {
                SpaceError::InvalidArgument(format!("total dimension of {self} overflows"))
            })
        })
    }

    /// The components at `indices`, in that order (duplicates allowed). A single index
    /// returns the bare component, not a one-element composite (as Pylearn2 does).
    pub fn restrict(&self, indices: &[usize]) -> Result<Space> {
        let picked = indices
            .iter()
            .map(|&i| {
                self.components.get(i).cloned().ok_or_else(|| {
                    SpaceError::InvalidArgument(format!(
                        "component index {i} out of range for {self}"
                    ))
                })
            })
            .collect::<Result<Vec<Space>>>()?;
        Ok(match <[Space; 1]>::try_from(picked) {
            Ok([one]) => one,
            Err(many) => Space::Composite(CompositeSpace::new(many)),
        })
    }

    /// True when no component is itself composite (an empty composite is flat).
    pub fn is_flat(&self) -> bool {
        !self
            .components
            .iter()
            .any(|c| matches!(c, Space::Composite(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Axes;
    use crate::{IndexSpace, NullSpace, VectorSpace};
    use tensorfmt_core::Order;

    fn v(dim: usize) -> Space {
        Space::vector(dim)
    }

    fn zeros(dims: &[usize]) -> Batch {
        Tensor::zeros(DType::F32, dims, Order::RowMajor)
            .unwrap()
            .into()
    }

    #[test]
    fn kind_errors() {
        let c = Space::composite([v(2), Space::null()]);
        assert!(matches!(
            v(2).validate(&Batch::None),
            Err(SpaceError::WrongKind { .. })
        ));
        assert!(matches!(
            v(2).validate(&Batch::tuple([])),
            Err(SpaceError::WrongKind { .. })
        ));
        assert!(matches!(
            c.validate(&zeros(&[1, 2])),
            Err(SpaceError::WrongKind { .. })
        ));
        assert!(matches!(
            c.validate(&Batch::tuple([zeros(&[1, 2])])),
            Err(SpaceError::StructureMismatch(_))
        ));
        assert!(matches!(
            Space::null().validate(&zeros(&[1])),
            Err(SpaceError::WrongKind { .. })
        ));
        // Errors in a component come out as they are.
        assert!(matches!(
            c.validate(&Batch::tuple([zeros(&[1, 3]), Batch::None])),
            Err(SpaceError::ShapeMismatch { .. })
        ));
        c.validate(&Batch::tuple([zeros(&[1, 2]), Batch::None]))
            .unwrap();
        Space::null().validate(&Batch::None).unwrap();
    }

    #[test]
    fn batch_sizes() {
        let conv = Space::from(Conv2DSpace::new(1, 1, 2).unwrap().with_axes(Axes::C01B));
        assert_eq!(conv.batch_size(&zeros(&[2, 1, 1, 7])).unwrap(), 7);
        let c = Space::composite([v(2), Space::null(), Space::composite([]), conv.clone()]);
        let good = Batch::tuple([
            zeros(&[7, 2]),
            Batch::None,
            Batch::tuple([]),
            zeros(&[2, 1, 1, 7]),
        ]);
        assert_eq!(c.batch_size(&good).unwrap(), 7);
        let bad = Batch::tuple([
            zeros(&[7, 2]),
            Batch::None,
            Batch::tuple([]),
            zeros(&[2, 1, 1, 6]),
        ]);
        // Validation alone does not cross-check; batch_size does.
        c.validate(&bad).unwrap();
        assert!(matches!(
            c.batch_size(&bad),
            Err(SpaceError::BatchSizeMismatch {
                first: 7,
                then: 6,
                ..
            })
        ));
        assert_eq!(Space::null().batch_size(&Batch::None).unwrap(), 0);
        let no_data = Space::composite([Space::null(), Space::composite([])]);
        assert_eq!(
            no_data
                .batch_size(&Batch::tuple([Batch::None, Batch::tuple([])]))
                .unwrap(),
            0
        );
    }

    #[test]
    fn totals_origins_dtypes() {
        assert!(matches!(
            Space::null().total_dimension(),
            Err(SpaceError::NoTotalDimension(_))
        ));
        assert_eq!(Space::composite([]).total_dimension().unwrap(), 0);
        let idx = Space::from(IndexSpace::new(10, 2).unwrap());
        let c = Space::composite([v(3), Space::null(), idx.clone()]);
        assert_eq!(c.total_dimension().unwrap(), 5);
        let o = c.origin_batch(0).unwrap();
        c.validate(&o).unwrap();
        assert_eq!(c.batch_size(&o).unwrap(), 0);
        let o = c.origin_batch_as(3, DType::I16).unwrap();
        assert_eq!(c.batch_size(&o).unwrap(), 3);
        assert_eq!(
            o.children().unwrap()[0].as_tensor().unwrap().dtype(),
            DType::I16
        );
        let one = c.origin().unwrap();
        assert_eq!(one.children().unwrap()[2].as_tensor().unwrap().dims(), &[2]);
        assert!(matches!(
            c.with_dtype(Some(DType::F64)),
            Err(SpaceError::InvalidArgument(_))
        ));
        let ints = c.with_dtype(Some(DType::I32)).unwrap();
        assert!(ints
            .leaves()
            .iter()
            .all(|s| matches!(s, Space::Null(_)) || s.dtype() == Some(DType::I32)));
        let any = v(3).with_dtype(None).unwrap();
        assert!(any.origin_batch(1).is_err());
        assert_eq!(
            any.origin_batch_as(1, DType::U8)
                .unwrap()
                .as_tensor()
                .unwrap()
                .dtype(),
            DType::U8
        );
        assert_eq!(Space::null(), Space::Null(NullSpace));
    }

    #[test]
    fn restrict_and_flatness() {
        let v = Space::from(VectorSpace::new(2));
        let i = Space::from(IndexSpace::new(3, 1).unwrap());
        let c = CompositeSpace::new([v.clone(), i.clone()]);
        assert_eq!(c.restrict(&[1]).unwrap(), i);
        assert_eq!(
            c.restrict(&[1, 0, 1]).unwrap(),
            Space::composite([i.clone(), v.clone(), i.clone()])
        );
        assert_eq!(c.restrict(&[]).unwrap(), Space::composite([]));
        assert!(matches!(
            c.restrict(&[2]),
            Err(SpaceError::InvalidArgument(_))
        ));
        assert!(c.is_flat());
        assert!(CompositeSpace::default().is_flat());
        let nested = CompositeSpace::new([Space::Composite(c.clone()), v.clone()]);
        assert!(!nested.is_flat());
        assert_eq!(nested.total_dimension().unwrap(), 5);
        assert_eq!(
            CompositeSpace::new([Space::Null(NullSpace), Space::Null(NullSpace)])
                .total_dimension()
                .unwrap(),
            0
        );
        assert_ne!(nested, CompositeSpace::new([v, Space::Composite(c)]));
    }
}
