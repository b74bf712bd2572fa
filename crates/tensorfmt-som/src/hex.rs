//! Hexagonal SOM geometry (spec §6): neuron counts, storage index <-> axial
//! coordinates, hex distance and display positions.

use crate::{Result, SomError};

/// A hexagonal map of `d x d` axial cells (d odd), stored row by row as PINK does.
///
/// Axial coordinates are `(q, row)`: `row` is the storage row `0..d`, `q` the column in
/// the `d x d` axial grid. Row `row` holds `d - |r - row|` cells (r = (d-1)/2), with `q`
/// running over `max(0, r - row) ..= d - 1 - max(0, row - r)`.
///
/// ```
/// use tensorfmt_som::HexGrid;
/// let g = HexGrid::new(3)?;
/// assert_eq!(g.len(), 7);
/// assert_eq!(g.axial(0), Some((1, 0)));
/// assert_eq!(g.index(0, 1), Some(2));
/// assert_eq!(g.distance(0, 6), 2);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HexGrid {
    d: usize,
    offsets: Vec<usize>,
}

/// Number of neurons of a hexagonal map of side `d` (odd): `d^2 - r(r+1)`, r = (d-1)/2.
/// `None` for an even `d`, zero, or on overflow.
///
/// ```
/// assert_eq!(tensorfmt_som::hex_count(5), Some(19));
/// assert_eq!(tensorfmt_som::hex_count(4), None);
/// ```
pub fn hex_count(d: usize) -> Option<usize> {
    if d == 0 || d.is_multiple_of(2) {
        return None;
    }
    let r = (d - 1) / 2;
    d.checked_mul(d)?.checked_sub(r.checked_mul(r + 1)?)
}

/// The side `d` of a hexagonal map with `n` neurons (PINK's Python rule
/// `d = floor(sqrt((4n - 1) / 3))`, verified), or `None` when no odd `d` gives `n`.
///
/// ```
/// assert_eq!(tensorfmt_som::hex_side(61), Some(9));
/// assert_eq!(tensorfmt_som::hex_side(60), None);
/// ```
pub fn hex_side(n: usize) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let x = (4u128 * n as u128 - 1) / 3;
    let mut d = (x as f64).sqrt() as u128;
    while d * d > x {
        d -= 1;
    }
    while (d + 1) * (d + 1) <= x {
        d += 1;
    }
    let d = usize::try_from(d).ok()?;
    (hex_count(d) == Some(n)).then_some(d)
}

impl HexGrid {
    /// The grid of side `d` (odd, > 0).
    pub fn new(d: usize) -> Result<HexGrid> {
        let n = hex_count(d).ok_or_else(|| {
            SomError::InvalidInput(format!("hexagonal side {d} must be odd and > 0"))
        })?;
        let r = (d - 1) / 2;
        let mut offsets = Vec::with_capacity(d + 1);
        let mut acc = 0usize;
        offsets.push(0);
        for row in 0..d {
            acc += d - r.abs_diff(row);
            offsets.push(acc);
        }
        debug_assert_eq!(acc, n);
        Ok(HexGrid { d, offsets })
    }

    /// The side `d`.
    pub fn side(&self) -> usize {
        self.d
    }

    /// `(d - 1) / 2`.
    pub fn radius(&self) -> usize {
        (self.d - 1) / 2
    }

    /// Number of neurons.
    pub fn len(&self) -> usize {
        self.offsets[self.d]
    }

    /// Always false (d >= 1).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Storage offset of each row (`d + 1` values, the last is the neuron count).
    pub fn row_offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Number of cells in storage row `row`.
    pub fn row_len(&self, row: usize) -> usize {
        self.d - self.radius().abs_diff(row)
    }

    /// Storage index of axial cell `(q, row)`, `None` outside the hexagon.
    pub fn index(&self, q: usize, row: usize) -> Option<usize> {
        if row >= self.d {
            return None;
        }
        let r = self.radius();
        let lo = r.saturating_sub(row);
        let hi = self.d - 1 - row.saturating_sub(r);
        (lo..=hi).contains(&q).then(|| self.offsets[row] + q - lo)
    }

    /// Axial cell `(q, row)` of storage index `i`, `None` when `i >= len()`.
    pub fn axial(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.len() {
            return None;
        }
        // First row whose end offset is beyond i.
        let row = self.offsets[1..].partition_point(|&end| end <= i);
        let q = i - self.offsets[row] + self.radius().saturating_sub(row);
        Some((q, row))
    }

    /// Hexagonal (neighbourhood) distance between two storage indices.
    /// Panics never; indices outside the grid are clamped by [`hex_distance`] on
    /// whatever `axial` returns, so pass valid indices.
    pub fn distance(&self, a: usize, b: usize) -> usize {
        match (self.axial(a), self.axial(b)) {
            (Some(p), Some(q)) => hex_distance(p, q),
            _ => usize::MAX,
        }
    }

