"""Caffe's detector and recurrent layers written in numpy from the original programs'
sources (issue 30): the references the ONNX lowerings of these layers are checked
against (``test_caffe_refs.py`` checks each one against OpenCV 4 or real BVLC Caffe,
``onnx_designs.py`` builds the planned ONNX graphs and compares them with these).

Every function names the file and lines it follows. Sources, at the commits read:

- weiliu89/caffe branch ``ssd`` @4817bf8b (SSD): ``src/caffe/layers/detection_output_layer.cpp``,
  ``src/caffe/util/bbox_util.cpp``, ``src/caffe/proto/caffe.proto``.
- rbgirshick/py-faster-rcnn @781a917: ``lib/rpn/proposal_layer.py``,
  ``lib/rpn/generate_anchors.py``, ``lib/fast_rcnn/bbox_transform.py``,
  ``lib/nms/{gpu_nms.pyx,nms_kernel.cu,cpu_nms.pyx,py_cpu_nms.py}``, ``lib/fast_rcnn/config.py``.
- rbgirshick/caffe-fast-rcnn branch ``faster-rcnn`` @4115385d: ``src/caffe/layers/roi_pooling_layer.cpp``.
- daijifeng001/caffe-rfcn @543f8f6a (R-FCN): ``src/caffe/layers/psroi_pooling_layer.cu`` (its
  ``.cpp`` Forward_cpu is ``NOT_IMPLEMENTED``: the GPU kernel is the definition).
- YOLOv2 ports: gklz1982/caffe-yolov2 @ebb2702 ``include/caffe/layers/reorg_layer.hpp``
  (Darknet's ``reorg_cpu``), BirdeeChen/caffe_yolo_v2 @6a1e6581 ``src/caffe/layers/region_layer.cpp``,
  openvinotoolkit/training_toolbox_caffe ``src/caffe/layers/region_yolo_layer.cpp``; OpenCV 4
  ``modules/dnn/src/layers/region_layer.cpp`` (Darknet's decoding, as OpenCV runs YOLOv2).
- OpenCV 4 ``modules/dnn/src/layers/{detection_output_layer,proposal_layer,prior_box_layer,reorg_layer}.cpp``
  and ``modules/dnn/src/nms.inl.hpp`` for its variants (``flavour="opencv"``).
- BVLC/caffe @9b891540: ``src/caffe/layers/{mvn_layer,lstm_layer,lstm_unit_layer,rnn_layer,recurrent_layer}.cpp``.
- hszhao/PSPNet @798bdc9: ``src/caffe/layers/interp_layer.cpp``, ``src/caffe/util/interp.cpp``.

Arithmetic is float32 where the original computes in float (Caffe's ``Dtype``) and in
float64 where it computes in double (numpy's default in py-faster-rcnn's anchors).
"""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


# --------------------------------------------------------------------------------------
# SSD DetectionOutput (weiliu89/caffe@ssd), and OpenCV 4's variant of it
# --------------------------------------------------------------------------------------

CODE_TYPES = ("CORNER", "CENTER_SIZE", "CORNER_SIZE")


def bbox_size(b: np.ndarray, plus_one: bool = False) -> np.ndarray:
    """``BBoxSize`` (bbox_util.cpp:82-100): 0 for an invalid box (xmax < xmin or ymax <
    ymin), else width * height; ``plus_one`` is its ``normalized = false`` branch,
    ``(w + 1) * (h + 1)``, which weiliu89's DetectionOutput never takes and OpenCV's takes
    with ``normalized_bbox: false``. ``b`` is ``[..., 4]`` (xmin, ymin, xmax, ymax)."""
    b = b.astype(F32)
    w = b[..., 2] - b[..., 0]
    h = b[..., 3] - b[..., 1]
    if plus_one:
        w, h = w + F32(1), h + F32(1)
    size = (w * h).astype(F32)
    return np.where((b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1]), F32(0), size)


def jaccard_overlap(a: np.ndarray, b: np.ndarray, plus_one: bool = False) -> np.ndarray:
    """``JaccardOverlap`` (bbox_util.cpp:274-294, with ``IntersectBBox`` :65-80), one box
    ``a`` against boxes ``b`` ``[K, 4]``: 0 when the boxes do not intersect (``b.xmin >
    a.xmax`` ...) or the intersection has no positive width and height; else
    ``inter / (size(a) + size(b) - inter)`` with the stored sizes (``BBoxSize``).
    ``plus_one`` is OpenCV's ``JaccardOverlap<false>`` (detection_output_layer.cpp), whose
    intersection is ``BBoxSize(intersect, false)``: ``(w + 1) * (h + 1)`` whenever
    ``xmax >= xmin`` and ``ymax >= ymin``."""
    a = a.astype(F32)
    b = b.astype(F32)
    ix0 = np.maximum(a[0], b[:, 0])
    iy0 = np.maximum(a[1], b[:, 1])
    ix1 = np.minimum(a[2], b[:, 2])
    iy1 = np.minimum(a[3], b[:, 3])
    if plus_one:
        inter = bbox_size(np.stack([ix0, iy0, ix1, iy1], axis=1), plus_one=True)
        ok = inter > 0
    else:
        disjoint = (b[:, 0] > a[2]) | (b[:, 2] < a[0]) | (b[:, 1] > a[3]) | (b[:, 3] < a[1])
        iw = np.where(disjoint, F32(0), ix1 - ix0)
        ih = np.where(disjoint, F32(0), iy1 - iy0)
        inter = (iw * ih).astype(F32)
        ok = (iw > 0) & (ih > 0)
    sa = bbox_size(a, plus_one)
    sb = bbox_size(b, plus_one)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = (inter / (sa + sb - inter)).astype(F32)
    return np.where(ok, iou, F32(0))


def apply_nms_fast(
    boxes: np.ndarray,
    scores: np.ndarray,
    score_threshold: float,
    nms_threshold: float,
    eta: float = 1.0,
    top_k: int = -1,
    plus_one: bool = False,
    top_k_all_when: int = -1,
) -> List[int]:
    """``ApplyNMSFast`` (bbox_util.cpp:1901-1936) with ``GetMaxScoreIndex`` (:1743-1760):
    candidates are the scores ``> score_threshold``, ``std::stable_sort``-ed by score
    descending (equal scores keep the lower index first), cut to ``top_k`` when ``top_k >
    -1`` (OpenCV's ``nms.inl.hpp`` cuts only when ``top_k > 0``: ``top_k_all_when=0``);
    then greedy: a candidate is kept when its overlap with every box kept so far is
    ``<= adaptive_threshold`` (so an IoU exactly at the threshold keeps the box), and each
    kept box with ``eta < 1`` and a threshold above 0.5 multiplies the threshold by eta.
    Returns the kept indices in the order kept (score descending)."""
    scores = np.asarray(scores, F32)
    cand = np.nonzero(scores > F32(score_threshold))[0]
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if top_k > top_k_all_when and top_k < len(order):
        order = order[:top_k]
    kept: List[int] = []
    thr = F32(nms_threshold)
    if eta >= 1.0:
        # Equivalent suppression form (the threshold never changes): faster.
        alive = np.ones(len(order), bool)
        for i in range(len(order)):
            if not alive[i]:
                continue
            kept.append(int(order[i]))
            rest = order[i + 1 :]
            if len(rest):
                ov = jaccard_overlap(boxes[order[i]], boxes[rest], plus_one)
                alive[i + 1 :] &= ~(ov > thr)
        return kept
    for idx in order:
        keep = True
        if kept:
            ov = jaccard_overlap(boxes[idx], boxes[np.array(kept)], plus_one)
            keep = bool(np.all(ov <= thr))
        if keep:
            kept.append(int(idx))
            if thr > 0.5:
                thr = F32(thr * F32(eta))
    return kept


