"""Pylearn2 spaces on numpy batches, backed by the Rust core (``tensorfmt_core::space``).

A space says how one mini-batch is laid out: :class:`VectorSpace` (an ``(n, dim)``
matrix), :class:`Conv2DSpace` (a 4-D image batch whose axes ``'b'``, ``'c'``, ``0``,
``1`` come in a chosen order), :class:`IndexSpace` (integer labels),
:class:`CompositeSpace` (a tuple of sub-batches, nestable) and :class:`NullSpace`.
``np_format_as`` converts a batch between spaces without the caller thinking about
transposes, ``np_validate`` checks one, and :class:`DataSpecsMapping` flattens nested
``(space, source)`` data specs into their unique leaves and nests flat data back::

    >>> import numpy as np
    >>> from tensorfmt.spaces import VectorSpace, Conv2DSpace
    >>> vec = VectorSpace(2 * 2 * 3)
    >>> conv = Conv2DSpace((2, 2), num_channels=3, axes=("b", "c", 0, 1))
    >>> batch = np.arange(24, dtype=np.float32).reshape(2, 12)
    >>> vec.np_format_as(batch, conv).shape
    (2, 3, 2, 2)
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native

Batch = Union[None, np.ndarray, Tuple[Any, ...]]

_DTYPES = {
    "float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool",
}


def _dtype(dtype: Any) -> Optional[str]:
    if dtype is None:
        return None
    if dtype == "floatX":
        return "f32"
    return _DTYPES[np.dtype(dtype).name]


def _batch_in(batch: Batch) -> Any:
    if batch is None:
        return None
    if isinstance(batch, tuple):
        return [_batch_in(b) for b in batch]
    a = np.asarray(batch)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    a = np.ascontiguousarray(a)
    return {"data": a.tobytes(), "dtype": a.dtype.str, "shape": list(a.shape)}


def _batch_out(batch: Any) -> Batch:
    if batch is None:
        return None
    if isinstance(batch, tuple):
        return tuple(_batch_out(b) for b in batch)
    return np.asarray(batch)


class Space:
    """Base class of the spaces; compare with ``==``, print with ``str``.

    As in Pylearn2, ``dtype`` defaults to ``"floatX"`` (float32 here) for vector and
    image spaces and to int64 for index spaces; ``dtype=None`` accepts any dtype.
    """

    _spec: Tuple[Any, ...]

    def get_total_dimension(self) -> int:
        """The number of scalars in one example."""
        return _native.space_total_dimension(self._spec)

    def np_validate(self, batch: Batch) -> None:
        """Raises :class:`tensorfmt.TensorfmtError` unless ``batch`` is a batch of this space."""
        _native.space_validate(self._spec, _batch_in(batch))

    def validate(self, batch: Batch) -> None:
        """The same as :meth:`np_validate`."""
        self.np_validate(batch)

    def np_format_as(self, batch: Batch, space: "Space") -> Batch:
        """``batch`` (a batch of this space) as a batch of ``space``."""
        return _batch_out(_native.space_format_as(self._spec, _batch_in(batch), space._spec))

    def format_as(self, batch: Batch, space: "Space") -> Batch:
        """The same as :meth:`np_format_as`."""
        return self.np_format_as(batch, space)

    def np_batch_size(self, batch: Batch) -> int:
        """The number of examples in ``batch``."""
        return _native.space_batch_size(self._spec, _batch_in(batch))

    def get_origin_batch(self, batch_size: int) -> Batch:
        """A batch of ``batch_size`` zero examples, in the space's dtype."""
        return _batch_out(_native.space_origin_batch(self._spec, int(batch_size)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self._spec == other._spec

    def __hash__(self) -> int:
        return hash(self._spec)

    def __str__(self) -> str:
        return _native.space_str(self._spec)

    __repr__ = __str__


class VectorSpace(Space):
    """Batches of ``dim``-vectors: ``(n, dim)`` matrices."""

    def __init__(self, dim: int, dtype: Any = "floatX") -> None:
        self.dim = int(dim)
        self.dtype = dtype
        self._spec = ("vector", self.dim, _dtype(dtype))


class Conv2DSpace(Space):
    """4-D image batches of ``shape = (rows, cols)`` with ``num_channels`` channels, axes
    in the order ``axes`` (default ``('b', 0, 1, 'c')``)."""

    def __init__(
        self,
        shape: Sequence[int],
        num_channels: Optional[int] = None,
        axes: Sequence[Any] = ("b", 0, 1, "c"),
        dtype: Any = "floatX",
        channels: Optional[int] = None,
    ) -> None:
        if (num_channels is None) == (channels is None):
            raise TypeError("Conv2DSpace takes exactly one of num_channels and channels")
        self.shape = tuple(int(s) for s in shape)
        self.num_channels = int(num_channels if num_channels is not None else channels)  # type: ignore[arg-type]
        self.axes = tuple(axes)
        self.dtype = dtype
        labels = [str(a) for a in self.axes]
        self._spec = ("conv2d", self.shape[0], self.shape[1], self.num_channels, labels, _dtype(dtype))


class IndexSpace(Space):
    """Batches of ``dim`` integer labels in ``[0, max_labels)``."""

    def __init__(self, max_labels: int, dim: int, dtype: Any = "int64") -> None:
        self.max_labels = int(max_labels)
        self.dim = int(dim)
        self.dtype = dtype
        self._spec = ("index", self.max_labels, self.dim, _dtype(dtype))


class CompositeSpace(Space):
    """A tuple of spaces; its batches are tuples of their batches."""

    def __init__(self, components: Sequence[Space]) -> None:
        self.components = list(components)
        self._spec = ("composite", tuple(c._spec for c in self.components))


class NullSpace(Space):
    """The space of no data (batches are ``None``)."""

    def __init__(self) -> None:
        self._spec = ("null",)


class DataSpecsMapping:
    """Flattens nested ``(space, source)`` data specs into unique leaves and back.

    >>> from tensorfmt.spaces import VectorSpace, CompositeSpace, DataSpecsMapping
    >>> v, t = VectorSpace(3), VectorSpace(10)
    >>> m = DataSpecsMapping((CompositeSpace([v, CompositeSpace([v, t])]), ("features", ("features", "targets"))))
    >>> m.flatten(("features", ("features", "targets")), return_tuple=True)
    ('features', 'targets')
    >>> m.nest(("X", "Y"))
    ('X', ('X', 'Y'))
    """

    def __init__(self, data_specs: Tuple[Space, Any]) -> None:
        space, source = data_specs
        self._space = space._spec
        self._source = source
        self.n_unique_specs = _native.specs_n_unique(self._space, self._source)

    def _wrap(self, nested: Any) -> Any:
        # Spaces are leaves here, not tuples.
        if isinstance(nested, CompositeSpace):
            return tuple(self._wrap(c) for c in nested.components)
        if isinstance(nested, tuple):
            return tuple(self._wrap(c) for c in nested)
        return nested

    def flatten(self, nested: Any, return_tuple: bool = False) -> Any:
        """The unique leaves of ``nested`` (structured like the data specs), in order."""
        flat = _native.specs_flatten(self._space, self._source, self._wrap(nested))
        if not return_tuple and len(flat) == 1:
            return flat[0]
        return tuple(flat)

    def nest(self, flat: Any) -> Any:
        """``flat`` (one item per unique leaf) in the structure of the data specs."""
        if not isinstance(flat, tuple):
            flat = (flat,)
        return _native.specs_nest(self._space, self._source, list(flat))


__all__ = ["Space", "VectorSpace", "Conv2DSpace", "IndexSpace", "CompositeSpace", "NullSpace", "DataSpecsMapping"]
