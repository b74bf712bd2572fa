"""Streaming PVP writers from Python: `tensorfmt.pvp.DenseWriter`, `SparseWriter`,
`WeightsWriter` (issue 13). Each is checked by reading back with both readers, byte for
byte against `tensorfmt.save` of the same data where the two can say the same thing,
and for what streaming promises: a file readable after every frame, append, refusal
of an existing output."""

import os
import struct

import numpy as np
import pytest

import tensorfmt
import tensorfmt.pvp as pvp
from conftest import require_module


def movie(frames=3, ny=3, nx=4, nf=2):
    return np.arange(frames * ny * nx * nf, dtype=np.float32).reshape(frames, ny, nx, nf) / 7


def test_dense_frames_read_back_and_match_save_byte_for_byte(tmp_path):
    m = movie()
    path = tmp_path / "a.pvp"
    with pvp.DenseWriter(path, nx=4, ny=3, nf=2) as w:
        assert w.shape == (3, 4, 2)
        for k, frame in enumerate(m):
            w.write_frame(k * 0.5, frame)
        assert w.frames == 3
    assert w.closed
    f = pvp.open(path)
    assert (f.kind, len(f), f.shape) == ("dense", 3, (3, 4, 2))
    np.testing.assert_array_equal(f.movie(), m)
    np.testing.assert_array_equal(f.times(), [0.0, 0.5, 1.0])
    # The same movie through the one-shot writer gives the same bytes.
    saved = tmp_path / "saved.pvp"
    tensorfmt.save(saved, {"values": m, "time": np.array([0.0, 0.5, 1.0])}, to="pvp:dense")
    assert path.read_bytes() == saved.read_bytes()


def test_dense_file_is_readable_after_every_frame_and_appends(tmp_path):
    m = movie(frames=4)
    path = tmp_path / "run.pvp"
    w = pvp.DenseWriter(path, 4, 3, 2)
    for k in range(2):
        w.write_frame(k, m[k])
        # What a crash would leave: a whole file of the frames so far.
        assert len(pvp.open(path)) == k + 1
    w.close()
    w.close()  # harmless
    with pytest.raises(tensorfmt.TensorfmtError, match="closed"):
        w.write_frame(9, m[0])
    with pvp.DenseWriter.append(path) as w:
        assert (w.frames, w.shape) == (2, (3, 4, 2))
        w.write_frame(2, m[2].ravel())  # flat in [ny, nx, nf] order
        w.write_frame(3, m[3])
        assert w.frames == 4
    np.testing.assert_array_equal(tensorfmt.load(path)["values"], m)


def test_any_dtype_strides_byte_order_and_torch(tmp_path):
    m = movie(frames=2)
    path = tmp_path / "b.pvp"
    with pvp.DenseWriter(path, 4, 3, 2) as w:
        w.write_frame(0, m[0].astype(">f8"))  # big-endian f64
        w.write_frame(1, np.asfortranarray(m[1]))  # not C-contiguous
    np.testing.assert_array_equal(pvp.open(path).movie(), m)
    torch = require_module("torch")
    tpath = tmp_path / "t.pvp"
    with pvp.DenseWriter(tpath, 4, 3, 2) as w:
        w.write_frame(0, torch.from_numpy(m[0]))
    np.testing.assert_array_equal(pvp.open(tpath)[0].values, m[0])


def test_bad_arguments_raise_and_leave_no_file(tmp_path):
    path = tmp_path / "bad.pvp"
    for dims in [(0, 3, 2), (4, -1, 2)]:
        with pytest.raises(tensorfmt.InvalidArgumentError):
            pvp.DenseWriter(path, *dims)
        assert not path.exists()
    with pvp.DenseWriter(path, 4, 3, 2) as w:
        with pytest.raises(tensorfmt.InvalidArgumentError, match="frame"):
            w.write_frame(0, np.zeros((2, 4, 2), np.float32))
        with pytest.raises(tensorfmt.InvalidArgumentError, match="expected 24"):
            w.write_frame(0, np.zeros(23, np.float32))
        with pytest.raises(tensorfmt.InvalidArgumentError, match="numbers"):
            w.write_frame(0, np.array(["a"] * 24))
        assert w.frames == 0
    assert len(pvp.open(path)) == 0


