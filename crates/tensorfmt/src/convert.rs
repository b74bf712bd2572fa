//! Conversions: every decision about what a write does, in one place, above the
//! dispatch table. The one way in for a file is [`Document::convert_to`] (and
//! [`convert_to_with`](Document::convert_to_with),
//! [`convert_with_progress`](Document::convert_with_progress)): the CLI's `convert`,
//! Python's `convert` and the library call it. Tensors held in memory are written with
//! [`save`] ([`save_to`], [`save_with_progress`]), which shares the same steps.
//!
//! The path of one whole-file conversion, module by module:
//!
//! 1. `convert` (here): [`WriteOptions::like`] writes the tensors into the original's
//!    structure (`save_like`, the splice below with the original's skeleton); a file converted to
//!    its own format with nothing asked is copied ([`keep_unchanged`]); a safetensors /
//!    npz file that carries a legacy skeleton is spliced back into the original
//!    ([`provenance::restore`], read back through `dispatch`); a legacy file going to
//!    safetensors / npz has its skeleton recorded ([`provenance::record`]);
//! 2. `convert` again: a sparse tensor stays sparse (`interop::sparse` writes the CSR
//!    layout) or its dense size is bounded;
//! 3. `dispatch`: the format's writer (`interop::*` or the format crate's
//!    `save_tensors`, through an `AtomicFile`), then the written file read back into a
//!    [`WriteReport`];
//! 4. `convert`: the warnings of what the original program will miss.
//!
//! New policy (a check, a note, an option that changes what is written) goes here;
//! `dispatch` only opens and writes a format, and `format` only names and recognises
//! one.

use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::{
    DType, Error, FieldValue, ReadOptions, Result, SparseOutput, Tensor, TensorFile, TensorInfo,
    WriteOptions,
};

use crate::dispatch::{self, WriteReport};
use crate::document::{self, Document};
use crate::format::{Format, Target};
use crate::interop::sparse::{self, MAX_DENSE_BYTES};
use crate::interop::MemoryFile;
use crate::progress::{Progress, Reading, Tracked};
use crate::provenance::{self, Restored};

