//! [`Document`]: an opened file as a user meets it: its detected [`Format`], its path,
//! and lazy access to its named tensors through [`Entry`] values.
//!
//! Opening maps the file and parses its header; listing the entries decodes nothing.
//! A tensor is decoded when you call [`Entry::read`] (whole) or [`Entry::chunks`]
//! (piece by piece along axis 0, bounded memory).
//!
//! A `Document` dereferences to [`dyn TensorFile`](TensorFile) (and implements the
//! trait itself), so everything written against `TensorFile` takes it as it is.
//!
//! Its conversions ([`Document::convert_to`] and the rest) are defined with the rest of
//! the conversion policy in `convert.rs`, which builds on this module (this module
//! knows nothing of conversions).
//!
//! ```
//! use tensorfmt::{Document, Format, Order, Tensor};
//! let dir = tempfile::tempdir()?;
//! let p = dir.path().join("pair.npz");
//! let a = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], [2, 2], Order::RowMajor)?;
//! let b = Tensor::from_vec(vec![7i64], [1], Order::RowMajor)?;
//! tensorfmt::save(&p, Format::Npz, &[("a".into(), a.clone()), ("b".into(), b)], &Default::default())?;
//!
//! let doc = Document::open(&p)?;
//! assert_eq!(doc.file_format(), Format::Npz);
//! for entry in &doc {
//!     println!("{} {} {}", entry.name(), entry.dtype(), entry.shape()); // nothing decoded yet
//! }
//! assert_eq!(doc.entry("a")?.read()?, a);
//! assert_eq!(doc.entry("a")?.stats()?.sum, 10.0);
//!
//! // Convert everything to safetensors in one call.
//! let st = dir.path().join("pair.safetensors");
//! doc.convert_to(&st, Format::Safetensors)?;
//! assert_eq!(Document::open(&st)?.entry("a")?.read()?, a);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, ReadOptions, Result, Shape, Stats, Tensor, TensorFile,
    TensorInfo,
};

use crate::dispatch;
use crate::format::{self, Format};

/// An opened tensor file: detected format, path, header, warnings and named tensors.
///
/// Returned by [`open`] and [`open_as`]. The header,
/// kind, warnings and the plain [`TensorFile`] calls come through `Deref`; the
/// methods here add what a user of one file wants: [`entries`](Document::entries),
/// [`entry`](Document::entry), [`read_all`](Document::read_all) and
/// [`convert_to`](Document::convert_to).
///
/// ```
/// use tensorfmt::{Document, Format};
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/model.safetensors");
/// let doc = Document::open(&path)?;
/// assert_eq!(doc.file_format(), Format::Safetensors);
/// assert_eq!(doc.format(), "safetensors"); // the TensorFile view
/// assert!(doc.warnings().is_empty());
/// assert_eq!(doc.entries().len(), doc.tensors().len());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub struct Document {
    format: Format,
    path: PathBuf,
    file: Box<dyn TensorFile>,
    /// The bytes the whole file was opened from (not when only frames or a CSR export
    /// were read): what [`provenance`](crate::provenance) cuts the tensors out of.
    source: Option<Bytes>,
    /// The mapped input's watch (shared with the [`Watched`] wrapper of `file`).
    watch: Option<Arc<InputWatch>>,
    /// The listing by name, built on the first [`Document::entry`], so that looking up
    /// n entries costs one listing, not n.
    index: OnceLock<HashMap<String, TensorInfo>>,
}

/// Whether a document's mapped input changed under it (issue 23 item 8).
///
/// A guarded fault (see ARCHITECTURE.md, "Inputs that change under us") maps a zero
/// page over each vanished page, so a second pass over the same data no longer faults
/// and would return zeros as if they were the file. Hence the first fault poisons the
/// document for good: every later call returns [`Error::InputChanged`], and no
/// conversion of it starts. A fault counts as this input's when the process' fault
/// count moved since the last check and either the most recent fault was in this
/// path's mapping or the file is now shorter than the mapping (a `stat`, only after a
/// fault somewhere; nothing on the normal read path).
#[derive(Debug)]
struct InputWatch {
    path: PathBuf,
    mapped_len: u64,
    /// Other files the tensors are mapped from (an ONNX model's external data), as
    /// mapped (canonical paths) with their lengths then.
    others: Vec<(PathBuf, u64)>,
    faults_seen: AtomicU64,
    poisoned: AtomicBool,
}

