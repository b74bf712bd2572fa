//! Faster R-CNN and R-FCN: the region proposal layer (OpenCV's C++ `Proposal` and
//! py-faster-rcnn's Python `ProposalLayer`, with the user's overrides of its RPN
//! constants, `crate::rpn`), `ROIPooling` and `PSROIPooling`.
//!
//! The graphs transcribe `crates/tensorfmt-py/tests/onnx_designs.py` (`proposal`,
//! `roi_pooling`, `psroi_pooling`), proven in onnxruntime against the references of
//! `caffe_refs.py`. A proposal layer's RoI count depends on the data: its tops' first
//! axis is declared in `Graph::dynamic` (a dim named `R`), Caffe's rule giving the
//! bound, and the driver checks that everything computed from them follows that count.

use tensorfmt_caffe::{ProposalKind, ProposalParams};

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

type Out = LResult<Vec<Vec<usize>>>;

/// ONNX element types used here (`TensorProto.DataType`).
const FLOAT: i64 = 1;
const INT64: i64 = 7;
const DOUBLE: i64 = 11;

/// py-faster-rcnn `generate_anchors.py:37-97` (float64, numpy's half-to-even `round`):
/// for each ratio (outer) and scale (inner), a box centred on the reference window
/// `(0, 0, base-1, base-1)`, `ws = round(sqrt(w*h / ratio))`, `hs = round(ws *
/// ratio)`, times the scale, corners `ctr -+ 0.5 * (size - 1)`.
fn py_anchors(base: f64, ratios: &[f64], scales: &[f64]) -> Vec<[f32; 4]> {
    let ctr = 0.5 * (base - 1.0);
    let mut out = Vec::with_capacity(ratios.len() * scales.len());
    for &r in ratios {
        let ws = (base * base / r).sqrt().round_ties_even();
        let hs = (ws * r).round_ties_even();
        for &s in scales {
            let (w, h) = (ws * s, hs * s);
            out.push([
                (ctr - 0.5 * (w - 1.0)) as f32,
                (ctr - 0.5 * (h - 1.0)) as f32,
                (ctr + 0.5 * (w - 1.0)) as f32,
                (ctr + 0.5 * (h - 1.0)) as f32,
            ]);
        }
    }
    out
}

/// OpenCV's C++ `Proposal` anchors (proposal_layer.cpp, constructor; float32): width
/// `floor(base / sqrt(ratio) + 0.5)`, height `floor(width * ratio + 0.5)` (halves round
/// up, where py-faster-rcnn rounds them to even), times each scale, as PriorBox corners
/// `c -+ size/2` (minus 1 on the max side) around `c = base/2`. The same boxes as
/// [`py_anchors`] unless a size lands on a half.
fn opencv_anchors(base: f64, ratios: &[f64], scales: &[f64]) -> Vec<[f32; 4]> {
    let base = base as f32;
    let c = 0.5 * base;
    let mut out = Vec::with_capacity(ratios.len() * scales.len());
    for &r in ratios {
        let r = r as f32;
        let w = (base / r.sqrt() + 0.5).floor();
        let h = (w * r + 0.5).floor();
        for &s in scales {
            let (bw, bh) = (s as f32 * w, s as f32 * h);
            out.push([
                c - bw * 0.5,
                c - bh * 0.5,
                c + bw * 0.5 - 1.0,
                c + bh * 0.5 - 1.0,
            ]);
        }
    }
    out
}

