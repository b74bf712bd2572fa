//! A PVP file described from ranged reads (see [`tensorfmt_core::ranged`]): the
//! structure walker fetches the header, and for weight files every frame's header, for
//! sparse files the frame table; the ordinary readers then open the image and declare
//! where the tensors lie ([`PvpTensorFile`]'s `source_layout`).
//!
//! Nothing is described that a reference could get wrong: legacy MPI-split or bordered
//! frames, a file that does not end on a frame boundary, and weight frames whose
//! header differs from frame 0 are errors naming the field, not references.
//!
//! ```
//! use tensorfmt_core::ranged::{Placement, SparseImage};
//! let mut buf = std::io::Cursor::new(Vec::new());
//! let mut w = tensorfmt_pvp::write::DenseWriter::new(&mut buf, 2, 2, 1)?;
//! for t in 0..1000 { w.write_frame(t as f64, &[0.0; 4])?; }
//! w.finish()?;
//! let file = buf.into_inner();
//! let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
//! let mut image = SparseImage::new(&mut src, file.len() as u64, 4096, u64::MAX)?;
//! tensorfmt_pvp::ranged::fetch_structure(&mut image, &Default::default())?;
//! assert_eq!(image.fetched(), 4096); // the header's block, for 1000 frames
//! let tensors = tensorfmt_pvp::ranged::describe(image.into_bytes(), &Default::default())?;
//! let Placement::Bytes { layout, .. } = &tensors[0].placement else { panic!() };
//! assert_eq!(layout.runs[0].repeat, [(1000, 24)]); // values: 16 bytes after each time
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use bytes::Bytes;
use tensorfmt_core::ranged::{Placement, SparseImage, VirtualTensor};
use tensorfmt_core::{ReadOptions, TensorFile};

use crate::error::{PvpError, Result};
use crate::header::{field_offset, Header, WeightHeader, HEADER_SIZE, WEIGHT_HEADER_SIZE};
use crate::layout::{check_base, ArborSource, Kind, OpenOptions, WeightLayout};
use crate::read::PvpFile;
use crate::PvpTensorFile;

fn open_options(options: &ReadOptions, allow_truncated: bool) -> OpenOptions {
    OpenOptions {
        limits: options.limits,
        strict: options.strict,
        allow_truncated,
    }
}

/// Fetches into `image` every byte the PVP readers look at to open the file and
/// declare its layouts: the header; each weight frame's 104-byte header (and frame 0
/// whole when the size fits a legacy weight layout, whose patch headers decide it);
/// each sparse frame's time and count. Never the values.
pub fn fetch_structure(image: &mut SparseImage<'_>, options: &ReadOptions) -> Result<()> {
    let len = image.len();
    let head = image.get(0, WEIGHT_HEADER_SIZE as u64)?.to_vec();
    let h = Header::parse(&head)?;
    match check_base(&h)? {
        Kind::Dense | Kind::Legacy => Ok(()),
        Kind::SparseBinary | Kind::SparseValues => {
            let entry = if h.filetype == crate::filetype::SPARSE_VALUES {
                8u64
            } else {
                4
            };
            let mut off = HEADER_SIZE as u64;
            let mut frames = 0u64;
            let mut last = 0u64;
            // The frame table: each frame's count says where the next one starts. Small
            // frames are read ahead a block at a time; after a frame longer than a
            // block, the next count is read alone (not the entries around it).
            while off < len {
                frames += 1;
                if frames > options.limits.max_items {
                    return Err(PvpError::LimitExceeded {
                        what: "frame count",
                        value: frames,
                        limit: options.limits.max_items,
                    });
                }
                let rec = if last > image.block() {
                    image.get_exact(off, 12)?
                } else {
                    image.get(off, 12)?
                };
                if rec.len() < 12 {
                    break; // the reader names the truncated frame
                }
                let count = i32::from_le_bytes([rec[8], rec[9], rec[10], rec[11]]);
                if count < 0 {
                    break; // the reader names the negative count
                }
                let Some(next) = (count as u64)
                    .checked_mul(entry)
                    .and_then(|n| n.checked_add(off + 12))
                else {
                    break;
                };
                last = next - off;
                off = next;
            }
            Ok(())
        }
        Kind::SharedWeights | Kind::NonSharedWeights => {
            let w = WeightHeader::parse_at(&head, 0)?;
            let opts = open_options(options, false);
            let layout = match WeightLayout::derive(&w, len, None, &opts) {
                Ok(l) => l,
                Err(_) => return Ok(()), // the reader says why
            };
            if layout.arbor_source != ArborSource::Nbands || layout.patch_header_bytes != 8 {
                // A legacy candidate: the reader checks frame 0's patch headers and
                // the next frame's first bytes for every candidate it tries.
                let most = legacy_candidate_extent(&w, len);
                image.get(0, most)?;
            }
            let frames = len / layout.frame_bytes;
            if frames > options.limits.max_items {
                return Err(PvpError::LimitExceeded {
                    what: "frame count",
                    value: frames,
                    limit: options.limits.max_items,
                });
            }
            let heads: Vec<(u64, u64)> = (0..frames)
                .map(|k| (k * layout.frame_bytes, WEIGHT_HEADER_SIZE as u64))
                .collect();
            image.get_many(&heads)?;
            Ok(())
        }
    }
}

