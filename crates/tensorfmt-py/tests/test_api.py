"""The public API: open / load / save / convert / diff / validate, zero copy and lifetimes."""

import gc
import os
import threading
import warnings

import numpy as np
import pytest

import tensorfmt
from conftest import TESTDATA, fixtures, require_module

DENSE = TESTDATA / "pvp" / "dense_f32.pvp"


def test_document_is_a_lazy_read_only_mapping():
    with tensorfmt.open(DENSE) as doc:
        assert doc.format == "pvp"
        assert doc.kind == "dense" and doc.description.startswith("dense")
        assert "values" in doc and len(doc) == len(list(doc))
        info = doc.info("values")
        assert info.dtype == np.float32 and len(info.shape) == 4
        arr = doc["values"]
        assert arr.shape == info.shape and arr.dtype == info.dtype
        assert isinstance(doc.header, dict) and doc.header
        assert isinstance(doc.warnings, list)
        with pytest.raises(KeyError):
            doc["nope"]
        with pytest.raises(tensorfmt.TensorNotFoundError):
            doc["nope"]
        with pytest.raises(TypeError):
            doc["values"] = arr  # a read-only Mapping
    assert doc.closed
    with pytest.raises(tensorfmt.ClosedError):
        doc["values"]


def test_arrays_are_zero_copy_views_of_the_mapping():
    doc = tensorfmt.open(DENSE)
    a = doc["values"]
    b = doc["values"]
    assert np.shares_memory(a, b)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[...] = 0
    # The base chain ends in the native buffer that owns the mapped bytes.
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    assert type(base).__name__ == "Array" and type(base).__module__ == "tensorfmt._native"
    doc.close()


def test_array_outlives_its_document():
    doc = tensorfmt.open(DENSE)
    expected = np.array(doc["values"])  # a copy, for reference
    view = doc["values"]
    doc.close()
    del doc
    gc.collect()
    np.testing.assert_array_equal(view, expected)
    assert float(view.sum()) == float(expected.sum())


def test_every_fixture_opens_and_reads(tmp_path):
    for path in fixtures():
        dump = path.with_name(path.name + ".dump").read_text()
        if dump.startswith("error:"):
            # A fixture of a file the original refuses: refused in strict mode, with the
            # reason the golden dump gives.
            with pytest.raises(tensorfmt.FormatError):
                tensorfmt.load(path, strict=True)
            continue
        with tensorfmt.open(path) as doc:
            assert len(doc) > 0 or doc.kind in ("optimizer", "shape"), path
            for name in doc:
                arr = doc[name]
                assert arr.shape == doc.info(name).shape, (path, name)


def test_load_returns_a_plain_dict():
    arrays = tensorfmt.load(TESTDATA / "core" / "mixed.npz")
    assert isinstance(arrays, dict) and arrays
    assert all(isinstance(v, np.ndarray) for v in arrays.values())


def test_fortran_and_big_endian_npy_read_right():
    f = tensorfmt.load(TESTDATA / "core" / "i16_fortran_2x3.npy")
    (arr,) = f.values()
    np.testing.assert_array_equal(arr, np.load(TESTDATA / "core" / "i16_fortran_2x3.npy"))
    g = tensorfmt.load(TESTDATA / "core" / "f64_be_3.npy")
    (arr,) = g.values()
    np.testing.assert_array_equal(arr, np.load(TESTDATA / "core" / "f64_be_3.npy"))


def test_bf16_is_bfloat16_with_ml_dtypes_else_widened_exactly(monkeypatch):
    with tensorfmt.open(TESTDATA / "core" / "bf16_4.npy") as doc:
        (name,) = list(doc)
        assert doc.info(name).stored_dtype == "bf16"
        got = doc[name]
        try:
            import ml_dtypes
        except ImportError:
            assert got.dtype == np.float32
        else:
            assert got.dtype == ml_dtypes.bfloat16
    # Without ml_dtypes: float32, every bf16 value exactly.
    import tensorfmt._api as api

    monkeypatch.setattr(api, "_bfloat16", lambda: None)
    with tensorfmt.open(TESTDATA / "core" / "bf16_4.npy") as doc:
        wide = doc[name]
        assert wide.dtype == np.float32 == doc.info(name).dtype
        np.testing.assert_array_equal(wide, got.astype(np.float32))


