//! Conversions between [`TensorProto`] and [`tensorfmt_core::Tensor`].

use bytes::Bytes;
use tensorfmt_core::{DType, Limits, Order, Tensor};

use crate::error::{OnnxError, Result};
use crate::proto::{tensor_proto::DataType, TensorProto};

/// The ONNX element type of a tensorfmt dtype.
///
/// ```
/// use tensorfmt_core::DType;
/// assert_eq!(tensorfmt_onnx::onnx_data_type(DType::F32), 1); // TensorProto.FLOAT
/// assert_eq!(tensorfmt_onnx::onnx_data_type(DType::I64), 7);
/// ```
pub fn onnx_data_type(dtype: DType) -> i32 {
    (match dtype {
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::F32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::U8 => DataType::Uint8,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::Bool => DataType::Bool,
    }) as i32
}

/// The tensorfmt dtype of an ONNX element type, `None` for types without one (strings,
/// complex, 8-bit and 4-bit floats, 4-bit integers).
///
/// ```
/// use tensorfmt_core::DType;
/// assert_eq!(tensorfmt_onnx::dtype_of(10), Some(DType::F16));
/// assert_eq!(tensorfmt_onnx::dtype_of(8), None); // STRING
/// ```
pub fn dtype_of(data_type: i32) -> Option<DType> {
    Some(match DataType::try_from(data_type).ok()? {
        DataType::Float => DType::F32,
        DataType::Uint8 => DType::U8,
        DataType::Int8 => DType::I8,
        DataType::Uint16 => DType::U16,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Bool => DType::Bool,
        DataType::Float16 => DType::F16,
        DataType::Double => DType::F64,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bfloat16 => DType::BF16,
        _ => return None,
    })
}

/// A dense tensor as an ONNX `TensorProto` with `raw_data` (little-endian, row-major;
/// the tensor's bytes are shared, not copied, when it is already row-major).
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], Order::RowMajor)?;
/// let p = tensorfmt_onnx::tensor_to_proto("w", &t)?;
/// assert_eq!((p.dims.as_slice(), p.data_type, p.raw_data.len()), (&[3i64][..], 1, 12));
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
pub fn tensor_to_proto(name: &str, t: &Tensor) -> tensorfmt_core::Result<TensorProto> {
    let t = t.to_order(Order::RowMajor)?;
    Ok(TensorProto {
        dims: t.dims().iter().map(|&d| d as i64).collect(),
        data_type: onnx_data_type(t.dtype()),
        name: name.to_string(),
        raw_data: t.bytes().clone(),
        ..Default::default()
    })
}

/// Whether a tensor keeps its data in an external file (read by `external.rs`):
/// `data_location: EXTERNAL`, as ONNX's loader and onnxruntime decide (a DEFAULT
/// tensor's stray `external_data` keys are ignored, as they ignore them).
pub(crate) fn is_external(p: &TensorProto) -> bool {
    p.data_location == 1
}

fn err(path: &str, offset: u64, reason: impl Into<String>) -> OnnxError {
    OnnxError::Tensor {
        path: path.into(),
        offset,
        reason: reason.into(),
    }
}

/// A tensor's element type, dims, element count and byte length, checked against
/// `limits` and for overflow (its data is not looked at).
pub(crate) fn shape_of(
    p: &TensorProto,
    path: &str,
    offset: u64,
    limits: &Limits,
) -> Result<(DType, Vec<usize>, u64, u64)> {
    if p.segment.is_some() {
        return Err(err(path, offset, "segmented tensors are not supported"));
    }
    let dtype = dtype_of(p.data_type).ok_or_else(|| {
        let name = DataType::try_from(p.data_type)
            .map(|d| d.as_str_name().to_string())
            .unwrap_or_else(|_| format!("unknown data_type {}", p.data_type));
        err(
            path,
            offset,
            format!("element type {name} has no tensorfmt dtype"),
        )
    })?;
    let (dims, numel) = checked_dims(&p.dims, path, offset, limits)?;
    let byte_len = numel
        .checked_mul(dtype.size() as u64)
        .ok_or_else(|| err(path, offset, "byte length overflows"))?;
    Ok((dtype, dims, numel, byte_len))
}

