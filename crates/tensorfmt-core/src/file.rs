//! [`TensorFile`]: the one interface every format crate implements, so the facade
//! and the CLI handle any format without knowing it.

use std::fmt;

use crate::{DType, Order, Result, Shape, Tensor};

/// Name, dtype and shape of one tensor in a file, known without decoding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Export name (`values`, `conv1/0`, ...).
    pub name: String,
    /// Element type of the decoded tensor.
    pub dtype: DType,
    /// Logical shape of the decoded tensor (row-major when exported).
    pub shape: Shape,
}

impl TensorInfo {
    /// A new entry.
    pub fn new(name: impl Into<String>, dtype: DType, shape: impl Into<Shape>) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype,
            shape: shape.into(),
        }
    }
}

/// A raw header field value, for `inspect` (text and JSON).
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A flag.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float.
    Float(f64),
    /// Text.
    Text(String),
    /// A list of values.
    List(Vec<FieldValue>),
    /// Named values, in file order.
    Map(Vec<(String, FieldValue)>),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Bool(v) => write!(f, "{v}"),
            FieldValue::Int(v) => write!(f, "{v}"),
            FieldValue::UInt(v) => write!(f, "{v}"),
            FieldValue::Float(v) => write!(f, "{v}"),
            FieldValue::Text(v) => write!(f, "{v}"),
            FieldValue::List(v) => {
                f.write_str("[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
            FieldValue::Map(v) => {
                f.write_str("{")?;
                for (i, (k, x)) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {x}")?;
                }
                f.write_str("}")
            }
        }
    }
}

macro_rules! field_from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for FieldValue {
            fn from(x: $t) -> FieldValue { FieldValue::$v(x as $c) }
        }
    )*};
}
field_from!(i8 => Int as i64, i16 => Int as i64, i32 => Int as i64, i64 => Int as i64,
    u8 => UInt as u64, u16 => UInt as u64, u32 => UInt as u64, u64 => UInt as u64,
    usize => UInt as u64, f32 => Float as f64, f64 => Float as f64);

impl From<bool> for FieldValue {
    fn from(x: bool) -> FieldValue {
        FieldValue::Bool(x)
    }
}
impl From<&str> for FieldValue {
    fn from(x: &str) -> FieldValue {
        FieldValue::Text(x.to_string())
    }
}
impl From<String> for FieldValue {
    fn from(x: String) -> FieldValue {
        FieldValue::Text(x)
    }
}
impl<T: Into<FieldValue>> From<Vec<T>> for FieldValue {
    fn from(x: Vec<T>) -> FieldValue {
        FieldValue::List(x.into_iter().map(Into::into).collect())
    }
}

/// A stream of tensor pieces (see [`TensorFile::read_chunks`]).
pub type Chunks<'a> = Box<dyn Iterator<Item = Result<Tensor>> + 'a>;

/// One row (a frame) of an f32 tensor that a file stores sparsely: the flat positions
/// within the row that hold a stored value, and those values; every other position is
/// 0. As stored: positions may come unsorted, and a repeated position means its last
/// value (see [`SparseRow::normalized`]).
///
/// ```
/// use tensorfmt_core::SparseRow;
/// let row = SparseRow { indices: vec![7, 2, 7], values: vec![1.0, 2.0, 3.0] };
/// let n = row.normalized();
/// assert_eq!((n.indices, n.values), (vec![2, 7], vec![2.0, 3.0]));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseRow {
    /// Flat positions within the row.
    pub indices: Vec<u32>,
    /// One value per position.
    pub values: Vec<f32>,
}

impl SparseRow {
    /// Ascending positions, each once (the last stored value of a repeated position
    /// wins, as when the row is densified).
    pub fn normalized(self) -> SparseRow {
        if self.indices.windows(2).all(|w| w[0] < w[1]) {
            return self;
        }
        let mut pairs: Vec<(u32, f32)> = self.indices.into_iter().zip(self.values).collect();
        // Stable: equal positions keep their stored order, so the last one is kept.
        pairs.sort_by_key(|p| p.0);
        let mut out = SparseRow::default();
        for (i, v) in pairs {
            if out.indices.last() == Some(&i) {
                if let Some(last) = out.values.last_mut() {
                    *last = v;
                }
            } else {
                out.indices.push(i);
                out.values.push(v);
            }
        }
        out
    }
}

/// The rows of a sparsely stored tensor (see [`TensorFile::sparse_rows`]).
pub type SparseRows<'a> = Box<dyn Iterator<Item = Result<SparseRow>> + 'a>;

