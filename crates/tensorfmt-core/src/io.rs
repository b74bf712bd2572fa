//! File access shared by every format: mapping a file into [`Bytes`] (guarded against
//! inputs that shrink while mapped: [`install_fault_guard`]), giving the pages of a
//! streamed map back to the kernel ([`release_pages`]), and writing through a temporary
//! file that is renamed into place ([`AtomicFile`], which removes the stale temporary
//! files of killed writers).

mod fault_guard;
mod interrupt;

pub use interrupt::{
    check_stop, install_termination_cleanup, remove_live_temporaries, stop_writes, writes_stopped,
};

pub use fault_guard::{
    faults as guarded_faults, install as install_fault_guard, last_faulted_path,
};

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use crate::{Error, Result};

/// Maps a file read-only and returns its contents as zero-copy [`Bytes`].
///
/// The mapping lives as long as any `Bytes` (or tensor) sliced from it. If another
/// process truncates the file while it is mapped, reads of the vanished pages see zeros
/// instead of killing the process with `SIGBUS` (the fault guard, installed on first
/// use), and any [`AtomicFile`] written meanwhile refuses to commit with
/// [`Error::InputChanged`]; our own writers never modify a file in place except PVP
/// appends, which only grow it.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("x.bin");
/// std::fs::write(&p, b"hello")?;
/// let b = tensorfmt_core::io::map_file(&p)?;
/// assert_eq!(&b[..], b"hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn map_file(path: impl AsRef<Path>) -> Result<Bytes> {
    let path = path.as_ref();
    let file = open_regular(path)?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        // Mapping an empty file fails on some platforms; there is nothing to share.
        return Ok(Bytes::new());
    }
    // SAFETY: the map is private to this process and tensorfmt only reads it. A file
    // truncated while mapped would make reads fault; the fault guard registered below
    // turns such a fault into a zero page plus an `InputChanged` error at the next
    // commit (see `fault_guard`). Tested by `tests::map_file_reads_contents` and
    // `tests::a_shrinking_input_reads_zeros_and_blocks_commits`.
    let map = unsafe { Mapping::new(&file) }.map_err(|e| Error::io(path, e))?;
    let guard = fault_guard::register(&map, path);
    // The file stays open with its mapping: `AtomicFile::write_mapped` copies from it.
    let map = Arc::new(Source { map, file });
    {
        let mut live = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&map));
    }
    Ok(Bytes::from_owner(SharedMap { _guard: guard, map }))
}

/// A file mapping. Copy-on-write (`MAP_PRIVATE`, readable and writable, no swap
/// reserved) where the system allows it: tensorfmt never writes to it, but a caller that
/// bypasses a read-only view (`torch.from_numpy` on an array we return, then an in-place
/// op; torch only warns) writes to private copies of the pages instead of faulting on a
/// read-only page and killing the process. The file never changes. Pages nobody writes
/// stay the page cache's, so reading costs the same. Where the copy-on-write map is
/// refused (strict overcommit accounting charges it, `vm.overcommit_memory=2`), a
/// read-only shared map.
enum Mapping {
    Private(memmap2::MmapMut),
    Shared(memmap2::Mmap),
}

impl Mapping {
    /// # Safety
    /// As for `memmap2::Mmap::map`: the file should not shrink while mapped (reads of
    /// vanished pages fault; `map_file` registers the fault guard for that).
    unsafe fn new(file: &File) -> io::Result<Mapping> {
        // SAFETY: the caller's contract, passed on.
        match unsafe { memmap2::MmapOptions::new().no_reserve_swap().map_copy(file) } {
            Ok(m) => Ok(Mapping::Private(m)),
            // SAFETY: the caller's contract, passed on.
            Err(_) => unsafe { memmap2::Mmap::map(file) }.map(Mapping::Shared),
        }
    }

    /// # Safety
    /// As for `memmap2::Mmap::unchecked_advise_range`.
    unsafe fn unchecked_advise_range(
        &self,
        advice: memmap2::UncheckedAdvice,
        offset: usize,
        len: usize,
    ) -> io::Result<()> {
        match self {
            // SAFETY: the caller's contract, passed on.
            Mapping::Private(m) => unsafe { m.unchecked_advise_range(advice, offset, len) },
            // SAFETY: the caller's contract, passed on.
            Mapping::Shared(m) => unsafe { m.unchecked_advise_range(advice, offset, len) },
        }
    }
}

impl std::ops::Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Mapping::Private(m) => m,
            Mapping::Shared(m) => m,
        }
    }
}

/// A mapping made by [`map_file`] and the open file under it.
struct Source {
    map: Mapping,
    file: File,
}

