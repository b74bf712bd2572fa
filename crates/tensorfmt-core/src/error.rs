//! The one error type of `tensorfmt-core`.

use crate::DType;

/// Everything that can go wrong in core operations and in the format-neutral
/// [`TensorFile`](crate::TensorFile) interface.
///
/// Format crates have their own error enums; they convert into [`Error::Format`]
/// so that the facade and the CLI can handle every format through one type.
///
/// ```
/// use tensorfmt_core::{Error, Shape};
/// let err = Shape::new([usize::MAX, 2]).numel().unwrap_err();
/// assert!(matches!(err, Error::Overflow { .. }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Arithmetic on sizes overflowed (e.g. a shape whose element count exceeds `usize`).
    #[error("size overflow while computing {what}")]
    Overflow {
        /// What was being computed.
        what: &'static str,
    },
    /// A byte buffer does not have the length that dtype and shape require.
    #[error("byte length mismatch: {dtype} {shape} needs {expected} bytes, got {actual}")]
    ByteLength {
        /// Element type.
        dtype: DType,
        /// Shape, printed.
        shape: String,
        /// Bytes required.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// A borrowed typed view was asked for bytes that are not aligned for the type.
    #[error("bytes at address {addr:#x} are not aligned to {align} for a borrowed {dtype} view (use to_vec)")]
    Misaligned {
        /// Element type requested.
        dtype: DType,
        /// Required alignment.
        align: usize,
        /// Address of the first byte.
        addr: usize,
    },
    /// A typed access used a Rust type whose dtype differs from the tensor's.
    #[error("dtype mismatch: tensor is {actual}, requested {requested}")]
    DTypeMismatch {
        /// The tensor's dtype.
        actual: DType,
        /// The dtype of the requested Rust type.
        requested: DType,
    },
    /// An unknown dtype name / descr.
    #[error("unknown dtype {0:?}")]
    UnknownDType(String),
    /// A dtype that an operation does not support.
    #[error("unsupported dtype {dtype} for {op}")]
    UnsupportedDType {
        /// The dtype.
        dtype: DType,
        /// The operation.
        op: &'static str,
    },
    /// A multi-index has the wrong rank or is out of bounds.
    #[error("index {index:?} out of bounds for shape {shape}")]
    IndexOutOfBounds {
        /// The index given.
        index: Vec<usize>,
        /// The shape, printed.
        shape: String,
    },
    /// Axes given to `permute` are not a permutation of `0..rank`.
    #[error("invalid permutation {axes:?} for rank {rank}")]
    BadPermutation {
        /// Axes given.
        axes: Vec<usize>,
        /// Rank of the tensor.
        rank: usize,
    },
    /// `reshape` to a shape with a different element count.
    #[error("cannot reshape {from} into {to}: element counts differ")]
    BadReshape {
        /// Original shape.
        from: String,
        /// Requested shape.
        to: String,
    },
    /// A named tensor does not exist in a file.
    #[error("no tensor named {0:?}")]
    NoSuchTensor(String),
    /// A size or count exceeds the configured [`Limits`](crate::Limits).
    #[error("{what} of {value} exceeds the limit of {limit}")]
    LimitExceeded {
        /// What was limited.
        what: &'static str,
        /// Requested value.
        value: u64,
        /// Configured limit.
        limit: u64,
    },
    /// A value or argument is invalid (a short sentence says why).
    #[error("{0}")]
    Invalid(String),
    /// An error from a format crate.
    #[error("{format}: {source}")]
    Format {
        /// Short format name (`pvp`, `som`, ...).
        format: &'static str,
        /// The format crate's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
        /// What kind of problem it is ([`Classify::kind`]).
        kind: ErrorKind,
        /// The byte offset it names, if any ([`Classify::offset`]).
        offset: Option<u64>,
        /// The field it names, if any ([`Classify::field`]).
        field: Option<String>,
    },
    /// An input file was truncated or rewritten by another process while it was being
    /// read: the output was not written (its temporary file is removed).
    #[error("{path}: the file changed (truncated or rewritten by another process) while being read; nothing was written")]
    InputChanged {
        /// The input that changed.
        path: String,
    },
    /// An I/O error, with the path (and the operation) when known.
    #[error("{}{source}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Io {
        /// Path involved ("" when none).
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Wraps a format crate's error, keeping what it says about itself ([`Classify`]:
    /// its kind, offset and field), so that callers (the Python exception classes)
    /// need not know each crate's enum.
    ///
    /// ```
    /// use tensorfmt_core::{Classify, Error, ErrorKind};
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("bad nx at byte 12")]
    /// struct Bad;
    /// impl Classify for Bad {
    ///     fn kind(&self) -> ErrorKind { ErrorKind::Format }
    ///     fn offset(&self) -> Option<u64> { Some(12) }
    ///     fn field(&self) -> Option<&str> { Some("nx") }
    /// }
    /// let e = Error::classified("demo", Bad);
    /// assert_eq!((e.kind(), e.offset(), e.field()), (ErrorKind::Format, Some(12), Some("nx")));
    /// ```
    pub fn classified(format: &'static str, source: impl Classify) -> Self {
        Error::Format {
            format,
            kind: source.kind(),
            offset: source.offset(),
            field: source.field().map(str::to_string),
            source: Box::new(source),
        }
    }

    /// Wraps an error from outside the format crates (PNG encoding, the Caffe -> ONNX
    /// lowering) as a format error with no offset or field.
    pub fn format(
        format: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Format {
            format,
            source: Box::new(source),
            kind: ErrorKind::Format,
            offset: None,
            field: None,
        }
    }

    /// What kind of problem this is: a format error's own kind; a limit or size
    /// overflow; I/O; an unsupported dtype; anything else counts as a format problem.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Format { kind, .. } => *kind,
            Error::LimitExceeded { .. } | Error::Overflow { .. } => ErrorKind::Limit,
            Error::Io { .. } => ErrorKind::Io,
            Error::UnsupportedDType { .. } => ErrorKind::Unsupported,
            _ => ErrorKind::Format,
        }
    }

    /// The byte offset a format error names.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Format { offset, .. } => *offset,
            _ => None,
        }
    }

    /// The field a format error names.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Format { field, .. } => field.as_deref(),
            _ => None,
        }
    }

    /// Wraps an I/O error with the path it concerns and the operation that failed
    /// (`"writing"`, `"renaming ... over"`): the message reads `writing out.npz: ...`.
    ///
    /// ```
    /// let e = tensorfmt_core::Error::io_op("out.npz", "writing", std::io::Error::other("disk full"));
    /// assert_eq!(e.to_string(), "writing out.npz: disk full");
    /// ```
    pub fn io_op(path: impl AsRef<std::path::Path>, op: &str, source: std::io::Error) -> Self {
        Error::Io {
            path: format!("{op} {}", path.as_ref().display()),
            source,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

/// Result alias for core operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io {
            path: String::new(),
            source,
        }
    }
}

/// What kind of problem an error is, whichever crate raised it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A size or count beyond [`Limits`](crate::Limits), or an overflow computing one.
    Limit,
    /// Reading or writing failed.
    Io,
    /// Valid for the format, but not something tensorfmt handles.
    Unsupported,
    /// The bytes contradict the format (or any other problem with the input).
    Format,
}

/// What a format crate's error says about itself: its [`ErrorKind`], and the byte
/// offset and field it names. Every format crate's error implements it, and
/// [`Error::classified`] keeps it when the error becomes a core [`Error`].
pub trait Classify: std::error::Error + Send + Sync + 'static {
    /// What kind of problem this is.
    fn kind(&self) -> ErrorKind;
    /// The byte offset in the file the problem is at, when known.
    fn offset(&self) -> Option<u64> {
        None
    }
    /// The field concerned, when known.
    fn field(&self) -> Option<&str> {
        None
    }
}
