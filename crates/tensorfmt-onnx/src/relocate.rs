//! A whole model copied with its data placed anew: what `onnx.load` followed by
//! `onnx.save_model` does, without decoding the model. A model whose tensors lie
//! partly in files beside it cannot be copied byte for byte (the copy would point at
//! files that are not beside it, or at the source's), and writing its initializers as
//! a weights-only model loses the graph; so the model's bytes are copied field by
//! field, and only the messages on the way to a tensor whose data moves are
//! re-encoded (their lengths change). Every field tensorfmt does not know survives,
//! as it does in a byte copy.
//!
//! Where the data goes follows [`ExternalData`], as for any model tensorfmt writes:
//! inside the model while the whole fits protobuf's 2 GiB, else (or when asked) in
//! `NAME.data` beside it, for every payload of [`EXTERNAL_MIN_BYTES`] or more of the
//! tensors `onnx.save_model(..., save_as_external_data=True)` moves (dense
//! initializers and node attributes' tensors, in every graph); the parts of a sparse
//! tensor stay where ONNX's helper leaves them (inside, or in a data file, read from
//! the source's and moved to the copy's).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use tensorfmt_core::io::{AtomicFile, BulkWrite};
use tensorfmt_core::{Limits, WriteOptions};

use crate::error::{OnnxError, Result};
use crate::external::{Beside, ExternalFiles};
use crate::proto::{StringStringEntryProto, TensorProto};
use crate::read::{child, decode_bounded, Msg, MAX_DEPTH};
use crate::wire::{self, put_varint, Field};
use crate::write::{
    commit_pair, external_data_path, write_data_file, write_single, ExternalData, EXTERNAL_ALIGN,
    EXTERNAL_MIN_BYTES, MAX_MODEL_BYTES,
};

/// What [`copy_model`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Payloads read from the source's external data files.
    pub external_read: usize,
    /// The data file written beside the copy, when one was.
    pub data_file: Option<PathBuf>,
    /// Payloads in that data file.
    pub external_written: usize,
    /// Bytes of the model file written.
    pub model_bytes: u64,
}

/// Copies the model `model` (the bytes of a file in `model_dir`, whose external data
/// files are read under ONNX's location rules) to `out`, every payload placed as
/// `external` says (see the module docs): a model with external data becomes one file
/// when it fits 2 GiB, or `out` and `NAME.data` beside it. Nothing else changes: every
/// node, attribute, field and unknown field is the source's. The files are written
/// through [`AtomicFile`]s, the data file committed first; on an error nothing is left.
///
/// ```
/// use prost::Message;
/// use tensorfmt_onnx::proto::{GraphProto, ModelProto, StringStringEntryProto as E, TensorProto};
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("w.bin"), 1.5f32.to_le_bytes())?;
/// let w = TensorProto { name: "w".into(), dims: vec![1], data_type: 1, data_location: 1,
///     external_data: vec![E { key: "location".into(), value: "w.bin".into() }], ..Default::default() };
/// let m = ModelProto { ir_version: 8, graph: Some(GraphProto { initializer: vec![w], ..Default::default() }),
///     ..Default::default() };
/// let out = dir.path().join("copy.onnx");
/// let r = tensorfmt_onnx::copy_model(m.encode_to_vec().into(), dir.path(), &out,
///     tensorfmt_onnx::ExternalData::WhenNeeded, &Default::default(), &Default::default())?;
/// assert_eq!((r.external_read, r.data_file), (1, None));
/// let back = ModelProto::decode(std::fs::read(&out)?.as_slice())?;
/// assert_eq!(back.graph.unwrap().initializer[0].raw_data.as_ref(), 1.5f32.to_le_bytes());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn copy_model(
    model: Bytes,
    model_dir: &Path,
    out: &Path,
    external: ExternalData,
    limits: &Limits,
    options: &WriteOptions,
) -> Result<CopyReport> {
    let data_path = external_data_path(out);
    let location = data_path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| OnnxError::Write(format!("{}: not a UTF-8 file name", out.display())))?
        .to_string();
    let mut plan = Relocation::plan(&model, model_dir, limits, Place::Inside)?;
    if external == ExternalData::Always || plan.len > MAX_MODEL_BYTES {
        plan = Relocation::plan(&model, model_dir, limits, Place::Beside(location))?;
    }
    if plan.len > MAX_MODEL_BYTES {
        return Err(OnnxError::Write(format!(
            "the copy would be {} bytes with its small tensors inside, over the 2 GiB \
             protobuf limit of ONNX readers ({MAX_MODEL_BYTES} bytes)",
            plan.len
        )));
    }
    let mut report = CopyReport {
        external_read: plan.read,
        data_file: None,
        external_written: plan.payloads.len(),
        model_bytes: plan.len,
    };
    let write_head = |w: &mut dyn BulkWrite| -> Result<()> {
        w.expect_len(plan.len)?;
        for piece in &plan.pieces {
            w.write_bulk(piece)?;
        }
        Ok(())
    };
    if plan.payloads.is_empty() {
        write_single(out, options, write_head)?;
        return Ok(report);
    }
    let data = write_data_file(&data_path, &plan.payloads, plan.data_len, options)?;
    let mut head = AtomicFile::create(out)?.sync(!options.skip_fsync);
    write_head(&mut head)?;
    commit_pair(&data_path, data, head)?;
    report.data_file = Some(data_path);
    Ok(report)
}

