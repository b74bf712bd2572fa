//! Sources, data specs and [`DataSpecsMapping`] (flatten a nested `(space, source)`
//! spec into unique leaves, and nest flat data back).

use std::collections::HashMap;
use std::fmt;

use super::batch::Batch;
use super::error::{Result, SpaceError};
use super::Space;

/// Which data is meant: a name (`"features"`, `"targets"`; `""` goes with the null
/// space) or a tuple of sources shaped like a [`CompositeSpace`](super::CompositeSpace).
///
/// ```
/// use tensorfmt_spaces::Source;
/// let s = Source::tuple(["features".into(), Source::tuple(["features".into(), "targets".into()])]);
/// assert_eq!(s.to_string(), r#"("features", ("features", "targets"))"#);
/// assert!(!s.is_flat());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// An elementary source.
    Name(String),
    /// A composite source.
    Tuple(Vec<Source>),
}

impl Source {
    /// A tuple source.
    pub fn tuple(items: impl IntoIterator<Item = Source>) -> Source {
        Source::Tuple(items.into_iter().collect())
    }

    /// The empty name `""`, the source of the null space.
    pub fn none() -> Source {
        Source::Name(String::new())
    }

    /// True for a name, or a tuple with no tuple inside.
    pub fn is_flat(&self) -> bool {
        match self {
            Source::Name(_) => true,
            Source::Tuple(v) => v.iter().all(|s| matches!(s, Source::Name(_))),
        }
    }
}

impl From<&str> for Source {
    fn from(s: &str) -> Source {
        Source::Name(s.to_string())
    }
}

impl From<String> for Source {
    fn from(s: String) -> Source {
        Source::Name(s)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Name(n) => write!(f, "{n:?}"),
            Source::Tuple(v) => {
                f.write_str("(")?;
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s}")?;
                }
                if v.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// An arbitrary nested value, for nesting and flattening things that are not spaces,
/// sources or batches (`mapping.nest(&[Leaf(1), Leaf(2), Leaf(3)])`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Nested<T> {
    /// A value.
    Leaf(T),
    /// A tuple of nested values.
    Tuple(Vec<Nested<T>>),
    /// Nothing (at a null-space position).
    Null,
}

/// A tree that [`DataSpecsMapping`] can flatten and nest: [`Space`], [`Source`],
/// [`Batch`] and [`Nested`].
pub trait Nestable: Clone + fmt::Debug {
    /// The children of a tuple node (a composite space, a tuple source or batch).
    fn children(&self) -> Option<&[Self]>;
    /// Builds a tuple node.
    fn from_children(children: Vec<Self>) -> Self;
    /// The value that stands at a null-space position.
    fn null() -> Self;
    /// True for values accepted at a null-space position (the null value or an empty tuple).
    fn is_null(&self) -> bool;
}

impl Nestable for Space {
    fn children(&self) -> Option<&[Space]> {
        self.components()
    }
    fn from_children(children: Vec<Space>) -> Space {
        Space::composite(children)
    }
    fn null() -> Space {
        Space::null()
    }
    fn is_null(&self) -> bool {
        matches!(self, Space::Null(_)) || self.components().is_some_and(|c| c.is_empty())
    }
}

impl Nestable for Source {
    fn children(&self) -> Option<&[Source]> {
        match self {
            Source::Tuple(v) => Some(v),
            Source::Name(_) => None,
        }
    }
    fn from_children(children: Vec<Source>) -> Source {
        Source::Tuple(children)
    }
    fn null() -> Source {
        Source::none()
    }
    fn is_null(&self) -> bool {
        match self {
            Source::Name(n) => n.is_empty(),
            Source::Tuple(v) => v.is_empty(),
        }
    }
}

impl Nestable for Batch {
    fn children(&self) -> Option<&[Batch]> {
        Batch::children(self)
    }
    fn from_children(children: Vec<Batch>) -> Batch {
        Batch::Tuple(children)
    }
    fn null() -> Batch {
        Batch::None
    }
    fn is_null(&self) -> bool {
        matches!(self, Batch::None) || self.children().is_some_and(|c| c.is_empty())
    }
}

