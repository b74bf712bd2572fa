"""Issue 30's YOLOv2, MVN, Interp, ShuffleChannel and recurrent lowerings, per layer and
per option, in onnxruntime on our converted models (``onnx.checker`` with
``full_check`` on every file, at the net's batch and with ``dynamic_batch`` at another
batch where the layer allows it).

References: real BVLC Caffe for MVN, LSTM and RNN (the fixtures of ``testdata/lower/``,
made by ``gen_caffe_fixtures.py``); OpenCV 4 where it runs the layer as the original
(Reorg at stride 2, ShuffleChannel, Interp's zoom and size, the published nets' convolution
bodies); elsewhere the original program's definition in numpy (``caffe_refs.py``:
BirdeeChen's Region and YOLO DetectionOutput, the ports' Reorg at other strides and
reversed, PSPNet's Interp with pads and shrink). Where OpenCV 4 deviates from the
original (MVN's eps, Reorg's stride, Interp's shrink and pads, LSTM's blob order, Region
not configurable) ``test_caffe_refs.py`` measures the deviation.
"""

import os
import re

import numpy as np
import pytest

import tensorfmt
import tensorfmt.caffe
from conftest import TESTDATA, require_module

cv2 = require_module("cv2")
onnx = require_module("onnx")
ort = require_module("onnxruntime")

import caffe_refs as R  # noqa: E402
from test_caffe_onnx import compare  # noqa: E402

LOWER = TESTDATA / "lower"
NETS = TESTDATA / "nets"


def inputs(**blobs):
    return "".join(f'input: "{k}"\ninput_shape {{ ' + " ".join(f"dim: {d}" for d in v) + " }\n" for k, v in blobs.items())


def convert(tmp_path, text, name="net", model=None, **kw):
    """Writes the prototxt (and seeded random weights unless `model` is given), converts
    it, checks the model; returns (onnx path, info, caffemodel path)."""
    prototxt = tmp_path / f"{name}.prototxt"
    prototxt.write_text(text)
    if model is None:
        model = tmp_path / f"{name}.caffemodel"
        tensorfmt.caffe.write_random_weights(prototxt, model, seed=7)
    out = tmp_path / f"{name}-{kw.get('dynamic_batch', False)}.onnx"
    info = tensorfmt.caffe.to_onnx(model, prototxt, out, **kw)
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    return out, info, model


def run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {i.name: feeds[i.name] for i in sess.get_inputs()})))


def opencv(prototxt_text, tmp_path, model, feeds, layer=None):
    p = tmp_path / "cv.prototxt"
    p.write_text(prototxt_text)
    net = cv2.dnn.readNetFromCaffe(str(p), str(model)) if model else cv2.dnn.readNetFromCaffe(str(p))
    for k, v in feeds.items():
        net.setInput(v, k)
    return net.forward(layer) if layer else net.forward()


def both_batches(tmp_path, text, shape, ref, *, dynamic=True, name="net"):
    """Converts `text` (one input `x` of `shape`), runs it at its batch and (with
    dynamic_batch) at batch + 1 against `ref(x)` for the single output."""
    rng = np.random.default_rng(sum(shape))
    for dyn in (False, True) if dynamic else (False,):
        out, info, _ = convert(tmp_path, text, name, dynamic_batch=dyn)
        s = (shape[0] + int(dyn),) + tuple(shape[1:])
        x = rng.standard_normal(s).astype(np.float32)
        (got,) = run(out, {"x": x}).values()
        compare(got, ref(x), f"{name} (dynamic_batch={dyn}, batch {s[0]})")


# --------------------------------------------------------------------------------------
# MVN: real BVLC Caffe
# --------------------------------------------------------------------------------------

MVN_FIXTURES = {"mvn_default": {}, "mvn_across_channels_eps": dict(across_channels=True, eps=0.5), "mvn_mean_only": dict(normalize_variance=False)}


