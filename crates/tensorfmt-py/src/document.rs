//! [`File`]: an open document (the facade's `Document`) as seen from Python.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use tensorfmt::{Document, Error, Format};

use crate::array::Array;
use crate::errors::{raise, run};
use crate::values::{fields_to_dict, parse_format, read_options};

/// An open file: its format, header and lazy tensors. `close()` drops the document
/// (and its mapping, once no array made from it is alive).
#[pyclass(frozen, module = "tensorfmt._native")]
pub struct File {
    doc: RwLock<Option<Arc<Document>>>,
    path: PathBuf,
}

impl File {
    pub(crate) fn doc(&self, py: Python<'_>) -> PyResult<Arc<Document>> {
        let guard = self.doc.read().unwrap_or_else(|e| e.into_inner());
        guard.clone().ok_or_else(|| {
            raise(
                py,
                "ClosedError",
                &format!("{} is closed", self.path.display()),
                None,
                None,
            )
        })
    }
}

/// Opens a file (format from its content, else its extension, unless `format` is given).
#[pyfunction]
#[pyo3(signature = (path, format=None, kind=None, strict=false, frames=None, sparse=false, max_alloc=None))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn open_file(
    py: Python<'_>,
    path: PathBuf,
    format: Option<String>,
    kind: Option<String>,
    strict: bool,
    frames: Option<(usize, Option<usize>)>,
    sparse: bool,
    max_alloc: Option<u64>,
) -> PyResult<File> {
    let mut options = read_options(kind, strict, frames, sparse);
    if let Some(m) = max_alloc {
        options.limits.max_alloc = m;
    }
    let p = path.clone();
    let doc = run(py, move || {
        let format = match format {
            Some(f) => parse_format(&f)?,
            None => detect(&p)?,
        };
        open_named_kind(&p, format, options)
    })?;
    Ok(File {
        doc: RwLock::new(Some(Arc::new(doc))),
        path,
    })
}

/// Opens `path` as `format`. A Caffe file whose structure the content check cannot
/// place (a truncated `.caffemodel` no longer parses as any kind) is read again as the
/// kind its extension names, so the error says what is wrong with it (truncated at byte
/// N) instead of "not a Caffe file".
fn open_named_kind(
    path: &std::path::Path,
    format: Format,
    options: tensorfmt::ReadOptions,
) -> Result<Document, Error> {
    let unplaced = |e: &Error| match e {
        Error::Format { source, .. } => matches!(
            source.downcast_ref::<tensorfmt::CaffeError>(),
            Some(tensorfmt::CaffeError::NotCaffe(_))
        ),
        _ => false,
    };
    match tensorfmt::open_as(path, format, &options) {
        Err(e) if format == Format::Caffe && options.kind.is_none() && unplaced(&e) => {
            match tensorfmt::Target::from_path(path).and_then(|t| t.kind) {
                Some(kind) => tensorfmt::open_as(
                    path,
                    format,
                    &tensorfmt::ReadOptions {
                        kind: Some(kind),
                        ..options
                    },
                ),
                None => Err(e),
            }
        }
        other => other,
    }
}

/// The format of a file (content first, extension second), failing with what a Python
/// caller can do about it: name it with `format=`.
pub fn detect(path: &std::path::Path) -> Result<Format, Error> {
    let head = tensorfmt::io::map_file(path)?;
    let sniffed = &head[..head.len().min(tensorfmt::format::SNIFF_LEN)];
    tensorfmt::detect_bytes(sniffed, head.len() as u64, Some(path)).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL
            .iter()
            .filter(|f| f.is_enabled())
            .map(|f| f.name())
            .collect();
        Error::Invalid(format!(
            "{}: cannot tell the file format from its content or extension; \
             pass format= (one of {})",
            path.display(),
            names.join(", ")
        ))
    })
}

