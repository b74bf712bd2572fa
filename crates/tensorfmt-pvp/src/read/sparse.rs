//! Sparse activity reader (filetypes 2 and 6): a frame table built lazily by one
//! scan, then O(1) access to each frame and conversions to dense and CSR.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tensorfmt_core::{Order, Tensor};

use super::{check_alloc, f64_at, i32_at, resolve_index, u32_at, wrap_index};
use crate::error::{PvpError, Result};
use crate::header::{Header, HEADER_SIZE};
use crate::layout::{check_nbands, OpenOptions, SparseLayout};

/// Where each frame of a sparse file starts and how many entries it has.
///
/// Built by [`SparseReader::table`] with one pass over the frame headers; it can be
/// persisted by the caller (the fields are public) and given back with
/// [`SparseReader::with_table`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SparseTable {
    /// Byte offset of each frame (its f64 time).
    pub offsets: Vec<u64>,
    /// Active count of each frame.
    pub counts: Vec<u32>,
    /// Warnings from the scan (nbands mismatch, tolerated truncation).
    pub warnings: Vec<String>,
}

impl SparseTable {
    /// Total number of entries over all frames.
    pub fn total_entries(&self) -> u64 {
        self.counts.iter().map(|&c| c as u64).sum()
    }
}

/// One sparse frame: time, neuron indices and their values (1.0 for binary files).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseFrame {
    /// Frame number.
    pub index: usize,
    /// Frame time.
    pub time: f64,
    /// Active neurons `k = f + nf*(x + nx*y)`, in file order.
    pub indices: Vec<u32>,
    /// Values of the active neurons (all 1.0 in sparse binary files).
    pub values: Vec<f32>,
}

/// A range of sparse frames in CSR form; rows are frames, `width = nx*ny*nf` even when
/// the last neurons never fire.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Csr {
    /// Row pointers, `frames + 1` entries.
    pub indptr: Vec<i64>,
    /// Column (neuron) indices.
    pub indices: Vec<u32>,
    /// Values.
    pub data: Vec<f32>,
    /// Frame times.
    pub times: Vec<f64>,
    /// Number of columns.
    pub width: usize,
}

/// Random access to the frames of a sparse file.
///
/// ```
/// use tensorfmt_pvp::{SparseReader, OpenOptions, write::SparseWriter};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = SparseWriter::values(&mut buf, 3, 1, 1)?;
/// w.write_frame(1.0, &[2, 0], &[5.0, 4.0])?;
/// w.write_frame(2.0, &[], &[])?;
/// w.finish()?;
/// let r = SparseReader::new(buf.into_inner().into(), &OpenOptions::default())?;
/// assert_eq!(r.len()?, 2);
/// let f = r.frame(0)?;
/// assert_eq!((f.indices, f.values), (vec![0, 2], vec![4.0, 5.0]));
/// let csr = r.to_csr(0..2)?;
/// assert_eq!((csr.indptr, csr.width), (vec![0, 2, 2], 3));
/// assert_eq!(r.to_dense(0..1)?.to_vec::<f32>()?, vec![4.0, 0.0, 5.0]);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug)]
pub struct SparseReader {
    data: Bytes,
    header: Header,
    layout: SparseLayout,
    opts: OpenOptions,
    table: OnceLock<Arc<SparseTable>>,
}

impl SparseReader {
    /// Opens a filetype 2 or 6 file held in `data` (no scan yet).
    pub fn new(data: Bytes, opts: &OpenOptions) -> Result<SparseReader> {
        let header = Header::parse(&data)?;
        let kind = crate::layout::check_base(&header)?;
        if !matches!(kind, crate::Kind::SparseBinary | crate::Kind::SparseValues) {
            return Err(PvpError::Invalid(format!(
                "not a sparse file: {}",
                kind.describe()
            )));
        }
        let layout = SparseLayout::derive(&header)?;
        Ok(SparseReader {
            data,
            header,
            layout,
            opts: *opts,
            table: OnceLock::new(),
        })
    }

