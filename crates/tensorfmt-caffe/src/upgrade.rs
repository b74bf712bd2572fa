//! The net-definition upgrades of Caffe's `UpgradeNetAsNeeded`
//! (BVLC/caffe `src/caffe/util/upgrade_proto.cpp`) and the layer filtering of
//! `Net::FilterNet` / `Net::StateMeetsRule` (`src/caffe/net.cpp`), on the typed structs.
//!
//! Order, as Caffe: V0 → V1 (padding layers folded, V0 fields into V1 parameters),
//! data-transform
//! upgrade of V1 data layers, V1 → V2 (`layers` with enum types → `layer` with type
//! strings), input fields → an `Input` layer in front, BatchNorm's 3-`param` form
//! (learning rates zeroed). Then the layers whose include/exclude rules reject the
//! net state (phase TEST for a deploy net) are dropped.

use crate::error::{CaffeError, Result};
use crate::proto::{
    self, LayerParameter, NetState, NetStateRule, ParamSpec, TransformationParameter,
    V1LayerParameter,
};

/// V1 `LayerType` numbers of the data layers whose transform fields move
/// (`UpgradeNetDataTransformation`): DATA, IMAGE_DATA, WINDOW_DATA.
const V1_DATA: i32 = 5;
const V1_IMAGE_DATA: i32 = 12;
const V1_WINDOW_DATA: i32 = 24;

/// Moves `scale`, `mean_file`, `crop_size` and `mirror` of a V1 data layer's own
/// parameter into `transform_param` (Caffe's `UpgradeNetDataTransformation`).
pub(crate) fn upgrade_data_transform(v1: &mut V1LayerParameter) {
    fn mv(
        t: &mut Option<TransformationParameter>,
        scale: &mut Option<f32>,
        mean_file: &mut Option<String>,
        crop_size: &mut Option<u32>,
        mirror: &mut Option<bool>,
    ) {
        if scale.is_none() && mean_file.is_none() && crop_size.is_none() && mirror.is_none() {
            return;
        }
        let t = t.get_or_insert_with(Default::default);
        if let Some(v) = scale.take() {
            t.scale = Some(v);
        }
        if let Some(v) = mean_file.take() {
            t.mean_file = Some(v);
        }
        if let Some(v) = crop_size.take() {
            t.crop_size = Some(v);
        }
        if let Some(v) = mirror.take() {
            t.mirror = Some(v);
        }
    }
    let t = &mut v1.transform_param;
    match v1.r#type {
        Some(V1_DATA) => {
            if let Some(p) = v1.data_param.as_mut() {
                mv(
                    t,
                    &mut p.scale,
                    &mut p.mean_file,
                    &mut p.crop_size,
                    &mut p.mirror,
                );
            }
        }
        Some(V1_IMAGE_DATA) => {
            if let Some(p) = v1.image_data_param.as_mut() {
                mv(
                    t,
                    &mut p.scale,
                    &mut p.mean_file,
                    &mut p.crop_size,
                    &mut p.mirror,
                );
            }
        }
        Some(V1_WINDOW_DATA) => {
            if let Some(p) = v1.window_data_param.as_mut() {
                mv(
                    t,
                    &mut p.scale,
                    &mut p.mean_file,
                    &mut p.crop_size,
                    &mut p.mirror,
                );
            }
        }
        _ => {}
    }
}

