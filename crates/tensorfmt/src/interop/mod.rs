//! The interchange formats of the Python world: `.npy`, `.npz` and `.safetensors`.
//!
//! Each has a reader implementing [`TensorFile`] over the (usually mapped) file bytes,
//! zero copy wherever the layout allows, and writers that stream a [`TensorFile`]'s
//! tensors chunk by chunk through [`AtomicFile`](tensorfmt_core::io::AtomicFile), so a
//! large PVP file converts in bounded memory.
//!
//! Libraries used (see `ARCHITECTURE.md` for why not npyz): `safetensors` for the
//! safetensors header (parsing, validation, serialisation), `py_literal` (the parser
//! npyz and ndarray-npy use) for npy header text after our own size checks, and `zip`
//! for the npz container.

pub mod npy;
pub mod npz;
pub mod safetensors;
pub mod sparse;

#[cfg(test)]
mod hardening;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use tensorfmt_core::io::PageReleaser;

use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, Order, Result, Tensor, TensorFile, TensorInfo, WriteOptions,
};

/// What can be wrong with an npy, npz or safetensors file.
///
/// Converted into [`tensorfmt_core::Error::Format`] with the format's short name.
///
/// ```
/// use tensorfmt::interop::InteropError;
/// let e = InteropError::malformed(8, "header length", "declares 70000 bytes, 12 present");
/// assert_eq!(e.to_string(), "at byte 8: header length: declares 70000 bytes, 12 present");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InteropError {
    /// The bytes contradict the format.
    #[error("at byte {offset}: {field}: {message}")]
    Malformed {
        /// Byte offset in the file (or in the archive member) where the problem is.
        offset: u64,
        /// The field concerned.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A limit of the reader's [`Limits`](tensorfmt_core::Limits) refused what a field
    /// asks for (a rank, a copy's allocation): a limit error, not a malformed file.
    #[error("at byte {offset}: {field}: {source}")]
    Limited {
        /// Byte offset of the field.
        offset: u64,
        /// The field concerned.
        field: &'static str,
        /// The limit's error.
        source: tensorfmt_core::Error,
    },
    /// Valid for the format, but not something tensorfmt handles (structured or
    /// object dtypes, 8-bit floats, encrypted archive members, ...).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The safetensors crate rejected the header.
    #[error("{0}")]
    Safetensors(#[from] ::safetensors::SafeTensorError),
    /// The zip container of an npz file is broken.
    #[error("zip container: {0}")]
    Zip(#[from] zip::result::ZipError),
}

impl tensorfmt_core::Classify for InteropError {
    fn kind(&self) -> tensorfmt_core::ErrorKind {
        match self {
            InteropError::Unsupported(_) => tensorfmt_core::ErrorKind::Unsupported,
            InteropError::Limited { source, .. } => source.kind(),
            _ => tensorfmt_core::ErrorKind::Format,
        }
    }
    fn offset(&self) -> Option<u64> {
        match self {
            InteropError::Malformed { offset, .. } | InteropError::Limited { offset, .. } => {
                Some(*offset)
            }
            _ => None,
        }
    }
    fn field(&self) -> Option<&str> {
        match self {
            InteropError::Malformed { field, .. } | InteropError::Limited { field, .. } => {
                Some(field)
            }
            _ => None,
        }
    }
}

impl InteropError {
    /// A [`InteropError::Malformed`].
    pub fn malformed(offset: u64, field: &'static str, message: impl Into<String>) -> Self {
        InteropError::Malformed {
            offset,
            field,
            message: message.into(),
        }
    }
}

/// Named tensors held in memory, as a [`TensorFile`] (format `memory`).
///
/// The writers of this module stream any `TensorFile`; `MemoryFile` lets them (and the
/// format crates' `save_tensors`) take plain `(name, tensor)` pairs too.
///
/// ```
/// use tensorfmt::interop::MemoryFile;
/// use tensorfmt::{Order, Tensor, TensorFile};
/// let t = Tensor::from_vec(vec![1i16, 2, 3], [3], Order::RowMajor)?;
/// let f = MemoryFile::new(vec![("x".to_string(), t.clone())]);
/// assert_eq!(f.tensors()[0].name, "x");
/// assert_eq!(f.read_tensor("x")?, t);
/// # Ok::<(), tensorfmt::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryFile {
    tensors: Vec<(String, Tensor)>,
    /// Position of each name's first tensor, so a lookup does not scan the list.
    index: HashMap<String, usize>,
}

impl MemoryFile {
    /// Wraps named tensors (column-major ones are exported row-major on read).
    pub fn new(tensors: Vec<(String, Tensor)>) -> MemoryFile {
        let mut index = HashMap::with_capacity(tensors.len());
        for (i, (n, _)) in tensors.iter().enumerate() {
            index.entry(n.clone()).or_insert(i);
        }
        MemoryFile { tensors, index }
    }

    fn get(&self, name: &str) -> Result<&Tensor> {
        self.index
            .get(name)
            .map(|&i| &self.tensors[i].1)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
    }
}

impl TensorFile for MemoryFile {
    fn format(&self) -> &'static str {
        "memory"
    }
    fn kind(&self) -> String {
        "tensors".into()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        Vec::new()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.tensors
            .iter()
            .map(|(n, t)| TensorInfo::new(n.clone(), t.dtype(), t.shape().clone()))
            .collect()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.get(name)?.to_order(Order::RowMajor)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        row_chunks(self.read_tensor(name)?)
    }
}