impl Document {
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
            Some(n) => crate::progress::total_bytes(self.file(), n),
            None => crate::progress::total_bytes(self.file(), &self.names()),
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
        self.refuse_overwriting_inputs(path.as_ref(), target.format)?;
        if let Some(original) = &options.like {
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
        // A carried original whose edited tensors are written anew in its layout.
        let mut anew = None;
        let mut carried_layout = None;
        let mut options = options.clone();
        // A kind asks for nothing new when the output's extension implies it
        // (`.caffemodel`), or it is the kind of the file that would be kept or restored:
        // this file's own (to its own format) or the carried original's.
        let kind = target.kind.as_ref().or(options.kind.as_ref());
        let asked = kind.map(|k| target.format.kind_named(k).unwrap_or(k));
        let own = (target.format == self.file_format()).then(|| self.file().kind_id());
        // To its own format and kind, a file's layout goes with its tensors where they
        // do not tell it (a SOM's map rank): the writer's defaults, never refused.
        let own_layout = own.is_some() && (asked.is_none() || asked == own);
        let implied = match asked {
            None => true,
            Some(k) => {
                kind == Target::from_path(path).and_then(|t| t.kind).as_ref()
                    || Some(k) == own
                    // The carried metadata is parsed only when a kind asks for it.
                    || provenance::carried_kind(self.file())
                        .is_some_and(|(f, c)| f == target.format.name() && c == k)
            }
        };
        if whole && self.source_bytes().is_some() && implied {
            let plain_target = Target::new(target.format);
            let plain = WriteOptions {
                kind: None,
                ..options.clone()
            };
            let ext = |p: &Path| p.extension().map(|e| e.to_ascii_lowercase());
            if kind.is_none() || asked == own || ext(self.path()) == ext(path) {
                if let Some(report) = keep_unchanged_tracked(
                    self.path(),
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
                Restored::Written(report) => {
                    // The carried original, unless the output's name asks for another
                    // kind (`x.npz` -> `y.som` of a data file): then the tensors, below.
                    match asked {
                        Some(k) if k != report.kind => notes.push(format!(
                            "the original {} file was not restored: {} asks for {k}",
                            report.kind,
                            path.display()
                        )),
                        _ => return Ok(report),
                    }
                }
                Restored::Refused(why) => {
                    notes.push(why);
                    // Not restored because the write asks for something of its own:
                    // the original's layout goes with its tensors, as a file's own does
                    // to its own format (a rotation/flip file's map dims became a line).
                    if !plain.asks_nothing() {
                        carried_layout =
                            provenance::carried_layout(self.file(), target.format.name(), asked);
                    }
                }
                Restored::Anew(a) => {
                    notes.push(anew_warning(target.format, &a));
                    anew = Some(a);
                }
                Restored::NotRecorded => {}
            }
        }
        notes.extend(onnx_graph_note(self.file(), target.format));
        if whole
            && matches!(target.format, Format::Safetensors | Format::Npz)
            && options.dtype.is_none()
        {
            let rec = self.record_source()?;
            notes.extend(rec.note);
            // Metadata handed on by the caller wins over a fresh record.
            if options.carried.is_none() {
                options.carried = rec.json;
            }
        } else if whole
            && matches!(target.format, Format::Safetensors | Format::Npz)
            && matches!(
                self.file_format(),
                Format::Pvp | Format::Som | Format::Primitiv | Format::Caffe
            )
        {
            // Retyped tensors no longer fit the original's layout: nothing is recorded,
            // and a conversion back cannot give the original; say so, as a partial read
            // does.
            let example = match self.file_format() {
                Format::Primitiv => " (a Parameter's stats come back as parameters of a Model)",
                _ => "",
            };
            notes.push(format!(
                "{}: its tensors are stored as another type (--dtype), so its header and \
                 layout are not kept in the metadata: converting back writes a {} file from \
                 the tensors alone, of the kind they make{example}",
                self.path().display(),
                self.file_format()
            ));
        }
        if names.is_empty() && options.carried.is_none() {
            // An empty archive would be a valid file, but some formats cannot say
            // "empty" (an empty caffemodel is a 0-byte file), and a user converting a
            // file with no tensors (a primitiv optimizer state, a net without weights)
            // wants to know. With its skeleton carried in metadata such a file is not
            // empty.
            return Err(Error::Invalid(format!(
                "{} holds no tensors, so there is nothing to convert",
                self.path().display()
            )));
        }
        if target.kind.is_some() {
            options.kind = target.kind.clone();
        }
        if own_layout {
            options.source_layout = self.file().layout_settings().into_iter().collect();
        }
        if let Some(layout) = carried_layout {
            options.source_layout = layout.into_iter().collect();
        }
        // A carried original edited where it cannot be spliced: its kind and layout.
        if let Some(a) = &anew {
            options.source_layout = a.layout.iter().cloned().collect();
            if options.kind.is_none() {
                options.kind = target.format.kind_named(a.kind_id).map(String::from);
            }
        }
        let source = Reading::of(self.file(), progress);
        let mut report = write_selection(&*source, names, path, target.format, &options)?;
        if let Some(a) = &anew {
            report.warnings.extend(anew_layout_lost(path, a)?);
        }
        // What the reader said of the input (a repaired frame count, members left out)
        // is said of the conversion too.
        let input = self.path().display().to_string();
        let mut warnings: Vec<String> = self
            .file()
            .warnings()
            .into_iter()
            .map(|w| format!("input {input}: {w}"))
            .collect();
        warnings.extend(notes);
        warnings.append(&mut report.warnings);
        report.warnings = warnings;
        Ok(report)
    }

    /// `like=ORIGINAL` (`save_like`): the tensors (all, or `names`; a sparse
    /// layout seen as the original's `values`, as `convert` back to it sees it) read
    /// through `progress`, then written into the structure of `original`.
    fn convert_like(
        &self,
        path: &Path,
        target: &Target,
        names: Option<&[String]>,
        options: &WriteOptions,
        original: &Path,
        progress: &Progress<'_>,
    ) -> Result<WriteReport> {
        let view = sparse::as_original(self)?;
        let file: &dyn TensorFile = match &view {
            Some(v) => v,
            None => self.file(),
        };
        let source = Tracked::new(file, progress);
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
        options.like = None;
        if target.kind.is_some() {
            options.kind = target.kind.clone();
        }
        save_like(path, original, &tensors, &options)
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
        provenance::record(
            self.file(),
            self.source_bytes().map(|b| &b[..]),
            self.path(),
        )
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
        let reopen =
            |data: Bytes| dispatch::open_bytes(data, format, None, &ReadOptions::default());
        // A sparse layout (npz / safetensors) stands for the original's `values`.
        let view = sparse::as_original(self)?;
        let file: &dyn TensorFile = match &view {
            Some(v) => v,
            None => self.file(),
        };
        let tracked = Tracked::new(file, progress);
        Ok(
            match provenance::restore(&tracked, path, format.name(), options, &reopen)? {
                Restored::Written(()) => Restored::Written(dispatch::report(
                    path,
                    format,
                    file.tensors().len(),
                    options,
                )?),
                Restored::NotRecorded => Restored::NotRecorded,
                Restored::Refused(why) => Restored::Refused(why),
                Restored::Anew(a) => Restored::Anew(a),
            },
        )
    }
}

/// Saves named tensors in a format (atomically). For `.npy`, exactly one tensor.
/// Returns what the written file holds (read back from it) and any warnings.
pub fn save(
    path: &Path,
    format: Format,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<WriteReport> {
    save_tracked(path, format, tensors, options, &Progress::silent())
}

/// [`save_to`] reporting to `hook` (see [`crate::progress`]): `(done, total)` in
/// bytes of the given tensors, from `(0, total)` to `(total, total)`, every few MiB
/// of the pieces written for npy, npz and safetensors (the other formats take all
/// tensors at once, after the last report). An error from the hook stops the write;
/// the file is not written.
///
/// ```
/// use std::sync::Mutex;
/// use tensorfmt::{Order, Target, Tensor};
/// let dir = tempfile::tempdir()?;
/// let t = Tensor::from_vec(vec![0f32; 1000], [10, 100], Order::RowMajor)?;
/// let seen = Mutex::new(Vec::new());
/// let hook = |done, total| { seen.lock().unwrap().push((done, total)); Ok(()) };
/// let out = dir.path().join("t.npy");
/// tensorfmt::save_with_progress(&out, &Target::new(tensorfmt::Format::Npy), &[("t".into(), t)], &Default::default(), &hook)?;
/// assert_eq!(seen.into_inner().unwrap(), [(0, 4000), (4000, 4000)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_with_progress(
    path: &Path,
    target: &Target,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
    hook: &crate::progress::Hook<'_>,
) -> Result<WriteReport> {
    let total = tensors.iter().map(|(_, t)| t.bytes().len() as u64).sum();
    let progress = Progress::new(total, hook);
    progress.start()?;
    let options = match &target.kind {
        Some(kind) => std::borrow::Cow::Owned(WriteOptions {
            kind: Some(kind.clone()),
            ..options.clone()
        }),
        None => std::borrow::Cow::Borrowed(options),
    };
    let report = save_tracked(path, target.format, tensors, &options, &progress)?;
    progress.finish()?;
    Ok(report)
}

fn save_tracked(
    path: &Path,
    format: Format,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
    progress: &Progress<'_>,
) -> Result<WriteReport> {
    if let Some(original) = &options.like {
        let o = WriteOptions {
            like: None,
            ..options.clone()
        };
        return save_like(path, original, tensors, &o);
    }
    let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    match retype(&names, format, options) {
        // `--dtype` per tensor: the values take it, a sparse layout's index arrays not.
        Some(re) => {
            let memory = MemoryFile::new(tensors.to_vec());
            let tracked = Tracked::new(&memory, progress);
            // The streaming writers' in-memory default (one thread), as `write_tensors`.
            let plain = match format {
                Format::Onnx => std::borrow::Cow::Borrowed(&re.plain),
                _ => crate::interop::in_memory_options(&re.plain),
            };
            dispatch::write_from(&re.view(&tracked), &names, path, format, &plain)?;
        }
        None => dispatch::write_tensors(path, format, tensors, options, progress)?,
    }
    let mut r = dispatch::report(path, format, sparse::offered(&names, format), options)?;
    let f64s = tensors
        .iter()
        .filter(|(_, t)| t.dtype() == DType::F64)
        .count();
    r.warnings
        .extend(f64_to_caffe_warning(format, f64s, options));
    r.warnings.extend(cast_warnings(tensors, format, options)?);
    r.warnings
        .extend(weights_only_warning(path, format, &names, options));
    r.warnings.extend(left_out_warning(format, &names));
    Ok(r)
}

/// The tensors among several that a PVP or PINK file has no place for: those writers
/// take their tensors by name and pass over the rest, which a count of the written
/// file does not reveal when the format adds one (`values` and `labels` in, `values`
/// and `time` out). A lone array becomes the main tensor whatever its name.
fn left_out_warning(format: Format, names: &[String]) -> Option<String> {
    let takes: &[&str] = match format {
        Format::Pvp => &[
            "values",
            "time",
            "weights",
            "indptr",
            "indices",
            "data",
            "shape",
            "frame_shape",
        ],
        Format::Som => &["data", "som", "distances", "flip", "angle", "hex_axial"],
        _ => return None,
    };
    if names.len() < 2 {
        return None;
    }
    let left: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !takes.contains(n))
        .collect();
    (!left.is_empty()).then(|| {
        format!(
            "not written (a {} file has no place for them): {}",
            format.name(),
            left.join(", ")
        )
    })
}