impl<T: Clone + fmt::Debug> Nestable for Nested<T> {
    fn children(&self) -> Option<&[Nested<T>]> {
        match self {
            Nested::Tuple(v) => Some(v),
            _ => None,
        }
    }
    fn from_children(children: Vec<Nested<T>>) -> Nested<T> {
        Nested::Tuple(children)
    }
    fn null() -> Nested<T> {
        Nested::Null
    }
    fn is_null(&self) -> bool {
        matches!(self, Nested::Null) || self.children().is_some_and(|c| c.is_empty())
    }
}

/// One position of the mapping tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// A null space: no flat entry.
    Null,
    /// An elementary (space, source) pair: its flat index.
    Leaf(usize),
    /// A composite.
    Tuple(Vec<Slot>),
}

/// The mapping between a nested data spec `(space, source)` and its flat,
/// duplicate-free list of elementary `(space, source)` pairs.
///
/// Two leaves are the same flat entry when both the space (including dtype and axes)
/// and the source are equal. Null leaves (paired with `""`) map to nothing. Space and
/// source must have exactly the same structure: a composite space pairs with a tuple
/// source of as many items, an elementary space with a name (a one-item tuple or a
/// string standing for a composite are structure errors, unlike Pylearn2).
///
/// ```
/// use tensorfmt_spaces::{DataSpecsMapping, Nested, Source, Space};
/// let (a, b) = (Space::vector(3), Space::vector(10));
/// let space = Space::composite([a.clone(), Space::composite([a.clone(), b.clone()])]);
/// let source = Source::tuple(["x".into(), Source::tuple(["x".into(), "y".into()])]);
/// let m = DataSpecsMapping::new(&space, &source)?;
/// assert_eq!(m.n_unique_specs(), 2);
/// assert_eq!(m.flatten(&space)?, vec![a, b]);
/// let nested = m.nest(&[Nested::Leaf('p'), Nested::Leaf('q')])?;
/// assert_eq!(nested, Nested::Tuple(vec![Nested::Leaf('p'),
///     Nested::Tuple(vec![Nested::Leaf('p'), Nested::Leaf('q')])]));
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSpecsMapping {
    tree: Slot,
    flat: Vec<(Space, String)>,
}

impl DataSpecsMapping {
    /// Builds the mapping of a nested spec; structure mismatches between `space` and
    /// `source` are [`SpaceError::StructureMismatch`].
    pub fn new(space: &Space, source: &Source) -> Result<DataSpecsMapping> {
        let mut flat = Vec::new();
        let mut seen = HashMap::new();
        let tree = build(space, source, &mut flat, &mut seen)?;
        Ok(DataSpecsMapping { tree, flat })
    }

    /// Number of flat entries.
    pub fn n_unique_specs(&self) -> usize {
        self.flat.len()
    }

    /// The flat, duplicate-free `(space, source)` leaves, in depth-first order of first
    /// appearance.
    pub fn flat_specs(&self) -> &[(Space, String)] {
        &self.flat
    }

    /// The flat spec as one data spec: a composite of the flat spaces and the tuple of
    /// the flat sources.
    pub fn flat_spec(&self) -> (Space, Source) {
        (
            Space::composite(self.flat.iter().map(|(s, _)| s.clone())),
            Source::tuple(self.flat.iter().map(|(_, n)| Source::Name(n.clone()))),
        )
    }

