"""Issue 23 item 5: sparse stays sparse. A sparse PVP converts to npz in scipy's save_npz
layout (scipy.sparse.load_npz reads it) and to safetensors as the CSR triple, densifies
only with dense=True, converts back to the sparse PVP, and scipy matrices can be saved."""

import numpy as np
import pytest
import scipy.sparse

import tensorfmt
import tensorfmt.pvp


def _sparse(path, nx=5, ny=4, nf=3, frames=7):
    rng = np.random.default_rng(1)
    with tensorfmt.pvp.SparseWriter(path, nx=nx, ny=ny, nf=nf, overwrite=True) as w:
        for k in range(frames):
            idx = np.unique(rng.integers(0, nx * ny * nf, 4))
            w.write_frame(2.0 * k, idx, rng.standard_normal(idx.size).astype(np.float32))
    return path


def test_npz_is_scipy_save_npz_layout_and_converts_back(tmp_path):
    src = _sparse(tmp_path / "s.pvp")
    want = tensorfmt.pvp.open(src).to_scipy()
    out = tmp_path / "s.npz"
    written = tensorfmt.convert(src, out)
    assert sorted(written) == ["data", "frame_shape", "indices", "indptr", "shape", "time"]
    m = scipy.sparse.load_npz(out)
    assert m.shape == (7, 60)
    assert (m != want).nnz == 0
    with np.load(out) as z:
        assert z["time"].tolist() == [2.0 * k for k in range(7)]
        assert z["frame_shape"].tolist() == [4, 5, 3]
    back = tmp_path / "back.pvp"
    tensorfmt.convert(out, back)
    f = tensorfmt.pvp.open(back)
    assert f.kind.startswith("sparse") and f.shape == (4, 5, 3)
    assert (f.to_scipy() != want).nnz == 0


def test_safetensors_holds_the_csr_triple(tmp_path):
    from safetensors.numpy import load_file

    src = _sparse(tmp_path / "s.pvp")
    out = tmp_path / "s.safetensors"
    tensorfmt.convert(src, out)
    t = load_file(out)
    m = scipy.sparse.csr_matrix((t["data"], t["indices"], t["indptr"]), shape=tuple(t["shape"]))
    assert (m != tensorfmt.pvp.open(src).to_scipy()).nnz == 0
    back = tmp_path / "back.pvp"
    tensorfmt.convert(out, back)
    assert (tensorfmt.pvp.open(back).to_scipy() != m).nnz == 0


def test_dense_only_when_asked_and_bounded(tmp_path):
    src = _sparse(tmp_path / "s.pvp")
    out = tmp_path / "d.npz"
    assert sorted(tensorfmt.convert(src, out, dense=True)) == ["time", "values"]
    assert np.load(out)["values"].shape == (7, 4, 5, 3)
    big = _sparse(tmp_path / "big.pvp", nx=4096, ny=4096, nf=16, frames=2)  # 2 GiB dense
    small = tmp_path / "big.npz"
    tensorfmt.convert(big, small)
    assert small.stat().st_size < 4096
    with pytest.raises(tensorfmt.TensorfmtError) as e:
        tensorfmt.convert(big, tmp_path / "big_dense.npz", dense=True)
    assert "dense=True" in str(e.value) and "1.0 GiB" in str(e.value)
    assert not (tmp_path / "big_dense.npz").exists()


def test_load_of_a_large_sparse_file_names_the_sparse_options(tmp_path):
    src = _sparse(tmp_path / "s.pvp")
    with pytest.raises(tensorfmt.LimitError) as e:
        tensorfmt.load(src, max_alloc=100)
    assert "sparse=True" in str(e.value) and "to_scipy()" in str(e.value)


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
def test_to_scipy_is_writable(tmp_path):
    m = tensorfmt.pvp.open(_sparse(tmp_path / "s.pvp")).to_scipy()
    m.data[0] = 42.0
    m[0, 0] = 1.5  # structural change
    assert m[0, 0] == 1.5


