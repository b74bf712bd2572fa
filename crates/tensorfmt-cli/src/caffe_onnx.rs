//! `tensorfmt convert MODEL.caffemodel OUT.onnx --prototxt DEPLOY.prototxt ...`: a
//! Caffe net (weights + deploy prototxt) lowered to an ONNX model by tensorfmt-lower.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use tensorfmt::onnx::ExternalData;
use tensorfmt::ReadOptions;
use tensorfmt_lower::{convert_files, LowerError, LowerOptions, Sources};

use crate::commands::check_output;
use crate::output::{emit, emit_json};
use crate::text;
use crate::Failure;

/// The options of a Caffe → ONNX conversion (given with `--prototxt`).
#[derive(Debug, Clone, Args)]
pub struct NetArgs {
    /// Caffe → ONNX: the deploy prototxt of the caffemodel (the output must be .onnx).
    #[arg(long, value_name = "DEPLOY.prototxt", help_heading = "Caffe to ONNX")]
    pub prototxt: Option<PathBuf>,
    /// A fork's caffe.proto, for prototxts with fields the builtin schema lacks (the
    /// deploy fields of SSD, OpenCV, Faster R-CNN, R-FCN, DeepLab, PSPNet, SegNet, ENet,
    /// ShuffleNet and the YOLOv2 ports are built in).
    #[arg(
        long = "proto",
        value_name = "FORK.proto",
        requires = "prototxt",
        help_heading = "Caffe to ONNX"
    )]
    pub fork_proto: Option<PathBuf>,
    /// An input's shape, replacing the prototxt's: `data=1,3,224,224` (repeatable).
    #[arg(long = "input-shape", value_name = "NAME=D,D,...", value_parser = parse_input_shape, requires = "prototxt", help_heading = "Caffe to ONNX")]
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Graph outputs by blob name, comma-separated (default: the blobs no layer consumes).
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        requires = "prototxt",
        help_heading = "Caffe to ONNX"
    )]
    pub outputs: Vec<String>,
    /// A symbolic batch dimension `N` on the graph's inputs and outputs.
    #[arg(
        long = "dynamic-batch",
        requires = "prototxt",
        help_heading = "Caffe to ONNX"
    )]
    pub dynamic_batch: bool,
    /// Stop the graph before these layers (layer names or types, comma-separated) and
    /// everything that reads what they compute; the blobs they read become the outputs.
    /// `--stop-before DetectionOutput` keeps SSD's `mbox_loc`, `mbox_conf_flatten` and
    /// `mbox_priorbox` for runtimes without NonMaxSuppression or NMS of your own.
    #[arg(
        long = "stop-before",
        value_name = "LAYER|TYPE",
        value_delimiter = ',',
        requires = "prototxt",
        help_heading = "Caffe to ONNX"
    )]
    pub stop_before: Vec<String>,
    /// Faster R-CNN / R-FCN: a test-time RPN constant of the proposal layers,
    /// `KEY=VALUE` (repeatable): pre_nms_top_n, post_nms_top_n, nms_thresh, min_size
    /// (default: the prototxt's proposal_param, or py-faster-rcnn's 6000, 300, 0.7, 16).
    #[arg(
        long = "rpn",
        value_name = "KEY=VALUE",
        value_parser = parse_rpn,
        requires = "prototxt",
        help_heading = "Caffe to ONNX"
    )]
    pub rpn: Vec<String>,
}

fn parse_rpn(s: &str) -> Result<String, String> {
    tensorfmt_lower::RpnOptions::default().parse_setting(s)?;
    Ok(s.to_string())
}

fn parse_input_shape(s: &str) -> Result<(String, Vec<usize>), String> {
    let (name, dims) = s
        .split_once('=')
        .ok_or("expected NAME=D,D,... (e.g. data=1,3,224,224)")?;
    let dims: Result<Vec<usize>, _> = dims.split(',').map(|d| d.trim().parse::<usize>()).collect();
    let dims = dims.map_err(|e| format!("bad dimension in {s:?}: {e}"))?;
    if name.is_empty() || dims.is_empty() || dims.contains(&0) {
        return Err(format!("{s:?}: needs a name and positive dimensions"));
    }
    Ok((name.to_string(), dims))
}

/// `name[d,d,...]`; for a terminal (`shown`), the name escaped and bounded.
fn shape_text(v: &tensorfmt::onnx::proto::ValueInfoProto, shown: bool) -> String {
    use tensorfmt::onnx::proto::{tensor_shape_proto::dimension::Value, type_proto};
    let dims: Vec<String> = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t
            .shape
            .iter()
            .flat_map(|s| s.dim.iter())
            .map(|d| match &d.value {
                Some(Value::DimValue(n)) => n.to_string(),
                Some(Value::DimParam(p)) => p.clone(),
                None => "?".into(),
            })
            .collect(),
        _ => Vec::new(),
    };
    let name = if shown {
        text::name(&v.name)
    } else {
        v.name.clone()
    };
    format!("{name}[{}]", dims.join(","))
}

