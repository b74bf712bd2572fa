//! BVLC's recurrent layers `LSTM` and `RNN`, as Caffe's first forward, unrolled over
//! the `T` steps of the prototxt's input: LSTM as one ONNX `LSTM` node per step
//! (sequence length 1), RNN as `Gemm` + `Tanh` per step, each step starting from the
//! previous state multiplied by that step's `cont`.
//!
//! Why unrolled: Caffe multiplies the recurrent input *and* the forget gate by
//! `cont_t` (`lstm_layer.cpp:170-204`, `lstm_unit_layer.cpp:53-54`); that is the
//! same as starting step `t` from `cont_t·h_{t-1}` and `cont_t·c_{t-1}`, which one
//! ONNX `LSTM` over the whole sequence cannot do (it reads no `cont`: exact only when
//! every `cont_t` after the first is 1). `T` is static in a deploy prototxt, so the
//! steps unroll, exact for any `cont`. A `Scan` over the steps is exact too but needs a
//! subgraph, which OpenCV 4's ONNX importer refuses ("Attribute[body]: 'Graph' is not
//! supported"); OpenCV 4 runs ONNX `LSTM` but has no ONNX `RNN` layer, hence plain
//! `Gemm`/`Tanh` steps for RNN. Both run in onnxruntime and OpenCV 4
//! (docs/caffe-layers.md).

use tensorfmt_core::{Order, Tensor};

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// Longest sequence unrolled: each step is a few nodes, and a hostile `T` must not
/// become millions of them.
pub(crate) const MAX_STEPS: usize = 16_384;

/// A recurrent layer's sizes and bottoms, checked.
struct Dims {
    t: usize,
    n: usize,
    h: usize,
    /// x's features per step (its dims after T and N, multiplied).
    d: usize,
    /// The static input's features (its dims after N), when there is one.
    s: Option<usize>,
    /// Index of the first exposed state bottom (h_0), when `expose_hidden`.
    first_state: Option<usize>,
}

fn f32_vec(t: &Tensor) -> LResult<Vec<f32>> {
    Ok(t.to_vec::<f32>()?)
}

/// The sizes of a recurrent layer with `n_state` states and `blobs` blobs besides the
/// static input's (LSTM 3, RNN 5), after the checks Caffe's shape rule left to it.
fn dims(cx: &LayerCx<'_>, n_state: usize, blobs: usize) -> LResult<Dims> {
    let ins = cx.ins;
    let rp = cx.param().recurrent_param.clone().unwrap_or_default();
    let x = &ins[0].shape;
    let t = x[0];
    if t > MAX_STEPS {
        return Err(Fail::new(format!(
            "{t} time steps (x {x:?}): at most {MAX_STEPS} are unrolled"
        )));
    }
    let exposed = if rp.expose_hidden() { n_state } else { 0 };
    let has_static = ins.len() > 2 + exposed;
    cx.blobs_at_most(blobs + usize::from(has_static))?;
    Ok(Dims {
        t,
        n: x[1],
        h: rp.num_output() as usize,
        d: x[2..].iter().product(),
        s: has_static.then(|| ins[2].shape[1..].iter().product()),
        first_state: (exposed > 0).then_some(2 + usize::from(has_static)),
    })
}