@pytest.mark.parametrize(
    "suffix,to",
    [("npy", None), ("npz", None), ("safetensors", None)],
)
def test_interop_round_trips_are_exact(tmp_path, suffix, to):
    rng = np.random.default_rng(1)
    dtypes = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
    for dt in dtypes:
        a = (rng.standard_normal((3, 4, 5)) * 50).astype(dt)
        p = tmp_path / f"x_{np.dtype(dt).name}.{suffix}"
        tensorfmt.save(p, {"x": a}, to=to)
        back = tensorfmt.load(p)
        (got,) = back.values()
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, a)


def test_any_strides_and_byte_order_are_saved_right(tmp_path):
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    cases = {
        "fortran": np.asfortranarray(base),
        "strided": base[:, ::2, 1:],
        "transposed": base.transpose(2, 0, 1),
        "big_endian": base.astype(">f8"),
        "list": base.tolist(),
    }
    for name, value in cases.items():
        p = tmp_path / f"{name}.safetensors"
        tensorfmt.save(p, {name: value})
        np.testing.assert_array_equal(tensorfmt.load(p)[name], np.asarray(value, dtype=np.float64))


def test_legacy_kinds_round_trip_exactly(tmp_path):
    rng = np.random.default_rng(2)
    frames = rng.standard_normal((3, 4, 5, 2)).astype(np.float32)
    cases = [
        ("dense.pvp", None, {"values": frames}),
        ("sparse.pvp", "pvp:sparse", {"values": np.where(frames > 0.5, frames, 0).astype(np.float32)}),
        ("images.bin", "som-data", {"images": rng.standard_normal((4, 3, 3)).astype(np.float32)}),
        ("mean.binaryproto", "caffe:binaryproto", {"mean": rng.standard_normal((3, 4, 4)).astype(np.float32)}),
        ("param.data", "primitiv:parameter", {"value": rng.standard_normal((2, 3)).astype(np.float32)}),
    ]
    for fname, to, arrays in cases:
        p = tmp_path / fname
        tensorfmt.save(p, arrays, to=to)
        with tensorfmt.open(p) as doc:
            (want,) = arrays.values()
            got = doc[list(doc)[0]]
            np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=fname)


def test_save_overwrites_like_numpy_unless_overwrite_false(tmp_path):
    p = tmp_path / "a.npz"
    tensorfmt.save(p, {"a": np.zeros(2)})
    tensorfmt.save(p, {"a": np.ones(2)})  # as np.save and safetensors' save_file do
    np.testing.assert_array_equal(tensorfmt.load(p)["a"], np.ones(2))
    with pytest.raises(FileExistsError):
        tensorfmt.save(p, {"a": np.full(2, 2.0)}, overwrite=False)
    np.testing.assert_array_equal(tensorfmt.load(p)["a"], np.ones(2))
    assert [f for f in os.listdir(tmp_path) if f != "a.npz"] == []


def test_convert_diff_validate(tmp_path):
    out = tmp_path / "dense.safetensors"
    assert sorted(tensorfmt.convert(DENSE, out)) == ["time", "values"]
    d = tensorfmt.diff(DENSE, out)
    assert d.equal and bool(d) and d["values"].max_abs_error == 0.0
    changed = tmp_path / "changed.safetensors"
    arrays = tensorfmt.load(out)
    arr = arrays["values"].copy()
    arr.flat[3] += 0.5
    tensorfmt.save(changed, {**arrays, "values": arr})
    d2 = tensorfmt.diff(out, changed)
    assert not d2.equal
    assert d2["values"].mismatched == 1 and d2["values"].max_abs_error == pytest.approx(0.5)
    assert tensorfmt.diff(out, changed, atol=0.6).equal
    assert repr(d) == "<DiffResult equal: 2 tensor(s) compared; max_abs_error=0>"
    assert repr(d2) == "<DiffResult different: 2 tensor(s) compared; 1 differ (values); max_abs_error=0.5>"
    report = tensorfmt.validate(out)
    assert report.ok and report.format == "safetensors" and report.error is None
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(out.read_bytes()[:-3])
    report = tensorfmt.validate(bad)
    assert not report and isinstance(report.error, tensorfmt.TensorfmtError)


