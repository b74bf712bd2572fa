//! The `-j` worker pool: commands over many files run on scoped threads, either
//! largest input first with results in completion order ([`largest_first`]), or with
//! results in input order as soon as they and all before them are done
//! ([`ordered_pool`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The default number of workers: one per core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `work` over the inputs on `jobs` threads, largest (by `size`) first, and hands
/// each result to `report` (one at a time, in completion order).
pub fn largest_first<I: Sync, T: Send>(
    inputs: &[I],
    size: impl Fn(&I) -> u64,
    jobs: usize,
    work: impl Fn(&I) -> T + Sync,
    report: impl FnMut(&I, T) + Send,
) {
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(size(&inputs[i])));
    let next = AtomicUsize::new(0);
    let report = Mutex::new(report);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, inputs.len().max(1)) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(k) else { break };
                let r = work(&inputs[i]);
                let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
                (*report)(&inputs[i], r);
            });
        }
    });
}

/// Runs `work` over `items` on `jobs` threads and hands each result to `report` on the
/// calling thread in the order of `items`, as soon as it and all before it are done:
/// output stays deterministic and streams while the workers go on.
pub fn ordered_pool<I: Sync, T: Send>(
    items: &[I],
    jobs: usize,
    work: impl Fn(&I) -> T + Sync,
    mut report: impl FnMut(usize, T),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            s.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(k) else { break };
                if tx.send((k, work(item))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting = std::collections::BTreeMap::new();
        let mut want = 0;
        for (k, r) in rx {
            waiting.insert(k, r);
            while let Some(r) = waiting.remove(&want) {
                report(want, r);
                want += 1;
            }
        }
    });
}
