//! Streaming PVP writers for `tensorfmt.pvp.DenseWriter`, `SparseWriter` and
//! `WeightsWriter`: each frame goes to the file as it is written, and the activity
//! writers patch the header's frame count after every frame, so a simulation killed
//! mid-run leaves a file that every PVP reader opens (the point of streaming; a whole
//! array is written atomically by `tensorfmt.save` instead).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pyo3::prelude::*;
use tensorfmt::pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};
use tensorfmt::pvp::PvpError;
use tensorfmt::Error;

use crate::errors::run;

enum Inner {
    Dense(DenseWriter<File>),
    Sparse(SparseWriter<File>),
    Weights(WeightWriter<File>),
}

/// An open streaming writer; `close()` (or dropping it) flushes and closes the file.
#[pyclass(frozen, module = "tensorfmt._native")]
pub struct PvpWriter {
    path: PathBuf,
    inner: Mutex<Option<Inner>>,
}

/// A writer's errors: bad arguments (a frame of the wrong size, an index out of range)
/// are the caller's, I/O errors name the file.
fn writer_err(path: &Path, e: PvpError) -> Error {
    match e {
        PvpError::Invalid(msg) => Error::Invalid(format!("{}: {msg}", path.display())),
        PvpError::Io(io) => Error::io_op(path, "writing", io),
        other => other.into(),
    }
}

/// A new output: refused when it exists, unless `overwrite`. An overwritten file is
/// unlinked first, so a reader that still maps it keeps its pages.
fn create(path: &Path, overwrite: bool) -> Result<File, Error> {
    if overwrite {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io_op(path, "replacing", e)),
        }
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io_op(path, "creating", e))
}

fn existing(path: &Path) -> Result<File, Error> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io_op(path, "opening for append", e))
}

/// Borrows the data of a C-contiguous, native-order numpy array handed over by the
/// Python layer as `(address, count)`.
fn borrow<'a, T: bytemuck::Pod>(address: usize, count: usize) -> Result<&'a [T], Error> {
    if count == 0 {
        return Ok(&[]);
    }
    if address == 0 || !address.is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::Invalid("array data is missing or misaligned".into()));
    }
    // SAFETY: `address` and `count` come from the `__array_interface__` of a contiguous
    // numpy array of `T` (the Python layer converts with `np.ascontiguousarray` and
    // checks the dtype) that the caller holds (`_owner` in the methods below) until
    // this call returns; the slice does not outlive the call. Alignment is checked
    // above. A concurrent write from another Python thread races as with any numpy C
    // extension.
    Ok(unsafe { std::slice::from_raw_parts(address as *const T, count) })
}

impl Drop for PvpWriter {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl PvpWriter {
    /// Finishes the writer (if open) and syncs the file; an empty file is removed.
    fn finish(&self) -> Result<(), Error> {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        let file = match taken {
            Some(Inner::Dense(w)) => w.finish(),
            Some(Inner::Sparse(w)) => w.finish(),
            Some(Inner::Weights(w)) => w.finish(),
            None => return Ok(()),
        }
        .map_err(|e| writer_err(&self.path, e))?;
        if file.metadata().map(|m| m.len() == 0).unwrap_or(false) {
            drop(file);
            return std::fs::remove_file(&self.path)
                .map_err(|e| Error::io_op(&self.path, "removing the empty", e));
        }
        file.sync_all()
            .map_err(|e| Error::io_op(&self.path, "syncing", e))
    }

    fn new(path: PathBuf, inner: Inner) -> Self {
        PvpWriter {
            path,
            inner: Mutex::new(Some(inner)),
        }
    }

    /// Runs `f` on the open writer, without the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner, &Path) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        run(py, || {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_mut() {
                Some(inner) => f(inner, &self.path),
                None => Err(Error::Invalid(format!(
                    "{}: the writer is closed",
                    self.path.display()
                ))),
            }
        })
    }
}

