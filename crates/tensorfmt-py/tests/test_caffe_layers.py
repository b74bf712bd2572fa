"""Every lowered Caffe layer and option, one small net each, against OpenCV 4.

The corpus nets cover the layers real deploy nets use most, but not every option the
lowering handles (TanH, ELU, BNLL, Power, Exp, Log, Threshold, Bias, Split, a leaky
ReLU, Eltwise PROD/MAX, InnerProduct axis/transpose, Softmax axis, two-bottom Scale,
LRN with k != 1, a Deconvolution with group = C, AVE pooling whose last window hangs
over the padding, ...). Each net here gets seeded random weights from tensorfmt's own
caffemodel writer, runs through OpenCV 4's Caffe importer and through onnxruntime on
our ONNX file (max |diff| <= 1e-4 * max(1, |ref|), cosine >= 0.99999), at its declared
batch and again with ``dynamic_batch=True`` at another batch size. Where OpenCV 4 has
no implementation of a Caffe layer, the reference is Caffe's definition written out in
numpy (named in the case).
"""

import numpy as np
import pytest

import tensorfmt
import tensorfmt.caffe
from conftest import require_module

cv2 = require_module("cv2")
onnx = require_module("onnx")
ort = require_module("onnxruntime")

from test_caffe_onnx import compare  # noqa: E402


def net(shape, body, second=None):
    """A deploy prototxt with input `data` of `shape` (and input `b` of `second`)."""
    text = 'input: "data" input_shape { ' + " ".join(f"dim: {d}" for d in shape) + " }\n"
    if second is not None:
        text += 'input: "b" input_shape { ' + " ".join(f"dim: {d}" for d in second) + " }\n"
    return text + body


X = (2, 3, 6, 6)

