"""SSD's DetectionOutput, PriorBox's OpenCV forms and PriorBoxClustered as tensorfmt
lowers them (issue 30), one small net per option, and ``stop_before``.

Each net is converted by ``tensorfmt.caffe.to_onnx`` (checked with
``onnx.checker.check_model(full_check=True)``) and run in onnxruntime. DetectionOutput
is compared row by row, in Caffe's order, with weiliu89's layer written in numpy
(``caffe_refs.detection_output``), and, after sorting by score, with OpenCV 4 where
OpenCV runs the option as Caffe does (issue 30's tolerance: same count, per column
|diff| <= 1e-3 + 1e-4 |ref|). Every case runs at its batch and again with
``dynamic_batch=True`` at another batch. Where onnxruntime's NonMaxSuppression could
decide otherwise than Caffe's ApplyNMSFast (inverted boxes, equal scores, an IoU or a
score exactly at its threshold, keep_top_k ties, ``eta``), the case says what the
lowering does. The SSD nets end to end: ``test_caffe_ssd_nets.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import caffe_refs as R
import tensorfmt
import tensorfmt.caffe
from conftest import require_module

cv2 = require_module("cv2")
onnx = require_module("onnx")
ort = require_module("onnxruntime")

from test_caffe_refs import (  # noqa: E402  (helpers only: no test is imported)
    DET_CASES,
    PBC_CASES,
    close,
    det_case,
    det_params,
    det_prototxt,
    exact_priors,
    inputs,
    opencv_detections,
    opencv_net,
    run_cv,
    sort_rows,
    ssd_inputs,
)

FLT = R.FLT_MAX


def convert(tmp_path, text, name="net", **kw):
    """Converts a prototxt (stand-in weights by our writer) and returns an onnxruntime
    session and the conversion summary; the model passes onnx's full check."""
    prototxt = tmp_path / f"{name}.prototxt"
    prototxt.write_text(text)
    weights = tmp_path / f"{name}.caffemodel"
    tensorfmt.caffe.write_random_weights(prototxt, weights)
    out = tmp_path / f"{name}.onnx"
    info = tensorfmt.caffe.to_onnx(weights, prototxt, out, **kw)
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    return ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]), info


def run(sess, **feeds):
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: np.ascontiguousarray(v) for k, v in feeds.items() if k in names})[0]


# --------------------------------------------------------------------------------------
# DetectionOutput: every option of the reference's cases, at two batches
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(DET_CASES))
def test_detection_output_matches_caffe_and_opencv(name, tmp_path):
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case(name)
    params = det_params(kw)
    vit = kw.get("variance_encoded_in_target", False)
    sess, info = convert(tmp_path, det_prototxt(n, p, c, num_loc, params))
    assert info["outputs"] == ["det"] and info["stopped_before"] == []
    ours = run(sess, loc=loc, conf=conf, prior=prior)
    ref = R.detection_output(loc, conf, prior, num_classes=c, **kw)
    assert ref.shape[2] > n, "the case should detect something"
    close(ours, ref, f"{name}: rows in Caffe's order")
    # OpenCV 4 runs these options as Caffe does (it orders each image's rows by score
    # and pads with zero rows; with variance in target it wants a 1-channel prior).
    cv = run_cv(opencv_net(tmp_path, det_prototxt(n, p, c, num_loc, params, variances=not vit)),
                {"loc": loc, "conf": conf, "prior": prior[:, :1] if vit else prior})
    close(sort_rows(ours.reshape(-1, 7), 2), sort_rows(opencv_detections(cv), 2), f"{name}: OpenCV 4")
    # A symbolic batch, run at another batch: image_id numbers the images.
    sess, info = convert(tmp_path, det_prototxt(n, p, c, num_loc, params), name="dyn", dynamic_batch=True)
    m = 2 if n != 2 else 3
    loc2, conf2, prior2 = ssd_inputs(11, m, p, c, num_loc, kw.get("loc_scale", 0.5))
    ours = run(sess, loc=loc2, conf=conf2, prior=prior2)
    ref = R.detection_output(loc2, conf2, prior2, num_classes=c, **kw)
    close(ours, ref, f"{name}: dynamic batch {m}")
    assert set(ours[0, 0, :, 0].astype(int)) == set(range(m))


