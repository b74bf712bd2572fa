//! What a file is: every [`Format`] tensorfmt knows, the file kinds inside a format
//! ([`Target`]), and how a file is recognised ([`detect`]: the content first, each
//! format's content check on the first [`SNIFF_LEN`] bytes, the extension second).
//!
//! A leaf: it imports nothing of the facade (the content checks of the interchange
//! formats live here, the format crates' come from their `sniff`). Opening and writing
//! a format is the dispatch table's business (`dispatch.rs`); what a conversion does is
//! `convert.rs`'s. Adding a format means one enum variant and one arm in each `match`
//! here and in `dispatch.rs`; the CLI does not change.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use tensorfmt_core::settings::Setting;
use tensorfmt_core::{Error, Result, WriteOptions};

/// How many leading bytes [`detect`] reads.
pub const SNIFF_LEN: usize = 4096;

/// What every npy file starts with (`\x93NUMPY`).
pub(crate) const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A safetensors file: a little-endian header length that fits in the file, followed
/// by `{`.
fn safetensors_header_fits(head: &[u8], file_len: u64) -> bool {
    let Some(n) = head.get(..8) else {
        return false;
    };
    let n = u64::from_le_bytes(n.try_into().unwrap_or([0xff; 8]));
    n >= 2 && n.checked_add(8).is_some_and(|end| end <= file_len) && head.get(8) == Some(&b'{')
}

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
            // PINK's examples name data, maps and mappings `.pink`, `.som`, `.map`.
            Format::Som => &["bin", "pink", "som", "map"],
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

    /// The kind identifier (one of [`Format::kinds`]) that `name` means in this format,
    /// case and spaces aside: the identifier itself, or the names reading gives PINK's
    /// and Caffe's kinds (`data`, `mapping`, `map`, `rotflip`; `model`, `mean`).
    ///
    /// ```
    /// use tensorfmt::Format;
    /// assert_eq!(Format::Som.kind_named(" Mapping"), Some("som-mapping"));
    /// assert_eq!(Format::Caffe.kind_named("mean"), Some("binaryproto"));
    /// assert_eq!(Format::Pvp.kind_named("mapping"), None);
    /// ```
    pub fn kind_named(self, name: &str) -> Option<&'static str> {
        let name = name.trim().to_ascii_lowercase();
        let id = match (self, name.as_str()) {
            (Format::Som, "data") => "som-data",
            (Format::Som, "mapping" | "map") => "som-mapping",
            (Format::Som, "rotflip") => "som-rotflip",
            (Format::Caffe, "model") => "caffemodel",
            (Format::Caffe, "mean") => "binaryproto",
            (_, other) => other,
        };
        self.kinds().iter().copied().find(|k| *k == id)
    }

    /// The `--set KEY=VALUE` settings the format's writer reads (`WriteOptions::extra`;
    /// a key ending in `.` is a prefix), with the values each takes and the kinds it
    /// applies to, or `None` when any key is taken: safetensors keeps them all as
    /// `__metadata__`. [`crate::save`] and every conversion refuse a key not listed, a
    /// value the setting does not take and a setting of another kind, so a setting is
    /// never ignored.
    ///
    /// ```
    /// use tensorfmt::Format;
    /// assert_eq!(Format::Npz.settings(), Some(&[][..]));
    /// assert_eq!(Format::Safetensors.settings(), None);
    /// let nx = Format::Pvp.settings().unwrap().iter().find(|s| s.key == "nx").unwrap();
    /// assert_eq!(nx.describe(), "nx=N>0 (sparse, weights)");
    /// ```
    pub fn settings(self) -> Option<&'static [Setting]> {
        match self {
            Format::Safetensors => None,
            #[cfg(feature = "pvp")]
            Format::Pvp => Some(tensorfmt_pvp::SETTINGS),
            #[cfg(feature = "som")]
            Format::Som => Some(tensorfmt_som::SETTINGS),
            #[cfg(feature = "primitiv")]
            Format::Primitiv => Some(tensorfmt_primitiv::SETTINGS),
            #[cfg(feature = "caffe")]
            Format::Caffe => Some(tensorfmt_caffe::SETTINGS),
            #[cfg(feature = "onnx")]
            Format::Onnx => Some(tensorfmt_onnx::SETTINGS),
            _ => Some(&[]),
        }
    }

    /// Every `--set` setting of the format's writer as `KEY=VALUES`, with the kinds it
    /// is for (empty: every kind): the typed ones (`compress`, `threads`) and
    /// [`Format::settings`]; what `tensorfmt formats` and Python's `formats()` list.
    ///
    /// ```
    /// use tensorfmt::Format;
    /// let caffe = Format::Caffe.settings_described();
    /// assert!(caffe.contains(&("iter=N>=0".to_string(), vec!["solverstate"])));
    /// assert_eq!(Format::Npy.settings_described(), [("threads=N>0".to_string(), vec![])]);
    /// ```
    pub fn settings_described(self) -> Vec<(String, Vec<&'static str>)> {
        let mut out = Vec::new();
        if self == Format::Npz {
            out.push(("compress=none|stored|deflate".to_string(), Vec::new()));
        }
        if matches!(self, Format::Npy | Format::Npz | Format::Safetensors) {
            out.push(("threads=N>0".to_string(), Vec::new()));
        }
        match self.settings() {
            None => out.push(("KEY=TEXT (kept in __metadata__)".to_string(), Vec::new())),
            Some(table) => out.extend(table.iter().map(|s| (s.usage(), s.kinds.to_vec()))),
        }
        out
    }

    /// Refuses a `--set` setting `options` gives that the format's writer does not read
    /// ([`Format::settings`]), a value it does not take, and one of another kind than
    /// `options.kind` (when given), naming what the writer does read.
    ///
    /// ```
    /// use tensorfmt::{Format, WriteOptions};
    /// let mut o = WriteOptions { kind: Some("dense".into()), ..Default::default() };
    /// o.set("nx", "4")?;
    /// assert!(Format::Pvp.check_settings(&o).unwrap_err().to_string().contains("dense"));
    /// o.kind = Some("sparse".into());
    /// assert!(Format::Pvp.check_settings(&o).is_ok());
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    pub fn check_settings(self, options: &WriteOptions) -> Result<()> {
        // The typed settings: compression is npz's; the pipeline's threads are the
        // streaming writers' (npy, npz, safetensors).
        if options.compress != tensorfmt_core::Compression::default() && self != Format::Npz {
            return Err(Error::Invalid(format!(
                "setting \"compress\" means nothing to the {self} writer (only npz members are compressed)"
            )));
        }
        if options.threads.is_some()
            && !matches!(self, Format::Npy | Format::Npz | Format::Safetensors)
        {
            return Err(Error::Invalid(format!(
                "setting \"threads\" means nothing to the {self} writer (npy, npz and safetensors \
                 take it)"
            )));
        }
        let kind = options.kind.as_deref().and_then(|k| self.kind_named(k));
        if let Some(k) = kind.filter(|k| !self.write_kinds().contains(k) && self.kinds() != [*k]) {
            return Err(Error::Invalid(format!(
                "{self} writes no {k} file from tensors: a {self} {k} file is written only as \
                 itself (converted to {self} unchanged, or restored from the metadata a \
                 safetensors / npz file converted from one carries); kinds written from \
                 tensors: {}",
                self.write_kinds().join(", ")
            )));
        }
        if options.hex && (self != Format::Som || kind == Some("som-data")) {
            return Err(Error::Invalid(format!(
                "--hex (hex=True) means nothing to {}: a hexagonal layout is a PINK SOM's, \
                 mapping's or rotation/flip file's",
                match kind {
                    Some(k) => format!("a {self} {k} file"),
                    None => format!("the {self} writer"),
                }
            )));
        }
        let Some(table) = self.settings() else {
            return Ok(());
        };
        tensorfmt_core::settings::check(self.name(), table, kind, options)
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

    /// The file kinds [`save`](crate::save) can write in this format (the `kind` of a [`Target`],
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

    /// Every file kind a file of this format can be, as the identifier
    /// [`TensorFile::kind_id`](tensorfmt_core::TensorFile::kind_id) gives (what Python's
    /// `Document.kind` shows): the [`write_kinds`](Format::write_kinds) and the kinds
    /// only read (primitiv's `shape` and `optimizer`); the format name for formats with
    /// one kind.
    ///
    /// ```
    /// use tensorfmt::Format;
    /// assert_eq!(Format::Primitiv.kinds(), &["model", "parameter", "tensor", "shape", "optimizer"]);
    /// assert_eq!(Format::Npz.kinds(), &["npz"]);
    /// ```
    pub const fn kinds(self) -> &'static [&'static str] {
        match self {
            Format::Npy => &["npy"],
            Format::Npz => &["npz"],
            Format::Safetensors => &["safetensors"],
            Format::Onnx => &["onnx"],
            Format::Primitiv => &["model", "parameter", "tensor", "shape", "optimizer"],
            Format::Pvp | Format::Som | Format::Caffe => self.write_kinds(),
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
            Format::Npy => head.starts_with(NPY_MAGIC),
            Format::Npz => head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06"),
            Format::Safetensors => safetensors_header_fits(head, file_len),
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

    /// The error of a format whose cargo feature is off.
    pub(crate) fn not_enabled(self) -> Error {
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

    /// The target implied by a path's extension (with the kind a Caffe extension or
    /// PINK's `.pink` / `.som` / `.map` names).
    pub fn from_path(path: &Path) -> Option<Target> {
        let format = Format::from_path(path)?;
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        let kind = match ext.as_str() {
            "caffemodel" | "binaryproto" | "blobprotovector" | "solverstate" => Some(ext),
            "pink" => Some("som-data".into()),
            "som" => Some("som".into()),
            "map" => Some("som-mapping".into()),
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
    /// `blobprotovector`, `solverstate`; PINK's kinds also as reading names them
    /// (`som:data`, `som:mapping`, `som:rotflip`).
    ///
    /// ```
    /// use tensorfmt::{Format, Target};
    /// assert_eq!("pvp:sparse".parse::<Target>()?, Target::new(Format::Pvp).with_kind("sparse"));
    /// assert_eq!("solverstate".parse::<Target>()?.kind.as_deref(), Some("solverstate"));
    /// assert!("pvp:som-data".parse::<Target>().is_err());
    /// assert_eq!("npz:npz".parse::<Target>()?, Target::new(Format::Npz));
    /// // A kind only read names the original a conversion keeps or restores.
    /// assert_eq!("primitiv:optimizer".parse::<Target>()?.kind.as_deref(), Some("optimizer"));
    /// assert_eq!("som:mapping".parse::<Target>()?.kind.as_deref(), Some("som-mapping"));
    /// assert_eq!(Target::new(Format::Som).with_kind("som").to_string(), "som:som");
    /// # Ok::<(), tensorfmt::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Target> {
        let s = s.to_ascii_lowercase();
        if let Some((format, kind)) = s.split_once(':') {
            let format: Format = format.parse()?;
            // PINK's kinds also as `--kind` names them when reading (`som:mapping`).
            let kind = format.kind_named(kind).unwrap_or(kind);
            if format.write_kinds().is_empty() && format.kinds() == [kind] {
                // `npz:npz`, as Python's `f"{doc.format}:{doc.kind}"` spells it: the one kind.
                return Ok(Target::new(format));
            }
            if !format.kinds().contains(&kind) {
                return Err(Error::Invalid(format!(
                    "{format} has no file kind {kind:?} (kinds: {})",
                    if format.write_kinds().is_empty() {
                        "none, it has one kind only".to_string()
                    } else {
                        format.kinds().join(", ")
                    }
                )));
            }
            // A kind only read (primitiv's `optimizer`) names the original a conversion
            // keeps or restores; written from tensors it is refused (`check_settings`).
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
    let file = tensorfmt_core::io::open_regular(path)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
