"""The numpy references of issue 30's layers (``caffe_refs.py``) checked against an
independent implementation, and every measured difference between OpenCV 4 and the
original program written down as a test.

- Against OpenCV 4 (``cv2.dnn.readNetFromCaffe`` on small prototxts, or
  ``readNetFromDarknet`` for the YOLOv2 region layer, whose Caffe form OpenCV cannot
  configure) wherever OpenCV runs the layer as the original does.
- Against real BVLC Caffe for MVN, LSTM and RNN: the fixtures of ``testdata/lower/``
  (made by ``testdata/lower/gen_caffe_fixtures.py`` with a Caffe built by
  ``../shared/oracles/build_caffe.sh``; CI reads only the committed files).

Detections compare row by row after sorting (same count, per column |diff| <= 1e-3 +
1e-4 |ref|, issue 30's tolerance); RoI lists whose order follows scores compare as sets
of rows. The ONNX designs of ``onnx_designs.py`` are checked against the same
references at the end of this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import caffe_refs as R
from conftest import TESTDATA, require_module

cv2 = require_module("cv2")

LOWER = TESTDATA / "lower"


def close(a, b, what, atol=1e-3, rtol=1e-4):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    if a.size:
        bad = np.abs(a - b) > atol + rtol * np.abs(b)
        assert not bad.any(), f"{what}: max |diff| {np.abs(a - b).max():.3g} at {np.argwhere(bad)[:3].tolist()}"


def sort_rows(rows: np.ndarray, score_col: int) -> np.ndarray:
    """Rows in a canonical order: by image (column 0), score descending, then the rest."""
    rows = np.asarray(rows).reshape(-1, rows.shape[-1])
    keys = [rows[:, k] for k in range(rows.shape[1] - 1, -1, -1) if k not in (0, score_col)]
    return rows[np.lexsort(keys + [-rows[:, score_col], rows[:, 0]])]


def opencv_net(tmp_path, text, model=None):
    p = tmp_path / "net.prototxt"
    p.write_text(text)
    return cv2.dnn.readNetFromCaffe(str(p), str(model)) if model else cv2.dnn.readNetFromCaffe(str(p))


def run_cv(net, feeds, out=None):
    for k, v in feeds.items():
        net.setInput(np.ascontiguousarray(v), k)
    return net.forward(out) if out else net.forward()


def inputs(**shapes):
    return "".join(f'input: "{k}" input_shape {{ {" ".join(f"dim: {d}" for d in v)} }}\n' for k, v in shapes.items())


# --------------------------------------------------------------------------------------
# DetectionOutput
# --------------------------------------------------------------------------------------

def ssd_inputs(seed, n, num_priors, num_classes, num_loc, loc_scale=0.5, normalized=True):
    """Priors inside [0, 1] (or pixels), softmax confidences, random offsets."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.1, 0.9, (num_priors, 2))
    s = rng.uniform(0.05, 0.4, (num_priors, 2))
    boxes = np.concatenate([c - s / 2, c + s / 2], 1)
    if not normalized:
        boxes = boxes * 300
    var = np.tile([0.1, 0.1, 0.2, 0.2], (num_priors, 1))
    prior = np.stack([boxes.ravel(), var.ravel()])[None].astype(np.float32)
    loc = (rng.standard_normal((n, num_priors * num_loc * 4)) * loc_scale).astype(np.float32)
    logits = rng.standard_normal((n, num_priors, num_classes)) * 2
    conf = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    return loc, conf.reshape(n, -1).astype(np.float32), prior


def det_prototxt(n, num_priors, num_classes, num_loc, params, image=None, variances=True):
    text = inputs(loc=(n, num_priors * num_loc * 4), conf=(n, num_priors * num_classes), prior=(1, 2 if variances else 1, num_priors * 4))
    bottoms = 'bottom: "loc" bottom: "conf" bottom: "prior"'
    if image is not None:
        text += inputs(image=(n, 3) + tuple(image))
        bottoms += ' bottom: "image"'
    return text + f'layer {{ name: "det" type: "DetectionOutput" {bottoms} top: "det"\n  detection_output_param {{ num_classes: {num_classes} {params} }} }}\n'


def det_params(kw):
    """The prototxt text of a reference keyword set (OpenCV requires share_location,
    background_label_id, keep_top_k and nms_threshold to be written)."""
    parts = [f"share_location: {str(kw.get('share_location', True)).lower()}",
             f"background_label_id: {kw.get('background_label_id', 0)}",
             f"code_type: {kw.get('code_type', 'CORNER')}",
             f"keep_top_k: {kw.get('keep_top_k', -1)}"]
    nms = f"nms_threshold: {kw.get('nms_threshold', 0.3)}"
    if kw.get("top_k") is not None:
        nms += f" top_k: {kw['top_k']}"
    if kw.get("eta", 1.0) != 1.0:
        nms += f" eta: {kw['eta']}"
    parts.append(f"nms_param {{ {nms} }}")
    for k in ("confidence_threshold", "variance_encoded_in_target", "clip", "normalized_bbox"):
        if k in kw:
            v = kw[k]
            parts.append(f"{k}: {str(v).lower() if isinstance(v, bool) else v}")
    return " ".join(parts)


# name -> (batch, priors, classes, reference keywords)
DET_CASES = {
    "center_size": (1, 60, 4, dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=20, confidence_threshold=0.1)),
    "center_size_batch3": (3, 60, 4, dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=15, confidence_threshold=0.1)),
    "corner_top_k": (2, 50, 3, dict(code_type="CORNER", nms_threshold=0.45, keep_top_k=200, confidence_threshold=0.2, top_k=10)),
    "not_shared_background_2": (2, 40, 4, dict(code_type="CENTER_SIZE", share_location=False, background_label_id=2, nms_threshold=0.3, keep_top_k=6, confidence_threshold=0.05)),
    "no_background_not_shared": (1, 40, 3, dict(code_type="CENTER_SIZE", share_location=False, background_label_id=-1, nms_threshold=0.5, keep_top_k=30, confidence_threshold=0.2)),
    "variance_in_target": (1, 50, 3, dict(code_type="CENTER_SIZE", variance_encoded_in_target=True, nms_threshold=0.45, keep_top_k=20, confidence_threshold=0.1, loc_scale=0.1)),
    "clip": (2, 60, 3, dict(code_type="CENTER_SIZE", clip=True, nms_threshold=0.45, keep_top_k=25, confidence_threshold=0.1, loc_scale=1.5)),
    "keep_all": (1, 30, 3, dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=100, confidence_threshold=0.3)),
}


def det_case(name, seed=0):
    n, p, c, kw = DET_CASES[name]
    kw = dict(kw)
    loc_scale = kw.pop("loc_scale", 0.5)
    num_loc = 1 if kw.get("share_location", True) else c
    loc, conf, prior = ssd_inputs(seed, n, p, c, num_loc, loc_scale)
    return n, p, c, num_loc, kw, (loc, conf, prior)


def opencv_detections(out):
    rows = out.reshape(-1, 7)
    return rows[np.abs(rows).sum(1) > 0]