/// A dense activity file (filetype 4, f32): new, or continued when `append`.
#[pyfunction]
#[pyo3(signature = (path, nx, ny, nf, overwrite=true))]
pub fn pvp_dense_writer(
    py: Python<'_>,
    path: PathBuf,
    nx: usize,
    ny: usize,
    nf: usize,
    overwrite: bool,
) -> PyResult<PvpWriter> {
    let inner = run(py, || {
        // Checked before the file exists, so bad dimensions leave nothing behind.
        DenseWriter::new(std::io::Cursor::new(Vec::new()), nx, ny, nf)
            .map_err(|e| writer_err(&path, e))?;
        let file = create(&path, overwrite)?;
        DenseWriter::new(file, nx, ny, nf).map_err(|e| writer_err(&path, e))
    })?;
    Ok(PvpWriter::new(path, Inner::Dense(inner)))
}

/// A sparse activity file: binary (filetype 2) or with values (filetype 6, datatype 3,
/// or the obsolete 4 when `datatype4`).
#[pyfunction]
#[pyo3(signature = (path, nx, ny, nf, values, datatype4=false, overwrite=true))]
#[allow(clippy::too_many_arguments)]
pub fn pvp_sparse_writer(
    py: Python<'_>,
    path: PathBuf,
    nx: usize,
    ny: usize,
    nf: usize,
    values: bool,
    datatype4: bool,
    overwrite: bool,
) -> PyResult<PvpWriter> {
    fn start<W: std::io::Write + std::io::Seek>(
        w: W,
        (nx, ny, nf): (usize, usize, usize),
        values: bool,
        datatype4: bool,
    ) -> Result<SparseWriter<W>, PvpError> {
        match (values, datatype4) {
            (false, _) => SparseWriter::binary(w, nx, ny, nf),
            (true, false) => SparseWriter::values(w, nx, ny, nf),
            (true, true) => SparseWriter::values_datatype4(w, nx, ny, nf),
        }
    }
    let inner = run(py, || {
        // Checked before the file exists, so bad dimensions leave nothing behind.
        let dims = (nx, ny, nf);
        start(std::io::Cursor::new(Vec::new()), dims, values, datatype4)
            .map_err(|e| writer_err(&path, e))?;
        let file = create(&path, overwrite)?;
        start(file, dims, values, datatype4).map_err(|e| writer_err(&path, e))
    })?;
    Ok(PvpWriter::new(path, Inner::Sparse(inner)))
}

/// A weight file: shared (kernel, filetype 5) or non-shared (filetype 3); `compress`
/// stores each weight as a byte scaled between the frame's min and max.
#[pyfunction]
#[pyo3(signature = (path, shared, nx, ny, nf, margin_x, margin_y, nxp, nyp, nfp, arbors, compress, overwrite=true))]
#[allow(clippy::too_many_arguments)]
pub fn pvp_weights_writer(
    py: Python<'_>,
    path: PathBuf,
    shared: bool,
    nx: usize,
    ny: usize,
    nf: usize,
    margin_x: usize,
    margin_y: usize,
    nxp: usize,
    nyp: usize,
    nfp: usize,
    arbors: usize,
    compress: bool,
    overwrite: bool,
) -> PyResult<PvpWriter> {
    if shared && (margin_x, margin_y) != (0, 0) {
        return Err(crate::errors::to_py(
            py,
            &Error::Invalid("shared (kernel) weights have no margins".into()),
        ));
    }
    let geom = if shared {
        WeightGeometry::kernel(nx, ny, nf, nxp, nyp, nfp, arbors)
    } else {
        WeightGeometry::non_shared(nx, ny, nf, margin_x, margin_y, nxp, nyp, nfp, arbors)
    };
    let inner = run(py, || {
        // Checked before the file exists, so a bad geometry leaves nothing behind.
        WeightWriter::new(std::io::Cursor::new(Vec::new()), geom, compress)
            .map_err(|e| writer_err(&path, e))?;
        let file = create(&path, overwrite)?;
        WeightWriter::new(file, geom, compress).map_err(|e| writer_err(&path, e))
    })?;
    Ok(PvpWriter::new(path, Inner::Weights(inner)))
}

/// Continues an existing PVP file of the kind `kind` (`dense`, `sparse`, `weights`).
#[pyfunction]
pub fn pvp_append(py: Python<'_>, path: PathBuf, kind: &str) -> PyResult<PvpWriter> {
    let kind = kind.to_string();
    let inner = run(py, || {
        let file = existing(&path)?;
        let err = |e| writer_err(&path, e);
        Ok(match kind.as_str() {
            "dense" => Inner::Dense(DenseWriter::append(file).map_err(err)?),
            "sparse" => Inner::Sparse(SparseWriter::append(file).map_err(err)?),
            "weights" => Inner::Weights(WeightWriter::append(file).map_err(err)?),
            other => return Err(Error::Invalid(format!("unknown PVP writer kind {other:?}"))),
        })
    })?;
    Ok(PvpWriter::new(path, inner))
}

