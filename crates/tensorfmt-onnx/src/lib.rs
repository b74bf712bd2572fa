//! # tensorfmt-onnx
//!
//! Reads and writes ONNX model files without a C++ or Python dependency:
//!
//! - **reads** a `ModelProto`'s header (IR version, producer, opsets, metadata), graph
//!   inputs and outputs, a digest of its structure, and every `graph.initializer` as a
//!   named tensor: `raw_data` is a zero-copy slice of the (memory-mapped) file, typed
//!   fields (`float_data`, `int32_data`, ...) are converted with one copy, sparse
//!   initializers are densified when read; tensors elsewhere in the model (node
//!   attributes, subgraphs, functions) are not read, but their external data is
//!   checked and listed;
//! - **writes** weights-only models from named tensors ([`save_tensors`]) and any
//!   [`proto::ModelProto`] ([`write_model`], which streams initializer payloads), the
//!   latter used by the Caffe lowering in `tensorfmt-lower`;
//! - **rejects**, with an [`OnnxError`] naming the byte offset and message path:
//!   malformed wire data, lengths beyond the bytes present, known fields with the wrong
//!   wire type, tensors whose data does not match their shape or element type, external
//!   data files outside the model's directory (or any, when the model comes as bytes:
//!   [`read_model_file_at`] and [`open_tensor_file_at`] read them beside the model), and
//!   anything over [`tensorfmt_core::Limits`].
//!
//! The schema is `proto/onnx.proto` (ONNX's field names and numbers), compiled by
//! `cargo xtask codegen` into [`proto`].
//!
//! ```
//! use tensorfmt_core::{Order, ReadOptions, Tensor, TensorFile, WriteOptions};
//! let dir = tempfile::tempdir()?;
//! let p = dir.path().join("w.onnx");
//! let t = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], [2, 2], Order::RowMajor)?;
//! tensorfmt_onnx::save_tensors(&p, &[("fc.weight".into(), t)], &WriteOptions::default())?;
//! let f = tensorfmt_onnx::open_tensor_file(std::fs::read(&p)?.into(), &ReadOptions::default())?;
//! assert_eq!(f.tensors()[0].name, "fc.weight");
//! assert_eq!(f.read_tensor("fc.weight")?.dims(), &[2, 2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod error;
mod external;
mod file;
pub mod ranged;
mod read;
mod relocate;
mod tensor;
mod wire;
mod write;

/// Prost types generated from `proto/onnx.proto` by `cargo xtask codegen`.
#[rustfmt::skip]
#[path = "generated/onnx.rs"]
pub mod proto;

use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::{ReadOptions, Tensor, TensorFile, WriteOptions};

pub use error::{OnnxError, Result};
pub use external::{external_data_file, Unread};
pub use file::{OnnxFile, EXTERNAL_DATA_FIELD, STRUCTURE_FIELD};
pub use read::{read_model_file, read_model_file_at, read_model_file_described, sniff, ModelFile};
pub use relocate::{copy_model, CopyReport};
pub use tensor::{dtype_of, onnx_data_type, tensor_from_proto, tensor_to_proto, SparseInitializer};
pub use write::{
    external_data_path, save_model, save_model_with, weights_model, write_model, write_model_bulk,
    write_tensors, ExternalData, EXTERNAL_MIN_BYTES, IR_VERSION, MAX_MODEL_BYTES, OPSET,
};

/// Opens an ONNX model as named tensors: its initializers, under their own names.
///
/// ```
/// use tensorfmt_core::{Order, ReadOptions, Tensor, TensorFile};
/// let t = Tensor::from_vec(vec![7u8, 8], [2], Order::RowMajor)?;
/// let mut buf = Vec::new();
/// tensorfmt_onnx::write_tensors(&mut buf, &[("b".into(), t)])?;
/// let f = tensorfmt_onnx::open_tensor_file(buf.into(), &ReadOptions::default())?;
/// assert_eq!((f.format(), f.kind().as_str()), ("onnx", "weights"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_tensor_file(data: Bytes, options: &ReadOptions) -> Result<Box<dyn TensorFile>> {
    Ok(Box::new(OnnxFile::new(read_model_file(data, options)?)))
}

/// [`open_tensor_file`] of a model that lies in `model_dir`, reading the external data
/// files beside it (see [`read_model_file_at`]).
///
/// ```
/// use tensorfmt_core::{Order, ReadOptions, Tensor, TensorFile};
/// let t = Tensor::from_vec(vec![7u8, 8], [2], Order::RowMajor)?;
/// let mut buf = Vec::new();
/// tensorfmt_onnx::write_tensors(&mut buf, &[("b".into(), t)])?;
/// let f = tensorfmt_onnx::open_tensor_file_at(buf.into(), &ReadOptions::default(), ".".as_ref())?;
/// assert_eq!(f.read_tensor("b")?.to_vec::<u8>()?, vec![7, 8]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_tensor_file_at(
    data: Bytes,
    options: &ReadOptions,
    model_dir: &Path,
) -> Result<Box<dyn TensorFile>> {
    Ok(Box::new(OnnxFile::new(read_model_file_at(
        data, options, model_dir,
    )?)))
}

/// The `--set` settings [`save_tensors`] reads (`WriteOptions::extra`), with their
/// values; the facade refuses any other key or value, so a setting is never silently
/// ignored.
///
/// ```
/// assert_eq!(tensorfmt_onnx::SETTINGS[0].key, "external_data");
/// ```
pub const SETTINGS: &[tensorfmt_core::settings::Setting] =
    &[tensorfmt_core::settings::Setting::new(
        ExternalData::SETTING,
        tensorfmt_core::settings::SettingValue::Flag,
    )];

/// Saves named tensors as a weights-only ONNX model (a graph of initializers and no
/// nodes), written through [`tensorfmt_core::io::AtomicFile`].
///
/// ```
/// use tensorfmt_core::{Order, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("w.onnx");
/// let t = Tensor::from_vec(vec![1f32], [1], Order::RowMajor)?;
/// tensorfmt_onnx::save_tensors(&p, &[("a".into(), t.clone()), ("a".into(), t)], &WriteOptions::default())
///     .unwrap_err(); // duplicate names are refused before anything is written
/// assert!(!p.exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_tensors(
    path: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<()> {
    // `--dtype`: every initializer stored as that type (ONNX has them all).
    let cast: Vec<(String, Tensor)>;
    let tensors = match options.dtype {
        Some(d) if tensors.iter().any(|(_, t)| t.dtype() != d) => {
            cast = tensors
                .iter()
                .map(|(n, t)| Ok((n.clone(), t.cast(d)?)))
                .collect::<Result<_>>()?;
            &cast[..]
        }
        _ => tensors,
    };
    save_model(path, &weights_model(tensors)?, options)
}
