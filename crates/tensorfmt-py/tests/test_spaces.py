"""tensorfmt.spaces: Pylearn2 spaces on numpy batches (issue 26: ports without surprises)."""

import numpy as np
import pytest

import tensorfmt
from conftest import require_module
from tensorfmt import _native
from tensorfmt.spaces import (
    CompositeSpace,
    Conv2DSpace,
    DataSpecsMapping,
    IndexSequenceSpace,
    IndexSpace,
    NullSpace,
    SequenceSpace,
    SpaceAssertionError,
    SpaceIndexError,
    SpaceNotImplementedError,
    SpaceTypeError,
    VectorSequenceSpace,
    VectorSpace,
    get_floatx,
    is_flat_source,
    is_flat_space,
    is_flat_specs,
    set_floatx,
)

sparse = require_module("scipy.sparse")


def test_vector_to_conv_and_back_is_pylearn2s_layout():
    vec = VectorSpace(2 * 3 * 4)
    b01c = Conv2DSpace((2, 3), num_channels=4)
    bc01 = Conv2DSpace((2, 3), num_channels=4, axes=("b", "c", 0, 1))
    batch = np.arange(5 * 24, dtype=np.float32).reshape(5, 24)
    img = vec.np_format_as(batch, b01c)
    # Pylearn2 flattens in b01c order: a plain reshape.
    np.testing.assert_array_equal(img, batch.reshape(5, 2, 3, 4))
    nchw = b01c.np_format_as(img, bc01)
    np.testing.assert_array_equal(nchw, img.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(bc01.np_format_as(nchw, vec), batch)
    assert vec.get_total_dimension() == b01c.get_total_dimension() == 24
    assert b01c.np_batch_size(img) == 5


def test_validate_rejects_wrong_batches():
    vec = VectorSpace(3)
    vec.np_validate(np.zeros((2, 3), np.float32))
    with pytest.raises(tensorfmt.TensorfmtError):
        vec.np_validate(np.zeros((2, 4), np.float32))
    idx = IndexSpace(max_labels=5, dim=1)
    idx.np_validate(np.array([[1], [4]], np.int64))
    with pytest.raises(tensorfmt.TensorfmtError):
        idx.np_validate(np.array([[7]], np.int64))


def test_index_to_one_hot_vectors():
    idx = IndexSpace(max_labels=4, dim=1)
    onehot = idx.np_format_as(np.array([[0], [3], [1]], np.int64), VectorSpace(4, dtype="float32"))
    np.testing.assert_array_equal(onehot, np.eye(4, dtype=np.float32)[[0, 3, 1]])
    # The spec's example: merge, concatenate, neither.
    s = IndexSpace(max_labels=5, dim=3)
    row = np.array([[4, 0, 2]])
    np.testing.assert_array_equal(s.np_format_as(row, VectorSpace(5)), [[1, 0, 1, 0, 1]])
    assert np.flatnonzero(s.np_format_as(row, VectorSpace(15))).tolist() == [4, 5, 12]
    with pytest.raises(ValueError, match="merged one-hots"):
        s.np_format_as(row, VectorSpace(10))
    # Sparse targets get CSR directly; duplicates capped at 1 as in the dense form.
    dup = np.array([[1, 1, 3]])
    m = s.np_format_as(dup, VectorSpace(5, sparse=True))
    assert sparse.isspmatrix_csr(m) or m.format == "csr"
    np.testing.assert_array_equal(m.toarray(), [[0, 1, 0, 1, 0]])


def test_an_index_space_inside_a_composite_follows_pylearn2s_arithmetic():
    """Issue 34 item 3: inside a CompositeSpace an IndexSpace counts its ``dim`` (its
    total dimension) and is formatted into a VectorSpace of that width, as Pylearn2's
    CompositeSpace._format_as_impl does: one-hots merged when dim == max_labels,
    concatenated when max_labels == 1, else the IndexSpace's own size error."""
    labels = np.array([[2, 0, 2], [1, 1, 0]], np.int64)
    merged = IndexSpace(max_labels=3, dim=3).np_format_as(labels, VectorSpace(3))
    comp = CompositeSpace([IndexSpace(max_labels=3, dim=3)])
    np.testing.assert_array_equal(comp.np_format_as((labels,), VectorSpace(3)), merged)
    assert comp.get_total_dimension() == 3
    # With another component: columns side by side, in component order.
    both = CompositeSpace([VectorSpace(2), IndexSpace(max_labels=3, dim=3)])
    x = np.array([[5, 6], [7, 8]], np.float32)
    out = both.np_format_as((x, labels), VectorSpace(5))
    np.testing.assert_array_equal(out, np.concatenate([x, merged], axis=1))
    # max_labels 1: the concatenated form, dim columns.
    ones = CompositeSpace([IndexSpace(max_labels=1, dim=4)])
    np.testing.assert_array_equal(ones.np_format_as((np.zeros((2, 4), np.int64),), VectorSpace(4)), np.ones((2, 4)))
    # Widths Pylearn2 cannot give: its errors (the total first, then the IndexSpace's).
    lone = CompositeSpace([IndexSpace(max_labels=5, dim=1)])
    with pytest.raises(ValueError, match="total dimension 1"):
        lone.np_format_as((np.array([[4]]),), VectorSpace(5))
    with pytest.raises(ValueError, match="merged one-hots"):
        lone.np_format_as((np.array([[4]]),), VectorSpace(1))



def test_composite_batches_are_tuples():
    space = CompositeSpace([VectorSpace(2), CompositeSpace([VectorSpace(3), NullSpace()])])
    batch = (np.ones((4, 2), np.float32), (np.zeros((4, 3), np.float32), None))
    space.np_validate(batch)
    assert space.get_total_dimension() == 5
    origin = space.get_origin_batch(2)
    assert origin[0].shape == (2, 2) and origin[1][0].shape == (2, 3) and origin[1][1] is None
    flat = space.np_format_as(batch, VectorSpace(5))
    assert flat.shape == (4, 5)
    back = space.undo_np_format_as(flat, VectorSpace(5))
    np.testing.assert_array_equal(back[0], batch[0])
    assert back[1][1] is None


# -- item 1: the members Pylearn2 code calls ---------------------------------------------


def test_origins_batch_axes_and_default_axes():
    assert Conv2DSpace.default_axes == ("b", 0, 1, "c")
    c01b = Conv2DSpace((3, 2), num_channels=5, axes=("c", 0, 1, "b"))
    assert c01b.get_batch_axis() == 3 and VectorSpace(3).get_batch_axis() == 0
    assert Conv2DSpace((3, 2), channels=5).axes == Conv2DSpace.default_axes
    o = c01b.get_origin_batch(4, dtype="float64")
    assert o.shape == (5, 3, 2, 4) and o.dtype == np.float64
    assert c01b.get_origin_batch(0).shape == (5, 3, 2, 0)
    assert c01b.get_origin().shape == (5, 3, 2)
    assert VectorSpace(3).get_origin_batch(batch_size=2, dtype="int8").dtype == np.int8
    assert VectorSpace(3).get_origin().shape == (3,)
    assert IndexSpace(5, 2).get_origin().shape == (2,)
    with pytest.raises(TypeError):
        VectorSpace(3, dtype=None).get_origin_batch(2)
    with pytest.raises(TypeError):
        c01b.get_origin_batch(2.0)
    assert NullSpace().get_origin_batch(3) is None


def test_undo_np_format_as_inverts():
    conv = Conv2DSpace((2, 2), num_channels=3, axes=("c", 0, 1, "b"))
    vec = VectorSpace(12)
    img = np.random.default_rng(0).random((3, 2, 2, 5)).astype(np.float32)
    flat = conv.np_format_as(img, vec)
    np.testing.assert_array_equal(conv.undo_np_format_as(flat, vec), img)
    with pytest.raises(SpaceAssertionError):
        conv.undo_np_format_as([flat], vec)


def test_sparse_vector_spaces():
    dense_space, sparse_space = VectorSpace(4), VectorSpace(4, sparse=True)
    assert str(sparse_space) == "VectorSpace(dim=4, sparse, dtype=float32)"
    assert dense_space != sparse_space and hash(dense_space) != hash(sparse_space)
    o = sparse_space.get_origin_batch(3)
    assert o.format == "csr" and o.shape == (3, 4) and o.dtype == np.float32 and o.nnz == 0
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0]], np.float32)
    s = dense_space.np_format_as(x, sparse_space)
    assert s.format == "csr"
    np.testing.assert_array_equal(s.toarray(), x)
    np.testing.assert_array_equal(sparse_space.np_format_as(s, dense_space), x)
    assert sparse_space.np_batch_size(s) == 2
    with pytest.raises(SpaceTypeError, match="sparse scipy matrix"):
        sparse_space.np_validate(x)
    with pytest.raises(SpaceTypeError, match="numpy.ndarray"):
        dense_space.np_validate(s)
    with pytest.raises(SpaceTypeError):
        sparse_space.np_format_as(s, Conv2DSpace((2, 2), num_channels=1))
    # Sparse -> composite splits columns, and back concatenates (sparse hstack).
    comp = CompositeSpace([VectorSpace(1, sparse=True), VectorSpace(3)])
    parts = sparse_space.np_format_as(s, comp)
    assert parts[0].format == "csr" and isinstance(parts[1], np.ndarray)
    np.testing.assert_array_equal(parts[1], x[:, 1:])
    again = comp.np_format_as(parts, sparse_space)
    np.testing.assert_array_equal(again.toarray(), x)
    coo = sparse.coo_matrix(x)
    np.testing.assert_array_equal(sparse_space.np_format_as(coo, comp)[1], x[:, 1:])
    conv = Conv2DSpace((2, 2), num_channels=1)
    to_sparse = conv.np_format_as(x.reshape(2, 2, 2, 1), sparse_space)
    np.testing.assert_array_equal(to_sparse.toarray(), x)