/// `inner` with its tensors stored as `to`, but those named in `keep`: listed as `to`,
/// read and streamed cast. It is [`WriteOptions::dtype`] per tensor, for a write whose
/// tensors do not all take the dtype asked (a sparse layout's index arrays, see
/// [`sparse::keeps_its_dtype`]): the writer is handed this view and no dtype.
pub(crate) struct Retyped<'a> {
    pub(crate) inner: &'a dyn TensorFile,
    pub(crate) to: DType,
    pub(crate) keep: HashSet<String>,
}

impl Retyped<'_> {
    fn takes(&self, name: &str) -> bool {
        !self.keep.contains(name)
    }
}

impl TensorFile for Retyped<'_> {
    fn format(&self) -> &'static str {
        self.inner.format()
    }
    fn kind(&self) -> String {
        self.inner.kind()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.inner.header()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        let mut list = self.inner.tensors();
        for info in &mut list {
            if self.takes(&info.name) {
                info.dtype = self.to;
            }
        }
        list
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        let t = self.inner.read_tensor(name)?;
        if self.takes(name) {
            t.cast(self.to)
        } else {
            Ok(t)
        }
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        let chunks = self.inner.read_chunks(name)?;
        if !self.takes(name) {
            return Ok(chunks);
        }
        let to = self.to;
        Ok(Box::new(chunks.map(move |c| c?.cast(to))))
    }
    // What the inner file knows, for the tensors that keep their type; a cast tensor
    // is neither its stored bytes nor its stored entries.
    fn kind_id(&self) -> &'static str {
        self.inner.kind_id()
    }
    fn stats(&self, name: &str) -> Result<tensorfmt_core::Stats> {
        if self.takes(name) {
            tensorfmt_core::streamed_stats(self, name)
        } else {
            self.inner.stats(name)
        }
    }
    fn sparse_rows<'a>(&'a self, name: &str) -> Option<Result<tensorfmt_core::SparseRows<'a>>> {
        if self.takes(name) {
            None
        } else {
            self.inner.sparse_rows(name)
        }
    }
    fn source_layout(&self, name: &str) -> Option<tensorfmt_core::SourceLayout> {
        if self.takes(name) {
            None
        } else {
            self.inner.source_layout(name)
        }
    }
    fn source_layouts(&self) -> Vec<Option<tensorfmt_core::SourceLayout>> {
        let list = self.inner.tensors();
        self.inner
            .source_layouts()
            .into_iter()
            .zip(list)
            .map(|(l, i)| l.filter(|_| !self.takes(&i.name)))
            .collect()
    }
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }
    fn lenient(&self) -> bool {
        self.inner.lenient()
    }
    fn external_files(&self) -> Vec<String> {
        self.inner.external_files()
    }
    fn layout_settings(&self) -> Vec<(String, String)> {
        self.inner.layout_settings()
    }
    fn validate(&self) -> Result<()> {
        self.inner.validate()
    }
}