/// A Caffe model or solver state written from tensors alone says what it lacks (the
/// original's structure travels only through carried metadata or `like=`).
fn weights_only_warning(
    path: &Path,
    format: Format,
    names: &[String],
    options: &WriteOptions,
) -> Option<String> {
    #[cfg(feature = "caffe")]
    if format == Format::Caffe {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let ext = path.extension().and_then(|e| e.to_str());
        return tensorfmt_caffe::weights_only_note(&names, options, ext);
    }
    let _ = (path, format, names, options);
    None
}

/// Caffe stores float64 tensors as float32 `data` unless f64 is asked for (OpenCV 4 and
/// pycaffe read only `data`): say that precision was lost.
fn f64_to_caffe_warning(format: Format, f64s: usize, options: &WriteOptions) -> Option<String> {
    (format == Format::Caffe && f64s > 0 && options.dtype != Some(DType::F64)).then(|| {
        format!(
            "{f64s} float64 tensor(s) stored as float32 `data`, the field Caffe, OpenCV 4 \
             (readNetFromCaffe) and pycaffe read: precision beyond float32 is lost \
             (--dtype f64 / dtype=\"f64\" keeps float64 as `double_data`, which OpenCV \
             and pycaffe's blobproto_to_array refuse)"
        )
    })
}

/// Saves named tensors as a [`Target`]: its format, and its file kind when it has one
/// (overriding `options.kind`).
///
/// ```
/// use tensorfmt::{Order, Target, Tensor};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("sparse.pvp");
/// let v = Tensor::from_vec(vec![0f32, 1.0, 0.0, 2.0], [2, 1, 2, 1], Order::RowMajor)?;
/// tensorfmt::save_to(&p, &"pvp:sparse".parse::<Target>()?, &[("values".into(), v)], &Default::default())?;
/// assert!(tensorfmt::open(&p, &Default::default())?.kind().starts_with("sparse"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_to(
    path: &Path,
    target: &Target,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<WriteReport> {
    if target.kind.is_some() {
        let options = WriteOptions {
            kind: target.kind.clone(),
            ..options.clone()
        };
        save(path, target.format, tensors, &options)
    } else {
        save(path, target.format, tensors, options)
    }
}

/// Writes tensors `names` of `source` as `format`, the last step of every conversion:
/// a sparse tensor kept sparse (or its dense size bounded), the dispatch table's
/// writer, the written file read back into the report, and the warnings of what the
/// original program will miss.
fn write_selection(
    source: &dyn TensorFile,
    names: &[String],
    path: &Path,
    format: Format,
    options: &WriteOptions,
) -> Result<WriteReport> {
    // Sparse tensors stay sparse in npz / safetensors; densifying is bounded.
    if let Some(report) = keep_sparse(source, names, path, format, options)? {
        return Ok(report);
    }
    match retype(names, format, options) {
        // `--dtype` per tensor: the values take it, a sparse layout's index arrays not.
        Some(re) => dispatch::write_from(&re.view(source), names, path, format, &re.plain)?,
        None => dispatch::write_from(source, names, path, format, options)?,
    }
    let mut r = dispatch::report(path, format, sparse::offered(names, format), options)?;
    // One set of the written names, not a search of `names` per tensor (quadratic).
    let written: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let f64s = source
        .tensors()
        .iter()
        .filter(|i| i.dtype == DType::F64 && written.contains(i.name.as_str()))
        .count();
    r.warnings
        .extend(f64_to_caffe_warning(format, f64s, options));
    for info in source.tensors() {
        if !written.contains(info.name.as_str()) {
            continue;
        }
        if let Some(to) = cast_target(&info.name, info.dtype, format, options, names) {
            // In pieces: a large float64 movie written as float32 is not held whole.
            let mut changed = 0;
            for piece in source.read_chunks(&info.name)? {
                changed += cast_loss_count(&piece?, to)?;
            }
            r.warnings
                .extend(cast_loss_warning(&info.name, info.dtype, to, changed));
        }
    }
    if let Some(info) = source
        .tensors()
        .iter()
        .find(|i| written.contains(i.name.as_str()) && is_byte_weights(&i.name, format, options))
    {
        let t = source.read_tensor(&info.name)?;
        r.warnings.extend(byte_weight_warning(&info.name, &t)?);
    }
    let bf16s = source
        .tensors()
        .iter()
        .filter(|i| {
            written.contains(i.name.as_str())
                && stored_as(&i.name, i.dtype, format, options, names) == DType::BF16
        })
        .count();
    r.warnings.extend(bf16_numpy_note(format, bf16s));
    r.warnings
        .extend(weights_only_warning(path, format, names, options));
    r.warnings.extend(left_out_warning(format, names));
    Ok(r)
}