def test_restrict_and_restrict_batch():
    v, i, c = VectorSpace(2), IndexSpace(3, 1), Conv2DSpace((1, 1), num_channels=2)
    comp = CompositeSpace([v, i, c])
    assert comp.restrict([1]) == i
    assert comp.restrict((2, 0, 2)) == CompositeSpace([c, v, c])
    batch = comp.get_origin_batch(2)
    assert comp.restrict_batch(batch, [1]) is batch[1]
    picked = comp.restrict_batch(batch, [2, 0])
    assert picked[0] is batch[2] and picked[1] is batch[0]
    with pytest.raises(IndexError):
        comp.restrict([3])
    with pytest.raises(AssertionError):
        comp.restrict(1)


def test_flatness_predicates():
    v = VectorSpace(2)
    assert is_flat_space(v) and is_flat_space(CompositeSpace([v, v])) and is_flat_space(CompositeSpace([]))
    assert not is_flat_space(CompositeSpace([v, CompositeSpace([v])]))
    assert is_flat_source("x") and is_flat_source(("x", "y")) and is_flat_source(["x"])
    assert not is_flat_source(("x", ("y",)))
    assert is_flat_specs((CompositeSpace([v, v]), ("a", "b")))
    assert not is_flat_specs((CompositeSpace([v, v]), ("a", ("b",))))
    with pytest.raises(TypeError):
        is_flat_space("x")
    with pytest.raises(TypeError):
        is_flat_source(3)


