//! The real layout of a file, derived from the header fields that can be trusted
//! (nx, ny, nf, datasize, nxp, nyp, nfp, numpatches, nbands/numrecords for arbors)
//! and the file size, never from `recordsize` or `nbatch` (spec §9). Only where two
//! readings of a legacy MPI dense file both fit the size do numrecords, nxExtended,
//! nyExtended and nbands decide between them ([`DenseLayout::derive`]).

use tensorfmt_core::Limits;

use crate::error::{add, mul, to_usize, PvpError, Result};
use crate::header::{datatype as dt, field_offset, filetype as ft, Header, WeightHeader};
use crate::header::{HEADER_SIZE, WEIGHT_HEADER_SIZE};

/// How strictly a file is checked when it is opened.
///
/// ```
/// use tensorfmt_pvp::OpenOptions;
/// let o = OpenOptions { strict: true, ..OpenOptions::default() };
/// assert!(!o.allow_truncated);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Caps on allocation and on the number of frames.
    pub limits: Limits,
    /// Strict mode: an `nbands` that disagrees with the real frame count, a duplicate
    /// sparse index and an inconsistent patch header are errors (else: warnings /
    /// accepted).
    pub strict: bool,
    /// Accept a trailing partial frame (a crashed writer): the complete frames are
    /// returned and a warning is recorded, as long as at least one frame is whole.
    /// Off by default: truncation is an error.
    pub allow_truncated: bool,
}

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Dense activity (filetype 4), including legacy MPI-split files.
    Dense,
    /// Obsolete filetype 1 (read only, no per-frame time).
    Legacy,
    /// Sparse binary activity (filetype 2).
    SparseBinary,
    /// Sparse activity with values (filetype 6).
    SparseValues,
    /// Shared weights / kernels (filetype 5).
    SharedWeights,
    /// Non-shared weights (filetype 3).
    NonSharedWeights,
}

impl Kind {
    /// A short human description (`dense activity`, ...).
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Dense => "dense activity",
            Kind::Legacy => "legacy activity (filetype 1)",
            Kind::SparseBinary => "sparse binary activity",
            Kind::SparseValues => "sparse values activity",
            Kind::SharedWeights => "shared weights",
            Kind::NonSharedWeights => "non-shared weights",
        }
    }
}

fn bad(index: usize, field: &'static str, value: i32, reason: impl Into<String>) -> PvpError {
    PvpError::BadField {
        offset: field_offset(index),
        field,
        value: value as i64,
        reason: reason.into(),
    }
}

fn positive(index: usize, field: &'static str, value: i32) -> Result<u64> {
    if value > 0 {
        Ok(value as u64)
    } else {
        Err(bad(index, field, value, "must be > 0"))
    }
}

/// Checks the codes and sizes of a base header (spec §11 rules 1–3) and returns its kind.
pub fn check_base(h: &Header) -> Result<Kind> {
    let kind = match h.filetype {
        ft::LEGACY => Kind::Legacy,
        ft::SPARSE_BINARY => Kind::SparseBinary,
        ft::NONSHARED_WEIGHTS => Kind::NonSharedWeights,
        ft::DENSE => Kind::Dense,
        ft::SHARED_WEIGHTS => Kind::SharedWeights,
        ft::SPARSE_VALUES => Kind::SparseValues,
        other => {
            return Err(bad(
                2,
                "filetype",
                other,
                format!("unknown filetype {other}"),
            ))
        }
    };
    let weights = matches!(kind, Kind::SharedWeights | Kind::NonSharedWeights);
    let (hs, np) = if weights { (104, 26) } else { (80, 20) };
    if h.headersize != hs {
        return Err(bad(
            0,
            "headersize",
            h.headersize,
            format!("filetype {} needs {hs}", h.filetype),
        ));
    }
    if h.numparams != np {
        return Err(bad(
            1,
            "numparams",
            h.numparams,
            format!("filetype {} needs {np}", h.filetype),
        ));
    }
    // Spec §3.3: the legal (filetype, datatype, datasize) combinations.
    let ok = matches!(
        (h.filetype, h.datatype, h.datasize),
        (ft::LEGACY, dt::FLOAT, 4)
            | (ft::SPARSE_BINARY, dt::INT, 4)
            | (ft::NONSHARED_WEIGHTS | ft::SHARED_WEIGHTS, dt::FLOAT, 4)
            | (ft::NONSHARED_WEIGHTS | ft::SHARED_WEIGHTS, dt::BYTE, 1)
            | (ft::DENSE, dt::FLOAT, 4)
            | (ft::DENSE, dt::TAUS_UINT4, 16)
            | (ft::SPARSE_VALUES, dt::FLOAT | dt::SPARSEVALUES, 8)
    );
    if !ok {
        return Err(PvpError::BadCombination {
            offset: 0,
            filetype: h.filetype,
            datatype: h.datatype,
            datasize: h.datasize,
        });
    }
    positive(3, "nx", h.nx)?;
    positive(4, "ny", h.ny)?;
    positive(5, "nf", h.nf)?;
    Ok(kind)
}