def test_errors_are_tensorfmt_errors_with_builtin_bases(tmp_path):
    with pytest.raises(tensorfmt.TensorfmtFileNotFoundError) as e:
        tensorfmt.open(tmp_path / "missing.pvp")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, tensorfmt.TensorfmtError)
    assert "missing.pvp" in str(e.value)
    junk = tmp_path / "junk.pvp"
    junk.write_bytes(DENSE.read_bytes()[:50])
    with pytest.raises(tensorfmt.FormatError) as e:
        tensorfmt.load(junk, format="pvp")
    assert isinstance(e.value, ValueError)
    assert e.value.offset is not None
    with pytest.raises(tensorfmt.InvalidArgumentError):
        tensorfmt.save(tmp_path / "x.unknownext", {"a": np.zeros(1)})
    with pytest.raises(tensorfmt.UnsupportedError):
        tensorfmt.save(tmp_path / "o.npz", {"a": np.array(["text"])})


def test_decoding_releases_the_gil():
    # Several threads reading at once must all finish (and agree).
    results = []

    def work():
        with tensorfmt.open(DENSE) as doc:
            results.append(float(np.asarray(doc["values"], dtype=np.float64).sum()))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 8 and len(set(results)) == 1


def test_formats_lists_every_format():
    names = {f["name"] for f in tensorfmt.formats()}
    assert {"pvp", "som", "primitiv", "caffe", "npy", "npz", "safetensors"} <= names
    assert tensorfmt.detect(DENSE) == "pvp"
    pvp = next(f for f in tensorfmt.formats() if f["name"] == "pvp")
    assert {"setting": "nx=N>0", "kinds": ["sparse", "weights"]} in pvp["settings"]


@pytest.mark.parametrize(
    "name, arrays, settings, says",
    [
        ("a.pvp", {"values": np.ones((1, 2, 3, 4), np.float32)}, {"nx": 7}, "pvp dense file"),
        ("b.pvp", {"values": np.ones((1, 2, 3, 4), np.float32)}, {"sparse": "maybe"}, "binary, values"),
        ("c.caffemodel", {"ip/0": np.ones(3, np.float32)}, {"iter": 5}, "solverstate"),
        ("d.bin", {"som": np.ones((2, 2, 3, 3), np.float32)}, {"som_rank": 0}, "1, 2, 3"),
        ("e.data", {"value": np.ones(3, np.float32)}, {"batch_axis": "maybe"}, "true or false"),
    ],
)
def test_a_setting_is_used_or_refused(tmp_path, name, arrays, settings, says):
    # These were written with exit 0, the setting silently ignored.
    out = tmp_path / name
    with pytest.raises(tensorfmt.InvalidArgumentError, match=says):
        tensorfmt.save(out, arrays, settings=settings)
    assert not out.exists()


def test_save_without_fsync_is_still_atomic_and_exact(tmp_path):
    a = np.arange(1000, dtype=np.float32)
    for suffix in ("npy", "npz", "safetensors"):
        p = tmp_path / f"scratch.{suffix}"
        tensorfmt.save(p, {"a": a}, fsync=False)
        (got,) = tensorfmt.load(p).values()
        np.testing.assert_array_equal(got, a)
    assert sorted(os.listdir(tmp_path)) == ["scratch.npy", "scratch.npz", "scratch.safetensors"]


def test_writes_warn_where_the_original_program_will_not_read_them(tmp_path):
    images = np.ones((2, 3, 3), np.float32)
    with pytest.warns(tensorfmt.TensorfmtWarning, match="PINK 2.5 reads f32 payloads only"):
        tensorfmt.save(tmp_path / "u8.bin", {"data": images}, to="som-data", dtype="u8")
    assert tensorfmt.open(tmp_path / "u8.bin").info("data").stored_dtype == "u8"
    with pytest.warns(tensorfmt.TensorfmtWarning, match="wrote 1 of 2 tensors"):
        tensorfmt.save(tmp_path / "two.bin", {"data": images, "labels": np.arange(2.0)}, to="som-data")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensorfmt.save(tmp_path / "f32.bin", {"data": images}, to="som-data")
        assert tensorfmt.convert(tmp_path / "f32.bin", tmp_path / "f32.npz") == ["data"]


