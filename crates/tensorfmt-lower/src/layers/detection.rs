//! SSD's `DetectionOutput` (weiliu89/caffe `detection_output_layer.cpp:180-295` with
//! `bbox_util.cpp`: `DecodeBBox`, `ApplyNMSFast`, `GetMaxScoreIndex`), with OpenCV's
//! `normalized_bbox` and `clip` extensions (`detection_output_layer.cpp` of OpenCV 4),
//! in standard ONNX: decoding by broadcasting, ONNX `NonMaxSuppression` per (image,
//! class), `keep_top_k` across classes with `ScatterND` + `TopK`, Caffe's row order and
//! its empty output. The node sequence is `tests/onnx_designs.py::detection_output`,
//! proven there in onnxruntime against the numpy reference (`tests/caffe_refs.py`).
//!
//! The number of priors is read at run time (`Shape(prior)[2] / 4`), so the same graph
//! serves priors that are RoIs (OpenCV's Faster R-CNN post-processing).

use tensorfmt_caffe::proto::prior_box_parameter::CodeType;
use tensorfmt_caffe::proto::DetectionOutputParameter;
use tensorfmt_core::{DType, Order, Tensor};

use super::context::LayerCx;
use crate::builder::{attr, A};
use crate::error::{Fail, LResult};

/// ONNX element types used by `Cast`.
const FLOAT: i64 = 1;
const BOOL: i64 = 9;

/// The options of one DetectionOutput layer, validated.
struct Det {
    classes: usize,
    share_location: bool,
    background: i32,
    code: CodeType,
    variance_in_target: bool,
    keep_top_k: i32,
    confidence_threshold: f32,
    nms_threshold: f32,
    top_k: Option<i32>,
    clip: bool,
    normalized: bool,
}

/// Caffe's `LayerSetUp` checks, and what the lowering cannot express.
fn options(p: &DetectionOutputParameter) -> LResult<Det> {
    let classes = match p.num_classes {
        Some(c) if c > 0 => c as usize,
        Some(_) => return Err(Fail::new("num_classes is 0")),
        None => return Err(Fail::new("must specify num_classes (Caffe's check)")),
    };
    let code = match p.code_type {
        None => CodeType::Corner,
        Some(v) => CodeType::try_from(v)
            .map_err(|_| Fail::new(format!("unknown code_type {v} (1 to 3 expected)")))?,
    };
    let nms = p.nms_param.unwrap_or_default();
    let nms_threshold = nms.nms_threshold();
    if nms_threshold.is_nan() || nms_threshold < 0.0 {
        return Err(Fail::new(format!(
            "nms_param.nms_threshold {nms_threshold} must be non negative (Caffe's check)"
        )));
    }
    // Caffe allows any threshold: above 1 no overlap reaches it and nothing is
    // suppressed, as at 1 (eta is 1 here, so it never decays); NonMaxSuppression
    // refuses an iou_threshold outside [0, 1] when it runs.
    let nms_threshold = nms_threshold.min(1.0);
    let eta = nms.eta();
    if eta.is_nan() || eta <= 0.0 || eta > 1.0 {
        return Err(Fail::new(format!(
            "nms_param.eta {eta} must be in (0, 1] (Caffe's check)"
        )));
    }
    if eta != 1.0 {
        // Caffe lowers the threshold after each kept box (adaptive NMS,
        // bbox_util.cpp:1932-1934); NonMaxSuppression's threshold is fixed.
        return Err(Fail::not_lowered(format!(
            "nms_param.eta {eta} (adaptive NMS) has no ONNX NonMaxSuppression form; every \
             published SSD deploy net has eta 1"
        )));
    }
    let share_location = p.share_location();
    let background = p.background_label_id();
    if share_location && background == -1 {
        // DecodeBBoxesAll skips the shared label -1 as if it were the background, then
        // Forward_cpu dies (LOG(FATAL)); OpenCV raises the same error.
        return Err(Fail::new(
            "share_location with background_label_id -1: Caffe fails (\"Could not find \
             location predictions for label -1\")",
        ));
    }
    let confidence_threshold = p.confidence_threshold.unwrap_or(f32::MIN);
    if confidence_threshold.is_nan() {
        return Err(Fail::new("confidence_threshold is NaN"));
    }
    Ok(Det {
        classes,
        share_location,
        background,
        code,
        variance_in_target: p.variance_encoded_in_target(),
        keep_top_k: p.keep_top_k(),
        confidence_threshold,
        nms_threshold,
        top_k: nms.top_k,
        clip: p.clip(),
        normalized: p.normalized_bbox(),
    })
}

