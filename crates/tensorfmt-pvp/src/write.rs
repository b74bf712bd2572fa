//! Streaming writers for dense, sparse binary, sparse values and weight files, with
//! the modern header conventions of spec §12. Activity writers patch `nbands` (and the
//! header time after the first frame) in place after every frame, so a crash leaves a
//! readable file; `append` continues an existing file after checking its header.

use std::io::{Read, Seek, SeekFrom, Write};

use crate::error::{mul, PvpError, Result};
use crate::header::{
    datatype as dt, filetype as ft, Header, WeightExtra, WeightHeader, HEADER_SIZE,
};
use crate::layout::{check_base, DenseLayout, Kind, OpenOptions, WeightLayout};

fn dim(v: usize, what: &str) -> Result<i32> {
    match i32::try_from(v) {
        Ok(x) if x > 0 => Ok(x),
        _ => Err(PvpError::Invalid(format!(
            "{what} = {v} must be in 1..=i32::MAX"
        ))),
    }
}

fn neurons(nx: usize, ny: usize, nf: usize) -> Result<usize> {
    let n = mul(
        mul(nx as u64, ny as u64, "neuron count")?,
        nf as u64,
        "neuron count",
    )?;
    usize::try_from(n).map_err(|_| PvpError::Overflow("neuron count"))
}

fn f32_bytes(values: &[f32], buf: &mut Vec<u8>) {
    // One bulk copy: the host is little-endian (tensorfmt-core refuses to build
    // otherwise), so the in-memory bytes are the file's bytes.
    buf.extend_from_slice(bytemuck::cast_slice(values));
}

/// State shared by the activity writers: the header and the frame count.
#[derive(Debug)]
struct Activity<W: Write + Seek> {
    w: W,
    header: Header,
    frames: i32,
    end: u64,
    buf: Vec<u8>,
}

impl<W: Write + Seek> Activity<W> {
    fn create(mut w: W, header: Header) -> Result<Self> {
        let start = w.stream_position()?;
        if start != 0 {
            return Err(PvpError::Invalid(
                "writers start at position 0 of the output".into(),
            ));
        }
        w.write_all(&header.to_bytes())?;
        Ok(Activity {
            w,
            header,
            frames: 0,
            end: HEADER_SIZE as u64,
            buf: Vec::new(),
        })
    }

    /// Writes `self.buf` (one whole frame, time first) and patches the header.
    fn commit_frame(&mut self, time: f64) -> Result<()> {
        let buf = std::mem::take(&mut self.buf);
        let r = self.commit_parts(time, &[&buf]);
        self.buf = buf;
        r
    }

    /// Writes one whole frame given as consecutive `parts` (time first) and patches the
    /// header. Dense frames pass the caller's values directly: no copy into `buf`.
    fn commit_parts(&mut self, time: f64, parts: &[&[u8]]) -> Result<()> {
        if self.frames == i32::MAX {
            return Err(PvpError::Invalid("nbands would overflow i32".into()));
        }
        self.w.seek(SeekFrom::Start(self.end))?;
        for part in parts {
            self.w.write_all(part)?;
        }
        self.end += parts.iter().map(|p| p.len() as u64).sum::<u64>();
        if self.frames == 0 {
            self.header.time = time;
            self.w.seek(SeekFrom::Start(72))?;
            self.w.write_all(&time.to_le_bytes())?;
        }
        self.frames += 1;
        self.header.nbands = self.frames;
        self.w.seek(SeekFrom::Start(68))?;
        self.w.write_all(&self.frames.to_le_bytes())?;
        self.w.seek(SeekFrom::Start(self.end))?;
        Ok(())
    }

    fn finish(mut self) -> Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }

    fn geometry(&self) -> (usize, usize, usize) {
        let h = &self.header;
        (h.nx as usize, h.ny as usize, h.nf as usize)
    }
}

/// Reads the whole existing content of an output opened for appending.
fn read_all<W: Read + Seek>(w: &mut W) -> Result<bytes::Bytes> {
    w.seek(SeekFrom::Start(0))?;
    let mut v = Vec::new();
    w.read_to_end(&mut v)?;
    Ok(v.into())
}

