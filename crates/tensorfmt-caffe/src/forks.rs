//! Fork numberings: which field numbers Caffe's forks give which meanings, and how a
//! caffemodel's layer parameters are decoded when a number means different things in
//! different forks.
//!
//! The builtin schema (`proto/caffe.proto`) gives every field one *canonical* number:
//! the number of the fork that defined it, or an *alias* (1000 + the fork's number)
//! where another field holds that number. Prototxts name their fields, so they need
//! nothing more. A caffemodel carries numbers: [`FORK_FIELDS`] lists, per message and
//! number, every meaning a known fork gives it (canonical meanings included), and
//! `canonical_layer` rewrites one layer's bytes into the builtin numbering before
//! they are decoded:
//!
//! 1. a `LayerParameter` number with several meanings is resolved by the layer's type
//!    (`147` is `swish_param` on a `Swish` layer, OpenCV's `detection_output_param` on
//!    a `DetectionOutput`, gklz1982's `reorg_param` on a `Reorg`); where one type has
//!    several meanings (`204` on a `DetectionOutput`: SSD's parameters or the YOLO
//!    ports'), by the forks the rest of the net points to (step 3), else the builtin
//!    field;
//! 2. inside a parameter message, by the fork its enclosing field was resolved to
//!    (`DetectionOutputParameter` field 10 is weiliu89's `visualize` under field 204,
//!    OpenCV's `normalized_bbox` under OpenCV's 147);
//! 3. otherwise by the forks the rest of the net points to (`net_forks`: the forks,
//!    BVLC aside, that the net's layers were resolved to by their types): PoolingParameter
//!    13 is OpenCV's `ceil_mode` in a net with OpenCV-numbered layers, BVLC's
//!    `round_mode` otherwise;
//! 4. a number still left with several meanings is [`CaffeError::AmbiguousField`]
//!    ("cannot tell"), and one whose only meaning is another fork's (not the canonical
//!    one), with nothing pointing to that fork, stays an unknown field.
//!
//! A field whose wire type does not fit the field it resolves to is an unknown field,
//! as protobuf's C++ parser (Caffe's) treats it: left out, never a decoding error.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::error::{CaffeError, Result};
use crate::wire::{put_key, put_varint, Cursor, FIXED32, FIXED64, LEN, MAX_DEPTH, VARINT};

/// BVLC Caffe: the base every fork shares (its numbers tell nothing about the fork).
pub const BVLC: &str = "BVLC Caffe";
/// weiliu89/caffe, branch ssd.
pub const SSD: &str = "weiliu89/caffe@ssd";
/// OpenCV's modules/dnn/src/caffe/opencv-caffe.proto.
pub const OPENCV: &str = "OpenCV's opencv-caffe.proto";
/// rbgirshick/caffe-fast-rcnn (py-faster-rcnn).
pub const FASTER_RCNN: &str = "rbgirshick/caffe-fast-rcnn";
/// daijifeng001/caffe-rfcn (R-FCN).
pub const RFCN: &str = "daijifeng001/caffe-rfcn";
/// DeepLab (deeplab-public-ver2) and hszhao/PSPNet.
pub const DEEPLAB: &str = "DeepLab / hszhao/PSPNet";
/// hszhao/PSPNet's own numbers beyond DeepLab's (`bn_param` 152).
pub const PSPNET: &str = "hszhao/PSPNet";
/// alexgkendall/caffe-segnet (`bn_param` 45, `upsample_param` 137).
pub const SEGNET: &str = "alexgkendall/caffe-segnet";
/// TimoSaemann/caffe-enet (`bn_param` 45, `upsample_param` 147).
pub const ENET: &str = "TimoSaemann/caffe-enet";
/// farmingyard/ShuffleNet.
pub const SHUFFLENET: &str = "farmingyard/ShuffleNet";
/// gklz1982/caffe-yolov2 and its fork BirdeeChen/caffe_yolo_v2, which keeps its
/// numbering (`reorg_param` 147, `region_loss_param` 202, YOLO's
/// `detection_output_param` 204) and adds `region_param` 148.
pub const YOLO_GKLZ: &str = "gklz1982/caffe-yolov2, BirdeeChen/caffe_yolo_v2";
/// choasup/caffe-yolo9000.
pub const YOLO_CHOASUP: &str = "choasup/caffe-yolo9000";
/// The YOLOv2 ports numbered as the builtin schema numbers `reorg_param` (Intel Caffe)
/// and `region_param` (the port Ewenwan/MVision documents).
pub const YOLO: &str = "YOLOv2 ports (Intel Caffe, MVision)";

