//! Writing ONNX files: a streaming `ModelProto` encoder (initializer payloads go from
//! the tensors' bytes straight to the writer, never through one big buffer) and
//! weights-only models built from named tensors.

use std::io::Write;
use std::path::Path;

use prost::Message;
use tensorfmt_core::io::{write_atomic_with, AtomicFile, BulkWrite};
use tensorfmt_core::{Tensor, WriteOptions};

use crate::error::{OnnxError, Result};
use crate::proto::{
    GraphProto, ModelProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
};
use crate::tensor::tensor_to_proto;
use crate::wire::put_varint;

/// The IR version written (ONNX 1.13+, opset 17-18 era; onnxruntime 1.14+ reads it).
pub const IR_VERSION: i64 = 8;
/// The default-domain opset written.
pub const OPSET: i64 = 17;

fn varint_len(v: u64) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}

fn key(field: u32) -> u8 {
    ((field << 3) | 2) as u8
}

/// A tensor message split into its small fields and its payload.
struct SplitTensor {
    head: Vec<u8>,
    raw: bytes::Bytes,
}

impl SplitTensor {
    fn new(t: &TensorProto) -> SplitTensor {
        let mut rest = t.clone();
        let raw = std::mem::take(&mut rest.raw_data);
        SplitTensor {
            head: rest.encode_to_vec(),
            raw,
        }
    }
    fn len(&self) -> usize {
        let mut n = self.head.len();
        if !self.raw.is_empty() {
            n += 1 + varint_len(self.raw.len() as u64) + self.raw.len();
        }
        n
    }
    fn write(&self, w: &mut dyn BulkWrite) -> std::io::Result<()> {
        w.write_all(&self.head)?;
        if !self.raw.is_empty() {
            let mut k = vec![key(9)];
            put_varint(&mut k, self.raw.len() as u64);
            w.write_all(&k)?;
            w.write_bulk(&self.raw)?;
        }
        Ok(())
    }
}

/// A plain writer as a [`BulkWrite`] that writes every payload.
struct Plain<'a>(&'a mut dyn Write);

impl Write for Plain<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl BulkWrite for Plain<'_> {}

/// Encodes `model` to `w`, streaming each initializer's `raw_data` from its bytes (a
/// 100 MB model is not copied into a second 100 MB buffer). Fields come out in the
/// order ModelProto minus graph, graph minus initializers, then the initializers (each
/// with `raw_data` last); protobuf parsers accept fields in any order.
///
/// ```
/// use prost::Message;
/// use tensorfmt_onnx::proto::{GraphProto, ModelProto, TensorProto};
/// let m = ModelProto { ir_version: 8, graph: Some(GraphProto {
///     initializer: vec![TensorProto { name: "w".into(), dims: vec![1], data_type: 1,
///                                     raw_data: vec![0, 0, 128, 63].into(), ..Default::default() }],
///     ..Default::default() }), ..Default::default() };
/// let mut out = Vec::new();
/// tensorfmt_onnx::write_model(&mut out, &m)?;
/// assert_eq!(ModelProto::decode(out.as_slice())?, m);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_model(w: &mut dyn Write, model: &ModelProto) -> Result<()> {
    write_model_bulk(&mut Plain(w), model)
}

/// [`write_model`] to a [`BulkWrite`]: into an `AtomicFile`, each initializer payload
/// that is a slice of a mapped input file (the weights of a caffemodel being converted)
/// is copied by the kernel from that file, as `cp` copies, instead of through this
/// process ([`AtomicFile::write_mapped`](tensorfmt_core::io::AtomicFile::write_mapped)).
///
/// ```
/// use prost::Message;
/// use tensorfmt_onnx::proto::{GraphProto, ModelProto, TensorProto};
/// let m = ModelProto { ir_version: 8, graph: Some(GraphProto {
///     initializer: vec![TensorProto { name: "w".into(), dims: vec![1], data_type: 1,
///                                     raw_data: vec![0, 0, 128, 63].into(), ..Default::default() }],
///     ..Default::default() }), ..Default::default() };
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("m.onnx");
/// tensorfmt_core::io::write_atomic(&out, |f| tensorfmt_onnx::write_model_bulk(f, &m))?;
/// assert_eq!(ModelProto::decode(std::fs::read(&out)?.as_slice())?, m);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_model_bulk(w: &mut dyn BulkWrite, model: &ModelProto) -> Result<()> {
    let plan = Plan::new(model)?;
    // Refused before the first byte is written: the caller's temporary file is removed.
    check_model_size(plan.total)?;
    plan.write(w)
}

