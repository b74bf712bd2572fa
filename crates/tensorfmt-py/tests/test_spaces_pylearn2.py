"""Pylearn2's own numeric space tests (pylearn2/space/tests/test_space.py, HEAD af81e5c),
ported verbatim to tensorfmt.spaces: only the imports change (Theano-only tests and the
symbolic halves are left out; ``np.random.random_integers(k)`` became ``randint(1, k + 1)``)."""

import itertools

import numpy as np

from tensorfmt.spaces import (
    CompositeSpace,
    Conv2DSpace,
    IndexSequenceSpace,
    IndexSpace,
    VectorSequenceSpace,
    VectorSpace,
)


def test_np_format_as_vector2vector():
    vector_space_initial = VectorSpace(dim=8 * 8 * 3, sparse=False)
    vector_space_final = VectorSpace(dim=8 * 8 * 3, sparse=False)
    data = np.arange(5 * 8 * 8 * 3).reshape(5, 8 * 8 * 3)
    rval = vector_space_initial.np_format_as(data, vector_space_final)
    assert np.all(rval == data)


def test_np_format_as_index2index():
    index_space_initial = IndexSpace(max_labels=10, dim=1)

    index_space_final = IndexSpace(max_labels=10, dim=1)
    data = np.array([[0], [2], [1], [3], [5], [8], [1]])
    rval = index_space_initial.np_format_as(data, index_space_final)
    assert index_space_initial == index_space_final
    assert np.all(rval == data)

    index_space_downcast = IndexSpace(max_labels=10, dim=1, dtype='int32')
    rval = index_space_initial.np_format_as(data, index_space_downcast)
    assert index_space_initial != index_space_downcast
    assert np.all(rval == data)
    assert rval.dtype == 'int32' and data.dtype == 'int64'


def test_np_format_as_conv2d2conv2d():
    conv2d_space_initial = Conv2DSpace(shape=(8, 8), num_channels=3,
                                       axes=('b', 'c', 0, 1))
    conv2d_space_final = Conv2DSpace(shape=(8, 8), num_channels=3,
                                     axes=('b', 'c', 0, 1))
    data = np.arange(5 * 8 * 8 * 3).reshape(5, 3, 8, 8)
    rval = conv2d_space_initial.np_format_as(data, conv2d_space_final)
    assert np.all(rval == data)

    conv2d_space1 = Conv2DSpace(shape=(8, 8), num_channels=3,
                                axes=('c', 'b', 1, 0))
    conv2d_space0 = Conv2DSpace(shape=(8, 8), num_channels=3,
                                axes=('b', 'c', 0, 1))
    data = np.arange(5 * 8 * 8 * 3).reshape(5, 3, 8, 8)
    rval = conv2d_space0.np_format_as(data, conv2d_space1)
    nval = data.transpose(1, 0, 3, 2)
    assert np.all(rval == nval)


def test_np_format_as_vector2conv2d():
    vector_space = VectorSpace(dim=8 * 8 * 3, sparse=False)
    conv2d_space = Conv2DSpace(shape=(8, 8), num_channels=3,
                               axes=('b', 'c', 0, 1))
    data = np.arange(5 * 8 * 8 * 3).reshape(5, 8 * 8 * 3)
    rval = vector_space.np_format_as(data, conv2d_space)

    # Get data in a Conv2DSpace with default axes
    new_axes = conv2d_space.default_axes
    axis_to_shape = {'b': 5, 'c': 3, 0: 8, 1: 8}
    new_shape = tuple([axis_to_shape[ax] for ax in new_axes])
    nval = data.reshape(new_shape)
    # Then transpose
    nval = nval.transpose(*[new_axes.index(ax)
                            for ax in conv2d_space.axes])
    assert np.all(rval == nval)


