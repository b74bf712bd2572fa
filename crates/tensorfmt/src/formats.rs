//! The dispatch table: every format tensorfmt knows, how to recognise a file
//! ([`detect`]), open it as a [`TensorFile`] ([`open`]) and write one ([`save`],
//! [`convert`]).
//!
//! Detection looks at the content first (each format's `sniff` on the first 4 KiB),
//! the extension second. Adding a format means one enum variant and one arm in each
//! `match` below; the CLI does not change.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use bytes::Bytes;
use tensorfmt_core::{DType, Error, ReadOptions, Result, Tensor, TensorFile, WriteOptions};

use crate::document::Document;
use crate::interop::{self, MemoryFile};
use crate::progress::Progress;

/// How many leading bytes [`detect`] reads.
pub const SNIFF_LEN: usize = 4096;

/// A file format.
///
/// ```
/// use tensorfmt::Format;
/// assert_eq!("safetensors".parse::<Format>()?, Format::Safetensors);
/// assert_eq!(Format::Pvp.extensions(), &["pvp"]);
/// assert_eq!(Format::from_path("m.caffemodel".as_ref()), Some(Format::Caffe));
/// # Ok::<(), tensorfmt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// numpy `.npy`.
    Npy,
    /// numpy `.npz`.
    Npz,
    /// Hugging Face `.safetensors`.
    Safetensors,
    /// PetaVision `.pvp`.
    Pvp,
    /// PINK binary files (data, SOM, mapping, rotation/flip), `.bin`.
    Som,
    /// primitiv MessagePack files, `.data`.
    Primitiv,
    /// Caffe protobuf files: `.caffemodel`, `.binaryproto`, `.solverstate`.
    Caffe,
    /// ONNX models, `.onnx`: their initializers as tensors.
    Onnx,
}

impl Format {
    /// Every format, in detection order (strong magics first).
    pub const ALL: [Format; 8] = [
        Format::Npy,
        Format::Npz,
        Format::Safetensors,
        Format::Pvp,
        Format::Som,
        Format::Primitiv,
        Format::Onnx,
        Format::Caffe,
    ];

    /// Short name (`npy`, `pvp`, ...), as in `--from`/`--to` and `TensorFile::format`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Npy => "npy",
            Format::Npz => "npz",
            Format::Safetensors => "safetensors",
            Format::Pvp => "pvp",
            Format::Som => "som",
            Format::Primitiv => "primitiv",
            Format::Caffe => "caffe",
            Format::Onnx => "onnx",
        }
    }

    /// File extensions (without the dot), the usual one first.
    pub const fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Npy => &["npy"],
            Format::Npz => &["npz"],
            Format::Safetensors => &["safetensors"],
            Format::Pvp => &["pvp"],
            Format::Som => &["bin"],
            Format::Primitiv => &["data"],
            Format::Caffe => &[
                "caffemodel",
                "binaryproto",
                "blobprotovector",
                "solverstate",
            ],
            Format::Onnx => &["onnx"],
        }
    }

    /// True when support for the format is compiled in (cargo features).
    pub const fn is_enabled(self) -> bool {
        match self {
            Format::Npy | Format::Npz | Format::Safetensors => true,
            Format::Pvp => cfg!(feature = "pvp"),
            Format::Som => cfg!(feature = "som"),
            Format::Primitiv => cfg!(feature = "primitiv"),
            Format::Caffe => cfg!(feature = "caffe"),
            Format::Onnx => cfg!(feature = "onnx"),
        }
    }

    /// The file kinds [`save`] can write in this format (the `kind` of a [`Target`],
    /// `WriteOptions::kind`), the default choice first; empty when the format has one
    /// kind only. Without a kind, the format chooses from the tensor names.
    ///
    /// ```
    /// use tensorfmt::Format;
    /// assert_eq!(Format::Pvp.write_kinds(), &["dense", "sparse", "weights"]);
    /// assert!(Format::Npz.write_kinds().is_empty());
    /// ```
    pub const fn write_kinds(self) -> &'static [&'static str] {
        match self {
            Format::Npy | Format::Npz | Format::Safetensors => &[],
            Format::Pvp => &["dense", "sparse", "weights"],
            Format::Som => &["som-data", "som", "som-mapping", "som-rotflip"],
            Format::Primitiv => &["model", "parameter", "tensor"],
            Format::Caffe => &[
                "caffemodel",
                "binaryproto",
                "blobprotovector",
                "solverstate",
            ],
            Format::Onnx => &[],
        }
    }

    /// The format an extension belongs to.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.extensions().contains(&ext.as_str()))
    }

    /// The format's content check on the first bytes of a file.
    pub fn sniff(self, head: &[u8], file_len: u64) -> bool {
        match self {
            Format::Npy => interop::npy::sniff(head),
            Format::Npz => interop::npz::sniff(head),
            Format::Safetensors => interop::safetensors::sniff(head, file_len),
            #[cfg(feature = "pvp")]
            Format::Pvp => tensorfmt_pvp::sniff(head, file_len),
            #[cfg(feature = "som")]
            Format::Som => tensorfmt_som::sniff(head, file_len),
            #[cfg(feature = "primitiv")]
            Format::Primitiv => tensorfmt_primitiv::sniff(head, file_len),
            #[cfg(feature = "caffe")]
            Format::Caffe => tensorfmt_caffe::sniff(head, file_len),
            #[cfg(feature = "onnx")]
            Format::Onnx => tensorfmt_onnx::sniff(head, file_len),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    fn not_enabled(self) -> Error {
        Error::Invalid(format!(
            "support for the {} format is not compiled in (enable the `{}` feature of tensorfmt)",
            self.name(),
            self.name()
        ))
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Format> {
        let s = s.to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s || f.extensions().contains(&s.as_str()))
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                Error::Invalid(format!(
                    "unknown format {s:?} (known: {})",
                    names.join(", ")
                ))
            })
    }
}

