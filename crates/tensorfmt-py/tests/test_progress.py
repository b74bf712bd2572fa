"""``progress=`` on convert / Document.convert / save: a callable ``progress(done, total)``
or a tqdm-like bar, called between pieces from the native code; an exception raised in
it stops the write, leaves nothing behind and propagates as itself."""

import os

import numpy as np
import pytest

from conftest import TESTDATA

import tensorfmt

PVP = TESTDATA / "pvp" / "dense_f32.pvp"


def _listed_bytes(path, names=None):
    with tensorfmt.open(path) as doc:
        return sum(
            int(np.prod(i.shape, dtype=np.int64)) * np.dtype(i.dtype).itemsize
            for i in doc.tensors
            if names is None or i.name in names
        )


def _check_calls(calls, total):
    assert calls, "never called"
    assert calls[0] == (0, total)
    assert calls[-1] == (total, total)
    dones = [d for d, _ in calls]
    assert dones == sorted(dones) and len(set(dones)) == len(dones), calls
    assert all(t == total for _, t in calls)


def _no_leftovers(directory):
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def test_convert_reports_from_zero_to_the_listed_bytes(tmp_path):
    for dst in ("a.npz", "a.safetensors", "a.pvp", "a.npy"):
        calls = []
        tensorfmt.convert(PVP, tmp_path / dst, tensors=["values"] if dst == "a.npy" else None,
                          progress=lambda d, t: calls.append((d, t)))
        total = _listed_bytes(PVP, ["values"] if dst == "a.npy" else None)
        _check_calls(calls, total)


def test_a_large_tensor_reports_every_few_mib(tmp_path):
    big = np.arange(48 << 18, dtype=np.float32).reshape(48, 1 << 18)  # 48 MiB
    calls = []
    tensorfmt.save(tmp_path / "big.npy", big, progress=lambda d, t: calls.append((d, t)))
    _check_calls(calls, big.nbytes)
    assert len(calls) >= 4, calls  # pieces of at most 16 MiB between start and end
    calls = []
    with tensorfmt.open(tmp_path / "big.npy") as doc:
        doc.convert(tmp_path / "big.safetensors", progress=lambda d, t: calls.append((d, t)))
    _check_calls(calls, big.nbytes)
    assert len(calls) >= 4, calls
    (back,) = tensorfmt.load(tmp_path / "big.safetensors").values()
    np.testing.assert_array_equal(back, big)


class Bar:
    """What tqdm offers a caller: ``total`` (None until known), ``n`` and ``update``."""

    def __init__(self):
        self.total = None
        self.n = 0
        self.updates = []

    def update(self, n):
        self.n += n
        self.updates.append(n)


def test_a_tqdm_like_bar_gets_its_total_and_ends_full(tmp_path):
    bar = Bar()
    tensorfmt.convert(PVP, tmp_path / "a.npz", progress=bar)
    total = _listed_bytes(PVP)
    assert bar.total == total and bar.n == total
    assert all(n > 0 for n in bar.updates)
    bar = Bar()
    arrays = {"a": np.ones((3, 4), np.float64), "b": np.zeros(5, np.int16)}
    tensorfmt.save(tmp_path / "s.npz", arrays, progress=bar)
    assert bar.total == bar.n == 3 * 4 * 8 + 5 * 2


def test_a_bar_with_a_total_keeps_it(tmp_path):
    bar = Bar()
    bar.total = 10**12
    tensorfmt.convert(PVP, tmp_path / "a.npz", progress=bar)
    assert bar.total == 10**12 and bar.n == _listed_bytes(PVP)


class Stop(Exception):
    pass


def _raise_on(call_number):
    count = [0]

    def progress(done, total):
        count[0] += 1
        if count[0] >= call_number:
            raise Stop(f"stop at {done} of {total}")

    return progress


@pytest.mark.parametrize("dst", ["out.npz", "out.safetensors", "out.pvp", "kept.pvp"])
@pytest.mark.parametrize("call", [1, 2])
def test_a_raising_callback_stops_convert_and_leaves_nothing(tmp_path, dst, call):
    src = PVP
    if dst == "kept.pvp":
        src = tmp_path / "src.pvp"
        src.write_bytes(PVP.read_bytes())
    with pytest.raises(Stop):
        tensorfmt.convert(src, tmp_path / dst, progress=_raise_on(call))
    assert not (tmp_path / dst).exists()
    assert _no_leftovers(tmp_path) == []


def test_a_raising_callback_keeps_an_existing_file_and_stops_save(tmp_path):
    big = np.ones((40, 1 << 18), np.float32)  # 40 MiB: pieces in between
    out = tmp_path / "old.npy"
    tensorfmt.save(out, np.arange(3))
    before = out.read_bytes()
    with pytest.raises(Stop):
        tensorfmt.save(out, big, progress=_raise_on(2))
    assert out.read_bytes() == before
    with pytest.raises(Stop):
        with tensorfmt.open(PVP) as doc:
            doc.convert(tmp_path / "x.safetensors", progress=_raise_on(1))
    assert not (tmp_path / "x.safetensors").exists()
    assert _no_leftovers(tmp_path) == []


@pytest.mark.parametrize("dst", ["s.npy", "s.pvp", "s.caffemodel", "s.safetensors"])
def test_a_callback_raising_at_the_end_stops_save(tmp_path, dst):
    def at_end(done, total):
        if done == total:
            raise Stop("at the end")

    name = "conv/0" if dst.endswith("caffemodel") else "values"
    with pytest.raises(Stop):
        tensorfmt.save(tmp_path / dst, {name: np.ones((2, 3, 4, 1), np.float32)}, progress=at_end)
    assert not (tmp_path / dst).exists()
    assert _no_leftovers(tmp_path) == []


def test_progress_must_be_callable_or_have_update(tmp_path):
    with pytest.raises(tensorfmt.InvalidArgumentError, match="progress="):
        tensorfmt.convert(PVP, tmp_path / "a.npz", progress=42)  # type: ignore[arg-type]
    assert not (tmp_path / "a.npz").exists()


def test_like_from_a_sparse_layout_reads_it_as_the_originals_values(tmp_path):
    """convert(..., like=) goes through the one conversion the CLI uses: a sparse PVP
    file carried as scipy's npz layout goes back into its original's structure (it
    used to fail, reopening a file that did not exist yet)."""
    orig = TESTDATA / "pvp" / "sparse_values_dt4.pvp"
    tensorfmt.convert(orig, tmp_path / "s.npz")
    calls = []
    tensorfmt.convert(tmp_path / "s.npz", tmp_path / "back.pvp", like=orig, progress=lambda d, t: calls.append((d, t)))
    assert (tmp_path / "back.pvp").read_bytes() == orig.read_bytes()
    assert calls[0][0] == 0 and calls[-1][0] == calls[-1][1]