impl std::ops::Deref for Source {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

/// Every mapping made by [`map_file`] that is still alive, so [`release_pages`] can tell
/// a mapped slice from heap memory (where dropping pages would destroy data), and
/// [`AtomicFile::write_mapped`] the file a slice comes from.
static MAPS: Mutex<Vec<Weak<Source>>> = Mutex::new(Vec::new());

/// The live mapping of [`map_file`] holding all of `data`, and `data`'s offset in its
/// file; `None` for any other memory.
fn mapped_source(data: &[u8]) -> Option<(Arc<Source>, u64)> {
    let start = data.as_ptr() as usize;
    let live = MAPS.lock().unwrap_or_else(|p| p.into_inner());
    live.iter().filter_map(Weak::upgrade).find_map(|map| {
        let base = map.as_ptr() as usize;
        (start >= base && start - base + data.len() <= map.len())
            .then(|| (map.clone(), (start - base) as u64))
    })
}

/// The owner behind a mapped `Bytes`. Fields drop in order: the fault-guard
/// registration goes before the mapping is unmapped.
struct SharedMap {
    _guard: Option<fault_guard::Registration>,
    map: Arc<Source>,
}

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

/// Tells the kernel that the pages under `data` (a slice of a file mapped by
/// [`map_file`]) are not needed for now, and returns how many bytes were advised;
/// for memory that is not such a mapping it does nothing and returns 0.
///
/// Streaming conversions call it after writing each piece: a mapped page that was
/// read stays in the resident set until the kernel reclaims it, so without this,
/// converting a 2 GiB file would show 2 GiB resident although the program holds a few
/// MiB. Contents are unaffected: a later access reads the page from the file again.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("x.bin");
/// std::fs::write(&p, vec![7u8; 1 << 16])?;
/// let b = tensorfmt_core::io::map_file(&p)?;
/// assert_eq!(tensorfmt_core::io::release_pages(&b), 1 << 16);
/// assert!(b.iter().all(|&x| x == 7)); // still readable, same bytes
/// assert_eq!(tensorfmt_core::io::release_pages(&vec![1u8; 8192]), 0); // heap: untouched
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn release_pages(data: &[u8]) -> usize {
    release_span(data.as_ptr() as usize, data.len())
}

/// [`release_pages`] of the address range `start .. start + len`. Only addresses are
/// used: the range is advised only when it lies inside one live mapping of the
/// registry (never heap or anonymous memory), so a range that merges slices read one
/// after another ([`PageReleaser`]) is as safe as one slice.
fn release_span(start: usize, data_len: usize) -> usize {
    if data_len == 0 {
        return 0;
    }
    let live = MAPS.lock().unwrap_or_else(|p| p.into_inner());
    for map in live.iter().filter_map(Weak::upgrade) {
        let base = map.as_ptr() as usize;
        if start < base || start - base + data_len > map.len() {
            continue;
        }
        #[cfg(unix)]
        {
            // (A copy-on-write page written by a caller that bypassed the read-only views
            // reverts to the file's bytes: writing through those views is outside the
            // contract.)
            // SAFETY: the range lies inside a live file mapping (checked against the
            // registry above: never heap or anonymous memory) that we never write.
            // MADV_DONTNEED drops the page-table entries; the next access reads the page
            // again from the unchanged file (`map_file`'s precondition), so no reference
            // observes different bytes; widening to page boundaries is harmless for the
            // same reason. Tested by `tests::released_pages_read_back_the_same`.
            let advised = unsafe {
                map.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start - base,
                    data_len,
                )
            };
            return if advised.is_ok() { data_len } else { 0 };
        }
        #[cfg(not(unix))]
        return 0;
    }
    0
}

/// Batches [`release_pages`] over many small slices handed back one after another (the
/// frames of a movie of small frames, each frame's time field, a sparse frame's
/// count): slices that touch or overlap the pending range join it, and the range is
/// advised once it reaches [`PageReleaser::BATCH`] bytes, when a slice elsewhere
/// arrives, at [`PageReleaser::flush`] and on drop.
///
/// One `madvise` per slice cost a system call plus the re-fault of the page (and the
/// kernel's fault-around window) that the next slice shares: converting a movie of
/// 100 000 frames of 256 bytes spent half its time there (issue 27). Batched, the
/// resident set still stays within one batch of the slices handed back.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("x.bin");
/// std::fs::write(&p, vec![7u8; 1 << 16])?;
/// let b = tensorfmt_core::io::map_file(&p)?;
/// let mut r = tensorfmt_core::io::PageReleaser::new();
/// for piece in b.chunks(256) {
///     assert!(piece.iter().all(|&x| x == 7)); // read ...
///     r.release(piece); // ... and done with: pending, not yet advised
/// }
/// assert_eq!(r.flush(), 1 << 16); // one advice for the 256 pieces
/// assert!(b.iter().all(|&x| x == 7)); // still readable, same bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct PageReleaser {
    start: usize,
    end: usize,
}

impl PageReleaser {
    /// Bytes gathered before they are advised (1 MiB).
    pub const BATCH: usize = 1 << 20;

    /// An empty releaser.
    pub fn new() -> PageReleaser {
        PageReleaser::default()
    }

