//! PyTorch-style parameter names for a Caffe model's blobs (`state_dict`).

use std::collections::HashMap;

use tensorfmt_caffe::{LayerBlobs, NetDef};
use tensorfmt_core::{DType, Order, Tensor};

use crate::LowerError;

/// How [`state_dict`] names tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `conv1.weight`, `conv1.bias`; BatchNorm as `running_mean`, `running_var`
    /// (divided by Caffe's scale factor), `num_batches_tracked`, with `weight`/`bias`
    /// from the Scale layer its output flows into (ones/zeros when none does);
    /// PReLU `weight`; other layers `name.0`, `name.1`. Characters torch module names
    /// cannot hold (`/`, `.`, `-`, ...) become `_`.
    Torch,
    /// `conv1/0`, `conv1/1`: the caffemodel's blobs as stored (what `tensorfmt.load`
    /// gives).
    Caffe,
}

/// A torch module name for a Caffe layer name.
///
/// ```
/// assert_eq!(tensorfmt_lower::torch_name("conv1/3x3.reduce-a"), "conv1_3x3_reduce_a");
/// ```
pub fn torch_name(layer: &str) -> String {
    layer
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn f32s(t: &Tensor) -> Result<Vec<f32>, LowerError> {
    Ok(if t.dtype() == DType::F32 {
        t.to_vec::<f32>()?
    } else {
        t.cast(DType::F32)?.to_vec::<f32>()?
    })
}

/// For each BatchNorm layer (by index), the Scale layer its output flows into: the
/// only reader of the BN's top before that blob is written again, with that top as its
/// only bottom.
fn bn_scale_pairs(net: &NetDef) -> HashMap<usize, usize> {
    let mut out = HashMap::new();
    for (i, l) in net.layers.iter().enumerate() {
        if l.kind != "BatchNorm" || l.tops.len() != 1 {
            continue;
        }
        let t = &l.tops[0];
        let mut readers = Vec::new();
        for (j, m) in net.layers.iter().enumerate().skip(i + 1) {
            if m.bottoms.contains(t) {
                readers.push(j);
            }
            if m.tops.contains(t) {
                break;
            }
        }
        if let [j] = readers[..] {
            let s = &net.layers[j];
            if s.kind == "Scale" && s.bottoms.len() == 1 {
                out.insert(i, j);
            }
        }
    }
    out
}

/// The caffemodel's blobs named for PyTorch (see [`Naming`]). With the net, BatchNorm
/// and the Scale its output flows into become one module (by data flow, never by
/// adjacency); without it, every layer with blobs is named on its own, in file order.
///
/// ```
/// use tensorfmt_caffe::{encode_weights_model, layer_blobs, read_model, RawBlob, WeightsLayer};
/// use tensorfmt_lower::{state_dict, Naming};
/// let bytes = encode_weights_model(None, &[WeightsLayer {
///     name: "bn".into(), type_name: Some("BatchNorm".into()),
///     blobs: vec![RawBlob::from_f32(&[1], &[4.0]), RawBlob::from_f32(&[1], &[8.0]), RawBlob::from_f32(&[1], &[2.0])],
/// }]);
/// let mut blobs = layer_blobs(&read_model(bytes.into())?)?;
/// let sd = state_dict(None, &mut blobs, Naming::Torch)?;
/// let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
/// assert_eq!(names, ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked", "bn.weight", "bn.bias"]);
/// assert_eq!(sd[0].1.to_vec::<f32>()?, vec![2.0]); // 4 / scale factor 2
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn state_dict(
    net: Option<&NetDef>,
    blobs: &mut LayerBlobs,
    naming: Naming,
) -> Result<Vec<(String, Tensor)>, LowerError> {
    // (layer name, type, blobs) in net order (or file order), each name's blobs taken once.
    let mut layers: Vec<(String, String, Vec<Tensor>)> = Vec::new();
    let mut fused: HashMap<usize, usize> = HashMap::new();
    match net {
        Some(net) => {
            for l in &net.layers {
                let b = blobs.take(&l.name).unwrap_or_default();
                layers.push((l.name.clone(), l.kind.clone(), b));
            }
            fused = bn_scale_pairs(net);
        }
        None => {
            let order: Vec<(String, String)> = blobs
                .remaining()
                .iter()
                .map(|(n, k)| (n.to_string(), k.to_string()))
                .collect();
            for (n, k) in order {
                let b = blobs.take(&n).unwrap_or_default();
                layers.push((n, k, b));
            }
        }
    }
    let mut out = Vec::new();
    if naming == Naming::Caffe {
        for (n, _, b) in layers {
            for (i, t) in b.into_iter().enumerate() {
                out.push((format!("{n}/{i}"), t));
            }
        }
        return Ok(out);
    }
    let scale_of: HashMap<usize, usize> = fused.iter().map(|(&b, &s)| (s, b)).collect();
    for (i, (n, kind, b)) in layers.iter().enumerate() {
        let name = torch_name(n);
        if b.is_empty() || scale_of.contains_key(&i) {
            continue;
        }
        match kind.as_str() {
            "Convolution"
            | "Deconvolution"
            | "InnerProduct"
            | "ConvolutionDepthwise"
            | "Scale"
            | "Bias"
                if b.len() <= 2 =>
            {
                let names = if kind == "Bias" {
                    ["bias", "bias"]
                } else {
                    ["weight", "bias"]
                };
                for (t, w) in b.iter().zip(names) {
                    out.push((format!("{name}.{w}"), t.clone()));
                }
            }
            "PReLU" if b.len() == 1 => out.push((format!("{name}.weight"), b[0].clone())),
            "BatchNorm" if b.len() >= 3 => {
                let sf = f32s(&b[2])?.first().copied().unwrap_or(0.0);
                let factor = if sf == 0.0 { 0.0 } else { 1.0 / sf };
                let c = b[0].numel();
                for (j, what) in [(0, "running_mean"), (1, "running_var")] {
                    let v: Vec<f32> = f32s(&b[j])?.iter().map(|x| x * factor).collect();
                    out.push((
                        format!("{name}.{what}"),
                        Tensor::from_vec(v, [c], Order::RowMajor)?,
                    ));
                }
                out.push((
                    format!("{name}.num_batches_tracked"),
                    Tensor::from_vec(vec![0i64], Vec::<usize>::new(), Order::RowMajor)?,
                ));
                let (w, bias) = match fused.get(&i).map(|&s| &layers[s].2) {
                    Some(sb) if !sb.is_empty() => {
                        let w = Tensor::from_vec(f32s(&sb[0])?, [c], Order::RowMajor)?;
                        let bias = match sb.get(1) {
                            Some(t) => Tensor::from_vec(f32s(t)?, [c], Order::RowMajor)?,
                            None => Tensor::from_vec(vec![0f32; c], [c], Order::RowMajor)?,
                        };
                        (w, bias)
                    }
                    _ => (
                        Tensor::from_vec(vec![1f32; c], [c], Order::RowMajor)?,
                        Tensor::from_vec(vec![0f32; c], [c], Order::RowMajor)?,
                    ),
                };
                out.push((format!("{name}.weight"), w));
                out.push((format!("{name}.bias"), bias));
            }
            _ => {
                for (j, t) in b.iter().enumerate() {
                    out.push((format!("{name}.{j}"), t.clone()));
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (n, _) in &out {
        if !seen.insert(n.as_str()) {
            return Err(LowerError::Net(format!("two tensors would be named {n:?} (layer names differ only in characters torch cannot hold)")));
        }
    }
    Ok(out)
}
