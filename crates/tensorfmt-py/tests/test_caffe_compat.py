"""Issue 23 item 7: a caffemodel saved from float64 arrays is what OpenCV 4 reads (float
`data`, with a warning that precision beyond float32 is lost)."""

import numpy as np
import pytest

import tensorfmt
from conftest import require_module

cv2 = require_module("cv2")

PROTOTXT = """
name: "tiny"
input: "data"
input_shape { dim: 1 dim: 1 dim: 3 dim: 3 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 2 kernel_size: 3 } }
layer { name: "ip" type: "InnerProduct" bottom: "conv1" top: "ip"
        inner_product_param { num_output: 1 } }
"""


def test_opencv_reads_a_caffemodel_saved_from_float64(tmp_path):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((2, 1, 3, 3))  # float64
    b1 = rng.standard_normal(2)
    w2 = rng.standard_normal((1, 2))
    b2 = rng.standard_normal(1)
    model = tmp_path / "tiny.caffemodel"
    with pytest.warns(tensorfmt.TensorfmtWarning, match="float64 .* float32"):
        tensorfmt.save(model, {"conv1/0": w1, "conv1/1": b1, "ip/0": w2, "ip/1": b2})
    proto = tmp_path / "tiny.prototxt"
    proto.write_text(PROTOTXT)
    net = cv2.dnn.readNetFromCaffe(str(proto), str(model))
    x = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    net.setInput(x)
    out = net.forward()
    h = (w1.reshape(2, 9) @ x.reshape(9).astype(np.float64)) + b1
    want = w2 @ h + b2
    np.testing.assert_allclose(out.reshape(-1), want, rtol=1e-4, atol=1e-4)
    # Our reader sees float32 blobs now.
    assert tensorfmt.load(model)["conv1/0"].dtype == np.float32


@pytest.mark.parametrize("name", ["v2_tiny.caffemodel", "v1_legacy.caffemodel", "tiny.solverstate"])
def test_load_edit_save_like_keeps_the_structure(tmp_path, name):
    from conftest import TESTDATA

    orig = TESTDATA / "caffe" / name
    arrays = {k: (v * 2 if v.dtype == np.float32 else v) for k, v in tensorfmt.load(orig).items()}
    out = tmp_path / name
    tensorfmt.save(out, arrays, like=orig)
    with tensorfmt.open(orig) as a, tensorfmt.open(out) as b:
        assert b.kind == a.kind and b.header == a.header
        for k, v in arrays.items():
            np.testing.assert_array_equal(b[k], v)
    # The CLI-less convert takes like= too: a safetensors of edited arrays back into it.
    st = tmp_path / "edited.safetensors"
    tensorfmt.save(st, arrays)
    back = tmp_path / ("back_" + name)
    tensorfmt.convert(st, back, like=orig)
    assert tensorfmt.open(back).header == tensorfmt.open(orig).header
    # Arrays that do not fit: refused, nothing written.
    bad = dict(arrays)
    first = next(iter(bad))
    bad[first] = np.zeros(3, np.float32)
    with pytest.raises(tensorfmt.TensorfmtError, match="like="):
        tensorfmt.save(tmp_path / "bad.caffemodel", bad, like=orig)
    assert not (tmp_path / "bad.caffemodel").exists()


@pytest.mark.parametrize("name,lacks", [("v2_tiny.caffemodel", "no layer types"), ("tiny.solverstate", "iter 0")])
def test_a_file_from_tensors_alone_says_what_it_lacks(tmp_path, name, lacks):
    """load -> edit -> save without like= writes what Caffe reads, and says which part
    of the original it does not have (it used to drop the net name, layer types and a
    solver state's iter silently); with like= there is nothing to say."""
    import warnings

    from conftest import TESTDATA

    orig = TESTDATA / "caffe" / name
    arrays = tensorfmt.load(orig)
    with pytest.warns(tensorfmt.TensorfmtWarning, match=lacks) as w:
        tensorfmt.save(tmp_path / name, arrays)
    assert any("like=ORIGINAL" in str(x.message) for x in w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensorfmt.save(tmp_path / ("like_" + name), arrays, like=orig)
        # A mean file is whole: nothing is missing.
        tensorfmt.save(tmp_path / "m.binaryproto", tensorfmt.load(TESTDATA / "caffe" / "mean_legacy.binaryproto"))


def test_dtype_f64_is_double_data_that_opencv_refuses_and_the_warning_says_so(tmp_path):
    """Audit F1, F9: ``dtype="f64"`` keeps float64 in every Caffe kind, a mean file's
    too (it stored float32 ``data``: -1e300 became -inf), and the warning says what
    OpenCV does with it: refuse it."""
    mean = np.array([-1e300, 1 + 2.0**-40, 0.5])
    out = tmp_path / "m.binaryproto"
    with pytest.warns(tensorfmt.TensorfmtWarning, match="blobproto_to_array"):
        tensorfmt.save(out, {"mean": mean}, dtype="f64")
    back = tensorfmt.load(out)["mean"]
    assert back.dtype == np.float64
    np.testing.assert_array_equal(back.reshape(-1), mean)
    rng = np.random.default_rng(0)
    model = tmp_path / "tiny.caffemodel"
    blobs = {
        "conv1/0": rng.standard_normal((2, 1, 3, 3)),
        "conv1/1": rng.standard_normal(2),
        "ip/0": rng.standard_normal((1, 2)),
        "ip/1": rng.standard_normal(1),
    }
    with pytest.warns(tensorfmt.TensorfmtWarning, match="OpenCV 4's readNetFromCaffe refuses"):
        tensorfmt.save(model, blobs, dtype="f64")
    proto = tmp_path / "tiny.prototxt"
    proto.write_text(PROTOTXT)
    with pytest.raises(cv2.error, match="has_raw_data"):
        cv2.dnn.readNetFromCaffe(str(proto), str(model))
