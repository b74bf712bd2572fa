"""Hostile inputs through Python: truncations and header-field allocation bombs of every
fixture (and the small corpus files) raise TensorfmtError or read fine — never a crash,
never a MemoryError, never another exception type, always in bounded time.

The cases are generated here from the files themselves, in the spirit of the Rust
truncation tests (every file cut at its structure boundaries and a sample of other
lengths) and hostile tests (declared sizes far beyond the bytes present)."""

import os
import struct
import time

import numpy as np
import pytest

import tensorfmt
from conftest import corpus_dir, fixtures, require_module

# A read that takes longer than this on a file of a few KiB is itself a failure.
SECONDS_PER_CASE = 2.0


def small_corpus_files():
    d = corpus_dir()
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.rglob("*")):
        # Net definitions and schemas (caffe/nets/) are text, not tensor files: the
        # prototxt reader has its own hostile tests (crates/tensorfmt-caffe/tests/).
        if p.suffix in (".prototxt", ".proto", ".snippet"):
            continue
        if p.is_file() and p.suffix not in (".md", ".json") and p.stat().st_size <= 64 * 1024:
            out.append(p)
    return out


FILES = fixtures() + small_corpus_files()


def exercise(path, fmt):
    """Opens, reads every tensor, streams stats and validates; returns the outcome."""
    start = time.monotonic()
    try:
        # Untrusted input: cap decoded tensors at 64 MiB (a 2 KiB sparse file whose
        # header declares 65537 features would otherwise densify to 6.7 GB, within the
        # 16 GiB default).
        with tensorfmt.open(path, format=fmt, max_alloc=64 << 20) as doc:
            for name in doc:
                arr = doc[name]
                assert arr.shape == doc.info(name).shape
                doc.stats(name)
            doc.validate()
        outcome = "ok"
    except tensorfmt.TensorfmtError as e:
        assert str(e), "an error must say what is wrong"
        outcome = type(e).__name__
    elapsed = time.monotonic() - start
    assert elapsed < SECONDS_PER_CASE, f"{path}: {elapsed:.1f} s"
    return outcome


def cut_lengths(n):
    lengths = set(range(0, min(n, 136)))
    lengths.update(n * k // 24 for k in range(24))
    lengths.update({n - 1, n - 2, n - 4, n - 8})
    return sorted(x for x in lengths if 0 <= x < n)


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, p.parents[1]))
def test_truncations(path, tmp_path):
    data = path.read_bytes()
    fmt = tensorfmt.detect(path)
    cut = tmp_path / ("cut" + path.suffix)
    outcomes = set()
    for n in cut_lengths(len(data)):
        cut.write_bytes(data[:n])
        outcomes.add(exercise(cut, fmt))
    # A file cut short cannot always be valid: something must have been refused.
    assert outcomes - {"ok"}, f"{path}: every truncation was accepted"


BOMBS32 = [0x7FFFFFFF, 0xFFFFFFFF, 0x40000000, 0x00010001]
BOMBS64 = [0x7FFFFFFFFFFFFFFF, 0x0000100000000001]


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, p.parents[1]))
def test_header_field_bombs(path, tmp_path):
    data = bytearray(path.read_bytes())
    fmt = tensorfmt.detect(path)
    bomb = tmp_path / ("bomb" + path.suffix)
    head = min(len(data), 128)
    for off in range(0, head - 3, 4):
        for value in BOMBS32:
            patched = bytearray(data)
            patched[off : off + 4] = struct.pack("<I", value)
            bomb.write_bytes(bytes(patched))
            exercise(bomb, fmt)
    for off in range(0, head - 7, 8):
        for value in BOMBS64:
            patched = bytearray(data)
            patched[off : off + 8] = struct.pack("<Q", value)
            bomb.write_bytes(bytes(patched))
            exercise(bomb, fmt)


