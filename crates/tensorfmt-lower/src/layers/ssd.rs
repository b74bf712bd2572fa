//! SSD's PriorBox (weiliu89/caffe `prior_box_layer.cpp`, OpenCV `prior_box_layer.cpp`
//! for its explicit `width`/`height` and `offset_h`/`offset_w` lists) and OpenCV's
//! PriorBoxClustered:
//! the boxes depend only on the feature map's and the image's sizes, so they are
//! computed at conversion time and stored as a constant `[1, 2, H*W*priors*4]`
//! (boxes, then variances).

use super::context::LayerCx;
use crate::error::{Fail, LResult};

/// The prior boxes and variances of one PriorBox layer; `clip_default` is what an
/// unset `clip` means (Caffe's PriorBox: false; OpenCV's PriorBoxClustered: true).
///
/// Box sizes per cell: weiliu89's (per `min_size`: the square, the `sqrt(min * max)`
/// square, one box per aspect ratio) or OpenCV's explicit `width`/`height` lists; each
/// size once per offset (OpenCV's `offset_h`/`offset_w` lists, else `offset`).
pub(crate) fn prior_boxes(
    p: &tensorfmt_caffe::proto::PriorBoxParameter,
    layer: [usize; 2],
    image: [usize; 2],
    clip_default: bool,
) -> LResult<Vec<f32>> {
    let explicit = !p.width.is_empty() || !p.height.is_empty();
    // (x, y) offsets of the box centres within a cell.
    let offsets: Vec<(f32, f32)> = if p.offset_h.is_empty() && p.offset_w.is_empty() {
        vec![(p.offset(), p.offset())]
    } else {
        if p.offset_h.len() != p.offset_w.len() {
            return Err(Fail::new(format!(
                "{} offset_h but {} offset_w (OpenCV needs one of each per offset)",
                p.offset_h.len(),
                p.offset_w.len()
            )));
        }
        if p.offset.is_some() {
            return Err(Fail::new(
                "offset together with offset_h/offset_w (OpenCV refuses it)",
            ));
        }
        if p.offset_h.len() > 2 {
            // OpenCV sizes its output for 2 * (n - 1) offsets and writes n.
            return Err(Fail::not_lowered(format!(
                "{} offset_h/offset_w pairs: OpenCV, the only program with these fields, \
                 sizes its output for {} boxes per size and writes {}",
                p.offset_h.len(),
                2 * (p.offset_h.len() - 1),
                p.offset_h.len()
            )));
        }
        p.offset_w
            .iter()
            .copied()
            .zip(p.offset_h.iter().copied())
            .collect()
    };
    let (lh, lw) = (layer[0], layer[1]);
    // Box sizes (width, height) in pixels, in Caffe's / OpenCV's order.
    let mut sizes: Vec<(f32, f32)> = Vec::new();
    let (img_h, img_w);
    if explicit {
        if p.width.len() != p.height.len() {
            return Err(Fail::new(format!(
                "{} width but {} height values",
                p.width.len(),
                p.height.len()
            )));
        }
        if !p.min_size.is_empty() || !p.max_size.is_empty() || !p.aspect_ratio.is_empty() {
            return Err(Fail::new(
                "explicit width/height together with min_size, max_size or aspect_ratio \
                 (OpenCV refuses it)",
            ));
        }
        sizes.extend(p.width.iter().copied().zip(p.height.iter().copied()));
        // OpenCV's form: the image size is the second bottom's (img_size, img_h and img_w
        // are weiliu89's fields, which OpenCV does not read).
        (img_h, img_w) = (image[0] as f32, image[1] as f32);
    } else {
        if p.min_size.is_empty() {
            return Err(Fail::new("no min_size"));
        }
        if !p.max_size.is_empty() && p.max_size.len() != p.min_size.len() {
            return Err(Fail::new("max_size must be given once per min_size"));
        }
        if offsets.len() > 1 && p.min_size.len() > 1 {
            return Err(Fail::not_lowered(
                "offset_h/offset_w lists (OpenCV's) with several min_size (weiliu89's): \
                 OpenCV reads only the first min_size",
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
        for (s, &min) in p.min_size.iter().enumerate() {
            sizes.push((min, min));
            if let Some(&max) = p.max_size.get(s) {
                let side = (min * max).sqrt();
                sizes.push((side, side));
            }
            for &ar in &ars {
                if (ar - 1.0).abs() < 1e-6 {
                    continue;
                }
                sizes.push((min * ar.sqrt(), min / ar.sqrt()));
            }
        }
        (img_h, img_w) = match (p.img_h, p.img_w, p.img_size) {
            (Some(h), Some(w), _) => (h as f32, w as f32),
            (None, None, Some(s)) => (s as f32, s as f32),
            _ => (image[0] as f32, image[1] as f32),
        };
    }
    let (step_h, step_w) = match (p.step_h, p.step_w, p.step) {
        (Some(h), Some(w), _) => (h, w),
        (None, None, Some(s)) => (s, s),
        _ => (img_h / lh as f32, img_w / lw as f32),
    };
    let mut boxes: Vec<f32> = Vec::new();
    for h in 0..lh {
        for w in 0..lw {
            for &(bw, bh) in &sizes {
                for &(ox, oy) in &offsets {
                    let cx = (w as f32 + ox) * step_w;
                    let cy = (h as f32 + oy) * step_h;
                    boxes.push((cx - bw / 2.0) / img_w);
                    boxes.push((cy - bh / 2.0) / img_h);
                    boxes.push((cx + bw / 2.0) / img_w);
                    boxes.push((cy + bh / 2.0) / img_h);
                }
            }
        }
    }
    if p.clip.unwrap_or(clip_default) {
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
    // Finite parameters can still overflow (sqrt(min_size * max_size) of 1e38 and
    // 3e38): Caffe would compute infinite or NaN boxes, which no detection survives.
    if let Some(v) = out.iter().find(|v| !v.is_finite()) {
        return Err(Fail::new(format!(
            "the boxes overflow float32 (a value is {v}): box sizes {sizes:?}, image \
             {img_w} x {img_h}"
        )));
    }
    Ok(out)
}

/// `PriorBox`: a constant (an unset `clip` is false, weiliu89's default).
pub(crate) fn prior_box(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    priors_constant(cx, false)
}

/// `PriorBoxClustered` (OpenVINO's op, which OpenCV 4 runs as its PriorBox with
/// explicit `width`/`height`): a constant; an unset `clip` is true, as in OpenCV and
/// OpenVINO's specification.
pub(crate) fn prior_box_clustered(cx: &mut LayerCx<'_>) -> LResult<Vec<Vec<usize>>> {
    priors_constant(cx, true)
}

fn priors_constant(cx: &mut LayerCx<'_>, clip_default: bool) -> LResult<Vec<Vec<usize>>> {
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
    cx.check_computed(
        &format!("the prior boxes ({count} values)"),
        count.saturating_mul(4),
    )?;
    let data = prior_boxes(&p, [f[2], f[3]], [img[2], img[3]], clip_default)?;
    let len = data.len() / 2;
    let c = cx.f32s("priors", data, vec![1, 2, len])?;
    cx.identity(&c, &tops[0]);
    Ok(vec![vec![1, 2, len]])
}