/// Target size of one streamed piece.
const CHUNK_BYTES: usize = 16 << 20;

/// Bytes of pieces the decoding thread of [`write_chunks`] hands over at once.
const BATCH_BYTES: usize = 1 << 20;

/// Splits a row-major tensor into zero-copy pieces of about [`CHUNK_BYTES`] along axis 0.
pub(crate) fn row_chunks<'a>(t: Tensor) -> Result<Chunks<'a>> {
    let rows = match t.dims().first() {
        Some(&r) if r > 0 && t.bytes().len() > CHUNK_BYTES => r,
        _ => return Ok(Box::new(std::iter::once(Ok(t)))),
    };
    let row_bytes = (t.bytes().len() / rows).max(1);
    let step = (CHUNK_BYTES / row_bytes).max(1);
    Ok(Box::new((0..rows).step_by(step).map(move |start| {
        t.slice_outer(start, (start + step).min(rows))
    })))
}

/// A file's tensor list indexed by name: one [`TensorFile::tensors`] call for a whole
/// write, so that looking up each written tensor's entry costs O(1), not a fresh
/// listing (a clone of every entry) and a scan per tensor, which made writing n
/// tensors O(n²) (issue 27).
pub(crate) struct Listing {
    infos: HashMap<String, TensorInfo>,
}

impl Listing {
    /// Lists `file` once; a name listed twice keeps its first entry.
    pub(crate) fn of(file: &dyn TensorFile) -> Listing {
        let list = file.tensors();
        let mut infos = HashMap::with_capacity(list.len());
        for info in list {
            if !infos.contains_key(&info.name) {
                infos.insert(info.name.clone(), info);
            }
        }
        Listing { infos }
    }

    /// The entry of `name`.
    pub(crate) fn get(&self, name: &str) -> Result<&TensorInfo> {
        self.infos
            .get(name)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
    }
}

/// Refuses a selection that names a tensor twice (a file cannot hold both).
pub(crate) fn check_unique(names: &[String]) -> Result<()> {
    let mut seen = HashSet::with_capacity(names.len());
    for name in names {
        if !seen.insert(name.as_str()) {
            return Err(Error::Invalid(format!(
                "tensor name {name:?} appears twice"
            )));
        }
    }
    Ok(())
}

/// Looks up one entry of a file's tensor list (one lookup; for many, use [`Listing`]).
pub(crate) fn info_of(file: &dyn TensorFile, name: &str) -> Result<TensorInfo> {
    file.tensors()
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
}

/// The dtype a writer stores for `info`: `options.dtype` when given, else its own.
pub(crate) fn stored_dtype(info: &TensorInfo, options: &WriteOptions) -> DType {
    options.dtype.unwrap_or(info.dtype)
}

/// How many threads the streaming writers use: `options.threads` when given (`1`
/// turns the pipeline off; any larger number turns it on: the pipeline has two stages,
/// so 2 and more behave alike), else 2 when the machine has more than one core.
pub(crate) fn threads(options: &WriteOptions) -> usize {
    options.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get().min(2))
            .unwrap_or(1)
    })
}

/// The thread count for streaming one tensor: 1 for a tensor of at most one piece
/// ([`CHUNK_BYTES`]), else `threads`. A single piece has nothing to overlap, and
/// starting a decoding thread costs more than writing a small tensor (a file of 10k
/// small tensors spent most of its conversion starting threads, issue 27).
pub(crate) fn threads_for(info: &TensorInfo, dtype: DType, threads: usize) -> usize {
    let bytes = |size: usize| info.shape.byte_len(size).unwrap_or(usize::MAX);
    if bytes(info.dtype.size()).max(bytes(dtype.size())) <= CHUNK_BYTES {
        1
    } else {
        threads
    }
}