def test_detection_output_variance_in_target_with_opencvs_one_channel_prior(tmp_path):
    """``variance_encoded_in_target``: SSD's PriorBox gives 2 channels (Caffe ignores the
    variances), OpenCV's nets give 1: both lower, with the same detections."""
    n, p, c, num_loc, kw, (loc, conf, prior) = det_case("variance_in_target")
    params = det_params(kw)
    sess, _ = convert(tmp_path, det_prototxt(n, p, c, num_loc, params, variances=False))
    one = run(sess, loc=loc, conf=conf, prior=prior[:, :1])
    close(one, R.detection_output(loc, conf, prior, num_classes=c, **kw), "1-channel prior")
    # Without variance_in_target a 1-channel prior is refused, naming the layer.
    kw.pop("variance_encoded_in_target")
    with pytest.raises(tensorfmt.TensorfmtError, match=r'"det".*1 channel'):
        convert(tmp_path, det_prototxt(n, p, c, num_loc, det_params(kw), variances=False), name="bad")


def test_detection_output_other_options(tmp_path):
    """CORNER_SIZE (OpenCV cannot parse it: the reference only), a pre-NMS top_k above
    the candidates, keep_top_k -1, an unset confidence_threshold (Caffe: -FLT_MAX, every
    score is a candidate; OpenCV: 0), and top_k / keep_top_k 0 (Caffe keeps nothing)."""
    loc, conf, prior = ssd_inputs(8, 2, 30, 3, 1)
    for kw in [dict(code_type="CORNER_SIZE", nms_threshold=0.45, keep_top_k=20, confidence_threshold=0.1),
               dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=-1, confidence_threshold=0.1, top_k=500),
               dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=-1, top_k=3),
               dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=7),
               dict(code_type="CORNER", nms_threshold=0.45, keep_top_k=50, confidence_threshold=0.1, top_k=0),
               dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=0, confidence_threshold=0.1)]:
        text = det_prototxt(2, 30, 3, 1, det_params(kw))
        if "confidence_threshold" not in kw:
            assert "confidence_threshold" not in text
        sess, _ = convert(tmp_path, text)
        close(run(sess, loc=loc, conf=conf, prior=prior), R.detection_output(loc, conf, prior, num_classes=3, **kw), str(kw))


def test_detection_output_nothing_detected_gives_caffes_rows(tmp_path):
    """Nothing above the threshold in the whole batch: one ``[i, -1, -1, -1, -1, -1,
    -1]`` row per image (detection_output_layer.cpp:281-291), at the declared batch and
    at another; OpenCV gives zeros of its padded size instead (test_caffe_refs.py)."""
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=10, confidence_threshold=0.9999)
    sess, _ = convert(tmp_path, det_prototxt(3, 30, 3, 1, det_params(kw)), dynamic_batch=True)
    for n in (3, 1, 4):
        loc, conf, prior = ssd_inputs(9, n, 30, 3, 1)
        ours = run(sess, loc=loc, conf=conf, prior=prior)
        expect = -np.ones((1, 1, n, 7), np.float32)
        expect[0, 0, :, 0] = np.arange(n)
        np.testing.assert_array_equal(ours, expect)
        np.testing.assert_array_equal(ours, R.detection_output(loc, conf, prior, num_classes=3, **kw))
    # One image with detections, one without: only the detections (no -1 row).
    loc, conf, prior = ssd_inputs(9, 2, 30, 3, 1)
    conf = conf.reshape(2, 30, 3)
    conf[1] = [1, 0, 0]
    conf[0, 5] = [0, 1, 0]
    ours = run(sess, loc=loc, conf=conf.reshape(2, -1), prior=prior)
    assert ours.shape == (1, 1, 1, 7) and ours[0, 0, 0, :3].tolist() == [0, 1, 1]