impl LayerCx<'_> {
    /// `x[:, k:k+1]` (along `axis`).
    fn col(&mut self, x: &str, k: i64, axis: i64) -> LResult<String> {
        let s = self.i64s("start", vec![k])?;
        let e = self.i64s("end", vec![k + 1])?;
        let a = self.i64s("axes", vec![axis])?;
        Ok(self.op("Slice", vec![x.into(), s, e, a], vec![]))
    }

    fn bin(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op(op, vec![a.into(), b.into()], vec![])
    }

    fn un(&mut self, op: &str, a: &str) -> String {
        self.op(op, vec![a.into()], vec![])
    }

    fn cast(&mut self, x: &str, to: i64) -> String {
        self.op("Cast", vec![x.into()], vec![attr("to", A::I(to))])
    }

    fn i64_tensor(&mut self, what: &str, data: Vec<i64>, shape: Vec<usize>) -> LResult<String> {
        self.constant(what, data, shape)
    }

    fn f64_scalar(&mut self, v: f64) -> LResult<String> {
        self.constant("const", vec![v], vec![])
    }

    /// C's `round` (halves away from zero): `Sign(x) * Floor(|x| + 0.5)`; ONNX `Round`
    /// rounds halves to even.
    fn c_round(&mut self, x: &str) -> LResult<String> {
        let sign = self.un("Sign", x);
        let abs = self.un("Abs", x);
        let half = self.scalar(0.5)?;
        let up = self.bin("Add", &abs, &half);
        let fl = self.un("Floor", &up);
        Ok(self.bin("Mul", &sign, &fl))
    }

    /// Bottom `i` as `[rows, k]` (a `[R, k, 1, 1]` blob is reshaped).
    fn as_rows(&mut self, i: usize) -> LResult<String> {
        let v = &self.ins[i];
        if v.shape.len() == 2 {
            return Ok(v.name.clone());
        }
        let (name, shape) = (v.name.clone(), v.shape.clone());
        let k: usize = shape[1..].iter().product();
        self.reshape_to(&name, &shape, &[shape[0], k], None)
    }
}

