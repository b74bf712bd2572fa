//! Sparse stays sparse (issue 23 item 5): a tensor its format stores sparsely (a
//! sparse PVP file's `values`, which offers [`TensorFile::sparse_rows`]) is written
//! to npz and safetensors as CSR, never densified unless asked.
//!
//! * **npz** in the layout of `scipy.sparse.save_npz`: members `indices`, `indptr`,
//!   `format` (a 0-d `|S3` array `b"csr"`), `shape` (`[frames, ny*nx*nf]`) and `data`,
//!   so `scipy.sparse.load_npz` reads it, with `time` (`[frames]` f64) and
//!   `frame_shape` (`[ny, nx, nf]`) beside them (load_npz ignores other members).
//! * **safetensors** as the CSR triple `indptr`, `indices`, `data` plus `shape`,
//!   `time` and `frame_shape`, with `__metadata__` `format = csr`.
//!
//! Index arrays are `int32` when every index fits (what scipy builds), `int64`
//! otherwise; `data` is `float32` (ones for sparse-binary files), or the `--dtype`
//! asked, which only the values take ([`keeps_its_dtype`]). Converting such a file to
//! PVP writes the sparse PVP again (geometry from `frame_shape`).
//!
//! This module is the layout (writing it, and reading it back as the original's
//! `values`); the policy (keep sparse unless `dense` is asked, refuse densifying beyond
//! [`MAX_DENSE_BYTES`]) is the conversion's, in `convert.rs`.

use std::io::{Cursor, Write};
use std::path::Path;

use tensorfmt_core::io::AtomicFile;
use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, Order, ReadOptions, Result, SparseRow, SparseRows, Stats,
    Tensor, TensorFile, TensorInfo, WriteOptions,
};
use zip::write::SimpleFileOptions;
use zip::ZipWriter;

use super::npy;
use crate::dispatch::{self, WriteReport};
use crate::document::{self, Document};
use crate::format::Format;

/// The largest dense size (bytes) a sparse tensor is expanded to: 1 GiB.
pub const MAX_DENSE_BYTES: u64 = 1 << 30;

/// How many tensors a PVP writer is offered when `names` hold a CSR group
/// (`indptr`, `indices`, `data`, `shape`, `frame_shape` become one `values`), so that
/// the report does not say "wrote 2 of 5 tensors" for a complete sparse file.
pub(crate) fn offered(names: &[String], format: Format) -> usize {
    let csr = ["indptr", "indices", "data", "shape", "frame_shape"];
    let has = |n: &str| names.iter().any(|x| x == n);
    if format != Format::Pvp || !has("indptr") || !has("indices") {
        return names.len();
    }
    names.iter().filter(|n| !csr.contains(&n.as_str())).count() + 1
}

/// The CSR arrays of sparse tensor `name`.
struct Csr {
    indptr: Vec<i64>,
    indices: Vec<u32>,
    data: Vec<f32>,
    frames: usize,
    frame_dims: Vec<usize>,
}

fn collect(file: &dyn TensorFile, name: &str) -> Result<Csr> {
    let info = super::info_of(file, name)?;
    let dims = info.shape.dims().to_vec();
    let (frames, frame_dims) = match dims.split_first() {
        Some((&f, rest)) if !rest.is_empty() => (f, rest.to_vec()),
        _ => {
            return Err(Error::Invalid(format!(
                "sparse tensor {name:?} of shape {:?} has no frame axis",
                dims
            )))
        }
    };
    let rows = file
        .sparse_rows(name)
        .ok_or_else(|| Error::Invalid(format!("{name:?} is not sparse")))??;
    let mut csr = Csr {
        indptr: Vec::with_capacity(frames + 1),
        indices: Vec::new(),
        data: Vec::new(),
        frames,
        frame_dims,
    };
    csr.indptr.push(0);
    for row in rows {
        let row = row?.normalized();
        csr.indices.extend_from_slice(&row.indices);
        csr.data.extend_from_slice(&row.values);
        csr.indptr.push(csr.indices.len() as i64);
    }
    if csr.indptr.len() != frames + 1 {
        return Err(Error::Invalid(format!(
            "sparse tensor {name:?}: {} rows for {frames} frames",
            csr.indptr.len() - 1
        )));
    }
    Ok(csr)
}