def test_validate_asks_what_the_original_program_accepts(tmp_path):
    data = DENSE.read_bytes()
    cut = tmp_path / "crashed.pvp"
    cut.write_bytes(data[:-20])  # a crash-truncated file: whole frames plus part of one
    r = tensorfmt.validate(cut)
    assert not r.ok and r.readable and isinstance(r.error, tensorfmt.TensorfmtError)
    assert tensorfmt.validate(cut, lenient=True).ok
    junk = tmp_path / "junk.pvp"
    junk.write_bytes(data[:40])
    r = tensorfmt.validate(junk)
    assert not r.ok and not r.readable
    assert tensorfmt.validate(DENSE).ok


def test_diff_compares_what_the_legacy_formats_distinguish(tmp_path):
    orig = TESTDATA / "caffe" / "v2_tiny.caffemodel"
    st = tmp_path / "t.safetensors"
    back = tmp_path / "back.caffemodel"
    # Converted to another dtype, the file's layout is not recorded (it would not fit
    # the tensors), so the model comes back from its tensors alone, without its name.
    tensorfmt.convert(orig, st, dtype="f64")
    assert "tensorfmt.source" not in tensorfmt.open(st).header
    tensorfmt.convert(st, back)
    d = tensorfmt.diff(orig, back)
    assert not d.equal and any(field == "name" for field, _, _ in d.header)
    assert tensorfmt.diff(orig, back, tensors_only=True, allow_dtype=True).equal
    assert tensorfmt.diff(orig, st, allow_dtype=True).equal  # across formats: tensors only
    exact = tmp_path / "exact.safetensors"
    tensorfmt.convert(orig, exact)
    assert tensorfmt.diff(orig, exact).equal


