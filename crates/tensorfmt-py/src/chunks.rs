//! `describe_remote`: a file's zarr chunk references from ranged reads, for
//! `tensorfmt.virtual` (VirtualiZarr's parser protocol).
//!
//! The description runs in Rust without the GIL ([`tensorfmt::ranged`]): each format's
//! structure walker asks for the byte ranges it needs and the ordinary reader declares
//! the layouts. The ranges come from Python callables (an obstore store's
//! `get_range` / `get_ranges`), called back with the GIL held for the call only.
//!
//! Why callbacks and not rounds (Python fetching what Rust asked for, then calling
//! again): the structure of a protobuf or MessagePack file is a chain (each length
//! says where the next key is), so a round protocol would either rerun the walk from
//! the start every round (quadratic in the layers of a Caffe net) or need a resumable
//! state machine per format. With a callback each walker is ordinary sequential code;
//! independent ranges (a weight file's frame headers) still go out in one
//! `read_ranges` call, which obstore fetches concurrently.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use tensorfmt::ranged::{
    chunk_grid, describe_remote as describe, Placement, RangeSource, RemoteOptions,
};
use tensorfmt::{Error, Order, Tensor};

use crate::array::Array;
use crate::errors::run;
use crate::values::{fields_to_dict, parse_format};

/// The Python callables that read ranges, and the first exception they raised (kept
/// so the caller sees it, not a translation).
struct PySource {
    read_range: Py<PyAny>,
    read_ranges: Option<Py<PyAny>>,
    raised: Arc<Mutex<Option<PyErr>>>,
}

impl PySource {
    fn fail(&self, e: PyErr) -> Error {
        let message = format!("the range reader raised {e}");
        *self.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        Error::Invalid(message)
    }
}

fn to_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    let b = obj.cast::<PyBytes>().map_err(PyErr::from)?;
    Ok(Bytes::copy_from_slice(b.as_bytes()))
}

impl RangeSource for PySource {
    fn read_range(&mut self, offset: u64, len: u64) -> tensorfmt::Result<Bytes> {
        Python::attach(|py| {
            self.read_range
                .call1(py, (offset, len))
                .and_then(|o| to_bytes(o.bind(py)))
        })
        .map_err(|e| self.fail(e))
    }

    fn read_ranges(&mut self, ranges: &[(u64, u64)]) -> tensorfmt::Result<Vec<Bytes>> {
        let Some(many) = &self.read_ranges else {
            return ranges.iter().map(|&(o, l)| self.read_range(o, l)).collect();
        };
        let starts: Vec<u64> = ranges.iter().map(|r| r.0).collect();
        let lengths: Vec<u64> = ranges.iter().map(|r| r.1).collect();
        Python::attach(|py| -> PyResult<Vec<Bytes>> {
            let out = many.call1(py, (starts, lengths))?;
            let list = out.bind(py).cast::<PyList>().map_err(PyErr::from)?.clone();
            list.iter().map(|o| to_bytes(&o)).collect()
        })
        .map_err(|e| self.fail(e))
    }
}

