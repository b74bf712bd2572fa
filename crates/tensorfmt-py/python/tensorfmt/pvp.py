"""PetaVision PVP files, frame by frame.

:func:`open` gives a :class:`PvpFile` whose frames are read lazily: dense frames are
zero-copy views of the mapped file (``movie()`` is the whole file as one strided view),
sparse frames come as active-neuron indices and values (``to_scipy()`` gives CSR), and
weight frames carry their patch geometry. The class follows the file's kind
(:class:`DenseFile`, :class:`SparseFile`, :class:`WeightsFile`), so ``f[k]`` is typed
precisely once you know it (``open(p, kind="dense")``, or ``isinstance``):

>>> import tensorfmt.pvp
>>> f = tensorfmt.pvp.open("testdata/pvp/dense_f32.pvp")
>>> for frame in f:                      # lazy
...     print(frame.time, frame.values.mean())
0.5 0.375
1.5 3.375
2.5 6.375
>>> [frame.time for frame in f[-2:]]     # Python slices: negative, steps
[1.5, 2.5]
>>> tensorfmt.pvp.open("testdata/pvp/sparse_values_dt4.pvp").to_scipy().shape   # sparse files
(3, 12)

Writing: :class:`DenseWriter`, :class:`SparseWriter` and :class:`WeightsWriter` (see
their docs), or :func:`tensorfmt.save` with ``to="pvp:dense"`` / ``"pvp:sparse"`` /
``"pvp:weights"``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, TypeVar, Union, overload

try:  # Python >= 3.8
    from typing import Literal
except ImportError:  # pragma: no cover
    from typing_extensions import Literal  # type: ignore[assignment]

import numpy as np

from . import _native
from ._text import summary as _summary
from ._args import flag as _flag, flags as _flags
from ._errors import InvalidArgumentError, TensorfmtIndexError, TensorfmtTypeError, naming, warn_leniency

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Frame:
    """One frame. ``values`` is ``[ny, nx, nf]`` for dense files (a read-only view of the
    file); for sparse files ``indices`` are the active neurons ``f + nf*(x + nx*y)`` and
    ``values`` their values (ones in sparse-binary files)."""

    index: int
    time: float
    values: np.ndarray
    indices: Optional[np.ndarray] = None

    def __repr__(self) -> str:
        if self.indices is None:
            return f"Frame({self.index}, time={self.time}, values={_summary(self.values)})"
        return f"Frame({self.index}, time={self.time}, {len(self.indices)} active)"

    def to_dense(self, shape: Tuple[int, int, int]) -> np.ndarray:
        """The frame as a dense ``[ny, nx, nf]`` float32 array."""
        if self.indices is None:
            return self.values
        ny, nx, nf = shape
        out = np.zeros(ny * nx * nf, dtype=np.float32)
        out[self.indices] = self.values
        return out.reshape(ny, nx, nf)


@dataclass(frozen=True)
class WeightFrame:
    """One frame of a weight file: ``weights`` ``[arbors, patches, nyp, nxp, nfp]`` (the
    shape the file declares), and per patch its active ``patch_nx``, ``patch_ny`` and
    ``patch_offset`` (elements from the patch start to the first active value); ``wmin``
    and ``wmax`` from the frame's header."""

    index: int
    time: float
    wmin: float
    wmax: float
    weights: np.ndarray
    patch_nx: np.ndarray
    patch_ny: np.ndarray
    patch_offset: np.ndarray

    def __repr__(self) -> str:
        return (
            f"WeightFrame({self.index}, time={self.time}, weights={_summary(self.weights)}, "
            f"wmin={self.wmin}, wmax={self.wmax})"
        )


_F = TypeVar("_F", bound="Union[Frame, WeightFrame]")