/// The bytes from the start that cover frame 0 and the next 8 bytes of every weight
/// layout candidate that fits the size (what `WeightLayout::derive` reads).
fn legacy_candidate_extent(w: &WeightHeader, len: u64) -> u64 {
    let e = &w.extra;
    let values = [e.nxp, e.nyp, e.nfp, w.base.datasize]
        .iter()
        .try_fold(1u64, |a, &v| a.checked_mul(u64::try_from(v).ok()?));
    let (Some(values), Ok(patches)) = (values, u64::try_from(e.numpatches)) else {
        return WEIGHT_HEADER_SIZE as u64;
    };
    let mut most = WEIGHT_HEADER_SIZE as u64;
    for arbors in [w.base.nbands, w.base.numrecords, 1] {
        let Ok(arbors) = u64::try_from(arbors) else {
            continue;
        };
        for ph in [8u64, 4] {
            let fs = arbors
                .checked_mul(patches)
                .and_then(|n| n.checked_mul(ph + values))
                .and_then(|n| n.checked_add(WEIGHT_HEADER_SIZE as u64));
            if let Some(fs) = fs.filter(|&fs| fs <= len && fs > 0 && len % fs == 0) {
                most = most.max(fs.saturating_add(8).min(len));
            }
        }
    }
    most
}