def test_sequence_spaces():
    vs, ids = VectorSequenceSpace(3), IndexSequenceSpace(max_labels=4, dim=1)
    seq = np.arange(15, dtype=np.float32).reshape(5, 3)
    assert vs.np_batch_size(seq) == 1
    np.testing.assert_array_equal(vs.np_format_as(seq, VectorSequenceSpace(3, dtype="float64")), seq)
    with pytest.raises(ValueError):
        vs.np_format_as(seq, VectorSequenceSpace(4))
    with pytest.raises(ValueError):
        vs.np_format_as(seq, VectorSpace(3))
    labels = np.array([[0], [3], [3]])
    np.testing.assert_array_equal(ids.np_format_as(labels, VectorSequenceSpace(4)), np.eye(4)[[0, 3, 3]])
    assert str(ids) == "IndexSequenceSpace(dim=1, max_labels=4, dtype=int64)"
    with pytest.raises(ValueError):
        ids.np_format_as(labels, IndexSpace(4, 1))
    # Variable-length batches: padded data with a mask.
    s = SequenceSpace(VectorSpace(3))
    data, mask = s.pad([seq, seq[:2]])
    assert data.shape == (5, 2, 3) and mask.shape == (5, 2)
    np.testing.assert_array_equal(mask.sum(axis=0), [5, 2])
    np.testing.assert_array_equal(data[:2, 1], seq[:2])
    assert not data[2:, 1].any()
    assert s.np_batch_size((data, mask)) == 2
    with pytest.raises(ValueError):
        s.np_validate((data, mask[:, :1]))
    # Formatting maps every time step.
    img = SequenceSpace(Conv2DSpace((1, 3), num_channels=1))
    out, m2 = s.np_format_as((data, mask), img)
    assert out.shape == (5, 2, 1, 3, 1) and m2 is mask
    back, _ = img.np_format_as((out, mask), s)
    np.testing.assert_array_equal(back, data)
    lab = SequenceSpace(IndexSpace(max_labels=4, dim=1))
    ldata, lmask = lab.pad([np.array([[1], [2]]), np.array([[3]])])
    onehots, _ = lab.np_format_as((ldata, lmask), SequenceSpace(VectorSpace(4)))
    np.testing.assert_array_equal(onehots[:, 0], np.eye(4)[[1, 2]])
    assert lab.get_origin_batch(3, time_steps=2)[0].shape == (2, 3, 1)
    with pytest.raises(TypeError):
        lab.pad([np.array([[1.5]])])


