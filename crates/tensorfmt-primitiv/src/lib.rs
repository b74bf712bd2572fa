//! # tensorfmt-primitiv
//!
//! Reads and writes **primitiv File Format v0.1**, the MessagePack-based files of the
//! primitiv neural-network library (v0.3.x and develop): all five data types, Shape
//! (`0x000`), Tensor (`0x100`), Parameter (`0x200`), Model (`0x300`) and Optimizer
//! (`0x400`). A file is a plain series of top-level MessagePack objects (a 15-byte
//! header `ce 0` `ce 1` `ce <data_type>`, then the members), decoded here one object at
//! a time with `rmp::decode` and written with `rmp::encode`.
//!
//! **Reads** ([`read_file`], [`read_as`]): exactly what primitiv accepts: uint32 only
//! as `ce`, floats only as `ca`, every length form of str/bin/array/map, trailing
//! bytes, non-minimal headers, dims with trailing 1s (normalised away), duplicate
//! model keys (the last wins), repeated stat or config keys (the first wins), keys that
//! are not UTF-8 (kept as bytes). The unusual ones are reported as
//! [`Decoded::warnings`]. Tensor data is not copied: each [`PrimitivTensor`] slices the
//! input `Bytes` (little-endian f32, column-major, batch last).
//!
//! **Rejects**, with a [`PrimitivError`] naming the byte offset and field, what
//! primitiv rejects: a version other than 0.1, an unknown or unexpected data type, a
//! wrong marker, a `bin` whose length is not 4 × volume × batch, more than 8 dims
//! (counted before normalisation), a zero dim or batch, a parameter value with batch
//! above 1, truncation anywhere; and sizes that overflow or exceed the
//! [`Limits`](tensorfmt_core::Limits). Declared lengths are checked against the bytes
//! present before anything is allocated. [`Mode::Pedantic`] also rejects trailing
//! bytes, duplicate and non-UTF-8 keys; [`Mode::Lenient`] also accepts the integer and
//! float encodings of generic MessagePack libraries (with a warning).
//!
//! **Limits and options:** every declared length is checked against the bytes present
//! before use; [`Limits`](tensorfmt_core::Limits) caps declared counts (`max_items`,
//! each and in total), ranks (`max_rank`, below primitiv's 8) and allocations
//! (`max_alloc`: keys, row-major copies). Through [`open_tensor_file`] (the facade),
//! `ReadOptions::strict` selects [`Mode::Primitiv`] and its absence [`Mode::Lenient`];
//! `ReadOptions::kind` is ignored (the file names its data type).
//!
//! **Writes** ([`encode`], [`to_bytes`], [`write_file`]): primitiv's exact forms (uint32
//! always `ce`, float always `ca`, smallest str/bin/array/map headers), normalised
//! dims, model entries sorted by key path, stats and optimizer configs in the order
//! held: reading a file written by primitiv and writing it back gives the same bytes.
//! Files are written atomically.
//!
//! **Export names** ([`PrimitivFile`], [`save_named`]): a model parameter is named by
//! its key path joined with `.` ([`Model::export_name`]); a key's own `\`, `.` and `/`
//! are escaped (`\\`, `\.`, `\/`, and `\xNN` for bytes that are not UTF-8), so the
//! key `a.b` (`a\.b`) and the path `a`, `b` (`a.b`) are two names, and writing the
//! exported tensors back restores every key path.
//!
//! ```
//! use tensorfmt_core::Order;
//! use tensorfmt_primitiv::*;
//! // Parameter {2,2} = [1,2,3,4] without stats, as primitiv's Parameter::save writes it.
//! let golden = [
//!     0xce, 0, 0, 0, 0, 0xce, 0, 0, 0, 1, 0xce, 0, 0, 2, 0,            // 0.1, PARAMETER
//!     0x92, 0xce, 0, 0, 0, 2, 0xce, 0, 0, 0, 2, 0xce, 0, 0, 0, 1,      // dims [2,2], batch 1
//!     0xc4, 16, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40,
//!     0xce, 0, 0, 0, 0,                                                // no stats
//! ];
//! let d = read_as(bytes::Bytes::copy_from_slice(&golden), DataType::Parameter, &ReaderOptions::default())?;
//! let PrimitivData::Parameter(p) = &d.data else { unreachable!() };
//! let numpy = p.value().to_core()?.to_order(Order::RowMajor)?;
//! assert_eq!(numpy.to_vec::<f32>()?, vec![1.0, 3.0, 2.0, 4.0]);
//! assert_eq!(to_bytes(&d.data)?, golden);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod data;
mod error;
mod file;
mod key;
mod optimizer;
pub mod ranged;
mod read;
mod write;

use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::settings::{Setting, SettingValue};
use tensorfmt_core::{ReadOptions, Tensor, TensorFile, WriteOptions};