impl InputWatch {
    fn check(&self) -> Result<()> {
        if !self.poisoned.load(Ordering::SeqCst) {
            let now = tensorfmt_core::io::guarded_faults();
            if self.faults_seen.swap(now, Ordering::SeqCst) == now || !self.changed() {
                return Ok(());
            }
            self.poisoned.store(true, Ordering::SeqCst);
        }
        Err(Error::InputChanged {
            path: self.path.display().to_string(),
        })
    }

    /// [`check`](Self::check) that also looks at the other files' sizes (an ONNX
    /// model's external data) when no fault was seen: a file cut inside its last page
    /// reads zeros there without faulting. For `validate` (a `stat` per file).
    fn check_sizes(&self) -> Result<()> {
        let shrunk = self
            .others
            .iter()
            .any(|(p, n)| std::fs::metadata(p).is_ok_and(|m| m.len() < *n));
        if shrunk {
            self.poisoned.store(true, Ordering::SeqCst);
        }
        self.check()
    }

    fn changed(&self) -> bool {
        let faulted = tensorfmt_core::io::last_faulted_path();
        std::iter::once((&self.path, self.mapped_len))
            .chain(self.others.iter().map(|(p, n)| (p, *n)))
            .any(|(path, len)| {
                faulted.as_deref() == Some(path.as_path())
                    || std::fs::metadata(path).is_ok_and(|m| m.len() < len)
            })
    }
}

/// A document's file behind its [`InputWatch`]: each call checks the input before and
/// after it, and each streamed piece after it is read.
struct Watched {
    file: Box<dyn TensorFile>,
    watch: Arc<InputWatch>,
}

impl Watched {
    fn checked<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
        self.watch.check()?;
        let out = work()?;
        self.watch.check()?;
        Ok(out)
    }
}

impl TensorFile for Watched {
    fn format(&self) -> &'static str {
        self.file.format()
    }
    fn kind(&self) -> String {
        self.file.kind()
    }
    fn kind_id(&self) -> &'static str {
        self.file.kind_id()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.file.header()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.file.tensors()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.checked(|| self.file.read_tensor(name))
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        let chunks = self.checked(|| self.file.read_chunks(name))?;
        Ok(Box::new(chunks.map(move |c| {
            let c = c?;
            self.watch.check()?;
            // A host asked every long call to stop (Python's Ctrl-C): between pieces.
            crate::io::check_stop()?;
            Ok(c)
        })))
    }
    fn stats(&self, name: &str) -> Result<Stats> {
        self.checked(|| self.file.stats(name))
    }
    fn sparse_rows<'a>(&'a self, name: &str) -> Option<Result<tensorfmt_core::SparseRows<'a>>> {
        if let Err(e) = self.watch.check() {
            return Some(Err(e));
        }
        let rows = match self.file.sparse_rows(name)? {
            Ok(rows) => rows,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(Box::new(rows.map(move |r| {
            let r = r?;
            self.watch.check()?;
            crate::io::check_stop()?;
            Ok(r)
        }))))
    }
    fn source_layout(&self, name: &str) -> Option<tensorfmt_core::SourceLayout> {
        self.file.source_layout(name)
    }
    fn source_layouts(&self) -> Vec<Option<tensorfmt_core::SourceLayout>> {
        self.file.source_layouts()
    }
    fn warnings(&self) -> Vec<String> {
        self.file.warnings()
    }
    fn lenient(&self) -> bool {
        self.file.lenient()
    }
    fn external_files(&self) -> Vec<String> {
        self.file.external_files()
    }
    fn layout_settings(&self) -> Vec<(String, String)> {
        self.file.layout_settings()
    }
    fn validate(&self) -> Result<()> {
        self.watch.check_sizes()?;
        self.checked(|| self.file.validate())?;
        self.watch.check_sizes()
    }
}