/// Where the payloads go.
#[derive(Debug, Clone)]
enum Place {
    /// Inside the model (`raw_data`).
    Inside,
    /// In the data file of this location beside the copy.
    Beside(String),
}

/// The copy, planned: the model's bytes as pieces (slices of the source and small
/// re-encoded parts) and the data file's payloads at their offsets.
struct Relocation<'a> {
    data: &'a Bytes,
    external: ExternalFiles<'a>,
    limits: &'a Limits,
    place: Place,
    pieces: Vec<Bytes>,
    len: u64,
    payloads: Vec<(u64, Bytes)>,
    data_len: u64,
    read: usize,
}

/// A message's copy: its pieces and length, or `None` when it is unchanged.
type Copied = Option<(Vec<Bytes>, u64)>;

impl<'a> Relocation<'a> {
    fn plan(
        data: &'a Bytes,
        model_dir: &'a Path,
        limits: &'a Limits,
        place: Place,
    ) -> Result<Relocation<'a>> {
        let mut r = Relocation {
            data,
            external: ExternalFiles::new(Beside::Dir(model_dir)),
            limits,
            place,
            pieces: Vec::new(),
            len: 0,
            payloads: Vec::new(),
            data_len: 0,
            read: 0,
        };
        let mut at = vec!["model"];
        let (pieces, len) = match r.message(Msg::Model, 0, data.len(), &mut at)? {
            Some(copied) => copied,
            None => (vec![data.clone()], data.len() as u64),
        };
        r.pieces = pieces;
        r.len = len;
        Ok(r)
    }

    /// The copy of the message `msg` in `data[start..end]`.
    fn message(
        &mut self,
        msg: Msg,
        start: usize,
        end: usize,
        at: &mut Vec<&'static str>,
    ) -> Result<Copied> {
        if at.len() > MAX_DEPTH {
            return Err(OnnxError::Wire {
                path: at.join("."),
                offset: start as u64,
                reason: format!("messages nested deeper than {MAX_DEPTH}"),
            });
        }
        let data = self.data;
        let mut out = Vec::new();
        let mut len = 0u64;
        let mut changed = false;
        // The start of the unchanged bytes not yet in `out`.
        let mut kept = start;
        for g in wire::iter(data, start, end, "nested message") {
            let g = g?;
            let Some((field, next, _)) = (g.wire_type == 2).then(|| child(msg, g.number)).flatten()
            else {
                continue;
            };
            // The tensors ONNX's helper moves: dense initializers and attribute tensors.
            let movable_child = matches!(
                (msg, g.number),
                (Msg::Graph, 5) | (Msg::Attribute, 5) | (Msg::Attribute, 10)
            );
            at.push(field);
            let copied = if next == Msg::Tensor {
                self.tensor(&g, movable_child, at)
            } else {
                self.message(next, g.start, g.end, at)
            };
            at.pop();
            let Some((pieces, n)) = copied? else {
                continue;
            };
            changed = true;
            if kept < g.offset {
                out.push(data.slice(kept..g.offset));
                len += (g.offset - kept) as u64;
            }
            let mut key = Vec::with_capacity(16);
            put_varint(&mut key, (u64::from(g.number) << 3) | 2);
            put_varint(&mut key, n);
            len += key.len() as u64 + n;
            out.push(key.into());
            out.extend(pieces);
            kept = g.after;
        }
        if !changed {
            return Ok(None);
        }
        if kept < end {
            out.push(data.slice(kept..end));
            len += (end - kept) as u64;
        }
        Ok(Some((out, len)))
    }

    /// The copy of a TensorProto (`g`'s contents): its external data read and placed,
    /// or its inline payload moved to the data file; `None` when it stays as it is.
    fn tensor(&mut self, g: &Field, movable: bool, at: &[&'static str]) -> Result<Copied> {
        let data = self.data;
        let (mut location, mut raw) = (0, None);
        for f in wire::iter(data, g.start, g.end, "TensorProto") {
            let f = f?;
            match (f.number, f.wire_type) {
                (14, 0) => location = f.value,
                (9, 2) => raw = Some(data.slice(f.start..f.end)),
                _ => {}
            }
        }
        let path = at.join(".");
        let (payload, entries) = if location == 1 {
            let p: TensorProto = decode_bounded(data, g, &path, self.limits)?;
            let (_, bytes) = self
                .external
                .check(&p, &path, g.offset as u64, self.limits)?;
            let bytes = bytes.ok_or_else(|| {
                OnnxError::Write(format!("{path}: the external data was not read"))
            })?;
            self.read += 1;
            // Keys besides where the data is (a checksum of the same bytes) stay.
            let kept: Vec<StringStringEntryProto> = p
                .external_data
                .into_iter()
                .filter(|e| {
                    !matches!(
                        e.key.as_str(),
                        "location" | "offset" | "length" | "basepath"
                    )
                })
                .collect();
            (bytes, kept)
        } else {
            match (&self.place, raw) {
                (Place::Beside(_), Some(r)) if movable && r.len() >= EXTERNAL_MIN_BYTES => {
                    (r, Vec::new())
                }
                _ => return Ok(None),
            }
        };
        // The tensor's other fields, as they are.
        let mut head = Vec::new();
        for f in wire::iter(data, g.start, g.end, "TensorProto") {
            let f = f?;
            if !matches!(f.number, 9 | 13 | 14) {
                head.extend_from_slice(&data[f.offset..f.after]);
            }
        }
        let beside = match &self.place {
            // A sparse tensor's part that was external goes to the data file too
            // (inside, it would be moved where ONNX's helper never moves one).
            Place::Beside(loc) if movable || location == 1 => Some(loc.clone()),
            Place::Beside(_) => None,
            Place::Inside => None,
        };
        match beside {
            None => {
                put_varint(&mut head, (9 << 3) | 2);
                put_varint(&mut head, payload.len() as u64);
                let n = head.len() as u64 + payload.len() as u64;
                Ok(Some((vec![head.into(), payload], n)))
            }
            Some(loc) => {
                let offset = self.data_len.div_ceil(EXTERNAL_ALIGN) * EXTERNAL_ALIGN;
                self.data_len = offset + payload.len() as u64;
                let n = payload.len();
                self.payloads.push((offset, payload));
                let mut entries_out = vec![
                    entry("location", loc),
                    entry("offset", offset.to_string()),
                    entry("length", n.to_string()),
                ];
                entries_out.extend(entries);
                for e in &entries_out {
                    let bytes = prost::Message::encode_to_vec(e);
                    put_varint(&mut head, (13 << 3) | 2);
                    put_varint(&mut head, bytes.len() as u64);
                    head.extend_from_slice(&bytes);
                }
                put_varint(&mut head, 14 << 3);
                put_varint(&mut head, 1);
                let n = head.len() as u64;
                Ok(Some((vec![head.into()], n)))
            }
        }
    }
}

