//! File access shared by every format: mapping a file into [`Bytes`], giving the pages
//! of a streamed map back to the kernel ([`release_pages`]), and writing through a
//! temporary file that is renamed into place ([`AtomicFile`]).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use crate::{Error, Result};

/// Maps a file read-only and returns its contents as zero-copy [`Bytes`].
///
/// The mapping lives as long as any `Bytes` (or tensor) sliced from it. The file must
/// not be truncated or rewritten by another process while mapped (reads would fault);
/// our own writers never modify a file in place except PVP appends, which only grow it.
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
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        // Mapping an empty file fails on some platforms; there is nothing to share.
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only and private to this process. Soundness requires that
    // the file is not truncated while mapped, which the function docs state as a
    // precondition (the same contract as every mmap-based reader). Tested by
    // `tests::map_file_reads_contents`.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let map = Arc::new(map);
    {
        let mut live = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&map));
    }
    Ok(Bytes::from_owner(SharedMap(map)))
}

/// Every mapping made by [`map_file`] that is still alive, so [`release_pages`] can tell
/// a mapped slice from heap memory (where dropping pages would destroy data).
static MAPS: Mutex<Vec<Weak<memmap2::Mmap>>> = Mutex::new(Vec::new());

struct SharedMap(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
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
    if data.is_empty() {
        return 0;
    }
    let start = data.as_ptr() as usize;
    let live = MAPS.lock().unwrap_or_else(|p| p.into_inner());
    for map in live.iter().filter_map(Weak::upgrade) {
        let base = map.as_ptr() as usize;
        if start < base || start - base + data.len() > map.len() {
            continue;
        }
        #[cfg(unix)]
        {
            // SAFETY: the range lies inside a live read-only *shared file* mapping (checked
            // against the registry above, so never heap or anonymous memory). For such a
            // mapping MADV_DONTNEED only drops the process's page-table entries; the next
            // access faults the page in again from the file with the same contents (the
            // file is not modified while mapped: `map_file`'s precondition), so no
            // reference into the map ever observes different bytes. memmap2 widens the
            // range to page boundaries, which is harmless for the same reason. Tested by
            // `tests::released_pages_read_back_the_same`.
            let advised = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start - base,
                    data.len(),
                )
            };
            return if advised.is_ok() { data.len() } else { 0 };
        }
        #[cfg(not(unix))]
        return 0;
    }
    0
}

/// Reads a whole file into memory (for inputs that cannot be mapped, e.g. pipes).
pub fn read_file(path: impl AsRef<Path>) -> Result<Bytes> {
    let path = path.as_ref();
    std::fs::read(path)
        .map(Bytes::from)
        .map_err(|e| Error::io(path, e))
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
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
            match File::options().write(true).create_new(true).open(&tmp) {
                Ok(f) => {
                    return Ok(AtomicFile {
                        file: Some(io::BufWriter::with_capacity(1 << 20, f)),
                        tmp,
                        target,
                        sync: true,
                    })
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

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
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
            let f = w
                .into_inner()
                .map_err(|e| Error::io(&self.tmp, e.into_error()))?;
            if self.sync {
                f.sync_all().map_err(|e| Error::io(&self.tmp, e))?;
            }
            drop(f);
            std::fs::rename(&self.tmp, &target).map_err(|e| Error::io(&target, e))
        };
        let result = finish();
        if result.is_err() {
            // Drop no longer sees the file (it was taken above), so clean up here.
            let _ = std::fs::remove_file(&self.tmp);
        }
        result
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner()?.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner()?.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner()?.flush()
    }
}

impl Seek for AtomicFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner()?.seek(pos)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
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
    let mut f = AtomicFile::create(path)?;
    write(&mut f)?;
    f.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