def decode_boxes(
    loc: np.ndarray,
    prior: np.ndarray,
    variance: Optional[np.ndarray],
    code_type: str,
    variance_encoded_in_target: bool,
    plus_one: bool = False,
) -> np.ndarray:
    """``DecodeBBox`` (bbox_util.cpp:441-529) for ``loc`` ``[..., P, 4]`` and priors
    ``[P, 4]`` (variances ``[P, 4]``): CORNER adds the (variance-scaled) offsets to the
    prior's corners; CENTER_SIZE moves the prior's centre by ``var * d * size`` and scales
    its size by ``exp(var * d)``; CORNER_SIZE adds ``var * d * size`` to the corners. With
    ``variance_encoded_in_target`` the variances are not applied. ``plus_one`` is OpenCV's
    ``normalized_bbox: false``: CENTER_SIZE prior widths and heights get ``+ 1`` (and the
    centre is ``xmin + width / 2`` of that width)."""
    loc = loc.astype(F32)
    p = prior.astype(F32)
    v = np.ones_like(p) if variance_encoded_in_target else variance.astype(F32)
    d = loc if variance_encoded_in_target else (loc * v).astype(F32)
    pw = (p[:, 2] - p[:, 0]).astype(F32)
    ph = (p[:, 3] - p[:, 1]).astype(F32)
    if code_type == "CORNER":
        return (p + d).astype(F32)
    if code_type == "CORNER_SIZE":
        size = np.stack([pw, ph, pw, ph], axis=1)
        return (p + (d * size).astype(F32)).astype(F32)
    if code_type != "CENTER_SIZE":
        raise ValueError(f"unknown code_type {code_type!r}")
    if plus_one:
        pw, ph = pw + F32(1), ph + F32(1)
        pcx = (p[:, 0] + pw * F32(0.5)).astype(F32)
        pcy = (p[:, 1] + ph * F32(0.5)).astype(F32)
    else:
        # (xmin + xmax) / 2. is computed in double, then stored as float.
        pcx = ((p[:, 0].astype(np.float64) + p[:, 2]) / 2.0).astype(F32)
        pcy = ((p[:, 1].astype(np.float64) + p[:, 3]) / 2.0).astype(F32)
    cx = (d[..., 0] * pw + pcx).astype(F32)
    cy = (d[..., 1] * ph + pcy).astype(F32)
    w = (np.exp(d[..., 2]) * pw).astype(F32)
    h = (np.exp(d[..., 3]) * ph).astype(F32)
    hw = (w.astype(np.float64) / 2.0)
    hh = (h.astype(np.float64) / 2.0)
    return np.stack(
        [(cx - hw).astype(F32), (cy - hh).astype(F32), (cx + hw).astype(F32), (cy + hh).astype(F32)], axis=-1
    )


def detection_output(
    loc: np.ndarray,
    conf: np.ndarray,
    prior: np.ndarray,
    *,
    num_classes: int,
    share_location: bool = True,
    background_label_id: int = 0,
    code_type: str = "CORNER",
    variance_encoded_in_target: bool = False,
    keep_top_k: int = -1,
    confidence_threshold: Optional[float] = None,
    nms_threshold: float = 0.3,
    top_k: Optional[int] = None,
    eta: float = 1.0,
    clip: bool = False,
    normalized_bbox: bool = True,
    image_shape: Optional[Tuple[int, int]] = None,
    flavour: str = "ssd",
    pixel_plus_one: bool = False,
) -> np.ndarray:
    """SSD's ``DetectionOutput`` forward: ``[1, 1, n, 7]`` rows (image_id, label, score,
    xmin, ymin, xmax, ymax).

    ``flavour="ssd"`` is weiliu89's layer (detection_output_layer.cpp:180-295):

    - ``loc`` ``[N, P * L * 4]`` (L = 1 with ``share_location``, else ``num_classes``;
      ``GetLocPredictions`` bbox_util.cpp:1133-1159: prior-major, then class, then the 4
      coordinates), ``conf`` ``[N, P * num_classes]`` (``GetConfidenceScores`` :1336-1351),
      ``prior`` ``[1, 2, P * 4]`` boxes then variances (``GetPriorBBoxes`` :1655-1680).
    - decoded per ``code_type`` (``DecodeBBoxesAll`` :552-582; the CPU forward passes
      ``clip_bbox = false``, line 205), one NMS per image and class except the background
      (``ApplyNMSFast`` with ``confidence_threshold`` (unset: ``-FLT_MAX``, line 29-30),
      ``nms_param.top_k`` before NMS (unset: all), ``nms_threshold`` and ``eta``).
    - ``keep_top_k > -1`` and more detections than that in an image: the ``keep_top_k``
      best of that image over all classes (lines 239-270). Caffe sorts with ``std::sort``
      (not stable), so among equal scores at the cut the choice is libstdc++'s; here equal
      scores keep the lower (label, NMS rank) first.
    - rows: image by image, labels ascending (``std::map``), within a label by score
      descending (the NMS order; after keep_top_k the sorted order), lines 297-370.
    - no detection in the whole batch: one row per image ``[i, -1, -1, -1, -1, -1, -1]``
      (lines 281-291).
    - ``share_location`` with ``background_label_id: -1`` is a fatal error in Caffe (the
      shared boxes carry label -1 and are skipped as background, bbox_util.cpp:566-570),
      and in OpenCV too: raised here.
    - ``normalized_bbox`` is not an SSD field (field 10 is ``visualize`` in SSD's proto):
      with ``flavour="ssd"`` it only chooses the clip bounds, the arithmetic is SSD's
      (no +1 anywhere). ``clip`` (OpenCV's field 1000) clips decoded boxes before NMS to
      ``[0, 1]`` (or to ``[0, W-1] x [0, H-1]`` of ``image_shape`` (H, W) when not
      normalized), as OpenCV defines it.

    ``flavour="opencv"`` reproduces OpenCV 4's ``DetectionOutputLayerImpl``: CORNER_SIZE
    decodes as CORNER, ``normalized_bbox: false`` adds 1 to CENTER_SIZE prior sizes and to
    every box size and intersection, ``confidence_threshold`` defaults to 0, ``top_k`` cuts
    only when > 0, ``eta`` is ignored, and each image's rows are sorted by score
    descending over all labels (``std::sort``; equal scores: label order here). OpenCV's
    output size and empty output are not modelled (see test_caffe_refs.py).
    """
    opencv = flavour == "opencv"
    if flavour not in ("ssd", "opencv"):
        raise ValueError(flavour)
    if share_location and background_label_id == -1:
        # DecodeBBoxesAll skips the shared label -1 as the background (bbox_util.cpp:566-570),
        # then Forward_cpu finds no boxes for it: LOG(FATAL) (detection_output_layer.cpp:229-231).
        raise ValueError("Could not find location predictions for label -1 (share_location with background_label_id -1)")
    n = loc.shape[0]
    num_priors = prior.shape[-1] // 4
    num_loc = 1 if share_location else num_classes
    if num_priors * num_loc * 4 != loc[0].size or num_priors * num_classes != conf[0].size:
        raise ValueError("priors and loc / conf counts disagree")
    loc = loc.reshape(n, num_priors, num_loc, 4).astype(F32)
    conf = conf.reshape(n, num_priors, num_classes).astype(F32)
    pri = prior.reshape(-1, 2 if prior.size == 2 * num_priors * 4 else 1, num_priors, 4)[0]
    pboxes = pri[0]
    pvar = pri[1] if pri.shape[0] == 2 else None
    ct = code_type
    plus_one = (opencv and not normalized_bbox) or pixel_plus_one
    if opencv and ct == "CORNER_SIZE":
        ct = "CORNER"
    thr = confidence_threshold
    if thr is None:
        thr = 0.0 if opencv else -FLT_MAX
    tk = -1 if top_k is None else top_k
    eta_eff = 1.0 if opencv else eta
    rows: List[List[float]] = []
    all_kept = 0
    per_image = []
    for i in range(n):
        dec = decode_boxes(loc[i].transpose(1, 0, 2), pboxes, pvar, ct, variance_encoded_in_target, plus_one)
        if clip:
            if normalized_bbox:
                lo, hx, hy = F32(0), F32(1), F32(1)
            else:
                if image_shape is None:
                    raise ValueError("clip without normalized_bbox needs image_shape")
                lo, hx, hy = F32(0), F32(image_shape[1] - 1), F32(image_shape[0] - 1)
            dec = dec.copy()
            dec[..., 0::2] = np.clip(dec[..., 0::2], lo, hx)
            dec[..., 1::2] = np.clip(dec[..., 1::2], lo, hy)
        indices: Dict[int, List[int]] = {}
        num_det = 0
        for c in range(num_classes):
            if c == background_label_id:
                continue
            boxes = dec[0 if share_location else c]
            kept = apply_nms_fast(boxes, conf[i, :, c], thr, nms_threshold, eta_eff, tk, plus_one,
                                  top_k_all_when=0 if opencv else -1)
            indices[c] = kept
            num_det += len(kept)
        if keep_top_k > -1 and num_det > keep_top_k:
            pairs = [(float(conf[i, idx, c]), c, idx) for c in sorted(indices) for idx in indices[c]]
            order = sorted(range(len(pairs)), key=lambda j: -pairs[j][0])  # stable
            new: Dict[int, List[int]] = {}
            for j in order[:keep_top_k]:
                _, c, idx = pairs[j]
                new.setdefault(c, []).append(idx)
            indices = new
            num_det = keep_top_k
        all_kept += num_det
        per_image.append((dec, indices))
    if all_kept == 0 and not opencv:
        out = -np.ones((1, 1, n, 7), F32)
        out[0, 0, :, 0] = np.arange(n)
        return out
    for i, (dec, indices) in enumerate(per_image):
        img_rows = []
        for c in sorted(indices):
            boxes = dec[0 if share_location else c]
            for idx in indices[c]:
                img_rows.append([i, c, conf[i, idx, c], *boxes[idx]])
        if opencv:
            img_rows.sort(key=lambda r: -r[2])
        rows.extend(img_rows)
    return np.asarray(rows, F32).reshape(1, 1, -1, 7)


