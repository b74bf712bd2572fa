"""Regressions for the differential audit of tensorfmt.spaces against Pylearn2's real
source (lisa-lab/pylearn2 af81e5c run with a numpy-only Theano stand-in). Each test
encodes, as literals, what Pylearn2 returned or raised for the same call; where we
deviate on purpose (docs/spaces.md §9) the test says so and pins our behaviour."""

import numpy as np
import pytest
from conftest import require_module

sparse = require_module("scipy.sparse")

import tensorfmt  # noqa: E402
from tensorfmt.spaces import (  # noqa: E402
    CompositeSpace,
    Conv2DSpace,
    DataSpecsMapping,
    IndexSpace,
    NullSpace,
    SequenceSpace,
    SpaceAssertionError,
    SpaceTypeError,
    VectorSpace,
    get_floatx,
    set_floatx,
)


@pytest.fixture
def floatx64():
    before = get_floatx()
    set_floatx("float64")
    yield
    set_floatx(before)


# -- composite -> composite: the total dimensions first ----------------------------------


def test_composite_to_composite_checks_the_total_dimension_first():
    # Pylearn2: ValueError "... with total dimension 2 can't format a batch into ...
    # because its total dimension is 6", though IndexSpace(3, 2) -> VectorSpace(6) alone
    # gives concatenated one-hots.
    src = CompositeSpace([IndexSpace(3, 2)])
    dst = CompositeSpace([VectorSpace(6, dtype="float32")])
    with pytest.raises(ValueError, match="total dimension 2 can't format a batch into .* is 6"):
        src.np_format_as((np.array([[0, 2]]),), dst)
    # The size error comes before the tree check (Pylearn2: ValueError, not TypeError).
    with pytest.raises(ValueError, match="total dimension"):
        CompositeSpace([CompositeSpace([]), IndexSpace(5, 3)]).np_format_as(
            ((), np.array([[4, 3, 1]])), CompositeSpace([VectorSpace(0), VectorSpace(5)]))


def test_nested_composites_are_not_size_checked():
    # Pylearn2 checks only the top level: [[1.]] and [[0., 0., 1.]] (float32 one-hots).
    src = CompositeSpace([CompositeSpace([IndexSpace(1, 3)]), CompositeSpace([IndexSpace(3, 1)])])
    dst = CompositeSpace([CompositeSpace([VectorSpace(1)]), CompositeSpace([VectorSpace(3)])])
    ((a,), (b,)) = src.np_format_as(((np.array([[0, 0, 0]]),), (np.array([[2]]),)), dst)
    assert a.tolist() == [[1.0]] and b.tolist() == [[0.0, 0.0, 1.0]]
    assert a.dtype == b.dtype == np.float32


# -- float16 sparse ------------------------------------------------------------------------

F16_SPARSE = [
    lambda: VectorSpace(2, dtype="float32").np_format_as(
        np.ones((1, 2), "float32"), VectorSpace(2, sparse=True, dtype="float16")),
    lambda: VectorSpace(2, dtype=None).np_format_as(
        np.ones((1, 2), "float16"), VectorSpace(2, sparse=True, dtype=None)),
    lambda: IndexSpace(3, 2).np_format_as(np.array([[0, 2]]), VectorSpace(3, sparse=True, dtype="float16")),
    lambda: Conv2DSpace((1, 1), num_channels=2).np_format_as(
        np.ones((1, 1, 1, 2), "float32"), VectorSpace(2, sparse=True, dtype="float16")),
    lambda: VectorSpace(3).np_format_as(
        np.ones((1, 3), "float32"), CompositeSpace([VectorSpace(1), VectorSpace(2, sparse=True, dtype="float16")])),
    lambda: CompositeSpace([VectorSpace(4)]).np_format_as(
        (np.ones((1, 4), "float32"),), VectorSpace(4, sparse=True, dtype="float16")),
    lambda: VectorSpace(2, sparse=True, dtype="float16").get_origin_batch(2),
]


@pytest.mark.parametrize("call", F16_SPARSE)
def test_float16_sparse_outputs_are_a_value_error(call):
    # Pylearn2: ValueError "scipy.sparse does not support dtype float16" in every case.
    with pytest.raises(tensorfmt.InvalidArgumentError, match="float16"):
        call()


# -- one-hot dtypes --------------------------------------------------------------------


def test_sparse_merged_one_hots_into_a_dtype_agnostic_vector_are_float64():
    # Pylearn2 (floatX float32): sparse merge float64 [[1, 0, 1]]; sparse concatenate and
    # dense forms floatX.
    assert get_floatx() == "float32"
    merged = IndexSpace(3, 2).np_format_as(np.array([[0, 2]]), VectorSpace(3, sparse=True, dtype=None))
    assert merged.dtype == np.float64 and merged.toarray().tolist() == [[1.0, 0.0, 1.0]]
    concat = IndexSpace(3, 2).np_format_as(np.array([[0, 2]]), VectorSpace(6, sparse=True, dtype=None))
    assert concat.dtype == np.float32
    assert IndexSpace(3, 2).np_format_as(np.array([[0, 2]]), VectorSpace(3, dtype=None)).dtype == np.float32


