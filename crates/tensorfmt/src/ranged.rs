//! Any tensor file described from ranged reads (an object store, an HTTP server), for
//! reference-only ("virtual") datasets: [`describe_remote`] detects the format from
//! the first bytes, lets the format's structure walker fetch its headers and indexes
//! into a [`SparseImage`], opens the image with the ordinary reader and returns, for
//! every tensor, where its bytes lie ([`Placement`]) or why they are not a byte range.
//! [`chunk_grid`] turns a placement into zarr chunk
//! references. See [`tensorfmt_core::ranged`] for why the readers stay the one source
//! of those layouts.
//!
//! ```
//! use tensorfmt::ranged::{describe_path, RemoteOptions};
//! use tensorfmt::ranged::Placement;
//! let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
//! let v = describe_path(&root.join("testdata/pvp/dense_f32.pvp"), &RemoteOptions::default())?;
//! assert_eq!((v.format.as_str(), v.tensors[0].info.name.as_str()), ("pvp", "values"));
//! assert!(matches!(v.tensors[0].placement, Placement::Bytes { .. }));
//! assert_eq!(v.requests, 1); // one read of the first block
//! # Ok::<(), tensorfmt::Error>(())
//! ```

use std::path::Path;

use bytes::Bytes;
pub use tensorfmt_core::ranged::zarr_data_type;
pub use tensorfmt_core::ranged::{
    chunk_grid, BesideFile, ChunkGrid, FileSource, Placement, RangeSource, SparseImage,
    VirtualFile, VirtualTensor, DEFAULT_BLOCK,
};
use tensorfmt_core::{DType, Error, ReadOptions, Result, SourceLayout, TensorFile};

use crate::dispatch::open_bytes;
use crate::format::{detect_bytes, Format, SNIFF_LEN};
use crate::interop;

/// How [`describe_remote`] reads.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// The reader's options (`kind`, `strict`, `limits`; `frames` is ignored: every
    /// frame is described).
    pub read: ReadOptions,
    /// Read-ahead block of structure walks (default [`DEFAULT_BLOCK`], 64 KiB).
    pub block: u64,
    /// Most bytes fetched to describe one file (default 256 MiB): a hostile index
    /// cannot make the walk read a whole archive.
    pub max_fetch: u64,
    /// Tests: write this byte over everything the walk did not fetch before the
    /// reader opens the image (its answers must not depend on those bytes).
    #[doc(hidden)]
    pub fill_unfetched: Option<u8>,
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions {
            read: ReadOptions::default(),
            block: DEFAULT_BLOCK,
            max_fetch: 256 << 20,
            fill_unfetched: None,
        }
    }
}

/// Describes the object of `len` bytes that `source` reads: its format (`format`, or
/// detected from the first bytes and then from `name`'s extension, as
/// [`detect`](crate::detect) does), header, and where every tensor's bytes lie,
/// fetching only headers and indexes. `name` also names a single-array file's tensor
/// (the file stem, as [`open`](crate::open) does).
///
/// Errors, naming the file's field, where a reference could point at wrong bytes:
/// legacy MPI-split PVP frames, sizes that are not whole frames, inconsistent weight
/// frames, truncated payloads.
pub fn describe_remote(
    source: &mut dyn RangeSource,
    len: u64,
    name: Option<&Path>,
    format: Option<Format>,
    options: &RemoteOptions,
) -> Result<VirtualFile> {
    let mut image = SparseImage::new(source, len, options.block, options.max_fetch)?;
    let format = match format {
        Some(f) => f,
        None => {
            let head = image.get(0, SNIFF_LEN as u64)?.to_vec();
            detect_bytes(&head, len, name).ok_or_else(|| {
                Error::Invalid(
                    "cannot tell the file format from its content or name (give format=)".into(),
                )
            })?
        }
    };
    if !format.is_enabled() {
        return Err(Error::Invalid(format!(
            "support for the {format} format is not compiled in"
        )));
    }
    let read = ReadOptions {
        frames: None,
        sparse_csr: false,
        ..options.read.clone()
    };
    #[cfg(feature = "pvp")]
    if format == Format::Pvp {
        if let Some(v) = tensorfmt_pvp::ranged::describe_sparse_header(&mut image)? {
            return Ok(v);
        }
    }
    fetch_structure(&mut image, format, &read)?;
    let (fetched, requests) = (image.fetched(), image.requests());
    if let Some(b) = options.fill_unfetched {
        image.fill_unfetched(b);
    }
    let bytes = image.into_bytes();
    let file: Box<dyn TensorFile> = match format {
        // External data lies in other objects: described, not read.
        #[cfg(feature = "onnx")]
        Format::Onnx => Box::new(tensorfmt_onnx::OnnxFile::new(
            tensorfmt_onnx::read_model_file_described(bytes.clone(), &read)?,
        )),
        _ => open_bytes(bytes.clone(), format, name, &read)?,
    };
    let mut tensors = placements(&bytes, format, &*file, &read)?;
    for t in &mut tensors {
        if t.info.dtype == DType::BF16 {
            t.placement = Placement::NotVirtual("zarr has no bfloat16 data type".into());
        }
    }
    Ok(VirtualFile {
        format: format.name().into(),
        kind: file.kind_id().into(),
        description: file.kind(),
        header: file.header(),
        warnings: file.warnings(),
        tensors,
        file_len: len,
        fetched,
        requests,
    })
}