/// Streaming writer of dense activity files (filetype 4, f32).
///
/// ```
/// use tensorfmt_pvp::{write::DenseWriter, PvpFile};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = DenseWriter::new(&mut buf, 2, 1, 1)?;
/// w.write_frame(1.0, &[1.0, 2.0])?;
/// w.finish()?;
/// let mut w = DenseWriter::append(&mut buf)?; // continue the same file
/// w.write_frame(2.0, &[3.0, 4.0])?;
/// w.finish()?;
/// let bytes = buf.into_inner();
/// assert_eq!(i32::from_le_bytes(bytes[68..72].try_into().unwrap()), 2); // nbands
/// assert_eq!(PvpFile::from_bytes(bytes.into())?.frame_count()?, 2);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug)]
pub struct DenseWriter<W: Write + Seek> {
    a: Activity<W>,
    n: usize,
}

impl<W: Write + Seek> DenseWriter<W> {
    /// Starts a new file of `nx x ny x nf` frames at position 0 of `w`.
    pub fn new(w: W, nx: usize, ny: usize, nf: usize) -> Result<Self> {
        let n = neurons(nx, ny, nf)?;
        let h = Header::activity(
            ft::DENSE,
            dim(nx, "nx")?,
            dim(ny, "ny")?,
            dim(nf, "nf")?,
            dt::FLOAT,
            4,
        );
        Ok(DenseWriter {
            a: Activity::create(w, h)?,
            n,
        })
    }

    /// Appends one frame: its time and `nx*ny*nf` values in `[y][x][f]` order.
    pub fn write_frame(&mut self, time: f64, values: &[f32]) -> Result<()> {
        if values.len() != self.n {
            return Err(PvpError::Invalid(format!(
                "dense frame has {} values, expected {}",
                values.len(),
                self.n
            )));
        }
        // The host is little-endian (tensorfmt-core refuses to build otherwise), so the
        // values' memory is the file's bytes.
        self.a
            .commit_parts(time, &[&time.to_le_bytes(), bytemuck::cast_slice(values)])
    }

    /// Frames written so far (including those of an appended file).
    pub fn frames(&self) -> usize {
        self.a.frames as usize
    }

    /// `(nx, ny, nf)` of the frames (read from the header when appending).
    ///
    /// ```
    /// let mut buf = std::io::Cursor::new(Vec::new());
    /// let w = tensorfmt_pvp::write::DenseWriter::new(&mut buf, 4, 3, 2)?;
    /// assert_eq!(w.geometry(), (4, 3, 2));
    /// # Ok::<(), tensorfmt_pvp::PvpError>(())
    /// ```
    pub fn geometry(&self) -> (usize, usize, usize) {
        self.a.geometry()
    }

    /// Flushes and returns the output.
    pub fn finish(self) -> Result<W> {
        self.a.finish()
    }
}

impl<W: Read + Write + Seek> DenseWriter<W> {
    /// Continues an existing modern dense f32 file; `nbands` is rewritten with the
    /// real frame count. A trailing partial frame (left by a writer killed
    /// mid-frame) is overwritten by the first appended frame (all frames have the
    /// same size, so it is covered completely).
    pub fn append(mut w: W) -> Result<Self> {
        let mut head = [0u8; HEADER_SIZE];
        w.seek(SeekFrom::Start(0))?;
        w.read_exact(&mut head)
            .map_err(|_| PvpError::Invalid("no PVP header to append to".into()))?;
        let header = Header::parse(&head)?;
        if check_base(&header)? != Kind::Dense || header.datatype != dt::FLOAT {
            return Err(PvpError::Invalid("append: not a dense f32 file".into()));
        }
        let size = w.seek(SeekFrom::End(0))?;
        let lenient = OpenOptions {
            allow_truncated: true,
            ..OpenOptions::default()
        };
        let layout = DenseLayout::derive(&header, size, &lenient, &mut Vec::new())?;
        if !layout.is_contiguous() {
            return Err(PvpError::Invalid("append: legacy MPI layout".into()));
        }
        let end = layout.frame_offset(layout.frames);
        let frames = i32::try_from(layout.frames).map_err(|_| PvpError::Overflow("nbands"))?;
        let n = layout.neurons();
        Ok(DenseWriter {
            a: Activity {
                w,
                header,
                frames,
                end,
                buf: Vec::new(),
            },
            n,
        })
    }
}

