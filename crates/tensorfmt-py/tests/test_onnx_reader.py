"""The ONNX reader against onnx and onnxruntime: which tensor owns a name, external data
outside the initializers, the structure ``diff`` compares, sparse initializers read
when asked for, and the typed-field edges onnx accepts."""

import warnings

import numpy as np
import pytest

import tensorfmt
from conftest import require_module


def _ort_run(path):
    ort = require_module("onnxruntime")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(None, {})[0]


def _load(path):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = tensorfmt.load(path)
    return got, [str(x.message) for x in w]


def _identity_model(helper, inits, sparse=(), dims=(1,)):
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [helper.make_tensor_value_info("y", 1, list(dims))],
                          initializer=list(inits), sparse_initializer=list(sparse))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("case", ["dense_dense", "dense_dense_dense", "dense_sparse", "dense_dense_sparse"])
def test_onnx_a_shared_name_is_the_tensor_onnxruntime_uses(tmp_path, case):
    """Two initializers named ``w``: tensorfmt gave ``w`` the first, onnxruntime computes
    with the last; with a sparse one too, onnxruntime uses the sparse one. ``w`` is now
    what onnxruntime computes with, the others are renamed, with a warning that
    onnxruntime does not use them."""
    onnx = require_module("onnx")
    from onnx import helper, numpy_helper

    f = lambda v: numpy_helper.from_array(np.array([v], np.float32), "w")  # noqa: E731
    sp = lambda v: helper.make_sparse_tensor(f(v), numpy_helper.from_array(np.array([0], np.int64), "i"), [1])  # noqa: E731
    inits, sparse = {
        "dense_dense": ([f(1.0), f(2.0)], []),
        "dense_dense_dense": ([f(1.0), f(2.0), f(3.0)], []),
        "dense_sparse": ([f(1.0)], [sp(2.0)]),
        "dense_dense_sparse": ([f(1.0), f(3.0)], [sp(2.0)]),
    }[case]
    path = tmp_path / "m.onnx"
    onnx.save(_identity_model(helper, inits, sparse), str(path))
    got, w = _load(path)
    np.testing.assert_array_equal(got["w"], _ort_run(path))
    assert len(got) == len(inits) + len(sparse)
    assert any("onnxruntime does not use" in m and '"w"' in m for m in w), w


def test_onnx_merged_graph_fields_read_as_onnx_loads_them(tmp_path):
    """``cat a.onnx b.onnx``: protobuf merges the two graphs (onnx.load reads one graph
    with both's initializers); ``W`` is the last, as onnxruntime would use it, listed
    once, and the model converts."""
    onnx = require_module("onnx")
    from onnx import helper, numpy_helper

    mk = lambda inits: helper.make_model(helper.make_graph([], "g", [], [], initializer=inits))  # noqa: E731
    a = mk([numpy_helper.from_array(np.array([1.0], np.float32), "W"), numpy_helper.from_array(np.array([5.0], np.float32), "A")])
    b = mk([numpy_helper.from_array(np.array([2.0], np.float32), "W")])
    path = tmp_path / "ab.onnx"
    path.write_bytes(a.SerializeToString() + b.SerializeToString())
    merged = onnx.load(str(path))
    assert [t.name for t in merged.graph.initializer] == ["W", "A", "W"]
    got, w = _load(path)
    assert list(got) == ["graph.initializer[0]", "A", "W"]
    assert got["W"].tolist() == [2.0] and got["A"].tolist() == [5.0]
    tensorfmt.convert(path, tmp_path / "ab.npz")
    assert sorted(np.load(tmp_path / "ab.npz").files) == sorted(got)


def test_onnx_attribute_external_data_is_copied_and_validated(tmp_path):
    """``save_model(..., convert_attribute=True)`` puts a Constant node's tensor in the
    external file: the keep-unchanged copy lacked it (onnxruntime refused the copy,
    exit 0) and ``validate`` passed a model whose file was gone."""
    onnx = require_module("onnx")
    from onnx import helper, numpy_helper

    k = numpy_helper.from_array(np.arange(4096, dtype=np.float32), "Kval")
    b = numpy_helper.from_array(np.array([1.0], np.float32), "b")
    nodes = [helper.make_node("Constant", [], ["K"], value=k, name="Const_K"), helper.make_node("Add", ["K", "b"], ["y"])]
    g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", 1, [4096])], initializer=[b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    src = tmp_path / "src" / "m.onnx"
    onnx.save_model(m, str(src), save_as_external_data=True, all_tensors_to_one_file=True, location="m.bin",
                    size_threshold=1024, convert_attribute=True)
    with tensorfmt.open(src) as doc:
        assert doc.header["external_data"] == ["m.bin"]
    # The copy: the whole model, its data inside (it fits 2 GiB), which onnxruntime runs
    # (it was a weights-only model, with a warning that the graph was not written).
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tensorfmt.convert(src, tmp_path / "dst" / "m.onnx")
    assert not w, [str(x.message) for x in w]
    dst = tmp_path / "dst" / "m.onnx"
    assert len(onnx.load(str(dst), load_external_data=False).graph.node) == 2
    np.testing.assert_array_equal(_ort_run(dst), np.arange(4096, dtype=np.float32) + 1)
    onnx.checker.check_model(str(dst), full_check=True)
    # The file gone, then short: not ok, naming the node, the attribute and the tensor.
    data = (tmp_path / "src" / "m.bin").read_bytes()
    (tmp_path / "src" / "m.bin").unlink()
    r = tensorfmt.validate(src)
    assert not r.ok and "Const_K" in str(r.error) and '"value"' in str(r.error), r.error
    (tmp_path / "src" / "m.bin").write_bytes(data[:100])
    r = tensorfmt.validate(src)
    assert not r.ok and '"Kval"' in str(r.error), r.error