class _Closed:
    """What a closed typed file holds instead of its reader: every use is an error."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> Any:
        raise InvalidArgumentError(f"{self._path}: the file is closed")


_P = TypeVar("_P", bound="PvpFile")


class PvpFile:
    """A PVP file opened with the typed reader (see :func:`open`, which returns the
    subclass for the file's kind: :class:`DenseFile`, :class:`SparseFile` or
    :class:`WeightsFile`)."""

    def __init__(self, path: PathLike, *, strict: bool = False) -> None:
        self.path = os.fsdecode(path)
        _flag("strict", strict)
        with naming(self.path):
            self._f = _native.open_pvp(self.path, strict)
        self._len: Optional[int] = None

    def close(self) -> None:
        """Lets go of the file (its mapping goes with the last array read from it)."""
        self._f = _Closed(self.path)  # type: ignore[assignment]

    def __enter__(self: "_P") -> "_P":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def kind(self) -> str:
        """``dense``, ``sparse`` or ``weights``."""
        return self._f.kind

    @property
    def shape(self) -> Tuple[int, int, int]:
        """``(ny, nx, nf)`` of the layer."""
        nx, ny, nf = self._f.geometry
        return (ny, nx, nf)

    @property
    def warnings(self) -> List[str]:
        """What the lenient reader accepted (e.g. a crash-truncated last frame); each
        was also emitted as a :class:`tensorfmt.TensorfmtWarning` by :func:`open`."""
        return list(self._f.warnings)

    def __len__(self) -> int:
        if self._len is None:
            self._len = self._f.frame_count()
        return self._len

    def _index(self, k: int) -> int:
        n = len(self)
        if not -n <= k < n:
            raise TensorfmtIndexError(f"frame {k} is out of range: the file has {n} frames")
        return k % n

    def _frame(self, k: int) -> Union["Frame", "WeightFrame"]:
        k = self._index(int(k))
        d = self._f.frame(k)
        if self.kind == "weights":
            return WeightFrame(
                k,
                d["time"],
                d["wmin"],
                d["wmax"],
                np.asarray(d["weights"]),
                np.asarray(d["patch_nx"]),
                np.asarray(d["patch_ny"]),
                np.asarray(d["patch_offset"]),
            )
        if self.kind == "sparse":
            return Frame(k, d["time"], np.asarray(d["values"]), np.asarray(d["indices"]))
        return Frame(k, d["time"], np.asarray(d["values"]))

    def frame(self, k: int) -> Union["Frame", "WeightFrame"]:
        """Frame ``k`` (negative counts from the end)."""
        return self._frame(k)

    def _select(self, key: Union[int, slice]) -> Any:
        if isinstance(key, slice):
            return [self._frame(k) for k in range(*key.indices(len(self)))]
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            raise TensorfmtTypeError(f"frames are indexed by int or slice, not {type(key).__name__}")
        return self._frame(int(key))

    @overload
    def __getitem__(self, k: int) -> Union["Frame", "WeightFrame"]: ...
    @overload
    def __getitem__(self, k: slice) -> List[Union["Frame", "WeightFrame"]]: ...
    def __getitem__(self, k: Union[int, slice]) -> Any:
        """``f[k]`` one frame, ``f[a:b:c]`` a list of frames (Python slice rules: a
        range past the end stops at the last frame)."""
        return self._select(k)

    def __iter__(self) -> Iterator[Union["Frame", "WeightFrame"]]:
        for k in range(len(self)):
            yield self._frame(k)

    def times(self) -> np.ndarray:
        """Every frame's time."""
        return np.asarray(self._f.times(), dtype=np.float64)

    def _range(self, start: int, stop: Optional[int]) -> Tuple[int, int]:
        a, b, _ = slice(start, stop).indices(len(self))
        return a, max(a, b)

    def movie(self, start: int = 0, stop: Optional[int] = None) -> np.ndarray:
        """Dense files: frames ``start..stop`` (Python slice rules) as one ``[frames,
        ny, nx, nf]`` array, a strided zero-copy view of the file (one bulk copy for
        multi-process files)."""
        if self.kind != "dense":
            raise InvalidArgumentError(f"{self.path} is {self.kind}; movie() is for dense files")
        return np.asarray(self._f.dense_frames(*self._range(start, stop)))

    def csr(self, start: int = 0, stop: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Sparse files: frames ``start..stop`` (Python slice rules) as ``(indptr,
        indices, data, width)``."""
        if self.kind != "sparse":
            raise InvalidArgumentError(f"{self.path} is {self.kind}; csr() is for sparse files")
        indptr, indices, data, width = self._f.csr(*self._range(start, stop))
        return np.asarray(indptr), np.asarray(indices), np.asarray(data), width

    def to_scipy(self, start: int = 0, stop: Optional[int] = None) -> Any:
        """Sparse files: frames as a ``scipy.sparse.csr_array`` ``[frames, nx*ny*nf]``
        (needs scipy)."""
        try:
            import scipy.sparse  # type: ignore[import-untyped, unused-ignore]
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("to_scipy() needs scipy: pip install scipy") from e
        indptr, indices, data, width = self.csr(start, stop)
        make = getattr(scipy.sparse, "csr_array", scipy.sparse.csr_matrix)
        # Writable copies (pvtools' matrix is modifiable; the native arrays are read-only).
        return make((np.array(data), np.array(indices), np.array(indptr)), shape=(len(indptr) - 1, width))

    @property
    def weight_geometry(self) -> Dict[str, Any]:
        """Weight files: ``shared``, ``nxp``, ``nyp``, ``nfp``, ``numpatches``, ``arbors``,
        ``patch_header_bytes`` (8, or 4 in legacy files)."""
        shared, nxp, nyp, nfp, numpatches, arbors, phb = self._f.weight_geometry()
        return dict(
            shared=shared, nxp=nxp, nyp=nyp, nfp=nfp, numpatches=numpatches, arbors=arbors, patch_header_bytes=phb
        )

    def __repr__(self) -> str:
        return f"<tensorfmt.pvp.{type(self).__name__} {self.kind} {self.path} frames={len(self)} shape={self.shape}>"


class DenseFile(PvpFile):
    """A dense activity file: ``f[k]`` is a :class:`Frame` whose ``values`` are
    ``[ny, nx, nf]``; :meth:`movie` is the whole file as one array."""

    def frame(self, k: int) -> "Frame":
        """Frame ``k`` (negative counts from the end)."""
        return self._frame(k)  # type: ignore[return-value]

    @overload  # type: ignore[override]
    def __getitem__(self, k: int) -> "Frame": ...
    @overload
    def __getitem__(self, k: slice) -> List["Frame"]: ...
    def __getitem__(self, k: Union[int, slice]) -> Any:
        return self._select(k)

    def __iter__(self) -> Iterator["Frame"]:  # type: ignore[override]
        return super().__iter__()  # type: ignore[return-value]


class SparseFile(PvpFile):
    """A sparse activity file: ``f[k]`` is a :class:`Frame` with active-neuron
    ``indices`` and their ``values``; :meth:`to_scipy` is the whole file as CSR."""

    def frame(self, k: int) -> "Frame":
        """Frame ``k`` (negative counts from the end)."""
        return self._frame(k)  # type: ignore[return-value]

    @overload  # type: ignore[override]
    def __getitem__(self, k: int) -> "Frame": ...
    @overload
    def __getitem__(self, k: slice) -> List["Frame"]: ...
    def __getitem__(self, k: Union[int, slice]) -> Any:
        return self._select(k)

    def __iter__(self) -> Iterator["Frame"]:  # type: ignore[override]
        return super().__iter__()  # type: ignore[return-value]


class WeightsFile(PvpFile):
    """A weight file (shared or not): ``f[k]`` is a :class:`WeightFrame`."""

    def frame(self, k: int) -> "WeightFrame":
        """Frame ``k`` (negative counts from the end)."""
        return self._frame(k)  # type: ignore[return-value]

    @overload  # type: ignore[override]
    def __getitem__(self, k: int) -> "WeightFrame": ...
    @overload
    def __getitem__(self, k: slice) -> List["WeightFrame"]: ...
    def __getitem__(self, k: Union[int, slice]) -> Any:
        return self._select(k)

    def __iter__(self) -> Iterator["WeightFrame"]:  # type: ignore[override]
        return super().__iter__()  # type: ignore[return-value]


AnyPvpFile = Union[DenseFile, SparseFile, WeightsFile]
_CLASSES: Dict[str, Type[PvpFile]] = {"dense": DenseFile, "sparse": SparseFile, "weights": WeightsFile}


def _open(path: PathLike, strict: bool = False, kind: Optional[str] = None, warn: bool = True) -> Any:
    p = os.fsdecode(path)
    if kind is not None and kind not in _CLASSES:
        raise InvalidArgumentError(f"kind= is 'dense', 'sparse' or 'weights', not {kind!r}")
    base = PvpFile(p, strict=strict)
    if kind is not None and base.kind != kind:
        raise InvalidArgumentError(f"{p} is a {base.kind} file, not {kind}")
    f = _CLASSES[base.kind].__new__(_CLASSES[base.kind])
    f.__dict__.update(base.__dict__)
    if base.kind == "sparse":
        # A sparse file's frames are counted by walking them, which is where a frame cut
        # short or a wrong nbands is found: walk now, so that open() warns as it does
        # for the other kinds (and tensorfmt.open).
        len(f)
    if warn:
        warn_leniency(p, f.warnings)
    return f


@overload
def open(path: PathLike, *, strict: bool = ..., kind: Literal["dense"]) -> DenseFile: ...  # noqa: A001
@overload
def open(path: PathLike, *, strict: bool = ..., kind: Literal["sparse"]) -> SparseFile: ...  # noqa: A001
@overload
def open(path: PathLike, *, strict: bool = ..., kind: Literal["weights"]) -> WeightsFile: ...  # noqa: A001
@overload
def open(path: PathLike, *, strict: bool = ..., kind: None = ...) -> AnyPvpFile: ...  # noqa: A001
def open(path: PathLike, *, strict: bool = False, kind: Optional[str] = None) -> Any:  # noqa: A001
    """Opens a PVP file for frame-by-frame access: a :class:`DenseFile`,
    :class:`SparseFile` or :class:`WeightsFile` as the file says; ``kind`` insists on
    one (and types the result precisely). What the lenient reader accepts (a last frame
    cut short by a crash, ...) is emitted as a :class:`tensorfmt.TensorfmtWarning`;
    ``strict=True`` refuses it instead.

    >>> import tensorfmt.pvp
    >>> f = tensorfmt.pvp.open("testdata/pvp/dense_f32.pvp", kind="dense")
    >>> len(f), f.shape, f[1].values.shape, [fr.index for fr in f[1:8]]
    (3, (2, 3, 2), (2, 3, 2), [1, 2])
    >>> w = tensorfmt.pvp.open("testdata/pvp/kernel_f32.pvp")
    >>> type(w).__name__, w[0].weights.ndim
    ('WeightsFile', 5)
    """
    return _open(path, strict, kind)


# --- streaming writers -------------------------------------------------------------


def _contiguous(value: Any, dtype: Any, what: str) -> np.ndarray:
    """``value`` (numpy, a CPU torch tensor, a list...) as a C-contiguous native-order
    array of ``dtype``: one conversion at most, none when it already is one."""
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise InvalidArgumentError(f"{what} must be numbers, not {a.dtype}")
    return np.ascontiguousarray(a, dtype=dtype)


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0] if a.size else 0


def _dims(**dims: int) -> List[int]:
    out = []
    for name, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidArgumentError(f"{name} must be a non-negative integer, not {v!r}")
        out.append(int(v))
    return out


_W = TypeVar("_W", bound="_StreamWriter")


class _StreamWriter:
    """What the three writers share: the file, the frame count, closing."""

    _kind = ""

    def __init__(self, native: Any, path: str) -> None:
        self._w = native
        self.path = path
        g = dict(native.geometry())
        self._geometry = g

    @classmethod
    def append(cls: Type[_W], path: PathLike) -> _W:
        """Continues an existing file of this kind; its geometry comes from its header.
        A last frame cut short by a killed writer is overwritten by the next frame."""
        p = os.fsdecode(path)
        self = cls.__new__(cls)
        _StreamWriter.__init__(self, _native.pvp_append(p, cls._kind), p)
        return self

    @property
    def frames(self) -> int:
        """Frames in the file so far (with an appended file's earlier frames)."""
        return int(self._w.frames)

    @property
    def closed(self) -> bool:
        return bool(self._w.closed)

    def close(self) -> None:
        """Flushes, syncs and closes the file. Closing twice is harmless."""
        self._w.close()

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"frames={self.frames}"
        return f"<tensorfmt.pvp.{type(self).__name__} {self.path} {state}>"


class DenseWriter(_StreamWriter):
    """Writes a dense activity file (filetype 4, f32) frame by frame.

    Each frame goes to the file as it is written and the header's frame count is
    updated after every frame, so a run killed half-way leaves a file every PVP reader
    opens. An existing file is replaced by default, as :func:`tensorfmt.save` replaces
    one, but in place and at once (a streaming writer has no temporary file: the old
    contents are gone when the writer opens); ``overwrite=False`` refuses it, a
    dangling symlink included; :meth:`append` continues one.

    >>> import numpy as np, tensorfmt.pvp
    >>> with tensorfmt.pvp.DenseWriter("a.pvp", nx=4, ny=3, nf=2) as w:
    ...     for t in range(5):
    ...         w.write_frame(t, np.full((3, 4, 2), t, np.float32))   # [ny, nx, nf]
    >>> f = tensorfmt.pvp.open("a.pvp")
    >>> len(f), float(f[4].values[0, 0, 0])
    (5, 4.0)
    """

    _kind = "dense"

    def __init__(self, path: PathLike, nx: int, ny: int, nf: int, *, overwrite: bool = True) -> None:
        p = os.fsdecode(path)
        nx, ny, nf = _dims(nx=nx, ny=ny, nf=nf)
        super().__init__(_native.pvp_dense_writer(p, nx, ny, nf, _flag("overwrite", overwrite)), p)

    @property
    def shape(self) -> Tuple[int, int, int]:
        """``(ny, nx, nf)`` of a frame."""
        g = self._geometry
        return (g["ny"], g["nx"], g["nf"])

    def write_frame(self, time: float, values: Any) -> None:
        """Appends a frame: its ``time`` and values shaped ``[ny, nx, nf]`` (or flat in
        that order); any dtype, strides or byte order (converted to f32 once)."""
        a = _contiguous(values, np.float32, "values")
        if a.ndim != 1 and a.shape != self.shape:
            raise InvalidArgumentError(f"a frame is {self.shape} ([ny, nx, nf]), not {a.shape}")
        self._w.write_values(float(time), a, _address(a), a.size)


class SparseWriter(_StreamWriter):
    """Writes a sparse activity file frame by frame: with values (filetype 6, the
    default; ``datatype4=True`` for the obsolete datatype old Python/Matlab readers
    expect) or binary (``values=False``, filetype 2: spikes, no values).

    Indices are the active neurons ``f + nf*(x + nx*y)`` in any order (written sorted);
    duplicates and out-of-range indices raise. Crash-safe and appendable like
    :class:`DenseWriter`.

    >>> import numpy as np, tensorfmt.pvp
    >>> with tensorfmt.pvp.SparseWriter("s.pvp", nx=8, ny=8, nf=4) as w:
    ...     w.write_frame(0.0, [7, 3], [0.5, 2.0])
    ...     w.write_dense_frame(1.0, np.eye(8, 32, dtype=np.float32).reshape(8, 8, 4))
    >>> f = tensorfmt.pvp.open("s.pvp")
    >>> f[0].indices.tolist(), f[0].values.tolist()
    ([3, 7], [2.0, 0.5])
    """

    _kind = "sparse"

    def __init__(
        self,
        path: PathLike,
        nx: int,
        ny: int,
        nf: int,
        *,
        values: bool = True,
        datatype4: bool = False,
        overwrite: bool = True,
    ) -> None:
        p = os.fsdecode(path)
        nx, ny, nf = _dims(nx=nx, ny=ny, nf=nf)
        native = _native.pvp_sparse_writer(
            p, nx, ny, nf, _flag("values", values), _flag("datatype4", datatype4), _flag("overwrite", overwrite)
        )
        super().__init__(native, p)

    @property
    def shape(self) -> Tuple[int, int, int]:
        """``(ny, nx, nf)`` of a frame."""
        g = self._geometry
        return (g["ny"], g["nx"], g["nf"])

    @property
    def has_values(self) -> bool:
        """False for a binary (spike) file."""
        return bool(self._geometry["values"])

    def write_frame(self, time: float, indices: Any, values: Any = None) -> None:
        """Appends a frame: active-neuron ``indices`` and, in a values file, one value
        each (``values`` must be omitted in a binary file)."""
        idx = np.asarray(indices)
        if idx.size == 0:
            idx = idx.astype(np.uint32)
        if idx.dtype.kind not in "iu":
            raise InvalidArgumentError(f"indices must be integers, not {idx.dtype}")
        if idx.ndim != 1:
            idx = idx.reshape(-1)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) > 0xFFFFFFFF):
            raise InvalidArgumentError("indices must be in 0..nx*ny*nf")
        idx = np.ascontiguousarray(idx, dtype=np.uint32)
        if self.has_values:
            if values is None:
                raise InvalidArgumentError("this is a values file: give one value per index")
            vals = _contiguous(values, np.float32, "values").reshape(-1)
        else:
            if values is not None:
                raise InvalidArgumentError("this is a binary (spike) file: give indices only")
            vals = np.empty(0, np.float32)
        self._w.write_sparse(float(time), (idx, vals), _address(idx), idx.size, _address(vals), vals.size)

    def write_matrix(self, matrix: Any, times: Any = None) -> None:
        """Appends every row of a scipy sparse matrix ``[frames, nx*ny*nf]`` (what
        :meth:`PvpFile.to_scipy` and pvtools' ``readpvpfile`` give) as a frame, with
        ``times`` (default ``0, 1, ...``)."""
        csr = matrix.tocsr()
        n = self.shape[0] * self.shape[1] * self.shape[2]
        if csr.shape[1] != n:
            raise InvalidArgumentError(f"the matrix has {csr.shape[1]} columns, a frame {n} neurons {self.shape}")
        rows = csr.shape[0]
        t = np.arange(rows, dtype=np.float64) if times is None else np.asarray(times, np.float64).reshape(-1)
        if t.size != rows:
            raise InvalidArgumentError(f"{t.size} times for {rows} rows")
        csr.sum_duplicates()
        for k in range(rows):
            a, b = csr.indptr[k], csr.indptr[k + 1]
            self.write_frame(float(t[k]), csr.indices[a:b], csr.data[a:b] if self.has_values else None)

    def write_dense_frame(self, time: float, frame: Any) -> None:
        """Appends a frame given densely (``[ny, nx, nf]`` or flat): its non-zero
        entries are written (their values, or just their indices in a binary file)."""
        a = _contiguous(frame, np.float32, "frame").reshape(-1)
        n = self.shape[0] * self.shape[1] * self.shape[2]
        if a.size != n:
            raise InvalidArgumentError(f"a frame has {n} values ([ny, nx, nf] = {self.shape}), not {a.size}")
        idx = np.flatnonzero(a)
        self.write_frame(time, idx, a[idx] if self.has_values else None)