/// Streaming writer of sparse activity files: binary (filetype 2) or with values
/// (filetype 6, datatype 3 by default or 4 for old Python/Matlab readers). Entries
/// are written in ascending index order; duplicates and out-of-range indices are errors.
///
/// ```
/// use tensorfmt_pvp::{write::SparseWriter, PvpFile};
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = SparseWriter::binary(&mut buf, 4, 1, 1)?;
/// w.write_frame(0.0, &[3, 1], &[])?;
/// assert!(w.write_frame(1.0, &[4], &[]).is_err()); // index out of range
/// w.finish()?;
/// let PvpFile::Sparse(r) = PvpFile::from_bytes(buf.into_inner().into())? else { unreachable!() };
/// assert_eq!(r.frame(0)?.indices, vec![1, 3]);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug)]
pub struct SparseWriter<W: Write + Seek> {
    a: Activity<W>,
    n: usize,
    values: bool,
    pairs: Vec<(u32, f32)>,
}

impl<W: Write + Seek> SparseWriter<W> {
    /// A sparse binary file (filetype 2).
    pub fn binary(w: W, nx: usize, ny: usize, nf: usize) -> Result<Self> {
        Self::create(w, nx, ny, nf, ft::SPARSE_BINARY, dt::INT)
    }

    /// A sparse values file (filetype 6) with datatype 3, as the current C++ writes.
    pub fn values(w: W, nx: usize, ny: usize, nf: usize) -> Result<Self> {
        Self::create(w, nx, ny, nf, ft::SPARSE_VALUES, dt::FLOAT)
    }

    /// A sparse values file with the obsolete datatype 4 (for old Python/Matlab readers).
    pub fn values_datatype4(w: W, nx: usize, ny: usize, nf: usize) -> Result<Self> {
        Self::create(w, nx, ny, nf, ft::SPARSE_VALUES, dt::SPARSEVALUES)
    }

    fn create(w: W, nx: usize, ny: usize, nf: usize, filetype: i32, datatype: i32) -> Result<Self> {
        let n = neurons(nx, ny, nf)?;
        if n as u64 > u32::MAX as u64 + 1 {
            return Err(PvpError::Invalid(
                "more neurons than u32 indices can address".into(),
            ));
        }
        let ds = if filetype == ft::SPARSE_VALUES { 8 } else { 4 };
        let h = Header::activity(
            filetype,
            dim(nx, "nx")?,
            dim(ny, "ny")?,
            dim(nf, "nf")?,
            datatype,
            ds,
        );
        Ok(SparseWriter {
            a: Activity::create(w, h)?,
            n,
            values: filetype == ft::SPARSE_VALUES,
            pairs: Vec::new(),
        })
    }

