//! Fork layers of segmentation nets: SegNet/ENet/PSPNet `BN`, SegNet/ENet `Upsample`
//! (max-unpooling with the pooling mask) and PSPNet/DeepLab `Interp` (bilinear resize
//! with aligned corners). OpenCV 4 cannot read these nets, so these lowerings follow the
//! forks' sources (alexgkendall/caffe-segnet `bn_layer.cpp`, `upsample_layer.cpp`;
//! hszhao/PSPNet `bn_layer.cpp`, `interp_layer.cpp`) without an independent check.

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// `BN`. SegNet/ENet (2 blobs, `bn_mode: INFERENCE`, statistics folded into the blobs
/// by `compute_bn_statistics.py`): `x * scale + shift`. PSPNet (4 blobs: slope, bias,
/// mean, variance): `slope * (x - mean) / sqrt(var + eps) + bias`, a
/// BatchNormalization.
pub(crate) fn bn(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let x = &ins[0].shape;
    if x.len() != 4 {
        return Err(Fail::new(format!("input shape {x:?}: BN needs 4 axes")));
    }
    let c = x[1];
    let cdims = [1, c, 1, 1];
    match cx.blobs.len() {
        2 => {
            let mode = cx
                .layer
                .fork_field("bn_param", "bn_mode")
                .and_then(|v| v.as_str().map(str::to_string));
            if mode.as_deref() != Some("INFERENCE") {
                return Err(Fail::not_lowered(format!(
                    "bn_mode {} normalises with the batch's statistics; only bn_mode: INFERENCE (statistics folded into the blobs) is lowered",
                    mode.unwrap_or_else(|| "LEARN".into())
                )));
            }
            let s = cx.blob(0, &cdims)?;
            let b = cx.blob(1, &cdims)?;
            let s = cx.init("scale", &s)?;
            let b = cx.init("shift", &b)?;
            let y = cx.op("Mul", vec![ins[0].name.clone(), s], vec![]);
            cx.op_to("Add", vec![y, b], &tops[0], vec![]);
        }
        4 => {
            let eps = cx
                .layer
                .fork_field("bn_param", "eps")
                .and_then(|v| v.as_f64())
                .unwrap_or(1e-5) as f32;
            let mut inputs = vec![ins[0].name.clone()];
            for (i, what) in ["slope", "bias", "mean", "var"].iter().enumerate() {
                let t = cx.blob(i, &cdims)?.reshape(vec![c])?;
                inputs.push(cx.init(what, &t)?);
            }
            cx.op_to(
                "BatchNormalization",
                inputs,
                &tops[0],
                vec![attr("epsilon", A::F(eps))],
            );
        }
        k => {
            cx.blobs_at_most(4)?;
            return Err(Fail::new(format!(
                "{k} blobs (2 for SegNet/ENet, 4 for PSPNet)"
            )));
        }
    }
    Ok(vec![x.clone()])
}