    /// Opens with a frame table persisted from an earlier scan of the same file. The
    /// table is checked (offsets, counts and the end of the last frame) before use.
    pub fn with_table(data: Bytes, opts: &OpenOptions, table: SparseTable) -> Result<SparseReader> {
        let r = SparseReader::new(data, opts)?;
        let mut expect = HEADER_SIZE as u64;
        if table.offsets.len() != table.counts.len() {
            return Err(PvpError::Invalid(
                "sparse table: offsets and counts differ in length".into(),
            ));
        }
        let mut released = tensorfmt_core::io::PageReleaser::new();
        for (k, (&off, &n)) in table.offsets.iter().zip(&table.counts).enumerate() {
            let stored = r.count_at(off, k, &mut released)?;
            if off != expect || stored != n {
                return Err(PvpError::Invalid(format!(
                    "sparse table does not match the file at frame {k}"
                )));
            }
            expect = off + 12 + n as u64 * r.layout.entry_bytes as u64;
        }
        if expect != r.data.len() as u64 && !r.opts.allow_truncated {
            return Err(PvpError::Invalid(
                "sparse table does not cover the whole file".into(),
            ));
        }
        let _ = r.table.set(Arc::new(table));
        Ok(r)
    }

    /// The raw header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The derived layout.
    pub fn layout(&self) -> &SparseLayout {
        &self.layout
    }

    /// Warnings (after a scan: nbands mismatch, tolerated truncation).
    pub fn warnings(&self) -> Vec<String> {
        self.table
            .get()
            .map(|t| t.warnings.clone())
            .unwrap_or_default()
    }

    fn count_at(
        &self,
        off: u64,
        frame: usize,
        released: &mut tensorfmt_core::io::PageReleaser,
    ) -> Result<u32> {
        let size = self.data.len() as u64;
        if off.checked_add(12).is_none_or(|e| e > size) {
            return Err(PvpError::Truncated {
                offset: off,
                what: format!("frame {frame} header"),
                needed: 12,
                available: size.saturating_sub(off),
            });
        }
        let n = i32_at(&self.data, off as usize + 8);
        // A scattered small field: its pages are not kept resident (entries that are
        // decoded later fault in again).
        super::release_field(&self.data, off as usize, 12, released);
        if n < 0 {
            return Err(PvpError::NegativeCount {
                offset: off + 8,
                frame,
                count: n,
            });
        }
        Ok(n as u32)
    }

    /// The frame table, built by one scan on first use. The scan must end exactly at
    /// the end of the file (else truncation, an error unless
    /// [`OpenOptions::allow_truncated`]).
    pub fn table(&self) -> Result<&SparseTable> {
        if let Some(t) = self.table.get() {
            return Ok(t);
        }
        let t = Arc::new(self.scan()?);
        Ok(self.table.get_or_init(|| t))
    }

    /// The frame table, shared (scanned on first use), for a cache of tables by file.
    pub fn shared_table(&self) -> Result<Arc<SparseTable>> {
        self.table()?;
        self.table
            .get()
            .cloned()
            .ok_or_else(|| PvpError::Invalid("sparse table missing after its scan".into()))
    }

    /// Uses `table`, scanned from this same file earlier (a cache keyed by the file's
    /// identity, size and modification time), instead of scanning: O(1) in the frame
    /// count. Only the end of the last frame is checked against the bytes present
    /// (every frame's reads are bounds-checked anyway). Returns false, and scans later
    /// as usual, when the table does not fit or one is already in use.
    pub fn use_shared_table(&self, table: Arc<SparseTable>) -> bool {
        if table.offsets.len() != table.counts.len() {
            return false;
        }
        let end = match (table.offsets.last(), table.counts.last()) {
            (Some(&off), Some(&n)) => off
                .checked_add(12)
                .and_then(|e| e.checked_add(n as u64 * self.layout.entry_bytes as u64)),
            _ => Some(HEADER_SIZE as u64),
        };
        if end.is_none_or(|e| e > self.data.len() as u64) {
            return false;
        }
        self.table.set(table).is_ok()
    }