/// One meaning a fork gives a field number of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForkField {
    /// The fork (one of the constants of this module).
    pub fork: &'static str,
    /// The message, without the package (`LayerParameter`).
    pub message: &'static str,
    /// The number the fork gives the field.
    pub number: u32,
    /// The field's name in the builtin schema.
    pub field: &'static str,
    /// For `LayerParameter` fields: the layer types the parameter belongs to.
    pub layer_types: &'static [&'static str],
}

const fn f(
    fork: &'static str,
    message: &'static str,
    number: u32,
    field: &'static str,
    layer_types: &'static [&'static str],
) -> ForkField {
    ForkField {
        fork,
        message,
        number,
        field,
        layer_types,
    }
}

const LP: &str = "LayerParameter";
const DOP: &str = "DetectionOutputParameter";
const BNP: &str = "BNParameter";

/// Every meaning a known fork gives a contested field number, and every fork field of
/// `LayerParameter` (canonical or not): the data `canonical_layer` resolves numbers
/// with. docs/caffe-layers.md lists the same collisions (a test checks it).
///
/// ```
/// use tensorfmt_caffe::forks::{FORK_FIELDS, OPENCV, SSD};
/// let field_10: Vec<_> = FORK_FIELDS.iter()
///     .filter(|e| e.message == "DetectionOutputParameter" && e.number == 10)
///     .map(|e| (e.fork, e.field))
///     .collect();
/// assert_eq!(field_10, [(SSD, "visualize"), (OPENCV, "normalized_bbox")]);
/// ```
pub const FORK_FIELDS: &[ForkField] = &[
    f(SEGNET, LP, 45, "bn_param", &["BN"]),
    f(ENET, LP, 45, "bn_param", &["BN"]),
    f(BVLC, LP, 137, "embed_param", &["Embed"]),
    f(SEGNET, LP, 137, "upsample_param", &["Upsample"]),
    f(BVLC, LP, 143, "input_param", &["Input"]),
    f(DEEPLAB, LP, 143, "interp_param", &["Interp"]),
    f(BVLC, LP, 147, "swish_param", &["Swish"]),
    f(
        OPENCV,
        LP,
        147,
        "detection_output_param",
        &["DetectionOutput"],
    ),
    f(YOLO_GKLZ, LP, 147, "reorg_param", &["Reorg"]),
    f(ENET, LP, 147, "upsample_param", &["Upsample"]),
    f(BVLC, LP, 148, "clip_param", &["Clip"]),
    f(OPENCV, LP, 148, "permute_param", &["Permute"]),
    f(YOLO_GKLZ, LP, 148, "region_param", &["Region"]),
    f(YOLO, LP, 149, "region_param", &["Region"]),
    f(OPENCV, LP, 149, "norm_param", &["Normalize"]),
    f(
        OPENCV,
        LP,
        150,
        "prior_box_param",
        &["PriorBox", "PriorBoxClustered"],
    ),
    f(PSPNET, LP, 152, "bn_param", &["BN"]),
    f(YOLO, LP, 159, "reorg_param", &["Reorg"]),
    f(
        SHUFFLENET,
        LP,
        164,
        "shuffle_channel_param",
        &["ShuffleChannel"],
    ),
    f(SSD, LP, 200, "annotated_data_param", &["AnnotatedData"]),
    f(SSD, LP, 201, "multibox_loss_param", &["MultiBoxLoss"]),
    f(OPENCV, LP, 201, "proposal_param", &["Proposal"]),
    f(SSD, LP, 202, "permute_param", &["Permute"]),
    f(YOLO_GKLZ, LP, 202, "region_loss_param", &["RegionLoss"]),
    f(
        SSD,
        LP,
        203,
        "prior_box_param",
        &["PriorBox", "PriorBoxClustered"],
    ),
    f(SSD, LP, 204, "detection_output_param", &["DetectionOutput"]),
    // The YOLO ports' DetectionOutputParameter under the same number: the net decides.
    f(
        YOLO_GKLZ,
        LP,
        204,
        "detection_output_param",
        &["DetectionOutput"],
    ),
    f(
        SSD,
        LP,
        205,
        "detection_evaluate_param",
        &["DetectionEvaluate"],
    ),
    f(SSD, LP, 206, "norm_param", &["Normalize"]),
    f(SSD, LP, 207, "video_data_param", &["VideoData"]),
    f(YOLO_CHOASUP, LP, 302, "region_loss_param", &["RegionLoss"]),
    f(YOLO_CHOASUP, LP, 303, "reorg_param", &["Reorg"]),
    f(
        RFCN,
        LP,
        10000,
        "box_annotator_ohem_param",
        &["BoxAnnotatorOHEM"],
    ),
    f(RFCN, LP, 10001, "psroi_pooling_param", &["PSROIPooling"]),
    f(OPENCV, LP, 10002, "psroi_pooling_param", &["PSROIPooling"]),
    f(
        FASTER_RCNN,
        LP,
        8266711,
        "roi_pooling_param",
        &["ROIPooling"],
    ),
    f(
        FASTER_RCNN,
        LP,
        8266712,
        "smooth_l1_loss_param",
        &["SmoothL1Loss"],
    ),
    f(SSD, DOP, 1, "num_classes", &[]),
    f(OPENCV, DOP, 1, "num_classes", &[]),
    f(YOLO_GKLZ, DOP, 1, "side", &[]),
    f(SSD, DOP, 2, "share_location", &[]),
    f(OPENCV, DOP, 2, "share_location", &[]),
    f(YOLO_GKLZ, DOP, 2, "classes", &[]),
    f(SSD, DOP, 3, "background_label_id", &[]),
    f(OPENCV, DOP, 3, "background_label_id", &[]),
    f(YOLO_GKLZ, DOP, 3, "num_box", &[]),
    f(SSD, DOP, 4, "nms_param", &[]),
    f(OPENCV, DOP, 4, "nms_param", &[]),
    f(YOLO_GKLZ, DOP, 4, "coords", &[]),
    f(SSD, DOP, 5, "save_output_param", &[]),
    f(OPENCV, DOP, 5, "save_output_param", &[]),
    f(YOLO_GKLZ, DOP, 5, "confidence_threshold", &[]),
    f(SSD, DOP, 6, "code_type", &[]),
    f(OPENCV, DOP, 6, "code_type", &[]),
    f(YOLO_GKLZ, DOP, 6, "nms_threshold", &[]),
    f(SSD, DOP, 7, "keep_top_k", &[]),
    f(OPENCV, DOP, 7, "keep_top_k", &[]),
    f(YOLO_GKLZ, DOP, 7, "biases", &[]),
    f(SSD, DOP, 8, "variance_encoded_in_target", &[]),
    f(OPENCV, DOP, 8, "variance_encoded_in_target", &[]),
    f(YOLO_GKLZ, DOP, 8, "label_map_file", &[]),
    f(SSD, "DetectionOutputParameter", 10, "visualize", &[]),
    f(
        OPENCV,
        "DetectionOutputParameter",
        10,
        "normalized_bbox",
        &[],
    ),
    f(SEGNET, BNP, 1, "scale_filler", &[]),
    f(ENET, BNP, 1, "scale_filler", &[]),
    f(PSPNET, BNP, 1, "slope_filler", &[]),
    f(SEGNET, BNP, 2, "shift_filler", &[]),
    f(ENET, BNP, 2, "shift_filler", &[]),
    f(PSPNET, BNP, 2, "bias_filler", &[]),
    f(SEGNET, BNP, 3, "bn_mode", &[]),
    f(ENET, BNP, 3, "bn_mode", &[]),
    f(PSPNET, BNP, 3, "momentum", &[]),
    f(BVLC, "PoolingParameter", 13, "round_mode", &[]),
    f(OPENCV, "PoolingParameter", 13, "ceil_mode", &[]),
    f(RFCN, "LossParameter", 4, "pre_fixed_normalizer", &[]),
];