# id -> (prototxt, input kind) ; kind "pos" feeds positive values (Log, fractional Power).
CASES = {
    "relu_negative_slope": net(X, 'layer { name: "r" type: "ReLU" bottom: "data" top: "r" relu_param { negative_slope: 0.1 } }'),
    "relu_in_place": net(X, 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 kernel_size: 3 } }\n'
                            'layer { name: "r" type: "ReLU" bottom: "c" top: "c" }'),
    "prelu_channel_shared": net(X, 'layer { name: "p" type: "PReLU" bottom: "data" top: "p" prelu_param { channel_shared: true } }'),
    "prelu": net(X, 'layer { name: "p" type: "PReLU" bottom: "data" top: "p" }'),
    "sigmoid": net(X, 'layer { name: "s" type: "Sigmoid" bottom: "data" top: "s" }'),
    "tanh": net(X, 'layer { name: "t" type: "TanH" bottom: "data" top: "t" }'),
    "elu": net(X, 'layer { name: "e" type: "ELU" bottom: "data" top: "e" elu_param { alpha: 0.5 } }'),
    "absval": net(X, 'layer { name: "a" type: "AbsVal" bottom: "data" top: "a" }'),
    "bnll": net(X, 'layer { name: "b" type: "BNLL" bottom: "data" top: "b" }'),
    "power_square": net(X, 'layer { name: "p" type: "Power" bottom: "data" top: "p" power_param { power: 2 scale: 0.5 shift: 1 } }'),
    "power_sqrt": (net(X, 'layer { name: "p" type: "Power" bottom: "data" top: "p" power_param { power: 0.5 scale: 2 shift: 0.25 } }'), "pos"),
    "power_affine": net(X, 'layer { name: "p" type: "Power" bottom: "data" top: "p" power_param { scale: -3 shift: 0.5 } }'),
    "exp": net(X, 'layer { name: "e" type: "Exp" bottom: "data" top: "e" }'),
    "exp_base_scale_shift": net(X, 'layer { name: "e" type: "Exp" bottom: "data" top: "e" exp_param { base: 2 scale: 0.5 shift: 0.1 } }'),
    "log": (net(X, 'layer { name: "l" type: "Log" bottom: "data" top: "l" }'), "pos"),
    "log_base_scale_shift": (net(X, 'layer { name: "l" type: "Log" bottom: "data" top: "l" log_param { base: 10 scale: 2 shift: 1 } }'), "pos"),
    "threshold": net(X, 'layer { name: "t" type: "Threshold" bottom: "data" top: "t" threshold_param { threshold: 0.2 } }'),
    "dropout": net(X, 'layer { name: "d" type: "Dropout" bottom: "data" top: "d" dropout_param { dropout_ratio: 0.3 } }'),
    "dropout_no_scale_train": net(X, 'layer { name: "d" type: "Dropout" bottom: "data" top: "d" dropout_param { dropout_ratio: 0.3 scale_train: false } }'),
    "bias_learned": net(X, 'layer { name: "b" type: "Bias" bottom: "data" top: "b" }'),
    "bias_two_bottoms": net(X, 'layer { name: "b" type: "Bias" bottom: "data" bottom: "b" top: "o" bias_param { axis: 0 } }', second=(2, 3)),
    "scale_two_bottoms": net(X, 'layer { name: "s" type: "Scale" bottom: "data" bottom: "b" top: "o" scale_param { axis: 0 } }', second=(2, 3)),
    "scale_axis2_num_axes": net(X, 'layer { name: "s" type: "Scale" bottom: "data" top: "s" scale_param { axis: 2 num_axes: 2 bias_term: true } }'),
    "scale_scalar": net(X, 'layer { name: "s" type: "Scale" bottom: "data" top: "s" scale_param { num_axes: 0 } }'),
    "split_eltwise": net(X, 'layer { name: "sp" type: "Split" bottom: "data" top: "a" top: "b" }\n'
                            'layer { name: "r" type: "ReLU" bottom: "a" top: "ra" }\n'
                            'layer { name: "t" type: "TanH" bottom: "b" top: "tb" }\n'
                            'layer { name: "e" type: "Eltwise" bottom: "ra" bottom: "tb" top: "e" }'),
    "eltwise_prod": net(X, 'layer { name: "s" type: "Sigmoid" bottom: "data" top: "s" }\n'
                           'layer { name: "t" type: "TanH" bottom: "data" top: "t" }\n'
                           'layer { name: "e" type: "Eltwise" bottom: "data" bottom: "s" bottom: "t" top: "e" eltwise_param { operation: PROD } }'),
    "eltwise_max": net(X, 'layer { name: "s" type: "Sigmoid" bottom: "data" top: "s" }\n'
                          'layer { name: "e" type: "Eltwise" bottom: "data" bottom: "s" top: "e" eltwise_param { operation: MAX } }'),
    "eltwise_sum_coeff": net(X, 'layer { name: "s" type: "Sigmoid" bottom: "data" top: "s" }\n'
                                'layer { name: "e" type: "Eltwise" bottom: "data" bottom: "s" top: "e" eltwise_param { operation: SUM coeff: 1.5 coeff: -0.5 } }'),
    "innerproduct": net(X, 'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 7 } }'),
    "innerproduct_transpose": net(X, 'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 7 transpose: true bias_term: false } }'),
    "innerproduct_axis2": net(X, 'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 5 axis: 2 } }'),
    "softmax_axis1": net(X, 'layer { name: "s" type: "Softmax" bottom: "data" top: "s" }'),
    "softmax_axis2": net(X, 'layer { name: "s" type: "Softmax" bottom: "data" top: "s" softmax_param { axis: 2 } }'),
    "softmax_after_ip": net(X, 'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 10 } }\n'
                               'layer { name: "s" type: "Softmax" bottom: "ip" top: "s" }'),
    "lrn_across_k2": net(X, 'layer { name: "n" type: "LRN" bottom: "data" top: "n" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 2 } }'),
    "lrn_across_k1": net((2, 7, 5, 5), 'layer { name: "n" type: "LRN" bottom: "data" top: "n" lrn_param { local_size: 5 alpha: 0.3 beta: 0.75 } }'),
    "lrn_within": net(X, 'layer { name: "n" type: "LRN" bottom: "data" top: "n" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL } }'),
    "conv_hw_stride_pad_dilation": net((2, 3, 11, 9), 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 2 dilation: 2 } }'),
    "conv_group_no_bias": net((2, 4, 7, 7), 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 6 kernel_size: 3 group: 2 bias_term: false } }'),
    "deconv_bilinear_group_c": net(X, 'layer { name: "up" type: "Deconvolution" bottom: "data" top: "up" convolution_param { num_output: 3 group: 3 kernel_size: 4 stride: 2 pad: 1 bias_term: false } }'),
    "deconv_stride_pad": net(X, 'layer { name: "d" type: "Deconvolution" bottom: "data" top: "d" convolution_param { num_output: 2 kernel_size: 3 stride: 2 pad: 1 } }'),
    "pool_max_ceil_overhang": net((2, 3, 7, 7), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }'),
    "pool_max_ceil_clip": net((2, 3, 6, 6), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 pad: 1 } }'),
    "pool_ave_pad_overhang": net((2, 3, 6, 6), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }'),
    "pool_ave_no_pad_ceil": net((2, 3, 8, 8), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE kernel_size: 3 stride: 2 } }'),
    "pool_global_ave": net(X, 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE global_pooling: true } }'),
    "pool_global_max": net(X, 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX global_pooling: true } }'),
    "pool_hw": net((2, 3, 9, 8), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 3 pad_h: 1 pad_w: 0 } }'),
    "concat_axis2": net(X, 'layer { name: "s" type: "Sigmoid" bottom: "data" top: "s" }\n'
                           'layer { name: "c" type: "Concat" bottom: "data" bottom: "s" top: "c" concat_param { axis: 2 } }'),
    # OpenCV's forward(layer) gives a layer's first top: each top gets a layer of its own.
    "slice_points": net((2, 6, 4, 4), 'layer { name: "s" type: "Slice" bottom: "data" top: "a" top: "b" top: "c" slice_param { axis: 1 slice_point: 1 slice_point: 4 } }\n'
                                      + "".join(f'layer {{ name: "p{t}" type: "Power" bottom: "{t}" top: "p{t}" }}\n' for t in "abc")),
    "slice_even": net((2, 6, 4, 4), 'layer { name: "s" type: "Slice" bottom: "data" top: "a" top: "b" slice_param { axis: 1 } }\n'
                                    + "".join(f'layer {{ name: "p{t}" type: "Power" bottom: "{t}" top: "p{t}" }}\n' for t in "ab")),
    "flatten_axis2": net(X, 'layer { name: "f" type: "Flatten" bottom: "data" top: "f" flatten_param { axis: 2 } }'),
    "flatten": net(X, 'layer { name: "f" type: "Flatten" bottom: "data" top: "f" }'),
    "reshape_zero_minus_one": net(X, 'layer { name: "r" type: "Reshape" bottom: "data" top: "r" reshape_param { shape { dim: 0 dim: -1 dim: 4 } } }'),
    "reshape_axis_num_axes": net(X, 'layer { name: "r" type: "Reshape" bottom: "data" top: "r" reshape_param { shape { dim: 3 dim: 2 } axis: 2 num_axes: 1 } }'),
    "crop": net(X, 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 2 kernel_size: 3 } }\n'
                   'layer { name: "k" type: "Crop" bottom: "data" bottom: "c" top: "k" crop_param { axis: 2 offset: 1 offset: 0 } }'),
    "argmax_axis1": net(X, 'layer { name: "a" type: "ArgMax" bottom: "data" top: "a" argmax_param { axis: 1 } }'),
    "argmax_out_max_val": net(X, 'layer { name: "a" type: "ArgMax" bottom: "data" top: "a" argmax_param { axis: 1 out_max_val: true } }'),
    "permute": net(X, 'layer { name: "p" type: "Permute" bottom: "data" top: "p" permute_param { order: 0 order: 2 order: 3 order: 1 } }'),
    "normalize": net(X, 'layer { name: "n" type: "Normalize" bottom: "data" top: "n" norm_param { across_spatial: false channel_shared: false } }'),
    "batchnorm_scale": net(X, 'layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" batch_norm_param { eps: 0.01 } }\n'
                              'layer { name: "sc" type: "Scale" bottom: "bn" top: "bn" scale_param { bias_term: true } }'),
    "silence": net(X, 'layer { name: "s" type: "Sigmoid" bottom: "data" top: "s" }\n'
                      'layer { name: "t" type: "TanH" bottom: "data" top: "t" }\n'
                      'layer { name: "q" type: "Silence" bottom: "t" }'),
}