/// One regular run of a tensor's bytes in its file: pieces of `len` bytes, the first
/// at `offset`, repeated along `repeat` (`(count, stride)` levels, outermost first;
/// empty: one piece). Pieces are enumerated with the last level varying fastest, and
/// every stride is at least the extent of the levels inside it, so the pieces come in
/// increasing file order and never overlap.
///
/// ```
/// use tensorfmt_core::SourceRun;
/// // Three frames of 16 value bytes, each behind an 8-byte time: 88, 112, 136.
/// let r = SourceRun { offset: 88, len: 16, repeat: vec![(3, 24)] };
/// assert_eq!(r.byte_len(), Some(48));
/// assert_eq!(r.pieces().collect::<Vec<_>>(), [88, 112, 136]);
/// assert!(r.is_regular());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRun {
    /// File offset of the first piece.
    pub offset: u64,
    /// Bytes per piece.
    pub len: u64,
    /// `(count, stride)` per level, outermost first.
    pub repeat: Vec<(u64, u64)>,
}

impl SourceRun {
    /// One contiguous piece.
    pub fn contiguous(offset: u64, len: u64) -> SourceRun {
        SourceRun {
            offset,
            len,
            repeat: Vec::new(),
        }
    }

    /// Number of pieces (`None` on overflow).
    pub fn piece_count(&self) -> Option<u64> {
        self.repeat
            .iter()
            .try_fold(1u64, |n, &(count, _)| n.checked_mul(count))
    }

    /// Bytes of the tensor this run holds (`None` on overflow).
    pub fn byte_len(&self) -> Option<u64> {
        self.piece_count()?.checked_mul(self.len)
    }

    /// File offset just past the last piece (`offset` for an empty run; `None` on
    /// overflow).
    pub fn end(&self) -> Option<u64> {
        if self.piece_count()? == 0 || self.len == 0 {
            return Some(self.offset);
        }
        self.offset.checked_add(self.extent(0)?)
    }

    /// The span of levels `level..` (from the first byte of their first piece to the
    /// end of their last).
    fn extent(&self, level: usize) -> Option<u64> {
        let mut span = self.len;
        for &(count, stride) in self.repeat[level..].iter().rev() {
            span = stride
                .checked_mul(count.checked_sub(1)?)?
                .checked_add(span)?;
        }
        Some(span)
    }

    /// Whether the pieces come in increasing file order without overlapping: every
    /// stride (of a level repeated more than once) is at least the span of the levels
    /// inside it, and nothing overflows.
    pub fn is_regular(&self) -> bool {
        if self.byte_len().is_none() || self.end().is_none() {
            return false;
        }
        if self.piece_count() == Some(0) {
            return true;
        }
        self.repeat.iter().enumerate().all(|(i, &(count, stride))| {
            count < 2 || self.extent(i + 1).is_some_and(|inner| stride >= inner)
        })
    }

    /// The file offset of every piece, in order (for a regular run: increasing).
    pub fn pieces(&self) -> impl Iterator<Item = u64> + '_ {
        let total = self.piece_count().unwrap_or(0);
        let mut index = vec![0u64; self.repeat.len()];
        let mut k = 0u64;
        std::iter::from_fn(move || {
            if k >= total {
                return None;
            }
            let at = self
                .repeat
                .iter()
                .zip(&index)
                .fold(self.offset, |a, (&(_, stride), &i)| {
                    a.wrapping_add(stride.wrapping_mul(i))
                });
            k += 1;
            for (i, &(count, _)) in index.iter_mut().zip(&self.repeat).rev() {
                *i += 1;
                if *i < count {
                    break;
                }
                *i = 0;
            }
            Some(at)
        })
    }
}

/// Where a tensor's bytes lie in the file it was read from, as the reader that decodes
/// it knows them (see [`TensorFile::source_layout`]): the concatenation of the runs'
/// pieces, in order, is the tensor's bytes in `order`, little-endian, of the listed
/// dtype and shape, exactly as `read_tensor` returns them.
///
/// ```
/// use tensorfmt_core::{Order, SourceLayout, SourceRun};
/// let l = SourceLayout { order: Order::RowMajor, runs: vec![SourceRun::contiguous(32, 24)] };
/// assert_eq!(l.byte_len(), Some(24));
/// assert!(l.check(56, 24).is_ok());
/// assert!(l.check(50, 24).is_err()); // runs past the end of the file
/// assert!(l.check(56, 20).is_err()); // not the tensor's size
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLayout {
    /// The element order of the bytes in the file (column-major for primitiv).
    pub order: Order,
    /// The runs, in tensor order; each starts after the previous one ends.
    pub runs: Vec<SourceRun>,
}

impl SourceLayout {
    /// A tensor stored as one contiguous row-major block.
    pub fn contiguous(offset: u64, len: u64) -> SourceLayout {
        SourceLayout {
            order: Order::RowMajor,
            runs: vec![SourceRun::contiguous(offset, len)],
        }
    }