# -- item 2: dtypes ---------------------------------------------------------------------


def test_dtype_setter_changes_behaviour():
    v = VectorSpace(3)
    assert v.dtype == "float32"
    v.dtype = "float64"
    assert v.get_origin_batch(2).dtype == np.float64
    assert v.np_format_as(np.zeros((1, 3), np.float32), VectorSpace(3, dtype=None)).dtype == np.float32
    assert VectorSpace(3).np_format_as(np.zeros((1, 3), np.float32), v).dtype == np.float64
    assert v == VectorSpace(3, dtype="float64") and v != VectorSpace(3)
    v.dtype = "int16"
    with pytest.raises(TypeError):
        v.np_validate(np.zeros((1, 3), np.float32))
    v.dtype = None
    assert v.dtype is None
    with pytest.raises(TypeError, match="Unrecognized"):
        v.dtype = "bool"
    idx = IndexSpace(5, 1)
    with pytest.raises(ValueError):
        idx.dtype = "float32"
    idx.dtype = "uint8"
    assert idx.get_origin_batch(1).dtype == np.uint8
    comp = CompositeSpace([VectorSpace(2), NullSpace(), CompositeSpace([IndexSpace(3, 1)])])
    assert comp.dtype == ("float32", "NullSpace's dtype", ("int64",))
    comp.dtype = ("float64", "NullSpace's dtype", ("int8",))
    assert comp.get_origin_batch(1)[0].dtype == np.float64 and comp.get_origin_batch(1)[2][0].dtype == np.int8
    with pytest.raises(ValueError):
        comp.dtype = ("float64",)
    with pytest.raises(TypeError):
        comp.dtype = 3
    with pytest.raises(TypeError):
        NullSpace().dtype = "float32"
    c = Conv2DSpace((1, 1), num_channels=1)
    c.dtype = "float16"
    assert c.get_origin_batch(1).dtype == np.float16