    /// Appends one frame. `values` must have one value per index in a values file and
    /// be empty in a binary file.
    pub fn write_frame(&mut self, time: f64, indices: &[u32], values: &[f32]) -> Result<()> {
        let want = if self.values { indices.len() } else { 0 };
        if values.len() != want {
            return Err(PvpError::Invalid(format!(
                "{} values for {} indices ({})",
                values.len(),
                indices.len(),
                if self.values {
                    "values file"
                } else {
                    "binary file: give no values"
                }
            )));
        }
        if indices.len() > i32::MAX as usize {
            return Err(PvpError::Invalid(
                "too many active neurons for one frame".into(),
            ));
        }
        self.pairs.clear();
        if self.values {
            self.pairs
                .extend(indices.iter().copied().zip(values.iter().copied()));
        } else {
            self.pairs.extend(indices.iter().map(|&i| (i, 1.0)));
        }
        self.pairs.sort_unstable_by_key(|p| p.0);
        for (i, w) in self.pairs.windows(2).enumerate() {
            if w[0].0 == w[1].0 {
                return Err(PvpError::Invalid(format!(
                    "duplicate index {} (entry {i})",
                    w[0].0
                )));
            }
        }
        if let Some(&(last, _)) = self.pairs.last() {
            if last as usize >= self.n {
                return Err(PvpError::Invalid(format!(
                    "index {last} not below nx*ny*nf = {}",
                    self.n
                )));
            }
        }
        let buf = &mut self.a.buf;
        buf.clear();
        buf.extend_from_slice(&time.to_le_bytes());
        buf.extend_from_slice(&(self.pairs.len() as i32).to_le_bytes());
        for &(i, v) in &self.pairs {
            buf.extend_from_slice(&i.to_le_bytes());
            if self.values {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.a.commit_frame(time)
    }

    /// Frames written so far (including those of an appended file).
    pub fn frames(&self) -> usize {
        self.a.frames as usize
    }

    /// `(nx, ny, nf)` of the frames (read from the header when appending).
    ///
    /// ```
    /// let mut buf = std::io::Cursor::new(Vec::new());
    /// let w = tensorfmt_pvp::write::SparseWriter::binary(&mut buf, 4, 3, 2)?;
    /// assert_eq!((w.geometry(), w.has_values()), ((4, 3, 2), false));
    /// # Ok::<(), tensorfmt_pvp::PvpError>(())
    /// ```
    pub fn geometry(&self) -> (usize, usize, usize) {
        self.a.geometry()
    }

    /// Whether frames carry values (filetype 6) or are binary (filetype 2).
    ///
    /// ```
    /// let mut buf = std::io::Cursor::new(Vec::new());
    /// let w = tensorfmt_pvp::write::SparseWriter::values(&mut buf, 4, 3, 2)?;
    /// assert!(w.has_values());
    /// # Ok::<(), tensorfmt_pvp::PvpError>(())
    /// ```
    pub fn has_values(&self) -> bool {
        self.values
    }

    /// Flushes and returns the output.
    pub fn finish(self) -> Result<W> {
        self.a.finish()
    }
}

impl<W: Read + Write + Seek> SparseWriter<W> {
    /// Continues an existing sparse file after checking it with a full scan (which
    /// reads the existing content once).
    pub fn append(mut w: W) -> Result<Self> {
        let data = read_all(&mut w)?;
        let r = crate::SparseReader::new(data.clone(), &OpenOptions::default())?;
        let frames = i32::try_from(r.len()?).map_err(|_| PvpError::Overflow("nbands"))?;
        let header = *r.header();
        let l = *r.layout();
        Ok(SparseWriter {
            a: Activity {
                w,
                header,
                frames,
                end: data.len() as u64,
                buf: Vec::new(),
            },
            n: l.neurons(),
            values: l.has_values,
            pairs: Vec::new(),
        })
    }
}

/// Geometry of a weight file: which kind, the header's nx/ny/nf, patch size, arbors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightGeometry {
    /// Shared (kernel, filetype 5) or non-shared (filetype 3).
    pub shared: bool,
    /// Kernels: numPatchesX. Non-shared: restricted pre-layer width.
    pub nx: usize,
    /// Kernels: numPatchesY. Non-shared: restricted pre-layer height.
    pub ny: usize,
    /// Kernels: numPatchesF. Non-shared: pre-layer features.
    pub nf: usize,
    /// Non-shared: x margin (nxExtended = nx + 2*margin_x). 0 for kernels.
    pub margin_x: usize,
    /// Non-shared: y margin. 0 for kernels.
    pub margin_y: usize,
    /// Patch width.
    pub nxp: usize,
    /// Patch height.
    pub nyp: usize,
    /// Patch features.
    pub nfp: usize,
    /// Arbors.
    pub arbors: usize,
    /// A kernel file's header `nx`, `ny`, `nf` when they are not the unit cell: OpenPV's
    /// writers before 2017 gave the pre-synaptic layer's size there (and a
    /// `recordsize` of a frame's patches); `None` writes the unit cell, as OpenPV does
    /// since. The unit cell then follows from `numpatches` alone (spec §6.3).
    pub header_dims: Option<[usize; 3]>,
}

impl WeightGeometry {
    /// A kernel file: unit cell `npx x npy x npf` (patches = product), patches
    /// `nxp x nyp x nfp`.
    pub fn kernel(
        npx: usize,
        npy: usize,
        npf: usize,
        nxp: usize,
        nyp: usize,
        nfp: usize,
        arbors: usize,
    ) -> Self {
        WeightGeometry {
            shared: true,
            nx: npx,
            ny: npy,
            nf: npf,
            margin_x: 0,
            margin_y: 0,
            nxp,
            nyp,
            nfp,
            arbors,
            header_dims: None,
        }
    }