/// What one field number of one message resolves to.
enum Resolved {
    /// Decode it as the builtin schema numbers it (no fork gives it another meaning).
    Keep,
    /// The builtin field this fork meaning names.
    Field(&'static ForkField),
    /// An unknown field (left out of the decoded message).
    Unknown,
}

fn is_canonical(e: &ForkField, msg: &MessageDescriptor) -> bool {
    msg.get_field_by_name(e.field)
        .is_some_and(|f| f.number() == e.number)
}

/// The meanings of `number` in `msg`.
fn meanings(msg: &MessageDescriptor, number: u32) -> Vec<&'static ForkField> {
    FORK_FIELDS
        .iter()
        .filter(|e| e.number == number && msg.name() == e.message)
        .collect()
}

/// Resolves `number` of `msg` (see the module documentation for the rules).
fn resolve(
    msg: &MessageDescriptor,
    number: u32,
    layer_type: &str,
    context: Option<&str>,
    evidence: &[&str],
) -> std::result::Result<Resolved, Vec<&'static ForkField>> {
    let cands = meanings(msg, number);
    if cands.is_empty() {
        return Ok(Resolved::Keep);
    }
    let pool: Vec<&'static ForkField> = if msg.name() == LP {
        let typed: Vec<_> = cands
            .iter()
            .copied()
            .filter(|e| e.layer_types.contains(&layer_type))
            .collect();
        if typed.len() == 1 {
            return Ok(Resolved::Field(typed[0]));
        }
        if typed.len() > 1 {
            typed
        } else {
            cands
        }
    } else {
        if let Some(e) = context.and_then(|c| cands.iter().find(|e| e.fork == c)) {
            return Ok(Resolved::Field(e));
        }
        cands
    };
    let by_evidence: Vec<_> = pool
        .iter()
        .copied()
        .filter(|e| evidence.contains(&e.fork))
        .collect();
    if by_evidence.len() == 1 {
        return Ok(Resolved::Field(by_evidence[0]));
    }
    // Forks that give one layer type's parameter the builtin number and name but their
    // own message (SSD's and the YOLO ports' `detection_output_param` 204): with nothing
    // pointing to either, the builtin field, its fields resolved on their own.
    if by_evidence.is_empty()
        && pool.len() > 1
        && pool
            .iter()
            .all(|e| e.field == pool[0].field && is_canonical(e, msg))
    {
        return Ok(Resolved::Keep);
    }
    let canonical: Vec<_> = pool
        .iter()
        .copied()
        .filter(|e| is_canonical(e, msg))
        .collect();
    match (by_evidence.len(), pool.len(), canonical.first()) {
        // One meaning: the builtin one, or another fork's that nothing points to.
        (0, 1, Some(e)) => Ok(Resolved::Field(e)),
        (0, 1, None) => Ok(Resolved::Unknown),
        // Inside a parameter message, with no fork pointed to: the builtin meaning.
        (0, _, Some(e)) if msg.name() != LP => Ok(Resolved::Field(e)),
        _ => Err(pool),
    }
}

