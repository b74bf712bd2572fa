//! Weight reader (filetypes 3 and 5): self-contained frames, each with its own
//! 104-byte header, full-size patches and per-patch active regions.

use bytes::Bytes;
use tensorfmt_core::{Order, Tensor};

use super::{check_alloc, resolve_index, u32_at, wrap_index};
use crate::error::{PvpError, Result};
use crate::header::{WeightHeader, WEIGHT_HEADER_SIZE};
use crate::layout::{OpenOptions, WeightLayout};

/// A patch header: the active region of a patch (spec §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PatchHeader {
    /// Active width.
    pub nx: u16,
    /// Active height.
    pub ny: u16,
    /// Elements from the patch start to the first active value (`None` in legacy
    /// 4-byte patch headers, meaning 0).
    pub offset: Option<u32>,
}

impl PatchHeader {
    /// Whether the active region lies inside an `nxp x nyp x nfp` patch.
    ///
    /// ```
    /// use tensorfmt_pvp::PatchHeader;
    /// let p = PatchHeader { nx: 1, ny: 1, offset: Some(24) };
    /// assert!(p.fits(5, 5, 1));
    /// assert!(!PatchHeader { offset: Some(25), ..p }.fits(5, 5, 1));
    /// ```
    pub fn fits(&self, nxp: usize, nyp: usize, nfp: usize) -> bool {
        let (nx, ny) = (self.nx as u64, self.ny as u64);
        if nx > nxp as u64 || ny > nyp as u64 {
            return false;
        }
        if nx == 0 || ny == 0 {
            return true;
        }
        let off = self.offset.unwrap_or(0) as u64;
        off + ((ny - 1) * nxp as u64 + nx) * nfp as u64 <= (nxp * nyp * nfp) as u64
    }
}

/// One weight frame.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightFrame {
    /// Frame number.
    pub index: usize,
    /// This frame's own header (time, wMin, wMax).
    pub header: WeightHeader,
    /// Weights `[arbors, patches, nyp, nxp, nfp]`, f32 (byte weights decoded as
    /// `wMin + (wMax - wMin) * (b / 255)` in f32). Full patches, outside the active
    /// region included.
    pub weights: Tensor,
    /// Patch headers, arbor-major (`arbors * patches` entries).
    pub patches: Vec<PatchHeader>,
}

impl WeightFrame {
    /// Frame time.
    pub fn time(&self) -> f64 {
        self.header.base.time
    }

    /// Minimum weight as stored in the header.
    pub fn wmin(&self) -> f32 {
        self.header.extra.wmin
    }

    /// Maximum weight as stored in the header.
    pub fn wmax(&self) -> f32 {
        self.header.extra.wmax
    }
}

/// O(1) random access to the frames of a weight file.
///
/// ```
/// use tensorfmt_pvp::{OpenOptions, WeightReader, write::{WeightGeometry, WeightWriter}};
/// let g = WeightGeometry::kernel(1, 1, 2, 1, 1, 1, 1);
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = WeightWriter::new(&mut buf, g, false)?;
/// w.write_frame(3.0, &[0.5, -1.0])?;
/// w.finish()?;
/// let r = WeightReader::new(buf.into_inner().into(), &OpenOptions::default())?;
/// let f = r.frame(0)?;
/// assert_eq!((f.time(), f.wmin(), f.wmax()), (3.0, -1.0, 0.5));
/// assert_eq!(f.weights.dims(), &[1, 2, 1, 1, 1]);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug, Clone)]
pub struct WeightReader {
    data: Bytes,
    first: WeightHeader,
    layout: WeightLayout,
    opts: OpenOptions,
    warnings: Vec<String>,
}

impl WeightReader {
    /// Opens a filetype 3 or 5 file held in `data`.
    pub fn new(data: Bytes, opts: &OpenOptions) -> Result<WeightReader> {
        let first = WeightHeader::parse_at(&data, 0)?;
        let kind = crate::layout::check_base(&first.base)?;
        if !matches!(
            kind,
            crate::Kind::SharedWeights | crate::Kind::NonSharedWeights
        ) {
            return Err(PvpError::Invalid(format!(
                "not a weight file: {}",
                kind.describe()
            )));
        }
        let layout = WeightLayout::derive(&first, data.len() as u64, Some(&data), opts)?;
        let mut warnings = Vec::new();
        if layout.patch_header_bytes == 4 {
            warnings.push("legacy 4-byte patch headers (no offset field)".into());
        }
        if layout.truncated_bytes > 0 {
            warnings.push(format!(
                "trailing partial frame {} at byte {} ({} of {} bytes) ignored",
                layout.frames,
                layout.frames as u64 * layout.frame_bytes,
                layout.truncated_bytes,
                layout.frame_bytes
            ));
        }
        match layout.arbor_source {
            crate::ArborSource::Nbands => {}
            s => warnings.push(format!(
                "arbor count {} taken from {s:?}, not nbands = {}",
                layout.arbors, first.base.nbands
            )),
        }
        Ok(WeightReader {
            data,
            first,
            layout,
            opts: *opts,
            warnings,
        })
    }

    /// The header of frame 0.
    pub fn first_header(&self) -> &WeightHeader {
        &self.first
    }

    /// The derived layout.
    pub fn layout(&self) -> &WeightLayout {
        &self.layout
    }