    /// Marks `data` as done with: it joins the pending range when it touches or
    /// overlaps it, else the pending range is advised first and `data` starts a new one.
    pub fn release(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let (s, e) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
        if self.end > self.start && s >= self.start && s <= self.end {
            self.end = self.end.max(e);
        } else {
            self.flush();
            (self.start, self.end) = (s, e);
        }
        if self.end - self.start >= Self::BATCH {
            self.flush();
        }
    }

    /// Advises the pending range now; returns the bytes advised (0 when none or when
    /// the range is not inside one live mapping).
    pub fn flush(&mut self) -> usize {
        let (s, e) = (self.start, self.end);
        (self.start, self.end) = (0, 0);
        if e > s {
            release_span(s, e - s)
        } else {
            0
        }
    }
}

impl Drop for PageReleaser {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Reads a whole regular file into memory (small inputs: prototxts, schemas).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("a.txt");
/// std::fs::write(&p, b"text")?;
/// assert_eq!(&tensorfmt_core::io::read_file(&p)?[..], b"text");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_file(path: impl AsRef<Path>) -> Result<Bytes> {
    use std::io::Read;
    let path = path.as_ref();
    let mut file = open_regular(path)?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
    Ok(Bytes::from(buf))
}

/// [`read_file`] of a file that must hold at most `cap` bytes (a file that grows while
/// it is read is cut at `cap + 1` and refused): no input makes it allocate more.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("a.txt");
/// std::fs::write(&p, b"0123456789")?;
/// assert!(tensorfmt_core::io::read_file_capped(&p, 4, "prototxt bytes").is_err());
/// assert_eq!(tensorfmt_core::io::read_file_capped(&p, 10, "prototxt bytes")?.len(), 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_file_capped(path: impl AsRef<Path>, cap: u64, what: &'static str) -> Result<Bytes> {
    use std::io::Read;
    let path = path.as_ref();
    let file = open_regular(path)?;
    let too_big = |value| Error::LimitExceeded {
        what,
        value,
        limit: cap,
    };
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len > cap {
        return Err(too_big(len));
    }
    let mut buf = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    if buf.len() as u64 > cap {
        return Err(too_big(buf.len() as u64));
    }
    Ok(Bytes::from(buf))
}

/// Opens `path` for reading if it is a regular file (after following links), and
/// refuses anything else with "not a regular file (a FIFO)" and the like. The open
/// itself cannot block: it is non-blocking (`O_NONBLOCK`, which changes nothing for
/// the reads of a regular file), so a FIFO with no writer is refused, not waited on.
/// Every reader of a path goes through here (`map_file`, `read_file`).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let e = tensorfmt_core::io::open_regular(dir.path()).unwrap_err();
/// assert!(e.to_string().contains("not a regular file (a directory)"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_regular(path: impl AsRef<Path>) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = path.as_ref();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let t = file.metadata().map_err(|e| Error::io(path, e))?.file_type();
    match not_regular(path, &t) {
        None => Ok(file),
        Some(e) => Err(e),
    }
}

/// The error for `path` when its file type `t` is not a regular file ("not a regular
/// file (a FIFO)", "(a directory)", ...), `None` for a regular file.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let t = std::fs::metadata(dir.path())?.file_type();
/// let e = tensorfmt_core::io::not_regular(dir.path(), &t).unwrap();
/// assert!(e.to_string().ends_with("not a regular file (a directory); nothing was read"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn not_regular(path: &Path, t: &std::fs::FileType) -> Option<Error> {
    use std::os::unix::fs::FileTypeExt;
    let what = if t.is_file() {
        return None;
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "a special file"
    };
    Some(Error::Invalid(format!(
        "{}: not a regular file ({what}); nothing was read",
        path.display()
    )))
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file written under a temporary name in the target's directory and renamed over
/// the target by [`AtomicFile::commit`]. Dropped without commit, the temporary file is
/// removed: a failed or interrupted write never leaves a half file under the final name.
///
/// It implements `Write` and `Seek`, so writers can patch counts in a header at the end.
///
/// ```
/// use std::io::Write;
/// use tensorfmt_core::io::AtomicFile;
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("out.bin");
/// let mut f = AtomicFile::create(&p)?;
/// f.write_all(b"abc")?;
/// assert!(!p.exists());
/// f.commit()?;
/// assert_eq!(std::fs::read(&p)?, b"abc");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AtomicFile {
    file: Option<io::BufWriter<File>>,
    tmp: PathBuf,
    target: PathBuf,
    sync: bool,
    /// `io::guarded_faults()` when writing began: a guarded fault since then means an
    /// input changed under us, and the output must not be published.
    faults: u64,
    /// Bytes reserved by [`AtomicFile::reserve`]; `commit` releases what was not written.
    reserved: u64,
    /// Its slot in the table a SIGTERM handler cleans (`interrupt`).
    slot: Option<usize>,
}