/// The tensors of the sparse layout, in scipy's `save_npz` member order (the `format`
/// member goes between `indptr` and `shape` in npz).
fn csr_tensors(csr: Csr) -> Result<Vec<(String, Tensor)>> {
    let width: usize = csr.frame_dims.iter().product();
    let nnz = csr.indices.len();
    let small = width <= i32::MAX as usize && nnz <= i32::MAX as usize;
    let (indices, indptr) = if small {
        (
            Tensor::from_vec(
                csr.indices.iter().map(|&i| i as i32).collect::<Vec<_>>(),
                [nnz],
                Order::RowMajor,
            )?,
            Tensor::from_vec(
                csr.indptr.iter().map(|&i| i as i32).collect::<Vec<_>>(),
                [csr.frames + 1],
                Order::RowMajor,
            )?,
        )
    } else {
        (
            Tensor::from_vec(
                csr.indices.iter().map(|&i| i as i64).collect::<Vec<_>>(),
                [nnz],
                Order::RowMajor,
            )?,
            Tensor::from_vec(csr.indptr, [csr.frames + 1], Order::RowMajor)?,
        )
    };
    let shape = Tensor::from_vec(vec![csr.frames as i64, width as i64], [2], Order::RowMajor)?;
    let data = Tensor::from_vec(csr.data, [nnz], Order::RowMajor)?;
    let frame_shape = Tensor::from_vec(
        csr.frame_dims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        [csr.frame_dims.len()],
        Order::RowMajor,
    )?;
    Ok(vec![
        ("indices".into(), indices),
        ("indptr".into(), indptr),
        ("shape".into(), shape),
        ("data".into(), data),
        ("frame_shape".into(), frame_shape),
    ])
}

/// The tensors of a sparse layout that `--dtype` leaves as they are: the CSR index
/// arrays, the matrix and frame shapes and the frames' times. `--dtype` is the type of
/// the values (`data`); cast, these would wrap (an int8 `indices` of a 300-wide frame)
/// or collapse (a bool `frame_shape`), and the file would be another matrix.
pub const KEEPS_ITS_DTYPE: [&str; 5] = ["indptr", "indices", "shape", "frame_shape", "time"];

/// Whether tensor `name` of the tensors `names` keeps its dtype whatever `--dtype`
/// asks: `names` hold a CSR group (`indptr`, `indices`, `data`: the sparse layout of
/// npz and safetensors, the CSR arrays a sparse PVP is read as with `sparse_csr`,
/// Python's scipy matrix) and `name` is one of its [`KEEPS_ITS_DTYPE`].
///
/// ```
/// use tensorfmt::interop::sparse::keeps_its_dtype;
/// let csr: Vec<String> = ["indptr", "indices", "data", "shape"].map(String::from).into();
/// assert!(keeps_its_dtype("indices", &csr) && !keeps_its_dtype("data", &csr));
/// let plain: Vec<String> = ["shape", "weights"].map(String::from).into();
/// assert!(!keeps_its_dtype("shape", &plain)); // a tensor that happens to be named so
/// ```
pub fn keeps_its_dtype(name: &str, names: &[String]) -> bool {
    let has = |n: &str| names.iter().any(|x| x == n);
    KEEPS_ITS_DTYPE.contains(&name) && has("indptr") && has("indices") && has("data")
}

/// Writes the tensors of a sparse layout (`csr_with_others`) as `format`'s (npz: scipy's
/// `save_npz` members; safetensors: with `__metadata__` `format = csr`), each stored as
/// it is: the caller has applied `--dtype` (to the values only, see
/// [`keeps_its_dtype`]); the report of the written file.
pub(crate) fn write_layout(
    tensors: &[(String, Tensor)],
    path: &Path,
    format: Format,
    options: &WriteOptions,
) -> Result<WriteReport> {
    let options = WriteOptions {
        dtype: None,
        ..options.clone()
    };
    let options = &options;
    // scipy.sparse has no half-precision matrices: what load_npz gives no operation takes.
    if format == Format::Npz {
        if let Some((_, t)) = tensors
            .iter()
            .find(|(n, t)| n == "data" && matches!(t.dtype(), DType::F16 | DType::BF16))
        {
            return Err(Error::Invalid(format!(
                "the sparse layout's values as {}: scipy.sparse has no {} matrices \
                 (load_npz would give one that no operation takes: toarray, printing and \
                 arithmetic refuse it); ask for float32 (or --dense, or safetensors, \
                 which keep the CSR arrays as they are)",
                t.dtype(),
                t.dtype()
            )));
        }
    }
    // A whole legacy file's skeleton rides along (see `as_original`).
    match format {
        Format::Npz => write_npz(path, tensors, options)?,
        _ => super::safetensors::save_with_metadata(path, tensors, options, &[("format", "csr")])?,
    }
    // Offered: the arrays of the sparse layout (so the summary says "wrote 6 tensors").
    dispatch::report(path, format, tensors.len(), options)
}