/// Records a disagreement between `nbands` and the real frame count.
pub(crate) fn check_nbands(
    h: &Header,
    frames: usize,
    opts: &OpenOptions,
    warnings: &mut Vec<String>,
) -> Result<()> {
    if i64::from(h.nbands) != frames as i64 {
        let msg = format!(
            "header nbands = {} but the file holds {frames} frames",
            h.nbands
        );
        if opts.strict {
            return Err(bad(
                17,
                "nbands",
                h.nbands,
                format!("the file holds {frames} frames"),
            ));
        }
        warnings.push(msg);
    }
    Ok(())
}

/// Splits the bytes after the header into whole frames, handling a trailing partial one.
fn count_frames(
    size: u64,
    start: u64,
    frame_bytes: u64,
    opts: &OpenOptions,
    warnings: &mut Vec<String>,
) -> Result<usize> {
    let body = size.checked_sub(start).ok_or(PvpError::Truncated {
        offset: 0,
        what: "header".into(),
        needed: start,
        available: size,
    })?;
    let frames = body / frame_bytes;
    let rest = body % frame_bytes;
    if rest != 0 {
        let offset = start + frames * frame_bytes;
        // Tolerated truncation keeps whole frames; a first frame that is not whole
        // is a header claiming more than the file holds.
        if !opts.allow_truncated || frames == 0 {
            return Err(PvpError::Truncated {
                offset,
                what: format!("frame {frames}"),
                needed: frame_bytes,
                available: rest,
            });
        }
        warnings.push(format!(
            "trailing partial frame {frames} at byte {offset} ({rest} of {frame_bytes} bytes) ignored"
        ));
    }
    if frames > opts.limits.max_items {
        return Err(PvpError::LimitExceeded {
            what: "frame count",
            value: frames,
            limit: opts.limits.max_items,
        });
    }
    to_usize(frames, "frame count")
}

/// Whether a dense file with `nxprocs * nyprocs > 1` holds legacy MPI frames (one
/// block per process, spec §8) rather than plain ones.
///
/// When only one of the two frame sizes divides the body, it decides. When both
/// divide (a6.pvp's geometry with 3 frames: 3 MPI frames of 264 bytes are 11 plain
/// frames of 72) or neither does (a truncated file), the header fields that each
/// reading predicts vote: an MPI file has numrecords = process count, global
/// nxExtended/nyExtended = nx·nxprocs / ny·nyprocs (what Matlab's readpvpfile.m
/// derives the process counts from) and nbands = its frame count; a gathered file has
/// numrecords = 1, nxExtended = nx, nyExtended = ny and nbands = the plain count. A
/// tie keeps the reading the sizes alone gave before (plain when both divide, MPI
/// when neither does).
fn is_mpi_dense(
    h: &Header,
    (nx, ny): (u64, u64),
    (xp, yp): (u64, u64),
    body: u64,
    f_plain: u64,
    f_mpi: u64,
) -> bool {
    let (plain_fits, mpi_fits) = (body.is_multiple_of(f_plain), body.is_multiple_of(f_mpi));
    if plain_fits != mpi_fits {
        return mpi_fits;
    }
    let field = |v: i32| u64::try_from(v).ok();
    let nbands = field(h.nbands);
    let mpi_votes = [
        field(h.numrecords) == Some(xp * yp),
        field(h.nx_extended) == Some(nx * xp) && field(h.ny_extended) == Some(ny * yp),
        nbands == Some(body / f_mpi),
    ];
    let plain_votes = [
        h.numrecords == 1,
        field(h.nx_extended) == Some(nx) && field(h.ny_extended) == Some(ny),
        nbands == Some(body / f_plain),
    ];
    let count = |v: [bool; 3]| v.iter().filter(|&&b| b).count();
    match count(mpi_votes).cmp(&count(plain_votes)) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => !plain_fits,
    }
}

/// Element type of dense data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenseElement {
    /// 32-bit float.
    F32,
    /// 16-byte random-number state, exposed as four `u32`.
    TausUint4,
}