/// Caffe's `UpgradeV0Net` on the `layers` of a V0 net (each holding its V0 `layer`):
/// `padding` layers are folded into the conv/pool layer they feed
/// (`UpgradeV0PaddingLayers`), then each V0 layer becomes a V1 layer
/// (`UpgradeV0LayerParameter`). Parameters the layer type does not take are dropped
/// with a warning (Caffe logs them and continues). Returns the layers with their
/// original line numbers.
pub(crate) fn v0_to_v1(
    layers: Vec<(V1LayerParameter, usize)>,
    inputs: &[String],
    warnings: &mut Vec<String>,
) -> Result<Vec<(V1LayerParameter, usize)>> {
    use std::collections::HashMap;
    // Which layer last produced each blob (None: a net input).
    let mut last_top: HashMap<String, Option<usize>> =
        inputs.iter().map(|i| (i.clone(), None)).collect();
    let mut out: Vec<(V1LayerParameter, usize)> = Vec::with_capacity(layers.len());
    for i in 0..layers.len() {
        let (conn, line) = &layers[i];
        let line = *line;
        let v0 = conn.layer.clone().unwrap_or_default();
        let fail = |message: String| CaffeError::Net { line, message };
        if v0.r#type() != "padding" {
            out.push((conn.clone(), line));
        }
        for (j, b) in conn.bottom.iter().enumerate() {
            let src = *last_top.get(b).ok_or_else(|| {
                fail(format!("unknown blob input {b:?} to layer {:?}", v0.name()))
            })?;
            let Some(src) = src else { continue };
            let (source, _) = &layers[src];
            let sv0 = source.layer.clone().unwrap_or_default();
            if sv0.r#type() != "padding" {
                continue;
            }
            if !matches!(v0.r#type(), "conv" | "pool") {
                return Err(fail(format!(
                    "padding layer input to non-convolutional / non-pooling layer type {:?}",
                    v0.r#type()
                )));
            }
            if conn.bottom.len() != 1 || source.bottom.len() != 1 || source.top.len() != 1 {
                return Err(fail(
                    "a padding layer and the layer it feeds must each take a single blob".into(),
                ));
            }
            if let Some((last, _)) = out.last_mut() {
                if let Some(l) = last.layer.as_mut() {
                    l.pad = sv0.pad;
                }
                last.bottom[j] = source.bottom[0].clone();
            }
        }
        for t in &conn.top {
            last_top.insert(t.clone(), Some(i));
        }
    }
    out.into_iter()
        .map(|(conn, line)| Ok((v0_layer(conn, line, warnings)?, line)))
        .collect()
}