@pytest.mark.parametrize("name", sorted(DET_CASES))
def test_detection_output_matches_opencv(name, tmp_path):
    """OpenCV 4 computes weiliu89's DetectionOutput for these options: the OpenCV-flavoured
    reference gives its rows exactly, and the SSD reference gives the same detections
    (OpenCV only orders each image's rows by score and pads the output with zero rows)."""
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case(name)
    net = opencv_net(tmp_path, det_prototxt(n, p, c, num_loc, det_params(kw), variances=not kw.get("variance_encoded_in_target")))
    # OpenCV wants a 1-channel prior blob with variance_encoded_in_target; SSD's PriorBox
    # always writes 2 channels and SSD's layer ignores the second (OpenCV asserts).
    cv_prior = prior[:, :1] if kw.get("variance_encoded_in_target") else prior
    cv = opencv_detections(run_cv(net, {"loc": loc, "conf": conf, "prior": cv_prior}))
    ref_cv = R.detection_output(loc, conf, prior, num_classes=c, flavour="opencv", **kw).reshape(-1, 7)
    ssd = R.detection_output(loc, conf, prior, num_classes=c, **kw).reshape(-1, 7)
    assert len(ssd) > 0 and ssd[0, 1] != -1, "the case should detect something"
    close(sort_rows(cv, 2), sort_rows(ref_cv, 2), f"{name}: OpenCV vs its flavour")
    close(sort_rows(cv, 2), sort_rows(ssd, 2), f"{name}: OpenCV vs SSD")
    # SSD's rows: by image, label ascending, score descending within a label.
    key = np.lexsort((-ssd[:, 2], ssd[:, 1], ssd[:, 0]))
    assert (key == np.arange(len(ssd))).all()
    assert set(np.unique(ssd[:, 0]).astype(int)) <= set(range(n))
    if kw.get("keep_top_k", -1) > -1:
        assert all((ssd[:, 0] == i).sum() <= kw["keep_top_k"] for i in range(n))


def test_detection_output_shared_boxes_without_background_is_fatal(tmp_path):
    """``share_location: true`` with ``background_label_id: -1``: Caffe's DecodeBBoxesAll
    skips the shared label -1 as if it were the background and Forward_cpu then dies
    (LOG(FATAL) "Could not find location predictions for label -1"); OpenCV raises the
    same error. A lowering must refuse it."""
    kw = dict(code_type="CENTER_SIZE", background_label_id=-1, nms_threshold=0.5, keep_top_k=30, confidence_threshold=0.2)
    loc, conf, prior = ssd_inputs(0, 1, 10, 3, 1)
    with pytest.raises(ValueError, match="label -1"):
        R.detection_output(loc, conf, prior, num_classes=3, **kw)
    with pytest.raises(cv2.error, match="label -1"):
        run_cv(opencv_net(tmp_path, det_prototxt(1, 10, 3, 1, det_params(kw))), {"loc": loc, "conf": conf, "prior": prior})


def test_detection_output_opencv_pads_to_keep_top_k_times_batch(tmp_path):
    """OpenCV's output is always [1, 1, keep_top_k * N, 7] with zero rows after the
    detections; Caffe's is [1, 1, n, 7] (detection_output_layer.cpp:277-295)."""
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case("corner_top_k")
    out = run_cv(opencv_net(tmp_path, det_prototxt(n, p, c, num_loc, det_params(kw))), {"loc": loc, "conf": conf, "prior": prior})
    ssd = R.detection_output(loc, conf, prior, num_classes=c, **kw)
    assert out.shape == (1, 1, kw["keep_top_k"] * n, 7)
    assert ssd.shape == (1, 1, len(opencv_detections(out)), 7) and ssd.shape[2] < out.shape[2]
    assert not np.abs(out.reshape(-1, 7)[ssd.shape[2]:]).any()


def test_detection_output_variance_in_target_opencv_refuses_ssd_priors(tmp_path):
    """With ``variance_encoded_in_target: true`` OpenCV asserts that the prior blob has
    one channel; SSD's PriorBox always outputs two (boxes, variances) and SSD's layer
    reads and ignores the variances: OpenCV cannot run such an SSD net."""
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case("variance_in_target")
    with pytest.raises(cv2.error, match="_varianceEncodedInTarget"):
        run_cv(opencv_net(tmp_path, det_prototxt(n, p, c, num_loc, det_params(kw))), {"loc": loc, "conf": conf, "prior": prior})
    one = R.detection_output(loc, conf, prior[:, :1], num_classes=c, **kw)
    np.testing.assert_array_equal(one, R.detection_output(loc, conf, prior, num_classes=c, **kw))


def test_detection_output_no_detections(tmp_path):
    """Nothing above the threshold: Caffe outputs one row per image [i, -1, ..., -1]
    (detection_output_layer.cpp:281-291); OpenCV all zeros of its padded size."""
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case("center_size_batch3")
    kw = dict(kw, confidence_threshold=0.999)
    ssd = R.detection_output(loc, conf, prior, num_classes=c, **kw)
    expect = -np.ones((1, 1, n, 7), np.float32)
    expect[0, 0, :, 0] = np.arange(n)
    np.testing.assert_array_equal(ssd, expect)
    out = run_cv(opencv_net(tmp_path, det_prototxt(n, p, c, num_loc, det_params(kw))), {"loc": loc, "conf": conf, "prior": prior})
    assert out.shape == (1, 1, kw["keep_top_k"] * n, 7) and not out.any()


def test_detection_output_normalized_bbox_false_opencv_adds_one(tmp_path):
    """``normalized_bbox: false`` (an OpenCV field): OpenCV adds 1 to CENTER_SIZE prior
    sizes, box sizes and intersections (py-faster-rcnn's pixel convention); weiliu89's
    layer has no such field and never adds 1. On pixel priors the two keep different
    detections; the OpenCV-flavoured reference gives OpenCV's."""
    rng_kw = dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=50, confidence_threshold=0.1, normalized_bbox=False)
    loc, conf, prior = ssd_inputs(4, 1, 60, 3, 1, normalized=False)
    # tiny pixel boxes make the +1 matter
    prior[0, 0] = (prior[0, 0].reshape(-1, 4) / 30).ravel()
    out = run_cv(opencv_net(tmp_path, det_prototxt(1, 60, 3, 1, det_params(rng_kw))), {"loc": loc, "conf": conf, "prior": prior})
    cv = opencv_detections(out)
    ref_cv = R.detection_output(loc, conf, prior, num_classes=3, flavour="opencv", **rng_kw).reshape(-1, 7)
    ssd = R.detection_output(loc, conf, prior, num_classes=3, **rng_kw).reshape(-1, 7)
    close(sort_rows(cv, 2), sort_rows(ref_cv, 2), "normalized_bbox false: OpenCV vs its flavour")
    assert len(ssd) != len(cv) or np.abs(sort_rows(ssd, 2)[:, 3:] - sort_rows(cv, 2)[:, 3:]).max() > 0.1
    print(f"normalized_bbox false: SSD keeps {len(ssd)} rows, OpenCV {len(cv)}")


def test_detection_output_unset_confidence_threshold(tmp_path):
    """Unset ``confidence_threshold``: Caffe uses -FLT_MAX (keeps every score,
    detection_output_layer.cpp:29-30), OpenCV 0 (drops scores <= 0)."""
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=100)
    loc, conf, prior = ssd_inputs(5, 1, 20, 3, 1)
    conf = conf.reshape(20, 3)
    conf[::2, 1:] = 0.0  # zero scores on half the priors
    conf = conf.reshape(1, -1)
    ssd = R.detection_output(loc, conf, prior, num_classes=3, **kw).reshape(-1, 7)
    cv = opencv_detections(run_cv(opencv_net(tmp_path, det_prototxt(1, 20, 3, 1, det_params(kw))), {"loc": loc, "conf": conf, "prior": prior}))
    assert (ssd[:, 2] == 0).any() and not (cv[:, 2] == 0).any()
    close(sort_rows(cv, 2), sort_rows(ssd[ssd[:, 2] > 0], 2), "scores > 0 agree")


def test_detection_output_eta_is_ignored_by_opencv(tmp_path):
    """``nms_param.eta < 1`` (adaptive NMS, bbox_util.cpp:1932-1934) changes Caffe's
    detections; OpenCV 4 always runs with eta = 1."""
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.9, keep_top_k=200, confidence_threshold=0.05, eta=0.7)
    loc, conf, prior = ssd_inputs(6, 1, 80, 2, 1, loc_scale=0.2)
    cv = opencv_detections(run_cv(opencv_net(tmp_path, det_prototxt(1, 80, 2, 1, det_params(kw))), {"loc": loc, "conf": conf, "prior": prior}))
    ssd = R.detection_output(loc, conf, prior, num_classes=2, **kw).reshape(-1, 7)
    eta1 = R.detection_output(loc, conf, prior, num_classes=2, **dict(kw, eta=1.0)).reshape(-1, 7)
    close(sort_rows(cv, 2), sort_rows(eta1, 2), "OpenCV = eta 1")
    assert len(ssd) < len(eta1), (len(ssd), len(eta1))


