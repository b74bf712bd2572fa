//! Options passed from the facade to format crates when opening and saving
//! ([`ReadOptions`], [`WriteOptions`] with its typed choices [`SparseOutput`] and
//! [`Compression`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::{DType, Error, Limits, Result};

/// The setting under which carried metadata travels (safetensors `__metadata__` key,
/// npz header field, `--set` / `settings=` key): [`WriteOptions::carried`].
pub const CARRIED_KEY: &str = "tensorfmt.source";

/// How a file is opened as a [`TensorFile`](crate::TensorFile).
///
/// ```
/// use tensorfmt_core::ReadOptions;
/// let o = ReadOptions { frames: Some((2, Some(5))), ..ReadOptions::default() };
/// assert_eq!(o.frame_range(10), 2..5);
/// assert_eq!(ReadOptions::default().frame_range(10), 0..10);
/// assert_eq!(o.frame_range(3), 2..3); // the end stops at the last frame
/// assert_eq!(o.frame_range(1), 1..1); // as a Python slice: empty
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
    /// The kind the file's name suggests (its extension: PINK's `.map` names a
    /// mapping), set by the facade when it opens a path: used only to choose among
    /// readings that all fit the bytes, with a warning; never an error.
    pub name_kind: Option<String>,
    /// Refuse what the original reader refused, instead of reading it with a warning
    /// (e.g. PVP crash-truncated frame counts, primitiv lenient markers).
    pub strict: bool,
}

impl ReadOptions {
    /// The selected frame range within `count` frames, read as a Python slice reads
    /// it: both ends clamped to `count` (`0:100` of 3 frames is `0..3`, `5:6` is the
    /// empty `3..3`), an end before the start empty.
    ///
    /// ```
    /// let o = |a, b| tensorfmt_core::ReadOptions { frames: Some((a, b)), ..Default::default() };
    /// assert_eq!(o(0, Some(100)).frame_range(3), 0..3);
    /// assert_eq!(o(1, None).frame_range(3), 1..3);
    /// assert_eq!(o(5, Some(6)).frame_range(3), 3..3);
    /// assert_eq!(o(2, Some(1)).frame_range(3), 2..2);
    /// ```
    pub fn frame_range(&self, count: usize) -> std::ops::Range<usize> {
        match self.frames {
            None => 0..count,
            Some((a, b)) => {
                let a = a.min(count);
                a..b.unwrap_or(count).min(count).max(a)
            }
        }
    }
}

/// How named tensors are saved into a format (the reverse direction of `convert`).
///
/// Every choice has a typed field; `extra` holds only what a user passes through to a
/// writer (`--set KEY=VALUE`, Python's `settings=`), and [`WriteOptions::set`] sorts a
/// setting into its field.
///
/// ```
/// use tensorfmt_core::{Compression, WriteOptions};
/// let mut o = WriteOptions::default();
/// o.set("compress", "deflate")?;
/// o.set("iter", "7")?; // a Caffe solver state's, passed through
/// assert_eq!(o.compress, Compression::Deflate);
/// assert_eq!(o.extra["iter"], "7");
/// assert!(o.set("compress", "lzma").is_err());
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteOptions {
    /// The file kind within the format, when the format has several (`som-data`, `som`,
    /// `dense`, `sparse`, `weights`, `binaryproto`, `caffemodel`, `model`, `parameter`).
    /// `None` lets the format choose from the tensor names.
    pub kind: Option<String>,
    /// Hexagonal layout (SOM files).
    pub hex: bool,
    /// Element type to store, where the format offers a choice.
    pub dtype: Option<DType>,
    /// Write the tensors into the structure of this existing file of the same legacy
    /// format (CLI `--like`, Python `like=`): everything besides the tensors is kept.
    pub like: Option<PathBuf>,
    /// What becomes of a tensor its format stores sparsely (CLI `--dense`, Python
    /// `dense=`).
    pub sparse: SparseOutput,
    /// How npz members are stored (`--set compress=deflate`).
    pub compress: Compression,
    /// How many threads the streaming writers use (`--set threads=N`; `Some(1)` turns
    /// the decode/write pipeline off, the output is the same). `None`: 2 when the
    /// machine has more than one core.
    pub threads: Option<usize>,
    /// Metadata the output carries for a later conversion back (the facade's record
    /// of a legacy file's skeleton, JSON): in safetensors `__metadata__` under
    /// [`CARRIED_KEY`], in an npz outside its members. Conversions set it; `--set
    /// tensorfmt.source=...` / Python `settings=` hand one on.
    pub carried: Option<String>,
    /// Settings passed through to the writer (`key=value` from the CLI's `--set`, or
    /// Python's `settings=`, besides the typed ones): a PVP geometry, a PINK comment,
    /// a Caffe solver state's `iter`; safetensors writes them as `__metadata__`.
    pub extra: BTreeMap<String, String>,
    /// What the source file's layout implies for a writer of its own format and kind
    /// ([`TensorFile::layout_settings`](crate::TensorFile::layout_settings), set by a
    /// conversion): a writer reads a key here where `extra` has none and the key applies
    /// to what it writes; unlike `extra`, nothing here is the user's, so nothing here is
    /// refused.
    pub source_layout: BTreeMap<String, String>,
    /// Skip the `fsync` before the temporary file is renamed over the target (every
    /// format's path-level save and conversion). Faster for large scratch files; the
    /// write stays atomic for other processes and crashes of this one (the target is the
    /// old file or the whole new one), but a power failure can lose the new file. Off by
    /// default.
    pub skip_fsync: bool,
}