fn entry(key: &str, value: String) -> StringStringEntryProto {
    StringStringEntryProto {
        key: key.into(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
        StringStringEntryProto as E,
    };
    use prost::Message;

    fn f32s(v: &[f32]) -> Bytes {
        v.iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>()
            .into()
    }

    fn ext(name: &str, n: usize, offset: usize) -> TensorProto {
        TensorProto {
            name: name.into(),
            dims: vec![n as i64],
            data_type: 1,
            data_location: 1,
            external_data: vec![
                E {
                    key: "location".into(),
                    value: "src.bin".into(),
                },
                E {
                    key: "offset".into(),
                    value: offset.to_string(),
                },
                E {
                    key: "length".into(),
                    value: (4 * n).to_string(),
                },
                E {
                    key: "checksum".into(),
                    value: "abc".into(),
                },
            ],
            ..Default::default()
        }
    }

    /// A model whose data lies everywhere ONNX puts it: an external initializer, a
    /// large and a small inline one, a Constant's external tensor, a sparse
    /// initializer with external values, an If branch's external initializer, and a
    /// field tensorfmt does not know (99) at the top and in a moved tensor.
    fn source(dir: &Path) -> Bytes {
        let a: Vec<f32> = (0..300).map(|i| i as f32).collect();
        let mut file = f32s(&a).to_vec();
        file.extend(f32s(&[7.0, 8.0]));
        file.extend(f32s(&(0..400).map(|i| -(i as f32)).collect::<Vec<_>>()));
        std::fs::write(dir.join("src.bin"), &file).unwrap();
        let big = TensorProto {
            name: "big".into(),
            dims: vec![500],
            data_type: 1,
            raw_data: f32s(&vec![0.25; 500]),
            ..Default::default()
        };
        let small = TensorProto {
            name: "small".into(),
            dims: vec![1],
            data_type: 1,
            raw_data: f32s(&[3.0]),
            ..Default::default()
        };
        let constant = NodeProto {
            op_type: "Constant".into(),
            output: vec!["k".into()],
            attribute: vec![AttributeProto {
                name: "value".into(),
                r#type: 4,
                t: Some(ext("kval", 400, 1208)),
                ..Default::default()
            }],
            ..Default::default()
        };
        let then = GraphProto {
            name: "then".into(),
            initializer: vec![ext("branch", 300, 0)],
            ..Default::default()
        };
        let branch = NodeProto {
            op_type: "If".into(),
            input: vec!["c".into()],
            output: vec!["o".into()],
            attribute: vec![AttributeProto {
                name: "then_branch".into(),
                r#type: 5,
                g: Some(then),
                ..Default::default()
            }],
            ..Default::default()
        };
        let sparse = SparseTensorProto {
            values: Some(TensorProto {
                name: "sp".into(),
                dims: vec![2],
                data_type: 1,
                raw_data: f32s(&[7.0, 8.0]),
                ..Default::default()
            }),
            indices: Some(TensorProto {
                name: "sp_i".into(),
                dims: vec![2],
                data_type: 7,
                int64_data: vec![1, 3],
                ..Default::default()
            }),
            dims: vec![5],
        };
        let m = ModelProto {
            ir_version: 8,
            graph: Some(GraphProto {
                name: "g".into(),
                node: vec![constant, branch],
                initializer: vec![ext("a", 300, 0), big, small],
                sparse_initializer: vec![sparse],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut bytes = m.encode_to_vec();
        put_varint(&mut bytes, 99 << 3); // an unknown varint field 99
        bytes.push(42);
        bytes.into()
    }

    fn values(m: &crate::ModelFile) -> Vec<(String, Vec<f32>)> {
        m.initializers
            .iter()
            .map(|(n, t)| (n.clone(), t.to_vec::<f32>().unwrap()))
            .chain(m.sparse.iter().map(|s| {
                (
                    s.name.clone(),
                    s.to_dense().unwrap().to_vec::<f32>().unwrap(),
                )
            }))
            .collect()
    }

    /// [`copy_model`] with default limits and write options.
    fn copy(src: Bytes, dir: &Path, out: &Path, external: ExternalData) -> Result<CopyReport> {
        copy_model(
            src,
            dir,
            out,
            external,
            &Limits::default(),
            &Default::default(),
        )
    }

    fn unknown_kept(bytes: &[u8]) -> bool {
        wire::iter(bytes, 0, bytes.len(), "m").any(|f| f.is_ok_and(|f| f.number == 99))
    }

    #[test]
    fn a_model_with_external_data_becomes_one_file_with_everything() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let before =
            crate::read_model_file_at(src.clone(), &Default::default(), dir.path()).unwrap();
        let out = dir.path().join("out/copy.onnx");
        std::fs::create_dir(dir.path().join("out")).unwrap();
        let r = copy(src.clone(), dir.path(), &out, ExternalData::WhenNeeded).unwrap();
        assert_eq!(
            (r.external_read, r.external_written, r.data_file),
            (3, 0, None)
        );
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(r.model_bytes, bytes.len() as u64);
        assert!(unknown_kept(&bytes));
        let back = crate::read_model_file(bytes.clone().into(), &Default::default()).unwrap();
        assert!(back.external_files.is_empty());
        assert_eq!(values(&back), values(&before));
        // Every node, attribute and name is the source's; the data is inline.
        let (m, orig) = (
            ModelProto::decode(bytes.as_slice()).unwrap(),
            ModelProto::decode(src).unwrap(),
        );
        let (g, og) = (m.graph.unwrap(), orig.graph.unwrap());
        assert_eq!(g.node.len(), og.node.len());
        let k = g.node[0].attribute[0].t.as_ref().unwrap();
        assert_eq!((k.data_location, k.raw_data.len()), (0, 1600));
        let b = &g.node[1].attribute[0].g.as_ref().unwrap().initializer[0];
        assert_eq!((b.name.as_str(), b.raw_data.len()), ("branch", 1200));
        assert_eq!(g.initializer[1], og.initializer[1]);
    }

    #[test]
    fn asked_for_a_data_file_the_payloads_move_beside_the_copy() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let before =
            crate::read_model_file_at(src.clone(), &Default::default(), dir.path()).unwrap();
        let out = dir.path().join("copy.onnx");
        let r = copy(src, dir.path(), &out, ExternalData::Always).unwrap();
        // a, big, kval, branch; not the sparse values (ONNX's helper leaves them).
        assert_eq!((r.external_read, r.external_written), (3, 4));
        assert_eq!(
            r.data_file.as_deref(),
            Some(dir.path().join("copy.onnx.data").as_path())
        );
        let bytes = std::fs::read(&out).unwrap();
        assert!(unknown_kept(&bytes));
        let back = crate::read_model_file_at(bytes.clone().into(), &Default::default(), dir.path())
            .unwrap();
        assert_eq!(back.external_files, ["copy.onnx.data"]);
        assert_eq!(values(&back), values(&before));
        let g = ModelProto::decode(bytes.as_slice()).unwrap().graph.unwrap();
        let a = &g.initializer[0];
        assert!(a.raw_data.is_empty() && a.data_location == 1);
        assert!(a
            .external_data
            .iter()
            .any(|e| e.key == "checksum" && e.value == "abc"));
        assert_eq!(
            g.initializer[2].raw_data.len(),
            4,
            "a small payload stays inside"
        );
        // The source's files are untouched.
        assert_eq!(
            std::fs::metadata(dir.path().join("src.bin")).unwrap().len(),
            1200 + 8 + 1600
        );
    }

    #[test]
    fn a_model_without_external_data_is_its_own_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let once = dir.path().join("once.onnx");
        copy(src, dir.path(), &once, ExternalData::WhenNeeded).unwrap();
        let bytes: Bytes = std::fs::read(&once).unwrap().into();
        let twice = dir.path().join("twice.onnx");
        let r = copy(bytes.clone(), dir.path(), &twice, ExternalData::WhenNeeded).unwrap();
        assert_eq!(r.external_read, 0);
        assert_eq!(std::fs::read(&twice).unwrap(), bytes.as_ref());
    }

    #[test]
    fn missing_or_short_external_data_is_an_error_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let out = dir.path().join("copy.onnx");
        std::fs::write(dir.path().join("src.bin"), [0u8; 100]).unwrap();
        let e = copy(src.clone(), dir.path(), &out, ExternalData::Always).unwrap_err();
        assert!(e.to_string().contains("beyond the end"), "{e}");
        std::fs::remove_file(dir.path().join("src.bin")).unwrap();
        let e = copy(src, dir.path(), &out, ExternalData::WhenNeeded).unwrap_err();
        assert!(e.to_string().contains("src.bin"), "{e}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
