//! A caffemodel's layer parameters (everything but the blobs) as Caffe's V2
//! `LayerParameter`, decoded with the builtin schema (`proto/caffe.proto`, the
//! descriptor set of [`Schema::builtin`]) into a plain value tree: what `caffe_pb2`
//! shows of a layer (`convolution_param.stride`, `batch_norm_param.eps`, ...).
//!
//! V1 layers (and V0 layers, through V1) are upgraded as Caffe's `UpgradeNetAsNeeded`
//! does, so every version reads as V2 (`layers[i].convolution_param` of a V1 file is
//! `convolution_param` here too). Field lists, defaults and types come from the
//! schema ([`message_fields`]), never from hand-written lists. A V2 layer's field
//! numbers that Caffe's forks give different meanings (SSD's and OpenCV's
//! DetectionOutput field 10, DeepLab's `interp_param` 143, ...) are first renumbered
//! into the builtin schema's by the fork the layer and the net point to
//! ([`crate::forks`]); a layer where that cannot be told is an error of that layer.
//!
//! ```
//! use tensorfmt_caffe::{layer_params, read_model, ParamValue};
//! let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe/v2_tiny.caffemodel");
//! let model = read_model(std::fs::read(path)?.into())?;
//! let params = layer_params(&model);
//! let conv1 = params[0].as_ref().unwrap().as_ref().unwrap();
//! assert_eq!(conv1.type_name, "caffe.LayerParameter");
//! assert_eq!(conv1.get("name"), Some(&ParamValue::Str("conv1".into())));
//! // A field the file does not set reads as the schema's default.
//! let group = tensorfmt_caffe::message_fields("caffe.ConvolutionParameter").unwrap()
//!     .into_iter().find(|f| f.name == "group").unwrap();
//! assert_eq!(group.default, ParamValue::UInt(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use prost::Message as _;
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value};

use crate::error::{CaffeError, Result};
use crate::proto::V1LayerParameter;
use crate::prototxt::Schema;
use crate::raw::{Model, NetVersion, Piece, RawLayer};

/// A field's value: scalars as their widest Rust type (an enum as its number, as
/// `caffe_pb2` gives it), a nested message, or a repeated field's list.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// `bool`.
    Bool(bool),
    /// `int32`, `int64` and their signed / fixed variants.
    Int(i64),
    /// `uint32`, `uint64` and `fixed32` / `fixed64`.
    UInt(u64),
    /// `float` (widened exactly) and `double`.
    Float(f64),
    /// `string` (invalid UTF-8 is refused by the decoder).
    Str(String),
    /// `bytes`.
    Bytes(Vec<u8>),
    /// An enum field's number.
    Enum(i32),
    /// A nested message.
    Message(ParamMessage),
    /// A repeated field.
    List(Vec<ParamValue>),
}

/// A message's set fields, in field-number order.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamMessage {
    /// The message's full name (`caffe.LayerParameter`, `caffe.ConvolutionParameter`).
    pub type_name: String,
    /// The fields present in the file (a repeated field: when not empty).
    pub fields: Vec<(String, ParamValue)>,
}

impl ParamMessage {
    /// The value of field `name`, when the file sets it.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// One field of a message type, from the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    /// The field's name.
    pub name: String,
    /// Whether it is repeated.
    pub repeated: bool,
    /// The value read when the file does not set it: the schema's `[default = ...]`
    /// or the type's zero; an empty list for a repeated field; an empty message of
    /// its type for a message field.
    pub default: ParamValue,
    /// A message field's type name.
    pub message_type: Option<String>,
}

/// The fields of message type `type_name` (`caffe.ConvolutionParameter`, or without
/// the package: `ConvolutionParameter`) in the builtin schema; `None` for a type it
/// does not define.
///
/// ```
/// let fields = tensorfmt_caffe::message_fields("BatchNormParameter").unwrap();
/// let eps = fields.iter().find(|f| f.name == "eps").unwrap();
/// assert_eq!(eps.default, tensorfmt_caffe::ParamValue::Float(1e-5f32 as f64));
/// ```
pub fn message_fields(type_name: &str) -> Option<Vec<FieldSpec>> {
    let desc = descriptor(type_name)?;
    Some(
        desc.fields()
            .map(|f| {
                let message_type = match f.kind() {
                    Kind::Message(m) => Some(m.full_name().to_string()),
                    _ => None,
                };
                let default = match (&message_type, f.is_list()) {
                    (_, true) => ParamValue::List(Vec::new()),
                    (Some(t), false) => ParamValue::Message(ParamMessage {
                        type_name: t.clone(),
                        fields: Vec::new(),
                    }),
                    (None, false) => value(&f.default_value()),
                };
                FieldSpec {
                    name: f.name().to_string(),
                    repeated: f.is_list(),
                    default,
                    message_type,
                }
            })
            .collect(),
    )
}

fn descriptor(type_name: &str) -> Option<MessageDescriptor> {
    let pool = Schema::builtin().net_descriptor().parent_pool();
    pool.get_message_by_name(type_name).or_else(|| {
        if type_name.contains('.') {
            None
        } else {
            pool.get_message_by_name(&format!("caffe.{type_name}"))
        }
    })
}

