//! Dense activity reader (filetype 4, legacy MPI-split files, obsolete filetype 1).

use std::ops::Range;

use bytes::Bytes;
use tensorfmt_core::{DType, Order, Tensor};

use super::{check_alloc, f64_at, resolve_index, wrap_index};
use crate::error::{PvpError, Result};
use crate::header::Header;
use crate::layout::{DenseElement, DenseLayout, OpenOptions};

/// One dense frame: its time and its values `[ny, nx, nf]` (f32), or `[ny, nx, nf, 4]`
/// (u32) for random-state files.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseFrame {
    /// Frame number.
    pub index: usize,
    /// Frame time (the header time for filetype 1, which has no per-frame time).
    pub time: f64,
    /// Values, row-major `[y][x][f]`; shares memory with the file when the layout allows.
    pub values: Tensor,
}

/// O(1) random access to the frames of a dense file.
///
/// ```
/// use tensorfmt_pvp::{DenseReader, OpenOptions, write::DenseWriter};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = DenseWriter::new(&mut buf, 2, 1, 1)?;
/// w.write_frame(1.0, &[1.0, 2.0])?;
/// w.write_frame(2.0, &[3.0, 4.0])?;
/// w.finish()?;
/// let r = DenseReader::new(buf.into_inner().into(), &OpenOptions::default())?;
/// assert_eq!(r.len(), 2);
/// let last = r.frame_at(-1)?;
/// assert_eq!((last.time, last.values.to_vec::<f32>()?), (2.0, vec![3.0, 4.0]));
/// assert_eq!(last.values.dims(), &[1, 2, 1]);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DenseReader {
    data: Bytes,
    header: Header,
    layout: DenseLayout,
    opts: OpenOptions,
    warnings: Vec<String>,
}

impl DenseReader {
    /// Opens a filetype 4 or 1 file held in `data`.
    pub fn new(data: Bytes, opts: &OpenOptions) -> Result<DenseReader> {
        let header = Header::parse(&data)?;
        let kind = crate::layout::check_base(&header)?;
        if !matches!(kind, crate::Kind::Dense | crate::Kind::Legacy) {
            return Err(PvpError::Invalid(format!(
                "not a dense file: {}",
                kind.describe()
            )));
        }
        let mut warnings = Vec::new();
        let layout = DenseLayout::derive(&header, data.len() as u64, opts, &mut warnings)?;
        Ok(DenseReader {
            data,
            header,
            layout,
            opts: *opts,
            warnings,
        })
    }

    /// The raw header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The derived layout.
    pub fn layout(&self) -> &DenseLayout {
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

    /// True when the file holds no frame.
    pub fn is_empty(&self) -> bool {
        self.layout.frames == 0
    }

    /// dtype and shape of one frame's values.
    pub fn frame_dtype_dims(&self) -> (DType, Vec<usize>) {
        let d = self.layout.frame_dims();
        match self.layout.element {
            DenseElement::F32 => (DType::F32, d.to_vec()),
            DenseElement::TausUint4 => (DType::U32, vec![d[0], d[1], d[2], 4]),
        }
    }

    fn check(&self, k: usize) -> Result<usize> {
        resolve_index(k as i64, self.len())
    }

    /// Time of frame `k`.
    pub fn time(&self, k: usize) -> Result<f64> {
        let k = self.check(k)?;
        if !self.layout.has_time {
            return Ok(self.header.time);
        }
        Ok(f64_at(&self.data, self.layout.frame_offset(k) as usize))
    }

    /// Frame `k` (0-based; out of range is an error).
    pub fn frame(&self, k: usize) -> Result<DenseFrame> {
        let k = self.check(k)?;
        let values = self.values_of(k)?;
        Ok(DenseFrame {
            index: k,
            time: self.time(k)?,
            values,
        })
    }

    /// Frame `i` counted from the end when negative (`-1` = last).
    pub fn frame_at(&self, i: i64) -> Result<DenseFrame> {
        self.frame(resolve_index(i, self.len())?)
    }

    /// Frame `k mod len` (upstream's wrapping behaviour, explicitly requested).
    pub fn frame_wrapped(&self, k: usize) -> Result<DenseFrame> {
        self.frame(wrap_index(k, self.len())?)
    }

    /// Streams the frames in order (each a zero-copy slice when the layout allows).
    pub fn frames(&self) -> impl Iterator<Item = Result<DenseFrame>> + '_ {
        (0..self.len()).map(|k| self.frame(k))
    }

    /// The raw element bytes of frame `k` in file order (zero copy; blocks not
    /// reassembled for legacy MPI files).
    pub fn raw_frame_bytes(&self, k: usize) -> Result<Bytes> {
        let k = self.check(k)?;
        let start = self.layout.frame_offset(k) as usize + if self.layout.has_time { 8 } else { 0 };
        let end = self.layout.frame_offset(k) as usize + self.layout.frame_bytes as usize;
        Ok(self.data.slice(start..end))
    }

