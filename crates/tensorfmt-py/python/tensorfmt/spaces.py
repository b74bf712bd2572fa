"""Pylearn2 spaces and data specs on numpy (and scipy sparse) batches.

A space says how one mini-batch is laid out: :class:`VectorSpace` (an ``(n, dim)``
matrix, dense or scipy CSR), :class:`Conv2DSpace` (a 4-D image batch whose axes ``'b'``,
``'c'``, ``0``, ``1`` come in a chosen order), :class:`IndexSpace` (integer labels),
:class:`CompositeSpace` (a tuple of sub-batches, nestable), :class:`NullSpace` (no data)
and the sequence spaces (:class:`VectorSequenceSpace`, :class:`IndexSequenceSpace`, and
:class:`SequenceSpace` for padded variable-length batches with a mask).
``np_format_as`` converts a batch between spaces, ``undo_np_format_as`` converts it
back, ``np_validate`` checks one, and :class:`DataSpecsMapping` flattens nested
``(space, source)`` data specs into their unique leaves and nests flat data back::

    >>> import numpy as np
    >>> from tensorfmt.spaces import VectorSpace, Conv2DSpace
    >>> vec = VectorSpace(2 * 2 * 3)
    >>> conv = Conv2DSpace((2, 2), num_channels=3, axes=("b", "c", 0, 1))
    >>> batch = np.arange(24, dtype=np.float32).reshape(2, 12)
    >>> img = vec.np_format_as(batch, conv)
    >>> img.shape, np.shares_memory(img, batch)
    ((2, 3, 2, 2), True)
    >>> np.array_equal(vec.undo_np_format_as(img, conv), batch)
    True
    >>> print(vec)
    VectorSpace(dim=12, dtype=float32)

The semantics are Pylearn2's numeric ones (``pylearn2/space/__init__.py``,
``pylearn2/utils/data_specs.py``, HEAD af81e5c), with these deliberate deviations
(``docs/spaces.md`` has the full tables):

* Conv2DSpace axes must be a permutation of ``('b', 'c', 0, 1)``; Conv2D -> Conv2D needs
  equal shape and channels (upstream transposes any batch of equal total size).
* IndexSpace labels are range-checked (a negative label or one >= ``max_labels`` raises
  :class:`SpaceIndexError`; upstream wraps negatives silently); merged one-hots cap
  duplicate labels at 1 in sparse output too; an IndexSpace formatted to an integer
  IndexSpace of another dtype refuses labels that do not fit.
* Every result is validated against the target space before it is returned.
* Float -> integer output casts saturate (NaN -> 0) instead of numpy's undefined values.
* NullSpace has total dimension 0, NullSpace -> NullSpace is a no-op, and a composite's
  total skips NullSpace components; ``get_origin`` / ``get_origin_batch`` of a NullSpace
  are ``None``.
* ``get_origin`` is ``(dim,)`` in the space dtype for VectorSpace and IndexSpace;
  ``get_origin_batch(0)`` is allowed for every space.
* A CompositeSpace dtype setter broadcasts an ``np.dtype`` or a numpy scalar type
  (upstream ignores it silently) and refuses values other than those, None, a string
  or a tuple.
* A string source never stands for a composite's tuple of sources.
* ``DataSpecsMapping.flatten`` compares duplicate array data by identity or content
  (upstream ``==`` crashes on arrays); ``nest`` of a space puts a NullSpace at null
  positions (upstream raises).
* ``restrict_batch`` works on numeric batches (upstream: symbolic only).
* Construction checks upstream lacks: VectorSpace ``dim`` an integer >= 0, IndexSpace
  ``max_labels`` >= 1 and ``dim`` >= 1.
* The ``dtype`` setter keeps IndexSpace integer-only (upstream's setter bypassed the
  rule its constructor applies).
* Error messages are well formed (upstream misses a space before "because" and names
  the source's ``max_labels`` in IndexSpace size errors).
* ``'floatX'`` is float32 unless :func:`set_floatx` says otherwise (Theano's default is
  float64; Pylearn2 ran on GPUs, whose Theano backend computes in float32).
* IndexSpace takes ``dtype=None`` and ``np.dtype`` objects (upstream: a TypeError from
  ``'int' in dtype``).
* VectorSequenceSpace and IndexSequenceSpace have a total dimension, an origin batch and
  a hash agreeing with ``==``; SequenceSpace's batch axis is its data's (1 + the inner
  one), its batch size reads that axis, it converts between sequence spaces step by
  step (upstream's conversion always fails), and it holds only dense Vector, Index and
  Conv2D spaces.
* Sparse -> dense gives an ``ndarray``, never an ``np.matrix``; any scipy sparse format
  splits into a composite (upstream: COO is a TypeError).
* ``np_batch_size`` of a composite skips NullSpace and empty components (upstream:
  AssertionError); ``None`` for a simple space is a TypeError (upstream:
  AttributeError).

The Theano (symbolic) API is not ported. ``floatX`` resolves when a space is built, to
float32 unless :func:`set_floatx` chose another float type (``set_floatx("float64")``
gives Theano's default).

Errors are :class:`tensorfmt.TensorfmtError` subclasses that also derive from the
builtin Pylearn2 raised: :class:`SpaceTypeError` (``TypeError``),
:class:`SpaceNotImplementedError`, :class:`SpaceAssertionError`,
:class:`SpaceIndexError`, and :class:`tensorfmt.InvalidArgumentError` (``ValueError``).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._errors import (
    InvalidArgumentError,
    SpaceAssertionError,
    SpaceIndexError,
    SpaceNotImplementedError,
    SpaceTypeError,
    callers_own,
)

Batch = Any
"""A batch: a numpy array, a scipy sparse matrix, None, or a (nested) tuple of them."""

_ALLOWED_DTYPES = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)

_floatx = "float32"


def set_floatx(dtype: str) -> None:
    """Chooses what ``'floatX'`` resolves to in spaces built from now on (Theano's
    ``config.floatX``): ``'float16'``, ``'float32'`` (the default) or ``'float64'``.

    >>> set_floatx("float64"); VectorSpace(2).dtype
    'float64'
    >>> set_floatx("float32"); VectorSpace(2).dtype
    'float32'
    """
    global _floatx
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = repr(dtype)
    if name not in ("float16", "float32", "float64"):
        raise InvalidArgumentError(f"floatX must be float16, float32 or float64, not {dtype!r}")
    _floatx = name


def get_floatx() -> str:
    """What ``'floatX'`` resolves to now (see :func:`set_floatx`)."""
    return _floatx


def _clean_dtype(dtype: Any) -> Optional[str]:
    """Pylearn2's ``_clean_dtype_arg``: a dtype name, ``'floatX'`` resolved, or None."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype == "floatX":
        return _floatx
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    if isinstance(dtype, str) and dtype in _ALLOWED_DTYPES:
        return dtype
    raise SpaceTypeError(f'Unrecognized value "{dtype}" (type {type(dtype)}) for dtype arg')


def _sparse() -> Any:
    import scipy.sparse

    return scipy.sparse


def _issparse(batch: Any) -> bool:
    if isinstance(batch, (np.ndarray, tuple)) or batch is None:
        return False
    try:
        return bool(_sparse().issparse(batch))
    except ImportError:  # no scipy: nothing can be sparse
        return False


def _is_numeric(batch: Any) -> bool:
    if batch is None or isinstance(batch, np.ndarray) or _issparse(batch):
        return True
    if isinstance(batch, tuple):
        return all(_is_numeric(b) for b in batch)
    return False


def _has_list(batch: Any) -> bool:
    if isinstance(batch, list):
        return True
    return isinstance(batch, tuple) and any(_has_list(b) for b in batch)


def _check_is_numeric(batch: Any) -> None:
    # A list anywhere in the batch is Pylearn2's AssertionError (its batch walk asserts).
    if _has_list(batch):
        raise SpaceAssertionError("a batch is a numpy array, a scipy sparse matrix, None or a tuple; got a list")
    if not _is_numeric(batch):
        raise SpaceTypeError(f'Expected batch to be a numeric variable, but instead it was of type "{type(batch)}"')