#[pymethods]
impl PvpWriter {
    /// `dense`, `sparse` or `weights`; `None` once closed.
    #[getter]
    fn kind(&self) -> Option<&'static str> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(|inner| match inner {
            Inner::Dense(_) => "dense",
            Inner::Sparse(_) => "sparse",
            Inner::Weights(_) => "weights",
        })
    }

    /// Frames in the file so far (an appended file's earlier frames included).
    #[getter]
    fn frames(&self) -> usize {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(Inner::Dense(w)) => w.frames(),
            Some(Inner::Sparse(w)) => w.frames(),
            Some(Inner::Weights(w)) => w.frames(),
            None => 0,
        }
    }

    /// Activity writers: `(nx, ny, nf, has_values)`. Weight writers: `(shared, nx, ny,
    /// nf, margin_x, margin_y, nxp, nyp, nfp, arbors, compress)` as a dict.
    fn geometry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let d = pyo3::types::PyDict::new(py);
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(Inner::Dense(w)) => {
                let (nx, ny, nf) = w.geometry();
                d.set_item("nx", nx)?;
                d.set_item("ny", ny)?;
                d.set_item("nf", nf)?;
            }
            Some(Inner::Sparse(w)) => {
                let (nx, ny, nf) = w.geometry();
                d.set_item("nx", nx)?;
                d.set_item("ny", ny)?;
                d.set_item("nf", nf)?;
                d.set_item("values", w.has_values())?;
            }
            Some(Inner::Weights(w)) => {
                let (g, compress) = w.geometry();
                d.set_item("shared", g.shared)?;
                d.set_item("nx", g.nx)?;
                d.set_item("ny", g.ny)?;
                d.set_item("nf", g.nf)?;
                d.set_item("margin_x", g.margin_x)?;
                d.set_item("margin_y", g.margin_y)?;
                d.set_item("nxp", g.nxp)?;
                d.set_item("nyp", g.nyp)?;
                d.set_item("nfp", g.nfp)?;
                d.set_item("arbors", g.arbors)?;
                d.set_item("numpatches", g.numpatches().unwrap_or(0))?;
                d.set_item("compress", compress)?;
            }
            None => {}
        }
        Ok(d)
    }

    /// Dense and weight frames: `count` f32 values at `address` (a contiguous array the
    /// caller holds as `_owner`).
    fn write_values(
        &self,
        py: Python<'_>,
        time: f64,
        _owner: Py<PyAny>,
        address: usize,
        count: usize,
    ) -> PyResult<()> {
        self.with(py, |inner, path| {
            let values = borrow::<f32>(address, count)?;
            match inner {
                Inner::Dense(w) => w.write_frame(time, values),
                Inner::Weights(w) => w.write_frame(time, values),
                Inner::Sparse(_) => {
                    return Err(Error::Invalid(
                        "a sparse writer takes indices and values".into(),
                    ))
                }
            }
            .map_err(|e| writer_err(path, e))
        })
    }

    /// Sparse frames: `count` u32 indices and (values files) `count` f32 values.
    #[allow(clippy::too_many_arguments)]
    fn write_sparse(
        &self,
        py: Python<'_>,
        time: f64,
        _owners: Py<PyAny>,
        indices: usize,
        count: usize,
        values: usize,
        values_count: usize,
    ) -> PyResult<()> {
        self.with(py, |inner, path| {
            let idx = borrow::<u32>(indices, count)?;
            let vals = borrow::<f32>(values, values_count)?;
            match inner {
                Inner::Sparse(w) => w.write_frame(time, idx, vals),
                _ => return Err(Error::Invalid("only a sparse writer takes indices".into())),
            }
            .map_err(|e| writer_err(path, e))
        })
    }

    /// Flushes and closes the file; later writes raise. Closing twice is harmless.
    /// A file still empty (a weight writer writes its header with the first frame, so
    /// one whose first frame was rejected has nothing) is removed: an empty file is
    /// not a PVP file.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        run(py, || self.finish())
    }

    /// Whether `close()` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}