# -- composite -> vector: width-0 and data-less components ----------------------------


def test_a_width_zero_component_gives_its_dtype():
    # Pylearn2: ndarray int8 of shape (2, 0), not floatX.
    out = CompositeSpace([VectorSpace(0, dtype="int8")]).np_format_as(
        (np.zeros((2, 0), "int8"),), VectorSpace(0, dtype=None))
    assert out.dtype == np.int8 and out.shape == (2, 0)
    # ... and takes part in the dtype agreement (Pylearn2: TypeError, int8 vs float32).
    with pytest.raises(TypeError, match="differing dtypes"):
        CompositeSpace([VectorSpace(0, dtype="int8"), VectorSpace(1, dtype="float32")]).np_format_as(
            (np.zeros((2, 0), "int8"), np.zeros((2, 1), "float32")), VectorSpace(1, dtype=None))


@pytest.mark.parametrize("space, batch", [
    (CompositeSpace([]), ()),
    (CompositeSpace([NullSpace()]), (None,)),
    (CompositeSpace([CompositeSpace([]), VectorSpace(1)]), ((), np.zeros((2, 1), np.float32))),
])
@pytest.mark.parametrize("sparse_target", [False, True])
def test_a_composite_without_data_has_no_batch_size(space, batch, sparse_target):
    # Pylearn2 concatenates no pieces and fails; an (n, 0) result could not know n.
    with pytest.raises(ValueError, match="no component with data"):
        space.np_format_as(batch, VectorSpace(space.get_total_dimension(), sparse=sparse_target))


# -- sparse -> dense ---------------------------------------------------------------------


def test_sparse_to_dense_is_an_ndarray_not_a_matrix():
    # Deviation: Pylearn2 returns np.matrix [[1., 1.]] (todense(), no cast) here.
    out = VectorSpace(2, sparse=True, dtype=None).np_format_as(
        sparse.csr_matrix(np.ones((1, 2))), VectorSpace(2, dtype=None))
    assert type(out) is np.ndarray and out.dtype == np.float64 and out.tolist() == [[1.0, 1.0]]


# -- callbacks ---------------------------------------------------------------------------


class MyErr(ValueError):
    pass


def _raise_mine(batch):
    raise MyErr("custom")


def _raise_attribute_error(batch):
    raise AttributeError("mine")


def test_a_callbacks_own_exception_reaches_the_caller_unchanged():
    space = VectorSpace(3, dtype=None, np_validate_callbacks=[_raise_mine])
    with pytest.raises(MyErr, match="custom") as e:
        space.np_validate(np.ones((1, 3)))
    assert type(e.value) is MyErr and not isinstance(e.value, tensorfmt.TensorfmtError)
    with pytest.raises(MyErr):
        space.np_format_as(np.ones((1, 3)), VectorSpace(3))
    # Pylearn2: AttributeError "mine" through a composite's component, not a TypeError.
    comp = CompositeSpace([VectorSpace(2, np_validate_callbacks=[_raise_attribute_error])])
    with pytest.raises(AttributeError, match="mine") as e:
        comp.np_format_as((np.ones((1, 2)),), VectorSpace(2))
    assert type(e.value) is AttributeError
    with pytest.raises(MyErr):
        VectorSpace(3, validate_callbacks=[_raise_mine]).validate(np.ones((1, 3)))


# -- construction and batch kinds ----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "floatX", "float32", "foo"])
def test_index_space_dtype_names_without_int_are_a_value_error(dtype):
    # Pylearn2: ValueError "The dtype of IndexSpace must be an integer type".
    with pytest.raises(ValueError, match="integer type") as e:
        IndexSpace(3, 1, dtype=dtype)
    assert not isinstance(e.value, TypeError)


def test_index_space_dtype_none_and_numpy_dtypes():
    # Pylearn2: TypeError "Unrecognized value" for a name with "int" that is no dtype.
    with pytest.raises(TypeError, match="Unrecognized"):
        IndexSpace(3, 1, dtype="intx")
    # Deviation: Pylearn2 raises TypeError (`'int' in dtype` on a non-string) for these.
    assert IndexSpace(3, 1, dtype=None).dtype is None
    assert IndexSpace(3, 1, dtype=np.dtype("int32")).dtype == "int32"
    with pytest.raises(ValueError, match="integer type"):
        IndexSpace(3, 1, dtype=np.dtype("float32"))