#[pymethods]
impl File {
    /// Format name (`pvp`, `som`, `primitiv`, `caffe`, `npy`, `npz`, `safetensors`).
    #[getter]
    fn format(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.doc(py)?.file_format().to_string())
    }

    /// File kind within the format as the identifier `to=` takes (`dense`, `sparse`,
    /// `weights`, `som-data`, `som`, `caffemodel`, `model`, ...; the format name for
    /// npy, npz and safetensors).
    #[getter]
    fn kind(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.doc(py)?.kind_id().to_string())
    }

    /// What the file is, in words (`dense activity`, `SOM (hexagonal 3x3)`, `model (V2
    /// NetParameter)`).
    #[getter]
    fn description(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.doc(py)?.kind())
    }

    /// The path given to `open`.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Header fields as a plain dict.
    #[getter]
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        fields_to_dict(py, &self.doc(py)?.header())
    }

    /// What the lenient reader accepted that the original program would not.
    #[getter]
    fn warnings(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.doc(py)?.warnings())
    }

    /// `[(name, dtype, shape), ...]` in file order, without decoding anything.
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for info in self.doc(py)?.tensors() {
            let shape = PyTuple::new(py, info.shape.dims())?;
            list.append((info.name, info.dtype.to_string(), shape))?;
        }
        Ok(list)
    }

    /// Decodes one tensor: a view of the mapped file where the layout allows.
    fn read(&self, py: Python<'_>, name: String) -> PyResult<Array> {
        let doc = self.doc(py)?;
        run(py, move || Array::from_tensor(doc.read_tensor(&name)?))
    }

    /// Statistics of one tensor, streamed (min, max, mean, sum, nonzero, nan, count).
    fn stats<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyDict>> {
        let doc = self.doc(py)?;
        // Long on a large tensor: Ctrl-C stops it between pieces.
        let s = crate::errors::run_interruptible(py, move || doc.entry(&name)?.stats())?;
        let d = PyDict::new(py);
        d.set_item("count", s.count)?;
        d.set_item("min", s.min)?;
        d.set_item("max", s.max)?;
        d.set_item("mean", s.mean)?;
        d.set_item("sum", s.sum)?;
        d.set_item("nonzero", s.nonzero)?;
        d.set_item("nan", s.nan)?;
        Ok(d)
    }

    /// Checks the whole file (checksums, every frame); raises on the first problem.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        let doc = self.doc(py)?;
        crate::errors::run_interruptible(py, move || doc.validate())
    }

    /// Writes the named tensors (all when `names` is None) to `path` as `to` (or the
    /// path's extension), streamed for npy, npz and safetensors; returns `(offered,
    /// written names, warnings)` read back from the file. `progress(done, total)` is
    /// called between pieces (bytes of the tensors as listed).
    #[pyo3(signature = (path, names=None, to=None, dtype=None, hex=false, settings=None, fsync=true, progress=None, like=None, dense=false))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn convert(
        &self,
        py: Python<'_>,
        path: PathBuf,
        names: Option<Vec<String>>,
        to: Option<String>,
        dtype: Option<String>,
        hex: bool,
        settings: Option<std::collections::BTreeMap<String, String>>,
        fsync: bool,
        progress: Option<Py<PyAny>>,
        like: Option<PathBuf>,
        dense: bool,
    ) -> PyResult<(usize, Vec<String>, Vec<String>)> {
        let doc = self.doc(py)?;
        let progress = crate::progress::PyProgress::new(progress);
        let hooked = progress.as_ref();
        let result = crate::errors::run_interruptible(py, move || {
            let target = crate::values::target(&path, to.as_deref())?;
            let options = crate::values::write_options(
                &target,
                dtype.as_deref(),
                hex,
                settings.unwrap_or_default(),
                like,
                dense,
                fsync,
            )?;
            // The facade's whole-file conversion (the CLI's too): the same file when
            // nothing changes, a legacy file's header and layout carried in safetensors
            // / npz metadata and restored from it; an empty selection is refused.
            let report = match hooked {
                Some(p) => doc.convert_with_progress(
                    &path,
                    target,
                    names.as_deref(),
                    &options,
                    &|done, total| p.call(done, total),
                )?,
                None => doc.convert_to_with(&path, target, names.as_deref(), &options)?,
            };
            Ok((report.offered, report.written, report.warnings))
        });
        crate::progress::outcome(result, progress.as_ref())
    }

    /// Drops the document. Arrays already returned stay valid (they own their bytes).
    fn close(&self) {
        let mut guard = self.doc.write().unwrap_or_else(|e| e.into_inner());
        *guard = None;
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.doc.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }
}