@pytest.mark.parametrize("case", sorted(MVN_FIXTURES))
def test_mvn_gives_real_caffes_output(case, tmp_path):
    """The fixture's own caffemodel (written by pycaffe) and input, against the output
    real Caffe computed; with eps 0.5 this is 0.38 away from OpenCV 4's (eps inside the
    root, measured in test_caffe_refs.py). Then at batch 3 with dynamic_batch against
    the numpy definition."""
    d = LOWER / case
    z = np.load(d / "io.npz")
    text = (d / "net.prototxt").read_text()
    out, info, _ = convert(tmp_path, text, model=d / "net.caffemodel")
    compare(run(out, {"data": z["in_data"]})["mvn"], z["out_mvn"], case)
    out, _, _ = convert(tmp_path, text, model=d / "net.caffemodel", dynamic_batch=True)
    x = np.random.default_rng(3).standard_normal((3, 3, 4, 5)).astype(np.float32)
    compare(run(out, {"data": x})["mvn"], R.mvn(x, **MVN_FIXTURES[case]), f"{case} batch 3")


@pytest.mark.parametrize("shape,param", [((2, 5), ""), ((2, 5), "across_channels: true"), ((2, 3, 7), "eps: 0.01"),
                                         ((2, 3, 1, 1), "across_channels: true normalize_variance: false")])
def test_mvn_other_ranks(shape, param, tmp_path):
    """MVN reads its input as (num, channels, height, width): 2- and 3-axis blobs
    normalise over what is left (a 2-axis blob per channel: one element, so zero)."""
    kw = dict(across_channels="across_channels: true" in param, normalize_variance="normalize_variance: false" not in param,
              eps=0.01 if "eps" in param else 1e-9)
    text = inputs(x=shape) + f'layer {{ name: "m" type: "MVN" bottom: "x" top: "m" mvn_param {{ {param} }} }}\n'
    both_batches(tmp_path, text, shape, lambda x: R.mvn(x, **kw))


# --------------------------------------------------------------------------------------
# LSTM, RNN: real BVLC Caffe
# --------------------------------------------------------------------------------------

RECURRENT = sorted(p.name for p in LOWER.iterdir() if p.is_dir() and p.name.startswith(("lstm", "rnn")))


@pytest.mark.parametrize("case", RECURRENT)
def test_recurrent_gives_real_caffes_first_forward(case, tmp_path):
    """Every recurrent fixture (cont resets mid-sequence, a non-binary cont, N = 3,
    expose_hidden with initial states cont does and does not flush, a static input,
    one step) with its pycaffe-written caffemodel: every top equals real Caffe's."""
    d = LOWER / case
    z = np.load(d / "io.npz")
    out, info, _ = convert(tmp_path, (d / "net.prototxt").read_text(), model=d / "net.caffemodel")
    got = run(out, {k[3:]: z[k] for k in z.files if k.startswith("in_")})
    assert sorted(got) == sorted(k[4:] for k in z.files if k.startswith("out_"))
    for k, v in got.items():
        compare(v, z["out_" + k], f"{case}: {k}")


@pytest.mark.parametrize("case", ["lstm_cont", "rnn_expose_hidden_cont1"])
def test_recurrent_onnx_runs_in_opencv_too(case, tmp_path):
    """The unrolled per-step LSTM / RNN ops run in OpenCV 4's ONNX importer (a Scan
    would not: it refuses graph attributes), with Caffe's numbers."""
    d = LOWER / case
    z = np.load(d / "io.npz")
    out, info, _ = convert(tmp_path, (d / "net.prototxt").read_text(), model=d / "net.caffemodel")
    net = cv2.dnn.readNetFromONNX(str(out))
    for k in z.files:
        if k.startswith("in_"):
            net.setInput(z[k], k[3:])
    names = info["outputs"]
    for n, v in zip(names, net.forward(names)):
        compare(np.asarray(v).reshape(z["out_" + n].shape), z["out_" + n], f"{case} in OpenCV: {n}")