# --------------------------------------------------------------------------------------
# Faster R-CNN: anchors, ProposalLayer (Python and OpenCV's C++), ROIPooling
# --------------------------------------------------------------------------------------

# py-faster-rcnn lib/fast_rcnn/config.py:157-164 (__C.TEST.RPN_*).
RPN_TEST = {"pre_nms_topN": 6000, "post_nms_topN": 300, "nms_thresh": 0.7, "min_size": 16}


def generate_anchors(base_size: int = 16, ratios: Sequence[float] = (0.5, 1, 2), scales: Sequence[float] = (8, 16, 32)) -> np.ndarray:
    """py-faster-rcnn ``generate_anchors.py:37-97``: for each ratio (outer) and scale
    (inner), a box centred on the reference window ``(0, 0, base-1, base-1)``: ``ws =
    round(sqrt(w*h / ratio))``, ``hs = round(ws * ratio)`` (numpy's round: half to even),
    times the scale; corners ``ctr -+ 0.5 * (size - 1)``. float64, ``[A, 4]``."""
    base = np.array([1, 1, base_size, base_size], np.float64) - 1

    def whctrs(a):
        w = a[2] - a[0] + 1
        h = a[3] - a[1] + 1
        return w, h, a[0] + 0.5 * (w - 1), a[1] + 0.5 * (h - 1)

    def mk(ws, hs, x, y):
        ws, hs = ws[:, None], hs[:, None]
        return np.hstack((x - 0.5 * (ws - 1), y - 0.5 * (hs - 1), x + 0.5 * (ws - 1), y + 0.5 * (hs - 1)))

    w, h, x, y = whctrs(base)
    ratios = np.asarray(ratios, np.float64)
    ws = np.round(np.sqrt(w * h / ratios))
    hs = np.round(ws * ratios)
    ratio_anchors = mk(ws, hs, x, y)
    scales = np.asarray(scales, np.float64)
    out = []
    for r in ratio_anchors:
        w, h, x, y = whctrs(r)
        out.append(mk(w * scales, h * scales, x, y))
    return np.vstack(out)


def opencv_anchors(base_size: int, ratios: Sequence[float], scales: Sequence[float]) -> np.ndarray:
    """OpenCV's ``ProposalLayerImpl`` anchors (proposal_layer.cpp, constructor): width
    ``floor(base / sqrt(ratio) + 0.5)``, height ``floor(width * ratio + 0.5)`` (halves
    round up, py-faster-rcnn's ``np.round`` rounds them to even), times each scale; as a
    PriorBox with ``offset = 0.5 * base / stride`` and unnormalized corners ``c -+ size/2``
    (minus 1 on the max side), relative to cell (0, 0)."""
    out = []
    for r in ratios:
        w = np.floor(np.float32(base_size) / np.sqrt(np.float32(r)) + np.float32(0.5))
        h = np.floor(w * np.float32(r) + np.float32(0.5))
        for s in scales:
            bw, bh = np.float32(s) * w, np.float32(s) * h
            c = np.float32(0.5 * base_size)
            out.append([c - bw * 0.5, c - bh * 0.5, c + bw * 0.5 - 1, c + bh * 0.5 - 1])
    return np.asarray(out, np.float64)


