//! ONNX external data: a tensor whose bytes live in another file beside the model
//! (`data_location: EXTERNAL`, `external_data` keys `location`, `offset`, `length`),
//! as `onnx.save_model(..., save_as_external_data=True)` and every exporter of models
//! over protobuf's 2 GB write them.
//!
//! The location comes from an untrusted file, so it is read under the rules of ONNX's
//! own loader (`onnx/checker.cc`, `resolve_external_data_location`, and
//! `external_data_helper.py`): a relative path with no `..` component, inside the
//! model's directory after every symlink is resolved, itself not a symlink, a regular
//! file with one hard link; `offset` and `length` non-negative decimal integers within
//! the file (without `length`, the data runs to the end of the file). The file is
//! mapped once however many tensors it holds, and the tensor's bytes are a slice of the
//! mapping, checked by [`crate::tensor_from_proto`] as inline `raw_data` is.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use tensorfmt_core::{Limits, Tensor, TensorInfo};

use crate::error::{OnnxError, Result};
use crate::proto::TensorProto;

/// Where a model's external data is read from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Beside<'a> {
    /// Nowhere: the model came as bytes, without a place (an error names the file).
    Refused,
    /// The model's directory: the files are opened and mapped.
    Dir(&'a Path),
    /// Nowhere, but described: each external tensor becomes an [`Unread`] (its file,
    /// offset and length checked lexically), for references to it.
    Described,
}

/// An initializer whose bytes lie in an external file that was not read (the model
/// was read by [`crate::read_model_file_described`]).
///
/// ```
/// use tensorfmt_onnx::proto::{StringStringEntryProto as Entry, TensorProto};
/// let t = TensorProto {
///     name: "w".into(), dims: vec![4], data_type: 7, data_location: 1, // INT64
///     external_data: vec![Entry { key: "location".into(), value: "w.bin".into() }],
///     ..Default::default()
/// };
/// let mut m = tensorfmt_onnx::weights_model(&[])?;
/// m.graph.as_mut().unwrap().initializer.push(t);
/// let mut buf = Vec::new();
/// tensorfmt_onnx::write_model(&mut buf, &m)?;
/// let u = tensorfmt_onnx::read_model_file_described(buf.into(), &Default::default())?.unread.remove(0);
/// assert_eq!((u.index, u.info.name.as_str(), u.offset, u.nbytes), (0, "w", 0, 32));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    /// Position among the graph's initializers.
    pub index: usize,
    /// Name, element type and shape.
    pub info: TensorInfo,
    /// The `location` key: a relative path without `..` (checked).
    pub location: String,
    /// Where the bytes start in that file.
    pub offset: u64,
    /// Their length (the tensor's byte length, checked); `None` when the `length` key
    /// is absent, and the data runs to the end of the file.
    pub length: Option<u64>,
    /// The tensor's byte length.
    pub nbytes: u64,
}

/// The external data files of one model.
#[derive(Debug)]
pub(crate) struct ExternalFiles<'a> {
    beside: Beside<'a>,
    mapped: HashMap<PathBuf, Bytes>,
}

/// A tensor's `external_data` keys.
struct Keys<'p> {
    location: &'p str,
    offset: Option<u64>,
    length: Option<u64>,
}

fn keys<'p>(p: &'p TensorProto, err: &dyn Fn(String) -> OnnxError) -> Result<Keys<'p>> {
    let (mut location, mut offset, mut length) = (None, None, None);
    for e in &p.external_data {
        let number = |v: &str| {
            // Digits only: Rust's parse takes a leading '+', onnxruntime does not.
            let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
            v.parse::<u64>().ok().filter(|_| digits).ok_or_else(|| {
                err(format!(
                    "{} {v:?} is not a non-negative decimal integer",
                    e.key
                ))
            })
        };
        match e.key.as_str() {
            // onnxruntime refuses a second one; onnx.checker reads the first: which
            // file was meant?
            "location" if location.is_some() => {
                return Err(err("has a 'location' entry twice".into()))
            }
            "location" => location = Some(e.value.as_str()),
            "offset" => offset = Some(number(&e.value)?),
            "length" => length = Some(number(&e.value)?),
            // `checksum` is not checked by ONNX's loader either; `basepath` is
            // written by some of its helpers; other keys ONNX ignores with a warning.
            _ => {}
        }
    }
    let location = location
        .filter(|l| !l.is_empty())
        .ok_or_else(|| err("no 'location' entry".into()))?;
    Ok(Keys {
        location,
        offset,
        length,
    })
}

fn error_for<'p>(
    p: &'p TensorProto,
    path: &'p str,
    offset: u64,
) -> impl Fn(String) -> OnnxError + 'p {
    move |reason: String| OnnxError::Tensor {
        path: path.into(),
        offset,
        reason: format!("tensor {:?}: external data: {reason}", p.name),
    }
}

