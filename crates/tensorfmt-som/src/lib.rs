//! # tensorfmt-som
//!
//! Reads and writes the binary files of PINK ("Parallelized rotation and flipping
//! INvariant Kohonen maps"), following `specs/som.md`:
//!
//! * **Reads** version-2 data, SOM, mapping and rotation/flip files with their `#`
//!   comment block (C++ semantics: stops after `# END OF HEADER` or before the first
//!   non-`#` line), all ten data types, cartesian maps of rank 1 to 3 and hexagonal
//!   maps, including hexagonal maps the PINK program labels cartesian (inferred from
//!   the payload size, [`SomFile::hex_inferred`]). Pre-version-2 files (v1 and the
//!   2014 formats) are recognised by size arithmetic when exactly one interpretation
//!   fits; otherwise the error lists the interpretations ([`ReadConfig::legacy_kind`]
//!   picks one). Entries and neurons are zero-copy slices of the (mapped) file when
//!   aligned; data entries stream with bounded memory.
//! * **Writes** all four file types ([`write_data`], [`DataWriter`] for streaming with
//!   the entry count patched at the end, [`write_som`], [`write_mapping`],
//!   [`write_rotflip`]) with optional comments closed by `# END OF HEADER` and the
//!   hexagonal layout code 1 (or 0 with [`WriteConfig::pink_cli_compat`]).
//! * **Rejects**, with a [`SomError`] naming the field and byte offset: truncated
//!   headers and payloads, unknown codes, bad ranks and dims, hexagonal layouts that
//!   are not `[d, d]` with d odd, payload sizes that fit no layout, headerless data, and
//!   absurd counts (checked arithmetic and [`tensorfmt_core::Limits`] before any
//!   allocation). It does not reproduce PINK's 4-byte shift when loading multi-channel
//!   SOMs.
//!
//! Element order: data `[entry][channel][row][col]`; SOM neuron `n` holds
//! `[channel][row][col]`; cartesian neurons are in C order over the header dims (PINK
//! writes `[width, height(, depth)]`, so `dims[0]` is the width); hexagonal neurons in
//! the row storage order of [`HexGrid`].
//!
//! ```
//! use tensorfmt_core::{Order, Tensor};
//! use tensorfmt_som::{write_som, FileKind, HexGrid, MapLayout, SomFile, WriteConfig};
//!
//! let map = MapLayout::Hexagonal(HexGrid::new(3)?);
//! let som = Tensor::from_vec((0..7 * 4).map(|v| v as f32).collect::<Vec<_>>(), [7, 2, 2], Order::RowMajor)?;
//! let mut bytes = Vec::new();
//! let compat = WriteConfig { pink_cli_compat: true, ..WriteConfig::default() };
//! write_som(&mut bytes, &map, &[2, 2], &som, &compat)?;
//!
//! let f = SomFile::from_bytes(bytes.into())?;
//! assert_eq!(f.kind(), FileKind::Som);
//! assert!(f.hex_inferred()); // layout code 0, as PINK writes it
//! assert_eq!(f.neuron_at(&[0, 1])?.to_vec::<f32>()?, vec![8., 9., 10., 11.]); // neuron 2
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod facade;
mod header;
mod hex;
pub mod ids;
mod layout;
mod legacy;
pub mod mapping;
pub mod ranged;
mod read;
pub mod transform;
mod write;

pub use error::{Result, SomError};
pub use facade::{
    open_tensor_file, parse_kind_hint, save_tensors, sniff, write_warnings, SomTensors, SETTINGS,
};
pub use header::{
    CommentBlock, CommentSpan, DataType, FileKind, RawHeader, RawLayout, END_OF_HEADER,
    SHOWN_COMMENT_LINES,
};
pub use hex::{hex_count, hex_distance, hex_side, HexGrid};
pub use layout::MapLayout;
pub use read::{ReadConfig, RotFlip, SomFile, ROTFLIP_RECORD};
pub use write::{
    encode_comments, encode_header, save_with, write_data, write_mapping, write_rotflip, write_som,
    DataWriter, WriteConfig,
};