def test_floatx_resolves_and_is_configurable():
    assert get_floatx() == "float32"
    assert VectorSpace(2, dtype="floatX").dtype == "float32"
    try:
        set_floatx("float64")
        assert VectorSpace(2).dtype == "float64"
        assert Conv2DSpace((1, 1), num_channels=1).get_origin_batch(1).dtype == np.float64
        # Resolved at construction: an existing space keeps its dtype.
        with pytest.raises(ValueError):
            set_floatx("int32")
    finally:
        set_floatx("float32")
    assert VectorSpace(2).dtype == "float32"
    v = VectorSpace(2, dtype="float64")
    v.dtype = "floatX"
    assert v.dtype == "float32"


# -- item 3: error classes ---------------------------------------------------------------


def test_errors_derive_from_what_pylearn2_raised():
    def raises(cls, fn):
        with pytest.raises(cls) as info:
            fn()
        assert isinstance(info.value, tensorfmt.TensorfmtError)
        return info.value

    e = raises(TypeError, lambda: IndexSpace(5, 1).np_validate(np.zeros((1, 1), np.float32)))
    assert not isinstance(e, ValueError)
    assert "Cannot safely cast batch dtype float32" in str(e)
    raises(TypeError, lambda: VectorSpace(2, dtype="int32").np_validate(np.zeros((1, 2), bool)))
    raises(TypeError, lambda: VectorSpace(2).np_validate(np.zeros((1, 2), np.complex64)))
    raises(TypeError, lambda: VectorSpace(2).np_validate((np.zeros((1, 2)),)))
    raises(TypeError, lambda: NullSpace().np_validate(np.zeros(1)))
    raises(TypeError, lambda: CompositeSpace([VectorSpace(1)]).np_validate(np.zeros((1, 1))))
    raises(TypeError, lambda: CompositeSpace([3]))
    raises(TypeError, lambda: VectorSpace(2, dtype="float128"))
    raises(NotImplementedError, lambda: Conv2DSpace((1, 2), num_channels=1).np_format_as(
        np.zeros((1, 1, 2, 1), np.float32), IndexSpace(3, 2)))
    raises(NotImplementedError, lambda: VectorSpace(2).np_format_as(np.zeros((1, 2)), IndexSpace(3, 2)))
    raises(NotImplementedError, lambda: VectorSpace(2).np_format_as(np.zeros((1, 2)), NullSpace()))
    raises(AssertionError, lambda: Conv2DSpace((1, 2)))
    raises(AssertionError, lambda: Conv2DSpace((1, 2), channels=1, num_channels=1))
    raises(AssertionError, lambda: DataSpecsMapping(("x", VectorSpace(1))))
    raises(IndexError, lambda: IndexSpace(5, 1).np_validate(np.array([[5]])))
    raises(IndexError, lambda: IndexSpace(5, 1).np_validate(np.array([[-1]])))
    raises(ValueError, lambda: VectorSpace(2).np_validate(np.zeros((1, 3))))
    raises(ValueError, lambda: Conv2DSpace((1, 2, 3), num_channels=1))
    raises(ValueError, lambda: Conv2DSpace((1, 2), num_channels=1, axes=("b", "b", 0, 1)))
    # The dimension message is well formed (upstream lacks the space before "because").
    e = raises(ValueError, lambda: VectorSpace(2).np_format_as(np.zeros((1, 2), np.float32), VectorSpace(3)))
    assert "into VectorSpace(dim=3, dtype=float32) because its total dimension is 3" in str(e)