class WeightsWriter(_StreamWriter):
    """Writes a weight file frame by frame: shared weights (kernels, filetype 5, the
    default) or non-shared ones (``shared=False``, filetype 3, with ``margin``), as f32
    or, with ``compress=True``, one byte per weight scaled between the frame's min and
    max.

    A frame is ``[arbors, patches, nyp, nxp, nfp]`` (or flat), where ``patches`` is
    ``nx*ny*nf`` for kernels (the unit cell) and ``(nx+2*mx)*(ny+2*my)*nf`` for
    non-shared weights over an ``nx x ny x nf`` pre-synaptic layer.

    >>> import numpy as np, tensorfmt.pvp
    >>> w = np.random.default_rng(0).standard_normal((1, 2, 3, 3, 4)).astype(np.float32)
    >>> with tensorfmt.pvp.WeightsWriter("w.pvp", nxp=3, nyp=3, nfp=4, nf=2) as out:
    ...     out.write_frame(0.0, w)
    >>> f = tensorfmt.pvp.open("w.pvp")
    >>> bool((f[0].weights == w).all()), f.weight_geometry["numpatches"]
    (True, 2)
    """

    _kind = "weights"

    def __init__(
        self,
        path: PathLike,
        *,
        nxp: int,
        nyp: int,
        nfp: int,
        nf: int,
        nx: int = 1,
        ny: int = 1,
        arbors: int = 1,
        shared: bool = True,
        margin: Union[int, Tuple[int, int]] = 0,
        compress: bool = False,
        overwrite: bool = True,
    ) -> None:
        _flags(shared=shared, compress=compress, overwrite=overwrite)
        p = os.fsdecode(path)
        mx, my = (margin, margin) if isinstance(margin, (int, np.integer)) else margin
        nx, ny, nf, mx, my, nxp, nyp, nfp, arbors = _dims(
            nx=nx, ny=ny, nf=nf, margin_x=mx, margin_y=my, nxp=nxp, nyp=nyp, nfp=nfp, arbors=arbors
        )
        native = _native.pvp_weights_writer(
            p, bool(shared), nx, ny, nf, mx, my, nxp, nyp, nfp, arbors, bool(compress), overwrite
        )
        super().__init__(native, p)

    @property
    def geometry(self) -> Dict[str, Any]:
        """``shared``, ``nx``, ``ny``, ``nf``, ``margin_x``, ``margin_y``, ``nxp``,
        ``nyp``, ``nfp``, ``arbors``, ``numpatches``, ``compress``."""
        return dict(self._geometry)

    @property
    def shape(self) -> Tuple[int, int, int, int, int]:
        """``(arbors, patches, nyp, nxp, nfp)`` of a frame."""
        g = self._geometry
        return (g["arbors"], g["numpatches"], g["nyp"], g["nxp"], g["nfp"])

    def write_frame(self, time: float, weights: Any) -> None:
        """Appends a frame of weights shaped like :attr:`shape` (or flat)."""
        a = _contiguous(weights, np.float32, "weights")
        if a.ndim != 1 and a.shape != self.shape:
            raise InvalidArgumentError(
                f"a weight frame is {self.shape} ([arbors, patches, nyp, nxp, nfp]), not {a.shape}"
            )
        self._w.write_values(float(time), a, _address(a), a.size)


__all__ = [
    "open",
    "PvpFile",
    "DenseFile",
    "SparseFile",
    "WeightsFile",
    "Frame",
    "WeightFrame",
    "DenseWriter",
    "SparseWriter",
    "WeightsWriter",
]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