def test_detection_output_nms_decides_as_caffe(tmp_path):
    """Where NonMaxSuppression and Caffe's ApplyNMSFast could differ: equal scores keep
    the lower prior first (both), an IoU exactly at nms_threshold keeps the box (both
    suppress only above), a score exactly at confidence_threshold is dropped (both keep
    only above), and an inverted box (CORNER decoding can give xmax < xmin), which
    overlaps nothing in Caffe while NonMaxSuppression would reorder its corners, is fed
    to NMS as a point: it survives, as in Caffe."""
    boxes = [[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [0, 0, 1, 0.5], [0.6, 0.6, 0.9, 0.9], [0.5, 0.5, 0, 0]]
    prior = exact_priors(boxes)
    loc = np.zeros((1, 20), np.float32)
    conf = np.zeros((1, 5, 2), np.float32)
    conf[0, :, 1] = [0.5, 0.5, 0.4, 0.3, 0.45]
    conf = conf.reshape(1, -1)
    for thr, cthr in [(0.5, 0.1), (0.49, 0.1), (0.5, 0.3), (0.5, 0.4)]:
        kw = dict(code_type="CORNER", nms_threshold=thr, keep_top_k=-1, confidence_threshold=cthr)
        sess, _ = convert(tmp_path, det_prototxt(1, 5, 2, 1, det_params(kw)))
        ours = run(sess, loc=loc, conf=conf, prior=prior)
        ref = R.detection_output(loc, conf, prior, num_classes=2, **kw)
        close(ours, ref, f"nms {thr} conf {cthr}")
        kept = ours[0, 0, :, 3:].tolist()
        assert [0, 0, 0.5, 0.5] in kept and ([0, 0, 1, 0.5] in kept) == (thr >= 0.5 and cthr < 0.4)
        assert [0.5, 0.5, 0, 0] in kept
        assert ours[0, 0, 0, 2] == 0.5 and ours[0, 0, 0, 3:].tolist() == [0, 0, 0.5, 0.5]


@pytest.mark.parametrize("thr", ["1.5", "inf"])
def test_detection_output_nms_threshold_above_one_suppresses_nothing(thr, tmp_path):
    """Caffe checks only ``nms_threshold >= 0``: above 1 no overlap reaches it, as at 1
    (NonMaxSuppression refuses an iou_threshold above 1 when it runs, so the lowering
    stores 1)."""
    loc, conf, prior = ssd_inputs(4, 1, 40, 3, 1, loc_scale=0.2)
    kw = dict(code_type="CENTER_SIZE", keep_top_k=100, confidence_threshold=0.05)
    sess, _ = convert(tmp_path, det_prototxt(1, 40, 3, 1, det_params(dict(kw, nms_threshold=1.0))), name="one")
    at_one = run(sess, loc=loc, conf=conf, prior=prior)
    text = det_prototxt(1, 40, 3, 1, det_params(dict(kw, nms_threshold=1.0))).replace("nms_threshold: 1.0", f"nms_threshold: {thr}")
    assert f"nms_threshold: {thr}" in text
    sess, _ = convert(tmp_path, text, name="above")
    close(run(sess, loc=loc, conf=conf, prior=prior), at_one, f"nms_threshold {thr}")


def test_detection_output_keep_top_k_ties_keep_the_lower_class_then_prior(tmp_path):
    """Equal scores at the keep_top_k cut: Caffe cuts with std::sort, whose choice among
    equal scores libstdc++ leaves unspecified; the lowering (TopK) keeps the lower class,
    then the lower prior, and the rows stay in Caffe's order."""
    prior = exact_priors([[0, 0, 0.2, 0.2], [0.5, 0.5, 0.7, 0.7], [0.3, 0.3, 0.4, 0.4]])
    loc = np.zeros((1, 12), np.float32)
    conf = np.array([[0.1, 0.6, 0.6, 0.1, 0.6, 0.3, 0.1, 0.2, 0.6]], np.float32)
    kw = dict(code_type="CORNER", nms_threshold=0.45, keep_top_k=3, confidence_threshold=0.05)
    sess, _ = convert(tmp_path, det_prototxt(1, 3, 3, 1, det_params(kw)))
    ours = run(sess, loc=loc, conf=conf, prior=prior)
    close(ours, R.detection_output(loc, conf, prior, num_classes=3, **kw), "keep_top_k ties")
    # four selections score 0.6: (class 1: priors 0, 1), (class 2: priors 0, 2); 3 kept
    assert ours[0, 0, :, 1].tolist() == [1, 1, 2] and (ours[0, 0, :, 2] == np.float32(0.6)).all()
    assert ours[0, 0, :, 3].tolist() == [0, np.float32(0.5), 0]


def test_detection_output_eta_below_one_is_not_lowered(tmp_path):
    """``nms_param.eta < 1`` (Caffe lowers the NMS threshold after each kept box) has no
    NonMaxSuppression form: the conversion lists the layer with the reason and writes
    nothing (the reference keeps fewer boxes than eta 1 would)."""
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.9, keep_top_k=200, confidence_threshold=0.05, eta=0.7)
    with pytest.raises(tensorfmt.TensorfmtError, match=r"unsupported layer\(s\): det \(DetectionOutput: nms_param.eta 0.7"):
        convert(tmp_path, det_prototxt(1, 80, 2, 1, det_params(kw)))
    assert not (tmp_path / "net.onnx").exists()
    loc, conf, prior = ssd_inputs(6, 1, 80, 2, 1, loc_scale=0.2)
    assert R.detection_output(loc, conf, prior, num_classes=2, **kw).shape[2] < \
        R.detection_output(loc, conf, prior, num_classes=2, **dict(kw, eta=1.0)).shape[2]