/// A model split for streaming: its encoded parts around the initializer payloads, and
/// the total size (known before anything is written or any payload is read).
struct Plan {
    /// ModelProto minus the graph.
    top: Vec<u8>,
    /// The graph: its key and length, its fields minus initializers, the initializers.
    graph: Option<(Vec<u8>, Vec<u8>, Vec<SplitTensor>)>,
    total: u64,
}

impl Plan {
    fn new(model: &ModelProto) -> Result<Plan> {
        let mut top = model.clone();
        let graph = top.graph.take();
        let top = top.encode_to_vec();
        let Some(mut g) = graph else {
            let total = top.len() as u64;
            return Ok(Plan {
                top,
                graph: None,
                total,
            });
        };
        let inits = std::mem::take(&mut g.initializer);
        let split: Vec<SplitTensor> = inits.iter().map(SplitTensor::new).collect();
        let rest = g.encode_to_vec();
        let mut len = rest.len() as u64;
        for s in &split {
            let l = s.len() as u64;
            len = len
                .checked_add(1 + varint_len(l) as u64 + l)
                .ok_or_else(|| OnnxError::Write("model size overflows".into()))?;
        }
        let mut head = vec![key(7)];
        put_varint(&mut head, len);
        let total = top.len() as u64 + head.len() as u64 + len;
        Ok(Plan {
            top,
            graph: Some((head, rest, split)),
            total,
        })
    }

    fn write(&self, w: &mut dyn BulkWrite) -> Result<()> {
        // An output that knows its size skips the file system's per-page allocation.
        w.expect_len(self.total)?;
        w.write_all(&self.top)?;
        let Some((head, rest, split)) = &self.graph else {
            return Ok(());
        };
        w.write_all(head)?;
        w.write_all(rest)?;
        for s in split {
            let mut k = vec![key(5)];
            put_varint(&mut k, s.len() as u64);
            w.write_all(&k)?;
            s.write(w)?;
        }
        Ok(())
    }
}

/// The largest ONNX file that protobuf parsers read (`onnx.load`, onnxruntime): 2 GiB
/// - 1. [`save_model`] puts the payloads of larger models in an external data file.
pub const MAX_MODEL_BYTES: u64 = i32::MAX as u64;

fn check_model_size(n: u64) -> Result<()> {
    if n > MAX_MODEL_BYTES {
        return Err(OnnxError::Write(format!(
            "the model would be {n} bytes, over the 2 GiB protobuf limit of ONNX readers \
             ({MAX_MODEL_BYTES} bytes)"
        )));
    }
    Ok(())
}

/// Initializers smaller than this stay in the model when payloads go to an external
/// data file (`onnx.save_model`'s default `size_threshold`).
pub const EXTERNAL_MIN_BYTES: usize = 1024;

/// Offsets of payloads in an external data file are multiples of this (aligned loads
/// for whoever maps the file).
pub(crate) const EXTERNAL_ALIGN: u64 = 64;

/// Where [`save_model_with`] puts the initializers' payloads.
///
/// ```
/// use tensorfmt_onnx::ExternalData;
/// let mut o = tensorfmt_core::WriteOptions::default();
/// assert_eq!(ExternalData::from_options(&o)?, ExternalData::WhenNeeded);
/// o.extra.insert("external_data".into(), "true".into());
/// assert_eq!(ExternalData::from_options(&o)?, ExternalData::Always);
/// o.extra.insert("external_data".into(), "yes".into()); // a flag: true, 1, yes
/// assert_eq!(ExternalData::from_options(&o)?, ExternalData::Always);
/// o.extra.insert("external_data".into(), "maybe".into());
/// assert!(ExternalData::from_options(&o).is_err());
/// # Ok::<(), tensorfmt_onnx::OnnxError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExternalData {
    /// Inside the model while it fits protobuf's 2 GiB ([`MAX_MODEL_BYTES`]); in
    /// `NAME.data` beside it past that.
    #[default]
    WhenNeeded,
    /// In `NAME.data` beside the model whatever its size (payloads of
    /// [`EXTERNAL_MIN_BYTES`] or more).
    Always,
}

