//! # tensorfmt
//!
//! Read, write, check and convert the tensor files of older ML systems — PetaVision PVP,
//! PINK SOM binaries, primitiv MessagePack, Caffe protobuf — and the interchange formats
//! `.npy`, `.npz` and `.safetensors`.
//!
//! This facade re-exports [`tensorfmt_core`] (dtypes, shapes, [`Tensor`], the
//! [`TensorFile`] interface), each format crate behind its cargo feature (`pvp`, `som`,
//! `primitiv`, `caffe`; all on by default) as [`pvp`], [`som`], [`primitiv`], [`caffe`],
//! and adds:
//!
//! - [`Format`], [`detect`] (content first, extension second), [`open`], [`save`] and
//!   [`convert`] (streaming for npy/npz/safetensors outputs);
//! - [`interop`]: readers and writers for npy, npz and safetensors;
//! - [`render`]: pictures of SOMs and frames.
//!
//! It rejects, with an [`Error`] and never a panic, files whose content contradicts
//! their format, sizes beyond [`Limits`], and formats that were not compiled in.
//!
//! ```
//! use tensorfmt::{Format, Order, Tensor};
//! let dir = tempfile::tempdir()?;
//! let npz = dir.path().join("w.npz");
//! let w = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, 3.5], [2, 2], Order::RowMajor)?;
//! tensorfmt::save(&npz, Format::Npz, &[("w".into(), w.clone())], &Default::default())?;
//!
//! // Convert to safetensors without knowing what the input was.
//! let src = tensorfmt::open(&npz, &Default::default())?;
//! let names: Vec<String> = src.tensors().into_iter().map(|i| i.name).collect();
//! let st = dir.path().join("w.safetensors");
//! tensorfmt::convert(src.as_ref(), &names, &st, Format::Safetensors, &Default::default())?;
//! assert_eq!(tensorfmt::open(&st, &Default::default())?.read_tensor("w")?, w);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub use tensorfmt_core::*;

#[cfg(feature = "caffe")]
pub use tensorfmt_caffe as caffe;
#[cfg(feature = "primitiv")]
pub use tensorfmt_primitiv as primitiv;
#[cfg(feature = "pvp")]
pub use tensorfmt_pvp as pvp;
#[cfg(feature = "som")]
pub use tensorfmt_som as som;

pub mod diff;
pub mod formats;
pub mod interop;
pub mod render;

pub use formats::{convert, detect, detect_bytes, open, open_as, open_bytes, save, Format, Target};