impl Document {
    /// Opens a file with default [`ReadOptions`], detecting its format (content first,
    /// extension second).
    pub fn open(path: impl AsRef<Path>) -> Result<Document> {
        open(path.as_ref(), &ReadOptions::default())
    }

    /// Opens a file with options (frame range, sparse CSR export, limits, ...).
    ///
    /// ```
    /// use tensorfmt::{Document, ReadOptions};
    /// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
    /// let all = Document::open(&path)?;
    /// let frames = all.entry("values")?.shape().dims()[0];
    /// let first = Document::open_with(&path, &ReadOptions { frames: Some((0, Some(1))), ..Default::default() })?;
    /// assert_eq!(first.entry("values")?.shape().dims()[0], 1);
    /// assert!(frames >= 1);
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: &ReadOptions) -> Result<Document> {
        open(path.as_ref(), options)
    }

    /// Wraps an already opened [`TensorFile`] (e.g. from [`open_bytes`](crate::open_bytes)).
    ///
    /// ```
    /// use tensorfmt::{interop::MemoryFile, Document, Format, Order, Tensor};
    /// let t = Tensor::from_vec(vec![1u8, 2], [2], Order::RowMajor)?;
    /// let doc = Document::new(Format::Npz, "in-memory", Box::new(MemoryFile::new(vec![("t".into(), t)])));
    /// assert_eq!(doc.path(), std::path::Path::new("in-memory"));
    /// assert_eq!(doc.entry("t")?.shape().dims(), &[2]);
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    pub fn new(format: Format, path: impl Into<PathBuf>, file: Box<dyn TensorFile>) -> Document {
        Document {
            format,
            path: path.into(),
            file,
            source: None,
            watch: None,
            index: OnceLock::new(),
        }
    }

    /// Remembers the bytes `file` was opened from, when it was opened whole, and
    /// watches the mapped input: once it changed under the document, every later call
    /// fails (see [`Watched`]).
    fn with_source(mut self, data: Bytes, whole: bool) -> Document {
        let dir = self.path.parent().unwrap_or(Path::new(""));
        let others = self
            .file
            .external_files()
            .iter()
            .filter_map(|loc| {
                let p = dir.join(loc).canonicalize().ok()?;
                let len = std::fs::metadata(&p).ok()?.len();
                Some((p, len))
            })
            .collect();
        let watch = Arc::new(InputWatch {
            path: self.path.clone(),
            mapped_len: data.len() as u64,
            others,
            faults_seen: AtomicU64::new(tensorfmt_core::io::guarded_faults()),
            poisoned: AtomicBool::new(false),
        });
        self.file = Box::new(Watched {
            file: self.file,
            watch: watch.clone(),
        });
        self.watch = Some(watch);
        self.source = whole.then_some(data);
        self
    }

    /// `Err(InputChanged)` once the mapped input changed under this document.
    pub(crate) fn check_input(&self) -> Result<()> {
        self.watch.as_ref().map_or(Ok(()), |w| w.check())
    }

    /// The bytes of the whole file the document was opened from (`None` for a
    /// document built with [`Document::new`], or opened with a frame range or CSR
    /// export, whose tensors are not the file's).
    pub fn source_bytes(&self) -> Option<&Bytes> {
        self.source.as_ref()
    }

    /// The detected (or requested) format.
    pub fn file_format(&self) -> Format {
        self.format
    }

    /// The path the document was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying [`TensorFile`].
    pub fn file(&self) -> &dyn TensorFile {
        &*self.file
    }

    /// Gives up the wrapper and returns the underlying [`TensorFile`].
    pub fn into_inner(self) -> Box<dyn TensorFile> {
        self.file
    }

    /// Every tensor's name, in file order.
    pub fn names(&self) -> Vec<String> {
        self.file.tensors().into_iter().map(|i| i.name).collect()
    }

    /// The named tensors, lazily: each [`Entry`] knows its name, dtype and shape and
    /// decodes only when asked. `&Document` iterates the same way.
    pub fn entries(&self) -> Entries<'_> {
        Entries {
            file: &*self.file,
            infos: self.file.tensors().into_iter(),
        }
    }

    /// The entry of one tensor, or [`Error::NoSuchTensor`].
    ///
    /// ```
    /// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/f32_2x3.npy");
    /// let doc = tensorfmt::Document::open(&path)?;
    /// assert_eq!(doc.entry("f32_2x3")?.shape().dims(), &[2, 3]); // npy: named after the file stem
    /// assert!(matches!(doc.entry("nope"), Err(tensorfmt::Error::NoSuchTensor(_))));
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    pub fn entry(&self, name: &str) -> Result<Entry<'_>> {
        let index = self.index.get_or_init(|| {
            let mut index = HashMap::new();
            for info in self.file.tensors() {
                // A name listed twice: the first entry, as a scan of the listing finds.
                if !index.contains_key(&info.name) {
                    index.insert(info.name.clone(), info);
                }
            }
            index
        });
        index
            .get(name)
            .map(|info| Entry {
                file: &*self.file,
                info: info.clone(),
            })
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
    }

    /// Decodes every tensor (for files small enough to hold at once), in file order.
    pub fn read_all(&self) -> Result<Vec<(String, Tensor)>> {
        self.entries()
            .map(|e| Ok((e.name().to_string(), e.read()?)))
            .collect()
    }
}

