"""The package follows the conventions numpy, safetensors and pvtools users already
have (issue 25): overwriting saves, identifier kinds, named keywords, Python slices for
frames, Python-speaking errors, leniency as warnings, torch and bf16 interop."""

import inspect
import warnings

import numpy as np
import pytest

import tensorfmt
import tensorfmt.caffe
import tensorfmt.pvp
from conftest import TESTDATA, require_module

DENSE = TESTDATA / "pvp" / "dense_f32.pvp"  # 3 frames, times 0.5, 1.5, 2.5; [2, 3, 2]


# --- item 2: conventions -------------------------------------------------------------


def test_save_and_convert_overwrite_by_default(tmp_path):
    p = tmp_path / "a.safetensors"
    tensorfmt.save(p, {"a": np.zeros(3, np.float32)})
    tensorfmt.save(p, {"a": np.ones(3, np.float32)})
    assert tensorfmt.load(p)["a"].tolist() == [1, 1, 1]
    assert tensorfmt.convert(DENSE, p) == ["time", "values"]
    with pytest.raises(tensorfmt.TensorfmtFileExistsError):
        tensorfmt.convert(DENSE, p, overwrite=False)
    with tensorfmt.open(DENSE) as doc, pytest.raises(FileExistsError):
        doc.convert(p, overwrite=False)


KINDS = {
    "pvp/dense_f32.pvp": "dense",
    "pvp/sparse_values_dt4.pvp": "sparse",
    "pvp/sparse_binary.pvp": "sparse",
    "pvp/kernel_f32.pvp": "weights",
    "pvp/nonshared_byte.pvp": "weights",
    "som/data_f32_2x3.bin": "som-data",
    "som/som_hex3.bin": "som",
    "som/map_cart_2x3.bin": "som-mapping",
    "som/rotflip_hex3_pink.bin": "som-rotflip",
    "caffe/v2_tiny.caffemodel": "caffemodel",
    "caffe/v1_legacy.caffemodel": "caffemodel",
    "caffe/mean_legacy.binaryproto": "binaryproto",
    "caffe/two.blobprotovector": "blobprotovector",
    "caffe/tiny.solverstate": "solverstate",
    "primitiv/model_nested_adam.data": "model",
    "primitiv/parameter_2x3_stats.data": "parameter",
    "primitiv/tensor_3x2_batch2.data": "tensor",
    "primitiv/shape_4x3_batch2.data": "shape",
    "primitiv/optimizer_adam.data": "optimizer",
    "core/f32_2x3.npy": "npy",
    "core/mixed.npz": "npz",
    "core/model.safetensors": "safetensors",
}


@pytest.mark.parametrize("rel,kind", sorted(KINDS.items()))
def test_kind_is_the_identifier_to_takes(rel, kind, tmp_path):
    with tensorfmt.open(TESTDATA / rel) as doc:
        assert doc.kind == kind
        assert isinstance(doc.description, str) and doc.description
        writable = {k for f in tensorfmt.formats() for k in f["write_kinds"]}
        if kind in writable and len(doc):
            # The identifier round-trips through to=: the same kind of file comes back.
            out = tmp_path / "same"
            doc.convert(out, to=f"{doc.format}:{doc.kind}")
            assert tensorfmt.open(out, format=doc.format).kind == kind


@pytest.mark.parametrize("fn", [tensorfmt.open, tensorfmt.load, tensorfmt.save, tensorfmt.convert])
def test_every_option_is_a_named_keyword(fn):
    params = inspect.signature(fn).parameters.values()
    assert not [p for p in params if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], fn


def test_a_misspelt_keyword_is_a_type_error(tmp_path):
    with pytest.raises(TypeError):
        tensorfmt.load(DENSE, framwork="pt")
    with pytest.raises(TypeError):
        tensorfmt.open(DENSE, frame=1)
    with pytest.raises(TypeError):
        tensorfmt.save(tmp_path / "a.npz", {"a": np.ones(1)}, overwrites=True)
    with pytest.raises(TypeError):
        tensorfmt.convert(DENSE, tmp_path / "a.npz", fram=1)
    with tensorfmt.open(DENSE) as doc, pytest.raises(TypeError):
        doc.convert(tmp_path / "a.npz", too="npz")
    with pytest.raises(tensorfmt.InvalidArgumentError, match="framework"):
        tensorfmt.load(DENSE, framework="tensorflow")


# --- item 3: errors and frames speak Python ------------------------------------------


def test_an_unknown_format_names_the_keyword(tmp_path):
    p = tmp_path / "hello.txt"
    p.write_text("hello\n")
    with pytest.raises(tensorfmt.InvalidArgumentError) as e:
        tensorfmt.open(p)
    assert "format=" in str(e.value) and "--from" not in str(e.value)
    with pytest.raises(tensorfmt.InvalidArgumentError, match="format="):
        tensorfmt.detect(p)