/// Opens an image filled by [`fetch_structure`] (or the whole file) and says where
/// each tensor's bytes lie, in [`PvpTensorFile`]'s tensor order. Errors, naming the
/// field, where references could point at wrong bytes: legacy MPI-split or bordered
/// dense frames, a size that is not whole frames, weight frames whose header differs
/// from frame 0, a sparse frame table that does not end at the end of the file.
pub fn describe(image: Bytes, options: &ReadOptions) -> Result<Vec<VirtualTensor>> {
    // Truncation is an error here, whatever the lenient reader would accept.
    let typed = PvpFile::from_bytes_with(image.clone(), &open_options(options, false))?;
    let view = PvpTensorFile::new(image, options)?;
    let frame_axis = true;
    match &typed {
        PvpFile::Dense(d) => {
            let l = d.layout();
            if l.procs != (1, 1) {
                let h = d.header();
                return Err(PvpError::BadField {
                    offset: field_offset(10),
                    field: "nxprocs",
                    value: h.nxprocs as i64,
                    reason: format!(
                        "a legacy MPI-split file ({} x {} process blocks per frame): a frame is not one \
                         [ny][nx][nf] byte range, so no chunk reference describes it (convert it first)",
                        l.procs.0, l.procs.1
                    ),
                });
            }
            if l.border > 0 {
                return Err(PvpError::BadField {
                    offset: field_offset(19),
                    field: "nbatch",
                    value: l.border as i64,
                    reason: "filetype 1 frames with a border: a frame is not one [ny][nx][nf] \
                             byte range (convert it first)"
                        .into(),
                });
            }
        }
        PvpFile::Weights(w) => {
            // Every frame must have frame 0's geometry, or its patches lie elsewhere.
            for k in 0..w.len() {
                w.frame_header(k)?;
            }
        }
        PvpFile::Sparse(s) => {
            s.table()?;
        }
    }
    let mut out = Vec::new();
    for info in view.tensors() {
        let placement = match view.source_layout(&info.name) {
            Some(layout) => Placement::Bytes {
                layout,
                big_endian: false,
            },
            None => Placement::NotVirtual(match (&typed, info.name.as_str()) {
                (PvpFile::Sparse(_), _) => "sparse activity: each frame lists its active neurons \
                                            (not a dense byte range); open it with \
                                            xarray's tensorfmt engine"
                    .into(),
                (PvpFile::Dense(_), "time") => {
                    "filetype 1 frames carry no time (the header's time is repeated)".into()
                }
                (PvpFile::Weights(_), "weights") => {
                    "byte-compressed weights are decoded through each frame's wMin/wMax".into()
                }
                _ => "not stored as a byte range".into(),
            }),
        };
        out.push(VirtualTensor {
            info,
            placement,
            frame_axis,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};

    fn serve(file: &[u8]) -> impl FnMut(u64, u64) -> tensorfmt_core::Result<Bytes> + '_ {
        move |o, l| Ok(Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]))
    }

    fn remote(file: &[u8], block: u64) -> Result<(Vec<VirtualTensor>, u64)> {
        let mut src = serve(file);
        let mut img = SparseImage::new(&mut src, file.len() as u64, block, u64::MAX)?;
        fetch_structure(&mut img, &ReadOptions::default())?;
        let fetched = img.fetched();
        Ok((
            describe(img.into_bytes(), &ReadOptions::default())?,
            fetched,
        ))
    }

    #[test]
    fn weights_fetch_one_header_per_frame() {
        let g = WeightGeometry::kernel(3, 3, 1, 2, 4, 1, 1);
        let mut buf = std::io::Cursor::new(Vec::new());
        let mut w = WeightWriter::new(&mut buf, g, false).unwrap();
        let n = 3 * 3 * 2 * 4;
        for t in 0..5 {
            w.write_frame(t as f64, &vec![0.5f32; n]).unwrap();
        }
        w.finish().unwrap();
        let file = buf.into_inner();
        let (tensors, fetched) = remote(&file, 64).unwrap();
        assert!(fetched < 64 * 2 + 5 * 104, "{fetched}");
        assert!(matches!(tensors[0].placement, Placement::Bytes { .. }));
    }

    #[test]
    fn changed_weight_frames_and_partial_frames_are_errors() {
        let g = WeightGeometry::kernel(2, 2, 1, 1, 1, 1, 1);
        let mut buf = std::io::Cursor::new(Vec::new());
        let mut w = WeightWriter::new(&mut buf, g, false).unwrap();
        for t in 0..3 {
            w.write_frame(t as f64, &[1.0; 4]).unwrap();
        }
        w.finish().unwrap();
        let file = buf.into_inner();
        let fs = file.len() / 3;
        let mut bad = file.clone();
        // Frame 2's nxp (weight header field 20, byte 80) differs from frame 0's.
        bad[2 * fs + 80] = 2;
        let e = remote(&bad, 4096).unwrap_err().to_string();
        assert!(e.contains("weight frame 2") && e.contains("differs"), "{e}");
        let e = remote(&file[..file.len() - 3], 4096)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a multiple") || e.contains("truncated"),
            "{e}"
        );

        let mut buf = std::io::Cursor::new(Vec::new());
        let mut w = DenseWriter::new(&mut buf, 2, 1, 1).unwrap();
        w.write_frame(0.0, &[1.0, 2.0]).unwrap();
        w.write_frame(1.0, &[1.0, 2.0]).unwrap();
        w.finish().unwrap();
        let file = buf.into_inner();
        let e = remote(&file[..file.len() - 1], 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("frame 1"), "{e}");
    }

    #[test]
    fn sparse_frames_are_listed_not_referenced() {
        let mut buf = std::io::Cursor::new(Vec::new());
        let mut w = SparseWriter::values(&mut buf, 4, 1, 1).unwrap();
        for t in 0..50 {
            w.write_frame(t as f64, &[1, 3], &[0.5, 2.0]).unwrap();
        }
        w.finish().unwrap();
        let file = buf.into_inner();
        let (tensors, fetched) = remote(&file, 256).unwrap();
        assert!(fetched <= file.len() as u64);
        assert!(matches!(&tensors[0].placement, Placement::NotVirtual(r) if r.contains("sparse")));
        let e = remote(&file[..file.len() - 2], 256)
            .unwrap_err()
            .to_string();
        assert!(e.contains("frame 49"), "{e}");
    }

    #[test]
    fn large_sparse_frames_cost_their_counts_not_their_entries() {
        let mut buf = std::io::Cursor::new(Vec::new());
        let mut w = SparseWriter::values(&mut buf, 100_000, 1, 1).unwrap();
        let idx: Vec<u32> = (0..50_000).map(|i| i * 2).collect();
        for t in 0..6 {
            w.write_frame(t as f64, &idx, &vec![1.0; idx.len()])
                .unwrap();
        }
        w.finish().unwrap();
        let file = buf.into_inner();
        let (tensors, fetched) = remote(&file, 4096).unwrap();
        assert_eq!(tensors[0].info.shape.dims(), &[6, 1, 100_000, 1]);
        // The first block, then one read per frame count (the first one read ahead).
        assert!(fetched <= 2 * 4096 + 6 * 12, "{fetched} of {}", file.len());
    }
}