/// `UpgradeV0LayerParameter`: one V0 layer (inside its V1 connection) as a V1 layer.
fn v0_layer(
    conn: V1LayerParameter,
    line: usize,
    warnings: &mut Vec<String>,
) -> Result<V1LayerParameter> {
    let v0 = conn.layer.clone().unwrap_or_default();
    let ty = v0.r#type().to_string();
    let mut l = V1LayerParameter {
        bottom: conn.bottom,
        top: conn.top,
        name: v0.name.clone(),
        blobs: v0.blobs.clone(),
        blobs_lr: v0.blobs_lr.clone(),
        weight_decay: v0.weight_decay.clone(),
        ..Default::default()
    };
    if v0.r#type.is_some() {
        l.r#type = Some(
            crate::raw::v0_type_to_v1(&ty).ok_or_else(|| CaffeError::Net {
                line,
                message: format!("layer {:?}: unknown V0 layer type {ty:?}", v0.name()),
            })?,
        );
    }
    let mut unknown = |field: &str| {
        warnings.push(format!(
            "line {line}: V0 layer {:?}: parameter {field} does not apply to type {ty:?} (dropped, as Caffe does)",
            v0.name()
        ))
    };
    let conv = ty == "conv";
    let ip = ty == "innerproduct";
    let pool = ty == "pool";
    if let Some(v) = v0.num_output {
        if conv {
            l.convolution_param
                .get_or_insert_with(Default::default)
                .num_output = Some(v);
        } else if ip {
            l.inner_product_param
                .get_or_insert_with(Default::default)
                .num_output = Some(v);
        } else {
            unknown("num_output");
        }
    }
    if let Some(v) = v0.biasterm {
        if conv {
            l.convolution_param
                .get_or_insert_with(Default::default)
                .bias_term = Some(v);
        } else if ip {
            l.inner_product_param
                .get_or_insert_with(Default::default)
                .bias_term = Some(v);
        } else {
            unknown("biasterm");
        }
    }
    for (v, name, is_weight) in [
        (&v0.weight_filler, "weight_filler", true),
        (&v0.bias_filler, "bias_filler", false),
    ] {
        let Some(f) = v else { continue };
        if conv {
            let c = l.convolution_param.get_or_insert_with(Default::default);
            *(if is_weight {
                &mut c.weight_filler
            } else {
                &mut c.bias_filler
            }) = Some(f.clone());
        } else if ip {
            let c = l.inner_product_param.get_or_insert_with(Default::default);
            *(if is_weight {
                &mut c.weight_filler
            } else {
                &mut c.bias_filler
            }) = Some(f.clone());
        } else {
            unknown(name);
        }
    }
    for (v, name) in [
        (v0.pad, "pad"),
        (v0.kernelsize, "kernelsize"),
        (v0.stride, "stride"),
    ] {
        let Some(v) = v else { continue };
        if conv {
            let c = l.convolution_param.get_or_insert_with(Default::default);
            match name {
                "pad" => c.pad.push(v),
                "kernelsize" => c.kernel_size.push(v),
                _ => c.stride.push(v),
            }
        } else if pool {
            let p = l.pooling_param.get_or_insert_with(Default::default);
            match name {
                "pad" => p.pad = Some(v),
                "kernelsize" => p.kernel_size = Some(v),
                _ => p.stride = Some(v),
            }
        } else {
            unknown(name);
        }
    }
    if let Some(v) = v0.group {
        if conv {
            l.convolution_param
                .get_or_insert_with(Default::default)
                .group = Some(v);
        } else {
            unknown("group");
        }
    }
    if let Some(v) = v0.pool {
        if pool {
            // V0 MAX/AVE/STOCHASTIC = 0/1/2, as PoolingParameter's.
            l.pooling_param.get_or_insert_with(Default::default).pool = Some(v);
        } else {
            unknown("pool");
        }
    }
    if let Some(v) = v0.dropout_ratio {
        if ty == "dropout" {
            l.dropout_param
                .get_or_insert_with(Default::default)
                .dropout_ratio = Some(v);
        } else {
            unknown("dropout_ratio");
        }
    }
    for (v, name) in [
        (v0.local_size.map(|x| x as f32), "local_size"),
        (v0.alpha, "alpha"),
        (v0.beta, "beta"),
        (v0.k, "k"),
    ] {
        let Some(v) = v else { continue };
        if ty == "lrn" {
            let p = l.lrn_param.get_or_insert_with(Default::default);
            match name {
                "local_size" => p.local_size = v0.local_size,
                "alpha" => p.alpha = Some(v),
                "beta" => p.beta = Some(v),
                _ => p.k = Some(v),
            }
        } else {
            unknown(name);
        }
    }
    if v0.scale.is_some() || v0.meanfile.is_some() || v0.cropsize.is_some() || v0.mirror.is_some() {
        let t = l.transform_param.get_or_insert_with(Default::default);
        t.scale = v0.scale;
        t.mean_file = v0.meanfile.clone();
        t.crop_size = v0.cropsize;
        t.mirror = v0.mirror;
    }
    if let Some(v) = v0.concat_dim {
        if ty == "concat" {
            l.concat_param
                .get_or_insert_with(Default::default)
                .concat_dim = Some(v);
        } else {
            unknown("concat_dim");
        }
    }
    if v0.source.is_some() || v0.batchsize.is_some() {
        // Data-layer sources and batch sizes do not matter for a deploy net.
        warnings.push(format!(
            "line {line}: V0 layer {:?}: data source / batch size not carried over",
            v0.name()
        ));
    }
    Ok(l)
}