    fn scan(&self) -> Result<SparseTable> {
        let size = self.data.len() as u64;
        let es = self.layout.entry_bytes as u64;
        let mut t = SparseTable::default();
        let mut off = HEADER_SIZE as u64;
        let mut released = tensorfmt_core::io::PageReleaser::new();
        while off < size {
            let frame = t.offsets.len();
            if frame as u64 >= self.opts.limits.max_items {
                return Err(PvpError::LimitExceeded {
                    what: "frame count",
                    value: frame as u64 + 1,
                    limit: self.opts.limits.max_items,
                });
            }
            let counted = self.count_at(off, frame, &mut released).and_then(|n| {
                if n as u64 > self.opts.limits.max_items {
                    return Err(PvpError::LimitExceeded {
                        what: "active entries in one frame",
                        value: n as u64,
                        limit: self.opts.limits.max_items,
                    });
                }
                let need = 12 + n as u64 * es;
                if need > size - off {
                    Err(PvpError::Truncated {
                        offset: off,
                        what: format!("frame {frame}"),
                        needed: need,
                        available: size - off,
                    })
                } else {
                    Ok(n)
                }
            });
            let n = match counted {
                Ok(n) => n,
                Err(PvpError::Truncated {
                    offset,
                    what,
                    needed,
                    available,
                }) if self.opts.allow_truncated && frame > 0 => {
                    t.warnings.push(format!(
                        "trailing partial {what} at byte {offset} ({available} of {needed} bytes) ignored"
                    ));
                    break;
                }
                Err(e) => return Err(e),
            };
            t.offsets.push(off);
            t.counts.push(n);
            off += 12 + n as u64 * es;
        }
        check_nbands(&self.header, t.offsets.len(), &self.opts, &mut t.warnings)?;
        Ok(t)
    }

    /// Number of frames (scans on first use).
    pub fn len(&self) -> Result<usize> {
        Ok(self.table()?.offsets.len())
    }

    /// True when the file holds no frame.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Time of frame `k`.
    pub fn time(&self, k: usize) -> Result<f64> {
        let t = self.table()?;
        let k = resolve_index(k as i64, t.offsets.len())?;
        Ok(f64_at(&self.data, t.offsets[k] as usize))
    }

    /// Times of frames `range`, read without keeping the frames' pages resident.
    pub fn times(&self, range: std::ops::Range<usize>) -> Result<Vec<f64>> {
        let t = self.table()?;
        let offsets = t
            .offsets
            .get(range.clone())
            .ok_or(PvpError::FrameOutOfRange {
                index: range.end as i64 - 1,
                count: t.offsets.len(),
            })?;
        Ok(super::scattered_f64s(
            &self.data,
            offsets.iter().map(|&o| o as usize),
        ))
    }

    /// Frame `k`, indices checked against `nx*ny*nf` (and for duplicates in strict mode).
    pub fn frame(&self, k: usize) -> Result<SparseFrame> {
        let mut f = SparseFrame {
            index: k,
            time: 0.0,
            indices: Vec::new(),
            values: Vec::new(),
        };
        self.decode_into(k, &mut f.indices, &mut f.values)?;
        f.time = self.time(k)?;
        Ok(f)
    }

    /// Frame `i` counted from the end when negative (`-1` = last).
    pub fn frame_at(&self, i: i64) -> Result<SparseFrame> {
        self.frame(resolve_index(i, self.len()?)?)
    }

    /// Frame `k mod len` (upstream's wrapping behaviour, explicitly requested).
    pub fn frame_wrapped(&self, k: usize) -> Result<SparseFrame> {
        self.frame(wrap_index(k, self.len()?)?)
    }