@pytest.mark.parametrize(
    "frames,times",
    [
        (None, [0.5, 1.5, 2.5]),
        (1, [1.5]),
        (-1, [2.5]),
        (slice(-2, None), [1.5, 2.5]),
        (slice(None, None, 2), [0.5, 2.5]),
        (slice(1, 45), [1.5, 2.5]),  # past the end: up to the last frame, as pvtools' lastFrame
        ((1, 45), [1.5, 2.5]),
        (slice(38, 45), []),
        (slice(-50, 1), [0.5]),
    ],
)
def test_frames_take_python_slices(frames, times):
    with tensorfmt.open(DENSE, frames=frames) as doc:
        assert doc["time"].tolist() == times
        values = doc["values"]
        assert values.shape == (len(times), 2, 3, 2) == doc.info("values").shape
        full = tensorfmt.load(DENSE)["values"]
        want = full if frames is None else full[frames if not isinstance(frames, tuple) else slice(*frames)]
        if isinstance(frames, int):
            want = full[frames : frames + 1 or None]
        np.testing.assert_array_equal(values, want)


def test_bad_frames_are_python_errors():
    with pytest.raises(IndexError, match="3 frames"):
        tensorfmt.open(DENSE, frames=3)
    with pytest.raises(IndexError):
        tensorfmt.open(DENSE, frames=-4)
    with pytest.raises(TypeError):
        tensorfmt.open(DENSE, frames="1:2")
    with pytest.raises(tensorfmt.InvalidArgumentError, match="step"):
        tensorfmt.open(DENSE, frames=slice(None, None, -1))
    with pytest.raises(tensorfmt.InvalidArgumentError, match="frames="):
        tensorfmt.open(TESTDATA / "core" / "mixed.npz", frames=0)
    with pytest.raises(tensorfmt.InvalidArgumentError, match="sparse=False"):
        tensorfmt.open(TESTDATA / "pvp" / "sparse_values_dt4.pvp", frames=slice(None, None, 2), sparse=True)


@pytest.mark.parametrize("rel", ["pvp/sparse_values_dt4.pvp", "pvp/kernel_f32.pvp", "som/data_f32_2x3.bin"])
def test_frame_steps_select_the_same_frames_as_numpy(rel):
    whole = tensorfmt.load(TESTDATA / rel)
    stepped = tensorfmt.load(TESTDATA / rel, frames=slice(None, None, 2))
    for name, arr in whole.items():
        np.testing.assert_array_equal(stepped[name], arr[::2], err_msg=name)


def test_pvp_files_take_slices():
    f = tensorfmt.pvp.open(DENSE)
    assert [fr.time for fr in f[1:8]] == [1.5, 2.5]
    assert [fr.index for fr in f[::-1]] == [2, 1, 0]
    assert f[-1].time == 2.5
    assert f.movie(-2).shape == (2, 2, 3, 2)
    assert f.movie(1, 99).shape == (2, 2, 3, 2)
    with pytest.raises(IndexError):
        f[3]
    with pytest.raises(TypeError):
        f["1"]
    s = tensorfmt.pvp.open(TESTDATA / "pvp" / "sparse_values_dt4.pvp")
    assert s.to_scipy(-1).shape == (1, 12)


def test_pvp_classes_follow_the_kind():
    assert type(tensorfmt.pvp.open(DENSE)) is tensorfmt.pvp.DenseFile
    assert type(tensorfmt.pvp.open(TESTDATA / "pvp" / "sparse_binary.pvp")) is tensorfmt.pvp.SparseFile
    w = tensorfmt.pvp.open(TESTDATA / "pvp" / "kernel_f32.pvp", kind="weights")
    assert isinstance(w, tensorfmt.pvp.WeightsFile) and isinstance(w[0], tensorfmt.pvp.WeightFrame)
    with pytest.raises(tensorfmt.InvalidArgumentError, match="dense"):
        tensorfmt.pvp.open(DENSE, kind="weights")


def test_a_crash_truncated_pvp_warns(tmp_path):
    cut = tmp_path / "crashed.pvp"
    cut.write_bytes(DENSE.read_bytes()[:-20])  # two whole frames and part of the third
    with pytest.warns(tensorfmt.TensorfmtWarning, match="crashed.pvp"):
        doc = tensorfmt.open(cut)
    assert doc["values"].shape[0] == 2 and doc.warnings
    with pytest.warns(tensorfmt.TensorfmtWarning):
        assert len(tensorfmt.pvp.open(cut)) == 2
    with pytest.warns(tensorfmt.TensorfmtWarning):
        tensorfmt.load(cut)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensorfmt.open(DENSE).close()  # a whole file says nothing
    with pytest.raises(tensorfmt.FormatError):
        tensorfmt.open(cut, strict=True)


def test_a_truncated_caffemodel_says_truncated(tmp_path):
    data = (TESTDATA / "caffe" / "v1_legacy.caffemodel").read_bytes()
    cut = tmp_path / "net.caffemodel"
    cut.write_bytes(data[: len(data) - 7])
    for opener in (tensorfmt.open, tensorfmt.caffe.open):
        with pytest.raises(tensorfmt.FormatError) as e:
            opener(cut)
        msg = str(e.value)
        assert "not a Caffe file" not in msg and "trunc" in msg.lower(), msg
    # Without an extension that names the kind, nothing claims more than it knows.
    anon = tmp_path / "net.bin"
    anon.write_bytes(data[: len(data) - 7])
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.open(anon, format="caffe")