/// One V1 layer as a V2 LayerParameter (Caffe's `UpgradeV1LayerParameter`).
pub(crate) fn v1_to_v2(v1: V1LayerParameter, line: usize) -> Result<LayerParameter> {
    let name = v1.name.clone().unwrap_or_default();
    let fail = |message: String| CaffeError::Net { line, message };
    if v1.layer.is_some() {
        return Err(fail(format!(
            "layer {name:?}: a V1 layer still holding a V0 `layer` (run Caffe's upgrade_net_proto_text first)"
        )));
    }
    let type_name = match v1.r#type {
        None => String::new(),
        Some(t) => crate::raw::v1_type_name(t)
            .ok_or_else(|| fail(format!("layer {name:?}: unknown V1 layer type {t}")))?
            .to_string(),
    };
    let mut l = LayerParameter {
        name: v1.name.clone(),
        r#type: Some(type_name),
        bottom: v1.bottom.clone(),
        top: v1.top.clone(),
        include: v1.include.clone(),
        exclude: v1.exclude.clone(),
        blobs: v1.blobs.clone(),
        loss_weight: v1.loss_weight.clone(),
        ..Default::default()
    };
    // param names, share modes, blobs_lr, weight_decay → ParamSpec i.
    let n = v1
        .param
        .len()
        .max(v1.blob_share_mode.len())
        .max(v1.blobs_lr.len())
        .max(v1.weight_decay.len());
    for i in 0..n {
        l.param.push(ParamSpec {
            name: v1.param.get(i).cloned(),
            share_mode: v1.blob_share_mode.get(i).copied(),
            lr_mult: v1.blobs_lr.get(i).copied(),
            decay_mult: v1.weight_decay.get(i).copied(),
        });
    }
    l.accuracy_param = v1.accuracy_param;
    l.argmax_param = v1.argmax_param;
    l.concat_param = v1.concat_param;
    l.contrastive_loss_param = v1.contrastive_loss_param;
    l.convolution_param = v1.convolution_param;
    l.data_param = v1.data_param;
    l.dropout_param = v1.dropout_param;
    l.dummy_data_param = v1.dummy_data_param;
    l.eltwise_param = v1.eltwise_param;
    l.exp_param = v1.exp_param;
    l.hdf5_data_param = v1.hdf5_data_param;
    l.hdf5_output_param = v1.hdf5_output_param;
    l.hinge_loss_param = v1.hinge_loss_param;
    l.image_data_param = v1.image_data_param;
    l.infogain_loss_param = v1.infogain_loss_param;
    l.inner_product_param = v1.inner_product_param;
    l.lrn_param = v1.lrn_param;
    l.memory_data_param = v1.memory_data_param;
    l.mvn_param = v1.mvn_param;
    l.pooling_param = v1.pooling_param;
    l.power_param = v1.power_param;
    l.relu_param = v1.relu_param;
    l.sigmoid_param = v1.sigmoid_param;
    l.softmax_param = v1.softmax_param;
    l.slice_param = v1.slice_param;
    l.tanh_param = v1.tanh_param;
    l.threshold_param = v1.threshold_param;
    l.window_data_param = v1.window_data_param;
    l.transform_param = v1.transform_param;
    l.loss_param = v1.loss_param;
    Ok(l)
}

/// BatchNorm declared with exactly three `param` specs (the pre-2016 form): their
/// `lr_mult` and `decay_mult` become 0 (Caffe's `UpgradeNetBatchNorm`).
pub(crate) fn upgrade_batch_norm(l: &mut LayerParameter) {
    if l.r#type.as_deref() == Some("BatchNorm") && l.param.len() == 3 {
        for p in &mut l.param {
            p.lr_mult = Some(0.0);
            p.decay_mult = Some(0.0);
        }
    }
}

/// The input fields of a net as one `Input` layer (Caffe's `UpgradeNetInput`), or
/// `None` when the net has no inputs or declares inputs without any shape (a legacy
/// caffemodel: the inputs are simply dropped).
pub(crate) fn input_layer(
    net: &proto::NetParameter,
    line: usize,
) -> Result<Option<LayerParameter>> {
    if net.input.is_empty() && net.input_shape.is_empty() && net.input_dim.is_empty() {
        return Ok(None);
    }
    let has_shape = !net.input_shape.is_empty();
    let has_dim = !net.input_dim.is_empty();
    if !has_shape && !has_dim {
        return Ok(None);
    }
    let fail = |message: String| CaffeError::Net { line, message };
    let n = net.input.len();
    if has_shape && net.input_shape.len() != n {
        return Err(fail(format!(
            "{n} net inputs but {} input_shape entries (Caffe requires one per input)",
            net.input_shape.len()
        )));
    }
    if !has_shape && net.input_dim.len() != 4 * n {
        return Err(fail(format!(
            "{n} net inputs but {} input_dim values (Caffe requires 4 per input)",
            net.input_dim.len()
        )));
    }
    let mut shapes = Vec::with_capacity(n);
    for i in 0..n {
        shapes.push(if has_shape {
            net.input_shape[i].clone()
        } else {
            proto::BlobShape {
                dim: net.input_dim[4 * i..4 * i + 4]
                    .iter()
                    .map(|&d| i64::from(d))
                    .collect(),
            }
        });
    }
    Ok(Some(LayerParameter {
        name: Some("input".into()),
        r#type: Some("Input".into()),
        top: net.input.clone(),
        input_param: Some(proto::InputParameter { shape: shapes }),
        ..Default::default()
    }))
}

/// Caffe's `Net::StateMeetsRule`.
pub(crate) fn state_meets_rule(state: &NetState, rule: &NetStateRule) -> bool {
    if let Some(phase) = rule.phase {
        if phase != state.phase() as i32 {
            return false;
        }
    }
    let level = state.level();
    if rule.min_level.is_some_and(|m| level < m) || rule.max_level.is_some_and(|m| level > m) {
        return false;
    }
    if rule.stage.iter().any(|s| !state.stage.contains(s)) {
        return false;
    }
    if rule.not_stage.iter().any(|s| state.stage.contains(s)) {
        return false;
    }
    true
}