def test_an_existing_file_is_kept_with_overwrite_false(tmp_path):
    path = tmp_path / "keep.pvp"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        pvp.DenseWriter(path, 4, 3, 2, overwrite=False)
    with pytest.raises(FileExistsError):
        pvp.SparseWriter(path, 4, 3, 2, overwrite=False)
    assert path.read_bytes() == b"precious"
    # Replaced by default (as save and convert do); a reader still holding the old
    # file keeps its data when it is overwritten.
    m = movie(frames=1)
    tensorfmt.save(path, {"values": m}, to="pvp:dense", overwrite=True)
    old = pvp.open(path)[0].values
    with pvp.DenseWriter(path, 4, 3, 2) as w:
        w.write_frame(0, m[0] + 1)
    np.testing.assert_array_equal(old, m[0])
    np.testing.assert_array_equal(pvp.open(path)[0].values, m[0] + 1)
    with pytest.raises(FileNotFoundError):
        pvp.DenseWriter.append(tmp_path / "missing.pvp")
    sparse = tmp_path / "sparse.pvp"
    pvp.SparseWriter(sparse, 4, 3, 2).close()
    with pytest.raises(tensorfmt.TensorfmtError, match="not a dense"):
        pvp.DenseWriter.append(sparse)


def test_sparse_values_frames_sorted_checked_and_appendable(tmp_path):
    path = tmp_path / "s.pvp"
    with pvp.SparseWriter(path, nx=4, ny=3, nf=2) as w:
        assert w.has_values
        w.write_frame(0.0, [5, 1, 20], [0.5, -1.0, 3.0])
        w.write_frame(1.0, np.array([], np.int64), [])
        with pytest.raises(tensorfmt.InvalidArgumentError, match="duplicate"):
            w.write_frame(2.0, [3, 3], [1, 2])
        with pytest.raises(tensorfmt.InvalidArgumentError, match="not below"):
            w.write_frame(2.0, [24], [1])
        with pytest.raises(tensorfmt.InvalidArgumentError):
            w.write_frame(2.0, [-1], [1])
        with pytest.raises(tensorfmt.InvalidArgumentError, match="one value per index"):
            w.write_frame(2.0, [1])
        with pytest.raises(tensorfmt.InvalidArgumentError):
            w.write_frame(2.0, [1, 2], [1.0])
        assert w.frames == 2
    with pvp.SparseWriter.append(path) as w:
        assert (w.frames, w.shape, w.has_values) == (2, (3, 4, 2), True)
        dense = np.zeros((3, 4, 2), np.float32)
        dense[2, 3, 1] = 7.0
        w.write_dense_frame(2.0, dense)
    f = pvp.open(path)
    assert (f.kind, len(f)) == ("sparse", 3)
    assert f[0].indices.tolist() == [1, 5, 20]
    assert f[0].values.tolist() == [-1.0, 0.5, 3.0]
    assert f[1].indices.size == 0
    assert f[2].indices.tolist() == [2 * 4 * 2 + 3 * 2 + 1]
    assert f[2].to_dense(f.shape)[2, 3, 1] == 7.0
    # The bytes (spec: header nbands = frames, then per frame time f64, count i32 and
    # sorted (index u32, value f32) pairs), and the original program's checks.
    data = path.read_bytes()
    assert struct.unpack_from("<3i", data, 8) == (6, 4, 3)  # filetype 6, nx 4, ny 3
    assert struct.unpack_from("<i", data, 68) == (3,)  # nbands
    frame0 = struct.pack("<di", 0.0, 3) + b"".join(
        struct.pack("<If", i, v) for i, v in [(1, -1.0), (5, 0.5), (20, 3.0)]
    )
    assert data[80 : 80 + len(frame0)] == frame0
    assert tensorfmt.validate(path)


