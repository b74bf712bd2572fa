//! BVLC's recurrent layers `LSTM` and `RNN`, as Caffe's first forward: one ONNX
//! `LSTM` / `RNN` node per time step (sequence length 1), each starting from the
//! previous step's state multiplied by that step's `cont`.
//!
//! Why unrolled: Caffe multiplies the recurrent input *and* the forget gate by
//! `cont_t` (`lstm_layer.cpp:170-204`, `lstm_unit_layer.cpp:53-54`); that is the
//! same as starting step `t` from `cont_t·h_{t-1}` and `cont_t·c_{t-1}`, which one
//! ONNX `LSTM` over the whole sequence cannot do (it reads no `cont`: exact only when
//! every `cont_t` after the first is 1). `T` is static in a deploy prototxt, so the
//! steps unroll. A `Scan` over the steps is exact too but needs a subgraph, which
//! OpenCV 4's ONNX importer refuses ("Attribute[body]: 'Graph' is not supported");
//! the unrolled ops run in onnxruntime and in OpenCV 4 alike (docs/caffe-layers.md).

use tensorfmt_core::{Order, Tensor};

use super::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// Longest sequence unrolled: each step is a few nodes, and a hostile `T` must not
/// become millions of them.
pub(crate) const MAX_STEPS: usize = 65_536;

/// What the two layers share: bottoms read, steps split, blobs placed.
struct Steps {
    t: usize,
    n: usize,
    h: usize,
    /// x_t (with the static input appended as extra features), `[1, N, D (+ S)]`.
    x: Vec<String>,
    /// cont_t as `[1, N, 1]`.
    cont: Vec<String>,
    /// Initial states `[1, N, H]` (h_0, then LSTM's c_0): the exposed bottoms, or zeros.
    init: Vec<String>,
    /// Input weights with the static input's columns appended, `[rows, D (+ S)]`.
    w_x: Tensor,
    /// Bias `[rows]`.
    bias: Tensor,
    /// Recurrent weights `[rows, H]`.
    w_h: Tensor,
    /// Index of the next blob after the recurrent weights (RNN's `W_ho`).
    next_blob: usize,
}

fn f32_vec(t: &Tensor) -> LResult<Vec<f32>> {
    Ok(t.to_vec::<f32>()?)
}

/// Reads the bottoms and blobs of a recurrent layer with `gates` blocks of H rows (4
/// for LSTM, 1 for RNN), `n_state` states and `more_blobs` blobs after the recurrent
/// weights, and emits the per-step inputs.
fn steps(cx: &mut LayerCx<'_>, gates: usize, n_state: usize, more_blobs: usize) -> LResult<Steps> {
    let ins = cx.ins;
    let rp = cx.param().recurrent_param.clone().unwrap_or_default();
    let x = ins[0].shape.clone();
    let (t, n) = (x[0], x[1]);
    let h = rp.num_output() as usize;
    let rows = gates * h;
    if t > MAX_STEPS {
        return Err(Fail::new(format!(
            "{t} time steps (x {x:?}): at most {MAX_STEPS} are unrolled"
        )));
    }
    let exposed = if rp.expose_hidden() { n_state } else { 0 };
    let has_static = ins.len() > 2 + exposed;
    let d: usize = x[2..].iter().product();
    cx.blobs_at_most(3 + usize::from(has_static) + more_blobs)?;
    // Blobs in Caffe's order: W_x, b, [W_static], W_h.
    let w_x = cx.blob(0, &[rows, d])?;
    let bias = cx.blob(1, &[rows])?;
    let mut next = 2;
    let mut w_x = w_x;
    let mut s_dim = 0;
    if has_static {
        let xs = &ins[2].shape;
        s_dim = xs[1..].iter().product();
        let w_s = cx.blob(2, &[rows, s_dim])?;
        // [W_x | W_static], row by row: the static features follow x's in X.
        let (a, b) = (f32_vec(&w_x)?, f32_vec(&w_s)?);
        let mut joined = Vec::with_capacity(rows * (d + s_dim));
        for r in 0..rows {
            joined.extend_from_slice(&a[r * d..(r + 1) * d]);
            joined.extend_from_slice(&b[r * s_dim..(r + 1) * s_dim]);
        }
        w_x = Tensor::from_vec(joined, [rows, d + s_dim], Order::RowMajor)?;
        next = 3;
    }
    let w_h = cx.blob(next, &[rows, h])?;
    next += 1;
    // x as [T, N, D], split into T steps of [1, N, D].
    let x3 = cx.reshape_to(&ins[0].name, &x, &[t, n, d], None)?;
    let x_steps = split_steps(cx, &x3, t, "x_t")?;
    let statik = if has_static {
        let xs = &ins[2].shape;
        Some(cx.reshape_to(&ins[2].name, xs, &[1, n, s_dim], None)?)
    } else {
        None
    };
    let x_steps = match statik {
        Some(s) => x_steps
            .into_iter()
            .map(|xt| cx.op("Concat", vec![xt, s.clone()], vec![attr("axis", A::I(2))]))
            .collect(),
        None => x_steps,
    };
    let c3 = cx.reshape_to(&ins[1].name, &[t, n], &[t, n, 1], None)?;
    let cont = split_steps(cx, &c3, t, "cont_t")?;
    let init = if exposed > 0 {
        let first = 2 + usize::from(has_static);
        (0..n_state).map(|i| ins[first + i].name.clone()).collect()
    } else {
        let z = cx.f32s("zero_state", vec![0.0; n * h], vec![1, n, h])?;
        vec![z; n_state]
    };
    Ok(Steps {
        t,
        n,
        h,
        x: x_steps,
        cont,
        init,
        w_x,
        bias,
        w_h,
        next_blob: next,
    })
}