/// An output target: a format plus, for formats with several file kinds, which one.
///
/// ```
/// use tensorfmt::{Format, Target};
/// let t: Target = "som-data".parse()?;
/// assert_eq!((t.format, t.kind.as_deref()), (Format::Som, Some("som-data")));
/// assert_eq!(Target::from_path("mean.binaryproto".as_ref()).unwrap().kind.as_deref(), Some("binaryproto"));
/// # Ok::<(), tensorfmt::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The format.
    pub format: Format,
    /// The file kind within the format (`WriteOptions::kind`), if fixed.
    pub kind: Option<String>,
}

impl Target {
    /// A format with the kind left to the writer.
    pub fn new(format: Format) -> Target {
        Target { format, kind: None }
    }

    /// The same format with a fixed file kind (see [`Format::write_kinds`]).
    pub fn with_kind(self, kind: impl Into<String>) -> Target {
        Target {
            kind: Some(kind.into()),
            ..self
        }
    }

    /// The target implied by a path's extension.
    pub fn from_path(path: &Path) -> Option<Target> {
        let format = Format::from_path(path)?;
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        let kind = match ext.as_str() {
            "caffemodel" | "binaryproto" | "blobprotovector" | "solverstate" => Some(ext),
            _ => None,
        };
        Some(Target { format, kind })
    }
}

impl From<Format> for Target {
    fn from(format: Format) -> Target {
        Target::new(format)
    }
}

impl fmt::Display for Target {
    /// `format` or `format:kind`, which [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Some(k) => write!(f, "{}:{k}", self.format),
            None => write!(f, "{}", self.format),
        }
    }
}

