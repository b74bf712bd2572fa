//! A PVP file described from ranged reads (see [`tensorfmt_core::ranged`]): the
//! structure walker fetches the header, and for weight files every frame's header; the
//! ordinary readers then open the image and declare where the tensors lie
//! ([`PvpTensorFile`]'s `source_layout`). A sparse file is described from its header
//! alone ([`describe_sparse_header`]): none of its tensors is a byte range, and its
//! frames have no index (each frame's count says where the next begins), so walking
//! them would fetch nearly the whole file for nothing a reference could use.
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
use tensorfmt_core::ranged::{Placement, SparseImage, VirtualFile, VirtualTensor};
use tensorfmt_core::{DType, ReadOptions, TensorFile, TensorInfo};

use crate::error::{PvpError, Result};
use crate::header::{field_offset, Header, WeightHeader, HEADER_SIZE, WEIGHT_HEADER_SIZE};
use crate::layout::{check_base, ArborSource, Kind, OpenOptions, SparseLayout, WeightLayout};
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
/// whole when the size fits a legacy weight layout, whose patch headers decide it).
/// Never the values; for a sparse file nothing past the header (see
/// [`describe_sparse_header`]).
pub fn fetch_structure(image: &mut SparseImage<'_>, options: &ReadOptions) -> Result<()> {
    let len = image.len();
    let head = image.get(0, WEIGHT_HEADER_SIZE as u64)?.to_vec();
    let h = Header::parse(&head)?;
    match check_base(&h)? {
        Kind::Dense | Kind::Legacy => Ok(()),
        // Described from the header alone (see `describe_sparse_header`).
        Kind::SparseBinary | Kind::SparseValues => Ok(()),
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
            if let Some(fs) = fs.filter(|&fs| fs <= len && fs > 0 && len.is_multiple_of(fs)) {
                most = most.max(fs.saturating_add(8).min(len));
            }
        }
    }
    most
}

/// The description of a sparse activity file (filetypes 2 and 6) from its 80-byte
/// header alone, or `None` for any other kind: `values` and `time` are listed as not
/// virtual, their frame count taken from `nbands` (which OpenPV's writers keep
/// current) rather than from a scan; `tensorfmt.load` and the xarray engine scan and
/// check the frames when they read them.
///
/// ```
/// use tensorfmt_core::ranged::{Placement, SparseImage};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = tensorfmt_pvp::write::SparseWriter::values(&mut buf, 64, 64, 8)?;
/// for t in 0..2000 { w.write_frame(t as f64, &[1, 7, 900], &[0.5, 1.0, 2.0])?; }
/// w.finish()?;
/// let file = buf.into_inner();
/// let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
/// let mut image = SparseImage::new(&mut src, file.len() as u64, 4096, u64::MAX)?;
/// let v = tensorfmt_pvp::ranged::describe_sparse_header(&mut image)?.unwrap();
/// assert_eq!((v.kind.as_str(), v.fetched, v.requests), ("sparse", 4096, 1)); // of 80 KB
/// assert_eq!(v.tensors[0].info.shape.dims(), &[2000, 64, 64, 8]);
/// assert!(matches!(&v.tensors[0].placement, Placement::NotVirtual(_)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn describe_sparse_header(image: &mut SparseImage<'_>) -> Result<Option<VirtualFile>> {
    let h = Header::parse(image.get(0, HEADER_SIZE as u64)?)?;
    let Some((kind, tensors)) = sparse_tensors(&h)? else {
        return Ok(None);
    };
    Ok(Some(VirtualFile {
        format: "pvp".into(),
        kind: "sparse".into(),
        description: kind.describe().into(),
        header: crate::tensor_file::header_fields(&h),
        warnings: Vec::new(),
        tensors,
        file_len: image.len(),
        fetched: image.fetched(),
        requests: image.requests(),
    }))
}

/// A sparse file's tensors as [`describe_sparse_header`] lists them.
fn sparse_tensors(h: &Header) -> Result<Option<(Kind, Vec<VirtualTensor>)>> {
    let kind = check_base(h)?;
    if !matches!(kind, Kind::SparseBinary | Kind::SparseValues) {
        return Ok(None);
    }
    let l = SparseLayout::derive(h)?;
    let frames = usize::try_from(h.nbands).unwrap_or(0);
    let reason = |what: &str| {
        Placement::NotVirtual(format!(
            "sparse activity: each frame lists its active neurons, so {what} is not a byte \
             range of the file; open it with xarray's tensorfmt engine or tensorfmt.load \
             (the frame count {frames} is the header's nbands, not scanned)"
        ))
    };
    let tensors = vec![
        VirtualTensor {
            info: TensorInfo::new("values", DType::F32, [frames, l.ny, l.nx, l.nf]),
            placement: reason("a frame"),
            frame_axis: true,
        },
        VirtualTensor {
            info: TensorInfo::new("time", DType::F64, [frames]),
            placement: reason("the time before each frame's entries"),
            frame_axis: true,
        },
    ];
    Ok(Some((kind, tensors)))
}

/// Opens an image filled by [`fetch_structure`] (or the whole file) and says where
/// each tensor's bytes lie, in [`PvpTensorFile`]'s tensor order. Errors, naming the
/// field, where references could point at wrong bytes: legacy MPI-split or bordered
/// dense frames, a size that is not whole frames, weight frames whose header differs
/// from frame 0. A sparse file's tensors are those of [`describe_sparse_header`].
pub fn describe(image: Bytes, options: &ReadOptions) -> Result<Vec<VirtualTensor>> {
    if let Some((_, tensors)) = sparse_tensors(&Header::parse(&image)?)? {
        return Ok(tensors);
    }
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
        PvpFile::Sparse(_) => {} // listed from the header above
    }
    let mut out = Vec::new();
    for info in view.tensors() {
        let placement = match view.source_layout(&info.name) {
            Some(layout) => Placement::Bytes {
                layout,
                big_endian: false,
            },
            None => Placement::NotVirtual(match (&typed, info.name.as_str()) {
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
    fn sparse_frames_are_listed_from_the_header_alone() {
        let mut buf = std::io::Cursor::new(Vec::new());
        let mut w = SparseWriter::values(&mut buf, 4, 1, 1).unwrap();
        for t in 0..5000 {
            w.write_frame(t as f64, &[1, 3], &[0.5, 2.0]).unwrap();
        }
        w.finish().unwrap();
        let file = buf.into_inner();
        // The frame table is never walked: one block, whatever the frame count.
        let (tensors, fetched) = remote(&file, 256).unwrap();
        assert_eq!(fetched, 256);
        for t in &tensors {
            assert!(matches!(&t.placement, Placement::NotVirtual(r) if r.contains("sparse")));
        }
        assert_eq!(tensors[0].info.shape.dims(), &[5000, 1, 4, 1]);
        // Nothing is referenced, so a truncated file has nothing to get wrong.
        let (cut, _) = remote(&file[..file.len() - 2], 256).unwrap();
        assert_eq!(cut, tensors);
    }
}