impl WriteOptions {
    /// Applies one `KEY=VALUE` setting (the CLI's `--set`, Python's `settings=`): the
    /// keys with a typed field set it, parsed (`compress` = `none` | `stored` | `false`
    /// | `deflate` | `true`; `threads` = a positive whole number; [`CARRIED_KEY`] = the
    /// carried metadata); any other key is the writer's, in `extra`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "compress" => self.compress = value.parse()?,
            "threads" => match value.trim().parse::<usize>() {
                Ok(n) if n >= 1 => self.threads = Some(n),
                _ => {
                    return Err(Error::Invalid(format!(
                        "threads={value:?}: expected a positive whole number (1 turns the pipeline off)"
                    )))
                }
            },
            CARRIED_KEY => self.carried = Some(value.to_string()),
            _ => {
                self.extra.insert(key.to_string(), value.to_string());
            }
        }
        Ok(())
    }

    /// Whether these options ask for nothing beyond the target format (`skip_fsync`
    /// aside): what keeping a file, or rebuilding a carried original, requires.
    ///
    /// ```
    /// use tensorfmt_core::WriteOptions;
    /// assert!(WriteOptions { skip_fsync: true, ..Default::default() }.asks_nothing());
    /// assert!(!WriteOptions { hex: true, ..Default::default() }.asks_nothing());
    /// ```
    pub fn asks_nothing(&self) -> bool {
        *self
            == WriteOptions {
                skip_fsync: self.skip_fsync,
                // The source's own layout, not something asked.
                source_layout: self.source_layout.clone(),
                ..WriteOptions::default()
            }
    }
}

/// What a write does with a tensor its format stores sparsely (a sparse PVP file's
/// `values`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SparseOutput {
    /// Keep it sparse: scipy's `save_npz` layout in npz, the CSR triple in safetensors;
    /// other targets densify it within a bound.
    #[default]
    Keep,
    /// Densify it (within the facade's bound for dense output).
    Dense,
}

/// How npz members are stored.
///
/// ```
/// use tensorfmt_core::Compression;
/// assert_eq!("deflate".parse::<Compression>()?, Compression::Deflate);
/// assert_eq!("none".parse::<Compression>()?, Compression::Stored);
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// Stored as they are (what `numpy.savez` writes; read back zero copy).
    #[default]
    Stored,
    /// Deflated (what `numpy.savez_compressed` writes).
    Deflate,
}

impl std::str::FromStr for Compression {
    type Err = Error;
    fn from_str(s: &str) -> Result<Compression> {
        match s {
            "none" | "stored" | "false" => Ok(Compression::Stored),
            "deflate" | "true" => Ok(Compression::Deflate),
            other => Err(Error::Invalid(format!(
                "unknown npz compression {other:?} (use none or deflate)"
            ))),
        }
    }
}
