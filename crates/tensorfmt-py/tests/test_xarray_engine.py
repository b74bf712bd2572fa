"""The xarray engine ``tensorfmt`` (issue 31): every file tensorfmt reads opens with the
names and values of ``tensorfmt.load``, named dimensions and header attributes; lazily
(opening reads no frames, indexing only the frames touched); with dask under
``chunks=``; sparse PVP as pydata ``sparse``; directories as trees."""

import importlib.util
import os
import pathlib
import shutil
import sys
import warnings

import numpy as np
import pytest

import tensorfmt
from conftest import TESTDATA, corpus_dir, fixtures, require_module

xr = require_module("xarray")
sparse = require_module("sparse")

from tensorfmt import xarray_backend  # noqa: E402


def readable_files():
    """Every fixture and corpus file tensorfmt opens (the rest is tested elsewhere)."""
    out = list(fixtures())
    root = corpus_dir()
    if root.is_dir():
        out += sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".md", ".json", ".prototxt", ".txt"))
    keep = []
    for p in out:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tensorfmt.open(p).close()
        except tensorfmt.TensorfmtError:
            continue
        keep.append(p)
    return keep


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def test_every_file_opens_with_the_names_and_values_of_load():
    files = readable_files()
    assert len(files) > 40
    bad = []
    for p in files:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = tensorfmt.load(p)
            ds = xr.open_dataset(p, engine="tensorfmt")
        names = set(ds.variables) - {"q", "r"}
        if names != set(want):
            bad.append(f"{p}: names {sorted(names)} != {sorted(want)}")
            continue
        for name, w in want.items():
            v = ds[name].data
            got = v.todense() if isinstance(v, sparse.COO) else ds[name].values
            if not same(got, w):
                bad.append(f"{p}: {name} differs")
        ds.close()
    assert not bad, "\n".join(bad)


def test_named_dimensions_and_header_attributes():
    ds = xr.open_dataset(TESTDATA / "pvp/dense_f32.pvp", engine="tensorfmt")
    assert ds["values"].dims == ("frame", "y", "x", "f")
    assert "time" in ds.coords and ds["time"].dims == ("frame",)
    assert ds.attrs["nbands"] == 3 and ds.attrs["tensorfmt_kind"] == "dense"
    w = xr.open_dataset(TESTDATA / "pvp/kernel_f32.pvp", engine="tensorfmt")
    assert w["weights"].dims == ("frame", "arbor", "patch", "nyp", "nxp", "nfp")
    d = xr.open_dataset(TESTDATA / "som/data_f32_2ch_comments.bin", engine="tensorfmt")
    assert d["data"].dims == ("entry", "channel", "y", "x")
    s = xr.open_dataset(TESTDATA / "som/som_hex3.bin", engine="tensorfmt")
    assert s["som"].dims[0] == "neuron"
    axial = tensorfmt.som.open(TESTDATA / "som/som_hex3.bin").axial()
    assert s["q"].values.tolist() == axial[:, 0].tolist() and s["r"].values.tolist() == axial[:, 1].tolist()
    c = xr.open_dataset(TESTDATA / "som/som_cart_3x2.bin", engine="tensorfmt")
    assert c["som"].dims[:2] == ("neuron_y", "neuron_x")
    m = xr.open_dataset(TESTDATA / "som/map_hex3.bin", engine="tensorfmt")
    assert m["distances"].dims == ("entry", "neuron")
    r = xr.open_dataset(TESTDATA / "som/rotflip_hex3_pink.bin", engine="tensorfmt")
    assert r["flip"].dims == r["angle"].dims == ("entry", "neuron")
    caffe = xr.open_dataset(TESTDATA / "caffe/v2_tiny.caffemodel", engine="tensorfmt")
    assert caffe["conv1/0"].dims == ("conv1/0_dim0", "conv1/0_dim1", "conv1/0_dim2", "conv1/0_dim3")


@pytest.fixture
def movie(tmp_path):
    values = np.random.default_rng(1).random((200, 8, 6, 2), dtype=np.float32)
    values[3] = 0.0
    p = tmp_path / "movie.pvp"
    tensorfmt.save(p, {"values": values})
    return p, values