def test_detection_output_corner_size_opencv_cannot_parse(tmp_path):
    """CORNER_SIZE (weiliu89 caffe.proto PriorBoxParameter.CodeType = 3) is not in
    OpenCV's enum: its prototxt parser refuses the net (and its layer would decode it as
    CORNER). The SSD reference decodes ``prior + var * d * prior_size``."""
    kw = dict(code_type="CORNER_SIZE", nms_threshold=0.45, keep_top_k=20, confidence_threshold=0.1)
    with pytest.raises(cv2.error):
        opencv_net(tmp_path, det_prototxt(1, 10, 2, 1, det_params(kw)))
    loc, conf, prior = ssd_inputs(7, 1, 10, 2, 1)
    p = prior[0, 0].reshape(-1, 4)
    v = prior[0, 1].reshape(-1, 4)
    size = np.stack([p[:, 2] - p[:, 0], p[:, 3] - p[:, 1]] * 2, 1)
    np.testing.assert_allclose(R.decode_boxes(loc.reshape(10, 4), p, v, "CORNER_SIZE", False), p + v * loc.reshape(10, 4) * size, rtol=1e-6)


def test_nms_ties_and_threshold_equality():
    """ApplyNMSFast: equal scores keep the lower index first (std::stable_sort), an IoU
    exactly at the threshold keeps the box (``overlap <= threshold``), a score exactly
    at the confidence threshold is dropped (``score > threshold``)."""
    boxes = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 2, 1], [5, 5, 6, 6]], np.float32)
    assert R.apply_nms_fast(boxes, np.array([0.5, 0.5, 0.4, 0.3]), -FLT, 0.5) == [0, 2, 3]
    assert R.apply_nms_fast(boxes, np.array([0.5, 0.6, 0.4, 0.3]), -FLT, 0.5) == [1, 2, 3]
    assert R.apply_nms_fast(boxes, np.array([0.5, 0.5, 0.4, 0.3]), -FLT, 0.49) == [0, 3]
    assert R.apply_nms_fast(boxes, np.array([0.5, 0.5, 0.4, 0.3]), 0.4, 0.5) == [0]
    # An inverted box (CORNER decoding can give one) has size 0 and overlaps nothing.
    inv = np.array([[0, 0, 1, 1], [1, 1, 0, 0]], np.float32)
    assert R.apply_nms_fast(inv, np.array([0.9, 0.8]), -FLT, 0.1) == [0, 1]


FLT = R.FLT_MAX


# --------------------------------------------------------------------------------------
# Faster R-CNN
# --------------------------------------------------------------------------------------

def test_generate_anchors_matches_the_published_table():
    """generate_anchors.py:27-35 lists the anchors checked against the MATLAB
    implementation (1-based: the function gives them minus 1); OpenCV's anchors
    (floor(x + 0.5) rounding, PriorBox corners) are the same for the defaults."""
    table = np.array([[-83, -39, 100, 56], [-175, -87, 192, 104], [-359, -183, 376, 200],
                      [-55, -55, 72, 72], [-119, -119, 136, 136], [-247, -247, 264, 264],
                      [-35, -79, 52, 96], [-79, -167, 96, 184], [-167, -343, 184, 360]], np.float64)
    np.testing.assert_array_equal(R.generate_anchors(), table - 1)
    np.testing.assert_array_equal(R.opencv_anchors(16, (0.5, 1, 2), (8, 16, 32)), table - 1)


def rpn_inputs(seed, A, H, W, info=(128, 160, 1.6), delta=0.2):
    rng = np.random.default_rng(seed)
    cls = rng.random((1, 2 * A, H, W)).astype(np.float32)
    bbox = (rng.standard_normal((1, 4 * A, H, W)) * delta).astype(np.float32)
    return cls, bbox, np.array([info], np.float32)


PROPOSAL_NET = """input: "cls" input_shape {{ dim: 1 dim: {c2} dim: {h} dim: {w} }}
input: "bbox" input_shape {{ dim: 1 dim: {c4} dim: {h} dim: {w} }}
input: "im_info" input_shape {{ dim: 1 dim: 3 }}
layer {{ name: "proposal" type: "Proposal" bottom: "cls" bottom: "bbox" bottom: "im_info" top: "rois" top: "scores"
  proposal_param {{ {ratios} {scales} feat_stride: {stride} base_size: 16 pre_nms_topn: {pre} post_nms_topn: {post} nms_thresh: {nms} min_size: 16 }} }}
"""


@pytest.mark.parametrize("ratios,scales,stride,pre,post,nms", [
    ((0.5, 1, 2), (8, 16, 32), 16, 200, 50, 0.7),
    ((1,), (2, 4), 8, 60, 40, 0.5),
    ((0.5, 2), (4,), 16, 1000, 300, 0.3),
])
def test_proposal_cpp_matches_opencv_up_to_its_padding(ratios, scales, stride, pre, post, nms, tmp_path):
    """OpenCV's C++ Proposal = the py-faster-rcnn pipeline without ``min_size``, padded
    with all-zero rows (and zero scores) to ``post_nms_topn``. The rows compare as sets
    (sorted by score)."""
    A = len(ratios) * len(scales)
    cls, bbox, info = rpn_inputs(len(scales), A, 8, 10)
    text = PROPOSAL_NET.format(c2=2 * A, c4=4 * A, h=8, w=10, stride=stride, pre=pre, post=post, nms=nms,
                               ratios=" ".join(f"ratio: {r}" for r in ratios), scales=" ".join(f"scale: {s}" for s in scales))
    net = opencv_net(tmp_path, text)
    for k, v in {"cls": cls, "bbox": bbox, "im_info": info}.items():
        net.setInput(v, k)
    rois = net.forward(["proposal"])[0]
    ref_r, ref_s = R.proposal_opencv(cls, bbox, info, feat_stride=stride, scales=scales, ratios=ratios,
                                     pre_nms_topN=pre, post_nms_topN=post, nms_thresh=nms)
    assert rois.shape == (post, 5)
    close(rois[np.lexsort(rois.T[::-1])], ref_r[np.lexsort(ref_r.T[::-1])], "OpenCV Proposal rois (pixels, as sets)")
    py_r, py_s = R.proposal(cls, bbox, info, feat_stride=stride, scales=scales, ratios=ratios,
                            pre_nms_topN=pre, post_nms_topN=post, nms_thresh=nms)
    zero = ~np.abs(rois).any(1)
    print(f"ratios {ratios} scales {scales}: py-faster-rcnn {len(py_r)} rois, OpenCV {post - zero.sum()} + {zero.sum()} zero rows")
    assert len(py_r) <= post - zero.sum()


def test_proposal_opencv_ignores_min_size_and_pads(tmp_path):
    """The two OpenCV deviations of issue 30, measured: py-faster-rcnn drops proposals
    narrower or shorter than ``16 * im_info[2]`` pixels, OpenCV keeps them; OpenCV
    always gives ``post_nms_topn`` rows, the missing ones [0, 0, 0, 0, 0], which a
    following ROIPooling pools as a real RoI at (0, 0)."""
    A = 9
    cls, bbox, info = rpn_inputs(11, A, 8, 10, info=(128, 160, 3.0), delta=0.8)
    text = PROPOSAL_NET.format(c2=2 * A, c4=4 * A, h=8, w=10, stride=16, pre=6000, post=300, nms=0.7,
                               ratios="ratio: 0.5 ratio: 1 ratio: 2", scales="scale: 8 scale: 16 scale: 32")
    net = opencv_net(tmp_path, text)
    for k, v in {"cls": cls, "bbox": bbox, "im_info": info}.items():
        net.setInput(v, k)
    rois = net.forward(["proposal"])[0]
    py_r, _ = R.proposal(cls, bbox, info)
    real = rois[np.abs(rois).any(1)]
    small = ((real[:, 3] - real[:, 1] + 1 < 48) | (real[:, 4] - real[:, 2] + 1 < 48)).sum()
    assert small > 0 and len(py_r) < len(real) < 300
    ws = py_r[:, 3] - py_r[:, 1] + 1
    hs = py_r[:, 4] - py_r[:, 2] + 1
    assert (ws >= 48).all() and (hs >= 48).all()
    print(f"py-faster-rcnn {len(py_r)} rois; OpenCV {len(real)} ({small} under min_size) + {300 - len(real)} zero rows")


