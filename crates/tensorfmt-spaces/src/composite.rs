//! [`CompositeSpace`]: an ordered, nestable tuple of spaces.

use super::error::{Result, SpaceError};
use super::Space;

/// An ordered tuple of spaces (possibly empty, possibly nested); a batch is a
/// [`Batch::Tuple`](super::Batch::Tuple) with one entry per component.
///
/// ```
/// use tensorfmt_core::space::{CompositeSpace, Space, VectorSpace};
/// let c = CompositeSpace::new([Space::from(VectorSpace::new(3)), Space::Null(Default::default())]);
/// assert_eq!(c.to_string(), "CompositeSpace(VectorSpace(dim=3, dtype=float32), NullSpace)");
/// assert_eq!(c.total_dimension()?, 3);
/// assert_eq!(c.restrict(&[0])?, Space::from(VectorSpace::new(3)));
/// # Ok::<(), tensorfmt_core::space::SpaceError>(())
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
    use crate::space::{IndexSpace, NullSpace, VectorSpace};

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