impl FromStr for Target {
    type Err = Error;
    /// Accepts a format name or extension (`npz`, `pvp`, `caffemodel`, ...), a
    /// `format:kind` pair (`pvp:sparse`, `primitiv:parameter`, `som:som-mapping`; kinds
    /// from [`Format::write_kinds`]), and the kinds that name their format alone:
    /// `som-data`, `som-mapping`, `som-rotflip`, `caffemodel`, `binaryproto`,
    /// `blobprotovector`, `solverstate`.
    ///
    /// ```
    /// use tensorfmt::{Format, Target};
    /// assert_eq!("pvp:sparse".parse::<Target>()?, Target::new(Format::Pvp).with_kind("sparse"));
    /// assert_eq!("solverstate".parse::<Target>()?.kind.as_deref(), Some("solverstate"));
    /// assert!("pvp:som-data".parse::<Target>().is_err());
    /// assert_eq!(Target::new(Format::Som).with_kind("som").to_string(), "som:som");
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Target> {
        let s = s.to_ascii_lowercase();
        if let Some((format, kind)) = s.split_once(':') {
            let format: Format = format.parse()?;
            if !format.write_kinds().contains(&kind) {
                return Err(Error::Invalid(format!(
                    "{format} has no file kind {kind:?} (kinds: {})",
                    if format.write_kinds().is_empty() {
                        "none, it has one kind only".to_string()
                    } else {
                        format.write_kinds().join(", ")
                    }
                )));
            }
            return Ok(Target::new(format).with_kind(kind));
        }
        const BARE_KINDS: [(&str, Format); 7] = [
            ("som-data", Format::Som),
            ("som-mapping", Format::Som),
            ("som-rotflip", Format::Som),
            ("caffemodel", Format::Caffe),
            ("binaryproto", Format::Caffe),
            ("blobprotovector", Format::Caffe),
            ("solverstate", Format::Caffe),
        ];
        if let Some((kind, format)) = BARE_KINDS.iter().find(|(k, _)| *k == s) {
            return Ok(Target::new(*format).with_kind(*kind));
        }
        Ok(Target::new(s.parse()?))
    }
}

/// Which format a byte prefix (and, failing that, a path's extension) belongs to.
pub fn detect_bytes(head: &[u8], file_len: u64, path: Option<&Path>) -> Option<Format> {
    Format::ALL
        .into_iter()
        .find(|f| f.is_enabled() && f.sniff(head, file_len))
        .or_else(|| path.and_then(Format::from_path))
}

/// Detects the format of a file: content first, extension second.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("weights"); // no extension: the content decides
/// let t = tensorfmt::Tensor::from_vec(vec![1f32], [1], tensorfmt::Order::RowMajor)?;
/// tensorfmt::interop::npy::save(&p, &t, &Default::default())?;
/// assert_eq!(tensorfmt::detect(&p)?, tensorfmt::Format::Npy);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn detect(path: &Path) -> Result<Format> {
    let file = crate::io::open_regular(path)?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut head = Vec::new();
    file.take(SNIFF_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(path, e))?;
    detect_bytes(&head, len, Some(path)).ok_or_else(|| {
        Error::Invalid(format!(
            "{}: cannot tell the file format from its content or extension (name it with --from)",
            path.display()
        ))
    })
}

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
    Ok(match format {
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
    })
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
    if !format.is_enabled() {
        return Err(format.not_enabled());
    }
    #[cfg(feature = "pvp")]
    if format == Format::Pvp {
        // Keyed by the file's identity, so a sparse file opened again reuses its frame
        // table (see `tensorfmt_pvp::open_tensor_file_keyed`).
        let key = pvp_file_key(path);
        let data = tensorfmt_core::io::map_file(path)?;
        let file = tensorfmt_pvp::open_tensor_file_keyed(data.clone(), options, key)?;
        let whole = options.frames.is_none() && !options.sparse_csr;
        return Ok(Document::new(format, path, file).with_source(data, whole));
    }
    let data = tensorfmt_core::io::map_file(path)?;
    let file = open_bytes(data.clone(), format, Some(path), options)?;
    let whole = options.frames.is_none() && !options.sparse_csr;
    Ok(Document::new(format, path, file).with_source(data, whole))
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
    let format = detect(path)?;
    open_as(path, format, options)
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
}

impl WriteReport {
    /// Whether the file holds fewer tensors than were given (some were not written).
    pub fn dropped_some(&self) -> bool {
        self.written.len() < self.offered
    }

    /// "wrote 2 tensors" or, when the file holds fewer than given, "wrote 1 of 2 tensors".
    pub fn summary(&self) -> String {
        let noun = if self.offered == 1 {
            "tensor"
        } else {
            "tensors"
        };
        if self.dropped_some() {
            format!("wrote {} of {} {noun}", self.written.len(), self.offered)
        } else {
            format!("wrote {} {noun}", self.offered)
        }
    }
}

