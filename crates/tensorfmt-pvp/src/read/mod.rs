//! Typed readers: [`PvpFile`] recognises the kind of a file and hands out the matching
//! reader ([`DenseReader`], [`SparseReader`], [`WeightReader`]).

mod dense;
mod sparse;
mod weights;

use std::path::Path;

use bytes::Bytes;

pub use dense::{DenseFrame, DenseReader};
pub use sparse::{Csr, SparseFrame, SparseReader, SparseTable};
pub use weights::{decode_byte, PatchHeader, WeightFrame, WeightReader};

use crate::error::{PvpError, Result};
use crate::header::Header;
use crate::layout::{check_base, Kind, OpenOptions};

/// An opened PVP file of any kind.
///
/// ```
/// use tensorfmt_pvp::{PvpFile, write::DenseWriter};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = DenseWriter::new(&mut buf, 2, 1, 1)?;
/// w.write_frame(0.5, &[1.0, 2.0])?;
/// w.finish()?;
/// let file = PvpFile::from_bytes(buf.into_inner().into())?;
/// let PvpFile::Dense(r) = file else { panic!("dense expected") };
/// assert_eq!(r.frame(0)?.values.to_vec::<f32>()?, vec![1.0, 2.0]);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug)]
pub enum PvpFile {
    /// Dense activity (filetype 4) or legacy filetype 1.
    Dense(DenseReader),
    /// Sparse activity (filetypes 2 and 6).
    Sparse(SparseReader),
    /// Weights (filetypes 3 and 5).
    Weights(WeightReader),
}

impl PvpFile {
    /// Maps a file and opens it with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<PvpFile> {
        PvpFile::from_bytes_with(tensorfmt_core::io::map_file(path)?, &OpenOptions::default())
    }

    /// Opens a whole file held in `data` with default options.
    pub fn from_bytes(data: Bytes) -> Result<PvpFile> {
        PvpFile::from_bytes_with(data, &OpenOptions::default())
    }

    /// Opens a whole file held in `data`. Sparse files are not scanned yet.
    pub fn from_bytes_with(data: Bytes, opts: &OpenOptions) -> Result<PvpFile> {
        let header = Header::parse(&data)?;
        Ok(match check_base(&header)? {
            Kind::Dense | Kind::Legacy => PvpFile::Dense(DenseReader::new(data, opts)?),
            Kind::SparseBinary | Kind::SparseValues => {
                PvpFile::Sparse(SparseReader::new(data, opts)?)
            }
            Kind::SharedWeights | Kind::NonSharedWeights => {
                PvpFile::Weights(WeightReader::new(data, opts)?)
            }
        })
    }

    /// The raw base header (of the first frame, for weights).
    pub fn header(&self) -> &Header {
        match self {
            PvpFile::Dense(r) => r.header(),
            PvpFile::Sparse(r) => r.header(),
            PvpFile::Weights(r) => &r.first_header().base,
        }
    }

    /// The file kind.
    pub fn kind(&self) -> Kind {
        check_base(self.header()).unwrap_or(Kind::Dense)
    }

    /// Number of frames (scans a sparse file on first use).
    pub fn frame_count(&self) -> Result<usize> {
        match self {
            PvpFile::Dense(r) => Ok(r.len()),
            PvpFile::Sparse(r) => r.len(),
            PvpFile::Weights(r) => Ok(r.len()),
        }
    }

    /// Warnings found so far (layout, nbands, truncation).
    pub fn warnings(&self) -> Vec<String> {
        match self {
            PvpFile::Dense(r) => r.warnings().to_vec(),
            PvpFile::Sparse(r) => r.warnings(),
            PvpFile::Weights(r) => r.warnings().to_vec(),
        }
    }
}