# --- item 4: peers' everyday features ------------------------------------------------


def test_get_slice_and_metadata():
    with tensorfmt.open(TESTDATA / "core" / "model.safetensors") as doc:
        full = doc["embed.weight"]
        part = doc.get_slice("embed.weight")
        assert part.get_shape() == list(full.shape) and part.get_dtype() == doc.info("embed.weight").stored_dtype
        np.testing.assert_array_equal(part[:1], full[:1])
        np.testing.assert_array_equal(part[..., -1], full[..., -1])
        assert part[:1].flags.writeable  # the elements asked for, copied out
        safetensors = require_module("safetensors")
        with safetensors.safe_open(str(TESTDATA / "core" / "model.safetensors"), "np") as ref:
            assert doc.metadata() == ref.metadata()
    with tensorfmt.open(DENSE) as doc:
        assert doc.metadata()["nbands"] == "3"


def _rss_kib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def test_get_slice_reads_only_what_it_is_asked_for(tmp_path, monkeypatch):
    """A slice of a 4 GiB tensor the file stores verbatim touches only its elements'
    pages; a tensor that must be decoded is decoded once however often it is sliced."""
    rows = 1 << 20
    big = tmp_path / "big.npy"
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 1024), }" % rows
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    with open(big, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.truncate(f.tell() + rows * 1024 * 4)  # holes: no disk used
    before = _rss_kib()
    with tensorfmt.open(big) as doc:
        s = doc.get_slice(doc.tensors[0].name)
        part = s[rows // 2 : rows // 2 + 3, :5]
        assert part.shape == (3, 5) and not part.any()
        grown = _rss_kib() - before
    assert grown < 64 * 1024, f"slicing 60 bytes of a 4 GiB tensor grew RSS by {grown} KiB"
    z = tmp_path / "z.npz"
    tensorfmt.save(z, {"w": np.arange(12.0).reshape(3, 4)}, settings={"compress": "deflate"})
    with tensorfmt.open(z) as doc:
        calls = []
        real = type(doc)._array
        monkeypatch.setattr(type(doc), "_array", lambda self, n: calls.append(n) or real(self, n))
        s = doc.get_slice("w")
        assert s[1, 2] == 6.0 and s[2, 3] == 11.0 and s[:, 0].tolist() == [0.0, 4.0, 8.0]
        assert calls == ["w"]


def test_bf16_stays_bf16_with_ml_dtypes(tmp_path):
    ml_dtypes = require_module("ml_dtypes")
    with tensorfmt.open(TESTDATA / "core" / "bf16_4.npy") as doc:
        (name,) = list(doc)
        a = doc[name]
        assert a.dtype == ml_dtypes.bfloat16 == doc.info(name).dtype
    out = tmp_path / "b.safetensors"
    tensorfmt.save(out, {"b": a})
    with tensorfmt.open(out) as doc:
        assert doc.info("b").stored_dtype == "bf16"  # not widened to f32 on the way
        np.testing.assert_array_equal(doc["b"].astype(np.float32), a.astype(np.float32))


def test_framework_pt_gives_writable_torch_tensors():
    torch = require_module("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no read-only warning
        with tensorfmt.open(TESTDATA / "core" / "model.safetensors", framework="pt") as doc:
            t = doc["embed.weight"]
            assert isinstance(t, torch.Tensor)
            t.add_(1)  # a tensor of its own: the document's arrays do not change
            assert not np.array_equal(t.numpy(), tensorfmt.load(TESTDATA / "core" / "model.safetensors")["embed.weight"])
            assert isinstance(doc.get_slice("embed.weight")[:1], torch.Tensor)
        b = tensorfmt.load(TESTDATA / "core" / "bf16_4.npy", framework="pt")
        assert next(iter(b.values())).dtype == torch.bfloat16


def test_caffe_weights_have_the_shapes_of_load():
    path = TESTDATA / "caffe" / "v1_legacy.caffemodel"
    flat = tensorfmt.load(path)
    weights = tensorfmt.caffe.open(path).weights()
    assert weights
    for name, blobs in weights.items():
        for i, w in enumerate(blobs):
            assert w.shape == flat[f"{name}/{i}"].shape, (name, i)


def test_a_progress_callbacks_own_exception_reaches_the_caller(tmp_path):
    """What the caller's progress= callback raises is the caller's: ``except MyError``
    catches it (it came back as an InvalidArgumentError, the original only its cause),
    as a spaces validate callback's does; nothing is left behind."""

    class MyError(ValueError):
        pass

    def hook(done, total):
        raise MyError("stop here")

    class Bar:
        total = None

        def update(self, n):
            raise MyError("bar")

    for progress in (hook, Bar()):
        with pytest.raises(MyError):
            tensorfmt.convert(TESTDATA / "pvp" / "dense_f32.pvp", tmp_path / "out.npz", progress=progress)
        assert not list(tmp_path.iterdir())