impl ExternalData {
    /// The writer setting [`ExternalData::from_options`] reads (`--set external_data=true`).
    pub const SETTING: &'static str = "external_data";

    /// The choice `options.extra["external_data"]` makes: absent or false
    /// [`WhenNeeded`](ExternalData::WhenNeeded), true [`Always`](ExternalData::Always)
    /// (a [`Flag`](tensorfmt_core::settings::SettingValue::Flag)), anything else an error.
    pub fn from_options(options: &WriteOptions) -> Result<ExternalData> {
        Self::parse(options.extra.get(Self::SETTING).map(String::as_str))
    }

    /// [`ExternalData::from_options`] for one value (`None`: not given).
    pub fn parse(value: Option<&str>) -> Result<ExternalData> {
        match value.map(tensorfmt_core::settings::parse_flag) {
            None | Some(Some(false)) => Ok(ExternalData::WhenNeeded),
            Some(Some(true)) => Ok(ExternalData::Always),
            Some(None) => Err(OnnxError::Write(format!(
                "external_data is true or false, not {:?}",
                value.unwrap_or_default()
            ))),
        }
    }
}

/// Saves `model` at `path` through [`tensorfmt_core::io::AtomicFile`]s, payloads where
/// `options.extra["external_data"]` says ([`ExternalData::from_options`]): see
/// [`save_model_with`].
///
/// ```
/// use tensorfmt_core::{Order, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("w.onnx");
/// let t = Tensor::from_vec(vec![0.5f32; 1000], [1000], Order::RowMajor)?;
/// let m = tensorfmt_onnx::weights_model(&[("w".into(), t)])?;
/// let mut options = WriteOptions::default();
/// options.extra.insert("external_data".into(), "true".into());
/// tensorfmt_onnx::save_model(&p, &m, &options)?;
/// assert_eq!(std::fs::metadata(dir.path().join("w.onnx.data"))?.len(), 4000);
/// let back = tensorfmt_onnx::read_model_file_at(std::fs::read(&p)?.into(), &Default::default(), dir.path())?;
/// assert_eq!(back.external_files, ["w.onnx.data"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_model(path: &Path, model: &ModelProto, options: &WriteOptions) -> Result<()> {
    save_model_with(path, model, ExternalData::from_options(options)?, options)
}

/// Saves `model` at `path`: one file when it fits protobuf's 2 GiB
/// ([`MAX_MODEL_BYTES`]) and `external` is [`ExternalData::WhenNeeded`]; otherwise every
/// initializer payload of [`EXTERNAL_MIN_BYTES`] or more goes to `NAME.data` beside the
/// model (ONNX's external data: `location`, `offset`, `length`, offsets 64-byte
/// aligned), as `onnx.save_model(..., save_as_external_data=True)` writes it. The data
/// file is committed before the model, and removed if the model cannot be. Only
/// `options.skip_fsync` is read from `options`.
///
/// ```
/// use tensorfmt_onnx::ExternalData;
/// use tensorfmt_core::{Order, Tensor};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("w.onnx");
/// let t = Tensor::from_vec(vec![0.5f32; 1000], [1000], Order::RowMajor)?;
/// let m = tensorfmt_onnx::weights_model(&[("w".into(), t)])?;
/// tensorfmt_onnx::save_model_with(&p, &m, ExternalData::Always, &Default::default())?;
/// assert!(dir.path().join("w.onnx.data").is_file());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_model_with(
    path: &Path,
    model: &ModelProto,
    external: ExternalData,
    options: &WriteOptions,
) -> Result<()> {
    save_model_within(path, model, external, options, MAX_MODEL_BYTES)
}