/// The forks (BVLC aside) that a net's V2 layers point to: those whose `LayerParameter`
/// numbers the layers' types resolve to. `layers` gives each layer's type and its
/// `LayerParameter` bytes (blobs left out).
pub(crate) fn net_forks<'a>(layers: impl Iterator<Item = (&'a str, Vec<u8>)>) -> Vec<&'static str> {
    let lp = layer_descriptor();
    let mut out: Vec<&'static str> = Vec::new();
    for (kind, bytes) in layers {
        let mut c = Cursor::new(&bytes, 0, bytes.len());
        while let Ok(Some(k)) = c.key("layer") {
            if let Ok(Resolved::Field(e)) = resolve(&lp, k.field, kind, None, &[]) {
                if e.fork != BVLC && !out.contains(&e.fork) {
                    out.push(e.fork);
                }
            }
            if c.skip(k, "layer", 0).is_err() {
                break;
            }
        }
    }
    out
}

fn layer_descriptor() -> MessageDescriptor {
    crate::prototxt::Schema::builtin()
        .net_descriptor()
        .parent_pool()
        .get_message_by_name("caffe.LayerParameter")
        .expect("the builtin schema defines caffe.LayerParameter")
}

/// One V2 layer's `LayerParameter` bytes (blobs left out) rewritten into the builtin
/// numbering, by the rules of the module documentation; `evidence` is `net_forks` of
/// the whole net, `path` names the layer in errors.
pub(crate) fn canonical_layer(
    bytes: &[u8],
    layer_type: &str,
    evidence: &[&str],
    path: &str,
) -> Result<Vec<u8>> {
    let lp = layer_descriptor();
    let mut out = Vec::with_capacity(bytes.len());
    rewrite(bytes, &lp, layer_type, None, evidence, path, 0, &mut out)?;
    Ok(out)
}

