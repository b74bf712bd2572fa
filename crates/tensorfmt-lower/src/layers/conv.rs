//! Convolution, ConvolutionDepthwise, Deconvolution and InnerProduct
//! (BVLC `base_conv_layer.cpp`, `conv_layer.cpp`, `deconv_layer.cpp`,
//! `inner_product_layer.cpp`).

use tensorfmt_caffe::proto::ConvolutionParameter;

use super::{axis, LayerCx};
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

/// 2-D geometry of a convolution: kernel, pad, stride, dilation as (h, w).
struct Geometry {
    k: [usize; 2],
    p: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
}

fn pair(
    v: &[u32],
    h: Option<u32>,
    w: Option<u32>,
    default: u32,
    what: &str,
) -> LResult<[usize; 2]> {
    if h.is_some() || w.is_some() {
        if !v.is_empty() {
            return Err(Fail::new(format!(
                "{what} is given both as {what}_h/{what}_w and as {what}"
            )));
        }
        return Ok([h.unwrap_or(default) as usize, w.unwrap_or(default) as usize]);
    }
    match v {
        [] => Ok([default as usize; 2]),
        [a] => Ok([*a as usize; 2]),
        [a, b] => Ok([*a as usize, *b as usize]),
        _ => Err(Fail::not_lowered(format!(
            "{} {what} values: only 2-D convolutions are lowered",
            v.len()
        ))),
    }
}

fn geometry(p: &ConvolutionParameter) -> LResult<Geometry> {
    if p.kernel_size.is_empty() && p.kernel_h.is_none() && p.kernel_w.is_none() {
        return Err(Fail::new("no kernel_size (or kernel_h/kernel_w)"));
    }
    if p.kernel_size.is_empty() && (p.kernel_h.is_none() || p.kernel_w.is_none()) {
        return Err(Fail::new("kernel_h and kernel_w must both be given"));
    }
    let g = Geometry {
        k: pair(&p.kernel_size, p.kernel_h, p.kernel_w, 1, "kernel")?,
        p: pair(&p.pad, p.pad_h, p.pad_w, 0, "pad")?,
        s: pair(&p.stride, p.stride_h, p.stride_w, 1, "stride")?,
        d: pair(&p.dilation, None, None, 1, "dilation")?,
    };
    if g.k.contains(&0) || g.s.contains(&0) || g.d.contains(&0) {
        return Err(Fail::new("kernel, stride and dilation must be positive"));
    }
    if p.axis() != 1 {
        return Err(Fail::new(format!(
            "convolution axis {} (only 1 is lowered)",
            p.axis()
        )));
    }
    Ok(g)
}

fn attrs(g: &Geometry, group: usize) -> Vec<tensorfmt_onnx::proto::AttributeProto> {
    let i = |v: [usize; 2]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
    vec![
        attr("kernel_shape", A::Is(i(g.k))),
        attr(
            "pads",
            A::Is(vec![
                g.p[0] as i64,
                g.p[1] as i64,
                g.p[0] as i64,
                g.p[1] as i64,
            ]),
        ),
        attr("strides", A::Is(i(g.s))),
        attr("dilations", A::Is(i(g.d))),
        attr("group", A::I(group as i64)),
    ]
}

fn conv_common(cx: &mut LayerCx<'_>, depthwise: bool, transpose: bool) -> LResult<Vec<Vec<usize>>> {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().convolution_param.clone().unwrap_or_default();
    let g = geometry(&p)?;
    let x = &ins[0].shape;
    if x.len() != 4 {
        return Err(Fail::new(format!(
            "input shape {x:?}: only 4-D (N, C, H, W) convolutions are lowered"
        )));
    }
    let c = x[1];
    let o = p.num_output.ok_or("no num_output")? as usize;
    let group = if depthwise { c } else { p.group() as usize };
    if group == 0 || c % group != 0 || o % group != 0 {
        return Err(Fail::new(format!(
            "group {group} must divide input channels {c} and num_output {o}"
        )));
    }
    let mut out = vec![x[0], o, 0, 0];
    for i in 0..2 {
        let extent = g.d[i] * (g.k[i] - 1) + 1;
        let h = x[2 + i];
        let v = if transpose {
            (g.s[i] * (h - 1) + extent)
                .checked_sub(2 * g.p[i])
                .filter(|&v| v > 0)
        } else {
            (h + 2 * g.p[i]).checked_sub(extent).map(|n| n / g.s[i] + 1)
        };
        out[2 + i] = v.ok_or_else(|| {
            Fail::new(format!(
                "kernel extent {extent} does not fit input {h} with pad {} (axis {})",
                g.p[i],
                2 + i
            ))
        })?;
    }
    let wshape = if transpose {
        vec![c, o / group, g.k[0], g.k[1]]
    } else {
        vec![o, c / group, g.k[0], g.k[1]]
    };
    let bias_term = p.bias_term();
    cx.blobs_at_most(if bias_term { 2 } else { 1 })?;
    let w = cx.blob(0, &wshape)?;
    let mut inputs = vec![ins[0].name.clone(), cx.init("weight", &w)?];
    if bias_term {
        let b = cx.blob(1, &[o])?;
        inputs.push(cx.init("bias", &b)?);
    }
    let op = if transpose { "ConvTranspose" } else { "Conv" };
    cx.op_to(op, inputs, &tops[0], attrs(&g, group));
    Ok(vec![out])
}

/// `Convolution`: ONNX Conv (weights `[O, C/group, kh, kw]`, pads symmetric).
pub(crate) fn convolution(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    conv_common(cx, false, false)
}

/// `ConvolutionDepthwise` (MobileNet/ShuffleNet forks): Conv with group = input channels.
pub(crate) fn depthwise(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    conv_common(cx, true, false)
}

/// `Deconvolution`: ONNX ConvTranspose (weights `[C, O/group, kh, kw]`, Caffe's
/// output size `s*(H-1) + d*(k-1) + 1 - 2p`).
pub(crate) fn deconvolution(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    conv_common(cx, false, true)
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
