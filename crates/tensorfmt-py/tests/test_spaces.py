"""tensorfmt.spaces: Pylearn2 spaces on numpy batches, backed by the Rust core."""

import numpy as np
import pytest

import tensorfmt
from tensorfmt.spaces import CompositeSpace, Conv2DSpace, DataSpecsMapping, IndexSpace, NullSpace, VectorSpace


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


def test_composite_batches_are_tuples():
    space = CompositeSpace([VectorSpace(2), CompositeSpace([VectorSpace(3), NullSpace()])])
    batch = (np.ones((4, 2), np.float32), (np.zeros((4, 3), np.float32), None))
    space.np_validate(batch)
    assert space.get_total_dimension() == 5
    origin = space.get_origin_batch(2)
    assert origin[0].shape == (2, 2) and origin[1][0].shape == (2, 3) and origin[1][1] is None
    flat = space.np_format_as(batch, VectorSpace(5))
    assert flat.shape == (4, 5)


def test_data_specs_mapping_flattens_and_nests():
    v, c, t = VectorSpace(12), Conv2DSpace((2, 2), num_channels=3), VectorSpace(10)
    space = CompositeSpace([v, CompositeSpace([c, t])])
    source = ("features", ("features", "targets"))
    m = DataSpecsMapping((space, source))
    assert m.n_unique_specs == 3
    assert m.flatten(source) == ("features", "features", "targets")
    assert m.flatten(space) == (v, c, t)
    assert m.nest((1, 2, 3)) == (1, (2, 3))
    assert m.nest(m.flatten(source)) == source
    with pytest.raises(tensorfmt.TensorfmtError):
        m.nest((1, 2))


def test_spaces_compare_and_print():
    assert VectorSpace(3) == VectorSpace(3) and VectorSpace(3) != VectorSpace(4)
    assert "VectorSpace" in str(VectorSpace(3))


def test_the_module_examples_run():
    import doctest

    import tensorfmt.spaces

    result = doctest.testmod(tensorfmt.spaces)
    assert result.attempted > 0 and result.failed == 0
