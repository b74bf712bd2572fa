//! [`SpaceError`]: everything that can go wrong with spaces, batches and data specs.

use tensorfmt_core::DType;

/// The error type of this crate.
///
/// Variants that concern a conversion name both spaces (in their [`Display`](std::fmt::Display)
/// form); validation variants name the space and the offending axis or value.
///
/// ```
/// use tensorfmt_spaces::{Space, SpaceError, VectorSpace};
/// let err = Space::from(VectorSpace::new(3))
///     .format_as(&Space::from(VectorSpace::new(3)).origin_batch(2)?, &Space::from(VectorSpace::new(4)))
///     .unwrap_err();
/// assert!(matches!(err, SpaceError::DimMismatch { from_dim: 3, to_dim: 4, .. }));
/// assert!(err.to_string().contains("VectorSpace(dim=4, dtype=float32)"));
/// # Ok::<(), SpaceError>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpaceError {
    /// An information-destroying cast: a non-integer batch given to an integer space.
    #[error("cannot safely cast batch dtype {from} to the dtype {to} of {space}")]
    DtypeUnsafe {
        /// The space validating the batch.
        space: String,
        /// The batch's dtype.
        from: DType,
        /// The space's dtype.
        to: DType,
    },
    /// The batch is the wrong kind of value (tensor, tuple or none) or an unusable dtype.
    #[error("{space} expects {expected} as a batch, got {actual}")]
    WrongKind {
        /// The space validating the batch.
        space: String,
        /// What the space expects.
        expected: &'static str,
        /// What it got.
        actual: String,
    },
    /// A batch tensor of the wrong rank.
    #[error("{space} expects a batch of rank {expected}, got rank {actual}")]
    RankMismatch {
        /// The space validating the batch.
        space: String,
        /// Rank required.
        expected: usize,
        /// Rank given.
        actual: usize,
    },
    /// A batch tensor whose length along one axis is wrong.
    #[error(
        "{space} expects axis {axis} ({label}) of a batch to have length {expected}, got {actual}"
    )]
    ShapeMismatch {
        /// The space validating the batch.
        space: String,
        /// Axis index in the batch tensor.
        axis: usize,
        /// What the axis means (`width`, `channels`, `rows`, `cols`).
        label: &'static str,
        /// Length required.
        expected: usize,
        /// Length given.
        actual: usize,
    },
    /// An index label outside `[0, max_labels)`.
    #[error(
        "{space}: label {label} at example {row}, position {position} is outside [0, {max_labels})"
    )]
    LabelOutOfRange {
        /// The index space.
        space: String,
        /// Example (row) of the batch.
        row: usize,
        /// Position within the example.
        position: usize,
        /// The label value.
        label: i128,
        /// The space's label count.
        max_labels: usize,
    },
    /// Source and target total dimensions differ.
    #[error("{from} with total dimension {from_dim} cannot format a batch into {to}, whose total dimension is {to_dim}")]
    DimMismatch {
        /// Source space.
        from: String,
        /// Target space.
        to: String,
        /// Source total dimension (for a composite into a vector: its flat width).
        from_dim: usize,
        /// Target total dimension.
        to_dim: usize,
    },
    /// An index space formatted into a vector space of neither one-hot width.
    #[error("cannot format {from} into {to}: the vector dim must be {merge} (merged one-hots) or {concatenate} (concatenated one-hots)")]
    OneHotWidth {
        /// Source (index) space.
        from: String,
        /// Target (vector) space.
        to: String,
        /// Width of the merged (multi-hot) form: `max_labels`.
        merge: usize,
        /// Width of the concatenated form: `dim * max_labels`.
        concatenate: usize,
    },
    /// A conversion the legality matrix allows in kind, refused for these two spaces.
    #[error("cannot format {from} into {to}: {reason}")]
    Incompatible {
        /// Source space.
        from: String,
        /// Target space.
        to: String,
        /// Why.
        reason: String,
    },
    /// A conversion the legality matrix does not have.
    #[error("{from} does not know how to format a batch as {to}")]
    Unsupported {
        /// Source space.
        from: String,
        /// Target space.
        to: String,
    },
    /// Composite components of a batch report different batch sizes.
    #[error("{space}: all data-carrying components must have the same batch size, but found {first}, then {then}")]
    BatchSizeMismatch {
        /// The composite space.
        space: String,
        /// First batch size seen.
        first: usize,
        /// The disagreeing one.
        then: usize,
    },
    /// Trees that should have the same structure do not (spaces, sources, batches, mappings).
    #[error("structure mismatch: {0}")]
    StructureMismatch(String),
    /// The null space has no total dimension.
    #[error("{0} has no total dimension")]
    NoTotalDimension(String),
    /// A constructor or method argument is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A textual form (space, axes, rearrange pattern) could not be parsed.
    #[error("cannot parse {input:?}: {reason}")]
    Parse {
        /// The text.
        input: String,
        /// Why.
        reason: String,
    },
    /// A core tensor operation failed (overflow, byte length).
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
}

impl From<SpaceError> for tensorfmt_core::Error {
    /// Core errors pass through; every other space error becomes [`tensorfmt_core::Error::Invalid`]
    /// with its message.
    fn from(e: SpaceError) -> Self {
        match e {
            SpaceError::Core(e) => e,
            other => tensorfmt_core::Error::Invalid(other.to_string()),
        }
    }
}

/// Result alias for the space module.
pub type Result<T, E = SpaceError> = std::result::Result<T, E>;