/// Opens a file, detecting its format (content first, extension second), as a
/// [`Document`]: nothing but the header is decoded until a tensor is asked for.
///
/// ```
/// use tensorfmt::{Order, Tensor};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("m.safetensors");
/// let t = Tensor::from_vec(vec![1u8, 2], [2], Order::RowMajor)?;
/// tensorfmt::save(&p, tensorfmt::Format::Safetensors, &[("t".into(), t.clone())], &Default::default())?;
/// let f = tensorfmt::open(&p, &Default::default())?;
/// assert_eq!(f.file_format(), tensorfmt::Format::Safetensors);
/// assert_eq!(f.read_tensor("t")?, t);
/// assert_eq!(f.entry("t")?.read()?, t);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(path: &Path, options: &ReadOptions) -> Result<Document> {
    let format = format::detect(path)?;
    open_as(path, format, options)
}

/// Opens a file in a given format (mapped, zero copy where the format allows), as a
/// [`Document`].
///
/// ```
/// use tensorfmt::Format;
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe/v2_tiny.caffemodel");
/// let doc = tensorfmt::open_as(&path, Format::Caffe, &Default::default())?;
/// assert_eq!(doc.file_format(), Format::Caffe);
/// // The wrong format is an error, not a misreading.
/// assert!(tensorfmt::open_as(&path, Format::Npy, &Default::default()).is_err());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn open_as(path: &Path, format: Format, options: &ReadOptions) -> Result<Document> {
    let (file, data) = dispatch::open_mapped(path, format, options)?;
    // A frame range or a CSR export is not the file's own tensors: no splice source.
    let whole = options.frames.is_none() && !options.sparse_csr;
    Ok(Document::new(format, path, file).with_source(data, whole))
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Document")
            .field("format", &self.format)
            .field("path", &self.path)
            .field("kind", &self.file.kind())
            .field("tensors", &self.file.tensors().len())
            .finish()
    }
}

impl Deref for Document {
    type Target = dyn TensorFile;
    fn deref(&self) -> &(dyn TensorFile + 'static) {
        &*self.file
    }
}

impl AsRef<dyn TensorFile> for Document {
    fn as_ref(&self) -> &(dyn TensorFile + 'static) {
        &*self.file
    }
}

impl From<Document> for Box<dyn TensorFile> {
    fn from(d: Document) -> Box<dyn TensorFile> {
        d.file
    }
}

