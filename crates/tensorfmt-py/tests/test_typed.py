"""Per-format typed access (issue 13): `tensorfmt.caffe` (layers, legacy dims, diff,
solver state), `tensorfmt.som` (layout, hexagonal axial coordinates, best matches,
rotation/flip), `tensorfmt.primitiv` (nested parameters, stats, batch, optimizer).
Checked against the corpus' documented values (SOURCES.md) and the repo's fixtures."""


import numpy as np
import pytest

import tensorfmt
import tensorfmt.caffe as caffe
import tensorfmt.primitiv as primitiv
import tensorfmt.som as som

from conftest import TESTDATA, require_corpus


# --- caffe --------------------------------------------------------------------------


def test_caffe_v1_model_layers_with_legacy_dims():
    d = require_corpus("caffe")
    net = caffe.open(d / "v1_cifar10_quick_iter_4000.caffemodel")
    assert (net.kind, net.name, net.version, len(net)) == ("caffemodel", "CIFAR10_quick", "V1", 13)
    conv1 = net["conv1"]
    assert conv1.type == "Convolution"
    assert [b.legacy for b in conv1.blobs] == [(32, 3, 5, 5), (1, 1, 1, 32)]
    assert [b.shape for b in conv1.blobs] == [(32, 3, 5, 5), (1, 1, 1, 32)]
    ip1 = net["ip1"].blobs[0]
    assert (ip1.legacy, ip1.data.shape, ip1.diff) == ((1, 1, 64, 1024), (1, 1, 64, 1024), None)
    # The flat dict squeezes what the typed view keeps.
    assert tensorfmt.load(d / "v1_cifar10_quick_iter_4000.caffemodel")["ip1/0"].shape == (64, 1024)
    np.testing.assert_array_equal(ip1.data.reshape(64, 1024), tensorfmt.load(d / "v1_cifar10_quick_iter_4000.caffemodel")["ip1/0"])
    assert sum(b.data.size for l in net for b in l.blobs) == 145578
    assert not ip1.data.flags.writeable
    assert set(net.weights()) == {"conv1", "conv2", "conv3", "ip1", "ip2"}
    with pytest.raises(KeyError):
        net["nope"]


def test_caffe_v2_model_and_solver_state_and_mean():
    d = require_corpus("caffe")
    net = caffe.open(d / "v2_lenet_iter_10000.caffemodel")
    assert (net.name, net.version) == ("LeNet", "V2")
    assert [b.shape for b in net["ip1"].blobs] == [(500, 800), (500,)]
    assert all(b.legacy is None and b.source == "data" for l in net for b in l.blobs)
    state = caffe.open(d / "v1_cifar10_quick_iter_4000.solverstate")
    assert (state.kind, state.iter, state.current_step) == ("solverstate", 4000, 0)
    assert state.learned_net == "examples/cifar10/cifar10_quick_iter_4000.caffemodel"
    model = caffe.open(d / "v1_cifar10_quick_iter_4000.caffemodel")
    learnable = [b for l in model for b in l.blobs]
    assert [h.legacy for h in state.history] == [b.legacy for b in learnable]
    mean = caffe.open(d / "mean_227.binaryproto")
    assert mean.kind == "binaryproto" and len(mean.blobs) == 1
    assert mean.blobs[0].data.shape[1] == 3


def test_caffe_diff_and_double_data_fixtures(tmp_path):
    vec = caffe.open(TESTDATA / "caffe" / "two.blobprotovector")
    assert vec.kind == "blobprotovector" and [b.shape for b in vec.blobs] == [(2,), (1, 1)]
    wins = caffe.open(TESTDATA / "caffe" / "double_wins.binaryproto")
    assert wins.blobs[0].source == "double_data" and wins.blobs[0].data.dtype == np.float64
    # A blob written with a diff: the typed view gives it, beside the data.
    def varint(n):
        out = b""
        while True:
            b = n & 0x7F
            n >>= 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def packed(field, values):
        raw = np.asarray(values, "<f4").tobytes()
        return varint(field << 3 | 2) + varint(len(raw)) + raw

    shape = varint(7 << 3 | 2) + varint(3) + varint(1 << 3 | 2) + varint(1) + varint(2)
    blob = shape + packed(5, [1.0, 2.0]) + packed(6, [0.25, -0.5])
    path = tmp_path / "with_diff.binaryproto"
    path.write_bytes(blob)
    b = caffe.open(path, kind="binaryproto").blobs[0]
    assert b.data.tolist() == [1.0, 2.0] and b.diff.tolist() == [0.25, -0.5]