def test_python_proposal_layer_opencv_cannot_create(tmp_path):
    """OpenCV 4 has no ``Python`` layer: py-faster-rcnn's test nets do not load at all;
    the reference is py-faster-rcnn's own code (``caffe_refs.proposal``)."""
    A = 9
    text = (inputs(cls=(1, 18, 4, 4), bbox=(1, 36, 4, 4), im_info=(1, 3))
            + 'layer { name: "proposal" type: "Python" bottom: "cls" bottom: "bbox" bottom: "im_info" top: "rois"\n'
            + "  python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' param_str: \"'feat_stride': 16\" } }\n")
    net = opencv_net(tmp_path, text)
    cls, bbox, info = rpn_inputs(1, A, 4, 4)
    with pytest.raises(cv2.error, match="Python"):
        run_cv(net, {"cls": cls, "bbox": bbox, "im_info": info})


def test_param_str_and_rpn_constants():
    assert R.parse_param_str("'feat_stride': 16") == {"feat_stride": 16}
    assert R.parse_param_str("{'feat_stride': 16, 'scales': (4, 8, 16, 32)}") == {"feat_stride": 16, "scales": (4, 8, 16, 32)}
    assert R.parse_param_str("feat_stride: 16") == {"feat_stride": 16}  # YAML, as the original reads it
    for bad in ["[16]", "'feat_stride: 16", "{'a': 1"]:
        with pytest.raises(ValueError):
            R.parse_param_str(bad)
    assert R.RPN_TEST == {"pre_nms_topN": 6000, "post_nms_topN": 300, "nms_thresh": 0.7, "min_size": 16}


def test_py_faster_rcnn_nms_implementations_disagree_at_the_threshold():
    """IoU exactly at the threshold: gpu_nms (the default, ``> thresh``) and py_cpu_nms
    keep the second box, cpu_nms (``>= thresh``) suppresses it. With +1 areas: [0, 0, 9,
    9] (100 px) and [0, 0, 9, 19] (200 px) overlap 100 / 200 = 0.5."""
    dets = np.array([[0, 0, 9, 9, 0.9], [0, 0, 9, 19, 0.8]], np.float32)
    assert R.nms_plus_one(dets, 0.5, "gpu") == [0, 1]
    assert R.nms_plus_one(dets, 0.5, "py") == [0, 1]
    assert R.nms_plus_one(dets, 0.5, "cpu") == [0]


ROI_CASES = np.array([
    [0, 0, 0, 50, 40], [1, 10.5, 8, 100, 90], [0, 30, 30, 31, 31], [1, -20, -10, 300, 200],
    [0, 8, 24, 40, 25.5],   # 8/16 = 0.5 and 40/16 = 2.5: C's round goes up, numpy's to even
    [1, 300, 300, 400, 400],  # outside the map: empty bins are 0
    [0, 0, 0, 0, 0],          # OpenCV's padding RoI
], np.float32)