/// [`describe_remote`] of a local file, read with positioned reads (not mapped).
pub fn describe_path(path: &Path, options: &RemoteOptions) -> Result<VirtualFile> {
    let mut src = FileSource::open(path)?;
    let len = src.len();
    describe_remote(&mut src, len, Some(path), None, options)
}

fn fetch_structure(image: &mut SparseImage<'_>, format: Format, read: &ReadOptions) -> Result<()> {
    match format {
        Format::Npy => {
            let pre = image.get(0, 12)?.to_vec();
            let n = interop::npy::header_len(&pre).map_err(|e| Error::format("npy", e))?;
            image.get(0, n as u64)?;
        }
        Format::Safetensors => {
            let pre = image.get(0, 8)?;
            if let Ok(b) = <[u8; 8]>::try_from(pre) {
                let n = u64::from_le_bytes(b);
                if n <= interop::safetensors::MAX_HEADER_SIZE as u64 {
                    image.get(8, n)?;
                }
            }
        }
        Format::Npz => interop::npz::fetch_structure(image, &read.limits)?,
        #[cfg(feature = "pvp")]
        Format::Pvp => tensorfmt_pvp::ranged::fetch_structure(image, read)?,
        #[cfg(feature = "som")]
        Format::Som => tensorfmt_som::ranged::fetch_structure(image, read)?,
        #[cfg(feature = "caffe")]
        Format::Caffe => tensorfmt_caffe::ranged::fetch_structure(image, read)?,
        #[cfg(feature = "onnx")]
        Format::Onnx => tensorfmt_onnx::ranged::fetch_structure(image)?,
        #[cfg(feature = "primitiv")]
        Format::Primitiv => tensorfmt_primitiv::ranged::fetch_structure(image)?,
        #[allow(unreachable_patterns)]
        _ => {}
    }
    let _ = read;
    Ok(())
}

fn placements(
    bytes: &Bytes,
    format: Format,
    file: &dyn TensorFile,
    read: &ReadOptions,
) -> Result<Vec<VirtualTensor>> {
    Ok(match format {
        #[cfg(feature = "pvp")]
        Format::Pvp => tensorfmt_pvp::ranged::describe(bytes.clone(), read)?,
        #[cfg(feature = "som")]
        Format::Som => tensorfmt_som::ranged::describe(bytes.clone(), read)?,
        #[cfg(feature = "caffe")]
        Format::Caffe => tensorfmt_caffe::ranged::describe(bytes.clone(), read)?,
        #[cfg(feature = "onnx")]
        Format::Onnx => tensorfmt_onnx::ranged::describe(bytes.clone(), read)?,
        #[cfg(feature = "primitiv")]
        Format::Primitiv => tensorfmt_primitiv::ranged::describe(bytes.clone(), read)?,
        Format::Npz => interop::npz::open(bytes.clone(), read)?.placements(),
        Format::Npy => {
            let h = interop::npy::parse_header(bytes, &read.limits)
                .map_err(|e| Error::format("npy", e))?;
            let nbytes = h.shape.numel()? as u64 * h.dtype.size() as u64;
            let mut layout = SourceLayout::contiguous(h.data_offset as u64, nbytes);
            if h.fortran_order {
                layout.order = tensorfmt_core::Order::ColumnMajor;
            }
            file.tensors()
                .into_iter()
                .map(|info| VirtualTensor {
                    info,
                    placement: Placement::Bytes {
                        layout: layout.clone(),
                        big_endian: h.big_endian,
                    },
                    frame_axis: false,
                })
                .collect()
        }
        // Zero-copy readers: a tensor's bytes are a slice of the image, at its offset.
        _ => file
            .tensors()
            .into_iter()
            .map(|info| {
                let placement = match file.read_tensor(&info.name) {
                    Ok(t) => match slice_offset(bytes, t.bytes()) {
                        Some(at) => Placement::Bytes {
                            layout: SourceLayout {
                                order: t.order(),
                                ..SourceLayout::contiguous(at, t.bytes().len() as u64)
                            },
                            big_endian: false,
                        },
                        None => Placement::NotVirtual("decoded by the reader".into()),
                    },
                    Err(e) => Placement::NotVirtual(format!("not read: {e}")),
                };
                VirtualTensor {
                    info,
                    placement,
                    frame_axis: false,
                }
            })
            .collect(),
    })
}

/// Where `part` starts in `whole`, when it is a non-empty slice of it.
fn slice_offset(whole: &Bytes, part: &Bytes) -> Option<u64> {
    let (base, at) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    (!part.is_empty() && at >= base && at + part.len() <= base + whole.len())
        .then(|| (at - base) as u64)
}
