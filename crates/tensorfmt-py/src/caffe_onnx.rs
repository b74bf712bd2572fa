//! `tensorfmt.caffe.to_onnx`, `state_dict` and `write_random_weights`: the Caffe →
//! ONNX lowering (tensorfmt-lower) and PyTorch names for a caffemodel's blobs.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorfmt::{Error, ReadOptions, Tensor};
use tensorfmt_lower::{LowerOptions, Naming, Sources};

use crate::array::Array;
use crate::errors::{run, to_py};

fn lower_err(e: tensorfmt_lower::LowerError) -> Error {
    Error::from(e)
}

/// Lowers a caffemodel + deploy prototxt to an ONNX file; returns a summary dict.
#[pyfunction]
#[pyo3(signature = (caffemodel, prototxt, out, proto=None, input_shape=None, outputs=None, dynamic_batch=false, strict=false, stop_before=None, rpn=None, external_data=false))]
#[allow(clippy::too_many_arguments)]
pub fn caffe_to_onnx<'py>(
    py: Python<'py>,
    caffemodel: PathBuf,
    prototxt: PathBuf,
    out: PathBuf,
    proto: Option<PathBuf>,
    input_shape: Option<Vec<(String, Vec<usize>)>>,
    outputs: Option<Vec<String>>,
    dynamic_batch: bool,
    strict: bool,
    stop_before: Option<Vec<String>>,
    rpn: Option<Vec<(String, String)>>,
    external_data: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let lowered = run(py, move || {
        let mut rpn_options = tensorfmt_lower::RpnOptions::default();
        for (k, v) in rpn.unwrap_or_default() {
            rpn_options
                .set(&k, &v)
                .map_err(|e| Error::Invalid(format!("rpn: {e}")))?;
        }
        let opts = LowerOptions {
            input_shapes: input_shape.unwrap_or_default(),
            outputs: outputs.unwrap_or_default(),
            dynamic_batch,
            strict,
            stop_before: stop_before.unwrap_or_default(),
            rpn: rpn_options,
            external_data: if external_data {
                tensorfmt::onnx::ExternalData::Always
            } else {
                tensorfmt::onnx::ExternalData::WhenNeeded
            },
            ..Default::default()
        };
        let read = ReadOptions {
            strict,
            ..Default::default()
        };
        let src = Sources {
            caffemodel: &caffemodel,
            prototxt: &prototxt,
            fork_proto: proto.as_deref(),
        };
        tensorfmt_lower::convert_files(src, &out, &opts, &read).map_err(lower_err)
    })?;
    let d = PyDict::new(py);
    let g = lowered.model.graph.clone().unwrap_or_default();
    d.set_item(
        "inputs",
        g.input.iter().map(|v| v.name.clone()).collect::<Vec<_>>(),
    )?;
    d.set_item("outputs", lowered.outputs.clone())?;
    let shapes = PyDict::new(py);
    for (k, v) in &lowered.shapes {
        shapes.set_item(k, v.clone())?;
    }
    d.set_item("shapes", shapes)?;
    d.set_item(
        "stopped_before",
        lowered
            .stopped
            .iter()
            .map(|(n, k)| (n.clone(), k.clone()))
            .collect::<Vec<_>>(),
    )?;
    d.set_item("warnings", lowered.warnings.clone())?;
    d.set_item("nodes", g.node.len())?;
    Ok(d)
}

/// The caffemodel's blobs under PyTorch (or Caffe) names, as (name, array) pairs.
#[pyfunction]
#[pyo3(signature = (caffemodel, prototxt=None, proto=None, naming="torch"))]
pub fn caffe_state_dict(
    py: Python<'_>,
    caffemodel: PathBuf,
    prototxt: Option<PathBuf>,
    proto: Option<PathBuf>,
    naming: &str,
) -> PyResult<Vec<(String, Array)>> {
    let naming = match naming {
        "torch" => Naming::Torch,
        "caffe" => Naming::Caffe,
        other => {
            return Err(to_py(
                py,
                &Error::Invalid(format!("naming {other:?}: expected \"torch\" or \"caffe\"")),
            ));
        }
    };
    let tensors: Vec<(String, Tensor)> = run(py, move || {
        let read = ReadOptions::default();
        let data = tensorfmt::io::map_file(&caffemodel)?;
        let model = tensorfmt::caffe::read_model_with(
            data,
            &tensorfmt::caffe::CaffeReadOptions::from(&read),
        )
        .map_err(Error::from)?;
        let mut blobs = tensorfmt::caffe::layer_blobs(&model).map_err(Error::from)?;
        let net = match &prototxt {
            Some(p) => {
                let src = Sources {
                    caffemodel: &caffemodel,
                    prototxt: p,
                    fork_proto: proto.as_deref(),
                };
                Some(tensorfmt_lower::load(src, &read).map_err(lower_err)?.0)
            }
            None => None,
        };
        tensorfmt_lower::state_dict(net.as_ref(), &mut blobs, naming).map_err(lower_err)
    })?;
    tensors
        .into_iter()
        .map(|(n, t)| Ok((n, Array::from_tensor(t).map_err(|e| to_py(py, &e))?)))
        .collect()
}

/// Writes a caffemodel with seeded random weights shaped by Caffe's rules for the
/// prototxt's layers; returns the names of the layers written.
///
/// (See also [`caffe_supported_layers`].)
#[pyfunction]
#[pyo3(signature = (prototxt, out, seed=0, proto=None, input_shape=None))]
pub fn caffe_random_weights(
    py: Python<'_>,
    prototxt: PathBuf,
    out: PathBuf,
    seed: u64,
    proto: Option<PathBuf>,
    input_shape: Option<Vec<(String, Vec<usize>)>>,
) -> PyResult<Vec<String>> {
    run(py, move || {
        Ok(tensorfmt_lower::write_random_weights(
            &prototxt,
            proto.as_deref(),
            &out,
            seed,
            &input_shape.unwrap_or_default(),
            &ReadOptions::default(),
        )?)
    })
}

/// The Caffe layer types with a lowering to ONNX.
#[pyfunction]
pub fn caffe_supported_layers() -> Vec<&'static str> {
    tensorfmt_lower::supported_layers()
}