def test_detection_output_shared_boxes_without_background_is_refused(tmp_path):
    kw = dict(code_type="CENTER_SIZE", background_label_id=-1, nms_threshold=0.5, keep_top_k=30, confidence_threshold=0.2)
    with pytest.raises(tensorfmt.TensorfmtError, match=r'"det".*background_label_id -1'):
        convert(tmp_path, det_prototxt(1, 10, 3, 1, det_params(kw)))
    assert not (tmp_path / "net.onnx").exists()


def test_detection_output_normalized_bbox_false_is_opencvs_pixel_arithmetic(tmp_path):
    """``normalized_bbox: false`` (an OpenCV field, used by its Faster R-CNN / R-FCN
    post-processing): py-faster-rcnn's +1 pixel widths (CENTER_SIZE prior sizes + 1,
    NMS on boxes one pixel larger), as OpenCV computes; weiliu89's SSD has no such field
    (its field 10 is ``visualize``) and never adds 1. Checked at two RoI counts with a
    1-channel prior of pixel boxes (variance in target, share_location false)."""
    C = 4
    kw = dict(code_type="CENTER_SIZE", share_location=False, background_label_id=0, variance_encoded_in_target=True,
              keep_top_k=100, nms_threshold=0.3, normalized_bbox=False, confidence_threshold=0.0)
    for R_, seed in ((30, 1), (57, 2)):
        rng = np.random.default_rng(seed)
        xy = rng.uniform(0, 200, (R_, 2))
        wh = rng.uniform(10, 80, (R_, 2))
        prior = np.concatenate([xy, xy + wh], 1).astype(np.float32).reshape(1, 1, -1)
        loc = (rng.standard_normal((1, R_ * C * 4)) * 0.2).astype(np.float32)
        logits = rng.standard_normal((R_, C)) * 2
        conf = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32).reshape(1, -1)
        text = det_prototxt(1, R_, C, C, det_params(kw), variances=False)
        sess, _ = convert(tmp_path, text)
        ours = run(sess, loc=loc, conf=conf, prior=prior)
        close(ours, R.detection_output(loc, conf, prior, num_classes=C, pixel_plus_one=True, **kw), f"{R_} RoIs")
        cv = opencv_detections(run_cv(opencv_net(tmp_path, text), {"loc": loc, "conf": conf, "prior": prior}))
        close(sort_rows(ours.reshape(-1, 7), 2), sort_rows(cv, 2), f"{R_} RoIs: OpenCV")
        ssd = R.detection_output(loc, conf, prior, num_classes=C, **kw)
        assert ssd.shape != ours.shape or np.abs(ssd - ours).max() > 1e-3, "SSD's arithmetic would differ"