def test_declared_sizes_are_checked_before_allocating(tmp_path):
    # An npy header declaring 2^40 float64 values over 16 bytes of data.
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"
    header = header + " " * (63 - (10 + len(header)) % 64) + "\n"
    p = tmp_path / "bomb.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 16)
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.load(p)
    # A safetensors header claiming 2^62 bytes.
    q = tmp_path / "bomb.safetensors"
    q.write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.load(q)
    # A PVP dense header whose frame is 2^31 values, over one 8-byte timestamp: the
    # frame cannot be there, so the file has no whole frame.
    ints = [80, 20, 4, 65536, 32768, 1, 1, 0, 4, 3, 1, 1, 65536, 32768, 0, 0, 0, 1]
    r = tmp_path / "bomb.pvp"
    r.write_bytes(struct.pack("<18i", *ints) + struct.pack("<d", 0.0) + struct.pack("<d", 1.0))
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.load(r, strict=True)


def test_a_saved_array_of_a_hostile_shape_is_refused(tmp_path):
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.save(tmp_path / "x.pvp", {"values": np.zeros((2, 0, 3, 1, 5), np.float32)})


# ---- Caffe -> ONNX: hostile nets (issue 34) ----------------------------------------
#
# Every net either fails with a TensorfmtError that says what is wrong and leaves no
# file, or converts to a model onnx.checker accepts (full_check) and onnxruntime runs,
# its outputs of the shapes the model declares (at two batches where the batch is N).

H4 = "input: 'data' input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n"
POOLED = H4 + (
    "layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' top: 'm' "
    "pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
)


def layer(text):
    return H4 + text + "\n"