def _run_callbacks(callbacks: Sequence[Callable[[Batch], None]], batch: Batch) -> None:
    """Runs the caller's validate callbacks; what one raises reaches the caller unchanged
    (marked so that the public-call guard does not translate it)."""
    for callback in callbacks:
        callers_own(callback)(batch)


def _one_dtype(d: Any) -> bool:
    """Whether ``d`` is one dtype for every leaf of a composite: None, a name, a numpy
    dtype or a numpy scalar type (``np.float64``), as a simple space takes them."""
    return d is None or isinstance(d, (str, np.dtype)) or (isinstance(d, type) and issubclass(d, np.generic))


def _cast(arg: Any, dtype: Optional[str]) -> Any:
    """Pylearn2's ``_cast``: element-wise, no copy when the dtype is already right.

    Deviation: float -> integer saturates at the integer range (NaN -> 0), where numpy's
    C cast gives undefined values; complex -> real drops the imaginary part.
    """
    if dtype is None:
        return arg
    if isinstance(arg, tuple):
        return tuple(_cast(a, dtype) for a in arg)
    if arg is None:
        return None
    if _issparse(arg):
        if arg.dtype == dtype:
            return arg
        out = arg.tocsr(copy=True) if arg.format != "csr" else arg.copy()
        out.data = _cast(out.data, dtype)  # the stored values, with the dense rules
        return out
    if arg.dtype == dtype:
        return arg
    to = np.dtype(dtype)
    src = arg
    if src.dtype.kind == "c" and to.kind != "c":
        src = src.real
    if src.dtype.kind == "f" and to.kind in "iu":
        info = np.iinfo(to)
        with np.errstate(invalid="ignore", over="ignore"):
            out = src.astype(to)
        # Compared in float64: float16 cannot hold an int32 bound (the comparison would
        # overflow, and warn).
        wide = src.astype(np.float64, copy=False)
        out[wide >= float(info.max)] = info.max
        out[wide <= float(info.min)] = info.min
        out[np.isnan(src)] = 0
        return out
    return src.astype(to)


def _safe_zip_3(a: Sequence[Any], b: Sequence[Any], c: Sequence[Any]) -> List[Tuple[Any, Any, Any]]:
    if len(a) != len(b):
        raise InvalidArgumentError(f"Argument 0 has length {len(a)} but argument 1 has length {len(b)}")
    return list(zip(a, b, c))


def _check_sparse_dtype(dtype: Any) -> None:
    """scipy.sparse has no float16 matrices (Pylearn2 fails building one: ValueError);
    older scipy builds one that ``toarray`` cannot read, so we refuse it first."""
    if dtype is not None and np.dtype(dtype) == np.float16:
        raise InvalidArgumentError(
            "scipy.sparse does not support dtype float16, so a sparse VectorSpace batch cannot be float16"
        )


def _safe_zip(a: Sequence[Any], b: Sequence[Any]) -> List[Tuple[Any, Any]]:
    if len(a) != len(b):
        raise InvalidArgumentError(f"Argument 0 has length {len(a)} but argument 1 has length {len(b)}")
    return list(zip(a, b))


def _int_arg(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SpaceTypeError(f"{what} must be an integer, got {value!r} of type {type(value)}")
    if value < minimum:
        raise InvalidArgumentError(f"{what} must be at least {minimum}, got {value}")
    return int(value)


class Space:
    """Base class of the spaces: compare with ``==``, hash, print with ``str``.

    ``validate_callbacks`` / ``np_validate_callbacks`` are run (with the batch) at the
    start of ``validate`` / ``np_validate``, as in Pylearn2.
    """

    def __init__(
        self,
        validate_callbacks: Optional[List[Callable[[Batch], None]]] = None,
        np_validate_callbacks: Optional[List[Callable[[Batch], None]]] = None,
    ) -> None:
        self.validate_callbacks = list(validate_callbacks or [])
        self.np_validate_callbacks = list(np_validate_callbacks or [])

    # -- the public API, shared by every space -------------------------------------

    def get_total_dimension(self) -> int:
        """The number of scalars in one example."""
        raise SpaceNotImplementedError(f"{type(self).__name__} does not implement get_total_dimension()")

    def get_batch_axis(self) -> int:
        """The axis of a batch that indexes examples (0 except for Conv2DSpace)."""
        return 0

    def get_origin(self) -> Any:
        """One zero example (no batch axis)."""
        raise SpaceNotImplementedError(f"{type(self).__name__} does not implement get_origin()")

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> Batch:
        """A batch of ``batch_size`` zero examples in ``dtype`` (default: the space's)."""
        raise SpaceNotImplementedError(f"{type(self).__name__} does not implement get_origin_batch()")

    def np_validate(self, batch: Batch) -> None:
        """Raises unless ``batch`` is a valid batch of this space (kind, rank, sizes, the
        dtype rule: a float batch for an integer space or a complex batch for a real one
        is a :class:`SpaceTypeError`)."""
        _check_is_numeric(batch)
        _run_callbacks(self.np_validate_callbacks, batch)
        self._validate_impl(batch)

    def validate(self, batch: Batch) -> None:
        """:meth:`np_validate` (the symbolic API is not ported), after ``validate_callbacks``."""
        _run_callbacks(self.validate_callbacks, batch)
        self.np_validate(batch)

    def np_batch_size(self, batch: Batch) -> int:
        """The number of examples in ``batch`` (validated first)."""
        self.np_validate(batch)
        return self._batch_size_impl(batch)

    def batch_size(self, batch: Batch) -> int:
        """The same as :meth:`np_batch_size`."""
        return self.np_batch_size(batch)

    def np_format_as(self, batch: Batch, space: "Space") -> Batch:
        """``batch`` (a batch of this space) as a batch of ``space``.

        A view of ``batch`` where the conversion is a reshape or an axes permutation
        with no dtype change (as Pylearn2's ``Conv2DSpace.convert_numpy``); a copy only
        where the layout or the dtype must change. The result is validated against
        ``space`` (a deviation from Pylearn2, which never checks it).
        """
        if not isinstance(space, Space):
            raise SpaceTypeError(f"the target must be a Space, got {space!r} of type {type(space)}")
        self.np_validate(batch)
        out = self._format_as(batch, space)
        if _issparse(out) and out.format != "csr":
            out = out.tocsr()  # sparse outputs are CSR, even when nothing else changes
        space._validate_impl(out)
        return out

    def format_as(self, batch: Batch, space: "Space") -> Batch:
        """The same as :meth:`np_format_as`."""
        return self.np_format_as(batch, space)

    def undo_np_format_as(self, batch: Batch, space: "Space") -> Batch:
        """``batch``, a batch of ``space`` (obtained by ``self.np_format_as(_, space)``),
        formatted back into this space: ``space.np_format_as(batch, self)``."""
        _check_is_numeric(batch)
        return space.np_format_as(batch, self)

    def undo_format_as(self, batch: Batch, space: "Space") -> Batch:
        """The same as :meth:`undo_np_format_as`."""
        return self.undo_np_format_as(batch, space)

    # -- what subclasses implement --------------------------------------------------

    def _validate_impl(self, batch: Batch) -> None:
        raise SpaceNotImplementedError(f"{type(self).__name__} does not implement validation")

    def _batch_size_impl(self, batch: Batch) -> int:
        raise SpaceNotImplementedError(f"{type(self).__name__} does not implement batch_size")

    def _check_sizes(self, space: "Space") -> None:
        mine, other = self.get_total_dimension(), space.get_total_dimension()
        if mine != other:
            raise InvalidArgumentError(
                f"{self} with total dimension {mine} can't format a batch into {space} "
                f"because its total dimension is {other}"
            )

    def _format_as(self, batch: Batch, space: "Space") -> Batch:
        """Converts a batch already validated against ``self``."""
        raise SpaceNotImplementedError(f"{self} doesn't know how to format as {space}")

    def _key(self) -> Tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self),) + self._key())

    def __repr__(self) -> str:
        return str(self)