/// `v` `[T, ...]` split into T values `[1, ...]` (the value itself when T is 1).
fn split_steps(cx: &mut LayerCx<'_>, v: &str, t: usize, what: &str) -> LResult<Vec<String>> {
    if t == 1 {
        return Ok(vec![v.to_string()]);
    }
    let sizes = cx.i64s("steps", vec![1; t])?;
    let base = format!("{}/{what}", cx.name());
    let outs: Vec<String> = (0..t).map(|_| cx.fresh(&base)).collect();
    cx.op_to_many(
        "Split",
        vec![v.to_string(), sizes],
        outs.clone(),
        vec![attr("axis", A::I(0))],
    );
    Ok(outs)
}

/// Rows `[i, f, o, g]` (Caffe's gate blocks of `h` rows) reordered to ONNX's
/// `[i, o, f, c]`, as a `[1, rows, cols]` tensor.
fn ifog_to_iofc(t: &Tensor, h: usize) -> LResult<Tensor> {
    let v = f32_vec(t)?;
    let cols = if t.dims().len() == 2 { t.dims()[1] } else { 1 };
    let block = h * cols;
    let mut out = Vec::with_capacity(v.len());
    for k in [0, 2, 1, 3] {
        out.extend_from_slice(&v[k * block..(k + 1) * block]);
    }
    Ok(Tensor::from_vec(out, [1, 4 * h, cols], Order::RowMajor)?)
}

/// ONNX's `B` `[1, 2 * rows]`: Caffe's one bias as `Wb`, `Rb` zero.
fn bias_wb(b: Vec<f32>) -> LResult<Tensor> {
    let rows = b.len();
    let mut v = b;
    v.resize(2 * rows, 0.0);
    Ok(Tensor::from_vec(v, [1, 2 * rows], Order::RowMajor)?)
}

/// Emits the T steps of `op` (`LSTM` or `RNN`) with `inputs(x_t, h0, c0)`; returns
/// each step's final states (`Y_h` and, for LSTM, `Y_c`).
fn unroll(
    cx: &mut LayerCx<'_>,
    s: &Steps,
    op: &str,
    weights: [String; 3],
) -> LResult<Vec<Vec<String>>> {
    let n_state = s.init.len();
    let mut state = s.init.clone();
    let mut per_step = Vec::with_capacity(s.t);
    let [w, r, b] = weights;
    for step in 0..s.t {
        // Caffe's cont_t scales the recurrent input and the forget gate: the same as
        // starting this step from cont_t·h and cont_t·c.
        let scaled: Vec<String> = state
            .iter()
            .map(|v| cx.op("Mul", vec![v.clone(), s.cont[step].clone()], vec![]))
            .collect();
        let mut inputs = vec![
            s.x[step].clone(),
            w.clone(),
            r.clone(),
            b.clone(),
            String::new(),
        ];
        inputs.extend(scaled);
        let base = format!("{}/{}", cx.name(), if n_state == 2 { "h_c" } else { "h" });
        let outs: Vec<String> = (0..n_state).map(|_| cx.fresh(&base)).collect();
        let mut all = vec![String::new()];
        all.extend(outs.iter().cloned());
        cx.op_to_many(op, inputs, all, vec![attr("hidden_size", A::I(s.h as i64))]);
        state = outs.clone();
        per_step.push(outs);
    }
    Ok(per_step)
}

/// The per-step hidden states `[1, N, H]` concatenated to `[T, N, H]`, written to
/// `out` (or a fresh value).
fn stack(cx: &mut LayerCx<'_>, hs: Vec<String>, out: Option<&str>) -> String {
    let attrs = vec![attr("axis", A::I(0))];
    match out {
        Some(o) if hs.len() > 1 => {
            cx.op_to("Concat", hs, o, attrs);
            o.to_string()
        }
        Some(o) => {
            cx.identity(&hs[0], o);
            o.to_string()
        }
        None if hs.len() > 1 => cx.op("Concat", hs, attrs),
        None => hs[0].clone(),
    }
}