/// The region proposal layer, OpenCV's C++ `Proposal` and py-faster-rcnn's Python
/// `ProposalLayer` (`proposal_layer.py:47-161`, test phase): foreground scores and box
/// deltas in (h, w, anchor) order, anchors shifted by `feat_stride` per cell for the
/// feature map's run-time size, `bbox_transform_inv` (+1 pixel widths), clipped to
/// `im_info`'s image, boxes under `min_size × im_info[2]` dropped, the `pre_nms_top_n`
/// best, NMS (+1 areas, IoU > `nms_thresh` suppressed), the `post_nms_top_n` first:
/// rois `[R, 5]` (batch index 0) and scores `[R, 1]`, R data-dependent. OpenCV's C++
/// layer ignores `min_size` and pads to `post_nms_topn` rows with zeros; this follows
/// py-faster-rcnn on both points.
pub(crate) fn proposal(cx: &mut LayerCx<'_>) -> Out {
    let mut p =
        ProposalParams::from_layer(cx.layer)?.ok_or_else(|| Fail::new("not a proposal layer"))?;
    cx.g.rpn.apply(&mut p);
    p.check()?;
    let (ins, tops) = (cx.ins, cx.tops);
    if ins.len() != 3 {
        return Err(Fail::new(format!(
            "takes 3 bottoms (scores, box deltas, im_info), got {}",
            ins.len()
        )));
    }
    // The anchors are constants: their size is bounded before they are computed.
    cx.check_computed("the anchors", p.num_anchors() as u64 * 16)?;
    let anchors = match p.kind {
        ProposalKind::Python => py_anchors(f64::from(p.base_size), &p.ratios, &p.scales),
        ProposalKind::Cpp => opencv_anchors(f64::from(p.base_size), &p.ratios, &p.scales),
    };
    let a = anchors.len() as i64;
    let (cls, bbox) = (ins[0].name.clone(), ins[1].name.clone());
    // Foreground scores [1, A, H, W] -> [H*W*A]; deltas [1, 4A, H, W] -> [H*W*A, 4].
    let s = cx.i64s("fg_start", vec![a])?;
    let e = cx.i64s("fg_end", vec![2 * a])?;
    let ax = cx.i64s("axes", vec![1])?;
    let fg = cx.op("Slice", vec![cls.clone(), s, e, ax], vec![]);
    let nhwc = vec![attr("perm", A::Is(vec![0, 2, 3, 1]))];
    let t = cx.op("Transpose", vec![fg], nhwc.clone());
    let flat = cx.i64s("shape", vec![-1])?;
    let mut scores = cx.op("Reshape", vec![t, flat], vec![]);
    let t = cx.op("Transpose", vec![bbox], nhwc);
    let rows4 = cx.i64s("shape", vec![-1, 4])?;
    let deltas = cx.op("Reshape", vec![t, rows4.clone()], vec![]);
    // Anchors [H*W*A, 4] in (h, w, a) order, for the map's run-time size.
    let zero_i = cx.i64s("axes", vec![0])?;
    let dim = |cx: &mut LayerCx<'_>, axis: i64| {
        let d = cx.op(
            "Shape",
            vec![cls.clone()],
            vec![attr("start", A::I(axis)), attr("end", A::I(axis + 1))],
        );
        cx.op("Squeeze", vec![d, zero_i.clone()], vec![])
    };
    let h = dim(cx, 2);
    let w = dim(cx, 3);
    let stride = cx.scalar(p.feat_stride as f32)?;
    let r0 = cx.i64_tensor("const", vec![0], vec![])?;
    let r1 = cx.i64_tensor("const", vec![1], vec![])?;
    let shift = |cx: &mut LayerCx<'_>, n: &str, shape: Vec<i64>| -> LResult<String> {
        let r = cx.op("Range", vec![r0.clone(), n.into(), r1.clone()], vec![]);
        let f = cx.cast(&r, FLOAT);
        let m = cx.bin("Mul", &f, &stride);
        let s = cx.i64s("shape", shape)?;
        Ok(cx.op("Reshape", vec![m, s], vec![]))
    };
    let sx = shift(cx, &w, vec![1, -1, 1])?; // [1, W, 1]
    let sy = shift(cx, &h, vec![-1, 1, 1])?; // [H, 1, 1]
    let zero = cx.scalar(0.0)?;
    let zx = cx.bin("Mul", &sx, &zero);
    let zy = cx.bin("Mul", &sy, &zero);
    let zeros = cx.bin("Add", &zx, &zy); // [H, W, 1]
    let three = cx.i64s("axes", vec![3])?;
    let mut coords = Vec::with_capacity(4);
    for k in 0..4 {
        let col: Vec<f32> = anchors.iter().map(|b| b[k]).collect();
        let c = cx.f32s("anchors", col, vec![1, 1, anchors.len()])?;
        let sh = if k % 2 == 0 { &sx } else { &sy };
        let v = cx.bin("Add", &c, sh);
        let v = cx.bin("Add", &v, &zeros);
        coords.push(cx.op("Unsqueeze", vec![v, three.clone()], vec![]));
    }
    let cat = cx.op("Concat", coords, vec![attr("axis", A::I(3))]);
    let anc = cx.op("Reshape", vec![cat, rows4], vec![]);
    // bbox_transform_inv (bbox_transform.py:30-61).
    let [ax0, ay0, ax1, ay1] = [0, 1, 2, 3].map(|k| cx.col(&anc, k, 1));
    let (ax0, ay0, ax1, ay1) = (ax0?, ay0?, ax1?, ay1?);
    let one = cx.scalar(1.0)?;
    let half = cx.scalar(0.5)?;
    let d = cx.bin("Sub", &ax1, &ax0);
    let widths = cx.bin("Add", &d, &one);
    let d = cx.bin("Sub", &ay1, &ay0);
    let heights = cx.bin("Add", &d, &one);
    let hw = cx.bin("Mul", &half, &widths);
    let ctr_x = cx.bin("Add", &ax0, &hw);
    let hh = cx.bin("Mul", &half, &heights);
    let ctr_y = cx.bin("Add", &ay0, &hh);
    let [dx, dy, dw, dh] = [0, 1, 2, 3].map(|k| cx.col(&deltas, k, 1));
    let (dx, dy, dw, dh) = (dx?, dy?, dw?, dh?);
    let m = cx.bin("Mul", &dx, &widths);
    let pcx = cx.bin("Add", &m, &ctr_x);
    let m = cx.bin("Mul", &dy, &heights);
    let pcy = cx.bin("Add", &m, &ctr_y);
    let ew = cx.un("Exp", &dw);
    let pw = cx.bin("Mul", &ew, &widths);
    let eh = cx.un("Exp", &dh);
    let ph = cx.bin("Mul", &eh, &heights);
    let hpw = cx.bin("Mul", &half, &pw);
    let hph = cx.bin("Mul", &half, &ph);
    let x0 = cx.bin("Sub", &pcx, &hpw);
    let y0 = cx.bin("Sub", &pcy, &hph);
    let x1 = cx.bin("Add", &pcx, &hpw);
    let y1 = cx.bin("Add", &pcy, &hph);
    // clip_boxes (bbox_transform.py:63-76): x to [0, W - 1], y to [0, H - 1] of
    // im_info = [[H, W, scale, ...]].
    let info = if ins[2].shape.len() == 2 {
        ins[2].name.clone()
    } else {
        let s = cx.i64s("shape", vec![1, -1])?;
        cx.op("Reshape", vec![ins[2].name.clone(), s], vec![])
    };
    let ih = cx.col(&info, 0, 1)?;
    let ih = cx.bin("Sub", &ih, &one);
    let iw = cx.col(&info, 1, 1)?;
    let iw = cx.bin("Sub", &iw, &one);
    let clip = |cx: &mut LayerCx<'_>, v: &str, hi: &str| {
        let m = cx.bin("Min", v, hi);
        cx.bin("Max", &m, &zero)
    };
    let c = [
        clip(cx, &x0, &iw),
        clip(cx, &y0, &ih),
        clip(cx, &x1, &iw),
        clip(cx, &y1, &ih),
    ];
    let mut props = cx.op("Concat", c.to_vec(), vec![attr("axis", A::I(1))]);
    // _filter_boxes (proposal_layer.py:129, 171-176): width and height >= min_size *
    // im_info[2].
    if p.rpn.min_size > 0.0 {
        let scale = cx.col(&info, 2, 1)?;
        let ms = cx.scalar(p.rpn.min_size)?;
        let ms = cx.bin("Mul", &scale, &ms); // [1, 1]
        let [px0, py0, px1, py1] = [0, 1, 2, 3].map(|k| cx.col(&props, k, 1));
        let (px0, py0, px1, py1) = (px0?, py0?, px1?, py1?);
        let d = cx.bin("Sub", &px1, &px0);
        let bw = cx.bin("Add", &d, &one);
        let d = cx.bin("Sub", &py1, &py0);
        let bh = cx.bin("Add", &d, &one);
        let okw = cx.bin("GreaterOrEqual", &bw, &ms);
        let okh = cx.bin("GreaterOrEqual", &bh, &ms);
        let ok = cx.bin("And", &okw, &okh);
        let axis1 = cx.i64s("axes", vec![1])?;
        let ok = cx.op("Squeeze", vec![ok, axis1], vec![]);
        let keep_axis = vec![attr("axis", A::I(0))];
        props = cx.op("Compress", vec![props, ok.clone()], keep_axis.clone());
        scores = cx.op("Compress", vec![scores, ok], keep_axis);
    }
    // The pre_nms_top_n best (TopK: equal scores keep the lower index first).
    let count = cx.op(
        "Shape",
        vec![scores.clone()],
        vec![attr("start", A::I(0)), attr("end", A::I(1))],
    );
    let k = if p.rpn.pre_nms_top_n > 0 {
        let pre = cx.i64s("pre_nms_top_n", vec![p.rpn.pre_nms_top_n])?;
        cx.bin("Min", &count, &pre)
    } else {
        count
    };
    let top = cx.fresh(&format!("{}/topk_values", cx.name()));
    let order = cx.fresh(&format!("{}/topk_indices", cx.name()));
    cx.op_to_many(
        "TopK",
        vec![scores, k],
        vec![top.clone(), order.clone()],
        vec![
            attr("axis", A::I(0)),
            attr("largest", A::I(1)),
            attr("sorted", A::I(1)),
        ],
    );
    let gather0 = vec![attr("axis", A::I(0))];
    let props = cx.op("Gather", vec![props, order], gather0.clone());
    // NMS with +1 areas: boxes whose max corners are one pixel further.
    let plus = cx.f32s("plus_one", vec![0.0, 0.0, 1.0, 1.0], vec![4])?;
    let grown = cx.bin("Add", &props, &plus);
    let axis0 = cx.i64s("axes", vec![0])?;
    let nb = cx.op("Unsqueeze", vec![grown, axis0], vec![]);
    let axes01 = cx.i64s("axes", vec![0, 1])?;
    let ns = cx.op("Unsqueeze", vec![top.clone(), axes01], vec![]);
    let post = if p.rpn.post_nms_top_n > 0 {
        p.rpn.post_nms_top_n
    } else {
        i64::from(i32::MAX)
    };
    let maxout = cx.i64s("post_nms_top_n", vec![post])?;
    let thresh = cx.scalar(p.rpn.nms_thresh)?;
    let sel = cx.op(
        "NonMaxSuppression",
        vec![nb, ns, maxout, thresh],
        vec![attr("center_point_box", A::I(0))],
    );
    let keep = cx.col(&sel, 2, 1)?;
    let axis1 = cx.i64s("axes", vec![1])?;
    let keep = cx.op("Squeeze", vec![keep, axis1.clone()], vec![]);
    let boxes = cx.op("Gather", vec![props, keep.clone()], gather0.clone());
    let b0 = cx.col(&boxes, 0, 1)?;
    let batch = cx.bin("Mul", &b0, &zero);
    cx.op_to(
        "Concat",
        vec![batch, boxes],
        &tops[0],
        vec![attr("axis", A::I(1))],
    );
    let mut shapes = vec![cx.caffe.tops[0].clone()];
    if tops.len() == 2 {
        let kept = cx.op("Gather", vec![top, keep], gather0);
        cx.op_to("Unsqueeze", vec![kept, axis1], &tops[1], vec![]);
        shapes.push(cx.caffe.tops[1].clone());
    }
    // The RoI count is the data's: Caffe's shape is its bound.
    let r = cx.fresh("R");
    for t in tops {
        cx.g.dynamic.insert(t.clone(), vec![(0, r.clone())]);
    }
    Ok(shapes)
}

