//! The format-neutral [`TensorFile`] view of a PVP file, with the export names of
//! the facade: dense `values` + `time`; sparse as dense `values` + `time` or as CSR
//! (`indptr`, `indices`, `data`, `time`, `shape`); weights `weights` + `time`.

use std::ops::Range;

use bytes::Bytes;
use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, Order, ReadOptions, SourceLayout, SourceRun, Stats, Tensor,
    TensorFile, TensorInfo,
};

use crate::error::{PvpError, Result};
use crate::header::{HEADER_SIZE, WEIGHT_HEADER_SIZE};
use crate::layout::{DenseElement, Kind, OpenOptions};
use crate::read::PvpFile;

/// A PVP file seen as named tensors (see [`crate::open_tensor_file`]).
#[derive(Debug)]
pub struct PvpTensorFile {
    file: PvpFile,
    range: Range<usize>,
    csr: bool,
    limits: tensorfmt_core::Limits,
}

impl PvpTensorFile {
    /// Opens `data`, scanning sparse files, and selects `options.frames`.
    pub fn new(data: Bytes, options: &ReadOptions) -> Result<PvpTensorFile> {
        PvpTensorFile::new_keyed(data, options, None)
    }

    /// [`PvpTensorFile::new`], taking a sparse file's frame table from the cache of
    /// [`crate::open_tensor_file_keyed`] (and filling it) when `key` is given.
    pub fn new_keyed(
        data: Bytes,
        options: &ReadOptions,
        key: Option<crate::FileKey>,
    ) -> Result<PvpTensorFile> {
        // Lenient (default): a crash-truncated file reads as its whole frames with a
        // warning. Strict: truncation, an nbands that disagrees with the real frame
        // count, duplicate sparse indices and bad patch headers are errors.
        let opts = OpenOptions {
            limits: options.limits,
            strict: options.strict,
            allow_truncated: !options.strict,
        };
        let file = PvpFile::from_bytes_with(data, &opts)?;
        let cache_key = key.map(|k| (k, opts.limits.max_items, opts.allow_truncated));
        if let (PvpFile::Sparse(r), Some(k)) = (&file, cache_key) {
            let reused = crate::index_cache::get(k).is_some_and(|t| r.use_shared_table(t));
            if !reused {
                crate::index_cache::put(k, r.shared_table()?);
            }
        }
        let rank = match &file {
            PvpFile::Dense(d) => 1 + d.frame_dtype_dims().1.len(),
            PvpFile::Sparse(_) => 4,
            PvpFile::Weights(_) => 6,
        };
        if rank > options.limits.max_rank {
            return Err(PvpError::LimitExceeded {
                what: "tensor rank",
                value: rank as u64,
                limit: options.limits.max_rank as u64,
            });
        }
        let count = file.frame_count()?;
        let range = options.frame_range(count);
        Ok(PvpTensorFile {
            file,
            range,
            csr: options.sparse_csr,
            limits: options.limits,
        })
    }

    /// The typed file underneath.
    pub fn file(&self) -> &PvpFile {
        &self.file
    }

    /// The selected frames.
    pub fn frame_range(&self) -> Range<usize> {
        self.range.clone()
    }

    fn times(&self) -> Result<Vec<f64>> {
        match &self.file {
            PvpFile::Dense(r) => r.times(self.range.clone()),
            PvpFile::Sparse(r) => r.times(self.range.clone()),
            PvpFile::Weights(r) => r.times(self.range.clone()),
        }
    }

    fn nnz(&self) -> Result<usize> {
        match &self.file {
            PvpFile::Sparse(r) => Ok(r.table()?.counts[self.range.clone()]
                .iter()
                .map(|&c| c as usize)
                .sum()),
            _ => Ok(0),
        }
    }

