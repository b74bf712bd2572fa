//! Large slices of mapped inputs written by the kernel: [`AtomicFile::write_mapped`]
//! copies a slice of a file mapped by [`map_file`](super::map_file) from that file
//! (`copy_file_range`, as `cp` does), and [`BulkWrite`] lets a writer (the ONNX
//! writer's initializer payloads) hand its large slices over as such.

#[cfg(target_os = "linux")]
use std::io::Seek;
use std::io::{self, Write};

use super::atomic::AtomicFile;
#[cfg(target_os = "linux")]
use super::{atomic, interrupt, mapped_source, Source};
#[cfg(target_os = "linux")]
use crate::Error;

impl AtomicFile {
    /// Slices below this size go through the buffer ([`AtomicFile::write_mapped`]).
    pub const MAPPED_COPY_MIN: usize = 1 << 20;
    /// Bytes per kernel copy, each followed by the start of its writeback.
    const MAPPED_COPY_CHUNK: usize = 8 << 20;

    /// Writes `data` as `write_all` does. Where `data` is a slice of at least
    /// [`MAPPED_COPY_MIN`](AtomicFile::MAPPED_COPY_MIN) bytes of a file mapped by
    /// [`map_file`](crate::io::map_file) (a weight of a model being converted), the kernel copies it from
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
        let sync = self.syncs();
        let out = self.inner()?.get_ref();
        let mut pos = (&*out).stream_position()?;
        let Some(file) = &source.file else {
            return Ok(0); // closed after mapping: the caller writes the bytes
        };
        let (src, dst) = (file.as_raw_fd(), out.as_raw_fd());
        let mut src_off = libc::loff_t::try_from(offset).map_err(io::Error::other)?;
        let mut copied = 0usize;
        while copied < len {
            if interrupt::writes_stopped() {
                return Err(atomic::stopped());
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::map_file;
    use super::*;

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
}