/// The options the in-memory `save` functions hand to their streaming writer: without a
/// `threads` setting and without a dtype conversion there is nothing for a decoding
/// thread to do (the pieces are the caller's own buffers), and the hand-over costs
/// about 10 % of a 256 MiB save (benches/python/bench.py), so the pipeline is off.
pub(crate) fn in_memory_options(options: &WriteOptions) -> std::borrow::Cow<'_, WriteOptions> {
    if options.threads.is_some() || options.dtype.is_some() {
        std::borrow::Cow::Borrowed(options)
    } else {
        std::borrow::Cow::Owned(WriteOptions {
            threads: Some(1),
            ..options.clone()
        })
    }
}

/// One piece as the writer stores it: checked against the listing, row-major, `dtype`.
/// A source piece that was converted into a fresh buffer hands its mapped pages to
/// `released`.
fn prepare(
    chunk: Result<Tensor>,
    info: &TensorInfo,
    dtype: DType,
    released: &mut PageReleaser,
) -> Result<Tensor> {
    let chunk = chunk?;
    if chunk.dtype() != info.dtype {
        return Err(Error::Invalid(format!(
            "tensor {:?}: a piece has dtype {} but the file lists {}",
            info.name,
            chunk.dtype(),
            info.dtype
        )));
    }
    let piece = chunk.to_order(Order::RowMajor)?.cast(dtype)?;
    if piece.bytes().as_ptr() != chunk.bytes().as_ptr() {
        // Converted into a fresh buffer: the source's mapped pages are done with.
        released.release(chunk.bytes());
    }
    Ok(piece)
}

/// Reads one byte per 4 KiB page of a piece, so that the page faults of a piece that
/// is a slice of a mapped input happen on the decoding thread, not in the writer's
/// copy.
fn prefault(piece: &Tensor) {
    let sum = piece
        .bytes()
        .iter()
        .step_by(4096)
        .fold(0u8, |a, &b| a.wrapping_add(b));
    std::hint::black_box(sum);
}

/// Writes one prepared piece, keeping the running total within `expected`.
fn put(
    w: &mut dyn Write,
    piece: &Tensor,
    written: &mut usize,
    expected: usize,
    info: &TensorInfo,
    released: &mut PageReleaser,
) -> Result<()> {
    let bytes = piece.bytes();
    *written = written
        .checked_add(bytes.len())
        .filter(|&n| n <= expected)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "tensor {:?}: its pieces hold more than the {expected} bytes of shape {}",
                info.name, info.shape
            ))
        })?;
    w.write_all(bytes)?;
    // The piece is written: give its pages back if it is a slice of a mapped input, so
    // a streamed conversion's resident set stays at a few pieces (see `release_pages`;
    // small pieces are handed back in batches of `PageReleaser::BATCH` bytes).
    released.release(bytes);
    Ok(())
}

