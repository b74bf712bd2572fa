//! Typed PVP access for `tensorfmt.pvp`: frames by index, the whole movie as one strided
//! zero-copy array, sparse frames as indices and values, weights with patch geometry.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorfmt::pvp::{OpenOptions, PvpFile};
use tensorfmt::{Error, Order, Tensor};

use crate::array::Array;
use crate::errors::run;

/// An open PVP file (dense activity, sparse activity or weights).
#[pyclass(frozen, module = "tensorfmt._native")]
pub struct Pvp {
    file: Arc<PvpFile>,
    /// The whole mapped file: frame views are slices of it.
    data: Bytes,
}

fn pvp_err(e: tensorfmt::pvp::PvpError) -> Error {
    e.into()
}

/// Opens a PVP file with the typed reader.
#[pyfunction]
#[pyo3(signature = (path, strict=false))]
pub fn open_pvp(py: Python<'_>, path: PathBuf, strict: bool) -> PyResult<Pvp> {
    let (file, data) = run(py, move || {
        let data = tensorfmt::io::map_file(&path)?;
        let opts = OpenOptions {
            strict,
            allow_truncated: !strict,
            ..OpenOptions::default()
        };
        let file = PvpFile::from_bytes_with(data.clone(), &opts).map_err(pvp_err)?;
        Ok((file, data))
    })?;
    Ok(Pvp {
        file: Arc::new(file),
        data,
    })
}

fn i64_of(x: usize) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

