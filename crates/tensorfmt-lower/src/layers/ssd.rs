//! SSD's PriorBox (weiliu89/caffe `prior_box_layer.cpp`, OpenCV `prior_box_layer.cpp`):
//! the boxes depend only on the feature map's and the image's sizes, so they are
//! computed at conversion time and stored as a constant `[1, 2, H*W*priors*4]`
//! (boxes, then variances).

use super::LayerCx;
use crate::error::{Fail, LResult};

/// The prior boxes and variances of one PriorBox layer.
pub(crate) fn prior_boxes(
    p: &tensorfmt_caffe::proto::PriorBoxParameter,
    layer: [usize; 2],
    image: [usize; 2],
) -> LResult<Vec<f32>> {
    if p.min_size.is_empty() {
        return Err(Fail::new("no min_size"));
    }
    if !p.max_size.is_empty() && p.max_size.len() != p.min_size.len() {
        return Err(Fail::new("max_size must be given once per min_size"));
    }
    if !p.width.is_empty() || !p.offset_h.is_empty() {
        return Err(Fail::not_lowered(
            "OpenCV's explicit width/height/offset_h lists are not lowered",
        ));
    }
    let mut ars = vec![1.0f32];
    for &ar in &p.aspect_ratio {
        if ars.iter().any(|&x| (x - ar).abs() < 1e-6) {
            continue;
        }
        ars.push(ar);
        if p.flip() {
            ars.push(1.0 / ar);
        }
    }
    let (lh, lw) = (layer[0], layer[1]);
    let (img_h, img_w) = match (p.img_h, p.img_w, p.img_size) {
        (Some(h), Some(w), _) => (h as f32, w as f32),
        (None, None, Some(s)) => (s as f32, s as f32),
        _ => (image[0] as f32, image[1] as f32),
    };
    let (step_h, step_w) = match (p.step_h, p.step_w, p.step) {
        (Some(h), Some(w), _) => (h, w),
        (None, None, Some(s)) => (s, s),
        _ => (img_h / lh as f32, img_w / lw as f32),
    };
    let offset = p.offset();
    let mut boxes: Vec<f32> = Vec::new();
    let push = |boxes: &mut Vec<f32>, cx: f32, cy: f32, bw: f32, bh: f32| {
        boxes.push((cx - bw / 2.0) / img_w);
        boxes.push((cy - bh / 2.0) / img_h);
        boxes.push((cx + bw / 2.0) / img_w);
        boxes.push((cy + bh / 2.0) / img_h);
    };
    for h in 0..lh {
        for w in 0..lw {
            let cx = (w as f32 + offset) * step_w;
            let cy = (h as f32 + offset) * step_h;
            for (s, &min) in p.min_size.iter().enumerate() {
                push(&mut boxes, cx, cy, min, min);
                if let Some(&max) = p.max_size.get(s) {
                    let side = (min * max).sqrt();
                    push(&mut boxes, cx, cy, side, side);
                }
                for &ar in &ars {
                    if (ar - 1.0).abs() < 1e-6 {
                        continue;
                    }
                    push(&mut boxes, cx, cy, min * ar.sqrt(), min / ar.sqrt());
                }
            }
        }
    }
    if p.clip() {
        for v in &mut boxes {
            *v = v.clamp(0.0, 1.0);
        }
    }
    let var: [f32; 4] = match p.variance.as_slice() {
        [] => [0.1; 4],
        [v] => [*v; 4],
        [a, b, c, d] => [*a, *b, *c, *d],
        v => {
            return Err(Fail::new(format!(
                "{} variances (1 or 4 expected)",
                v.len()
            )))
        }
    };
    let n = boxes.len();
    let mut out = boxes;
    out.reserve(n);
    for i in 0..n {
        out.push(var[i % 4]);
    }
    Ok(out)
}

/// The largest constant the lowering computes itself (PriorBox): 256 MiB. SSD300's
/// prior boxes are 280 kB; anything near the limit comes from an absurd input shape.
pub(crate) const MAX_COMPUTED_BYTES: u64 = 256 << 20;

/// `PriorBox`: a constant.
pub(crate) fn prior_box(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    let (ins, tops) = (cx.ins, cx.tops);
    let (f, img) = (&ins[0].shape, &ins[1].shape);
    if f.len() != 4 || img.len() != 4 {
        return Err(Fail::new(format!("bottoms {f:?} and {img:?} must be 4-D")));
    }
    let p = cx.param().prior_box_param.clone().unwrap_or_default();
    // The constant's size is known from Caffe's shape before any box is computed: an
    // absurd feature map is refused at once, not after minutes and gigabytes.
    let count: u64 = cx
        .caffe
        .tops
        .first()
        .map_or(0, |s| s.iter().map(|&d| d as u64).product());
    let bytes = count.saturating_mul(4);
    if bytes > MAX_COMPUTED_BYTES {
        return Err(Fail::new(format!(
            "the prior boxes would be a constant of {bytes} bytes ({count} values), over the \
             {MAX_COMPUTED_BYTES}-byte limit of constants computed at conversion"
        )));
    }
    let data = prior_boxes(&p, [f[2], f[3]], [img[2], img[3]])?;
    let len = data.len() / 2;
    let c = cx.f32s("priors", data, vec![1, 2, len])?;
    cx.identity(&c, &tops[0]);
    Ok(vec![vec![1, 2, len]])
}
