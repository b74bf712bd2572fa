"""Faults from outside, through Python: a mapped input truncated by another process while
tensorfmt reads it raises InputChangedError (an OSError), never kills the interpreter."""

import os

import numpy as np
import pytest

import tensorfmt


def _big(tmp_path):
    p = tmp_path / "big.safetensors"
    tensorfmt.save(p, {"w": np.arange(1 << 20, dtype=np.float32), "b": np.ones(1 << 18, np.float32)})
    return p


def test_convert_of_an_input_that_shrank_raises_and_writes_nothing(tmp_path):
    src = _big(tmp_path)
    dst = tmp_path / "out.npz"
    dst.write_bytes(b"previous")
    with tensorfmt.open(src) as doc:
        os.truncate(src, 4096)  # another process would do this
        with pytest.raises(tensorfmt.InputChangedError) as e:
            doc.convert(dst, overwrite=True)
    assert isinstance(e.value, OSError) and "big.safetensors" in str(e.value)
    assert dst.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["big.safetensors", "out.npz"]


def test_a_view_of_a_vanished_region_reads_zeros_instead_of_crashing(tmp_path):
    src = _big(tmp_path)
    doc = tensorfmt.open(src)
    w = doc["w"]  # a zero-copy view of the mapping
    assert w[-1] == (1 << 20) - 1
    os.truncate(src, 4096)
    # The pages past the new end of file are gone: numpy sees zeros, the process lives.
    assert w[-1] == 0
    with pytest.raises(tensorfmt.InputChangedError):
        doc.stats("w")
    doc.close()


def test_a_failed_input_stays_failed(tmp_path):
    """Issue 23 item 8: after InputChangedError every later call on the document raises
    (the vanished pages are zero pages now and would not fault again), and convert never
    commits output."""
    src = _big(tmp_path)
    dst = tmp_path / "out.npz"
    with tensorfmt.open(src) as doc:
        os.truncate(src, 4096)
        with pytest.raises(tensorfmt.InputChangedError):
            doc.stats("w")
        with pytest.raises(tensorfmt.InputChangedError):
            doc.stats("w")
        with pytest.raises(tensorfmt.InputChangedError):
            doc.stats("b")
        with pytest.raises(tensorfmt.InputChangedError):
            doc["b"]
        with pytest.raises(tensorfmt.InputChangedError):
            doc.convert(dst)
        with pytest.raises(tensorfmt.InputChangedError):
            doc.convert(tmp_path / "same.safetensors")
    assert sorted(os.listdir(tmp_path)) == ["big.safetensors"]