def bbox_transform_inv(boxes: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """py-faster-rcnn ``bbox_transform.py:30-61``, in the deltas' dtype (float32 in
    the layer): widths ``x2 - x1 + 1``, centre ``x1 + 0.5 * w``, ``ctr += d * w``,
    ``size *= exp(d)``, corners ``ctr -+ 0.5 * size``."""
    boxes = boxes.astype(deltas.dtype, copy=False)
    widths = boxes[:, 2] - boxes[:, 0] + 1.0
    heights = boxes[:, 3] - boxes[:, 1] + 1.0
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    dx, dy, dw, dh = deltas[:, 0::4], deltas[:, 1::4], deltas[:, 2::4], deltas[:, 3::4]
    pcx = dx * widths[:, None] + ctr_x[:, None]
    pcy = dy * heights[:, None] + ctr_y[:, None]
    pw = np.exp(dw) * widths[:, None]
    ph = np.exp(dh) * heights[:, None]
    out = np.zeros(deltas.shape, dtype=deltas.dtype)
    out[:, 0::4] = pcx - 0.5 * pw
    out[:, 1::4] = pcy - 0.5 * ph
    out[:, 2::4] = pcx + 0.5 * pw
    out[:, 3::4] = pcy + 0.5 * ph
    return out


def clip_boxes(boxes: np.ndarray, im_shape: Sequence[float]) -> np.ndarray:
    """py-faster-rcnn ``bbox_transform.py:63-76``: x to ``[0, W-1]``, y to ``[0, H-1]``."""
    boxes[:, 0::4] = np.maximum(np.minimum(boxes[:, 0::4], im_shape[1] - 1), 0)
    boxes[:, 1::4] = np.maximum(np.minimum(boxes[:, 1::4], im_shape[0] - 1), 0)
    boxes[:, 2::4] = np.maximum(np.minimum(boxes[:, 2::4], im_shape[1] - 1), 0)
    boxes[:, 3::4] = np.maximum(np.minimum(boxes[:, 3::4], im_shape[0] - 1), 0)
    return boxes


def nms_plus_one(dets: np.ndarray, thresh: float, impl: str = "gpu", order: Optional[np.ndarray] = None) -> List[int]:
    """py-faster-rcnn's NMS on ``[x1, y1, x2, y2, score]`` rows with ``+1`` areas, in
    float32. ``order`` defaults to the original's ``scores.argsort()[::-1]`` (numpy's
    unstable sort reversed: equal scores in an order numpy picks). A box is suppressed by
    a kept one when their IoU is ``> thresh`` with ``impl="gpu"`` (the default
    ``cfg.USE_GPU_NMS = True``, config.py:205; ``nms_kernel.cu:71``) and with
    ``impl="py"`` (``py_cpu_nms.py:35`` keeps ``ovr <= thresh``), but ``>= thresh`` with
    ``impl="cpu"`` (``cpu_nms.pyx:65``): they disagree on an IoU exactly at the threshold."""
    x1, y1, x2, y2, scores = (dets[:, k].astype(F32) for k in range(5))
    areas = ((x2 - x1 + F32(1)) * (y2 - y1 + F32(1))).astype(F32)
    if order is None:
        order = scores.argsort()[::-1]
    suppressed = np.zeros(len(dets), bool)
    keep = []
    for _i in range(len(order)):
        i = order[_i]
        if suppressed[i]:
            continue
        keep.append(int(i))
        rest = order[_i + 1 :]
        rest = rest[~suppressed[rest]]
        if len(rest) == 0:
            continue
        w = np.maximum(F32(0), np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + F32(1))
        h = np.maximum(F32(0), np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + F32(1))
        inter = (w * h).astype(F32)
        ovr = (inter / (areas[i] + areas[rest] - inter)).astype(F32)
        hit = ovr >= F32(thresh) if impl == "cpu" else ovr > F32(thresh)
        suppressed[rest[hit]] = True
    return keep


def parse_param_str(param_str: str) -> dict:
    """py-faster-rcnn's ``ProposalLayer.setup`` reads ``param_str`` with ``yaml.load``
    (proposal_layer.py:26); the published nets write a Python dict literal without its
    braces (``"'feat_stride': 16"``). Parsed here as a Python literal, braces optional,
    else as YAML as the original does (``"feat_stride: 16"``); anything that is not a
    dict is an error."""
    s = param_str.strip()
    if not s.startswith("{"):
        s = "{" + s + "}"
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError) as e:
        import yaml  # PyYAML, as py-faster-rcnn reads it (dask installs it)

        try:
            value = yaml.load(param_str, Loader=yaml.FullLoader)
        except yaml.YAMLError:
            raise ValueError(f"param_str is not a Python dict literal: {param_str!r} ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"param_str is not a dict: {param_str!r}")
    return value


def proposal(
    cls_prob: np.ndarray,
    bbox_pred: np.ndarray,
    im_info: np.ndarray,
    *,
    feat_stride: int = 16,
    scales: Sequence[float] = (8, 16, 32),
    ratios: Sequence[float] = (0.5, 1, 2),
    base_size: int = 16,
    pre_nms_topN: int = RPN_TEST["pre_nms_topN"],
    post_nms_topN: int = RPN_TEST["post_nms_topN"],
    nms_thresh: float = RPN_TEST["nms_thresh"],
    min_size: float = RPN_TEST["min_size"],
    nms_impl: str = "gpu",
    stable: bool = False,
    anchors: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """py-faster-rcnn ``ProposalLayer.forward`` (proposal_layer.py:47-161) at test time:
    ``(rois [R, 5], scores [R, 1])``, R <= post_nms_topN (the top is reshaped to R rows).

    - scores: the second half of ``cls_prob``'s channels (foreground), ``[1, A, H, W]``
      transposed to (h, w, a) order; ``bbox_pred`` ``[1, 4A, H, W]`` likewise (lines 72-119);
    - anchors (``generate_anchors``, ratio-major; ``ratios`` is an extension: the original
      reads only ``feat_stride`` and ``scales`` from ``param_str``) shifted by
      ``(x, y) * feat_stride`` per cell, cell-major (lines 86-103);
    - ``bbox_transform_inv``, ``clip_boxes`` to ``im_info[:2]`` (lines 122-125);
    - drop boxes whose ``x2 - x1 + 1`` or ``y2 - y1 + 1`` is ``< min_size * im_info[2]``
      (``_filter_boxes``, lines 129, 171-176);
    - order by score descending (``argsort()[::-1]``; ``stable=True`` breaks ties by the
      lower index instead, as ONNX TopK does), keep ``pre_nms_topN`` (if > 0), NMS at
      ``nms_thresh`` (``nms_plus_one``), keep ``post_nms_topN`` (if > 0) (lines 135-148);
    - rois ``[0, x1, y1, x2, y2]`` float32: only batch 1 is supported (line 61).
    """
    assert cls_prob.shape[0] == 1, "Only single item batches are supported"
    if anchors is None:
        anchors = generate_anchors(base_size, ratios, scales)
    A = anchors.shape[0]
    scores = cls_prob[:, A:, :, :].astype(F32)
    deltas = bbox_pred.astype(F32)
    info = np.asarray(im_info, F32).reshape(-1)
    height, width = scores.shape[-2:]
    sx, sy = np.meshgrid(np.arange(width) * feat_stride, np.arange(height) * feat_stride)
    shifts = np.vstack((sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel())).transpose()
    K = shifts.shape[0]
    all_anchors = (anchors.reshape((1, A, 4)) + shifts.reshape((1, K, 4)).transpose((1, 0, 2))).reshape((K * A, 4))
    deltas = deltas.transpose((0, 2, 3, 1)).reshape((-1, 4))
    scores = scores.transpose((0, 2, 3, 1)).reshape((-1, 1))
    props = bbox_transform_inv(all_anchors, deltas)
    props = clip_boxes(props, info[:2])
    ms = min_size * info[2]
    ws = props[:, 2] - props[:, 0] + 1
    hs = props[:, 3] - props[:, 1] + 1
    keep = np.where((ws >= ms) & (hs >= ms))[0]
    props, scores = props[keep, :], scores[keep]
    if stable:
        order = np.argsort(-scores.ravel(), kind="stable")
    else:
        order = scores.ravel().argsort()[::-1]
    if pre_nms_topN > 0:
        order = order[:pre_nms_topN]
    props, scores = props[order, :], scores[order]
    dets = np.hstack((props, scores))
    keep = nms_plus_one(dets, nms_thresh, nms_impl, order=np.arange(len(dets)) if stable else None) if len(dets) else []
    if post_nms_topN > 0:
        keep = keep[:post_nms_topN]
    props, scores = props[keep, :], scores[keep]
    rois = np.hstack((np.zeros((props.shape[0], 1), F32), props.astype(F32, copy=False)))
    return rois.astype(F32), scores.astype(F32).reshape(-1, 1)


def proposal_opencv(cls_prob, bbox_pred, im_info, *, feat_stride=16, base_size=16, scales=(8, 16, 32), ratios=(0.5, 1, 2),
                    pre_nms_topN=6000, post_nms_topN=300, nms_thresh=0.7):
    """OpenCV 4's C++ ``Proposal`` (proposal_layer.cpp): the same pipeline run as a
    PriorBox + DetectionOutput(CENTER_SIZE, variance in target, ``normalized_bbox:
    false``, clip to ``im_info``, ``top_k = pre_nms_topn``, ``keep_top_k =
    post_nms_topn``), with two differences from py-faster-rcnn: ``min_size`` is not
    applied (the line that reads it is commented out), and the output always has
    ``post_nms_topN`` rows, the missing ones all zero (also its scores). Rows are sorted
    by score. Returns ``(rois [post, 5], scores [post, 1])``."""
    anchors = opencv_anchors(base_size, ratios, scales)
    rois, scores = proposal(cls_prob, bbox_pred, im_info, feat_stride=feat_stride, anchors=anchors,
                            pre_nms_topN=pre_nms_topN, post_nms_topN=post_nms_topN, nms_thresh=nms_thresh,
                            min_size=0, stable=True)
    # OpenCV's DetectionOutput drops scores <= 0 (confidence_threshold 0).
    ok = scores[:, 0] > 0
    rois, scores = rois[ok], scores[ok]
    out_r = np.zeros((post_nms_topN, 5), F32)
    out_s = np.zeros((post_nms_topN, 1), F32)
    out_r[: len(rois)] = rois
    out_s[: len(scores)] = scores
    return out_r, out_s


def c_round(x: np.ndarray) -> np.ndarray:
    """C's ``round`` (halves away from zero), not numpy's half-to-even."""
    x = np.asarray(x)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def roi_pooling(x: np.ndarray, rois: np.ndarray, pooled_h: int, pooled_w: int, spatial_scale: float) -> np.ndarray:
    """caffe-fast-rcnn ``ROIPoolingLayer::Forward_cpu`` (roi_pooling_layer.cpp:46-125):
    ROI corners ``round(coord * spatial_scale)`` (C ``round``, halves away from zero);
    ``roi_h = max(end - start + 1, 1)``; bin ``ph`` covers ``[floor(ph * roi_h / pooled_h),
    ceil((ph + 1) * roi_h / pooled_h))`` (bin sizes in float) shifted by the start and
    clipped to the map; an empty bin gives 0, else the max. ``[R, C, pooled_h,
    pooled_w]``."""
    x = x.astype(F32)
    n, c, H, W = x.shape
    out = np.zeros((len(rois), c, pooled_h, pooled_w), F32)
    ss = F32(spatial_scale)
    for r, roi in enumerate(np.asarray(rois, F32)):
        b = int(roi[0])
        if not 0 <= b < n:
            raise ValueError(f"roi batch index {b} outside [0, {n})")
        sw, sh, ew, eh = (int(c_round(F32(v) * ss)) for v in roi[1:5])
        rh = max(eh - sh + 1, 1)
        rw = max(ew - sw + 1, 1)
        bh = F32(rh) / F32(pooled_h)
        bw = F32(rw) / F32(pooled_w)
        for ph in range(pooled_h):
            hs = min(max(int(np.floor(F32(ph) * bh)) + sh, 0), H)
            he = min(max(int(np.ceil(F32(ph + 1) * bh)) + sh, 0), H)
            for pw in range(pooled_w):
                ws_ = min(max(int(np.floor(F32(pw) * bw)) + sw, 0), W)
                we = min(max(int(np.ceil(F32(pw + 1) * bw)) + sw, 0), W)
                if he <= hs or we <= ws_:
                    out[r, :, ph, pw] = 0
                else:
                    out[r, :, ph, pw] = x[b, :, hs:he, ws_:we].max(axis=(1, 2))
    return out


def psroi_pooling(x: np.ndarray, rois: np.ndarray, output_dim: int, group_size: int, spatial_scale: float) -> np.ndarray:
    """R-FCN ``PSROIPoolingForward`` (caffe-rfcn psroi_pooling_layer.cu:18-86; the CPU
    forward is NOT_IMPLEMENTED): start ``round(x1) * scale``, end ``(round(x2) + 1) *
    scale`` (float, C ``round``), ROI size ``max(end - start, 0.1)``, bin size ``size /
    group_size``; bin ``(ph, pw)`` covers ``[floor(ph * bin + start), ceil((ph + 1) * bin +
    start))`` clipped to the map and averages input channel ``(ctop * group_size + ph) *
    group_size + pw``; an empty bin gives 0. Requires ``C == output_dim * group_size^2``.
    ``[R, output_dim, group_size, group_size]``."""
    x = x.astype(F32)
    n, c, H, W = x.shape
    if c != output_dim * group_size * group_size:
        raise ValueError(f"input channels {c} != output_dim {output_dim} * group_size^2 {group_size ** 2}")
    G = group_size
    out = np.zeros((len(rois), output_dim, G, G), F32)
    ss = F32(spatial_scale)
    for r, roi in enumerate(np.asarray(rois, F32)):
        b = int(roi[0])
        x0 = F32(c_round(roi[1])) * ss
        y0 = F32(c_round(roi[2])) * ss
        x1 = F32(c_round(roi[3]) + 1.0) * ss
        y1 = F32(c_round(roi[4]) + 1.0) * ss
        rw = max(x1 - x0, F32(0.1))
        rh = max(y1 - y0, F32(0.1))
        bh = F32(rh / F32(G))
        bw = F32(rw / F32(G))
        for ph in range(G):
            hs = min(max(int(np.floor(F32(ph) * bh + y0)), 0), H)
            he = min(max(int(np.ceil(F32(ph + 1) * bh + y0)), 0), H)
            for pw in range(G):
                ws_ = min(max(int(np.floor(F32(pw) * bw + x0)), 0), W)
                we = min(max(int(np.ceil(F32(pw + 1) * bw + x0)), 0), W)
                if he <= hs or we <= ws_:
                    continue
                chans = (np.arange(output_dim) * G + ph) * G + pw
                area = F32((he - hs) * (we - ws_))
                out[r, :, ph, pw] = x[b, chans, hs:he, ws_:we].sum(axis=(1, 2), dtype=F32) / area
    return out


# --------------------------------------------------------------------------------------
# YOLOv2 ports: Reorg and Region
# --------------------------------------------------------------------------------------

def reorg_darknet(x: np.ndarray, stride: int) -> np.ndarray:
    """Darknet's ``reorg_cpu(..., forward = 0, ...)`` as the YOLOv2 Caffe ports call it
    (gklz1982/caffe-yolov2 reorg_layer.hpp:85-108 with ``forward = reverse_ = false``,
    reorg_layer.cpp:45-46; OpenCV 4's reorg_layer.cpp computes the same). The loops run
    over the *input's* (k, j, i) and read the input viewed as ``[C' = C/s^2, H*s, W*s]``
    at ``(k % C', j*s + (k / C') / s, i*s + (k / C') % s)``, writing the output flat; that
    is ``x.reshape(N, C', H, s, W, s).transpose(0, 3, 5, 1, 2, 4)`` read as ``[N, C*s*s,
    H/s, W/s]``. Not a space-to-depth of the image (the channel order is Darknet's), but
    what the published weights were trained with."""
    n, c, h, w = x.shape
    s = stride
    if c % (s * s) or h % s or w % s:
        raise ValueError(f"reorg stride {s} does not divide {x.shape}")
    oc = c // (s * s)
    y = x.reshape(n, oc, h, s, w, s).transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(y).reshape(n, c * s * s, h // s, w // s)


def reorg_space_to_depth(x: np.ndarray, stride: int) -> np.ndarray:
    """The plain space-to-depth reading of "reorg" (ONNX ``SpaceToDepth``, blocks
    ``(dy, dx)`` outer, channel inner): ``x.reshape(N, C, H/s, s, W/s, s).transpose(0, 3,
    5, 1, 2, 4)``. Shown for contrast: no Caffe port here computes this."""
    n, c, h, w = x.shape
    s = stride
    y = x.reshape(n, c, h // s, s, w // s, s).transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(y).reshape(n, c * s * s, h // s, w // s)


def sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(F32)


def softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(F32)


def region_darknet(x: np.ndarray, num: int, classes: int, coords: int = 4, softmax_classes: bool = True) -> np.ndarray:
    """Darknet's ``forward_region_layer`` activations in Darknet's layout, as the Intel
    port's ``RegionYolo`` computes them (training_toolbox_caffe region_yolo_layer.cpp
    ``Forward_cpu``): the input ``[N, num * (coords + 1 + classes), H, W]`` is read as
    ``[N, num, coords + 1 + classes, H, W]``; entries 0, 1 (x, y offsets) and ``coords``
    (objectness) go through the logistic, the class scores through a softmax over the
    classes (``softmax_classes``; the logistic otherwise, YOLOv3-style); w, h stay raw.
    Same shape out (the port then flattens by its ``flatten_param``)."""
    n, c, h, w = x.shape
    size = coords + 1 + classes
    if c != num * size:
        raise ValueError(f"channels {c} != num {num} * (coords + 1 + classes) {size}")
    y = x.reshape(n, num, size, h, w).astype(F32).copy()
    y[:, :, 0:2] = sigmoid(y[:, :, 0:2])
    y[:, :, coords] = sigmoid(y[:, :, coords])
    y[:, :, coords + 1 :] = softmax(y[:, :, coords + 1 :], 2) if softmax_classes else sigmoid(y[:, :, coords + 1 :])
    return y.reshape(n, c, h, w)


def region_opencv(x: np.ndarray, anchors: Sequence[float], classes: int, coords: int = 4, thresh: float = 0.2,
                  nms_threshold: float = 0.4, softmax_classes: bool = True, image_hw: Optional[Tuple[int, int]] = None) -> np.ndarray:
    """OpenCV 4's ``RegionLayerImpl`` (region_layer.cpp), Darknet's region layer with its
    box decoding (``get_region_box``), as OpenCV runs a YOLOv2 net: input ``[N, H, W, A *
    (coords + 1 + classes)]`` (OpenCV's Darknet importer permutes the conv output to
    NHWC before it); output ``[N * H * W * A, coords + 1 + classes]`` rows in (n, y, x, a)
    order: ``x = (col + sigmoid(tx)) / W``, ``y = (row + sigmoid(ty)) / H``, ``w =
    exp(tw) * anchor_w / W``, ``h = exp(th) * anchor_h / H`` (OpenCV divides by the
    second input's size when given: ``image_hw``), objectness ``sigmoid(to)``, class
    ``j``: ``obj * softmax_j`` if ``> thresh`` else 0; then, with ``nms_threshold > 0``,
    a per-class greedy NMS (``NMSFast_`` on centre-size boxes, ``score > thresh``) zeroes
    the suppressed class scores."""
    n, H, W, c = x.shape
    A = len(anchors) // 2
    size = coords + 1 + classes
    if c != A * size:
        raise ValueError(f"channels {c} != anchors {A} * {size}")
    hn, wn = image_hw if image_hw is not None else (H, W)
    src = x.reshape(n, H, W, A, size).astype(F32)
    out = np.zeros_like(src)
    obj = sigmoid(src[..., coords])
    probs = softmax(src[..., coords + 1 :], -1) if softmax_classes else sigmoid(src[..., coords + 1 :])
    col = np.arange(W, dtype=F32)[None, None, :, None]
    row = np.arange(H, dtype=F32)[None, :, None, None]
    aw = np.asarray(anchors[0::2], F32)
    ah = np.asarray(anchors[1::2], F32)
    out[..., 0] = (col + sigmoid(src[..., 0])) / F32(W)
    out[..., 1] = (row + sigmoid(src[..., 1])) / F32(H)
    out[..., 2] = np.exp(src[..., 2]) * aw / F32(wn)
    out[..., 3] = np.exp(src[..., 3]) * ah / F32(hn)
    out[..., coords] = obj
    p = (obj[..., None] * probs).astype(F32)
    out[..., coords + 1 :] = np.where(p > F32(thresh), p, F32(0))
    out = out.reshape(n, H * W * A, size)
    if nms_threshold > 0:
        for b in range(n):
            d = out[b]
            boxes = np.stack([d[:, 0] - d[:, 2] / 2, d[:, 1] - d[:, 3] / 2, d[:, 0] + d[:, 2] / 2, d[:, 1] + d[:, 3] / 2], axis=1)
            for k in range(classes):
                s = d[:, coords + 1 + k].copy()
                keep = apply_nms_fast(boxes, s, thresh, nms_threshold, 1.0, 0, top_k_all_when=0)
                d[:, coords + 1 + k] = 0
                d[keep, coords + 1 + k] = s[keep]
    return out.reshape(n * H * W * A, size)


def region_birdeechen(x: np.ndarray, num: int, classes: int, coords: int = 4, softmax_classes: bool = True) -> np.ndarray:
    """BirdeeChen/caffe_yolo_v2 ``RegionLayer::Forward_cpu`` (region_layer.cpp): Darknet's
    ``flatten`` of ``[N, num * size, H * W]`` to ``[N, H * W, num * size]`` (same top
    shape ``[N, C, H, W]``, the memory re-read), then the logistic on each box's
    objectness (entry 4) and, if ``softmax`` (the port never sets its ``softmax_`` member
    from ``region_param``: uninitialised), a softmax over the classes; x, y, w, h stay
    raw (its Python ``region_tool.py`` decodes them)."""
    n, c, h, w = x.shape
    size = coords + 1 + classes
    y = x.reshape(n, c, h * w).transpose(0, 2, 1).reshape(n, h * w * num, size).astype(F32).copy()
    y[..., coords] = sigmoid(y[..., coords])
    if softmax_classes:
        y[..., coords + 1 :] = softmax(y[..., coords + 1 :], -1)
    return y.reshape(n, c, h, w)


def reorg_reverse(x: np.ndarray, stride: int) -> np.ndarray:
    """The ports' ``reorg_cpu(..., reverse = true)`` (BirdeeChen ``math_functions.cpp:63-86``
    with ``forward = true``): output ``[N, C/s^2, H*s, W*s]`` where input channel ``(dy * s +
    dx) * C/s^2 + c`` at ``(h, w)`` lands on ``(c, h*s + dy, w*s + dx)``, written as the
    port's loops."""
    n, c, h, w = x.shape
    s = stride
    tc = c // (s * s)
    out = np.empty(x.size, x.dtype)
    src = x.ravel()
    for b in range(n):
        for k in range(c):
            for j in range(h):
                for i in range(w):
                    off = k // tc
                    bi = i + w * (j + h * (k + c * b))
                    ti = (i * s + off % s) + w * s * ((j * s + off // s) + h * s * (k % tc + tc * b))
                    out[ti] = src[bi]
    return out.reshape(n, tc, h * s, w * s)


def yolo_detection_output(x: np.ndarray, *, classes: int, num_box: int, biases: Sequence[float], side: int = 13,
                          confidence_threshold: float = 0.01, nms_threshold: float = 0.45) -> np.ndarray:
    """The YOLOv2 ports' ``DetectionOutput`` (BirdeeChen/caffe_yolo_v2
    ``detection_output_layer.cpp`` ``Forward_cpu``, ``bbox_util.hpp`` ``class_index_and_score``,
    ``get_region_box``, ``ApplyNms``, ``setNormalizedBBox``; ``bbox_util.cpp``
    ``JaccardOverlap``), written as its loops in float32: the input ``[1, C, H, W]`` is read
    as ``[H*W, num_box, C/num_box]`` (cell-major); for cells ``(j, i)`` and boxes ``n`` in that
    order, objectness ``sigmoid(t[4])``, the class scores' softmax and its first maximum;
    ``confidence = obj * max`` kept when ``>= confidence_threshold`` with the box ``x = (i +
    sigmoid(t0)) / side``, ``y = (j + sigmoid(t1)) / side``, ``w = exp(t2) * biases[2n] /
    side``, ``h = exp(t3) * biases[2n+1] / side``. Then the port's NMS, in candidate order and
    not by score: for each live ``i``, each later live ``j`` whose IoU with it (of the
    boxes clipped to [0, 1]) is ``>= nms_threshold`` removes the one of the two with the
    lower objectness (``i`` on a tie). Rows ``[0, label, confidence, x, y, w, h]`` in
    candidate order; none kept: one row ``[0, -1, -1, -1, -1, -1, -1]``. ``[1, 1, n, 7]``."""
    n, c, H, W = x.shape
    if n != 1 or H != side or W != side or c != num_box * (5 + classes):
        raise ValueError("YOLO DetectionOutput: batch 1, side x side map, num_box * (5 + classes) channels")
    F = np.float32
    swap = x[0].transpose(1, 2, 0).reshape(H * W, num_box, c // num_box).astype(F)
    sig = lambda v: F(1.0 / (1.0 + np.exp(-np.float64(v))))  # noqa: E731
    preds = []
    for j in range(side):
        for i in range(side):
            for b in range(num_box):
                t = swap[j * side + i, b]
                obj = sig(t[4])
                logits = t[5 : 5 + classes]
                e = np.exp(logits - logits.max()).astype(F)
                probs = (e / e.sum(dtype=F)).astype(F)
                cls = int(np.argmax(probs))
                conf = F(obj * probs[cls])
                if conf >= F(confidence_threshold):
                    bx = F((i + sig(t[0])) / F(side))
                    by = F((j + sig(t[1])) / F(side))
                    bw = F(F(np.exp(t[2]) * F(biases[2 * b])) / F(side))
                    bh = F(F(np.exp(t[3]) * F(biases[2 * b + 1])) / F(side))
                    preds.append([obj, cls, conf, bx, by, bw, bh])

    def corners(p):
        xmin, xmax = max(F(p[3] - p[5] / 2.0), F(0)), min(F(p[3] + p[5] / 2.0), F(1))
        ymin, ymax = max(F(p[4] - p[6] / 2.0), F(0)), min(F(p[4] + p[6] / 2.0), F(1))
        size = F(0) if (xmax < xmin or ymax < ymin) else F((xmax - xmin) * (ymax - ymin))
        return xmin, ymin, xmax, ymax, size

    boxes = [corners(p) for p in preds]

    def iou(a, b):
        if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
            return F(0)
        iw = F(min(a[2], b[2]) - max(a[0], b[0]))
        ih = F(min(a[3], b[3]) - max(a[1], b[1]))
        if iw > 0 and ih > 0:
            inter = F(iw * ih)
            return F(inter / F(a[4] + b[4] - inter))
        return F(0)

    obj = [p[0] for p in preds]
    for i in range(len(preds)):
        if obj[i] < 0:
            continue
        for j in range(i + 1, len(preds)):
            if obj[j] < 0:
                continue
            if iou(boxes[i], boxes[j]) >= F(nms_threshold):
                if obj[i] > obj[j]:
                    obj[j] = -1.0
                else:
                    obj[i] = -1.0
    rows = [[0.0, p[1], p[2], p[3], p[4], p[5], p[6]] for p, o in zip(preds, obj) if o > 0]
    if not rows:
        rows = [[0.0, -1, -1, -1, -1, -1, -1]]
    return np.asarray(rows, F).reshape(1, 1, -1, 7)


# --------------------------------------------------------------------------------------
# PriorBoxClustered, MVN, Interp, ShuffleChannel
# --------------------------------------------------------------------------------------

def prior_box_explicit(layer_hw: Tuple[int, int], image_hw: Tuple[int, int], widths: Sequence[float], heights: Sequence[float],
                       variance: Sequence[float], *, step_h: float = 0.0, step_w: float = 0.0, offset: float = 0.5,
                       clip: bool = False, normalized: bool = True) -> np.ndarray:
    """``PriorBoxClustered`` (OpenVINO's op, which OpenCV 4 registers as its PriorBox with
    explicit ``width``/``height``: prior_box_layer.cpp ``forward`` and ``addPrior``): for
    each cell (h, w) and box i, centre ``((w + offset) * step_w, (h + offset) * step_h)``
    (a step of 0 is image size / layer size), corners ``c -+ size / 2`` divided by the
    image size (unnormalized: the max corners minus 1); optional clip to [0, 1]; then the
    variances (one value or four). ``[1, 2, H * W * len(widths) * 4]``."""
    lh, lw = layer_hw
    ih, iw = image_hw
    sy = step_h if step_h > 0 else F32(ih) / F32(lh)
    sx = step_w if step_w > 0 else F32(iw) / F32(lw)
    out = []
    for hh in range(lh):
        for ww in range(lw):
            for bw, bh in zip(widths, heights):
                cx = F32((ww + F32(offset)) * F32(sx))
                cy = F32((hh + F32(offset)) * F32(sy))
                bw, bh = F32(bw), F32(bh)
                if normalized:
                    out += [(cx - bw * F32(0.5)) / F32(iw), (cy - bh * F32(0.5)) / F32(ih),
                            (cx + bw * F32(0.5)) / F32(iw), (cy + bh * F32(0.5)) / F32(ih)]
                else:
                    out += [cx - bw * F32(0.5), cy - bh * F32(0.5), cx + bw * F32(0.5) - 1, cy + bh * F32(0.5) - 1]
    boxes = np.asarray(out, F32)
    if clip:
        boxes = np.clip(boxes, 0, 1)
    var = np.asarray(variance, F32)
    var = np.tile(var if len(var) == 4 else np.repeat(var, 4), len(boxes) // 4)
    return np.stack([boxes, var])[None]


def mvn(x: np.ndarray, normalize_variance: bool = True, across_channels: bool = False, eps: float = 1e-9) -> np.ndarray:
    """BVLC ``MVNLayer::Forward_cpu`` (mvn_layer.cpp:30-71): over each (n, c) plane (or
    each n with ``across_channels``), ``x - mean``; with ``normalize_variance``, divided
    by ``sqrt(mean((x - mean)^2)) + eps`` (eps added *after* the square root, line 63;
    default 1e-9, caffe.proto:904-913). Caffe MVN reads its input as 4-D (num, channels,
    height, width)."""
    x = x.astype(np.float64)
    axes = tuple(range(1, x.ndim)) if across_channels else tuple(range(2, x.ndim))
    d = x - x.mean(axis=axes, keepdims=True)
    if normalize_variance:
        d = d / (np.sqrt((d * d).mean(axis=axes, keepdims=True)) + eps)
    return d.astype(F32)


def interp(x: np.ndarray, *, height: Optional[int] = None, width: Optional[int] = None, zoom_factor: Optional[int] = None,
           shrink_factor: Optional[int] = None, pad_beg: int = 0, pad_end: int = 0,
           ref_hw: Optional[Tuple[int, int]] = None) -> np.ndarray:
    """PSPNet/DeepLab ``InterpLayer`` (hszhao/PSPNet interp_layer.cpp:10-71) with
    ``caffe_cpu_interp2`` (util/interp.cpp:13-90): the input is cropped by ``pad_beg`` on
    the top and left of both axes and ``pad_end`` at the end (both <= 0); the output size
    is, in order, ``shrink_factor`` alone ``(in - 1) / s + 1``, ``zoom_factor`` alone ``in +
    (in - 1)(z - 1)``, ``height``/``width``, both factors (shrink then zoom), else the
    second bottom's H x W (``ref_hw``); bilinear with align-corners coordinates
    ``rheight = (in - 1) / (out - 1)`` (0 when out is 1), weights in float."""
    if pad_beg > 0 or pad_end > 0:
        raise ValueError("Interp supports only non-positive pads (cropping)")
    n, c, H, W = x.shape
    hi, wi = H + pad_beg + pad_end, W + pad_beg + pad_end
    if shrink_factor is not None and zoom_factor is None:
        ho, wo = (hi - 1) // shrink_factor + 1, (wi - 1) // shrink_factor + 1
    elif zoom_factor is not None and shrink_factor is None:
        ho, wo = hi + (hi - 1) * (zoom_factor - 1), wi + (wi - 1) * (zoom_factor - 1)
    elif height is not None and width is not None:
        ho, wo = height, width
    elif shrink_factor is not None and zoom_factor is not None:
        ho, wo = (hi - 1) // shrink_factor + 1, (wi - 1) // shrink_factor + 1
        ho, wo = ho + (ho - 1) * (zoom_factor - 1), wo + (wo - 1) * (zoom_factor - 1)
    elif ref_hw is not None:
        ho, wo = ref_hw
    else:
        raise ValueError("Interp needs a size")
    y0 = x0 = -pad_beg
    src = x[:, :, y0 : y0 + hi, x0 : x0 + wi].astype(F32)
    if (ho, wo) == (hi, wi):
        return src.copy()
    rh = F32(hi - 1) / F32(ho - 1) if ho > 1 else F32(0)
    rw = F32(wi - 1) / F32(wo - 1) if wo > 1 else F32(0)
    h1r = (rh * np.arange(ho, dtype=F32)).astype(F32)
    w1r = (rw * np.arange(wo, dtype=F32)).astype(F32)
    h1 = h1r.astype(np.int64)
    w1 = w1r.astype(np.int64)
    h1p = (h1 < hi - 1).astype(np.int64)
    w1p = (w1 < wi - 1).astype(np.int64)
    hl1 = (h1r - h1).astype(F32)[:, None]
    wl1 = (w1r - w1).astype(F32)[None, :]
    hl0, wl0 = F32(1) - hl1, F32(1) - wl1
    a = src[:, :, h1][:, :, :, w1]
    b = src[:, :, h1][:, :, :, w1 + w1p]
    cc = src[:, :, h1 + h1p][:, :, :, w1]
    d = src[:, :, h1 + h1p][:, :, :, w1 + w1p]
    return (hl0 * (wl0 * a + wl1 * b) + hl1 * (wl0 * cc + wl1 * d)).astype(F32)


def shuffle_channel(x: np.ndarray, group: int) -> np.ndarray:
    """ShuffleNet's ``ShuffleChannel`` (farmingyard/ShuffleNet shuffle_channel_layer.cpp):
    channels viewed as ``[group, C / group]`` and transposed to ``[C / group, group]``."""
    n, c = x.shape[:2]
    return x.reshape(n, group, c // group, *x.shape[2:]).swapaxes(1, 2).reshape(x.shape)


# --------------------------------------------------------------------------------------
# BVLC LSTM and RNN
# --------------------------------------------------------------------------------------

def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm(x: np.ndarray, cont: np.ndarray, W_xc: np.ndarray, b_c: np.ndarray, W_hc: np.ndarray, *,
         x_static: Optional[np.ndarray] = None, W_xc_static: Optional[np.ndarray] = None,
         h0: Optional[np.ndarray] = None, c0: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BVLC ``LSTMLayer`` (lstm_layer.cpp:100-240, unrolled by recurrent_layer.cpp) with
    ``LSTMUnitLayer::Forward_cpu`` (lstm_unit_layer.cpp:41-69), computed in float64:

    ``x`` ``[T, N, ...]`` (flattened from axis 2), ``cont`` ``[T, N]``; gates ``W_xc x_t +
    b_c + W_hc (cont_t * h_{t-1}) [+ W_xc_static x_static]`` in blocks i, f, o, g of H
    rows; ``f = cont_t * sigmoid(.)`` (0 when cont_t == 0); ``c_t = f c_{t-1} + i g``,
    ``h_t = o tanh(c_t)``. Initial state zero (a first forward) or ``h0``/``c0`` ``[1, N,
    H]`` (``expose_hidden``). Returns ``(h [T, N, H], h_T [1, N, H], c_T [1, N, H])``."""
    T, N = x.shape[:2]
    xf = x.reshape(T, N, -1).astype(np.float64)
    H = W_hc.shape[1]
    h = np.zeros((N, H)) if h0 is None else h0.reshape(N, H).astype(np.float64)
    c = np.zeros((N, H)) if c0 is None else c0.reshape(N, H).astype(np.float64)
    static = 0.0
    if x_static is not None:
        static = x_static.reshape(N, -1).astype(np.float64) @ W_xc_static.T.astype(np.float64)
    hs = []
    for t in range(T):
        ct = cont[t].astype(np.float64)[:, None]
        g = xf[t] @ W_xc.T.astype(np.float64) + b_c.astype(np.float64) + (ct * h) @ W_hc.T.astype(np.float64) + static
        i = _sig(g[:, :H])
        f = np.where(ct == 0, 0.0, ct * _sig(g[:, H : 2 * H]))
        o = _sig(g[:, 2 * H : 3 * H])
        gg = np.tanh(g[:, 3 * H :])
        c = f * c + i * gg
        h = o * np.tanh(c)
        hs.append(h)
    return np.stack(hs).astype(F32), h[None].astype(F32), c[None].astype(F32)


def rnn(x: np.ndarray, cont: np.ndarray, W_xh: np.ndarray, b_h: np.ndarray, W_hh: np.ndarray, W_ho: np.ndarray, b_o: np.ndarray, *,
        x_static: Optional[np.ndarray] = None, W_xh_static: Optional[np.ndarray] = None,
        h0: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """BVLC ``RNNLayer`` (rnn_layer.cpp:97-226): ``h_t = tanh(W_hh (cont_t * h_{t-1}) +
    W_xh x_t + b_h [+ W_xh_static x_static])``, ``o_t = tanh(W_ho h_t + b_o)``. Returns
    ``(o [T, N, H], h_T [1, N, H])`` (``expose_hidden``'s extra top is h, not o)."""
    T, N = x.shape[:2]
    xf = x.reshape(T, N, -1).astype(np.float64)
    H = W_hh.shape[0]
    h = np.zeros((N, H)) if h0 is None else h0.reshape(N, H).astype(np.float64)
    static = 0.0
    if x_static is not None:
        static = x_static.reshape(N, -1).astype(np.float64) @ W_xh_static.T.astype(np.float64)
    os_ = []
    for t in range(T):
        ct = cont[t].astype(np.float64)[:, None]
        h = np.tanh((ct * h) @ W_hh.T.astype(np.float64) + xf[t] @ W_xh.T.astype(np.float64) + b_h.astype(np.float64) + static)
        os_.append(np.tanh(h @ W_ho.T.astype(np.float64) + b_o.astype(np.float64)))
    return np.stack(os_).astype(F32), h[None].astype(F32)
