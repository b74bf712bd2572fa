//! Caffe's own shape rules: for a [`NetDef`] and its input shapes, every blob's shape
//! and every layer's parameter blob shapes, computed as each layer's `LayerSetUp` /
//! `Reshape` does in BVLC Caffe (`src/caffe/layers/*.cpp`) and, for the fork layers, in
//! the fork that defines them (rules and sources: `docs/caffe-layers.md`).
//!
//! Errors, never panics: unknown layer types (all listed at once), inputs without a
//! shape (all listed at once), a bottom no earlier layer produces (a cycle when a later
//! layer does), a top produced by two layers, kernels larger than their padded input,
//! and any blob above Caffe's count limit (`INT_MAX` elements, so a 2^40-element blob is
//! refused before anything is allocated).

use std::collections::HashMap;

use tensorfmt_core::{Order, Tensor};

use crate::error::{CaffeError, Result};
use crate::net::{LayerDef, NetDef};
use crate::proto;

/// Caffe's blob count limit (`Blob::Reshape`: "blob size exceeds INT_MAX").
pub const MAX_BLOB_COUNT: u64 = i32::MAX as u64;

/// The layer types [`infer_shapes`] knows: BVLC Caffe's deploy-time layers and the fork
/// layers of the corpus (SSD, SegNet/ENet, PSPNet, ShuffleNet, SENet) and of Faster R-CNN /
/// R-FCN (`Proposal`, py-faster-rcnn's Python proposal layer, `ROIPooling`, `PSROIPooling`).
pub const KNOWN_LAYER_TYPES: &[&str] = &[
    // BVLC
    "AbsVal",
    "ArgMax",
    "BatchNorm",
    "Bias",
    "BNLL",
    "Clip",
    "Concat",
    "Convolution",
    "Crop",
    "Deconvolution",
    "Dropout",
    "ELU",
    "Eltwise",
    "Exp",
    "Flatten",
    "InnerProduct",
    "Log",
    "LRN",
    "LSTM",
    "MVN",
    "Parameter",
    "Pooling",
    "Power",
    "PReLU",
    "Reduction",
    "ReLU",
    "Reshape",
    "RNN",
    "Scale",
    "Sigmoid",
    "Silence",
    "Slice",
    "Softmax",
    "Split",
    "Swish",
    "TanH",
    "Threshold",
    "Tile",
    // forks
    "Axpy",
    "BN",
    "ConvolutionDepthwise",
    "DetectionOutput",
    "Interp",
    "Normalize",
    "Permute",
    "PriorBox",
    "PriorBoxClustered",
    "Proposal",
    "PSROIPooling",
    "Python",
    "ROIPooling",
    "Region",
    "Reorg",
    "ShuffleChannel",
    "Upsample",
];

/// The shapes of one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerShapes {
    /// Layer name.
    pub name: String,
    /// Layer type.
    pub kind: String,
    /// Shape of each bottom, in order.
    pub bottoms: Vec<Vec<usize>>,
    /// Shape of each top, in order.
    pub tops: Vec<Vec<usize>>,
    /// Shape of each parameter blob Caffe gives the layer (weights, bias, BatchNorm's
    /// mean/variance/factor, ...), in blob order.
    pub params: Vec<Vec<usize>>,
    /// The kernel geometry Caffe validated for a convolution or pooling layer (the
    /// lowering reads it from here instead of parsing the parameters again).
    pub geometry: Option<Geometry>,
}

/// The validated kernel geometry of a layer: see [`LayerShapes::geometry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Geometry {
    /// Convolution, ConvolutionDepthwise, Deconvolution.
    Conv(ConvGeom),
    /// Pooling.
    Pool(PoolGeom),
}

/// A convolution's geometry as Caffe validates it (`BaseConvolutionLayer::LayerSetUp`):
/// one entry per spatial axis in `kernel`, `stride`, `pad`, `dilation`.
///
/// ```
/// use tensorfmt_caffe::{infer_shapes, parse_net, Geometry, Schema};
/// let net = parse_net("input: 'x' input_dim: 1 input_dim: 4 input_dim: 9 input_dim: 9 \
///     layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y' convolution_param { \
///     num_output: 8 kernel_h: 3 kernel_w: 1 stride: 2 pad: 1 group: 2 } }",
///     Schema::builtin(), &Default::default())?;
/// let shapes = infer_shapes(&net, &[])?;
/// let Some(Geometry::Conv(g)) = &shapes.layers[0].geometry else { panic!() };
/// assert_eq!((g.kernel.as_slice(), g.stride.as_slice(), g.pad.as_slice()), (&[3, 1][..], &[2, 2][..], &[1, 1][..]));
/// assert_eq!((g.channels, g.num_output, g.group, g.extent(0)), (4, 8, 2, 3));
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvGeom {
    /// The channel axis (`axis`, 1 by default); the spatial axes follow it.
    pub axis: usize,
    /// Kernel size per spatial axis (> 0).
    pub kernel: Vec<usize>,
    /// Stride per spatial axis (> 0; 1 by default).
    pub stride: Vec<usize>,
    /// Symmetric padding per spatial axis (0 by default).
    pub pad: Vec<usize>,
    /// Dilation per spatial axis (> 0; 1 by default).
    pub dilation: Vec<usize>,
    /// Input channels (the bottom's `axis` dimension).
    pub channels: usize,
    /// `num_output` (> 0).
    pub num_output: usize,
    /// Groups: `group`, or the input channels for `ConvolutionDepthwise`; divides both
    /// `channels` and `num_output`.
    pub group: usize,
    /// Whether the layer has a bias blob (`bias_term`, true by default).
    pub bias_term: bool,
    /// `Deconvolution`: output `stride·(in−1) + extent − 2·pad`, weight
    /// `[channels, num_output/group, k...]`.
    pub transposed: bool,
}

impl ConvGeom {
    /// The dilated kernel extent `dilation·(kernel−1) + 1` on spatial axis `i`.
    pub fn extent(&self, i: usize) -> usize {
        self.dilation[i] * (self.kernel[i] - 1) + 1
    }
}

/// A pooling layer's geometry as Caffe validates it (`PoolingLayer::LayerSetUp` and
/// `Reshape`), as (height, width) pairs.
///
/// ```
/// use tensorfmt_caffe::{infer_shapes, parse_net, Geometry, Schema};
/// let net = parse_net("input: 'x' input_dim: 1 input_dim: 1 input_dim: 112 input_dim: 112 \
///     layer { name: 'p' type: 'Pooling' bottom: 'x' top: 'y' \
///     pooling_param { pool: MAX kernel_size: 3 stride: 2 } }", Schema::builtin(), &Default::default())?;
/// let shapes = infer_shapes(&net, &[])?;
/// let Some(Geometry::Pool(g)) = &shapes.layers[0].geometry else { panic!() };
/// assert_eq!((g.kernel, g.stride, g.pad, g.ceil, g.pooled), ([3, 3], [2, 2], [0, 0], true, [56, 56]));
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolGeom {
    /// MAX, AVE or STOCHASTIC.
    pub method: proto::pooling_parameter::PoolMethod,
    /// `global_pooling`: the kernel is the whole input plane (pad 0, stride 1).
    pub global: bool,
    /// Kernel (height, width), > 0 (the input plane when global).
    pub kernel: [usize; 2],
    /// Stride (height, width), > 0.
    pub stride: [usize; 2],
    /// Padding (height, width), each smaller than the kernel.
    pub pad: [usize; 2],
    /// Output sizes round up (Caffe's default), or down with `round_mode: FLOOR` /
    /// OpenCV's `ceil_mode: false`.
    pub ceil: bool,
    /// The output (height, width): rounded as `ceil` says, then, when any pad is
    /// non-zero, a last window that would start at or beyond `in + pad` is dropped on
    /// each axis.
    pub pooled: [usize; 2],
}

/// Shapes of a whole net: see [`infer_shapes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetShapes {
    /// Input blobs and their shapes.
    pub inputs: Vec<(String, Vec<usize>)>,
    /// One entry per [`NetDef::layers`] entry, same order.
    pub layers: Vec<LayerShapes>,
    blobs: HashMap<String, Vec<usize>>,
}

impl NetShapes {
    /// The shape of blob `name` after the whole net ran (the last write of an in-place
    /// blob).
    pub fn blob(&self, name: &str) -> Option<&[usize]> {
        self.blobs.get(name).map(Vec::as_slice)
    }

    /// The first layer named `name`.
    pub fn layer(&self, name: &str) -> Option<&LayerShapes> {
        self.layers.iter().find(|l| l.name == name)
    }
}

