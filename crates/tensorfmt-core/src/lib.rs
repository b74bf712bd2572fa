//! # tensorfmt-core
//!
//! The format-neutral ground of tensorfmt: element types ([`DType`], [`Element`]),
//! shapes and memory orders ([`Shape`], [`Order`]), [`Tensor`] over shared
//! little-endian bytes (zero copy from a file map), summary [`Stats`], reader
//! [`Limits`], atomic writes and file mapping ([`io`]), and the [`TensorFile`]
//! interface that every format crate implements.
//!
//! It reads and writes no file format itself. It rejects, with an [`Error`] and never
//! a panic: shapes whose sizes overflow, byte buffers of the wrong length, borrowed
//! views of misaligned bytes, invalid permutations and reshapes, out-of-bounds indices.
//!
//! ```
//! use tensorfmt_core::{DType, Order, Tensor};
//! // A column-major 2x3 matrix (as primitiv stores it) turned into numpy order.
//! let col = Tensor::from_vec(vec![1f32, 4.0, 2.0, 5.0, 3.0, 6.0], [2, 3], Order::ColumnMajor)?;
//! let row = col.to_order(Order::RowMajor)?;
//! assert_eq!(row.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! assert_eq!(row.stats().sum, 21.0);
//! assert_eq!(row.cast(DType::I32)?.get::<i32>(&[1, 2])?, 6);
//! # Ok::<(), tensorfmt_core::Error>(())
//! ```
//!
//! Byte order: tensors hold little-endian bytes and typed access reinterprets them, so
//! the crate supports little-endian hosts only (checked at compile time).
#![warn(missing_docs)]

#[cfg(target_endian = "big")]
compile_error!("tensorfmt-core assumes a little-endian host");

pub use bytes;
pub use half;

#[macro_use]
mod dtype;
mod error;
mod file;
pub mod io;
mod limits;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod options;
pub mod ranged;
pub mod settings;
mod shape;
mod stats;
mod tensor;
pub mod testing;

pub use dtype::{DType, Element};
pub use error::{Classify, Error, ErrorKind, Result};
pub use file::{
    streamed_stats, Chunks, FieldValue, SourceLayout, SourceRun, SparseRow, SparseRows, TensorFile,
    TensorInfo,
};
pub use limits::Limits;
pub use options::{Compression, ReadOptions, SparseOutput, WriteOptions, CARRIED_KEY};
pub use shape::{Order, Shape};
pub use stats::Stats;
pub use tensor::Tensor;
