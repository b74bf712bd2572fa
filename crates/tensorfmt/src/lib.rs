//! # tensorfmt
//!
//! Read, write, check and convert the tensor files of older ML systems — PetaVision PVP,
//! PINK SOM binaries, primitiv MessagePack, Caffe protobuf — and the interchange formats
//! `.npy`, `.npz` and `.safetensors`. One dependency line is enough:
//!
//! ```toml
//! [dependencies]
//! tensorfmt = { path = "crates/tensorfmt" }                           # all formats
//! # tensorfmt = { path = "...", features = ["ndarray"] }              # + ndarray arrays
//! # tensorfmt = { path = "...", default-features = false, features = ["pvp"] }
//! ```
//!
//! ## What is here
//!
//! - [`open`] (or [`Document::open`]) detects the format (content first, extension
//!   second) and returns a [`Document`]: the [`Format`], the path, the header and
//!   warnings, and lazy [`Entry`] values for the named tensors; nothing is decoded until
//!   you call [`Entry::read`] or stream it with [`Entry::chunks`]. A `Document`
//!   dereferences to [`dyn TensorFile`](TensorFile), the interface every format
//!   implements.
//! - [`save`] writes `(name, tensor)` pairs in any writable format; a [`Target`] picks the
//!   file kind inside a format (`som-data`, `pvp:sparse`, `caffe:binaryproto`, ... see
//!   [`Format::write_kinds`]); [`Document::convert_to`] writes one open file in another
//!   format (streamed for npy, npz and safetensors outputs): the one conversion the CLI
//!   and Python call, with every policy in [`convert`].
//! - Re-exports: the core types ([`Tensor`], [`DType`], [`Shape`], [`Order`], [`Stats`],
//!   [`Limits`], [`ReadOptions`], [`WriteOptions`], [`Error`], [`io`], ...), each format
//!   crate behind its cargo feature (`pvp`, `som`, `primitiv`, `caffe`; all on by default)
//!   as [`pvp`], [`som`], [`primitiv`], [`caffe`] with their main types at the root
//!   ([`PvpFile`], [`SomFile`], [`PrimitivFile`], [`CaffeFile`], their error types), and
//!   `ndarray` itself with the `ndarray` feature.
//! - [`interop`]: readers and writers for npy, npz and safetensors; [`render`]: PNG
//!   pictures of SOMs, PVP frames and weights; [`diff`]: tensor-by-tensor comparison.
//!
//! It rejects, with an [`Error`] and never a panic, files whose content contradicts
//! their format, sizes beyond [`Limits`], and formats that were not compiled in.
//!
//! ## Open a file and look at its tensors
//!
//! ```
//! # let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
//! let doc = tensorfmt::Document::open(root.join("testdata/caffe/v2_tiny.caffemodel"))?;
//! println!("{} ({})", doc.file_format(), doc.kind());
//! for (key, value) in doc.header() {
//!     println!("  {key}: {value}");
//! }
//! for entry in &doc {
//!     // name, dtype and shape come from the header; read() decodes this one tensor.
//!     let t = entry.read()?;
//!     println!("{} {} {} sum={}", entry.name(), entry.dtype(), entry.shape(), t.stats().sum);
//! }
//! # Ok::<(), tensorfmt::Error>(())
//! ```
//!
//! ## Convert between formats
//!
//! ```
//! use tensorfmt::{Document, Format, Order, Tensor};
//! let dir = tempfile::tempdir()?;
//! let npz = dir.path().join("w.npz");
//! let w = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, 3.5], [2, 2], Order::RowMajor)?;
//! tensorfmt::save(&npz, Format::Npz, &[("w".into(), w.clone())], &Default::default())?;
//!
//! // Without knowing what the input was:
//! let st = dir.path().join("w.safetensors");
//! Document::open(&npz)?.convert_to(&st, Format::Safetensors)?;
//! assert_eq!(Document::open(&st)?.entry("w")?.read()?, w);
//!
//! // A selection of tensors and write options (what the CLI and Python pass).
//! let src = Document::open(&npz)?;
//! let out = dir.path().join("w2.safetensors");
//! src.convert_to_with(&out, Format::Safetensors, Some(&["w".to_string()]), &Default::default())?;
//! assert_eq!(tensorfmt::open(&out, &Default::default())?.read_tensor("w")?, w);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Write a particular file kind
//!
//! ```
//! use tensorfmt::{Document, Format, Order, Target, Tensor, WriteOptions};
//! let dir = tempfile::tempdir()?;
//! // Three 4x4 images as a PINK data file, and a Caffe mean file.
//! let images = Tensor::from_vec(vec![0.25f32; 3 * 16], [3, 4, 4], Order::RowMajor)?;
//! let data = dir.path().join("images.bin");
//! tensorfmt::save_to(&data, &"som-data".parse::<Target>()?, &[("images".into(), images)], &WriteOptions::default())?;
//! assert_eq!(Document::open(&data)?.kind(), "data");
//!
//! let mean = Tensor::from_vec(vec![1f32; 3 * 2 * 2], [3, 2, 2], Order::RowMajor)?;
//! let mp = dir.path().join("mean.binaryproto");
//! tensorfmt::save_to(&mp, &Target::new(Format::Caffe).with_kind("binaryproto"), &[("mean".into(), mean)], &WriteOptions::default())?;
//! assert_eq!(Document::open(&mp)?.file_format(), Format::Caffe);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Stream a large file piece by piece
//!
//! ```
//! # let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
//! let doc = tensorfmt::Document::open(root.join("testdata/pvp/dense_f32.pvp"))?;
//! let values = doc.entry("values")?; // [frames, ny, nx, nf]
//! for (k, frame) in values.chunks()?.enumerate() {
//!     let frame = frame?; // a few frames at a time, zero copy from the mapped file
//!     println!("frames from {k}: {:?} max {:?}", frame.dims(), frame.stats().max);
//! }
//! # Ok::<(), tensorfmt::Error>(())
//! ```
//!
//! Runnable programs for each of these paths live in `crates/tensorfmt/examples/`.
#![warn(missing_docs)]