def test_detection_output_pixel_clip_reads_the_image_bottom(tmp_path):
    """``clip`` with ``normalized_bbox: false``: x to [0, W - 1], y to [0, H - 1] of the
    fourth bottom (OpenCV's rule; without it the conversion is refused)."""
    loc, conf, prior = ssd_inputs(10, 2, 40, 3, 1, normalized=False, loc_scale=1.0)
    kw = dict(code_type="CENTER_SIZE", nms_threshold=0.45, keep_top_k=30, confidence_threshold=0.1, clip=True, normalized_bbox=False)
    text = det_prototxt(2, 40, 3, 1, det_params(kw), image=(200, 250))
    sess, _ = convert(tmp_path, text, dynamic_batch=True)
    ours = run(sess, loc=loc, conf=conf, prior=prior, image=np.zeros((2, 3, 200, 250), np.float32))
    ref = R.detection_output(loc, conf, prior, num_classes=3, image_shape=(200, 250), pixel_plus_one=True, **kw)
    close(ours, ref, "pixel clip")
    assert ours[0, 0][:, [3, 5]].max() <= 249 and ours[0, 0][:, [4, 6]].max() <= 199
    cv = run_cv(opencv_net(tmp_path, text), {"loc": loc, "conf": conf, "prior": prior, "image": np.zeros((2, 3, 200, 250), np.float32)})
    close(sort_rows(ours.reshape(-1, 7), 2), sort_rows(opencv_detections(cv), 2), "pixel clip: OpenCV")
    with pytest.raises(tensorfmt.TensorfmtError, match="4th bottom"):
        convert(tmp_path, det_prototxt(2, 40, 3, 1, det_params(kw)), name="noimage")
    # The clip reads H and W as axes 2 and 3: another rank is refused, not a model that
    # onnxruntime cannot load.
    flat = det_prototxt(2, 40, 3, 1, det_params(kw), image=(200, 250)).replace("dim: 3 dim: 200 dim: 250", "dim: 600 dim: 250")
    assert "dim: 600 dim: 250" in flat
    with pytest.raises(tensorfmt.TensorfmtError, match=r"image bottom \"image\" has shape \[2, 600, 250\]"):
        convert(tmp_path, flat, name="flat")
    assert not (tmp_path / "flat.onnx").exists()


@pytest.mark.parametrize("what,shapes,message", [
    ("loc", dict(loc=(1, 41 * 4)), r"location bottom has 164 values per image, the priors need 160 \(40 priors"),
    ("conf", dict(conf=(1, 40 * 3 + 1)), r"confidence bottom has 121 values per image, the priors need 120 \(40 priors x 3 classes"),
    ("prior", dict(prior=(1, 2, 162)), r"prior bottom has shape \[1, 2, 162\]"),
    ("batch", dict(conf=(2, 120)), r"location bottom has 1 images, the confidence bottom 2"),
])
def test_detection_output_counts_that_disagree_are_refused(what, shapes, message, tmp_path):
    """Item 7: priors x 4 against the location count, priors x classes against the
    confidence count, ...: an error naming the layer and both numbers; nothing written."""
    s = dict(loc=(1, 160), conf=(1, 120), prior=(1, 2, 160))
    s.update(shapes)
    text = inputs(**s) + 'layer { name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"\n' \
        "  detection_output_param { num_classes: 3 nms_param { nms_threshold: 0.45 } keep_top_k: 10 } }\n"
    p = tmp_path / "bad.prototxt"
    p.write_text(text)
    with pytest.raises(tensorfmt.TensorfmtError, match=r'"det" \(DetectionOutput\).*' + message):
        tensorfmt.caffe.write_random_weights(p, tmp_path / "w.caffemodel")
    ok = tmp_path / "ok.prototxt"
    ok.write_text(inputs(x=(1, 2)) + 'layer { name: "r" type: "ReLU" bottom: "x" top: "r" }\n')
    tensorfmt.caffe.write_random_weights(ok, tmp_path / "w.caffemodel")  # no blobs
    with pytest.raises(tensorfmt.TensorfmtError, match=r'"det" \(DetectionOutput\).*' + message):
        tensorfmt.caffe.to_onnx(tmp_path / "w.caffemodel", p, tmp_path / "bad.onnx")
    assert not (tmp_path / "bad.onnx").exists()