/// `Upsample` with the pooling mask as bottom 1: MaxUnpool to Caffe's output size
/// (`scale * H`, `upsample_h`/`upsample_w`, `pad_out_h`/`pad_out_w`).
pub(crate) fn upsample(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let out = cx.caffe.tops.first().cloned().ok_or("no Caffe shape")?;
    if ins.len() == 1 || !cx.g.masks.contains(&ins[1].name) {
        return Err(Fail::not_lowered(
            "Upsample without the mask top of a max-pooling layer is not lowered",
        ));
    }
    if ins[0].shape != ins[1].shape {
        return Err(Fail::new(format!(
            "bottom {:?} and mask {:?} differ",
            ins[0].shape, ins[1].shape
        )));
    }
    // ONNX's indices address the pooling's input (flattened over N, C, H, W); Caffe's
    // address a plane of the Upsample's output. They agree only when the output is that
    // input's size (SegNet's upsample_h/w and scales restore it); otherwise Caffe puts
    // the values where MaxUnpool cannot.
    if let Some(&[h, w]) = cx.g.mask_inputs.get(&ins[1].name) {
        if [out[2], out[3]] != [h, w] {
            return Err(Fail::not_lowered(format!(
                "the output {}x{} is not the {h}x{w} input of the pooling whose mask it reads: \
                 Caffe's per-plane mask indices place values where ONNX's MaxUnpool cannot",
                out[2], out[3]
            )));
        }
    }
    let x = &ins[0].shape;
    // The indices place every value; kernel and strides only size the output, as
    // (in-1)*s + k - pads. Stride 1 and a kernel of out - in + 1 give Caffe's size
    // with no pads (a pooling with pads made pads >= kernel, which onnxruntime
    // refuses). No output_shape input: it would hold the batch as a constant
    // (--dynamic-batch).
    if out[2] < x[2] || out[3] < x[3] {
        return Err(Fail::new(format!(
            "the output {}x{} is smaller than the input {}x{}",
            out[2], out[3], x[2], x[3]
        )));
    }
    let k = [(out[2] - x[2] + 1) as i64, (out[3] - x[3] + 1) as i64];
    cx.op_to(
        "MaxUnpool",
        vec![ins[0].name.clone(), ins[1].name.clone()],
        &tops[0],
        vec![
            attr("kernel_shape", A::Is(k.to_vec())),
            attr("strides", A::Is(vec![1, 1])),
        ],
    );
    Ok(vec![out])
}

/// `Interp` (hszhao/PSPNet `interp_layer.cpp:10-71`, `util/interp.cpp:13-90`): the
/// input cropped by the non-positive `pad_beg` (top and left) and `pad_end` (bottom
/// and right), then a bilinear resize with aligned corners (the corner pixels of input
/// and output coincide) to Caffe's output size (`shrink_factor`, `zoom_factor`,
/// `height`/`width`, both factors, or a second bottom's size: the shape rule's).
pub(crate) fn interp(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().interp_param.unwrap_or_default();
    let (pad_beg, pad_end) = (i64::from(p.pad_beg()), i64::from(p.pad_end()));
    let out = cx.caffe.tops.first().cloned().ok_or("no Caffe shape")?;
    let x = &ins[0].shape;
    if x.len() != 4 || out.len() != 4 || x[..2] != out[..2] {
        return Err(Fail::not_lowered(format!(
            "input {x:?} -> {out:?}: only the spatial axes of a 4-D blob are resized"
        )));
    }
    // Caffe's shape rule refused positive pads and crops to nothing.
    let eff = [2, 3].map(|i| (x[i] as i64 + pad_beg + pad_end) as usize);
    let mut src = ins[0].name.clone();
    if pad_beg != 0 || pad_end != 0 {
        // caffe_cpu_interp2 reads the eff_h x eff_w window at (-pad_beg, -pad_beg).
        let starts = cx.i64s("crop_starts", vec![-pad_beg, -pad_beg])?;
        let ends = cx.i64s(
            "crop_ends",
            vec![-pad_beg + eff[0] as i64, -pad_beg + eff[1] as i64],
        )?;
        let axes = cx.i64s("crop_axes", vec![2, 3])?;
        src = cx.op("Slice", vec![src, starts, ends, axes], vec![]);
    }
    // Scales, not sizes: sizes would hold the batch as a constant (--dynamic-batch).
    // The output size is floor(in * scale); (out + 0.5) / in lands it on `out` whatever
    // the float rounding, and align_corners maps coordinates by (in - 1) / (out - 1),
    // never by the scale.
    let scale = |i: usize| (out[i] as f64 + 0.5) / eff[i - 2] as f64;
    let scales = cx.f32s(
        "scales",
        vec![1.0, 1.0, scale(2) as f32, scale(3) as f32],
        vec![4],
    )?;
    cx.op_to(
        "Resize",
        vec![src, String::new(), scales],
        &tops[0],
        vec![
            attr("mode", A::S("linear")),
            attr("coordinate_transformation_mode", A::S("align_corners")),
        ],
    );
    Ok(vec![out])
}
