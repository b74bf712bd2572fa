//! Convolution, ConvolutionDepthwise, Deconvolution and InnerProduct
//! (BVLC `base_conv_layer.cpp`, `conv_layer.cpp`, `deconv_layer.cpp`,
//! `inner_product_layer.cpp`).

use tensorfmt_caffe::ConvGeom;

use super::context::{axis, LayerCx};
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

/// The ONNX attributes of a 2-D convolution: kernel, symmetric pads, strides,
/// dilations, group.
fn attrs(g: &ConvGeom) -> Vec<tensorfmt_onnx::proto::AttributeProto> {
    let i = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
    let mut pads = i(&g.pad);
    pads.extend(i(&g.pad));
    vec![
        attr("kernel_shape", A::Is(i(&g.kernel))),
        attr("pads", A::Is(pads)),
        attr("strides", A::Is(i(&g.stride))),
        attr("dilations", A::Is(i(&g.dilation))),
        attr("group", A::I(g.group as i64)),
    ]
}

/// Convolution, ConvolutionDepthwise and Deconvolution, from the geometry Caffe's
/// shape rule validated (`tensorfmt_caffe::ConvGeom`: group = input channels for the
/// depthwise type, transposed for Deconvolution).
fn conv_common(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    let (ins, tops) = (cx.ins, cx.tops);
    let g = cx.conv_geom()?;
    let x = &ins[0].shape;
    if x.len() != 4 || g.axis != 1 {
        return Err(Fail::not_lowered(format!(
            "input shape {x:?} with channel axis {}: only 2-D (N, C, H, W) convolutions with axis 1 are lowered",
            g.axis
        )));
    }
    let (c, o, group) = (g.channels, g.num_output, g.group);
    let wshape = if g.transposed {
        vec![c, o / group, g.kernel[0], g.kernel[1]]
    } else {
        vec![o, c / group, g.kernel[0], g.kernel[1]]
    };
    cx.blobs_at_most(if g.bias_term { 2 } else { 1 })?;
    let w = cx.blob(0, &wshape)?;
    let mut inputs = vec![ins[0].name.clone(), cx.init("weight", &w)?];
    if g.bias_term {
        let b = cx.blob(1, &[o])?;
        inputs.push(cx.init("bias", &b)?);
    }
    let op = if g.transposed {
        "ConvTranspose"
    } else {
        "Conv"
    };
    cx.op_to(op, inputs, &tops[0], attrs(g));
    Ok(vec![cx.caffe.tops[0].clone()])
}

/// `Convolution`: ONNX Conv (weights `[O, C/group, kh, kw]`, pads symmetric).
pub(crate) fn convolution(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    conv_common(cx)
}

/// `ConvolutionDepthwise` (MobileNet/ShuffleNet forks): Conv with group = input channels.
pub(crate) fn depthwise(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    conv_common(cx)
}

/// `Deconvolution`: ONNX ConvTranspose (weights `[C, O/group, kh, kw]`, Caffe's
/// output size `s*(H-1) + d*(k-1) + 1 - 2p`).
pub(crate) fn deconvolution(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    conv_common(cx)
}

/// `InnerProduct`: flatten from `axis`, Gemm (transB unless `transpose`), reshape back
/// to `shape[..axis] + [N]`.
pub(crate) fn inner_product(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().inner_product_param.clone().unwrap_or_default();
    let x = &ins[0].shape;
    let a = axis(i64::from(p.axis()), x.len())?;
    let n = p.num_output.ok_or("no num_output")? as usize;
    let m: usize = x[..a].iter().product();
    let k: usize = x[a..].iter().product();
    let bias_term = p.bias_term();
    cx.blobs_at_most(if bias_term { 2 } else { 1 })?;
    let w = cx.blob(
        0,
        &if p.transpose() {
            vec![k, n]
        } else {
            vec![n, k]
        },
    )?;
    let flat = if x.len() == 2 && a == 1 {
        ins[0].name.clone()
    } else if a == 1 {
        cx.op(
            "Flatten",
            vec![ins[0].name.clone()],
            vec![attr("axis", A::I(1))],
        )
    } else {
        cx.reshape_to(&ins[0].name, x, &[m, k], None)?
    };
    let mut inputs = vec![flat, cx.init("weight", &w)?];
    if bias_term {
        let b = cx.blob(1, &[n])?;
        inputs.push(cx.init("bias", &b)?);
    }
    let mut out: Vec<usize> = x[..a].to_vec();
    out.push(n);
    let gemm_attrs = vec![attr("transB", A::I(i64::from(!p.transpose())))];
    if a == 1 {
        cx.op_to("Gemm", inputs, &tops[0], gemm_attrs);
    } else {
        let y = cx.op("Gemm", inputs, gemm_attrs);
        cx.reshape_to(&y, &[m, n], &out, Some(&tops[0]))?;
    }
    Ok(vec![out])
}