#[pymethods]
impl Pvp {
    /// `dense`, `sparse` or `weights`.
    #[getter]
    fn kind(&self) -> &'static str {
        match &*self.file {
            PvpFile::Dense(_) => "dense",
            PvpFile::Sparse(_) => "sparse",
            PvpFile::Weights(_) => "weights",
        }
    }

    /// The number of frames (weight files: of weight frames).
    fn frame_count(&self, py: Python<'_>) -> PyResult<usize> {
        let f = self.file.clone();
        run(py, move || f.frame_count().map_err(pvp_err))
    }

    /// `(nx, ny, nf)` of the layer: of a frame as read (a legacy MPI file's blocks
    /// assembled, where the header gives one process's block); a weight file's header.
    #[getter]
    fn geometry(&self) -> (i64, i64, i64) {
        match &*self.file {
            PvpFile::Dense(r) => {
                let [ny, nx, nf] = r.layout().frame_dims();
                (nx as i64, ny as i64, nf as i64)
            }
            PvpFile::Sparse(r) => {
                let l = r.layout();
                (l.nx as i64, l.ny as i64, l.nf as i64)
            }
            PvpFile::Weights(_) => {
                let h = self.file.header();
                (h.nx as i64, h.ny as i64, h.nf as i64)
            }
        }
    }

    /// Warnings of the lenient reader.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.file.warnings()
    }

    /// Dense files: frames `start..stop` as one `[frames, ny, nx, nf]` array. Zero
    /// copy (the frames are a strided view that skips each frame's timestamp) when the
    /// file was written by one process; one bulk copy otherwise.
    fn dense_frames(&self, py: Python<'_>, start: usize, stop: usize) -> PyResult<Array> {
        let f = self.file.clone();
        let data = self.data.clone();
        run(py, move || {
            let PvpFile::Dense(r) = &*f else {
                return Err(Error::Invalid("not a dense PVP file".into()));
            };
            if start > stop || stop > r.len() {
                return Err(Error::Invalid(format!(
                    "frames {start}..{stop} out of range (the file has {})",
                    r.len()
                )));
            }
            let (dtype, dims) = r.frame_dtype_dims();
            let frames = stop - start;
            if !r.layout().is_contiguous() || frames == 0 {
                return Array::from_tensor(r.read_range(start..stop).map_err(pvp_err)?);
            }
            let first = r.raw_frame_bytes(start).map_err(pvp_err)?;
            let stride = if frames > 1 {
                let second = r.raw_frame_bytes(start + 1).map_err(pvp_err)?;
                second.as_ptr() as usize - first.as_ptr() as usize
            } else {
                first.len()
            };
            let begin = first.as_ptr() as usize - data.as_ptr() as usize;
            let end = begin + stride * (frames - 1) + first.len();
            let mut shape = vec![frames];
            shape.extend(&dims);
            let mut strides = vec![0; shape.len()];
            let mut step = dtype.size();
            for i in (1..shape.len()).rev() {
                strides[i] = step;
                step *= shape[i];
            }
            strides[0] = stride;
            Ok(Array::strided(
                data.slice(begin..end),
                dtype,
                shape,
                strides,
            ))
        })
    }

    /// Frame `k` as a dict: `time` and, by kind, `values` (dense, a zero-copy view),
    /// `indices` and `values` (sparse: active neurons `f + nf*(x + nx*y)`), or `weights`
    /// `[arbors?, patches, nyp, nxp, nfp]` with `patches` (`nx`, `ny`, `offset` arrays).
    fn frame<'py>(&self, py: Python<'py>, k: i64) -> PyResult<Bound<'py, PyDict>> {
        enum Frame {
            Dense(f64, Tensor),
            Sparse(f64, Vec<u32>, Vec<f32>),
            Weights(f64, [f32; 2], Tensor, Vec<u16>, Vec<u16>, Vec<u32>),
        }
        let f = self.file.clone();
        let frame = run(py, move || {
            Ok(match &*f {
                PvpFile::Dense(r) => {
                    let fr = r.frame_at(k).map_err(pvp_err)?;
                    Frame::Dense(fr.time, fr.values)
                }
                PvpFile::Sparse(r) => {
                    let fr = r.frame_at(k).map_err(pvp_err)?;
                    Frame::Sparse(fr.time, fr.indices, fr.values)
                }
                PvpFile::Weights(r) => {
                    let fr = r.frame_at(k).map_err(pvp_err)?;
                    let time = fr.time();
                    let nx = fr.patches.iter().map(|p| p.nx).collect();
                    let ny = fr.patches.iter().map(|p| p.ny).collect();
                    let off = fr.patches.iter().map(|p| p.offset.unwrap_or(0)).collect();
                    Frame::Weights(time, [fr.wmin(), fr.wmax()], fr.weights, nx, ny, off)
                }
            })
        })?;
        let d = PyDict::new(py);
        let vec_array = |v: Tensor| -> PyResult<Array> {
            Array::from_tensor(v).map_err(|e| crate::errors::to_py(py, &e))
        };
        let tensor_u32 = |v: Vec<u32>| Tensor::from_vec(v.clone(), [v.len()], Order::RowMajor);
        match frame {
            Frame::Dense(t, v) => {
                d.set_item("time", t)?;
                d.set_item("values", vec_array(v)?)?;
            }
            Frame::Sparse(t, idx, vals) => {
                d.set_item("time", t)?;
                let n = idx.len();
                let idx = tensor_u32(idx).map_err(|e| crate::errors::to_py(py, &e))?;
                let vals = Tensor::from_vec(vals, [n], Order::RowMajor)
                    .map_err(|e| crate::errors::to_py(py, &e))?;
                d.set_item("indices", vec_array(idx)?)?;
                d.set_item("values", vec_array(vals)?)?;
            }
            Frame::Weights(t, [wmin, wmax], w, nx, ny, off) => {
                d.set_item("time", t)?;
                d.set_item("wmin", wmin)?;
                d.set_item("wmax", wmax)?;
                d.set_item("weights", vec_array(w)?)?;
                let n = nx.len();
                let u16s = |v: Vec<u16>| Tensor::from_vec(v, [n], Order::RowMajor);
                d.set_item(
                    "patch_nx",
                    vec_array(u16s(nx).map_err(|e| crate::errors::to_py(py, &e))?)?,
                )?;
                d.set_item(
                    "patch_ny",
                    vec_array(u16s(ny).map_err(|e| crate::errors::to_py(py, &e))?)?,
                )?;
                d.set_item(
                    "patch_offset",
                    vec_array(tensor_u32(off).map_err(|e| crate::errors::to_py(py, &e))?)?,
                )?;
            }
        }
        Ok(d)
    }

    /// Frame times (`frames` of them).
    fn times(&self, py: Python<'_>) -> PyResult<Vec<f64>> {
        let f = self.file.clone();
        run(py, move || {
            let n = f.frame_count().map_err(pvp_err)?;
            let mut out = Vec::with_capacity(n);
            for k in 0..n {
                out.push(match &*f {
                    PvpFile::Dense(r) => r.time(k).map_err(pvp_err)?,
                    PvpFile::Sparse(r) => r.time(k).map_err(pvp_err)?,
                    PvpFile::Weights(r) => r.frame_header(k).map_err(pvp_err)?.base.time,
                });
            }
            Ok(out)
        })
    }

    /// Sparse files: frames `start..stop` in CSR form `(indptr, indices, data, width)`
    /// (rows are frames, `width = nx*ny*nf`), for `scipy.sparse.csr_array`.
    fn csr(
        &self,
        py: Python<'_>,
        start: usize,
        stop: usize,
    ) -> PyResult<(Array, Array, Array, i64)> {
        let f = self.file.clone();
        run(py, move || {
            let PvpFile::Sparse(r) = &*f else {
                return Err(Error::Invalid("not a sparse PVP file".into()));
            };
            let csr = r.to_csr(start..stop).map_err(pvp_err)?;
            let rows = csr.indptr.len();
            let nnz = csr.indices.len();
            Ok((
                Array::from_tensor(Tensor::from_vec(csr.indptr, [rows], Order::RowMajor)?)?,
                Array::from_tensor(Tensor::from_vec(csr.indices, [nnz], Order::RowMajor)?)?,
                Array::from_tensor(Tensor::from_vec(csr.data, [nnz], Order::RowMajor)?)?,
                i64_of(csr.width),
            ))
        })
    }

    /// Weight files: `(shared, nxp, nyp, nfp, numpatches, arbors, patch_header_bytes)`.
    #[allow(clippy::type_complexity)]
    fn weight_geometry(
        &self,
        py: Python<'_>,
    ) -> PyResult<(bool, usize, usize, usize, usize, usize, usize)> {
        match &*self.file {
            PvpFile::Weights(r) => {
                let l = r.layout();
                Ok((
                    l.shared,
                    l.nxp,
                    l.nyp,
                    l.nfp,
                    l.numpatches,
                    l.arbors,
                    l.patch_header_bytes,
                ))
            }
            _ => Err(crate::errors::to_py(
                py,
                &Error::Invalid(format!("a {} file has no weight geometry", self.kind())),
            )),
        }
    }
}