    fn read(&self, name: &str) -> Result<Tensor> {
        let n = self.range.len();
        let r = self.range.clone();
        match (&self.file, name) {
            (_, "time") => Ok(Tensor::from_vec(self.times()?, [n], Order::RowMajor)?),
            (PvpFile::Dense(d), "values") => d.read_range(r),
            (PvpFile::Sparse(s), "values") if !self.csr => s.to_dense(r),
            (PvpFile::Sparse(s), "indptr" | "indices" | "data" | "shape" | "frame_shape")
                if self.csr =>
            {
                if name == "shape" {
                    let shape = vec![n as i64, s.layout().neurons() as i64];
                    return Ok(Tensor::from_vec(shape, [2], Order::RowMajor)?);
                }
                if name == "frame_shape" {
                    // The geometry the CSR columns flatten, as the facade's sparse
                    // layout gives it: a writer (PVP's, from ONNX or primitiv) needs it.
                    let l = s.layout();
                    let dims = vec![l.ny as i64, l.nx as i64, l.nf as i64];
                    return Ok(Tensor::from_vec(dims, [3], Order::RowMajor)?);
                }
                let c = s.to_csr(r)?;
                Ok(match name {
                    "indptr" => Tensor::from_vec(c.indptr, [n + 1], Order::RowMajor)?,
                    "indices" => {
                        let len = c.indices.len();
                        Tensor::from_vec(c.indices, [len], Order::RowMajor)?
                    }
                    _ => {
                        let len = c.data.len();
                        Tensor::from_vec(c.data, [len], Order::RowMajor)?
                    }
                })
            }
            (PvpFile::Weights(w), "weights") => {
                let l = w.layout();
                let per = l.frame_values();
                let total = crate::error::mul(per as u64 * 4, n as u64, "weights size")?;
                if total > self.limits.max_alloc {
                    return Err(PvpError::LimitExceeded {
                        what: "allocation",
                        value: total,
                        limit: self.limits.max_alloc,
                    });
                }
                let mut out: Vec<f32> = Vec::with_capacity(per * n);
                for k in r {
                    out.extend_from_slice(&w.frame(k)?.weights.to_vec::<f32>()?);
                }
                let mut dims = vec![n];
                dims.extend(l.frame_dims());
                Ok(Tensor::from_vec(out, dims, Order::RowMajor)?)
            }
            _ => Err(PvpError::Core(Error::NoSuchTensor(name.into()))),
        }
    }
}

/// The 80-byte header's fields as the `header()` of every kind begins with them.
pub(crate) fn header_fields(h: &crate::header::Header) -> Vec<(String, FieldValue)> {
    let mut out: Vec<(String, FieldValue)> = h
        .int_fields()
        .iter()
        .map(|(k, v)| (k.to_string(), (*v).into()))
        .collect();
    out.push(("time".into(), h.time.into()));
    out
}

/// The most runs a sparse file's `time` layout is declared in (one per stretch of
/// equally long frames); a file whose frames vary more keeps its times with the
/// entries (the carried metadata bounds a layout's runs to as many).
pub(crate) const MAX_SPARSE_TIME_RUNS: usize = 1 << 16;

fn with_frames(n: usize, t: Tensor) -> Result<Tensor> {
    let mut dims = vec![n];
    dims.extend_from_slice(t.dims());
    Ok(t.reshape(dims)?)
}