/// BVLC `LSTM` (`lstm_layer.cpp:100-240`, `lstm_unit_layer.cpp:41-69`): gates `W_xc
/// x_t + b_c + W_hc (cont_t h_{t-1}) [+ W_xc_static x_static]` in blocks i, f, o, g;
/// `f = cont_t σ(.)`, `c_t = f c_{t-1} + i g`, `h_t = o tanh(c_t)`. Tops `h` `[T, N,
/// H]`, and with `expose_hidden` `h_T`, `c_T` `[1, N, H]`.
///
/// Per step an ONNX `LSTM` (hidden_size H, sequence length 1) with `W`, `R`, `B`
/// reordered to ONNX's i, o, f, c (`B = [b_c, 0]`), the static input appended to `x_t`
/// as features (its blob's columns appended to `W`), and `initial_h = cont_t·h_{t-1}`,
/// `initial_c = cont_t·c_{t-1}` from zero (or the exposed `h_0`, `c_0`).
pub(crate) fn lstm(cx: &mut LayerCx<'_>) -> Out {
    let s = steps(cx, 4, 2, 0)?;
    let w = ifog_to_iofc(&s.w_x, s.h)?;
    let r = ifog_to_iofc(&s.w_h, s.h)?;
    let b = {
        let b = ifog_to_iofc(&s.bias, s.h)?;
        bias_wb(f32_vec(&b)?)?
    };
    let weights = [cx.init("W", &w)?, cx.init("R", &r)?, cx.init("B", &b)?];
    let per_step = unroll(cx, &s, "LSTM", weights)?;
    let tops = cx.tops;
    let last = per_step.last().cloned().ok_or("no time step")?;
    let hs: Vec<String> = per_step.iter().map(|v| v[0].clone()).collect();
    stack(cx, hs, Some(&tops[0]));
    if tops.len() == 3 {
        cx.identity(&last[0], &tops[1]);
        cx.identity(&last[1], &tops[2]);
    }
    Ok(out_shapes(&s, tops.len()))
}

/// BVLC `RNN` (`rnn_layer.cpp:97-226`): `h_t = tanh(W_hh (cont_t h_{t-1}) + W_xh x_t
/// + b_h [+ W_xh_static x_static])`, top `o_t = tanh(W_ho h_t + b_o)` `[T, N, H]`, and
/// with `expose_hidden` `h_T` `[1, N, H]` (the hidden state, not `o`).
///
/// Per step an ONNX `RNN` (Tanh, sequence length 1, `B = [b_h, 0]`, `initial_h =
/// cont_t·h_{t-1}`), then `Tanh(Gemm(h, W_ho, b_o))` over all steps at once.
pub(crate) fn rnn(cx: &mut LayerCx<'_>) -> Out {
    let s = steps(cx, 1, 1, 2)?;
    let (t, n, h) = (s.t, s.n, s.h);
    let w_ho = cx.blob(s.next_blob, &[h, h])?;
    let b_o = cx.blob(s.next_blob + 1, &[h])?;
    let w = s.w_x.reshape(vec![1, h, s.w_x.dims()[1]])?;
    let r = s.w_h.reshape(vec![1, h, h])?;
    let b = bias_wb(f32_vec(&s.bias)?)?;
    let weights = [cx.init("W", &w)?, cx.init("R", &r)?, cx.init("B", &b)?];
    let per_step = unroll(cx, &s, "RNN", weights)?;
    let tops = cx.tops;
    let last = per_step.last().cloned().ok_or("no time step")?;
    let hs: Vec<String> = per_step.iter().map(|v| v[0].clone()).collect();
    let hs = stack(cx, hs, None);
    let flat = cx.reshape_to(&hs, &[t, n, h], &[t * n, h], None)?;
    let w_ho = cx.init("W_ho", &w_ho)?;
    let b_o = cx.init("b_o", &b_o)?;
    let proj = cx.op("Gemm", vec![flat, w_ho, b_o], vec![attr("transB", A::I(1))]);
    let o = cx.op("Tanh", vec![proj], vec![]);
    cx.reshape_to(&o, &[t * n, h], &[t, n, h], Some(&tops[0]))?;
    if tops.len() == 2 {
        cx.identity(&last[0], &tops[1]);
    }
    Ok(out_shapes(&s, tops.len()))
}

fn out_shapes(s: &Steps, n_tops: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![s.t, s.n, s.h]];
    out.extend(std::iter::repeat(vec![1, s.n, s.h]).take(n_tops - 1));
    out
}
