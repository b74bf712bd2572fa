//! The dispatch table: for each [`Format`], how a file is opened ([`open_bytes`]) and
//! written (`write_tensors`, `write_from`), and what a written file holds, read back
//! through the same table ([`report`]). Nothing else: whether to write at all, what to
//! carry, keep or warn about is the conversion's business (`convert.rs`).

use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::{Error, ReadOptions, Result, Tensor, TensorFile, WriteOptions};

use crate::format::{Format, Target};
use crate::interop::{self, MemoryFile};
use crate::progress::Progress;

/// The name a single-array file's tensor gets: the file stem, or `array`.
fn stem_name(path: Option<&Path>) -> String {
    path.and_then(|p| p.file_stem())
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("array")
        .to_string()
}

/// Opens bytes in a known format. `path` only names single-array files' tensors.
pub fn open_bytes(
    data: Bytes,
    format: Format,
    path: Option<&Path>,
    options: &ReadOptions,
) -> Result<Box<dyn TensorFile>> {
    frames_apply(format, options)?;
    let file: Box<dyn TensorFile> = match format {
        Format::Npy => Box::new(interop::npy::open(data, &stem_name(path), options)?),
        Format::Npz => Box::new(interop::npz::open(data, options)?),
        Format::Safetensors => Box::new(interop::safetensors::open(data, options)?),
        #[cfg(feature = "pvp")]
        Format::Pvp => tensorfmt_pvp::open_tensor_file(data, options)?,
        #[cfg(feature = "som")]
        Format::Som => tensorfmt_som::open_tensor_file(data, options)?,
        #[cfg(feature = "primitiv")]
        Format::Primitiv => tensorfmt_primitiv::open_tensor_file(data, options)?,
        #[cfg(feature = "caffe")]
        Format::Caffe => tensorfmt_caffe::open_tensor_file(data, options)?,
        #[cfg(feature = "onnx")]
        Format::Onnx => tensorfmt_onnx::open_tensor_file(data, options)?,
        #[allow(unreachable_patterns)]
        other => return Err(other.not_enabled()),
    };
    kind_as_asked(format, &*file, options)?;
    Ok(file)
}

/// A `kind` hint (`--kind`, `kind=`) of the file's format that the file contradicts,
/// or a kind no format has, is an error (it was ignored: `kind="sparse"` opened a
/// dense file as dense); another format's kind is left to files of that format. PINK's
/// kinds also go by their reading names (`mapping` for `som-mapping`).
fn kind_as_asked(format: Format, file: &dyn TensorFile, options: &ReadOptions) -> Result<()> {
    let Some(asked) = options.kind.as_deref() else {
        return Ok(());
    };
    let Some(kind) = format.kind_named(asked) else {
        // Another format's kind is a hint for files of that format (`validate -r --kind
        // mapping` over a mixed directory); a kind of no format is a mistake.
        if Format::ALL.iter().any(|f| f.kind_named(asked).is_some()) {
            return Ok(());
        }
        return Err(Error::Invalid(format!(
            "no format has a file kind {asked:?} ({format} kinds: {})",
            format.kinds().join(", ")
        )));
    };
    if kind != file.kind_id() {
        return Err(Error::Invalid(format!(
            "this is a {} file ({}), not {kind}",
            file.kind_id(),
            file.kind()
        )));
    }
    Ok(())
}

/// A frame range selects the frames of a PVP file or the entries of a PINK file; asked
/// of another format it is refused (it was ignored, and a conversion then said that only
/// part of the file had been read).
fn frames_apply(format: Format, options: &ReadOptions) -> Result<()> {
    match (options.frames, format) {
        (None, _) | (_, Format::Pvp | Format::Som) => Ok(()),
        (Some(_), other) => Err(Error::Invalid(format!(
            "a frame range (--frames, frames=) selects the frames of a PVP file or the \
             entries of a PINK file; this is a {other} file"
        ))),
    }
}