def test_onnx_diff_sees_the_graph_not_only_the_initializers(tmp_path):
    """A changed op, input shape, doc string, If-branch initializer or left-out float8
    weight compared equal: the header's ``structure`` digest covers everything but the
    exported tensors; where those are stored does not count."""
    onnx = require_module("onnx")
    ml_dtypes = require_module("ml_dtypes")
    from onnx import helper, numpy_helper

    def mk(op="Add", shape=(2, 2), doc="", branch=10.0, f8=1.0, w=1.0):
        then = helper.make_graph([helper.make_node("Identity", ["c"], ["o"])], "then", [], [helper.make_tensor_value_info("o", 1, [1])],
                                 initializer=[numpy_helper.from_array(np.array([branch], np.float32), "c")])
        inits = [numpy_helper.from_array(np.full((2, 2), w, np.float32), "W"), numpy_helper.from_array(np.array(True), "cond"),
                 numpy_helper.from_array(np.array([f8], ml_dtypes.float8_e4m3fn), "f8")]
        nodes = [helper.make_node(op, ["x", "W"], ["y"]), helper.make_node("If", ["cond"], ["z"], then_branch=then, else_branch=then)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, list(shape))],
                              [helper.make_tensor_value_info("y", 1, [2, 2]), helper.make_tensor_value_info("z", 1, [1])], initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.doc_string = doc
        return m

    onnx.save(mk(), str(tmp_path / "a.onnx"))
    for name, m in {"op": mk(op="Mul"), "shape": mk(shape=(3, 2)), "doc": mk(doc="changed"), "branch": mk(branch=99.0), "f8": mk(f8=2.0)}.items():
        onnx.save(m, str(tmp_path / f"{name}.onnx"))
        r = tensorfmt.diff(tmp_path / "a.onnx", tmp_path / f"{name}.onnx")
        assert not r.equal and [h[0] for h in r.header] == ["structure"], (name, r.header)
    # A weight's value is a tensor difference, not a structure one; storage is neither.
    onnx.save(mk(w=2.0), str(tmp_path / "w.onnx"))
    r = tensorfmt.diff(tmp_path / "a.onnx", tmp_path / "w.onnx")
    assert not r.equal and r.header == []
    onnx.save_model(mk(), str(tmp_path / "ext.onnx"), save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert tensorfmt.diff(tmp_path / "a.onnx", tmp_path / "ext.onnx").equal


def test_onnx_sparse_bomb_opens_and_refuses_to_densify(tmp_path):
    """A 65-byte sparse initializer of dims [40000, 40000] was densified at open (6.4 GB;
    under ``ulimit -v`` the process aborted): it is listed, and reading it is a
    LimitError."""
    onnx = require_module("onnx")
    from onnx import helper, numpy_helper

    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32), "s"),
                                   numpy_helper.from_array(np.array([3], np.int64), "s_i"), [40000, 40000])
    path = tmp_path / "bomb.onnx"
    onnx.save_model(helper.make_model(helper.make_graph([], "g", [], [], sparse_initializer=[sp])), str(path))
    with tensorfmt.open(path, max_alloc=1 << 30) as doc:
        assert doc.info("s").shape == (40000, 40000)
        with pytest.raises(tensorfmt.LimitError, match="6400000000"):
            doc["s"]


def test_onnx_typed_field_edges_read_as_onnx_reads_them(tmp_path):
    """FLOAT16 ``int32_data`` of -16384 (onnx's own writer sign-extends it) is -2.0, as
    onnx reads it; a segmented tensor is left out, not the file; a present but empty
    ``raw_data`` beside ``float_data`` is the data (onnx errors, and so does tensorfmt)."""
    onnx = require_module("onnx")
    from onnx import TensorProto, helper, numpy_helper

    def T(name, dt, dims, **fields):
        t = TensorProto(name=name, data_type=dt, dims=dims)
        for k, v in fields.items():
            if k == "raw_data":
                t.raw_data = v
            elif k == "segment":
                t.segment.begin, t.segment.end = v
            else:
                getattr(t, k).extend(v)
        return t

    def save(*ts):
        p = tmp_path / f"{ts[0].name}.onnx"
        onnx.save(helper.make_model(helper.make_graph([], "g", [], [], initializer=list(ts))), str(p))
        return p

    f16 = T("f16_neg", 10, [2], int32_data=[-16384, 15360])
    got, _ = _load(save(f16))
    np.testing.assert_array_equal(got["f16_neg"], numpy_helper.to_array(f16))
    assert got["f16_neg"].tolist() == [-2.0, 1.0]
    with pytest.raises(tensorfmt.FormatError, match="cannot hold"):
        tensorfmt.load(save(T("f16_bad", 10, [1], int32_data=[65536])))
    got, w = _load(save(T("seg", 1, [1], float_data=[1.0], segment=(0, 1)), T("w", 1, [1], float_data=[2.0])))
    assert list(got) == ["w"] and any('"seg"' in m and "segment" in m for m in w), w
    empty = T("raw_present_empty", 1, [2], raw_data=b"", float_data=[9, 9])
    with pytest.raises(Exception):
        numpy_helper.to_array(empty)
    with pytest.raises(tensorfmt.FormatError, match="raw_data has 0 bytes"):
        tensorfmt.load(save(empty))