def test_lazy_reads_touch_only_the_frames_indexed(movie, monkeypatch):
    p, values = movie
    reads = []
    real = xarray_backend._File.frames

    def counting(self, name, start, stop):
        reads.append((name, start, stop))
        return real(self, name, start, stop)

    monkeypatch.setattr(xarray_backend._File, "frames", counting)
    ds = xr.open_dataset(p, engine="tensorfmt")
    assert reads == []  # the header only
    got = ds["values"].isel(frame=7, y=slice(2, 5)).values
    assert reads == [("values", 7, 8)]
    assert same(got, values[7, 2:5])
    got = ds["values"][10:20:3].values
    assert reads[-1] == ("values", 10, 20)
    assert same(got, values[10:20:3])
    assert same(ds["values"][[5, 1]].values, values[[5, 1]])
    assert same(ds["values"][::-50].values, values[::-50])


def test_a_frame_out_of_range_says_which(movie):
    """The reads take slice rules (which clamp); an integer frame beyond the file is
    numpy's IndexError naming the index and the size, not an error about an empty read."""
    p, values = movie
    ds = xr.open_dataset(p, engine="tensorfmt")
    n = len(values)
    for k in (n, n + 7):  # (xarray wraps a negative index modulo the size before us)
        with pytest.raises(IndexError, match=f"index {k} is out of bounds for axis 0 with size {n}"):
            ds["values"].isel(frame=k).values
    assert same(ds["values"].isel(frame=-n).values, values[0])


def test_chunks_give_dask_arrays(movie):
    da = require_module("dask.array")
    p, values = movie
    ds = xr.open_dataset(p, engine="tensorfmt", chunks={"frame": 64})
    v = ds["values"].data
    assert isinstance(v, da.Array) and v.chunks[0] == (64, 64, 64, 8)
    assert np.allclose(ds["values"].mean("frame").values, values.mean(0))
    preferred = xr.open_dataset(p, engine="tensorfmt", chunks={})
    assert preferred["values"].chunks[0] == (200,)  # 77 kB: one chunk, not one per frame
    auto = xr.open_dataset(p, engine="tensorfmt", chunks="auto")
    assert auto["values"].chunks[0] == (200,)  # 200 small frames fit dask's chunk size
    assert same(auto["time"].values, tensorfmt.load(p)["time"])


