//! [`AtomicFile`]: every writer's output goes to a temporary file beside the target
//! and is renamed over it only when complete, so a failed, interrupted or killed write
//! never leaves a half file under the final name; the temporaries of killed writers are
//! recognised by their name and removed by the next write to the same target.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{fault_guard, interrupt};
use crate::{Error, Result};

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

/// The temporary name of a write to `target` by this process: `.<stem>.<pid>.<n>.tmp`
/// beside it (the pid lets a later write recognise a killed writer's leftovers), where
/// the stem is the target's name, or for a long name its first bytes and a hash of the
/// whole ([`temporary_stem`]), so that any legal name (255 bytes) has a legal temporary.
fn temporary_name(name: &str, pid: u32, n: u64) -> String {
    format!(".{}.{pid}.{n}.tmp", temporary_stem(name))
}

/// The longest target name used whole in a temporary name: with the dot, pid (10
/// digits), counter (up to 20) and `.tmp`, a temporary name stays within 255 bytes.
const MAX_STEM: usize = 200;

/// `name` itself when it is at most [`MAX_STEM`] bytes; else its first bytes (cut at a
/// character boundary), `~` and the 16 hex digits of a hash of the whole name (FNV-1a,
/// the same in every process, so a leftover is recognised by the next writer), at most
/// [`MAX_STEM`] bytes in all.
fn temporary_stem(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_STEM {
        return std::borrow::Cow::Borrowed(name);
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut keep = MAX_STEM - 17;
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    std::borrow::Cow::Owned(format!("{}~{hash:016x}", &name[..keep]))
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
    let prefix = format!(".{}.", temporary_stem(name));
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
                // The temporary is ours, not the user's: the error names the output.
                Err(e) => return Err(Error::io_op(&target, "creating", e)),
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

    /// What was written so far, mapped (flushed first): for a writer that checks its
    /// output with a reader before [`commit`](AtomicFile::commit) publishes it. An
    /// error names the output, not the temporary file.
    ///
    /// ```
    /// use std::io::Write;
    /// let dir = tempfile::tempdir()?;
    /// let mut f = tensorfmt_core::io::AtomicFile::create(dir.path().join("x"))?;
    /// f.write_all(b"draft")?;
    /// assert_eq!(&f.read_back()?[..], b"draft");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_back(&mut self) -> Result<bytes::Bytes> {
        self.flush()
            .map_err(|e| Error::io_op(&self.target, "writing", e))?;
        super::map_file(&self.tmp).map_err(|e| match e {
            Error::Io { source, .. } => Error::io_op(&self.target, "reading back", source),
            other => other,
        })
    }

    pub(super) fn inner(&mut self) -> io::Result<&mut io::BufWriter<File>> {
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
    pub(super) fn name_error(&self, op: &str, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{op} {}: {e}", self.target.display()))
    }

    /// Whether the file is synced at commit ([`AtomicFile::sync`]).
    pub(super) fn syncs(&self) -> bool {
        self.sync
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

/// The error of a write stopped by [`stop_writes`] (not `ErrorKind::Interrupted`,
/// which `write_all` would retry).
pub(super) fn stopped() -> io::Error {
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

    /// Issue 34 item 6: a legal 255-byte output name works (the temporary name must not
    /// outgrow the file system's 255-byte limit), and its leftovers are still swept.
    #[test]
    fn the_longest_legal_name_can_be_written() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            format!("{}.onnx", "n".repeat(250)),
            format!("{}.npz", "\u{e9}".repeat(125)), // 250 bytes of two-byte characters
            "a".repeat(255),
        ] {
            assert!((254..=255).contains(&name.len()), "{}", name.len());
            let p = dir.path().join(&name);
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"data").unwrap();
            f.commit().unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), b"data");
            std::fs::remove_file(&p).unwrap();
        }
        // A killed writer's leftover for a long name is recognised by the next write.
        let long = format!("{}.npz", "x".repeat(251));
        let stale = temporary_name(&long, 0x7fff_fffe, 0);
        assert!(stale.len() <= 255, "{}", stale.len());
        std::fs::write(dir.path().join(&stale), b"partial").unwrap();
        AtomicFile::create(dir.path().join(&long))
            .unwrap()
            .commit()
            .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // ... but not the leftover of another target that shares the long prefix.
        let other = format!("{}.npy", "x".repeat(251));
        std::fs::write(
            dir.path().join(temporary_name(&other, 0x7fff_fffe, 0)),
            b"p",
        )
        .unwrap();
        AtomicFile::create(dir.path().join(&long))
            .unwrap()
            .commit()
            .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// Issue 34 item 6: an I/O error of the output names the output, not the hidden
    /// temporary file the user never asked for.
    #[test]
    fn errors_name_the_output_not_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("missing_dir").join("out.npz");
        let e = AtomicFile::create(&out).unwrap_err().to_string();
        assert!(e.contains(&out.display().to_string()), "{e}");
        assert!(!e.contains(".out.npz."), "{e}");
    }
}