/// Writes `names` of `file`, a sparse PVP file's `values` (`name`) among them, as a
/// sparse PVP file from its entries (never densified): the geometry is the frames'
/// shape; binary or values and the datatype are the source's
/// ([`TensorFile::layout_settings`], in `options.source_layout`) unless `--set` says
/// otherwise.
pub(crate) fn write_pvp(
    file: &dyn TensorFile,
    name: &str,
    names: &[String],
    path: &Path,
    options: &WriteOptions,
) -> Result<WriteReport> {
    let tensors = csr_with_others(file, name, names)?;
    let options = WriteOptions {
        kind: Some("sparse".into()),
        ..options.clone()
    };
    dispatch::write_tensors(
        path,
        Format::Pvp,
        &tensors,
        &options,
        &crate::progress::Progress::silent(),
    )?;
    dispatch::report(path, Format::Pvp, names.len(), &options)
}

/// The CSR arrays of sparse tensor `name` of `file`, then the other tensors of
/// `names` as they are.
pub(crate) fn csr_with_others(
    file: &dyn TensorFile,
    name: &str,
    names: &[String],
) -> Result<Vec<(String, Tensor)>> {
    let mut tensors = csr_tensors(collect(file, name)?)?;
    for other in names.iter().filter(|n| n.as_str() != name) {
        if tensors.iter().any(|(n, _)| n == other) {
            return Err(Error::Invalid(format!(
                "tensor {other:?} would collide with the CSR layout of sparse {name:?}"
            )));
        }
        tensors.push((other.clone(), file.read_tensor(other)?));
    }
    Ok(tensors)
}

/// An npz in scipy's `save_npz` layout: built in memory (the entries of a sparse
/// file, no more than its own size in bytes), then written through [`AtomicFile`].
fn write_npz(path: &Path, tensors: &[(String, Tensor)], options: &WriteOptions) -> Result<()> {
    let method = super::npz::zip_method(options.compress);
    let zerr = |e: zip::result::ZipError| Error::Invalid(format!("npz: {e}"));
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default()
        .compression_method(method)
        .large_file(true);
    for (name, t) in tensors {
        zip.start_file(format!("{name}.npy"), opts).map_err(zerr)?;
        zip.write_all(&npy::to_bytes(t)?)?;
        if name == "indptr" {
            // scipy: load_npz reads loaded["format"].item() as the matrix format.
            zip.start_file("format.npy", opts).map_err(zerr)?;
            zip.write_all(&npy::header_bytes_for("|S3", &[]))?;
            zip.write_all(b"csr")?;
        }
    }
    let mut bytes = zip.finish().map_err(zerr)?.into_inner();
    if let Some(text) = &options.carried {
        // The skeleton, where the npz writer keeps it: outside every member, so
        // `np.load` and `scipy.sparse.load_npz` list only the arrays (see `npz::write_from`).
        bytes = super::npz::hide_in_archive(bytes, text)?;
    }
    let mut out = AtomicFile::create(path)?.sync(!options.skip_fsync);
    out.write_all(&bytes)?;
    out.commit()
}

/// The members of the sparse layout besides `time`.
const CSR_GROUP: [&str; 5] = ["indptr", "indices", "data", "shape", "frame_shape"];