/// caffe-fast-rcnn `ROIPooling` (roi_pooling_layer.cpp:46-125) as ONNX `MaxRoiPool`:
/// onnxruntime's kernel is Caffe's code (C `round` of the scaled corners, +1 sizes,
/// floor/ceil bins, empty bins 0).
pub(crate) fn roi_pooling(cx: &mut LayerCx<'_>) -> Out {
    let p = cx.param().roi_pooling_param.unwrap_or_default();
    let rois = cx.as_rows(1)?;
    let x = cx.ins[0].name.clone();
    let top = cx.tops[0].clone();
    cx.op_to(
        "MaxRoiPool",
        vec![x, rois],
        &top,
        vec![
            attr(
                "pooled_shape",
                A::Is(vec![i64::from(p.pooled_h()), i64::from(p.pooled_w())]),
            ),
            attr("spatial_scale", A::F(p.spatial_scale())),
        ],
    );
    Ok(cx.caffe.tops.clone())
}

/// R-FCN `PSROIPooling` (caffe-rfcn psroi_pooling_layer.cu:18-86) with an integral
/// image: in float64, `S = CumSum_w(CumSum_h(Pad(x, a leading row and column)))`; each
/// bin's sum `S[he, we] - S[hs, we] - S[he, ws] + S[hs, ws]` read at the bin's
/// position-sensitive channel `(ctop * G + ph) * G + pw` (one `Gather` per corner from
/// the flattened `S` at a linear index, where `onnx_designs.psroi_pooling` builds
/// `GatherND` indices with run-time `Expand` shapes: the same values, with shapes
/// ONNX's rules follow), divided by the bin area, 0 for an empty bin. Bin bounds:
/// start `round(x1) * scale`, end `(round(x2) + 1) * scale` (C `round`), size
/// `max(end - start, 0.1) / G`, `[floor(p * size + start), ceil((p + 1) * size + start))`
/// clipped to the map.
pub(crate) fn psroi_pooling(cx: &mut LayerCx<'_>) -> Out {
    let p = cx.param().psroi_pooling_param.unwrap_or_default();
    let top = cx.caffe.tops[0].clone(); // [R, D, G, G], validated by Caffe's rule
    let (d, g) = (top[1], top[2]);
    let ss = p.spatial_scale();
    let xs = cx.ins[0].shape.clone();
    let (c, h, w) = (xs[1], xs[2], xs[3]);
    let plane = ((h + 1) * (w + 1)) as i64;
    let x = cx.ins[0].name.clone();
    let rois = cx.as_rows(1)?;
    // The integral image, flattened.
    let x64 = cx.cast(&x, DOUBLE);
    let pads = cx.i64s("pads", vec![0, 0, 1, 1, 0, 0, 0, 0])?;
    let padded = cx.op("Pad", vec![x64, pads], vec![]);
    let a2 = cx.i64s("axis", vec![2])?;
    let s = cx.op("CumSum", vec![padded, a2], vec![]);
    let a3 = cx.i64s("axis", vec![3])?;
    let s = cx.op("CumSum", vec![s, a3], vec![]);
    let flat = cx.i64s("shape", vec![-1])?;
    let sflat = cx.op("Reshape", vec![s, flat], vec![]);
    // Bin bounds per RoI, [R, G].
    let b = cx.col(&rois, 0, 1)?;
    let b = cx.cast(&b, INT64);
    let scale = cx.scalar(ss)?;
    let one = cx.scalar(1.0)?;
    let corner = |cx: &mut LayerCx<'_>, k: i64, end: bool| -> LResult<String> {
        let v = cx.col(&rois, k, 1)?;
        let v = cx.c_round(&v)?;
        let v = if end { cx.bin("Add", &v, &one) } else { v };
        Ok(cx.bin("Mul", &v, &scale))
    };
    let x0 = corner(cx, 1, false)?;
    let y0 = corner(cx, 2, false)?;
    let x1 = corner(cx, 3, true)?;
    let y1 = corner(cx, 4, true)?;
    let tenth = cx.scalar(0.1)?;
    let groups = cx.scalar(g as f32)?;
    let bin = |cx: &mut LayerCx<'_>, lo: &str, hi: &str| {
        let d = cx.bin("Sub", hi, lo);
        let d = cx.bin("Max", &d, &tenth);
        cx.bin("Div", &d, &groups)
    };
    let bw = bin(cx, &x0, &x1);
    let bh = bin(cx, &y0, &y1);
    let grid = cx.f32s("grid", (0..g).map(|i| i as f32).collect(), vec![1, g])?;
    let grid1 = cx.f32s("grid", (1..=g).map(|i| i as f32).collect(), vec![1, g])?;
    let zero_i = cx.i64_tensor("zero", vec![0], vec![])?;
    let bounds = |cx: &mut LayerCx<'_>, start: &str, size: &str, limit: usize| {
        let lim = cx.i64_tensor("limit", vec![limit as i64], vec![])?;
        let one_side = |cx: &mut LayerCx<'_>, gr: &str, round: &str| {
            let m = cx.bin("Mul", gr, size);
            let a = cx.bin("Add", &m, start);
            let r = cx.un(round, &a);
            let i = cx.cast(&r, INT64);
            let lo = cx.bin("Max", &i, &zero_i);
            cx.bin("Min", &lo, &lim)
        };
        let lo = one_side(cx, &grid, "Floor");
        let hi = one_side(cx, &grid1, "Ceil");
        LResult::Ok((lo, hi))
    };
    let (hs, he) = bounds(cx, &y0, &bh, h)?;
    let (ws, we) = bounds(cx, &x0, &bw, w)?;
    // Linear index of S[b, chan, hh, ww] = ((b*C + chan)*(H+1) + hh)*(W+1) + ww.
    cx.check_computed("the channel offsets", (d * g * g) as u64 * 8)?;
    let gi = g as i64;
    let chan: Vec<i64> = (0..d as i64)
        .flat_map(|ct| {
            (0..gi).flat_map(move |ph| (0..gi).map(move |pw| ((ct * gi + ph) * gi + pw) * plane))
        })
        .collect();
    let chan = cx.i64_tensor("channel_offsets", chan, vec![1, d, g, g])?;
    let s4 = cx.i64s("shape", vec![-1, 1, 1, 1])?;
    let b4 = cx.op("Reshape", vec![b, s4], vec![]);
    let image = cx.i64s("image_size", vec![c as i64 * plane])?;
    let b4 = cx.bin("Mul", &b4, &image);
    let base = cx.bin("Add", &b4, &chan); // [R, D, G, G]
    let row_shape = cx.i64s("shape", vec![-1, 1, gi, 1])?;
    let col_shape = cx.i64s("shape", vec![-1, 1, 1, gi])?;
    let wp1 = cx.i64s("row_size", vec![(w + 1) as i64])?;
    let rows = |cx: &mut LayerCx<'_>, v: &str| {
        let r = cx.op("Reshape", vec![v.into(), row_shape.clone()], vec![]);
        (r.clone(), cx.bin("Mul", &r, &wp1))
    };
    let (hs4, hs_off) = rows(cx, &hs);
    let (he4, he_off) = rows(cx, &he);
    let cols =
        |cx: &mut LayerCx<'_>, v: &str| cx.op("Reshape", vec![v.into(), col_shape.clone()], vec![]);
    let ws4 = cols(cx, &ws);
    let we4 = cols(cx, &we);
    let at = |cx: &mut LayerCx<'_>, hoff: &str, wcol: &str| {
        let i = cx.bin("Add", &base, hoff);
        let i = cx.bin("Add", &i, wcol);
        cx.op(
            "Gather",
            vec![sflat.clone(), i],
            vec![attr("axis", A::I(0))],
        )
    };
    let s_ee = at(cx, &he_off, &we4);
    let s_se = at(cx, &hs_off, &we4);
    let s_es = at(cx, &he_off, &ws4);
    let s_ss = at(cx, &hs_off, &ws4);
    let t = cx.bin("Sub", &s_ee, &s_se);
    let t = cx.bin("Sub", &t, &s_es);
    let total = cx.bin("Add", &t, &s_ss);
    let dh = cx.bin("Sub", &he4, &hs4); // [R, 1, G, 1]
    let dw = cx.bin("Sub", &we4, &ws4); // [R, 1, 1, G]
    let area = cx.bin("Mul", &dh, &dw);
    let area = cx.cast(&area, DOUBLE);
    let eh = cx.bin("LessOrEqual", &dh, &zero_i);
    let ew = cx.bin("LessOrEqual", &dw, &zero_i);
    let empty = cx.bin("Or", &eh, &ew);
    let one64 = cx.f64_scalar(1.0)?;
    let zero64 = cx.f64_scalar(0.0)?;
    let div = cx.op("Where", vec![empty.clone(), one64, area], vec![]);
    let avg = cx.bin("Div", &total, &div);
    let out = cx.op("Where", vec![empty, zero64, avg], vec![]);
    let top_name = cx.tops[0].clone();
    cx.op_to("Cast", vec![out], &top_name, vec![attr("to", A::I(FLOAT))]);
    Ok(cx.caffe.tops.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// generate_anchors.py:27-35: the anchors checked against the MATLAB code (1-based:
    /// the function gives them minus 1); OpenCV's are the same for the defaults.
    #[test]
    fn anchors_match_the_published_table() {
        let table: [[f32; 4]; 9] = [
            [-83., -39., 100., 56.],
            [-175., -87., 192., 104.],
            [-359., -183., 376., 200.],
            [-55., -55., 72., 72.],
            [-119., -119., 136., 136.],
            [-247., -247., 264., 264.],
            [-35., -79., 52., 96.],
            [-79., -167., 96., 184.],
            [-167., -343., 184., 360.],
        ];
        let want: Vec<[f32; 4]> = table.iter().map(|r| r.map(|v| v - 1.0)).collect();
        let (r, s) = ([0.5, 1.0, 2.0], [8.0, 16.0, 32.0]);
        assert_eq!(py_anchors(16.0, &r, &s), want);
        assert_eq!(opencv_anchors(16.0, &r, &s), want);
        // A height on a half: ratio 5.5, width round(sqrt(256 / 5.5)) = 7, height 38.5:
        // numpy rounds to 38 (even), OpenCV to 39.
        let py = py_anchors(16.0, &[5.5], &[1.0]);
        let cv = opencv_anchors(16.0, &[5.5], &[1.0]);
        assert_eq!((py[0][3] - py[0][1], cv[0][3] - cv[0][1]), (37.0, 38.0));
    }
}