/// How many [`AtomicFile`]s this process synced before their rename.
static SYNCS: AtomicU64 = AtomicU64::new(0);

/// How many outputs this process has synced to disk before renaming them into place (so
/// tests can check that `WriteOptions::skip_fsync` reaches every writer).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let before = tensorfmt_core::io::synced_outputs();
/// let f = tensorfmt_core::io::AtomicFile::create(dir.path().join("x"))?;
/// f.commit()?;
/// assert!(tensorfmt_core::io::synced_outputs() > before);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn synced_outputs() -> u64 {
    SYNCS.load(Ordering::Relaxed)
}

/// The temporary name of a write to `target` by this process: `.<name>.<pid>.<n>.tmp`
/// beside it (the pid lets a later write recognise a killed writer's leftovers).
fn temporary_name(name: &str, pid: u32, n: u64) -> String {
    format!(".{name}.{pid}.{n}.tmp")
}

/// Removes the temporary files that writers to `dir/name` left behind when they were
/// killed: names `temporary_name(name, pid, _)` whose process `pid` no longer exists.
/// A live process's file (another writer still at work, or this process) is never
/// touched. Returns how many were removed.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// // A leftover of a process that is gone (pid 0x7ffffffe is above Linux's pid_max).
/// std::fs::write(dir.path().join(".out.npz.2147483646.0.tmp"), b"partial")?;
/// std::fs::write(dir.path().join(format!(".out.npz.{}.0.tmp", std::process::id())), b"mine")?;
/// assert_eq!(tensorfmt_core::io::remove_stale_temporaries(dir.path(), "out.npz"), 1);
/// assert_eq!(std::fs::read_dir(dir.path())?.count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn remove_stale_temporaries(dir: &Path, name: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let prefix = format!(".{name}.");
    let mut removed = 0;
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(f) = file_name.to_str() else {
            continue;
        };
        let Some(rest) = f.strip_prefix(&prefix).and_then(|r| r.strip_suffix(".tmp")) else {
            continue;
        };
        let mut parts = rest.split('.');
        let (Some(pid), Some(n), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
            continue;
        };
        if pid != std::process::id()
            && !process_exists(pid)
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether a process with this pid exists (`kill(pid, 0)`: permission denied still
/// means it exists).
fn process_exists(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return true; // never treat a process group as a dead writer
        }
        // SAFETY: signal 0 sends nothing; it only checks that the pid exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

impl AtomicFile {
    /// Creates the temporary file next to `target`.
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile> {
        let target = target.as_ref().to_path_buf();
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        remove_stale_temporaries(&dir, &name);
        let faults = fault_guard::faults();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(temporary_name(&name, std::process::id(), n));
            match File::options().write(true).create_new(true).open(&tmp) {
                Ok(f) => {
                    let slot = interrupt::register(&tmp);
                    return Ok(AtomicFile {
                        file: Some(io::BufWriter::with_capacity(1 << 20, f)),
                        tmp,
                        target,
                        sync: true,
                        faults,
                        reserved: 0,
                        slot,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&tmp, e)),
            }
        }
    }

    /// Whether `commit` syncs the data to disk before the rename (the default). Without
    /// it the rename is still atomic, but a power failure may lose the new file.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let p = dir.path().join("scratch.bin");
    /// let mut f = tensorfmt_core::io::AtomicFile::create(&p)?.sync(false);
    /// std::io::Write::write_all(&mut f, b"data")?;
    /// f.commit()?;
    /// assert_eq!(std::fs::read(&p)?, b"data");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sync(mut self, sync: bool) -> AtomicFile {
        self.sync = sync;
        self
    }

    /// Asks the file system for `len` bytes up front, for writers that know their
    /// output's size. On Linux this is `fallocate` with `FALLOC_FL_KEEP_SIZE`: the
    /// file's length still grows only as bytes are written, so a wrong estimate never
    /// leaves zeros behind, and [`commit`](AtomicFile::commit) releases what was
    /// reserved but not written. It pays twice: ext4 then skips its per-page delayed
    /// allocation (a 256 MiB save is about 20 % faster, benches/python/bench.py), and a
    /// disk too full for the output fails at once, naming it, instead of after most of
    /// the data. Where the file system cannot reserve, nothing happens.
    ///
    /// ```
    /// use std::io::Write;
    /// let dir = tempfile::tempdir()?;
    /// let p = dir.path().join("out.bin");
    /// let mut f = tensorfmt_core::io::AtomicFile::create(&p)?;
    /// f.reserve(1 << 20)?;
    /// f.write_all(b"less than reserved")?;
    /// f.commit()?;
    /// assert_eq!(std::fs::read(&p)?, b"less than reserved");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(&mut self, len: u64) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let Ok(n) = libc::off_t::try_from(len) else {
                return Ok(());
            };
            let fd = self.inner()?.get_ref().as_raw_fd();
            // SAFETY: `fd` is the open temporary file owned by `self.file` for the whole
            // call; fallocate reads no memory of ours.
            let r = unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 0, n) };
            if r != 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => {
                        Err(self.name_error("writing", e))
                    }
                    // EOPNOTSUPP, ENOSYS, EINVAL...: the file system cannot reserve.
                    _ => Ok(()),
                };
            }
            self.reserved = self.reserved.max(len);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = len;
        Ok(())
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file being written (to read back what was written before
    /// [`commit`](AtomicFile::commit) publishes it; flush first).
    ///
    /// ```
    /// use std::io::Write;
    /// let dir = tempfile::tempdir()?;
    /// let mut f = tensorfmt_core::io::AtomicFile::create(dir.path().join("x"))?;
    /// f.write_all(b"draft")?;
    /// f.flush()?;
    /// assert_eq!(std::fs::read(f.temp_path())?, b"draft");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    fn inner(&mut self) -> io::Result<&mut io::BufWriter<File>> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("atomic file already committed"))
    }

    /// Flushes, syncs (unless [`AtomicFile::sync`] turned it off) and renames the
    /// temporary file over the target.
    pub fn commit(mut self) -> Result<()> {
        let target = self.target.clone();
        let w = self.file.take().expect("file present until commit");
        let finish = || -> Result<()> {
            if interrupt::writes_stopped() {
                return Err(Error::io_op(&target, "writing", stopped()));
            }
            let f = w
                .into_inner()
                .map_err(|e| Error::io_op(&target, "writing", e.into_error()))?;
            if self.reserved > 0 {
                // Blocks reserved past the end stay allocated until a truncate frees them.
                let len = f
                    .metadata()
                    .map_err(|e| Error::io_op(&target, "writing", e))?
                    .len();
                if len < self.reserved {
                    f.set_len(len)
                        .map_err(|e| Error::io_op(&target, "writing", e))?;
                }
            }
            if self.sync {
                f.sync_all()
                    .map_err(|e| Error::io_op(&target, "syncing", e))?;
                SYNCS.fetch_add(1, Ordering::Relaxed);
            }
            drop(f);
            if fault_guard::faults() != self.faults {
                return Err(Error::InputChanged {
                    path: fault_guard::last_faulted_path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "an input file".into()),
                });
            }
            std::fs::rename(&self.tmp, &target)
                .map_err(|e| Error::io_op(&target, "renaming the temporary file over", e))
        };
        let result = finish();
        if result.is_err() {
            // Drop no longer sees the file (it was taken above), so clean up here.
            let _ = std::fs::remove_file(&self.tmp);
        }
        interrupt::unregister(self.slot.take());
        result
    }
}