def test_save_and_sparse_writer_take_a_scipy_matrix_with_shape(tmp_path):
    want = tensorfmt.pvp.open(_sparse(tmp_path / "s.pvp")).to_scipy()
    p = tmp_path / "saved.pvp"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no misleading "wrote 2 of 5 tensors"
        tensorfmt.save(p, {"values": want, "time": np.arange(7.0)}, shape=(4, 5, 3))
    f = tensorfmt.pvp.open(p)
    assert f.kind.startswith("sparse") and f.shape == (4, 5, 3)
    assert (f.to_scipy() != want).nnz == 0
    p2 = tmp_path / "written.pvp"
    with tensorfmt.pvp.SparseWriter(p2, nx=5, ny=4, nf=3) as w:
        w.write_matrix(want, times=np.arange(7.0))
    assert (tensorfmt.pvp.open(p2).to_scipy() != want).nnz == 0
    with pytest.raises(tensorfmt.InvalidArgumentError):
        tensorfmt.save(tmp_path / "bad.pvp", want, shape=(4, 5, 4))


def test_dtype_is_the_values_type_of_a_scipy_matrix(tmp_path):
    """dtype= on a scipy matrix is the type of its values: the CSR index arrays and the
    shape keep theirs (they were cast too, and wrapped: a corrupt matrix with exit 0)."""
    import warnings

    from safetensors.numpy import load_file

    m = scipy.sparse.csr_matrix((np.array([0.5, 2.0, 7.0], np.float32), np.array([1, 200, 299]), np.array([0, 2, 3, 3])), shape=(3, 300))
    p = tmp_path / "m.safetensors"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing wraps, nothing to say
        tensorfmt.save(p, m, shape=(10, 30, 1), dtype="i8")
    t = load_file(p)
    assert t["indices"].tolist() == [1, 200, 299] and t["indptr"].tolist() == [0, 2, 3, 3]
    assert t["shape"].tolist() == [3, 300] and t["data"].dtype == np.int8
    back = scipy.sparse.csr_matrix((t["data"], t["indices"], t["indptr"]), shape=tuple(t["shape"]))
    assert back.toarray().tolist() == m.toarray().astype(np.int8).tolist()
    # A sparse PVP converted with a dtype: the same rule.
    src = _sparse(tmp_path / "s.pvp")
    out = tmp_path / "s_u8.npz"
    tensorfmt.convert(src, out, dtype="u8")
    with np.load(out) as z:
        assert z["data"].dtype == np.uint8 and z["indices"].dtype == np.int32
        assert z["time"].dtype == np.float64 and z["frame_shape"].tolist() == [4, 5, 3]
    assert scipy.sparse.load_npz(out).toarray().shape == (7, 60)
    # float16: scipy.sparse has no such matrices (load_npz gives one that toarray,
    # printing and arithmetic refuse): refused for the save_npz layout, nothing written.
    half = tmp_path / "s_f16.npz"
    with pytest.raises(tensorfmt.InvalidArgumentError, match="scipy.sparse has no f16"):
        tensorfmt.convert(src, half, dtype="f16")
    assert not half.exists()


def test_a_scipy_matrix_keeps_its_geometry_in_every_output(tmp_path):
    """shape= travels as frame_shape, as in every sparse layout: npz and ONNX took it
    as PVP settings and refused them, safetensors kept them as metadata that a
    conversion back to PVP did not read (a [frames, 1, N, 1] layer)."""
    want = tensorfmt.pvp.open(_sparse(tmp_path / "s.pvp")).to_scipy()
    for ext in ("npz", "safetensors", "onnx"):
        p = tmp_path / f"m.{ext}"
        tensorfmt.save(p, want, shape=(4, 5, 3))
        assert tensorfmt.load(p)["frame_shape"].tolist() == [4, 5, 3]
        back = tmp_path / f"back_{ext}.pvp"
        tensorfmt.convert(p, back)
        f = tensorfmt.pvp.open(back)
        assert f.shape == (4, 5, 3) and (f.to_scipy() != want).nnz == 0, ext
