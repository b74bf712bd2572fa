//! Shared helpers for the tensorfmt benchmarks.

use std::time::Instant;

/// Runs each function of `fs` once as a warm-up, then `repeat` rounds of one run of
/// each, one after another (so a path and its baseline meet the same machine state),
/// and returns the (min, median) seconds of each.
///
/// ```
/// let mut a = || std::hint::black_box((0..1000).sum::<u64>());
/// let mut b = || std::hint::black_box((0..10).sum::<u64>());
/// let t = tensorfmt_benches::alternate(5, &mut [&mut || { a(); }, &mut || { b(); }]);
/// assert_eq!(t.len(), 2);
/// assert!(t.iter().all(|&(min, median)| min <= median));
/// ```
pub fn alternate(repeat: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<(f64, f64)> {
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); fs.len()];
    for round in 0..=repeat.max(1) {
        for (f, t) in fs.iter_mut().zip(&mut times) {
            let t0 = Instant::now();
            f();
            if round > 0 {
                t.push(t0.elapsed().as_secs_f64());
            }
        }
    }
    times.into_iter().map(min_median).collect()
}

/// Min and median of a non-empty sample (the upper median for an even count).
///
/// ```
/// assert_eq!(tensorfmt_benches::min_median(vec![3.0, 1.0, 2.0]), (1.0, 2.0));
/// ```
pub fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}
