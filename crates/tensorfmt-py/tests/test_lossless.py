"""Round trips through the modern formats lose nothing (issue 16, item 1), from Python:
a legacy file converted to safetensors or npz and back is the same file, and a file
edited with numpy or the safetensors package in between keeps its header when the
shapes still fit."""

import warnings

import numpy as np
import pytest

import tensorfmt

from conftest import TESTDATA, require_module


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
    # What a numpy user does: load, edit, save. np.savez keeps arrays only, so the
    # metadata is handed on explicitly (tensorfmt shows it as a header field).
    meta = tensorfmt.open(npz).header["tensorfmt.source"]
    arrays = dict(np.load(npz))
    assert set(arrays) == {"values", "time"}
    arrays["values"] = arrays["values"] * 3 + 1
    edited = tmp_path / "edited.npz"
    tensorfmt.save(edited, arrays, settings={"tensorfmt.source": meta})
    assert sorted(np.load(edited).files) == ["time", "values"]
    back = tmp_path / "back.pvp"
    with warnings.catch_warnings():
        warnings.simplefilter("error", tensorfmt.TensorfmtWarning)
        tensorfmt.convert(edited, back)
    orig, got = tensorfmt.open(src), tensorfmt.open(back)
    assert got.header == orig.header
    np.testing.assert_array_equal(got["time"], orig["time"])
    np.testing.assert_array_equal(got["values"], orig["values"] * 3 + 1)
    assert back.stat().st_size == src.stat().st_size


@pytest.mark.parametrize(
    "name",
    [
        "pvp/dense_f32.pvp",
        "pvp/kernel_f32.pvp",
        "caffe/v2_tiny.caffemodel",
        "primitiv/parameter_2x3_stats.data",
    ],
)
def test_an_npz_we_write_looks_like_np_savez(tmp_path, name):
    """Issue 23 item 4: the metadata is not a member; numpy sees the tensors only, and
    the everyday loops over ``np.load(f).items()`` work."""
    src = TESTDATA / name
    npz = tmp_path / "x.npz"
    tensorfmt.convert(src, npz)
    with np.load(npz) as f:
        assert sorted(f.files) == sorted(tensorfmt.open(src).keys())
        with np.errstate(all="ignore"):  # optimizer stats may hold NaN
            sums = {k: v.sum() for k, v in f.items()}
        arrays = {k: v for k, v in f.items()}
    assert set(sums) == set(arrays)
    ref = tmp_path / "ref.npz"
    np.savez(ref, **arrays)
    with np.load(ref) as r, np.load(npz) as f:
        assert f.files == r.files
        for k in r.files:
            np.testing.assert_array_equal(f[k], r[k])
    import zipfile

    with zipfile.ZipFile(npz) as z:
        assert z.testzip() is None
        assert sorted(z.namelist()) == sorted(f"{k}.npy" for k in arrays)
    # And still the very file back.
    back = tmp_path / src.name
    tensorfmt.convert(npz, back)
    assert back.read_bytes() == src.read_bytes()


def test_older_npz_files_with_a_metadata_member_still_come_back(tmp_path):
    src = TESTDATA / "pvp" / "dense_f32.pvp"
    npz = tmp_path / "x.npz"
    tensorfmt.convert(src, npz)
    meta = tensorfmt.open(npz).header["tensorfmt.source"]
    arrays = dict(np.load(npz))
    old = tmp_path / "old.npz"
    # What tensorfmt wrote before: a 0-d bytes member named __tensorfmt__.
    np.savez(old, __tensorfmt__=np.bytes_(meta.encode()), **arrays)
    assert sorted(tensorfmt.load(old)) == ["time", "values"]
    back = tmp_path / "back.pvp"
    tensorfmt.convert(old, back)
    assert back.read_bytes() == src.read_bytes()


def test_safetensors_package_round_trip_keeps_the_file(tmp_path):
    safetensors = require_module("safetensors")
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
    meta = tensorfmt.open(npz).header["tensorfmt.source"]
    arrays = dict(np.load(npz))
    arrays["values"] = arrays["values"][:1]
    arrays["time"] = arrays["time"][:1]
    tensorfmt.save(tmp_path / "cut.npz", arrays, settings={"tensorfmt.source": meta})
    with pytest.warns(tensorfmt.TensorfmtWarning, match="were not kept.*tensors alone"):
        tensorfmt.convert(tmp_path / "cut.npz", tmp_path / "back.pvp")
    assert tensorfmt.open(tmp_path / "back.pvp")["values"].shape[0] == 1