/// An npz / safetensors file in the sparse layout, seen as the tensors of the file it
/// was converted from: `values` `[frames, ...frame_shape]` (sparse: [`TensorFile::sparse_rows`],
/// densified only when read whole) beside its other tensors. `None` when `doc` is not
/// such a file or carries no legacy skeleton: what [`provenance`](crate::provenance)
/// splices back is then the original file again.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let p = dir.path().join("s.pvp");
/// let mut w = tensorfmt::pvp::write::SparseWriter::values(std::io::Cursor::new(Vec::new()), 3, 2, 1)?;
/// w.write_frame(0.0, &[1, 4], &[0.5, 2.0])?;
/// std::fs::write(&p, w.finish()?.into_inner())?;
/// let npz = dir.path().join("s.npz");
/// tensorfmt::Document::open(&p)?.convert_to(&npz, tensorfmt::Format::Npz)?;
/// let mid = tensorfmt::Document::open(&npz)?;
/// let view = tensorfmt::interop::sparse::as_original(&mid)?.unwrap();
/// assert_eq!(view.entry("values")?.shape().dims(), &[1, 2, 3, 1]);
/// // Converting the sparse npz back splices through the view: the original bytes.
/// let back = dir.path().join("back.pvp");
/// mid.convert_to(&back, tensorfmt::Format::Pvp)?;
/// assert_eq!(std::fs::read(&back)?, std::fs::read(&p)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn as_original(doc: &Document) -> Result<Option<Document>> {
    if !matches!(doc.file_format(), Format::Npz | Format::Safetensors)
        || crate::provenance::carried(doc.file()).is_none()
    {
        return Ok(None);
    }
    if !is_sparse_layout(doc.file()) {
        return Ok(None);
    }
    let reopened = document::open_as(doc.path(), doc.file_format(), &ReadOptions::default())?;
    let view = CsrView::new(reopened.into_inner())?;
    Ok(Some(Document::new(
        doc.file_format(),
        doc.path().to_path_buf(),
        Box::new(view),
    )))
}

/// Whether `file` is in the sparse layout (npz or safetensors with the CSR group).
fn is_sparse_layout(file: &dyn TensorFile) -> bool {
    let infos = file.tensors();
    matches!(file.format(), "npz" | "safetensors")
        && CSR_GROUP.iter().all(|n| infos.iter().any(|i| i.name == *n))
}

/// For `diff`: a file in the sparse layout compared with a file that lists `values`
/// (the sparse PVP it came from, or a dense copy) is seen as that `values` (sparse,
/// so the comparison merges entries), not as its CSR arrays.
pub(crate) fn diff_view<'a>(
    file: &'a dyn TensorFile,
    other: &dyn TensorFile,
) -> Result<Option<Box<dyn TensorFile + 'a>>> {
    let others = other.tensors();
    let lists = |n: &str| others.iter().any(|i| i.name == n);
    if !lists("values") || lists("indptr") || !is_sparse_layout(file) {
        return Ok(None);
    }
    Ok(Some(Box::new(CsrView::new(file)?)))
}

/// See [`as_original`]; `F` owns or borrows the file in the sparse layout.
struct CsrView<F> {
    inner: F,
    indptr: Vec<i64>,
    indices: Vec<u32>,
    data: Vec<f32>,
    frame_dims: Vec<usize>,
}

impl<F, T> CsrView<F>
where
    F: std::ops::Deref<Target = T>,
    T: TensorFile + ?Sized,
{
    fn new(inner: F) -> Result<CsrView<F>> {
        let read = |n: &str, d: DType| inner.read_tensor(n)?.cast(d);
        let indptr = read("indptr", DType::I64)?.to_vec::<i64>()?;
        let indices = read("indices", DType::I64)?.to_vec::<i64>()?;
        let data = read("data", DType::F32)?.to_vec::<f32>()?;
        let shape = read("shape", DType::I64)?.to_vec::<i64>()?;
        let frame_shape = read("frame_shape", DType::I64)?.to_vec::<i64>()?;
        let bad = |why: String| Error::Invalid(format!("sparse layout: {why}"));
        if frame_shape.iter().any(|&d| d <= 0) {
            return Err(bad(format!("frame_shape {frame_shape:?}")));
        }
        let frame_dims: Vec<usize> = frame_shape.iter().map(|&d| d as usize).collect();
        let width = frame_dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad("frame_shape overflows".into()))?;
        let frames = indptr.len().saturating_sub(1);
        if shape != [frames as i64, width as i64] {
            return Err(bad(format!(
                "shape {shape:?} is not [{frames}, {width}] (indptr, frame_shape)"
            )));
        }
        if indices.len() != data.len()
            || indptr.first() != Some(&0)
            || indptr.last() != Some(&(indices.len() as i64))
            || indptr.windows(2).any(|w| w[1] < w[0])
        {
            return Err(bad("indptr, indices and data do not fit together".into()));
        }
        if indices.iter().any(|&i| i < 0 || i as u64 >= width as u64) {
            return Err(bad(format!("an index is outside 0..{width}")));
        }
        Ok(CsrView {
            inner,
            indptr,
            indices: indices.iter().map(|&i| i as u32).collect(),
            data,
            frame_dims,
        })
    }

    fn frames(&self) -> usize {
        self.indptr.len() - 1
    }

    fn values_info(&self) -> TensorInfo {
        let mut dims = vec![self.frames()];
        dims.extend(&self.frame_dims);
        TensorInfo::new("values", DType::F32, dims)
    }

    fn row(&self, k: usize) -> SparseRow {
        let (a, b) = (self.indptr[k] as usize, self.indptr[k + 1] as usize);
        SparseRow {
            indices: self.indices[a..b].to_vec(),
            values: self.data[a..b].to_vec(),
        }
        .normalized()
    }
}