    /// Flattens a value shaped like the spec (the spec's own space or source, a batch,
    /// a [`Nested`] value) into one value per flat entry. A duplicate leaf must carry an
    /// equal value each time it appears; a null position must hold a null value (or an
    /// empty tuple).
    pub fn flatten<N: Nestable + PartialEq>(&self, nested: &N) -> Result<Vec<N>> {
        let mut out: Vec<Option<N>> = vec![None; self.flat.len()];
        flatten_into(&self.tree, nested, &mut out)?;
        out.into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| {
                    SpaceError::StructureMismatch(format!("flat entry {i} was not filled"))
                })
            })
            .collect()
    }

    /// Rebuilds the spec's structure from one value per flat entry: duplicates are
    /// copied to every position that shares the entry, null positions get
    /// [`Nestable::null`].
    pub fn nest<N: Nestable>(&self, flat: &[N]) -> Result<N> {
        if flat.len() != self.flat.len() {
            return Err(SpaceError::StructureMismatch(format!(
                "expected {} flat values, got {}",
                self.flat.len(),
                flat.len()
            )));
        }
        Ok(nest_from(&self.tree, flat))
    }
}

fn build(
    space: &Space,
    source: &Source,
    flat: &mut Vec<(Space, String)>,
    seen: &mut HashMap<(Space, String), usize>,
) -> Result<Slot> {
    match (space, source) {
        (Space::Null(_), Source::Name(n)) if n.is_empty() => Ok(Slot::Null),
        (Space::Null(_), s) => Err(SpaceError::StructureMismatch(format!(
            "NullSpace must be paired with the source \"\", not {s}"
        ))),
        (Space::Composite(c), Source::Tuple(items)) => {
            if c.len() != items.len() {
                return Err(SpaceError::StructureMismatch(format!(
                    "{space} has {} components but the source {source} has {} items",
                    c.len(),
                    items.len()
                )));
            }
            c.components()
                .iter()
                .zip(items)
                .map(|(s, src)| build(s, src, flat, seen))
                .collect::<Result<_>>()
                .map(Slot::Tuple)
        }
        (Space::Composite(_), Source::Name(_)) => Err(SpaceError::StructureMismatch(format!(
            "{space} needs a tuple source with one item per component, not {source}"
        ))),
        (_, Source::Tuple(_)) => Err(SpaceError::StructureMismatch(format!(
            "{space} is elementary and needs a source name, not the tuple {source}"
        ))),
        (_, Source::Name(n)) => {
            let key = (space.clone(), n.clone());
            let next = flat.len();
            let idx = *seen.entry(key).or_insert(next);
            if idx == next {
                flat.push((space.clone(), n.clone()));
            }
            Ok(Slot::Leaf(idx))
        }
    }
}

fn flatten_into<N: Nestable + PartialEq>(
    slot: &Slot,
    nested: &N,
    out: &mut [Option<N>],
) -> Result<()> {
    match slot {
        Slot::Null => {
            if nested.is_null() {
                Ok(())
            } else {
                Err(SpaceError::StructureMismatch(format!(
                    "a null-space position holds {nested:?}; it must be empty"
                )))
            }
        }
        Slot::Leaf(i) => {
            if nested.children().is_some() {
                return Err(SpaceError::StructureMismatch(format!(
                    "an elementary position holds a tuple: {nested:?}"
                )));
            }
            match &out[*i] {
                Some(prev) if prev != nested => Err(SpaceError::StructureMismatch(format!(
                    "flat entry {i} occurs more than once with different values"
                ))),
                Some(_) => Ok(()),
                None => {
                    out[*i] = Some(nested.clone());
                    Ok(())
                }
            }
        }
        Slot::Tuple(slots) => {
            let Some(items) = nested.children() else {
                return Err(SpaceError::StructureMismatch(format!(
                    "a composite position of {} items holds a non-tuple: {nested:?}",
                    slots.len()
                )));
            };
            if items.len() != slots.len() {
                return Err(SpaceError::StructureMismatch(format!(
                    "a composite position of {} items holds a tuple of {}",
                    slots.len(),
                    items.len()
                )));
            }
            slots
                .iter()
                .zip(items)
                .try_for_each(|(s, v)| flatten_into(s, v, out))
        }
    }
}

fn nest_from<N: Nestable>(slot: &Slot, flat: &[N]) -> N {
    match slot {
        Slot::Null => N::null(),
        Slot::Leaf(i) => flat[*i].clone(),
        Slot::Tuple(slots) => N::from_children(slots.iter().map(|s| nest_from(s, flat)).collect()),
    }
}