def test_native_core_errors_use_the_same_classes():
    spec = ("index", 5, 1, "i64")
    batch = {"data": np.zeros(1, np.float32).tobytes(), "dtype": "<f4", "shape": [1, 1]}
    with pytest.raises(TypeError) as info:
        _native.space_validate(spec, batch)
    assert isinstance(info.value, tensorfmt.TensorfmtError)
    with pytest.raises(NotImplementedError):
        _native.space_format_as(
            ("vector", 2, "f32"), {"data": np.zeros(2, np.float32).tobytes(), "dtype": "<f4", "shape": [1, 2]},
            ("null",))
    labels = {"data": np.array([7], np.int64).tobytes(), "dtype": "<i8", "shape": [1, 1]}
    with pytest.raises(IndexError):
        _native.space_validate(spec, labels)
    with pytest.raises(tensorfmt.InvalidArgumentError):
        _native.space_str(("conv2d", 1, 1, 1, ["b", "b", "0", "1"], "f32"))


# -- item 4: DataSpecsMapping ------------------------------------------------------------


def test_data_specs_mapping_flattens_and_nests():
    v, c, t = VectorSpace(12), Conv2DSpace((2, 2), num_channels=3), VectorSpace(10)
    space = CompositeSpace([v, CompositeSpace([c, t])])
    source = ("features", ("features", "targets"))
    m = DataSpecsMapping((space, source))
    assert m.n_unique_specs == 3
    assert m.spec_mapping == (0, (1, 2))
    assert m.specs_to_index == {(v, "features"): 0, (c, "features"): 1, (t, "targets"): 2}
    assert m.flatten(source) == ("features", "features", "targets")
    flat_space = m.flatten(space)
    assert isinstance(flat_space, CompositeSpace) and flat_space == CompositeSpace([v, c, t])
    assert m.flatten(space, return_tuple=True) == (v, c, t)
    assert m.nest((1, 2, 3)) == (1, (2, 3))
    assert m.nest([1, 2, 3]) == (1, (2, 3))
    assert m.nest(m.flatten(source)) == source
    assert m.nest(flat_space) == space
    with pytest.raises(AssertionError):
        m.nest((1, 2))


def test_data_specs_null_positions_and_lists():
    space = CompositeSpace([VectorSpace(3), NullSpace()])
    m = DataSpecsMapping((space, ("features", "")))
    assert m.spec_mapping == (0, None)
    assert m.flatten(("features", "")) == "features"
    assert m.flatten(("features", NullSpace())) == "features"
    assert m.flatten(space) == VectorSpace(3)
    x = np.zeros((2, 3))
    assert m.flatten((x, None)) is x
    assert m.nest(x) == (x, None)
    assert m.nest(CompositeSpace([VectorSpace(3)])) == CompositeSpace([VectorSpace(3), NullSpace()])
    with pytest.raises(AssertionError):
        m.flatten(("features", "targets"))
    # List sources and list data.
    ml = DataSpecsMapping((CompositeSpace([VectorSpace(1), VectorSpace(2)]), ["a", "b"]))
    assert ml.flatten(["a", "b"]) == ("a", "b")
    assert ml.nest(["p", "q"]) == ("p", "q")
    # One-element source tuple for a simple space, as upstream.
    assert DataSpecsMapping((VectorSpace(1), ("a",))).flatten(("a",)) == "a"
    # Only a NullSpace: nothing to flatten.
    m0 = DataSpecsMapping((NullSpace(), ""))
    assert m0.n_unique_specs == 0 and m0.flatten("") is None and m0.flatten("", return_tuple=True) == ()
    assert m0.nest(()) is None
    # A string never stands for a composite's sources (upstream iterated characters).
    with pytest.raises(TypeError):
        DataSpecsMapping((CompositeSpace([VectorSpace(1), VectorSpace(1)]), "xy"))
    # Duplicates: same space AND same source; arrays compared without crashing.
    dup = DataSpecsMapping((CompositeSpace([VectorSpace(1), VectorSpace(1)]), ("a", "a")))
    assert dup.n_unique_specs == 1
    y = np.ones((2, 1))
    assert dup.flatten((y, y)) is y
    assert dup.flatten((y, y.copy())) is y
    with pytest.raises(AssertionError):
        dup.flatten((y, y + 1))


