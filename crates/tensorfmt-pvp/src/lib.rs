//! # tensorfmt-pvp
//!
//! Reader and writer for PetaVision **PVP** files (OpenPV's activity movies, sparse
//! spike trains and learned weights), following `specs/pvp.md`.
//!
//! **Reads** every file type: dense activity (filetype 4, f32, and 16-byte random
//! state records as `u32 x 4`), sparse binary (2), sparse values (6, datatype 3 or 4),
//! shared weights (5), non-shared weights (3), in f32 or byte-compressed form, and the
//! obsolete filetype 1 (read only). Legacy variants: 4-byte patch headers, the arbor
//! count in `numrecords`, MPI-split dense and filetype-1 files (reassembled into the
//! global image), and an `nbands` left too small by a crash (the real count wins; a
//! warning says so). The layout always comes from nx, ny, nf, datasize, the patch
//! geometry and the file size, never from `recordsize` or `nbatch`.
//!
//! Dense frames are zero-copy slices of the file (an mmap via [`PvpFile::open`]);
//! sparse files get a frame table from one lazy scan; weights frames are self-contained.
//! Frame access errors when out of range; counting from the end and upstream's modulo
//! wrap are separate, explicit calls.
//!
//! **Writes** (module [`write`](mod@write)) dense, sparse binary, sparse values and weight files
//! with the modern header conventions, patching `nbands` after every frame, and can
//! append to an existing file. [`save_tensors`] writes through an atomic temporary file.
//!
//! **Rejects**, with a [`PvpError`] naming the byte offset and field, never a panic:
//! unknown file types, illegal (filetype, datatype, datasize) combinations, wrong
//! header sizes, non-positive dimensions, truncated frames (unless
//! [`OpenOptions::allow_truncated`]), trailing garbage, negative sparse counts, sparse
//! indices outside `nx*ny*nf`, weight frames whose header differs from frame 0, weight
//! files whose size fits no plausible frame size, and sizes beyond
//! [`tensorfmt_core::Limits`]. Every declared size is checked against the bytes
//! present before anything is allocated.
//!
//! ```
//! use tensorfmt_pvp::{write::DenseWriter, PvpFile};
//! let mut buf = std::io::Cursor::new(Vec::new());
//! let mut w = DenseWriter::new(&mut buf, 3, 2, 1)?; // nx, ny, nf
//! w.write_frame(1.0, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])?;
//! w.finish()?;
//! let PvpFile::Dense(r) = PvpFile::from_bytes(buf.into_inner().into())? else { unreachable!() };
//! let f = r.frame(0)?;
//! assert_eq!(f.values.dims(), &[2, 3, 1]); // [ny, nx, nf]
//! assert_eq!(f.values.get::<f32>(&[1, 0, 0])?, 3.0);
//! # Ok::<(), tensorfmt_pvp::PvpError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod convert;
mod error;
mod header;
mod index_cache;
pub mod layout;
pub mod ranged;
pub mod read;
mod tensor_file;
pub mod write;

use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::{ReadOptions, Tensor, TensorFile, WriteOptions};

pub use convert::byte_weight_changes;
pub use error::{PvpError, Result};
pub use header::{
    datatype, filetype, Header, WeightExtra, WeightHeader, HEADER_SIZE, WEIGHT_HEADER_SIZE,
};
pub use index_cache::FileKey;
pub use layout::{
    ArborSource, DenseElement, DenseLayout, Kind, OpenOptions, SparseLayout, WeightLayout,
};
pub use read::{
    Csr, DenseFrame, DenseReader, PatchHeader, PvpFile, SparseFrame, SparseReader, SparseTable,
    WeightFrame, WeightReader,
};
pub use tensor_file::PvpTensorFile;

/// Cheap content check on the first bytes of a file: a plausible PVP header
/// (header size, parameter count, file type, data type and size, positive dimensions)
/// and a file at least as long as its header. PVP has no magic number.
///
/// ```
/// let h = tensorfmt_pvp::Header::activity(4, 2, 2, 1, 3, 4).to_bytes();
/// assert!(tensorfmt_pvp::sniff(&h, 80 + 24));
/// assert!(!tensorfmt_pvp::sniff(b"\x93NUMPY\x01\x00", 128));
/// ```
pub fn sniff(head: &[u8], file_len: u64) -> bool {
    let Ok(h) = Header::parse(head) else {
        return false;
    };
    layout::check_base(&h).is_ok() && file_len >= h.headersize as u64
}

