//! [`OnnxError`]: the one error type of this crate. Variants name the byte offset (from
//! the start of the file) and the message path (`graph.initializer[3].raw_data`).

/// Everything that can go wrong reading or writing ONNX files.
///
/// ```
/// use tensorfmt_onnx::{read_model_file, OnnxError};
/// // ModelProto field 7 (graph) declares 16 bytes but only 2 follow.
/// let err = read_model_file(bytes::Bytes::from_static(&[0x08, 0x08, 0x3a, 0x10, 0, 0]), &Default::default()).unwrap_err();
/// assert!(matches!(err, OnnxError::Truncated { offset: 2, .. }));
/// let core: tensorfmt_core::Error = err.into();
/// assert!(core.to_string().starts_with("onnx: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// The bytes end inside a varint, a fixed-size value or a length-delimited field.
    #[error("{path} at byte {offset}: truncated {what} (needs {needed} bytes, {available} left)")]
    Truncated {
        /// Message path of the field.
        path: String,
        /// Byte offset of the field's key or length.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// Bytes required.
        needed: u64,
        /// Bytes present.
        available: u64,
    },
    /// Malformed protobuf wire data (bad varint, field number 0, invalid wire type, a
    /// known field with the wrong wire type).
    #[error("{path} at byte {offset}: {reason}")]
    Wire {
        /// Message path of the field.
        path: String,
        /// Byte offset of the problem.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A sub-message prost could not decode.
    #[error("{path} at byte {offset}: {source}")]
    Prost {
        /// Message path.
        path: String,
        /// Byte offset of the message's contents.
        offset: u64,
        /// The prost error.
        #[source]
        source: prost::DecodeError,
    },
    /// A tensor that cannot be read as a dense tensor: unsupported element type,
    /// negative dims, data count different from the shape, external data.
    #[error("{path} at byte {offset}: {reason}")]
    Tensor {
        /// Message path of the tensor (`graph.initializer[i]`).
        path: String,
        /// Byte offset of the tensor message.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A declared size or count exceeds a [`Limits`](tensorfmt_core::Limits) cap;
    /// raised before anything is allocated.
    #[error("{path} at byte {offset}: {what} of {value} exceeds the limit of {limit}")]
    Limit {
        /// Message path of the field.
        path: String,
        /// Byte offset.
        offset: u64,
        /// What was capped: `allocation`, `item count` or `rank`.
        what: &'static str,
        /// Declared (or accumulated) value.
        value: u64,
        /// The cap.
        limit: u64,
    },
    /// The bytes do not look like an ONNX model.
    #[error("not an ONNX model: {0}")]
    NotOnnx(String),
    /// Tensors that cannot be written as an ONNX file.
    #[error("cannot write: {0}")]
    Write(String),
    /// An error from tensorfmt-core (I/O, limits, tensor construction).
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
}

impl tensorfmt_core::Classify for OnnxError {
    fn kind(&self) -> tensorfmt_core::ErrorKind {
        use tensorfmt_core::ErrorKind;
        match self {
            OnnxError::Limit { .. } => ErrorKind::Limit,
            OnnxError::Core(e) => e.kind(),
            _ => ErrorKind::Format,
        }
    }
    fn offset(&self) -> Option<u64> {
        match self {
            OnnxError::Truncated { offset, .. }
            | OnnxError::Wire { offset, .. }
            | OnnxError::Prost { offset, .. }
            | OnnxError::Tensor { offset, .. }
            | OnnxError::Limit { offset, .. } => Some(*offset),
            OnnxError::Core(e) => e.offset(),
            _ => None,
        }
    }
}

impl From<OnnxError> for tensorfmt_core::Error {
    fn from(e: OnnxError) -> Self {
        match e {
            OnnxError::Core(c) => c,
            e => tensorfmt_core::Error::classified("onnx", e),
        }
    }
}

impl From<std::io::Error> for OnnxError {
    fn from(e: std::io::Error) -> Self {
        OnnxError::Core(e.into())
    }
}

/// Result alias of this crate.
pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