impl<'a> ExternalFiles<'a> {
    pub(crate) fn new(beside: Beside<'a>) -> ExternalFiles<'a> {
        ExternalFiles {
            beside,
            mapped: HashMap::new(),
        }
    }

    /// Whether external tensors are described rather than read.
    pub(crate) fn describes(&self) -> bool {
        matches!(self.beside, Beside::Described)
    }

    /// The [`Unread`] record of `p`, the `index`th initializer, named `name`.
    pub(crate) fn describe(
        &self,
        p: &TensorProto,
        index: usize,
        name: String,
        path: &str,
        offset: u64,
        limits: &Limits,
    ) -> Result<Unread> {
        let err = error_for(p, path, offset);
        let k = keys(p, &err)?;
        lexically_inside(k.location)
            .map_err(|why| err(format!("location {:?} {why}", k.location)))?;
        let (dtype, dims, _, nbytes) = crate::tensor::shape_of(p, path, offset, limits)?;
        if let Some(n) = k.length.filter(|&n| n != nbytes) {
            return Err(err(format!(
                "length {n} in {:?}, the shape {:?} of {} needs {nbytes}",
                k.location,
                p.dims,
                dtype.name()
            )));
        }
        Ok(Unread {
            index,
            info: TensorInfo::new(name, dtype, dims),
            location: k.location.to_string(),
            offset: k.offset.unwrap_or(0),
            length: k.length,
            nbytes,
        })
    }

    /// The tensor `p` describes, its bytes a slice of the mapped external file, and
    /// that file's location.
    pub(crate) fn tensor(
        &mut self,
        p: &TensorProto,
        path: &str,
        offset: u64,
        limits: &Limits,
    ) -> Result<(Tensor, String)> {
        let (q, location) = self.load(p, path, offset)?;
        // The file's bytes are the data, even none (never a typed field beside them).
        let t =
            crate::tensor::read_tensor(&q, true, path, offset, limits).map_err(|e| match e {
                OnnxError::Tensor {
                    path,
                    offset,
                    reason,
                } => OnnxError::Tensor {
                    path,
                    offset,
                    reason: reason.replacen(
                        "raw_data",
                        &format!("tensor {:?}: external data in {location:?}", p.name),
                        1,
                    ),
                },
                e => e,
            })?;
        Ok((t, location))
    }

    /// Checks the external data of a tensor that is not exported (a node attribute's,
    /// a subgraph's initializer, a function's...) as an initializer's is read: its
    /// location under ONNX's rules, and, when the model has a directory, its file and
    /// range (and, for an element type tensorfmt knows, its byte length). Gives the
    /// location, for the model's list of files, and the bytes when they were reached
    /// (a slice of the mapped file).
    pub(crate) fn check(
        &mut self,
        p: &TensorProto,
        path: &str,
        offset: u64,
        limits: &Limits,
    ) -> Result<(String, Option<Bytes>)> {
        let err = error_for(p, path, offset);
        let known = crate::tensor::dtype_of(p.data_type).is_some() && p.segment.is_none();
        if self.describes() {
            let k = keys(p, &err)?;
            lexically_inside(k.location)
                .map_err(|why| err(format!("location {:?} {why}", k.location)))?;
            if known {
                let (_, _, _, nbytes) = crate::tensor::shape_of(p, path, offset, limits)?;
                if let Some(n) = k.length.filter(|&n| n != nbytes) {
                    return Err(err(format!(
                        "length {n} in {:?}, the shape {:?} needs {nbytes}",
                        k.location, p.dims
                    )));
                }
            }
            return Ok((k.location.to_string(), None));
        }
        let (q, location) = self.load(p, path, offset)?;
        if known {
            let (dtype, _, _, nbytes) = crate::tensor::shape_of(p, path, offset, limits)?;
            if q.raw_data.len() as u64 != nbytes {
                return Err(err(format!(
                    "{} bytes in {location:?}, the shape {:?} of {} needs {nbytes}",
                    q.raw_data.len(),
                    p.dims,
                    dtype.name()
                )));
            }
        }
        Ok((location, Some(q.raw_data)))
    }

    /// `p` with its external bytes as `raw_data` (a slice of the mapped file), and
    /// the location.
    fn load(&mut self, p: &TensorProto, path: &str, offset: u64) -> Result<(TensorProto, String)> {
        let err = error_for(p, path, offset);
        let Keys {
            location,
            offset: start,
            length,
        } = keys(p, &err)?;
        let Beside::Dir(dir) = self.beside else {
            return Err(err(format!(
                "it lies in the file {location:?} beside the model, which is read only \
                 when the model is opened from its path (this model came without a directory)"
            )));
        };
        let file = self.map(dir, location).map_err(|e| match e {
            Refusal::Unsafe(why) => err(format!("location {location:?} {why}")),
            // An I/O error stays one (Python's FileNotFoundError / OSError), named.
            Refusal::Io(tensorfmt_core::Error::Io { path: file, source }) => {
                OnnxError::Core(tensorfmt_core::Error::Io {
                    path: format!("{path}: the external data of tensor {:?}, {file}", p.name),
                    source,
                })
            }
            Refusal::Io(e) => OnnxError::Core(e),
        })?;
        let size = file.len() as u64;
        let start = start.unwrap_or(0);
        if start > size {
            return Err(err(format!(
                "offset {start} is beyond the end of {location:?} ({size} bytes)"
            )));
        }
        let end = match length {
            Some(n) => start.checked_add(n).filter(|&e| e <= size).ok_or_else(|| {
                err(format!(
                    "offset {start} + length {n} is beyond the end of {location:?} ({size} bytes)"
                ))
            })?,
            None => size,
        };
        let mut q = p.clone();
        q.raw_data = file.slice(start as usize..end as usize);
        q.data_location = 0;
        q.external_data.clear();
        Ok((q, location.to_string()))
    }

    fn map(&mut self, dir: &Path, location: &str) -> std::result::Result<Bytes, Refusal> {
        let real = contained(dir, location)?;
        if let Some(b) = self.mapped.get(&real) {
            return Ok(b.clone());
        }
        // Closed once mapped: a model exported with one file per tensor (torch's
        // exporter does) would otherwise hold thousands of descriptors.
        let bytes = tensorfmt_core::io::map_file_unheld(&real).map_err(Refusal::Io)?;
        self.mapped.insert(real, bytes.clone());
        Ok(bytes)
    }
}

/// The file an external data `location` names beside a model in `model_dir`
/// (canonical), when ONNX's loader rules accept it (see the module docs); the error
/// says which rule it breaks, or is the I/O error of reaching it. The one check both
/// the reader and `tensorfmt.virtual`'s parser (for local files) apply.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("w.bin"), [0u8; 8])?;
/// assert!(tensorfmt_onnx::external_data_file(dir.path(), "w.bin").is_ok());
/// let e = tensorfmt_onnx::external_data_file(dir.path(), "../w.bin").unwrap_err();
/// assert!(e.to_string().contains("'..'"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn external_data_file(model_dir: &Path, location: &str) -> Result<PathBuf> {
    contained(model_dir, location).map_err(|e| match e {
        Refusal::Unsafe(why) => OnnxError::Core(tensorfmt_core::Error::Invalid(format!(
            "external data location {location:?} {why}"
        ))),
        Refusal::Io(e) => OnnxError::Core(e),
    })
}