class SimplyTypedSpace(Space):
    """A space whose ``dtype`` is one dtype name (or None for any dtype).

    The ``dtype`` setter really changes the space: origin batches, output casts,
    validation and equality use the new value; ``'floatX'`` resolves to
    :func:`get_floatx`.
    """

    def __init__(self, dtype: Any = "floatX", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._dtype = _clean_dtype(dtype)

    @property
    def dtype(self) -> Optional[str]:
        """The dtype name (``'float32'``), or None for a dtype-agnostic space."""
        return self._dtype

    @dtype.setter
    def dtype(self, new_dtype: Any) -> None:
        self._dtype = _clean_dtype(new_dtype)

    @dtype.deleter
    def dtype(self) -> None:
        raise RuntimeError("You may not delete the dtype of a space, though you can set it to None.")

    def _dtype_arg(self, dtype: Any) -> str:
        """A method's dtype argument, falling back to the space's."""
        if dtype is None:
            if self._dtype is None:
                raise SpaceTypeError(
                    "self.dtype is None, so you must provide a non-None dtype argument to this method."
                )
            return self._dtype
        cleaned = _clean_dtype(dtype)
        assert cleaned is not None
        return cleaned

    def _validate_impl(self, batch: Batch) -> None:
        if isinstance(batch, tuple):
            raise SpaceTypeError("This space only supports simple dtypes, but received a composite batch.")
        if batch is None:
            raise SpaceTypeError(f"{self} expects an array as a batch, got None")
        if self._dtype is not None:
            to = np.dtype(self._dtype)
            frm = batch.dtype
            if (frm.kind == "c" and to.kind != "c") or (frm.kind not in "iu" and to.kind in "iu"):
                raise SpaceTypeError(f"Cannot safely cast batch dtype {frm} to space's dtype {to}. ")


def _check_dense(space: Space, batch: Any) -> None:
    if _issparse(batch):
        raise SpaceTypeError(f"{space} cannot use sparse batches; got {type(batch)}")
    if not isinstance(batch, np.ndarray):
        raise SpaceTypeError(
            f"The value of a {type(space).__name__} batch should be a numpy.ndarray, but is {type(batch)}."
        )


def _check_matrix(space: Space, batch: Any, dim: int) -> None:
    name = type(space).__name__
    if batch.ndim != 2:
        raise InvalidArgumentError(f"The value of a {name} batch must be 2D, got {batch.ndim} dimensions.")
    if batch.shape[1] != dim:
        raise InvalidArgumentError(
            f"The width of a {name} batch must match with the space's dimension, but batch has "
            f"shape {tuple(batch.shape)} and dim = {dim}."
        )


class VectorSpace(SimplyTypedSpace):
    """Batches of ``dim``-vectors: ``(n, dim)`` matrices, numpy arrays or (``sparse=True``)
    scipy sparse matrices (CSR when we build them)."""

    def __init__(self, dim: int, sparse: bool = False, dtype: Any = "floatX", **kwargs: Any) -> None:
        super().__init__(dtype, **kwargs)
        self.dim = _int_arg(dim, "VectorSpace dim", 0)
        self.sparse = bool(sparse)

    def _key(self) -> Tuple[Any, ...]:
        return (self.dim, self.sparse, self._dtype)

    def __str__(self) -> str:
        return f"VectorSpace(dim={self.dim}{', sparse' if self.sparse else ''}, dtype={self._dtype})"

    def get_total_dimension(self) -> int:
        return self.dim

    def get_origin(self) -> np.ndarray:
        """Zeros of shape ``(dim,)`` in the space dtype (Pylearn2: always float64)."""
        return np.zeros((self.dim,), dtype=self._dtype)

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> Batch:
        d = self._dtype_arg(dtype)
        n = _int_arg(batch_size, "batch_size", 0)
        if self.sparse:
            _check_sparse_dtype(d)
            return _sparse().csr_matrix((n, self.dim), dtype=d)
        return np.zeros((n, self.dim), dtype=d)

    def _validate_impl(self, batch: Batch) -> None:
        super()._validate_impl(batch)
        if self.sparse:
            if not _issparse(batch):
                raise SpaceTypeError(
                    f"The value of a sparse VectorSpace batch should be a sparse scipy matrix, got {type(batch)}."
                )
        elif not isinstance(batch, np.ndarray):
            kind = "a sparse scipy matrix" if _issparse(batch) else str(type(batch))
            raise SpaceTypeError(f"The value of a VectorSpace batch should be a numpy.ndarray, but is {kind}.")
        _check_matrix(self, batch, self.dim)

    def _batch_size_impl(self, batch: Batch) -> int:
        return int(batch.shape[0])

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        if isinstance(space, (NullSpace, SequenceSpace, VectorSequenceSpace)):
            raise SpaceNotImplementedError(f"{self} doesn't know how to format as {space}")
        self._check_sizes(space)  # first, as upstream (an IndexSpace target too)
        if not isinstance(space, (VectorSpace, Conv2DSpace, CompositeSpace)):
            raise SpaceNotImplementedError(f"{self} doesn't know how to format as {space}")
        if isinstance(space, CompositeSpace):
            if _issparse(batch) and batch.format != "csr":
                batch = batch.tocsr()  # COO and others cannot be sliced by columns
            pieces: List[Any] = []
            pos = 0
            for component in space.components:
                if isinstance(component, NullSpace):
                    pieces.append(None)
                    continue
                width = component.get_total_dimension()
                sub = batch[:, pos:pos + width]
                pos += width
                tmp = VectorSpace(width, sparse=self.sparse, dtype=self._dtype)
                pieces.append(tmp._format_as(sub, component))
            return tuple(pieces)
        if isinstance(space, Conv2DSpace):
            if _issparse(batch):
                raise SpaceTypeError(
                    "Formatting a sparse batch to a Conv2DSpace is not supported, since scipy has no "
                    "sparse tensors with more than 2 dimensions"
                )
            canonical = batch.reshape((batch.shape[0],) + space._canonical_shape())
            return _cast(Conv2DSpace.convert_numpy(canonical, Conv2DSpace.default_axes, space.axes), space.dtype)
        # VectorSpace
        if space.sparse:
            _check_sparse_dtype(space.dtype or batch.dtype)
        if space.sparse and not _issparse(batch):
            batch = _sparse().csr_matrix(batch)
        elif not space.sparse and _issparse(batch):
            batch = batch.toarray()  # an ndarray (Pylearn2: todense(), an np.matrix)
        return _cast(batch, space.dtype)


_AXES = ("b", "c", 0, 1)


class Conv2DSpace(SimplyTypedSpace):
    """Batches of ``shape = (rows, cols)`` images with ``num_channels`` (or
    ``channels``) channels, axes in the order ``axes`` (default :attr:`default_axes`,
    ``('b', 0, 1, 'c')``: NHWC). ``axes`` must be a permutation of ``('b', 'c', 0, 1)``
    (Pylearn2 checks only its length)."""

    default_axes = ("b", 0, 1, "c")

    def __init__(
        self,
        shape: Sequence[int],
        channels: Optional[int] = None,
        num_channels: Optional[int] = None,
        axes: Optional[Sequence[Any]] = None,
        dtype: Any = "floatX",
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype, **kwargs)
        if (channels is None) + (num_channels is None) != 1:
            raise SpaceAssertionError("Conv2DSpace takes exactly one of channels and num_channels")
        if num_channels is None:
            num_channels = channels
        if not hasattr(shape, "__len__"):
            raise InvalidArgumentError(f"shape argument for Conv2DSpace must have a length. Got {shape}.")
        if len(shape) != 2:
            raise InvalidArgumentError(f"shape argument to Conv2DSpace must be length 2, not {len(shape)}")
        for x in list(shape) + [num_channels]:
            if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x <= 0:
                raise SpaceAssertionError(f"Conv2DSpace shape and channels must be positive integers, got {x!r}")
        self.shape = tuple(int(s) for s in shape)
        self.num_channels = int(num_channels)  # type: ignore[arg-type]
        axes = self.default_axes if axes is None else tuple(
            int(a) if isinstance(a, numbers.Integral) and not isinstance(a, bool) else a for a in axes
        )
        if len(axes) != 4:
            raise SpaceAssertionError(f"Conv2DSpace axes must have length 4, got {axes}")
        if sorted(map(str, axes)) != sorted(map(str, _AXES)) or any(
            a not in _AXES or isinstance(a, bool) for a in axes
        ):
            raise InvalidArgumentError(f"Conv2DSpace axes must be a permutation of ('b', 'c', 0, 1), got {axes}")
        self.axes = tuple(axes)

    def _key(self) -> Tuple[Any, ...]:
        return (self.shape, self.num_channels, self.axes, self._dtype)

    def __str__(self) -> str:
        return (
            f"Conv2DSpace(shape={self.shape}, num_channels={self.num_channels}, "
            f"axes={self.axes}, dtype={self._dtype})"
        )

    def _canonical_shape(self) -> Tuple[int, int, int]:
        return (self.shape[0], self.shape[1], self.num_channels)

    def _dims(self, n: int) -> Dict[Any, int]:
        return {"b": n, "c": self.num_channels, 0: self.shape[0], 1: self.shape[1]}

    def get_total_dimension(self) -> int:
        return self.shape[0] * self.shape[1] * self.num_channels

    def get_batch_axis(self) -> int:
        return self.axes.index("b")

    def get_origin(self) -> np.ndarray:
        dims = self._dims(0)
        return np.zeros([dims[a] for a in self.axes if a != "b"], dtype=self._dtype)

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> np.ndarray:
        """Zeros in axes order; ``batch_size`` must be an int (0 allowed, unlike Pylearn2)."""
        d = self._dtype_arg(dtype)
        n = _int_arg(batch_size, "Conv2DSpace.get_origin_batch batch_size", 0)
        dims = self._dims(n)
        return np.zeros([dims[a] for a in self.axes], dtype=d)

    @staticmethod
    def convert(tensor: np.ndarray, src_axes: Sequence[Any], dst_axes: Sequence[Any]) -> np.ndarray:
        """A view of ``tensor`` with its axes permuted from ``src_axes`` to ``dst_axes``
        (``tensor`` itself when they are equal)."""
        src_axes, dst_axes = tuple(src_axes), tuple(dst_axes)
        if len(src_axes) != 4 or len(dst_axes) != 4:
            raise SpaceAssertionError(f"axes must have length 4: {src_axes}, {dst_axes}")
        if src_axes == dst_axes:
            return tensor
        return tensor.transpose([src_axes.index(a) for a in dst_axes])

    @staticmethod
    def convert_numpy(tensor: np.ndarray, src_axes: Sequence[Any], dst_axes: Sequence[Any]) -> np.ndarray:
        """The same as :meth:`convert`."""
        return Conv2DSpace.convert(tensor, src_axes, dst_axes)

    def _validate_impl(self, batch: Batch) -> None:
        super()._validate_impl(batch)
        _check_dense(self, batch)
        if batch.ndim != 4:
            raise InvalidArgumentError(f"The value of a Conv2DSpace batch must be 4D, got {batch.ndim} dimensions.")
        d = self.axes.index("c")
        if batch.shape[d] != self.num_channels:
            raise InvalidArgumentError(
                f"Expected axis {d} to be number of channels ({self.num_channels}) but it is {batch.shape[d]}"
            )
        for coord in (0, 1):
            d = self.axes.index(coord)
            if batch.shape[d] != self.shape[coord]:
                raise InvalidArgumentError(
                    f"Conv2DSpace with shape {self.shape} and axes {self.axes} expected dimension {d} of a "
                    f"batch of shape {tuple(batch.shape)} to have length {self.shape[coord]} but it has "
                    f"{batch.shape[d]}"
                )

    def _batch_size_impl(self, batch: Batch) -> int:
        return int(batch.shape[self.axes.index("b")])

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        if not isinstance(space, (VectorSpace, Conv2DSpace)):
            if not isinstance(space, (NullSpace, SequenceSpace, VectorSequenceSpace, IndexSequenceSpace)):
                self._check_sizes(space)
            raise SpaceNotImplementedError(f"{self} doesn't know how to format as {space}")
        self._check_sizes(space)
        if isinstance(space, VectorSpace):
            canonical = Conv2DSpace.convert(batch, self.axes, self.default_axes)
            result = canonical.reshape((canonical.shape[0], self.get_total_dimension()))
            if space.sparse:
                _check_sparse_dtype(space.dtype or result.dtype)
                result = _sparse().csr_matrix(result)
            return _cast(result, space.dtype)
        if (self.shape, self.num_channels) != (space.shape, space.num_channels):
            raise InvalidArgumentError(
                f"cannot format {self} into {space}: the image geometry differs; only the axes order may change"
            )
        return _cast(Conv2DSpace.convert(batch, self.axes, space.axes), space.dtype)


def _one_hot(batch: np.ndarray, max_labels: int, mode: str, sparse: bool, dtype: str) -> Any:
    """Pylearn2's OneHotFormatter on validated labels; duplicates capped at 1."""
    n, dim = batch.shape
    labels = batch.astype(np.int64, copy=False)
    rows = np.repeat(np.arange(n), dim)
    if mode == "merge":
        width = max_labels
        cols = labels.reshape(-1)
    else:
        width = dim * max_labels
        cols = (labels + np.arange(dim) * max_labels).reshape(-1)
    if sparse:
        sp = _sparse()
        m = sp.csr_matrix((np.ones(rows.size, dtype=dtype), (rows, cols)), shape=(n, width), dtype=dtype)
        m.sum_duplicates()
        m.data[:] = 1
        return m
    out = np.zeros((n, width), dtype=dtype)
    out[rows, cols] = 1
    return out


class IndexSpace(SimplyTypedSpace):
    """Batches of ``dim`` integer labels in ``[0, max_labels)`` per example.

    Formatted into a VectorSpace of width ``max_labels`` (merged multi-hot) or
    ``dim * max_labels`` (concatenated one-hots). Labels are range-checked on
    validation (Pylearn2 does not check; negative labels wrapped there).
    """

    def __init__(self, max_labels: int, dim: int, dtype: Any = "int64", **kwargs: Any) -> None:
        self._check_int_dtype(dtype)
        super().__init__(dtype, **kwargs)
        self.max_labels = _int_arg(max_labels, "IndexSpace max_labels", 1)
        self.dim = _int_arg(dim, "IndexSpace dim", 1)

    @staticmethod
    def _check_int_dtype(dtype: Any) -> None:
        # Pylearn2's test is `'int' in dtype`: a name without "int" ('bool', 'floatX',
        # 'float32', 'foo') is a ValueError before the name is looked up.
        if isinstance(dtype, str) and "int" not in dtype:
            raise InvalidArgumentError("The dtype of IndexSpace must be an integer type")
        cleaned = _clean_dtype(dtype)
        if cleaned is not None and np.dtype(cleaned).kind not in "iu":
            raise InvalidArgumentError("The dtype of IndexSpace must be an integer type")

    @property
    def dtype(self) -> Optional[str]:
        """An integer dtype name, or None (any integer dtype)."""
        return self._dtype

    @dtype.setter
    def dtype(self, new_dtype: Any) -> None:
        # Pylearn2's setter bypassed the integer-only rule; ours keeps it.
        self._check_int_dtype(new_dtype)
        self._dtype = _clean_dtype(new_dtype)

    def _key(self) -> Tuple[Any, ...]:
        return (self.max_labels, self.dim, self._dtype)

    def __str__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, max_labels={self.max_labels}, dtype={self._dtype})"

    def get_total_dimension(self) -> int:
        return self.dim

    def get_origin(self) -> np.ndarray:
        """Zeros of shape ``(dim,)`` in the space dtype (Pylearn2: ``(1, dim)`` float64)."""
        return np.zeros((self.dim,), dtype=self._dtype)

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> np.ndarray:
        d = self._dtype_arg(dtype)
        return np.zeros((_int_arg(batch_size, "batch_size", 0), self.dim), dtype=d)

    def _validate_impl(self, batch: Batch) -> None:
        super()._validate_impl(batch)
        _check_dense(self, batch)
        if batch.dtype.kind not in "iu":
            raise SpaceTypeError(f"{self} needs an integer batch, got {batch.dtype}")
        _check_matrix(self, batch, self.dim)
        if batch.size:
            lo, hi = batch.min(), batch.max()
            if lo < 0 or hi >= self.max_labels:
                bad = np.argwhere((batch < 0) | (batch >= self.max_labels))[0]
                raise SpaceIndexError(
                    f"{self}: label {batch[tuple(bad)]} at example {bad[0]}, position {bad[1]} is "
                    f"outside [0, {self.max_labels})"
                )

    def _batch_size_impl(self, batch: Batch) -> int:
        return int(batch.shape[0])

    def _vector_type(self) -> type:
        return VectorSpace

    def _check_sizes(self, space: Space) -> None:
        dim, max_labels = getattr(space, "dim", None), getattr(space, "max_labels", None)
        if isinstance(space, self._vector_type()):
            if dim not in (self.max_labels, self.dim * self.max_labels):
                raise InvalidArgumentError(
                    f"Can't convert to {type(space).__name__} of dim {dim}. Expected either "
                    f"dim={self.max_labels} (merged one-hots) or {self.dim * self.max_labels} "
                    "(concatenated one-hots)"
                )
        elif type(space) is type(self):
            if (dim, max_labels) != (self.dim, self.max_labels):
                raise InvalidArgumentError(
                    f"Can't convert to {type(space).__name__} of dim {dim} and max_labels {max_labels}."
                )
        else:
            raise InvalidArgumentError(f"Can't convert to {type(space)}")

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        self._check_sizes(space)
        if isinstance(space, self._vector_type()):
            mode = "merge" if space.dim == self.max_labels else "concatenate"  # type: ignore[attr-defined]
            sparse = getattr(space, "sparse", False)
            out_dtype = space.dtype  # type: ignore[attr-defined]
            if out_dtype is None:
                # Pylearn2's OneHotFormatter builds floatX one-hots, except its sparse merge,
                # which builds float64 ones (np.ones without a dtype); no cast follows.
                out_dtype = "float64" if sparse and mode == "merge" else _floatx
            if sparse:
                _check_sparse_dtype(out_dtype)
            return _one_hot(batch, self.max_labels, mode, sparse, out_dtype)
        out = _cast(batch, space.dtype)  # type: ignore[attr-defined]
        if out is not batch and not np.array_equal(out, batch):
            raise InvalidArgumentError(f"cannot format {self} into {space}: a label does not fit in {out.dtype}")
        return out