impl TensorFile for PvpTensorFile {
    fn format(&self) -> &'static str {
        "pvp"
    }

    fn kind(&self) -> String {
        match &self.file {
            PvpFile::Dense(d) if d.layout().element == DenseElement::TausUint4 => {
                "dense activity (random-number state)".into()
            }
            f => f.kind().describe().into(),
        }
    }

    fn kind_id(&self) -> &'static str {
        match self.file.kind() {
            Kind::SparseBinary | Kind::SparseValues => "sparse",
            Kind::SharedWeights | Kind::NonSharedWeights => "weights",
            Kind::Dense | Kind::Legacy => "dense",
        }
    }

    /// What the tensors alone do not tell: a weight file's geometry (the kernel unit
    /// cell `nx`, `ny`, `nf`, or a non-shared file's pre layer with its margins:
    /// `shared=false`, `margin_x`, `margin_y`) and byte storage (`datatype=1`); a
    /// sparse file's kind (`sparse=binary`, or the obsolete `datatype=4`).
    fn layout_settings(&self) -> Vec<(String, String)> {
        let w = match &self.file {
            PvpFile::Weights(w) => w,
            // A sparse file's kind (its geometry travels with the entries).
            PvpFile::Sparse(_) if self.file.kind() == Kind::SparseBinary => {
                return vec![("sparse".into(), "binary".into())]
            }
            PvpFile::Sparse(_) if self.file.header().datatype == 4 => {
                return vec![("datatype".into(), "4".into())]
            }
            _ => return Vec::new(),
        };
        let first = w.first_header();
        let (h, patches) = (first.base, i64::from(first.extra.numpatches));
        let dims = vec![
            ("nx".to_string(), h.nx.to_string()),
            ("ny".to_string(), h.ny.to_string()),
            ("nf".to_string(), h.nf.to_string()),
        ];
        let (nx, ny, nf) = (i64::from(h.nx), i64::from(h.ny), i64::from(h.nf));
        // Byte weights stay bytes where the values allow it (the writer checks).
        let bytes = (h.datatype == 1).then(|| ("datatype".to_string(), "1".to_string()));
        if self.file.kind() == Kind::NonSharedWeights {
            // Always: a non-shared file written as a shared one would be another kind
            // of file; a geometry the writer cannot keep is its error, not a new kind.
            let mut out = dims;
            out.extend(bytes);
            out.push(("shared".into(), "false".into()));
            out.push((
                "margin_x".into(),
                ((i64::from(h.nx_extended) - nx) / 2).to_string(),
            ));
            out.push((
                "margin_y".into(),
                ((i64::from(h.ny_extended) - ny) / 2).to_string(),
            ));
            return out;
        }
        // The kernel writer's nx, ny, nf are the unit cell of its patches; older OpenPV
        // writers gave the pre layer there, which travels as header_dims.
        let mut out = if nx.checked_mul(ny).and_then(|v| v.checked_mul(nf)) == Some(patches) {
            dims
        } else {
            vec![("header_dims".to_string(), format!("{nx},{ny},{nf}"))]
        };
        out.extend(bytes);
        out
    }

    fn header(&self) -> Vec<(String, FieldValue)> {
        let mut out = header_fields(self.file.header());
        match &self.file {
            PvpFile::Weights(w) => {
                let e = w.first_header().extra;
                out.push(("nxp".into(), e.nxp.into()));
                out.push(("nyp".into(), e.nyp.into()));
                out.push(("nfp".into(), e.nfp.into()));
                out.push(("wMin".into(), e.wmin.into()));
                out.push(("wMax".into(), e.wmax.into()));
                out.push(("numpatches".into(), e.numpatches.into()));
                let l = w.layout();
                out.push(("frames".into(), l.frames.into()));
                out.push(("arbors".into(), l.arbors.into()));
                out.push(("patch_header_bytes".into(), l.patch_header_bytes.into()));
            }
            PvpFile::Dense(d) => {
                let l = d.layout();
                out.push(("frames".into(), l.frames.into()));
                out.push(("process_blocks".into(), vec![l.procs.0, l.procs.1].into()));
            }
            PvpFile::Sparse(s) => {
                if let Ok(n) = s.len() {
                    out.push(("frames".into(), n.into()));
                }
                if let Ok(t) = s.table() {
                    out.push(("entries".into(), t.total_entries().into()));
                }
            }
        }
        out
    }

    fn tensors(&self) -> Vec<TensorInfo> {
        let n = self.range.len();
        let time = TensorInfo::new("time", DType::F64, [n]);
        let mut v = Vec::new();
        match &self.file {
            PvpFile::Dense(d) => {
                let (dtype, dims) = d.frame_dtype_dims();
                let mut shape = vec![n];
                shape.extend(dims);
                v.push(TensorInfo::new("values", dtype, shape));
                v.push(time);
            }
            PvpFile::Sparse(s) => {
                let l = s.layout();
                if self.csr {
                    let nnz = self.nnz().unwrap_or(0);
                    v.push(TensorInfo::new("indptr", DType::I64, [n + 1]));
                    v.push(TensorInfo::new("indices", DType::U32, [nnz]));
                    v.push(TensorInfo::new("data", DType::F32, [nnz]));
                    v.push(time);
                    v.push(TensorInfo::new("shape", DType::I64, [2]));
                    v.push(TensorInfo::new("frame_shape", DType::I64, [3]));
                } else {
                    v.push(TensorInfo::new("values", DType::F32, [n, l.ny, l.nx, l.nf]));
                    v.push(time);
                }
            }
            PvpFile::Weights(w) => {
                let mut shape = vec![n];
                shape.extend(w.layout().frame_dims());
                v.push(TensorInfo::new("weights", DType::F32, shape));
                v.push(time);
            }
        }
        v
    }

    fn read_tensor(&self, name: &str) -> tensorfmt_core::Result<Tensor> {
        Ok(self.read(name)?)
    }

    fn read_chunks<'a>(&'a self, name: &str) -> tensorfmt_core::Result<Chunks<'a>> {
        let r = self.range.clone();
        let chunk =
            |t: Result<Tensor>| -> tensorfmt_core::Result<Tensor> { Ok(with_frames(1, t?)?) };
        Ok(match (&self.file, name) {
            (PvpFile::Dense(d), "values") => {
                Box::new(r.map(move |k| chunk(d.frame(k).map(|f| f.values))))
            }
            (PvpFile::Sparse(s), "values") if !self.csr => {
                Box::new(r.map(move |k| Ok(s.to_dense(k..k + 1)?)))
            }
            (PvpFile::Sparse(s), "indices" | "data") if self.csr => {
                let want_idx = name == "indices";
                Box::new(r.map(move |k| {
                    let f = s.frame(k)?;
                    let t = if want_idx {
                        let n = f.indices.len();
                        Tensor::from_vec(f.indices, [n], Order::RowMajor)?
                    } else {
                        let n = f.values.len();
                        Tensor::from_vec(f.values, [n], Order::RowMajor)?
                    };
                    Ok(t)
                }))
            }
            (PvpFile::Weights(w), "weights") => {
                Box::new(r.map(move |k| chunk(w.frame(k).map(|f| f.weights))))
            }
            _ => {
                let t = self.read_tensor(name)?;
                Box::new(std::iter::once(Ok(t)))
            }
        })
    }

    fn stats(&self, name: &str) -> tensorfmt_core::Result<Stats> {
        match (&self.file, name) {
            // From the entries: each frame is its stored values plus implicit zeros.
            (PvpFile::Sparse(s), "values") if !self.csr => {
                let neurons = s.layout().neurons();
                let mut acc = Stats::default();
                for k in self.range.clone() {
                    let f = s.frame(k)?;
                    let zeros = neurons.saturating_sub(f.values.len());
                    acc = acc.merge(&Stats::of(&f.values).merge(&Stats::zeros(zeros)));
                }
                Ok(acc)
            }
            _ => tensorfmt_core::streamed_stats(self, name),
        }
    }

    fn sparse_rows<'a>(
        &'a self,
        name: &str,
    ) -> Option<tensorfmt_core::Result<tensorfmt_core::SparseRows<'a>>> {
        match (&self.file, name) {
            (PvpFile::Sparse(s), "values") if !self.csr => {
                let rows = self.range.clone().map(move |k| {
                    let f = s.frame(k)?;
                    Ok(tensorfmt_core::SparseRow {
                        indices: f.indices,
                        values: f.values,
                    })
                });
                Some(Ok(Box::new(rows)))
            }
            _ => None,
        }
    }

    /// Dense `values` (contiguous frames only: legacy MPI blocks and borders are
    /// reassembled, so they have none) and `time` (each frame's leading f64; none for
    /// filetype 1, whose frames repeat the header's time), f32 `weights` between their
    /// patch headers and each weight frame's header `time`, and a sparse file's `time`
    /// (each frame's leading f64, in runs of equally long frames, at most
    /// `MAX_SPARSE_TIME_RUNS`). Sparse `values` are built from entries: none.
    fn source_layout(&self, name: &str) -> Option<SourceLayout> {
        let (start, n) = (self.range.start as u64, self.range.len() as u64);
        let strided = |offset: u64, len: u64, frame_bytes: u64| {
            Some(SourceLayout {
                order: Order::RowMajor,
                runs: vec![SourceRun {
                    offset: offset.checked_add(start.checked_mul(frame_bytes)?)?,
                    len,
                    repeat: vec![(n, frame_bytes)],
                }],
            })
        };
        match (&self.file, name) {
            (PvpFile::Dense(d), "values") => {
                let l = d.layout();
                if !l.is_contiguous() {
                    return None;
                }
                let time = if l.has_time { 8 } else { 0 };
                let len = (l.neurons() as u64).checked_mul(l.elem_bytes() as u64)?;
                strided(HEADER_SIZE as u64 + time, len, l.frame_bytes)
            }
            (PvpFile::Dense(d), "time") if d.layout().has_time => {
                strided(HEADER_SIZE as u64, 8, d.layout().frame_bytes)
            }
            (PvpFile::Weights(w), "weights") => {
                let l = w.layout();
                if l.bytes {
                    return None; // decoded through wMin/wMax
                }
                let patches = (l.arbors as u64).checked_mul(l.numpatches as u64)?;
                let first = (WEIGHT_HEADER_SIZE + l.patch_header_bytes) as u64;
                Some(SourceLayout {
                    order: Order::RowMajor,
                    runs: vec![SourceRun {
                        offset: first.checked_add(start.checked_mul(l.frame_bytes)?)?,
                        len: (l.patch_values() as u64).checked_mul(4)?,
                        repeat: vec![(n, l.frame_bytes), (patches, l.patch_bytes() as u64)],
                    }],
                })
            }
            // The base header's time field (bytes 72..80) of every weight frame.
            (PvpFile::Weights(w), "time") => strided(72, 8, w.layout().frame_bytes),
            // Each sparse frame's leading f64, at offsets its entries make irregular:
            // one run per stretch of equally long frames, at most MAX_SPARSE_TIME_RUNS
            // (beyond, the times stay with the entries; carried metadata bounds runs).
            (PvpFile::Sparse(s), "time") => {
                let offsets = s.table().ok()?.offsets.get(self.range.clone())?;
                let mut runs: Vec<SourceRun> = Vec::new();
                for &at in offsets {
                    if let Some(last) = runs.last_mut() {
                        // A run's second frame sets its stride; later ones keep it.
                        match last.repeat[..] {
                            [] => {
                                last.repeat = vec![(2, at.checked_sub(last.offset)?)];
                                continue;
                            }
                            [(count, stride)] if last.offset + count * stride == at => {
                                last.repeat[0].0 += 1;
                                continue;
                            }
                            _ => {}
                        }
                    }
                    if runs.len() == MAX_SPARSE_TIME_RUNS {
                        return None;
                    }
                    runs.push(SourceRun {
                        offset: at,
                        len: 8,
                        repeat: Vec::new(),
                    });
                }
                (!runs.is_empty()).then_some(SourceLayout {
                    order: Order::RowMajor,
                    runs,
                })
            }
            _ => None,
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.file.warnings()
    }

    fn validate(&self) -> tensorfmt_core::Result<()> {
        // Every frame of the file (not only the selected range), every check.
        match &self.file {
            PvpFile::Dense(d) => {
                for f in d.frames() {
                    f?;
                }
            }
            PvpFile::Sparse(s) => {
                for f in s.frames() {
                    f?;
                }
            }
            PvpFile::Weights(w) => {
                for f in w.frames() {
                    f?;
                }
            }
        }
        Ok(())
    }
}
