//! Pooling (BVLC `pooling_layer.cpp`, OpenCV `pooling_layer.cpp`).
//!
//! Caffe's output size rounds up (`ceil((H + 2p - k) / s) + 1`, or down with
//! `round_mode: FLOOR` / OpenCV's `ceil_mode: false`) and drops a last window that
//! would start inside the end padding. ONNX rounds down, so the lowering computes
//! Caffe's size and emits explicit end pads; when ONNX's windows still outnumber
//! Caffe's, a Slice drops the extra ones. AVE divides by the window clipped to
//! `H + pad` (symmetric padding counts, the overhang does not): with `pad > 0` it is
//! an explicit zero Pad followed by AveragePool(count_include_pad=0).

use tensorfmt_caffe::proto::pooling_parameter::PoolMethod;

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

/// `Pooling`: see the module documentation. The geometry (kernel, stride, pad,
/// rounding, output size) is Caffe's, as `tensorfmt_caffe::PoolGeom` validated it.
pub(crate) fn pooling(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    let (ins, tops) = (cx.ins, cx.tops);
    let g = cx.pool_geom()?;
    let method = g.method;
    let with_mask = tops.len() == 2;
    if with_mask && (method != PoolMethod::Max || g.global) {
        return Err(Fail::new("only MAX pooling has a second (mask) top"));
    }
    let x = &ins[0].shape;
    let op = match method {
        PoolMethod::Max => "MaxPool",
        PoolMethod::Ave => "AveragePool",
        PoolMethod::Stochastic => {
            return Err(Fail::not_lowered("STOCHASTIC pooling is not lowered"))
        }
    };
    if g.global {
        let op = if method == PoolMethod::Max {
            "GlobalMaxPool"
        } else {
            "GlobalAveragePool"
        };
        cx.op_to(op, vec![ins[0].name.clone()], &tops[0], vec![]);
        return Ok(vec![vec![x[0], x[1], 1, 1]]);
    }
    let (k, s, pad, out) = (g.kernel, g.stride, g.pad, g.pooled);
    let ave_pad = method == PoolMethod::Ave && pad.iter().any(|&v| v > 0);
    let mut src = ins[0].name.clone();
    // Input extent (begin pad already applied for AVE) and begin pads of the pool op.
    let (extent, begin) = if ave_pad {
        let pads = cx.i64s(
            "pads",
            vec![
                0,
                0,
                pad[0] as i64,
                pad[1] as i64,
                0,
                0,
                pad[0] as i64,
                pad[1] as i64,
            ],
        )?;
        src = cx.op("Pad", vec![src, pads], vec![]);
        ([x[2] + 2 * pad[0], x[3] + 2 * pad[1]], [0, 0])
    } else {
        ([x[2] + pad[0], x[3] + pad[1]], pad)
    };
    let mut end = [0usize; 2];
    let mut onnx_out = [0usize; 2];
    for i in 0..2 {
        // The last window must fit: (out-1)*s + k <= extent + end.
        end[i] = ((out[i] - 1) * s[i] + k[i]).saturating_sub(extent[i]);
        if end[i] >= k[i] {
            // Caffe's ceil rule keeps a last window that starts past the input (kernel
            // smaller than the stride, no pad to drop it): Caffe writes -FLT_MAX (MAX) or
            // divides by zero (AVE) there; no ONNX pooling has such a window.
            let axis = if i == 0 { "height" } else { "width" };
            return Err(Fail::new(format!(
                "the last pooling window on the {axis} axis (window {} of kernel {} at \
                 stride {}) lies wholly past the input and its padding: Caffe's ceil \
                 rounding keeps it and computes no value there (MAX gives -FLT_MAX, AVE \
                 divides by zero); use round_mode: FLOOR, or a kernel at least the stride",
                out[i], k[i], s[i]
            )));
        }
        onnx_out[i] = (extent[i] + end[i] - k[i]) / s[i] + 1;
    }
    let mut attrs = vec![
        attr("kernel_shape", A::Is(vec![k[0] as i64, k[1] as i64])),
        attr("strides", A::Is(vec![s[0] as i64, s[1] as i64])),
        attr(
            "pads",
            A::Is(vec![
                begin[0] as i64,
                begin[1] as i64,
                end[0] as i64,
                end[1] as i64,
            ]),
        ),
    ];
    if method == PoolMethod::Ave {
        // Caffe's divisor counts the symmetric padding (made explicit zeros above) and
        // not the overhang: count_include_pad=1 only when there is no overhang at all.
        attrs.push(attr("count_include_pad", A::I(0)));
    }
    let shape = vec![x[0], x[1], out[0], out[1]];
    if onnx_out == out {
        cx.op_to_many(op, vec![src], tops.to_vec(), attrs);
    } else {
        let outs: Vec<String> = tops
            .iter()
            .map(|t| cx.fresh(&format!("{t}/uncut")))
            .collect();
        cx.op_to_many(op, vec![src], outs.clone(), attrs);
        let starts = cx.i64s("starts", vec![0, 0])?;
        let ends = cx.i64s("ends", vec![out[0] as i64, out[1] as i64])?;
        let axes = cx.i64s("axes", vec![2, 3])?;
        for (o, t) in outs.iter().zip(tops) {
            cx.op_to(
                "Slice",
                vec![o.clone(), starts.clone(), ends.clone(), axes.clone()],
                t,
                vec![],
            );
        }
    }
    if with_mask {
        // ONNX's indices (flattened over N, C, H, W) instead of Caffe's per-plane ones:
        // only our Upsample (MaxUnpool) reads them.
        cx.g.masks.insert(tops[1].clone());
        cx.g.mask_inputs.insert(tops[1].clone(), [x[2], x[3]]);
        return Ok(vec![shape.clone(), shape]);
    }
    Ok(vec![shape])
}
