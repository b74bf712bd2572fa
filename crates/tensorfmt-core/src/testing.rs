//! Test support shared by the format crates: locating the shared corpus, writers
//! that fail part-way ([`FailAfter`]) and truncation points ([`prefix_lengths`]).

use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The corpus folder for one format (`pvp`, `som`, `primitiv`, `caffe`).
///
/// Looks at `$TENSORFMT_CORPUS/<format>` first, then `../shared/corpus/<format>` beside
/// the workspace (found by walking up from `manifest_dir`). When it is missing this
/// prints a loud message and returns `None` so the caller can skip, except under
/// `CI=true`, where a missing corpus panics: CI must not pass by skipping.
///
/// ```no_run
/// if let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") {
///     assert!(dir.join("SOURCES.md").exists());
/// }
/// ```
pub fn corpus_dir(manifest_dir: &str, format: &str) -> Option<PathBuf> {
    // Empty is unset, as the Python tests' conftest takes it.
    let candidate = match std::env::var_os("TENSORFMT_CORPUS").filter(|v| !v.is_empty()) {
        Some(root) => Some(PathBuf::from(root).join(format)),
        None => Path::new(manifest_dir)
            .ancestors()
            .map(|a| a.join("../shared/corpus").join(format))
            .find(|p| p.is_dir()),
    };
    match candidate {
        Some(p) if p.is_dir() => Some(p),
        _ => {
            let msg = format!(
                "SKIPPED: the {format} corpus was not found (set TENSORFMT_CORPUS or put it at ../shared/corpus)"
            );
            if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
                panic!("{msg}; CI=true requires the corpus");
            }
            eprintln!("\n!!!!!!!! {msg} !!!!!!!!\n");
            None
        }
    }
}

/// A writer that accepts `limit` bytes and then fails every further write, to check
/// that writers report the error (and never panic or leave half files).
///
/// It also implements `Seek` within what it has accepted, for writers that patch
/// headers at the end.
///
/// ```
/// use std::io::Write;
/// use tensorfmt_core::testing::FailAfter;
/// let mut w = FailAfter::new(3);
/// assert!(w.write_all(b"abcd").is_err());
/// assert_eq!(w.written(), b"abc");
/// ```
#[derive(Debug, Clone, Default)]
pub struct FailAfter {
    limit: usize,
    buf: Vec<u8>,
    pos: usize,
}

impl FailAfter {
    /// A writer that fails once `limit` bytes have been written.
    pub fn new(limit: usize) -> FailAfter {
        FailAfter {
            limit,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The bytes accepted so far.
    pub fn written(&self) -> &[u8] {
        &self.buf
    }
}

impl Write for FailAfter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let room = self.limit.saturating_sub(self.pos);
        if room == 0 {
            return Err(io::Error::other("FailAfter: injected write failure"));
        }
        let n = room.min(data.len());
        let end = self.pos + n;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        self.buf[self.pos..end].copy_from_slice(&data[..n]);
        self.pos = end;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for FailAfter {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let new = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => (self.buf.len() as u64).checked_add_signed(d),
            SeekFrom::Current(d) => (self.pos as u64).checked_add_signed(d),
        };
        match new.and_then(|p| usize::try_from(p).ok()) {
            Some(p) => {
                self.pos = p;
                Ok(p as u64)
            }
            None => Err(io::Error::other("FailAfter: seek out of range")),
        }
    }
}