/// The dtype tensor `name` of `from` is stored as when it may not keep its values: the
/// `--dtype` asked, else what the format stores: Caffe's float32 `data` for integers and
/// float64 (unless f64 is asked), PVP's float32 for activity and weights (not `time`
/// nor a sparse file's index arrays), PINK's float32 for data, neurons, distances and
/// angles (a lone array is one of them whatever its name). `None` when the store
/// keeps every value (a wider type) or nothing is cast: the tensors of `names` that
/// keep their dtype ([`sparse::keeps_its_dtype`], where the writer is handed them as
/// they are: [`retype`]).
fn cast_target(
    name: &str,
    from: DType,
    format: Format,
    options: &WriteOptions,
    names: &[String],
) -> Option<DType> {
    let to = match options.dtype {
        Some(_) if casts_only(format) && sparse::keeps_its_dtype(name, names) => return None,
        // OpenPV's byte weights are quantised in each frame's range, not cast: counted
        // by `byte_weight_warning`.
        Some(DType::U8) if is_byte_weights(name, format, options) => return None,
        Some(d) => d,
        None if format == Format::Caffe && (from.is_int() || from == DType::F64) => DType::F32,
        None if format == Format::Pvp
            && from != DType::F32
            && !sparse::KEEPS_ITS_DTYPE.contains(&name) =>
        {
            DType::F32
        }
        None if format == Format::Som
            && (from.is_int() || from == DType::F64)
            && !matches!(name, "flip" | "hex_axial") =>
        {
            DType::F32
        }
        None => return None,
    };
    let risky = (to == DType::Bool && from != DType::Bool)
        || (from.is_int() && from.size() >= 4 && to.is_float() && to.size() <= 4)
        || (from.is_int() && to.is_float() && to.size() < 4)
        || (from.is_float() && to.is_int())
        || (from.is_float() && to.is_float() && to.size() < from.size())
        || (from.is_int() && to.is_int() && {
            // Narrowing only: the target's range must miss part of the source's.
            let ((a, b), (c, d)) = (int_bounds(from), int_bounds(to));
            a < c || b > d
        });
    risky.then_some(to)
}

/// The values an integer dtype holds.
fn int_bounds(d: DType) -> (i128, i128) {
    match d {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        _ => (i128::MIN, i128::MAX),
    }
}

/// How many values of `t` the cast to `to` changes beyond rounding: integers past the
/// float type's exact range (2^24 for float32) or the integer type's range (wrapped);
/// NaN, infinities or values out of an integer type's range (saturated; NaN becomes
/// 0); finite floats that overflow a narrower float type (to ±inf) or underflow it (to
/// 0), where numpy's `astype` would change them silently. One pass over one copy of
/// the values (none for f64 and u64).
fn cast_loss_count(t: &Tensor, to: DType) -> Result<usize> {
    let from = t.dtype();
    Ok(if to == DType::Bool {
        // Everything but 0 and 1 becomes 1 (true), NaN too.
        if from == DType::U64 {
            t.typed::<u64>()?.iter().filter(|&&v| v > 1).count()
        } else if from.is_int() || from == DType::Bool {
            let wide = t.cast(DType::I64)?;
            let n = wide
                .typed::<i64>()?
                .iter()
                .filter(|&&v| v != 0 && v != 1)
                .count();
            n
        } else {
            let wide = t.cast(DType::F64)?;
            let n = wide
                .typed::<f64>()?
                .iter()
                .filter(|&&v| v != 0.0 && v != 1.0)
                .count();
            n
        }
    } else if from.is_int() {
        // Exactly, in i128.
        let (lo, hi) = if to.is_float() {
            let exact: i128 = match to {
                DType::BF16 => 1 << 8,
                DType::F16 => 1 << 11,
                DType::F32 => 1 << 24,
                _ => 1 << 53,
            };
            (-exact, exact)
        } else {
            int_bounds(to)
        };
        let outside = |v: i128| v < lo || v > hi;
        if from == DType::U64 {
            t.typed::<u64>()?
                .iter()
                .filter(|&&v| outside(v.into()))
                .count()
        } else {
            let wide = t.cast(DType::I64)?;
            let n = wide
                .typed::<i64>()?
                .iter()
                .filter(|&&v| outside(v.into()))
                .count();
            n
        }
    } else if from == DType::F64 && to == DType::F32 {
        // The implicit store of PVP, PINK and Caffe: one pass, no copy.
        let lost = |x: f64| {
            let y = x as f32;
            (x.is_finite() && !y.is_finite()) || (x != 0.0 && y == 0.0)
        };
        // Counting needs no order: the stored values as they lie.
        t.typed::<f64>()?.iter().filter(|&&x| lost(x)).count()
    } else if to.is_float() {
        // A narrower float: range, not precision (rounding is what a float cast does).
        let wide = t.cast(DType::F64)?;
        let narrow = t.cast(to)?.cast(DType::F64)?;
        let (a, b) = (wide.typed::<f64>()?, narrow.typed::<f64>()?);
        a.iter()
            .zip(b.iter())
            .filter(|(x, y)| (x.is_finite() && !y.is_finite()) || (**x != 0.0 && **y == 0.0))
            .count()
    } else {
        // A float into an integer type.
        let (lo, hi) = int_bounds(to);
        let (lo, hi) = (lo as f64, hi as f64 + 1.0);
        let wide = t.cast(DType::F64)?;
        let n = wide
            .typed::<f64>()?
            .iter()
            .filter(|v| !v.is_finite() || **v < lo || **v >= hi)
            .count();
        n
    })
}

/// The warning for `changed` values of tensor `name` cast from `from` to `to`.
fn cast_loss_warning(name: &str, from: DType, to: DType, changed: usize) -> Option<String> {
    (changed > 0).then(|| {
        let what = if to == DType::Bool && from.is_float() {
            "neither 0 nor 1 (NaN included), stored as true (1)"
        } else if to == DType::Bool {
            "neither 0 nor 1, stored as true (1)"
        } else if from.is_float() && to.is_float() {
            "beyond its range, overflowed to infinity or underflowed to 0"
        } else if to.is_float() {
            "integers beyond its exact range, rounded"
        } else if from.is_int() {
            "out of its range, wrapped as numpy's astype wraps them"
        } else {
            "NaN, infinite or out of its range, saturated (NaN as 0)"
        };
        format!("{name}: {changed} value(s) of {from} stored as {to}: {what}")
    })
}

/// The type tensor `name` (of `from`, among `names`) is stored as in `format`: the
/// `--dtype` asked, but where the tensor keeps its own ([`retype`]).
fn stored_as(
    name: &str,
    from: DType,
    format: Format,
    options: &WriteOptions,
    names: &[String],
) -> DType {
    match options.dtype {
        Some(_) if casts_only(format) && sparse::keeps_its_dtype(name, names) => from,
        Some(d) => d,
        None => from,
    }
}

/// npy and npz store bfloat16 as numpy's raw 2-byte void (`<V2`): numpy has no such
/// type, so `np.load` gives elements it cannot compute with. Said, with the way to
/// see them (tensorfmt and safetensors read them as bfloat16).
fn bf16_numpy_note(format: Format, bf16s: usize) -> Option<String> {
    (matches!(format, Format::Npy | Format::Npz) && bf16s > 0).then(|| {
        format!(
            "{bf16s} tensor(s) stored as bfloat16, which numpy has no type for: np.load \
             gives raw 2-byte void elements (|V2); view them with ml_dtypes \
             (`a.view(ml_dtypes.bfloat16)`) or load the file with tensorfmt"
        )
    })
}