def test_onnx_copy_places_the_data_as_onnx_save_model_does(tmp_path):
    """ONNX to ONNX asking for nothing but where the data goes copies the whole model
    (every node, attribute and subgraph; the data read from the source's files and
    placed anew), as onnx.load + onnx.save_model would: inside while it fits, in
    OUT.onnx.data with external_data=true. The source's files stay as they were."""
    onnx = require_module("onnx")
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 2048, dtype=np.float32).reshape(2, 1024), "W")
    x = numpy_helper.from_array(np.arange(1024, dtype=np.float32).reshape(1024, 1), "X")
    k = numpy_helper.from_array(np.full((1024, 1), 0.5, np.float32), "K")
    then = helper.make_graph([helper.make_node("Identity", ["t"], ["o_then"])], "then", [],
                             [helper.make_tensor_value_info("o_then", 1, [2, 1])],
                             initializer=[numpy_helper.from_array(np.arange(2048, dtype=np.float32)[:2].reshape(2, 1) + 100, "t")])
    other = helper.make_graph([helper.make_node("Identity", ["k2"], ["o_else"])], "else", [],
                              [helper.make_tensor_value_info("o_else", 1, [2, 1])],
                              initializer=[numpy_helper.from_array(np.zeros((2, 1), np.float32), "k2")])
    c = numpy_helper.from_array(np.array(True), "c")
    nodes = [helper.make_node("Constant", [], ["kc"], value=k),
             helper.make_node("Add", ["X", "kc"], ["xk"]),
             helper.make_node("MatMul", ["W", "xk"], ["a"]),
             helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", 1, [2, 1])], initializer=[w, x, c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.doc_string = "kept"
    want = np.linspace(-1, 1, 2048, dtype=np.float32).reshape(2, 1024) @ (np.arange(1024, dtype=np.float32).reshape(1024, 1) + 0.5) + np.array([[100.0], [101.0]], np.float32)
    (tmp_path / "src").mkdir()
    src = tmp_path / "src" / "m.onnx"
    # onnxruntime cannot run an If branch whose initializer is external (it reads it as
    # from a model loaded from bytes): the branch's small tensors stay inside.
    onnx.save_model(m, str(src), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=1024, convert_attribute=True)
    data_before = (tmp_path / "src" / "weights.bin").read_bytes()
    np.testing.assert_allclose(_ort_run(src), want, rtol=1e-5)

    def same_model(path):
        a, b = onnx.load(str(path)), onnx.load(str(src))
        for t in list(a.graph.initializer) + list(b.graph.initializer):
            del t.external_data[:]
            t.data_location = 0
        assert [n.op_type for n in a.graph.node] == [n.op_type for n in b.graph.node]
        assert a.doc_string == "kept"
        onnx.checker.check_model(str(path), full_check=True)
        np.testing.assert_allclose(_ort_run(path), want, rtol=1e-5)

    # Inside: one file.
    one = tmp_path / "one.onnx"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tensorfmt.convert(src, one)
    # (The If branch's initializers are said to be left out of the tensor view.)
    assert not [x for x in w if "subgraphs" not in str(x.message)], [str(x.message) for x in w]
    assert not (tmp_path / "one.onnx.data").exists()
    same_model(one)
    assert not any(t.external_data for t in onnx.load(str(one), load_external_data=False).graph.initializer)
    # Beside: OUT.onnx.data, whatever the source's data file was called; from an
    # inline model too (it was a weights-only model).
    for source, name in [(src, "two.onnx"), (one, "three.onnx")]:
        out = tmp_path / name
        tensorfmt.convert(source, out, settings={"external_data": "true"})
        assert (tmp_path / f"{name}.data").is_file()
        locs = {e.value for t in onnx.load(str(out), load_external_data=False).graph.initializer
                for e in t.external_data if e.key == "location"}
        assert locs == {f"{name}.data"}, locs
        same_model(out)
    assert (tmp_path / "src" / "weights.bin").read_bytes() == data_before
    # A dtype or a tensor selection still asks for a weights-only model, said.
    with pytest.warns(UserWarning, match="graph .* is not written"):
        tensorfmt.convert(src, tmp_path / "half.onnx", dtype="float16")