/// [`save_model_with`] with the size over which payloads go external as a parameter
/// (the tests cannot build 2 GiB).
fn save_model_within(
    path: &Path,
    model: &ModelProto,
    external: ExternalData,
    options: &WriteOptions,
    max_inline: u64,
) -> Result<()> {
    let forced = external == ExternalData::Always;
    if !forced && Plan::new(model)?.total <= max_inline {
        return write_inline(path, model, options);
    }
    let data_path = external_data_path(path);
    let location = data_path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| OnnxError::Write(format!("{}: not a UTF-8 file name", path.display())))?
        .to_string();
    let mut small = model.clone();
    let mut payloads = Vec::new();
    let mut end = 0u64;
    if let Some(g) = small.graph.as_mut() {
        for t in &mut g.initializer {
            if t.raw_data.len() < EXTERNAL_MIN_BYTES {
                continue;
            }
            let offset = end.div_ceil(EXTERNAL_ALIGN) * EXTERNAL_ALIGN;
            let raw = std::mem::take(&mut t.raw_data);
            end = offset + raw.len() as u64;
            let entry = |k: &str, v: String| StringStringEntryProto {
                key: k.into(),
                value: v,
            };
            t.data_location = 1;
            t.external_data = vec![
                entry("location", location.clone()),
                entry("offset", offset.to_string()),
                entry("length", raw.len().to_string()),
            ];
            payloads.push((offset, raw));
        }
    }
    if payloads.is_empty() {
        // Nothing large enough to move: one file.
        return write_inline(path, &small, options);
    }
    let data = write_data_file(&data_path, &payloads, end, options)?;
    let mut head = AtomicFile::create(path)?.sync(!options.skip_fsync);
    write_model_bulk(&mut head, &small)?;
    commit_pair(&data_path, data, head)
}

/// An external data file of `len` bytes at `data_path`, not yet committed: each
/// payload at its offset, zeros between them (the alignment).
pub(crate) fn write_data_file(
    data_path: &Path,
    payloads: &[(u64, bytes::Bytes)],
    len: u64,
    options: &WriteOptions,
) -> Result<AtomicFile> {
    let mut data = AtomicFile::create(data_path)?.sync(!options.skip_fsync);
    data.expect_len(len)?;
    let mut at = 0u64;
    for (offset, raw) in payloads {
        data.write_all(&vec![0u8; (offset - at) as usize])?;
        data.write_bulk(raw)?;
        at = offset + raw.len() as u64;
    }
    Ok(data)
}

/// Commits a model (`head`) and its data file (`data`, for `data_path`): the data
/// first, then the model. The pair is replaced together: an existing data file is kept
/// aside until the new model is in place, and put back if it cannot be (the old model
/// still needs it).
pub(crate) fn commit_pair(data_path: &Path, data: AtomicFile, head: AtomicFile) -> Result<()> {
    let aside = keep_aside(data_path)?;
    let put_back = |aside: &Option<std::path::PathBuf>| {
        if let Some(old) = aside {
            let _ = std::fs::rename(old, data_path);
        }
    };
    if let Err(e) = data.commit() {
        put_back(&aside);
        return Err(e.into());
    }
    if let Err(e) = head.commit() {
        let _ = std::fs::remove_file(data_path);
        put_back(&aside);
        return Err(e.into());
    }
    if let Some(old) = aside {
        let _ = std::fs::remove_file(old);
    }
    Ok(())
}

/// Writes `model` as one file at `path`. A `NAME.data` beside it that the model it
/// replaces kept its payloads in goes with that model (nothing refers to it any more);
/// one the old model did not use is not ours and stays.
fn write_inline(path: &Path, model: &ModelProto, options: &WriteOptions) -> Result<()> {
    write_single(path, options, |w| write_model_bulk(w, model))
}

