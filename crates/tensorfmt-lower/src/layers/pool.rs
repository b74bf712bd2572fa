//! Pooling (BVLC `pooling_layer.cpp`, OpenCV `pooling_layer.cpp`).
//!
//! Caffe's output size rounds up (`ceil((H + 2p - k) / s) + 1`, or down with
//! `round_mode: FLOOR` / OpenCV's `ceil_mode: false`) and drops a last window that
//! would start inside the end padding. ONNX rounds down, so the lowering computes
//! Caffe's size and emits explicit end pads; when ONNX's windows still outnumber
//! Caffe's, a Slice drops the extra ones. AVE divides by the window clipped to
//! `H + pad` (symmetric padding counts, the overhang does not): with `pad > 0` it is
//! an explicit zero Pad followed by AveragePool(count_include_pad=0).

use tensorfmt_caffe::proto::pooling_parameter::{PoolMethod, RoundMode};

use super::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

/// Caffe's pooled size along one axis.
pub(crate) fn pooled(h: usize, k: usize, p: usize, s: usize, ceil: bool) -> LResult<usize> {
    let num = (h + 2 * p).checked_sub(k).ok_or_else(|| {
        Fail::new(format!(
            "kernel {k} is larger than the padded input {}",
            h + 2 * p
        ))
    })?;
    let mut out = if ceil {
        num.div_ceil(s) + 1
    } else {
        num / s + 1
    };
    if p > 0 && (out - 1) * s >= h + p {
        out -= 1;
    }
    Ok(out)
}

/// `Pooling`: see the module documentation.
pub(crate) fn pooling(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().pooling_param.unwrap_or_default();
    let with_mask = tops.len() == 2;
    if tops.len() > 2 || (with_mask && (p.pool() != PoolMethod::Max || p.global_pooling())) {
        return Err(Fail::new("only MAX pooling has a second (mask) top"));
    }
    let x = &ins[0].shape;
    if x.len() != 4 {
        return Err(Fail::not_lowered(format!(
            "input shape {x:?}: only 4-D pooling is lowered"
        )));
    }
    let method = p.pool();
    let op = match method {
        PoolMethod::Max => "MaxPool",
        PoolMethod::Ave => "AveragePool",
        PoolMethod::Stochastic => {
            return Err(Fail::not_lowered("STOCHASTIC pooling is not lowered"))
        }
    };
    if p.global_pooling() {
        if p.kernel_size.is_some() || p.kernel_h.is_some() {
            return Err(Fail::new("global_pooling with a kernel size"));
        }
        let g = if method == PoolMethod::Max {
            "GlobalMaxPool"
        } else {
            "GlobalAveragePool"
        };
        cx.op_to(g, vec![ins[0].name.clone()], &tops[0], vec![]);
        return Ok(vec![vec![x[0], x[1], 1, 1]]);
    }
    let two = |v: Option<u32>, h: Option<u32>, w: Option<u32>, what: &str| -> LResult<[usize; 2]> {
        match (h, w) {
            (Some(h), Some(w)) => Ok([h as usize, w as usize]),
            (None, None) => v
                .map(|v| [v as usize; 2])
                .ok_or_else(|| Fail::new(format!("no {what}"))),
            _ => Err(Fail::new(format!(
                "{what}_h and {what}_w must both be given"
            ))),
        }
    };
    let k = two(p.kernel_size, p.kernel_h, p.kernel_w, "kernel_size")?;
    let pad = if p.pad_h.is_some() || p.pad_w.is_some() {
        [p.pad_h() as usize, p.pad_w() as usize]
    } else {
        [p.pad() as usize; 2]
    };
    let s = if p.stride_h.is_some() || p.stride_w.is_some() {
        two(None, p.stride_h, p.stride_w, "stride")?
    } else {
        [p.stride() as usize; 2]
    };
    if k.contains(&0) || s.contains(&0) {
        return Err(Fail::new("kernel and stride must be positive"));
    }
    for i in 0..2 {
        if pad[i] >= k[i] {
            return Err(Fail::new(format!(
                "pad {} must be smaller than kernel {}",
                pad[i], k[i]
            )));
        }
    }
    // Caffe rounds up unless round_mode: FLOOR (BVLC) or ceil_mode: false (OpenCV's field).
    let ceil = p.round_mode() == RoundMode::Ceil && p.ceil_mode();
    let out = [
        pooled(x[2], k[0], pad[0], s[0], ceil)?,
        pooled(x[3], k[1], pad[1], s[1], ceil)?,
    ];
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
            return Err(Fail::new(format!(
                "end padding {} would reach a whole kernel {}",
                end[i], k[i]
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
        return Ok(vec![shape.clone(), shape]);
    }
    Ok(vec![shape])
}

#[cfg(test)]
mod tests {
    use super::pooled;

    #[test]
    fn caffe_pooled_sizes() {
        // AlexNet pool1: 55, k3 s2 -> 27; GoogLeNet 112 k3 s2 -> 56 (ceil).
        assert_eq!(pooled(55, 3, 0, 2, true).unwrap(), 27);
        assert_eq!(pooled(112, 3, 0, 2, true).unwrap(), 56);
        assert_eq!(pooled(112, 3, 0, 2, false).unwrap(), 55);
        // The last window would start in the padding: dropped.
        assert_eq!(pooled(3, 1, 1, 2, true).unwrap(), 2);
        assert!(pooled(2, 5, 1, 1, true).is_err());
    }
}