def test_caffe_errors_are_exceptions():
    with pytest.raises(tensorfmt.FormatError):
        caffe.open(TESTDATA / "caffe" / "axes33.binaryproto")
    with pytest.raises(tensorfmt.InvalidArgumentError):
        caffe.open(TESTDATA / "caffe" / "two.blobprotovector", kind="pickle")
    with pytest.raises(FileNotFoundError):
        caffe.open(TESTDATA / "caffe" / "missing.caffemodel")


def test_caffe_blob_vector_blob_i_is_blobs_i(tmp_path):
    """The BlobProtoVector writer took the arrays in dict order: ``blobs/1`` before
    ``blobs/0`` swapped them, twelve in name order came out 0, 1, 10, 11, 2, ..., and
    ``blobs/0, blobs/5`` became 0, 1. Blob i is the array named ``blobs/i``; a gap is
    an error, as for a solver state's history."""
    p = tmp_path / "v.blobprotovector"
    x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    tensorfmt.save(p, {"blobs/1": y, "blobs/0": x}, to="blobprotovector")
    blobs = caffe.open(p).blobs
    np.testing.assert_array_equal(blobs[0].data, x)
    np.testing.assert_array_equal(blobs[1].data, y)
    twelve = {f"blobs/{i}": np.full(2, i, np.float32) for i in sorted(range(12), key=str)}
    tensorfmt.save(p, twelve, to="blobprotovector")
    assert [int(b.data[0]) for b in caffe.open(p).blobs] == list(range(12))
    with pytest.raises(tensorfmt.TensorfmtError, match="blobs/5"):
        tensorfmt.save(tmp_path / "gap.blobprotovector", {"blobs/0": x, "blobs/5": y}, to="blobprotovector")
    assert not (tmp_path / "gap.blobprotovector").exists()


# --- som ----------------------------------------------------------------------------


def test_som_hexagonal_map_axial_coordinates():
    d = require_corpus("som") / "generated_v2"
    s = som.open(d / "som_hex3.bin")
    assert (s.kind, s.layout, s.layout_inferred, s.map_shape) == ("som", "hexagonal", True, (3, 3))
    assert (len(s), s.item_shape, s.neurons.shape) == (7, (23, 23), (7, 23, 23))
    ax = s.axial()
    assert ax.shape == (7, 2)
    # The seven cells of a side-3 hexagon: the centre and its six neighbours.
    cells = {tuple(c) for c in ax.tolist()}
    assert len(cells) == 7
    centre = [c for c in cells if all((c[0] + dq, c[1] + dr) in cells for dq, dr in
                                      [(1, 0), (-1, 0), (0, 1), (0, -1), (1, -1), (-1, 1)])]
    assert len(centre) == 1
    np.testing.assert_array_equal(s.neuron(3), s.neurons[3])
    assert som.open(d / "som_hex5.bin").axial().shape == (19, 2)


def test_som_mapping_best_matches_and_rotflip():
    d = require_corpus("som") / "generated_v2"
    m = som.open(d / "map_cart3x3.bin")
    assert (m.kind, m.layout, len(m), m.distances.shape) == ("mapping", "cartesian", 12, (12, 3, 3))
    best = m.best_matches()
    np.testing.assert_array_equal(best, m.distances.reshape(12, -1).argmin(axis=1))
    counts = m.bmu_counts()
    assert counts.sum() == 12 and counts.shape == (9,)
    np.testing.assert_array_equal(counts, np.bincount(best, minlength=9))
    r = som.open(d / "rotflip_hex5.bin")
    assert (r.kind, r.layout, len(r), r.flip.shape) == ("rotflip", "hexagonal", 12, (12, 19))
    flipped, angle, index = r.rotflip(0, 0, num_rot=8)
    # The first spelling still works, with a DeprecationWarning.
    with pytest.warns(DeprecationWarning, match="num_rot"):
        assert r.rotflip(0, 0, numrot=8) == (flipped, angle, index)
    assert flipped == bool(r.flip[0, 0]) and angle == pytest.approx(float(r.angle[0, 0]))
    assert 0 <= index < 16
    with pytest.raises(tensorfmt.InvalidArgumentError):
        r.neurons