/// Layout of a dense (filetype 4) or legacy (filetype 1) activity file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenseLayout {
    /// Per-block width, height, features (the header's nx, ny, nf).
    pub nx: usize,
    /// See `nx`.
    pub ny: usize,
    /// See `nx`.
    pub nf: usize,
    /// Process blocks per row and column (1, 1 except legacy MPI files).
    pub procs: (usize, usize),
    /// Border stored around each block (legacy filetype 1 only, else 0).
    pub border: usize,
    /// Element type.
    pub element: DenseElement,
    /// Whether each frame starts with an f64 time (false for filetype 1).
    pub has_time: bool,
    /// Bytes per frame, time included.
    pub frame_bytes: u64,
    /// Number of complete frames.
    pub frames: usize,
}

impl DenseLayout {
    /// Bytes per element.
    pub fn elem_bytes(&self) -> usize {
        match self.element {
            DenseElement::F32 => 4,
            DenseElement::TausUint4 => 16,
        }
    }

    /// Global frame shape `[ny, nx, nf]` after reassembling process blocks.
    pub fn frame_dims(&self) -> [usize; 3] {
        [self.ny * self.procs.1, self.nx * self.procs.0, self.nf]
    }

    /// Neurons per frame (global).
    pub fn neurons(&self) -> usize {
        self.nx * self.ny * self.nf * self.procs.0 * self.procs.1
    }

    /// True when frames are stored exactly as `[ny][nx][nf]` (no blocks, no border),
    /// so a frame's values can be sliced without copying.
    pub fn is_contiguous(&self) -> bool {
        self.procs == (1, 1) && self.border == 0
    }

    /// Derives the layout of a filetype 4 or 1 file.
    pub fn derive(
        h: &Header,
        size: u64,
        opts: &OpenOptions,
        warnings: &mut Vec<String>,
    ) -> Result<DenseLayout> {
        let (nx, ny, nf) = (
            positive(3, "nx", h.nx)?,
            positive(4, "ny", h.ny)?,
            positive(5, "nf", h.nf)?,
        );
        let element = if h.datatype == dt::TAUS_UINT4 {
            DenseElement::TausUint4
        } else {
            DenseElement::F32
        };
        let ds = h.datasize as u64;
        let plain = mul(
            mul(mul(nx, ny, "frame size")?, nf, "frame size")?,
            ds,
            "frame size",
        )?;
        let xp = positive(10, "nxprocs", h.nxprocs)?;
        let yp = positive(11, "nyprocs", h.nyprocs)?;
        let procs = mul(xp, yp, "process count")?;
        let start = HEADER_SIZE as u64;
        let body = size.saturating_sub(start);
        let (procs_xy, border, has_time, frame_bytes) = if h.filetype == ft::LEGACY {
            // numrecords blocks of recordsize bytes, no time.
            if h.numrecords as i64 != procs as i64 {
                return Err(bad(
                    6,
                    "numrecords",
                    h.numrecords,
                    format!("filetype 1 needs nxprocs*nyprocs = {procs}"),
                ));
            }
            let nb = h.nbatch.max(0) as u64;
            let bordered = mul(
                mul(
                    add(nx, 2 * nb, "block size")?,
                    add(ny, 2 * nb, "block size")?,
                    "block size",
                )?,
                mul(nf, ds, "block size")?,
                "block size",
            )?;
            let border = if h.recordsize as i64 == plain as i64 {
                0
            } else if nb > 0 && h.recordsize as i64 == bordered as i64 {
                nb
            } else {
                return Err(bad(
                    7,
                    "recordsize",
                    h.recordsize,
                    format!(
                        "filetype 1 block must be {plain} bytes (or {bordered} with border {nb})"
                    ),
                ));
            };
            let block = if border == 0 { plain } else { bordered };
            ((xp, yp), border, false, mul(block, procs, "frame size")?)
        } else {
            let f_plain = add(plain, 8, "frame size")?;
            let f_mpi = add(mul(plain, procs, "frame size")?, 8, "frame size")?;
            if procs > 1 && is_mpi_dense(h, (nx, ny), (xp, yp), body, f_plain, f_mpi) {
                warnings.push(format!(
                    "legacy MPI layout: {xp}x{yp} process blocks of {nx}x{ny}x{nf} per frame"
                ));
                ((xp, yp), 0, true, f_mpi)
            } else {
                ((1, 1), 0, true, f_plain)
            }
        };
        let frames = count_frames(size, start, frame_bytes, opts, warnings)?;
        check_nbands(h, frames, opts, warnings)?;
        Ok(DenseLayout {
            nx: to_usize(nx, "nx")?,
            ny: to_usize(ny, "ny")?,
            nf: to_usize(nf, "nf")?,
            procs: (
                to_usize(procs_xy.0, "nxprocs")?,
                to_usize(procs_xy.1, "nyprocs")?,
            ),
            border: to_usize(border, "border")?,
            element,
            has_time,
            frame_bytes,
            frames,
        })
    }