/// Whether `name` is written as OpenPV byte weights: PVP's `weights` with `--dtype u8`.
fn is_byte_weights(name: &str, format: Format, options: &WriteOptions) -> bool {
    format == Format::Pvp && name == "weights" && options.dtype == Some(DType::U8)
}

/// The warning for weights `t` written as OpenPV byte weights: how many values the
/// 256 levels between each frame's min and max do not hold (a frame is everything
/// after the first axis of 6-D weights, the whole tensor otherwise).
#[cfg(feature = "pvp")]
fn byte_weight_warning(name: &str, t: &Tensor) -> Result<Option<String>> {
    let dims = t.shape().dims();
    let frames = if dims.len() == 6 { dims[0].max(1) } else { 1 };
    let values = t.cast(DType::F32)?;
    let values = values.typed::<f32>()?;
    let per = (values.len() / frames).max(1);
    let changed: usize = values
        .chunks(per)
        .map(tensorfmt_pvp::byte_weight_changes)
        .sum();
    Ok((changed > 0).then(|| {
        format!(
            "{name}: {changed} value(s) of {} stored as OpenPV byte weights (u8): \
             quantised to the 256 levels between each frame's min and max, as OpenPV \
             stores them",
            t.dtype()
        )
    }))
}

#[cfg(not(feature = "pvp"))]
fn byte_weight_warning(_: &str, _: &Tensor) -> Result<Option<String>> {
    Ok(None)
}

/// The warnings of the values `tensors` lose to the type `format` stores them as.
fn cast_warnings(
    tensors: &[(String, Tensor)],
    format: Format,
    options: &WriteOptions,
) -> Result<Vec<String>> {
    let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    let mut warnings = Vec::new();
    for (name, t) in tensors {
        if let Some(to) = cast_target(name, t.dtype(), format, options, &names) {
            let changed = cast_loss_count(t, to)?;
            warnings.extend(cast_loss_warning(name, t.dtype(), to, changed));
        }
        if is_byte_weights(name, format, options) {
            warnings.extend(byte_weight_warning(name, t)?);
        }
    }
    let bf16s = tensors
        .iter()
        .filter(|(n, t)| stored_as(n, t.dtype(), format, options, &names) == DType::BF16)
        .count();
    warnings.extend(bf16_numpy_note(format, bf16s));
    Ok(warnings)
}

/// Whether `format`'s writer does nothing with [`WriteOptions::dtype`] but cast every
/// tensor to it (npy, npz, safetensors, ONNX), so that the facade can hand it the
/// tensors already in their stored types instead ([`retype`]). The other writers give
/// the dtype a meaning of their own (PVP byte weights, Caffe's `double_data`, PINK's
/// data type) and store floats only.
fn casts_only(format: Format) -> bool {
    matches!(
        format,
        Format::Npy | Format::Npz | Format::Safetensors | Format::Onnx
    )
}

/// `--dtype` applied per tensor by the facade ([`retype`]): the dtype, the tensors
/// that keep theirs, and the options to hand the writer (without the dtype).
struct Retype {
    to: DType,
    keep: std::collections::HashSet<String>,
    plain: WriteOptions,
}

impl Retype {
    /// `inner` as the writer stores it.
    fn view<'a>(&self, inner: &'a dyn TensorFile) -> crate::interop::Retyped<'a> {
        crate::interop::Retyped {
            inner,
            to: self.to,
            keep: self.keep.clone(),
        }
    }
}

/// `--dtype` as the values' type: when tensors `names` hold a sparse layout (a CSR
/// group, [`sparse::keeps_its_dtype`]) and `format`'s writer only casts, the writer is
/// handed a view that stores every tensor but the layout's index arrays, shapes and
/// times as the dtype asked, and no dtype. `None`: the writer applies `options.dtype`
/// to every tensor, as usual.
fn retype(names: &[String], format: Format, options: &WriteOptions) -> Option<Retype> {
    let to = options.dtype?;
    let keep: std::collections::HashSet<String> = names
        .iter()
        .filter(|n| sparse::keeps_its_dtype(n, names))
        .cloned()
        .collect();
    if keep.is_empty() || !casts_only(format) {
        return None;
    }
    let plain = WriteOptions {
        dtype: None,
        ..options.clone()
    };
    Some(Retype { to, keep, plain })
}

/// The names among `names` that `file` stores sparsely.
fn sparse_names(file: &dyn TensorFile, names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| file.sparse_rows(n).is_some())
        .cloned()
        .collect()
}

