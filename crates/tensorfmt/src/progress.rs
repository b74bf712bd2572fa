//! Progress of long conversions: one hook, called between pieces.
//!
//! A [`Progress`] counts the bytes of the tensors being converted, as decoded (dtype
//! size × elements, the unit of [`TensorInfo`] listings), and calls its hook with
//! `(done, total)`: once at the start, then whenever a piece read brought `done` at
//! least [`STEP`] bytes further, and once with `done == total` when the last piece has
//! been read (before the output is committed). Pieces are what the readers hand out
//! (a frame, or at most 16 MiB of a large tensor), never single elements.
//!
//! The hook may stop the work: an `Err` it returns ends the conversion at that piece
//! (the writer's temporary file is removed, nothing is published), and every later
//! call fails the same way without calling the hook again.
//!
//! [`Tracked`] is the piece boundary: a [`TensorFile`] wrapper that advances a
//! progress by every tensor, piece or sparse row read through it. The conversion path
//! ([`Document::convert_with_progress`](crate::Document::convert_with_progress),
//! [`save_with_progress`](crate::save_with_progress)) wraps its source in
//! one; the CLI's progress bar and Python's `progress=` callback are two hooks on it.
//!
//! ```
//! use std::sync::Mutex;
//! use tensorfmt::{progress::{Progress, Tracked}, Document, TensorFile};
//! let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/mixed.npz");
//! let doc = Document::open(&path)?;
//! let total = tensorfmt::progress::total_bytes(&doc, &doc.names());
//! let calls = Mutex::new(Vec::new());
//! let progress = Progress::new(total, |done, total| {
//!     calls.lock().unwrap().push((done, total));
//!     Ok(())
//! });
//! progress.start()?;
//! let tracked = Tracked::new(&doc, &progress);
//! for name in doc.names() {
//!     tracked.read_tensor(&name)?;
//! }
//! progress.finish()?;
//! let calls = calls.lock().unwrap().clone();
//! assert_eq!(calls.first(), Some(&(0, total)));
//! assert_eq!(calls.last(), Some(&(total, total)));
//! # Ok::<(), tensorfmt::Error>(())
//! ```

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tensorfmt_core::{
    Chunks, Error, FieldValue, Result, SourceLayout, SparseRows, Stats, Tensor, TensorFile,
    TensorInfo,
};

/// The smallest advance reported between the first and the last call.
pub const STEP: u64 = 4 << 20;

/// The hook's type: `(done, total)` in bytes; an `Err` stops the work.
pub type Hook<'a> = dyn Fn(u64, u64) -> Result<()> + Send + Sync + 'a;

/// The bytes (as listed: dtype size × elements) of the tensors `names` of `file`.
///
/// ```
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
/// let doc = tensorfmt::Document::open(&path)?;
/// assert_eq!(tensorfmt::progress::total_bytes(&doc, &["values".into()]), 3 * 2 * 3 * 2 * 4);
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn total_bytes(file: &dyn TensorFile, names: &[String]) -> u64 {
    let wanted: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    file.tensors()
        .iter()
        .filter(|i| wanted.contains(i.name.as_str()))
        .map(listed_bytes)
        .sum()
}

/// The bytes of one listed tensor.
fn listed_bytes(info: &TensorInfo) -> u64 {
    info.shape.byte_len(info.dtype.size()).unwrap_or(0) as u64
}

/// Counts bytes done out of a total and reports them to a hook (see the module).
pub struct Progress<'a> {
    hook: Option<Box<Hook<'a>>>,
    total: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    done: u64,
    /// The last `done` reported, if any.
    reported: Option<u64>,
    /// The hook's first error, repeated to every later call.
    failed: Option<String>,
}

impl<'a> Progress<'a> {
    /// A progress over `total` bytes reporting to `hook`.
    pub fn new(total: u64, hook: impl Fn(u64, u64) -> Result<()> + Send + Sync + 'a) -> Self {
        Progress {
            hook: Some(Box::new(hook)),
            total,
            state: Mutex::new(State::default()),
        }
    }

