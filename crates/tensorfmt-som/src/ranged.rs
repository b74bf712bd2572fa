//! A PINK file described from ranged reads (see [`tensorfmt_core::ranged`]): the
//! structure walker fetches the `#` comment block and the binary header after it
//! (a pre-version-2 file, whose kind the reader infers from its whole size and bytes,
//! is fetched whole up to [`LEGACY_WHOLE`]); the reader then opens the image and
//! declares where the payload lies.
//!
//! ```
//! use tensorfmt_core::ranged::{Placement, SparseImage};
//! let mut file = b"# made by a test\n# END OF HEADER\n".to_vec();
//! for v in [2i32, 0, 0, 1000, 0, 2, 16, 16] { file.extend_from_slice(&v.to_le_bytes()); }
//! file.extend(vec![0u8; 1000 * 16 * 16 * 4]);
//! let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
//! let mut image = SparseImage::new(&mut src, file.len() as u64, 4096, u64::MAX)?;
//! tensorfmt_som::ranged::fetch_structure(&mut image, &Default::default())?;
//! assert!(image.fetched() <= 8192); // of 1 MB
//! let t = tensorfmt_som::ranged::describe(image.into_bytes(), &Default::default())?;
//! assert_eq!(t[0].info.shape.dims(), &[1000, 16, 16]);
//! assert!(matches!(&t[0].placement, Placement::Bytes { layout, .. } if layout.runs[0].offset == 65));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use bytes::Bytes;
use tensorfmt_core::ranged::{Placement, SparseImage, VirtualTensor};
use tensorfmt_core::ReadOptions;

use crate::header::{parse_v2, ParseRules, END_OF_HEADER};
use crate::{Result, SomError};

/// Largest pre-version-2 file fetched whole to recognise it (64 MiB).
pub const LEGACY_WHOLE: u64 = 64 << 20;

/// Fetches into `image` what the PINK reader looks at to open the file: the comment
/// block, line by line, and the binary header after it.
pub fn fetch_structure(image: &mut SparseImage<'_>, options: &ReadOptions) -> Result<()> {
    let len = image.len();
    let mut pos = 0u64;
    // The comment block, with the reader's rules (lines starting with `#`, up to an
    // exact END OF HEADER line).
    while image.get(pos, 1)?.first() == Some(&b'#') {
        let mut scan = pos;
        let newline = loop {
            let chunk = image.get(scan, 256)?;
            if chunk.is_empty() {
                return Ok(()); // unterminated: the reader says so
            }
            if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                break scan + i as u64;
            }
            scan += chunk.len() as u64;
        };
        let line = image.get(pos, newline - pos)?;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let end = line == END_OF_HEADER.as_bytes();
        pos = newline + 1;
        if end {
            break;
        }
    }
    let prefix = image.get(0, pos + 4096)?;
    let rules = ParseRules {
        max_rank: 8,
        max_entries: options.limits.max_items,
        strict: options.strict,
    };
    match parse_v2(prefix, &rules) {
        Err(SomError::NotPink { .. }) if len <= LEGACY_WHOLE => {
            // Perhaps a pre-version-2 file: its kind comes from its size and bytes.
            image.get(0, len)?;
            Ok(())
        }
        Err(SomError::NotPink { offset, value, .. }) => Err(SomError::NotPink {
            offset,
            value,
            detail: format!(
                "not a version-2 header, and a pre-version-2 file is recognised from its whole \
                 {len} bytes (more than {LEGACY_WHOLE} are not fetched): convert it first"
            ),
        }),
        _ => Ok(()),
    }
}

/// Opens an image filled by [`fetch_structure`] (or the whole file) and says where
/// each tensor's bytes lie: data entries, SOM neurons and mapping rows are one
/// contiguous payload; rotation/flip records interleave a flip byte with an f32 angle
/// (5 bytes per neuron), and a hexagonal map's axial coordinates are computed, so
/// those are listed as not virtual.
pub fn describe(image: Bytes, options: &ReadOptions) -> Result<Vec<VirtualTensor>> {
    let file = crate::open_tensor_file(image, options)?;
    Ok(file
        .tensors()
        .into_iter()
        .map(|info| {
            let placement = match (info.name.as_str(), file.source_layout(&info.name)) {
                ("flip" | "angle", _) => Placement::NotVirtual(
                    "rotation/flip records interleave a flip byte and an f32 angle (5 bytes per \
                     neuron): one element per byte range; read them with tensorfmt.load or \
                     the tensorfmt engine"
                        .into(),
                ),
                ("hex_axial", _) => Placement::NotVirtual(
                    "computed from the hexagonal map's geometry (tensorfmt.som.open(...).axial())"
                        .into(),
                ),
                (_, Some(layout)) => Placement::Bytes {
                    layout,
                    big_endian: false,
                },
                (_, None) => Placement::NotVirtual(
                    "decoded by the reader (a pre-version-2 layout), not stored as one run".into(),
                ),
            };
            VirtualTensor {
                info,
                placement,
                frame_axis: true,
            }
        })
        .collect())
}