def test_np_format_as_conv2d2vector():
    vector_space = VectorSpace(dim=8 * 8 * 3, sparse=False)
    conv2d_space = Conv2DSpace(shape=(8, 8), num_channels=3,
                               axes=('b', 'c', 0, 1))
    data = np.arange(5 * 8 * 8 * 3).reshape(5, 3, 8, 8)
    rval = conv2d_space.np_format_as(data, vector_space)
    nval = data.transpose(*[conv2d_space.axes.index(ax)
                            for ax in conv2d_space.default_axes])
    nval = nval.reshape(5, 3 * 8 * 8)
    assert np.all(rval == nval)

    vector_space = VectorSpace(dim=8 * 8 * 3, sparse=False)
    conv2d_space = Conv2DSpace(shape=(8, 8), num_channels=3,
                               axes=('c', 'b', 0, 1))
    data = np.arange(5 * 8 * 8 * 3).reshape(3, 5, 8, 8)
    rval = conv2d_space.np_format_as(data, vector_space)
    nval = data.transpose(*[conv2d_space.axes.index(ax)
                            for ax in conv2d_space.default_axes])
    nval = nval.reshape(5, 3 * 8 * 8)
    assert np.all(rval == nval)


def test_np_format_as_conv2d_vector_conv2d():
    conv2d_space1 = Conv2DSpace(shape=(8, 8), num_channels=3,
                                axes=('c', 'b', 1, 0))
    vector_space = VectorSpace(dim=8 * 8 * 3, sparse=False)
    conv2d_space0 = Conv2DSpace(shape=(8, 8), num_channels=3,
                                axes=('b', 'c', 0, 1))
    data = np.arange(5 * 8 * 8 * 3).reshape(5, 3, 8, 8)

    vecval = conv2d_space0.np_format_as(data, vector_space)
    rval1 = vector_space.np_format_as(vecval, conv2d_space1)
    rval2 = conv2d_space0.np_format_as(data, conv2d_space1)
    assert np.allclose(rval1, rval2)

    nval = data.transpose(1, 0, 3, 2)
    assert np.allclose(nval, rval1)


def test_np_format_as_vectorsequence2vectorsequence():
    vector_sequence_space1 = VectorSequenceSpace(dim=3, dtype='float32')
    vector_sequence_space2 = VectorSequenceSpace(dim=3, dtype='float64')

    data = np.asarray(np.random.uniform(low=0.0,
                                        high=1.0,
                                        size=(10, 3)),
                      dtype=vector_sequence_space1.dtype)
    rval = vector_sequence_space1.np_format_as(data, vector_sequence_space2)

    assert np.all(rval == data)


def test_np_format_as_indexsequence2indexsequence():
    index_sequence_space1 = IndexSequenceSpace(max_labels=6, dim=1,
                                               dtype='int16')
    index_sequence_space2 = IndexSequenceSpace(max_labels=6, dim=1,
                                               dtype='int32')

    data = np.asarray(np.random.randint(low=0,
                                        high=5,
                                        size=(10, 1)),
                      dtype=index_sequence_space1.dtype)
    rval = index_sequence_space1.np_format_as(data, index_sequence_space2)

    assert np.all(rval == data)


def test_np_format_as_indexsequence2vectorsequence():
    index_sequence_space = IndexSequenceSpace(max_labels=6, dim=1)
    vector_sequence_space = VectorSequenceSpace(dim=6)

    data = np.array([[0], [1], [4], [3]],
                    dtype=index_sequence_space.dtype)
    rval = index_sequence_space.np_format_as(data, vector_sequence_space)
    true_val = np.array([[1, 0, 0, 0, 0, 0],
                         [0, 1, 0, 0, 0, 0],
                         [0, 0, 0, 0, 1, 0],
                         [0, 0, 0, 1, 0, 0]])

    assert np.all(rval == true_val)