def test_som_data_file_and_comments():
    s = som.open(TESTDATA / "som" / "data_f32_2ch_comments.bin")
    assert (s.kind, s.layout, len(s), s.item_shape) == ("data", None, 3, (2, 2, 2))
    assert s.comments == ["# two channels", "# made by xtask"]
    assert s.entries.shape == (3, 2, 2, 2)
    with pytest.raises(tensorfmt.TensorfmtError):
        s.best_matches()


# --- primitiv -----------------------------------------------------------------------


def test_primitiv_model_nested_parameters_and_stats():
    m = primitiv.open(TESTDATA / "primitiv" / "model_nested_adam.data")
    assert m.kind == "model"
    assert sorted(m.parameters) == sorted(
        ["b", "dec.attn.a_parameter_name_that_is_exactly_40_char", "dec.w", "enc.w", "w"]
    )
    w = m.parameters["dec.w"]
    assert (w.dims, w.batch, sorted(w.stats)) == ((2, 2), 1, ["Adam.m1", "Adam.m2"])
    flat = tensorfmt.load(TESTDATA / "primitiv" / "model_nested_adam.data")
    np.testing.assert_array_equal(w.stats["Adam.m2"], flat["dec.w/Adam.m2"])
    tree = m.tree()
    assert tree["dec"]["w"] is w and tree["enc"]["w"] is m.parameters["enc.w"]
    assert set(tree["dec"]) == {"w", "attn"}


def test_primitiv_model_lists_every_parameter(tmp_path):
    """The document's header describes only a model's first 32 parameters; the typed
    view must still have all of them (it silently stopped at 32)."""
    n = 75
    arrays = {f"layer{i:03d}.w": np.full((2, 3), i, np.float32) for i in range(n)}
    arrays.update({f"layer{i:03d}.w/Adam.m1": np.full((2, 3), -i, np.float32) for i in range(n)})
    path = tmp_path / "big.data"
    tensorfmt.save(path, arrays, to="primitiv:model")
    m = primitiv.open(path)
    assert len(m.parameters) == n and m.header["parameters"] == n
    last = m.parameters[f"layer{n - 1:03d}.w"]
    assert (last.dims, last.batch, sorted(last.stats)) == ((2, 3), 1, ["Adam.m1"])
    np.testing.assert_array_equal(last.value, np.full((2, 3), n - 1, np.float32))
    np.testing.assert_array_equal(last.stats["Adam.m1"], np.full((2, 3), 1 - n, np.float32))
    assert len(m.tree()) == n


def test_primitiv_parameter_tensor_shape_optimizer():
    p = primitiv.open(TESTDATA / "primitiv" / "parameter_2x3_stats.data").parameter
    assert (p.dims, p.value.shape) == ((2, 3), (2, 3))
    assert p.stat_shapes["batched"] == ((3,), 2) and p.stats["batched"].shape == (3, 2)
    t = primitiv.open(TESTDATA / "primitiv" / "tensor_3x2_batch2.data")
    assert (t.kind, t.dims, t.batch, t.tensor.shape) == ("tensor", (3, 2), 2, (3, 2, 2))
    s = primitiv.open(TESTDATA / "primitiv" / "shape_4x3_batch2.data")
    assert (s.kind, s.dims, s.batch, s.tensor) == ("shape", (4, 3), 2, None)
    o = primitiv.open(TESTDATA / "primitiv" / "optimizer_adam.data").optimizer
    assert o.name == "Adam" and o.uint_configs == {"Optimizer.epoch": 12}
    assert o.float_configs["Adam.beta1"] == pytest.approx(0.8)
    with pytest.raises(tensorfmt.InvalidArgumentError):
        primitiv.open(TESTDATA / "primitiv" / "optimizer_adam.data").tree()


