//! Module-level operations: save, diff, formats, detect.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensorfmt::diff::{DiffOptions, Tolerance};
use tensorfmt::{DType, Error, Format, Order, Tensor};

use crate::document::File;
use crate::errors::run;
use crate::values::{target, write_options};

/// One array handed over by `tensorfmt.save`: the Python side has made it a native
/// byte-order, C- or Fortran-contiguous numpy array and read its address.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Item {
    name: String,
    /// The numpy array itself: never read, held so that its memory stays allocated.
    #[allow(dead_code)]
    owner: Py<PyAny>,
    address: usize,
    nbytes: usize,
    dtype: String,
    shape: Vec<usize>,
    fortran: bool,
}

/// The plain-data part of an [`Item`], which crosses into the GIL-free closure.
struct Borrowed {
    name: String,
    address: usize,
    nbytes: usize,
    dtype: String,
    shape: Vec<usize>,
    fortran: bool,
}

/// Borrows the numpy buffer of `item` as a tensor, without copying it.
fn borrow_tensor(item: &Borrowed) -> Result<Tensor, Error> {
    let dtype = item.dtype.parse::<DType>()?;
    if item.nbytes > 0 && item.address == 0 {
        return Err(Error::Invalid(format!("array {:?} has no data", item.name)));
    }
    let bytes = if item.nbytes == 0 {
        Bytes::new()
    } else {
        // SAFETY: `address`/`nbytes` are the data pointer and size of a contiguous numpy
        // array (from its `__array_interface__`) that `save` holds (`Item::owner`) until
        // the write has finished; the tensor never leaves `save` (the writers drop it
        // before `save` returns), so the `'static` borrow never outlives the array. A
        // concurrent write from another Python thread races as with any numpy C extension.
        let slice: &'static [u8] =
            unsafe { std::slice::from_raw_parts(item.address as *const u8, item.nbytes) };
        Bytes::from_static(slice)
    };
    let order = if item.fortran {
        Order::ColumnMajor
    } else {
        Order::RowMajor
    };
    Tensor::from_bytes(dtype, item.shape.clone(), order, bytes)
}

/// Writes named arrays to `path` (atomically: a temporary file renamed into place);
/// returns `(offered, written names, warnings)` read back from the file.
#[pyfunction]
#[pyo3(signature = (path, items, to=None, dtype=None, hex=false, settings=None, fsync=true, progress=None, like=None))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn save(
    py: Python<'_>,
    path: PathBuf,
    items: Vec<Item>,
    to: Option<String>,
    dtype: Option<String>,
    hex: bool,
    settings: Option<BTreeMap<String, String>>,
    fsync: bool,
    progress: Option<Py<PyAny>>,
    like: Option<PathBuf>,
) -> PyResult<(usize, Vec<String>, Vec<String>)> {
    let progress = crate::progress::PyProgress::new(progress);
    let hooked = progress.as_ref();
    let borrowed: Vec<Borrowed> = items
        .iter()
        .map(|i| Borrowed {
            name: i.name.clone(),
            address: i.address,
            nbytes: i.nbytes,
            dtype: i.dtype.clone(),
            shape: i.shape.clone(),
            fortran: i.fortran,
        })
        .collect();
    let result = crate::errors::run_interruptible(py, move || {
        let target = target(&path, to.as_deref())?;
        let options = write_options(
            &target,
            dtype.as_deref(),
            hex,
            settings.unwrap_or_default(),
            like,
            false,
            fsync,
        )?;
        let mut tensors = Vec::with_capacity(borrowed.len());
        for b in &borrowed {
            tensors.push((b.name.clone(), borrow_tensor(b)?));
        }
        match hooked {
            Some(p) => {
                tensorfmt::save_with_progress(&path, &target, &tensors, &options, &|done, total| {
                    p.call(done, total)
                })
            }
            None => tensorfmt::save_to(&path, &target, &tensors, &options),
        }
    });
    // Every borrowed tensor was dropped inside the closure; only now may the arrays go.
    drop(items);
    let report = crate::progress::outcome(result, progress.as_ref())?;
    Ok((report.offered, report.written, report.warnings))
}

