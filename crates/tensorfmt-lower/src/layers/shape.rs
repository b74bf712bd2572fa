//! Layers that move data: Concat, Slice, Split, Eltwise, Flatten, Reshape, Crop,
//! ArgMax, Silence, and the forks' Permute, ShuffleChannel and Axpy.

use tensorfmt_caffe::proto::eltwise_parameter::EltwiseOp;

use super::context::{axis, LayerCx};
use crate::builder::{attr, Value, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

fn names(ins: &[Value]) -> Vec<String> {
    ins.iter().map(|v| v.name.clone()).collect()
}

/// `Concat` along `axis` (or the legacy `concat_dim`).
pub(crate) fn concat(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    if ins.is_empty() {
        return Err(Fail::new("no bottoms"));
    }
    let p = cx.param().concat_param.unwrap_or_default();
    let a = if p.axis.is_none() && p.concat_dim.is_some() {
        i64::from(p.concat_dim())
    } else {
        i64::from(p.axis())
    };
    let rank = ins[0].shape.len();
    let a = axis(a, rank)?;
    let mut out = ins[0].shape.clone();
    out[a] = 0;
    for v in ins {
        if v.shape.len() != rank
            || v.shape
                .iter()
                .enumerate()
                .any(|(i, &d)| i != a && d != out[i])
        {
            return Err(Fail::new(format!(
                "bottom {:?} of shape {:?} does not fit {:?} along axis {a}",
                v.name, v.shape, ins[0].shape
            )));
        }
        out[a] += v.shape[a];
    }
    cx.op_to(
        "Concat",
        names(ins),
        &tops[0],
        vec![attr("axis", A::I(a as i64))],
    );
    Ok(vec![out])
}

/// `Slice` at `slice_point`s (equal parts without them) along `axis` (or `slice_dim`):
/// ONNX Split.
pub(crate) fn slice(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().slice_param.clone().unwrap_or_default();
    let a = if p.slice_dim.is_some() && p.axis.is_none() {
        i64::from(p.slice_dim())
    } else {
        i64::from(p.axis())
    };
    let x = &ins[0].shape;
    let a = axis(a, x.len())?;
    let dim = x[a];
    let n = tops.len();
    let sizes: Vec<usize> = if p.slice_point.is_empty() {
        if n == 0 || dim % n != 0 {
            return Err(Fail::new(format!(
                "axis {a} of size {dim} does not split into {n} equal parts"
            )));
        }
        vec![dim / n; n]
    } else {
        if p.slice_point.len() + 1 != n {
            return Err(Fail::new(format!(
                "{} slice points for {n} tops",
                p.slice_point.len()
            )));
        }
        let mut prev = 0usize;
        let mut v = Vec::new();
        for &sp in p.slice_point.iter().chain(std::iter::once(&(dim as u32))) {
            let sp = sp as usize;
            if sp <= prev || sp > dim {
                return Err(Fail::new(format!(
                    "slice points {:?} are not increasing within 1..{dim}",
                    p.slice_point
                )));
            }
            v.push(sp - prev);
            prev = sp;
        }
        v
    };
    let split = cx.i64s("split", sizes.iter().map(|&s| s as i64).collect())?;
    cx.op_to_many(
        "Split",
        vec![ins[0].name.clone(), split],
        tops.to_vec(),
        vec![attr("axis", A::I(a as i64))],
    );
    Ok(sizes
        .iter()
        .map(|&s| {
            let mut o = x.clone();
            o[a] = s;
            o
        })
        .collect())
}

/// `Split`: every top is the bottom.
pub(crate) fn split(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    for t in tops {
        cx.identity(&ins[0].name, t);
    }
    Ok(vec![ins[0].shape.clone(); tops.len()])
}

/// `Silence`: consumes its bottoms, produces nothing.
pub(crate) fn silence(cx: &mut LayerCx<'_>) -> Out {
    let tops = cx.tops;
    if !tops.is_empty() {
        return Err(Fail::new("Silence has no tops"));
    }
    Ok(vec![])
}

/// `Eltwise`: SUM (with `coeff`), PROD or MAX over bottoms of one shape.
pub(crate) fn eltwise(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    if ins.len() < 2 {
        return Err(Fail::new(format!(
            "needs at least 2 bottoms, got {}",
            ins.len()
        )));
    }
    for v in ins {
        if v.shape != ins[0].shape {
            return Err(Fail::new(format!(
                "bottom shapes differ: {:?} and {:?}",
                ins[0].shape, v.shape
            )));
        }
    }
    let p = cx.param().eltwise_param.clone().unwrap_or_default();
    let op = p.operation();
    if !p.coeff.is_empty() && (op != EltwiseOp::Sum || p.coeff.len() != ins.len()) {
        return Err(Fail::new(format!(
            "{} coefficients for {} bottoms (only SUM takes one per bottom)",
            p.coeff.len(),
            ins.len()
        )));
    }
    let mut inputs = names(ins);
    if op == EltwiseOp::Sum {
        for (i, &c) in p.coeff.iter().enumerate() {
            if c != 1.0 {
                let k = cx.scalar(c)?;
                inputs[i] = cx.op("Mul", vec![inputs[i].clone(), k], vec![]);
            }
        }
    }
    let onnx = match op {
        EltwiseOp::Sum => "Sum",
        EltwiseOp::Prod => "Mul",
        EltwiseOp::Max => "Max",
    };
    if onnx == "Mul" {
        let mut cur = inputs[0].clone();
        for (i, x) in inputs.iter().enumerate().skip(1) {
            if i + 1 == inputs.len() {
                cx.op_to("Mul", vec![cur.clone(), x.clone()], &tops[0], vec![]);
            } else {
                cur = cx.op("Mul", vec![cur, x.clone()], vec![]);
            }
        }
    } else {
        cx.op_to(onnx, inputs, &tops[0], vec![]);
    }
    Ok(vec![ins[0].shape.clone()])
}

/// `Flatten`: axes `axis..=end_axis` collapse into one (a Reshape: ONNX Flatten is
/// always 2-D).
pub(crate) fn flatten(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().flatten_param.unwrap_or_default();
    let x = &ins[0].shape;
    let a = axis(i64::from(p.axis()), x.len())?;
    let e = axis(i64::from(p.end_axis()), x.len())?;
    if e < a {
        return Err(Fail::new(format!("end_axis {e} before axis {a}")));
    }
    let mut out = x[..a].to_vec();
    out.push(x[a..=e].iter().product());
    out.extend_from_slice(&x[e + 1..]);
    cx.reshape_to(&ins[0].name, x, &out, Some(&tops[0]))?;
    Ok(vec![out])
}

/// Caffe's Reshape rule: dims `axis..axis+num_axes` of the input are replaced by
/// `shape`, where 0 copies the input dim at that place and one -1 is inferred.
pub(crate) fn reshape_rule(
    x: &[usize],
    shape: &[i64],
    ax: i32,
    num_axes: i32,
) -> LResult<Vec<usize>> {
    let rank = x.len() as i64;
    let start = if ax < 0 {
        i64::from(ax) + rank + 1
    } else {
        i64::from(ax)
    };
    if start < 0 || start > rank {
        return Err(Fail::new(format!("axis {ax} out of range for {rank} axes")));
    }
    let end = if num_axes == -1 {
        rank
    } else {
        start + i64::from(num_axes)
    };
    if num_axes < -1 || end > rank {
        return Err(Fail::new(format!("num_axes {num_axes} out of range")));
    }
    let (start, end) = (start as usize, end as usize);
    let mut mid = Vec::new();
    let mut infer = None;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            0 => mid.push(*x.get(start + i).ok_or_else(|| {
                Fail::new(format!("dim 0 at {i} copies an axis the input lacks"))
            })?),
            -1 if infer.is_none() => {
                infer = Some(i);
                mid.push(1);
            }
            d if d > 0 => {
                mid.push(usize::try_from(d).map_err(|_| Fail::new("dimension too large"))?)
            }
            _ => return Err(Fail::new(format!("invalid dimension {d} in {shape:?}"))),
        }
    }
    let mut out = x[..start].to_vec();
    out.extend(&mid);
    out.extend_from_slice(&x[end..]);
    let total: u128 = x.iter().map(|&d| d as u128).product();
    if let Some(i) = infer {
        let known: u128 = out.iter().map(|&d| d as u128).product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(Fail::new(format!(
                "cannot infer -1 in {shape:?} for input {x:?}"
            )));
        }
        out[start + i] = (total / known) as usize;
    }
    if out.iter().map(|&d| d as u128).product::<u128>() != total {
        return Err(Fail::new(format!(
            "shape {shape:?} does not fit the input {x:?}"
        )));
    }
    Ok(out)
}