# The modules' examples run in test_docs.py, each in its own directory (here they would
# write their files into the working directory).


def test_reprs_of_typed_records_show_shapes_not_values(tmp_path):
    # A record's repr is read in a REPL: it names dtypes and shapes, and stays one short
    # line whatever the size of the arrays behind it.
    net = caffe.open(TESTDATA / "caffe" / "two.blobprotovector")
    blob = net.blobs[0]
    assert repr(blob).startswith(f"Blob({blob.data.dtype}{list(blob.data.shape)}")
    p = primitiv.open(TESTDATA / "primitiv" / "parameter_2x3_stats.data").parameter
    assert repr(p).startswith("Parameter('value', value=float32[2, 3], dims=(2, 3), batch=1, stats={")
    assert "batched: float32[3, 2]" in repr(p)
    import tensorfmt.pvp as pvp

    big = np.arange(64 * 64 * 8, dtype=np.float32).reshape(1, 64, 64, 8)
    path = tmp_path / "movie.pvp"
    tensorfmt.save(path, {"values": big})
    assert repr(pvp.open(path)[0]) == "Frame(0, time=0.0, values=float32[64, 64, 8])"
    layer = caffe.Layer("conv1", "Convolution", [blob])
    assert repr(layer) == f"Layer('conv1', 'Convolution', blobs=[{blob.data.dtype}{list(blob.data.shape)}])"


def test_review_typed_pvp_som_caffe_answers(tmp_path):
    """pvp.open warns for a sparse file cut short as for a dense one; a repeated
    sparse index keeps its last value in to_scipy as everywhere else; a legacy MPI
    file's shape is its assembled frame's; weight_geometry of an activity file and a
    rotflip numrot PINK refuses are TensorfmtErrors; a blob's absent legacy fields
    read as 0 (caffe.proto's default)."""
    import struct
    import warnings

    import tensorfmt.pvp as P

    def header(ft, ds, dt, nbands):
        return struct.pack("<18i", 80, 20, ft, 2, 2, 1, 1, 0, ds, dt, 1, 1, 2, 2, 0, 0, 1, nbands) + struct.pack("<d", 0.0)

    cut = tmp_path / "cut.pvp"
    cut.write_bytes(header(6, 8, 3, 2) + struct.pack("<diIf", 1.0, 1, 1, 1.0) + struct.pack("<di", 2.0, 3) + struct.pack("<If", 0, 1.0))
    with pytest.warns(tensorfmt.TensorfmtWarning):
        P.open(cut)
    dup = tmp_path / "dup.pvp"
    dup.write_bytes(header(6, 8, 3, 1) + struct.pack("<diIfIf", 1.0, 2, 1, 1.0, 1, 2.0))
    f = P.open(dup)
    assert f.to_scipy().toarray().ravel().tolist() == tensorfmt.load(dup)["values"].ravel().tolist() == [0, 2, 0, 0]
    with pytest.raises(tensorfmt.InvalidArgumentError, match="no weight geometry"):
        f.weight_geometry
    a6 = require_corpus("pvp") / "legacy" / "GPUSystemTest" / "a6.pvp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = P.open(a6)
        assert m.shape == m[0].values.shape == tensorfmt.load(a6)["values"].shape[1:]
    rf = som.open(TESTDATA / "som" / "rotflip_cart_2x2.bin")
    for bad in (0, 3):
        with pytest.raises(tensorfmt.InvalidArgumentError, match="num_rot"):
            rf.rotflip(0, 0, bad)
    width_only = tmp_path / "w.binaryproto"
    width_only.write_bytes(bytes([0x20, 5]))
    b = caffe.open(width_only, kind="binaryproto").blobs[0]
    assert b.legacy == (0, 0, 0, 5) and b.shape == (0, 0, 0, 5)