/// `dims` of a tensor (dense or sparse) as sizes and their element count: the rank
/// within `limits`, no negative dimension, no overflow.
fn checked_dims(
    dims: &[i64],
    path: &str,
    offset: u64,
    limits: &Limits,
) -> Result<(Vec<usize>, u64)> {
    if dims.len() > limits.max_rank {
        return Err(OnnxError::Limit {
            path: format!("{path}.dims"),
            offset,
            what: "rank",
            value: dims.len() as u64,
            limit: limits.max_rank as u64,
        });
    }
    let mut out = Vec::with_capacity(dims.len());
    let mut numel: u64 = 1;
    for &d in dims {
        if d < 0 {
            return Err(err(
                path,
                offset,
                format!("negative dimension {d} in {dims:?}"),
            ));
        }
        numel = numel
            .checked_mul(d as u64)
            .ok_or_else(|| err(path, offset, format!("element count of {dims:?} overflows")))?;
        out.push(usize::try_from(d).map_err(|_| err(path, offset, "dimension exceeds usize"))?);
    }
    Ok((out, numel))
}

/// Reads a decoded `TensorProto` as a row-major tensor: `raw_data` is shared (zero
/// copy); typed fields (`float_data`, `int32_data`, ...) are converted with one copy.
/// `path`/`offset` locate the tensor in errors.
///
/// ```
/// use tensorfmt_onnx::{tensor_from_proto, proto::TensorProto};
/// let p = TensorProto { dims: vec![2], data_type: 1, float_data: vec![1.0, 2.0], ..Default::default() };
/// let t = tensor_from_proto(&p, "t", 0, &Default::default())?;
/// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0]);
/// let bad = TensorProto { dims: vec![3], ..p };
/// assert!(tensor_from_proto(&bad, "t", 0, &Default::default()).is_err());
/// # Ok::<(), tensorfmt_onnx::OnnxError>(())
/// ```
pub fn tensor_from_proto(
    p: &TensorProto,
    path: &str,
    offset: u64,
    limits: &Limits,
) -> Result<Tensor> {
    read_tensor(p, false, path, offset, limits)
}