/// Maps a file and opens it in a given format (zero copy where the format allows): the
/// reader's view and the mapped bytes (what [`Document`](crate::Document) keeps for the
/// provenance splice). A PVP file is opened keyed by its identity, so a sparse file
/// opened again reuses its frame table (see `tensorfmt_pvp::open_tensor_file_keyed`); an
/// ONNX model reads its external data files from its directory.
pub(crate) fn open_mapped(
    path: &Path,
    format: Format,
    options: &ReadOptions,
) -> Result<(Box<dyn TensorFile>, Bytes)> {
    if !format.is_enabled() {
        return Err(format.not_enabled());
    }
    frames_apply(format, options)?;
    let data = tensorfmt_core::io::map_file(path)?;
    #[cfg(feature = "pvp")]
    if format == Format::Pvp {
        let file =
            tensorfmt_pvp::open_tensor_file_keyed(data.clone(), options, pvp_file_key(path))?;
        kind_as_asked(format, &*file, options)?;
        return Ok((file, data));
    }
    #[cfg(feature = "onnx")]
    if format == Format::Onnx {
        // External data files lie beside the model.
        let dir = path.parent().unwrap_or(Path::new(""));
        let file = tensorfmt_onnx::open_tensor_file_at(data.clone(), options, dir)?;
        kind_as_asked(format, &*file, options)?;
        return Ok((file, data));
    }
    // A kind the name suggests (PINK's `.map`) settles a legacy file that fits several
    // readings; the user's `--kind` comes first.
    let named;
    let options = match Target::from_path(path).and_then(|t| t.kind) {
        Some(kind) if options.kind.is_none() && Format::from_path(path) == Some(format) => {
            named = ReadOptions {
                name_kind: Some(kind),
                ..options.clone()
            };
            &named
        }
        _ => options,
    };
    let file = open_bytes(data.clone(), format, Some(path), options)?;
    Ok((file, data))
}

