//! `like=ORIGINAL` (CLI `--like ORIGINAL`): new tensors written into the structure of an
//! existing file of the same legacy format (PVP, PINK, primitiv, Caffe), keeping
//! everything besides the tensors (issue 23 item 7): a Caffe net's name, layer types,
//! blob-less layers, legacy 4-D blob shapes and a solver state's `iter` / `learned_net`;
//! a PVP file's headers; a PINK comment block; a primitiv Optimizer's state.
//!
//! It is the [`provenance`](mod@crate::provenance) splice with a skeleton taken from
//! `ORIGINAL` instead of from metadata: the tensors must keep the original's names,
//! dtypes and shapes, and the spliced file is read back. When they do not fit, nothing
//! is written and the error says why.

use std::path::Path;

use tensorfmt_core::{Error, FieldValue, Result, Tensor, TensorFile, TensorInfo, WriteOptions};

use crate::formats::{Format, Target, WriteReport};
use crate::interop::MemoryFile;
use crate::provenance::{self, Restored};
use crate::Document;

/// The write setting naming the original (Python's `like=`; the facade's `save` and
/// `convert` honour it).
pub const LIKE_KEY: &str = "like";

/// Writes `tensors` to `path` in the structure of `original` (a file of a legacy
/// format, the format `path` is written in).
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
/// tensorfmt::like::save_like(&out, &orig, &tensors, &Default::default())?;
/// assert_eq!(std::fs::read(&out)?, std::fs::read(&orig)?); // unchanged values: same bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_like(
    path: &Path,
    original: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<WriteReport> {
    let orig = crate::open(original, &Default::default())?;
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
    if options.dtype.is_some() || kind_asked || !options.extra.is_empty() {
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