/// Reads back what a writer produced (a header-level open: the listing, not the data):
/// the report of a file written outside [`convert`], e.g. by
/// [`crate::provenance::restore`].
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let out = dir.path().join("x.npy");
/// let t = tensorfmt::Tensor::from_vec(vec![1.0f32, 2.0], vec![2], tensorfmt::Order::RowMajor)?;
/// tensorfmt::save(&out, tensorfmt::Format::Npy, &[("x".to_string(), t)], &Default::default())?;
/// let r = tensorfmt::formats::report(&out, tensorfmt::Format::Npy, 1, &Default::default())?;
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
    let back = open_as(path, format, &read).map_err(|e| {
        Error::Invalid(format!(
            "{} was written but cannot be read back ({e}); please report this",
            path.display()
        ))
    })?;
    let mut warnings = write_warnings(format, options);
    warnings.extend(back.warnings());
    Ok(WriteReport {
        offered,
        written: back.names(),
        warnings,
    })
}

/// What a format's original program will refuse in a file written with `options`.
fn write_warnings(format: Format, options: &WriteOptions) -> Vec<String> {
    match format {
        #[cfg(feature = "som")]
        Format::Som => tensorfmt_som::write_warnings(options),
        _ => {
            let _ = options;
            Vec::new()
        }
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
/// tensorfmt::formats::save_with_progress(&out, &Target::new(tensorfmt::Format::Npy), &[("t".into(), t)], &Default::default(), &hook)?;
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
    if let Some(original) = options.extra.get(crate::like::LIKE_KEY) {
        let mut o = options.clone();
        o.extra.remove(crate::like::LIKE_KEY);
        return crate::like::save_like(path, Path::new(original), tensors, &o);
    }
    save_only(path, format, tensors, options, progress)?;
    let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    let mut r = report(
        path,
        format,
        interop::sparse::offered(&names, format),
        options,
    )?;
    let f64s = tensors
        .iter()
        .filter(|(_, t)| t.dtype() == DType::F64)
        .count();
    r.warnings
        .extend(f64_to_caffe_warning(format, f64s, options));
    r.warnings
        .extend(weights_only_warning(path, format, &names, options));
    Ok(r)
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

fn save_only(
    path: &Path,
    format: Format,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
    progress: &Progress<'_>,
) -> Result<()> {
    let tensors = &*crate::naming::lone_array(format, options, tensors)?;
    // The streaming writers over the tensors in memory, piece by piece through the
    // progress (what `interop::*::save` do without one).
    let streamed = || {
        let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
        let memory = MemoryFile::new(tensors.to_vec());
        let source = crate::progress::Tracked::new(&memory, progress);
        convert_only(
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

/// Writes tensors `names` of an open file in another format. npy, npz and
/// safetensors outputs stream the tensors chunk by chunk (bounded memory); the other
/// formats receive the decoded tensors through their `save_tensors`.
///
/// ```
/// use tensorfmt::{interop::MemoryFile, Format, Order, Tensor, TensorFile};
/// let dir = tempfile::tempdir()?;
/// let src = MemoryFile::new(vec![("a".into(), Tensor::from_vec(vec![1i32, 2], [2], Order::RowMajor)?)]);
/// let p = dir.path().join("a.npz");
/// tensorfmt::convert(&src, &["a".to_string()], &p, Format::Npz, &Default::default())?;
/// assert_eq!(tensorfmt::open(&p, &Default::default())?.read_tensor("a")?, src.read_tensor("a")?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert(
    source: &dyn TensorFile,
    names: &[String],
    path: &Path,
    format: Format,
    options: &WriteOptions,
) -> Result<WriteReport> {
    if let Some(original) = options.extra.get(crate::like::LIKE_KEY) {
        let mut o = options.clone();
        o.extra.remove(crate::like::LIKE_KEY);
        let tensors = names
            .iter()
            .map(|n| Ok((n.clone(), source.read_tensor(n)?)))
            .collect::<Result<Vec<_>>>()?;
        return crate::like::save_like(path, Path::new(original), &tensors, &o);
    }
    // Sparse tensors stay sparse in npz / safetensors; densifying is bounded.
    if let Some(report) = interop::sparse::convert(source, names, path, format, options)? {
        return Ok(report);
    }
    let options = &*interop::sparse::without_dense_key(options);
    convert_only(source, names, path, format, options)?;
    let mut r = report(
        path,
        format,
        interop::sparse::offered(names, format),
        options,
    )?;
    // One set of the written names, not a search of `names` per tensor (quadratic).
    let written: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let f64s = source
        .tensors()
        .iter()
        .filter(|i| i.dtype == DType::F64 && written.contains(i.name.as_str()))
        .count();
    r.warnings
        .extend(f64_to_caffe_warning(format, f64s, options));
    r.warnings
        .extend(weights_only_warning(path, format, names, options));
    Ok(r)
}

fn convert_only(
    source: &dyn TensorFile,
    names: &[String],
    path: &Path,
    format: Format,
    options: &WriteOptions,
) -> Result<()> {
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
            save_only(path, other, &tensors, options, &Progress::silent())
        }
    }
}

/// Converting a file to its own format with nothing to change keeps it: when `target`
/// is `source`'s format without a kind, `options` ask for nothing (no dtype, settings or
/// layout; `skip_fsync` aside) and the reader needed no leniency (no warnings), the
/// file's bytes are copied through an [`AtomicFile`](tensorfmt_core::io::AtomicFile).
/// Everything in it survives, byte for byte: a primitiv Optimizer or Shape, a solver
/// state, a PINK comment block, a hexagonal mapping, a batched tensor. Returns `None`
/// when a real conversion is needed.
///
/// ```
/// # let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
/// let src = root.join("testdata/primitiv/optimizer_adam.data");
/// let doc = tensorfmt::Document::open(&src)?;
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("copy.data");
/// let target = tensorfmt::Target::new(tensorfmt::Format::Primitiv);
/// let report = tensorfmt::formats::keep_unchanged(&src, &doc, &out, &target, &Default::default())?;
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
    let plain = WriteOptions {
        skip_fsync: options.skip_fsync,
        ..WriteOptions::default()
    };
    let same = source.format() == target.format.name()
        && target.kind.is_none()
        && options.kind.is_none()
        && !options.hex
        && options.dtype.is_none()
        && options.extra.is_empty()
        && source.warnings().is_empty();
    if !same || format!("{options:?}") != format!("{plain:?}") {
        return Ok(None);
    }
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
    report(path, target.format, source.tensors().len(), options).map(Some)
}

/// Wraps `(name, tensor)` pairs for [`convert`].
pub fn memory_file(tensors: Vec<(String, Tensor)>) -> MemoryFile {
    MemoryFile::new(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt_core::Order;

    #[test]
    fn names_extensions_and_targets() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
            for e in f.extensions() {
                assert_eq!(Format::from_path(Path::new(&format!("x.{e}"))), Some(f));
            }
        }
        assert!("hdf5".parse::<Format>().is_err());
        assert_eq!(Format::from_path(Path::new("X.NPY")), Some(Format::Npy));
        assert_eq!(Format::from_path(Path::new("noext")), None);
        assert_eq!(
            "binaryproto".parse::<Target>().unwrap().format,
            Format::Caffe
        );
        assert_eq!("primitiv".parse::<Target>().unwrap().kind, None);
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
        let src = memory_file(two.to_vec());
        let names = ["a".to_string(), "b".to_string()];
        let e = convert(
            &src,
            &names,
            &dir.path().join("x.npy"),
            Format::Npy,
            &WriteOptions::default(),
        );
        assert!(e.unwrap_err().to_string().contains("--tensor"));
        let p = dir.path().join("stem.npy");
        convert(&src, &names[..1], &p, Format::Npy, &WriteOptions::default()).unwrap();
        assert_eq!(
            open(&p, &ReadOptions::default()).unwrap().tensors()[0].name,
            "stem"
        );
    }
}
