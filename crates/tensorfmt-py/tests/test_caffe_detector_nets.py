"""The published detector nets of issue 30 (``testdata/nets/``, see its SOURCES.md) and
what OpenCV 4 does with each, so the lowering has a target.

Each prototxt is checked byte for byte against the git blob its SOURCES entry names.
OpenCV 4 then loads it with seeded random weights (written by tensorfmt's caffemodel
writer, ``tensorfmt.save``; the parameter shapes come from ``param_shapes`` below,
because ``tensorfmt.caffe.write_random_weights`` does not know these layer types yet)
at a small input size, and the test records whether it runs and what it outputs. The
real trained QR-code and licence-plate detectors (``$TENSORFMT_CORPUS/caffe/real/``)
give their detections on a generated QR code and on the plate repo's own demo photo.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings

import numpy as np
import pytest

import tensorfmt
from conftest import TESTDATA, optional_corpus, require_corpus, require_module

cv2 = require_module("cv2")

NETS = TESTDATA / "nets"


# --------------------------------------------------------------------------------------
# A minimal prototxt reader (these nets use fork fields the builtin schema does not
# have yet) and Caffe's parameter shapes for the layers that own blobs here.
# --------------------------------------------------------------------------------------

TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[{}:<>]|[^\s{}:<>#"\']+')


def parse_prototxt(text: str) -> dict:
    """Protobuf text format to nested ``{field: [values]}`` dicts (strings unquoted)."""
    toks = [t for t in TOKEN.findall(text) if t.strip() and not t.startswith("#")]
    pos = 0

    def block(end):
        nonlocal pos
        msg: dict = {}
        while pos < len(toks) and toks[pos] != end:
            key = toks[pos]
            pos += 1
            if toks[pos] == ":":
                pos += 1
            if toks[pos] in "{<":
                close = "}" if toks[pos] == "{" else ">"
                pos += 1
                val = block(close)
                pos += 1
            else:
                val = toks[pos]
                pos += 1
                if val[:1] in "\"'":
                    val = val[1:-1]
            msg.setdefault(key, []).append(val)
        return msg

    return block(None)


def first(msg, key, default=None):
    return msg.get(key, [default])[0]


def param_shapes(net: dict, input_channels: dict) -> dict:
    """``{"layer/i": shape}`` for Convolution, Deconvolution, InnerProduct, BatchNorm,
    Scale and Normalize, tracking channel counts (and the flattened size after
    ROIPooling / InnerProduct) through the layers of these nets."""
    chans = dict(input_channels)
    flat: dict = {}
    out = {}
    for layer in net.get("layer", []):
        t, name = first(layer, "type"), first(layer, "name")
        bottoms, tops = layer.get("bottom", []), layer.get("top", [])
        c = chans.get(bottoms[0]) if bottoms else None
        if t == "Input":
            for top, shp in zip(tops, first(layer, "input_param", {}).get("shape", [])):
                chans[top] = int(shp["dim"][1])
            continue
        if t in ("Convolution", "Deconvolution"):
            p = first(layer, "convolution_param")
            n = int(first(p, "num_output"))
            g = int(first(p, "group", 1))
            k = [int(v) for v in p.get("kernel_size", [])]
            kh = int(first(p, "kernel_h", k[0] if k else 1))
            kw = int(first(p, "kernel_w", k[-1] if k else 1))
            out[f"{name}/0"] = (n, c // g, kh, kw) if t == "Convolution" else (c, n // g, kh, kw)
            if first(p, "bias_term", "true") == "true":
                out[f"{name}/1"] = (n,)
            chans[tops[0]] = n
        elif t == "InnerProduct":
            p = first(layer, "inner_product_param")
            n = int(first(p, "num_output"))
            out[f"{name}/0"] = (n, flat[bottoms[0]])
            if first(p, "bias_term", "true") == "true":
                out[f"{name}/1"] = (n,)
            chans[tops[0]] = flat[tops[0]] = n
        elif t == "BatchNorm":
            out.update({f"{name}/0": (c,), f"{name}/1": (c,), f"{name}/2": (1,)})
            chans[tops[0]] = c
        elif t == "Scale":
            out[f"{name}/0"] = (c,)
            if first(first(layer, "scale_param", {}), "bias_term", "false") == "true":
                out[f"{name}/1"] = (c,)
            chans[tops[0]] = c
        elif t == "Normalize":
            shared = first(first(layer, "norm_param", {}), "channel_shared", "true") == "true"
            out[f"{name}/0"] = (1,) if shared else (c,)
            chans[tops[0]] = c
        elif t == "ROIPooling":
            p = first(layer, "roi_pooling_param")
            chans[tops[0]] = c
            flat[tops[0]] = c * int(first(p, "pooled_h")) * int(first(p, "pooled_w"))
        elif t == "Concat":
            chans[tops[0]] = sum(chans.get(b, 0) for b in bottoms)
        elif t == "Reorg":
            s = int(first(first(layer, "reorg_param", {}), "stride", 2))
            chans[tops[0]] = c * s * s
        elif t == "PSROIPooling":
            chans[tops[0]] = int(first(first(layer, "psroi_pooling_param"), "output_dim"))
        else:
            for top in tops:
                chans[top] = c
                if bottoms and bottoms[0] in flat:
                    flat[top] = flat[bottoms[0]]
    return out


def random_caffemodel(prototxt, path, input_channels, seed=0):
    """Seeded random weights written by tensorfmt's caffemodel writer: weights scaled by
    1/sqrt(fan-in); BatchNorm means random, variances in [0.5, 1.5), factor 1."""
    net = parse_prototxt(prototxt.read_text())
    bn = {first(l, "name") for l in net.get("layer", []) if first(l, "type") == "BatchNorm"}
    rng = np.random.default_rng(seed)
    blobs = {}
    for key, shape in param_shapes(net, input_channels).items():
        layer, i = key.rsplit("/", 1)
        if layer in bn and i == "2":
            v = np.ones(1, np.float32)
        elif layer in bn and i == "1":
            v = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            v = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        blobs[key] = v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a weights-only caffemodel: the prototxt gives the structure
        tensorfmt.save(path, blobs)
    return blobs


# --------------------------------------------------------------------------------------
# The nets, their blobs (SOURCES.md) and what OpenCV 4.14 does with them
# --------------------------------------------------------------------------------------

def git_blob(path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sources_blobs():
    """``{file: blob}`` from the table (columns: file, repo, path, commit, blob, ...)."""
    rows = {}
    for line in (NETS / "SOURCES.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0].endswith(".prototxt"):
            rows[cells[0]] = cells[4]
    return rows


def test_every_net_is_the_blob_its_sources_entry_names():
    blobs = sources_blobs()
    files = sorted(p.name for p in NETS.glob("*.prototxt"))
    assert sorted(blobs) == files, "every prototxt in testdata/nets needs a SOURCES.md row with its blob"
    for name, blob in blobs.items():
        assert git_blob(NETS / name) == blob, f"{name} is not blob {blob}"


# net -> (input shapes, what OpenCV 4.14 gives: {output layer: shape} or an error substring)
HW = 224
OPENCV = {
    "opencv_faster_rcnn_zf.prototxt": ({"data": (1, 3, HW, HW), "im_info": (1, 3)}, {"detection_out": (1, 1, 100, 7), "proposal": (300, 5)}),
    "opencv_rfcn_pascal_voc_resnet50.prototxt": ({"data": (1, 3, 160, 160), "im_info": (1, 3)}, {"detection_out": (1, 1, 100, 7), "proposal": (300, 5)}),
    "py_faster_rcnn_zf_test.prototxt": ({"data": (1, 3, HW, HW), "im_info": (1, 3)}, "Python"),
    "py_faster_rcnn_vgg16_test.prototxt": ({"data": (1, 3, HW, HW), "im_info": (1, 3)}, "Python"),
    "py_rfcn_resnet50_test_agnostic.prototxt": ({"data": (1, 3, 160, 160), "im_info": (1, 3)}, "Python"),
    "wechat_qrcode_detect.prototxt": ({"data": (1, 1, 192, 192)}, {"detection_output": (1, 1, 100, 7)}),
    "zeusees_plate_mssd512_voc.prototxt": ({"data": (1, 3, 256, 256)}, {"detection_out": (1, 1, 100, 7)}),
    "birdeechen_yolov2_voc_deploy.prototxt": ({"data": (1, 3, 160, 160)}, "blobs.size() == 1"),
    "dymat_tiny_yolo_voc.prototxt": ({"data": (1, 3, 160, 160)}, {"layer15-conv": (1, 125, 4, 4)}),
    "opencv_faster_rcnn_vgg16.prototxt": ({"data": (1, 3, HW, HW), "im_info": (1, 3)}, {"detection_out": (1, 1, 100, 7), "proposal": (300, 5)}),
}
# VGG16's random fc6 alone is 400 MB: opt-in.
LARGE = {"opencv_faster_rcnn_vgg16.prototxt", "py_faster_rcnn_vgg16_test.prototxt"}


def feeds_for(shapes, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for k, s in shapes.items():
        if k == "im_info":
            h, w = shapes["data"][2:]
            feeds[k] = np.array([[h, w, 1.0]], np.float32)
        else:
            feeds[k] = (rng.standard_normal(s) * 50).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", sorted(OPENCV))
def test_what_opencv_does_with_each_net(name, tmp_path):
    if name in LARGE and not os.environ.get("TENSORFMT_LARGE_NETS"):
        pytest.skip(f"{name}: random weights of 500 MB; set TENSORFMT_LARGE_NETS=1")
    shapes, expect = OPENCV[name]
    prototxt = NETS / name
    # Give the net the test's input size (OpenCV reshapes from the fed blobs anyway).
    model = tmp_path / "w.caffemodel"
    random_caffemodel(prototxt, model, {k: v[1] for k, v in shapes.items() if len(v) == 4})
    try:
        net = cv2.dnn.readNetFromCaffe(str(prototxt), str(model))
        for k, v in feeds_for(shapes, 1).items():
            net.setInput(v, k)
        layers = list(expect) if isinstance(expect, dict) else None
        outs = net.forward(layers) if layers else [net.forward()]
    except cv2.error as e:
        assert isinstance(expect, str) and expect in str(e), f"{name}: OpenCV fails: {str(e)[-300:]}"
        return
    finally:
        model.unlink(missing_ok=True)
    assert isinstance(expect, dict), f"{name}: OpenCV now runs it: {[o.shape for o in outs]}"
    assert {k: tuple(o.shape) for k, o in zip(expect, outs)} == expect
    for o in outs:
        assert np.isfinite(o).all()


# --------------------------------------------------------------------------------------
# Real trained models (not in the repo: $TENSORFMT_CORPUS/caffe/real, SOURCES.md there)
# --------------------------------------------------------------------------------------

def qr_image():
    """A QR code (OpenCV's encoder, 5 px modules) at (120, 100)-(265, 245) on a grey
    384 x 384 canvas."""
    qr = cv2.QRCodeEncoder.create().encode("tensorfmt issue 30")
    qr = cv2.resize(qr, (qr.shape[1] * 5, qr.shape[0] * 5), interpolation=cv2.INTER_NEAREST)
    canvas = np.full((384, 384), 200, np.uint8)
    canvas[100 : 100 + qr.shape[0], 120 : 120 + qr.shape[1]] = qr
    return canvas, (120 / 384, 100 / 384, (120 + qr.shape[1]) / 384, (100 + qr.shape[0]) / 384)


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_real_wechat_qr_detector_finds_the_code():
    real = optional_corpus("caffe/real")
    img, box = qr_image()
    net = cv2.dnn.readNetFromCaffe(str(NETS / "wechat_qrcode_detect.prototxt"), str(real / "wechat_qrcode_detect.caffemodel"))
    net.setInput(cv2.dnn.blobFromImage(img, 1 / 255.0, (384, 384), 0, False, False))
    det = net.forward()[0, 0]
    det = det[det[:, 2] > 0.5]
    assert len(det) == 1 and det[0, 1] == 1 and det[0, 2] > 0.99, det
    assert iou(det[0, 3:], box) > 0.7, (det[0, 3:], box)


def plate_tensor(img):
    """zeusees detect_opencv.py: RGB, /255, minus ImageNet means, over the stds."""
    means, stds = [0.406, 0.456, 0.485], [0.225, 0.224, 0.229]
    t = np.zeros((1, 3) + img.shape[:2], np.float32)
    for i in range(3):
        t[0, i] = (img[:, :, 2 - i].astype(np.float32) / 255.0 - means[2 - i]) / stds[2 - i]
    return t


def test_real_licence_plate_detector_finds_the_plate():
    real = optional_corpus("caffe/real")
    img = cv2.imread(str(real / "zeusees_plate_demo1.jpg"))
    assert img is not None and img.shape == (704, 645, 3)
    net = cv2.dnn.readNetFromCaffe(str(NETS / "zeusees_plate_mssd512_voc.prototxt"), str(real / "zeusees_plate_mssd512_voc.caffemodel"))
    net.setInput(plate_tensor(cv2.resize(img, (512, 512))))
    det = net.forward()[0, 0]
    det = det[det[:, 2] > 0.5]
    assert len(det) == 1 and det[0, 2] > 0.99, det
    assert iou(det[0, 3:], (0.256, 0.419, 0.555, 0.696)) > 0.9, det[0, 3:]