/// Writes a model as one file at `path` with `write`, leaving no `NAME.data` of the
/// model it replaces behind (see [`write_inline`]).
pub(crate) fn write_single(
    path: &Path,
    options: &WriteOptions,
    write: impl FnOnce(&mut dyn BulkWrite) -> Result<()>,
) -> Result<()> {
    let data_path = external_data_path(path);
    let orphaned = data_path.is_file() && old_model_uses(path, &data_path);
    write_atomic_with(path, options, |w| write(w))?;
    if orphaned {
        let _ = std::fs::remove_file(&data_path);
    }
    Ok(())
}

/// Whether the model at `path` (about to be replaced) keeps payloads in `data_path`.
fn old_model_uses(path: &Path, data_path: &Path) -> bool {
    let Some(name) = data_path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    tensorfmt_core::io::map_file(path)
        .ok()
        .and_then(|bytes| {
            crate::read_model_file_described(bytes, &tensorfmt_core::ReadOptions::default()).ok()
        })
        .is_some_and(|m| m.external_files.iter().any(|f| f == name))
}

/// The external data file [`save_model`] writes beside the model at `model`:
/// `NAME.data` (the one name, for the writer and for the callers that must not let it
/// replace an input or an existing file).
///
/// ```
/// use std::path::Path;
/// assert_eq!(tensorfmt_onnx::external_data_path(Path::new("d/m.onnx")), Path::new("d/m.onnx.data"));
/// ```
pub fn external_data_path(model: &Path) -> std::path::PathBuf {
    let mut name = model.file_name().unwrap_or_default().to_owned();
    name.push(".data");
    model.with_file_name(name)
}

/// Renames an existing `path` to a hidden name beside it (returned), or nothing when
/// there is no such file.
fn keep_aside(path: &Path) -> Result<Option<std::path::PathBuf>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".{}.old", std::process::id()));
    let aside = path.with_file_name(name);
    std::fs::rename(path, &aside).map_err(|e| tensorfmt_core::Error::io(path, e))?;
    Ok(Some(aside))
}