def test_onnx_external_data_reads_as_onnx_loads_it(tmp_path):
    """A model saved by onnx with its initializers in a file beside it (what exporters
    write past protobuf's 2 GB) reads equal to ``onnx.numpy_helper``, zero copy; a
    location outside the model's directory is refused, as ONNX's loader refuses it."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5)
    arrays = {
        "conv.weight": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
        "conv.bias": rng.standard_normal(8).astype(np.float32),
        "steps": np.arange(5, dtype=np.int64),
        "mask": np.array([True, False, True]),
    }
    graph = helper.make_graph([], "g", [], [], initializer=[numpy_helper.from_array(a, n) for n, a in arrays.items()])
    model = helper.make_model(graph)
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=0)
    assert os.path.getsize(path) < 512 < os.path.getsize(tmp_path / "model.onnx.data")
    want = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    got = tensorfmt.load(path)
    assert set(got) == set(arrays)
    for n in arrays:
        np.testing.assert_array_equal(got[n], want[n])
        np.testing.assert_array_equal(got[n], arrays[n])
    # Read from the data file's mapping, not copied.
    with tensorfmt.open(path) as doc:
        assert not doc["conv.weight"].flags.owndata
    out = tmp_path / "w.safetensors"
    tensorfmt.convert(path, out)
    np.testing.assert_array_equal(tensorfmt.load(out)["conv.bias"], arrays["conv.bias"])

    # Converted to ONNX elsewhere: not a copy of the 300-byte model alone (its data
    # would be missing there) but a self-contained model, which onnx opens; a model
    # with nodes keeps its graph (it was a weights-only model, said in a warning).
    (tmp_path / "elsewhere").mkdir()
    copy = tmp_path / "elsewhere" / "copy.onnx"
    tensorfmt.convert(path, copy)
    onnx.checker.check_model(str(copy), full_check=True)
    assert {t.name for t in onnx.load(str(copy)).graph.initializer} == set(arrays)
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8])
    node = helper.make_node("Add", ["x", "conv.bias"], ["y"])
    net = helper.make_model(helper.make_graph([node], "n", [x], [y], initializer=[numpy_helper.from_array(arrays["conv.bias"], "conv.bias")]))
    onnx.save_model(net, str(tmp_path / "net.onnx"), save_as_external_data=True, location="net.bin", size_threshold=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensorfmt.convert(tmp_path / "net.onnx", tmp_path / "elsewhere" / "net.onnx")
    moved = onnx.load(str(tmp_path / "elsewhere" / "net.onnx"))
    assert [n.op_type for n in moved.graph.node] == ["Add"]
    onnx.checker.check_model(moved, full_check=True)
    np.testing.assert_array_equal(numpy_helper.to_array(moved.graph.initializer[0]), arrays["conv.bias"])

    # Written with external data (automatic past 2 GiB; asked for here): onnx loads
    # and checks it, and it reads back.
    ext = tmp_path / "elsewhere" / "ext.onnx"
    bigger = {**arrays, "fc.weight": rng.standard_normal((64, 32)).astype(np.float32)}
    tensorfmt.save(ext, bigger, settings={"external_data": "true"})
    # Payloads of 1 KiB or more go beside (fc.weight); the small ones stay inline.
    assert os.path.getsize(tmp_path / "elsewhere" / "ext.onnx.data") == bigger["fc.weight"].nbytes
    onnx.checker.check_model(str(ext), full_check=True)
    loaded = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(ext)).graph.initializer}
    for n in bigger:
        np.testing.assert_array_equal(loaded[n], bigger[n])
        np.testing.assert_array_equal(tensorfmt.load(ext)[n], bigger[n])
    with pytest.raises(tensorfmt.TensorfmtError, match="true or false"):
        tensorfmt.save(tmp_path / "bad.onnx", arrays, settings={"external_data": "maybe"})
    assert not (tmp_path / "bad.onnx").exists() and not (tmp_path / "bad.onnx.data").exists()

    # The same model, its location pointing out of its directory.
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../model.onnx.data"
    inner = tmp_path / "inner"
    inner.mkdir()
    onnx.save_model(m, str(inner / "model.onnx"))
    with pytest.raises(tensorfmt.TensorfmtError, match=r"'\.\.' component"):
        tensorfmt.load(inner / "model.onnx")


def test_onnx_external_data_edges(tmp_path):
    """What review found around external data: an I/O error stays one; a data file
    shrunk under an open document fails validate(); a conversion never replaces the
    input's data file; bytes paths work."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    w = np.arange(600, dtype=np.float32)
    graph = helper.make_graph([], "g", [], [], initializer=[numpy_helper.from_array(w, "w")])
    model = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(graph), str(model), save_as_external_data=True, location="m.data", size_threshold=0)
    np.testing.assert_array_equal(tensorfmt.load(os.fsencode(model))["w"], w)

    # Replacing the input's own data file would break the model: refused, unchanged.
    before = (tmp_path / "m.data").read_bytes()
    with pytest.raises(tensorfmt.TensorfmtError, match="never overwritten"):
        tensorfmt.convert(model, tmp_path / "m.data", to="safetensors")
    assert (tmp_path / "m.data").read_bytes() == before

    doc = tensorfmt.open(model)
    os.truncate(tmp_path / "m.data", 100)
    assert float(doc["w"].sum()) != float(w.sum())  # zeros where the file vanished
    report = doc.validate()
    assert not report.ok and "changed" in str(report.error)
    doc.close()

    # A missing data file is a FileNotFoundError naming it and the tensor.
    (tmp_path / "m.data").unlink()
    with pytest.raises(FileNotFoundError, match="m.data") as e:
        tensorfmt.load(model)
    assert isinstance(e.value, tensorfmt.TensorfmtError) and '"w"' in str(e.value)


def test_onnx_sparse_initializers_are_read_dense(tmp_path):
    """graph.sparse_initializer weights were left out without a word (a conversion
    wrote the dense ones only): they read as the dense arrays onnx's numpy_helper gives,
    for linear and coordinate indices; indices outside the shape are refused."""
    onnx = require_module("onnx")
    from onnx import helper, numpy_helper

    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    linear = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "s"),
        numpy_helper.from_array(np.array([1, 5], np.int64), "s_idx"),
        [2, 3],
    )
    coords = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([7, 9], np.int64), "c"),
        numpy_helper.from_array(np.array([[0, 2], [1, 0]], np.int64), "c_idx"),
        [2, 3],
    )
    graph = helper.make_graph([], "g", [], [], initializer=[numpy_helper.from_array(dense, "d")],
                              sparse_initializer=[linear, coords])
    path = tmp_path / "sparse.onnx"
    onnx.save_model(helper.make_model(graph), str(path))
    got = tensorfmt.load(path)
    assert list(got) == ["d", "s", "c"]
    np.testing.assert_array_equal(got["s"], [[0, 1.5, 0], [0, 0, -2.0]])
    np.testing.assert_array_equal(got["c"], [[0, 0, 7], [9, 0, 0]])
    with tensorfmt.open(path) as doc:
        assert doc.header["sparse_initializers"] == 2
    bad = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0], np.float32), "b"),
        numpy_helper.from_array(np.array([6], np.int64), "b_idx"),
        [2, 3],
    )
    graph = helper.make_graph([], "g", [], [], sparse_initializer=[bad])
    onnx.save_model(helper.make_model(graph), str(tmp_path / "bad.onnx"))
    with pytest.raises(tensorfmt.FormatError, match="index 6 of value 0 is outside"):
        tensorfmt.load(tmp_path / "bad.onnx")


