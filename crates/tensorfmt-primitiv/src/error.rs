//! [`PrimitivError`]: every way reading or writing a primitiv file can fail.

/// An error from the primitiv reader or writer.
///
/// Reader variants carry the byte `offset` of the object that failed and the `field`
/// being read (`ver_major`, `dims`, `stat_key`, `float_configs`, ...). Their `Display`
/// reuses the text of primitiv's own message where one exists (see the spec, §9), with
/// the offset and field added, so a user of the C++ library recognises them.
///
/// ```
/// use tensorfmt_primitiv::{read_file, PrimitivError, ReaderOptions};
/// // Version 0.1 header written by a generic msgpack library: fixints, not `ce`.
/// static BYTES: [u8; 5] = [0x00, 0x01, 0xcd, 0x02, 0x00];
/// let err = read_file(bytes::Bytes::from_static(&BYTES), &ReaderOptions::default()).unwrap_err();
/// assert!(matches!(err, PrimitivError::Marker { offset: 0, observed: 0x00, .. }));
/// assert!(err.to_string().contains("expected: ce, observed: 00"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrimitivError {
    /// The file ends inside an object (primitiv: `MessagePack: Stream reached EOF.`).
    #[error("offset {offset}, {field}: MessagePack: Stream reached EOF (need {needed} more bytes, {available} left)")]
    Eof {
        /// Offset of the object being read.
        offset: u64,
        /// Field being read.
        field: &'static str,
        /// Bytes the object needs from `offset`.
        needed: u64,
        /// Bytes present from `offset`.
        available: u64,
    },
    /// An object has the wrong MessagePack marker (uint32 not `ce`, float not `ca`,
    /// or a str/bin/array/map of another type).
    #[error("offset {offset}, {field}: MessagePack: Next object does not have a correct type. expected: {expected}, observed: {observed:02x}")]
    Marker {
        /// Offset of the marker byte.
        offset: u64,
        /// Field being read.
        field: &'static str,
        /// What was expected: `ce`, `ca`, `str`, `bin`, `array` or `map`.
        expected: &'static str,
        /// The marker byte found.
        observed: u8,
    },
    /// The header version is not 0.1.
    #[error("offset {offset}: File version mismatched. required: 0.1, observed: {major}.{minor}")]
    Version {
        /// Offset of `ver_major`.
        offset: u64,
        /// Major version found.
        major: u32,
        /// Minor version found.
        minor: u32,
    },
    /// The data type is not one of the five known codes.
    #[error("offset {offset}: unknown data type {observed:x} (known: 0, 100, 200, 300, 400)")]
    UnknownDataType {
        /// Offset of `data_type`.
        offset: u64,
        /// Code found.
        observed: u32,
    },
    /// The data type differs from the one the caller asked for.
    #[error(
        "offset {offset}: Data type mismatched. required: {required:x}, observed: {observed:x}"
    )]
    DataTypeMismatch {
        /// Offset of `data_type`.
        offset: u64,
        /// Code required.
        required: u32,
        /// Code found.
        observed: u32,
    },
    /// A tensor's `bin` length is not 4 × volume × batch.
    #[error("offset {offset}, {field}: Shape and data length mismatched. shape.size() * sizeof(float): {expected} != data.size(): {actual}")]
    LengthMismatch {
        /// Offset of the `bin` object.
        offset: u64,
        /// Field being read.
        field: &'static str,
        /// Bytes the shape requires.
        expected: u64,
        /// Bytes in the `bin`.
        actual: u64,
    },
    /// A shape has more than 8 dims (counted before trailing 1s are dropped).
    #[error(
        "offset {offset}, {field}: Exceeds dimension depth limit. depth: {depth} > MAX_DEPTH: 8"
    )]
    TooManyDims {
        /// Offset of the dims array.
        offset: u64,
        /// Field being read or written.
        field: &'static str,
        /// Number of dims.
        depth: u64,
    },
    /// A dim or the batch is zero.
    #[error("offset {offset}, {field}: Invalid shape: {dims:?}x{batch} (primitiv's dims and batch are at least 1)")]
    InvalidShape {
        /// Offset of the dims array.
        offset: u64,
        /// Field being read or written.
        field: &'static str,
        /// Dims found.
        dims: Vec<u32>,
        /// Batch found.
        batch: u32,
    },
    /// A parameter's value has a batch other than 1.
    #[error(
        "offset {offset}: The batch size of the parameter should be 1. shape: {dims:?}x{batch}"
    )]
    ParameterBatch {
        /// Offset of the value tensor.
        offset: u64,
        /// Dims of the value.
        dims: Vec<u32>,
        /// Batch of the value.
        batch: u32,
    },
    /// A size computed from the file overflows.
    #[error("offset {offset}, {field}: size overflow")]
    Overflow {
        /// Offset of the object.
        offset: u64,
        /// Field being read.
        field: &'static str,
    },
    /// A declared count or size exceeds a [`Limits`](tensorfmt_core::Limits) cap.
    #[error("offset {offset}, {field}: {value} exceeds the limit of {limit}")]
    Limit {
        /// Offset of the object.
        offset: u64,
        /// Field being read.
        field: &'static str,
        /// Declared value.
        value: u64,
        /// The cap.
        limit: u64,
    },
    /// A model entry with an empty key path (no model can hold such a parameter).
    #[error("offset {offset}: model entry with an empty key")]
    EmptyKey {
        /// Offset of the key array.
        offset: u64,
    },
    /// Loading into a model: the file has parameters the model lacks (primitiv:
    /// `Model does not have a parameter with name: ...`). Nothing was loaded.
    #[error("Model does not have a parameter with name: {}", names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", "))]
    UnknownParameters {
        /// The dotted names of the unknown parameters.
        names: Vec<String>,
    },
    /// Pedantic mode: bytes after the last object (primitiv ignores them).
    #[error("offset {offset}: {count} trailing bytes after the data")]
    TrailingBytes {
        /// Offset of the first trailing byte.
        offset: u64,
        /// Number of trailing bytes.
        count: u64,
    },
    /// Pedantic mode: a key repeated in a model or a map (primitiv: last model entry wins,
    /// first map entry wins).
    #[error("offset {offset}, {field}: duplicate key {key}")]
    DuplicateKey {
        /// Offset of the repeated key.
        offset: u64,
        /// Field being read.
        field: &'static str,
        /// The key, printed.
        key: String,
    },
    /// Pedantic mode: a key that is not UTF-8 (primitiv accepts raw bytes).
    #[error("offset {offset}, {field}: key {key} is not UTF-8")]
    NonUtf8Key {
        /// Offset of the key.
        offset: u64,
        /// Field being read.
        field: &'static str,
        /// The key with invalid bytes escaped.
        key: String,
    },
    /// A value cannot be written in the format (a short sentence says why).
    #[error("cannot write primitiv data: {0}")]
    Unwritable(String),
    /// Named tensors do not fit the requested primitiv file kind.
    #[error("{0}")]
    BadTensors(String),
    /// An error from tensorfmt-core (I/O, tensor layout).
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
}