/// Whether wire type `wire` can carry `field` (packed repeated scalars included).
fn fits(field: &FieldDescriptor, wire: u8) -> bool {
    let scalar = match field.kind() {
        Kind::Message(_) | Kind::String | Kind::Bytes => return wire == LEN,
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => FIXED64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => FIXED32,
        _ => VARINT,
    };
    wire == scalar || (wire == LEN && field.is_list())
}

#[allow(clippy::too_many_arguments)]
fn rewrite(
    bytes: &[u8],
    msg: &MessageDescriptor,
    layer_type: &str,
    context: Option<&'static str>,
    evidence: &[&str],
    path: &str,
    depth: u32,
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut c = Cursor::new(bytes, 0, bytes.len());
    while let Some(k) = c.key(path)? {
        let value_start = c.pos;
        c.skip(k, path, 0)?;
        let value = &bytes[value_start..c.pos];
        let (target, fork) = match resolve(msg, k.field, layer_type, context, evidence) {
            Ok(Resolved::Keep) => (msg.get_field(k.field), context),
            Ok(Resolved::Field(e)) => (msg.get_field_by_name(e.field), Some(e.fork)),
            Ok(Resolved::Unknown) => continue,
            Err(cands) => {
                return Err(CaffeError::AmbiguousField {
                    path: format!("{path}.{}", msg.name()),
                    offset: k.at as u64,
                    number: k.field,
                    layer_type: layer_type.to_string(),
                    candidates: cands
                        .iter()
                        .map(|e| format!("{} ({})", e.field, e.fork))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        };
        let Some(target) = target else {
            // Unknown to the builtin schema: kept as is (decoders skip it).
            out.extend_from_slice(&bytes[k.at..c.pos]);
            continue;
        };
        if !fits(&target, k.wire_type) {
            continue;
        }
        match target.kind() {
            Kind::Message(inner) if depth < MAX_DEPTH => {
                let mut body = Vec::with_capacity(value.len());
                let mut v = Cursor::new(value, 0, value.len());
                let r = v.len_delimited(path)?;
                let sub = format!("{path}.{}", target.name());
                rewrite(
                    &value[r],
                    &inner,
                    layer_type,
                    fork,
                    evidence,
                    &sub,
                    depth + 1,
                    &mut body,
                )?;
                put_key(out, target.number(), LEN);
                put_varint(out, body.len() as u64);
                out.extend_from_slice(&body);
            }
            _ => {
                put_key(out, target.number(), k.wire_type);
                out.extend_from_slice(value);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(name: &str) -> MessageDescriptor {
        crate::prototxt::Schema::builtin()
            .net_descriptor()
            .parent_pool()
            .get_message_by_name(&format!("caffe.{name}"))
            .unwrap()
    }

    #[test]
    fn every_fork_field_is_in_the_builtin_schema_and_every_taken_number_is_listed() {
        for e in FORK_FIELDS {
            let msg = message(e.message);
            let field = msg
                .get_field_by_name(e.field)
                .unwrap_or_else(|| panic!("{}.{} not builtin", e.message, e.field));
            // A number the builtin schema gives a field must list that field among its
            // meanings, or the rewriter would hand a fork's bytes to the wrong field.
            if let Some(taken) = msg.get_field(e.number) {
                assert!(
                    FORK_FIELDS.iter().any(|o| o.message == e.message
                        && o.number == e.number
                        && o.field == taken.name()),
                    "{}.{} ({}) = {} is builtin {} and not listed",
                    e.message,
                    e.field,
                    e.fork,
                    e.number,
                    taken.name()
                );
            }
            assert_eq!(e.layer_types.is_empty(), e.message != LP, "{e:?}");
            let _ = field;
        }
    }
}