def test_recurrent_cont_scales_the_state_exactly():
    """The lowering's algebra: Caffe's step (cont_t scales h_{t-1} before W_hc and the
    forget gate) equals an ordinary LSTM step from cont_t h_{t-1}, cont_t c_{t-1}, for
    any cont, 0 and non-binary values included."""
    rng = np.random.default_rng(0)
    H, D, N = 3, 4, 5
    W, b, U = rng.standard_normal((4 * H, D)), rng.standard_normal(4 * H), rng.standard_normal((4 * H, H))
    x, h, c = rng.standard_normal((1, N, D)), rng.standard_normal((1, N, H)), rng.standard_normal((1, N, H))
    cont = np.array([[0, 1, 0.5, -2, 3.25]])
    caffe = R.lstm(x, cont, W, b, U, h0=h, c0=c)
    plain = R.lstm(x, np.ones_like(cont), W, b, U, h0=h * cont[0][None, :, None], c0=c * cont[0][None, :, None])
    for a, p in zip(caffe, plain):
        np.testing.assert_allclose(a, p, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------
# Interp (PSPNet / DeepLab), ShuffleChannel
# --------------------------------------------------------------------------------------

INTERP = [
    ("zoom_factor: 2", dict(zoom_factor=2), True),
    ("height: 9 width: 4", dict(height=9, width=4), True),
    ("height: 1 width: 1", dict(height=1, width=1), True),
    ("shrink_factor: 2", dict(shrink_factor=2), False),
    ("shrink_factor: 3", dict(shrink_factor=3), False),
    ("zoom_factor: 3 shrink_factor: 2", dict(zoom_factor=3, shrink_factor=2), False),
    ("zoom_factor: 2 pad_beg: -1 pad_end: -1", dict(zoom_factor=2, pad_beg=-1, pad_end=-1), False),
    ("height: 3 width: 4 pad_beg: -1 pad_end: -1", dict(height=3, width=4, pad_beg=-1, pad_end=-1), False),
    ("zoom_factor: 1 pad_beg: -2", dict(zoom_factor=1, pad_beg=-2), False),
    ("shrink_factor: 2 pad_end: -2", dict(shrink_factor=2, pad_end=-2), False),
]


@pytest.mark.parametrize("params,kw,opencv_agrees", INTERP, ids=[p for p, _, _ in INTERP])
def test_interp_every_option(params, kw, opencv_agrees, tmp_path):
    """PSPNet's Interp (caffe_refs.interp, from interp_layer.cpp and util/interp.cpp);
    OpenCV 4 agrees on zoom_factor and height/width and is checked too; it deviates on
    shrink_factor and the pads (test_caffe_refs.py)."""
    shape = (2, 2, 5, 7)
    text = inputs(x=shape) + f'layer {{ name: "m" type: "Interp" bottom: "x" top: "m" interp_param {{ {params} }} }}\n'
    both_batches(tmp_path, text, shape, lambda x: R.interp(x, **kw))
    if opencv_agrees:
        x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
        out, _, model = convert(tmp_path, text)
        compare(run(out, {"x": x})["m"], opencv(text, tmp_path, None, {"x": x}), f"Interp {params} vs OpenCV")


def test_interp_size_from_a_second_bottom(tmp_path):
    text = inputs(x=(1, 2, 5, 7), ref=(1, 3, 8, 3)) + 'layer { name: "m" type: "Interp" bottom: "x" bottom: "ref" top: "m" }\n'
    out, info, _ = convert(tmp_path, text)
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)
    got = run(out, {"x": x, "ref": np.zeros((1, 3, 8, 3), np.float32)})["m"]
    compare(got, R.interp(x, ref_hw=(8, 3)), "Interp to a second bottom's size")


