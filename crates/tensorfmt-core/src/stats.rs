//! Summary statistics over a tensor's elements ([`Stats`]).

use crate::Element;

/// Summary statistics of a tensor, all computed in `f64`.
///
/// NaNs are counted and excluded from min, max, sum and mean. For an empty tensor
/// (or one of only NaNs) min, max and mean are `None`.
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec(vec![1.0f32, f32::NAN, -2.0, 0.0], [4], Order::RowMajor)?;
/// let s = t.stats();
/// assert_eq!((s.min, s.max, s.sum), (Some(-2.0), Some(1.0), -1.0));
/// assert_eq!((s.nonzero, s.nan, s.count), (3, 1, 4));
/// assert_eq!(s.mean, Some(-1.0 / 3.0));
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    /// Number of elements.
    pub count: usize,
    /// Smallest non-NaN value.
    pub min: Option<f64>,
    /// Largest non-NaN value.
    pub max: Option<f64>,
    /// Mean of the non-NaN values.
    pub mean: Option<f64>,
    /// Sum of the non-NaN values.
    pub sum: f64,
    /// Number of elements that are not zero (NaN counts as non-zero, as in numpy).
    pub nonzero: usize,
    /// Number of NaN elements.
    pub nan: usize,
}

impl Stats {
    /// Statistics of a slice of elements.
    pub fn of<T: Element>(values: &[T]) -> Stats {
        let mut st = Accum::default();
        // Chunked so the compiler can keep several independent accumulators.
        for chunk in values.chunks(4096) {
            let mut a = Accum::default();
            for &v in chunk {
                a.push(v.to_f64());
            }
            st.merge(&a);
        }
        st.finish(values.len())
    }

    /// The statistics of `count` zeros (the implicit elements of a sparse tensor).
    ///
    /// ```
    /// use tensorfmt_core::Stats;
    /// let s = Stats::of(&[2f32, 0.0, 4.0]).merge(&Stats::zeros(7));
    /// assert_eq!((s.count, s.nonzero, s.sum, s.min, s.max), (10, 2, 6.0, Some(0.0), Some(4.0)));
    /// assert_eq!(s, Stats::of(&[2f32, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]));
    /// ```
    pub fn zeros(count: usize) -> Stats {
        let any = count > 0;
        Stats {
            count,
            min: any.then_some(0.0),
            max: any.then_some(0.0),
            mean: any.then_some(0.0),
            sum: 0.0,
            nonzero: 0,
            nan: 0,
        }
    }

    /// Merges the statistics of two disjoint parts (for streaming over frames).
    pub fn merge(&self, other: &Stats) -> Stats {
        let valid_a = self.count - self.nan;
        let valid_b = other.count - other.nan;
        let min = match (self.min, other.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let max = match (self.max, other.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let sum = self.sum + other.sum;
        let valid = valid_a + valid_b;
        Stats {
            count: self.count + other.count,
            min,
            max,
            mean: (valid > 0).then(|| sum / valid as f64),
            sum,
            nonzero: self.nonzero + other.nonzero,
            nan: self.nan + other.nan,
        }
    }
}

#[derive(Default)]
struct Accum {
    min: f64,
    max: f64,
    sum: f64,
    nonzero: usize,
    nan: usize,
    valid: usize,
}

impl Accum {
    #[inline]
    fn push(&mut self, x: f64) {
        if x.is_nan() {
            self.nan += 1;
            self.nonzero += 1;
            return;
        }
        if self.valid == 0 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.valid += 1;
        self.sum += x;
        self.nonzero += (x != 0.0) as usize;
    }

    fn merge(&mut self, o: &Accum) {
        if o.valid > 0 {
            if self.valid == 0 {
                self.min = o.min;
                self.max = o.max;
            } else {
                self.min = self.min.min(o.min);
                self.max = self.max.max(o.max);
            }
        }
        self.valid += o.valid;
        self.sum += o.sum;
        self.nonzero += o.nonzero;
        self.nan += o.nan;
    }

    fn finish(&self, count: usize) -> Stats {
        let some = |v| (self.valid > 0).then_some(v);
        Stats {
            count,
            min: some(self.min),
            max: some(self.max),
            mean: some(self.sum / self.valid.max(1) as f64),
            sum: self.sum,
            nonzero: self.nonzero,
            nan: self.nan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_merge() {
        let e = Stats::of::<f32>(&[]);
        assert_eq!((e.min, e.max, e.mean, e.count), (None, None, None, 0));
        let a = Stats::of(&[1i32, 2, 3]);
        let b = Stats::of(&[0i32, 10]);
        let m = a.merge(&b);
        assert_eq!(m, Stats::of(&[1i32, 2, 3, 0, 10]));
        assert_eq!(m.merge(&e), m);
    }
}
