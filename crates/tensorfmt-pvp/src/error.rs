//! [`PvpError`]: the one error type of this crate. Every variant that concerns file
//! content names the byte offset and the field involved.

/// Everything that can go wrong reading or writing a PVP file.
///
/// ```
/// use tensorfmt_pvp::{PvpError, PvpFile};
/// let err = PvpFile::from_bytes(bytes::Bytes::from_static(&[0u8; 10])).unwrap_err();
/// assert!(matches!(err, PvpError::Truncated { offset: 0, .. }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PvpError {
    /// The file ends before a structure it declares.
    #[error("truncated at byte {offset}: {what} needs {needed} bytes, {available} present")]
    Truncated {
        /// Offset where the structure starts.
        offset: u64,
        /// The structure (`header`, `frame 3`, ...).
        what: String,
        /// Bytes the structure needs.
        needed: u64,
        /// Bytes present from `offset` to the end of the file.
        available: u64,
    },
    /// A header field holds a value the format does not allow.
    #[error("bad header field {field} = {value} at byte {offset}: {reason}")]
    BadField {
        /// Byte offset of the field.
        offset: u64,
        /// Field name (as in the spec).
        field: &'static str,
        /// The value found.
        value: i64,
        /// What was expected.
        reason: String,
    },
    /// A (filetype, datatype, datasize) combination outside the spec's table.
    #[error("unsupported combination filetype {filetype}, datatype {datatype}, datasize {datasize} (header at byte {offset})")]
    BadCombination {
        /// Byte offset of the header.
        offset: u64,
        /// File type code.
        filetype: i32,
        /// Data type code.
        datatype: i32,
        /// Bytes per element.
        datasize: i32,
    },
    /// The file size does not fit the layout the header declares.
    #[error("file size {size} does not fit the layout: {reason}")]
    BadSize {
        /// File size in bytes.
        size: u64,
        /// Why.
        reason: String,
    },
    /// A sparse entry names a neuron outside `[0, nx*ny*nf)`, or repeats one.
    #[error("sparse frame {frame}: bad index {index} at byte {offset} ({reason})")]
    BadIndex {
        /// Byte offset of the entry.
        offset: u64,
        /// Frame number.
        frame: usize,
        /// The index found.
        index: u64,
        /// Out of range or duplicate.
        reason: String,
    },
    /// A negative active count in a sparse frame.
    #[error("sparse frame {frame}: negative numActive {count} at byte {offset}")]
    NegativeCount {
        /// Byte offset of the count.
        offset: u64,
        /// Frame number.
        frame: usize,
        /// The count found.
        count: i32,
    },
    /// A weight frame header that differs from frame 0, or a bad patch header.
    #[error("weight frame {frame} at byte {offset}: {reason}")]
    BadWeightFrame {
        /// Byte offset of the frame header or patch header.
        offset: u64,
        /// Frame number.
        frame: usize,
        /// What differs.
        reason: String,
    },
    /// A frame index outside the file.
    #[error("frame {index} out of range (the file has {count} frames)")]
    FrameOutOfRange {
        /// Requested index.
        index: i64,
        /// Frames in the file.
        count: usize,
    },
    /// Size arithmetic overflowed.
    #[error("size overflow computing {0}")]
    Overflow(&'static str),
    /// A limit from [`tensorfmt_core::Limits`] was exceeded.
    #[error("{what} of {value} exceeds the limit of {limit}")]
    LimitExceeded {
        /// What was limited.
        what: &'static str,
        /// Requested value.
        value: u64,
        /// Configured limit.
        limit: u64,
    },
    /// Bad input to a writer or to a conversion.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// An I/O error.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// An error from tensorfmt-core (tensor construction, file mapping).
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
}

impl tensorfmt_core::Classify for PvpError {
    fn kind(&self) -> tensorfmt_core::ErrorKind {
        use tensorfmt_core::ErrorKind;
        match self {
            PvpError::LimitExceeded { .. } => ErrorKind::Limit,
            PvpError::Io(_) => ErrorKind::Io,
            PvpError::Core(e) => e.kind(),
            _ => ErrorKind::Format,
        }
    }
    fn offset(&self) -> Option<u64> {
        match self {
            PvpError::Truncated { offset, .. }
            | PvpError::BadField { offset, .. }
            | PvpError::BadCombination { offset, .. }
            | PvpError::BadIndex { offset, .. }
            | PvpError::NegativeCount { offset, .. }
            | PvpError::BadWeightFrame { offset, .. } => Some(*offset),
            _ => None,
        }
    }
    fn field(&self) -> Option<&str> {
        match self {
            PvpError::BadField { field, .. } => Some(field),
            _ => None,
        }
    }
}

impl From<PvpError> for tensorfmt_core::Error {
    fn from(e: PvpError) -> Self {
        match e {
            PvpError::Core(inner) => inner,
            other => tensorfmt_core::Error::classified("pvp", other),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = PvpError> = std::result::Result<T, E>;

/// Checked u64 multiply naming what was computed.
pub(crate) fn mul(a: u64, b: u64, what: &'static str) -> Result<u64> {
    a.checked_mul(b).ok_or(PvpError::Overflow(what))
}

/// Checked u64 add naming what was computed.
pub(crate) fn add(a: u64, b: u64, what: &'static str) -> Result<u64> {
    a.checked_add(b).ok_or(PvpError::Overflow(what))
}

/// u64 -> usize, failing on 32-bit hosts for huge values.
pub(crate) fn to_usize(v: u64, what: &'static str) -> Result<usize> {
    usize::try_from(v).map_err(|_| PvpError::Overflow(what))
}