@pytest.mark.parametrize("group", [1, 2, 3, 6])
def test_shuffle_channel_against_opencv(group, tmp_path):
    shape = (2, 6, 3, 4)
    text = inputs(x=shape) + f'layer {{ name: "s" type: "ShuffleChannel" bottom: "x" top: "s" shuffle_channel_param {{ group: {group} }} }}\n'
    both_batches(tmp_path, text, shape, lambda x: R.shuffle_channel(x, group))
    x = np.random.default_rng(group).standard_normal(shape).astype(np.float32)
    out, _, _ = convert(tmp_path, text)
    compare(run(out, {"x": x})["s"], opencv(text, tmp_path, None, {"x": x}), f"ShuffleChannel group {group} vs OpenCV")


# --------------------------------------------------------------------------------------
# YOLOv2 ports: Reorg, Region, the ports' DetectionOutput
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("stride,reverse,shape", [(2, False, (2, 8, 6, 4)), (3, False, (1, 18, 6, 9)), (4, False, (1, 32, 8, 8)),
                                                  (2, True, (2, 8, 3, 2)), (3, True, (1, 18, 2, 3))])
def test_reorg_ports_channel_order(stride, reverse, shape, tmp_path):
    """The ports' reorg_cpu (Darknet's channel order, not ONNX SpaceToDepth's), with the
    stride of reorg_param (OpenCV 4 drops it) and `reverse`."""
    text = inputs(x=shape) + f'layer {{ name: "r" type: "Reorg" bottom: "x" top: "r" reorg_param {{ stride: {stride} reverse: {str(reverse).lower()} }} }}\n'
    ref = (lambda x: R.reorg_reverse(x, stride)) if reverse else (lambda x: R.reorg_darknet(x, stride))
    both_batches(tmp_path, text, shape, ref)
    if stride == 2 and not reverse:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        out, _, _ = convert(tmp_path, text)
        compare(run(out, {"x": x})["r"], opencv(text, tmp_path, None, {"x": x}), "Reorg stride 2 vs OpenCV")


def test_reorg_reverse_undoes_nothing_of_the_forward():
    """`reverse` is depth-to-space in the ports' channel order, not the inverse of their
    (Darknet's) forward reorg."""
    x = np.random.default_rng(1).standard_normal((1, 8, 4, 4)).astype(np.float32)
    assert np.abs(R.reorg_reverse(R.reorg_darknet(x, 2), 2) - x).max() > 0.5
    y = R.reorg_reverse(x, 2)
    np.testing.assert_array_equal(y[0, :, 0::2, 0::2], x[0, 0:2])
    np.testing.assert_array_equal(y[0, :, 1::2, 0::2], x[0, 4:6])


@pytest.mark.parametrize("classes,boxes,softmax", [(20, 5, True), (3, 2, False), (0, 3, True), (1, 1, True)])
def test_region_birdeechen(classes, boxes, softmax, tmp_path):
    shape = (2, boxes * (5 + classes), 3, 4)
    text = inputs(x=shape) + (f'layer {{ name: "r" type: "Region" bottom: "x" top: "r" region_param {{ classes: {classes} coords: 4 '
                              f'boxes_of_each_grid: {boxes} softmax: {str(softmax).lower()} }} }}\n')
    both_batches(tmp_path, text, shape, lambda x: R.region_birdeechen(x, boxes, classes, softmax_classes=softmax and classes > 0))


def yolo_det_text(shape, params):
    return inputs(x=shape) + f'layer {{ name: "det" type: "DetectionOutput" bottom: "x" top: "det" detection_output_param {{ {params} }} }}\n'


BIASES = [1.08, 1.19, 3.42, 4.41, 6.63, 11.38, 9.42, 5.11]
YOLO_DET = [
    # (side, classes, boxes, extra params, input scale)
    (5, 4, 3, "confidence_threshold: 0.2 nms_threshold: 0.4", 1.0),
    (5, 4, 3, "", 1.0),  # the ports' defaults: confidence 0.01, NMS 0.45
    (4, 2, 4, "confidence_threshold: 0.05 nms_threshold: 0.1", 3.0),
    (3, 1, 1, "confidence_threshold: 0.3 nms_threshold: 0.6", 2.0),
    (5, 4, 3, "confidence_threshold: 0.99", 1.0),  # nothing kept: the ports' [0, -1, ...] row
]