def lrn_ref(x, n, alpha, beta, k, within=False):
    """Caffe's LRN (lrn_layer.cpp) in numpy: across channels x * (k + alpha/n *
    sum_n(x^2))^-beta; within a channel x * (1 + alpha * avg_{n x n}(x^2))^-beta, the
    windows zero-padded by (n - 1) / 2."""
    x = x.astype(np.float64)
    pad = (n - 1) // 2
    sq = x * x
    if within:
        p = np.pad(sq, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        h, w = x.shape[2:]
        s = np.zeros_like(x)
        for i in range(h):
            for j in range(w):
                s[:, :, i, j] = p[:, :, i : i + n, j : j + n].sum(axis=(2, 3))
        return x * (1 + alpha * s / (n * n)) ** -beta
    p = np.pad(sq, ((0, 0), (pad, pad), (0, 0), (0, 0)))
    c = x.shape[1]
    s = np.stack([p[:, i : i + n].sum(axis=1) for i in range(c)], axis=1)
    return x * (k + alpha / n * s) ** -beta


HOSTILE_NETS = [
    # (id, prototxt, to_onnx options, expected: None for a model, else a message part)
    ("dynamic concat on axis 0", layer("layer { name: 'c' type: 'Concat' bottom: 'data' bottom: 'data' top: 'y' concat_param { axis: 0 } }"), {"dynamic_batch": True}, "dynamic_batch=True"),
    ("fixed concat on axis 0", layer("layer { name: 'c' type: 'Concat' bottom: 'data' bottom: 'data' top: 'y' concat_param { axis: 0 } }"), {}, None),
    ("dynamic flatten from axis 0", layer("layer { name: 'f' type: 'Flatten' bottom: 'data' top: 'y' flatten_param { axis: 0 } }"), {"dynamic_batch": True}, "dynamic_batch=True"),
    ("dynamic permute of the batch", layer("layer { name: 'p' type: 'Permute' bottom: 'data' top: 'y' permute_param { order: 1 order: 0 order: 2 order: 3 } }"), {"dynamic_batch": True}, None),
    ("empty top name", layer("layer { name: 'r' type: 'ReLU' bottom: 'data' top: '' }"), {}, "empty"),
    ("LRN beta -1", layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { beta: -1 local_size: 3 } }"), {}, None),
    ("LRN alpha 0", layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { alpha: 0 } }"), {}, None),
    ("LRN beta NaN", layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { beta: nan } }"), {}, "beta"),
    ("LRN local_size 2^32-1", layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { local_size: 4294967295 } }"), {}, "local_size"),
    ("LRN local_size 2^31-1", layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { local_size: 2147483647 alpha: 1 } }"), {}, None),
    ("LRN within 2^31-1", layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { local_size: 2147483647 alpha: 1 norm_region: WITHIN_CHANNEL } }"), {}, None),
    ("Upsample to 1x1", POOLED + "layer { name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param { upsample_h: 1 upsample_w: 1 } }\n", {}, "upsample_h"),
    ("Upsample past the pooled input", POOLED + "layer { name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param { upsample_h: 6 upsample_w: 4 } }\n", {}, "4x4"),
    ("Upsample back", POOLED + "layer { name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param { scale: 2 } }\n", {}, None),
    ("PriorBox min_size NaN", layer("layer { name: 'b' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'b' prior_box_param { min_size: nan } }"), {}, "min_size"),
    ("PriorBox step 0", layer("layer { name: 'b' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'b' prior_box_param { min_size: 2 step: 0 } }"), {}, "step"),
    ("PriorBox", layer("layer { name: 'b' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'b' prior_box_param { min_size: 2 max_size: 3 aspect_ratio: 2 flip: true clip: true } }"), {}, None),
    ("eight PriorBox over 1440x1440", "input: 'data' input_shape { dim: 1 dim: 1 dim: 1440 dim: 1440 }\n" + "".join(f"layer {{ name: 'p{i}' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'p{i}' prior_box_param {{ min_size: 30 max_size: 60 aspect_ratio: 2 flip: true }} }}\n" for i in range(8)), {}, "Limits::max_computed"),
    ("Concat axis and concat_dim", layer("layer { name: 'c' type: 'Concat' bottom: 'data' bottom: 'data' top: 'y' concat_param { axis: 1 concat_dim: 0 } }"), {}, "concat_dim"),
    ("Slice axis and slice_dim", layer("layer { name: 's' type: 'Slice' bottom: 'data' top: 'a' top: 'b' slice_param { axis: 0 slice_dim: 1 } }"), {}, "slice_dim"),
    ("ReLU in place on the input", layer("layer { name: 'r' type: 'ReLU' bottom: 'data' top: 'data' }"), {}, None),
    ("input without dims", "input: 'data'\nlayer { name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }\n", {"input_shape": {"data": [1, 3, 4, 4]}}, None),
    ("byte order mark", "\ufeff" + layer("layer { name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }"), {}, None),
    ("Split of 2000 tops", layer("layer { name: 's' type: 'Split' bottom: 'data' " + " ".join(f"top: 't{i}'" for i in range(2000)) + " }"), {}, None),
    ("1500 in-place layers named r", layer("layer { name: 'a' type: 'ReLU' bottom: 'data' top: 'x' }\n" + "layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'x' }\n" * 1500), {}, None),
    ("more layers than max_layers", layer("".join(f"layer {{ name: 'r{i}' type: 'ReLU' bottom: 'data' top: 'y{i}' }}\n" for i in range(20001))), {}, "layer count"),
]


def check_model(out, info, seed=0):
    """onnx.checker (full_check) accepts the model, onnxruntime creates a session and
    runs it on random inputs, and every output has its declared shape (the batch `N`
    tried at 1 and 2). Returns the outputs of the first run and the inputs fed."""
    onnx = require_module("onnx")
    ort = require_module("onnxruntime")
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    g = model.graph
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    batches = [1, 2] if any("N" in dims(v) for v in g.input) else [None]
    first = None
    rng = np.random.default_rng(seed)
    for b in batches:
        feeds = {
            v.name: rng.standard_normal([b if d == "N" else d for d in dims(v)]).astype(np.float32)
            for v in g.input
        }
        outs = sess.run(None, feeds)
        for v, y in zip(g.output, outs):
            want = dims(v)
            assert len(want) == y.ndim, (v.name, want, y.shape)
            for d, got in zip(want, y.shape):
                if d == "N":
                    assert got == b, (v.name, want, y.shape)
                elif isinstance(d, int):
                    assert got == d, (v.name, want, y.shape)
        assert [v.name for v in g.output] == list(info["outputs"])
        first = first or (outs, feeds)
    return first


@pytest.mark.parametrize("name,text,opts,expected", HOSTILE_NETS, ids=[c[0] for c in HOSTILE_NETS])
def test_hostile_nets_fail_clearly_or_convert_to_a_model_onnxruntime_runs(tmp_path, name, text, opts, expected):
    opts = dict(opts)
    prototxt = tmp_path / "net.prototxt"
    prototxt.write_text(text, encoding="utf-8")
    weights = tmp_path / "w.caffemodel"
    weights.write_bytes(b"\x0a\x01x")  # a NetParameter named "x", no layers
    out = tmp_path / "out.onnx"
    start = time.monotonic()
    try:
        info = tensorfmt.caffe.to_onnx(weights, prototxt, out, **opts)
    except tensorfmt.TensorfmtError as e:
        assert expected is not None, f"{name}: {e}"
        assert expected in str(e), f"{name}: {e}"
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "a temporary was left"
        return
    finally:
        assert time.monotonic() - start < 30, f"{name}: {time.monotonic() - start:.1f} s"
    assert expected is None, f"{name}: converted, expected an error saying {expected!r}"
    outs, feeds = check_model(out, info)
    if name == "LRN beta -1":
        np.testing.assert_allclose(outs[0], lrn_ref(feeds["data"], 3, 1.0, -1.0, 1.0), rtol=1e-4)
    if name == "LRN local_size 2^31-1":
        # The window covers every channel: alpha / n of Caffe's n.
        np.testing.assert_allclose(outs[0], lrn_ref(feeds["data"], 5, 5.0 / 2147483647, 0.75, 1.0), rtol=1e-5)
    if name == "ReLU in place on the input":
        assert info["outputs"] == ["data/r"]
        np.testing.assert_allclose(outs[0], np.maximum(feeds["data"], 0))


def test_lrn_default_alpha_beta_zero(tmp_path):
    """LRN with alpha 0 (legal in Caffe, refused by onnxruntime's LRN) is x * k^-beta."""
    prototxt = tmp_path / "net.prototxt"
    prototxt.write_text(layer("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'y' lrn_param { alpha: 0 k: 2 } }"))
    weights = tmp_path / "w.caffemodel"
    weights.write_bytes(b"\x0a\x01x")
    out = tmp_path / "out.onnx"
    info = tensorfmt.caffe.to_onnx(weights, prototxt, out)
    outs, feeds = check_model(out, info)
    np.testing.assert_allclose(outs[0], feeds["data"] * 2.0**-0.75, rtol=1e-6)


# Layer types, their parameter message and fields (legal and illegal values), for
# random nets (the Rust twin: crates/tensorfmt-lower/tests/hostile.rs).
RANDOM_LAYERS = [
    ("Convolution", "convolution_param", ["num_output: 2", "num_output: 4", "kernel_size: 1", "kernel_size: 3", "stride: 2", "pad: 1", "dilation: 2", "group: 2", "bias_term: false"]),
    ("Deconvolution", "convolution_param", ["num_output: 2", "kernel_size: 2", "kernel_size: 3", "stride: 2", "pad: 1", "group: 2"]),
    ("Pooling", "pooling_param", ["pool: MAX", "pool: AVE", "kernel_size: 2", "kernel_size: 3", "stride: 2", "pad: 1", "global_pooling: true", "round_mode: FLOOR"]),
    ("InnerProduct", "inner_product_param", ["num_output: 3", "axis: 1", "axis: 2", "transpose: true", "bias_term: false"]),
    ("Concat", "concat_param", ["axis: 0", "axis: 1", "axis: -1", "concat_dim: 1"]),
    ("Slice", "slice_param", ["axis: 1", "axis: 0", "slice_point: 1", "slice_point: 2"]),
    ("Flatten", "flatten_param", ["axis: 0", "axis: 1", "end_axis: 2", "end_axis: -2"]),
    ("Reshape", "reshape_param", ["shape { dim: 0 dim: -1 }", "shape { dim: -1 }", "axis: 1", "num_axes: 1"]),
    ("Softmax", "softmax_param", ["axis: 0", "axis: -1", "axis: 2"]),
    ("LRN", "lrn_param", ["local_size: 3", "local_size: 1", "alpha: 0", "beta: -1", "k: 2", "norm_region: WITHIN_CHANNEL", "local_size: 9"]),
    ("Scale", "scale_param", ["axis: 0", "num_axes: 0", "bias_term: true", "axis: 2"]),
    ("Eltwise", "eltwise_param", ["operation: PROD", "operation: MAX", "coeff: 2 coeff: -1"]),
    ("ArgMax", "argmax_param", ["axis: 1", "out_max_val: true", "axis: -1"]),
    ("Permute", "permute_param", ["order: 0", "order: 2", "order: 1", "order: 3"]),
    ("Power", "power_param", ["power: 2", "scale: 0.5", "shift: 1"]),
    ("BatchNorm", "batch_norm_param", ["eps: 0.001"]),
    ("Exp", "exp_param", ["base: 2", "scale: 0.5", "shift: 1"]),
    ("ELU", "elu_param", ["alpha: 0.5"]),
    ("ReLU", "relu_param", ["negative_slope: 0.1"]),
    ("PReLU", "prelu_param", ["channel_shared: true"]),
    ("Crop", "crop_param", ["axis: 1", "axis: 2", "offset: 1"]),
    ("PriorBox", "prior_box_param", ["min_size: 2", "max_size: 4", "aspect_ratio: 2", "flip: true", "clip: true", "step: 2"]),
    ("Sigmoid", "", []),
    ("TanH", "", []),
    ("Split", "", []),
    ("MVN", "mvn_param", ["normalize_variance: false", "across_channels: true"]),
    ("Reorg", "reorg_param", ["stride: 2", "stride: 3"]),
    ("Region", "region_param", ["classes: 1", "coords: 4", "boxes_of_each_grid: 1", "softmax: true"]),
    ("LSTM", "recurrent_param", ["num_output: 2", "expose_hidden: true"]),
    ("RNN", "recurrent_param", ["num_output: 2"]),
]
RANDOM_INPUTS = ["dim: 1 dim: 4 dim: 6 dim: 6", "dim: 2 dim: 6 dim: 5 dim: 5", "dim: 1 dim: 4", "dim: 2 dim: 3 dim: 4"]


def random_net(rng):
    text = f"input: 'data' input_shape {{ {RANDOM_INPUTS[rng.integers(len(RANDOM_INPUTS))]} }}\n"
    last = "data"
    for li in range(1 + rng.integers(3)):
        kind, param, fields = RANDOM_LAYERS[rng.integers(len(RANDOM_LAYERS))]
        params = " ".join(fields[rng.integers(len(fields))] for _ in range(rng.integers(4))) if fields else ""
        extra = f"bottom: '{last}'" if kind in ("Concat", "Eltwise", "Crop", "PriorBox", "LSTM", "RNN") else ""
        tops = f"top: 'l{li}' top: 'l{li}b'" if kind in ("Slice", "Split") else f"top: 'l{li}'"
        body = f"{param} {{ {params} }}" if param else ""
        text += f"layer {{ name: 'l{li}' type: '{kind}' bottom: '{last}' {extra} {tops} {body} }}\n"
        last = f"l{li}"
    return text


@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed", "dynamic"])
def test_random_nets_fail_clearly_or_convert_to_a_model_onnxruntime_runs(tmp_path, dynamic):
    """Random nets of every family, with random weights: each conversion either fails
    with a TensorfmtError (never "a lowering bug") or gives a model onnx.checker accepts
    and onnxruntime runs, outputs of the declared shapes."""
    rng = np.random.default_rng(int(os.environ.get("HOSTILE_SEED", 34)) + dynamic)
    converted = 0
    for i in range(int(os.environ.get("HOSTILE_RUNS", 300))):
        text = random_net(rng)
        prototxt = tmp_path / f"n{i}.prototxt"
        prototxt.write_text(text)
        weights = tmp_path / f"n{i}.caffemodel"
        out = tmp_path / f"n{i}.onnx"
        try:
            tensorfmt.caffe.write_random_weights(prototxt, weights, seed=i)
        except tensorfmt.TensorfmtError:
            continue  # Caffe's shape rules refuse the net
        try:
            info = tensorfmt.caffe.to_onnx(weights, prototxt, out, dynamic_batch=dynamic)
        except tensorfmt.TensorfmtError as e:
            assert "lowering bug" not in str(e), f"{text}\n{e}"
            assert not out.exists()
            continue
        try:
            check_model(out, info, seed=i)
        except Exception as e:  # noqa: BLE001 - report the net
            raise AssertionError(f"{text}\n{e!r}") from e
        converted += 1
    assert converted >= 50, converted