/// Delegates to the underlying file, so a `&Document` is a `&dyn TensorFile`.
impl TensorFile for Document {
    fn format(&self) -> &'static str {
        self.file.format()
    }
    fn kind(&self) -> String {
        self.file.kind()
    }
    fn kind_id(&self) -> &'static str {
        self.file.kind_id()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.file.header()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.file.tensors()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.file.read_tensor(name)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        self.file.read_chunks(name)
    }
    fn stats(&self, name: &str) -> Result<Stats> {
        self.file.stats(name)
    }
    fn sparse_rows<'a>(&'a self, name: &str) -> Option<Result<tensorfmt_core::SparseRows<'a>>> {
        self.file.sparse_rows(name)
    }
    fn source_layout(&self, name: &str) -> Option<tensorfmt_core::SourceLayout> {
        self.file.source_layout(name)
    }
    fn source_layouts(&self) -> Vec<Option<tensorfmt_core::SourceLayout>> {
        self.file.source_layouts()
    }
    fn warnings(&self) -> Vec<String> {
        self.file.warnings()
    }
    fn lenient(&self) -> bool {
        self.file.lenient()
    }
    fn external_files(&self) -> Vec<String> {
        self.file.external_files()
    }
    fn layout_settings(&self) -> Vec<(String, String)> {
        self.file.layout_settings()
    }
    fn validate(&self) -> Result<()> {
        self.file.validate()
    }
}

impl<'a> IntoIterator for &'a Document {
    type Item = Entry<'a>;
    type IntoIter = Entries<'a>;
    fn into_iter(self) -> Entries<'a> {
        self.entries()
    }
}

/// The iterator of [`Document::entries`].
pub struct Entries<'a> {
    file: &'a dyn TensorFile,
    infos: std::vec::IntoIter<TensorInfo>,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;
    fn next(&mut self) -> Option<Entry<'a>> {
        let info = self.infos.next()?;
        Some(Entry {
            file: self.file,
            info,
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.infos.size_hint()
    }
}

impl ExactSizeIterator for Entries<'_> {}

impl DoubleEndedIterator for Entries<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let info = self.infos.next_back()?;
        Some(Entry {
            file: self.file,
            info,
        })
    }
}

impl fmt::Debug for Entries<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.infos.as_slice()).finish()
    }
}

/// One named tensor of a [`Document`], not decoded until asked.
///
/// ```
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/f32_2x3.npy");
/// let doc = tensorfmt::Document::open(&path)?;
/// let e = doc.entries().next().unwrap();
/// assert_eq!((e.name(), e.dtype(), e.byte_len()?), ("f32_2x3", tensorfmt::DType::F32, 24));
/// let pieces: Vec<_> = e.chunks()?.collect::<Result<_, _>>()?;
/// assert_eq!(pieces.iter().map(|t| t.dims()[0]).sum::<usize>(), 2);
/// assert_eq!(e.read()?.to_vec::<f32>()?, vec![0.5, -1.25, 2.0, 3.75, -0.0, 100.0]);
/// # Ok::<(), tensorfmt::Error>(())
/// ```
#[derive(Clone)]
pub struct Entry<'a> {
    file: &'a dyn TensorFile,
    info: TensorInfo,
}

impl<'a> Entry<'a> {
    /// The tensor's export name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The element type of the decoded tensor.
    pub fn dtype(&self) -> DType {
        self.info.dtype
    }

    /// The row-major shape of the decoded tensor.
    pub fn shape(&self) -> &Shape {
        &self.info.shape
    }

    /// Name, dtype and shape together.
    pub fn info(&self) -> &TensorInfo {
        &self.info
    }

    /// Size of the decoded tensor in bytes (errors when it overflows `usize`).
    pub fn byte_len(&self) -> Result<usize> {
        self.info.shape.byte_len(self.info.dtype.size())
    }

    /// Decodes the whole tensor (row-major, zero copy where the format allows).
    pub fn read(&self) -> Result<Tensor> {
        self.file.read_tensor(&self.info.name)
    }