impl AtomicFile {
    /// An I/O error of the temporary file, reworded to name the output and what was
    /// being done (`writing out.npz: No space left on device (os error 28)`), so every
    /// caller's message says which file failed even where it only sees an `io::Error`.
    fn name_error(&self, op: &str, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{op} {}: {e}", self.target.display()))
    }

    /// A write error; `EFAULT` from a source buffer in a mapped input means that input
    /// shrank under us (the kernel reports it instead of `SIGBUS` when it does the copy).
    fn write_error(&self, buf: &[u8], e: io::Error) -> io::Error {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::EFAULT) {
            if let Some(input) = fault_guard::record_efault(buf.as_ptr() as usize, buf.len()) {
                let changed = Error::InputChanged {
                    path: input.display().to_string(),
                };
                return self.name_error("writing", io::Error::other(changed.to_string()));
            }
        }
        let _ = buf;
        self.name_error("writing", e)
    }
}

impl AtomicFile {
    /// Slices below this size go through the buffer ([`AtomicFile::write_mapped`]).
    pub const MAPPED_COPY_MIN: usize = 1 << 20;
    /// Bytes per kernel copy, each followed by the start of its writeback.
    const MAPPED_COPY_CHUNK: usize = 8 << 20;

    /// Writes `data` as `write_all` does. Where `data` is a slice of at least
    /// [`MAPPED_COPY_MIN`](AtomicFile::MAPPED_COPY_MIN) bytes of a file mapped by
    /// [`map_file`] (a weight of a model being converted), the kernel copies it from
    /// that file (`copy_file_range`, as `cp` does): nothing goes through this process
    /// and no page of the mapping is touched, so it does not count in the resident
    /// set. When the file is synced at commit (the default), the writeback of each 8
    /// MiB piece starts as soon as it is copied (`sync_file_range`), so the disk
    /// writes while the next piece is copied and the final `fsync` has little left to
    /// wait for. Anything else, or a file system that cannot copy ranges, goes through
    /// the buffer. Returns the bytes the kernel copied.
    ///
    /// ```
    /// use std::io::Write;
    /// let dir = tempfile::tempdir()?;
    /// let src = dir.path().join("weights.bin");
    /// std::fs::write(&src, vec![3u8; 3 << 20])?;
    /// let mapped = tensorfmt_core::io::map_file(&src)?;
    /// let out = dir.path().join("out.bin");
    /// let mut f = tensorfmt_core::io::AtomicFile::create(&out)?;
    /// f.write_all(b"head")?;
    /// let copied = f.write_mapped(&mapped[1..])?;    // the kernel copies the file range
    /// f.write_mapped(b"tail")?;                      // heap memory: buffered
    /// f.commit()?;
    /// let got = std::fs::read(&out)?;
    /// assert_eq!((got.len(), &got[..4], &got[got.len() - 4..]), ((3 << 20) + 7, &b"head"[..], &b"tail"[..]));
    /// # let _ = copied;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_mapped(&mut self, data: &[u8]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        if data.len() >= Self::MAPPED_COPY_MIN {
            if let Some((source, offset)) = mapped_source(data) {
                let copied = self.copy_range(&source, offset, data.len())?;
                self.write_all(&data[copied..])?;
                return Ok(copied);
            }
        }
        self.write_all(data)?;
        Ok(0)
    }

    /// Copies `len` bytes at `offset` of `source`'s file to the end of the output with
    /// `copy_file_range`; returns how many were copied before the kernel declined (a
    /// file system that cannot copy ranges: the caller writes the rest).
    #[cfg(target_os = "linux")]
    fn copy_range(&mut self, source: &Source, offset: u64, len: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        // Buffered bytes go first; then the file's offset is where the copy lands.
        self.flush()?;
        let sync = self.sync;
        let out = self.inner()?.get_ref();
        let mut pos = (&*out).stream_position()?;
        let (src, dst) = (source.file.as_raw_fd(), out.as_raw_fd());
        let mut src_off = libc::loff_t::try_from(offset).map_err(io::Error::other)?;
        let mut copied = 0usize;
        while copied < len {
            if interrupt::writes_stopped() {
                return Err(stopped());
            }
            let n = (len - copied).min(Self::MAPPED_COPY_CHUNK);
            // SAFETY: `src` and `dst` are open descriptors owned by `source` and `self`
            // for the whole call; the kernel reads and updates only `src_off` (a local)
            // and the output's own file offset, and touches no other memory of ours.
            // Tested by `tests::write_mapped_copies_file_ranges`.
            let r = unsafe {
                libc::copy_file_range(src, &mut src_off, dst, std::ptr::null_mut(), n, 0)
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(
                        libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EBADF,
                    ) => Ok(copied),
                    _ => Err(self.name_error("writing", e)),
                };
            }
            if r == 0 {
                // The mapping is longer than the file: it shrank under us.
                let changed = Error::InputChanged {
                    path: "an input file (it shrank while being copied)".into(),
                };
                return Err(self.name_error("writing", io::Error::other(changed.to_string())));
            }
            let r = r as usize;
            if sync {
                // SAFETY: `dst` is the open output; sync_file_range reads no memory of
                // ours. Failure only means the writeback starts at commit instead.
                unsafe {
                    libc::sync_file_range(
                        dst,
                        pos as libc::off64_t,
                        r as libc::off64_t,
                        libc::SYNC_FILE_RANGE_WRITE,
                    )
                };
            }
            pos += r as u64;
            copied += r;
        }
        Ok(copied)
    }
}