def test_datatree_of_a_directory_refuses_per_file_keywords(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(TESTDATA / "pvp" / "dense_f32.pvp", d / "a.pvp")
    assert "a" in xr.open_datatree(d, engine="tensorfmt").children
    for kw in ({"kind": "som"}, {"format": "npy"}, {"bogus": 1}):
        with pytest.raises(TypeError):
            xr.open_datatree(d, engine="tensorfmt", **kw)


DECODERS = {
    "mask_and_scale": [True, False],
    "decode_times": [True, False],
    "use_cftime": [True, False],
    "decode_coords": [True, False, "coordinates", "all"],
    "decode_timedelta": [True, False],
    "concat_characters": [True, False],
}


def test_xarrays_decoder_keywords_are_accepted_and_change_nothing(tmp_path):
    """xarray passes its CF decoder keywords (mask_and_scale=, decode_times=, ...) to
    the engine whenever they are given; they were refused as unexpected keywords.
    tensorfmt's variables carry no CF encoding (no units, _FillValue, scale_factor or
    char arrays): every value opens the dataset of the defaults, PVP's time stays its
    float64 simulation time (it has no units to decode)."""
    p = TESTDATA / "pvp/dense_f32.pvp"
    plain = xr.open_dataset(p, engine="tensorfmt")
    assert plain["time"].dtype == np.float64 and "units" not in plain["time"].attrs
    for name, values in DECODERS.items():
        for value in values:
            ds = xr.open_dataset(p, engine="tensorfmt", **{name: value})
            xr.testing.assert_identical(ds, plain)
    xr.testing.assert_identical(xr.open_dataset(p, engine="tensorfmt", decode_cf=False), plain)
    xr.testing.assert_identical(xr.open_dataset(p, engine="tensorfmt", decode_cf=True, decode_times=True), plain)
    # Trees take them too (xarray passes them to open_datatree), for a file or a folder.
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(p, d / "a.pvp")
    for target in (d, d / "a.pvp"):
        tree = xr.open_datatree(target, engine="tensorfmt", decode_times=False, mask_and_scale=False, decode_cf=False)
        assert tree.to_dict()[("/a" if target == d else "/")]["time"].dtype == np.float64
    # Their values are checked as the other keywords' are.
    for kw in ({"mask_and_scale": "no"}, {"decode_coords": "some"}, {"use_cftime": 1}):
        with pytest.raises(tensorfmt.TensorfmtError, match=list(kw)[0]):
            xr.open_dataset(p, engine="tensorfmt", **kw)


def test_datasets_and_their_dask_arrays_pickle_for_processes_and_clusters():
    """What dask sends to worker processes (a distributed cluster, the processes
    scheduler): the lazy arrays pickle as the path and options that open the file
    again there, and compute there to the values of load."""
    import pickle

    p = TESTDATA / "pvp" / "dense_f32.pvp"
    ds = xr.open_dataset(p, engine="tensorfmt", chunks={"frame": 1})
    want = tensorfmt.load(p)["values"]
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again["values"].values, want)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ds["values"].data)).compute(), want)
    total = ds["values"].sum().compute(scheduler="processes", num_workers=2)
    assert np.isclose(float(total), float(want.sum(dtype=np.float64)), rtol=1e-6)
    again.close()