/// Turns a signed frame index into a position: `i >= 0` counts from the start,
/// `i < 0` from the end (`-1` is the last frame). Out of range is an error; there is
/// no silent wrap (see [`wrap_index`]).
///
/// ```
/// use tensorfmt_pvp::read::resolve_index;
/// assert_eq!(resolve_index(-1, 4)?, 3);
/// assert_eq!(resolve_index(2, 4)?, 2);
/// assert!(resolve_index(4, 4).is_err());
/// assert!(resolve_index(-5, 4).is_err());
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
pub fn resolve_index(i: i64, count: usize) -> Result<usize> {
    let n = count as i64;
    let k = if i < 0 { n + i } else { i };
    if (0..n).contains(&k) {
        Ok(k as usize)
    } else {
        Err(PvpError::FrameOutOfRange { index: i, count })
    }
}

/// Upstream's modulo wrap, made explicit: frame `k mod count` (error on an empty file).
///
/// ```
/// assert_eq!(tensorfmt_pvp::read::wrap_index(7, 4)?, 3);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
pub fn wrap_index(k: usize, count: usize) -> Result<usize> {
    if count == 0 {
        return Err(PvpError::FrameOutOfRange {
            index: k as i64,
            count,
        });
    }
    Ok(k % count)
}

/// Little-endian f64 at `off` (the caller has checked bounds).
pub(crate) fn f64_at(b: &[u8], off: usize) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    f64::from_le_bytes(a)
}

/// Linux maps up to `fault_around_bytes` (64 KiB by default) of cached pages around
/// a faulting address of a file mapping, so reading one small field maps that much.
const FAULT_AROUND: usize = 64 << 10;

/// Hands back to the kernel the pages a read of the `len` bytes at `off` of `b` mapped
/// (the aligned [`FAULT_AROUND`] window around them, clipped to `b`), when `b` is a
/// mapped file (see [`tensorfmt_core::io::release_pages`]; a heap buffer is left
/// alone). For scattered small fields (each frame's time, a sparse frame's count, a
/// weight frame's header): without it, reading one 8-byte field per frame of a file
/// whose pages are cached maps, and keeps resident, most of the file (a 2 GiB dense
/// movie's `time` tensor showed 2 GiB resident, issue 27). The bytes stay readable.
/// The windows go through `released`, which advises neighbouring ones together: with
/// small frames one window holds many fields, and advising it per field cost a system
/// call and a re-fault of the window per frame (half of converting 100 000 frames of
/// 256 bytes).
pub(crate) fn release_field(
    b: &[u8],
    off: usize,
    len: usize,
    released: &mut tensorfmt_core::io::PageReleaser,
) {
    let base = b.as_ptr() as usize;
    let lo = (base + off) & !(FAULT_AROUND - 1);
    let hi = (base + off + len).next_multiple_of(FAULT_AROUND);
    let lo = lo.max(base) - base;
    let hi = hi.min(base + b.len()) - base;
    if lo < hi {
        released.release(&b[lo..hi]);
    }
}

/// Reads scattered f64 fields (one per frame), handing each field's pages back after
/// the read (see [`release_field`]).
pub(crate) fn scattered_f64s(b: &[u8], offsets: impl Iterator<Item = usize>) -> Vec<f64> {
    let mut released = tensorfmt_core::io::PageReleaser::new();
    offsets
        .map(|off| {
            let v = f64_at(b, off);
            release_field(b, off, 8, &mut released);
            v
        })
        .collect()
}

/// Little-endian i32 at `off` (the caller has checked bounds).
pub(crate) fn i32_at(b: &[u8], off: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    i32::from_le_bytes(a)
}

/// Little-endian u32 at `off` (the caller has checked bounds).
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

/// Checks an allocation of `bytes` against the limits.
pub(crate) fn check_alloc(opts: &OpenOptions, bytes: u64) -> Result<usize> {
    if bytes > opts.limits.max_alloc {
        return Err(PvpError::LimitExceeded {
            what: "allocation",
            value: bytes,
            limit: opts.limits.max_alloc,
        });
    }
    crate::error::to_usize(bytes, "allocation")
}