/// A writer that takes large slices of mapped input files as such: an [`AtomicFile`]
/// has the kernel copy them from their file ([`AtomicFile::write_mapped`]); any other
/// writer (a `Vec<u8>`, a socket) writes their bytes.
///
/// ```
/// use tensorfmt_core::io::BulkWrite;
/// let mut v = Vec::new();
/// v.write_bulk(b"payload")?;
/// assert_eq!(v, b"payload");
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait BulkWrite: Write {
    /// Writes all of `data`.
    fn write_bulk(&mut self, data: &[u8]) -> io::Result<()> {
        self.write_all(data)
    }

    /// Tells the writer the whole output's size before it is written (an
    /// [`AtomicFile`] reserves it: [`AtomicFile::reserve`]).
    fn expect_len(&mut self, len: u64) -> io::Result<()> {
        let _ = len;
        Ok(())
    }
}

impl BulkWrite for AtomicFile {
    fn write_bulk(&mut self, data: &[u8]) -> io::Result<()> {
        self.write_mapped(data).map(|_| ())
    }

    fn expect_len(&mut self, len: u64) -> io::Result<()> {
        self.reserve(len)
    }
}

impl BulkWrite for Vec<u8> {}

/// The error of a write stopped by [`stop_writes`] (not `ErrorKind::Interrupted`,
/// which `write_all` would retry).
fn stopped() -> io::Error {
    io::Error::other("interrupted (a signal asked to stop)")
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if interrupt::writes_stopped() {
            return Err(stopped());
        }
        let r = self.inner()?.write(buf);
        r.map_err(|e| self.write_error(buf, e))
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if interrupt::writes_stopped() {
            return Err(stopped());
        }
        let r = self.inner()?.write_all(buf);
        r.map_err(|e| self.write_error(buf, e))
    }
    fn flush(&mut self) -> io::Result<()> {
        let r = self.inner()?.flush();
        r.map_err(|e| self.name_error("writing", e))
    }
}