    /// Warnings found while opening.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.layout.frames
    }

    /// True when the file holds no frame (never, for a file that opened).
    pub fn is_empty(&self) -> bool {
        self.layout.frames == 0
    }

    /// Times of frames `range` (each frame's own header, checked as by
    /// [`WeightReader::frame_header`]), read without keeping the frames' pages resident.
    pub fn times(&self, range: std::ops::Range<usize>) -> Result<Vec<f64>> {
        let mut released = tensorfmt_core::io::PageReleaser::new();
        range
            .map(|k| {
                let time = self.frame_header(k)?.base.time;
                let off = k as u64 * self.layout.frame_bytes;
                super::release_field(&self.data, off as usize, 104, &mut released);
                Ok(time)
            })
            .collect()
    }

    /// The header of frame `k`, checked against frame 0 (spec §11 rule 1).
    pub fn frame_header(&self, k: usize) -> Result<WeightHeader> {
        let k = resolve_index(k as i64, self.len())?;
        let off = k as u64 * self.layout.frame_bytes;
        let h = WeightHeader::parse_at(&self.data, off)?;
        let f = &self.first;
        let bad = |reason: String| PvpError::BadWeightFrame {
            offset: off,
            frame: k,
            reason,
        };
        if h.base.headersize != 104 || h.base.numparams != 26 {
            return Err(bad(format!(
                "headersize {} / numparams {} (need 104 / 26)",
                h.base.headersize, h.base.numparams
            )));
        }
        let geom = |w: &WeightHeader| {
            (
                w.base.filetype,
                w.base.datatype,
                w.base.datasize,
                w.extra.nxp,
                w.extra.nyp,
                w.extra.nfp,
                w.extra.numpatches,
            )
        };
        if geom(&h) != geom(f) {
            return Err(bad(format!(
                "geometry (filetype, datatype, datasize, nxp, nyp, nfp, numpatches) {:?} differs from frame 0 {:?}",
                geom(&h),
                geom(f)
            )));
        }
        Ok(h)
    }

    /// Frame `k` (0-based; out of range is an error).
    pub fn frame(&self, k: usize) -> Result<WeightFrame> {
        let header = self.frame_header(k)?;
        let l = &self.layout;
        let nvals = l.frame_values();
        check_alloc(&self.opts, nvals as u64 * 4)?;
        let npatches = l.arbors * l.numpatches;
        check_alloc(
            &self.opts,
            npatches as u64 * std::mem::size_of::<PatchHeader>() as u64,
        )?;
        let mut out: Vec<f32> = Vec::with_capacity(nvals);
        let mut patches = Vec::with_capacity(npatches);
        let start = k as u64 * l.frame_bytes + WEIGHT_HEADER_SIZE as u64;
        let body = &self.data[start as usize..(k as u64 * l.frame_bytes + l.frame_bytes) as usize];
        let (ph, pv) = (l.patch_header_bytes, l.patch_values());
        let (wmin, wmax) = (header.extra.wmin, header.extra.wmax);
        let range = wmax - wmin;
        for (i, patch) in body.chunks_exact(l.patch_bytes()).enumerate() {
            let p = PatchHeader {
                nx: u16::from_le_bytes([patch[0], patch[1]]),
                ny: u16::from_le_bytes([patch[2], patch[3]]),
                offset: (ph == 8).then(|| u32_at(patch, 4)),
            };
            if self.opts.strict && !p.fits(l.nxp, l.nyp, l.nfp) {
                return Err(PvpError::BadWeightFrame {
                    offset: start + (i * l.patch_bytes()) as u64,
                    frame: k,
                    reason: format!(
                        "patch header {p:?} exceeds the {}x{}x{} patch",
                        l.nxp, l.nyp, l.nfp
                    ),
                });
            }
            patches.push(p);
            let vals = &patch[ph..];
            if l.bytes {
                out.extend(vals.iter().map(|&b| decode_byte(b, wmin, range)));
            } else {
                out.extend(
                    vals.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
            }
            debug_assert_eq!(out.len(), (i + 1) * pv);
        }
        let weights = Tensor::from_vec(out, l.frame_dims(), Order::RowMajor)?;
        Ok(WeightFrame {
            index: k,
            header,
            weights,
            patches,
        })
    }

    /// Frame `i` counted from the end when negative (`-1` = last), as upstream's
    /// weight reader allows.
    pub fn frame_at(&self, i: i64) -> Result<WeightFrame> {
        self.frame(resolve_index(i, self.len())?)
    }

    /// Frame `k mod len` (upstream's wrapping behaviour, explicitly requested).
    pub fn frame_wrapped(&self, k: usize) -> Result<WeightFrame> {
        self.frame(wrap_index(k, self.len())?)
    }

    /// Streams the frames in order.
    pub fn frames(&self) -> impl Iterator<Item = Result<WeightFrame>> + '_ {
        (0..self.len()).map(|k| self.frame(k))
    }
}

/// Decodes one compressed weight: `wMin + (wMax - wMin) * (b / 255)`, in f32 as
/// upstream C++ does (bit-exact parity).
///
/// ```
/// assert_eq!(tensorfmt_pvp::read::decode_byte(255, -1.0, 2.0), 1.0);
/// assert_eq!(tensorfmt_pvp::read::decode_byte(0, -1.0, 2.0), -1.0);
/// ```
#[inline]
pub fn decode_byte(b: u8, wmin: f32, range: f32) -> f32 {
    wmin + range * (b as f32 / 255.0f32)
}