impl<F, T> TensorFile for CsrView<F>
where
    F: std::ops::Deref<Target = T> + Send + Sync,
    T: TensorFile + ?Sized,
{
    fn format(&self) -> &'static str {
        self.inner.format()
    }
    fn kind(&self) -> String {
        self.inner.kind()
    }
    fn kind_id(&self) -> &'static str {
        self.inner.kind_id()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.inner.header()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        let mut v = vec![self.values_info()];
        v.extend(
            self.inner
                .tensors()
                .into_iter()
                .filter(|i| !CSR_GROUP.contains(&i.name.as_str())),
        );
        v
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        if name != "values" {
            if CSR_GROUP.contains(&name) {
                return Err(Error::NoSuchTensor(name.into()));
            }
            return self.inner.read_tensor(name);
        }
        let info = self.values_info();
        let n = info.shape.byte_len(4)?;
        if n as u64 > MAX_DENSE_BYTES {
            return Err(Error::LimitExceeded {
                what: "dense size of a sparse tensor",
                value: n as u64,
                limit: MAX_DENSE_BYTES,
            });
        }
        let width = n / 4 / self.frames().max(1);
        let mut out = vec![0f32; n / 4];
        for k in 0..self.frames() {
            let r = self.row(k);
            for (i, v) in r.indices.iter().zip(r.values) {
                out[k * width + *i as usize] = v;
            }
        }
        Tensor::from_vec(out, info.shape.dims().to_vec(), Order::RowMajor)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        super::row_chunks(self.read_tensor(name)?)
    }
    fn stats(&self, name: &str) -> Result<Stats> {
        if name != "values" {
            return self.inner.stats(name);
        }
        // From the entries, as the sparse PVP reader does: each frame's stored values
        // plus its implicit zeros (never the densified movie).
        let width: usize = self.frame_dims.iter().product();
        let mut acc = Stats::default();
        for k in 0..self.frames() {
            let (a, b) = (self.indptr[k] as usize, self.indptr[k + 1] as usize);
            let zeros = width.saturating_sub(b - a);
            acc = acc.merge(&Stats::of(&self.data[a..b]).merge(&Stats::zeros(zeros)));
        }
        Ok(acc)
    }
    /// The view's `values` are assembled from the CSR arrays, not bytes of the file,
    /// so they have no source layout; the other tensors keep the inner file's.
    fn source_layout(&self, name: &str) -> Option<tensorfmt_core::SourceLayout> {
        if name == "values" || CSR_GROUP.contains(&name) {
            return None;
        }
        self.inner.source_layout(name)
    }
    fn source_layouts(&self) -> Vec<Option<tensorfmt_core::SourceLayout>> {
        self.tensors()
            .iter()
            .map(|i| self.source_layout(&i.name))
            .collect()
    }
    fn sparse_rows<'a>(&'a self, name: &str) -> Option<Result<SparseRows<'a>>> {
        (name == "values").then(|| -> Result<SparseRows<'a>> {
            Ok(Box::new((0..self.frames()).map(move |k| Ok(self.row(k)))))
        })
    }
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }
    fn lenient(&self) -> bool {
        self.inner.lenient()
    }
    fn external_files(&self) -> Vec<String> {
        self.inner.external_files()
    }
    fn layout_settings(&self) -> Vec<(String, String)> {
        self.inner.layout_settings()
    }
    fn validate(&self) -> Result<()> {
        self.inner.validate()
    }
}