pub use data::{
    DataType, KeyPath, Model, Parameter, PrimitivData, PrimitivShape, PrimitivTensor, MAX_DEPTH,
};
pub use error::{PrimitivError, Result};
pub use file::{build, save_named, ParameterExport, PrimitivFile};
pub use key::Key;
pub use optimizer::{Algorithm, Optimizer, OptimizerKind, OptimizerSettings};
pub use read::{read_as, read_file, Decoded, Mode, ReaderOptions};
pub use write::{encode, to_bytes, write_file};

/// The 10 bytes every primitiv v0.1 file starts with: uint32 0, uint32 1.
const MAGIC: [u8; 10] = [0xce, 0, 0, 0, 0, 0xce, 0, 0, 0, 1];

/// Cheap content check: the version 0.1 header, a known data type as a `ce` uint32,
/// and the marker the data type's first member must start with (an array for Shape,
/// Tensor and Parameter, a `ce` count for Model, a map for Optimizer).
///
/// ```
/// use tensorfmt_primitiv::sniff;
/// let head = [0xce, 0, 0, 0, 0, 0xce, 0, 0, 0, 1, 0xce, 0, 0, 3, 0, 0xce, 0, 0, 0, 2];
/// assert!(sniff(&head, 107));
/// assert!(!sniff(b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', ", 128));
/// assert!(!sniff(&head[..15], 15)); // a header alone is not a file
/// ```
pub fn sniff(head: &[u8], file_len: u64) -> bool {
    if head.len() < 16 || file_len < 16 || head[..10] != MAGIC || head[10] != 0xce {
        return false;
    }
    let code = u32::from_be_bytes([head[11], head[12], head[13], head[14]]);
    let next = head[15];
    let array = matches!(next, 0x90..=0x9f | 0xdc | 0xdd);
    let map = matches!(next, 0x80..=0x8f | 0xde | 0xdf);
    match DataType::from_code(code) {
        Some(DataType::Shape | DataType::Tensor | DataType::Parameter) => array,
        Some(DataType::Model) => next == 0xce,
        Some(DataType::Optimizer) => map,
        None => false,
    }
}

/// Opens a whole file (any data type) as named tensors: see [`PrimitivFile`] for the
/// export names. `options.limits` caps declared counts, ranks and the row-major copies.
///
/// `options.strict` reads exactly what primitiv reads ([`Mode::Primitiv`]); without it
/// ([`Mode::Lenient`]) the integer and float encodings of generic MessagePack libraries
/// are also accepted, with a warning saying primitiv would refuse the file.
/// `options.kind` is ignored: a primitiv file names its own data type.
///
/// ```
/// use tensorfmt_core::{ReadOptions, TensorFile};
/// let scalar = [0xce, 0, 0, 0, 0, 0xce, 0, 0, 0, 1, 0xce, 0, 0, 2, 0, 0x90, 0xce, 0, 0, 0, 1,
///               0xc4, 4, 0xd0, 0x0f, 0x49, 0x40, 0xce, 0, 0, 0, 0];
/// let f = tensorfmt_primitiv::open_tensor_file(bytes::Bytes::copy_from_slice(&scalar), &ReadOptions::default())?;
/// assert_eq!(f.kind(), "parameter");
/// assert_eq!(f.read_tensor("value")?.to_vec::<f32>()?, vec![3.14159]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_tensor_file(
    data: Bytes,
    options: &ReadOptions,
) -> Result<Box<dyn TensorFile>, PrimitivError> {
    let ro = ReaderOptions {
        mode: if options.strict {
            Mode::Primitiv
        } else {
            Mode::Lenient
        },
        limits: options.limits,
    };
    let decoded = read_file(data.clone(), &ro)?;
    Ok(Box::new(
        PrimitivFile::new(decoded, options.limits.max_alloc).with_source(data),
    ))
}

/// The `--set` settings [`save_tensors`] reads (`WriteOptions::extra`), with their
/// values; the facade and [`save_tensors`] refuse any other key or value, so a
/// setting is never silently ignored.
///
/// ```
/// assert_eq!(tensorfmt_primitiv::SETTINGS[0].key, "batch_axis");
/// ```
pub const SETTINGS: &[Setting] = &[Setting::new("batch_axis", SettingValue::Flag)];

/// Saves named tensors as a primitiv file: a Model file from the export names, or a
/// Parameter file (`options.kind = "parameter"`, or a single tensor named `value`).
/// See [`save_named`] for the rules.
///
/// ```
/// use tensorfmt_core::{Order, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("p.data");
/// let v = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2], Order::ColumnMajor)?;
/// tensorfmt_primitiv::save_tensors(&path, &[("value".into(), v)], &WriteOptions::default())?;
/// assert_eq!(std::fs::read(&path)?.len(), 54);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_tensors(
    path: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<(), PrimitivError> {
    save_named(path, tensors, options)
}