/// The bytes of layer parameters (blobs left out) decoded for one model, in all. A
/// decoded field costs tens of bytes per encoded byte (a packed repeated field of
/// one-byte numbers), so hostile files are cut off here; real nets hold a few hundred
/// bytes per layer (ResNet-152: about 100 KiB in all). A layer beyond the bound gets
/// a [`CaffeError::Limit`] error of its own.
pub const MAX_PARAM_BYTES: usize = 16 << 20;

/// Every layer's parameters as a V2 `LayerParameter` without its blobs, in the order of
/// [`Model::layers`]: V2 layers as stored, V1 layers upgraded (`UpgradeV1LayerParameter`
/// after `UpgradeNetDataTransformation`), V0 layers through V1 (`UpgradeV0Net`; a V0
/// `padding` layer, folded into the layer it feeds, is `None`). A layer whose fields do
/// not decode is an error of that layer only.
pub fn layer_params(model: &Model) -> Vec<Option<Result<ParamMessage>>> {
    let mut out: Vec<Option<Result<ParamMessage>>> =
        (0..model.layers.len()).map(|_| None).collect();
    let mut v0 = Vec::new();
    // The forks the net's V2 layers point to (within the same byte bound), for field
    // numbers forks give different meanings (`forks.rs`).
    let mut seen = 0usize;
    let evidence = crate::forks::net_forks(
        model
            .layers
            .iter()
            .filter(|l| l.version == NetVersion::V2)
            .take_while(|l| {
                seen = seen.saturating_add(l.param_len());
                seen <= MAX_PARAM_BYTES
            })
            .map(|l| (l.type_name.as_str(), l.param_bytes(model.file_bytes()))),
    );
    let mut budget = MAX_PARAM_BYTES;
    for (i, layer) in model.layers.iter().enumerate() {
        let len = layer.param_len();
        if len > budget {
            out[i] = Some(Err(CaffeError::Limit {
                path: format!("layer[{i}] {:?}", layer.name),
                offset: layer.offset,
                what: "parameter bytes",
                value: (MAX_PARAM_BYTES - budget + len) as u64,
                limit: MAX_PARAM_BYTES as u64,
            }));
            continue;
        }
        budget -= len;
        out[i] = match layer.version {
            NetVersion::V2 => Some(
                crate::forks::canonical_layer(
                    &layer.param_bytes(model.file_bytes()),
                    &layer.type_name,
                    &evidence,
                    &format!("layer[{i}]"),
                )
                .and_then(|bytes| decode_v2(&bytes, i)),
            ),
            NetVersion::V1 => Some(model.v1_layer_parameter(i).and_then(|mut v1| {
                crate::upgrade::upgrade_data_transform(&mut v1);
                let l = crate::upgrade::v1_to_v2(v1, i)?;
                decode_v2(&l.encode_to_vec(), i)
            })),
            NetVersion::V0 => match v0_connection(model, layer, i) {
                // Upgraded together below: padding layers fold into their consumer.
                Ok(conn) => {
                    v0.push((conn, i));
                    None
                }
                Err(e) => Some(Err(e)),
            },
        };
    }
    if !v0.is_empty() {
        let indices: Vec<usize> = v0.iter().map(|(_, i)| *i).collect();
        let mut warnings = Vec::new();
        // A caffemodel need not list the net's inputs: a blob no earlier layer
        // produces is one.
        let mut inputs = model.net_parameter().map(|n| n.input).unwrap_or_default();
        let mut produced = std::collections::HashSet::new();
        for (conn, _) in &v0 {
            for b in &conn.bottom {
                if !produced.contains(b) && !inputs.contains(b) {
                    inputs.push(b.clone());
                }
            }
            produced.extend(conn.top.iter().cloned());
        }
        match crate::upgrade::v0_to_v1(v0, &inputs, &mut warnings) {
            Ok(upgraded) => {
                // The "line" of each upgraded layer is its index in `model.layers`.
                for (mut v1, i) in upgraded {
                    crate::upgrade::upgrade_data_transform(&mut v1);
                    out[i] = Some(
                        crate::upgrade::v1_to_v2(v1, i)
                            .and_then(|l| decode_v2(&l.encode_to_vec(), i)),
                    );
                }
            }
            Err(e) => {
                let why = e.to_string();
                for i in indices {
                    out[i] = Some(Err(CaffeError::Net {
                        line: 0,
                        message: format!("layer[{i}]: the V0 net does not upgrade: {why}"),
                    }));
                }
            }
        }
    }
    out
}

impl RawLayer {
    /// The bytes of the layer's fields other than blobs (nested V0 fields included).
    fn param_len(&self) -> usize {
        fn len(pieces: &[Piece]) -> usize {
            pieces
                .iter()
                .map(|p| match p {
                    Piece::Raw { range, .. } => range.len(),
                    Piece::Blob { .. } => 0,
                    Piece::Nested { pieces, .. } => len(pieces) + 10,
                })
                .sum()
        }
        len(&self.pieces)
    }
}