pub use tensorfmt_core::*;

#[cfg(feature = "caffe")]
pub use tensorfmt_caffe as caffe;
#[cfg(feature = "onnx")]
pub use tensorfmt_onnx as onnx;
#[cfg(feature = "primitiv")]
pub use tensorfmt_primitiv as primitiv;
#[cfg(feature = "pvp")]
pub use tensorfmt_pvp as pvp;
#[cfg(feature = "som")]
pub use tensorfmt_som as som;

#[cfg(feature = "ndarray")]
pub use ndarray;
#[cfg(feature = "caffe")]
pub use tensorfmt_caffe::{CaffeError, CaffeFile};
#[cfg(feature = "onnx")]
pub use tensorfmt_onnx::{OnnxError, OnnxFile};
#[cfg(feature = "primitiv")]
pub use tensorfmt_primitiv::{PrimitivData, PrimitivError, PrimitivFile};
#[cfg(feature = "pvp")]
pub use tensorfmt_pvp::{PvpError, PvpFile};
#[cfg(feature = "som")]
pub use tensorfmt_som::{HexGrid, MapLayout, SomError, SomFile};

// The conversion path, bottom to top: `format` (what a file is) <- `dispatch` (open and
// write each format) <- `document` (an opened file) <- `convert` (every policy; the
// one way in). ARCHITECTURE.md draws it.
pub mod convert;
pub mod diff;
pub mod dispatch;
pub mod document;
pub mod format;
pub mod interop;
mod naming;
pub mod progress;
pub mod provenance;
pub mod ranged;
pub mod render;

pub use convert::{save, save_to, save_with_progress};
pub use dispatch::{open_bytes, WriteReport};
pub use document::{open, open_as, Document, Entries, Entry};
pub use format::{detect, detect_bytes, Format, Target};
pub use interop::{InteropError, MemoryFile};
