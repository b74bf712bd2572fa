//! File access shared by every format: opening only regular files ([`open_regular`]),
//! mapping a file into [`Bytes`] (guarded against inputs that shrink while mapped:
//! [`install_fault_guard`]) and giving the pages of a streamed map back to the kernel
//! ([`release_pages`]). Writing goes through [`AtomicFile`] (`io/atomic.rs`): a
//! temporary file renamed into place, which removes the stale temporary files of
//! killed writers. Large slices of a mapped input are written by the kernel from their
//! file ([`BulkWrite`], `io/bulk.rs`).

mod atomic;
mod bulk;
mod fault_guard;
mod interrupt;

pub use atomic::{
    remove_stale_temporaries, synced_outputs, write_atomic, write_atomic_with, AtomicFile,
};
pub use bulk::BulkWrite;

pub use interrupt::{
    check_stop, install_termination_cleanup, remove_live_temporaries, stop_writes, writes_stopped,
};

pub use fault_guard::{
    faults as guarded_faults, install as install_fault_guard, last_faulted_path,
};

use std::fs::File;
use std::io;
use std::path::Path;
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
    map(path.as_ref(), true)
}

/// Whether two paths name one existing file (device and inode, whatever the path text
/// or links say): an output that is an input is refused by this test.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("x.bin");
/// std::fs::write(&p, b"x")?;
/// assert!(tensorfmt_core::io::same_file(&p, &dir.path().join(".").join("x.bin")));
/// assert!(!tensorfmt_core::io::same_file(&p, &dir.path().join("y.bin")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        a.canonicalize()
            .ok()
            .is_some_and(|x| b.canonicalize().ok() == Some(x))
    }
}

/// [`map_file`] that closes the file once it is mapped: for inputs opened by the
/// thousand (an ONNX model exported with one external data file per tensor), which
/// would otherwise hold a descriptor each past the usual limit of 1024. The one
/// difference: [`AtomicFile::write_mapped`] copies their slices through this process
/// instead of with `copy_file_range`.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("x.bin");
/// std::fs::write(&p, b"hello")?;
/// let b = tensorfmt_core::io::map_file_unheld(&p)?;
/// std::fs::remove_file(&p)?; // the mapping outlives the name and the descriptor
/// assert_eq!(&b[..], b"hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn map_file_unheld(path: impl AsRef<Path>) -> Result<Bytes> {
    map(path.as_ref(), false)
}

fn map(path: &Path, hold: bool) -> Result<Bytes> {
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
    // The file stays open with its mapping (unless asked not to):
    // `AtomicFile::write_mapped` copies from it.
    let file = hold.then_some(file);
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

/// A mapping made by [`map_file`] and the open file under it (`None`: closed after
/// mapping, [`map_file_unheld`]).
struct Source {
    map: Mapping,
    file: Option<File>,
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