fn dense_bytes(file: &dyn TensorFile, name: &str) -> Result<u64> {
    let info = crate::interop::info_of(file, name)?;
    Ok(info.shape.byte_len(info.dtype.size()).unwrap_or(usize::MAX) as u64)
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Writes `names` of `file` to `path` keeping sparse tensors sparse (npz, safetensors),
/// or checks the bound before a dense write. `Ok(None)`: nothing sparse here (or
/// densifying was asked and fits), the caller writes as usual.
fn keep_sparse(
    file: &dyn TensorFile,
    names: &[String],
    path: &Path,
    format: Format,
    options: &WriteOptions,
) -> Result<Option<WriteReport>> {
    let sparse = sparse_names(file, names);
    if sparse.is_empty() {
        return Ok(None);
    }
    let sparse_target = matches!(format, Format::Npz | Format::Safetensors);
    if sparse_target && options.sparse == SparseOutput::Keep {
        if let [name] = &sparse[..] {
            let tensors = sparse::csr_with_others(file, name, names)?;
            let layout: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
            // `--dtype` is the values' type; the layout's index arrays keep theirs.
            let stored = match retype(&layout, format, options) {
                Some(re) => {
                    let memory = MemoryFile::new(tensors.clone());
                    let view = re.view(&memory);
                    layout
                        .iter()
                        .map(|n| Ok((n.clone(), view.read_tensor(n)?)))
                        .collect::<Result<Vec<_>>>()?
                }
                None => tensors.clone(),
            };
            let mut r = sparse::write_layout(&stored, path, format, options)?;
            r.warnings.extend(cast_warnings(&tensors, format, options)?);
            return Ok(Some(r));
        }
    }
    // A sparse PVP file (some of its frames, say) to PVP: a sparse PVP file again, of
    // the same geometry and kind, from its entries, unless a dense file is asked for.
    if format == Format::Pvp
        && options.sparse == SparseOutput::Keep
        && options.kind.as_deref().is_none_or(|k| k == "sparse")
    {
        if let [name] = &sparse[..] {
            return sparse::write_pvp(file, name, names, path, options).map(Some);
        }
    }
    for name in &sparse {
        let bytes = dense_bytes(file, name)?;
        if bytes > MAX_DENSE_BYTES {
            let keep = if sparse_target {
                "keep it sparse (without --dense / dense=True: scipy's save_npz layout in \
                 npz, the CSR triple in safetensors)"
            } else {
                "keep it sparse by converting to npz (scipy's save_npz layout) or \
                 safetensors (CSR), or read it with --sparse / sparse=True / .to_scipy()"
            };
            return Err(Error::Invalid(format!(
                "densifying sparse {name:?} would write {} (the bound for dense output is \
                 {}); {keep}, or select fewer frames with --frames / frames=",
                gib(bytes),
                gib(MAX_DENSE_BYTES)
            )));
        }
    }
    Ok(None)
}

impl Document {
    /// Refuses an output that is one of the files this document's tensors are read
    /// from: the document's own file (by device and inode, so a link to it too, as the
    /// CLI refuses it) or an ONNX model's external data (replacing it would break the
    /// source model); for an ONNX output, neither may be the `OUT.onnx.data` beside it.
    fn refuse_overwriting_inputs(&self, out: &Path, format: Format) -> Result<()> {
        let outputs = match format {
            #[cfg(feature = "onnx")]
            Format::Onnx => vec![out.to_path_buf(), tensorfmt_onnx::external_data_path(out)],
            _ => vec![out.to_path_buf()],
        };
        for o in &outputs {
            if tensorfmt_core::io::same_file(o, self.path()) {
                return Err(Error::Invalid(format!(
                    "the output {} is the input {}; an input is never overwritten",
                    o.display(),
                    self.path().display()
                )));
            }
        }
        let externals = self.file().external_files();
        let dir = self.path().parent().unwrap_or(Path::new(""));
        for o in &outputs {
            for loc in &externals {
                let input = dir.join(loc);
                if tensorfmt_core::io::same_file(o, &input) {
                    return Err(Error::Invalid(format!(
                        "the output {} is {}, the external data of the input {}; an input is \
                         never overwritten",
                        o.display(),
                        input.display(),
                        self.path().display()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// What an ONNX model converted to ONNX other than by a copy loses: tensorfmt writes
/// its initializers as a weights-only model, not its nodes (said, not silent).
fn onnx_graph_note(source: &dyn TensorFile, target: Format) -> Option<String> {
    if source.format() != "onnx" {
        return None;
    }
    let nodes = source.header().into_iter().find_map(|(k, v)| match v {
        FieldValue::UInt(n) if k == "nodes" => Some(n),
        FieldValue::Int(n) if k == "nodes" => u64::try_from(n).ok(),
        _ => None,
    })?;
    let s = if nodes == 1 { "" } else { "s" };
    (nodes > 0).then(|| {
        if target == Format::Onnx {
            format!(
                "the model's graph ({nodes} node{s}) is not written: tensorfmt writes an \
                 ONNX model's initializers as a weights-only model (only a conversion to \
                 ONNX that asks for nothing, no tensor selection, dtype or setting but \
                 external_data, copies the whole model)"
            )
        } else {
            format!(
                "the model's graph ({nodes} node{s}) is not in the {target} file: only its \
                 initializers are"
            )
        }
    })
}

/// Converting a file to its own format with nothing to change keeps it: when `target`
/// is `source`'s format without a kind, `options` ask for nothing (no dtype, settings or
/// layout; `skip_fsync` aside) and the reader needed no leniency
/// ([`TensorFile::lenient`]: a warning that is more than a tensor left out), the
/// file's bytes are copied through an [`AtomicFile`](tensorfmt_core::io::AtomicFile).
/// Everything in it survives, byte for byte: a primitiv Optimizer or Shape, a solver
/// state, a PINK comment block, a hexagonal mapping, a batched tensor. An ONNX model
/// is copied whole also when its data lies in other files or `options` ask only where
/// its data goes (`--set external_data`): its payloads placed anew beside the copy or
/// inside it ([`tensorfmt_onnx::copy_model`]). Returns `None` when a real conversion is
/// needed.
///
/// ```
/// # let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
/// let src = root.join("testdata/primitiv/optimizer_adam.data");
/// let doc = tensorfmt::Document::open(&src)?;
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("copy.data");
/// let target = tensorfmt::Target::new(tensorfmt::Format::Primitiv);
/// let report = tensorfmt::convert::keep_unchanged(&src, &doc, &out, &target, &Default::default())?;
/// assert!(report.is_some());
/// assert_eq!(std::fs::read(&out)?, std::fs::read(&src)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn keep_unchanged(
    source_path: &Path,
    source: &dyn TensorFile,
    path: &Path,
    target: &Target,
    options: &WriteOptions,
) -> Result<Option<WriteReport>> {
    keep_unchanged_tracked(
        source_path,
        source,
        path,
        target,
        options,
        &Progress::silent(),
    )
}

/// [`keep_unchanged`], advancing `progress` in proportion to the bytes copied.
pub(crate) fn keep_unchanged_tracked(
    source_path: &Path,
    source: &dyn TensorFile,
    path: &Path,
    target: &Target,
    options: &WriteOptions,
    progress: &Progress<'_>,
) -> Result<Option<WriteReport>> {
    let same =
        source.format() == target.format.name() && target.kind.is_none() && !source.lenient();
    if !same {
        return Ok(None);
    }
    #[cfg(feature = "onnx")]
    if target.format == Format::Onnx {
        return copy_onnx_model(source_path, source, path, options, progress);
    }
    if !options.asks_nothing() {
        return Ok(None);
    }
    plain_copy(source_path, source, path, target.format, options, progress).map(Some)
}

/// The file's bytes through an [`AtomicFile`](tensorfmt_core::io::AtomicFile), read
/// back for the report.
fn plain_copy(
    source_path: &Path,
    source: &dyn TensorFile,
    path: &Path,
    format: Format,
    options: &WriteOptions,
    progress: &Progress<'_>,
) -> Result<WriteReport> {
    let bytes = tensorfmt_core::io::map_file(source_path)?;
    let mut out = tensorfmt_core::io::AtomicFile::create(path)?.sync(!options.skip_fsync);
    // In pieces, so that a large file's copy reports progress (as a share of the
    // tensors' bytes, the unit of every conversion's progress).
    let len = bytes.len().max(1) as u128;
    let mut copied = 0usize;
    for piece in bytes.chunks(16 << 20) {
        std::io::Write::write_all(&mut out, piece).map_err(|e| Error::io(path, e))?;
        copied += piece.len();
        let share = copied as u128 * progress.total() as u128 / len;
        progress.advance_to(share as u64)?;
    }
    out.commit()?;
    dispatch::report(path, format, source.tensors().len(), options)
}

/// An ONNX model converted to ONNX asking for nothing but where its data goes
/// (`--set external_data`): the whole model, every node and field kept. A model with
/// no data in other files and nothing asked is its own bytes (the plain copy); one with
/// external data, or asked to move its data, is copied with its payloads placed anew
/// ([`tensorfmt_onnx::copy_model`]: inside while it fits 2 GiB, else, or when asked, in
/// `OUT.onnx.data`), as `onnx.load` and `onnx.save_model` would copy it. A copy of its
/// bytes alone would point at data files that are not beside it.
#[cfg(feature = "onnx")]
fn copy_onnx_model(
    source_path: &Path,
    source: &dyn TensorFile,
    path: &Path,
    options: &WriteOptions,
    progress: &Progress<'_>,
) -> Result<Option<WriteReport>> {
    let setting = tensorfmt_onnx::ExternalData::SETTING;
    let mut rest = options.clone();
    let asked = rest.extra.remove(setting);
    if !rest.asks_nothing() {
        return Ok(None);
    }
    if asked.is_none() && source.external_files().is_empty() {
        return plain_copy(source_path, source, path, Format::Onnx, options, progress).map(Some);
    }
    let external = tensorfmt_onnx::ExternalData::parse(asked.as_deref())?;
    let bytes = tensorfmt_core::io::map_file(source_path)?;
    let dir = source_path.parent().unwrap_or(Path::new(""));
    tensorfmt_onnx::copy_model(bytes, dir, path, external, &Default::default(), options)?;
    progress.advance_to(progress.total())?;
    dispatch::report(path, Format::Onnx, source.tensors().len(), options).map(Some)
}

/// `like=ORIGINAL`: writes `tensors` to `path` in the structure of `original`, a file
/// of a legacy format (PVP, PINK, primitiv, Caffe; the format `path` is written in),
/// keeping everything besides the tensors (issue 23 item 7): a Caffe net's name, layer
/// types, blob-less layers, legacy 4-D blob shapes and a solver state's `iter` /
/// `learned_net`; a PVP file's headers; a PINK comment block; a primitiv Optimizer's
/// state.
///
/// It is the [`provenance`] splice with a skeleton taken from `original` instead of
/// from metadata: the tensors must keep the original's names, dtypes and shapes, and
/// the spliced file is read back. When they do not fit, nothing is written and the
/// error says why. When a tensor that is not replaced in place changed (a sparse PVP
/// file's entries or frame times, byte weights, legacy MPI blocks, an unpacked Caffe
/// blob), the file is written anew from the tensors in the original's kind and layout
/// ([`TensorFile::layout_settings`]: a sparse file stays binary where its values are
/// all 0 or 1, byte weights stay bytes where exact, the same weight geometry), read
/// back equal to the tensors, and a warning says so, as the carried route does.
///
/// ```
/// use tensorfmt::{Document, Format};
/// let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
/// let orig = root.join("testdata/caffe/v2_tiny.caffemodel");
/// let mut tensors = Document::open(&orig)?.read_all()?;
/// let (_, t) = &mut tensors[0];
/// *t = t.cast(tensorfmt::DType::F32)?; // edit as you like, same dtype and shape
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("edited.caffemodel");
/// let like = tensorfmt::WriteOptions { like: Some(orig.clone()), ..Default::default() };
/// tensorfmt::save(&out, Format::Caffe, &tensors, &like)?;
/// assert_eq!(std::fs::read(&out)?, std::fs::read(&orig)?); // unchanged values: same bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
fn save_like(
    path: &Path,
    original: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<WriteReport> {
    let orig = document::open(original, &Default::default())?;
    let format = orig.file_format();
    if !matches!(
        format,
        Format::Pvp | Format::Som | Format::Primitiv | Format::Caffe
    ) {
        return Err(Error::Invalid(format!(
            "like={}: a {format} file has no structure besides its tensors (like= is for \
             PVP, PINK, primitiv and Caffe files)",
            original.display()
        )));
    }
    if let Some(t) = Target::from_path(path).filter(|t| t.format != format) {
        return Err(Error::Invalid(format!(
            "like={}: {} would be {}, the original is {format}",
            original.display(),
            path.display(),
            t.format
        )));
    }
    // A kind the extensions imply (`.caffemodel`) asks for nothing new.
    let implied = |p: &Path| Target::from_path(p).and_then(|t| t.kind);
    let kind_asked = options.kind.as_ref().is_some_and(|k| {
        Some(k) != implied(path).as_ref() && Some(k) != implied(original).as_ref()
    });
    // Anything else asked (a dtype, `--set`, compression, carried metadata, `dense`)
    // would be a change the original's layout cannot take.
    let rest = WriteOptions {
        kind: None,
        hex: false,
        skip_fsync: options.skip_fsync,
        ..options.clone()
    };
    if kind_asked || !rest.asks_nothing() {
        return Err(Error::Invalid(format!(
            "like={}: the original decides the layout; drop --dtype, --to kinds and --set",
            original.display()
        )));
    }
    let rec = orig.record_source()?;
    let Some(json) = rec.json else {
        return Err(Error::Invalid(format!(
            "like={}: its structure cannot be recorded ({})",
            original.display(),
            rec.note.unwrap_or_else(|| "nothing to carry".into())
        )));
    };
    let carrier = Document::new(
        Format::Safetensors,
        path.to_path_buf(),
        Box::new(Carrier {
            tensors: MemoryFile::new(tensors.to_vec()),
            json,
        }),
    );
    let plain = WriteOptions {
        skip_fsync: options.skip_fsync,
        ..WriteOptions::default()
    };
    match carrier.restore_source(path, &Target::new(format), &plain)? {
        Restored::Written(report) => Ok(report),
        Restored::Anew(a) => write_anew(path, format, tensors, options.skip_fsync, &a, original),
        Restored::Refused(why) => Err(Error::Invalid(format!(
            "like={}: the tensors do not fit its structure ({why}); nothing was written",
            original.display()
        ))),
        Restored::NotRecorded => Err(Error::Invalid(format!(
            "like={}: its structure was not recorded; nothing was written",
            original.display()
        ))),
    }
}

/// The warning of a carried or `like=` original whose edited tensors are written anew
/// ([`Restored::Anew`]).
fn anew_warning(format: Format, a: &provenance::Anew) -> String {
    let settings = match a.settings() {
        s if s.is_empty() => String::new(),
        s => format!(" ({s})"),
    };
    format!(
        "the original {format} file's header and layout were not kept byte for byte: {}; \
         written anew from the tensors alone, as a {} file{settings} like the original",
        a.why, a.kind
    )
}

/// What of the original's kind and layout a file written anew ([`Restored::Anew`])
/// could not keep, read from the file at `path`: a binary sparse file whose values are
/// no longer all 0 or 1 holds values; byte weights that bytes no longer hold exactly
/// are floats.
fn anew_layout_lost(path: &Path, a: &provenance::Anew) -> Result<Option<String>> {
    let back = document::open(path, &ReadOptions::default())?;
    let (kind, layout) = (back.kind(), back.layout_settings());
    if kind == a.kind && layout == a.layout {
        return Ok(None);
    }
    let lost: Vec<String> = a
        .layout
        .iter()
        .filter(|s| !layout.contains(s))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    Ok(Some(format!(
        "{}: the original was a {} file; the edited tensors do not fit its layout{} (a \
         binary sparse file holds only 1s, byte weights only values their bytes give back \
         exactly), so this is a {kind} file",
        path.display(),
        a.kind,
        match lost.len() {
            0 => String::new(),
            _ => format!(" ({})", lost.join(", ")),
        }
    )))
}

/// `like=`: the tensors written anew in the original's kind and layout (`a`), read
/// back equal to them, with the warnings that say so; on any difference, nothing.
fn write_anew(
    path: &Path,
    format: Format,
    tensors: &[(String, Tensor)],
    skip_fsync: bool,
    a: &provenance::Anew,
    original: &Path,
) -> Result<WriteReport> {
    let options = WriteOptions {
        kind: format.kind_named(a.kind_id).map(String::from),
        source_layout: a.layout.iter().cloned().collect(),
        skip_fsync,
        ..WriteOptions::default()
    };
    let mut report = save_tracked(path, format, tensors, &options, &Progress::silent())?;
    let back = document::open(path, &ReadOptions::default())?;
    let differs = tensors
        .iter()
        .find_map(|(name, t)| match back.read_tensor(name) {
            Ok(b) if b == *t => None,
            Ok(_) => Some(format!("tensor {name:?} reads back other values")),
            Err(e) => Some(format!("tensor {name:?} does not read back ({e})")),
        });
    let listed = back.tensors().len();
    drop(back);
    if let Some(why) = differs.or_else(|| {
        (listed != tensors.len())
            .then(|| format!("it holds {listed} tensors, not {}", tensors.len()))
    }) {
        let _ = std::fs::remove_file(path);
        return Err(Error::Invalid(format!(
            "like={}: the tensors written anew in its layout do not come back ({why}); \
             nothing was written",
            original.display()
        )));
    }
    let mut warnings = vec![anew_warning(format, a)];
    warnings.extend(anew_layout_lost(path, a)?);
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(report)
}

/// Tensors in memory that carry a skeleton the way a safetensors file does.
struct Carrier {
    tensors: MemoryFile,
    json: String,
}

impl TensorFile for Carrier {
    fn format(&self) -> &'static str {
        "safetensors"
    }
    fn kind(&self) -> String {
        "tensors".into()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        vec![(provenance::KEY.into(), self.json.clone().into())]
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.tensors.tensors()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.tensors.read_tensor(name)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<tensorfmt_core::Chunks<'a>> {
        self.tensors.read_chunks(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::open;
    use crate::format::detect;
    use tensorfmt_core::Order;

    fn sample_doc(dir: &Path) -> (Document, Tensor, Tensor) {
        let a =
            Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], Order::RowMajor).unwrap();
        let b = Tensor::from_vec(vec![-1i32, 0, 5], [3], Order::RowMajor).unwrap();
        let p = dir.join("s.safetensors");
        save(
            &p,
            Format::Safetensors,
            &[("a".into(), a.clone()), ("b".into(), b.clone())],
            &WriteOptions::default(),
        )
        .unwrap();
        (Document::open(&p).unwrap(), a, b)
    }

    #[test]
    fn content_beats_extension() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tensor::from_vec(vec![1u8, 2], [2], Order::RowMajor).unwrap();
        // An npz archive named .npy is still an npz archive.
        let p = dir.path().join("liar.npy");
        save(
            &p,
            Format::Npz,
            &[("t".into(), t.clone())],
            &WriteOptions::default(),
        )
        .unwrap();
        assert_eq!(detect(&p).unwrap(), Format::Npz);
        let p = dir.path().join("s.safetensors");
        save(
            &p,
            Format::Safetensors,
            &[("t".into(), t.clone())],
            &WriteOptions::default(),
        )
        .unwrap();
        assert_eq!(detect(&p).unwrap(), Format::Safetensors);
        let f = open(&p, &ReadOptions::default()).unwrap();
        assert_eq!(f.read_tensor("t").unwrap(), t);
        let unknown = dir.path().join("mystery");
        std::fs::write(&unknown, b"hello").unwrap();
        assert!(detect(&unknown).unwrap_err().to_string().contains("--from"));
        assert!(matches!(
            detect(&dir.path().join("none")),
            Err(Error::Io { .. })
        ));
    }

    #[test]
    fn npy_takes_exactly_one_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tensor::from_vec(vec![1u8], [1], Order::RowMajor).unwrap();
        let two = [("a".to_string(), t.clone()), ("b".to_string(), t)];
        assert!(save(
            &dir.path().join("x.npy"),
            Format::Npy,
            &two,
            &WriteOptions::default()
        )
        .is_err());
        let src = Document::new(
            Format::Npz,
            "memory",
            Box::new(MemoryFile::new(two.to_vec())),
        );
        let names = ["a".to_string(), "b".to_string()];
        let e = src.convert_to_with(
            dir.path().join("x.npy"),
            Format::Npy,
            Some(&names),
            &WriteOptions::default(),
        );
        assert!(e.unwrap_err().to_string().contains("--tensor"));
        let p = dir.path().join("stem.npy");
        src.convert_to_with(&p, Format::Npy, Some(&names[..1]), &WriteOptions::default())
            .unwrap();
        assert_eq!(
            open(&p, &ReadOptions::default()).unwrap().tensors()[0].name,
            "stem"
        );
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
        save(
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