    /// The tensor bytes the layout holds (`None` on overflow).
    pub fn byte_len(&self) -> Option<u64> {
        self.runs
            .iter()
            .try_fold(0u64, |n, r| n.checked_add(r.byte_len()?))
    }

    /// Checks the layout against a file of `file_len` bytes and a tensor of
    /// `tensor_len` bytes: every run regular, in file order, inside the file, and
    /// together exactly the tensor's size. The message says what is wrong.
    pub fn check(&self, file_len: u64, tensor_len: u64) -> std::result::Result<(), String> {
        let mut after = 0u64;
        for (i, r) in self.runs.iter().enumerate() {
            if !r.is_regular() {
                return Err(format!("run {i} overlaps itself or overflows"));
            }
            let end = r.end().unwrap_or(u64::MAX);
            if r.byte_len() != Some(0) {
                if r.offset < after {
                    return Err(format!("run {i} starts before the previous one ends"));
                }
                after = end;
            }
            if end > file_len {
                return Err(format!(
                    "run {i} ends at byte {end}, past the file's {file_len} bytes"
                ));
            }
        }
        match self.byte_len() {
            Some(n) if n == tensor_len => Ok(()),
            Some(n) => Err(format!("the runs hold {n} bytes, the tensor {tensor_len}")),
            None => Err("the runs' size overflows".into()),
        }
    }
}

/// "A file's named tensors": what every format crate implements for each file kind.
///
/// Listing ([`tensors`](TensorFile::tensors)) decodes nothing; decoding happens one
/// tensor at a time ([`read_tensor`](TensorFile::read_tensor)) or one chunk at a time
/// ([`read_chunks`](TensorFile::read_chunks)) for tensors too large to hold at once.
///
/// Decoded tensors are exported in row-major (numpy) order with the shapes listed.
///
/// ```
/// use tensorfmt_core::{DType, FieldValue, Order, Result, Tensor, TensorFile, TensorInfo};
///
/// struct One(Tensor);
/// impl TensorFile for One {
///     fn format(&self) -> &'static str { "demo" }
///     fn kind(&self) -> String { "single tensor".into() }
///     fn header(&self) -> Vec<(String, FieldValue)> { vec![("version".into(), 1u32.into())] }
///     fn tensors(&self) -> Vec<TensorInfo> {
///         vec![TensorInfo::new("x", self.0.dtype(), self.0.shape().clone())]
///     }
///     fn read_tensor(&self, name: &str) -> Result<Tensor> {
///         if name == "x" { Ok(self.0.clone()) } else { Err(tensorfmt_core::Error::NoSuchTensor(name.into())) }
///     }
/// }
///
/// let f = One(Tensor::from_vec(vec![1u8, 2, 3], [3], Order::RowMajor)?);
/// assert_eq!(f.tensors()[0].dtype, DType::U8);
/// assert_eq!(f.read_chunks("x")?.count(), 1);
/// f.validate()?;
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
pub trait TensorFile: Send + Sync {
    /// Short format name: `pvp`, `som`, `primitiv`, `caffe`, `npy`, `npz`, `safetensors`.
    fn format(&self) -> &'static str;

    /// The kind of file within the format, in words for people (`dense activity`,
    /// `shared weights`, `model (V2 NetParameter)`, ...).
    fn kind(&self) -> String;