/// A weights-only model: a graph with no nodes whose initializers are `tensors`
/// (names kept, row-major `raw_data`), IR version [`IR_VERSION`], opset [`OPSET`].
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec(vec![1i64, 2], [2], Order::RowMajor)?;
/// let m = tensorfmt_onnx::weights_model(&[("k".into(), t)])?;
/// assert_eq!(m.graph.unwrap().initializer[0].data_type, 7);
/// # Ok::<(), tensorfmt_onnx::OnnxError>(())
/// ```
pub fn weights_model(tensors: &[(String, Tensor)]) -> Result<ModelProto> {
    let mut seen = std::collections::HashSet::new();
    let mut initializer = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        if name.is_empty() {
            return Err(OnnxError::Write(
                "an initializer needs a non-empty name".into(),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(OnnxError::Write(format!("duplicate tensor name {name:?}")));
        }
        initializer.push(tensor_to_proto(name, t)?);
    }
    Ok(ModelProto {
        ir_version: IR_VERSION,
        producer_name: "tensorfmt".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        graph: Some(GraphProto {
            name: "weights".into(),
            initializer,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// [`weights_model`] encoded into any writer.
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// use tensorfmt_core::testing::FailAfter;
/// let t = Tensor::from_vec(vec![1f32], [1], Order::RowMajor)?;
/// let named = [("w".to_string(), t)];
/// assert!(tensorfmt_onnx::write_tensors(&mut FailAfter::new(5), &named).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_tensors(w: &mut dyn Write, tensors: &[(String, Tensor)]) -> Result<()> {
    write_model(w, &weights_model(tensors)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model over protobuf's 2 GiB limit would be a file no ONNX reader opens: it is
    /// refused by size, before anything is written. (Building a 2 GiB tensor in a unit
    /// test is too costly; the size rule is checked at its boundary.)
    #[test]
    fn models_over_the_inline_limit_put_their_payloads_beside() {
        use tensorfmt_core::Order;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.onnx");
        let big = Tensor::from_vec(vec![1.5f32; 3000], [3000], Order::RowMajor).unwrap();
        let odd = Tensor::from_vec(vec![7u8; 1001 * 3], [3, 1001], Order::RowMajor).unwrap();
        let small = Tensor::from_vec(vec![2i64; 4], [4], Order::RowMajor).unwrap();
        let named = [
            ("odd".to_string(), odd.clone()),
            ("big".to_string(), big.clone()),
            ("small".to_string(), small.clone()),
        ];
        let m = weights_model(&named).unwrap();
        // Under the limit: one file, as before.
        save_model_within(
            &p,
            &m,
            ExternalData::WhenNeeded,
            &Default::default(),
            1 << 20,
        )
        .unwrap();
        assert!(!dir.path().join("m.onnx.data").exists());
        // Over it: payloads of 1 KiB or more go beside, 64-byte aligned, in order.
        save_model_within(&p, &m, ExternalData::WhenNeeded, &Default::default(), 4096).unwrap();
        let data = std::fs::read(dir.path().join("m.onnx.data")).unwrap();
        assert_eq!(data.len(), 3008 + 12000);
        let back = crate::read_model_file_at(
            std::fs::read(&p).unwrap().into(),
            &Default::default(),
            dir.path(),
        )
        .unwrap();
        assert_eq!(back.external_files, ["m.onnx.data"]);
        for ((n, t), (m, u)) in named.iter().zip(&back.initializers) {
            assert_eq!((n, t.bytes()), (m, u.bytes()));
        }
        assert!(std::fs::metadata(&p).unwrap().len() < 1024);
        let mut bad = WriteOptions::default();
        bad.extra.insert("external_data".into(), "maybe".into());
        let e = save_model(&p, &m, &bad).unwrap_err().to_string();
        assert!(e.contains("true or false"), "{e}");
    }

    /// A model rewritten as one file left the `NAME.data` of the model it replaced
    /// behind, referred to by nothing; a `NAME.data` the old model did not use is kept.
    #[test]
    fn an_inline_rewrite_removes_the_data_file_only_the_old_model_used() {
        use tensorfmt_core::Order;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.onnx");
        let big = Tensor::from_vec(vec![1.5f32; 3000], [3000], Order::RowMajor).unwrap();
        let m = weights_model(&[("big".to_string(), big)]).unwrap();
        let data = dir.path().join("m.onnx.data");
        save_model_with(&p, &m, ExternalData::Always, &Default::default()).unwrap();
        assert!(data.is_file());
        save_model_with(&p, &m, ExternalData::WhenNeeded, &Default::default()).unwrap();
        assert!(!data.exists());
        std::fs::write(&data, b"someone else's").unwrap();
        save_model_with(&p, &m, ExternalData::WhenNeeded, &Default::default()).unwrap();
        assert_eq!(std::fs::read(&data).unwrap(), b"someone else's");
    }

    /// The model and its data file are replaced together: when the new model cannot be
    /// put in place, the old data file is back where it was (the old model needs it).
    #[test]
    fn a_failed_model_commit_keeps_the_old_data_file() {
        use tensorfmt_core::Order;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.onnx");
        let data = external_data_path(&p);
        std::fs::write(&data, b"the old model's weights").unwrap();
        // A non-empty directory where the model goes: the data file commits, the
        // model's rename fails.
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("x"), b"").unwrap();
        let t = Tensor::from_vec(vec![1.5f32; 3000], [3000], Order::RowMajor).unwrap();
        let m = weights_model(&[("w".to_string(), t)]).unwrap();
        let e = save_model_with(&p, &m, ExternalData::Always, &Default::default()).unwrap_err();
        assert!(e.to_string().contains("renam"), "{e}"); // failed at the commit
        assert_eq!(std::fs::read(&data).unwrap(), b"the old model's weights");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}"); // m.onnx/ and m.onnx.data only
    }

    #[test]
    fn models_over_two_gib_are_refused_before_writing() {
        assert!(check_model_size(MAX_MODEL_BYTES).is_ok());
        let e = check_model_size(MAX_MODEL_BYTES + 1).unwrap_err();
        assert!(e.to_string().contains("2 GiB protobuf limit"), "{e}");
    }
}