/// Prefix lengths for a truncation sweep of a `len`-byte file: every length for files
/// up to 4 KiB; otherwise each structure `boundary` and its neighbours (±1, ±4), the
/// first and last 256 lengths, and about 512 evenly spread others. Sorted, distinct,
/// all below `len`.
///
/// ```
/// use tensorfmt_core::testing::prefix_lengths;
/// assert_eq!(prefix_lengths(3, &[]), vec![0, 1, 2]);
/// let big = prefix_lengths(1 << 20, &[5000]);
/// assert!(big.contains(&4999) && big.contains(&5000) && big.contains(&5001));
/// assert!(big.len() < 2000 && *big.last().unwrap() == (1 << 20) - 1);
/// ```
pub fn prefix_lengths(len: usize, boundaries: &[usize]) -> Vec<usize> {
    if len <= 4096 {
        return (0..len).collect();
    }
    let mut v: Vec<usize> = (0..256).chain(len - 256..len).collect();
    for &b in boundaries {
        for d in [-4isize, -1, 0, 1, 4] {
            if let Some(x) = b.checked_add_signed(d) {
                v.push(x);
            }
        }
    }
    let step = (len / 512).max(1);
    v.extend((0..len).step_by(step));
    v.retain(|&x| x < len);
    v.sort_unstable();
    v.dedup();
    v
}

/// The killed-writer check every format's durability tests share: re-runs the current
/// test binary as a child that executes only the test `child_test` with `env_var` set
/// to `target` (that test rewrites `target` in a loop until killed, and does nothing
/// when the variable is unset), kills it `delays_ms[i]` milliseconds after its
/// temporary file appears, and checks that `target` then holds either `old` or a
/// complete new file (`check_new` gets its bytes and asserts), never a half file.
/// Leftover temporary files of the killed child are removed between rounds.
///
/// ```no_run
/// # let (target, old) = (std::path::PathBuf::from("m.bin"), vec![0u8]);
/// tensorfmt_core::testing::kill_rewriting_child(
///     "child_writer_loop", "MY_CRATE_KILL_TARGET", &target, &old, &[0, 30, 120],
///     |new| assert_eq!(new.len(), 64 << 20),
/// );
/// ```
pub fn kill_rewriting_child(
    child_test: &str,
    env_var: &str,
    target: &Path,
    old: &[u8],
    delays_ms: &[u64],
    check_new: impl Fn(&[u8]),
) {
    use std::time::{Duration, Instant};
    let dir = target.parent().expect("the target has a directory");
    let exe = std::env::current_exe().expect("the test binary's path");
    std::fs::write(target, old).expect("writing the old file");
    for &delay in delays_ms {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .env(env_var, target)
            .spawn()
            .expect("spawning the child");
        // Wait until the child's temporary file exists: it is writing.
        let t = Instant::now();
        while std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0) < 2 {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the child never started writing"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().expect("killing the child");
        child.wait().expect("reaping the child");
        let now = std::fs::read(target).expect("the target still exists");
        if now != old {
            check_new(&now);
        }
        for e in std::fs::read_dir(dir).expect("listing the directory") {
            let p = e.expect("a directory entry").path();
            if p != target {
                std::fs::remove_file(p).expect("removing a leftover");
            }
        }
        std::fs::write(target, old).expect("restoring the old file");
    }
}