/// Describes the object of `size` bytes that `read_range(offset, length) -> bytes`
/// reads (and `read_ranges(starts, lengths) -> [bytes]`, when given, for batches):
/// `{format, kind, description, header, warnings, file_len, fetched, requests,
/// tensors}`, each tensor `{name, dtype, shape, zarr_dtype, not_virtual}` plus, when
/// its bytes are a regular chunk grid, `{chunk_shape, grid_shape, order, chunk_len,
/// offsets, big_endian}` (`offsets` a uint64 array over the grid, C order), and
/// `{file, file_to_end}` when those offsets are in another file beside this one (an
/// ONNX model's external data: a relative location, checked by its text).
/// `fortran_columns` cuts column-major tensors into single columns (chunks that need
/// no transpose codec) instead of chunks of about `chunk_bytes`.
#[pyfunction]
#[pyo3(signature = (read_range, size, name=None, format=None, kind=None, strict=false, read_ranges=None, block=None, max_fetch=None, chunk_bytes=8 << 20, fortran_columns=false))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn describe_remote<'py>(
    py: Python<'py>,
    read_range: Py<PyAny>,
    size: u64,
    name: Option<String>,
    format: Option<String>,
    kind: Option<String>,
    strict: bool,
    read_ranges: Option<Py<PyAny>>,
    block: Option<u64>,
    max_fetch: Option<u64>,
    chunk_bytes: u64,
    fortran_columns: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let raised = Arc::new(Mutex::new(None));
    let mut source = PySource {
        read_range,
        read_ranges,
        raised: raised.clone(),
    };
    let mut options = RemoteOptions::default();
    options.read.kind = kind;
    options.read.strict = strict;
    if let Some(b) = block {
        options.block = b;
    }
    if let Some(m) = max_fetch {
        options.max_fetch = m;
    }
    let outcome = run(py, move || {
        let format = format.as_deref().map(parse_format).transpose()?;
        let path = name.as_deref().map(std::path::Path::new);
        let v = describe(&mut source, size, path, format, &options)?;
        let grids: Vec<_> = v
            .tensors
            .iter()
            .map(|t| match &t.placement {
                Placement::Bytes { layout, .. } | Placement::Beside { layout, .. } => {
                    let dims = t.info.shape.dims();
                    let size = t.info.dtype.size();
                    let target = match dims.first() {
                        Some(&rows) if fortran_columns && layout.order == Order::ColumnMajor => {
                            (rows as u64).saturating_mul(size as u64)
                        }
                        _ => chunk_bytes,
                    };
                    chunk_grid(dims, size, layout, t.frame_axis, target.max(1)).map(Some)
                }
                Placement::NotVirtual(_) => Ok(None),
            })
            .collect();
        Ok((v, grids))
    });
    let (v, grids) = match (
        outcome,
        raised.lock().unwrap_or_else(|p| p.into_inner()).take(),
    ) {
        (Err(_), Some(e)) => return Err(e),
        (r, _) => r?,
    };
    let out = PyDict::new(py);
    out.set_item("format", &v.format)?;
    out.set_item("kind", &v.kind)?;
    out.set_item("description", &v.description)?;
    out.set_item("header", fields_to_dict(py, &v.header)?)?;
    out.set_item("warnings", &v.warnings)?;
    out.set_item("file_len", v.file_len)?;
    out.set_item("fetched", v.fetched)?;
    out.set_item("requests", v.requests)?;
    let tensors = PyList::empty(py);
    for (t, grid) in v.tensors.into_iter().zip(grids) {
        let d = PyDict::new(py);
        d.set_item("name", &t.info.name)?;
        d.set_item("dtype", t.info.dtype.to_string())?;
        d.set_item("shape", PyTuple::new(py, t.info.shape.dims())?)?;
        let zarr = tensorfmt::ranged::zarr_data_type(t.info.dtype);
        d.set_item("zarr_dtype", zarr)?;
        let reason = match (&t.placement, &grid) {
            (Placement::NotVirtual(r), _) => Some(r.clone()),
            (_, Err(r)) => Some(format!("an irregular layout: {r}")),
            _ if zarr.is_none() => Some(format!("zarr has no {} data type", t.info.dtype)),
            _ => None,
        };
        let (big_endian, beside) = match &t.placement {
            Placement::Bytes { big_endian, .. } => (*big_endian, None),
            Placement::Beside { file, .. } => (false, Some(file)),
            Placement::NotVirtual(_) => (false, None),
        };
        if let (None, Ok(Some(g))) = (&reason, grid) {
            d.set_item("chunk_shape", PyTuple::new(py, &g.chunk_shape)?)?;
            d.set_item("grid_shape", PyTuple::new(py, &g.grid_shape)?)?;
            d.set_item(
                "order",
                if g.order == Order::ColumnMajor {
                    "F"
                } else {
                    "C"
                },
            )?;
            d.set_item("chunk_len", g.chunk_len)?;
            let n = g.offsets.len();
            let offsets = Tensor::from_vec(g.offsets, [n], Order::RowMajor)
                .map_err(|e| crate::errors::to_py(py, &e))?;
            let array = Array::from_tensor(offsets).map_err(|e| crate::errors::to_py(py, &e))?;
            d.set_item("offsets", Py::new(py, array)?)?;
            d.set_item("big_endian", big_endian)?;
            if let Some(f) = beside {
                d.set_item("file", &f.location)?;
                d.set_item("file_to_end", f.to_end)?;
            }
        }
        d.set_item("not_virtual", reason)?;
        tensors.append(d)?;
    }
    out.set_item("tensors", tensors)?;
    Ok(out)
}

/// The format a file's first bytes (`head`, up to 4 KiB) show for a file of `size`
/// bytes, from content alone (`None`: no format claims them), as `detect` reads it
/// before falling back to the extension.
#[pyfunction]
pub fn detect_content(head: &[u8], size: u64) -> Option<&'static str> {
    tensorfmt::detect_bytes(head, size, None).map(|f| f.name())
}

/// The file an ONNX model's external data `location` names beside it in `model_dir`,
/// checked under the reader's rules (`tensorfmt_onnx::external_data_file`): what the
/// parser applies to a local model, so that it references only what `load` reads.
#[pyfunction]
pub fn external_data_file(
    py: Python<'_>,
    model_dir: std::path::PathBuf,
    location: String,
) -> PyResult<String> {
    run(py, move || {
        tensorfmt::onnx::external_data_file(&model_dir, &location)
            .map(|p| p.display().to_string())
            .map_err(Error::from)
    })
}
