//! Options passed from the facade to format crates when opening and saving
//! ([`ReadOptions`], [`WriteOptions`]).

use std::collections::BTreeMap;

use crate::{DType, Limits};

/// How a file is opened as a [`TensorFile`](crate::TensorFile).
///
/// ```
/// use tensorfmt_core::ReadOptions;
/// let o = ReadOptions { frames: Some((2, Some(5))), ..ReadOptions::default() };
/// assert_eq!(o.frame_range(10), Some(2..5));
/// assert_eq!(ReadOptions::default().frame_range(10), Some(0..10));
/// assert_eq!(o.frame_range(3), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Caps on allocation and scanning.
    pub limits: Limits,
    /// Frames / entries `A..B` (end `None` = to the end) for formats with frames.
    pub frames: Option<(usize, Option<usize>)>,
    /// Export sparse data in CSR form (`indptr`, `indices`, `data`, ...) instead of dense.
    pub sparse_csr: bool,
    /// A hint for files whose kind cannot be told from their bytes alone (e.g. legacy
    /// PINK files that fit several readings: `som`, `som-data`, `mapping`, `rotflip`).
    /// Formats without such ambiguity ignore it.
    pub kind: Option<String>,
    /// Refuse what the original reader refused, instead of reading it with a warning
    /// (e.g. PVP crash-truncated frame counts, primitiv lenient markers).
    pub strict: bool,
}

impl ReadOptions {
    /// The selected frame range within `count` frames, or `None` if it does not fit.
    pub fn frame_range(&self, count: usize) -> Option<std::ops::Range<usize>> {
        match self.frames {
            None => Some(0..count),
            Some((a, b)) => {
                let b = b.unwrap_or(count);
                (a <= b && b <= count).then_some(a..b)
            }
        }
    }
}

/// How named tensors are saved into a format (the reverse direction of `convert`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// The file kind within the format, when the format has several (`som-data`, `som`,
    /// `dense`, `sparse`, `weights`, `binaryproto`, `caffemodel`, `model`, `parameter`).
    /// `None` lets the format choose from the tensor names.
    pub kind: Option<String>,
    /// Hexagonal layout (SOM files).
    pub hex: bool,
    /// Element type to store, where the format offers a choice.
    pub dtype: Option<DType>,
    /// Further format-specific settings (`key=value` from the CLI's `--set`).
    pub extra: BTreeMap<String, String>,
    /// Skip the `fsync` before the temporary file is renamed over the target (every
    /// format's path-level save and conversion). Faster for large scratch files; the
    /// write stays atomic for other processes and crashes of this one (the target is the
    /// old file or the whole new one), but a power failure can lose the new file. Off by
    /// default.
    pub skip_fsync: bool,
}