/// Infers every blob and parameter shape of `net` with Caffe's rules. `overrides` give
/// input shapes by input name (replacing the declared ones; required for inputs that
/// declare none).
///
/// ```
/// use tensorfmt_caffe::{infer_shapes, parse_net, Schema};
/// let text = "input: 'data' input_dim: 1 input_dim: 3 input_dim: 227 input_dim: 227\n\
///   layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n\
///           convolution_param { num_output: 96 kernel_size: 11 stride: 4 } }\n\
///   layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1'\n\
///           pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n";
/// let net = parse_net(text, Schema::builtin(), &Default::default())?;
/// let shapes = infer_shapes(&net, &[])?;
/// assert_eq!(shapes.blob("pool1"), Some(&[1, 96, 27, 27][..]));
/// assert_eq!(shapes.layers[0].params, vec![vec![96, 3, 11, 11], vec![96]]);
/// let bigger = infer_shapes(&net, &[("data".into(), vec![2, 3, 300, 300])])?;
/// assert_eq!(bigger.blob("conv1"), Some(&[2, 96, 73, 73][..]));
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
pub fn infer_shapes(net: &NetDef, overrides: &[(String, Vec<usize>)]) -> Result<NetShapes> {
    // Everything that can be reported at once is: unknown types, unknown overrides,
    // inputs without shapes.
    let mut problems = Vec::new();
    for l in &net.layers {
        if !KNOWN_LAYER_TYPES.contains(&l.kind.as_str()) {
            problems.push(format!(
                "unsupported layer {:?} of type {:?} (line {})",
                l.name, l.kind, l.line
            ));
        }
    }
    // By name (a net may have thousands of inputs, each given a shape by
    // --dynamic-batch's check: no search per input).
    let input_names: std::collections::HashSet<&str> =
        net.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut by_name: HashMap<&str, &Vec<usize>> = HashMap::with_capacity(overrides.len());
    for (name, shape) in overrides {
        if by_name.insert(name.as_str(), shape).is_some() {
            problems.push(format!(
                "input {name:?} is given a shape twice (one shape per input)"
            ));
        } else if !input_names.contains(name.as_str()) {
            problems.push(format!(
                "no net input named {name:?} (inputs: {:?})",
                net.inputs
                    .iter()
                    .take(32)
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
            ));
        }
    }
    let mut blobs: HashMap<String, Vec<usize>> = HashMap::new();
    let mut inputs = Vec::new();
    for i in &net.inputs {
        let shape = match by_name.get(i.name.as_str()) {
            Some(s) => (*s).clone(),
            None if !i.shape.is_empty() => {
                let mut dims = Vec::with_capacity(i.shape.len());
                for &d in &i.shape {
                    match usize::try_from(d) {
                        Ok(d) => dims.push(d),
                        Err(_) => problems.push(format!(
                            "input {:?} (line {}) has a negative dimension {d}",
                            i.name, i.line
                        )),
                    }
                }
                dims
            }
            None => {
                problems.push(format!(
                    "input {:?} (line {}) declares no shape: give one (--input-shape {}=N,C,H,W)",
                    i.name, i.line, i.name
                ));
                continue;
            }
        };
        if let Err(e) = check_count(&shape) {
            problems.push(format!("input {:?}: {e}", i.name));
        }
        if blobs.insert(i.name.clone(), shape.clone()).is_some() {
            problems.push(format!("input {:?} is declared twice", i.name));
        }
        inputs.push((i.name.clone(), shape));
    }
    if !problems.is_empty() {
        return Err(CaffeError::Shapes(problems));
    }
    // First producer of each blob name, to tell a cycle from a missing blob.
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, l) in net.layers.iter().enumerate() {
        for t in &l.tops {
            producer.entry(t.as_str()).or_insert(i);
        }
    }
    let mut layers = Vec::with_capacity(net.layers.len());
    for (index, l) in net.layers.iter().enumerate() {
        let fail = |message: String| CaffeError::Net {
            line: l.line,
            message: format!("layer {:?} ({}): {message}", l.name, l.kind),
        };
        let mut bottoms = Vec::with_capacity(l.bottoms.len());
        for b in &l.bottoms {
            match blobs.get(b) {
                Some(s) => bottoms.push(s.clone()),
                None => {
                    return Err(fail(match producer.get(b.as_str()) {
                        Some(&p) if p >= index => {
                            let by = &net.layers[p];
                            format!(
                                "bottom {b:?} is produced only later, by layer {:?} (line {}): a cycle or a layer out of order",
                                by.name, by.line
                            )
                        }
                        _ => format!(
                            "unknown bottom blob {b:?} (no input or earlier layer produces it)"
                        ),
                    }))
                }
            }
        }
        let ((tops, params), geometry) = layer_shapes(l, &bottoms).map_err(fail)?;
        if tops.len() != l.tops.len() {
            return Err(fail(format!(
                "has {} tops, the layer produces {}",
                l.tops.len(),
                tops.len()
            )));
        }
        // Caffe's AppendTop: one layer naming a top twice is two sources of it (a set:
        // a Split may have tens of thousands of tops).
        let mut named: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (j, (name, shape)) in l.tops.iter().zip(&tops).enumerate() {
            check_count(shape).map_err(|e| fail(format!("top {name:?}: {e}")))?;
            let in_place = l.bottoms.get(j) == Some(name);
            if !named.insert(name.as_str()) {
                return Err(fail(format!(
                    "top blob {name:?} produced by multiple sources (the layer names it twice)"
                )));
            }
            if !in_place && blobs.contains_key(name) {
                return Err(fail(format!(
                    "top blob {name:?} produced by multiple sources (Caffe requires an in-place top to be the bottom at the same index)"
                )));
            }
        }
        for (j, p) in params.iter().enumerate() {
            check_count(p).map_err(|e| fail(format!("parameter blob {j}: {e}")))?;
        }
        for (name, shape) in l.tops.iter().zip(&tops) {
            blobs.insert(name.clone(), shape.clone());
        }
        layers.push(LayerShapes {
            name: l.name.clone(),
            kind: l.kind.clone(),
            bottoms,
            tops,
            params,
            geometry,
        });
    }
    Ok(NetShapes {
        inputs,
        layers,
        blobs,
    })
}

type Shapes = (Vec<Vec<usize>>, Vec<Vec<usize>>);
type R<T> = std::result::Result<T, String>;

/// Refuses shapes above Caffe's INT_MAX count (checked arithmetic, no allocation).
fn check_count(shape: &[usize]) -> R<()> {
    // Caffe's Blob::Reshape: CHECK_LE(shape.size(), kMaxBlobAxes).
    if shape.len() > 32 {
        return Err(format!(
            "shape {shape:?} has {} axes; Caffe's blobs have at most 32",
            shape.len()
        ));
    }
    let mut count: u64 = 1;
    for &d in shape {
        count = count
            .checked_mul(d as u64)
            .filter(|&c| c <= MAX_BLOB_COUNT)
            .ok_or_else(|| {
                format!(
                    "shape {shape:?} has more than {MAX_BLOB_COUNT} elements (Caffe: blob size exceeds INT_MAX)"
                )
            })?;
    }
    Ok(())
}