    /// This kernel geometry with `[nx, ny, nf]` written in the header instead of the
    /// unit cell (older OpenPV writers' convention: the pre-synaptic layer's size).
    ///
    /// ```
    /// use tensorfmt_pvp::write::WeightGeometry;
    /// let g = WeightGeometry::kernel(1, 1, 24, 18, 18, 1, 1).with_header_dims([64, 32, 24]);
    /// assert_eq!((g.numpatches()?, g.header_dims), (24, Some([64, 32, 24])));
    /// # Ok::<(), tensorfmt_pvp::PvpError>(())
    /// ```
    pub fn with_header_dims(self, dims: [usize; 3]) -> Self {
        WeightGeometry {
            header_dims: Some(dims),
            ..self
        }
    }

    /// A non-shared file over a pre layer `nx x ny x nf` with margins (patches =
    /// `(nx + 2*mx) * (ny + 2*my) * nf`).
    #[allow(clippy::too_many_arguments)]
    pub fn non_shared(
        nx: usize,
        ny: usize,
        nf: usize,
        mx: usize,
        my: usize,
        nxp: usize,
        nyp: usize,
        nfp: usize,
        arbors: usize,
    ) -> Self {
        WeightGeometry {
            shared: false,
            nx,
            ny,
            nf,
            margin_x: mx,
            margin_y: my,
            nxp,
            nyp,
            nfp,
            arbors,
            header_dims: None,
        }
    }

    /// Patches per arbor.
    pub fn numpatches(&self) -> Result<usize> {
        let (x, y) = if self.shared {
            (self.nx, self.ny)
        } else {
            (self.nx + 2 * self.margin_x, self.ny + 2 * self.margin_y)
        };
        neurons(x, y, self.nf)
    }

    /// Values per frame.
    pub fn frame_values(&self) -> Result<usize> {
        let p = neurons(self.nxp, self.nyp, self.nfp)?;
        let a = mul(self.arbors as u64, self.numpatches()? as u64, "frame size")?;
        usize::try_from(mul(a, p as u64, "frame size")?)
            .map_err(|_| PvpError::Overflow("frame size"))
    }
}

/// Encodes one weight as a byte (spec §6.7, our rule):
/// `clamp(round_half_up(255 * (w - wMin) / (wMax - wMin)), 0, 255)`, 0 when wMax <= wMin.
///
/// ```
/// use tensorfmt_pvp::write::encode_byte;
/// assert_eq!(encode_byte(1.0, 0.0, 1.0), 255);
/// assert_eq!(encode_byte(0.5, 0.0, 1.0), 128); // 127.5 rounds up
/// assert_eq!(encode_byte(7.0, 2.0, 2.0), 0);
/// ```
pub fn encode_byte(w: f32, wmin: f32, wmax: f32) -> u8 {
    if wmax <= wmin {
        return 0;
    }
    let c = (w - wmin) / (wmax - wmin);
    (255.0f32 * c + 0.5).floor().clamp(0.0, 255.0) as u8
}

/// Streaming writer of weight files (filetypes 5 and 3), f32 or byte-compressed.
/// Each frame gets its own 104-byte header with its time and true wMin/wMax; patch
/// headers are `(nxp, nyp, 0)` and patches are stored full.
///
/// ```
/// use tensorfmt_pvp::write::{WeightGeometry, WeightWriter};
/// let g = WeightGeometry::kernel(1, 1, 1, 2, 1, 1, 1);
/// let mut buf = std::io::Cursor::new(Vec::new());
/// let mut w = WeightWriter::new(&mut buf, g, true)?; // byte weights
/// w.write_frame(0.0, &[0.0, 1.0])?;
/// w.finish()?;
/// let b = buf.into_inner();
/// assert_eq!(b.len(), 104 + 8 + 2);
/// assert_eq!(&b[112..], &[0, 255]);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug)]
pub struct WeightWriter<W: Write + Seek> {
    w: W,
    geom: WeightGeometry,
    bytes: bool,
    numpatches: usize,
    frame_values: usize,
    frames: usize,
    buf: Vec<u8>,
}

impl<W: Write + Seek> WeightWriter<W> {
    /// Starts a weight file; `bytes` selects byte compression (datatype 1).
    pub fn new(w: W, geom: WeightGeometry, bytes: bool) -> Result<Self> {
        for (v, what) in [
            (geom.nx, "nx"),
            (geom.ny, "ny"),
            (geom.nf, "nf"),
            (geom.nxp, "nxp"),
            (geom.nyp, "nyp"),
            (geom.nfp, "nfp"),
            (geom.arbors, "arbors"),
        ] {
            dim(v, what)?;
        }
        if geom.nxp > u16::MAX as usize || geom.nyp > u16::MAX as usize {
            return Err(PvpError::Invalid(
                "patch size does not fit a u16 patch header".into(),
            ));
        }
        let numpatches = geom.numpatches()?;
        dim(numpatches, "numpatches")?;
        dim(geom.nx + 2 * geom.margin_x, "nxExtended")?;
        dim(geom.ny + 2 * geom.margin_y, "nyExtended")?;
        if let Some(dims) = geom.header_dims {
            if !geom.shared {
                return Err(PvpError::Invalid(
                    "header_dims is a kernel file's (a non-shared file's nx, ny, nf are its pre layer)"
                        .into(),
                ));
            }
            for (v, what) in dims.into_iter().zip(["nx", "ny", "nf"]) {
                dim(v, what)?;
            }
            // The recordsize those writers gave: one arbor's patches, headers included.
            let per_patch = 8 + 4 * (geom.nxp as u64) * (geom.nyp as u64) * (geom.nfp as u64);
            dim(
                usize::try_from(mul(numpatches as u64, per_patch, "recordsize")?)
                    .map_err(|_| PvpError::Overflow("recordsize"))?,
                "recordsize",
            )?;
        }
        let frame_values = geom.frame_values()?;
        Ok(WeightWriter {
            w,
            geom,
            bytes,
            numpatches,
            frame_values,
            frames: 0,
            buf: Vec::new(),
        })
    }