/// Why `location` is not a relative path inside the model's directory, by its text
/// alone (what a reference to a file beside a remote model can be checked for).
fn lexically_inside(location: &str) -> std::result::Result<(), &'static str> {
    if location.contains('\0') {
        return Err("holds a NUL byte");
    }
    // A URL parser strips tabs and newlines ("..\t" becomes ".."); a backslash is a
    // separator on Windows; a trailing slash names a directory (ONNX refuses it).
    if location.chars().any(char::is_control) {
        return Err("holds a control character");
    }
    if location.contains('\\') {
        return Err("holds a backslash (the separator is '/')");
    }
    if location.ends_with('/') {
        return Err("has a trailing '/' (a directory, not a file)");
    }
    for c in Path::new(location).components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err("has a '..' component (outside the model's directory)")
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err("is absolute (it must be relative to the model's directory)")
            }
        }
    }
    Ok(())
}

enum Refusal {
    /// The location breaks a rule of ONNX's loader.
    Unsafe(String),
    /// The file cannot be read.
    Io(tensorfmt_core::Error),
}

/// The canonical path of `dir/location`, when the location is one ONNX's loader
/// accepts.
fn contained(dir: &Path, location: &str) -> std::result::Result<PathBuf, Refusal> {
    let unsafe_ = |why: &str| Err(Refusal::Unsafe(why.into()));
    lexically_inside(location).map_err(|why| Refusal::Unsafe(why.into()))?;
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let io = |p: &Path, e: std::io::Error| Refusal::Io(tensorfmt_core::Error::io(p, e));
    // No component may be a symbolic link (ONNX's loader opens with
    // RESOLVE_NO_SYMLINKS), the last one included.
    let mut data_path = dir.to_path_buf();
    let mut meta = None;
    for c in Path::new(location).components() {
        if let Component::Normal(part) = c {
            data_path.push(part);
            let m = std::fs::symlink_metadata(&data_path).map_err(|e| io(&data_path, e))?;
            if m.file_type().is_symlink() {
                return unsafe_("goes through a symbolic link (ONNX's loader refuses them)");
            }
            meta = Some(m);
        }
    }
    let Some(meta) = meta else {
        return unsafe_("names the model's directory itself");
    };
    let real = data_path.canonicalize().map_err(|e| io(&data_path, e))?;
    let base = dir.canonicalize().map_err(|e| io(dir, e))?;
    if !real.starts_with(&base) {
        return unsafe_("resolves outside the model's directory");
    }
    if !meta.is_file() {
        return unsafe_("is not a regular file");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return unsafe_("has more than one hard link (ONNX's loader refuses them)");
        }
    }
    Ok(real)
}