impl Seek for AtomicFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let r = self.inner()?.seek(pos);
        r.map_err(|e| self.name_error("seeking in", e))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        interrupt::unregister(self.slot.take());
    }
}

/// Writes a file atomically: `write` fills an [`AtomicFile`], which is committed only
/// when `write` succeeds.
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("a.txt");
/// tensorfmt_core::io::write_atomic(&p, |w| -> tensorfmt_core::Result<()> { Ok(w.write_all(b"x")?) })?;
/// let failed = tensorfmt_core::io::write_atomic(&p, |w| {
///     w.write_all(b"partial")?;
///     Err(tensorfmt_core::Error::Invalid("stop".into()))
/// });
/// assert!(failed.is_err());
/// assert_eq!(std::fs::read(&p)?, b"x"); // the old file survives
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic<E>(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut AtomicFile) -> std::result::Result<(), E>,
) -> std::result::Result<(), E>
where
    E: From<Error>,
{
    write_atomic_with(path, &crate::WriteOptions::default(), write)
}

/// [`write_atomic`] that honours `options.skip_fsync` (every format's path-level save
/// goes through it, so `fsync=False` means the same for a PVP file as for an npy file).
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("scratch.bin");
/// let options = tensorfmt_core::WriteOptions { skip_fsync: true, ..Default::default() };
/// tensorfmt_core::io::write_atomic_with(&p, &options, |w| -> tensorfmt_core::Result<()> {
///     Ok(w.write_all(b"x")?)
/// })?;
/// assert_eq!(std::fs::read(&p)?, b"x");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic_with<E>(
    path: impl AsRef<Path>,
    options: &crate::WriteOptions,
    write: impl FnOnce(&mut AtomicFile) -> std::result::Result<(), E>,
) -> std::result::Result<(), E>
where
    E: From<Error>,
{
    let mut f = AtomicFile::create(path)?.sync(!options.skip_fsync);
    write(&mut f)?;
    f.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO (no writer) given as an input is refused at once by every reader of a
    /// path, never waited on: the CLI, Python, `--like`, `--prototxt` and `--proto` all
    /// open through here. A link to a regular file is followed.
    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("m.npy");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        for e in [
            map_file(&fifo).unwrap_err(),
            read_file(&fifo).unwrap_err(),
            open_regular(&fifo).unwrap_err(),
        ] {
            assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        let e = map_file(dir.path()).unwrap_err();
        assert!(e.to_string().contains("(a directory)"), "{e}");
        let real = dir.path().join("r.bin");
        std::fs::write(&real, b"abc").unwrap();
        let link = dir.path().join("l.bin");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(&map_file(&link).unwrap()[..], b"abc");
    }

    #[test]
    fn map_file_reads_contents() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.bin");
        std::fs::write(&p, (0..=255u8).collect::<Vec<_>>()).unwrap();
        let b = map_file(&p).unwrap();
        assert_eq!(b.len(), 256);
        assert_eq!(b[255], 255);
        let s = b.slice(10..20);
        drop(b);
        assert_eq!(s[0], 10);
        std::fs::write(&p, b"").unwrap();
        assert!(map_file(&p).unwrap().is_empty());
        assert!(matches!(
            map_file(dir.path().join("none")),
            Err(Error::Io { .. })
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reserved_space_not_written_is_released_by_commit() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        let mut f = AtomicFile::create(&p).unwrap();
        f.reserve(8 << 20).unwrap();
        f.write_all(&[7u8; 5000]).unwrap();
        f.flush().unwrap();
        let during = std::fs::metadata(f.temp_path()).unwrap();
        assert_eq!(
            during.len(),
            5000,
            "the length grows only with the bytes written"
        );
        let reserved = during.blocks() * 512 >= 8 << 20;
        f.commit().unwrap();
        let after = std::fs::metadata(&p).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 5000]);
        if reserved {
            assert!(
                after.blocks() * 512 < 1 << 20,
                "released: {}",
                after.blocks()
            );
        } else {
            eprintln!("note: this file system did not reserve; nothing to release");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn mappings_are_copy_on_write_unless_strict_overcommit_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        std::fs::write(&p, vec![5u8; 10_000]).unwrap();
        let b = map_file(&p).unwrap();
        let live = MAPS.lock().unwrap();
        let map = live
            .iter()
            .filter_map(Weak::upgrade)
            .find(|m| m.as_ptr() == b.as_ptr())
            .expect("registered");
        let strict = std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
            .is_ok_and(|m| m.trim() == "2");
        assert!(
            matches!(map.map, Mapping::Private(_)) || strict,
            "a private (copy-on-write) mapping"
        );
        assert!(b.iter().all(|&x| x == 5));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn write_mapped_copies_file_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        let data: Vec<u8> = (0..(5usize << 20) + 3)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&src, &data).unwrap();
        let mapped = map_file(&src).unwrap();
        let out = dir.path().join("out.bin");
        let mut f = AtomicFile::create(&out).unwrap();
        f.write_all(b"abc").unwrap();
        // A slice at an odd offset, larger than one chunk boundary's worth of pieces.
        let big = &mapped[5..(4 << 20) + 9];
        let copied = f.write_mapped(big).unwrap();
        assert!(copied == big.len() || copied == 0, "{copied}");
        // Small mapped slices and heap memory are buffered.
        assert_eq!(f.write_mapped(&mapped[1..100]).unwrap(), 0);
        assert_eq!(f.write_mapped(&vec![9u8; 2 << 20]).unwrap(), 0);
        f.commit().unwrap();
        let mut want = b"abc".to_vec();
        want.extend_from_slice(big);
        want.extend_from_slice(&data[1..100]);
        want.extend(std::iter::repeat_n(9u8, 2 << 20));
        assert!(std::fs::read(&out).unwrap() == want);
        // The pages of the mapping were not needed: the copy read the file.
        drop(mapped);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn write_mapped_of_a_shrunk_input_fails() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        std::fs::write(&src, vec![1u8; 4 << 20]).unwrap();
        let mapped = map_file(&src).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&src)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let out = dir.path().join("out.bin");
        let mut f = AtomicFile::create(&out).unwrap();
        let e = f.write_mapped(&mapped[..]).unwrap_err().to_string();
        assert!(e.contains("shrank"), "{e}");
        drop(f);
        assert!(!out.exists());
    }

    #[test]
    fn dropped_atomic_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"half").unwrap();
        }
        assert!(!p.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn failed_write_at_any_point_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, b"old contents").unwrap();
        let new = vec![7u8; 3 << 20]; // larger than the write buffer
        for fail_at in [0, 1, 4096, 1 << 20, (1 << 20) + 1, new.len()] {
            let r: Result<()> = write_atomic(&p, |f| {
                f.write_all(&new[..fail_at]).map_err(|e| Error::io(&p, e))?;
                Err(Error::Invalid(format!(
                    "injected failure after {fail_at} bytes"
                )))
            });
            assert!(r.is_err());
            assert_eq!(std::fs::read(&p).unwrap(), b"old contents");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
        write_atomic(&p, |f| f.write_all(&new).map_err(|e| Error::io(&p, e))).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), new);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn failed_commit_removes_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a_directory");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"k").unwrap();
        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"data").unwrap();
        assert!(f.commit().is_err()); // renaming a file over a non-empty directory fails
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a_directory")]);
    }

    #[test]
    fn released_pages_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.bin");
        let data: Vec<u8> = (0..(3 << 20)).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let b = map_file(&p).unwrap();
        assert_eq!(&b[..], &data[..]);
        // Unaligned sub-ranges, the whole map, and twice in a row.
        for (a, z) in [(1, 5000), (4096, 3 << 20), (0, 3 << 20), (12345, 2_000_000)] {
            assert_eq!(release_pages(&b[a..z]), z - a);
            assert_eq!(&b[..], &data[..]);
        }
        let owned = data.clone();
        assert_eq!(release_pages(&owned), 0);
        assert_eq!(owned, data);
        // A slice that outlives every other handle of its map keeps working.
        let tail = b.slice(1 << 20..);
        drop(b);
        assert_eq!(release_pages(&tail), 2 << 20);
        assert_eq!(&tail[..], &data[1 << 20..]);
    }

    #[test]
    fn page_releaser_batches_touching_slices_and_leaves_heap_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.bin");
        let data: Vec<u8> = (0..(3 << 20)).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let b = map_file(&p).unwrap();
        let mut r = PageReleaser::new();
        // Touching and overlapping slices gather; the batch is advised at 1 MiB.
        r.release(&b[0..100]);
        r.release(&b[50..300]);
        r.release(&b[300..1000]);
        assert_eq!(r.flush(), 1000);
        assert_eq!(r.flush(), 0);
        for piece in b[..PageReleaser::BATCH + 8].chunks(8) {
            r.release(piece);
        }
        assert_eq!(r.flush(), 8); // the first BATCH bytes went when they filled up
                                  // A slice elsewhere advises the pending range and starts a new one.
        r.release(&b[10..20]);
        r.release(&b[5000..5010]);
        assert_eq!(r.flush(), 10);
        // Heap memory is never advised; the map reads back the same.
        let owned = data.clone();
        r.release(&owned[..4096]);
        assert_eq!(r.flush(), 0);
        r.release(&b[2 << 20..]);
        drop(r);
        assert_eq!(&b[..], &data[..]);
        assert_eq!(owned, data);
    }
}