# --------------------------------------------------------------------------------------
# PriorBoxClustered and PriorBox's OpenCV forms (explicit sizes, offset lists)
# --------------------------------------------------------------------------------------

def priors_net(typ, params, x=(1, 4, 3, 5), img=(1, 3, 30, 40)):
    return inputs(x=x, img=img) + f'layer {{ name: "m" type: "{typ}" bottom: "x" bottom: "img" top: "m" prior_box_param {{ {params} }} }}\n'


def both(tmp_path, typ, params, **shapes):
    text = priors_net(typ, params, **shapes)
    sess, info = convert(tmp_path, text)
    x, img = (np.zeros(info["shapes"][k], np.float32) for k in ("x", "img"))
    return run(sess, x=x, img=img), run_cv(opencv_net(tmp_path, text), {"x": x, "img": img})


@pytest.mark.parametrize("params,kw", PBC_CASES)
def test_prior_box_clustered_matches_opencv(params, kw, tmp_path):
    ours, cv = both(tmp_path, "PriorBoxClustered", params)
    close(ours, cv, "PriorBoxClustered vs OpenCV", atol=1e-6, rtol=1e-6)
    close(ours, R.prior_box_explicit((3, 5), (30, 40), **kw), "vs the reference", atol=1e-6, rtol=1e-6)


def test_prior_box_clustered_clips_when_clip_is_unset_priorbox_does_not(tmp_path):
    """PriorBoxClustered is OpenVINO's op, which OpenCV runs: an unset ``clip`` means true
    there (OpenCV, OpenVINO's specification). PriorBox is weiliu89's: unset means false
    (its caffe.proto), where OpenCV clips: OpenCV deviates, measured here."""
    params = "width: 10 height: 40 variance: 0.1"
    ours, cv = both(tmp_path, "PriorBoxClustered", params)
    close(ours, cv, "PriorBoxClustered clips", atol=1e-6, rtol=1e-6)
    ours, cv = both(tmp_path, "PriorBox", params)
    close(ours, R.prior_box_explicit((3, 5), (30, 40), [10], [40], [0.1]), "PriorBox: Caffe's default", atol=1e-6, rtol=1e-6)
    assert np.abs(ours - cv).max() > 0.4


@pytest.mark.parametrize("given", ["img_size: 100", "img_h: 100 img_w: 100"])
def test_prior_box_image_size_is_weiliu89s_where_opencv_ignores_it(given, tmp_path):
    """With ``min_size``, weiliu89's layer takes the image size from ``img_size`` or
    ``img_h``/``img_w`` when given; OpenCV 4 reads neither and takes the image
    bottom's 40 x 30. The original's 100 x 100 is followed: a measured deviation."""
    ours, cv = both(tmp_path, "PriorBox", f"min_size: 20 {given} clip: false variance: 0.1")
    # weiliu89: steps 100/5 and 100/3, the first centre (10, 16.67), a 20 x 20 box.
    close(ours.reshape(-1)[:4], np.array([0.0, 20 / 300, 0.2, 80 / 300]), given, atol=1e-6, rtol=1e-6)
    # OpenCV: steps 40/5 and 30/3, the first centre (4, 5), the box over 40 x 30.
    close(cv.reshape(-1)[:4], np.array([-0.15, -1 / 6, 0.35, 0.5]), f"{given}: OpenCV", atol=1e-6, rtol=1e-6)