/// `Reshape` (Caffe's 0 / -1 rules relative to `axis`/`num_axes`), emitted with the
/// resolved static shape.
pub(crate) fn reshape(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().reshape_param.clone().unwrap_or_default();
    let dims = p.shape.as_ref().map(|s| s.dim.clone()).unwrap_or_default();
    let out = reshape_rule(&ins[0].shape, &dims, p.axis(), p.num_axes())?;
    if cx.g.from_dynamic.contains(&ins[0].name) {
        // A size known only at run time (RoIs): Caffe's own dims, whose 0 and -1
        // follow it at run time as Caffe's Reshape does.
        let spec = caffe_spec(&ins[0].shape, &dims, p.axis(), p.num_axes(), &out);
        let s = cx.i64s("shape", spec)?;
        cx.op_to("Reshape", vec![ins[0].name.clone(), s], &tops[0], vec![]);
        return Ok(vec![out]);
    }
    cx.reshape_to(&ins[0].name, &ins[0].shape, &out, Some(&tops[0]))?;
    Ok(vec![out])
}

/// An ONNX Reshape target equal to Caffe's `dims` put at axes `axis..axis+num_axes`
/// (validated by `reshape_rule`): the axes before them are copied (0), Caffe's 0 copies
/// the input axis at the same place in both, and the axes after them are copied where
/// they keep their place, else given.
fn caffe_spec(x: &[usize], dims: &[i64], ax: i32, num_axes: i32, out: &[usize]) -> Vec<i64> {
    let rank = x.len() as i64;
    let start = if ax < 0 {
        i64::from(ax) + rank + 1
    } else {
        i64::from(ax)
    } as usize;
    let end = if num_axes == -1 {
        x.len()
    } else {
        start + num_axes as usize
    };
    let mut spec: Vec<i64> = vec![0; start];
    spec.extend_from_slice(dims);
    let kept = start + dims.len() == end;
    spec.extend(
        out[start + dims.len()..]
            .iter()
            .map(|&d| if kept { 0 } else { d as i64 }),
    );
    spec
}