@pytest.mark.parametrize("side,classes,boxes,params,scale", YOLO_DET)
def test_yolo_detection_output(side, classes, boxes, params, scale, tmp_path):
    """The ports' DetectionOutput (Darknet decoding, their order-dependent NMS) against
    caffe_refs.yolo_detection_output, row by row (same count, same order)."""
    shape = (1, boxes * (5 + classes), side, side)
    biases = BIASES[: 2 * boxes]
    text = yolo_det_text(shape, f"side: {side} classes: {classes} num_box: {boxes} {params} " + " ".join(f"biases: {b}" for b in biases))
    out, info, _ = convert(tmp_path, text)
    m = onnx.load(str(out))
    dims = m.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in dims] == [1, 1, "detections", 7]
    kw = dict(re.findall(r"(\w+): ([\d.]+)", params))
    ref_kw = {k: float(v) for k, v in kw.items()}
    for seed in range(4):
        x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
        got = run(out, {"x": x})["det"]
        ref = R.yolo_detection_output(x, classes=classes, num_box=boxes, biases=biases, side=side, **ref_kw)
        assert got.shape == ref.shape, f"seed {seed}: {got.shape} rows, the port {ref.shape}"
        np.testing.assert_allclose(got, ref, atol=1e-3, rtol=1e-4)
    if "0.99" in params:
        np.testing.assert_array_equal(got, [[[[0, -1, -1, -1, -1, -1, -1]]]])


def chain(shape):
    """Three boxes in cells (0, 0), (0, 1), (0, 2) (C, B, A in the ports' order), 2.2
    cells wide, objectness C < B < A: C and B overlap, B and A overlap, A and C barely."""
    x = np.full(shape, -20, np.float32)
    x[0, 5] = 5  # the one class: probability 1
    for i, obj in enumerate([0.0, 1.0, 2.0]):
        x[0, 0:4, 0, i] = [0.0, 0.0, np.log(2.2), 0.0]
        x[0, 4, 0, i] = obj
    return x


def test_yolo_nms_is_the_ports_not_greedy_by_score():
    """On the chain the ports' NMS (candidate order, the lower objectness of each
    overlapping pair goes) removes C (B beats it), then B (A beats it): A alone. A
    greedy NMS by score (ONNX NonMaxSuppression's) keeps A, drops B, keeps C."""
    x = chain((1, 6, 3, 3))
    rows = R.yolo_detection_output(x, classes=1, num_box=1, biases=[1.0, 1.0], side=3,
                                   confidence_threshold=0.3, nms_threshold=0.3)[0, 0]
    assert len(rows) == 1 and rows[0, 3] == pytest.approx(2.5 / 3)
    cx = (np.arange(3) + 0.5) / 3
    w = 2.2 / 3
    corners = np.stack([np.maximum(cx - w / 2, 0), np.full(3, 0.5 / 3 - 1 / 6), np.minimum(cx + w / 2, 1), np.full(3, 0.5 / 3 + 1 / 6)], 1)
    greedy = R.apply_nms_fast(corners, 1 / (1 + np.exp(-np.array([0.0, 1.0, 2.0]))), 0.3, 0.3)
    assert sorted(greedy) == [0, 2]


def test_yolo_detection_output_onnx_follows_the_ports_nms(tmp_path):
    """The same chain through the converted model: one row (A), as the ports compute."""
    shape = (1, 6, 3, 3)
    text = yolo_det_text(shape, "side: 3 classes: 1 num_box: 1 confidence_threshold: 0.3 nms_threshold: 0.3 biases: 1 biases: 1")
    out, _, _ = convert(tmp_path, text)
    x = chain(shape)
    got = run(out, {"x": x})["det"]
    assert got.shape == (1, 1, 1, 7)
    np.testing.assert_allclose(got, R.yolo_detection_output(x, classes=1, num_box=1, biases=[1, 1], side=3,
                                                            confidence_threshold=0.3, nms_threshold=0.3), atol=1e-6)


