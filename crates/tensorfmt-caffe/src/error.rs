//! [`CaffeError`]: the one error type of this crate. Variants name the byte offset (from
//! the start of the file) and the message path (`layer[3].blobs[0].data`) where known.

/// Everything that can go wrong reading or writing Caffe files.
///
/// ```
/// use tensorfmt_caffe::{read_blob_proto, CaffeError};
/// // Field 5 (data) declares 8 bytes but only 2 follow.
/// let err = read_blob_proto(bytes::Bytes::from_static(&[0x2a, 0x08, 0, 0])).unwrap_err();
/// assert!(matches!(err, CaffeError::Truncated { offset: 2, needed: 8, .. }));
/// let core: tensorfmt_core::Error = err.into();
/// assert!(core.to_string().starts_with("caffe: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaffeError {
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
    /// Malformed protobuf wire data (bad varint, field number 0, invalid wire type, ...).
    #[error("{path} at byte {offset}: {reason}")]
    Wire {
        /// Message path of the field.
        path: String,
        /// Byte offset of the problem.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A known field has a wire type its schema type cannot have.
    #[error(
        "{path} at byte {offset}: field {field} has wire type {wire_type}, expected {expected}"
    )]
    WireType {
        /// Message path of the field.
        path: String,
        /// Byte offset of the key.
        offset: u64,
        /// Field number.
        field: u32,
        /// Wire type found.
        wire_type: u8,
        /// Wire type(s) allowed, in words.
        expected: &'static str,
    },
    /// A blob shape Caffe would refuse: more than 32 axes, a negative dim, a dim outside
    /// i32, or a count above i32::MAX.
    #[error("{path}: invalid blob shape: {reason}")]
    Shape {
        /// Message path of the blob.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A data or diff array whose length is not the blob's count.
    #[error("{path}: {field} has {actual} values, the shape {shape} needs {expected}")]
    Count {
        /// Message path of the blob.
        path: String,
        /// `data`, `double_data`, `diff`, `double_diff`, `raw_data`.
        field: &'static str,
        /// The shape string in Caffe's format.
        shape: String,
        /// Values required.
        expected: u64,
        /// Values present.
        actual: u64,
    },
    /// A V1 layer type enum value outside Caffe's table.
    #[error("{path}: unknown V1LayerParameter layer type {value}")]
    UnknownLayerType {
        /// Message path of the layer.
        path: String,
        /// The enum value.
        value: i32,
    },
    /// A V0 layer type string outside Caffe's table.
    #[error("{path}: unknown V0 layer type {name:?}")]
    UnknownV0Type {
        /// Message path of the layer.
        path: String,
        /// The type string.
        name: String,
    },
    /// Both `layer` (V2) and `layers` (V1) are present; Caffe refuses these files.
    #[error("refusing to read inconsistent NetParameter: both layer (field 100, first at byte {v2_offset}) and layers (field 2, first at byte {v1_offset}) are present")]
    MixedLayers {
        /// Offset of the first `layer` key.
        v2_offset: u64,
        /// Offset of the first `layers` key.
        v1_offset: u64,
    },
    /// A declared size or count exceeds a [`Limits`](tensorfmt_core::Limits) cap
    /// (`max_alloc`, `max_items`, `max_rank`); raised before anything is allocated.
    #[error("{path} at byte {offset}: {what} of {value} exceeds the limit of {limit}")]
    Limit {
        /// Message path of the field.
        path: String,
        /// Byte offset of the field's key.
        offset: u64,
        /// What was capped: `allocation`, `item count` or `rank`.
        what: &'static str,
        /// Declared (or accumulated) value.
        value: u64,
        /// The cap.
        limit: u64,
    },
    /// The file is an HDF5 caffemodel (`.caffemodel.h5`), not protobuf.
    #[error("HDF5 caffemodel, not protobuf (read it with an HDF5 reader)")]
    Hdf5,
    /// The file is larger than the configured read limit (Caffe's is 2 GiB - 1).
    #[error("file of {size} bytes exceeds the read limit of {limit} bytes (Caffe's kProtoReadBytesLimit)")]
    TooLarge {
        /// File size.
        size: u64,
        /// Limit.
        limit: u64,
    },
    /// The bytes do not look like any Caffe message we know.
    #[error("not a Caffe file: {0}")]
    NotCaffe(String),
    /// A string field that is not UTF-8.
    #[error("{path} at byte {offset}: string is not valid UTF-8")]
    Utf8 {
        /// Message path of the field.
        path: String,
        /// Byte offset of the string.
        offset: u64,
    },
    /// A Blob accessor or argument outside its domain (axis, index, legacy accessor).
    #[error("{0}")]
    Blob(String),
    /// A layer name that is not in the model.
    #[error("no layer named {0:?}")]
    NoSuchLayer(String),
    /// Tensors that cannot be written as the requested Caffe file.
    #[error("cannot write: {0}")]
    Write(String),
    /// A prost decode error (for the typed topology views).
    #[error("{path}: {source}")]
    Prost {
        /// Message path.
        path: String,
        /// The prost error.
        #[source]
        source: prost::DecodeError,
    },
    /// A fork schema that cannot be used (too large, too deep, does not compile, no
    /// `caffe.NetParameter`).
    #[error("schema {path}: {reason}")]
    Schema {
        /// The schema file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A prototxt that is not valid protobuf text for the schema.
    #[error("prototxt line {line}:{column}: {message}")]
    Prototxt {
        /// 1-based line.
        line: usize,
        /// 1-based column (characters).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A prototxt field the schema does not define (a fork's field, or a typo).
    #[error("prototxt line {line}:{column}: unknown field `{field}` in {message} ({}){}", if *builtin { "not in the builtin Caffe schema".to_string() } else { format!("not in {schema}") }, if *builtin { "; if the net comes from a Caffe fork, pass the fork's caffe.proto with --proto FORK.proto" } else { "" })]
    UnknownField {
        /// The field name as written.
        field: String,
        /// The message it was written in (`LayerParameter`, ...).
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The schema used ("the builtin schema" or the fork file).
        schema: String,
        /// Whether that was the builtin schema.
        builtin: bool,
    },
    /// A net definition Caffe would refuse (or we cannot follow), at a layer.
    #[error("prototxt line {line}: {message}")]
    Net {
        /// 1-based line of the layer (0 when not tied to a line).
        line: usize,
        /// What is wrong, naming the layer.
        message: String,
    },
    /// A caffemodel field number that Caffe forks give different meanings, where
    /// neither the layer's type nor the fork the rest of the net points to says which
    /// one wrote it (see `forks.rs` and docs/caffe-layers.md, "Fork schemas").
    #[error("{path} at byte {offset}: field {number} is {candidates} in different forks; neither the layer type {layer_type:?} nor the rest of the net tells which one wrote it")]
    AmbiguousField {
        /// Message path of the field.
        path: String,
        /// Byte offset of the field's key.
        offset: u64,
        /// The field number.
        number: u32,
        /// The layer's type.
        layer_type: String,
        /// The meanings, as `name (fork)`, comma-separated.
        candidates: String,
    },
    /// Shape inference failed: every problem found, one per line.
    #[error("shape inference: {}", .0.join("; "))]
    Shapes(Vec<String>),
    /// An error from tensorfmt-core (I/O, limits, tensor construction).
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
}

impl tensorfmt_core::Classify for CaffeError {
    fn kind(&self) -> tensorfmt_core::ErrorKind {
        use tensorfmt_core::ErrorKind;
        match self {
            CaffeError::Limit { .. } => ErrorKind::Limit,
            CaffeError::Core(e) => e.kind(),
            _ => ErrorKind::Format,
        }
    }
    fn offset(&self) -> Option<u64> {
        match self {
            CaffeError::Truncated { offset, .. }
            | CaffeError::Wire { offset, .. }
            | CaffeError::WireType { offset, .. }
            | CaffeError::Limit { offset, .. }
            | CaffeError::Utf8 { offset, .. } => Some(*offset),
            // Where the first V2 layer is: the file's first conflicting field.
            CaffeError::MixedLayers { v2_offset, .. } => Some(*v2_offset),
            CaffeError::Core(e) => e.offset(),
            _ => None,
        }
    }
    fn field(&self) -> Option<&str> {
        match self {
            CaffeError::Count { field, .. } => Some(field),
            CaffeError::UnknownField { field, .. } => Some(field),
            CaffeError::Core(e) => e.field(),
            _ => None,
        }
    }
}

impl From<CaffeError> for tensorfmt_core::Error {
    fn from(e: CaffeError) -> Self {
        tensorfmt_core::Error::classified("caffe", e)
    }
}

impl From<std::io::Error> for CaffeError {
    fn from(e: std::io::Error) -> Self {
        CaffeError::Core(e.into())
    }
}

/// Result alias of this crate.
pub type Result<T, E = CaffeError> = std::result::Result<T, E>;
