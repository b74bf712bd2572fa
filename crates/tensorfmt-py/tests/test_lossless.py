"""Round trips through the modern formats lose nothing (issue 16, item 1), from Python:
a legacy file converted to safetensors or npz and back is the same file, and a file
edited with numpy or the safetensors package in between keeps its header when the
shapes still fit."""

import warnings

import numpy as np
import pytest

import tensorfmt

from conftest import TESTDATA


def _clean(path):
    """Files the reader takes without a warning (refused and lenient ones are the
    Rust tests' business: tests/lossless.rs covers every file)."""
    try:
        with tensorfmt.open(path) as doc:
            return doc.warnings == [] and len(doc) > 0
    except tensorfmt.TensorfmtError:
        return False


LEGACY = sorted(
    p
    for sub in ("pvp", "som", "primitiv", "caffe")
    for p in (TESTDATA / sub).iterdir()
    if p.suffix != ".dump" and _clean(p)
)


@pytest.mark.parametrize("src", LEGACY, ids=lambda p: p.name)
@pytest.mark.parametrize("via", ["safetensors", "npz"])
def test_a_legacy_file_comes_back_byte_for_byte(tmp_path, src, via):
    mid = tmp_path / f"mid.{via}"
    tensorfmt.convert(src, mid)
    back = tmp_path / src.name
    with warnings.catch_warnings():
        warnings.simplefilter("error", tensorfmt.TensorfmtWarning)
        tensorfmt.convert(mid, back)
    assert back.read_bytes() == src.read_bytes()


def test_values_edited_in_numpy_keep_the_header(tmp_path):
    src = TESTDATA / "pvp" / "dense_f32.pvp"
    npz = tmp_path / "act.npz"
    tensorfmt.convert(src, npz)
    # What a numpy user does: load, edit, save. The metadata member comes along.
    arrays = dict(np.load(npz))
    assert set(arrays) == {"values", "time", "__tensorfmt__"}
    assert arrays["__tensorfmt__"].dtype.kind == "S"
    arrays["values"] = arrays["values"] * 3 + 1
    edited = tmp_path / "edited.npz"
    np.savez(edited, **arrays)
    # tensorfmt lists the tensors only.
    assert sorted(tensorfmt.load(edited)) == ["time", "values"]
    back = tmp_path / "back.pvp"
    with warnings.catch_warnings():
        warnings.simplefilter("error", tensorfmt.TensorfmtWarning)
        tensorfmt.convert(edited, back)
    orig, got = tensorfmt.open(src), tensorfmt.open(back)
    assert got.header == orig.header
    np.testing.assert_array_equal(got["time"], orig["time"])
    np.testing.assert_array_equal(got["values"], orig["values"] * 3 + 1)
    assert back.stat().st_size == src.stat().st_size


def test_safetensors_package_round_trip_keeps_the_file(tmp_path):
    safetensors = pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    src = TESTDATA / "primitiv" / "model_nested_adam.data"
    st = tmp_path / "model.safetensors"
    tensorfmt.convert(src, st)
    with safetensors.safe_open(str(st), framework="np") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert "tensorfmt.source" in meta
    resaved = tmp_path / "resaved.safetensors"
    save_file(tensors, str(resaved), metadata=meta)
    back = tmp_path / "back.data"
    tensorfmt.convert(resaved, back)
    assert back.read_bytes() == src.read_bytes()


def test_a_shape_that_no_longer_fits_is_a_clear_warning(tmp_path):
    src = TESTDATA / "pvp" / "dense_f32.pvp"
    npz = tmp_path / "act.npz"
    tensorfmt.convert(src, npz)
    arrays = dict(np.load(npz))
    arrays["values"] = arrays["values"][:1]
    arrays["time"] = arrays["time"][:1]
    np.savez(tmp_path / "cut.npz", **arrays)
    with pytest.warns(tensorfmt.TensorfmtWarning, match="were not kept.*tensors alone"):
        tensorfmt.convert(tmp_path / "cut.npz", tmp_path / "back.pvp")
    assert tensorfmt.open(tmp_path / "back.pvp")["values"].shape[0] == 1