def test_onnx_weights_tensorfmt_cannot_hold_are_left_out_by_name(tmp_path):
    """A STRING (or FLOAT8, INT4, COMPLEX) initializer made every other weight of the
    model unreadable; a subgraph's initializers were skipped without a word."""
    onnx = require_module("onnx")
    from onnx import TensorProto, helper, numpy_helper

    strings = numpy_helper.from_array(np.array([b"a", b"b"], dtype=object), "labels")
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    branch = helper.make_graph(
        [helper.make_node("Identity", ["inner"], ["y"])], "b", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "inner")],
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=[strings, w],
    )
    path = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(graph), str(path))
    with pytest.warns(tensorfmt.TensorfmtWarning) as caught:
        got = tensorfmt.load(path)
    assert list(got) == ["w"]
    text = " ".join(str(c.message) for c in caught)
    assert '"labels"' in text and "STRING" in text and "subgraphs" in text
    with tensorfmt.open(path) as doc:
        assert doc.header["initializers"] == 2


def test_dtype_takes_numpy_dtypes_and_names_are_checked(tmp_path):
    """dtype= took only tensorfmt's names ("float32" was a FormatError); a name that is
    not Unicode text was a TypeError about a field; a NUL in an npz name was written,
    and numpy read two names as one."""
    out = tmp_path / "x.safetensors"
    for dt, want in [("float32", "f32"), (np.float16, "f16"), (np.dtype(">f4"), "f32"), ("BF16", "bf16"), ("bfloat16", "bf16"), ("i8", "i8")]:
        tensorfmt.save(out, {"a": np.arange(3.0)}, dtype=dt)
        assert tensorfmt.open(out).info("a").stored_dtype == want, dt
    for bad in ("complex64", "nope", object):
        with pytest.raises(tensorfmt.InvalidArgumentError, match="dtype="):
            tensorfmt.save(out, {"a": np.arange(3.0)}, dtype=bad)
    with pytest.raises(tensorfmt.InvalidArgumentError, match="surrogate"):
        tensorfmt.save(tmp_path / "s.npz", {"\udcff": np.arange(3.0)})
    with pytest.raises(tensorfmt.InvalidArgumentError, match="NUL"):
        tensorfmt.save(tmp_path / "n.npz", {"a\0b": np.arange(1.0), "a\0c": np.arange(1.0)})
    assert not (tmp_path / "n.npz").exists()


def test_saving_a_document_as_its_own_kind_keeps_it(tmp_path):
    """Document.kind promises save(p, doc, to=f"{doc.format}:{doc.kind}") writes the same
    kind of file: a primitiv tensor batch lost its batch, an optimizer state was refused;
    and back from safetensors with the original's kind, the carried original was dropped."""
    for name in ("tensor_3x2_batch2.data", "optimizer_adam.data", "shape_4x3_batch2.data", "parameter_2x3_stats.data"):
        src = TESTDATA / "primitiv" / name
        with tensorfmt.open(src) as doc:
            tensorfmt.save(tmp_path / name, doc, to=f"{doc.format}:{doc.kind}")
        assert (tmp_path / name).read_bytes() == src.read_bytes(), name
    src = TESTDATA / "som" / "data_i16.bin"
    mid = tmp_path / "mid.safetensors"
    tensorfmt.convert(src, mid)
    back = tmp_path / "back.bin"
    tensorfmt.convert(mid, back, to=f"som:{tensorfmt.open(src).kind}")
    assert back.read_bytes() == src.read_bytes()