/// Device, inode, size and modification time of a regular file (`None` elsewhere, or
/// off unix: no caching then).
#[cfg(feature = "pvp")]
fn pvp_file_key(path: &Path) -> Option<tensorfmt_pvp::FileKey> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
        Some(tensorfmt_pvp::FileKey {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// What a write produced, read back from the file itself: how many tensors were
/// offered, which ones the written file holds (as a reader lists them), and what the
/// original program will not accept about it.
///
/// ```
/// use tensorfmt::{Format, Order, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let img = Tensor::from_vec(vec![1u8; 2 * 3 * 3], [2, 3, 3], Order::RowMajor)?;
/// let opts = WriteOptions { dtype: Some(tensorfmt::DType::U8), ..WriteOptions::default() };
/// let report = tensorfmt::save(&dir.path().join("x.bin"), Format::Som, &[("images".into(), img)], &opts)?;
/// assert_eq!(report.written, ["data"]);
/// assert!(report.warnings[0].contains("PINK")); // PINK 2.5 reads f32 data only
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WriteReport {
    /// Number of tensors handed to the writer.
    pub offered: usize,
    /// Names of the tensors in the written file, as its reader lists them (which may
    /// include tensors the format derives, such as a PVP file's `time`).
    pub written: Vec<String>,
    /// What the original program refuses in this file, or what was not written.
    pub warnings: Vec<String>,
    /// The written file's kind, as read back ([`TensorFile::kind_id`]).
    pub kind: String,
}

impl WriteReport {
    /// Whether the file holds fewer tensors than were given (some were not written).
    pub fn dropped_some(&self) -> bool {
        self.written.len() < self.offered
    }

    /// What the written file holds: "wrote 2 tensors" (counting what the format
    /// adds, such as a PVP file's `time`, not what was given) or, when the file holds
    /// fewer than given, "wrote 1 of 2 tensors".
    ///
    /// ```
    /// let r = tensorfmt::WriteReport { offered: 1, written: vec!["values".into(), "time".into()], ..Default::default() };
    /// assert_eq!(r.summary(), "wrote 2 tensors");
    /// let r = tensorfmt::WriteReport { offered: 2, written: vec!["data".into()], ..Default::default() };
    /// assert_eq!(r.summary(), "wrote 1 of 2 tensors");
    /// ```
    pub fn summary(&self) -> String {
        let noun = |n: usize| if n == 1 { "tensor" } else { "tensors" };
        let n = self.written.len();
        if self.dropped_some() {
            format!("wrote {n} of {} {}", self.offered, noun(self.offered))
        } else {
            format!("wrote {n} {}", noun(n))
        }
    }
}

/// Reads back what a writer produced (a header-level open: the listing, not the data):
/// the [`WriteReport`] of every write, including a file written by
/// [`crate::provenance::restore`]. A file we wrote but cannot read back is an error.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let out = dir.path().join("x.npy");
/// let t = tensorfmt::Tensor::from_vec(vec![1.0f32, 2.0], vec![2], tensorfmt::Order::RowMajor)?;
/// tensorfmt::save(&out, tensorfmt::Format::Npy, &[("x".to_string(), t)], &Default::default())?;
/// let r = tensorfmt::dispatch::report(&out, tensorfmt::Format::Npy, 1, &Default::default())?;
/// assert_eq!(r.written.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn report(
    path: &Path,
    format: Format,
    offered: usize,
    options: &WriteOptions,
) -> Result<WriteReport> {
    let read = ReadOptions {
        kind: match (format, options.kind.as_deref()) {
            // Our PINK output is unambiguous, but say what was written anyway.
            (Format::Som, Some(k)) => Some(k.to_string()),
            _ => None,
        },
        ..ReadOptions::default()
    };
    let (back, _) = open_mapped(path, format, &read).map_err(|e| {
        // Never a file we cannot read with exit 0, nor left behind after an error.
        let _ = std::fs::remove_file(path);
        Error::Invalid(format!(
            "{} was written but cannot be read back ({e}), so it was removed; please report this",
            path.display()
        ))
    })?;
    let mut warnings = write_warnings(format, options, back.kind_id());
    warnings.extend(back.warnings());
    Ok(WriteReport {
        offered,
        written: back.tensors().into_iter().map(|i| i.name).collect(),
        warnings,
        kind: back.kind_id().to_string(),
    })
}

/// What a format's original program will refuse in a file of `kind` written with
/// `options`.
fn write_warnings(format: Format, options: &WriteOptions, kind: &str) -> Vec<String> {
    match format {
        #[cfg(feature = "som")]
        Format::Som => tensorfmt_som::write_warnings(options, kind),
        #[cfg(feature = "caffe")]
        Format::Caffe => tensorfmt_caffe::write_warnings(options, kind),
        _ => {
            let _ = (options, kind);
            Vec::new()
        }
    }
}

/// Writes named tensors in `format` (each writer through an
/// [`AtomicFile`](tensorfmt_core::io::AtomicFile)): npy, npz and safetensors through
/// their streaming writers, piece by piece through `progress`; the other formats take
/// every tensor at once (reported done before the write, so a hook stopping there
/// writes nothing). A lone array is named for the kind written first
/// ([`naming`](crate::naming)).
pub(crate) fn write_tensors(
    path: &Path,
    format: Format,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
    progress: &Progress<'_>,
) -> Result<()> {
    format.check_settings(options)?;
    let tensors = &*crate::naming::lone_array(format, options, tensors)?;
    // The streaming writers over the tensors in memory, piece by piece through the
    // progress (what `interop::*::save` do without one).
    let streamed = || {
        let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
        let memory = MemoryFile::new(tensors.to_vec());
        let source = crate::progress::Tracked::new(&memory, progress);
        write_from(
            &source,
            &names,
            path,
            format,
            &interop::in_memory_options(options),
        )
    };
    if !matches!(format, Format::Npy | Format::Npz | Format::Safetensors) {
        // The other writers take every tensor at once: all of them are handed over
        // (reported done) before the write, so a hook stopping there writes nothing.
        progress.finish()?;
    }
    match format {
        Format::Npy => match tensors {
            [_] => streamed(),
            _ => Err(Error::Invalid(format!(
                "an .npy file holds one array, got {} tensors",
                tensors.len()
            ))),
        },
        Format::Npz | Format::Safetensors => streamed(),
        #[cfg(feature = "pvp")]
        Format::Pvp => Ok(tensorfmt_pvp::save_tensors(path, tensors, options)?),
        #[cfg(feature = "som")]
        Format::Som => Ok(tensorfmt_som::save_tensors(path, tensors, options)?),
        #[cfg(feature = "primitiv")]
        Format::Primitiv => Ok(tensorfmt_primitiv::save_tensors(path, tensors, options)?),
        #[cfg(feature = "caffe")]
        Format::Caffe => Ok(tensorfmt_caffe::save_tensors(path, tensors, options)?),
        #[cfg(feature = "onnx")]
        Format::Onnx => Ok(tensorfmt_onnx::save_tensors(path, tensors, options)?),
        #[allow(unreachable_patterns)]
        other => Err(other.not_enabled()),
    }
}

/// Writes tensors `names` of `source` in `format`: npy, npz and safetensors stream them
/// chunk by chunk (bounded memory); the other formats receive the decoded tensors.
pub(crate) fn write_from(
    source: &dyn TensorFile,
    names: &[String],
    path: &Path,
    format: Format,
    options: &WriteOptions,
) -> Result<()> {
    format.check_settings(options)?;
    match format {
        Format::Npy => match names {
            [name] => interop::npy::write_from(path, source, name, options),
            _ => Err(Error::Invalid(format!(
                "an .npy file holds one array, got {} tensors (choose one with --tensor)",
                names.len()
            ))),
        },
        Format::Npz => interop::npz::write_from(path, source, names, options),
        Format::Safetensors => interop::safetensors::write_from(path, source, names, options),
        other => {
            let mut tensors = Vec::new();
            for n in names {
                tensors.push((n.clone(), source.read_tensor(n)?));
            }
            write_tensors(path, other, &tensors, options, &Progress::silent())
        }
    }
}