    fn header(&self, time: f64, wmin: f32, wmax: f32) -> WeightHeader {
        let g = &self.geom;
        let (datatype, datasize) = if self.bytes {
            (dt::BYTE, 1)
        } else {
            (dt::FLOAT, 4)
        };
        let arbors = g.arbors as i32;
        let ([nx, ny, nf], recordsize) = match g.header_dims {
            // Checked to fit in `new` (with 4-byte values, the larger size).
            Some(d) => (
                d,
                (self.numpatches * (8 + datasize as usize * g.nxp * g.nyp * g.nfp)) as i32,
            ),
            None => ([g.nx, g.ny, g.nf], 0),
        };
        WeightHeader {
            base: Header {
                headersize: 104,
                numparams: 26,
                filetype: if g.shared {
                    ft::SHARED_WEIGHTS
                } else {
                    ft::NONSHARED_WEIGHTS
                },
                nx: nx as i32,
                ny: ny as i32,
                nf: nf as i32,
                numrecords: arbors,
                recordsize,
                datasize,
                datatype,
                nxprocs: 1,
                nyprocs: 1,
                nx_extended: (nx + 2 * g.margin_x) as i32,
                ny_extended: (ny + 2 * g.margin_y) as i32,
                kx0: 0,
                ky0: 0,
                nbatch: 1,
                nbands: arbors,
                time,
            },
            extra: WeightExtra {
                nxp: g.nxp as i32,
                nyp: g.nyp as i32,
                nfp: g.nfp as i32,
                wmin,
                wmax,
                numpatches: self.numpatches as i32,
            },
        }
    }