def test_sparse_binary_and_datatype4(tmp_path):
    spikes = tmp_path / "spikes.pvp"
    with pvp.SparseWriter(spikes, 4, 3, 2, values=False) as w:
        w.write_frame(0.0, [3, 0])
        with pytest.raises(tensorfmt.InvalidArgumentError, match="binary"):
            w.write_frame(1.0, [1], [1.0])
        w.write_dense_frame(1.0, np.arange(24) % 5 == 0)
    f = pvp.open(spikes)
    assert f[0].indices.tolist() == [0, 3]
    assert f[1].indices.tolist() == [0, 5, 10, 15, 20]
    assert tensorfmt.open(spikes).header["filetype"] == 2
    old = tmp_path / "dt4.pvp"
    with pvp.SparseWriter(old, 4, 3, 2, datatype4=True) as w:
        w.write_frame(0.0, [2], [4.0])
    assert tensorfmt.open(old).header["datatype"] == 4
    assert pvp.open(old)[0].values.tolist() == [4.0]


def test_weights_kernel_float_and_compressed(tmp_path):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((2, 3, 5, 5, 4)).astype(np.float32)
    path = tmp_path / "w.pvp"
    with pvp.WeightsWriter(path, nxp=5, nyp=5, nfp=4, nf=3, arbors=2) as out:
        assert out.shape == (2, 3, 5, 5, 4)
        out.write_frame(0.0, w0)
        out.write_frame(10.0, w0 * 2)
        with pytest.raises(tensorfmt.InvalidArgumentError, match="weight frame"):
            out.write_frame(20.0, w0[:1])
    f = pvp.open(path)
    assert (f.kind, len(f)) == ("weights", 2)
    assert f.weight_geometry == dict(
        shared=True, nxp=5, nyp=5, nfp=4, numpatches=3, arbors=2, patch_header_bytes=8
    )
    np.testing.assert_array_equal(f[1].weights, w0 * 2)
    assert (f[1].time, f[1].wmin, f[1].wmax) == (10.0, float(w0.min() * 2), float(w0.max() * 2))
    with pvp.WeightsWriter.append(path) as out:
        assert out.frames == 2 and out.geometry["arbors"] == 2
        out.write_frame(20.0, w0.ravel())
    np.testing.assert_array_equal(pvp.open(path)[2].weights, w0)

    packed = tmp_path / "w8.pvp"
    with pvp.WeightsWriter(packed, nxp=5, nyp=5, nfp=4, nf=3, arbors=2, compress=True) as out:
        out.write_frame(0.0, w0)
        with pytest.raises(tensorfmt.InvalidArgumentError, match="finite"):
            out.write_frame(1.0, np.full_like(w0, np.nan))
    g = pvp.open(packed)[0]
    step = (w0.max() - w0.min()) / 255
    assert np.abs(g.weights - w0).max() <= step / 2 + 1e-6
    assert os.path.getsize(packed) < os.path.getsize(path) / 3


def test_weights_non_shared_with_margins_match_save(tmp_path):
    # A 2x2x1 pre layer with margin 1: (2+2)*(2+2)*1 = 16 patches of 3x3x2.
    w0 = np.arange(16 * 3 * 3 * 2, dtype=np.float32).reshape(1, 16, 3, 3, 2)
    path = tmp_path / "ns.pvp"
    with pvp.WeightsWriter(path, nxp=3, nyp=3, nfp=2, nx=2, ny=2, nf=1, shared=False, margin=1) as out:
        assert out.geometry["numpatches"] == 16
        out.write_frame(0.0, w0)
    h = tensorfmt.open(path).header
    assert (h["filetype"], h["nxExtended"], h["nyExtended"]) == (3, 4, 4)
    np.testing.assert_array_equal(pvp.open(path)[0].weights, w0)
    with pytest.raises(tensorfmt.InvalidArgumentError, match="margins"):
        pvp.WeightsWriter(tmp_path / "x.pvp", nxp=3, nyp=3, nfp=2, nf=1, margin=1)
    assert not (tmp_path / "x.pvp").exists()


# The module's examples run in test_docs.py, each in its own directory.
