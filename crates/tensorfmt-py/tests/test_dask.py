"""tensorfmt.dask: lazy arrays over frames, and convert_many on a LocalCluster with
several worker processes."""

import os
import shutil

import numpy as np
import pytest

import tensorfmt
from conftest import TESTDATA, require_module

dask = require_module("dask", reason="SKIPPING dask tests: pip install 'tensorfmt[dask]'")
import tensorfmt.dask as tdask  # noqa: E402


def test_from_file_dense_pvp_is_lazy_and_exact(tmp_path):
    rng = np.random.default_rng(3)
    movie = rng.standard_normal((23, 5, 6, 2)).astype(np.float32)
    p = tmp_path / "movie.pvp"
    tensorfmt.save(p, {"values": movie})
    arr = tdask.from_file(p, chunk_frames=5)
    assert arr.shape == movie.shape and arr.dtype == movie.dtype
    assert arr.chunks[0] == (5, 5, 5, 5, 3)
    np.testing.assert_array_equal(arr.compute(), movie)
    np.testing.assert_allclose(arr.mean(axis=0).compute(), movie.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(arr[7:12].compute(), movie[7:12])


def test_from_file_sparse_pvp_and_pink_data(tmp_path):
    rng = np.random.default_rng(4)
    dense = rng.standard_normal((9, 4, 4, 3)).astype(np.float32)
    dense[dense < 0.8] = 0
    sp = tmp_path / "sparse.pvp"
    tensorfmt.save(sp, {"values": dense}, to="pvp:sparse")
    np.testing.assert_array_equal(tdask.from_file(sp, chunk_frames=4).compute(), dense)
    images = rng.standard_normal((7, 3, 3)).astype(np.float32)
    pink = tmp_path / "images.bin"
    tensorfmt.save(pink, {"images": images}, to="som-data")
    got = tdask.from_file(pink, chunk_frames=2)
    assert got.chunks[0] == (2, 2, 2, 1)
    np.testing.assert_array_equal(got.compute(), images)


def test_from_file_rejects_bad_chunks():
    p = TESTDATA / "pvp" / "dense_f32.pvp"
    with pytest.raises(tensorfmt.InvalidArgumentError, match="chunk_frames= must be 1 or more, not 0"):
        tdask.from_file(p, chunk_frames=0)
    # Each names its keyword (they said "'float' object cannot be interpreted as an
    # integer" and "'<' not supported"; True was taken as 1), as the other APIs do.
    for kw in ({"chunk_frames": 2.5}, {"chunk_frames": True}, {"chunk_bytes": None}, {"chunk_bytes": 1.5}, {"chunk_frames": "2"}):
        with pytest.raises(tensorfmt.TensorfmtTypeError, match=f"^{list(kw)[0]}= takes a whole number"):
            tdask.from_file(p, **kw)
    assert tdask.from_file(p, chunk_frames=np.int64(2)).chunks[0] == (2, 1)
    for kw in ({"batch_files": 0}, {"batch_bytes": 0}, {"batch_files": 1.5}, {"batch_bytes": None}):
        with pytest.raises(tensorfmt.TensorfmtError, match=f"^{list(kw)[0]}="):
            tdask.convert_many([p], "/nonexistent-out", **kw)


def test_from_file_chunks_by_bytes_by_default(tmp_path):
    movie = np.arange(40 * 4 * 4 * 2, dtype=np.float32).reshape(40, 4, 4, 2)  # 128-byte frames
    p = tmp_path / "movie.pvp"
    tensorfmt.save(p, {"values": movie})
    # 1000 bytes hold 7 whole frames.
    arr = tdask.from_file(p, chunk_bytes=1000)
    assert arr.chunks[0] == (7,) * 5 + (5,)
    np.testing.assert_array_equal(arr.compute(), movie)
    # The default size puts this small movie in one chunk; a frame larger than the
    # size still makes a chunk of one frame.
    assert tdask.from_file(p).chunks[0] == (40,)
    assert tdask.from_file(p, chunk_bytes=1).chunks[0] == (1,) * 40
    with pytest.raises(tensorfmt.InvalidArgumentError):
        tdask.from_file(p, chunk_bytes=0)


def test_convert_many_batches_small_files(tmp_path):
    jobs = []
    for i, size in enumerate([10, 10, 10, 100, 10, 10]):
        src = tmp_path / f"f{i}.bin"
        src.write_bytes(b"x" * size)
        jobs.append((str(src), str(tmp_path / f"o{i}")))
    # Up to 30 bytes or 2 files per task; the 100-byte file is a task of its own.
    batches = tdask._batches(jobs, 30, 2)
    assert [len(b) for b in batches] == [2, 1, 1, 2]
    assert [j for b in batches for j in b] == jobs
    assert tdask._batches(jobs, 1 << 30, 64) == [jobs]
    # Evened out over workers: 200 small files on 2 workers fill 2 rounds of 2 batches
    # of 50 (not 64, 64, 64, 8); the byte limit still closes a batch early.
    many = [(f"s{i}", f"d{i}") for i in range(200)]
    sizes = [len(b) for b in tdask._batches(many, 1 << 30, 64, parts=2)]
    assert sizes == [50, 50, 50, 50]
    assert [len(b) for b in tdask._batches(jobs, 30, 64, parts=2)] == [3, 1, 2]
    # Results come back one per input, in input order, through batches.
    srcs = [TESTDATA / "core" / "mixed.npz", tmp_path / "missing.npz", TESTDATA / "core" / "model.safetensors"]
    out = tmp_path / "out"
    results = tdask.convert_many(srcs, out, to="safetensors", batch_files=2)
    assert [r["status"] for r in results] == ["ok", "failed", "ok"]
    assert [r["path"] for r in results] == [os.path.abspath(s) for s in srcs]


@pytest.fixture(scope="module")
def client():
    distributed = require_module("distributed", reason="SKIPPING: pip install 'tensorfmt[dask]'")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_convert_many_on_a_local_cluster(tmp_path, client):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    shutil.copy(TESTDATA / "pvp" / "dense_f32.pvp", src / "a.pvp")
    shutil.copy(TESTDATA / "caffe" / "v2_tiny.caffemodel", src / "sub" / "net.caffemodel")
    shutil.copy(TESTDATA / "som" / "data_f32_2x3.bin", src / "sub" / "data.bin")
    (src / "broken.pvp").write_bytes((TESTDATA / "pvp" / "dense_f32.pvp").read_bytes()[:50])
    paths = sorted(str(p) for p in src.rglob("*") if p.is_file())
    out = tmp_path / "out"
    results = tdask.convert_many(paths, out, to="safetensors", client=client)
    assert [r["path"] for r in results] == paths
    by_name = {os.path.basename(r["path"]): r for r in results}
    assert by_name["broken.pvp"]["status"] == "failed" and "FormatError" in by_name["broken.pvp"]["error"]
    for name in ("a.pvp", "net.caffemodel", "data.bin"):
        r = by_name[name]
        assert r["status"] == "ok", r
        assert r["output"].endswith(".safetensors") and os.path.exists(r["output"])
        assert tensorfmt.diff(r["path"], r["output"]).equal
    assert os.path.exists(out / "sub" / "net.safetensors")
    # Work ran on the cluster's worker processes, not here.
    assert len(client.scheduler_info()["workers"]) == 2
    # A rerun converts nothing new.
    again = tdask.convert_many(paths, out, to="safetensors", client=client)
    assert sorted(r["status"] for r in again) == ["failed", "skipped", "skipped", "skipped"]


def test_convert_many_without_a_cluster(tmp_path):
    out = tmp_path / "out"
    results = tdask.convert_many([TESTDATA / "core" / "mixed.npz"], out, to="safetensors")
    assert results[0]["status"] == "ok"
    assert tensorfmt.diff(TESTDATA / "core" / "mixed.npz", results[0]["output"]).equal


def test_convert_many_fails_colliding_outputs_before_writing(tmp_path):
    # Issue 24: x.npy and x.safetensors both map to out/x.npz; both used to be "ok".
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(TESTDATA / "core" / "f32_2x3.npy", src / "x.npy")
    shutil.copy(TESTDATA / "core" / "model.safetensors", src / "x.safetensors")
    shutil.copy(TESTDATA / "core" / "mixed.npz", src / "y.npz")
    out = tmp_path / "out"
    paths = [src / "x.npy", src / "x.safetensors", src / "y.npz"]
    for _ in range(2):
        results = tdask.convert_many(paths, out, to="npz")
        assert [r["path"] for r in results] == [str(p) for p in paths]
        assert [r["status"] for r in results[:2]] == ["failed", "failed"]
        assert all("would also be the output of" in r["error"] for r in results[:2])
        assert results[2]["status"] in ("ok", "skipped")
        assert not (out / "x.npz").exists()


def test_from_file_reads_rows_of_files_without_frames(tmp_path):
    """npy, npz, safetensors and primitiv have no frames= selection: each chunk is a
    slice of the tensor (every chunk failed at compute before)."""
    a = np.arange(60, dtype=np.float32).reshape(10, 6)
    for ext in ("npy", "npz", "safetensors", "data"):
        p = tmp_path / f"t.{ext}"
        tensorfmt.save(p, {"value" if ext == "data" else "t": a})
        lazy = tensorfmt.dask.from_file(p, chunk_frames=3)
        assert lazy.chunks[0] == (3, 3, 3, 1)
        back = lazy.compute()
        want = tensorfmt.load(p)[list(tensorfmt.load(p))[0]]
        assert np.array_equal(back, want), ext


def test_convert_many_refuses_an_output_that_is_its_input(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.ones(3))
    [r] = tensorfmt.dask.convert_many([p], tmp_path, to="npz")
    assert r["status"] == "failed" and "is the input" in r["error"]