/// `v` split along axis 0 into `t` pieces of `rows` (the value itself when `t` is 1).
fn split_steps(
    cx: &mut LayerCx<'_>,
    v: &str,
    t: usize,
    rows: usize,
    what: &str,
) -> LResult<Vec<String>> {
    if t == 1 {
        return Ok(vec![v.to_string()]);
    }
    let sizes = cx.i64s("steps", vec![rows as i64; t])?;
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
fn ifog_to_iofc(v: &[f32], h: usize, cols: usize) -> LResult<Tensor> {
    let block = h * cols;
    let mut out = Vec::with_capacity(v.len());
    for k in [0, 2, 1, 3] {
        out.extend_from_slice(&v[k * block..(k + 1) * block]);
    }
    Ok(Tensor::from_vec(out, [1, 4 * h, cols], Order::RowMajor)?)
}

/// The per-step values `vs` concatenated along axis 0 (the value itself for one).
fn stack(cx: &mut LayerCx<'_>, vs: Vec<String>) -> String {
    if vs.len() == 1 {
        return vs[0].clone();
    }
    cx.op("Concat", vs, vec![attr("axis", A::I(0))])
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
    let dm = dims(cx, 2, 3)?;
    let (t, n, h, d) = (dm.t, dm.n, dm.h, dm.d);
    let ins = cx.ins;
    let rows = 4 * h;
    // Blobs in Caffe's order: W_xc, b_c, [W_xc_static], W_hc.
    let w_x = f32_vec(&cx.blob(0, &[rows, d])?)?;
    let bias = f32_vec(&cx.blob(1, &[rows])?)?;
    let (w_x, cols) = match dm.s {
        Some(s) => {
            // [W_xc | W_xc_static], row by row: the static features follow x's in X.
            let w_s = f32_vec(&cx.blob(2, &[rows, s])?)?;
            let mut joined = Vec::with_capacity(rows * (d + s));
            for r in 0..rows {
                joined.extend_from_slice(&w_x[r * d..(r + 1) * d]);
                joined.extend_from_slice(&w_s[r * s..(r + 1) * s]);
            }
            (joined, d + s)
        }
        None => (w_x, d),
    };
    let w_h = f32_vec(&cx.blob(2 + usize::from(dm.s.is_some()), &[rows, h])?)?;
    let mut b = f32_vec(&ifog_to_iofc(&bias, h, 1)?)?;
    b.resize(2 * rows, 0.0);
    let b = Tensor::from_vec(b, [1, 2 * rows], Order::RowMajor)?;
    let w = cx.init("W", &ifog_to_iofc(&w_x, h, cols)?)?;
    let r = cx.init("R", &ifog_to_iofc(&w_h, h, h)?)?;
    let b = cx.init("B", &b)?;
    // x as [T, N, D] in steps of [1, N, D], the static input [1, N, S] appended.
    let x3 = cx.reshape_to(&ins[0].name, &ins[0].shape, &[t, n, d], None)?;
    let mut xs = split_steps(cx, &x3, t, 1, "x_t")?;
    if let Some(s) = dm.s {
        let st = cx.reshape_to(&ins[2].name, &ins[2].shape, &[1, n, s], None)?;
        xs = xs
            .into_iter()
            .map(|xt| cx.op("Concat", vec![xt, st.clone()], vec![attr("axis", A::I(2))]))
            .collect();
    }
    let c3 = cx.reshape_to(&ins[1].name, &[t, n], &[t, n, 1], None)?;
    let cont = split_steps(cx, &c3, t, 1, "cont_t")?;
    let mut state = match dm.first_state {
        Some(i) => vec![ins[i].name.clone(), ins[i + 1].name.clone()],
        None => {
            let z = zeros(cx, &[1, n, h])?;
            vec![z.clone(), z]
        }
    };
    let mut hs = Vec::with_capacity(t);
    for step in 0..t {
        // Caffe's cont_t scales the recurrent input and the forget gate: the same as
        // starting this step from cont_t·h and cont_t·c.
        let h0 = cx.op("Mul", vec![state[0].clone(), cont[step].clone()], vec![]);
        let c0 = cx.op("Mul", vec![state[1].clone(), cont[step].clone()], vec![]);
        let base = format!("{}/state", cx.name());
        let (yh, yc) = (cx.fresh(&base), cx.fresh(&base));
        cx.op_to_many(
            "LSTM",
            vec![
                xs[step].clone(),
                w.clone(),
                r.clone(),
                b.clone(),
                String::new(),
                h0,
                c0,
            ],
            vec![String::new(), yh.clone(), yc.clone()],
            vec![attr("hidden_size", A::I(h as i64))],
        );
        hs.push(yh.clone());
        state = vec![yh, yc];
    }
    let tops = cx.tops;
    let all = stack(cx, hs);
    cx.identity(&all, &tops[0]);
    if tops.len() == 3 {
        cx.identity(&state[0], &tops[1]);
        cx.identity(&state[1], &tops[2]);
    }
    Ok(out_shapes(t, n, h, tops.len()))
}

/// BVLC `RNN` (`rnn_layer.cpp:97-226`): `h_t = tanh(W_hh (cont_t h_{t-1}) + W_xh x_t
/// + b_h [+ W_xh_static x_static])`, top `o_t = tanh(W_ho h_t + b_o)` `[T, N, H]`, and
/// with `expose_hidden` `h_T` `[1, N, H]` (the hidden state, not `o`).
///
/// `Gemm(x, W_xh, b_h)` for all steps at once (+ `Gemm(x_static, W_xh_static)`), then
/// per step `Tanh(Gemm(cont_t·h, W_hh) + that step's rows)`, then `Tanh(Gemm(h, W_ho,
/// b_o))` for all steps at once. Plain ops, not ONNX `RNN`: OpenCV 4 has no ONNX RNN.
pub(crate) fn rnn(cx: &mut LayerCx<'_>) -> Out {
    let dm = dims(cx, 1, 5)?;
    let (t, n, h, d) = (dm.t, dm.n, dm.h, dm.d);
    let ins = cx.ins;
    // Blobs in Caffe's order: W_xh, b_h, [W_xh_static], W_hh, W_ho, b_o.
    let w_x = cx.blob(0, &[h, d])?;
    let b_h = cx.blob(1, &[h])?;
    let k = 2 + usize::from(dm.s.is_some());
    let w_hh = cx.blob(k, &[h, h])?;
    let w_ho = cx.blob(k + 1, &[h, h])?;
    let b_o = cx.blob(k + 2, &[h])?;
    let gemm = |cx: &mut LayerCx<'_>, inputs: Vec<String>| {
        cx.op("Gemm", inputs, vec![attr("transB", A::I(1))])
    };
    let x2 = cx.reshape_to(&ins[0].name, &ins[0].shape, &[t * n, d], None)?;
    let (w_x, b_h) = (cx.init("W_xh", &w_x)?, cx.init("b_h", &b_h)?);
    let mut xw = gemm(cx, vec![x2, w_x, b_h]);
    if let Some(s) = dm.s {
        let w_s = cx.blob(2, &[h, s])?;
        let w_s = cx.init("W_xh_static", &w_s)?;
        let st = cx.reshape_to(&ins[2].name, &ins[2].shape, &[n, s], None)?;
        let sw = gemm(cx, vec![st, w_s]);
        let xw3 = cx.reshape_to(&xw, &[t * n, h], &[t, n, h], None)?;
        let sum = cx.op("Add", vec![xw3, sw], vec![]);
        xw = cx.reshape_to(&sum, &[t, n, h], &[t * n, h], None)?;
    }
    let xw = split_steps(cx, &xw, t, n, "xw_t")?;
    let c2 = cx.reshape_to(&ins[1].name, &[t, n], &[t * n, 1], None)?;
    let cont = split_steps(cx, &c2, t, n, "cont_t")?;
    let mut state = match dm.first_state {
        Some(i) => cx.reshape_to(&ins[i].name, &[1, n, h], &[n, h], None)?,
        None => zeros(cx, &[n, h])?,
    };
    let w_hh = cx.init("W_hh", &w_hh)?;
    let mut hs = Vec::with_capacity(t);
    for step in 0..t {
        let hc = cx.op("Mul", vec![state, cont[step].clone()], vec![]);
        let pre = gemm(cx, vec![hc, w_hh.clone(), xw[step].clone()]);
        state = cx.op("Tanh", vec![pre], vec![]);
        hs.push(state.clone());
    }
    let all = stack(cx, hs);
    let (w_ho, b_o) = (cx.init("W_ho", &w_ho)?, cx.init("b_o", &b_o)?);
    let proj = gemm(cx, vec![all, w_ho, b_o]);
    let o = cx.op("Tanh", vec![proj], vec![]);
    let tops = cx.tops;
    cx.reshape_to(&o, &[t * n, h], &[t, n, h], Some(&tops[0]))?;
    if tops.len() == 2 {
        cx.reshape_to(&state, &[n, h], &[1, n, h], Some(&tops[1]))?;
    }
    Ok(out_shapes(t, n, h, tops.len()))
}

/// Zeros of `shape` made at run time (`ConstantOfShape`): N · H zeros stored in the file
/// would let a prototxt with a huge N make a huge model.
fn zeros(cx: &mut LayerCx<'_>, shape: &[usize]) -> LResult<String> {
    let s = cx.i64s("state_shape", shape.iter().map(|&d| d as i64).collect())?;
    let z = cx.op("ConstantOfShape", vec![s], vec![]);
    // ConstantOfShape's default value is a float 0.
    Ok(z)
}

fn out_shapes(t: usize, n: usize, h: usize, n_tops: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![t, n, h]];
    out.extend(std::iter::repeat_n(vec![1, n, h], n_tops - 1));
    out
}