/// `Crop`: bottom 0 cut to bottom 1's shape from `axis` on, at `offset`s.
pub(crate) fn crop(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().crop_param.clone().unwrap_or_default();
    let (x, r) = (&ins[0].shape, &ins[1].shape);
    if x.len() != r.len() {
        return Err(Fail::new(format!(
            "bottoms of ranks {} and {}",
            x.len(),
            r.len()
        )));
    }
    let a = axis(i64::from(p.axis()), x.len())?;
    let n = x.len() - a;
    if p.offset.len() > 1 && p.offset.len() != n {
        return Err(Fail::new(format!(
            "{} offsets for {n} cropped axes",
            p.offset.len()
        )));
    }
    let mut out = x.clone();
    let (mut starts, mut ends, mut axes) = (Vec::new(), Vec::new(), Vec::new());
    for i in a..x.len() {
        let off = match p.offset.len() {
            0 => 0,
            1 => p.offset[0] as usize,
            _ => p.offset[i - a] as usize,
        };
        if off + r[i] > x[i] {
            return Err(Fail::new(format!(
                "axis {i}: offset {off} + size {} exceeds {}",
                r[i], x[i]
            )));
        }
        out[i] = r[i];
        starts.push(off as i64);
        ends.push((off + r[i]) as i64);
        axes.push(i as i64);
    }
    let s = cx.i64s("starts", starts)?;
    let e = cx.i64s("ends", ends)?;
    let ax = cx.i64s("axes", axes)?;
    cx.op_to(
        "Slice",
        vec![ins[0].name.clone(), s, e, ax],
        &tops[0],
        vec![],
    );
    Ok(vec![out])
}

/// `ArgMax` with top_k 1: along `axis` the index (as float, like Caffe; among equal
/// values the last index, as Caffe's `partial_sort` with `std::greater` on (value,
/// index) pairs picks it: ONNX's `select_last_index`) or, with
/// `out_max_val`, the maximum; without `axis`, over each sample's flattened values
/// (output `[N, 1, 1, ...]`, or `[N, 2, 1, ...]` with `out_max_val`: index then value,
/// padded with 1s to the bottom's rank, at least 3).
pub(crate) fn argmax(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().argmax_param.unwrap_or_default();
    if p.top_k() != 1 {
        return Err(Fail::not_lowered(format!(
            "top_k {} (only 1 is lowered)",
            p.top_k()
        )));
    }
    let x = &ins[0].shape;
    if let Some(a) = p.axis {
        let a = axis(i64::from(a), x.len())?;
        let mut out = x.clone();
        out[a] = 1;
        let keep = vec![
            attr("axis", A::I(a as i64)),
            attr("keepdims", A::I(1)),
            attr("select_last_index", A::I(1)),
        ];
        if p.out_max_val() {
            cx.op_to(
                "ReduceMax",
                vec![ins[0].name.clone()],
                &tops[0],
                vec![
                    attr("axes", A::Is(vec![a as i64])),
                    attr("keepdims", A::I(1)),
                ],
            );
        } else {
            let i = cx.op("ArgMax", vec![ins[0].name.clone()], keep);
            cx.op_to("Cast", vec![i], &tops[0], vec![attr("to", A::I(1))]);
        }
        return Ok(vec![out]);
    }
    let flat = cx.op(
        "Flatten",
        vec![ins[0].name.clone()],
        vec![attr("axis", A::I(1))],
    );
    let i = cx.op(
        "ArgMax",
        vec![flat.clone()],
        vec![
            attr("axis", A::I(1)),
            attr("keepdims", A::I(1)),
            attr("select_last_index", A::I(1)),
        ],
    );
    let fi = cx.op("Cast", vec![i], vec![attr("to", A::I(1))]);
    let k = if p.out_max_val() { 2 } else { 1 };
    let both = if p.out_max_val() {
        let m = cx.op(
            "ReduceMax",
            vec![flat],
            vec![attr("axes", A::Is(vec![1])), attr("keepdims", A::I(1))],
        );
        cx.op("Concat", vec![fi, m], vec![attr("axis", A::I(1))])
    } else {
        fi
    };
    // Caffe's top has the bottom's rank (at least 3): [N, 1 or 2, top_k, 1, ...].
    let mut out = vec![x[0], k, 1];
    out.resize(x.len().max(3), 1);
    cx.reshape_to(&both, &[x[0], k], &out, Some(&tops[0]))?;
    Ok(vec![out])
}