    /// Streams the frames in order, never holding more than one.
    pub fn frames(&self) -> impl Iterator<Item = Result<SparseFrame>> + '_ {
        let n = self.len();
        let (n, err) = match n {
            Ok(n) => (n, None),
            Err(e) => (0, Some(e)),
        };
        err.map(Err)
            .into_iter()
            .chain((0..n).map(|k| self.frame(k)))
    }

    /// Appends the entries of frame `k` to `indices` and `values`.
    fn decode_into(&self, k: usize, indices: &mut Vec<u32>, values: &mut Vec<f32>) -> Result<()> {
        let t = self.table()?;
        let k = resolve_index(k as i64, t.offsets.len())?;
        let off = t.offsets[k] as usize + 12;
        let n = t.counts[k] as usize;
        let es = self.layout.entry_bytes;
        let body = &self.data[off..off + n * es];
        let width = self.layout.neurons() as u64;
        let start = indices.len();
        indices.reserve(n);
        values.reserve(n);
        if self.layout.has_values {
            for e in body.chunks_exact(8) {
                indices.push(u32_at(e, 0));
                values.push(f32::from_le_bytes([e[4], e[5], e[6], e[7]]));
            }
        } else {
            indices.extend(
                body.chunks_exact(4)
                    .map(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]])),
            );
            values.resize(values.len() + n, 1.0);
        }
        let new = &indices[start..];
        if let Some(pos) = new.iter().position(|&i| i as u64 >= width) {
            return Err(PvpError::BadIndex {
                offset: (off + pos * es) as u64,
                frame: k,
                index: new[pos] as u64,
                reason: format!("not below nx*ny*nf = {width}"),
            });
        }
        if self.opts.strict {
            // Sort a copy (bounded by the bytes present, unlike a bitmap of nx*ny*nf).
            let mut sorted = new.to_vec();
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                let dup = w[0];
                let pos = new
                    .iter()
                    .enumerate()
                    .filter(|(_, &i)| i == dup)
                    .nth(1)
                    .map_or(0, |(p, _)| p);
                return Err(PvpError::BadIndex {
                    offset: (off + pos * es) as u64,
                    frame: k,
                    index: dup as u64,
                    reason: "duplicate".into(),
                });
            }
        }
        Ok(())
    }

    fn check_range(&self, range: &Range<usize>) -> Result<()> {
        let n = self.len()?;
        if range.start > range.end || range.end > n {
            return Err(PvpError::FrameOutOfRange {
                index: range.end as i64,
                count: n,
            });
        }
        Ok(())
    }

    /// Frames `range` as CSR (`indptr`, `indices`, `data`) of width `nx*ny*nf`.
    pub fn to_csr(&self, range: Range<usize>) -> Result<Csr> {
        self.check_range(&range)?;
        let t = self.table()?;
        let nnz: u64 = t.counts[range.clone()].iter().map(|&c| c as u64).sum();
        check_alloc(&self.opts, nnz * 8)?;
        let mut csr = Csr {
            indptr: Vec::with_capacity(range.len() + 1),
            indices: Vec::with_capacity(nnz as usize),
            data: Vec::with_capacity(nnz as usize),
            times: Vec::with_capacity(range.len()),
            width: self.layout.neurons(),
        };
        csr.indptr.push(0);
        for k in range {
            let start = csr.indices.len();
            self.decode_into(k, &mut csr.indices, &mut csr.data)?;
            last_wins(&mut csr.indices, &mut csr.data, start);
            csr.indptr.push(csr.indices.len() as i64);
            csr.times.push(self.time(k)?);
        }
        Ok(csr)
    }

    /// Frame `k` as a dense tensor `[ny, nx, nf]` (absent neurons are 0; a repeated
    /// index keeps its last value).
    pub fn frame_dense(&self, k: usize) -> Result<Tensor> {
        let t = self.to_dense(k..k + 1)?;
        let dims = t.dims()[1..].to_vec();
        Ok(t.reshape(dims)?)
    }

    /// Frames `range` as a dense tensor `[frames, ny, nx, nf]` f32.
    pub fn to_dense(&self, range: Range<usize>) -> Result<Tensor> {
        self.check_range(&range)?;
        let width = self.layout.neurons();
        let total = crate::error::mul(width as u64 * 4, range.len() as u64, "dense size")?;
        check_alloc(&self.opts, total)?;
        let mut out = vec![0f32; width * range.len()];
        let (mut idx, mut val) = (Vec::new(), Vec::new());
        for (row, k) in range.clone().enumerate() {
            idx.clear();
            val.clear();
            self.decode_into(k, &mut idx, &mut val)?;
            let dst = &mut out[row * width..(row + 1) * width];
            for (&i, &v) in idx.iter().zip(&val) {
                dst[i as usize] = v;
            }
        }
        let l = &self.layout;
        Ok(Tensor::from_vec(
            out,
            [range.len(), l.ny, l.nx, l.nf],
            Order::RowMajor,
        )?)
    }
}

/// The row of entries from `start` on, as a dense frame reads it: a repeated index
/// keeps its last value (scipy would sum them). Rows in increasing index order (what
/// writers write) are left as they are; others are sorted by index.
fn last_wins(indices: &mut Vec<u32>, data: &mut Vec<f32>, start: usize) {
    if indices[start..].windows(2).all(|w| w[0] < w[1]) {
        return;
    }
    let mut order: Vec<usize> = (start..indices.len()).collect();
    // Stable: equal indices stay in file order, so the last of a run is the last read.
    order.sort_by_key(|&i| indices[i]);
    let mut kept: Vec<(u32, f32)> = Vec::with_capacity(order.len());
    for i in order {
        match kept.last_mut() {
            Some(last) if last.0 == indices[i] => last.1 = data[i],
            _ => kept.push((indices[i], data[i])),
        }
    }
    indices.truncate(start);
    data.truncate(start);
    for (i, v) in kept {
        indices.push(i);
        data.push(v);
    }
}