    /// Byte offset of frame `k` (unchecked against the frame count).
    pub fn frame_offset(&self, k: usize) -> u64 {
        HEADER_SIZE as u64 + k as u64 * self.frame_bytes
    }
}

/// Layout of a sparse activity file (filetypes 2 and 6); the frames come from a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseLayout {
    /// Width, height, features of the (restricted) layer.
    pub nx: usize,
    /// See `nx`.
    pub ny: usize,
    /// See `nx`.
    pub nf: usize,
    /// Whether entries carry a value (filetype 6) or are binary (filetype 2).
    pub has_values: bool,
    /// Bytes per entry: 4 (binary) or 8 (index + value).
    pub entry_bytes: usize,
}

impl SparseLayout {
    /// Derives the layout of a filetype 2 or 6 header.
    pub fn derive(h: &Header) -> Result<SparseLayout> {
        let (nx, ny, nf) = (
            positive(3, "nx", h.nx)?,
            positive(4, "ny", h.ny)?,
            positive(5, "nf", h.nf)?,
        );
        let n = mul(mul(nx, ny, "neuron count")?, nf, "neuron count")?;
        if n > u32::MAX as u64 + 1 {
            return Err(PvpError::Overflow("neuron count beyond u32 indices"));
        }
        let has_values = h.filetype == ft::SPARSE_VALUES;
        Ok(SparseLayout {
            nx: nx as usize,
            ny: ny as usize,
            nf: nf as usize,
            has_values,
            entry_bytes: if has_values { 8 } else { 4 },
        })
    }

    /// Neurons per frame, `nx*ny*nf` (the width of CSR rows).
    pub fn neurons(&self) -> usize {
        self.nx * self.ny * self.nf
    }
}

/// How the arbor count was found (spec §6.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArborSource {
    /// From `nbands` (modern files and most legacy ones).
    Nbands,
    /// From `numrecords` (files before 2011-11, legacy MPI).
    Numrecords,
    /// Neither field fits: one arbor.
    One,
}

/// Layout of a weight file (filetypes 3 and 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightLayout {
    /// Shared (kernel, filetype 5) or not (filetype 3).
    pub shared: bool,
    /// Patch width.
    pub nxp: usize,
    /// Patch height.
    pub nyp: usize,
    /// Patch features.
    pub nfp: usize,
    /// Patches per arbor.
    pub numpatches: usize,
    /// Arbors per frame.
    pub arbors: usize,
    /// Where `arbors` came from.
    pub arbor_source: ArborSource,
    /// Patch header width: 8, or 4 in files before 2012-03.
    pub patch_header_bytes: usize,
    /// Byte weights (datatype 1) rather than f32.
    pub bytes: bool,
    /// Bytes per frame, header included.
    pub frame_bytes: u64,
    /// Number of frames.
    pub frames: usize,
    /// Bytes of a trailing partial frame ignored under
    /// [`OpenOptions::allow_truncated`] (0 for a complete file).
    pub truncated_bytes: u64,
}

impl WeightLayout {
    /// Values per patch, `nxp*nyp*nfp`.
    pub fn patch_values(&self) -> usize {
        self.nxp * self.nyp * self.nfp
    }

    /// Bytes of one stored patch, header included.
    pub fn patch_bytes(&self) -> usize {
        self.patch_header_bytes + self.patch_values() * if self.bytes { 1 } else { 4 }
    }

    /// Values per frame, `arbors*numpatches*nxp*nyp*nfp`.
    pub fn frame_values(&self) -> usize {
        self.arbors * self.numpatches * self.patch_values()
    }

    /// Frame shape `[arbors, patches, nyp, nxp, nfp]`.
    pub fn frame_dims(&self) -> [usize; 5] {
        [self.arbors, self.numpatches, self.nyp, self.nxp, self.nfp]
    }