def test_preferred_chunks_are_a_power_of_two_of_frames_within_the_budget(movie, monkeypatch):
    # chunks={} (open_mfdataset's default) must not give one chunk per frame: a 1 GiB
    # movie of 1 MiB frames was 1024 tasks, each paying a frame-sized partial result in a
    # mean over frames (16 x slower than 32 MiB chunks).
    p, values = movie
    frame_bytes = 8 * 6 * 2 * 4
    monkeypatch.setattr(xarray_backend, "PREFERRED_CHUNK_BYTES", 40 * frame_bytes)  # as if the movie were large
    ds = xr.open_dataset(p, engine="tensorfmt", chunks={})
    assert ds["values"].encoding["preferred_chunks"] == {"frame": 32}  # 40 frames fit: 32
    assert ds["values"].chunks[0] == (32,) * 6 + (8,)
    assert ds["time"].chunks[0] == (200,)  # 1.6 kB: one chunk
    assert np.allclose(ds["values"].mean("frame").values, values.mean(0))
    auto = xr.open_dataset(p, engine="tensorfmt", chunks="auto")
    assert all(c % 32 == 0 for c in auto["values"].chunks[0][:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # multiples of the preferred chunks: no warning
        xr.open_dataset(p, engine="tensorfmt", chunks={"frame": 64})
        xr.open_dataset(p, engine="tensorfmt", chunks={"frame": 128})
    monkeypatch.setattr(xarray_backend, "PREFERRED_CHUNK_BYTES", frame_bytes // 2)  # frames larger than the budget
    assert xr.open_dataset(p, engine="tensorfmt", chunks={})["values"].chunks[0] == (1,) * 200
    assert xarray_backend.preferred_frames((0, 4), "float32") is None
    assert xarray_backend.preferred_frames((), "float32") is None


def test_sparse_pvp_opens_sparse_and_dense_only_when_asked(monkeypatch):
    p = TESTDATA / "pvp/sparse_values_dt3.pvp"
    want = tensorfmt.load(p)["values"]
    built = []
    real = xarray_backend._sparse_frames
    monkeypatch.setattr(xarray_backend, "_sparse_frames", lambda *a: built.append(a[2:]) or real(*a))
    ds = xr.open_dataset(p, engine="tensorfmt")
    assert built == []  # opening reads the header and the frame index, no entries
    last = ds["values"].isel(frame=-1).data
    assert isinstance(last, sparse.COO) and built == [(len(want) - 1, len(want))]  # one frame
    assert same(last.todense(), want[-1])
    assert same(ds["values"][1:3].data.todense(), want[1:3])
    assert isinstance(ds["values"].data, sparse.COO)
    assert ds["values"].data.nnz == tensorfmt.load(p, sparse=True)["data"].size  # the stored entries
    assert same(ds["values"].data.todense(), want)
    dense = xr.open_dataset(p, engine="tensorfmt", dense=True)
    assert "LazilyIndexedArray" in repr(dense["values"].variable._data)
    assert same(dense["values"].values, want)


def test_sparse_pvp_without_sparse_names_the_extra(monkeypatch):
    """pydata sparse is its own extra (dask imports it, and numba, whenever installed):
    without it a sparse file is an ImportError naming the extra, never densified; dense
    files and ``dense=True`` need nothing more."""
    monkeypatch.setitem(sys.modules, "sparse", None)
    p = TESTDATA / "pvp/sparse_values_dt3.pvp"
    with pytest.raises(ImportError, match=r"tensorfmt\[sparse\].*dense=True"):
        xr.open_dataset(p, engine="tensorfmt")
    assert same(xr.open_dataset(p, engine="tensorfmt", dense=True)["values"].values, tensorfmt.load(p)["values"])


def test_repeated_sparse_indices_keep_the_last_value(tmp_path):
    # A sparse-values file with neuron 1 twice in frame 0: the reader's dense frames keep
    # the last value; the sparse array must agree.
    import struct

    from tensorfmt import pvp

    p = tmp_path / "dup.pvp"
    with pvp.SparseWriter(p, nx=3, ny=1, nf=1, values=True) as w:
        w.write_frame(0.0, [1, 2], [5.0, 6.0])
    raw = bytearray(p.read_bytes())
    # frame 0: time (8), count (4), entries (index i32, value f32): rewrite entry 1 to neuron 1.
    raw[80 + 12 + 8 : 80 + 12 + 12] = struct.pack("<i", 1)
    p.write_bytes(bytes(raw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = tensorfmt.load(p)["values"]
        got = xr.open_dataset(p, engine="tensorfmt")["values"].data.todense()
    assert same(got, want) and want[0, 0, 1, 0] == 6.0


def test_guess_can_open_answers_from_content(tmp_path):
    e = xarray_backend.TensorfmtBackendEntrypoint()
    pvp = tmp_path / "movie.dat"
    shutil.copy(TESTDATA / "pvp/dense_f32.pvp", pvp)
    assert e.guess_can_open(pvp)
    fake = tmp_path / "fake.pvp"
    fake.write_bytes(b"not a tensor file at all" * 10)
    assert not e.guess_can_open(fake)
    nc = tmp_path / "x.nc"
    nc.write_bytes(b"CDF\x01" + bytes(100))
    assert not e.guess_can_open(nc)
    assert not e.guess_can_open(tmp_path / "missing.pvp")
    with open(pvp, "rb") as f:  # noqa: PTH123
        assert not e.guess_can_open(f)
        with pytest.raises(tensorfmt.InvalidArgumentError, match="by path"):
            xr.open_dataset(f, engine="tensorfmt")
    # A directory holding a tensor file (a zarr store with a stray .npy) is not claimed:
    # open_dataset opens files; trees need engine="tensorfmt".
    (tmp_path / "store").mkdir()
    shutil.copy(pvp, tmp_path / "store" / "m.pvp")
    assert not e.guess_can_open(tmp_path / "store")
    assert xr.open_dataset(pvp)["values"].shape == (3, 2, 3, 2)  # engine found by content


def test_openpv_output_directory_opens_as_a_tree(tmp_path):
    out = tmp_path / "output"
    (out / "Checkpoints" / "Checkpoint0010").mkdir(parents=True)
    shutil.copy(TESTDATA / "pvp/dense_f32.pvp", out / "V1.pvp")
    shutil.copy(TESTDATA / "pvp/sparse_binary.pvp", out / "S1.pvp")
    shutil.copy(TESTDATA / "pvp/kernel_f32.pvp", out / "Checkpoints" / "Checkpoint0010" / "W_V1.pvp")
    (out / "Checkpoints" / "Checkpoint0010" / "timers.txt").write_text("not a tensor file\n")
    (out / "params.lua").write_text("-- params\n")
    tree = xr.open_datatree(out, engine="tensorfmt")
    assert sorted(tree.children) == ["Checkpoints", "S1", "V1"]
    node = tree["Checkpoints/Checkpoint0010/W_V1"]
    assert node["weights"].dims == ("frame", "arbor", "patch", "nyp", "nxp", "nfp")
    assert same(node["weights"].values, tensorfmt.load(TESTDATA / "pvp/kernel_f32.pvp")["weights"])
    assert same(tree["V1"]["values"].values, tensorfmt.load(TESTDATA / "pvp/dense_f32.pvp")["values"])
    assert isinstance(tree["S1"]["values"].data, sparse.COO)
    groups = xr.open_groups(out, engine="tensorfmt")
    assert "/Checkpoints/Checkpoint0010/W_V1" in groups


def test_datatree_leaves_out_a_file_that_does_not_open(tmp_path):
    """One damaged file in a run's output: its node is left out with a warning and
    listed in the root's tensorfmt_not_read; strict=True refuses the whole tree (the
    tree used to fail as a whole, always)."""
    out = tmp_path / "output"
    out.mkdir()
    shutil.copy(TESTDATA / "pvp/dense_f32.pvp", out / "V1.pvp")
    shutil.copy(TESTDATA / "caffe/axes33.binaryproto", out / "bad.binaryproto")
    with pytest.warns(tensorfmt.TensorfmtWarning, match="bad.binaryproto"):
        tree = xr.open_datatree(out, engine="tensorfmt")
    assert sorted(tree.children) == ["V1"]
    assert list(tree.attrs["tensorfmt_not_read"]) == ["/bad"]
    assert "33" in tree.attrs["tensorfmt_not_read"]["/bad"]
    with pytest.raises(tensorfmt.TensorfmtError, match="33"):
        xr.open_datatree(out, engine="tensorfmt", strict=True)
    # A tree whose files all open says nothing of it.
    (out / "bad.binaryproto").unlink()
    assert "tensorfmt_not_read" not in xr.open_datatree(out, engine="tensorfmt").attrs


def test_datatree_reports_a_damaged_file_whose_extension_is_ours(tmp_path):
    """A .pvp whose header is damaged (or that is empty) no format claims by content:
    it was left out silently, even with strict=True. A file named with one of our
    extensions goes to the not-read path; .bin and .data, which other programs use too
    (OpenPV checkpoints write timeinfo.bin, ONNX external data is often x.data), only
    when their first bytes begin like a PINK / primitiv header."""
    out = tmp_path / "run"
    out.mkdir()
    good = (TESTDATA / "pvp/dense_f32.pvp").read_bytes()
    (out / "good.pvp").write_bytes(good)
    (out / "bad_header.pvp").write_bytes(b"\0\0\0\0" + good[4:])
    (out / "empty.pvp").write_bytes(b"")
    pink = (TESTDATA / "som/data_f32_2x3.bin").read_bytes()
    assert pink[:4] == (2).to_bytes(4, "little")
    (out / "cut.bin").write_bytes(pink[:-4])  # a PINK file cut short
    (out / "timeinfo.bin").write_bytes(np.array([10.0], "<f8").tobytes() + b"\1\0\0\0")  # OpenPV's
    (out / "notes.data").write_bytes(b"not primitiv")
    (out / ".hidden.pvp").write_bytes(b"")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tree = xr.open_datatree(out, engine="tensorfmt")
    assert tree.groups == ("/", "/good")
    not_read = tree.attrs["tensorfmt_not_read"]
    assert sorted(not_read) == ["/bad_header", "/cut", "/empty"]
    assert "headersize = 0" in not_read["/bad_header"] and "truncated" in not_read["/empty"]
    warned = sorted(str(w.message).split(":")[0] for w in caught if issubclass(w.category, tensorfmt.TensorfmtWarning))
    assert warned == [str(out / n) for n in ("bad_header.pvp", "cut.bin", "empty.pvp")]
    with pytest.raises(tensorfmt.TensorfmtError, match="bad_header.pvp"):
        xr.open_datatree(out, engine="tensorfmt", strict=True)


def test_pink_job_opens_as_a_tree(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for src, dst in [
        ("som/data_f32_2x3.bin", "images.bin"),
        ("som/som_hex5_pink.bin", "som.bin"),
        ("som/map_hex3_pink.bin", "mapping.bin"),
        ("som/rotflip_hex3_pink.bin", "rotflip.bin"),
    ]:
        shutil.copy(TESTDATA / src, job / dst)
    tree = xr.open_datatree(job, engine="tensorfmt")
    assert sorted(tree.children) == ["images", "mapping", "rotflip", "som"]
    assert tree["som"]["som"].dims[0] == "neuron" and "q" in tree["som"].coords
    assert tree["mapping"]["distances"].dims == ("entry", "neuron")
    assert tree["images"]["data"].dims[0] == "entry"
    for node, path in [("rotflip", "rotflip.bin"), ("mapping", "mapping.bin"), ("images", "images.bin")]:
        want = tensorfmt.load(job / path)
        for name, w in want.items():
            assert same(tree[node][name].values, w), (node, name)


def test_drop_variables_and_corpus_directories():
    ds = xr.open_dataset(TESTDATA / "pvp/dense_f32.pvp", engine="tensorfmt", drop_variables=["time"])
    assert list(ds.variables) == ["values"]
    root = corpus_dir() / "pvp" / "BufferUtilsPvpTest"
    if not root.is_dir():
        return
    tree = xr.open_datatree(root, engine="tensorfmt")
    assert sorted(tree.children) == sorted(p.stem for p in root.glob("*.pvp"))


def test_safe_names_write_to_zarr_and_netcdf_and_match_the_parser(tmp_path):
    """``conv1/0`` is a group to zarr (to_zarr wrote it where open_zarr does not look)
    and refused by netCDF: ``safe_names=True`` gives the parser's names, each with its
    original, and the dataset round-trips through both."""
    p = TESTDATA / "caffe/v2_tiny.caffemodel"
    want = tensorfmt.load(p)
    ds = xr.open_dataset(p, engine="tensorfmt", safe_names=True)
    assert list(ds) == ["conv1.0", "conv1.1", "ip.0"]
    # Dimensions named after a tensor follow its name: no `/` anywhere.
    assert ds["ip.0"].dims == ("ip.0_dim0", "ip.0_dim1")
    assert not any("/" in d for d in ds.dims)
    assert {ds[v].attrs["tensorfmt_name"] for v in ds} == set(want)
    ds.to_zarr(tmp_path / "w.zarr", zarr_format=3)
    back = xr.open_zarr(tmp_path / "w.zarr", zarr_format=3)
    for v in ds:
        np.testing.assert_array_equal(back[v].values, want[ds[v].attrs["tensorfmt_name"]])
    if importlib.util.find_spec("scipy") is not None:
        # netCDF attributes are flat: the header's nested ones (a Caffe net's layer
        # list) go first.
        ds.drop_attrs(deep=False).to_netcdf(tmp_path / "w.nc", engine="scipy")
        nc = xr.open_dataset(tmp_path / "w.nc", engine="scipy")
        np.testing.assert_array_equal(nc["ip.0"].values, want["ip/0"])
    # drop_variables takes either name; names without `/` are untouched.
    assert list(xr.open_dataset(p, engine="tensorfmt", safe_names=True, drop_variables=["conv1/0", "ip.0"])) == ["conv1.1"]
    assert list(xr.open_dataset(TESTDATA / "pvp/dense_f32.pvp", engine="tensorfmt", safe_names=True)) == ["values"]
    (tmp_path / "run").mkdir()
    shutil.copy(p, tmp_path / "run" / "net.caffemodel")
    tree = xr.open_datatree(tmp_path / "run", engine="tensorfmt", safe_names=True)
    assert "conv1.0" in tree["net"].dataset


def test_sparse_chunks_are_bounded_and_chunk_sparse_keeps_coo_blocks(tmp_path, monkeypatch):
    """chunks={} (open_mfdataset's default) made ONE numpy block of a whole sparse file
    (256 MiB for a 52 KB file): its chunks are now bounded as a dense movie's, and
    ``chunk_sparse`` gives dask arrays of COO blocks (xarray's own chunking makes numpy
    blocks of every backend array)."""
    da = require_module("dask.array")
    p = tmp_path / "spikes.pvp"
    rng = np.random.default_rng(0)
    with tensorfmt.pvp.SparseWriter(p, nx=64, ny=32, nf=8) as w:
        for t in range(40):
            idx = np.unique(rng.integers(0, 64 * 32 * 8, 20))
            w.write_frame(float(t), idx, np.full(len(idx), t + 1, np.float32))
    want = tensorfmt.load(p)["values"]
    frame_bytes = 64 * 32 * 8 * 4
    monkeypatch.setattr(xarray_backend, "PREFERRED_CHUNK_BYTES", frame_bytes * 8)
    ds = xr.open_dataset(p, engine="tensorfmt", chunks={})
    assert ds["values"].chunks[0] == (8,) * 5
    assert ds["values"].encoding["preferred_chunks"] == {"frame": 8}
    assert float(ds["values"].sum()) == float(want.sum())
    lazy = xr.open_dataset(p, engine="tensorfmt")
    s = xarray_backend.chunk_sparse(lazy)
    v = s["values"].data
    assert isinstance(v, da.Array) and v.chunks[0] == (8,) * 5
    assert isinstance(v._meta, sparse.COO) and isinstance(v.blocks[2].compute(), sparse.COO)
    assert same(v.compute().todense(), want)
    mean = s["values"].mean("frame").compute().data
    assert isinstance(mean, sparse.COO) and np.allclose(mean.todense(), want.mean(0))
    assert s["time"].values.tolist() == lazy["time"].values.tolist()
    assert xarray_backend.chunk_sparse(lazy["values"], frames=16).data.chunks[0] == (16, 16, 8)
    # Indexed first: the blocks read the frames kept.
    part = xarray_backend.chunk_sparse(lazy.isel(frame=slice(5, 12)), frames=3)["values"].data
    assert part.chunks[0] == (3, 3, 1) and same(part.compute().todense(), want[5:12])
    # Dense files and variables pass through untouched; other objects are refused.
    d = xr.open_dataset(TESTDATA / "pvp/dense_f32.pvp", engine="tensorfmt")
    assert xarray_backend.chunk_sparse(d)["values"].chunks is None
    with pytest.raises(tensorfmt.InvalidArgumentError, match="Dataset or DataArray"):
        xarray_backend.chunk_sparse(np.zeros(3))
    with pytest.raises(tensorfmt.InvalidArgumentError, match="frames"):
        xarray_backend.chunk_sparse(lazy, frames=0)


def test_datatree_of_caffe_files_opens_with_safe_names_by_default(tmp_path):
    """A DataTree refuses variables named with '/': Caffe's ``conv1/0`` failed every
    tree holding a Caffe file unless safe_names=True was given."""
    d = tmp_path / "nets"
    d.mkdir()
    shutil.copy(TESTDATA / "caffe/v2_tiny.caffemodel", d / "tiny.caffemodel")
    shutil.copy(TESTDATA / "pvp/dense_f32.pvp", d / "V1.pvp")
    tree = xr.open_datatree(d, engine="tensorfmt")
    assert sorted(tree["tiny"].data_vars) == ["conv1.0", "conv1.1", "ip.0"]
    assert tree["tiny"]["conv1.0"].attrs["tensorfmt_name"] == "conv1/0"
    want = tensorfmt.load(TESTDATA / "caffe/v2_tiny.caffemodel")
    assert same(tree["tiny"]["ip.0"].values, want["ip/0"])
    single = xr.open_datatree(TESTDATA / "caffe/v2_tiny.caffemodel", engine="tensorfmt")
    assert "conv1.0" in single.ds
    with pytest.raises(tensorfmt.InvalidArgumentError, match=r"tiny\.caffemodel.*safe_names=True"):
        xr.open_datatree(d, engine="tensorfmt", safe_names=False)


def test_a_file_beside_a_folder_of_its_name_is_its_own_node(tmp_path):
    """``run.pvp`` beside ``run/`` became the parent node of the folder's files, and
    xarray refused the whole tree (its frame and time are not the children's)."""
    d = tmp_path / "out"
    (d / "run").mkdir(parents=True)
    shutil.copy(TESTDATA / "pvp/dense_f32.pvp", d / "run.pvp")
    shutil.copy(TESTDATA / "pvp/kernel_f32.pvp", d / "run" / "w.pvp")
    shutil.copy(TESTDATA / "pvp/dense_f32.pvp", d / "a.pvp")
    np.save(d / "a.npy", np.arange(3))
    np.save(d / "a.pvp.npy", np.arange(4))  # its stem is the whole name of a.pvp
    tree = xr.open_datatree(d, engine="tensorfmt")
    assert sorted(n.path for n in tree.subtree) == ["/", "/a.npy", "/a.pvp", "/a.pvp.npy", "/run", "/run.pvp", "/run/w"]
    assert tree["run.pvp"]["values"].shape == (3, 2, 3, 2) and "values" not in tree["run"].ds
    assert tree["run/w"]["weights"].dims[0] == "frame"


def test_guess_can_open_claims_only_zips_of_npy_files(tmp_path):
    """Every zip archive was claimed as npz (a .docx, notes.zip), so xr.open_dataset
    without an engine picked tensorfmt and failed instead of saying no engine matches."""
    import zipfile

    e = xarray_backend.TensorfmtBackendEntrypoint()
    notes = tmp_path / "notes.zip"
    with zipfile.ZipFile(notes, "w") as z:
        z.writestr("readme.txt", "hello")
    mixed = tmp_path / "mixed.zip"
    with zipfile.ZipFile(mixed, "w") as z:
        z.writestr("a.npy", b"")
        z.writestr("word/document.xml", "<x/>")
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    for p in (notes, mixed, empty):
        assert not e.guess_can_open(p), p
    with pytest.raises(ValueError, match="did not find a match"):
        xr.open_dataset(notes)
    npz = tmp_path / "arrays.bin"
    np.savez(npz, a=np.arange(3), b=np.ones(2))
    stored = tmp_path / "deflated.npz"
    np.savez_compressed(stored, a=np.arange(3))
    for p in (tmp_path / "arrays.bin.npz", stored):
        assert e.guess_can_open(p), p
    assert xr.open_dataset(stored)["a"].values.tolist() == [0, 1, 2]
    # In a tree, a stray zip of notes is not a node (it failed the whole tree).
    (tmp_path / "tree").mkdir()
    shutil.copy(notes, tmp_path / "tree" / "notes.zip")
    shutil.copy(stored, tmp_path / "tree" / "arrays.npz")
    assert sorted(xr.open_datatree(tmp_path / "tree", engine="tensorfmt").children) == ["arrays"]


def test_3d_map_axes_are_named_as_map_axes():
    s = xr.open_dataset(TESTDATA / "som/som_cart_2x2x2.bin", engine="tensorfmt")
    assert s["som"].dims == ("neuron_z", "neuron_y", "neuron_x", "y", "x")
    m = xr.open_dataset(TESTDATA / "som/mapping/map_cart2x2x2_16.bin", engine="tensorfmt")
    assert m["distances"].dims == ("entry", "neuron_z", "neuron_y", "neuron_x")
    c = xr.open_dataset(TESTDATA / "som/mapping/som_cart3x3_2ch.bin", engine="tensorfmt")
    assert c["som"].dims == ("neuron_y", "neuron_x", "channel", "y", "x")  # a channel of the neurons, not the map
