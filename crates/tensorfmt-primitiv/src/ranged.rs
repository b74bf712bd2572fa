//! A primitiv file described from ranged reads (see [`tensorfmt_core::ranged`]): a
//! file is a series of MessagePack values, so the structure walker follows every
//! value's marker and length, fetching markers, numbers, strings (keys) and small
//! binaries, and skips the large `bin` payloads that hold the tensors' values. The
//! reader then opens the image; each tensor's values are its zero-copy slice.
//!
//! ```
//! use tensorfmt_core::{ranged::SparseImage, Order, Tensor, TensorFile};
//! let dir = tempfile::tempdir()?;
//! let p = dir.path().join("p.data");
//! let v = Tensor::from_vec(vec![1f32; 4096], [64, 64], Order::ColumnMajor)?;
//! tensorfmt_primitiv::save_tensors(&p, &[("value".into(), v)], &Default::default())?;
//! let file = std::fs::read(&p)?;
//! let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
//! let mut image = SparseImage::new(&mut src, file.len() as u64, 512, u64::MAX)?;
//! tensorfmt_primitiv::ranged::fetch_structure(&mut image)?;
//! assert!(image.fetched() <= 1536); // of 16 KiB
//! let f = tensorfmt_primitiv::open_tensor_file(image.into_bytes(), &Default::default())?;
//! assert_eq!(f.source_layout("value").unwrap().order, Order::ColumnMajor);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use tensorfmt_core::ranged::SparseImage;

use crate::error::Result;

/// Binaries shorter than this are fetched with their neighbours anyway.
const SKIP_MIN: u64 = 1024;

/// Nesting limit (the reader's own is lower).
const MAX_DEPTH: usize = 64;

/// Fetches into `image` every MessagePack marker, length, number and string of the
/// file, and binaries under 1 KiB; malformed data ends the walk (the reader that opens
/// the image names it).
pub fn fetch_structure(image: &mut SparseImage<'_>) -> Result<()> {
    let len = image.len();
    let mut pos = 0u64;
    // Values still to walk in each open array / map (top level: unbounded).
    let mut pending: Vec<u64> = vec![u64::MAX];
    while pos < len {
        while pending.last() == Some(&0) {
            pending.pop();
        }
        let Some(left) = pending.last_mut() else {
            break;
        };
        *left -= 1;
        let head = image.get(pos, 9)?;
        let Some(&m) = head.first() else { break };
        let be = |n: usize| -> Option<u64> {
            let b = head.get(1..1 + n)?;
            Some(b.iter().fold(0u64, |a, &x| a << 8 | u64::from(x)))
        };
        // (bytes of the marker and its length field, payload bytes, payload kind)
        let (header, body, children, skippable) = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (1, 0, 0, false),
            0x80..=0x8f => (1, 0, 2 * u64::from(m & 0x0f), false),
            0x90..=0x9f => (1, 0, u64::from(m & 0x0f), false),
            0xa0..=0xbf => (1, u64::from(m & 0x1f), 0, false),
            0xcc | 0xd0 => (2, 0, 0, false),
            0xcd | 0xd1 => (3, 0, 0, false),
            0xca | 0xce | 0xd2 => (5, 0, 0, false),
            0xcb | 0xcf | 0xd3 => (9, 0, 0, false),
            0xd4 => (2, 1, 0, true),
            0xd5 => (2, 2, 0, true),
            0xd6 => (2, 4, 0, true),
            0xd7 => (2, 8, 0, true),
            0xd8 => (2, 16, 0, true),
            0xc4 | 0xd9 => (2, be(1).unwrap_or(u64::MAX), 0, m == 0xc4),
            0xc5 | 0xda => (3, be(2).unwrap_or(u64::MAX), 0, m == 0xc5),
            0xc6 | 0xdb => (5, be(4).unwrap_or(u64::MAX), 0, m == 0xc6),
            0xc7 => (3, be(1).unwrap_or(u64::MAX), 0, true),
            0xc8 => (4, be(2).unwrap_or(u64::MAX), 0, true),
            0xc9 => (6, be(4).unwrap_or(u64::MAX), 0, true),
            0xdc => (3, 0, be(2).unwrap_or(0), false),
            0xdd => (5, 0, be(4).unwrap_or(0), false),
            0xde => (3, 0, 2 * be(2).unwrap_or(0), false),
            0xdf => (5, 0, 2 * be(4).unwrap_or(0), false),
            _ => break, // 0xc1: never used
        };
        let Some(next) = (pos + header).checked_add(body).filter(|&n| n <= len) else {
            break; // the reader names what is cut
        };
        if body > 0 && !(skippable && body >= SKIP_MIN) {
            image.get(pos + header, body)?;
        }
        pos = next;
        if children > 0 {
            if pending.len() > MAX_DEPTH {
                break;
            }
            pending.push(children);
        }
    }
    Ok(())
}

/// Opens an image filled by [`fetch_structure`] (or the whole file) and says where each
/// tensor's values lie (primitiv's own column-major layout, batch last).
pub fn describe(
    image: bytes::Bytes,
    options: &tensorfmt_core::ReadOptions,
) -> Result<Vec<tensorfmt_core::ranged::VirtualTensor>> {
    use tensorfmt_core::ranged::{Placement, VirtualTensor};
    let file = crate::open_tensor_file(image, options)?;
    let layouts = file.source_layouts();
    Ok(file
        .tensors()
        .into_iter()
        .zip(layouts)
        .map(|(info, layout)| VirtualTensor {
            info,
            placement: match layout {
                Some(layout) => Placement::Bytes {
                    layout,
                    big_endian: false,
                },
                None => Placement::NotVirtual("not stored as one run (empty)".into()),
            },
            frame_axis: false,
        })
        .collect())
}