    /// The kind of file as an identifier: what `--to FORMAT:KIND` and Python's `to=`
    /// take (`dense`, `sparse`, `weights`, `som-data`, `caffemodel`, `model`, ...; the
    /// facade's `Format::kinds` lists them). The default, for formats with one kind
    /// only, is the format name.
    fn kind_id(&self) -> &'static str {
        self.format()
    }

    /// Raw header fields in file order.
    fn header(&self) -> Vec<(String, FieldValue)>;

    /// Every tensor's name, dtype and shape, without decoding anything.
    fn tensors(&self) -> Vec<TensorInfo>;

    /// Decodes one tensor, row-major, with the listed dtype and shape.
    fn read_tensor(&self, name: &str) -> Result<Tensor>;

    /// Decodes one tensor in pieces along axis 0 (frames, entries, ...): each piece is
    /// row-major with shape `[k, rest...]`, and the pieces in order concatenate to the
    /// tensor. Memory stays bounded by a few pieces. The default yields one piece.
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        let t = self.read_tensor(name)?;
        Ok(Box::new(std::iter::once(Ok(t))))
    }

    /// Summary statistics of one tensor. The default streams
    /// [`read_chunks`](TensorFile::read_chunks); formats that store a tensor sparsely
    /// override it to compute the same numbers from the stored entries, never from a
    /// densified copy (a sparse PVP movie of 4e8 neurons per frame answers in
    /// microseconds).
    fn stats(&self, name: &str) -> Result<crate::Stats> {
        streamed_stats(self, name)
    }

    /// The rows of a tensor the file stores sparsely (a sparse PVP movie, `[frames,
    /// ny, nx, nf]` f32), one [`SparseRow`] per index of axis 0, for answers that its
    /// entries can give without densifying (`diff`). `None` (the default) for tensors
    /// stored densely.
    fn sparse_rows<'a>(&'a self, _name: &str) -> Option<Result<SparseRows<'a>>> {
        None
    }

    /// Where tensor `name`'s bytes lie in the file this view was opened from, when
    /// they are stored verbatim (see [`SourceLayout`]); `None` (the default) when the
    /// reader computes, decodes or gathers them irregularly. Declared from the reader's
    /// own offsets, never found by searching; this is what lets an edited tensor go
    /// back into exactly the bytes it came from.
    fn source_layout(&self, _name: &str) -> Option<SourceLayout> {
        None
    }

    /// [`source_layout`](TensorFile::source_layout) of every tensor, in
    /// [`tensors`](TensorFile::tensors) order. The default asks tensor by tensor;
    /// formats whose lookup by name is not O(1) override it to answer in one pass.
    fn source_layouts(&self) -> Vec<Option<SourceLayout>> {
        self.tensors()
            .iter()
            .map(|i| self.source_layout(&i.name))
            .collect()
    }

    /// Warnings found while opening (e.g. a header count contradicted by the file size).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the reader repaired or guessed something (a crash-truncated frame
    /// count, a lenient marker): a conversion to the file's own format then rewrites it
    /// from its tensors, repairing it, instead of copying its bytes. A warning that
    /// only says what the tensor view leaves out (an ONNX initializer of a type numpy
    /// lacks, an npz member that is not an array) is no repair: such a file overrides
    /// this to `false`, and a copy keeps what was left out. Default: any warning.
    fn lenient(&self) -> bool {
        !self.warnings().is_empty()
    }

    /// Other files some tensors are read from (an ONNX model's external data files,
    /// as its `external_data` locations): when there are any, the file's own bytes are
    /// not the whole of it, and a copy of them alone would not read. Empty by default.
    fn external_files(&self) -> Vec<String> {
        Vec::new()
    }

    /// The writer settings (`--set` keys of this format) that this file's layout
    /// implies and its tensors alone do not tell (a PINK SOM's map rank, which splits
    /// `[4, 3, 2, 44, 44]` into a 4x3x2 map of 44x44 neurons): a conversion to the same
    /// format and kind hands them to the writer as
    /// [`WriteOptions::source_layout`](crate::WriteOptions::source_layout). Empty by default.
    fn layout_settings(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// A full structural check: by default decodes every tensor chunk by chunk.
    fn validate(&self) -> Result<()> {
        for info in self.tensors() {
            for chunk in self.read_chunks(&info.name)? {
                chunk?;
                crate::io::check_stop()?;
            }
        }
        Ok(())
    }
}

/// The statistics of a tensor streamed over its [`TensorFile::read_chunks`] pieces (the
/// default of [`TensorFile::stats`], for overrides to fall back on).
///
/// ```
/// use tensorfmt_core::{streamed_stats, Order, Tensor, TensorFile};
/// # struct One(Tensor);
/// # impl TensorFile for One {
/// #     fn format(&self) -> &'static str { "demo" }
/// #     fn kind(&self) -> String { String::new() }
/// #     fn header(&self) -> Vec<(String, tensorfmt_core::FieldValue)> { Vec::new() }
/// #     fn tensors(&self) -> Vec<tensorfmt_core::TensorInfo> { Vec::new() }
/// #     fn read_tensor(&self, _: &str) -> tensorfmt_core::Result<Tensor> { Ok(self.0.clone()) }
/// # }
/// let f = One(Tensor::from_vec(vec![1f32, -2.0, 0.0], [3], Order::RowMajor)?);
/// let s = streamed_stats(&f, "x")?;
/// assert_eq!((s.count, s.nonzero, s.sum), (3, 2, -1.0));
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
pub fn streamed_stats<F: TensorFile + ?Sized>(file: &F, name: &str) -> Result<crate::Stats> {
    let mut acc: Option<crate::Stats> = None;
    let mut released = crate::io::PageReleaser::new();
    for chunk in file.read_chunks(name)? {
        let chunk = chunk?;
        crate::io::check_stop()?;
        let s = chunk.stats();
        // Done with the piece: a slice of a mapped input gives its pages back, so the
        // resident set stays at one piece (a cached 512 MiB movie showed 517 MiB);
        // small pieces go in batches (one system call each cost more than the stats).
        released.release(chunk.bytes());
        acc = Some(match acc {
            Some(a) => a.merge(&s),
            None => s,
        });
    }
    Ok(acc.unwrap_or_default())
}