/// [`prefix_lengths`] thinned to about `budget` points, for files whose every prefix
/// costs a full decode: the points near a `boundary` (within 4 bytes) are kept first
/// (a spread of them when they alone exceed half the budget), then an even sample of
/// the others. Sorted, distinct, all below `len`.
///
/// ```
/// use tensorfmt_core::testing::prefix_lengths_within;
/// assert_eq!(prefix_lengths_within(3, &[], 10), vec![0, 1, 2]);
/// let v = prefix_lengths_within(1 << 20, &[5000], 64);
/// assert!(v.contains(&5000) && v.len() <= 128);
/// ```
pub fn prefix_lengths_within(len: usize, boundaries: &[usize], budget: usize) -> Vec<usize> {
    let all = prefix_lengths(len, boundaries);
    if all.len() <= budget {
        return all;
    }
    let near = |x: usize| boundaries.iter().any(|&b| x.abs_diff(b) <= 4);
    let (mut must, rest): (Vec<usize>, Vec<usize>) = all.into_iter().partition(|&x| near(x));
    if must.len() > budget / 2 {
        // Many small structures (e.g. hundreds of tiny frames): a spread of them.
        let step = must.len().div_ceil((budget / 2).max(1));
        must = must.into_iter().step_by(step).collect();
    }
    let step = (rest.len() / budget.saturating_sub(must.len()).max(16)).max(1);
    let mut v: Vec<usize> = must
        .into_iter()
        .chain(rest.into_iter().step_by(step))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Reads everything a file lists: each tensor whole (whose shape must match the
/// listing, else this panics: a reader contradicting itself is a bug, not bad input),
/// each tensor's pieces, then `validate`. The first error is returned.
///
/// ```
/// use tensorfmt_core::{testing::read_fully, Order, Tensor};
/// # struct One(Tensor);
/// # impl tensorfmt_core::TensorFile for One {
/// #     fn format(&self) -> &'static str { "demo" }
/// #     fn kind(&self) -> String { String::new() }
/// #     fn header(&self) -> Vec<(String, tensorfmt_core::FieldValue)> { Vec::new() }
/// #     fn tensors(&self) -> Vec<tensorfmt_core::TensorInfo> {
/// #         vec![tensorfmt_core::TensorInfo::new("x", self.0.dtype(), self.0.shape().clone())]
/// #     }
/// #     fn read_tensor(&self, _: &str) -> tensorfmt_core::Result<Tensor> { Ok(self.0.clone()) }
/// # }
/// read_fully(&One(Tensor::from_vec(vec![1u8, 2], [2], Order::RowMajor)?))?;
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
pub fn read_fully(f: &dyn crate::TensorFile) -> crate::Result<()> {
    for t in f.tensors() {
        let x = f.read_tensor(&t.name)?;
        assert_eq!(x.dims(), t.shape.dims(), "tensor {:?}", t.name);
        for piece in f.read_chunks(&t.name)? {
            piece?;
        }
    }
    f.validate()
}

/// Runs `f` and asserts it finished within 2 seconds: a hostile size was refused
/// before any big allocation or scan.
///
/// ```
/// assert_eq!(tensorfmt_core::testing::assert_fast("adding", || 1 + 1), 2);
/// ```
pub fn assert_fast<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = std::time::Instant::now();
    let r = f();
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{what} took {:?}",
        t.elapsed()
    );
    r
}

/// The format crate's error `E` inside a core [`Error::Format`](crate::Error::Format);
/// panics when `e` is anything else (for tests asserting which error a reader gave).
///
/// ```
/// use tensorfmt_core::{testing::format_error, Error};
/// #[derive(Debug, thiserror::Error)]
/// #[error("bad")]
/// struct Bad;
/// let e = Error::format("demo", Bad);
/// let _: &Bad = format_error::<Bad>(&e);
/// ```
pub fn format_error<E: std::error::Error + 'static>(e: &crate::Error) -> &E {
    match e {
        crate::Error::Format { source, .. } => source
            .downcast_ref::<E>()
            .unwrap_or_else(|| panic!("not a {} error: {e}", std::any::type_name::<E>())),
        other => panic!("not a format error: {other}"),
    }
}

/// Passes the first `limit` bytes through to `inner`, then fails every write: a disk
/// filling up part-way under a real writer (e.g. an [`AtomicFile`](crate::io::AtomicFile),
/// to check that the old file survives). Seeks go to `inner` when it can seek.
///
/// ```
/// use std::io::Write;
/// use tensorfmt_core::testing::PassThenFail;
/// let mut out = Vec::new();
/// let mut w = PassThenFail::new(&mut out, 2);
/// assert!(w.write_all(b"abc").is_err());
/// assert_eq!(out, b"ab");
/// ```
#[derive(Debug)]
pub struct PassThenFail<W> {
    inner: W,
    left: usize,
}

impl<W> PassThenFail<W> {
    /// A writer passing `limit` bytes to `inner`, then failing.
    pub fn new(inner: W, limit: usize) -> PassThenFail<W> {
        PassThenFail { inner, left: limit }
    }
}

impl<W: Write> Write for PassThenFail<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            return Err(io::Error::other("PassThenFail: disk full (simulated)"));
        }
        let n = self.inner.write(&data[..data.len().min(self.left)])?;
        self.left -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Seek> Seek for PassThenFail<W> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}