    /// Appends one frame: `[arbors, patches, nyp, nxp, nfp]` values, row-major.
    pub fn write_frame(&mut self, time: f64, weights: &[f32]) -> Result<()> {
        if weights.len() != self.frame_values {
            return Err(PvpError::Invalid(format!(
                "weight frame has {} values, expected {}",
                weights.len(),
                self.frame_values
            )));
        }
        if self.bytes && weights.iter().any(|w| !w.is_finite()) {
            return Err(PvpError::Invalid("byte weights must be finite".into()));
        }
        let wmin = weights.iter().copied().fold(f32::INFINITY, f32::min);
        let wmax = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let h = self.header(time, wmin, wmax);
        let g = self.geom;
        let patch = g.nxp * g.nyp * g.nfp;
        let mut ph = [0u8; 8];
        ph[0..2].copy_from_slice(&(g.nxp as u16).to_le_bytes());
        ph[2..4].copy_from_slice(&(g.nyp as u16).to_le_bytes());
        let buf = &mut self.buf;
        buf.clear();
        buf.extend_from_slice(&h.to_bytes());
        for p in weights.chunks_exact(patch) {
            buf.extend_from_slice(&ph);
            if self.bytes {
                buf.extend(p.iter().map(|&w| encode_byte(w, wmin, wmax)));
            } else {
                f32_bytes(p, buf);
            }
        }
        self.w.write_all(buf)?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far (including those of an appended file).
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The geometry (read from the first header when appending) and whether weights
    /// are stored as bytes.
    ///
    /// ```
    /// use tensorfmt_pvp::write::{WeightGeometry, WeightWriter};
    /// let g = WeightGeometry::kernel(1, 1, 2, 3, 3, 4, 1);
    /// let w = WeightWriter::new(std::io::Cursor::new(Vec::new()), g, false)?;
    /// assert_eq!(w.geometry(), (g, false));
    /// # Ok::<(), tensorfmt_pvp::PvpError>(())
    /// ```
    pub fn geometry(&self) -> (WeightGeometry, bool) {
        (self.geom, self.bytes)
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

impl<W: Read + Write + Seek> WeightWriter<W> {
    /// Continues an existing modern weight file (8-byte patch headers) with the same
    /// geometry; a trailing partial frame is overwritten by the next frame.
    pub fn append(mut w: W) -> Result<Self> {
        let mut head = [0u8; 104];
        w.seek(SeekFrom::Start(0))?;
        w.read_exact(&mut head)
            .map_err(|_| PvpError::Invalid("no weight header to append to".into()))?;
        let h = WeightHeader::parse_at(&head, 0)?;
        let kind = check_base(&h.base)?;
        if !matches!(kind, Kind::SharedWeights | Kind::NonSharedWeights) {
            return Err(PvpError::Invalid("append: not a weight file".into()));
        }
        let size = w.seek(SeekFrom::End(0))?;
        let lenient = OpenOptions {
            allow_truncated: true,
            ..OpenOptions::default()
        };
        let l = WeightLayout::derive(&h, size, None, &lenient)?;
        // After a partial last frame (a killed writer), continue over it.
        w.seek(SeekFrom::Start(l.frames as u64 * l.frame_bytes))?;
        if l.patch_header_bytes != 8 {
            return Err(PvpError::Invalid(
                "append: legacy 4-byte patch headers".into(),
            ));
        }
        let b = &h.base;
        if b.nxprocs.saturating_mul(b.nyprocs) != 1 {
            // A modern frame after legacy ones would make a file of both (a non-shared
            // file's frames hold one record per process, ours one per arbor).
            return Err(PvpError::Invalid(format!(
                "append: a legacy MPI weight file ({}x{} processes, numrecords {}); \
                 writers write modern frames only",
                b.nxprocs, b.nyprocs, b.numrecords
            )));
        }
        let shared = kind == Kind::SharedWeights;
        let geom = WeightGeometry {
            shared,
            nx: b.nx as usize,
            ny: b.ny as usize,
            nf: b.nf as usize,
            margin_x: if shared {
                0
            } else {
                (b.nx_extended.saturating_sub(b.nx).max(0) / 2) as usize
            },
            margin_y: if shared {
                0
            } else {
                (b.ny_extended.saturating_sub(b.ny).max(0) / 2) as usize
            },
            nxp: l.nxp,
            nyp: l.nyp,
            nfp: l.nfp,
            arbors: l.arbors,
            header_dims: None,
        };
        let geom =
            match geom.numpatches() {
                Ok(n) if n == l.numpatches => geom,
                // An older kernel header (the pre layer as nx, ny, nf): numpatches is the
                // unit cell (spec §6.3: "use numpatches, never nx·ny·nf"), kept as written.
                _ if shared => {
                    WeightGeometry::kernel(1, 1, l.numpatches, l.nxp, l.nyp, l.nfp, l.arbors)
                        .with_header_dims([b.nx as usize, b.ny as usize, b.nf as usize])
                }
                _ => return Err(PvpError::Invalid(
                    "append: numpatches does not follow from the non-shared pre layer and margins"
                        .into(),
                )),
            };
        let mut ww = WeightWriter::new(w, geom, l.bytes)?;
        ww.frames = l.frames;
        Ok(ww)
    }
}
