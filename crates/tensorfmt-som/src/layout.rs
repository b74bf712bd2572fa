//! [`MapLayout`]: the geometry of a SOM, cartesian dims or a hexagonal grid (also of the
//! map a mapping or rotation/flip file refers to), and its neuron indexing. What the
//! v2 reader and the legacy detection share.

use crate::hex::HexGrid;

/// The geometry of a SOM (also of the map a mapping or rotation/flip file refers to).
///
/// ```
/// use tensorfmt_som::{HexGrid, MapLayout};
/// let c = MapLayout::Cartesian(vec![4, 2]);
/// assert_eq!(c.neuron_count(), 8);
/// assert_eq!(c.index(&[3, 1]), Some(7)); // C order over the header dims
/// let h = MapLayout::Hexagonal(HexGrid::new(5)?);
/// assert_eq!((h.neuron_count(), h.dims()), (19, vec![5, 5]));
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapLayout {
    /// Cartesian map with dims in header order (PINK writes width first); neurons are
    /// stored in C order over these dims.
    Cartesian(Vec<usize>),
    /// Hexagonal `d x d` map in PINK's row storage order.
    Hexagonal(HexGrid),
}

impl MapLayout {
    /// Number of neurons.
    pub fn neuron_count(&self) -> usize {
        match self {
            // Saturating: layouts read from files were size-checked already.
            MapLayout::Cartesian(d) => d.iter().fold(1usize, |a, &b| a.saturating_mul(b)),
            MapLayout::Hexagonal(g) => g.len(),
        }
    }

    /// Dims as written in a header (`[d, d]` for hexagonal maps).
    pub fn dims(&self) -> Vec<usize> {
        match self {
            MapLayout::Cartesian(d) => d.clone(),
            MapLayout::Hexagonal(g) => vec![g.side(), g.side()],
        }
    }

    /// Leading dims of exported tensors: the cartesian dims, or `[neurons]`.
    pub fn export_dims(&self) -> Vec<usize> {
        match self {
            MapLayout::Cartesian(d) => d.clone(),
            MapLayout::Hexagonal(g) => vec![g.len()],
        }
    }

    /// True for hexagonal maps.
    pub fn is_hexagonal(&self) -> bool {
        matches!(self, MapLayout::Hexagonal(_))
    }

    /// Neuron index of a cartesian position (C order), or of an axial `(q, row)`
    /// position on a hexagonal map. `None` when out of range.
    pub fn index(&self, pos: &[usize]) -> Option<usize> {
        match self {
            MapLayout::Cartesian(d) => {
                if pos.len() != d.len() {
                    return None;
                }
                let mut i = 0usize;
                for (&p, &n) in pos.iter().zip(d) {
                    if p >= n {
                        return None;
                    }
                    i = i.checked_mul(n)?.checked_add(p)?;
                }
                Some(i)
            }
            MapLayout::Hexagonal(g) => match pos {
                [q, row] => g.index(*q, *row),
                _ => None,
            },
        }
    }

    /// Position of neuron `i`: cartesian multi-index, or axial `[q, row]`.
    pub fn position(&self, i: usize) -> Option<Vec<usize>> {
        match self {
            MapLayout::Cartesian(d) => {
                if i >= self.neuron_count() {
                    return None;
                }
                let mut rest = i;
                let mut out = vec![0; d.len()];
                for (k, &n) in d.iter().enumerate().rev() {
                    out[k] = rest % n;
                    rest /= n;
                }
                Some(out)
            }
            MapLayout::Hexagonal(g) => g.axial(i).map(|(q, r)| vec![q, r]),
        }
    }
}
