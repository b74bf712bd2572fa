//! [`Array`]: a tensor's bytes, shown to numpy through `__array_interface__`.

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tensorfmt::{DType, Order, Tensor};

/// A read-only tensor buffer that numpy views without copying.
///
/// `numpy.asarray(a)` makes an array over `a`'s bytes whose `.base` is `a`; `a` owns
/// the `Bytes` (for most formats a slice of the mapped file), so the mapping lives as
/// long as any array made from it. The array is read-only: the mapping is shared with
/// every other array of the same file.
#[pyclass(frozen, module = "tensorfmt._native")]
pub struct Array {
    data: Bytes,
    typestr: &'static str,
    dtype: DType,
    shape: Vec<usize>,
    order: Order,
    /// Byte strides when they are neither C nor Fortran order (PVP frames separated by
    /// their timestamps).
    strides: Option<Vec<usize>>,
}

impl Array {
    /// Wraps a tensor. bf16 has no numpy dtype: it is widened to f32 (exactly, one
    /// bulk copy), everything else is shared as is.
    pub fn from_tensor(t: Tensor) -> Result<Array, tensorfmt::Error> {
        let t = if t.dtype() == DType::BF16 {
            t.cast(DType::F32)?
        } else {
            t
        };
        Ok(Array {
            typestr: typestr(t.dtype()),
            dtype: t.dtype(),
            shape: t.dims().to_vec(),
            order: t.order(),
            strides: None,
            data: t.into_bytes(),
        })
    }

    /// A strided view: `data` starts at element 0 and `strides` (bytes) stay inside it.
    pub fn strided(data: Bytes, dtype: DType, shape: Vec<usize>, strides: Vec<usize>) -> Array {
        Array {
            data,
            typestr: typestr(dtype),
            dtype,
            shape,
            order: Order::RowMajor,
            strides: Some(strides),
        }
    }

    fn strides(&self) -> Option<Vec<usize>> {
        if let Some(s) = &self.strides {
            return Some(s.clone());
        }
        if self.order == Order::RowMajor || self.shape.len() < 2 {
            return None;
        }
        let mut strides = Vec::with_capacity(self.shape.len());
        let mut step = self.dtype.size();
        for &d in &self.shape {
            strides.push(step);
            step = step.saturating_mul(d.max(1));
        }
        Some(strides)
    }
}

/// numpy's type string for a dtype (little-endian: tensors are kept in native order
/// on the little-endian machines numpy wheels exist for).
pub fn typestr(d: DType) -> &'static str {
    match d {
        DType::F16 => "<f2",
        DType::BF16 | DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
    }
}

#[pymethods]
impl Array {
    /// numpy's array interface (version 3): shape, type, the address of the bytes
    /// (read-only) and strides for column-major tensors.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.typestr)?;
        let addr = self.data.as_ptr() as usize;
        d.set_item("data", (addr, true))?;
        match self.strides() {
            Some(s) => d.set_item("strides", PyTuple::new(py, s)?)?,
            None => d.set_item("strides", py.None())?,
        }
        Ok(d)
    }

    /// The element type as stored in the file (`bf16` stays `bf16` here, although the
    /// numpy array is f32).
    #[getter]
    fn dtype(&self) -> String {
        self.dtype.to_string()
    }

    /// Dimensions.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// Size of the bytes in memory.
    #[getter]
    fn nbytes(&self) -> usize {
        self.data.len()
    }

    fn __repr__(&self) -> String {
        format!("<tensorfmt buffer {} {:?}>", self.dtype, self.shape)
    }
}