def test_yolo_detection_output_gklz_num_classes(tmp_path):
    """gklz1982's DetectionOutputParameter names the class count `num_classes` (its field
    2): a prototxt with it and `biases` is the YOLO layer, with that many classes."""
    shape = (1, 2 * 8, 3, 3)
    text = yolo_det_text(shape, "side: 3 num_classes: 3 num_box: 2 biases: 1 biases: 2 biases: 3 biases: 4")
    out, _, _ = convert(tmp_path, text)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(run(out, {"x": x})["det"],
                               R.yolo_detection_output(x, classes=3, num_box=2, biases=[1, 2, 3, 4], side=3), atol=1e-5)


# --------------------------------------------------------------------------------------
# The published YOLOv2 nets (testdata/nets), no extra flags
# --------------------------------------------------------------------------------------

def test_dymat_tiny_yolo_matches_opencv(tmp_path):
    prototxt = NETS / "dymat_tiny_yolo_voc.prototxt"
    model = tmp_path / "w.caffemodel"
    shape = {"data": [1, 3, 160, 160]}
    tensorfmt.caffe.write_random_weights(prototxt, model, seed=3, input_shape=shape)
    out = tmp_path / "tiny.onnx"
    info = tensorfmt.caffe.to_onnx(model, prototxt, out, input_shape=shape)
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    x = np.random.default_rng(0).uniform(0, 1, shape["data"]).astype(np.float32)
    got = run(out, {"data": x})
    assert list(got) == ["layer15-conv"]
    net = cv2.dnn.readNetFromCaffe(str(prototxt), str(model))
    net.setInput(x, "data")
    compare(got["layer15-conv"], net.forward("layer15-conv"), "tiny-yolo layer15-conv vs OpenCV")


def test_birdeechen_yolov2_converts_and_gives_the_ports_outputs(tmp_path):
    """BirdeeChen's YOLOv2 (random weights, 200 MB) converts with no flags at its own
    416 x 416 (its DetectionOutput's side 13 fixes the map size): the body up to
    layer31-conv equals OpenCV 4's (OpenCV cannot build the net's Region, so it runs the
    prototxt without Region and DetectionOutput), `region1` is the port's Region of it,
    `Output` its DetectionOutput."""
    prototxt = NETS / "birdeechen_yolov2_voc_deploy.prototxt"
    text = prototxt.read_text()
    model = tmp_path / "w.caffemodel"
    tensorfmt.caffe.write_random_weights(prototxt, model, seed=3)
    out = tmp_path / "yolo.onnx"
    info = tensorfmt.caffe.to_onnx(model, prototxt, out)
    assert info["outputs"] == ["Output", "region1"] and not info["stopped_before"]
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    # A lower confidence threshold, so that random weights give detections to compare.
    low = tmp_path / "low.prototxt"
    low.write_text(text.replace("confidence_threshold: 0.2", "confidence_threshold: 0.001"))
    out_low = tmp_path / "low.onnx"
    tensorfmt.caffe.to_onnx(model, low, out_low, outputs=["Output", "region1", "layer31-conv"])
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 416, 416)).astype(np.float32)
    got = run(out_low, {"data": x})
    body = text[: text.index("layer {\n    bottom: \"layer31-conv\"\n    top: \"Output\"")]
    compare(got["layer31-conv"], opencv(body, tmp_path, model, {"data": x}, "layer31-conv"), "layer31-conv vs OpenCV")
    conv = got["layer31-conv"]
    compare(got["region1"], R.region_birdeechen(conv, 5, 20), "region1")
    ref = R.yolo_detection_output(conv, classes=20, num_box=5, side=13, confidence_threshold=0.001, nms_threshold=0.4,
                                  biases=[1.08, 1.19, 3.42, 4.41, 6.63, 11.38, 9.42, 5.11, 16.62, 10.52])
    assert got["Output"].shape == ref.shape and ref.shape[2] > 1
    np.testing.assert_allclose(got["Output"], ref, atol=1e-3, rtol=1e-4)