/// [`tensor_from_proto`] knowing whether `raw_data` was present on the wire
/// (`raw_present`: the reader sees it, a decoded message does not): a present
/// `raw_data`, even empty, is the data, as onnx reads it, whatever typed field is
/// there too.
pub(crate) fn read_tensor(
    p: &TensorProto,
    raw_present: bool,
    path: &str,
    offset: u64,
    limits: &Limits,
) -> Result<Tensor> {
    if is_external(p) {
        let location = p
            .external_data
            .iter()
            .find(|e| e.key == "location")
            .map(|e| e.value.as_str())
            .unwrap_or("?");
        return Err(err(
            path,
            offset,
            format!(
                "tensor {:?} keeps its data in the external file {location:?}, which is not read \
                 here (read the model with read_model_file_at)",
                p.name
            ),
        ));
    }
    let (dtype, dims, numel, byte_len) = shape_of(p, path, offset, limits)?;
    let count = |field: &str, n: usize| -> Result<()> {
        if n as u64 != numel {
            Err(err(
                path,
                offset,
                format!(
                    "{field} has {n} values, the shape {:?} needs {numel}",
                    p.dims
                ),
            ))
        } else {
            Ok(())
        }
    };
    if raw_present || !p.raw_data.is_empty() || numel == 0 {
        if p.raw_data.len() as u64 != byte_len {
            return Err(err(
                path,
                offset,
                format!(
                    "raw_data has {} bytes, the shape {:?} of {} needs {byte_len}",
                    p.raw_data.len(),
                    p.dims,
                    dtype.name()
                ),
            ));
        }
        if dtype == DType::Bool {
            // A BOOL byte is 0 or 1 (numpy, safetensors and onnxruntime take any other
            // byte for a bool it is not).
            if let Some(i) = p.raw_data.iter().position(|&b| b > 1) {
                return Err(err(
                    path,
                    offset,
                    format!(
                        "raw_data of BOOL tensor {:?} holds byte {} at element {i}; a BOOL is 0 or 1",
                        p.name, p.raw_data[i]
                    ),
                ));
            }
        }
        return Ok(Tensor::from_bytes(
            dtype,
            dims,
            Order::RowMajor,
            p.raw_data.clone(),
        )?);
    }
    // A typed field's values must fit the element type (they were narrowed to their low
    // bytes: INT8 300 became 44, BOOL 7 a byte 7, UINT32 2^40 zero).
    let type_name = DataType::try_from(p.data_type)
        .map(|d| d.as_str_name())
        .unwrap_or("?");
    let out_of_range = |field: &str, i: usize, v: i128| {
        err(
            path,
            offset,
            format!(
                "{field}[{i}] of {type_name} tensor {:?} is {v}, which {type_name} cannot hold",
                p.name
            ),
        )
    };
    let alloc = |n: u64| -> Result<()> {
        limits.check_alloc(n).map_err(|_| OnnxError::Limit {
            path: path.into(),
            offset,
            what: "allocation",
            value: n,
            limit: limits.max_alloc,
        })
    };
    let (field, present) = match dtype {
        DType::F32 => ("float_data", p.float_data.len()),
        DType::F64 => ("double_data", p.double_data.len()),
        DType::I64 => ("int64_data", p.int64_data.len()),
        DType::U32 | DType::U64 => ("uint64_data", p.uint64_data.len()),
        _ => ("int32_data", p.int32_data.len()),
    };
    count(field, present)?;
    alloc(byte_len)?;
    let bytes: Bytes = match dtype {
        DType::F32 => {
            Tensor::from_vec(p.float_data.clone(), dims.clone(), Order::RowMajor)?.into_bytes()
        }
        DType::F64 => {
            Tensor::from_vec(p.double_data.clone(), dims.clone(), Order::RowMajor)?.into_bytes()
        }
        DType::I64 => {
            Tensor::from_vec(p.int64_data.clone(), dims.clone(), Order::RowMajor)?.into_bytes()
        }
        DType::U32 | DType::U64 => {
            if dtype == DType::U64 {
                Tensor::from_vec(p.uint64_data.clone(), dims.clone(), Order::RowMajor)?.into_bytes()
            } else {
                let mut v: Vec<u32> = Vec::with_capacity(p.uint64_data.len());
                for (i, &x) in p.uint64_data.iter().enumerate() {
                    v.push(
                        u32::try_from(x)
                            .map_err(|_| out_of_range("uint64_data", i, i128::from(x)))?,
                    );
                }
                Tensor::from_vec(v, dims.clone(), Order::RowMajor)?.into_bytes()
            }
        }
        _ => {
            // int32_data holds I32, I16, I8, U16, U8, BOOL, F16 and BF16 (the latter two
            // as their 16-bit patterns), one value per element, little-endian narrowed.
            // The range each type's values must lie in. F16 and BF16: their bit
            // patterns, read as onnx's numpy_helper reads them (the low 16 bits; onnx's
            // own writer sign-extends some, -16384 for the pattern 0xC000, -2.0), so
            // from i16::MIN to u16::MAX.
            let (lo, hi): (i64, i64) = match dtype {
                DType::Bool => (0, 1),
                DType::I8 => (i8::MIN.into(), i8::MAX.into()),
                DType::U8 => (0, u8::MAX.into()),
                DType::I16 => (i16::MIN.into(), i16::MAX.into()),
                DType::U16 => (0, u16::MAX.into()),
                DType::F16 | DType::BF16 => (i16::MIN.into(), u16::MAX.into()),
                _ => (i32::MIN.into(), i32::MAX.into()),
            };
            let size = dtype.size();
            let mut out = Vec::with_capacity(byte_len as usize);
            for (i, &v) in p.int32_data.iter().enumerate() {
                if !(lo..=hi).contains(&i64::from(v)) {
                    return Err(out_of_range("int32_data", i, i128::from(v)));
                }
                out.extend_from_slice(&v.to_le_bytes()[..size]);
            }
            Bytes::from(out)
        }
    };
    Ok(Tensor::from_bytes(dtype, dims, Order::RowMajor, bytes)?)
}