/// `Permute` (SSD): Transpose by `order`, the axes it omits following in order.
pub(crate) fn permute(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let p = cx.param().permute_param.clone().unwrap_or_default();
    let x = &ins[0].shape;
    let mut perm: Vec<usize> = Vec::new();
    for &o in &p.order {
        let o = o as usize;
        if o >= x.len() || perm.contains(&o) {
            return Err(Fail::new(format!(
                "order {:?} is not a permutation of {} axes",
                p.order,
                x.len()
            )));
        }
        perm.push(o);
    }
    for i in 0..x.len() {
        if !perm.contains(&i) {
            perm.push(i);
        }
    }
    let out: Vec<usize> = perm.iter().map(|&i| x[i]).collect();
    cx.op_to(
        "Transpose",
        vec![ins[0].name.clone()],
        &tops[0],
        vec![attr(
            "perm",
            A::Is(perm.iter().map(|&i| i as i64).collect()),
        )],
    );
    Ok(vec![out])
}

/// `ShuffleChannel` (ShuffleNet): reshape to `[N, g, C/g, H, W]`, swap axes 1 and 2,
/// reshape back.
pub(crate) fn shuffle_channel(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let g = i64::from(cx.param().shuffle_channel_param.unwrap_or_default().group());
    let x = &ins[0].shape;
    if x.len() != 4 || g <= 0 || x[1] % g as usize != 0 {
        return Err(Fail::new(format!(
            "group {g} must divide the channels of a 4-D input {x:?}"
        )));
    }
    let g = g as usize;
    let five = [x[0], g, x[1] / g, x[2], x[3]];
    let r = cx.reshape_to(&ins[0].name, x, &five, None)?;
    let t = cx.op(
        "Transpose",
        vec![r],
        vec![attr("perm", A::Is(vec![0, 2, 1, 3, 4]))],
    );
    cx.reshape_to(&t, &[x[0], x[1] / g, g, x[2], x[3]], x, Some(&tops[0]))?;
    Ok(vec![x.clone()])
}

/// `Axpy` (SENet): a * x + y with `a` of shape `[N, C, 1, 1]`.
pub(crate) fn axpy(cx: &mut LayerCx<'_>) -> Out {
    let (ins, tops) = (cx.ins, cx.tops);
    let (a, x, y) = (&ins[0].shape, &ins[1].shape, &ins[2].shape);
    if x != y || a.len() < 2 || a[..2] != x[..2] || a[2..].iter().any(|&d| d != 1) {
        return Err(Fail::new(format!(
            "shapes a {a:?}, x {x:?}, y {y:?} do not fit a * x + y"
        )));
    }
    let m = cx.op(
        "Mul",
        vec![ins[0].name.clone(), ins[1].name.clone()],
        vec![],
    );
    cx.op_to("Add", vec![m, ins[2].name.clone()], &tops[0], vec![]);
    Ok(vec![x.clone()])
}

#[cfg(test)]
mod tests {
    use super::reshape_rule;

    #[test]
    fn caffe_reshape_rules() {
        assert_eq!(
            reshape_rule(&[2, 3, 4, 5], &[0, -1], 0, -1).unwrap(),
            vec![2, 60]
        );
        assert_eq!(
            reshape_rule(&[2, 3, 4, 5], &[2, 2], 2, 1).unwrap(),
            vec![2, 3, 2, 2, 5]
        );
        assert_eq!(
            reshape_rule(&[2, 8], &[-1, 2], 1, 1).unwrap(),
            vec![2, 4, 2]
        );
        assert_eq!(reshape_rule(&[2, 8], &[1], -1, 0).unwrap(), vec![2, 8, 1]);
        assert_eq!(reshape_rule(&[2, 3], &[], 1, 0).unwrap(), vec![2, 3]);
        assert!(reshape_rule(&[2, 3], &[4], 0, -1).is_err());
        assert!(reshape_rule(&[2, 3], &[-1, -1], 0, -1).is_err());
    }
}
