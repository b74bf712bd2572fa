//! [`Axis`] labels and [`Axes`], a validated permutation of `b`, `c`, `0`, `1`.

use std::fmt;
use std::str::FromStr;

use super::error::{Result, SpaceError};

/// One named axis of a [`Conv2DSpace`](super::Conv2DSpace) batch.
///
/// ```
/// use tensorfmt_spaces::Axis;
/// assert_eq!(Axis::Row.label(), "0");
/// assert_eq!(Axis::from_label("c"), Some(Axis::Channel));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// `b`: the examples of the batch.
    Batch,
    /// `c`: the channels.
    Channel,
    /// `0`: the image rows (`shape[0]`).
    Row,
    /// `1`: the image columns (`shape[1]`).
    Col,
}

impl Axis {
    /// The Pylearn2 label: `b`, `c`, `0` or `1`.
    pub const fn label(self) -> &'static str {
        match self {
            Axis::Batch => "b",
            Axis::Channel => "c",
            Axis::Row => "0",
            Axis::Col => "1",
        }
    }

    /// Parses a label (`b`, `c`, `0`, `1`).
    pub fn from_label(s: &str) -> Option<Axis> {
        match s {
            "b" => Some(Axis::Batch),
            "c" => Some(Axis::Channel),
            "0" => Some(Axis::Row),
            "1" => Some(Axis::Col),
            _ => None,
        }
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The order of the four axes of a 4-D image batch: always a permutation of
/// `b`, `c`, `0`, `1` (checked at construction).
///
/// Parses from `"b c 0 1"`, `"bc01"`, `"b,c,0,1"` or Pylearn2's `"('b', 'c', 0, 1)"`;
/// displays as `"b c 0 1"`.
///
/// ```
/// use tensorfmt_spaces::{Axes, Axis};
/// let nchw: Axes = "b c 0 1".parse()?;
/// assert_eq!(nchw, Axes::BC01);
/// assert_eq!(nchw.position(Axis::Channel), 1);
/// // Result axis i of the transpose is source axis perm[i] (numpy's transpose).
/// assert_eq!(Axes::BC01.permutation_to(&Axes::B01C), [0, 2, 3, 1]);
/// assert!("b b 0 1".parse::<Axes>().is_err());
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Axes([Axis; 4]);

impl Axes {
    /// `b 0 1 c` (NHWC, channels last): Pylearn2's default and the canonical flatten order.
    pub const B01C: Axes = Axes([Axis::Batch, Axis::Row, Axis::Col, Axis::Channel]);
    /// `b c 0 1` (NCHW, Theano convolutions).
    pub const BC01: Axes = Axes([Axis::Batch, Axis::Channel, Axis::Row, Axis::Col]);
    /// `c 0 1 b` (CHWN, cuda-convnet).
    pub const C01B: Axes = Axes([Axis::Channel, Axis::Row, Axis::Col, Axis::Batch]);

    /// Checks that `axes` names each of the four axes exactly once.
    pub fn new(axes: [Axis; 4]) -> Result<Axes> {
        for (i, a) in axes.iter().enumerate() {
            if axes[..i].contains(a) {
                return Err(SpaceError::InvalidArgument(format!(
                    "axes {} {} {} {} are not a permutation of b c 0 1 ({a} repeated)",
                    axes[0], axes[1], axes[2], axes[3]
                )));
            }
        }
        Ok(Axes(axes))
    }

    /// The axes in order.
    pub fn as_array(&self) -> [Axis; 4] {
        self.0
    }

    /// Where `axis` is (0..4).
    pub fn position(&self, axis: Axis) -> usize {
        // A valid permutation contains every axis.
        self.0.iter().position(|&a| a == axis).unwrap_or(0)
    }

    /// The permutation that transposes a batch laid out in `self` into `dst`:
    /// result axis `i` is source axis `perm[i]` (what [`Tensor::permute`](tensorfmt_core::Tensor::permute) takes).
    pub fn permutation_to(&self, dst: &Axes) -> [usize; 4] {
        dst.0.map(|a| self.position(a))
    }
}

impl Default for Axes {
    /// `b 0 1 c`.
    fn default() -> Axes {
        Axes::B01C
    }
}

impl fmt::Display for Axes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} {}", self.0[0], self.0[1], self.0[2], self.0[3])
    }
}

impl FromStr for Axes {
    type Err = SpaceError;

    fn from_str(s: &str) -> Result<Axes> {
        let err = |reason: String| SpaceError::Parse {
            input: s.to_string(),
            reason,
        };
        let cleaned: String = s
            .chars()
            .filter(|c| !matches!(c, '(' | ')' | '[' | ']' | '\'' | '"'))
            .collect();
        let mut tokens: Vec<&str> = cleaned
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .collect();
        if tokens.len() == 1 && tokens[0].len() == 4 && tokens[0].is_ascii() {
            let t = tokens[0];
            tokens = (0..4).map(|i| &t[i..i + 1]).collect();
        }
        if tokens.len() != 4 {
            return Err(err(format!("expected 4 axes, got {}", tokens.len())));
        }
        let mut axes = [Axis::Batch; 4];
        for (slot, t) in axes.iter_mut().zip(&tokens) {
            *slot = Axis::from_label(t)
                .ok_or_else(|| err(format!("unknown axis {t:?} (expected b, c, 0 or 1)")))?;
        }
        Axes::new(axes).map_err(|e| err(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        for s in [
            "b c 0 1",
            "bc01",
            "b,c,0,1",
            "('b', 'c', 0, 1)",
            " b  c 0 1 ",
        ] {
            assert_eq!(s.parse::<Axes>().unwrap(), Axes::BC01, "{s}");
        }
        assert_eq!("c01b".parse::<Axes>().unwrap(), Axes::C01B);
        assert_eq!(Axes::default(), Axes::B01C);
        assert_eq!(Axes::C01B.to_string(), "c 0 1 b");
    }

    #[test]
    fn rejects_non_permutations() {
        for s in ["b b 0 1", "b c 0", "b c 0 1 1", "b c 0 2", "", "bc0x"] {
            assert!(
                matches!(s.parse::<Axes>(), Err(SpaceError::Parse { .. })),
                "{s}"
            );
        }
        let dup = Axes::new([Axis::Batch, Axis::Row, Axis::Row, Axis::Channel]);
        assert!(matches!(dup, Err(SpaceError::InvalidArgument(_))));
    }

    #[test]
    fn permutations() {
        assert_eq!(Axes::B01C.permutation_to(&Axes::B01C), [0, 1, 2, 3]);
        assert_eq!(Axes::B01C.permutation_to(&Axes::BC01), [0, 3, 1, 2]);
        assert_eq!(Axes::C01B.permutation_to(&Axes::B01C), [3, 1, 2, 0]);
        for a in [Axes::B01C, Axes::BC01, Axes::C01B] {
            for b in [Axes::B01C, Axes::BC01, Axes::C01B] {
                let p = a.permutation_to(&b);
                let back = b.permutation_to(&a);
                // Composing the two transposes is the identity.
                assert_eq!(back.map(|i| p[i]), [0, 1, 2, 3]);
            }
        }
    }
}