/// Opens a whole file (usually an mmap from [`tensorfmt_core::io::map_file`]) as named
/// tensors: dense `values` `[frames, ny, nx, nf]` + `time` `[frames]` f64; sparse as
/// dense `values` + `time`, or with `options.sparse_csr` as `indptr` (i64),
/// `indices` (u32), `data` (f32), `time`, `shape` (i64 `[frames, nx*ny*nf]`) and
/// `frame_shape` (i64 `[ny, nx, nf]`);
/// weights `weights` `[frames, arbors, patches, nyp, nxp, nfp]` f32 + `time`.
/// `options.frames` selects a frame range. `options.limits` caps frames, entries per
/// frame, patches per frame, allocations and rank. `options.strict` refuses what the
/// original reader refused (a trailing partial frame, an `nbands` that disagrees with
/// the real frame count, duplicate sparse indices, bad patch headers); without it a
/// file cut by a crashed writer reads as its whole frames, with a warning.
///
/// ```
/// use tensorfmt_core::{ReadOptions, TensorFile};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = tensorfmt_pvp::write::DenseWriter::new(&mut buf, 1, 1, 2)?;
/// w.write_frame(0.0, &[1.0, 2.0])?;
/// w.write_frame(1.0, &[3.0, 4.0])?;
/// w.finish()?;
/// let opts = ReadOptions { frames: Some((1, None)), ..ReadOptions::default() };
/// let f = tensorfmt_pvp::open_tensor_file(buf.into_inner().into(), &opts)?;
/// assert_eq!(f.read_tensor("values")?.to_vec::<f32>()?, vec![3.0, 4.0]);
/// assert_eq!(f.read_tensor("time")?.to_vec::<f64>()?, vec![1.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_tensor_file(data: Bytes, options: &ReadOptions) -> Result<Box<dyn TensorFile>> {
    Ok(Box::new(PvpTensorFile::new(data, options)?))
}

/// [`open_tensor_file`] for the file `key` identifies: a sparse file's frame table is
/// taken from a process-wide cache (bounded, keyed by device, inode, size and
/// modification time) when this file was scanned before, and remembered otherwise, so
/// that opening the same file again costs O(1) in its frame count.
///
/// ```
/// use tensorfmt_core::{Order, ReadOptions, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("s.pvp");
/// let v = Tensor::from_vec(vec![0f32, 1.0, 0.0, 2.0], [2, 1, 2, 1], Order::RowMajor)?;
/// let opts = WriteOptions { kind: Some("sparse".into()), ..WriteOptions::default() };
/// tensorfmt_pvp::save_tensors(&p, &[("values".into(), v)], &opts)?;
/// let key = tensorfmt_pvp::FileKey { dev: 0, ino: 1, size: std::fs::metadata(&p)?.len(), mtime_ns: 0 };
/// for _ in 0..2 {
///     let data = tensorfmt_core::io::map_file(&p)?;
///     let f = tensorfmt_pvp::open_tensor_file_keyed(data, &ReadOptions::default(), Some(key))?;
///     assert_eq!(f.read_tensor("time")?.dims(), &[2]);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_tensor_file_keyed(
    data: Bytes,
    options: &ReadOptions,
    key: Option<FileKey>,
) -> Result<Box<dyn TensorFile>> {
    Ok(Box::new(PvpTensorFile::new_keyed(data, options, key)?))
}

pub use convert::SETTINGS;

/// Saves named tensors as a PVP file, atomically: a dense file from `values`
/// (`[frames, ny, nx, nf]` or `[ny, nx, nf]`, optional `time`, default 0, 1, ...), a
/// sparse file from `indptr`/`indices`/`data`/`shape`/`time` (binary when `data` is
/// absent or `--set sparse=binary`; `--set datatype=4` for old readers; geometry from
/// `--set nx= ny= nf=`, default `width x 1 x 1`), or a kernel file from `weights`
/// (`options.dtype = u8` for byte weights; unit cell from `--set nx= ny= nf=`,
/// default `1 x 1 x patches`; `--set shared=false` for a non-shared file over a pre
/// layer `nx x ny x nf` with `margin_x`, `margin_y`; geometry the user does not set
/// comes from `options.source_layout`, a PVP source's own). `options.kind` (`dense`, `sparse`, `weights`) forces
/// the kind; `sparse` from a dense `values` keeps the non-zero entries.
///
/// ```
/// use tensorfmt_core::{Order, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("a.pvp");
/// let v = Tensor::from_vec(vec![0f32, 1.0, 0.0, 2.0], [2, 1, 2, 1], Order::RowMajor)?;
/// let opts = WriteOptions { kind: Some("sparse".into()), ..WriteOptions::default() };
/// tensorfmt_pvp::save_tensors(&p, &[("values".into(), v)], &opts)?;
/// let tensorfmt_pvp::PvpFile::Sparse(r) = tensorfmt_pvp::PvpFile::open(&p)? else { unreachable!() };
/// assert_eq!(r.to_csr(0..2)?.indices, vec![1, 1]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_tensors(
    path: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<()> {
    convert::save(path, tensors, options)
}