def test_np_format_as_sequence2other():
    vector_sequence_space = VectorSequenceSpace(dim=3)
    vector_space = VectorSpace(dim=3)

    data = np.random.uniform(low=0.0, high=1.0, size=(10, 3))
    np.testing.assert_raises(ValueError, vector_sequence_space.np_format_as,
                             data, vector_space)

    index_sequence_space = IndexSequenceSpace(max_labels=6, dim=1)
    index_space = IndexSpace(max_labels=6, dim=1)

    data = np.random.randint(low=0, high=5, size=(10, 1))
    np.testing.assert_raises(ValueError, index_sequence_space.np_format_as,
                             data, index_space)


def test_np_format_as_composite_composite():
    """
    Test using CompositeSpace.np_format_as() to convert between
    composite spaces that have the same tree structure, but different
    leaf spaces.
    """

    def make_composite_space(image_space):
        """
        Returns a composite space with a particular tree structure.
        """
        return CompositeSpace((CompositeSpace((image_space,) * 2),
                               VectorSpace(dim=1)))

    shape = np.array([8, 11])
    channels = 3
    datum_size = channels * shape.prod()

    composite_topo = make_composite_space(Conv2DSpace(shape=shape,
                                                      num_channels=channels))
    composite_flat = make_composite_space(VectorSpace(dim=datum_size))

    def make_vector_data(batch_size, space):
        """
        Returns a batch of synthetic data appropriate to the provided space.
        Supports VectorSpaces, and CompositeSpaces of VectorSpaces.  synthetic
        data.

        """
        if isinstance(space, CompositeSpace):
            return tuple(make_vector_data(batch_size, subspace)
                         for subspace in space.components)
        else:
            assert isinstance(space, VectorSpace)
            result = np.random.rand(batch_size, space.dim)
            if space.dtype is not None:
                return np.asarray(result, dtype=space.dtype)
            else:
                return result

    batch_size = 5
    flat_data = make_vector_data(batch_size, composite_flat)
    composite_flat.np_validate(flat_data)

    topo_data = composite_flat.np_format_as(flat_data, composite_topo)
    composite_topo.np_validate(topo_data)
    new_flat_data = composite_topo.np_format_as(topo_data,
                                                composite_flat)

    def get_shape(batch):
        """
        Returns the (nested) shape(s) of a (nested) batch.
        """
        if isinstance(batch, np.ndarray):
            return batch.shape
        else:
            return tuple(get_shape(b) for b in batch)

    def batch_equals(batch_0, batch_1):
        """
        Returns true if all corresponding elements of two batches are
        equal.  Supports composite data (i.e. nested tuples of data).
        """
        assert type(batch_0) == type(batch_1)
        if isinstance(batch_0, tuple):
            if len(batch_0) != len(batch_1):
                return False

            return np.all(tuple(batch_equals(b0, b1)
                                for b0, b1 in zip(batch_0, batch_1)))
        else:
            assert isinstance(batch_0, np.ndarray)
            return np.all(batch_0 == batch_1)

    assert batch_equals(new_flat_data, flat_data)


def test_compare_index():
    dims = [5, 5, 5, 6]
    max_labels = [10, 10, 9, 10]
    index_spaces = [IndexSpace(dim=dim, max_labels=max_label)
                    for dim, max_label in zip(dims, max_labels)]
    assert index_spaces[0] == index_spaces[1]
    assert not any(index_spaces[i] == index_spaces[j]
                   for i, j in itertools.combinations([1, 2, 3], 2))
    vector_space = VectorSpace(dim=5)
    conv2d_space = Conv2DSpace(shape=(8, 8), num_channels=3,
                               axes=('b', 'c', 0, 1))
    composite_space = CompositeSpace((index_spaces[0],))
    assert not any(index_space == vector_space for index_space in index_spaces)
    assert not any(index_space == composite_space
                   for index_space in index_spaces)
    assert not any(index_space == conv2d_space for index_space in index_spaces)