/// A V0 layer's outer V1 fields with its nested V0 `layer`, blobs left out.
fn v0_connection(model: &Model, layer: &RawLayer, index: usize) -> Result<V1LayerParameter> {
    fn emit(pieces: &[Piece], file: &[u8], out: &mut Vec<u8>) {
        for p in pieces {
            match p {
                Piece::Raw { range, .. } => out.extend_from_slice(&file[range.clone()]),
                Piece::Blob { .. } => {}
                Piece::Nested { field, pieces } => {
                    let mut inner = Vec::new();
                    emit(pieces, file, &mut inner);
                    prost::encoding::encode_key(
                        *field,
                        prost::encoding::WireType::LengthDelimited,
                        out,
                    );
                    prost::encoding::encode_varint(inner.len() as u64, out);
                    out.extend_from_slice(&inner);
                }
            }
        }
    }
    let mut bytes = Vec::new();
    emit(&layer.pieces, model.file_bytes(), &mut bytes);
    V1LayerParameter::decode(bytes.as_slice()).map_err(|source| CaffeError::Prost {
        path: format!("layers[{index}]"),
        source,
    })
}

/// A V2 LayerParameter's bytes (blobs left out) as a value tree.
fn decode_v2(bytes: &[u8], index: usize) -> Result<ParamMessage> {
    let desc = descriptor("caffe.LayerParameter").ok_or_else(|| CaffeError::Net {
        line: 0,
        message: "the builtin schema has no caffe.LayerParameter".into(),
    })?;
    let m = DynamicMessage::decode(desc, bytes).map_err(|source| CaffeError::Prost {
        path: format!("layer[{index}]"),
        source,
    })?;
    Ok(message(&m))
}

fn message(m: &DynamicMessage) -> ParamMessage {
    ParamMessage {
        type_name: m.descriptor().full_name().to_string(),
        fields: m
            .fields()
            .filter(|(f, _)| f.name() != "blobs")
            .map(|(f, v)| (f.name().to_string(), value(v)))
            .collect(),
    }
}

fn value(v: &Value) -> ParamValue {
    match v {
        Value::Bool(b) => ParamValue::Bool(*b),
        Value::I32(x) => ParamValue::Int(*x as i64),
        Value::I64(x) => ParamValue::Int(*x),
        Value::U32(x) => ParamValue::UInt(*x as u64),
        Value::U64(x) => ParamValue::UInt(*x),
        Value::F32(x) => ParamValue::Float(*x as f64),
        Value::F64(x) => ParamValue::Float(*x),
        Value::String(s) => ParamValue::Str(s.clone()),
        Value::Bytes(b) => ParamValue::Bytes(b.to_vec()),
        Value::EnumNumber(n) => ParamValue::Enum(*n),
        Value::Message(m) => ParamValue::Message(message(m)),
        Value::List(items) => ParamValue::List(items.iter().map(value).collect()),
        // caffe.proto has no map fields.
        Value::Map(_) => ParamValue::List(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus_or_testdata(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/caffe")
            .join(name)
    }

    #[test]
    fn every_testdata_model_version_reads_as_v2_parameters() {
        for name in [
            "v2_tiny.caffemodel",
            "v1_legacy.caffemodel",
            "v0_net.caffemodel",
        ] {
            let data = std::fs::read(corpus_or_testdata(name)).unwrap();
            let model = crate::read_model(data.into()).unwrap();
            let params = layer_params(&model);
            assert_eq!(params.len(), model.layers.len());
            for (layer, p) in model.layers.iter().zip(&params) {
                let Some(p) = p else { continue };
                let p = p.as_ref().unwrap();
                assert_eq!(p.type_name, "caffe.LayerParameter", "{name}");
                assert_eq!(
                    p.get("name"),
                    Some(&ParamValue::Str(layer.name.clone())),
                    "{name}"
                );
                assert!(p.get("blobs").is_none());
            }
        }
    }

    #[test]
    fn parameters_beyond_the_bound_are_an_error_of_their_layers() {
        // Two layers whose `bottom` lists hold 9 MiB each: the second is over the bound.
        let mut net = crate::proto::NetParameter::default();
        for name in ["a", "b"] {
            net.layer.push(crate::proto::LayerParameter {
                name: Some(name.into()),
                r#type: Some("ReLU".into()),
                bottom: vec!["x".repeat(9 << 20)],
                ..Default::default()
            });
        }
        let model = crate::read_model(net.encode_to_vec().into()).unwrap();
        let params = layer_params(&model);
        assert!(params[0].as_ref().unwrap().is_ok());
        let err = params[1]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(err.contains("parameter bytes"), "{err}");
    }

    #[test]
    fn fields_come_from_the_schema() {
        let conv = message_fields("caffe.ConvolutionParameter").unwrap();
        let get = |n: &str| conv.iter().find(|f| f.name == n).unwrap().clone();
        assert_eq!(get("bias_term").default, ParamValue::Bool(true));
        assert!(get("stride").repeated);
        assert_eq!(
            get("weight_filler").message_type.as_deref(),
            Some("caffe.FillerParameter")
        );
        assert!(message_fields("NoSuchMessage").is_none());
    }
}