/// A `graph.sparse_initializer`, checked at open and densified when read: `dims`
/// zeros with each of its values at its index (`indices` `[NNZ]` linear or `[NNZ,
/// rank]` coordinates, as ONNX's `numpy_helper` reads them). A file of a few bytes can
/// describe a dense tensor of gigabytes, so listing it costs nothing and reading it is
/// checked against `Limits::max_alloc` and allocated fallibly.
///
/// ```
/// use tensorfmt_onnx::proto::{GraphProto, ModelProto, SparseTensorProto, TensorProto};
/// use prost::Message;
/// let values = TensorProto { name: "s".into(), dims: vec![1], data_type: 1, float_data: vec![5.0], ..Default::default() };
/// let indices = TensorProto { dims: vec![1], data_type: 7, int64_data: vec![3], ..Default::default() };
/// let sparse = SparseTensorProto { values: Some(values), indices: Some(indices), dims: vec![40_000, 40_000] };
/// let m = ModelProto {
///     ir_version: 8,
///     graph: Some(GraphProto { sparse_initializer: vec![sparse], ..Default::default() }),
///     ..Default::default()
/// };
/// let mut opts = tensorfmt_core::ReadOptions::default();
/// opts.limits.max_alloc = 1 << 20;
/// let read = tensorfmt_onnx::read_model_file(m.encode_to_vec().into(), &opts)?;
/// let s = &read.sparse[0];
/// assert_eq!((s.name.as_str(), s.dims.as_slice(), s.nnz()), ("s", &[40_000, 40_000][..], 1));
/// assert!(s.to_dense().is_err()); // 6.4 GB: over the limit, not allocated
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SparseInitializer {
    /// Its name (see [`crate::ModelFile::initializers`] for the names given).
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The dense shape.
    pub dims: Vec<usize>,
    /// The values, 1-D, row-major.
    values: Tensor,
    /// The indices, I64, row-major, `[nnz]` or `[nnz, coords]`.
    indices: Tensor,
    /// 1 for linear indices, the rank for coordinates.
    coords: usize,
    /// Where it is, for errors.
    path: String,
    offset: u64,
    /// `Limits::max_alloc` of the read.
    max_alloc: u64,
}

impl SparseInitializer {
    /// The number of values stored.
    pub fn nnz(&self) -> usize {
        self.values.numel()
    }

    /// The dense tensor's byte length.
    pub fn dense_bytes(&self) -> u64 {
        // Checked when read: the product fits.
        self.dims
            .iter()
            .fold(self.dtype.size() as u64, |n, &d| n.saturating_mul(d as u64))
    }

    /// The name, element type and dense shape.
    pub fn info(&self) -> tensorfmt_core::TensorInfo {
        tensorfmt_core::TensorInfo::new(self.name.clone(), self.dtype, self.dims.clone())
    }