# -- item 5: casts round once ------------------------------------------------------------


def test_casts_round_once_like_numpy():
    big = np.array([[2**60 + 2**36 + 1]], np.int64)
    out = VectorSpace(1, dtype="int64").np_format_as(big, VectorSpace(1, dtype="float32"))
    assert out[0, 0] == big.astype(np.float32)[0, 0] == np.float32(1.1529216e18)
    ubig = big.astype(np.uint64)
    assert VectorSpace(1, dtype="uint64").np_format_as(ubig, VectorSpace(1))[0, 0] == np.float32(1.1529216e18)
    x = np.array([[1 + 2**-11 + 2**-40]], np.float64)
    half = VectorSpace(1, dtype="float64").np_format_as(x, VectorSpace(1, dtype="float16"))
    assert half[0, 0] == np.float16(1.0009765625)
    # The Rust core agrees (tensorfmt_core's Tensor::cast).
    for arr, src, dst, np_dst in [(big, "i64", "f32", np.float32), (ubig, "u64", "f32", np.float32),
                                  (x, "f64", "f16", np.float16)]:
        batch = {"data": arr.tobytes(), "dtype": arr.dtype.str, "shape": list(arr.shape)}
        got = np.asarray(_native.space_format_as(("vector", 1, src), batch, ("vector", 1, dst)))
        assert got.dtype == np_dst and got[0, 0] == arr.astype(np_dst)[0, 0]
    sf = sparse.csr_matrix(np.array([[1e30, 0, -2.5]]))
    si = VectorSpace(3, sparse=True, dtype="float64").np_format_as(sf, VectorSpace(3, sparse=True, dtype="int8"))
    assert si.dtype == np.int8 and si.toarray().tolist() == [[127, 0, -2]]
    # Float -> int saturates (a documented deviation).
    f = np.array([[1e30, -1e30, np.nan, -3.7]], np.float64)
    np.testing.assert_array_equal(
        VectorSpace(4, dtype="float64").np_format_as(f, VectorSpace(4, dtype="int16")), [[32767, -32768, 0, -3]])


# -- item 6: display and views -----------------------------------------------------------


def test_spaces_compare_and_print():
    assert VectorSpace(3) == VectorSpace(3) and VectorSpace(3) != VectorSpace(4)
    assert str(VectorSpace(3)) == "VectorSpace(dim=3, dtype=float32)"
    assert repr(VectorSpace(3, dtype=None)) == "VectorSpace(dim=3, dtype=None)"
    conv = Conv2DSpace((32, 32), num_channels=3, axes=("b", "c", 0, 1))
    assert str(conv) == "Conv2DSpace(shape=(32, 32), num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)"
    assert str(IndexSpace(10, 1)) == "IndexSpace(dim=1, max_labels=10, dtype=int64)"
    comp = CompositeSpace([VectorSpace(3), NullSpace(), IndexSpace(10, 1, dtype="uint8"), conv])
    assert str(comp) == (
        "CompositeSpace(VectorSpace(dim=3, dtype=float32), NullSpace, "
        "IndexSpace(dim=1, max_labels=10, dtype=uint8), " + str(conv) + ")"
    )
    # The Rust core prints the same forms.
    from tensorfmt.spaces import _native_str

    assert _native_str(comp) == str(comp)
    assert Conv2DSpace((2, 2), channels=1) == Conv2DSpace([2, 2], num_channels=1)
    numpy_axes = Conv2DSpace(np.array([2, 2]), channels=1, axes=("b", np.int64(0), np.int64(1), "c"))
    assert str(numpy_axes) == str(Conv2DSpace((2, 2), channels=1))
    assert len({VectorSpace(3), VectorSpace(3), VectorSpace(3, dtype="float64")}) == 2
    import pickle

    for space in (comp, VectorSpace(2, sparse=True), SequenceSpace(IndexSpace(3, 1)), IndexSequenceSpace(2, 1)):
        assert pickle.loads(pickle.dumps(space)) == space