/// Compares two open files tensor by tensor (opened by `open_file`, with the caller's
/// format, kind, strictness and allocation limit, and errors naming the file); returns
/// a plain dict the Python `DiffResult` wraps.
#[pyfunction]
#[pyo3(signature = (a, b, rtol=0.0, atol=0.0, max_diffs=10, allow_dtype=false, tensors_only=false))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn diff<'py>(
    py: Python<'py>,
    a: &Bound<'py, File>,
    b: &Bound<'py, File>,
    rtol: f64,
    atol: f64,
    max_diffs: usize,
    allow_dtype: bool,
    tensors_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (fa, fb) = (a.get().doc(py)?, b.get().doc(py)?);
    // Long on large files: Ctrl-C stops it between pieces.
    let report = crate::errors::run_interruptible(py, move || {
        let options = DiffOptions {
            tolerance: Tolerance { rtol, atol },
            max_diffs,
            allow_dtype,
            tensors_only,
        };
        tensorfmt::diff::compare(fa.file(), fb.file(), &options)
    })?;
    let out = PyDict::new(py);
    let tensors = PyList::empty(py);
    for t in &report.tensors {
        let d = PyDict::new(py);
        d.set_item("name", &t.name)?;
        d.set_item("name_b", &t.name_b)?;
        d.set_item("dtype_a", t.dtype_a.to_string())?;
        d.set_item("dtype_b", t.dtype_b.to_string())?;
        d.set_item("shape_a", t.shape_a.dims().to_vec())?;
        d.set_item("shape_b", t.shape_b.dims().to_vec())?;
        d.set_item("values_compared", t.values_compared)?;
        d.set_item("count", t.count)?;
        d.set_item("mismatched", t.mismatched)?;
        d.set_item("max_abs_error", t.max_abs_error)?;
        d.set_item("max_rel_error", t.max_rel_error)?;
        d.set_item("equal", t.equal)?;
        let firsts = PyList::empty(py);
        for v in &t.first_diffs {
            firsts.append((v.multi_index.clone(), v.a.to_f64(), v.b.to_f64()))?;
        }
        d.set_item("first_diffs", firsts)?;
        tensors.append(d)?;
    }
    out.set_item("tensors", tensors)?;
    let names = |infos: &[tensorfmt::TensorInfo]| -> Vec<String> {
        infos.iter().map(|i| i.name.clone()).collect()
    };
    out.set_item("only_in_a", names(&report.only_in_a))?;
    out.set_item("only_in_b", names(&report.only_in_b))?;
    out.set_item("header", report.header.clone())?;
    Ok(out)
}

/// A format's writer settings: `KEY=VALUES` and the kinds each is for.
type Settings = Vec<(String, Vec<String>)>;

/// One format: name, extensions, write kinds, compiled in, writer settings.
type FormatRow = (String, Vec<String>, Vec<String>, bool, Settings);

/// `[(name, extensions, write_kinds, enabled, settings)]` for every format.
#[pyfunction]
pub fn formats() -> Vec<FormatRow> {
    Format::ALL
        .iter()
        .map(|f| {
            (
                f.name().to_string(),
                f.extensions().iter().map(|s| s.to_string()).collect(),
                f.write_kinds().iter().map(|s| s.to_string()).collect(),
                f.is_enabled(),
                f.settings_described()
                    .into_iter()
                    .map(|(s, kinds)| (s, kinds.iter().map(|k| k.to_string()).collect()))
                    .collect(),
            )
        })
        .collect()
}

/// The format of a file, from its content first and its extension second.
#[pyfunction]
pub fn detect(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    run(py, move || Ok(crate::document::detect(&path)?.to_string()))
}