    fn values_of(&self, k: usize) -> Result<Tensor> {
        let (dtype, dims) = self.frame_dtype_dims();
        let raw = self.raw_frame_bytes(k)?;
        if self.layout.is_contiguous() {
            return Ok(Tensor::from_bytes(dtype, dims, Order::RowMajor, raw)?);
        }
        let mut out = Vec::new();
        self.append_values(&raw, &mut out)?;
        Ok(Tensor::from_bytes(dtype, dims, Order::RowMajor, out)?)
    }

    /// Appends the row-major values of frame `k` (given its raw bytes) to `out`.
    fn append_values(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let l = &self.layout;
        if l.is_contiguous() {
            out.extend_from_slice(raw);
            return Ok(());
        }
        let es = l.elem_bytes();
        let n = l.neurons() * es;
        check_alloc(&self.opts, (out.len() + n) as u64)?;
        let base = out.len();
        out.resize(base + n, 0);
        let dst = &mut out[base..];
        let (b, nf) = (l.border, l.nf);
        let (bx, by) = (l.nx + 2 * b, l.ny + 2 * b);
        let block = bx * by * nf * es;
        let gnx = l.nx * l.procs.0;
        let row = l.nx * nf * es;
        for py in 0..l.procs.1 {
            for px in 0..l.procs.0 {
                let src = &raw[(py * l.procs.0 + px) * block..][..block];
                for y in 0..l.ny {
                    let s = ((y + b) * bx + b) * nf * es;
                    let d = ((py * l.ny + y) * gnx + px * l.nx) * nf * es;
                    dst[d..d + row].copy_from_slice(&src[s..s + row]);
                }
            }
        }
        Ok(())
    }

    /// The values of frame `k` decoded into an owned `Vec<f32>` with one bulk copy
    /// (`[y][x][f]` order, process blocks reassembled). Errors for random-state files.
    ///
    /// ```
    /// use tensorfmt_pvp::{DenseReader, OpenOptions, write::DenseWriter};
    /// let mut buf = std::io::Cursor::new(Vec::new());
    /// let mut w = DenseWriter::new(&mut buf, 2, 1, 1)?;
    /// w.write_frame(0.0, &[1.5, 2.5])?;
    /// w.finish()?;
    /// let r = DenseReader::new(buf.into_inner().into(), &OpenOptions::default())?;
    /// assert_eq!(r.frame_f32(0)?, vec![1.5, 2.5]);
    /// # Ok::<(), tensorfmt_pvp::PvpError>(())
    /// ```
    pub fn frame_f32(&self, k: usize) -> Result<Vec<f32>> {
        if self.layout.element != DenseElement::F32 {
            return Err(PvpError::Invalid(
                "frame_f32 on a random-state (taus_uint4) file".into(),
            ));
        }
        // Aligned (the usual case in a mapped file): a borrowed f32 view copied with
        // one memcpy into a fresh allocation; misaligned: core's bulk copy.
        Ok(self.values_of(self.check(k)?)?.typed::<f32>()?.into_owned())
    }

    /// Frames `range` as one owned tensor `[frames, ...frame dims]` (one bulk copy per
    /// frame), checked against the allocation limit first.
    pub fn read_range(&self, range: Range<usize>) -> Result<Tensor> {
        if range.start > range.end || range.end > self.len() {
            return Err(PvpError::FrameOutOfRange {
                index: range.end as i64,
                count: self.len(),
            });
        }
        let (dtype, dims) = self.frame_dtype_dims();
        let per = self.layout.neurons() as u64 * self.layout.elem_bytes() as u64;
        let total = crate::error::mul(per, range.len() as u64, "range size")?;
        let mut out = Vec::with_capacity(check_alloc(&self.opts, total)?);
        for k in range.clone() {
            let raw = self.raw_frame_bytes(k)?;
            self.append_values(&raw, &mut out)?;
        }
        let mut shape = vec![range.len()];
        shape.extend(dims);
        Ok(Tensor::from_bytes(dtype, shape, Order::RowMajor, out)?)
    }

    /// Times of frames `range`.
    pub fn times(&self, range: Range<usize>) -> Result<Vec<f64>> {
        if !self.layout.has_time {
            return range.map(|k| self.time(k)).collect();
        }
        if let Some(last) = range.clone().last() {
            self.check(last)?;
        }
        // One 8-byte field per frame: read without keeping the frames' pages resident.
        let offsets = range.map(|k| self.layout.frame_offset(k) as usize);
        Ok(super::scattered_f64s(&self.data, offsets))
    }
}