    /// Display position of neuron `i` in cell units for pointy-top hexagons (spec §6.1):
    /// `x = |r - row| / 2 + k`, `y = 0.75 * row`, with k the index within the row.
    pub fn display_position(&self, i: usize) -> Option<(f64, f64)> {
        let (_, row) = self.axial(i)?;
        let k = i - self.offsets[row];
        let x = self.radius().abs_diff(row) as f64 / 2.0 + k as f64;
        Some((x, 0.75 * row as f64))
    }
}

/// Axial hex distance between `(q1, row1)` and `(q2, row2)`: `|dq + drow|` when both
/// differences have the same sign, `max(|dq|, |drow|)` otherwise.
///
/// ```
/// assert_eq!(tensorfmt_som::hex_distance((1, 0), (2, 1)), 2);
/// assert_eq!(tensorfmt_som::hex_distance((2, 0), (1, 1)), 1);
/// ```
pub fn hex_distance(a: (usize, usize), b: (usize, usize)) -> usize {
    let dq = b.0 as i128 - a.0 as i128;
    let dr = b.1 as i128 - a.1 as i128;
    let d = if (dq >= 0) == (dr >= 0) {
        (dq + dr).abs()
    } else {
        dq.abs().max(dr.abs())
    };
    d as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sides() {
        for (d, n) in [(1, 1), (3, 7), (5, 19), (7, 37), (9, 61), (11, 91)] {
            assert_eq!(hex_count(d), Some(n));
            assert_eq!(hex_side(n), Some(d));
            assert_eq!(HexGrid::new(d).unwrap().len(), n);
        }
        assert_eq!(hex_count(0), None);
        assert_eq!(hex_side(8), None);
        assert!(HexGrid::new(2).is_err());
    }

    #[test]
    fn d3_table_matches_spec() {
        let g = HexGrid::new(3).unwrap();
        let want = [(1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2), (1, 2)];
        for (i, &p) in want.iter().enumerate() {
            assert_eq!(g.axial(i), Some(p));
            assert_eq!(g.index(p.0, p.1), Some(i));
        }
        assert_eq!(g.row_offsets(), &[0, 2, 5, 7]);
        assert_eq!(g.index(0, 0), None);
        assert_eq!(g.index(2, 2), None);
        assert_eq!(g.axial(7), None);
    }

    #[test]
    fn d5_rows() {
        let g = HexGrid::new(5).unwrap();
        assert_eq!(g.row_offsets(), &[0, 3, 7, 12, 16, 19]);
        assert_eq!(
            (0..5).map(|r| g.row_len(r)).collect::<Vec<_>>(),
            vec![3, 4, 5, 4, 3]
        );
    }

    #[test]
    fn round_trip_and_neighbours_for_small_d() {
        for d in [1usize, 3, 5, 7, 9] {
            let g = HexGrid::new(d).unwrap();
            let r = (d - 1) / 2;
            let mut seen = 0;
            for row in 0..d {
                for q in 0..d {
                    let lo = r.saturating_sub(row);
                    let hi = d - 1 - row.saturating_sub(r);
                    match g.index(q, row) {
                        Some(i) => {
                            assert!((lo..=hi).contains(&q));
                            assert_eq!(g.axial(i), Some((q, row)));
                            seen += 1;
                        }
                        None => assert!(!(lo..=hi).contains(&q)),
                    }
                }
            }
            assert_eq!(seen, g.len());
            // The centre has 6 neighbours at distance 1 (d >= 3) and every cell is
            // within distance r of the centre.
            let c = g.index(r, r).unwrap();
            let at1 = (0..g.len()).filter(|&i| g.distance(c, i) == 1).count();
            assert_eq!(at1, if d == 1 { 0 } else { 6 });
            assert!((0..g.len()).all(|i| g.distance(c, i) <= r));
            // Corners are 2r apart from the opposite corner.
            if d > 1 {
                let a = g.index(r, 0).unwrap();
                let b = g.index(r, d - 1).unwrap();
                assert_eq!(g.distance(a, b), 2 * r);
            }
            // Display neighbours: cells at hex distance 1 are one cell width apart.
            for i in 0..g.len() {
                for j in 0..g.len() {
                    if g.distance(i, j) == 1 {
                        let (x1, y1) = g.display_position(i).unwrap();
                        let (x2, y2) = g.display_position(j).unwrap();
                        let dx = x2 - x1;
                        let dy = (y2 - y1) / 0.75;
                        let dist2 = dx * dx + dy * dy;
                        assert!(
                            (dist2 - 1.0).abs() < 1e-9 || (dist2 - 1.25).abs() < 1e-9,
                            "d={d} {i}->{j}: {dx},{dy}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn distance_formula() {
        assert_eq!(hex_distance((0, 0), (0, 0)), 0);
        assert_eq!(hex_distance((0, 0), (3, 0)), 3);
        assert_eq!(hex_distance((0, 0), (2, 2)), 4);
        assert_eq!(hex_distance((2, 0), (0, 2)), 2);
    }
}