class CompositeSpace(Space):
    """A tuple of spaces; its batches are tuples of their batches (nestable).

    Formatted to a VectorSpace, each component goes into a VectorSpace of its
    :meth:`get_total_dimension` columns, side by side, as Pylearn2 does. For an
    IndexSpace component that is ``dim`` columns: its one-hots merged when ``dim ==
    max_labels``, concatenated when ``max_labels == 1``, else the IndexSpace's size
    error (Pylearn2's arithmetic; a vector cannot be formatted back into an
    IndexSpace, there as here).
    """

    def __init__(self, components: Union[List[Space], Tuple[Space, ...]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(components, (list, tuple)):
            raise SpaceAssertionError(f"CompositeSpace components must be a list or tuple, got {type(components)}")
        for i, c in enumerate(components):
            if not isinstance(c, Space):
                raise SpaceTypeError(f"component {i} is {c} of type {type(c)}, expected Space instance. ")
        self.components: List[Space] = list(components)

    def _key(self) -> Tuple[Any, ...]:
        return tuple(self.components)

    def __str__(self) -> str:
        return f"CompositeSpace({', '.join(str(c) for c in self.components)})"

    @property
    def dtype(self) -> Any:
        """A nested tuple of the components' dtypes (``"NullSpace's dtype"`` for a NullSpace).

        Setting a tuple zips it with the components (lengths must match); None or a
        string goes to every non-null leaf; anything else is a :class:`SpaceTypeError`
        (Pylearn2 ignored it silently).
        """
        return tuple(c.dtype for c in self.components)  # type: ignore[attr-defined]

    @dtype.setter
    def dtype(self, new_dtype: Any) -> None:
        # All or nothing: a component that refuses its dtype leaves every one as it was.
        old = [c.dtype for c in self.components]  # type: ignore[attr-defined]
        try:
            if isinstance(new_dtype, tuple):
                for c, d in _safe_zip(self.components, new_dtype):
                    c.dtype = d  # type: ignore[attr-defined]
            elif _one_dtype(new_dtype):
                for c in self.components:
                    if not isinstance(c, NullSpace):
                        c.dtype = new_dtype  # type: ignore[attr-defined]
            else:
                raise SpaceTypeError(f"a CompositeSpace dtype is None, a string or a tuple, not {new_dtype!r}")
        except BaseException:
            for c, d in zip(self.components, old):
                c.dtype = d  # type: ignore[attr-defined]
            raise

    def restrict(self, subset: Sequence[int]) -> Space:
        """The components at ``subset`` (in that order, repeats allowed); a single index
        gives the bare component."""
        if not isinstance(subset, (list, tuple)):
            raise SpaceAssertionError(f"subset must be a list or tuple, got {type(subset)}")
        try:
            picked = [self.components[i] for i in subset]
        except IndexError:
            raise SpaceIndexError(f"restrict({subset}) out of range for {len(self.components)} components") from None
        return picked[0] if len(subset) == 1 else CompositeSpace(picked)

    def restrict_batch(self, batch: Batch, subset: Sequence[int]) -> Batch:
        """The batch components at ``subset``, like :meth:`restrict` (a bare component for
        one index). Works on numeric batches (Pylearn2: symbolic only)."""
        self.np_validate(batch)
        if not isinstance(subset, (list, tuple)):
            raise SpaceAssertionError(f"subset must be a list or tuple, got {type(subset)}")
        try:
            picked = [batch[i] for i in subset]
        except IndexError:
            raise SpaceIndexError(f"restrict_batch({subset}) out of range for {len(batch)} components") from None
        return picked[0] if len(subset) == 1 else tuple(picked)

    def get_total_dimension(self) -> int:
        return sum(c.get_total_dimension() for c in self.components)

    def get_origin(self) -> Tuple[Any, ...]:
        return tuple(c.get_origin() for c in self.components)

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> Tuple[Any, ...]:
        """A tuple of the components' origin batches; ``dtype`` is None or one dtype for
        every leaf, or a nested tuple shaped like the space."""
        if _one_dtype(dtype):
            dtypes: Sequence[Any] = [dtype] * len(self.components)
        elif isinstance(dtype, tuple):
            dtypes = dtype
            if len(dtypes) != len(self.components):
                raise InvalidArgumentError(
                    f"Argument 0 has length {len(self.components)} but argument 1 has length {len(dtypes)}"
                )
        else:
            raise SpaceTypeError(f"a CompositeSpace dtype is None, a string or a tuple, not {dtype!r}")
        out = []
        for c, d in zip(self.components, dtypes):
            if isinstance(d, tuple) and not isinstance(c, CompositeSpace):
                raise SpaceTypeError("Tree structure mismatch.")
            out.append(c.get_origin_batch(batch_size, d))
        return tuple(out)

    def _validate_impl(self, batch: Batch) -> None:
        if not isinstance(batch, tuple):
            raise SpaceTypeError(
                f"The value of a CompositeSpace batch should be a tuple, but is {batch} of type {type(batch)}."
            )
        if len(batch) != len(self.components):
            raise InvalidArgumentError(f"Expected {len(self.components)} elements in batch, got {len(batch)}")
        for c, b in zip(self.components, batch):
            # Pylearn2's component._validate: the component's callbacks, then its rules.
            _run_callbacks(c.np_validate_callbacks, b)
            c._validate_impl(b)

    def _batch_size_impl(self, batch: Batch) -> int:
        return self._data_batch_size(batch) or 0

    def _format_tree(self, batch: Batch, space: "CompositeSpace") -> Batch:
        out = []
        for a, b, item in _safe_zip_3(self.components, space.components, batch):
            if isinstance(a, CompositeSpace) != isinstance(b, CompositeSpace):
                raise SpaceTypeError("Can't convert between CompositeSpaces with different tree structures")
            if isinstance(a, CompositeSpace):
                out.append(a._format_tree(item, b))  # type: ignore[arg-type]
            else:
                out.append(a._format_as(item, b))
        return tuple(out)

    def _data_batch_size(self, batch: Batch) -> Optional[int]:
        size: Optional[int] = None
        for c, b in zip(self.components, batch):
            if isinstance(c, NullSpace):
                continue
            n = c._data_batch_size(b) if isinstance(c, CompositeSpace) else c._batch_size_impl(b)
            if n is None:
                continue
            if size is not None and n != size:
                raise InvalidArgumentError(
                    "All non-empty components of a CompositeSpace should have the same batch size, but we "
                    f"encountered components with size {size}, then {n}."
                )
            size = n
        return size

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        if isinstance(space, VectorSpace):
            self._check_sizes(space)
            pieces: List[Any] = []
            for c, b in zip(self.components, batch):
                if isinstance(c, NullSpace):
                    continue  # no columns (upstream: no total dimension, so no conversion)
                # Width-0 components too: their dtype takes part, as upstream.
                tmp = VectorSpace(c.get_total_dimension(), sparse=space.sparse, dtype=space.dtype)
                pieces.append(c._format_as(b, tmp))
            if not pieces:
                # Pylearn2 concatenates an empty list (ValueError); no component, no batch size.
                raise InvalidArgumentError(
                    f"{self} has no component with data, so its batch has no batch size to format into {space}"
                )
            dtypes = {p.dtype for p in pieces}
            if len(dtypes) > 1:
                raise SpaceTypeError(
                    "Tried to format components with differing dtypes into a VectorSpace with no dtype of "
                    f"its own. dtypes: {tuple(str(p.dtype) for p in pieces)}"
                )
            if space.sparse:
                return _sparse().hstack(pieces, format="csr", dtype=pieces[0].dtype)
            return np.concatenate(pieces, axis=1) if len(pieces) > 1 else pieces[0]
        if isinstance(space, CompositeSpace):
            # The total dimensions first (upstream's Space._format_as), then leaf by leaf;
            # nested composites are walked without a size check of their own, as upstream.
            self._check_sizes(space)
            return self._format_tree(batch, space)
        if not isinstance(space, (NullSpace, SequenceSpace, VectorSequenceSpace, IndexSequenceSpace)):
            self._check_sizes(space)
        raise SpaceNotImplementedError(f"{self} does not know how to format as {space}")


class NullSpace(Space):
    """The space of no data: its batch is ``None``; pair it with the source ``''``."""

    _DTYPE = "NullSpace's dtype"

    def _key(self) -> Tuple[Any, ...]:
        return ()

    def __str__(self) -> str:
        return "NullSpace"

    @property
    def dtype(self) -> str:
        """Always ``"NullSpace's dtype"``."""
        return self._DTYPE

    @dtype.setter
    def dtype(self, new_dtype: Any) -> None:
        if new_dtype != self._DTYPE:
            raise SpaceTypeError(f'NullSpace can only take the bogus dtype "{self._DTYPE}"')

    def get_total_dimension(self) -> int:
        """0 (Pylearn2 has none)."""
        return 0

    def get_origin(self) -> None:
        return None

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> None:
        return None

    def _validate_impl(self, batch: Batch) -> None:
        if batch is not None:
            raise SpaceTypeError(
                f"NullSpace only accepts None, as a dummy data batch. Instead, got {batch} of type {type(batch)}"
            )

    def _batch_size_impl(self, batch: Batch) -> int:
        return 0

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        if isinstance(space, NullSpace):
            return None
        raise SpaceNotImplementedError(f"{self} doesn't know how to format as {space}")


class VectorSequenceSpace(SimplyTypedSpace):
    """One variable-length sequence of ``dim``-vectors: a ``(time, dim)`` array, batch
    size 1 (Pylearn2's ``VectorSequenceSpace``). For batches of sequences of different
    lengths use :class:`SequenceSpace`."""

    def __init__(self, dim: int, dtype: Any = "floatX", **kwargs: Any) -> None:
        super().__init__(dtype, **kwargs)
        self.dim = _int_arg(dim, "VectorSequenceSpace dim", 0)

    def _key(self) -> Tuple[Any, ...]:
        return (self.dim, self._dtype)

    def __str__(self) -> str:
        return f"VectorSequenceSpace(dim={self.dim}, dtype={self._dtype})"

    def get_total_dimension(self) -> int:
        return self.dim

    def get_origin_batch(self, batch_size: int, dtype: Any = None) -> np.ndarray:
        """A sequence of ``batch_size`` zero vectors (time steps)."""
        return np.zeros((_int_arg(batch_size, "batch_size", 0), self.dim), dtype=self._dtype_arg(dtype))

    def _validate_impl(self, batch: Batch) -> None:
        super()._validate_impl(batch)
        _check_dense(self, batch)
        _check_matrix(self, batch, self.dim)

    def _batch_size_impl(self, batch: Batch) -> int:
        return 1

    def _check_sizes(self, space: Space) -> None:
        if not isinstance(space, VectorSequenceSpace):
            raise InvalidArgumentError(f"Can't convert to {type(space)}")
        if space.dim != self.dim:
            raise InvalidArgumentError(f"Can't convert to VectorSequenceSpace of dim {space.dim}")

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        self._check_sizes(space)
        return _cast(batch, space.dtype)  # type: ignore[attr-defined]


class IndexSequenceSpace(IndexSpace):
    """One variable-length sequence of ``dim`` labels per time step: a ``(time, dim)``
    integer array, batch size 1 (Pylearn2's ``IndexSequenceSpace``); formats to an
    IndexSequenceSpace or, as one-hots, to a VectorSequenceSpace."""

    def _batch_size_impl(self, batch: Batch) -> int:
        return 1

    def _vector_type(self) -> type:
        return VectorSequenceSpace

    def get_origin(self) -> np.ndarray:
        raise SpaceNotImplementedError("IndexSequenceSpace has no origin")


class SequenceSpace(Space):
    """Batches of variable-length sequences of another space's examples, padded to the
    longest: ``(data, mask)`` where ``data[t]`` is a batch of ``space`` (shape ``(time,
    batch, ...)`` for vector and index spaces) and ``mask`` is a ``(time, batch)`` array,
    1 where a sequence has a step and 0 in its padding (the sandbox RNN
    ``SequenceSpace`` of Pylearn2). :meth:`pad` builds such a batch from a list of
    sequences.

    >>> import numpy as np
    >>> s = SequenceSpace(VectorSpace(2))
    >>> data, mask = s.pad([np.ones((3, 2), np.float32), np.ones((1, 2), np.float32)])
    >>> data.shape, mask.T.tolist()
    ((3, 2, 2), [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    >>> s.np_batch_size((data, mask))
    2
    """

    def __init__(self, space: Space, mask_dtype: Any = "floatX", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(space, (VectorSpace, IndexSpace, Conv2DSpace)) or isinstance(space, IndexSequenceSpace):
            raise SpaceTypeError(f"SequenceSpace holds a VectorSpace, IndexSpace or Conv2DSpace, not {space}")
        if isinstance(space, VectorSpace) and space.sparse:
            raise SpaceTypeError("SequenceSpace cannot hold a sparse VectorSpace (no 3-D sparse arrays)")
        self.space = space
        self.dim = space.get_total_dimension()
        self.mask_dtype = _clean_dtype(mask_dtype)

    def _key(self) -> Tuple[Any, ...]:
        return (self.space,)

    def __str__(self) -> str:
        return f"SequenceSpace({self.space})"

    @property
    def dtype(self) -> Any:
        """``(data dtype, mask dtype)``: the inner space's dtype and ``mask_dtype`` (as
        Pylearn2's, a CompositeSpace of a data and a mask space).

        Setting a pair sets both; None or one dtype sets both (the inner space keeps its
        own rule: an IndexSpace only takes integer dtypes).
        """
        return (self.space.dtype, self.mask_dtype)  # type: ignore[attr-defined]

    @dtype.setter
    def dtype(self, new_dtype: Any) -> None:
        if isinstance(new_dtype, tuple):
            if len(new_dtype) != 2:
                raise InvalidArgumentError(f"a SequenceSpace dtype pair is (data, mask), got {new_dtype!r}")
            data, mask = new_dtype
        elif _one_dtype(new_dtype):
            data = mask = new_dtype
        else:
            raise SpaceTypeError(f"a SequenceSpace dtype is None, one dtype or a (data, mask) pair, not {new_dtype!r}")
        cleaned_mask = _clean_dtype(mask)
        self.space.dtype = data  # type: ignore[attr-defined]
        self.mask_dtype = cleaned_mask

    def get_total_dimension(self) -> int:
        return self.dim

    def get_batch_axis(self) -> int:
        """The batch axis of the data array (1 for vector and index spaces)."""
        return 1 + self.space.get_batch_axis()

    def get_origin_batch(self, batch_size: int, dtype: Any = None, time_steps: int = 5) -> Tuple[Any, Any]:
        """Zero data for ``time_steps`` steps (5, as Pylearn2) and Pylearn2's debugging
        mask: the first sequence 3 steps long, the others 4 (fewer if ``time_steps`` is
        smaller). ``dtype`` (default: the inner space's and ``mask_dtype``) applies to the
        data and the mask, as upstream."""
        t = _int_arg(time_steps, "time_steps", 0)
        one = self.space.get_origin_batch(batch_size, dtype)
        data = np.zeros((t,) + one.shape, dtype=one.dtype)
        if dtype is not None:
            mask_dtype = _clean_dtype(dtype)
        elif self.mask_dtype is not None:
            mask_dtype = self.mask_dtype
        else:
            raise SpaceTypeError("the mask dtype is None, so you must provide a non-None dtype argument to this method.")
        mask = np.zeros((t, one.shape[self.space.get_batch_axis()]), dtype=mask_dtype)
        mask[:3, :1] = 1
        mask[:4, 1:] = 1
        return data, mask

    def pad(self, sequences: Sequence[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """``(data, mask)`` from a list of sequences, each a ``(time_i, ...)`` array whose
        steps are examples of the inner space; shorter sequences are zero-padded."""
        seqs = [np.asarray(s) for s in sequences]
        for s in seqs:  # the dtype rule, before numpy's assignment casts silently
            SimplyTypedSpace._validate_impl(self.space, s)  # type: ignore[arg-type]
        steps = max((s.shape[0] for s in seqs), default=0)
        own = self.space.dtype  # type: ignore[attr-defined]
        example = self.space.get_origin_batch(1, seqs[0].dtype.name if seqs and own is None else None)
        axis = self.space.get_batch_axis()
        inner = tuple(d for i, d in enumerate(example.shape) if i != axis)
        shape = list((steps,) + inner)
        shape.insert(1 + axis, len(seqs))
        data = np.zeros(shape, dtype=example.dtype)
        mask = np.zeros((steps, len(seqs)), dtype=self.mask_dtype)
        for i, s in enumerate(seqs):
            if s.shape[1:] != inner:
                raise InvalidArgumentError(f"sequence {i} has steps of shape {s.shape[1:]}, expected {inner}")
            idx: List[Any] = [slice(0, s.shape[0])] + [slice(None)] * len(inner)
            idx.insert(1 + axis, i)
            data[tuple(idx)] = s
            mask[: s.shape[0], i] = 1
        self.np_validate((data, mask))
        return data, mask

    def _validate_impl(self, batch: Batch) -> None:
        if not isinstance(batch, tuple) or len(batch) != 2:
            raise SpaceTypeError(f"a SequenceSpace batch is a (data, mask) tuple, got {type(batch)}")
        data, mask = batch
        _check_dense(self, data)
        _check_dense(self, mask)
        if mask.ndim != 2:
            raise InvalidArgumentError(f"a SequenceSpace mask is 2-D (time, batch), got {mask.ndim} dimensions")
        inner_ndim = 4 if isinstance(self.space, Conv2DSpace) else 2
        if data.ndim != 1 + inner_ndim:
            raise InvalidArgumentError(f"{self} expects {1 + inner_ndim}-D data, got {data.ndim} dimensions")
        n = data.shape[self.get_batch_axis()]
        if mask.shape != (data.shape[0], n):
            raise InvalidArgumentError(
                f"the mask has shape {mask.shape}, the data {data.shape[0]} steps of {n} examples"
            )
        if data.shape[0] == 0:
            self.space._validate_impl(np.empty(data.shape[1:], dtype=data.dtype))
        elif isinstance(self.space, IndexSpace):
            self.space._validate_impl(data.reshape((-1,) + data.shape[2:]))
        else:
            self.space._validate_impl(data[0])

    def _batch_size_impl(self, batch: Batch) -> int:
        return int(batch[0].shape[self.get_batch_axis()])

    def _format_as(self, batch: Batch, space: Space) -> Batch:
        if not isinstance(space, SequenceSpace):
            if not isinstance(space, (NullSpace, VectorSequenceSpace, IndexSequenceSpace)):
                self._check_sizes(space)  # upstream's size check (ValueError) comes first
            raise SpaceNotImplementedError(f"{self} doesn't know how to format as {space}")
        data, mask = batch
        steps = [self.space._format_as(data[t], space.space) for t in range(data.shape[0])]
        if steps:
            out = np.stack(steps)
        else:
            inner_dtype = space.space.dtype  # type: ignore[attr-defined]
            n = data.shape[self.get_batch_axis()]
            origin = space.space.get_origin_batch(n, data.dtype.name if inner_dtype is None else None)
            out = np.zeros((0,) + origin.shape, dtype=origin.dtype)
        return out, mask


# -- data specs --------------------------------------------------------------------


def _is_empty(value: Any) -> bool:
    """What may stand at a NullSpace position: a NullSpace, an empty CompositeSpace, or
    any value that is false (None, '', (), [], 0...), as Pylearn2's ``assert not nested``."""
    if value is None or isinstance(value, NullSpace):
        return True
    if isinstance(value, CompositeSpace):
        return not value.components
    try:
        return not value
    except Exception:  # no truth value (an array of several items): not empty
        return False


def _same(a: Any, b: Any) -> bool:
    """Duplicate-value check of ``flatten``: identity, equal content for arrays, else ``==``."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
            and a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
        )
    if _issparse(a) or _issparse(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # a value whose == is not a truth value
        return False


Mapping = Union[None, int, Tuple[Any, ...]]


class DataSpecsMapping:
    """Flattens nested ``(space, source)`` data specs into unique leaves and back
    (Pylearn2's ``pylearn2.utils.data_specs.DataSpecsMapping``).

    ``spec_mapping`` is the nested tuple of flat indices (None at NullSpace positions),
    ``specs_to_index`` maps each elementary ``(space, source)`` pair to its index, and
    ``n_unique_specs`` counts them.

    >>> from tensorfmt.spaces import VectorSpace, CompositeSpace, DataSpecsMapping, NullSpace
    >>> v, t = VectorSpace(3), VectorSpace(10)
    >>> m = DataSpecsMapping((CompositeSpace([v, CompositeSpace([v, t])]), ("features", ("features", "targets"))))
    >>> m.spec_mapping
    (0, (0, 1))
    >>> m.flatten(("features", ("features", "targets")))
    ('features', 'targets')
    >>> m.nest(("X", "Y"))
    ('X', ('X', 'Y'))
    >>> print(m.flatten(CompositeSpace([v, CompositeSpace([v, t])])))
    CompositeSpace(VectorSpace(dim=3, dtype=float32), VectorSpace(dim=10, dtype=float32))
    >>> DataSpecsMapping((CompositeSpace([v, NullSpace()]), ("features", ""))).flatten(("features", ""))
    'features'
    """

    def __init__(self, data_specs: Tuple[Space, Any]) -> None:
        space, source = data_specs
        if not isinstance(space, Space):
            raise SpaceAssertionError(f"Given space: {space} was not a instance of Space.")
        self.specs_to_index: Dict[Tuple[Space, Any], int] = {}
        self.n_unique_specs = 0
        self.spec_mapping: Mapping = self._fill_mapping(space, source)

    def _fill_mapping(self, space: Space, source: Any) -> Mapping:
        if isinstance(space, NullSpace):
            if source != "":
                raise SpaceAssertionError(f"a NullSpace must be paired with the source '', not {source!r}")
            return None
        if not isinstance(space, CompositeSpace):
            if isinstance(source, (tuple, list)):
                if len(source) != 1:
                    raise InvalidArgumentError(
                        f"{space} is not a CompositeSpace, so its source is one name, not {source!r}"
                    )
                (source,) = source
            # Any hashable source names a simple space (a string, None, a number), as upstream.
            key = (space, source)
            if key not in self.specs_to_index:
                self.specs_to_index[key] = self.n_unique_specs
                self.n_unique_specs += 1
            return self.specs_to_index[key]
        if not isinstance(source, (tuple, list)):
            # Pylearn2 iterated a string character by character here.
            raise SpaceTypeError(f"{space} needs a tuple or list source with one item per component, not {source!r}")
        return tuple(self._fill_mapping(s, src) for s, src in _safe_zip(space.components, source))

    def _fill_flat(self, nested: Any, mapping: Mapping, rval: List[Any]) -> None:
        if isinstance(nested, CompositeSpace):
            nested = tuple(nested.components)
        if mapping is None:
            if not _is_empty(nested):
                raise SpaceAssertionError(
                    "The following element is mapped to NullSpace, so it should evaluate to False (for "
                    f"instance, None, an empty string or an empty tuple), but is {nested}"
                )
            return
        if isinstance(mapping, int):
            if isinstance(nested, (tuple, list)):
                if len(nested) != 1:
                    raise InvalidArgumentError(
                        f"When mapping is an int, we expect nested to be a single element. But mapping is "
                        f"{mapping} and nested is a tuple of length {len(nested)}"
                    )
                (nested,) = nested
            if rval[mapping] is None:
                rval[mapping] = nested
            elif not _same(rval[mapping], nested):
                raise SpaceAssertionError(
                    "This mapping was built with the same element occurring more than once in the nested "
                    "representation, but current nested sequence has different values "
                    f"({rval[mapping]} and {nested}) at these positions."
                )
            return
        if not isinstance(nested, (tuple, list)):
            raise SpaceTypeError(f"a composite position holds {nested!r}, expected a tuple of {len(mapping)}")
        for sub_nested, sub_mapping in _safe_zip(nested, mapping):
            self._fill_flat(sub_nested, sub_mapping, rval)

    def flatten(self, nested: Any, return_tuple: bool = False) -> Any:
        """The unique leaves of ``nested`` (structured like the data specs: data, the
        source, or the space itself), in flat-index order.

        With ``return_tuple`` always a tuple; else one leaf is returned bare, several as a
        tuple when ``nested`` is a tuple or list and as a :class:`CompositeSpace` when it is
        a space.
        """
        rval: List[Any] = [None] * self.n_unique_specs
        self._fill_flat(nested, self.spec_mapping, rval)
        if any(v is None for v in rval):
            raise SpaceAssertionError(
                f"This mapping is invalid, as it did not contain all numbers from 0 to "
                f"{self.n_unique_specs - 1} (or None was in nested), nested: {nested}"
            )
        if return_tuple:
            return tuple(rval)
        if len(rval) == 1:
            return rval[0]
        if isinstance(nested, (tuple, list)):
            return tuple(rval)
        if isinstance(nested, Space):
            return CompositeSpace(rval)
        return None

    def _nest_tuple(self, flat: Any, mapping: Mapping) -> Any:
        if mapping is None:
            return None
        if isinstance(mapping, int):
            return flat[mapping] if isinstance(flat, (tuple, list)) else flat
        return tuple(self._nest_tuple(flat, m) for m in mapping)

    def _nest_space(self, flat: Space, mapping: Mapping) -> Space:
        if mapping is None:
            return NullSpace()
        if isinstance(mapping, int):
            return flat.components[mapping] if isinstance(flat, CompositeSpace) else flat
        return CompositeSpace([self._nest_space(flat, m) for m in mapping])

    def nest(self, flat: Any) -> Any:
        """``flat`` (one item per unique leaf: a tuple, a list, a CompositeSpace, or a bare
        item when there is one leaf) in the structure of the data specs; NullSpace
        positions get None (a NullSpace when ``flat`` is a space)."""
        if isinstance(flat, Space):
            count = len(flat.components) if isinstance(flat, CompositeSpace) else 1
            if count != self.n_unique_specs:
                raise SpaceAssertionError(f"expected {self.n_unique_specs} flat spaces, got {count}")
            return self._nest_space(flat, self.spec_mapping)
        count = len(flat) if isinstance(flat, (tuple, list)) else 1
        if count != self.n_unique_specs:
            raise SpaceAssertionError(f"expected {self.n_unique_specs} flat values, got {count}")
        return self._nest_tuple(flat, self.spec_mapping)


def is_flat_space(space: Any) -> bool:
    """True for an elementary space or a CompositeSpace without composite components."""
    if isinstance(space, CompositeSpace):
        return not any(isinstance(c, CompositeSpace) for c in space.components)
    if not isinstance(space, Space):
        raise SpaceTypeError(f"space is not a Space: {space} ({type(space)})")
    return True


def is_flat_source(source: Any) -> bool:
    """True for a string or a tuple/list without tuple/list items."""
    if isinstance(source, (tuple, list)):
        return not any(isinstance(s, (tuple, list)) for s in source)
    if not isinstance(source, str):
        raise SpaceTypeError(f"source should be a string or a non-nested tuple/list of strings: {source}")
    return True


def is_flat_specs(data_specs: Tuple[Any, Any]) -> bool:
    """``is_flat_space(space) and is_flat_source(source)``."""
    return is_flat_space(data_specs[0]) and is_flat_source(data_specs[1])


def _native_spec(space: Space) -> Tuple[Any, ...]:
    """The description of ``space`` for the Rust core (``tensorfmt._native.space_*``);
    used to cross-check this module against ``tensorfmt_spaces`` (crate ``tensorfmt-spaces``)."""
    short = {
        "float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
        "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    }
    if isinstance(space, (VectorSequenceSpace, IndexSequenceSpace, SequenceSpace)):
        raise SpaceNotImplementedError(f"the Rust core has no {type(space).__name__}")
    if isinstance(space, VectorSpace):
        if space.sparse:
            raise SpaceNotImplementedError("the Rust core has no sparse batches")
        return ("vector", space.dim, short.get(space.dtype) if space.dtype else None)
    if isinstance(space, Conv2DSpace):
        return ("conv2d", space.shape[0], space.shape[1], space.num_channels, [str(a) for a in space.axes],
                short.get(space.dtype) if space.dtype else None)
    if isinstance(space, IndexSpace):
        return ("index", space.max_labels, space.dim, short.get(space.dtype) if space.dtype else None)
    if isinstance(space, CompositeSpace):
        return ("composite", tuple(_native_spec(c) for c in space.components))
    return ("null",)


def _native_str(space: Space) -> str:
    """The Rust core's printed form of ``space`` (equal to ``str(space)`` for dense spaces)."""
    return str(_native.space_str(_native_spec(space)))


__all__ = [
    "Batch",
    "Space",
    "SimplyTypedSpace",
    "VectorSpace",
    "Conv2DSpace",
    "IndexSpace",
    "CompositeSpace",
    "NullSpace",
    "VectorSequenceSpace",
    "IndexSequenceSpace",
    "SequenceSpace",
    "DataSpecsMapping",
    "is_flat_space",
    "is_flat_source",
    "is_flat_specs",
    "set_floatx",
    "get_floatx",
    "SpaceTypeError",
    "SpaceNotImplementedError",
    "SpaceAssertionError",
    "SpaceIndexError",
    "InvalidArgumentError",
]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public, SpaceTypeError  # noqa: E402

_guard_public(globals(), SpaceTypeError)