/// The conversion's other flags, checked for a net: each of `given` (flag, whether it
/// asks for something) is refused, and of the `--set` settings only `external_data`
/// applies; returns where the weights go.
pub fn net_settings(
    given: &[(&str, bool)],
    settings: &[(String, String)],
) -> Result<ExternalData, Failure> {
    if let Some((flag, _)) = given.iter().find(|(_, asked)| *asked) {
        return Err(Failure::Usage(format!(
            "{flag} does not apply to a Caffe → ONNX conversion (--prototxt)"
        )));
    }
    let mut external = ExternalData::default();
    for (key, value) in settings {
        if key != ExternalData::SETTING {
            return Err(Failure::Usage(format!(
                "--set {key}: a Caffe → ONNX conversion (--prototxt) takes only \
                 --set external_data=true|false"
            )));
        }
        external = ExternalData::parse(Some(value)).map_err(|e| Failure::Usage(e.to_string()))?;
    }
    Ok(external)
}

/// Runs the conversion: `paths` is `[MODEL.caffemodel, OUT.onnx]`; `external` says
/// where the weights go.
pub fn convert(
    paths: &[PathBuf],
    net: &NetArgs,
    external: ExternalData,
    force: bool,
    read: &ReadOptions,
    quiet: bool,
    json_out: bool,
) -> Result<(), Failure> {
    let [model, out] = paths else {
        return Err(Failure::Usage(
            "--prototxt converts one caffemodel to one .onnx file".into(),
        ));
    };
    let Some(prototxt) = &net.prototxt else {
        return Err(Failure::Usage("--prototxt is required".into()));
    };
    if out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
        != Some("onnx")
    {
        return Err(Failure::Usage(format!(
            "with --prototxt the output is an ONNX model; name it .onnx, not {}",
            out.display()
        )));
    }
    // No input is ever the output (same file by device and inode, whatever the path
    // says); an existing output, a dangling link included, needs --force.
    for input in [Some(prototxt.as_path()), net.fork_proto.as_deref()]
        .into_iter()
        .flatten()
    {
        check_output(input, out, true)?;
    }
    check_output(model, out, force)?;
    // The data file beside the model: never an input; replaced only with --force when
    // it will be written.
    let data = tensorfmt::onnx::external_data_path(out);
    for input in [
        Some(model.as_path()),
        Some(prototxt.as_path()),
        net.fork_proto.as_deref(),
    ]
    .into_iter()
    .flatten()
    {
        check_output(input, &data, force || external != ExternalData::Always)?;
    }
    let mut rpn = tensorfmt_lower::RpnOptions::default();
    for kv in &net.rpn {
        rpn.parse_setting(kv).map_err(Failure::Usage)?;
    }
    let opts = LowerOptions {
        input_shapes: net.input_shapes.clone(),
        outputs: net.outputs.clone(),
        dynamic_batch: net.dynamic_batch,
        strict: read.strict,
        stop_before: net.stop_before.clone(),
        limits: read.limits,
        rpn,
        external_data: external,
    };
    let src = Sources {
        caffemodel: model,
        prototxt,
        fork_proto: net.fork_proto.as_deref(),
    };
    // Each error names its file (the caffemodel's defects the caffemodel, the net's the
    // prototxt, a failed write the output).
    let lowered = convert_files(src, out, &opts, read).map_err(|e| match (&e, e.inner()) {
        (LowerError::File { path, .. }, inner @ LowerError::Unsupported { .. }) => {
            Failure::Input(format!(
                "{path}: cannot convert: {inner}; nothing was written (see README, \"Run an old Caffe model today\")"
            ))
        }
        _ => Failure::Input(e.to_string()),
    })?;
    let g = lowered.model.graph.clone().unwrap_or_default();
    let outd = text::path(out);
    let stopped: Vec<String> = lowered
        .stopped
        .iter()
        .map(|(n, k)| format!("{n} ({k})"))
        .collect();
    if json_out {
        emit_json(&json!({
            "input": model.display().to_string(),
            "prototxt": prototxt.display().to_string(),
            "output": out.display().to_string(),
            "format": "onnx",
            "opset": tensorfmt::onnx::OPSET,
            "nodes": g.node.len(),
            "initializers": g.initializer.len(),
            "inputs": g.input.iter().map(|v| shape_text(v, false)).collect::<Vec<_>>(),
            "outputs": g.output.iter().map(|v| shape_text(v, false)).collect::<Vec<_>>(),
            "stopped_before": stopped,
            "warnings": lowered.warnings,
        }));
        return Ok(());
    }
    for w in &lowered.warnings {
        eprintln!(
            "tensorfmt: warning: {}: {}",
            text::path(out),
            text::message(w)
        );
    }
    if !quiet {
        let mut text = format!(
            "{outd}: wrote an ONNX model (opset {}, {} nodes, {} initializers); inputs {}; outputs {}\n",
            tensorfmt::onnx::OPSET,
            g.node.len(),
            g.initializer.len(),
            g.input.iter().map(|v| shape_text(v, true)).collect::<Vec<_>>().join(" "),
            g.output.iter().map(|v| shape_text(v, true)).collect::<Vec<_>>().join(" "),
        );
        if !stopped.is_empty() {
            text.push_str(&format!(
                "{outd}: the graph stops before {} (--stop-before; not converted): the outputs above are what they read\n",
                text::message(&stopped.join(", "))
            ));
        }
        emit(&text);
    }
    Ok(())
}