/// Streams one tensor's pieces into `w` as row-major little-endian bytes of `dtype`,
/// checking that the pieces add up to exactly the listed shape.
///
/// With `threads > 1` this is a two-stage pipeline: a scoped thread decodes the next
/// piece (`read_chunks`, [`Tensor::to_order`], [`Tensor::cast`]) while this thread
/// writes the previous one. Pieces cross in batches of [`BATCH_BYTES`] (one piece when
/// larger) and the channel holds one batch, so at most about three batches are alive
/// at once (one being decoded, one queued, one being written). The chunk
/// iterator is created inside the decoding thread (it need not be `Send`). A decoding
/// error ends the stream and is returned; a write error stops the decoder (its next
/// send fails); a panic in the decoder becomes an error. The bytes written are the same
/// whatever the thread count.
pub(crate) fn write_chunks(
    w: &mut dyn Write,
    file: &dyn TensorFile,
    info: &TensorInfo,
    dtype: DType,
    threads: usize,
) -> Result<()> {
    let expected = info.shape.byte_len(dtype.size())?;
    let mut written = 0usize;
    let mut released = PageReleaser::new();
    if threads <= 1 {
        let mut source_released = PageReleaser::new();
        for chunk in file.read_chunks(&info.name)? {
            put(
                w,
                &prepare(chunk, info, dtype, &mut source_released)?,
                &mut written,
                expected,
                info,
                &mut released,
            )?;
        }
    } else {
        std::thread::scope(|s| -> Result<()> {
            // Pieces cross the channel in batches of at least `BATCH_BYTES` (or one
            // piece, if larger): one hand-over per small piece (a movie of 100 000
            // frames of 256 bytes) cost two thread wake-ups per frame, more than the
            // frame's copy (issue 27).
            let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<Tensor>>>(1);
            let decoder = s.spawn(move || {
                let chunks = match file.read_chunks(&info.name) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let mut source_released = PageReleaser::new();
                let mut batch = Vec::new();
                let mut bytes = 0usize;
                for chunk in chunks {
                    match prepare(chunk, info, dtype, &mut source_released) {
                        Ok(piece) => {
                            prefault(&piece);
                            bytes += piece.bytes().len();
                            batch.push(piece);
                            if bytes >= BATCH_BYTES {
                                bytes = 0;
                                if tx.send(Ok(std::mem::take(&mut batch))).is_err() {
                                    return;
                                }
                            }
                        }
                        Err(e) => {
                            if !batch.is_empty() && tx.send(Ok(batch)).is_err() {
                                return;
                            }
                            let _ = tx.send(Err(e));
                            return;
                        }
                    }
                }
                if !batch.is_empty() {
                    let _ = tx.send(Ok(batch));
                }
            });
            let mut result = Ok(());
            'batches: for batch in rx.iter() {
                let pieces = match batch {
                    Ok(p) => p,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                };
                for p in &pieces {
                    if let Err(e) = put(w, p, &mut written, expected, info, &mut released) {
                        result = Err(e);
                        break 'batches;
                    }
                }
            }
            // Unblocks a decoder waiting to send after a write error.
            drop(rx);
            match decoder.join() {
                Ok(()) => result,
                Err(_) => result.and(Err(Error::Invalid(format!(
                    "tensor {:?}: the decoding thread panicked",
                    info.name
                )))),
            }
        })?;
    }
    if written != expected {
        return Err(Error::Invalid(format!(
            "tensor {:?}: its pieces hold {written} bytes, shape {} needs {expected}",
            info.name, info.shape
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_chunks_split_large_tensors_and_concatenate_back() {
        let n = (CHUNK_BYTES / 4) * 2 + 100;
        let rows = n / 4;
        let data: Vec<f32> = (0..rows * 4).map(|i| i as f32).collect();
        let t = Tensor::from_vec(data.clone(), [rows, 4], Order::RowMajor).unwrap();
        let pieces: Vec<Tensor> = row_chunks(t).unwrap().map(|c| c.unwrap()).collect();
        assert!(pieces.len() >= 3);
        let mut back = Vec::new();
        for p in &pieces {
            assert_eq!(p.dims()[1], 4);
            back.extend(p.to_vec::<f32>().unwrap());
        }
        assert_eq!(back, data);
    }

    #[test]
    fn write_chunks_rejects_pieces_that_do_not_match_the_listing() {
        struct Liar;
        impl TensorFile for Liar {
            fn format(&self) -> &'static str {
                "liar"
            }
            fn kind(&self) -> String {
                String::new()
            }
            fn header(&self) -> Vec<(String, FieldValue)> {
                Vec::new()
            }
            fn tensors(&self) -> Vec<TensorInfo> {
                vec![TensorInfo::new("x", DType::U8, [4])]
            }
            fn read_tensor(&self, _: &str) -> Result<Tensor> {
                Tensor::from_vec(vec![1u8, 2, 3], [3], Order::RowMajor)
            }
        }
        let info = info_of(&Liar, "x").unwrap();
        let mut out = Vec::new();
        for threads in [1, 2] {
            let err = write_chunks(&mut out, &Liar, &info, DType::U8, threads).unwrap_err();
            assert!(err.to_string().contains("3 bytes"), "{err}");
        }
        assert!(matches!(info_of(&Liar, "y"), Err(Error::NoSuchTensor(_))));
    }

    /// A multi-frame source whose pieces are column-major `[1, 5, 7]` frames (so
    /// `to_order` really copies), failing or panicking at a chosen piece.
    struct Frames {
        count: usize,
        fail_at: Option<usize>,
        panic_at: Option<usize>,
    }
    impl Frames {
        fn ok(count: usize) -> Frames {
            Frames {
                count,
                fail_at: None,
                panic_at: None,
            }
        }
        fn frame(k: usize) -> Tensor {
            let v: Vec<f32> = (0..35).map(|i| (k * 35 + i) as f32 * 0.5).collect();
            Tensor::from_vec(v, [1, 5, 7], Order::ColumnMajor).unwrap()
        }
    }
    impl TensorFile for Frames {
        fn format(&self) -> &'static str {
            "frames"
        }
        fn kind(&self) -> String {
            String::new()
        }
        fn header(&self) -> Vec<(String, FieldValue)> {
            Vec::new()
        }
        fn tensors(&self) -> Vec<TensorInfo> {
            vec![
                TensorInfo::new("values", DType::F32, [self.count, 5, 7]),
                TensorInfo::new("time", DType::F64, [self.count]),
            ]
        }
        fn read_tensor(&self, name: &str) -> Result<Tensor> {
            match name {
                "time" => Tensor::from_vec(
                    (0..self.count).map(|k| k as f64).collect::<Vec<_>>(),
                    [self.count],
                    Order::RowMajor,
                ),
                _ => Err(Error::Invalid("stream it".into())),
            }
        }
        fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
            if name != "values" {
                return Ok(Box::new(std::iter::once(self.read_tensor(name))));
            }
            // A non-Send iterator, as the trait allows.
            let marker = std::rc::Rc::new(());
            Ok(Box::new((0..self.count).map(move |k| {
                let _keep = &marker;
                if self.panic_at == Some(k) {
                    panic!("decoder bug at piece {k}");
                }
                if self.fail_at == Some(k) {
                    return Err(Error::Invalid(format!("broken frame {k}")));
                }
                Ok(Frames::frame(k))
            })))
        }
    }

    fn stream(file: &dyn TensorFile, dtype: DType, threads: usize) -> Result<Vec<u8>> {
        let info = info_of(file, "values")?;
        let mut out = Vec::new();
        write_chunks(&mut out, file, &info, dtype, threads)?;
        Ok(out)
    }

    #[test]
    fn pipeline_writes_the_same_bytes_as_one_thread() {
        let f = Frames::ok(300);
        for dtype in [DType::F32, DType::F16, DType::I16] {
            let one = stream(&f, dtype, 1).unwrap();
            assert_eq!(one.len(), 300 * 35 * dtype.size());
            assert_eq!(stream(&f, dtype, 2).unwrap(), one, "{dtype}");
            assert_eq!(stream(&f, dtype, 8).unwrap(), one, "{dtype}");
        }
        let expected: Vec<u8> = (0..300)
            .flat_map(|k| {
                Frames::frame(k)
                    .to_order(Order::RowMajor)
                    .unwrap()
                    .bytes()
                    .to_vec()
            })
            .collect();
        assert_eq!(stream(&f, DType::F32, 2).unwrap(), expected);
    }

    #[test]
    fn pipeline_returns_decoder_errors_and_panics() {
        for at in [0, 1, 150, 299] {
            let f = Frames {
                fail_at: Some(at),
                ..Frames::ok(300)
            };
            for threads in [1, 2] {
                let e = stream(&f, DType::F32, threads).unwrap_err();
                assert!(e.to_string().contains(&format!("broken frame {at}")), "{e}");
            }
            let f = Frames {
                panic_at: Some(at),
                ..Frames::ok(300)
            };
            let e = stream(&f, DType::F32, 2).unwrap_err();
            assert!(e.to_string().contains("panicked"), "{e}");
        }
    }

    #[test]
    fn pipeline_stops_the_decoder_on_a_write_error() {
        let f = Frames::ok(2000);
        let info = info_of(&f, "values").unwrap();
        for limit in [0, 139, 140 * 7 + 3] {
            let mut w = tensorfmt_core::testing::FailAfter::new(limit);
            let e = write_chunks(&mut w, &f, &info, DType::F32, 2).unwrap_err();
            assert!(e.to_string().contains("injected"), "{e}");
            assert_eq!(w.written().len(), limit);
        }
    }

    #[test]
    fn threads_setting() {
        let mut o = WriteOptions::default();
        assert!((1..=2).contains(&threads(&o)));
        o.set("threads", "1").unwrap();
        assert_eq!(threads(&o), 1);
        for bad in ["0", "-1", "two", ""] {
            assert!(o.set("threads", bad).is_err(), "{bad}");
        }
        assert!(o.extra.is_empty());
    }

    #[test]
    fn in_memory_saves_run_without_the_pipeline_unless_asked() {
        let mut o = WriteOptions::default();
        assert_eq!(threads(&in_memory_options(&o)), 1);
        o.dtype = Some(DType::F16);
        assert!((1..=2).contains(&threads(&in_memory_options(&o))));
        assert!(matches!(
            in_memory_options(&o),
            std::borrow::Cow::Borrowed(_)
        ));
        o.dtype = None;
        o.threads = Some(2);
        assert_eq!(threads(&in_memory_options(&o)), 2);
    }

    /// Whole files through each writer: identical bytes with `threads=1` and the default.
    #[test]
    fn writers_give_identical_files_with_and_without_the_pipeline() {
        let dir = tempfile::tempdir().unwrap();
        let f = Frames::ok(500);
        let names = vec!["values".to_string(), "time".to_string()];
        let single = |extra: &[(&str, &str)]| {
            let mut o = WriteOptions::default();
            for (k, v) in extra {
                o.set(k, v).unwrap();
            }
            let one = WriteOptions {
                threads: Some(1),
                ..o.clone()
            };
            let two = WriteOptions {
                threads: Some(2),
                ..o.clone()
            };
            (o, one, two)
        };
        for compress in ["stored", "deflate"] {
            let (o, one, two) = single(&[("compress", compress)]);
            let mut files = Vec::new();
            for (i, opts) in [o, one, two].iter().enumerate() {
                let p = dir.path().join(format!("{compress}{i}.npz"));
                npz::write_from(&p, &f, &names, opts).unwrap();
                files.push(std::fs::read(&p).unwrap());
            }
            assert_eq!(files[0], files[1], "{compress}");
            assert_eq!(files[1], files[2], "{compress}");
        }
        let (o, one, two) = single(&[("source", "test")]);
        let mut files = Vec::new();
        for (i, opts) in [o, one, two].iter().enumerate() {
            let p = dir.path().join(format!("{i}.safetensors"));
            safetensors::write_from(&p, &f, &names, opts).unwrap();
            files.push(std::fs::read(&p).unwrap());
            let p2 = dir.path().join(format!("{i}.npy"));
            npy::write_from(&p2, &f, "values", opts).unwrap();
            assert_eq!(std::fs::read(&p2).unwrap().len(), 128 + 500 * 35 * 4);
        }
        assert_eq!(files[0], files[1]);
        assert_eq!(files[1], files[2]);
        let text = String::from_utf8_lossy(&files[0][..200]).to_string();
        assert!(
            text.contains("source") && !text.contains("threads"),
            "{text}"
        );
        // A failing decoder leaves no file behind.
        let p = dir.path().join("bad.npz");
        let bad = Frames {
            fail_at: Some(250),
            ..Frames::ok(500)
        };
        assert!(npz::write_from(&p, &bad, &names, &WriteOptions::default()).is_err());
        assert!(!p.exists());
    }
}