    /// A progress that reports to nobody.
    pub fn silent() -> Progress<'static> {
        Progress {
            hook: None,
            total: 0,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether this progress reports to nobody ([`Progress::silent`]).
    pub fn is_silent(&self) -> bool {
        self.hook.is_none()
    }

    /// The total given at creation.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The bytes counted so far (at most the total).
    pub fn done(&self) -> u64 {
        self.lock().done
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reports `(0, total)` unless something was reported already.
    pub fn start(&self) -> Result<()> {
        self.advance(0)
    }

    /// Counts `n` more bytes (never beyond the total) and reports when due: the first
    /// call, an advance of [`STEP`] since the last report, or reaching the total.
    pub fn advance(&self, n: u64) -> Result<()> {
        self.update(|done, _| done.saturating_add(n))
    }

    /// Counts `done` bytes in all (when more than counted so far) and reports when due.
    pub fn advance_to(&self, done: u64) -> Result<()> {
        self.update(|d, _| d.max(done))
    }

    /// Counts everything as done and reports `(total, total)` unless already reported.
    pub fn finish(&self) -> Result<()> {
        self.update(|_, total| total)
    }

    fn update(&self, next: impl FnOnce(u64, u64) -> u64) -> Result<()> {
        let Some(hook) = &self.hook else {
            return Ok(());
        };
        // The lock is held across the hook, so reports come in order (monotone).
        let mut s = self.lock();
        if let Some(why) = &s.failed {
            return Err(Error::Invalid(why.clone()));
        }
        s.done = next(s.done, self.total).min(self.total);
        let due = match s.reported {
            None => true,
            Some(r) => s.done >= r.saturating_add(STEP) || (s.done == self.total && r < s.done),
        };
        if !due {
            return Ok(());
        }
        s.reported = Some(s.done);
        if let Err(e) = hook(s.done, self.total) {
            s.failed = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Progress<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("total", &self.total)
            .field("done", &self.done())
            .finish()
    }
}

/// Forwards to a file, advancing a [`Progress`] by the bytes of every tensor, piece or
/// sparse row read. Each tensor read to its end counts exactly its listed bytes (a
/// sparse row counts its dense share; the remainder is added at the last row), so a
/// conversion that reads every selected tensor once ends at `done == total`.
pub struct Tracked<'a> {
    inner: &'a dyn TensorFile,
    progress: &'a Progress<'a>,
    /// The listing by name, built on first use, so that per-tensor calls do not each
    /// list the file (quadratic in the number of tensors).
    index: OnceLock<HashMap<String, TensorInfo>>,
}

impl<'a> Tracked<'a> {
    /// Wraps `inner`, advancing `progress`.
    pub fn new(inner: &'a dyn TensorFile, progress: &'a Progress<'a>) -> Tracked<'a> {
        Tracked {
            inner,
            progress,
            index: OnceLock::new(),
        }
    }

    /// The listed bytes of `name` (0 when not listed).
    fn bytes_of(&self, name: &str) -> u64 {
        self.info(name).map_or(0, listed_bytes)
    }

    fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.index
            .get_or_init(|| {
                let mut index = HashMap::new();
                for info in self.inner.tensors() {
                    if !index.contains_key(&info.name) {
                        index.insert(info.name.clone(), info);
                    }
                }
                index
            })
            .get(name)
    }
}

/// A file read through a progress ([`Tracked`]), or as it is when the progress reports
/// to nobody: a conversion without a hook pays nothing for the bookkeeping (a listing
/// by name, a lock per piece; about 10 % of writing 10k small tensors to safetensors).
pub enum Reading<'a> {
    /// The file itself.
    Plain(&'a dyn TensorFile),
    /// The file through its progress.
    Tracked(Tracked<'a>),
}

impl<'a> Reading<'a> {
    /// `inner` read through `progress`, unless `progress` is silent.
    pub fn of(inner: &'a dyn TensorFile, progress: &'a Progress<'a>) -> Reading<'a> {
        if progress.is_silent() {
            Reading::Plain(inner)
        } else {
            Reading::Tracked(Tracked::new(inner, progress))
        }
    }
}

impl<'a> std::ops::Deref for Reading<'a> {
    type Target = dyn TensorFile + 'a;
    fn deref(&self) -> &Self::Target {
        match self {
            Reading::Plain(f) => *f,
            Reading::Tracked(t) => t,
        }
    }
}

/// A piece stream that advances a progress, and adds what its pieces did not count
/// when it ends.
struct CountedChunks<'b> {
    inner: Chunks<'b>,
    progress: &'b Progress<'b>,
    remaining: u64,
    ended: bool,
}

impl Iterator for CountedChunks<'_> {
    type Item = Result<Tensor>;
    fn next(&mut self) -> Option<Result<Tensor>> {
        if self.ended {
            return None;
        }
        match self.inner.next() {
            Some(Ok(t)) => {
                let n = (t.bytes().len() as u64).min(self.remaining);
                self.remaining -= n;
                match self.progress.advance(n) {
                    Ok(()) => Some(Ok(t)),
                    Err(e) => {
                        self.ended = true;
                        Some(Err(e))
                    }
                }
            }
            Some(Err(e)) => Some(Err(e)),
            None => {
                self.ended = true;
                let rest = std::mem::take(&mut self.remaining);
                self.progress.advance(rest).err().map(Err)
            }
        }
    }
}

impl TensorFile for Tracked<'_> {
    fn format(&self) -> &'static str {
        self.inner.format()
    }
    fn kind(&self) -> String {
        self.inner.kind()
    }
    fn kind_id(&self) -> &'static str {
        self.inner.kind_id()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.inner.header()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.inner.tensors()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        let t = self.inner.read_tensor(name)?;
        let listed = self.bytes_of(name);
        let n = if listed > 0 {
            listed
        } else {
            t.bytes().len() as u64
        };
        self.progress.advance(n)?;
        Ok(t)
    }
    fn read_chunks<'b>(&'b self, name: &str) -> Result<Chunks<'b>> {
        Ok(Box::new(CountedChunks {
            inner: self.inner.read_chunks(name)?,
            progress: self.progress,
            remaining: self.bytes_of(name),
            ended: false,
        }))
    }
    fn stats(&self, name: &str) -> Result<Stats> {
        // The inner file's own statistics (from the entries for sparse tensors, which a
        // counted piece stream would densify); the progress advances per tensor.
        let s = self.inner.stats(name)?;
        self.progress.advance(self.bytes_of(name))?;
        Ok(s)
    }
    fn sparse_rows<'b>(&'b self, name: &str) -> Option<Result<SparseRows<'b>>> {
        // Rows hold entries, not the dense bytes counted: each row counts its dense
        // share, and the last one the remainder, so a tensor read whole counts its bytes.
        let rows = self.inner.sparse_rows(name)?;
        let info = self.info(name)?;
        let total = listed_bytes(info);
        let rows_n = info.shape.dims().first().copied().unwrap_or(1).max(1) as u64;
        let row_bytes = total / rows_n;
        let progress = self.progress;
        Some(rows.map(|rows| -> SparseRows<'b> {
            let mut remaining = total;
            let mut ended = false;
            let mut rows = rows;
            Box::new(std::iter::from_fn(move || {
                if ended {
                    return None;
                }
                let (n, item) = match rows.next() {
                    Some(Ok(r)) => (row_bytes.min(remaining), Some(Ok(r))),
                    Some(Err(e)) => return Some(Err(e)),
                    None => {
                        ended = true;
                        (remaining, None)
                    }
                };
                remaining -= n;
                match progress.advance(n) {
                    Ok(()) => item,
                    Err(e) => {
                        ended = true;
                        Some(Err(e))
                    }
                }
            }))
        }))
    }
    fn source_layout(&self, name: &str) -> Option<SourceLayout> {
        self.inner.source_layout(name)
    }
    fn source_layouts(&self) -> Vec<Option<SourceLayout>> {
        self.inner.source_layouts()
    }
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }
    fn lenient(&self) -> bool {
        self.inner.lenient()
    }
    fn external_files(&self) -> Vec<String> {
        self.inner.external_files()
    }
    fn layout_settings(&self) -> Vec<(String, String)> {
        self.inner.layout_settings()
    }
    fn validate(&self) -> Result<()> {
        self.inner.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interop::MemoryFile;
    use tensorfmt_core::Order;

    fn big(rows: usize) -> MemoryFile {
        // 8 MiB rows of u8: pieces of 16 MiB.
        let row = 8 << 20;
        let t = Tensor::from_vec(vec![1u8; rows * row], [rows, row], Order::RowMajor).unwrap();
        MemoryFile::new(vec![("t".into(), t)])
    }

    #[test]
    fn reports_start_steps_and_the_exact_end() {
        let f = big(5);
        let total = total_bytes(&f, &["t".into()]);
        let calls = Mutex::new(Vec::new());
        let p = Progress::new(total, |d, t| {
            calls.lock().unwrap().push((d, t));
            Ok(())
        });
        p.start().unwrap();
        let tracked = Tracked::new(&f, &p);
        let n: usize = tracked
            .read_chunks("t")
            .unwrap()
            .map(|c| c.unwrap().bytes().len())
            .sum();
        assert_eq!(n as u64, total);
        p.finish().unwrap();
        let calls = calls.lock().unwrap().clone();
        assert_eq!(calls.first(), Some(&(0, total)));
        assert_eq!(calls.last(), Some(&(total, total)));
        assert!(calls.len() >= 4, "{calls:?}");
        assert!(calls.windows(2).all(|w| w[0].0 < w[1].0), "{calls:?}");
    }

    #[test]
    fn a_failing_hook_stops_the_stream_and_stays_failed() {
        let f = big(4);
        let count = Mutex::new(0);
        let p = Progress::new(total_bytes(&f, &["t".into()]), |d, _| {
            *count.lock().unwrap() += 1;
            if d > 0 {
                Err(Error::Invalid("stop".into()))
            } else {
                Ok(())
            }
        });
        p.start().unwrap();
        let tracked = Tracked::new(&f, &p);
        let items: Vec<Result<Tensor>> = tracked.read_chunks("t").unwrap().collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].is_err());
        assert!(p.finish().is_err());
        assert!(tracked.read_tensor("t").is_err());
        assert_eq!(*count.lock().unwrap(), 2);
    }

    #[test]
    fn silent_progress_never_fails() {
        let p = Progress::silent();
        p.start().unwrap();
        p.advance(10).unwrap();
        p.finish().unwrap();
    }
}