def test_np_format_as_index2vector():
    # Test 5 random batches for shape, number of non-zeros
    for _ in range(5):
        max_labels = np.random.randint(2, 10)
        batch_size = np.random.randint(1, 10)
        labels = np.random.randint(1, 10)
        batch = np.random.randint(1, max_labels, size=(batch_size, labels))
        index_space = IndexSpace(dim=labels, max_labels=max_labels)
        vector_space_merge = VectorSpace(dim=max_labels)
        vector_space_concatenate = VectorSpace(dim=max_labels * labels)
        merged = index_space.np_format_as(batch, vector_space_merge)
        concatenated = index_space.np_format_as(batch,
                                                vector_space_concatenate)
        assert merged.shape == (batch_size, max_labels)
        assert concatenated.shape == (batch_size, max_labels * labels)
        assert np.count_nonzero(merged) <= batch.size
        assert np.count_nonzero(concatenated) == batch.size
        assert np.all(np.unique(concatenated) == np.array([0, 1]))


def test_numeric_undo_format_as():
    """
    Test functionality of undo_np_format_as on numeric batches.
    This calls np_format_as with spaces reversed.
    """

    # Compare identity of Composite batches
    def assert_components(batch1, batch2):
        for e1, e2 in zip(batch1, batch2):
            if isinstance(e1, tuple) and isinstance(e2, tuple):
                assert_components(e1, e2)
            elif isinstance(e1, tuple) or isinstance(e2, tuple):
                raise ValueError('Composite batches do not match.')
            else:
                assert np.allclose(e1, e2)

    # VectorSpace and Conv2DSpace
    VS = VectorSpace(dim=27)
    VS_sparse = VectorSpace(dim=27, sparse=True)

    # VectorSpace to Sparse VectorSpace
    VS_batch = np.arange(270).reshape(10, 27)
    new_SVS_batch = VS.np_format_as(VS_batch, VS_sparse)
    new_VS_batch = VS.undo_np_format_as(new_SVS_batch, VS_sparse)
    assert np.allclose(new_VS_batch, VS_batch)

    # ConvSpace to ConvSpace
    CS = Conv2DSpace(shape=[3, 3],
                     num_channels=3,
                     axes=('b', 0, 1, 'c'),
                     dtype='float32')
    CS_non_default = Conv2DSpace(shape=[3, 3],
                                 num_channels=3,
                                 axes=('c', 'b', 0, 1),
                                 dtype='float64')
    CS_batch = np.arange(270).reshape(10, 3, 3, 3).astype('float32')
    new_ndCS_batch = CS.np_format_as(CS_batch, CS_non_default)
    new_CS_batch = CS.undo_np_format_as(new_ndCS_batch, CS_non_default)
    assert np.allclose(new_CS_batch, CS_batch)
    assert new_ndCS_batch.shape != CS_batch.shape
    assert new_ndCS_batch.dtype == 'float64'
    assert new_CS_batch.dtype == 'float32'

    ndCS_batch = np.arange(270).reshape(3, 10, 3, 3)
    new_CS_batch = CS_non_default.np_format_as(ndCS_batch, CS)
    new_ndCS_batch = CS_non_default.undo_np_format_as(new_CS_batch, CS)
    assert np.allclose(new_ndCS_batch, ndCS_batch)
    assert new_CS_batch.shape != ndCS_batch.shape
    assert new_ndCS_batch.dtype == 'float64'
    assert new_CS_batch.dtype == 'float32'

    # Start in VectorSpace
    VS_batch = np.arange(270).reshape(10, 27)
    new_CS_batch = VS.np_format_as(VS_batch, CS)
    new_VS_batch = VS.undo_np_format_as(new_CS_batch, CS)
    assert np.allclose(new_VS_batch, VS_batch)
    # Non-default axes
    new_CS_batch = VS.np_format_as(VS_batch, CS_non_default)
    new_VS_batch = VS.undo_np_format_as(new_CS_batch, CS_non_default)
    assert np.allclose(new_VS_batch, VS_batch)

    # Start in Conv2D with default axes
    CS_batch = np.arange(270).reshape(10, 3, 3, 3)
    new_VS_batch = CS.np_format_as(CS_batch, VS)
    new_CS_batch = CS.undo_np_format_as(new_VS_batch, VS)
    assert np.allclose(new_CS_batch, CS_batch)
    # Non-default axes
    CS_batch = np.arange(270).reshape(3, 10, 3, 3)
    new_VS_batch = CS_non_default.np_format_as(CS_batch, VS)
    new_CS_batch = CS_non_default.undo_np_format_as(new_VS_batch, VS)
    assert np.allclose(new_CS_batch, CS_batch)

    # Composite Space to VectorSpace
    VS = VectorSpace(dim=27)
    CS = Conv2DSpace(shape=[2, 2], num_channels=3, axes=('b', 0, 1, 'c'))
    CompS = CompositeSpace((CompositeSpace((VS, VS)), CS))
    VS_large = VectorSpace(dim=(2*27+12))
    VS_batch = np.arange(270).reshape(10, 27)
    VS_batch2 = 2*np.arange(270).reshape(10, 27)
    CS_batch = 3*np.arange(120).reshape(10, 2, 2, 3)
    CompS_batch = ((VS_batch, VS_batch2), CS_batch)
    new_VS_batch = CompS.np_format_as(CompS_batch, VS_large)
    new_CompS_batch = CompS.undo_np_format_as(new_VS_batch, VS_large)
    assert_components(CompS_batch, new_CompS_batch)

    # VectorSpace to Composite Space
    CompS = CompositeSpace((CompositeSpace((VS, VS)), CS))
    VS_batch = np.arange((2*27+12)*10).reshape(10, 2*27+12)
    new_CompS_batch = VS_large.np_format_as(VS_batch, CompS)
    new_VS_batch = VS_large.undo_np_format_as(new_CompS_batch, CompS)
    assert np.allclose(VS_batch, new_VS_batch)
    # Reorder CompositeSpace
    CompS = CompositeSpace((VS, CompositeSpace((VS, CS))))
    VS_batch = np.arange((2*27+12)*10).reshape(10, 2*27+12)
    new_CompS_batch = VS_large.np_format_as(VS_batch, CompS)
    new_VS_batch = VS_large.undo_np_format_as(new_CompS_batch, CompS)
    assert np.allclose(VS_batch, new_VS_batch)
    # Reorder CompositeSpace
    CompS = CompositeSpace((CompositeSpace((CompositeSpace((VS,)), CS)), VS))
    VS_batch = np.arange((2*27+12)*10).reshape(10, 2*27+12)
    new_CompS_batch = VS_large.np_format_as(VS_batch, CompS)
    new_VS_batch = VS_large.undo_np_format_as(new_CompS_batch, CompS)
    assert np.allclose(VS_batch, new_VS_batch)

    # CompositeSpace to CompositeSpace
    VS = VectorSpace(dim=27)
    CS = Conv2DSpace(shape=[3, 3], num_channels=3, axes=('b', 0, 1, 'c'))
    VS_batch = np.arange(270).reshape(10, 27)
    VS_batch2 = 2*np.arange(270).reshape(10, 27)
    VS_batch3 = 3*np.arange(270).reshape(10, 27)
    CompS_VS = CompositeSpace((CompositeSpace((VS, VS)), VS))
    CompS_CS = CompositeSpace((CompositeSpace((CS, CS)), CS))
    CompS_VS_batch = ((VS_batch, VS_batch2), VS_batch3)
    new_CompS_CS_batch = CompS_VS.np_format_as(CompS_VS_batch, CompS_CS)
    new_CompS_VS_batch = CompS_VS.undo_np_format_as(new_CompS_CS_batch,
                                                    CompS_CS)
    assert_components(CompS_VS_batch, new_CompS_VS_batch)