    /// Decodes the tensor piece by piece along axis 0 (frames, entries, ...); the
    /// pieces concatenate to [`read`](Entry::read)'s tensor, memory stays bounded.
    pub fn chunks(&self) -> Result<Chunks<'a>> {
        self.file.read_chunks(&self.info.name)
    }

    /// Summary statistics, streamed over [`chunks`](Entry::chunks), or computed from
    /// the stored entries for sparse tensors ([`TensorFile::stats`]).
    pub fn stats(&self) -> Result<Stats> {
        self.file.stats(&self.info.name)
    }

    /// Decodes the tensor into an owned row-major `ndarray::ArrayD<T>`, cast to `T`
    /// first when the stored dtype differs (feature `ndarray`).
    ///
    /// ```
    /// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/i16_fortran_2x3.npy");
    /// let doc = tensorfmt::Document::open(&path)?;
    /// let a = doc.entries().next().unwrap().to_ndarray::<f64>()?;
    /// assert_eq!(a.shape(), &[2, 3]);
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    #[cfg(feature = "ndarray")]
    pub fn to_ndarray<T: tensorfmt_core::Element>(&self) -> Result<ndarray::ArrayD<T>> {
        let t = self.read()?;
        let t = if t.dtype() == T::DTYPE {
            t
        } else {
            t.cast(T::DTYPE)?
        };
        t.to_order(tensorfmt_core::Order::RowMajor)?
            .to_ndarray::<T>()
    }
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.info.name)
            .field("dtype", &self.info.dtype)
            .field("shape", &self.info.shape)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt_core::{Order, WriteOptions};

    fn sample_doc(dir: &Path) -> (Document, Tensor, Tensor) {
        let a =
            Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], Order::RowMajor).unwrap();
        let b = Tensor::from_vec(vec![-1i32, 0, 5], [3], Order::RowMajor).unwrap();
        let p = dir.join("s.safetensors");
        crate::save(
            &p,
            Format::Safetensors,
            &[("a".into(), a.clone()), ("b".into(), b.clone())],
            &WriteOptions::default(),
        )
        .unwrap();
        (Document::open(&p).unwrap(), a, b)
    }

    #[test]
    fn entries_are_lazy_views_with_the_listed_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let (doc, a, b) = sample_doc(dir.path());
        assert_eq!(doc.file_format(), Format::Safetensors);
        assert_eq!(doc.path(), dir.path().join("s.safetensors"));
        let entries: Vec<_> = doc.entries().collect();
        assert_eq!(entries.len(), 2);
        let names: Vec<&str> = entries.iter().map(|e| e.name()).collect();
        assert_eq!(names, doc.names());
        let ea = doc.entry("a").unwrap();
        assert_eq!(
            (ea.dtype(), ea.shape().dims()),
            (DType::F32, &[3usize, 4][..])
        );
        assert_eq!(ea.byte_len().unwrap(), 48);
        assert_eq!(ea.read().unwrap(), a);
        assert_eq!(doc.entry("b").unwrap().read().unwrap(), b);
        let s = ea.stats().unwrap();
        assert_eq!((s.sum, s.nonzero, s.max), (66.0, 11, Some(11.0)));
        assert_eq!(doc.entries().next_back().unwrap().name(), "b");
        assert!(matches!(doc.entry("c"), Err(Error::NoSuchTensor(n)) if n == "c"));
        assert_eq!(
            doc.read_all().unwrap(),
            vec![("a".into(), a), ("b".into(), b)]
        );
        assert!(format!("{doc:?}").contains("Safetensors"));
    }

    #[test]
    fn document_is_a_tensor_file() {
        let dir = tempfile::tempdir().unwrap();
        let (doc, a, _) = sample_doc(dir.path());
        let as_trait: &dyn TensorFile = &doc;
        assert_eq!(as_trait.read_tensor("a").unwrap(), a);
        assert_eq!(doc.as_ref().tensors(), doc.tensors());
        assert_eq!(doc.format(), "safetensors");
        let boxed: Box<dyn TensorFile> = doc.into();
        assert_eq!(boxed.read_tensor("a").unwrap(), a);
    }
}