def test_prior_box_sizes_that_overflow_are_refused(tmp_path):
    """Finite sizes whose product overflows float32 (sqrt(1e38 * 3e38)) would give
    infinite boxes: refused, naming the layer; with clip they are clipped, as Caffe does."""
    with pytest.raises(tensorfmt.TensorfmtError, match=r'"m" \(PriorBox, line 3\): the boxes overflow float32'):
        convert(tmp_path, priors_net("PriorBox", "min_size: 1e38 max_size: 3e38 variance: 0.1"))
    ours, cv = both(tmp_path, "PriorBox", "min_size: 1e38 max_size: 3e38 variance: 0.1 clip: true")
    assert np.isfinite(ours).all()


@pytest.mark.parametrize("params", [
    "width: 10 width: 4 height: 6 height: 8 variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 clip: false",
    "width: 10 width: 4 height: 6 height: 8 variance: 0.1 clip: false offset_h: 0.2 offset_h: 0.7 offset_w: 0.3 offset_w: 0.6",
    "width: 12 height: 9 variance: 0.1 clip: true step_h: 7 step_w: 9 offset: 0.25",
    "min_size: 5 max_size: 9 aspect_ratio: 2 variance: 0.1 clip: false offset_h: 0.2 offset_h: 0.7 offset_w: 0.3 offset_w: 0.6",
])
def test_prior_box_opencv_forms_match_opencv(params, tmp_path):
    """OpenCV's PriorBox fields: explicit ``width``/``height`` (each size once per
    offset), ``offset_h``/``offset_w`` lists (each size at every offset, also with
    min_size), explicit steps."""
    for typ in ("PriorBox", "PriorBoxClustered"):
        ours, cv = both(tmp_path, typ, params)
        close(ours, cv, f"{typ} {params}", atol=1e-6, rtol=1e-6)


def test_prior_box_three_offsets_are_not_lowered(tmp_path):
    """OpenCV (the only program with offset lists) sizes its output for 2 (n - 1) boxes
    per size and writes n: with 3 offsets its output has a garbage tail. Not lowered."""
    params = "width: 10 height: 6 variance: 0.1 clip: false offset_h: 0.2 offset_h: 0.7 offset_h: 0.5 offset_w: 0.3 offset_w: 0.6 offset_w: 0.5"
    with pytest.raises(tensorfmt.TensorfmtError, match=r"m \(PriorBox: 3 offset_h/offset_w pairs"):
        convert(tmp_path, priors_net("PriorBox", params))


# --------------------------------------------------------------------------------------
# stop_before
# --------------------------------------------------------------------------------------

CHAIN = inputs(data=(1, 2, 6, 6)) + """layer { name: "c1" type: "Convolution" bottom: "data" top: "c1" convolution_param { num_output: 3 kernel_size: 3 } }
layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "p" type: "Pooling" bottom: "c1" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "c2" type: "Convolution" bottom: "p" top: "c2" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "cat" type: "Concat" bottom: "c2" bottom: "p" top: "cat" }
"""


def test_stop_before_a_layer_name_cuts_what_depends_on_it(tmp_path):
    """``stop_before`` takes layer names or types: the layer, and every layer reading what
    it computes, are cut; the blobs the cut part reads become the outputs (here: the
    pooling output, read by both cut layers), and the model's metadata says so."""
    sess, info = convert(tmp_path, CHAIN, stop_before="c2")
    assert info["outputs"] == ["p"]
    assert info["stopped_before"] == [("c2", "Convolution"), ("cat", "Concat")]
    m = onnx.load(str(tmp_path / "net.onnx"))
    meta = {p.key: p.value for p in m.metadata_props}
    assert meta["tensorfmt.stopped_before"] == "c2 (Convolution), cat (Concat)"
    assert not any(n.name.startswith("c2/") for n in m.graph.node)
    # An in-place layer: stopping before the ReLU outputs the convolution's own values.
    sess, info = convert(tmp_path, CHAIN, name="relu", stop_before=["ReLU"])
    assert info["outputs"] == ["c1"] and [k for _, k in info["stopped_before"]] == ["ReLU", "Pooling", "Convolution", "Concat"]
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    assert (run(sess, data=x) < 0).any()
    with pytest.raises(tensorfmt.TensorfmtError, match=r'stop before "nope": no layer of the net has that name or type'):
        convert(tmp_path, CHAIN, name="nope", stop_before="nope")
