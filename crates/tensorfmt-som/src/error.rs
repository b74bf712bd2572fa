//! [`SomError`]: the one error type of this crate. Variants that come from file
//! contents name the field and the absolute byte offset where it sits.

/// Everything that can go wrong reading or writing PINK files.
///
/// ```
/// use tensorfmt_som::{SomError, SomFile};
/// // A data header for 3 images of 200x500 floats, with no payload.
/// let mut b = Vec::new();
/// for v in [2i32, 0, 0, 3, 0, 2, 200, 500] { b.extend_from_slice(&v.to_le_bytes()); }
/// let err = SomFile::from_bytes(b.into()).unwrap_err();
/// assert!(matches!(err, SomError::Truncated { expected: 1_200_000, actual: 0, .. }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SomError {
    /// The file ends inside the binary header.
    #[error("file ends inside the header: field {field} at byte {offset} needs 4 bytes, the file has {len}")]
    HeaderTruncated {
        /// The field being read.
        field: String,
        /// Absolute byte offset of the field.
        offset: u64,
        /// Length of the file.
        len: u64,
    },
    /// A `#` comment block that runs to the end of the file.
    #[error(
        "comment line at byte {offset} is not terminated by a newline before the end of the file"
    )]
    UnterminatedComment {
        /// Absolute byte offset of the unterminated line.
        offset: u64,
    },
    /// The payload is shorter than the header says.
    #[error("truncated {what}: payload at byte {offset} needs {expected} bytes, the file has {actual} ({complete_entries} complete entries)")]
    Truncated {
        /// What the payload holds (`data entries`, `neurons`, ...).
        what: &'static str,
        /// Absolute byte offset where the payload starts.
        offset: u64,
        /// Bytes the header asks for.
        expected: u64,
        /// Bytes present after the header.
        actual: u64,
        /// Whole entries (or neurons for SOM files) present.
        complete_entries: u64,
    },
    /// The payload size fits neither the cartesian nor the hexagonal neuron count.
    #[error("payload at byte {offset} has {actual} bytes: a cartesian {dims:?} map needs {cartesian}, a hexagonal one {hexagonal}")]
    MapSizeMismatch {
        /// Absolute byte offset where the payload starts.
        offset: u64,
        /// Map dims from the header.
        dims: Vec<usize>,
        /// Bytes for the cartesian interpretation.
        cartesian: u64,
        /// Bytes for the hexagonal interpretation.
        hexagonal: u64,
        /// Bytes present.
        actual: u64,
    },
    /// Extra bytes after the payload (an error in strict mode only; a warning otherwise).
    #[error("{count} unexpected bytes after the payload at byte {offset}")]
    TrailingBytes {
        /// Absolute offset of the first extra byte.
        offset: u64,
        /// Number of extra bytes.
        count: u64,
    },
    /// The first header integer is not 2 and no legacy interpretation fits.
    #[error("not a PINK v2 file: version field at byte {offset} is {value}; {detail}")]
    NotPink {
        /// Absolute offset of the version field.
        offset: u64,
        /// The value found.
        value: i64,
        /// Why no legacy interpretation applies.
        detail: String,
    },
    /// A legacy (pre-v2) file that fits several interpretations.
    #[error("ambiguous legacy PINK file: {} fit the {len} bytes; name the kind to read it as (data, som, mapping or rotflip: --kind on the command line, kind= in Python)", candidates.join(" or "))]
    LegacyAmbiguous {
        /// Descriptions of every interpretation that fits.
        candidates: Vec<String>,
        /// File length.
        len: u64,
    },
    /// An unknown file type code.
    #[error("file_type at byte {offset} is {value}; expected 0 (data), 1 (SOM), 2 (mapping) or 3 (rotation/flip)")]
    BadFileType {
        /// Absolute offset of the field.
        offset: u64,
        /// The value found.
        value: i32,
    },
    /// An unknown data type code.
    #[error("data_type at byte {offset} is {value}; expected 0..=9")]
    BadDataType {
        /// Absolute offset of the field.
        offset: u64,
        /// The value found.
        value: i32,
    },
    /// An unknown or unsupported layout code.
    #[error("{field} code at byte {offset} is {value}: {reason}")]
    BadLayout {
        /// Which layout (`SOM layout`, `neuron layout`, `data layout`).
        field: &'static str,
        /// Absolute offset of the code.
        offset: u64,
        /// The value found.
        value: i32,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A rank outside the accepted range.
    #[error("{field} rank at byte {offset} is {value}; expected 1..={max}")]
    BadRank {
        /// Which layout.
        field: &'static str,
        /// Absolute offset of the rank.
        offset: u64,
        /// The value found.
        value: i32,
        /// Largest accepted rank.
        max: usize,
    },
    /// A dimension that is not positive.
    #[error("{field} dim {index} at byte {offset} is {value}; dims must be > 0")]
    BadDim {
        /// Which layout.
        field: &'static str,
        /// Index of the dim.
        index: usize,
        /// Absolute offset of the dim.
        offset: u64,
        /// The value found.
        value: i32,
    },
    /// A hexagonal layout whose dims are not `[d, d]` with d odd.
    #[error("hexagonal {field} at byte {offset} has dims {dims:?}; hexagonal maps need [d, d] with d odd")]
    BadHexagonal {
        /// Which layout.
        field: &'static str,
        /// Absolute offset of the layout code.
        offset: u64,
        /// The dims found.
        dims: Vec<usize>,
    },
    /// A bad entry count.
    #[error("n_entries at byte {offset} is {value}: {reason}")]
    BadEntryCount {
        /// Absolute offset of the field.
        offset: u64,
        /// The value found.
        value: i64,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A data or SOM file storing another type than f32 (strict mode only): PINK 2.5
    /// refuses such data files and reads a SOM's payload as f32 whatever it holds.
    #[error(
        "data_type at byte {offset} is {value} ({dtype}); PINK 2.5 {}",
        if *som { "reads a SOM's payload as f32 (data type 0) whatever it holds, so it would misread this one" } else { "reads data files of f32 (data type 0) only and refuses this one" }
    )]
    NotPinkDataType {
        /// Absolute offset of the field.
        offset: u64,
        /// The value found.
        value: i32,
        /// The element type it stands for.
        dtype: tensorfmt_core::DType,
        /// A SOM (misread by PINK) rather than a data file (refused).
        som: bool,
    },
    /// A flip byte other than 0 or 1 (strict mode only).
    #[error("flip byte at byte {offset} is {value}; expected 0 or 1")]
    BadFlip {
        /// Absolute offset of the byte.
        offset: u64,
        /// The value found.
        value: u8,
    },
    /// Size arithmetic overflowed.
    #[error("size overflow computing {what} (header at byte {offset})")]
    Overflow {
        /// What was computed.
        what: &'static str,
        /// Absolute offset of the header fields involved.
        offset: u64,
    },
    /// A size from the file exceeds the reader's limits.
    #[error("{what} of {value} exceeds the limit of {limit}")]
    LimitExceeded {
        /// What was limited.
        what: &'static str,
        /// Requested value.
        value: u64,
        /// Configured limit.
        limit: u64,
    },
    /// An operation that needs another kind of file (e.g. `neuron` on a data file).
    #[error("{operation} needs a {expected} file, this is a {actual} file")]
    WrongKind {
        /// The operation.
        operation: &'static str,
        /// Kind required.
        expected: &'static str,
        /// Kind of this file.
        actual: &'static str,
    },
    /// An index out of range (entry, neuron, hexagonal cell, frame range).
    #[error("{what} {index} out of range ({len})")]
    OutOfRange {
        /// What was indexed.
        what: &'static str,
        /// The index, printed.
        index: String,
        /// The valid range, printed.
        len: String,
    },
    /// A comment line the writer cannot emit.
    #[error("comment line {line} cannot be written: {reason}")]
    BadComment {
        /// Index of the line.
        line: usize,
        /// Why.
        reason: &'static str,
    },
    /// A mapping or transform option, or an input of the mapping, that PINK refuses or
    /// that does not fit the other inputs (`num_rot 6: must be 1 or a multiple of 4`).
    #[error("{option} {value}: {reason}")]
    MapOption {
        /// The option or input (`num_rot`, `euclidean_distance_dim`, `channels`, ...).
        option: &'static str,
        /// The value given, printed.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// Arguments given to a writer or converter that do not make a valid file.
    #[error("{0}")]
    InvalidInput(String),
    /// An error from tensorfmt-core (tensor shapes, dtypes, limits).
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
    /// An I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl tensorfmt_core::Classify for SomError {
    fn kind(&self) -> tensorfmt_core::ErrorKind {
        use tensorfmt_core::ErrorKind;
        match self {
            SomError::LimitExceeded { .. } => ErrorKind::Limit,
            SomError::Io(_) => ErrorKind::Io,
            SomError::Core(e) => e.kind(),
            _ => ErrorKind::Format,
        }
    }
    fn offset(&self) -> Option<u64> {
        match self {
            SomError::HeaderTruncated { offset, .. }
            | SomError::UnterminatedComment { offset }
            | SomError::Truncated { offset, .. }
            | SomError::MapSizeMismatch { offset, .. }
            | SomError::TrailingBytes { offset, .. }
            | SomError::NotPink { offset, .. }
            | SomError::BadFileType { offset, .. }
            | SomError::BadDataType { offset, .. }
            | SomError::BadLayout { offset, .. }
            | SomError::BadRank { offset, .. }
            | SomError::BadDim { offset, .. }
            | SomError::BadHexagonal { offset, .. }
            | SomError::BadEntryCount { offset, .. }
            | SomError::BadFlip { offset, .. }
            | SomError::NotPinkDataType { offset, .. }
            | SomError::Overflow { offset, .. } => Some(*offset),
            SomError::Core(e) => e.offset(),
            _ => None,
        }
    }
    fn field(&self) -> Option<&str> {
        match self {
            SomError::HeaderTruncated { field, .. } => Some(field),
            SomError::BadLayout { field, .. }
            | SomError::BadRank { field, .. }
            | SomError::BadDim { field, .. }
            | SomError::BadHexagonal { field, .. } => Some(field),
            SomError::Core(e) => e.field(),
            _ => None,
        }
    }
}

impl From<SomError> for tensorfmt_core::Error {
    fn from(e: SomError) -> Self {
        tensorfmt_core::Error::classified("som", e)
    }
}

/// Result alias of this crate.
pub type Result<T, E = SomError> = std::result::Result<T, E>;