    /// Derives the layout of a weight file from its first frame header and its size
    /// (spec §6.6: the first of arbors in (nbands, numrecords, 1) x patch header in
    /// (8, 4) bytes whose frame size divides the file size).
    ///
    /// With the file's bytes, the fallback candidates (any but nbands with 8-byte
    /// patch headers) must also show plausible patch headers (nx <= nxp, ny <= nyp) in
    /// frame 0, so a truncated modern file is not mistaken for a legacy one.
    pub fn derive(
        w: &WeightHeader,
        size: u64,
        file: Option<&[u8]>,
        opts: &OpenOptions,
    ) -> Result<WeightLayout> {
        let e = &w.extra;
        let nxp = positive(20, "nxp", e.nxp)?;
        let nyp = positive(21, "nyp", e.nyp)?;
        let nfp = positive(22, "nfp", e.nfp)?;
        let numpatches = positive(25, "numpatches", e.numpatches)?;
        let ds = w.base.datasize as u64;
        let values = mul(
            mul(nxp, nyp, "patch size")?,
            mul(nfp, ds, "patch size")?,
            "patch size",
        )?;
        let h = &w.base;
        // The layout with `size / fs` whole frames of `fs` bytes (any rest is a
        // crash-truncated last frame).
        let layout =
            |arbors: usize, arbor_source: ArborSource, patch_header_bytes: usize, fs: u64| {
                let frames = size / fs;
                if frames > opts.limits.max_items {
                    return Err(PvpError::LimitExceeded {
                        what: "frame count",
                        value: frames,
                        limit: opts.limits.max_items,
                    });
                }
                Ok(WeightLayout {
                    shared: h.filetype == ft::SHARED_WEIGHTS,
                    nxp: to_usize(nxp, "nxp")?,
                    nyp: to_usize(nyp, "nyp")?,
                    nfp: to_usize(nfp, "nfp")?,
                    numpatches: to_usize(numpatches, "numpatches")?,
                    arbors,
                    arbor_source,
                    patch_header_bytes,
                    bytes: h.datatype == dt::BYTE,
                    frame_bytes: fs,
                    frames: to_usize(frames, "frame count")?,
                    truncated_bytes: size % fs,
                })
            };
        let candidates = [
            (h.nbands, ArborSource::Nbands),
            (h.numrecords, ArborSource::Numrecords),
            (1, ArborSource::One),
        ];
        for (arbors, source) in candidates {
            if arbors <= 0 {
                continue;
            }
            for ph in [8u64, 4] {
                let Some(fs) = (arbors as u64)
                    .checked_mul(numpatches)
                    .and_then(|ap| ap.checked_mul(ph + values))
                    .and_then(|d| d.checked_add(WEIGHT_HEADER_SIZE as u64))
                else {
                    continue;
                };
                let primary = source == ArborSource::Nbands && ph == 8;
                let plausible = |b: &[u8]| {
                    let (n, step) = (arbors as u64 * numpatches, ph + values);
                    // The next frame, if any, starts with a weight header.
                    let next = fs as usize;
                    if b.len() > next + 8 && (b[next..next + 8] != [104, 0, 0, 0, 26, 0, 0, 0]) {
                        return false;
                    }
                    (0..n).all(|i| {
                        let o = (WEIGHT_HEADER_SIZE as u64 + i * step) as usize;
                        let nx = u16::from_le_bytes([b[o], b[o + 1]]) as u64;
                        let ny = u16::from_le_bytes([b[o + 2], b[o + 3]]) as u64;
                        nx <= nxp && ny <= nyp
                    })
                };
                if size >= fs && size.is_multiple_of(fs) {
                    // Patches scanned per frame (by the plausibility check and by
                    // every frame read) are items too.
                    let patches = arbors as u64 * numpatches;
                    if patches > opts.limits.max_items {
                        return Err(PvpError::LimitExceeded {
                            what: "patches per frame",
                            value: patches,
                            limit: opts.limits.max_items,
                        });
                    }
                }
                if size >= fs
                    && size.is_multiple_of(fs)
                    && (primary || file.is_none_or(|b| b.len() as u64 == size && plausible(b)))
                {
                    return layout(arbors as usize, source, ph as usize, fs);
                }
            }
        }
        // A crashed writer: whole frames of the modern layout, then a partial one.
        if opts.allow_truncated && h.nbands > 0 {
            let fs = (h.nbands as u64)
                .checked_mul(numpatches)
                .and_then(|ap| ap.checked_mul(8 + values))
                .and_then(|d| d.checked_add(WEIGHT_HEADER_SIZE as u64));
            if let Some(fs) = fs.filter(|&fs| size >= fs) {
                return layout(h.nbands as usize, ArborSource::Nbands, 8, fs);
            }
        }
        Err(PvpError::BadSize {
            size,
            reason: format!(
                "weight file size {size} is not a multiple of any plausible frame size"
            ),
        })
    }
}