/// Whether `Net::FilterNet` keeps the layer for `state`: without rules it is kept; it
/// is dropped when an exclude rule matches, kept when an include rule matches.
pub(crate) fn layer_included(l: &LayerParameter, state: &NetState, line: usize) -> Result<bool> {
    if !l.include.is_empty() && !l.exclude.is_empty() {
        return Err(CaffeError::Net {
            line,
            message: format!(
                "layer {:?} specifies both include and exclude rules (Caffe: \"Specify either include rules or exclude rules; not both.\")",
                l.name()
            ),
        });
    }
    let mut included = l.include.is_empty();
    for r in &l.exclude {
        if state_meets_rule(state, r) {
            included = false;
        }
    }
    for r in &l.include {
        if state_meets_rule(state, r) {
            included = true;
        }
    }
    Ok(included)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(phase: Option<proto::Phase>, stage: &[&str], not_stage: &[&str]) -> NetStateRule {
        NetStateRule {
            phase: phase.map(|p| p as i32),
            stage: stage.iter().map(|s| s.to_string()).collect(),
            not_stage: not_stage.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn rules_follow_caffe() {
        let test = NetState {
            phase: Some(proto::Phase::Test as i32),
            level: Some(0),
            stage: vec!["deploy".into()],
        };
        assert!(state_meets_rule(
            &test,
            &rule(Some(proto::Phase::Test), &[], &[])
        ));
        assert!(!state_meets_rule(
            &test,
            &rule(Some(proto::Phase::Train), &[], &[])
        ));
        assert!(state_meets_rule(&test, &rule(None, &["deploy"], &[])));
        assert!(!state_meets_rule(&test, &rule(None, &["train"], &[])));
        assert!(!state_meets_rule(&test, &rule(None, &[], &["deploy"])));
        let levels = NetStateRule {
            min_level: Some(1),
            ..Default::default()
        };
        assert!(!state_meets_rule(&test, &levels));
        let mut l = LayerParameter {
            include: vec![rule(Some(proto::Phase::Train), &[], &[])],
            ..Default::default()
        };
        assert!(!layer_included(&l, &test, 1).unwrap());
        l.include.push(rule(Some(proto::Phase::Test), &[], &[]));
        assert!(layer_included(&l, &test, 1).unwrap());
        l.exclude.push(rule(None, &[], &[]));
        assert!(layer_included(&l, &test, 1).is_err());
        let ex = LayerParameter {
            exclude: vec![rule(Some(proto::Phase::Test), &[], &[])],
            ..Default::default()
        };
        assert!(!layer_included(&ex, &test, 1).unwrap());
    }

    #[test]
    fn batch_norm_three_params_get_zero_rates() {
        let mut l = LayerParameter {
            r#type: Some("BatchNorm".into()),
            param: vec![ParamSpec::default(); 3],
            ..Default::default()
        };
        upgrade_batch_norm(&mut l);
        assert!(l
            .param
            .iter()
            .all(|p| p.lr_mult() == 0.0 && p.decay_mult() == 0.0));
        let mut two = LayerParameter {
            r#type: Some("BatchNorm".into()),
            param: vec![ParamSpec::default(); 2],
            ..Default::default()
        };
        upgrade_batch_norm(&mut two);
        assert!(two.param.iter().all(|p| p.lr_mult() == 1.0));
    }

    #[test]
    fn v1_data_layer_fields_move_to_transform_param() {
        let mut v1 = V1LayerParameter {
            r#type: Some(V1_DATA),
            data_param: Some(proto::DataParameter {
                scale: Some(0.5),
                mean_file: Some("mean.binaryproto".into()),
                crop_size: Some(227),
                ..Default::default()
            }),
            ..Default::default()
        };
        upgrade_data_transform(&mut v1);
        let t = v1.transform_param.as_ref().unwrap();
        assert_eq!(
            (t.scale(), t.mean_file(), t.crop_size()),
            (0.5, "mean.binaryproto", 227)
        );
        assert!(v1.data_param.as_ref().unwrap().scale.is_none());
    }
}