def test_permutations_are_views():
    b01c = Conv2DSpace((64, 64), num_channels=3)
    bc01 = Conv2DSpace((64, 64), num_channels=3, axes=("b", "c", 0, 1))
    img = np.zeros((8, 64, 64, 3), np.float32)
    out = b01c.np_format_as(img, bc01)
    assert out.base is img or np.shares_memory(out, img)
    assert out.flags.writeable and out.shape == (8, 3, 64, 64)
    assert b01c.np_format_as(img, b01c) is img
    flat = bc01.np_format_as(out, VectorSpace(64 * 64 * 3))
    assert np.shares_memory(flat, img)  # back to b01c, contiguous again: a reshape view
    vec = VectorSpace(64 * 64 * 3).np_format_as(flat, bc01)
    assert np.shares_memory(vec, img)
    # A dtype change is the one copy.
    as64 = b01c.np_format_as(img, Conv2DSpace((64, 64), num_channels=3, axes=("c", 0, 1, "b"), dtype="float64"))
    assert not np.shares_memory(as64, img) and as64.shape == (3, 64, 64, 8)


def test_the_module_examples_run():
    import doctest

    import tensorfmt.spaces

    result = doctest.testmod(tensorfmt.spaces)
    assert result.attempted > 0 and result.failed == 0


def test_docs_tables_show_the_printed_forms():
    """docs/spaces.md §3 lists what str() prints; keep it true."""
    import pathlib

    doc = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "spaces.md").read_text()
    for space in [
        VectorSpace(3),
        VectorSpace(3, sparse=True),
        Conv2DSpace((32, 32), num_channels=3, axes=("b", "c", 0, 1)),
        IndexSpace(10, 1),
        CompositeSpace([VectorSpace(3), NullSpace()]),
        VectorSequenceSpace(3),
        IndexSequenceSpace(4, 1),
    ]:
        assert f"`{space}`" in doc, str(space)


def test_review_composite_callbacks_dtype_and_sparse_outputs():
    """A component's np_validate_callbacks run when a CompositeSpace validates (as
    Pylearn2's component._validate does); a refused composite dtype changes nothing and
    numpy scalar types are dtypes there too; a float16 batch cast to an integer space
    raises no numpy warning; a sparse output is CSR even when nothing else changes."""
    import warnings

    import scipy.sparse as sp

    from tensorfmt.spaces import CompositeSpace, IndexSpace, VectorSpace

    seen = []
    v = VectorSpace(2, np_validate_callbacks=[lambda b: seen.append(b.shape)])
    c = CompositeSpace([v, IndexSpace(max_labels=3, dim=1)])
    c.np_validate((np.zeros((4, 2), np.float32), np.zeros((4, 1), np.int64)))
    assert seen == [(4, 2)]
    before = c.dtype
    with pytest.raises(tensorfmt.TensorfmtError):
        c.dtype = "float64"  # the IndexSpace refuses a float dtype
    assert c.dtype == before
    floats = CompositeSpace([VectorSpace(2), VectorSpace(3)])
    floats.dtype = np.float64
    assert floats.dtype == ("float64", "float64")
    assert floats.get_origin_batch(1, np.float32)[0].dtype == np.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = VectorSpace(2, dtype="float16").np_format_as(
            np.array([[np.inf, 1.0]], np.float16), VectorSpace(2, dtype="int32")
        )
    assert out.tolist() == [[2**31 - 1, 1]]
    coo = sp.coo_matrix(np.eye(3, dtype=np.float32))
    same = VectorSpace(3, sparse=True, dtype="float32")
    assert same.np_format_as(coo, same).format == "csr"
