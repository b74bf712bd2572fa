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
    TensorInfo, WriteOptions,
};

use crate::formats::{self, Format, Target, WriteReport};
use crate::progress::Progress;
use crate::provenance::{self, Restored};

/// An opened tensor file: detected format, path, header, warnings and named tensors.
///
/// Returned by [`open`](crate::open) and [`open_as`](crate::open_as). The header,
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

    fn changed(&self) -> bool {
        tensorfmt_core::io::last_faulted_path().as_deref() == Some(self.path.as_path())
            || std::fs::metadata(&self.path).is_ok_and(|m| m.len() < self.mapped_len)
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
    fn validate(&self) -> Result<()> {
        self.checked(|| self.file.validate())
    }
}

impl Document {
    /// Opens a file with default [`ReadOptions`], detecting its format (content first,
    /// extension second).
    pub fn open(path: impl AsRef<Path>) -> Result<Document> {
        formats::open(path.as_ref(), &ReadOptions::default())
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
        formats::open(path.as_ref(), options)
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
    pub(crate) fn with_source(mut self, data: Bytes, whole: bool) -> Document {
        let watch = Arc::new(InputWatch {
            path: self.path.clone(),
            mapped_len: data.len() as u64,
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
    fn check_input(&self) -> Result<()> {
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

    /// Writes every tensor to `path` as `target` (a [`Format`], or a [`Target`] with a
    /// file kind such as `"som-data".parse()?`), with default [`WriteOptions`].
    /// npy takes exactly one tensor; npy, npz and safetensors outputs are streamed.
    ///
    /// Whole-file conversions lose nothing (see [`provenance`]): to
    /// the file's own format with nothing asked, the file is copied; a legacy file's
    /// header and layout travel in safetensors or npz metadata; and a document carrying
    /// them, converted back to that format, becomes the original file again (values
    /// edited in between included). When that cannot be done the report says why.
    /// Converting no tensors (a file that has none and carries no skeleton) is an
    /// error, not an empty file.
    pub fn convert_to(
        &self,
        path: impl AsRef<Path>,
        target: impl Into<Target>,
    ) -> Result<WriteReport> {
        self.convert_to_with(path, target, None, &WriteOptions::default())
    }

    /// [`convert_to`](Document::convert_to) with a selection of tensors (`None`: all)
    /// and write options; a kind in `target` overrides `options.kind`.
    ///
    /// ```
    /// use tensorfmt::{Document, Target, WriteOptions};
    /// let dir = tempfile::tempdir()?;
    /// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/mixed.npz");
    /// let doc = Document::open(&path)?;
    /// let first = doc.names()[0].clone();
    /// let out = dir.path().join("one.npy");
    /// doc.convert_to_with(&out, Target::from(tensorfmt::Format::Npy), Some(&[first.clone()]), &WriteOptions::default())?;
    /// assert_eq!(Document::open(&out)?.entry("one")?.read()?, doc.entry(&first)?.read()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn convert_to_with(
        &self,
        path: impl AsRef<Path>,
        target: impl Into<Target>,
        names: Option<&[String]>,
        options: &WriteOptions,
    ) -> Result<WriteReport> {
        self.convert_tracked(path, target, names, options, &Progress::silent())
    }

    /// [`convert_to_with`](Document::convert_to_with) reporting to `hook` (see
    /// [`crate::progress`]): `(done, total)` in bytes of the selected tensors as
    /// listed, from `(0, total)` through every few MiB of the pieces read to
    /// `(total, total)`, whichever way the file is written (kept, restored from
    /// metadata, or converted). An error from the hook stops the conversion at that
    /// piece: nothing is written, and the error is returned. The CLI's progress bar
    /// and Python's `progress=` are hooks on this.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use tensorfmt::{Document, Format, WriteOptions};
    /// let dir = tempfile::tempdir()?;
    /// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
    /// let doc = Document::open(&path)?;
    /// let seen = Mutex::new(Vec::new());
    /// let hook = |done, total| { seen.lock().unwrap().push((done, total)); Ok(()) };
    /// let out = dir.path().join("act.npz");
    /// doc.convert_with_progress(&out, Format::Npz, None, &WriteOptions::default(), &hook)?;
    /// let seen = seen.into_inner().unwrap();
    /// let total = tensorfmt::progress::total_bytes(&doc, &doc.names());
    /// assert_eq!((seen[0], *seen.last().unwrap()), ((0, total), (total, total)));
    ///
    /// // A hook that fails stops the conversion: no file.
    /// let stop = |done, _| if done > 0 { Err(tensorfmt::Error::Invalid("stop".into())) } else { Ok(()) };
    /// let out = dir.path().join("never.safetensors");
    /// assert!(doc.convert_with_progress(&out, Format::Safetensors, None, &WriteOptions::default(), &stop).is_err());
    /// assert!(!out.exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn convert_with_progress(
        &self,
        path: impl AsRef<Path>,
        target: impl Into<Target>,
        names: Option<&[String]>,
        options: &WriteOptions,
        hook: &crate::progress::Hook<'_>,
    ) -> Result<WriteReport> {
        let total = match names {
            Some(n) => crate::progress::total_bytes(&*self.file, n),
            None => crate::progress::total_bytes(&*self.file, &self.names()),
        };
        let progress = Progress::new(total, hook);
        progress.start()?;
        let report = self.convert_tracked(path, target, names, options, &progress)?;
        progress.finish()?;
        Ok(report)
    }

    /// The one whole-file conversion (the CLI's and Python's): kept, restored, or
    /// converted with the skeleton recorded, reading through `progress`.
    fn convert_tracked(
        &self,
        path: impl AsRef<Path>,
        target: impl Into<Target>,
        names: Option<&[String]>,
        options: &WriteOptions,
        progress: &Progress<'_>,
    ) -> Result<WriteReport> {
        self.check_input()?;
        let target = target.into();
        if let Some(original) = options.extra.get(crate::like::LIKE_KEY) {
            return self.convert_like(path.as_ref(), &target, names, options, original, progress);
        }
        let whole = names.is_none();
        let all;
        let names = match names {
            Some(n) => n,
            None => {
                all = self.names();
                &all
            }
        };
        let path = path.as_ref();
        let mut notes = Vec::new();
        let mut options = options.clone();
        // A kind the output's extension implies (`.caffemodel`) asks for nothing new.
        let kind = target.kind.as_ref().or(options.kind.as_ref());
        let implied =
            kind.is_none() || kind == Target::from_path(path).and_then(|t| t.kind).as_ref();
        if whole && self.source.is_some() && implied {
            let plain_target = Target::new(target.format);
            let plain = WriteOptions {
                kind: None,
                ..options.clone()
            };
            let ext = |p: &Path| p.extension().map(|e| e.to_ascii_lowercase());
            if kind.is_none() || ext(&self.path) == ext(path) {
                if let Some(report) = formats::keep_unchanged_tracked(
                    &self.path,
                    self,
                    path,
                    &plain_target,
                    &plain,
                    progress,
                )? {
                    return Ok(report);
                }
            }
            match self.restore_tracked(path, &plain_target, &plain, progress)? {
                Restored::Written(report) => return Ok(report),
                Restored::Refused(why) => notes.push(why),
                Restored::NotRecorded => {}
            }
        }
        if whole
            && matches!(target.format, Format::Safetensors | Format::Npz)
            && options.dtype.is_none()
        {
            let rec = self.record_source()?;
            notes.extend(rec.note);
            if let Some(json) = rec.json {
                options
                    .extra
                    .entry(provenance::KEY.to_string())
                    .or_insert(json);
            }
        }
        if names.is_empty() && !options.extra.contains_key(provenance::KEY) {
            // An empty archive would be a valid file, but some formats cannot say
            // "empty" (an empty caffemodel is a 0-byte file), and a user converting a
            // file with no tensors (a primitiv optimizer state, a net without weights)
            // wants to know. With its skeleton carried in metadata such a file is not
            // empty.
            return Err(Error::Invalid(format!(
                "{} holds no tensors, so there is nothing to convert",
                self.path.display()
            )));
        }
        if target.kind.is_some() {
            options.kind = target.kind.clone();
        }
        let source = crate::progress::Tracked::new(&*self.file, progress);
        let mut report = formats::convert(&source, names, path, target.format, &options)?;
        report.warnings.extend(notes);
        Ok(report)
    }
}

impl Document {
    /// `like=ORIGINAL` ([`crate::like`]): the tensors (all, or `names`; a sparse
    /// layout seen as the original's `values`, as `convert` back to it sees it) read
    /// through `progress`, then written into the structure of `original`.
    fn convert_like(
        &self,
        path: &Path,
        target: &Target,
        names: Option<&[String]>,
        options: &WriteOptions,
        original: &str,
        progress: &Progress<'_>,
    ) -> Result<WriteReport> {
        let view = crate::interop::sparse::as_original(self)?;
        let file: &dyn TensorFile = match &view {
            Some(v) => v,
            None => &*self.file,
        };
        let source = crate::progress::Tracked::new(file, progress);
        let all;
        let names = match names {
            Some(n) => n,
            None => {
                all = file
                    .tensors()
                    .into_iter()
                    .map(|i| i.name)
                    .collect::<Vec<_>>();
                &all
            }
        };
        let tensors = names
            .iter()
            .map(|n| Ok((n.clone(), source.read_tensor(n)?)))
            .collect::<Result<Vec<_>>>()?;
        // Every tensor is handed over: the last report comes before the write.
        progress.finish()?;
        let mut options = options.clone();
        options.extra.remove(crate::like::LIKE_KEY);
        if target.kind.is_some() {
            options.kind = target.kind.clone();
        }
        crate::like::save_like(path, Path::new(original), &tensors, &options)
    }

    /// Records this whole legacy file's skeleton for a conversion to safetensors or
    /// npz ([`provenance::record`] with the bytes the document was opened from).
    ///
    /// ```
    /// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
    /// let rec = tensorfmt::Document::open(&src)?.record_source()?;
    /// assert!(rec.json.unwrap().contains("\"format\":\"pvp\""));
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    pub fn record_source(&self) -> Result<provenance::Recording> {
        provenance::record(&*self.file, self.source.as_deref(), &self.path)
    }

    /// Rebuilds the legacy file this safetensors or npz document carries, at `path`,
    /// when `target` is its format and nothing else is asked ([`provenance::restore`],
    /// checked by reading the spliced file with that format's reader); the report of
    /// the written file.
    ///
    /// ```
    /// use tensorfmt::{provenance::Restored, Document, Format, Target};
    /// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
    /// let dir = tempfile::tempdir()?;
    /// let npz = dir.path().join("x.npz");
    /// Document::open(&src)?.convert_to(&npz, Format::Npz)?;
    /// let out = dir.path().join("x.pvp");
    /// let done = Document::open(&npz)?.restore_source(&out, &Target::new(Format::Pvp), &Default::default())?;
    /// assert!(matches!(done, Restored::Written(_)));
    /// assert_eq!(std::fs::read(&out)?, std::fs::read(&src)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore_source(
        &self,
        path: &Path,
        target: &Target,
        options: &WriteOptions,
    ) -> Result<Restored<WriteReport>> {
        self.restore_tracked(path, target, options, &Progress::silent())
    }

    /// [`restore_source`](Document::restore_source), reading the tensors through
    /// `progress`.
    fn restore_tracked(
        &self,
        path: &Path,
        target: &Target,
        options: &WriteOptions,
        progress: &Progress<'_>,
    ) -> Result<Restored<WriteReport>> {
        if target.kind.is_some() {
            return Ok(Restored::NotRecorded);
        }
        let format = target.format;
        let reopen = |data: Bytes| formats::open_bytes(data, format, None, &ReadOptions::default());
        // A sparse layout (npz / safetensors) stands for the original's `values`.
        let view = crate::interop::sparse::as_original(self)?;
        let file: &dyn TensorFile = match &view {
            Some(v) => v,
            None => &*self.file,
        };
        let tracked = crate::progress::Tracked::new(file, progress);
        Ok(
            match provenance::restore(&tracked, path, format.name(), options, &reopen)? {
                Restored::Written(()) => Restored::Written(formats::report(
                    path,
                    format,
                    file.tensors().len(),
                    options,
                )?),
                Restored::NotRecorded => Restored::NotRecorded,
                Restored::Refused(why) => Restored::Refused(why),
            },
        )
    }
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
    use tensorfmt_core::Order;

    fn sample_doc(dir: &Path) -> (Document, Tensor, Tensor) {
        let a =
            Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], Order::RowMajor).unwrap();
        let b = Tensor::from_vec(vec![-1i32, 0, 5], [3], Order::RowMajor).unwrap();
        let p = dir.join("s.safetensors");
        formats::save(
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

    #[test]
    fn convert_to_targets_and_kinds() {
        let dir = tempfile::tempdir().unwrap();
        let (doc, _, b) = sample_doc(dir.path());
        let npz = dir.path().join("o.npz");
        doc.convert_to(&npz, Format::Npz).unwrap();
        assert_eq!(Document::open(&npz).unwrap().read_all().unwrap().len(), 2);
        // npy takes one tensor: all of them is an error, a selection works.
        let npy = dir.path().join("o.npy");
        assert!(doc.convert_to(&npy, Format::Npy).is_err());
        doc.convert_to_with(
            &npy,
            Format::Npy,
            Some(&["b".into()]),
            &WriteOptions::default(),
        )
        .unwrap();
        assert_eq!(
            Document::open(&npy)
                .unwrap()
                .entry("o")
                .unwrap()
                .read()
                .unwrap(),
            b
        );
    }

    #[cfg(feature = "som")]
    #[test]
    fn convert_to_a_target_kind() {
        let dir = tempfile::tempdir().unwrap();
        let (doc, a, _) = sample_doc(dir.path());
        // A kind from the target: a PINK data file of the 3 x 4 tensor.
        let data = dir.path().join("d.bin");
        doc.convert_to_with(
            &data,
            "som-data".parse::<Target>().unwrap(),
            Some(&["a".into()]),
            &WriteOptions::default(),
        )
        .unwrap();
        let back = Document::open(&data).unwrap();
        assert_eq!(back.file_format(), Format::Som);
        let t = back.entries().next().unwrap().read().unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), a.to_vec::<f32>().unwrap());
    }

