//! The interchange formats of the Python world: `.npy`, `.npz` and `.safetensors`.
//!
//! Each has a reader implementing [`TensorFile`] over the (usually mapped) file bytes,
//! zero copy wherever the layout allows, and writers that stream a [`TensorFile`]'s
//! tensors chunk by chunk through [`AtomicFile`](tensorfmt_core::io::AtomicFile), so a
//! large PVP file converts in bounded memory.
//!
//! Libraries used (see `ARCHITECTURE.md` for why not npyz): `safetensors` for the
//! safetensors header (parsing, validation, serialisation), `py_literal` (the parser
//! npyz and ndarray-npy use) for npy header text after our own size checks, and `zip`
//! for the npz container.

pub mod npy;
pub mod npz;
pub mod safetensors;

use std::io::Write;

use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, Order, Result, Tensor, TensorFile, TensorInfo, WriteOptions,
};

/// What can be wrong with an npy, npz or safetensors file.
///
/// Converted into [`tensorfmt_core::Error::Format`] with the format's short name.
///
/// ```
/// use tensorfmt::interop::InteropError;
/// let e = InteropError::malformed(8, "header length", "declares 70000 bytes, 12 present");
/// assert_eq!(e.to_string(), "at byte 8: header length: declares 70000 bytes, 12 present");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InteropError {
    /// The bytes contradict the format.
    #[error("at byte {offset}: {field}: {message}")]
    Malformed {
        /// Byte offset in the file (or in the archive member) where the problem is.
        offset: u64,
        /// The field concerned.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Valid for the format, but not something tensorfmt handles (structured or
    /// object dtypes, 8-bit floats, encrypted archive members, ...).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The safetensors crate rejected the header.
    #[error("{0}")]
    Safetensors(#[from] ::safetensors::SafeTensorError),
    /// The zip container of an npz file is broken.
    #[error("zip container: {0}")]
    Zip(#[from] zip::result::ZipError),
}

impl InteropError {
    /// A [`InteropError::Malformed`].
    pub fn malformed(offset: u64, field: &'static str, message: impl Into<String>) -> Self {
        InteropError::Malformed {
            offset,
            field,
            message: message.into(),
        }
    }
}

/// Named tensors held in memory, as a [`TensorFile`] (format `memory`).
///
/// The writers of this module stream any `TensorFile`; `MemoryFile` lets them (and the
/// format crates' `save_tensors`) take plain `(name, tensor)` pairs too.
///
/// ```
/// use tensorfmt::interop::MemoryFile;
/// use tensorfmt::{Order, Tensor, TensorFile};
/// let t = Tensor::from_vec(vec![1i16, 2, 3], [3], Order::RowMajor)?;
/// let f = MemoryFile::new(vec![("x".to_string(), t.clone())]);
/// assert_eq!(f.tensors()[0].name, "x");
/// assert_eq!(f.read_tensor("x")?, t);
/// # Ok::<(), tensorfmt::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryFile {
    tensors: Vec<(String, Tensor)>,
}

impl MemoryFile {
    /// Wraps named tensors (column-major ones are exported row-major on read).
    pub fn new(tensors: Vec<(String, Tensor)>) -> MemoryFile {
        MemoryFile { tensors }
    }

    fn get(&self, name: &str) -> Result<&Tensor> {
        self.tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
    }
}

impl TensorFile for MemoryFile {
    fn format(&self) -> &'static str {
        "memory"
    }
    fn kind(&self) -> String {
        "tensors".into()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        Vec::new()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.tensors
            .iter()
            .map(|(n, t)| TensorInfo::new(n.clone(), t.dtype(), t.shape().clone()))
            .collect()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.get(name)?.to_order(Order::RowMajor)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        row_chunks(self.read_tensor(name)?)
    }
}

/// Target size of one streamed piece.
const CHUNK_BYTES: usize = 16 << 20;