def test_roi_pooling_matches_opencv(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
    text = inputs(x=x.shape, rois=ROI_CASES.shape) + (
        'layer { name: "p" type: "ROIPooling" bottom: "x" bottom: "rois" top: "p" roi_pooling_param { pooled_h: 3 pooled_w: 4 spatial_scale: 0.0625 } }\n')
    cv = run_cv(opencv_net(tmp_path, text), {"x": x, "rois": ROI_CASES})
    ref = R.roi_pooling(x, ROI_CASES, 3, 4, 0.0625)
    np.testing.assert_array_equal(cv, ref)
    assert not ref[5].any()
    # numpy's half-to-even rounding would give other bins for the 0.5 / 2.5 corners
    assert R.c_round(np.array([0.5, 1.5, 2.5, -0.5])).tolist() == [1, 2, 3, -1]


@pytest.mark.parametrize("output_dim,group_size", [(3, 3), (2, 7)])
def test_psroi_pooling_matches_opencv(output_dim, group_size, tmp_path):
    rng = np.random.default_rng(output_dim)
    x = rng.standard_normal((2, output_dim * group_size ** 2, 10, 12)).astype(np.float32)
    text = inputs(x=x.shape, rois=ROI_CASES.shape) + (
        f'layer {{ name: "p" type: "PSROIPooling" bottom: "x" bottom: "rois" top: "p" psroi_pooling_param {{ spatial_scale: 0.0625 output_dim: {output_dim} group_size: {group_size} }} }}\n')
    cv = run_cv(opencv_net(tmp_path, text), {"x": x, "rois": ROI_CASES})
    close(cv, R.psroi_pooling(x, ROI_CASES, output_dim, group_size, 0.0625), "PSROIPooling", atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------
# YOLOv2: Reorg and Region
# --------------------------------------------------------------------------------------

def darknet_net(tmp_path, c, h, w, section):
    """A Darknet net: an identity 1x1 convolution (so the next layer sees the input as
    fed) followed by ``section``."""
    cfg = tmp_path / "net.cfg"
    cfg.write_text(f"[net]\nbatch=1\nwidth={w}\nheight={h}\nchannels={c}\n\n[convolutional]\nfilters={c}\nsize=1\nstride=1\npad=0\nactivation=linear\n\n{section}")
    weights = tmp_path / "net.weights"
    with open(weights, "wb") as f:
        np.array([0, 2, 0], np.int32).tofile(f)
        np.array([0], np.int64).tofile(f)
        np.concatenate([np.zeros(c, np.float32), np.eye(c, dtype=np.float32).ravel()]).tofile(f)
    return cv2.dnn.readNetFromDarknet(str(cfg), str(weights))


def test_reorg_loops_equal_the_reshape_form():
    """reorg_darknet's reshape/transpose equals the port's loops (reorg_layer.hpp:85-108)."""
    rng = np.random.default_rng(0)
    for s, shape in ((2, (2, 8, 4, 6)), (3, (1, 18, 6, 3))):
        x = rng.standard_normal(shape).astype(np.float32)
        n, c, h, w = shape
        top = np.empty(x.size, np.float32)
        bottom = x.ravel()
        tc, tw, th = c // (s * s), w * s, h * s
        for b in range(n):
            for k in range(c):
                for j in range(h):
                    for i in range(w):
                        off = k // tc
                        bi = i + w * (j + h * (k + c * b))
                        ti = (i * s + off % s) + tw * ((j * s + off // s) + th * (k % tc + tc * b))
                        top[bi] = bottom[ti]
        np.testing.assert_array_equal(R.reorg_darknet(x, s).ravel(), top)


def test_reorg_matches_opencv_stride_2_and_opencv_drops_reorg_param(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    outs = {}
    for s in (2, 4):
        text = inputs(x=x.shape) + f'layer {{ name: "r" type: "Reorg" bottom: "x" top: "r" reorg_param {{ stride: {s} }} }}\n'
        outs[s] = run_cv(opencv_net(tmp_path, text), {"x": x})
    np.testing.assert_array_equal(outs[2], R.reorg_darknet(x, 2))
    # reorg_param { stride: 4 } is dropped: OpenCV reads a field "reorg_stride" (default 2).
    np.testing.assert_array_equal(outs[4], R.reorg_darknet(x, 2))
    assert R.reorg_darknet(x, 4).shape == (2, 512, 2, 2)
    assert np.abs(R.reorg_darknet(x, 2) - R.reorg_space_to_depth(x, 2)).max() > 1


@pytest.mark.parametrize("stride", [2, 4])
def test_reorg_matches_opencv_darknet_importer(stride, tmp_path):
    """Through the Darknet importer OpenCV does honour the stride: same channel order."""
    rng = np.random.default_rng(stride)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    net = darknet_net(tmp_path, 32, 8, 8, f"[reorg]\nstride={stride}\n")
    net.setInput(x)
    np.testing.assert_array_equal(net.forward(), R.reorg_darknet(x, stride))


@pytest.mark.parametrize("thresh", [0.2, 0.05])
def test_region_matches_opencv_darknet_importer(thresh, tmp_path):
    """OpenCV 4 cannot configure a Caffe ``Region`` (its constructor wants the anchors as
    a blob and reads no ``region_param``); through the Darknet importer it runs
    Darknet's region layer: region_opencv gives its output, and region_darknet's
    activations (the Intel port's RegionYolo) are the ones OpenCV's boxes are made of."""
    rng = np.random.default_rng(int(thresh * 100))
    A, classes, H, W = 2, 3, 4, 5
    c = A * (5 + classes)
    anchors = [1.08, 1.19, 3.42, 4.41]
    x = rng.standard_normal((1, c, H, W)).astype(np.float32)
    net = darknet_net(tmp_path, c, H, W, f"[region]\nanchors={','.join(map(str, anchors))}\nclasses={classes}\ncoords=4\nnum={A}\nsoftmax=1\nthresh={thresh}\n")
    net.setInput(x)
    cv = net.forward()
    ref = R.region_opencv(x.transpose(0, 2, 3, 1), anchors, classes, thresh=thresh)
    close(cv, ref, "Region (Darknet decoding)", atol=1e-5, rtol=1e-5)
    act = R.region_darknet(x, A, classes).reshape(1, A, 5 + classes, H, W).transpose(0, 3, 4, 1, 2).reshape(-1, 5 + classes)
    col = np.tile(np.repeat(np.arange(W), A), H)
    row = np.repeat(np.arange(H), W * A)
    close(cv[:, 0] * W - col, act[:, 0], "sigmoid(tx)", atol=1e-5)
    close(cv[:, 1] * H - row, act[:, 1], "sigmoid(ty)", atol=1e-5)
    close(cv[:, 4], act[:, 4], "objectness", atol=1e-6)
    with pytest.raises(cv2.error, match="blobs.size"):
        text = inputs(x=x.shape) + f'layer {{ name: "r" type: "Region" bottom: "x" top: "r" region_param {{ classes: {classes} coords: 4 num: {A} softmax: true }} }}\n'
        run_cv(opencv_net(tmp_path, text), {"x": x})


def test_region_port_layouts():
    """The ports' Region tops differ: the Intel port keeps Darknet's [N, A, 5+C, H, W]
    layout, BirdeeChen's transposes it to [N, H*W, A*(5+C)] first (Darknet's
    ``flatten``); both activate the objectness and softmax the classes."""
    rng = np.random.default_rng(3)
    A, classes, H, W = 2, 3, 2, 3
    x = rng.standard_normal((1, A * (5 + classes), H, W)).astype(np.float32)
    a = R.region_darknet(x, A, classes).reshape(1, A, 5 + classes, H * W)
    b = R.region_birdeechen(x, A, classes).reshape(1, H * W, A, 5 + classes)
    np.testing.assert_allclose(a[:, :, 4], b[..., 4].transpose(0, 2, 1), rtol=1e-6)
    np.testing.assert_allclose(a[:, :, 5:], b[..., 5:].transpose(0, 2, 3, 1), rtol=1e-6)
    np.testing.assert_allclose(b[..., :4].transpose(0, 2, 3, 1), x.reshape(1, A, 5 + classes, H * W)[:, :, :4], rtol=0)


# --------------------------------------------------------------------------------------
# PriorBoxClustered, MVN, Interp, ShuffleChannel
# --------------------------------------------------------------------------------------

PBC_CASES = [
    ("width: 10 width: 22.5 height: 6 height: 12 variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 clip: false",
     dict(widths=[10, 22.5], heights=[6, 12], variance=[0.1, 0.1, 0.2, 0.2])),
    ("width: 10 height: 40 variance: 0.1 clip: true", dict(widths=[10], heights=[40], variance=[0.1], clip=True)),
    ("width: 10 height: 40 variance: 0.1 clip: false step: 7 offset: 0.3", dict(widths=[10], heights=[40], variance=[0.1], step_h=7, step_w=7, offset=0.3)),
]


@pytest.mark.parametrize("params,kw", PBC_CASES)
def test_prior_box_clustered_matches_opencv(params, kw, tmp_path):
    text = inputs(x=(1, 4, 3, 5), img=(1, 3, 30, 40)) + f'layer {{ name: "m" type: "PriorBoxClustered" bottom: "x" bottom: "img" top: "m" prior_box_param {{ {params} }} }}\n'
    cv = run_cv(opencv_net(tmp_path, text), {"x": np.zeros((1, 4, 3, 5), np.float32), "img": np.zeros((1, 3, 30, 40), np.float32)})
    close(cv, R.prior_box_explicit((3, 5), (30, 40), **kw), "PriorBoxClustered", atol=1e-6, rtol=1e-6)


def test_prior_box_opencv_clips_when_clip_is_unset(tmp_path):
    """Caffe's ``PriorBoxParameter.clip`` defaults to false (weiliu89 caffe.proto); OpenCV
    4 reads an unset ``clip`` as true (PriorBox and PriorBoxClustered alike)."""
    for typ in ("PriorBox", "PriorBoxClustered"):
        text = inputs(x=(1, 4, 3, 5), img=(1, 3, 30, 40)) + f'layer {{ name: "m" type: "{typ}" bottom: "x" bottom: "img" top: "m" prior_box_param {{ width: 10 height: 40 variance: 0.1 }} }}\n'
        cv = run_cv(opencv_net(tmp_path, text), {"x": np.zeros((1, 4, 3, 5), np.float32), "img": np.zeros((1, 3, 30, 40), np.float32)})
        close(cv, R.prior_box_explicit((3, 5), (30, 40), [10], [40], [0.1], clip=True), f"{typ} OpenCV = clipped", atol=1e-6)
        assert np.abs(cv - R.prior_box_explicit((3, 5), (30, 40), [10], [40], [0.1])).max() > 0.4


MVN_CASES = {"mvn_default": {}, "mvn_across_channels_eps": dict(across_channels=True, eps=0.5), "mvn_mean_only": dict(normalize_variance=False)}


@pytest.mark.parametrize("case", sorted(MVN_CASES))
def test_mvn_matches_real_caffe_and_opencv_puts_eps_inside_the_sqrt(case, tmp_path):
    """BVLC MVN divides by ``sqrt(var) + eps`` (mvn_layer.cpp:60-63); OpenCV 4 by
    ``sqrt(var + eps)``: the same with the default eps 1e-9, 0.38 apart with eps 0.5."""
    d = LOWER / case
    z = np.load(d / "io.npz")
    kw = MVN_CASES[case]
    close(R.mvn(z["in_data"], **kw), z["out_mvn"], f"{case} vs Caffe", atol=1e-6, rtol=1e-6)
    cv = run_cv(cv2.dnn.readNetFromCaffe(str(d / "net.prototxt"), str(d / "net.caffemodel")), {"data": z["in_data"]})
    if kw.get("eps", 0) >= 0.1:
        x = z["in_data"].astype(np.float64)
        m = x - x.mean(axis=(1, 2, 3), keepdims=True)
        inside = m / np.sqrt((m * m).mean(axis=(1, 2, 3), keepdims=True) + kw["eps"])
        close(cv, inside, "OpenCV = sqrt(var + eps)", atol=1e-5)
        assert np.abs(cv - z["out_mvn"]).max() > 0.3
    else:
        close(cv, z["out_mvn"], f"{case}: OpenCV vs Caffe", atol=1e-5, rtol=1e-5)


INTERP_OK = [("zoom_factor: 2", dict(zoom_factor=2)), ("height: 9 width: 4", dict(height=9, width=4)), ("height: 1 width: 1", dict(height=1, width=1))]
INTERP_OPENCV_DIFFERS = [("shrink_factor: 2", dict(shrink_factor=2)), ("zoom_factor: 3 shrink_factor: 2", dict(zoom_factor=3, shrink_factor=2)),
                         ("zoom_factor: 2 pad_beg: -1 pad_end: -1", dict(zoom_factor=2, pad_beg=-1, pad_end=-1))]


@pytest.mark.parametrize("params,kw", INTERP_OK + INTERP_OPENCV_DIFFERS)
def test_interp_against_opencv(params, kw, tmp_path):
    """PSPNet's Interp: OpenCV 4 agrees for zoom_factor and height/width; it computes no
    output for shrink_factor alone, zooms without shrinking when both are given, and
    ignores pad_beg/pad_end (no cropping)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 7)).astype(np.float32)
    ref = R.interp(x, **kw)
    text = inputs(x=x.shape) + f'layer {{ name: "m" type: "Interp" bottom: "x" top: "m" interp_param {{ {params} }} }}\n'
    if (params, kw) in INTERP_OK:
        close(run_cv(opencv_net(tmp_path, text), {"x": x}), ref, f"Interp {params}", atol=1e-5)
        return
    try:
        cv = run_cv(opencv_net(tmp_path, text), {"x": x})
    except cv2.error:
        cv = None
    assert cv is None or cv.shape != ref.shape, f"OpenCV now agrees on {params}: {cv.shape}"


def test_interp_pads_crop_from_pad_beg():
    """Negative pads crop: ``pad_beg`` from the top and the left, ``pad_end`` from the
    bottom and the right (interp_layer.cpp:27-28, 68-70)."""
    x = np.random.default_rng(2).standard_normal((1, 2, 5, 7)).astype(np.float32)
    np.testing.assert_array_equal(R.interp(x, height=3, width=4, pad_beg=-1, pad_end=-1),
                                  R.interp(x[:, :, 1:4, 1:6], height=3, width=4))
    np.testing.assert_array_equal(R.interp(x, zoom_factor=1, pad_beg=-2), x[:, :, 2:, 2:])


def test_shuffle_channel_matches_opencv(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 3)).astype(np.float32)
    text = inputs(x=x.shape) + 'layer { name: "m" type: "ShuffleChannel" bottom: "x" top: "m" shuffle_channel_param { group: 3 } }\n'
    np.testing.assert_array_equal(run_cv(opencv_net(tmp_path, text), {"x": x}), R.shuffle_channel(x, 3))


# --------------------------------------------------------------------------------------
# LSTM, RNN: against real Caffe
# --------------------------------------------------------------------------------------

def recurrent_case(case):
    z = np.load(LOWER / case / "io.npz")
    p = [z[k] for k in sorted((k for k in z.files if k.startswith("param_")), key=lambda k: int(k.rsplit("_", 1)[1]))]
    return z, p


def lstm_ref(case):
    z, p = recurrent_case(case)
    if "static" in case:
        return z, R.lstm(z["in_x"], z["in_cont"], p[0], p[1], p[3], x_static=z["in_x_static"], W_xc_static=p[2], h0=z["in_h0"], c0=z["in_c0"])
    return z, R.lstm(z["in_x"], z["in_cont"], p[0], p[1], p[2])


def rnn_ref(case):
    z, p = recurrent_case(case)
    if "static" in case:
        return z, R.rnn(z["in_x"], z["in_cont"], p[0], p[1], p[3], p[4], p[5], x_static=z["in_x_static"], W_xh_static=p[2], h0=z["in_h0"])
    return z, R.rnn(z["in_x"], z["in_cont"], *p)


@pytest.mark.parametrize("case", ["lstm_cont", "lstm_expose_hidden_static"])
def test_lstm_matches_real_caffe_opencv_cannot_run_it(case, tmp_path):
    z, (h, hT, cT) = lstm_ref(case)
    close(h, z["out_h"], f"{case} h", atol=1e-6, rtol=1e-6)
    if "out_hT" in z.files:
        close(hT, z["out_hT"], f"{case} h_T", atol=1e-6, rtol=1e-6)
        close(cT, z["out_cT"], f"{case} c_T", atol=1e-6, rtol=1e-6)
    # OpenCV 4 reads the blobs as (W_h, W_x, bias) where Caffe stores (W_xc, b_c, W_hc),
    # and its LSTM wants 5 blobs (ONNX's initial h/c): a Caffe LSTM does not run.
    d = LOWER / case
    net = cv2.dnn.readNetFromCaffe(str(d / "net.prototxt"), str(d / "net.caffemodel"))
    with pytest.raises(cv2.error):
        run_cv(net, {k[3:]: z[k] for k in z.files if k.startswith("in_")})


@pytest.mark.parametrize("case", ["rnn_cont", "rnn_expose_hidden_static"])
def test_rnn_matches_real_caffe_opencv_has_no_rnn(case):
    z, (o, hT) = rnn_ref(case)
    close(o, z["out_o"], f"{case} o", atol=1e-6, rtol=1e-6)
    if "out_hT" in z.files:
        close(hT, z["out_hT"], f"{case} h_T", atol=1e-6, rtol=1e-6)
    d = LOWER / case
    with pytest.raises(cv2.error, match="RNN"):
        net = cv2.dnn.readNetFromCaffe(str(d / "net.prototxt"), str(d / "net.caffemodel"))
        run_cv(net, {k[3:]: z[k] for k in z.files if k.startswith("in_")})


def test_lstm_cont_matters():
    """The fixture's cont resets change the output (cont is not ignorable), and a
    non-binary cont scales rather than masks."""
    z, (h, _, _) = lstm_ref("lstm_cont")
    _, p = recurrent_case("lstm_cont")
    ones = R.lstm(z["in_x"], np.ones_like(z["in_cont"]), p[0], p[1], p[2])[0]
    binar = R.lstm(z["in_x"], (z["in_cont"] > 0).astype(np.float32), p[0], p[1], p[2])[0]
    assert np.abs(ones - z["out_h"]).max() > 1e-2
    assert np.abs(binar - z["out_h"]).max() > 1e-3


# --------------------------------------------------------------------------------------
# The planned ONNX lowerings (onnx_designs.py) in onnxruntime against the references
# --------------------------------------------------------------------------------------

onnx = require_module("onnx")
ort = require_module("onnxruntime")
import onnx_designs as D  # noqa: E402


def run_design(model, feeds):
    """Runs a design (checked with onnx.checker full_check when built) on the feeds it
    declares."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {k: np.ascontiguousarray(v) for k, v in feeds.items() if k in names})


def design_det(loc, conf, prior, num_classes, **kw):
    model = D.detection_output(prior.shape[-1] // 4, num_classes, prior_channels=prior.shape[1], **kw)
    return run_design(model, {"loc": loc, "conf": conf, "prior": prior, "image": kw.pop("_image", None)})[0]


@pytest.mark.parametrize("name", sorted(DET_CASES))
def test_design_detection_output(name):
    """Row by row, in Caffe's order (no sorting): same count, same rows."""
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case(name)
    for seed in (0, 1):
        if seed:
            n, p, c, num_loc, kw, (loc, conf, prior) = det_case(name, seed=seed)
        ours = design_det(loc, conf, prior, c, **kw)
        ref = R.detection_output(loc, conf, prior, num_classes=c, **kw)
        close(ours, ref, f"{name} seed {seed}")


def test_design_detection_output_other_options():
    """CORNER_SIZE, a pre-NMS top_k above the candidates, keep_top_k -1, and Caffe's
    empty output at batch 3."""
    loc, conf, prior = ssd_inputs(8, 2, 30, 3, 1)
    for kw in [dict(code_type="CORNER_SIZE", nms_threshold=0.45, keep_top_k=20, confidence_threshold=0.1),
               dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=-1, confidence_threshold=0.1, top_k=500),
               dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=-1, top_k=3)]:
        close(design_det(loc, conf, prior, 3, **kw), R.detection_output(loc, conf, prior, num_classes=3, **kw), str(kw))
    loc, conf, prior = ssd_inputs(9, 3, 30, 3, 1)
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=10, confidence_threshold=0.9999)
    ours = design_det(loc, conf, prior, 3, **kw)
    np.testing.assert_array_equal(ours, R.detection_output(loc, conf, prior, num_classes=3, **kw))
    assert ours.shape == (1, 1, 3, 7) and (ours[0, 0, :, 0] == [0, 1, 2]).all()


def test_design_detection_output_pixel_clip_from_the_image_input():
    """``clip`` with ``normalized_bbox: false``: bounds W - 1, H - 1 of the 4th bottom."""
    loc, conf, prior = ssd_inputs(10, 2, 40, 3, 1, normalized=False, loc_scale=1.0)
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=30, confidence_threshold=0.1, clip=True, normalized_bbox=False)
    image = np.zeros((2, 3, 200, 250), np.float32)
    model = D.detection_output(40, 3, **kw)
    (ours,) = run_design(model, {"loc": loc, "conf": conf, "prior": prior, "image": image})
    ref = R.detection_output(loc, conf, prior, num_classes=3, image_shape=(200, 250), **kw)
    close(ours, ref, "pixel clip")
    assert ref[0, 0, :, 3:].max() <= 249 and (ref[0, 0, :, [4, 6]] <= 199).all()


def exact_priors(boxes):
    """A prior blob holding ``boxes`` exactly (loc = 0, CORNER, variances 1 give them
    back as the decoded boxes)."""
    b = np.asarray(boxes, np.float32)
    return np.stack([b.ravel(), np.ones(b.size, np.float32)])[None]


def test_design_nms_ties_threshold_equality_and_inverted_boxes_as_caffe():
    """Where NonMaxSuppression and ApplyNMSFast could differ, the design decides as Caffe:
    equal scores keep the lower prior index (onnxruntime's order, Caffe's stable_sort);
    an IoU exactly at nms_threshold keeps the box (both suppress only above it); a score
    exactly at confidence_threshold is dropped (both keep only above it); an inverted box
    (CORNER decoding) overlaps nothing in Caffe, while NonMaxSuppression would reorder its
    corners: the design feeds it to NMS as a point."""
    boxes = [[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [0, 0, 1, 0.5], [0.6, 0.6, 0.9, 0.9], [0.5, 0.5, 0, 0]]
    prior = exact_priors(boxes)
    loc = np.zeros((1, 20), np.float32)
    conf = np.zeros((1, 5, 2), np.float32)
    conf[0, :, 1] = [0.5, 0.5, 0.4, 0.3, 0.45]
    conf = conf.reshape(1, -1)
    for thr, cthr in [(0.5, 0.1), (0.49, 0.1), (0.5, 0.3), (0.5, 0.4)]:
        kw = dict(code_type="CORNER", nms_threshold=thr, keep_top_k=-1, confidence_threshold=cthr)
        ref = R.detection_output(loc, conf, prior, num_classes=2, **kw)
        close(design_det(loc, conf, prior, 2, **kw), ref, f"nms {thr} conf {cthr}")
        kept = ref[0, 0, :, 3:].tolist()
        assert [0, 0, 0.5, 0.5] in kept and ([0, 0, 1, 0.5] in kept) == (thr >= 0.5 and cthr < 0.4)
        assert [0.5, 0.5, 0, 0] in kept  # the inverted box survives its overlap with box 0


def test_design_keep_top_k_ties_across_classes():
    """Equal scores at the keep_top_k cut: the design (TopK) keeps the lower class, then
    the lower prior, as the reference does; Caffe's std::sort leaves that choice to
    libstdc++ (not a stable sort), so such ties may resolve otherwise in Caffe."""
    prior = exact_priors([[0, 0, 0.2, 0.2], [0.5, 0.5, 0.7, 0.7], [0.3, 0.3, 0.4, 0.4]])
    loc = np.zeros((1, 12), np.float32)
    conf = np.array([[0.1, 0.6, 0.6, 0.1, 0.6, 0.3, 0.1, 0.2, 0.6]], np.float32)  # 3 priors x 3 classes
    kw = dict(code_type="CORNER", nms_threshold=0.45, keep_top_k=3, confidence_threshold=0.05)
    ref = R.detection_output(loc, conf, prior, num_classes=3, **kw)
    close(design_det(loc, conf, prior, 3, **kw), ref, "keep_top_k ties")
    # four selections score 0.6: (class 1: priors 0, 1), (class 2: priors 0, 2); 3 kept
    assert ref[0, 0, :, 1].tolist() == [1, 1, 2] and (ref[0, 0, :, 2] == np.float32(0.6)).all()
    assert ref[0, 0, :, 3].tolist() == [0, np.float32(0.5), 0]


def test_design_cannot_express_eta_below_one():
    """NonMaxSuppression has a fixed IoU threshold: with ``eta < 1`` Caffe lowers the
    threshold after each kept box (bbox_util.cpp:1932-1934) and keeps fewer boxes than
    the design, which computes eta = 1. A lowering must refuse eta < 1 (or use a Loop)."""
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.9, keep_top_k=200, confidence_threshold=0.05)
    loc, conf, prior = ssd_inputs(6, 1, 80, 2, 1, loc_scale=0.2)
    ours = design_det(loc, conf, prior, 2, **kw)
    close(ours, R.detection_output(loc, conf, prior, num_classes=2, **kw), "eta 1")
    assert R.detection_output(loc, conf, prior, num_classes=2, eta=0.7, **kw).shape[2] < ours.shape[2]


@pytest.mark.parametrize("ratios,scales,stride,pre,post,nms,info", [
    ((0.5, 1, 2), (8, 16, 32), 16, 6000, 300, 0.7, (128, 160, 1.6)),
    ((1,), (2, 4), 8, 60, 40, 0.5, (100, 90, 1.0)),
    ((0.5, 1, 2), (8, 16, 32), 16, 50, 20, 0.7, (128, 160, 3.0)),
])
def test_design_proposal(ratios, scales, stride, pre, post, nms, info):
    """py-faster-rcnn's ProposalLayer (min_size applied, no padding) at two feature map
    sizes with one model (H, W dynamic). Equal scores are ordered by the lower index
    (``stable=True``); py-faster-rcnn's ``argsort()[::-1]`` leaves their order to numpy."""
    anchors = R.generate_anchors(16, ratios, scales)
    model = D.proposal(anchors, feat_stride=stride, pre_nms_topN=pre, post_nms_topN=post, nms_thresh=nms, min_size=16)
    for seed, (h, w) in enumerate([(8, 10), (5, 13)]):
        cls, bbox, im = rpn_inputs(seed, len(anchors), h, w, info=info, delta=0.8)
        rois, scores = run_design(model, {"rpn_cls_prob_reshape": cls, "rpn_bbox_pred": bbox, "im_info": im})
        ref_r, ref_s = R.proposal(cls, bbox, im, feat_stride=stride, scales=scales, ratios=ratios,
                                  pre_nms_topN=pre, post_nms_topN=post, nms_thresh=nms, stable=True)
        close(rois, ref_r, f"rois {h}x{w}")
        close(scores, ref_s, f"scores {h}x{w}", atol=1e-7)
        # The unstable original order gives the same set here (no equal scores).
        orig = R.proposal(cls, bbox, im, feat_stride=stride, scales=scales, ratios=ratios, pre_nms_topN=pre, post_nms_topN=post, nms_thresh=nms)[0]
        close(rois[np.lexsort(rois.T[::-1])], orig[np.lexsort(orig.T[::-1])], "as sets vs argsort()[::-1]")


def test_design_roi_pooling_is_max_roi_pool():
    x = np.random.default_rng(2).standard_normal((2, 3, 10, 12)).astype(np.float32)
    rng = np.random.default_rng(3)
    rand = np.concatenate([rng.integers(0, 2, (200, 1)), rng.uniform(-40, 220, (200, 4))], 1).astype(np.float32)
    rand[:, 3:] = np.maximum(rand[:, 3:], rand[:, 1:3])
    for rois in (ROI_CASES, rand):
        (y,) = run_design(D.roi_pooling(3, 4, 0.0625), {"x": x, "rois": rois})
        np.testing.assert_array_equal(y, R.roi_pooling(x, rois, 3, 4, 0.0625))


@pytest.mark.parametrize("output_dim,group_size", [(3, 3), (2, 7)])
def test_design_psroi_pooling(output_dim, group_size):
    rng = np.random.default_rng(output_dim)
    x = (rng.standard_normal((2, output_dim * group_size ** 2, 10, 12)) * 10 + 50).astype(np.float32)
    (y,) = run_design(D.psroi_pooling(output_dim, group_size, 0.0625), {"x": x, "rois": ROI_CASES})
    close(y, R.psroi_pooling(x, ROI_CASES, output_dim, group_size, 0.0625), "PSROIPooling", atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("stride", [2, 3, 4])
def test_design_reorg(stride):
    x = np.random.default_rng(stride).standard_normal((2, 9 * 16 if stride == 3 else 32, 12, 12)).astype(np.float32)
    (y,) = run_design(D.reorg(x.shape[1], 12, 12, stride), {"x": x})
    np.testing.assert_array_equal(y, R.reorg_darknet(x, stride))


def test_design_region():
    rng = np.random.default_rng(5)
    A, classes, H, W = 2, 3, 4, 5
    anchors = [1.08, 1.19, 3.42, 4.41]
    x = rng.standard_normal((2, A * (5 + classes), H, W)).astype(np.float32)
    (y,) = run_design(D.region_darknet(A, classes, H, W), {"x": x})
    close(y, R.region_darknet(x, A, classes), "RegionYolo activations", atol=1e-6)
    for thresh in (0.2, 0.05):
        (y,) = run_design(D.region_opencv(anchors, classes, H, W, thresh=thresh), {"x": x})
        ref = np.concatenate([R.region_opencv(x[i : i + 1].transpose(0, 2, 3, 1), anchors, classes, thresh=thresh) for i in range(2)])
        close(y, ref, f"Region decode thresh {thresh}", atol=1e-6)


@pytest.mark.parametrize("case", sorted(MVN_CASES))
def test_design_mvn(case):
    z = np.load(LOWER / case / "io.npz")
    (y,) = run_design(D.mvn(**MVN_CASES[case]), {"x": z["in_data"]})
    close(y, z["out_mvn"], f"{case} vs Caffe", atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("kw", [dict(height=3, width=4, pad_beg=-1, pad_end=-1), dict(zoom_factor=2, pad_beg=-1), dict(shrink_factor=2, pad_end=-2)])
def test_design_interp_pads(kw):
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 7)).astype(np.float32)
    ref = R.interp(x, **kw)
    (y,) = run_design(D.interp(5, 7, ref.shape[2:], kw.get("pad_beg", 0), kw.get("pad_end", 0)), {"x": x})
    close(y, ref, f"Interp {kw}", atol=1e-6)


@pytest.mark.parametrize("case", ["lstm_cont", "lstm_expose_hidden_static"])
def test_design_lstm(case):
    """The Scan design gives real Caffe's outputs for any cont (resets, non-binary); the
    ONNX LSTM op design gives them when cont is 1 after t = 0 (and differs with resets)."""
    z, p = recurrent_case(case)
    feeds = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
    static = "static" in case
    W_hc = p[3] if static else p[2]
    kw = dict(W_xc_static=p[2], expose_hidden=True) if static else {}
    kw["x_axes"] = list(feeds["x"].shape[2:])
    h, hT, cT = run_design(D.lstm_scan(p[0], p[1], W_hc, **kw), feeds)
    close(h, z["out_h"], f"{case} scan h", atol=1e-6, rtol=1e-6)
    if static:
        close(hT, z["out_hT"], "h_T", atol=1e-6, rtol=1e-6)
        close(cT, z["out_cT"], "c_T", atol=1e-6, rtol=1e-6)
    steady = dict(feeds, cont=np.ones_like(feeds["cont"]))
    ref = R.lstm(feeds["x"], steady["cont"], p[0], p[1], W_hc, x_static=feeds.get("x_static"), W_xc_static=kw.get("W_xc_static"),
                 h0=feeds.get("h0"), c0=feeds.get("c0"))
    for got, want, what in zip(run_design(D.lstm_op(p[0], p[1], W_hc, **kw), steady), ref, ("h", "h_T", "c_T")):
        close(got, want, f"{case} LSTM op {what}", atol=1e-6, rtol=1e-6)
    h_op = run_design(D.lstm_op(p[0], p[1], W_hc, **kw), feeds)[0]
    assert np.abs(h_op - z["out_h"]).max() > 0.1


@pytest.mark.parametrize("case", ["rnn_cont", "rnn_expose_hidden_static"])
def test_design_rnn(case):
    z, p = recurrent_case(case)
    feeds = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
    static = "static" in case
    args = (p[0], p[1], p[3], p[4], p[5]) if static else tuple(p)
    kw = dict(W_xh_static=p[2], expose_hidden=True) if static else {}
    o, hT = run_design(D.rnn_scan(*args, **kw), feeds)
    close(o, z["out_o"], f"{case} scan o", atol=1e-6, rtol=1e-6)
    if static:
        close(hT, z["out_hT"], "h_T", atol=1e-6, rtol=1e-6)
    steady = dict(feeds, cont=np.ones_like(feeds["cont"]))
    ref = R.rnn(feeds["x"], steady["cont"], *args, x_static=feeds.get("x_static"), W_xh_static=kw.get("W_xh_static"), h0=feeds.get("h0"))
    for got, want, what in zip(run_design(D.rnn_op(*args, **kw), steady), ref, ("o", "h_T")):
        close(got, want, f"{case} RNN op {what}", atol=1e-6, rtol=1e-6)


def test_faster_rcnn_postprocessing_detection_output(tmp_path):
    """OpenCV's Faster R-CNN nets end in a DetectionOutput over the RoIs (share_location
    false, variance in target, CENTER_SIZE, ``normalized_bbox: false``, 1-channel prior
    of R pixel boxes). OpenCV's +1 arithmetic is py-faster-rcnn's; the design with
    ``plus_one`` and a run-time prior count gives the reference's rows at two RoI counts,
    and the same detections as OpenCV."""
    C = 4
    kw = dict(code_type="CENTER_SIZE", share_location=False, background_label_id=0, variance_encoded_in_target=True,
              keep_top_k=100, nms_threshold=0.3, normalized_bbox=False)
    model = D.detection_output(None, C, prior_channels=1, plus_one=True, **kw)
    for R_, seed in ((30, 1), (57, 2)):
        rng = np.random.default_rng(seed)
        xy = rng.uniform(0, 200, (R_, 2))
        wh = rng.uniform(10, 80, (R_, 2))
        prior = np.concatenate([xy, xy + wh], 1).astype(np.float32).reshape(1, 1, -1)
        loc = (rng.standard_normal((1, R_ * C * 4)) * 0.2).astype(np.float32)
        logits = rng.standard_normal((R_, C)) * 2
        conf = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32).reshape(1, -1)
        ref = R.detection_output(loc, conf, prior, num_classes=C, pixel_plus_one=True, **kw)
        (ours,) = run_design(model, {"loc": loc, "conf": conf, "prior": prior})
        close(ours, ref, f"{R_} RoIs")
        ref_cv = R.detection_output(loc, conf, prior, num_classes=C, flavour="opencv", **kw)
        net = opencv_net(tmp_path, det_prototxt(1, R_, C, C, det_params(dict(kw, confidence_threshold=0.0)), variances=False))
        cv = opencv_detections(run_cv(net, {"loc": loc, "conf": conf, "prior": prior}))
        close(sort_rows(cv, 2), sort_rows(ref_cv.reshape(-1, 7), 2), "OpenCV vs its flavour")
        close(sort_rows(cv, 2), sort_rows(ref.reshape(-1, 7), 2), "OpenCV vs the +1 reference")