def test_a_list_inside_a_tuple_batch_is_an_assertion_error():
    # Pylearn2: AssertionError, at any depth.
    with pytest.raises(SpaceAssertionError):
        CompositeSpace([VectorSpace(3)]).np_validate(([[1.0, 2, 3]],))
    with pytest.raises(AssertionError):
        CompositeSpace([CompositeSpace([VectorSpace(1)])]).np_format_as(
            (([np.zeros((1, 1))],),), VectorSpace(1))


def test_composite_dtype_setter_broadcasts_a_numpy_dtype():
    # Deviation: Pylearn2 ignores an np.dtype silently (the dtype stays ('float32',)).
    s = CompositeSpace([VectorSpace(2, dtype="float32")])
    s.dtype = np.dtype("float64")
    assert s.dtype == ("float64",)


# -- SequenceSpace -------------------------------------------------------------------------


def test_sequence_space_dtype_is_the_data_and_mask_pair(floatx64):
    s = SequenceSpace(VectorSpace(2, dtype="float32"))
    assert s.dtype == ("float32", "float64")  # Pylearn2 (floatX float64)
    s.dtype = "float16"
    assert s.dtype == ("float16", "float16") and s.space.dtype == "float16"
    s.dtype = ("float32", "int8")
    assert s.dtype == ("float32", "int8")
    with pytest.raises(ValueError):
        s.dtype = ("float32",)


def test_sequence_space_origin_batch_is_pylearn2s(floatx64):
    s = SequenceSpace(VectorSpace(2, dtype="float32"))
    data, mask = s.get_origin_batch(2)
    # Pylearn2: data float32 zeros (5, 2, 2); mask float64, sequences of 3 and 4 steps.
    assert data.shape == (5, 2, 2) and data.dtype == np.float32 and not data.any()
    assert mask.dtype == np.float64
    assert mask.tolist() == [[1, 1], [1, 1], [1, 1], [0, 1], [0, 0]]
    data, mask = s.get_origin_batch(2, "int32")
    assert data.dtype == mask.dtype == np.int32 and mask.tolist() == [[1, 1], [1, 1], [1, 1], [0, 1], [0, 0]]
    assert s.get_origin_batch(1)[1].tolist() == [[1], [1], [1], [0], [0]]
    data, mask = SequenceSpace(IndexSpace(3, 2)).get_origin_batch(3)
    assert data.shape == (5, 3, 2) and data.dtype == np.int64 and mask.shape == (5, 3)
    # Deviation: a Conv2D inner space gives 5 steps of its own origin batch (Pylearn2's
    # (5, 3, 4) fails its own validation).
    conv = SequenceSpace(Conv2DSpace((2, 2), num_channels=1))
    data, mask = conv.get_origin_batch(3)
    assert data.shape == (5, 3, 2, 2, 1)
    conv.np_validate((data, mask))


def test_sequence_space_documented_deviations():
    # Pylearn2: get_batch_axis() 0 (inherited), np_batch_size = data.shape[1] (2, the
    # channels, for a ('c', 0, 1, 'b') inner space), np_format_as always fails.
    s = SequenceSpace(VectorSpace(2, dtype="float32"))
    assert s.get_batch_axis() == 1
    c = SequenceSpace(Conv2DSpace((1, 1), num_channels=2, axes=("c", 0, 1, "b")))
    assert c.np_batch_size((np.zeros((3, 2, 1, 1, 5)), np.ones((3, 5)))) == 5
    data, mask = s.np_format_as((np.ones((3, 4, 2), "float32"), np.ones((3, 4))), SequenceSpace(VectorSpace(2)))
    assert data.shape == (3, 4, 2) and mask.shape == (3, 4)
    assert (s == VectorSpace(2)) is False  # Pylearn2: TypeError from issubclass
    # Into another kind of space: upstream's size check first (ValueError), then no
    # conversion.
    batch = (np.ones((3, 4, 2), "float32"), np.ones((3, 4)))
    with pytest.raises(ValueError, match="total dimension 2 can't format"):
        s.np_format_as(batch, VectorSpace(6))
    with pytest.raises(NotImplementedError):
        s.np_format_as(batch, VectorSpace(2))


# -- DataSpecsMapping ----------------------------------------------------------------------


def test_data_specs_take_any_hashable_source():
    # Pylearn2: spec_mapping 0 for the sources None and 7.
    assert DataSpecsMapping((VectorSpace(3), None)).spec_mapping == 0
    m = DataSpecsMapping((CompositeSpace([VectorSpace(3), NullSpace()]), (7, "")))
    assert m.spec_mapping == (0, None)
    # Any false value stands at a NullSpace position (Pylearn2: `assert not nested`).
    assert m.flatten((5, 0)) == 5 and m.flatten((5, False)) == 5
    with pytest.raises(AssertionError):
        m.flatten((5, 1))
    with pytest.raises(TypeError):  # a string still never stands for a composite's sources
        DataSpecsMapping((CompositeSpace([VectorSpace(3)]), "f"))