/// Small graph-building helpers over the layer's context.
struct G<'c, 'a> {
    cx: &'c mut LayerCx<'a>,
}

impl G<'_, '_> {
    fn op(
        &mut self,
        op: &str,
        ins: &[&str],
        attrs: Vec<tensorfmt_onnx::proto::AttributeProto>,
    ) -> String {
        self.cx
            .op(op, ins.iter().map(|s| s.to_string()).collect(), attrs)
    }
    fn op2(
        &mut self,
        op: &str,
        ins: &[&str],
        attrs: Vec<tensorfmt_onnx::proto::AttributeProto>,
    ) -> (String, String) {
        let a = self
            .cx
            .fresh(&format!("{}/{}", self.cx.name(), op.to_ascii_lowercase()));
        let b = self
            .cx
            .fresh(&format!("{}/{}_1", self.cx.name(), op.to_ascii_lowercase()));
        self.cx.op_to_many(
            op,
            ins.iter().map(|s| s.to_string()).collect(),
            vec![a.clone(), b.clone()],
            attrs,
        );
        (a, b)
    }
    fn i64s(&mut self, v: &[i64]) -> LResult<String> {
        self.cx.i64s("i", v.to_vec())
    }
    fn f32(&mut self, v: f32) -> LResult<String> {
        self.cx.scalar(v)
    }
    fn f32s(&mut self, v: Vec<f32>, shape: Vec<usize>) -> LResult<String> {
        self.cx.f32s("c", v, shape)
    }
    fn bools(&mut self, v: &[bool]) -> LResult<String> {
        let t = Tensor::from_vec(
            v.iter().map(|&b| b as u8).collect::<Vec<u8>>(),
            [v.len()],
            Order::RowMajor,
        )?
        .cast(DType::Bool)?;
        self.cx.init("b", &t)
    }
    /// `x[..., k:k+1]`.
    fn col(&mut self, x: &str, k: i64) -> LResult<String> {
        let (s, e, a) = (self.i64s(&[k])?, self.i64s(&[k + 1])?, self.i64s(&[-1])?);
        Ok(self.op("Slice", &[x, &s, &e, &a], vec![]))
    }
    /// `Shape(x)[axis]` as a 1-element int64 tensor.
    fn dim(&mut self, x: &str, axis: i64) -> String {
        self.op(
            "Shape",
            &[x],
            vec![attr("start", A::I(axis)), attr("end", A::I(axis + 1))],
        )
    }
    /// A 1-D int64 shape from constant parts and run-time 1-element tensors.
    fn shape(&mut self, parts: &[Part<'_>]) -> LResult<String> {
        let mut names = Vec::with_capacity(parts.len());
        for p in parts {
            names.push(match p {
                Part::C(v) => self.i64s(&[*v])?,
                Part::V(s) => s.to_string(),
            });
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        Ok(self.op("Concat", &refs, vec![attr("axis", A::I(0))]))
    }
    fn unsqueeze1(&mut self, x: &str) -> LResult<String> {
        let a = self.i64s(&[1])?;
        Ok(self.op("Unsqueeze", &[x, &a], vec![]))
    }
    fn squeeze(&mut self, x: &str, axis: i64) -> LResult<String> {
        let a = self.i64s(&[axis])?;
        Ok(self.op("Squeeze", &[x, &a], vec![]))
    }
    fn cast(&mut self, x: &str, to: i64) -> String {
        self.op("Cast", &[x], vec![attr("to", A::I(to))])
    }
}

/// A part of a run-time shape: a constant or a 1-element int64 value.
enum Part<'s> {
    C(i64),
    V(&'s str),
}

/// `DetectionOutput`: see the module documentation and `docs/caffe-layers.md`.
pub(crate) fn detection_output(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    let p = cx
        .param()
        .detection_output_param
        .clone()
        .unwrap_or_default();
    let d = options(&p)?;
    let (ins, tops) = (cx.ins, cx.tops);
    let (loc_v, conf_v, prior_v) = (&ins[0], &ins[1], &ins[2]);
    let c = d.classes;
    let l = if d.share_location { 1 } else { c };
    // Caffe's Reshape checks (the shape rule of tensorfmt-caffe makes them first; these
    // guard the lowering's own assumptions).
    let prior = &prior_v.shape;
    if prior.len() < 3 || prior[0] != 1 || prior[2] % 4 != 0 || prior[3..].iter().any(|&d| d != 1) {
        return Err(Fail::new(format!(
            "the prior bottom {:?} has shape {prior:?}; [1, 2, priors * 4] expected (PriorBox's)",
            prior_v.name
        )));
    }
    let channels = prior[1];
    if !(channels == 2 || (channels == 1 && d.variance_in_target)) {
        return Err(Fail::new(format!(
            "the prior bottom has {channels} channel(s): 2 (boxes, variances) expected{}",
            if d.variance_in_target {
                " (or 1 with variance_encoded_in_target)"
            } else {
                ""
            }
        )));
    }
    let priors = prior[2] / 4;
    let per = |s: &[usize]| s.iter().skip(1).product::<usize>();
    let n = loc_v.shape.first().copied().unwrap_or(0);
    if per(&loc_v.shape) != priors * l * 4 || per(&conf_v.shape) != priors * c {
        return Err(Fail::new(format!(
            "loc {:?} and conf {:?} do not match {priors} priors, {c} classes",
            loc_v.shape, conf_v.shape
        )));
    }
    if conf_v.shape.first() != Some(&n) {
        return Err(Fail::new(format!(
            "loc has {n} images, conf {}",
            conf_v.shape.first().copied().unwrap_or(0)
        )));
    }
    let pixel_clip = d.clip && !d.normalized;
    if pixel_clip && ins.len() < 4 {
        return Err(Fail::new(
            "clip with normalized_bbox false clips to the image: it needs the image as a 4th \
             bottom (OpenCV's rule)",
        ));
    }
    if pixel_clip && ins[3].shape.len() != 4 {
        // The clip reads the image's height and width as axes 2 and 3 (OpenCV's
        // inputs[3].size[2], size[3]).
        return Err(Fail::new(format!(
            "the image bottom {:?} has shape {:?}: clip with normalized_bbox false reads \
             its height and width from a 4-D [N, C, H, W] blob",
            ins[3].name, ins[3].shape
        )));
    }
    let plus_one = !d.normalized;
    let (loc, conf, prior_name) = (
        loc_v.name.clone(),
        conf_v.name.clone(),
        prior_v.name.clone(),
    );
    let image = ins.get(3).map(|v| v.name.clone());
    let top = tops[0].clone();
    let out_shape = cx.caffe.tops.clone();
    let mut g = G { cx };

    // 1. Decoding, by broadcasting over [N, P, L, 4].
    let p4 = g.dim(&prior_name, 2);
    let four = g.i64s(&[4])?;
    let pd = g.op("Div", &[&p4, &four], vec![]); // [1]: P, read at run time
    let s = g.shape(&[Part::C(0), Part::V(&pd), Part::C(l as i64), Part::C(4)])?;
    let loc4 = g.op("Reshape", &[&loc, &s], vec![]);
    let s = g.shape(&[
        Part::C(channels as i64),
        Part::V(&pd),
        Part::C(1),
        Part::C(4),
    ])?;
    let pri = g.op("Reshape", &[&prior_name, &s], vec![]); // [V, P, 1, 4]
    let zero = g.i64s(&[0])?;
    let gathered = g.op("Gather", &[&pri, &zero], vec![attr("axis", A::I(0))]);
    let pbox = g.squeeze(&gathered, 0)?; // [P, 1, 4]
    let dl = if d.variance_in_target {
        loc4
    } else {
        let one = g.i64s(&[1])?;
        let gathered = g.op("Gather", &[&pri, &one], vec![attr("axis", A::I(0))]);
        let var = g.squeeze(&gathered, 0)?;
        g.op("Mul", &[&loc4, &var], vec![])
    };
    let mut box_ = match d.code {
        CodeType::Corner => g.op("Add", &[&dl, &pbox], vec![]),
        CodeType::CornerSize => {
            let (px0, py0, px1, py1) = (
                g.col(&pbox, 0)?,
                g.col(&pbox, 1)?,
                g.col(&pbox, 2)?,
                g.col(&pbox, 3)?,
            );
            let pw = g.op("Sub", &[&px1, &px0], vec![]);
            let ph = g.op("Sub", &[&py1, &py0], vec![]);
            let size = g.op(
                "Concat",
                &[&pw, &ph, &pw, &ph],
                vec![attr("axis", A::I(-1))],
            );
            let scaled = g.op("Mul", &[&dl, &size], vec![]);
            g.op("Add", &[&pbox, &scaled], vec![])
        }
        CodeType::CenterSize => {
            let (px0, py0, px1, py1) = (
                g.col(&pbox, 0)?,
                g.col(&pbox, 1)?,
                g.col(&pbox, 2)?,
                g.col(&pbox, 3)?,
            );
            let (d0, d1, d2, d3) = (
                g.col(&dl, 0)?,
                g.col(&dl, 1)?,
                g.col(&dl, 2)?,
                g.col(&dl, 3)?,
            );
            let mut pw = g.op("Sub", &[&px1, &px0], vec![]);
            let mut ph = g.op("Sub", &[&py1, &py0], vec![]);
            let half = g.f32(0.5)?;
            let (pcx, pcy) = if plus_one {
                // OpenCV's normalized_bbox: false (py-faster-rcnn's pixel widths).
                let one = g.f32(1.0)?;
                pw = g.op("Add", &[&pw, &one], vec![]);
                ph = g.op("Add", &[&ph, &one], vec![]);
                let hw = g.op("Mul", &[&pw, &half], vec![]);
                let hh = g.op("Mul", &[&ph, &half], vec![]);
                (
                    g.op("Add", &[&px0, &hw], vec![]),
                    g.op("Add", &[&py0, &hh], vec![]),
                )
            } else {
                let sx = g.op("Add", &[&px0, &px1], vec![]);
                let sy = g.op("Add", &[&py0, &py1], vec![]);
                (
                    g.op("Mul", &[&sx, &half], vec![]),
                    g.op("Mul", &[&sy, &half], vec![]),
                )
            };
            let t = g.op("Mul", &[&d0, &pw], vec![]);
            let cxv = g.op("Add", &[&t, &pcx], vec![]);
            let t = g.op("Mul", &[&d1, &ph], vec![]);
            let cyv = g.op("Add", &[&t, &pcy], vec![]);
            let e = g.op("Exp", &[&d2], vec![]);
            let e = g.op("Mul", &[&e, &pw], vec![]);
            let hw = g.op("Mul", &[&e, &half], vec![]);
            let e = g.op("Exp", &[&d3], vec![]);
            let e = g.op("Mul", &[&e, &ph], vec![]);
            let hh = g.op("Mul", &[&e, &half], vec![]);
            let x0 = g.op("Sub", &[&cxv, &hw], vec![]);
            let y0 = g.op("Sub", &[&cyv, &hh], vec![]);
            let x1 = g.op("Add", &[&cxv, &hw], vec![]);
            let y1 = g.op("Add", &[&cyv, &hh], vec![]);
            g.op(
                "Concat",
                &[&x0, &y0, &x1, &y1],
                vec![attr("axis", A::I(-1))],
            )
        }
    };
    if d.clip && d.normalized {
        let (lo, hi) = (g.f32(0.0)?, g.f32(1.0)?);
        box_ = g.op("Clip", &[&box_, &lo, &hi], vec![]);
    } else if pixel_clip {
        // OpenCV's pixel clip: x to [0, W - 1], y to [0, H - 1] of the image bottom.
        let image = image.as_deref().unwrap_or_default();
        let one = g.f32(1.0)?;
        let w = g.dim(image, 3);
        let w = g.cast(&w, FLOAT);
        let wmax = g.op("Sub", &[&w, &one], vec![]);
        let h = g.dim(image, 2);
        let h = g.cast(&h, FLOAT);
        let hmax = g.op("Sub", &[&h, &one], vec![]);
        let lim = g.op(
            "Concat",
            &[&wmax, &hmax, &wmax, &hmax],
            vec![attr("axis", A::I(0))],
        );
        let zero = g.f32(0.0)?;
        let m = g.op("Min", &[&box_, &lim], vec![]);
        box_ = g.op("Max", &[&m, &zero], vec![]);
    }

    // 2. Scores [N, C, P]: the background row at -inf, cut to nms_param.top_k per class.
    let s = g.shape(&[Part::C(0), Part::V(&pd), Part::C(c as i64)])?;
    let conf3 = g.op("Reshape", &[&conf, &s], vec![]);
    let conf_t = g.op(
        "Transpose",
        &[&conf3],
        vec![attr("perm", A::Is(vec![0, 2, 1]))],
    );
    let mut masked = conf_t.clone();
    let ninf = g.f32(f32::NEG_INFINITY)?;
    if d.background >= 0 && (d.background as usize) < c {
        // The background's one-hot over the classes, made at run time: no constant grows
        // with num_classes (a prototxt could ask for billions).
        let (z, cc, one) = (g.i64s(&[0])?, g.i64s(&[c as i64])?, g.i64s(&[1])?);
        let (z, cc, one) = (g.squeeze(&z, 0)?, g.squeeze(&cc, 0)?, g.squeeze(&one, 0)?);
        let classes = g.op("Range", &[&z, &cc, &one], vec![]);
        let bg = g.i64s(&[i64::from(d.background)])?;
        let is_bg = g.op("Equal", &[&classes, &bg], vec![]);
        let s = g.i64s(&[1, -1, 1])?;
        let is_bg = g.op("Reshape", &[&is_bg, &s], vec![]); // [1, C, 1]
        masked = g.op("Where", &[&is_bg, &ninf, &masked], vec![]);
    }
    if let Some(k) = d.top_k.filter(|&k| k > -1 && (k as usize) < priors) {
        let kk = g.i64s(&[i64::from(k)])?;
        let k = g.op("Min", &[&kk, &pd], vec![]);
        let (_, idx) = g.op2(
            "TopK",
            &[&masked, &k],
            vec![
                attr("axis", A::I(-1)),
                attr("largest", A::I(1)),
                attr("sorted", A::I(1)),
            ],
        );
        let zero = g.f32(0.0)?;
        let zeros = g.op("Mul", &[&masked, &zero], vec![]);
        let one = g.f32(1.0)?;
        let ishape = g.op("Shape", &[&idx], vec![]);
        let ones = g.op("Expand", &[&one, &ishape], vec![]);
        let keep = g.op(
            "ScatterElements",
            &[&zeros, &idx, &ones],
            vec![attr("axis", A::I(-1))],
        );
        let keep = g.cast(&keep, BOOL);
        masked = g.op("Where", &[&keep, &masked, &ninf], vec![]);
    }

    // 3. Boxes for NMS: Caffe gives an inverted box (xmax < xmin or ymax < ymin) size 0
    // and overlap 0 with everything, NonMaxSuppression would reorder its corners: it
    // goes to NMS as a point. OpenCV's pixel arithmetic: max corners one pixel further.
    let (bx0, by0, bx1, by1) = (
        g.col(&box_, 0)?,
        g.col(&box_, 1)?,
        g.col(&box_, 2)?,
        g.col(&box_, 3)?,
    );
    let lx = g.op("Less", &[&bx1, &bx0], vec![]);
    let ly = g.op("Less", &[&by1, &by0], vec![]);
    let inv = g.op("Or", &[&lx, &ly], vec![]);
    let point = g.op(
        "Concat",
        &[&bx0, &by0, &bx0, &by0],
        vec![attr("axis", A::I(-1))],
    );
    let grown = if plus_one {
        let k = g.f32s(vec![0.0, 0.0, 1.0, 1.0], vec![4])?;
        g.op("Add", &[&box_, &k], vec![])
    } else {
        box_.clone()
    };
    let nms_box = g.op("Where", &[&inv, &point, &grown], vec![]); // [N, P, L, 4]

    // 4. NonMaxSuppression per image (shared boxes) or per (image, class).
    let (nb, ns) = if d.share_location {
        let s = g.shape(&[Part::C(0), Part::V(&pd), Part::C(4)])?;
        (g.op("Reshape", &[&nms_box, &s], vec![]), masked.clone())
    } else {
        let t = g.op(
            "Transpose",
            &[&nms_box],
            vec![attr("perm", A::Is(vec![0, 2, 1, 3]))],
        );
        let s = g.shape(&[Part::C(-1), Part::V(&pd), Part::C(4)])?;
        let nb = g.op("Reshape", &[&t, &s], vec![]); // [N*C, P, 4]
        let s = g.shape(&[Part::C(-1), Part::C(1), Part::V(&pd)])?;
        (nb, g.op("Reshape", &[&masked, &s], vec![])) // [N*C, 1, P]
    };
    let iou = g.f32(d.nms_threshold)?;
    let thr = g.f32(d.confidence_threshold)?;
    let sel = g.op(
        "NonMaxSuppression",
        &[&nb, &ns, &pd, &iou, &thr],
        vec![attr("center_point_box", A::I(0))],
    ); // [K, 3]: batch, class, prior
    let b = g.col(&sel, 0)?;
    let b = g.squeeze(&b, 1)?;
    let cl = g.col(&sel, 1)?;
    let cl = g.squeeze(&cl, 1)?;
    let pr = g.col(&sel, 2)?;
    let pr = g.squeeze(&pr, 1)?;
    let (img, cls, boxes_src, first) = if d.share_location {
        let s = g.shape(&[Part::C(0), Part::V(&pd), Part::C(4)])?;
        let src = g.op("Reshape", &[&box_, &s], vec![]); // [N, P, 4]
        (b.clone(), cl, src, b)
    } else {
        let cc = g.i64s(&[c as i64])?;
        let img = g.op("Div", &[&b, &cc], vec![]);
        let cls = g.op("Mod", &[&b, &cc], vec![]);
        let t = g.op(
            "Transpose",
            &[&box_],
            vec![attr("perm", A::Is(vec![0, 2, 1, 3]))],
        );
        let s = g.shape(&[Part::C(-1), Part::V(&pd), Part::C(4)])?;
        let src = g.op("Reshape", &[&t, &s], vec![]); // [N*C, P, 4]
        (img, cls, src, b)
    };
    let (ui, uc, up, uf) = (
        g.unsqueeze1(&img)?,
        g.unsqueeze1(&cls)?,
        g.unsqueeze1(&pr)?,
        g.unsqueeze1(&first)?,
    );
    let box_idx = g.op("Concat", &[&uf, &up], vec![attr("axis", A::I(1))]);
    let score_idx = g.op("Concat", &[&ui, &uc, &up], vec![attr("axis", A::I(1))]);

    // 5. Rows [K, 7]: image, label, score (unmasked), decoded box; NMS emits them image
    // by image, class by class, score descending: Caffe's order.
    let score = g.op("GatherND", &[&conf_t, &score_idx], vec![]); // [K]
    let boxes = g.op("GatherND", &[&boxes_src, &box_idx], vec![]); // [K, 4]
    let fi = g.cast(&ui, FLOAT);
    let fc = g.cast(&uc, FLOAT);
    let us = g.unsqueeze1(&score)?;
    let mut rows = g.op(
        "Concat",
        &[&fi, &fc, &us, &boxes],
        vec![attr("axis", A::I(1))],
    );

    // 6. keep_top_k per image over all classes (TopK: equal scores keep the lower class,
    // then the lower prior), rows kept in NMS order.
    if d.keep_top_k > -1 {
        let pc = g.i64s(&[c as i64])?;
        let cp = g.op("Mul", &[&pc, &pd], vec![]);
        let t = g.op("Mul", &[&cls, &pd], vec![]);
        let flat = g.op("Add", &[&t, &pr], vec![]);
        let uflat = g.unsqueeze1(&flat)?;
        let nf = g.op("Concat", &[&ui, &uflat], vec![attr("axis", A::I(1))]);
        let nimg = g.dim(&loc, 0);
        let dshape = g.op("Concat", &[&nimg, &cp], vec![attr("axis", A::I(0))]);
        let empty = g.op("Expand", &[&ninf, &dshape], vec![]);
        let dense = g.op("ScatterND", &[&empty, &nf, &score], vec![]);
        let kk = g.i64s(&[i64::from(d.keep_top_k)])?;
        let k = g.op("Min", &[&kk, &cp], vec![]);
        let (vals, idx) = g.op2(
            "TopK",
            &[&dense, &k],
            vec![
                attr("axis", A::I(1)),
                attr("largest", A::I(1)),
                attr("sorted", A::I(1)),
            ],
        );
        let real = g.op("Greater", &[&vals, &ninf], vec![]);
        let real = g.cast(&real, FLOAT);
        let zero = g.f32(0.0)?;
        let dsh = g.op("Shape", &[&dense], vec![]);
        let zeros = g.op("Expand", &[&zero, &dsh], vec![]);
        let mark = g.op(
            "ScatterElements",
            &[&zeros, &idx, &real],
            vec![attr("axis", A::I(1))],
        );
        let keep = g.op("GatherND", &[&mark, &nf], vec![]);
        let keep = g.cast(&keep, BOOL);
        rows = g.op("Compress", &[&rows, &keep], vec![attr("axis", A::I(0))]);
    }

    // 7. Nothing detected in the whole batch: Caffe's [i, -1, -1, -1, -1, -1, -1] per
    // image (a Compress instead of an If).
    let nimg = g.dim(&loc, 0);
    let (z, one) = (g.i64s(&[0])?, g.i64s(&[1])?);
    let nsc = g.squeeze(&nimg, 0)?;
    let zs = g.squeeze(&z, 0)?;
    let os = g.squeeze(&one, 0)?;
    let range = g.op("Range", &[&zs, &nsc, &os], vec![]);
    let ids = g.cast(&range, FLOAT);
    let uids = g.unsqueeze1(&ids)?;
    let minus = g.f32(-1.0)?;
    let six = g.i64s(&[6])?;
    let fshape = g.op("Concat", &[&nimg, &six], vec![attr("axis", A::I(0))]);
    let neg = g.op("Expand", &[&minus, &fshape], vec![]);
    let fallback = g.op("Concat", &[&uids, &neg], vec![attr("axis", A::I(1))]);
    let count = g.dim(&rows, 0);
    let nothing = g.op("Equal", &[&count, &z], vec![]);
    let t = g.bools(&[true])?;
    let all = g.op("Expand", &[&t, &count], vec![]);
    let fb = g.op("Expand", &[&nothing, &nimg], vec![]);
    let mask = g.op("Concat", &[&all, &fb], vec![attr("axis", A::I(0))]);
    let both = g.op("Concat", &[&rows, &fallback], vec![attr("axis", A::I(0))]);
    let out = g.op("Compress", &[&both, &mask], vec![attr("axis", A::I(0))]);
    let s = g.i64s(&[1, 1, -1, 7])?;
    g.cx.op_to("Reshape", vec![out, s], &top, vec![]);
    // The row count is known only at run time: Caffe's shape is a bound.
    let dim = g.cx.fresh("detections");
    g.cx.g.dynamic.insert(top, vec![(2, dim)]);
    Ok(out_shape)
}