/// Caffe's `Blob::CanonicalAxisIndex`.
fn axis(a: i32, rank: usize, what: &str) -> R<usize> {
    let r = rank as i64;
    let a = i64::from(a);
    if a < -r || a >= r {
        return Err(format!("{what} {a} out of range for a {rank}-axis blob"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

fn count(shape: &[usize]) -> R<usize> {
    let mut c: usize = 1;
    for &d in shape {
        c = c
            .checked_mul(d)
            .ok_or_else(|| format!("shape {shape:?} overflows"))?;
    }
    Ok(c)
}

fn exactly(bottoms: &[Vec<usize>], n: usize) -> R<()> {
    if bottoms.len() != n {
        return Err(format!("takes {n} bottom(s), got {}", bottoms.len()));
    }
    Ok(())
}

fn at_least(bottoms: &[Vec<usize>], n: usize) -> R<()> {
    if bottoms.len() < n {
        return Err(format!(
            "takes at least {n} bottom(s), got {}",
            bottoms.len()
        ));
    }
    Ok(())
}

/// A float parameter must be finite (Caffe would compute NaN from it everywhere).
fn finite(what: &str, v: f32) -> R<()> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("{what} must be finite, got {v}"))
    }
}

fn u(v: u32) -> usize {
    v as usize
}

/// Tops and parameter shapes of one layer, and the kernel geometry of convolution and
/// pooling layers.
fn layer_shapes(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<(Shapes, Option<Geometry>)> {
    match l.kind.as_str() {
        "Convolution" | "Deconvolution" | "ConvolutionDepthwise" => {
            let (shapes, g) = conv(l, bottoms)?;
            Ok((shapes, Some(Geometry::Conv(g))))
        }
        "Pooling" => {
            let (shapes, g) = pooling(l, bottoms)?;
            Ok((shapes, Some(Geometry::Pool(g))))
        }
        _ => Ok((other_shapes(l, bottoms)?, None)),
    }
}

/// [`layer_shapes`] of the layers without a kernel geometry.
fn other_shapes(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<Shapes> {
    let p = &l.param;
    let n_tops = l.tops.len();
    match l.kind.as_str() {
        "AbsVal" | "BNLL" | "Clip" | "Dropout" | "ELU" | "Exp" | "Log" | "Power" | "ReLU"
        | "Sigmoid" | "Swish" | "TanH" | "Threshold" => {
            exactly(bottoms, 1)?;
            // Exp and Log: `base` is positive or -1 (e) (ExpLayer / LogLayer::LayerSetUp).
            let base = match l.kind.as_str() {
                "Exp" => Some(("exp_param.base", p.exp_param.unwrap_or_default().base())),
                "Log" => Some(("log_param.base", p.log_param.unwrap_or_default().base())),
                _ => None,
            };
            if let Some((what, base)) = base {
                if base != -1.0 && base.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                    return Err(format!(
                        "{what} must be strictly positive (or -1 for e), got {base}"
                    ));
                }
            }
            // Stricter than Caffe, which computes NaN from these (LeakyRelu / Elu
            // would pass the positive side through instead).
            match l.kind.as_str() {
                "ReLU" => finite(
                    "relu_param.negative_slope",
                    p.relu_param.unwrap_or_default().negative_slope(),
                )?,
                "ELU" => finite("elu_param.alpha", p.elu_param.unwrap_or_default().alpha())?,
                _ => {}
            }
            Ok((vec![bottoms[0].clone()], vec![]))
        }
        "MVN" => {
            exactly(bottoms, 1)?;
            finite("mvn_param.eps", l.param.mvn_param.unwrap_or_default().eps())?;
            // MVNLayer reads num(), channels(), height(), width(): Caffe's legacy
            // accessors, which refuse blobs of more than 4 axes.
            if bottoms[0].len() > 4 {
                return Err(format!(
                    "input {:?} has {} axes; MVN reads at most 4 (num, channels, height, width)",
                    bottoms[0],
                    bottoms[0].len()
                ));
            }
            Ok((vec![bottoms[0].clone()], vec![]))
        }
        "LSTM" | "RNN" => recurrent(l, bottoms),
        "Split" => {
            exactly(bottoms, 1)?;
            Ok((vec![bottoms[0].clone(); n_tops], vec![]))
        }
        "Silence" => Ok((vec![], vec![])),
        "Softmax" => {
            exactly(bottoms, 1)?;
            let sp = p.softmax_param.unwrap_or_default();
            axis(sp.axis(), bottoms[0].len(), "softmax axis")?;
            Ok((vec![bottoms[0].clone()], vec![]))
        }
        "LRN" => {
            exactly(bottoms, 1)?;
            if bottoms[0].len() != 4 {
                return Err(format!("input must have 4 axes, has {:?}", bottoms[0]));
            }
            let lp = p.lrn_param.unwrap_or_default();
            // Caffe keeps local_size in an int: above INT_MAX it is negative, and odd
            // negative numbers fail its `size % 2 == 1` check too.
            let size = lp.local_size();
            if size.is_multiple_of(2) || size > i32::MAX as u32 {
                return Err(format!(
                    "LRN only supports odd values for local_size (up to {}), got {size}",
                    i32::MAX
                ));
            }
            // Stricter than Caffe, which computes NaN everywhere from these.
            finite("lrn_param.alpha", lp.alpha())?;
            finite("lrn_param.beta", lp.beta())?;
            finite("lrn_param.k", lp.k())?;
            Ok((vec![bottoms[0].clone()], vec![]))
        }
        "PReLU" => {
            exactly(bottoms, 1)?;
            let b = &bottoms[0];
            if b.len() < 2 {
                return Err(format!(
                    "number of axes of bottom blob must be >= 2, got {b:?}"
                ));
            }
            let shared = p.prelu_param.clone().unwrap_or_default().channel_shared();
            let slope = if shared { vec![] } else { vec![b[1]] };
            Ok((vec![b.clone()], vec![slope]))
        }
        "BatchNorm" => {
            exactly(bottoms, 1)?;
            let b = &bottoms[0];
            let c = if b.len() == 1 {
                1
            } else {
                *b.get(1).ok_or("a 0-axis bottom")?
            };
            let mut params = vec![vec![c], vec![c], vec![1]];
            finite("batch_norm_param.eps", p.batch_norm_param.unwrap_or_default().eps())?;
            if p.batch_norm_param.unwrap_or_default().scale_bias() {
                params.push(vec![c]);
                params.push(vec![c]);
            }
            Ok((vec![b.clone()], params))
        }
        "BN" => {
            exactly(bottoms, 1)?;
            let b = &bottoms[0];
            if b.len() < 2 {
                return Err(format!("bottom must have a channel axis, got {b:?}"));
            }
            let c = vec![1, b[1], 1, 1];
            if let Some(eps) = p.bn_param.clone().unwrap_or_default().eps {
                finite("bn_param.eps", eps)?;
            }
            // SegNet/ENet's BN: scale, shift. PSPNet's (yjxiong's): slope, bias, mean,
            // variance. The builtin BNParameter holds both forks' fields, so the fields
            // the layer sets tell which it is; with neither set, the schema's message
            // (a fork's own `--proto`) does, else SegNet's, the fork's default.
            let set = |fields: &[&'static str]| -> Option<&'static str> {
                fields
                    .iter()
                    .copied()
                    .find(|f| l.fork_field_if_set("bn_param", f).is_some())
            };
            let segnet = set(&["bn_mode", "scale_filler", "shift_filler"]);
            let pspnet = set(&["slope_filler", "bias_filler", "momentum", "eps", "frozen", "engine"]);
            let n = match (segnet, pspnet) {
                (Some(a), Some(b)) => {
                    return Err(format!(
                        "bn_param sets SegNet/ENet's {a} and PSPNet's {b}: one BN layer is one fork's"
                    ))
                }
                (Some(_), None) => 2,
                (None, Some(_)) => 4,
                (None, None)
                    if l.has_param("bn_param")
                        && l.fork_field("bn_param", "bn_mode").is_none() =>
                {
                    4
                }
                (None, None) => 2,
            };
            Ok((vec![b.clone()], vec![c; n]))
        }
        "Scale" | "Bias" => {
            at_least(bottoms, 1)?;
            if bottoms.len() > 2 {
                return Err(format!("takes 1 or 2 bottoms, got {}", bottoms.len()));
            }
            let b = &bottoms[0];
            let (ax, num_axes, bias_term) = if l.kind == "Scale" {
                let sp = p.scale_param.clone().unwrap_or_default();
                (sp.axis(), sp.num_axes(), sp.bias_term())
            } else {
                let bp = p.bias_param.clone().unwrap_or_default();
                (bp.axis(), bp.num_axes(), false)
            };
            let mut params = Vec::new();
            if bottoms.len() == 2 {
                let s = &bottoms[1];
                let start = if s.is_empty() {
                    0
                } else {
                    axis(ax, b.len(), "axis")?
                };
                if b.len() < start + s.len() || b[start..start + s.len()] != s[..] {
                    return Err(format!(
                        "second bottom {s:?} does not match bottom {b:?} from axis {start}"
                    ));
                }
                if bias_term {
                    params.push(s.clone());
                }
            } else {
                let start = axis(ax, b.len(), "axis")?;
                if num_axes < -1 {
                    return Err(format!(
                        "num_axes must be non-negative or -1, got {num_axes}"
                    ));
                }
                let end = if num_axes == -1 {
                    b.len()
                } else {
                    start + num_axes as usize
                };
                if end > b.len() {
                    return Err(format!(
                        "parameter shape extends past the bottom {b:?} (axis {start}, num_axes {num_axes})"
                    ));
                }
                let shape = b[start..end].to_vec();
                params.push(shape.clone());
                if bias_term {
                    params.push(shape);
                }
            }
            Ok((vec![b.clone()], params))
        }
        "InnerProduct" => {
            exactly(bottoms, 1)?;
            let ip = p.inner_product_param.clone().unwrap_or_default();
            let b = &bottoms[0];
            let a = axis(ip.axis(), b.len(), "axis")?;
            let n = u(ip.num_output());
            if n == 0 {
                return Err("num_output must be set (> 0)".into());
            }
            let k = count(&b[a..])?;
            let mut top = b[..a].to_vec();
            top.push(n);
            let mut params = vec![if ip.transpose() {
                vec![k, n]
            } else {
                vec![n, k]
            }];
            if ip.bias_term() {
                params.push(vec![n]);
            }
            Ok((vec![top], params))
        }
        "Concat" => {
            at_least(bottoms, 1)?;
            let cp = p.concat_param.unwrap_or_default();
            if cp.axis.is_some() && cp.concat_dim.is_some() {
                return Err("either concat_param.axis or concat_dim should be specified; not both (Caffe's ConcatLayer)".into());
            }
            let rank = bottoms[0].len();
            let a = match cp.concat_dim {
                Some(d) if (d as usize) < rank => d as usize,
                Some(d) => return Err(format!("concat_dim {d} out of range for rank {rank}")),
                None => axis(cp.axis(), rank, "axis")?,
            };
            let mut top = bottoms[0].clone();
            for b in &bottoms[1..] {
                if b.len() != rank || (0..rank).any(|j| j != a && b[j] != top[j]) {
                    return Err(format!(
                        "bottoms {:?} and {b:?} differ outside the concat axis {a}",
                        bottoms[0]
                    ));
                }
                top[a] = top[a].checked_add(b[a]).ok_or("overflow")?;
            }
            Ok((vec![top], vec![]))
        }
        "Slice" => {
            exactly(bottoms, 1)?;
            let sp = p.slice_param.clone().unwrap_or_default();
            if sp.axis.is_some() && sp.slice_dim.is_some() {
                return Err("either slice_param.axis or slice_dim should be specified; not both (Caffe's SliceLayer)".into());
            }
            let b = &bottoms[0];
            let a = match sp.slice_dim {
                Some(d) if (d as usize) < b.len() => d as usize,
                Some(d) => return Err(format!("slice_dim {d} out of range for {b:?}")),
                None => axis(sp.axis(), b.len(), "axis")?,
            };
            let dim = b[a];
            let mut sizes = Vec::with_capacity(n_tops);
            if !sp.slice_point.is_empty() {
                if sp.slice_point.len() + 1 != n_tops {
                    return Err(format!(
                        "{} slice points for {n_tops} tops (needs one fewer than tops)",
                        sp.slice_point.len()
                    ));
                }
                let mut prev = 0usize;
                for &pt in &sp.slice_point {
                    let pt = u(pt);
                    if pt <= prev {
                        return Err(format!(
                            "slice points must increase, got {:?}",
                            sp.slice_point
                        ));
                    }
                    sizes.push(pt - prev);
                    prev = pt;
                }
                if prev >= dim {
                    return Err(format!("slice point {prev} beyond the axis size {dim}"));
                }
                sizes.push(dim - prev);
            } else {
                if n_tops == 0 || !dim.is_multiple_of(n_tops) {
                    return Err(format!(
                        "number of top blobs ({n_tops}) should evenly divide input slice axis ({dim})"
                    ));
                }
                sizes = vec![dim / n_tops; n_tops];
            }
            let tops = sizes
                .into_iter()
                .map(|s| {
                    let mut t = b.clone();
                    t[a] = s;
                    t
                })
                .collect();
            Ok((tops, vec![]))
        }
        "Eltwise" => {
            at_least(bottoms, 2)?;
            let ep = p.eltwise_param.clone().unwrap_or_default();
            if !ep.coeff.is_empty() && ep.coeff.len() != bottoms.len() {
                return Err("Eltwise takes one coefficient per bottom blob".into());
            }
            if !ep.coeff.is_empty() && ep.operation() != proto::eltwise_parameter::EltwiseOp::Sum {
                return Err("Eltwise only takes coefficients for summation".into());
            }
            for b in &bottoms[1..] {
                if b != &bottoms[0] {
                    return Err(format!("bottom shapes differ: {:?} and {b:?}", bottoms[0]));
                }
            }
            Ok((vec![bottoms[0].clone()], vec![]))
        }
        "Flatten" => {
            exactly(bottoms, 1)?;
            let fp = p.flatten_param.unwrap_or_default();
            let b = &bottoms[0];
            if l.tops.first() == l.bottoms.first() {
                return Err("Flatten does not allow in-place computation".into());
            }
            let start = axis(fp.axis(), b.len(), "axis")?;
            let end = axis(fp.end_axis(), b.len(), "end_axis")?;
            if end < start {
                return Err(format!("end_axis {end} before axis {start}"));
            }
            let mut top = b[..start].to_vec();
            top.push(count(&b[start..=end])?);
            top.extend_from_slice(&b[end + 1..]);
            Ok((vec![top], vec![]))
        }
        "Reshape" => {
            exactly(bottoms, 1)?;
            reshape(p.reshape_param.clone().unwrap_or_default(), &bottoms[0])
                .map(|t| (vec![t], vec![]))
        }
        "Crop" => {
            exactly(bottoms, 2)?;
            let cp = p.crop_param.clone().unwrap_or_default();
            let (a, b) = (&bottoms[0], &bottoms[1]);
            if a.len() != b.len() {
                return Err(format!("bottoms {a:?} and {b:?} differ in rank"));
            }
            let start = axis(cp.axis(), a.len(), "axis")?;
            if cp.offset.len() > 1 && cp.offset.len() != a.len() - start {
                return Err(format!(
                    "{} offsets for {} cropped axes",
                    cp.offset.len(),
                    a.len() - start
                ));
            }
            let mut top = a.clone();
            for i in start..a.len() {
                let off = match cp.offset.len() {
                    0 => 0,
                    1 => u(cp.offset[0]),
                    _ => u(cp.offset[i - start]),
                };
                if a[i] < off || a[i] - off < b[i] {
                    return Err(format!(
                        "invalid crop parameters in dimension {i}: {} - offset {off} < {}",
                        a[i], b[i]
                    ));
                }
                top[i] = b[i];
            }
            Ok((vec![top], vec![]))
        }
        "ArgMax" => {
            exactly(bottoms, 1)?;
            let ap = p.argmax_param.unwrap_or_default();
            let b = &bottoms[0];
            let k = u(ap.top_k());
            if k == 0 {
                return Err("top_k must be at least 1".into());
            }
            let top = match ap.axis {
                Some(ax) => {
                    let a = axis(ax, b.len(), "axis")?;
                    if k > b[a] {
                        return Err(format!("top_k {k} exceeds the axis size {}", b[a]));
                    }
                    let mut t = b.clone();
                    t[a] = k;
                    t
                }
                None => {
                    if b.is_empty() || k > count(&b[1..])? {
                        return Err(format!("top_k {k} exceeds the per-item count of {b:?}"));
                    }
                    let mut t = vec![1; b.len().max(3)];
                    t[0] = b[0];
                    t[2] = k;
                    if ap.out_max_val() {
                        t[1] = 2;
                    }
                    t
                }
            };
            Ok((vec![top], vec![]))
        }
        "Tile" => {
            exactly(bottoms, 1)?;
            let tp = p.tile_param.unwrap_or_default();
            let a = axis(tp.axis(), bottoms[0].len(), "axis")?;
            if tp.tiles() <= 0 {
                return Err("tiles must be positive".into());
            }
            let mut t = bottoms[0].clone();
            t[a] = t[a].checked_mul(tp.tiles() as usize).ok_or("overflow")?;
            Ok((vec![t], vec![]))
        }
        "Reduction" => {
            exactly(bottoms, 1)?;
            let rp = p.reduction_param.unwrap_or_default();
            let a = axis(rp.axis(), bottoms[0].len().max(1), "axis")?;
            Ok((vec![bottoms[0][..a.min(bottoms[0].len())].to_vec()], vec![]))
        }
        "Parameter" => {
            let s: Vec<usize> = p
                .parameter_param
                .as_ref()
                .and_then(|pp| pp.shape.as_ref())
                .map(|s| {
                    s.dim
                        .iter()
                        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dim {d}")))
                        .collect::<R<Vec<_>>>()
                })
                .transpose()?
                .unwrap_or_default();
            Ok((vec![s.clone()], vec![s]))
        }
        // ---- fork layers ----
        "ShuffleChannel" => {
            exactly(bottoms, 1)?;
            let b = &bottoms[0];
            let g = i64::from(p.shuffle_channel_param.unwrap_or_default().group());
            if b.len() < 2 || g <= 0 || !b[1].is_multiple_of(g as usize) {
                return Err(format!("channels of {b:?} not divisible by group {g}"));
            }
            Ok((vec![b.clone()], vec![]))
        }
        "Permute" => {
            exactly(bottoms, 1)?;
            let b = &bottoms[0];
            let order = p.permute_param.clone().unwrap_or_default().order;
            let mut seen = vec![false; b.len()];
            let mut axes = Vec::with_capacity(b.len());
            for &o in &order {
                let o = u(o);
                if o >= b.len() || seen[o] {
                    return Err(format!("bad permute order {order:?} for {b:?}"));
                }
                seen[o] = true;
                axes.push(o);
            }
            axes.extend((0..b.len()).filter(|&i| !seen[i]));
            Ok((vec![axes.iter().map(|&a| b[a]).collect()], vec![]))
        }
        "Normalize" => {
            exactly(bottoms, 1)?;
            let b = &bottoms[0];
            if b.len() < 2 {
                return Err(format!("bottom must have a channel axis, got {b:?}"));
            }
            let np = p.norm_param.clone().unwrap_or_default();
            finite("norm_param.eps", np.eps())?;
            let shared = np.channel_shared();
            Ok((
                vec![b.clone()],
                vec![if shared { vec![] } else { vec![b[1]] }],
            ))
        }
        "PriorBox" | "PriorBoxClustered" => {
            exactly(bottoms, 2)?;
            let b = &bottoms[0];
            if b.len() != 4 {
                return Err(format!("feature map must have 4 axes, got {b:?}"));
            }
            let n = prior_count(&p.prior_box_param.clone().unwrap_or_default())?;
            let len = b[2]
                .checked_mul(b[3])
                .and_then(|x| x.checked_mul(n))
                .and_then(|x| x.checked_mul(4))
                .ok_or("overflow")?;
            Ok((vec![vec![1, 2, len]], vec![]))
        }
        "DetectionOutput" if l.is_yolo_detection_output() => yolo_detection_output(l, bottoms),
        "DetectionOutput" => {
            at_least(bottoms, 3)?;
            if bottoms.len() > 4 {
                return Err(format!("takes 3 or 4 bottoms, got {}", bottoms.len()));
            }
            let dp = p.detection_output_param.clone().unwrap_or_default();
            detection_output_checks(&dp, bottoms)?;
            // Caffe sizes the top [1, 1, 1, 7] at setup and at the forward to the rows
            // kept; the bound here is keep_top_k, or fewer where the net cannot keep that
            // many (images x priors x classes): a keep_top_k of 2^31 - 1 is legal Caffe.
            let most = bottoms[0]
                .first()
                .copied()
                .unwrap_or(1)
                .saturating_mul(bottoms[2].get(2).copied().unwrap_or(0) / 4)
                .saturating_mul(dp.num_classes() as usize)
                .max(1);
            let k = if dp.keep_top_k() > 0 {
                (dp.keep_top_k() as usize).min(most)
            } else {
                1
            };
            Ok((vec![vec![1, 1, k, 7]], vec![]))
        }
        "Axpy" => {
            exactly(bottoms, 3)?;
            let (a, x, y) = (&bottoms[0], &bottoms[1], &bottoms[2]);
            if x != y || x.len() < 2 || a.len() < 2 || a[..2] != x[..2] || count(a)? != x[0] * x[1]
            {
                return Err(format!(
                    "bottoms a {a:?}, x {x:?}, y {y:?}: a must be N x C (x 1 x 1), x and y equal"
                ));
            }
            Ok((vec![x.clone()], vec![]))
        }
        "Upsample" => {
            at_least(bottoms, 1)?;
            let b = &bottoms[0];
            if b.len() != 4 {
                return Err(format!("input must have 4 axes, got {b:?}"));
            }
            if bottoms.len() == 2 && bottoms[1] != *b {
                return Err(format!(
                    "mask {:?} differs from the input {b:?}",
                    bottoms[1]
                ));
            }
            // SegNet's UpsampleLayer::LayerSetUp: upsample_h and upsample_w (both, each
            // > 1), else scale_h and scale_w (both, each > 1, without scale), else scale
            // (> 1); pad_out_h/w only with a scale of 2. Caffe's ints: above INT_MAX
            // they are negative and fail the checks too.
            let get = |f: &str| {
                l.fork_field_if_set("upsample_param", f)
                    .and_then(|v| v.as_i64())
            };
            let more_than_one = |what: &str, v: i64| {
                if v > 1 && v <= i64::from(i32::MAX) {
                    Ok(v as usize)
                } else {
                    Err(format!(
                        "upsample_param.{what} must be greater than 1, got {v}"
                    ))
                }
            };
            let (uh, uw) = (get("upsample_h"), get("upsample_w"));
            let (sh, sw, scale) = (get("scale_h"), get("scale_w"), get("scale"));
            let (h, w) = match (uh, uw) {
                (Some(h), Some(w)) => (
                    more_than_one("upsample_h", h)?,
                    more_than_one("upsample_w", w)?,
                ),
                (Some(_), None) | (None, Some(_)) => {
                    return Err(
                        "upsample_param.upsample_h and upsample_w must be given together".into(),
                    )
                }
                (None, None) => {
                    let (sh, sw) = match (sh, sw, scale) {
                        (Some(h), Some(w), None) => (h, w),
                        (None, None, s) => {
                            let s = s.unwrap_or_else(|| {
                                l.fork_field("upsample_param", "scale")
                                    .and_then(|v| v.as_i64())
                                    .unwrap_or(2)
                            });
                            (s, s)
                        }
                        _ => return Err("upsample_param: upsample_h and upsample_w, or scale_h and scale_w (without scale), or scale".into()),
                    };
                    let (sh, sw) = (more_than_one("scale_h", sh)?, more_than_one("scale_w", sw)?);
                    let pad = |f: &str| {
                        l.fork_field("upsample_param", f)
                            .and_then(|v| v.as_bool())
                            .map_or(0, usize::from)
                    };
                    let (ph, pw) = (pad("pad_out_h"), pad("pad_out_w"));
                    if (ph == 1 && sh != 2) || (pw == 1 && sw != 2) {
                        return Err("upsample_param.pad_out_h / pad_out_w require a scale of 2 on that axis (the output size is ill-defined otherwise)".into());
                    }
                    let h = b[2].checked_mul(sh).ok_or("overflow")?;
                    let w = b[3].checked_mul(sw).ok_or("overflow")?;
                    (h - ph, w - pw)
                }
            };
            Ok((vec![vec![b[0], b[1], h, w]], vec![]))
        }
        "Interp" => interp(l, bottoms),
        "Proposal" | "Python" => match crate::rcnn::ProposalParams::from_layer(l)? {
            Some(p) => crate::rcnn::proposal_shapes(&p, bottoms, n_tops),
            None => Err(format!(
                "Python layer {} has no shape rule (only py-faster-rcnn's rpn.proposal_layer.ProposalLayer is known)",
                crate::rcnn::python_layer_name(l)
            )),
        },
        "ROIPooling" => crate::rcnn::roi_pooling_shapes(l, bottoms),
        "PSROIPooling" => crate::rcnn::psroi_pooling_shapes(l, bottoms),
        "Reorg" => reorg(l, bottoms),
        "Region" => region(l, bottoms),
        other => Err(format!("no shape rule for layer type {other:?}")),
    }
}

fn per_axis(
    name: &str,
    values: &[u32],
    h: Option<u32>,
    w: Option<u32>,
    n: usize,
    default: Option<usize>,
) -> R<Vec<usize>> {
    // Caffe reads these uint32 fields into int: past INT_MAX they are negative there,
    // and its `> 0` checks (or the shape arithmetic) refuse them.
    if let Some(v) = values
        .iter()
        .chain(h.iter())
        .chain(w.iter())
        .find(|&&v| v > i32::MAX as u32)
    {
        return Err(format!(
            "{name} {v} is beyond Caffe's int range (it reads {})",
            *v as i32
        ));
    }
    if h.is_some() || w.is_some() {
        if n != 2 {
            return Err(format!(
                "{name}_h & {name}_w can only be used for 2D convolution"
            ));
        }
        if !values.is_empty() {
            return Err(format!(
                "either {name} or {name}_h/w should be specified; not both"
            ));
        }
        return Ok(vec![u(h.unwrap_or(0)), u(w.unwrap_or(0))]);
    }
    match (values.len(), default) {
        (0, Some(d)) => Ok(vec![d; n]),
        (1, _) => Ok(vec![u(values[0]); n]),
        (k, _) if k == n => Ok(values.iter().map(|&v| u(v)).collect()),
        (k, _) => Err(format!(
            "{name} must be specified once, or once per spatial dimension ({name} given {k} times; {n} spatial dims)"
        )),
    }
}

/// Kernel, stride, pad and dilation of a convolution with `n` spatial axes
/// (`BaseConvolutionLayer::LayerSetUp`).
fn conv_axes(cp: &proto::ConvolutionParameter, n: usize) -> R<[Vec<usize>; 4]> {
    let kernel = per_axis(
        "kernel_size",
        &cp.kernel_size,
        cp.kernel_h,
        cp.kernel_w,
        n,
        None,
    )?;
    if kernel.contains(&0) {
        return Err(format!("filter dimensions must be nonzero, got {kernel:?}"));
    }
    let stride = per_axis("stride", &cp.stride, cp.stride_h, cp.stride_w, n, Some(1))?;
    if stride.contains(&0) {
        return Err(format!("stride dimensions must be nonzero, got {stride:?}"));
    }
    let pad = per_axis("pad", &cp.pad, cp.pad_h, cp.pad_w, n, Some(0))?;
    let dilation = per_axis("dilation", &cp.dilation, None, None, n, Some(1))?;
    if dilation.contains(&0) {
        return Err(format!("dilation must be nonzero, got {dilation:?}"));
    }
    Ok([kernel, stride, pad, dilation])
}

fn conv(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<(Shapes, ConvGeom)> {
    at_least(bottoms, 1)?;
    if bottoms.len() != l.tops.len() {
        return Err(format!(
            "has {} bottoms and {} tops (one top per bottom)",
            bottoms.len(),
            l.tops.len()
        ));
    }
    let cp = l.param.convolution_param.clone().unwrap_or_default();
    let b = &bottoms[0];
    for o in &bottoms[1..] {
        if o != b {
            return Err(format!(
                "all bottoms must have the same shape: {b:?} vs {o:?}"
            ));
        }
    }
    let ca = axis(cp.axis(), b.len(), "axis")?;
    let n = b.len() - ca - 1;
    let [kernel, stride, pad, dilation] = conv_axes(&cp, n)?;
    let channels = b[ca];
    let num_output = u(cp.num_output());
    if num_output == 0 {
        return Err("num_output must be set (> 0)".into());
    }
    let group = if l.kind == "ConvolutionDepthwise" {
        // The depthwise fork layer: one group per input channel.
        if channels == 0 || !num_output.is_multiple_of(channels) {
            return Err(format!(
                "depthwise: num_output {num_output} must be a multiple of the {channels} input channels"
            ));
        }
        channels
    } else {
        u(cp.group())
    };
    if group == 0 || !channels.is_multiple_of(group) || !num_output.is_multiple_of(group) {
        return Err(format!(
            "channels {channels} and num_output {num_output} must be multiples of group {group}"
        ));
    }
    let deconv = l.kind == "Deconvolution";
    let g = ConvGeom {
        axis: ca,
        kernel,
        stride,
        pad,
        dilation,
        channels,
        num_output,
        group,
        bias_term: cp.bias_term(),
        transposed: deconv,
    };
    let mut top = b[..=ca].to_vec();
    top[ca] = num_output;
    for i in 0..n {
        let input = b[ca + 1 + i];
        let extent = g.dilation[i]
            .checked_mul(g.kernel[i] - 1)
            .and_then(|x| x.checked_add(1))
            .ok_or("overflow")?;
        let out = if deconv {
            // stride * (in - 1) + extent - 2 * pad
            let grown = g.stride[i]
                .checked_mul(input.saturating_sub(1))
                .and_then(|x| x.checked_add(extent))
                .ok_or("overflow")?;
            let pad2 = g.pad[i].checked_mul(2).ok_or("overflow")?;
            if input == 0 || grown <= pad2 {
                return Err(format!(
                    "deconvolution output size is not positive on spatial axis {i} (input {input}, kernel extent {extent}, stride {}, pad {})",
                    g.stride[i], g.pad[i]
                ));
            }
            grown - pad2
        } else {
            let padded = g.pad[i]
                .checked_mul(2)
                .and_then(|x| x.checked_add(input))
                .ok_or("overflow")?;
            if padded < extent {
                return Err(format!(
                    "kernel extent {extent} (kernel {}, dilation {}) larger than the padded input {padded} (input {input}, pad {}) on spatial axis {i}",
                    g.kernel[i], g.dilation[i], g.pad[i]
                ));
            }
            (padded - extent) / g.stride[i] + 1
        };
        top.push(out);
    }
    let mut weight = if deconv {
        vec![channels, num_output / group]
    } else {
        vec![num_output, channels / group]
    };
    weight.extend_from_slice(&g.kernel);
    let mut params = vec![weight];
    if g.bias_term {
        params.push(vec![num_output]);
    }
    Ok(((vec![top; bottoms.len()], params), g))
}

fn pooling(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<(Shapes, PoolGeom)> {
    exactly(bottoms, 1)?;
    let pp = l.param.pooling_param.unwrap_or_default();
    let b = &bottoms[0];
    if b.len() != 4 {
        return Err(format!(
            "input must have 4 axes, corresponding to (num, channels, height, width), got {b:?}"
        ));
    }
    let global = pp.global_pooling();
    let (kh, kw) = if global {
        if pp.kernel_size.is_some() || pp.kernel_h.is_some() || pp.kernel_w.is_some() {
            return Err("with global_pooling: true, filter size cannot be specified".into());
        }
        (b[2], b[3])
    } else {
        match (pp.kernel_size, pp.kernel_h, pp.kernel_w) {
            (Some(k), None, None) => (u(k), u(k)),
            (None, Some(h), Some(w)) => (u(h), u(w)),
            (Some(_), _, _) => {
                return Err("filter size is kernel_size OR kernel_h and kernel_w; not both".into())
            }
            _ => {
                return Err("for non-square filters both kernel_h and kernel_w are required".into())
            }
        }
    };
    if kh == 0 || kw == 0 {
        return Err(format!("filter dimensions must be nonzero, got {kh}x{kw}"));
    }
    let (ph, pw) = match (pp.pad, pp.pad_h, pp.pad_w) {
        (_, None, None) => (u(pp.pad()), u(pp.pad())),
        (None, Some(h), Some(w)) => (u(h), u(w)),
        _ => return Err("pad is pad OR pad_h and pad_w are required".into()),
    };
    let (sh, sw) = match (pp.stride, pp.stride_h, pp.stride_w) {
        (_, None, None) => (u(pp.stride()), u(pp.stride())),
        (None, Some(h), Some(w)) => (u(h), u(w)),
        _ => return Err("stride is stride OR stride_h and stride_w are required".into()),
    };
    if sh == 0 || sw == 0 {
        return Err("stride must be nonzero".into());
    }
    if global && (ph != 0 || pw != 0 || sh != 1 || sw != 1) {
        return Err("with global_pooling: true, only pad = 0 and stride = 1".into());
    }
    if (ph != 0 || pw != 0) && (ph >= kh || pw >= kw) {
        return Err(format!(
            "pad {ph}x{pw} must be smaller than the kernel {kh}x{kw}"
        ));
    }
    let floor = match (pp.round_mode, pp.ceil_mode) {
        (Some(r), Some(c)) if (r == proto::pooling_parameter::RoundMode::Floor as i32) == c => {
            return Err("round_mode and ceil_mode disagree".into())
        }
        (Some(r), _) => r == proto::pooling_parameter::RoundMode::Floor as i32,
        (None, Some(c)) => !c,
        (None, None) => false,
    };
    let out = |input: usize, k: usize, p: usize, s: usize, what: &str| -> R<usize> {
        let padded = input.checked_add(2 * p).ok_or("overflow")?;
        if padded < k {
            return Err(format!(
                "kernel {k} larger than the padded input {padded} (input {input}, pad {p}) on the {what} axis"
            ));
        }
        let span = padded - k;
        let mut o = if floor { span / s } else { span.div_ceil(s) } + 1;
        // Caffe: the last window must start inside the image or its left padding.
        if (ph != 0 || pw != 0) && (o - 1) * s >= input + p {
            o -= 1;
        }
        Ok(o)
    };
    let oh = out(b[2], kh, ph, sh, "height")?;
    let ow = out(b[3], kw, pw, sw, "width")?;
    let top = vec![b[0], b[1], oh, ow];
    let n = l.tops.len();
    if n == 0 || n > 2 {
        return Err(format!("takes 1 or 2 tops (output, mask), got {n}"));
    }
    let g = PoolGeom {
        method: pp.pool(),
        global,
        kernel: [kh, kw],
        stride: [sh, sw],
        pad: [ph, pw],
        ceil: !floor,
        pooled: [oh, ow],
    };
    Ok(((vec![top; n], vec![]), g))
}

/// Caffe's `ReshapeLayer::Reshape`: 0 copies a bottom dim, one -1 is inferred; `axis`
/// and `num_axes` choose the replaced range.
fn reshape(rp: proto::ReshapeParameter, b: &[usize]) -> R<Vec<usize>> {
    let dims = rp.shape.as_ref().map(|s| s.dim.clone()).unwrap_or_default();
    let rank = b.len() as i64;
    let a = i64::from(rp.axis());
    let start = if a >= 0 { a } else { rank + a + 1 };
    if start < 0 || start > rank {
        return Err(format!("axis {a} out of range for {b:?}"));
    }
    let num_axes = i64::from(rp.num_axes());
    if num_axes < -1 {
        return Err(format!("num_axes must be >= -1, got {num_axes}"));
    }
    let end = if num_axes == -1 {
        rank
    } else {
        start + num_axes
    };
    if end > rank {
        return Err(format!("axis + num_axes = {end} beyond {b:?}"));
    }
    let (start, end) = (start as usize, end as usize);
    let mut top: Vec<usize> = b[..start].to_vec();
    let mut inferred = None;
    let mut explicit: usize = 1;
    for (i, &d) in dims.iter().enumerate() {
        match d {
            0 => {
                let src = start + i;
                let v = *b.get(src).ok_or_else(|| {
                    format!("dim {i} is 0 (copy) but the bottom {b:?} has no axis {src}")
                })?;
                explicit = explicit.checked_mul(v).ok_or("overflow")?;
                top.push(v);
            }
            -1 => {
                if inferred.replace(top.len()).is_some() {
                    return Err("new shape contains multiple -1 dims".into());
                }
                top.push(0);
            }
            d if d < -1 => return Err(format!("dim {d} is not >= -1")),
            d => {
                let d = usize::try_from(d).map_err(|_| "dim too large".to_string())?;
                explicit = explicit.checked_mul(d).ok_or("overflow")?;
                top.push(d);
            }
        }
    }
    top.extend_from_slice(&b[end..]);
    let total = count(b)?;
    let kept = count(&b[..start])?
        .checked_mul(count(&b[end..])?)
        .ok_or("overflow")?;
    let known = explicit.checked_mul(kept).ok_or("overflow")?;
    if let Some(i) = inferred {
        if known == 0 || total % known != 0 {
            return Err(format!(
                "bottom count ({total}) must be divisible by the product of the specified dimensions ({known})"
            ));
        }
        top[i] = total / known;
    }
    if count(&top)? != total {
        return Err(format!(
            "output count {} must match input count {total} ({b:?} -> {top:?})",
            count(&top)?
        ));
    }
    Ok(top)
}

/// SSD's `DetectionOutputLayer::LayerSetUp` and `Reshape` checks (weiliu89
/// `detection_output_layer.cpp`), with the counts per image compared as OpenCV does
/// (`count(1)`, which Caffe's `channels()` is for SSD's 2-D blobs).
fn detection_output_checks(dp: &proto::DetectionOutputParameter, bottoms: &[Vec<usize>]) -> R<()> {
    let classes = match dp.num_classes {
        Some(c) if c > 0 => c as usize,
        _ => return Err("must specify num_classes (a positive number)".into()),
    };
    let (loc, conf, prior) = (&bottoms[0], &bottoms[1], &bottoms[2]);
    // Caffe reads `height()` (axis 2); axes after it of size 1 (OpenCV's VGG16 Faster
    // R-CNN reshapes its proposals to [1, 1, R*4, 1]) leave the layout as it is.
    if prior.len() < 3 || prior[2] % 4 != 0 || prior[3..].iter().any(|&d| d != 1) {
        return Err(format!(
            "the prior bottom has shape {prior:?}: [1, 2, priors * 4] expected"
        ));
    }
    let priors = prior[2] / 4;
    let num_loc = if dp.share_location() { 1 } else { classes };
    let per = |s: &[usize]| s.iter().skip(1).try_fold(1usize, |a, &d| a.checked_mul(d));
    let (loc_n, conf_n) = (per(loc).ok_or("overflow")?, per(conf).ok_or("overflow")?);
    let want = priors
        .checked_mul(num_loc)
        .and_then(|x| x.checked_mul(4))
        .ok_or("overflow")?;
    if loc_n != want {
        return Err(format!(
            "the location bottom has {loc_n} values per image, the priors need {want} ({priors} priors x {})",
            if num_loc == 1 {
                "4 coordinates, shared locations".to_string()
            } else {
                format!("{num_loc} classes x 4 coordinates")
            }
        ));
    }
    let want = priors.checked_mul(classes).ok_or("overflow")?;
    if conf_n != want {
        return Err(format!(
            "the confidence bottom has {conf_n} values per image, the priors need {want} ({priors} priors x {classes} classes)"
        ));
    }
    if loc.first() != conf.first() {
        return Err(format!(
            "the location bottom has {} images, the confidence bottom {}",
            loc.first().copied().unwrap_or(0),
            conf.first().copied().unwrap_or(0)
        ));
    }
    Ok(())
}

/// The most `aspect_ratio` values a PriorBox may list (SSD's nets give at most 3).
const MAX_ASPECT_RATIOS: usize = 1024;

/// Number of priors per location of SSD's PriorBox (`PriorBoxLayer::LayerSetUp`), and
/// of OpenCV's PriorBox / PriorBoxClustered with explicit sizes and offset lists.
fn prior_count(pp: &proto::PriorBoxParameter) -> R<usize> {
    if pp.offset_h.len() != pp.offset_w.len() {
        return Err(format!(
            "{} offset_h but {} offset_w values",
            pp.offset_h.len(),
            pp.offset_w.len()
        ));
    }
    // weiliu89's PriorBoxLayer::LayerSetUp checks, plus finiteness (a NaN or infinite
    // size, step or offset gives NaN boxes, where Caffe's `> 0` checks let infinity by).
    let positive = |what: &str, v: f32| {
        if v > 0.0 && v.is_finite() {
            Ok(())
        } else {
            Err(format!("prior_box_param.{what} must be positive, got {v}"))
        }
    };
    finite("prior_box_param.offset", pp.offset())?;
    for v in pp.offset_h.iter().chain(&pp.offset_w) {
        finite("prior_box_param.offset_h/offset_w", *v)?;
    }
    match pp.variance.len() {
        0 | 1 | 4 => {}
        n => {
            return Err(format!(
                "prior_box_param.variance must be given once or 4 times, got {n}"
            ))
        }
    }
    for &v in &pp.variance {
        positive("variance", v)?;
    }
    if pp.img_h.is_some() || pp.img_w.is_some() {
        if pp.img_size.is_some() {
            return Err(
                "prior_box_param: either img_size or img_h/img_w should be specified; not both"
                    .into(),
            );
        }
        if pp.img_h() == 0 || pp.img_w() == 0 {
            return Err(format!(
                "prior_box_param.img_h and img_w should both be larger than 0, got {} and {}",
                pp.img_h(),
                pp.img_w()
            ));
        }
    } else if pp.img_size == Some(0) {
        return Err("prior_box_param.img_size should be larger than 0".into());
    }
    if pp.step_h.is_some() || pp.step_w.is_some() {
        if pp.step.is_some() {
            return Err(
                "prior_box_param: either step or step_h/step_w should be specified; not both"
                    .into(),
            );
        }
        positive("step_h", pp.step_h())?;
        positive("step_w", pp.step_w())?;
    } else if let Some(step) = pp.step {
        positive("step", step)?;
    }
    let offsets = pp.offset_h.len().max(1);
    if !pp.width.is_empty() || !pp.height.is_empty() {
        // OpenCV's explicit box sizes.
        if pp.width.len() != pp.height.len() {
            return Err("width and height must be given the same number of times".into());
        }
        for (&w, &h) in pp.width.iter().zip(&pp.height) {
            positive("width", w)?;
            positive("height", h)?;
        }
        return Ok(pp.width.len() * offsets);
    }
    if pp.min_size.is_empty() {
        return Err("must specify min_size (or width and height: OpenCV's explicit box sizes, which PriorBoxClustered needs)".into());
    }
    for &m in &pp.min_size {
        positive("min_size", m)?;
    }
    // Caffe keeps the distinct ones by comparing each with those kept (quadratic);
    // published nets give a handful.
    if pp.aspect_ratio.len() > MAX_ASPECT_RATIOS {
        return Err(format!(
            "prior_box_param gives {} aspect_ratio values; at most {MAX_ASPECT_RATIOS} are read",
            pp.aspect_ratio.len()
        ));
    }
    for &ar in &pp.aspect_ratio {
        // Caffe does not check: 0 gives an infinite flip, a negative one NaN boxes.
        positive("aspect_ratio", ar)?;
    }
    let mut ratios: Vec<f32> = vec![1.0];
    for &ar in &pp.aspect_ratio {
        if ratios.iter().any(|&r| (ar - r).abs() < 1e-6) {
            continue;
        }
        ratios.push(ar);
        if pp.flip() {
            ratios.push(1.0 / ar);
        }
    }
    let mut n = ratios.len() * pp.min_size.len();
    if !pp.max_size.is_empty() {
        if pp.max_size.len() != pp.min_size.len() {
            return Err("max_size must be given once per min_size".into());
        }
        for (mx, mn) in pp.max_size.iter().zip(&pp.min_size) {
            if mx.partial_cmp(mn) != Some(std::cmp::Ordering::Greater) || !mx.is_finite() {
                return Err(format!("max_size {mx} must be greater than min_size {mn}"));
            }
            n += 1;
        }
    }
    Ok(n * offsets)
}

/// PSPNet/DeepLab `InterpLayer::Reshape`.
fn interp(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<Shapes> {
    at_least(bottoms, 1)?;
    let b = &bottoms[0];
    if b.len() != 4 {
        return Err(format!("input must have 4 axes, got {b:?}"));
    }
    // Typed, with "set or not" kept: the rules below depend on which fields are given.
    let ip = l.param.interp_param.unwrap_or_default();
    let pad_beg = i64::from(ip.pad_beg());
    let pad_end = i64::from(ip.pad_end());
    if pad_beg > 0 || pad_end > 0 {
        return Err("only cropping (pad_beg, pad_end <= 0) is supported".into());
    }
    let eff = |d: usize| -> R<i64> {
        let e = d as i64 + pad_beg + pad_end;
        if e <= 0 {
            return Err(format!("input {d} cropped to nothing"));
        }
        Ok(e)
    };
    let (hin, win) = (eff(b[2])?, eff(b[3])?);
    let get = |v: Option<i32>| v.map(i64::from);
    let (zoom, shrink) = (get(ip.zoom_factor), get(ip.shrink_factor));
    let check = |v: i64, what: &str| {
        if v < 1 {
            Err(format!("{what} must be >= 1, got {v}"))
        } else {
            Ok(v)
        }
    };
    let (h, w) = match (shrink, zoom, get(ip.height), get(ip.width)) {
        (Some(s), None, _, _) => {
            let s = check(s, "shrink_factor")?;
            ((hin - 1) / s + 1, (win - 1) / s + 1)
        }
        (None, Some(z), _, _) => {
            let z = check(z, "zoom_factor")?;
            (hin + (hin - 1) * (z - 1), win + (win - 1) * (z - 1))
        }
        (None, None, Some(h), Some(w)) => (h, w),
        (Some(s), Some(z), _, _) => {
            let (s, z) = (check(s, "shrink_factor")?, check(z, "zoom_factor")?);
            let (h, w) = ((hin - 1) / s + 1, (win - 1) / s + 1);
            (h + (h - 1) * (z - 1), w + (w - 1) * (z - 1))
        }
        _ if bottoms.len() == 2 && bottoms[1].len() == 4 => {
            (bottoms[1][2] as i64, bottoms[1][3] as i64)
        }
        _ => return Err(
            "interp_param needs zoom_factor, shrink_factor, height and width, or a second bottom"
                .into(),
        ),
    };
    if h <= 0 || w <= 0 || h > i64::from(i32::MAX) || w > i64::from(i32::MAX) {
        return Err(format!("output size {h}x{w} out of range"));
    }
    Ok((vec![vec![b[0], b[1], h as usize, w as usize]], vec![]))
}

/// The YOLOv2 ports' `Reorg` (gklz1982/caffe-yolov2 and BirdeeChen/caffe_yolo_v2
/// `reorg_layer.cpp`): `[N, C, H, W]` to `[N, C s², H/s, W/s]`, or with `reverse` to
/// `[N, C/s², H s, W s]`. The ports do not check divisibility (their loops then read
/// outside the input): refused here, naming the numbers. An unset stride is 2
/// (choasup/caffe-yolo9000's default and OpenCV's; gklz1982's and BirdeeChen's ports
/// require the field).
fn reorg(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<Shapes> {
    exactly(bottoms, 1)?;
    let b = &bottoms[0];
    if b.len() != 4 {
        return Err(format!("input must have 4 axes, got {b:?}"));
    }
    let rp = l.param.reorg_param.unwrap_or_default();
    let s = rp.stride.unwrap_or(2) as usize;
    if s == 0 {
        return Err("reorg_param.stride must be positive, got 0".into());
    }
    let ss = s.checked_mul(s).ok_or("stride overflows")?;
    if !b[1].is_multiple_of(ss) {
        return Err(format!(
            "reorg stride {s}: the {} input channels are not a multiple of stride² = {ss}",
            b[1]
        ));
    }
    let top = if rp.reverse() {
        vec![
            b[0],
            b[1] / ss,
            b[2].checked_mul(s).ok_or("overflow")?,
            b[3].checked_mul(s).ok_or("overflow")?,
        ]
    } else {
        for (what, d) in [("height", b[2]), ("width", b[3])] {
            if d % s != 0 {
                return Err(format!(
                    "reorg stride {s} does not divide the input {what} {d}"
                ));
            }
        }
        vec![
            b[0],
            b[1].checked_mul(ss).ok_or("overflow")?,
            b[2] / s,
            b[3] / s,
        ]
    };
    Ok((vec![top], vec![]))
}

impl LayerDef {
    /// Whether this `DetectionOutput` is the YOLOv2 ports' layer of that name
    /// (gklz1982/caffe-yolov2, BirdeeChen/caffe_yolo_v2: Darknet's box decoding and
    /// NMS over one bottom) rather than SSD's: it sets one of the YOLO ports' fields
    /// (`side`, `classes`, `num_box`, `coords`, `nms_threshold`, `biases`,
    /// `label_map_file`) or has a single bottom (SSD's takes three or four).
    ///
    /// ```
    /// use tensorfmt_caffe::{parse_net, Schema};
    /// let net = parse_net("layer { name: 'o' type: 'DetectionOutput' bottom: 'x' top: 'o' \
    ///     detection_output_param { classes: 20 biases: 1.08 biases: 1.19 } }",
    ///     Schema::builtin(), &Default::default())?;
    /// assert!(net.layers[0].is_yolo_detection_output());
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn is_yolo_detection_output(&self) -> bool {
        if self.kind != "DetectionOutput" {
            return false;
        }
        let yolo_fields = self.param.detection_output_param.as_ref().is_some_and(|p| {
            p.side.is_some()
                || p.classes.is_some()
                || p.num_box.is_some()
                || p.coords.is_some()
                || p.nms_threshold.is_some()
                || !p.biases.is_empty()
                || p.label_map_file.is_some()
        });
        yolo_fields || self.bottoms.len() == 1
    }
}

/// The YOLOv2 ports' `DetectionOutput` (BirdeeChen/caffe_yolo_v2
/// `detection_output_layer.cpp`): one bottom `[1, num_box (5 + classes), side, side]`
/// (its `Reshape` checks the batch is 1; its loops index `side` x `side` cells, so the
/// map must be that size), `2 num_box` biases; top `[1, 1, 1, 7]` at setup (the
/// forward resizes it to the detections kept).
fn yolo_detection_output(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<Shapes> {
    exactly(bottoms, 1)?;
    let b = &bottoms[0];
    let p = l.param.detection_output_param.clone().unwrap_or_default();
    if b.len() != 4 {
        return Err(format!("input must have 4 axes, got {b:?}"));
    }
    if b[0] != 1 {
        return Err(format!(
            "the YOLO DetectionOutput takes a batch of 1 (its Reshape checks num() == 1), got {}",
            b[0]
        ));
    }
    let side = u(p.side());
    if b[2] != side || b[3] != side {
        return Err(format!(
            "side {side}, but the input map is {} x {}",
            b[2], b[3]
        ));
    }
    let classes = u(p.classes.or(p.num_classes).unwrap_or(20));
    if classes == 0 {
        // class_index_and_score reads the first class score past the box's entries.
        return Err("classes 0: each box needs at least one class score".into());
    }
    let nms = p.nms_threshold();
    if !nms.is_finite() {
        return Err(format!(
            "nms_threshold {nms} is not a number an IoU compares with"
        ));
    }
    if let Some(b) = p.biases.iter().find(|b| !b.is_finite()) {
        return Err(format!("bias {b}: anchors must be finite"));
    }
    let boxes = u(p.num_box());
    let want = classes
        .checked_add(5)
        .and_then(|v| v.checked_mul(boxes))
        .ok_or("overflow")?;
    if b[1] != want || want == 0 {
        return Err(format!(
            "{} input channels, but num_box {boxes} x (5 + classes {classes}) = {want}",
            b[1]
        ));
    }
    if p.biases.len() < 2 * boxes {
        return Err(format!(
            "{} biases, num_box {boxes} needs {} (a width and a height each)",
            p.biases.len(),
            2 * boxes
        ));
    }
    Ok((vec![vec![1, 1, 1, 7]], vec![]))
}

/// BirdeeChen/caffe_yolo_v2's `Region` (`region_layer.cpp`): same shape; the channels
/// must hold `boxes_of_each_grid` boxes of `coords + 1 + classes` entries (the port
/// indexes them so without checking).
fn region(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<Shapes> {
    exactly(bottoms, 1)?;
    let b = &bottoms[0];
    if b.len() != 4 {
        return Err(format!("input must have 4 axes, got {b:?}"));
    }
    let rp = l.param.region_param.clone().unwrap_or_default();
    let per_box = u(rp.coords())
        .checked_add(1)
        .and_then(|v| v.checked_add(u(rp.classes())))
        .ok_or("overflow")?;
    let want = per_box
        .checked_mul(u(rp.boxes_of_each_grid()))
        .ok_or("overflow")?;
    if b[1] != want || want == 0 {
        return Err(format!(
            "{} input channels, but boxes_of_each_grid {} x (coords {} + 1 + classes {}) = {want}",
            b[1],
            rp.boxes_of_each_grid(),
            rp.coords(),
            rp.classes()
        ));
    }
    Ok((vec![b.clone()], vec![]))
}

/// BVLC `LSTM` and `RNN` (`recurrent_layer.cpp` `LayerSetUp`/`Reshape`,
/// `lstm_layer.cpp`, `rnn_layer.cpp`): bottoms `x` `[T, N, ...]`, `cont` `[T, N]`, an
/// optional static input `[N, ...]`, then with `expose_hidden` the initial states
/// `[1, N, H]` (LSTM h_0, c_0; RNN h_0). Tops: `[T, N, H]`, then with `expose_hidden`
/// the final states. Blobs: LSTM `W_xc [4H, D]`, `b_c [4H]`, (`W_xc_static [4H, S]`),
/// `W_hc [4H, H]`; RNN `W_xh [H, D]`, `b_h [H]`, (`W_xh_static [H, S]`), `W_hh [H, H]`,
/// `W_ho [H, H]`, `b_o [H]`, with `D` and `S` the inputs' dims after the first two /
/// the first, multiplied.
fn recurrent(l: &LayerDef, bottoms: &[Vec<usize>]) -> R<Shapes> {
    let lstm = l.kind == "LSTM";
    let rp = l.param.recurrent_param.clone().unwrap_or_default();
    let n_recur = if lstm { 2 } else { 1 };
    let exposed = if rp.expose_hidden() { n_recur } else { 0 };
    let min = 2 + exposed;
    if bottoms.len() < min || bottoms.len() > min + 1 {
        return Err(format!(
            "takes {min} or {} bottoms (x, cont, [x_static]{}), got {}",
            min + 1,
            match (rp.expose_hidden(), lstm) {
                (false, _) => "",
                (true, true) => ", h_0, c_0",
                (true, false) => ", h_0",
            },
            bottoms.len()
        ));
    }
    let h = u(rp.num_output());
    if h == 0 {
        return Err("recurrent_param.num_output must be positive".into());
    }
    let x = &bottoms[0];
    if x.len() < 2 {
        return Err(format!(
            "x {x:?} must have at least 2 axes (timesteps T, streams N, ...)"
        ));
    }
    let (t, n) = (x[0], x[1]);
    let cont = &bottoms[1];
    if cont.len() != 2 || cont[0] != t || cont[1] != n {
        return Err(format!(
            "cont {cont:?} must be [T, N] = [{t}, {n}] (x is {x:?})"
        ));
    }
    let d = count(&x[2..])?;
    let static_input = bottoms.len() > 2 + exposed;
    let mut s_dim = None;
    if static_input {
        let xs = &bottoms[2];
        if xs.is_empty() || xs[0] != n {
            return Err(format!(
                "static input {xs:?} must be [N, ...] with N = {n} (the streams of x {x:?})"
            ));
        }
        s_dim = Some(count(&xs[1..])?);
    }
    let state = vec![1, n, h];
    let first_state = 2 + usize::from(static_input);
    for (j, b) in bottoms.iter().enumerate().skip(first_state) {
        if *b != state {
            let what = ["h_0", "c_0"][j - first_state];
            return Err(format!(
                "{what} {b:?} must be [1, N, num_output] = {state:?}"
            ));
        }
    }
    let rows = if lstm {
        h.checked_mul(4).ok_or("overflow")?
    } else {
        h
    };
    let mut params = vec![vec![rows, d], vec![rows]];
    if let Some(s) = s_dim {
        params.push(vec![rows, s]);
    }
    params.push(vec![rows, h]);
    if !lstm {
        params.push(vec![h, h]);
        params.push(vec![h]);
    }
    let mut tops = vec![vec![t, n, h]];
    tops.extend(std::iter::repeat_n(state, exposed));
    Ok((tops, params))
}

/// Random parameter blobs for every layer with parameters, shaped by `shapes`, for
/// tests that write a caffemodel with [`crate::write_weights_model`]. Deterministic for
/// a seed. Weights are uniform in ±sqrt(3 / fan_in) (variance 1/fan_in), biases in
/// ±0.1; BatchNorm gets means in ±0.1, variances in [0.5, 1.5] and a scale factor of 1;
/// Scale/BN multipliers lie in [0.5, 1.5], PReLU slopes in [0, 0.5].
///
/// ```
/// use tensorfmt_caffe::{infer_shapes, parse_net, random_weights, Schema};
/// let text = "input: 'x' input_dim: 1 input_dim: 2 input_dim: 4 input_dim: 4\n\
///   layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'x' }";
/// let net = parse_net(text, Schema::builtin(), &Default::default())?;
/// let w = random_weights(&net, &infer_shapes(&net, &[])?, 7);
/// assert_eq!(w[0].0, "bn");
/// assert!(w[0].1[1].to_vec::<f32>()?.iter().all(|&v| v >= 0.5));
/// assert_eq!(w[0].1[2].to_vec::<f32>()?, vec![1.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn random_weights(net: &NetDef, shapes: &NetShapes, seed: u64) -> Vec<(String, Vec<Tensor>)> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::new();
    for (l, s) in net.layers.iter().zip(&shapes.layers) {
        if s.params.is_empty() {
            continue;
        }
        let mut blobs = Vec::with_capacity(s.params.len());
        for (j, shape) in s.params.iter().enumerate() {
            let n: usize = shape.iter().product();
            let (lo, hi) = param_range(l, j, shape, s);
            let values: Vec<f32> = if l.kind == "BatchNorm" && j == 2 {
                vec![1.0; n]
            } else {
                (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect()
            };
            // The count was checked against INT_MAX by infer_shapes, and `values` has
            // exactly that many elements, so this cannot fail.
            let t = Tensor::from_vec(values, shape.clone(), Order::RowMajor)
                .expect("values match the shape");
            blobs.push(t);
        }
        out.push((l.name.clone(), blobs));
    }
    out
}

fn param_range(l: &LayerDef, j: usize, shape: &[usize], s: &LayerShapes) -> (f32, f32) {
    let kind = l.kind.as_str();
    match (kind, j) {
        ("BatchNorm", 0) => (-0.1, 0.1),
        ("BatchNorm", 1) => (0.5, 1.5),
        ("BatchNorm", _) => (0.5, 1.5),
        ("BN", 0) => (0.5, 1.5),
        ("BN", 1) | ("BN", 2) => (-0.1, 0.1),
        ("BN", _) => (0.5, 1.5),
        ("Scale", 0) if s.bottoms.len() == 1 => (0.5, 1.5),
        ("Normalize", _) => (0.5, 1.5),
        ("PReLU", _) => (0.0, 0.5),
        // Recurrent weight matrices [rows, fan_in]; their biases stay in ±0.1.
        ("LSTM" | "RNN", _) if shape.len() == 2 => {
            let a = (3.0 / shape[1].max(1) as f32).sqrt();
            (-a, a)
        }
        ("Convolution" | "ConvolutionDepthwise" | "Deconvolution" | "InnerProduct", 0) => {
            let fan_in: usize = match kind {
                "InnerProduct" => {
                    let transpose = l
                        .param
                        .inner_product_param
                        .as_ref()
                        .is_some_and(|p| p.transpose());
                    shape[usize::from(!transpose)]
                }
                _ => shape[1..].iter().product(),
            };
            let a = (3.0 / fan_in.max(1) as f32).sqrt();
            (-a, a)
        }
        _ => (-0.1, 0.1),
    }
}

/// SplitMix64: a tiny deterministic generator (no dependency).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}