    /// Each value's linear position in the dense tensor, in order; an index outside
    /// `dims` is an error naming it.
    fn positions(&self, mut each: impl FnMut(usize, u64)) -> Result<()> {
        let (path, offset) = (self.path.as_str(), self.offset);
        let numel: u64 = self.dims.iter().map(|&d| d as u64).product();
        let ix = self.indices.bytes();
        let index =
            |i: usize| i64::from_le_bytes(ix[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        let dims = &self.dims;
        for k in 0..self.nnz() {
            let at = if self.coords == 1 && dims.len() != 1 {
                index(k)
            } else {
                // Coordinates, row-major (a rank-1 tensor's linear index is its coordinate).
                let mut linear: i64 = 0;
                for (j, &d) in dims.iter().enumerate() {
                    let c = index(k * self.coords + j.min(self.coords - 1));
                    if c < 0 || c as u64 >= d as u64 {
                        return Err(err(
                            path,
                            offset,
                            format!("index {c} of value {k} is outside dimension {j} of size {d}"),
                        ));
                    }
                    linear = linear.wrapping_mul(d as i64).wrapping_add(c);
                }
                linear
            };
            if at < 0 || at as u64 >= numel {
                return Err(err(
                    path,
                    offset,
                    format!("index {at} of value {k} is outside the {numel} elements of {dims:?}"),
                ));
            }
            each(k, at as u64);
        }
        Ok(())
    }

    /// The dense tensor, after checking its size against the `Limits::max_alloc` of
    /// the read, and allocating it fallibly: a size the system cannot give is an
    /// error, not an abort.
    pub fn to_dense(&self) -> Result<Tensor> {
        let max_alloc = self.max_alloc;
        let bytes = self.dense_bytes();
        let limit = |value| OnnxError::Limit {
            path: self.path.clone(),
            offset: self.offset,
            what: "allocation",
            value,
            limit: max_alloc,
        };
        if bytes > max_alloc || usize::try_from(bytes).is_err() {
            return Err(limit(bytes));
        }
        let mut out: Vec<u8> = Vec::new();
        // A size the system cannot give is a limit, as the Caffe and npz readers
        // report it: the caller's `max_alloc` is above what the machine has.
        out.try_reserve_exact(bytes as usize)
            .map_err(|_| limit(bytes))?;
        out.resize(bytes as usize, 0);
        let src = self.values.bytes();
        let size = self.dtype.size();
        self.positions(|k, at| {
            let at = at as usize * size;
            out[at..at + size].copy_from_slice(&src[k * size..(k + 1) * size]);
        })?;
        Ok(Tensor::from_bytes(
            self.dtype,
            self.dims.clone(),
            Order::RowMajor,
            Bytes::from(out),
        )?)
    }
}

/// A `SparseTensorProto` (a `graph.sparse_initializer`) checked as the dense tensor it
/// stands for (see [`SparseInitializer`]), not densified: an index outside `dims`, a
/// count that differs between values and indices, or values kept in an external file
/// are errors. `raw_present` says whether values and indices had `raw_data` on the
/// wire.
pub(crate) fn sparse_from_proto(
    p: &crate::proto::SparseTensorProto,
    raw_present: (bool, bool),
    path: &str,
    offset: u64,
    limits: &Limits,
) -> Result<SparseInitializer> {
    let values = p
        .values
        .as_ref()
        .ok_or_else(|| err(path, offset, "a sparse initializer without values"))?;
    let empty = TensorProto {
        data_type: DataType::Int64 as i32,
        dims: vec![0],
        ..TensorProto::default()
    };
    let indices = p.indices.as_ref().unwrap_or(&empty);
    if is_external(values) || is_external(indices) {
        return Err(err(
            path,
            offset,
            "a sparse initializer whose values or indices lie in an external file is not read",
        ));
    }
    let v = read_tensor(
        values,
        raw_present.0,
        &format!("{path}.values"),
        offset,
        limits,
    )?;
    let ix = read_tensor(
        indices,
        raw_present.1,
        &format!("{path}.indices"),
        offset,
        limits,
    )?;
    if ix.dtype() != DType::I64 {
        return Err(err(
            path,
            offset,
            format!("indices are {}, not int64", ix.dtype()),
        ));
    }
    let (dims, numel) = checked_dims(&p.dims, path, offset, limits)?;
    numel
        .checked_mul(v.dtype().size() as u64)
        .ok_or_else(|| err(path, offset, "the dense size overflows"))?;
    let nnz = v.numel();
    let coords = match ix.dims() {
        [n] if *n == nnz => 1,
        [n, r] if *n == nnz && *r == dims.len() => *r,
        other => {
            return Err(err(
                path,
                offset,
                format!(
                    "indices of shape {other:?} for {nnz} values of a rank-{} tensor \
                     ([{nnz}] or [{nnz}, {}] expected)",
                    dims.len(),
                    dims.len()
                ),
            ))
        }
    };
    if v.dims().len() != 1 {
        return Err(err(
            path,
            offset,
            format!("values of shape {:?}: 1-D expected", v.dims()),
        ));
    }
    let s = SparseInitializer {
        name: String::new(),
        dtype: v.dtype(),
        dims,
        values: v.to_order(Order::RowMajor)?,
        indices: ix.to_order(Order::RowMajor)?,
        coords,
        path: path.to_string(),
        offset,
        max_alloc: limits.max_alloc,
    };
    // Every index checked now: the file is refused at open, as before, not at read.
    s.positions(|_, _| {})?;
    Ok(s)
}