impl tensorfmt_core::Classify for PrimitivError {
    fn kind(&self) -> tensorfmt_core::ErrorKind {
        use tensorfmt_core::ErrorKind;
        match self {
            PrimitivError::Limit { .. } => ErrorKind::Limit,
            PrimitivError::Core(e) => e.kind(),
            _ => ErrorKind::Format,
        }
    }
    fn offset(&self) -> Option<u64> {
        use PrimitivError as E;
        match self {
            E::Eof { offset, .. }
            | E::Marker { offset, .. }
            | E::Version { offset, .. }
            | E::UnknownDataType { offset, .. }
            | E::DataTypeMismatch { offset, .. }
            | E::LengthMismatch { offset, .. }
            | E::TooManyDims { offset, .. }
            | E::InvalidShape { offset, .. }
            | E::ParameterBatch { offset, .. }
            | E::Overflow { offset, .. }
            | E::Limit { offset, .. }
            | E::EmptyKey { offset }
            | E::TrailingBytes { offset, .. }
            | E::DuplicateKey { offset, .. }
            | E::NonUtf8Key { offset, .. } => Some(*offset),
            E::Core(e) => e.offset(),
            _ => None,
        }
    }
    fn field(&self) -> Option<&str> {
        use PrimitivError as E;
        match self {
            E::Eof { field, .. }
            | E::Marker { field, .. }
            | E::LengthMismatch { field, .. }
            | E::TooManyDims { field, .. }
            | E::InvalidShape { field, .. }
            | E::Overflow { field, .. }
            | E::Limit { field, .. }
            | E::DuplicateKey { field, .. }
            | E::NonUtf8Key { field, .. } => Some(field),
            E::Core(e) => e.field(),
            _ => None,
        }
    }
}

impl From<PrimitivError> for tensorfmt_core::Error {
    fn from(e: PrimitivError) -> Self {
        tensorfmt_core::Error::classified("primitiv", e)
    }
}

impl From<std::io::Error> for PrimitivError {
    fn from(e: std::io::Error) -> Self {
        PrimitivError::Core(e.into())
    }
}

/// Result alias for this crate.
pub type Result<T, E = PrimitivError> = std::result::Result<T, E>;