def lrn_across(x, size, alpha, beta, k):
    """BVLC lrn_layer.cpp, ACROSS_CHANNELS: x / (k + alpha / size * sum of x^2 over the
    `size` channels centred on each one, zero-padded) ^ beta."""
    c = x.shape[1]
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), ((size - 1) // 2, size // 2), (0, 0), (0, 0)))
    s = sum(sq[:, i : i + c] for i in range(size))
    return (x / (k + alpha / size * s) ** beta).astype(np.float32)


# Where OpenCV 4 has no implementation of the Caffe layer or option, or gets it wrong,
# Caffe's definition (BVLC src/caffe/layers/) in numpy, as f(feeds, weights) with the
# caffemodel's blobs by tensorfmt name (`layer/i`).
REFERENCE = {
    # OpenCV has no Threshold, ArgMax or Bias layer for Caffe.
    "threshold": lambda f, w: (f["data"] > 0.2).astype(np.float32),
    # BVLC argmax_layer with an axis: out_max_val replaces the index by the value.
    "argmax_axis1": lambda f, w: np.argmax(f["data"], axis=1)[:, None].astype(np.float32),
    "argmax_out_max_val": lambda f, w: np.max(f["data"], axis=1, keepdims=True),
    "bias_learned": lambda f, w: f["data"] + w["b/0"].reshape(1, 3, 1, 1),
    "bias_two_bottoms": lambda f, w: f["data"] + f["b"].reshape(f["b"].shape + (1, 1)),
    # OpenCV ignores InnerProduct's transpose (reads the [K, N] blob as [N, K]).
    "innerproduct_transpose": lambda f, w: f["data"].reshape(len(f["data"]), -1) @ w["ip/0"],
    # OpenCV's Log ignores base, scale and shift.
    "log_base_scale_shift": lambda f, w: np.log(1 + 2 * f["data"]) / np.log(10),
    # OpenCV's LRN reads `bias`, Caffe's field is `k`: OpenCV computes with k = 1.
    "lrn_across_k2": lambda f, w: lrn_across(f["data"], 3, 0.5, 0.75, 2.0),
}


def case(name):
    c = CASES[name]
    return c if isinstance(c, tuple) else (c, "any")


def feeds_for(info, batch, kind, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in info["inputs"]:
        shape = [batch] + list(info["shapes"][i][1:])
        x = rng.standard_normal(shape).astype(np.float32)
        feeds[i] = np.abs(x) + 0.1 if kind == "pos" else x
    return feeds


def opencv(prototxt, model, feeds, outputs, onnx_model):
    from test_caffe_onnx import producing_layer

    cv = cv2.dnn.readNetFromCaffe(str(prototxt), str(model))
    for k, v in feeds.items():
        cv.setInput(v, k)
    return [np.asarray(r) for r in cv.forward([producing_layer(onnx_model, n) for n in outputs])]


def run_onnx(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_matches_caffe(name, tmp_path):
    text, kind = case(name)
    prototxt = tmp_path / f"{name}.prototxt"
    prototxt.write_text(text)
    model = tmp_path / "w.caffemodel"
    tensorfmt.caffe.write_random_weights(prototxt, model, seed=7)
    for dynamic, batch in ((False, 2), (True, 3)):
        out = tmp_path / f"{name}-{dynamic}.onnx"
        info = tensorfmt.caffe.to_onnx(model, prototxt, out, dynamic_batch=dynamic)
        m = onnx.load(str(out))
        onnx.checker.check_model(m, full_check=True)
        feeds = feeds_for(info, batch, kind, seed=batch)
        names, ours = run_onnx(out, feeds)
        assert names == info["outputs"]
        if name in REFERENCE:
            refs = [REFERENCE[name](feeds, tensorfmt.load(model))]
        else:
            refs = opencv(prototxt, model, feeds, names, m)
        for n, a, b in zip(names, ours, refs):
            assert a.shape[0] == batch, f"{name}:{n}: batch {a.shape[0]}, fed {batch}"
            if b.size == a.size and b.shape != a.shape:
                b = b.reshape(a.shape)
            compare(a, b, f"{name}:{n} (dynamic_batch={dynamic}, batch {batch})")


def test_every_lowered_layer_type_has_a_case():
    """A layer type added to the registry without a numeric check here fails this test
    (the corpus nets' fork layers, checked in test_caffe_onnx.py, are listed)."""
    covered = set()
    for text, _ in map(case, CASES):
        covered.update(t.split('"')[1] for t in text.split("type: ")[1:])
    # Fork layers with fork schemas, checked on the corpus nets that use them
    # (test_caffe_onnx.py): ShuffleNet, SSD, SENet, SegNet/ENet/PSPNet, MobileNet;
    # DetectionOutput and PriorBoxClustered: test_caffe_detection.py.
    by_corpus = {"Input", "Upsample", "Interp", "BN", "Axpy", "PriorBox", "ShuffleChannel",
                 "ConvolutionDepthwise", "DetectionOutput", "PriorBoxClustered"}
    # Per option in test_caffe_yolo_mvn_recurrent.py (real Caffe, OpenCV 4, the ports).
    by_corpus |= {"MVN", "Interp", "ShuffleChannel", "Reorg", "Region", "LSTM", "RNN"}
    # Faster R-CNN / R-FCN layers, each with its own cases in test_caffe_rcnn.py.
    by_rcnn = {"Proposal", "Python", "ROIPooling", "PSROIPooling"}
    missing = set(tensorfmt.caffe.supported_layers()) - covered - by_corpus - by_rcnn
    assert not missing, f"lowered layer types without a numeric test: {sorted(missing)}"


def _lower_and_cv(tmp_path, text, x, outputs=None, seed=1):
    """Our ONNX outputs and OpenCV's net for the prototxt ``text`` with random weights."""
    p = tmp_path / "n.prototxt"
    p.write_text(text)
    w = tmp_path / "n.caffemodel"
    tensorfmt.caffe.write_random_weights(p, w, seed=seed)
    o = tmp_path / "n.onnx"
    tensorfmt.caffe.to_onnx(w, p, o, outputs=outputs)
    s = ort.InferenceSession(str(o), providers=["CPUExecutionProvider"])
    ours = s.run(None, {"data": x})
    cvn = cv2.dnn.readNetFromCaffe(str(p), str(w))
    return ours, cvn, {k: np.asarray(v) for k, v in tensorfmt.load(w).items()}


def test_opencv_deviations_on_classic_layers(tmp_path):
    """Where OpenCV 4 departs from Caffe on the classic layers (measured by issue 34's
    differential audit; docs/caffe-layers.md lists them), the lowering follows Caffe."""
    rng = np.random.default_rng(0)
    # 1. round_mode: FLOOR. Caffe floors: a 5x5 input, 2x2 stride 2 gives 2x2; OpenCV
    # ignores the field and ceils (3x3).
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    ours, cvn, _ = _lower_and_cv(
        tmp_path,
        net((1, 1, 5, 5), 'layer { name: "l" type: "Pooling" bottom: "data" top: "l" pooling_param { pool: MAX kernel_h: 2 kernel_w: 2 stride_h: 2 stride_w: 2 round_mode: FLOOR } }'),
        x,
    )
    np.testing.assert_array_equal(ours[0], x[:, :, :4, :4].reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5)))
    cvn.setInput(x)
    assert np.asarray(cvn.forward()).shape == (1, 1, 3, 3)
    # 2. A depthwise 3x3 convolution with pad 1 on a 1x1 map reads only the centre tap;
    # OpenCV's depthwise kernel gives other values there.
    x = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    ours, cvn, weights = _lower_and_cv(
        tmp_path,
        net((1, 8, 1, 1), 'layer { name: "dw" type: "Convolution" bottom: "data" top: "dw" convolution_param { num_output: 8 group: 8 kernel_size: 3 pad: 1 bias_term: false } }'),
        x,
    )
    centre = x * weights["dw/0"][:, 0, 1, 1].reshape(1, 8, 1, 1)
    np.testing.assert_allclose(ours[0], centre, rtol=1e-6, atol=1e-7)
    cvn.setInput(x)
    cv_dw = np.asarray(cvn.forward())
    if np.allclose(cv_dw, centre, rtol=1e-4, atol=1e-5):
        print("OpenCV's depthwise 3x3 on a 1x1 map is right in this build")
    # 3. An in-place blob that feeds a Concat: OpenCV (with fusion, its default) writes
    # the convolution straight into the Concat's buffer, so asking it for the blob
    # gives other values; ours is the blob, the Concat's slice.
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ours, cvn, _ = _lower_and_cv(
        tmp_path,
        net((1, 3, 8, 8), 'layer { name: "a" type: "Convolution" bottom: "data" top: "a" convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n'
            'layer { name: "a_relu" type: "ReLU" bottom: "a" top: "a" }\n'
            'layer { name: "b" type: "Convolution" bottom: "data" top: "b" convolution_param { num_output: 2 kernel_size: 1 } }\n'
            'layer { name: "cat" type: "Concat" bottom: "b" bottom: "a" top: "cat" }'),
        x,
        outputs=["a", "cat"],
    )
    np.testing.assert_array_equal(ours[0], ours[1][:, 2:])
    cvn.enableFusion(False)
    cvn.setInput(x)
    np.testing.assert_allclose(np.asarray(cvn.forward("a_relu")), ours[0], rtol=1e-4, atol=1e-5)