/// Splits a row-major tensor into zero-copy pieces of about [`CHUNK_BYTES`] along axis 0.
pub(crate) fn row_chunks<'a>(t: Tensor) -> Result<Chunks<'a>> {
    let rows = match t.dims().first() {
        Some(&r) if r > 0 && t.bytes().len() > CHUNK_BYTES => r,
        _ => return Ok(Box::new(std::iter::once(Ok(t)))),
    };
    let row_bytes = (t.bytes().len() / rows).max(1);
    let step = (CHUNK_BYTES / row_bytes).max(1);
    Ok(Box::new((0..rows).step_by(step).map(move |start| {
        t.slice_outer(start, (start + step).min(rows))
    })))
}

/// Looks up one entry of a file's tensor list.
pub(crate) fn info_of(file: &dyn TensorFile, name: &str) -> Result<TensorInfo> {
    file.tensors()
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
}

/// The dtype a writer stores for `info`: `options.dtype` when given, else its own.
pub(crate) fn stored_dtype(info: &TensorInfo, options: &WriteOptions) -> DType {
    options.dtype.unwrap_or(info.dtype)
}

/// Streams one tensor's pieces into `w` as row-major little-endian bytes of `dtype`,
/// checking that the pieces add up to exactly the listed shape.
pub(crate) fn write_chunks(
    w: &mut dyn Write,
    file: &dyn TensorFile,
    info: &TensorInfo,
    dtype: DType,
) -> Result<()> {
    let expected = info.shape.byte_len(dtype.size())?;
    let mut written = 0usize;
    for chunk in file.read_chunks(&info.name)? {
        let chunk = chunk?;
        if chunk.dtype() != info.dtype {
            return Err(Error::Invalid(format!(
                "tensor {:?}: a piece has dtype {} but the file lists {}",
                info.name,
                chunk.dtype(),
                info.dtype
            )));
        }
        let chunk = chunk.to_order(Order::RowMajor)?.cast(dtype)?;
        let bytes = chunk.bytes();
        written = written
            .checked_add(bytes.len())
            .filter(|&n| n <= expected)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "tensor {:?}: its pieces hold more than the {expected} bytes of shape {}",
                    info.name, info.shape
                ))
            })?;
        w.write_all(bytes)?;
    }
    if written != expected {
        return Err(Error::Invalid(format!(
            "tensor {:?}: its pieces hold {written} bytes, shape {} needs {expected}",
            info.name, info.shape
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_chunks_split_large_tensors_and_concatenate_back() {
        let n = (CHUNK_BYTES / 4) * 2 + 100;
        let rows = n / 4;
        let data: Vec<f32> = (0..rows * 4).map(|i| i as f32).collect();
        let t = Tensor::from_vec(data.clone(), [rows, 4], Order::RowMajor).unwrap();
        let pieces: Vec<Tensor> = row_chunks(t).unwrap().map(|c| c.unwrap()).collect();
        assert!(pieces.len() >= 3);
        let mut back = Vec::new();
        for p in &pieces {
            assert_eq!(p.dims()[1], 4);
            back.extend(p.to_vec::<f32>().unwrap());
        }
        assert_eq!(back, data);
    }

    #[test]
    fn write_chunks_rejects_pieces_that_do_not_match_the_listing() {
        struct Liar;
        impl TensorFile for Liar {
            fn format(&self) -> &'static str {
                "liar"
            }
            fn kind(&self) -> String {
                String::new()
            }
            fn header(&self) -> Vec<(String, FieldValue)> {
                Vec::new()
            }
            fn tensors(&self) -> Vec<TensorInfo> {
                vec![TensorInfo::new("x", DType::U8, [4])]
            }
            fn read_tensor(&self, _: &str) -> Result<Tensor> {
                Tensor::from_vec(vec![1u8, 2, 3], [3], Order::RowMajor)
            }
        }
        let info = info_of(&Liar, "x").unwrap();
        let mut out = Vec::new();
        let err = write_chunks(&mut out, &Liar, &info, DType::U8).unwrap_err();
        assert!(err.to_string().contains("3 bytes"), "{err}");
        assert!(matches!(info_of(&Liar, "y"), Err(Error::NoSuchTensor(_))));
    }
}