    /// Every way a whole file is written (kept, converted with its skeleton recorded,
    /// restored from it) reports from `(0, total)` to `(total, total)` in order, and a
    /// failing hook leaves no file (nor a temporary) behind.
    #[test]
    fn progress_on_every_conversion_path_and_a_failing_hook_writes_nothing() {
        use std::sync::Mutex;
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
        // A dense PVP movie of 24 MiB, so that pieces report in between.
        let frames = 6;
        let values: Vec<f32> = (0..frames * 1024 * 1024).map(|i| i as f32).collect();
        let movie = Tensor::from_vec(values, [frames, 512, 512, 4], Order::RowMajor).unwrap();
        let pvp = dir.path().join("movie.pvp");
        formats::save(
            &pvp,
            Format::Pvp,
            &[("values".into(), movie)],
            &WriteOptions::default(),
        )
        .unwrap();
        let npz = dir.path().join("movie.npz");
        let back = dir.path().join("back.pvp");
        let kept = dir.path().join("kept.npz");
        let cases: [(&Path, &Path, Format); 4] = [
            (&pvp, &npz, Format::Npz),  // converted, skeleton recorded
            (&npz, &back, Format::Pvp), // restored from the skeleton
            (&npz, &kept, Format::Npz), // kept
            (
                &root.join("pvp/dense_f32.pvp"),
                &dir.path().join("small.safetensors"),
                Format::Safetensors,
            ),
        ];
        for (src, out, format) in cases {
            let doc = Document::open(src).unwrap();
            let total = crate::progress::total_bytes(&doc, &doc.names());
            let seen = Mutex::new(Vec::new());
            let hook = |d, t| {
                seen.lock().unwrap().push((d, t));
                Ok(())
            };
            doc.convert_with_progress(out, format, None, &WriteOptions::default(), &hook)
                .unwrap();
            let seen = seen.into_inner().unwrap();
            assert_eq!(seen.first(), Some(&(0, total)), "{out:?}");
            assert_eq!(seen.last(), Some(&(total, total)), "{out:?}");
            assert!(
                seen.windows(2).all(|w| w[0].0 < w[1].0),
                "{out:?}: {seen:?}"
            );
            if total > 8 << 20 {
                // Pieces of at most 16 MiB: at least one report between start and end.
                assert!(seen.len() >= 3, "{out:?}: {seen:?}");
            }
        }
        assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&pvp).unwrap());
        // A hook failing at its second call, or at the last (done == total): nothing
        // written, whichever path (the last report comes before the commit).
        for (src, format, name) in [
            (&pvp, Format::Npz, "no.npz"),
            (&npz, Format::Pvp, "no.pvp"),
            (&npz, Format::Npz, "no_kept.npz"),
            (&pvp, Format::Safetensors, "no.safetensors"),
        ] {
            let doc = Document::open(src).unwrap();
            for at_end in [false, true] {
                let calls = Mutex::new(0);
                let hook = |done, total| {
                    let mut n = calls.lock().unwrap();
                    *n += 1;
                    if (!at_end && *n > 1) || (at_end && done == total) {
                        Err(Error::Invalid("stopped by the hook".into()))
                    } else {
                        Ok(())
                    }
                };
                let out = dir.path().join(name);
                let err = doc
                    .convert_with_progress(&out, format, None, &WriteOptions::default(), &hook)
                    .unwrap_err();
                assert!(
                    err.to_string().contains("stopped by the hook"),
                    "{name}: {err}"
                );
                assert!(!out.exists(), "{name} (at_end: {at_end})");
            }
        }
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
