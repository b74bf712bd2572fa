"""Reading, writing, converting, comparing and checking files (the public functions of
:mod:`tensorfmt`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._errors import callers_own
from ._errors import warn_leniency as _warn_leniency
from ._text import summary as _summary
from . import _args
from ._args import byte_limit as _byte_limit, flag as _flag, flags as _flags
from ._errors import (
    InvalidArgumentError,
    LimitError,
    TensorfmtFileExistsError,
    TensorfmtIndexError,
    TensorfmtTypeError,
    TensorNotFoundError,
    UnsupportedError,
    naming,
)

PathLike = Union[str, "os.PathLike[str]"]
Frames = Union[None, int, slice, Tuple[int, Optional[int]]]


class SupportsUpdate(Protocol):
    """A tqdm-compatible progress bar: ``update(n)`` advances it by ``n``."""

    def update(self, n: int) -> Any: ...


#: ``progress=``: a callable ``progress(done, total)`` (bytes) or a tqdm-like bar.
Progress = Union[Callable[[int, int], Any], SupportsUpdate]


def _progress_callback(progress: Optional[Progress]) -> Optional[Callable[[int, int], Any]]:
    """``progress=`` as a ``(done, total)`` callable: a tqdm-like object (one with
    ``update``) is advanced by the difference, its ``total`` set when it is None."""
    if progress is None:
        return None
    update = getattr(progress, "update", None)
    if callable(update) and not isinstance(progress, Mapping):
        bar = progress
        last = [0]

        def advance(done: int, total: int) -> None:
            if getattr(bar, "total", 0) is None:
                bar.total = total  # type: ignore[union-attr]
            step = done - last[0]
            last[0] = done
            if step:
                update(step)

        return callers_own(advance)
    if callable(progress):
        return callers_own(progress)
    raise InvalidArgumentError(
        f"progress= takes a callable progress(done, total) or an object with .update(n) (tqdm), got {type(progress).__name__}"
    )


@dataclass(frozen=True)
class TensorInfo:
    """What a file says about one tensor, known without decoding it.

    ``dtype`` is the numpy dtype of the array you get; ``stored_dtype`` the element type
    in the file (``bf16`` arrays are ``ml_dtypes.bfloat16`` when ml_dtypes is
    installed, else numpy lacks the type and they are widened to float32, exactly).
    """

    name: str
    dtype: np.dtype
    shape: Tuple[int, ...]
    stored_dtype: str

    @property
    def nbytes(self) -> int:
        """Size of the array in memory."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


_NUMPY_DTYPES = {
    "f16": np.float16,
    "bf16": np.float32,
    "f32": np.float32,
    "f64": np.float64,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
    "bool": np.bool_,
}


def _stored_dtype(dtype: Any) -> Optional[str]:
    """The ``dtype=`` of save and convert as tensorfmt's name: its own names (``f32``,
    ``bf16``, ...) or anything numpy takes as a dtype (``"float32"``, ``np.float32``,
    ``np.dtype("<f4")``, ``ml_dtypes.bfloat16``)."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype.strip().lower() in _NUMPY_DTYPES:
        return dtype.strip().lower()
    if isinstance(dtype, str) and dtype.strip().lower() == "bfloat16":
        return "bf16"  # also without ml_dtypes, which gives numpy the name
    try:
        d = np.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"dtype={dtype!r}: not a dtype ({e}); one of {', '.join(_NUMPY_DTYPES)} or a numpy dtype"
        ) from None
    if d.name == "bfloat16":
        return "bf16"
    # The byte order is the writer's (each format has its own); the type is what counts.
    native = d.newbyteorder("=") if d.byteorder not in "=|" else d
    for name, t in _NUMPY_DTYPES.items():
        if name != "bf16" and native == np.dtype(t):
            return name
    raise InvalidArgumentError(f"dtype={dtype!r}: tensorfmt stores {', '.join(_NUMPY_DTYPES)}, not {d}")


def _bfloat16() -> Any:
    """``ml_dtypes.bfloat16`` when ml_dtypes is installed, else None."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


def _numpy_dtype(stored: str) -> np.dtype:
    """The dtype of the array a tensor stored as ``stored`` comes as: bf16 is
    ``ml_dtypes.bfloat16`` when ml_dtypes is installed, float32 (exact) otherwise."""
    if stored == "bf16":
        bf16 = _bfloat16()
        if bf16 is not None:
            return np.dtype(bf16)
    return np.dtype(_NUMPY_DTYPES[stored])


def _bf16(widened: np.ndarray) -> np.ndarray:
    """A bf16 tensor the native layer widened to float32 (exactly), back as
    ``ml_dtypes.bfloat16`` when ml_dtypes is installed."""
    bf16 = _bfloat16()
    return widened if bf16 is None else widened.astype(bf16)


def _to_torch(arr: np.ndarray, stored: str) -> Any:
    """A torch tensor owning a copy of ``arr`` (writable, so torch does not warn about
    read-only memory, and no write can reach the file's shared pages); bf16 stays
    ``torch.bfloat16``."""
    import torch

    if stored == "bf16":
        if arr.dtype.name == "bfloat16":
            return torch.from_numpy(np.array(arr.view(np.int16))).view(torch.bfloat16)
        return torch.from_numpy(np.array(arr)).to(torch.bfloat16)
    return torch.from_numpy(np.array(arr))


def _frame_slice(frames: Frames, count: int) -> Tuple[int, int, int]:
    """``frames`` as ``(start, stop, step)`` over ``count`` frames, as Python indexing
    reads it: negative positions count from the end, a range past the end stops at the
    last frame (pvtools' ``lastFrame``), ``(start, stop)`` is ``slice(start, stop)``; a
    single frame out of range raises :class:`IndexError`."""
    if isinstance(frames, bool):
        raise TensorfmtTypeError("frames= takes an int, a slice or (start, stop), not a bool")
    if isinstance(frames, (int, np.integer)):
        k = int(frames)
        if not -count <= k < count:
            raise TensorfmtIndexError(f"frame {k} is out of range: the file has {count} frames")
        k %= count
        return (k, k + 1, 1)
    if isinstance(frames, tuple) and len(frames) == 2:
        frames = slice(*frames)
    if not isinstance(frames, slice):
        raise TensorfmtTypeError(f"frames= takes an int, a slice or (start, stop), not {type(frames).__name__}")
    if frames.step is not None and not isinstance(frames.step, (int, np.integer)):
        raise TensorfmtTypeError("frames= slice steps must be integers")
    if frames.step is not None and int(frames.step) <= 0:
        raise InvalidArgumentError(f"frames= takes a positive step (the file is read forwards), not {frames.step}")
    for bound in (frames.start, frames.stop):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, np.integer))):
            raise TensorfmtTypeError(f"frames= slice bounds must be integers or None, not {bound!r}")
    start, stop, step = frames.indices(count)
    return (start, max(start, stop), step)


Framework = str  # "numpy" or "pt"
_FRAMEWORKS = ("numpy", "np", "pt", "torch")


class Document(Mapping[str, Any]):
    """An open file: a read-only mapping of tensor names to numpy arrays (or torch
    tensors, with ``framework="pt"``).

    Nothing is decoded until a tensor is asked for; then the array is a read-only view
    of the mapped file wherever the layout allows (dense PVP frames, PINK payloads,
    npy/npz/safetensors data, primitiv tensors...), and one bulk copy otherwise. An
    array stays valid after the document is closed: it keeps the mapping alive.

    >>> import tensorfmt
    >>> with tensorfmt.open("testdata/pvp/dense_f32.pvp") as doc:
    ...     print(doc.format, doc.kind, list(doc))
    ...     frames = doc["values"]          # [frames, ny, nx, nf], no copy
    pvp dense ['values', 'time']
    >>> frames.shape
    (3, 2, 3, 2)
    """

    def __init__(
        self,
        native: "_native.File",
        frames: Optional[Tuple[int, Optional[int]]] = None,
        sparse: bool = False,
        *,
        step: int = 1,
        framework: str = "numpy",
    ) -> None:
        self._file = native
        self._infos: Optional[Dict[str, TensorInfo]] = None
        self._frames = frames
        self._sparse = sparse
        self._step = step
        self._framework = "pt" if framework in ("pt", "torch") else "numpy"
        self._pvp_file: Any = None

    # -- what the file is -------------------------------------------------------------
    @property
    def path(self) -> str:
        """The path given to :func:`open`."""
        return os.fspath(self._file.path)

    @property
    def format(self) -> str:
        """Format name: ``pvp``, ``som``, ``primitiv``, ``caffe``, ``npy``, ``npz`` or ``safetensors``."""
        return self._file.format

    @property
    def kind(self) -> str:
        """File kind within the format, as ``to=`` names it: ``dense``, ``sparse``,
        ``weights`` (PVP), ``som-data``, ``som``, ``som-mapping``, ``som-rotflip``
        (PINK), ``caffemodel``, ``binaryproto``, ``blobprotovector``, ``solverstate``
        (Caffe), ``model``, ``parameter``, ``tensor``, ``shape``, ``optimizer``
        (primitiv); the format name for npy, npz and safetensors. So
        ``save(p, doc, to=f"{doc.format}:{doc.kind}")`` writes the same kind of file.
        :attr:`description` says it in words."""
        return self._file.kind

    @property
    def description(self) -> str:
        """What the file is, in words (``'dense activity'``, ``'SOM (hexagonal 3x3)'``,
        ``'model (V2 NetParameter)'``)."""
        return self._file.description

    def metadata(self) -> Dict[str, str]:
        """``{key: text}``: a safetensors file's ``__metadata__`` (what safetensors'
        ``safe_open(...).metadata()`` gives), the header fields of any other format as
        text (:attr:`header` keeps their numbers and nesting).

        >>> import tensorfmt
        >>> tensorfmt.open("testdata/core/model.safetensors").metadata()
        {'format': 'pt'}
        >>> tensorfmt.open("testdata/pvp/dense_f32.pvp").metadata()["nbands"]
        '3'
        """
        header = self.header
        if self.format == "safetensors":
            return {str(k): str(v) for k, v in (header.get("__metadata__") or {}).items()}
        return {k: v if isinstance(v, str) else repr(v) for k, v in header.items()}

    @property
    def header(self) -> Dict[str, Any]:
        """The header fields as a plain dict (nested dicts and lists where the format nests)."""
        return self._file.header

    @property
    def warnings(self) -> List[str]:
        """What the lenient reader accepted that the original program would refuse."""
        return list(self._file.warnings)

    # -- tensors ----------------------------------------------------------------------
    def _info_map(self) -> Dict[str, TensorInfo]:
        if self._infos is None:
            infos: Dict[str, TensorInfo] = {}
            span = None if self._frames is None else (self._frames[1] or 0) - self._frames[0]
            for name, dtype, shape in self._file.tensors():
                shape = tuple(shape)
                if self._step != 1 and span is not None and shape and shape[0] == span:
                    shape = (len(range(0, span, self._step)),) + shape[1:]
                infos[name] = TensorInfo(name, _numpy_dtype(dtype), shape, dtype)
            self._infos = infos
        return self._infos

    def info(self, name: str) -> TensorInfo:
        """dtype and shape of one tensor, without decoding it."""
        try:
            return self._info_map()[name]
        except KeyError:
            from ._errors import TensorNotFoundError

            err = TensorNotFoundError(
                f"{self.path}: no tensor named {name!r} (it has: {', '.join(self) or 'none'})"
            )
            err.name = name
            raise err from None

    @property
    def tensors(self) -> List[TensorInfo]:
        """Every tensor's :class:`TensorInfo`, in file order."""
        return list(self._info_map().values())

    def __getitem__(self, name: str) -> Any:
        arr = self._array(name)
        if self._framework == "pt":
            return _to_torch(arr, self.info(name).stored_dtype)
        return arr

    def _array(self, name: str) -> np.ndarray:
        info = self.info(name)  # a clear KeyError for unknown names
        arr: Optional[np.ndarray] = None
        if name == "values" and self.format == "pvp" and not self._sparse and self.kind == "dense":
            # Frames are separated by their timestamps: a strided view instead of a copy.
            arr = self._pvp_movie()
            if arr is not None and not (arr.shape == info.shape and arr.dtype == info.dtype):
                arr = None
        if arr is None:
            try:
                data = self._file.read(name)
            except LimitError as e:
                if self.format == "pvp" and self.kind == "sparse" and not self._sparse:
                    raise LimitError(
                        f"{e}; {name!r} is stored sparsely: open it with sparse=True (CSR arrays) "
                        f"or use tensorfmt.pvp.open({self.path!r}).to_scipy()"
                    ) from e
                raise
            try:
                arr = np.asarray(data)
            except (ValueError, TypeError, OverflowError, MemoryError) as e:
                # numpy refuses some legal descriptions (a zero-size array whose other
                # dimensions are huge): a tensorfmt error, keeping the builtin base.
                raise LimitError(f"{name}: numpy cannot represent {info.stored_dtype}{list(info.shape)}: {e}") from e
            if self._step != 1 and arr.shape[:1] != info.shape[:1]:
                arr = arr[:: self._step]
            if info.stored_dtype == "bf16":
                arr = _bf16(arr)
        return arr

    def _pvp_movie(self) -> Optional[np.ndarray]:
        from . import pvp

        if self._pvp_file is None:
            self._pvp_file = pvp._open(self.path, warn=False)
        f = self._pvp_file
        if f.kind != "dense":
            return None
        start, stop = self._frames if self._frames is not None else (0, None)
        movie = f.movie(start, len(f) if stop is None else stop)
        return movie[:: self._step] if self._step != 1 else movie

    def get_tensor(self, name: str) -> Any:
        """The same as ``doc[name]`` (the name safetensors' ``safe_open`` uses)."""
        return self[name]

    def get_slice(self, name: str) -> "TensorSlice":
        """A lazy handle on one tensor, indexed like an array (safetensors'
        ``get_slice``): ``doc.get_slice("w")[:2, 1]`` reads only the bytes of those
        elements where the tensor is a view of the file (npy, safetensors, stored npz
        members, dense PVP frames, PINK payloads...), and decodes the tensor once
        otherwise.

        >>> import tensorfmt
        >>> with tensorfmt.open("testdata/pvp/dense_f32.pvp") as doc:
        ...     part = doc.get_slice("values")
        ...     part.get_shape(), part[-1, 0, :, 0].tolist()
        ([3, 2, 3, 2], [5.0, 5.5, 6.0])
        """
        return TensorSlice(self, name)

    def keys(self):  # type: ignore[override]
        """Tensor names in file order."""
        return self._info_map().keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._info_map())

    def __len__(self) -> int:
        return len(self._info_map())

    def __contains__(self, name: object) -> bool:
        return name in self._info_map()

    def stats(self, name: str) -> Dict[str, Any]:
        """Streaming statistics of one tensor: count, min, max, mean, sum, nonzero, nan."""
        self.info(name)
        return self._file.stats(name)

    def to_dict(self) -> Dict[str, np.ndarray]:
        """Every tensor as a plain dict of arrays."""
        return {name: self[name] for name in self}

    def validate(self) -> "ValidationReport":
        """Checks the whole file (every frame, checksums); see :func:`validate`."""
        try:
            with naming(self.path):  # the report's error names the file
                self._file.validate()
            error = None
        except Exception as e:  # noqa: BLE001 - reported, not raised
            if not isinstance(e, _errors_base()):
                raise
            error = e
        return ValidationReport(self.path, error is None, self.format, self.kind, self.warnings, error)

    def convert(
        self,
        path: PathLike,
        *,
        to: Optional[str] = None,
        tensors: Optional[Sequence[str]] = None,
        dtype: Any = None,
        settings: Optional[Mapping[str, Any]] = None,
        overwrite: bool = True,
        hex: bool = False,
        fsync: bool = True,
        dense: bool = False,
        like: Optional[PathLike] = None,
        progress: Optional[Progress] = None,
    ) -> List[str]:
        """Writes this document's tensors to ``path``; the write keywords of
        :func:`convert` (``dense``, ``like`` and ``progress`` included)."""
        return _convert_open(
            self,
            path,
            to=to,
            tensors=tensors,
            dtype=dtype,
            settings=settings,
            overwrite=overwrite,
            hex=hex,
            fsync=fsync,
            dense=dense,
            like=like,
            progress=progress,
        )

    # -- lifetime ---------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._file.closed

    def close(self) -> None:
        """Releases the file. Arrays already returned stay valid."""
        self._file.close()
        self._pvp_file = None

    def __enter__(self) -> "Document":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        # Names, kinds and paths come from files: escaped and bounded (issue 24).
        from ._text import esc, name

        if self.closed:
            return f"<tensorfmt.Document {esc(self._file.path)} (closed)>"
        names = ", ".join(f"{name(i.name)}: {i.stored_dtype}{list(i.shape)}" for i in self.tensors[:6])
        more = ", ..." if len(self) > 6 else ""
        return f"<tensorfmt.Document {self.format}:{esc(self.kind)} {esc(self.path)} {{{names}{more}}}>"


class TensorSlice:
    """One tensor of a :class:`Document`, indexed lazily (see
    :meth:`Document.get_slice`)."""

    def __init__(self, doc: Document, name: str) -> None:
        self._doc = doc
        self._info = doc.info(name)
        self._array: Optional[np.ndarray] = None

    def get_shape(self) -> List[int]:
        """The tensor's shape, as a list (as safetensors gives it)."""
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The element type as stored (``f32``, ``bf16``, ``u8``...)."""
        return self._info.stored_dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._info.shape

    @property
    def dtype(self) -> np.dtype:
        return self._info.dtype

    def __len__(self) -> int:
        return self._info.shape[0] if self._info.shape else 0

    def __getitem__(self, key: Any) -> Any:
        # The array is a view of the mapping where the layout allows: indexing it copies
        # the selected elements only, touching only their pages. Where the tensor had
        # to be decoded (deflated npz, Caffe FP16, ...), it is decoded once and kept.
        if self._array is None:
            self._array = self._doc._array(self._info.name)
        part = np.array(self._array[key])
        if self._doc._framework == "pt":
            return _to_torch(part, self._info.stored_dtype)
        return part


def _errors_base():
    from ._errors import TensorfmtError

    return TensorfmtError


def _frame_count(native: "_native.File", path: str, kind: Optional[str], strict: bool) -> int:
    """How many frames (PVP) or entries (PINK) ``frames=`` selects from."""
    fmt = native.format
    if fmt == "pvp":
        # Every PVP kind exports one time per frame: the count the open already made.
        for name, _, shape in native.tensors():
            if name == "time":
                return int(shape[0])
        return int(_native.open_pvp(path, strict).frame_count())
    if fmt == "som":
        n = _native.open_som(path, kind, strict).n_entries()
        if n is not None:
            return int(n)
    raise InvalidArgumentError(
        f"{path}: frames= selects the frames of a PVP file or the entries of a PINK file; "
        f"this is {fmt} ({native.description})"
    )


def open(  # noqa: A001 - the name users expect, like io.open / safetensors.safe_open
    path: PathLike,
    *,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    frames: Frames = None,
    sparse: bool = False,
    max_alloc: Optional[int] = None,
    framework: str = "numpy",
) -> Document:
    """Opens a tensor file and returns a lazy :class:`Document`.

    ``format`` forces a format instead of detecting it (content first, extension
    second); ``kind`` resolves legacy PINK files that fit several readings (``som``,
    ``som-data``, ``mapping``, ``rotflip``) and Caffe files whose bytes do not tell
    (``caffemodel``, ``binaryproto``...); ``strict`` refuses what the original program
    refuses (crash-truncated PVP, generic MessagePack in primitiv...) instead of reading
    it with a :class:`TensorfmtWarning`; ``frames`` selects PVP frames / PINK entries as
    Python indexing does (an int, a ``slice`` with negative positions and steps, or
    ``(start, stop)``; a range past the end stops at the last frame); ``sparse``
    exports sparse PVP files as CSR (``indptr``, ``indices``, ``data``, with ``shape``,
    ``frame_shape`` ``[ny, nx, nf]`` and ``time``) instead of dense; ``framework="pt"`` gives torch tensors (writable copies, as safetensors'
    ``safe_open(framework="pt")``) instead of read-only numpy views.

    >>> import tensorfmt
    >>> with tensorfmt.open("testdata/pvp/dense_f32.pvp", frames=slice(-2, None)) as doc:
    ...     doc["values"].shape, doc["time"].tolist()
    ((2, 2, 3, 2), [1.5, 2.5])
    >>> with tensorfmt.open("testdata/core/model.safetensors") as doc:
    ...     doc.format, doc.kind, sorted(doc)
    ('safetensors', 'safetensors', ['embed.weight', 'layer.bias', 'mask'])
    """
    if framework not in _FRAMEWORKS:
        raise InvalidArgumentError(f"framework= is 'numpy' or 'pt', not {framework!r}")
    _flags(strict=strict, sparse=sparse)
    max_alloc = _byte_limit("max_alloc", max_alloc)
    p = os.fsdecode(path)
    with naming(p):
        native = _native.open_file(p, format, kind, strict, None, sparse, max_alloc)
    selected: Optional[Tuple[int, Optional[int]]] = None
    step = 1
    if frames is not None:
        count = _frame_count(native, p, kind, strict)
        start, stop, step = _frame_slice(frames, count)
        if step != 1 and sparse:
            # CSR rows cannot be strided without rebuilding indptr.
            raise InvalidArgumentError("frames= with a step needs sparse=False (read the range, then slice rows)")
        selected = (start, stop)
        if (start, stop) != (0, count):
            fmt = native.format
            native.close()
            with naming(p):
                native = _native.open_file(p, fmt, kind, strict, selected, sparse, max_alloc)
    doc = Document(native, selected, sparse, step=step, framework=framework)
    _warn_leniency(p, native.warnings)
    return doc


def load(
    path: PathLike,
    *,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    frames: Frames = None,
    sparse: bool = False,
    max_alloc: Optional[int] = None,
    framework: str = "numpy",
) -> Dict[str, Any]:
    """Every tensor of a file as a dict of arrays (the keywords of :func:`open`).

    >>> import tensorfmt
    >>> arrays = tensorfmt.load("testdata/caffe/v2_tiny.caffemodel")
    >>> {name: a.shape for name, a in arrays.items()}
    {'conv1/0': (2, 1, 2, 2), 'conv1/1': (2,), 'ip/0': (3, 2)}
    """
    with naming(os.fsdecode(path)), open(
        path,
        format=format,
        kind=kind,
        strict=strict,
        frames=frames,
        sparse=sparse,
        max_alloc=max_alloc,
        framework=framework,
    ) as doc:
        return doc.to_dict()


def _as_array(name: str, value: Any) -> Tuple[np.ndarray, str]:
    """A native byte-order contiguous numpy array and its tensorfmt dtype name."""
    module = type(value).__module__
    if module.startswith("torch"):
        import torch

        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype == torch.bfloat16:
            # numpy has no bfloat16: hand over the raw bits and say what they are.
            return np.ascontiguousarray(t.contiguous().view(torch.int16).numpy()).view(np.uint16), "bf16"
        value = t.numpy()
    a = np.asarray(value)
    if a.dtype.name == "bfloat16":  # ml_dtypes.bfloat16: the raw bits, said to be bf16
        bits = a.view(np.uint16)
        if not (bits.flags.c_contiguous or (bits.ndim > 1 and bits.flags.f_contiguous)):
            bits = np.ascontiguousarray(bits)
        return bits, "bf16"
    if a.dtype.kind not in "biuf" or a.dtype.itemsize > 8 or (a.dtype.kind == "f" and a.dtype.itemsize < 2):
        raise UnsupportedError(f"tensor {name!r}: dtype {a.dtype} cannot be stored (numbers and bools only)")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not (a.flags.c_contiguous or (a.ndim > 1 and a.flags.f_contiguous)):
        a = np.ascontiguousarray(a)
    return a, a.dtype.str


def _target_format(to: Optional[str], path: str) -> str:
    """The format name a write goes to: ``to=``'s (``"pvp:sparse"`` -> ``pvp``), else
    the path's extension (the writer decides the rest)."""
    if to is not None and not isinstance(to, str):
        raise TensorfmtTypeError(f"to= takes a format name such as 'npz' or 'pvp:sparse', not {type(to).__name__}")
    return (to or os.path.splitext(path)[1].lstrip(".")).split(":")[0].lower()


def _settings(settings: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """``settings=`` as the writers take them: text values, a bool as ``true`` /
    ``false`` (the CLI's ``--set external_data=true`` is ``{"external_data": True}``)."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise TensorfmtTypeError(f"settings= takes a mapping of setting names to values, not {type(settings).__name__}")

    def text(v: Any) -> str:
        return ("true" if v else "false") if isinstance(v, (bool, np.bool_)) else str(v)

    return {str(k): text(v) for k, v in settings.items()}


def _refuse_existing(p: str, overwrite: bool, settings: Optional[Mapping[str, Any]] = None) -> None:
    """``overwrite=False`` refuses an existing output, a dangling symlink included (as
    the CLI does: writing through it would create the file it points to), and the
    ``OUT.onnx.data`` an ONNX model written with ``external_data`` puts beside it."""
    if _flag("overwrite", overwrite):
        return
    outputs = [p]
    if _settings(settings).get("external_data", "").lower() == "true":
        outputs.append(p + ".data")
    for q in outputs:
        if os.path.lexists(q):
            raise TensorfmtFileExistsError(f"{q} exists and overwrite=False")


def save(
    path: PathLike,
    arrays: Union[Mapping[str, Any], Any],
    *,
    to: Optional[str] = None,
    dtype: Any = None,
    settings: Optional[Mapping[str, Any]] = None,
    overwrite: bool = True,
    hex: bool = False,
    fsync: bool = True,
    shape: Optional[Tuple[int, int, int]] = None,
    like: Optional[PathLike] = None,
    progress: Optional[Progress] = None,
) -> None:
    """Writes arrays to ``path`` in any writable format, atomically.

    ``arrays`` is a dict of anything ``numpy.asarray`` accepts (numpy arrays of any
    strides and byte order, ``ml_dtypes.bfloat16`` arrays, CPU torch tensors, lists),
    or one array, or an open :class:`Document` (then converted as :func:`convert` converts
    its file: the file's layout goes with its arrays). ``to`` names the format and file kind (``"pvp:sparse"``,
    ``"som-data"``, ``"caffe:binaryproto"``, ``"primitiv:parameter"``,
    ``"safetensors"``...; default: from the extension); ``dtype`` the stored element
    type where the format offers a choice (``"f32"``, ``"bf16"``..., or any numpy dtype:
    ``"float32"``, ``np.float16``); ``settings`` format-specific keys (the CLI's
    ``--set``); ``hex`` a hexagonal PINK layout. An existing file is replaced, as
    ``numpy.save`` and safetensors' ``save_file`` do (``overwrite=False`` refuses it
    instead); nothing is lost if the write fails: the file is written to a temporary
    name, synced to disk and renamed into place. ``fsync=False`` skips the sync, for any
    format (faster for large scratch files: still atomic, but a power failure can lose
    the new file — what numpy and safetensors do).

    A scipy sparse matrix ``[frames, ny*nx*nf]`` (``arrays`` itself or its ``values``,
    as pvtools' ``writepvpfile`` takes it) is written as its CSR arrays (``indptr``,
    ``indices``, ``data``, ``shape``), with ``shape=(ny, nx, nf)`` the frame geometry
    (``frame_shape``): to ``.pvp`` that is a sparse PVP file, and any other file of them
    converts back to it. ``dtype`` is the type of the values (``data``); the index
    arrays and shapes keep theirs.

    ``like=ORIGINAL`` writes the arrays into the structure of an existing file of the
    same legacy format (PVP, PINK, primitiv, Caffe): ``load`` -> edit -> ``save(...,
    like=original)`` keeps the net name, layer types, blob-less layers, legacy shapes,
    solver state, PVP headers. The arrays must keep the original's names, dtypes and
    shapes; otherwise nothing is written and an error says why.

    ``progress`` follows the write: a callable ``progress(done, total)`` or a tqdm-like
    bar (``update(n)``; its ``total`` is set when None), called with the bytes of the
    arrays written so far (``total``: all of them) at the start, every piece of at most
    16 MiB for npy, npz and safetensors, and at the end. It runs on a worker thread
    while the write runs without the GIL. An exception it raises stops the write: no
    file is written (an existing one is left as it was) and the exception propagates.

    >>> import tensorfmt, numpy as np
    >>> frames = np.zeros((3, 4, 5, 1), dtype=np.float32)        # [frames, ny, nx, nf]
    >>> tensorfmt.save("act.pvp", {"values": frames})
    >>> tensorfmt.open("act.pvp").kind
    'dense'
    """
    _flags(hex=hex, fsync=fsync)
    if isinstance(arrays, Document) and shape is None and arrays._step == 1 and not arrays._sparse:
        # An open document is converted, not re-saved from its arrays: its layout (a
        # primitiv batch, a PVP header, PINK's comments) goes with it, as convert takes it.
        _convert_open(
            arrays, path, to=to, dtype=dtype, settings=settings, overwrite=overwrite, hex=hex, fsync=fsync, like=like, progress=progress
        )
        return
    p = os.fsdecode(path)
    _refuse_existing(p, overwrite, settings)
    if not isinstance(arrays, Mapping):
        arrays = {"values" if _is_scipy_sparse(arrays) else "arr_0": arrays}
    arrays = _expand_sparse(arrays, shape)
    items = []
    for name, value in arrays.items():
        if not isinstance(name, str):
            raise InvalidArgumentError(f"tensor names must be strings, got {name!r}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(
                f"tensor name {name!r} is not Unicode text every format can store ({e.reason} at {e.start}: "
                "a lone surrogate, as os.fsdecode gives for undecodable bytes)"
            ) from None
        a, descr = _as_array(name, value)
        items.append(
            {
                "name": name,
                "owner": a,
                "address": a.__array_interface__["data"][0] if a.nbytes else 0,
                "nbytes": int(a.nbytes),
                "dtype": descr,
                "shape": list(a.shape),
                "fortran": bool(a.ndim > 1 and not a.flags.c_contiguous),
            }
        )
    extra = _settings(settings)
    original = None if like is None else os.fsdecode(like)
    _report(p, *_native.save(p, items, to, _stored_dtype(dtype), hex, extra, fsync, _progress_callback(progress), original))


def _is_scipy_sparse(value: Any) -> bool:
    return type(value).__module__.startswith("scipy.sparse") and hasattr(value, "tocsr")


def _expand_sparse(arrays: Mapping[str, Any], shape: Optional[Tuple[int, int, int]]) -> Mapping[str, Any]:
    """A scipy sparse matrix among ``arrays`` as its CSR arrays (at most one), with
    ``frame_shape`` when ``shape`` gives the geometry."""
    sparse = [k for k, v in arrays.items() if _is_scipy_sparse(v)]
    if not sparse:
        if shape is not None:
            raise InvalidArgumentError("shape= is the frame geometry of a scipy sparse matrix; none was given")
        return arrays
    if len(sparse) > 1:
        raise InvalidArgumentError(f"one scipy sparse matrix per file, got {len(sparse)}: {sparse}")
    csr = arrays[sparse[0]].tocsr()
    csr.sum_duplicates()
    if csr.ndim != 2:
        raise InvalidArgumentError("a sparse matrix must be 2-d: [frames, ny*nx*nf]")
    out = {k: v for k, v in arrays.items() if k != sparse[0]}
    for k in ("indptr", "indices", "data", "shape", "frame_shape"):
        if k in out:
            raise InvalidArgumentError(f"{k!r} collides with the CSR arrays of sparse {sparse[0]!r}")
    out["indptr"] = np.asarray(csr.indptr, np.int64)
    out["indices"] = np.asarray(csr.indices, np.uint32)
    out["data"] = np.asarray(csr.data, np.float32)
    out["shape"] = np.asarray(csr.shape, np.int64)
    if shape is not None:
        ny, nx, nf = (int(d) for d in shape)
        if ny * nx * nf != csr.shape[1]:
            raise InvalidArgumentError(f"shape={tuple(shape)} holds {ny * nx * nf} neurons, the matrix has {csr.shape[1]} columns")
        # The geometry as every sparse layout carries it (npz, safetensors, ONNX: a
        # conversion to PVP reads it back), not as PVP settings other writers refuse.
        out["frame_shape"] = np.asarray([ny, nx, nf], np.int64)
    return out


def _report(path: str, offered: int, written: List[str], warnings: List[str]) -> List[str]:
    """Emits a write's warnings as :class:`TensorfmtWarning` (pointing at the caller's
    line) and returns the names written."""
    from ._errors import warn

    if len(written) < offered:
        noun = "tensor" if offered == 1 else "tensors"
        warn(f"{path}: wrote {len(written)} of {offered} {noun} (the file holds: {', '.join(written) or 'none'})")
    for w in warnings:
        warn(f"{path}: {w}")
    return list(written)


def _convert_open(
    doc: Document,
    path: PathLike,
    *,
    to: Optional[str] = None,
    tensors: Optional[Sequence[str]] = None,
    dtype: Any = None,
    settings: Optional[Mapping[str, Any]] = None,
    overwrite: bool = True,
    hex: bool = False,
    fsync: bool = True,
    dense: bool = False,
    like: Optional[PathLike] = None,
    progress: Optional[Progress] = None,
) -> List[str]:
    _flags(hex=hex, fsync=fsync, dense=dense)
    p = os.fsdecode(path)
    target = _target_format(to, p)
    if doc._step != 1:
        # The writers take runs of frames; a stepped selection would be written whole.
        raise InvalidArgumentError("frames= with a step cannot be converted as it stands: load the frames and save them")
    if doc._sparse and target in ("npz", "safetensors"):
        raise InvalidArgumentError(
            f"a document opened with sparse=True holds bare CSR arrays, not {target}'s sparse layout; "
            f"convert the file itself (tensorfmt.convert) for {target}'s sparse layout"
        )
    _refuse_existing(p, overwrite, settings)
    if isinstance(tensors, str):
        tensors = [tensors]
    names = None if tensors is None else [str(t) for t in tensors]
    if names is not None:
        for n in names:
            doc.info(n)
    extra = _settings(settings)
    original = None if like is None else os.fsdecode(like)
    hook = _progress_callback(progress)
    return _report(p, *doc._file.convert(p, names, to, _stored_dtype(dtype), hex, extra, fsync, hook, original, dense))


def convert(
    src: PathLike,
    dst: PathLike,
    *,
    to: Optional[str] = None,
    tensors: Optional[Sequence[str]] = None,
    dtype: Any = None,
    settings: Optional[Mapping[str, Any]] = None,
    overwrite: bool = True,
    hex: bool = False,
    fsync: bool = True,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    frames: Frames = None,
    sparse: bool = False,
    max_alloc: Optional[int] = None,
    dense: bool = False,
    like: Optional[PathLike] = None,
    progress: Optional[Progress] = None,
) -> List[str]:
    """Converts ``src`` to ``dst`` without going through Python objects (streamed for
    npy, npz and safetensors outputs); returns the names of the tensors the written file
    holds (a :class:`TensorfmtWarning` says when that is fewer than given, or when the
    original program will not read the file).

    Write keywords as in :func:`save` (``tensors`` picks some; an existing ``dst`` is
    replaced unless ``overwrite=False``), read keywords as in :func:`open`. A sparse PVP
    file stays sparse in npz (scipy's ``save_npz`` layout: ``scipy.sparse.load_npz``
    reads it) and safetensors (the CSR triple); ``dense=True`` writes dense frames
    instead, refused beyond 1 GiB.

    ``progress`` follows the conversion: a callable ``progress(done, total)`` or a
    tqdm-like bar (``update(n)``; its ``total`` is set when None). ``done`` and
    ``total`` count the bytes of the tensors converted, as listed (dtype size ×
    elements, :attr:`TensorInfo.nbytes` of the stored dtype): it is called at the
    start, after every piece read (a frame, or at most 16 MiB of a large tensor) that
    brought ``done`` 4 MiB further, and at the end with ``done == total``, whether the
    file is converted, kept or rebuilt from carried metadata. It runs on a worker
    thread, with the GIL taken for the call only. An exception it raises stops the
    conversion at that piece: the temporary file is removed, ``dst`` is not written
    (an existing one is left as it was) and the exception propagates.

    >>> import tensorfmt
    >>> tensorfmt.convert("testdata/pvp/dense_f32.pvp", "act.safetensors")
    ['time', 'values']
    >>> seen = []
    >>> tensorfmt.convert("testdata/pvp/dense_f32.pvp", "act.npz", progress=lambda done, total: seen.append((done, total)))
    ['values', 'time']
    >>> seen                                # bytes: 144 of values, 24 of times
    [(0, 168), (168, 168)]
    >>> tensorfmt.load("act.safetensors")["values"].shape
    (3, 2, 3, 2)
    """
    # npz and safetensors keep sparse frames sparse anyway, in their own layout (scipy's
    # save_npz members, the CSR triple marked format=csr); the bare CSR arrays
    # (sparse=True) are for the other outputs.
    if _flag("sparse", sparse) and _target_format(to, os.fsdecode(dst)) in ("npz", "safetensors"):
        sparse = False
    with open(
        src, format=format, kind=kind, strict=strict, frames=frames, sparse=sparse, max_alloc=max_alloc
    ) as doc:
        return _convert_open(
            doc,
            dst,
            to=to,
            tensors=tensors,
            dtype=dtype,
            settings=settings,
            overwrite=overwrite,
            hex=hex,
            fsync=fsync,
            dense=dense,
            like=like,
            progress=progress,
        )


@dataclass(frozen=True)
class TensorDiff:
    """How one tensor differs between two files."""

    name: str
    name_b: str
    dtype_a: str
    dtype_b: str
    shape_a: Tuple[int, ...]
    shape_b: Tuple[int, ...]
    values_compared: bool
    count: int
    mismatched: int
    max_abs_error: float
    max_rel_error: float
    equal: bool
    first_diffs: List[Tuple[Tuple[int, ...], float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class DiffResult:
    """The result of :func:`diff`: per-tensor differences and names present on one side only.

    ``bool(result)`` is true when the files hold equal tensors.
    """

    tensors: List[TensorDiff]
    only_in_a: List[str]
    only_in_b: List[str]
    header: List[Tuple[str, str, str]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        """Same tensor names, every tensor equal within the tolerance, and (for two files
        of the same legacy format) the same kind and header fields."""
        return (
            not self.only_in_a
            and not self.only_in_b
            and not self.header
            and all(t.equal for t in self.tensors)
        )

    def __bool__(self) -> bool:
        return self.equal

    def __getitem__(self, name: str) -> TensorDiff:
        """One tensor's comparison, by name (an index built on first use)."""
        index = self.__dict__.get("_by_name")
        if index is None or len(index) > len(self.tensors):
            index = {}
            for t in self.tensors:
                index.setdefault(t.name, t)
            object.__setattr__(self, "_by_name", index)  # frozen: a cache, not state
        try:
            return index[name]
        except KeyError:
            err = TensorNotFoundError(f"no compared tensor named {name!r}")
            err.name = name
            raise err from None

    @property
    def max_abs_error(self) -> float:
        """The largest absolute error over every compared tensor."""
        return max((t.max_abs_error for t in self.tensors), default=0.0)

    def __repr__(self) -> str:
        # A summary a REPL user can read; the per-tensor details are in `.tensors`.
        from ._text import name

        differ = [name(t.name) for t in self.tensors if not t.equal]
        parts = [f"{'equal' if self.equal else 'different'}: {len(self.tensors)} tensor(s) compared"]
        if differ:
            shown = ", ".join(differ[:5]) + (", ..." if len(differ) > 5 else "")
            parts.append(f"{len(differ)} differ ({shown})")
        if self.only_in_a:
            parts.append(f"only in a: {self.only_in_a}")
        if self.only_in_b:
            parts.append(f"only in b: {self.only_in_b}")
        if self.header:
            parts.append(f"header: {[h[0] for h in self.header]}")
        parts.append(f"max_abs_error={self.max_abs_error:g}")
        return f"<DiffResult {'; '.join(parts)}>"


def _tolerance(name: str, value: Any) -> float:
    """A tolerance keyword: a real number (the native diff checks it is finite and
    not negative), not a bool or a string."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TensorfmtTypeError(f"{name}= takes a number, not {value!r} ({type(value).__name__})")
    return float(value)


def diff(
    a: PathLike,
    b: PathLike,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    max_diffs: int = 10,
    allow_dtype: bool = False,
    tensors_only: bool = False,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    max_alloc: Optional[int] = None,
) -> DiffResult:
    """Compares two files tensor by tensor (streamed; any two formats).

    Values are equal when ``|a - b| <= atol + rtol * |b|`` (numpy's ``isclose``; the
    default is exact), with NaN equal to NaN (any payload, as ``equal_nan=True``) and an
    infinity equal only to the same infinity. ``allow_dtype`` compares values of tensors whose dtypes differ.
    Two files of the same legacy format must also agree in kind and header fields (a
    primitiv batch of 3 ``[2]`` vectors is not a ``[2, 3]`` matrix) unless
    ``tensors_only``; ``result.header`` lists ``(field, a, b)`` differences.
    ``format``, ``kind``, ``strict`` and ``max_alloc`` open both files as :func:`open`
    does (the CLI's ``--kind``, ``--strict``, ``--max-alloc``); an error opening one
    names that file.

    >>> import tensorfmt
    >>> tensorfmt.convert("testdata/caffe/v2_tiny.caffemodel", "tiny.npz")
    ['conv1/0', 'conv1/1', 'ip/0']
    >>> tensorfmt.diff("testdata/caffe/v2_tiny.caffemodel", "tiny.npz").equal
    True
    """
    _flags(allow_dtype=allow_dtype, tensors_only=tensors_only, strict=strict)
    read = dict(format=format, kind=kind, strict=strict, max_alloc=max_alloc)
    with open(a, **read) as doc_a, open(b, **read) as doc_b:  # type: ignore[arg-type]
        raw = _native.diff(
            doc_a._file, doc_b._file, _tolerance("rtol", rtol), _tolerance("atol", atol),
            _args.whole("max_diffs", max_diffs, 0), bool(allow_dtype), bool(tensors_only)
        )
    tensors = [
        TensorDiff(
            name=t["name"],
            name_b=t["name_b"],
            dtype_a=t["dtype_a"],
            dtype_b=t["dtype_b"],
            shape_a=tuple(t["shape_a"]),
            shape_b=tuple(t["shape_b"]),
            values_compared=t["values_compared"],
            count=t["count"],
            mismatched=t["mismatched"],
            max_abs_error=t["max_abs_error"],
            max_rel_error=t["max_rel_error"],
            equal=t["equal"],
            first_diffs=[(tuple(i), va, vb) for i, va, vb in t["first_diffs"]],
        )
        for t in raw["tensors"]
    ]
    return DiffResult(tensors, list(raw["only_in_a"]), list(raw["only_in_b"]), [tuple(h) for h in raw["header"]])


@dataclass(frozen=True)
class ValidationReport:
    """The result of :func:`validate`. ``bool(report)`` is ``report.ok``.

    ``ok``: the original program would load the file (or, with ``lenient=True``,
    tensorfmt reads it); ``readable``: tensorfmt reads it, even when ``ok`` is false
    because the original would not (:func:`convert` then still recovers the data);
    ``error`` the :class:`TensorfmtError` that made it fail (``None`` when ``ok``);
    ``warnings`` what the lenient reader accepted.
    """

    path: str
    ok: bool
    format: Optional[str]
    kind: Optional[str]
    warnings: List[str]
    error: Optional[BaseException]
    readable: bool = True

    def __bool__(self) -> bool:
        return self.ok


def validate(
    path: PathLike,
    *,
    lenient: bool = False,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    max_alloc: Optional[int] = None,
) -> ValidationReport:
    """Checks a whole file (every frame, CRCs, sizes) and reports instead of raising.

    The question is "will the original program (OpenPV, PINK 2.5, primitiv, Caffe) load
    this file?": a file that only tensorfmt's lenient reader accepts (a crash-truncated
    PVP file, generic MessagePack in primitiv, a Caffe net with both ``layer`` and
    ``layers``) is not ``ok`` but ``readable``. ``lenient=True`` asks only whether
    tensorfmt reads it; ``strict=True`` reads it strictly only (not ``readable`` when
    the original refuses it). ``format``, ``kind`` (a legacy PINK file that fits several
    readings: ``som``, ``som-data``, ``mapping``, ``rotflip``) and ``max_alloc`` open it
    as :func:`open` does (the CLI's ``--kind``, ``--strict``, ``--max-alloc``).

    >>> import tensorfmt
    >>> tensorfmt.validate("testdata/pvp/dense_f32.pvp").ok
    True
    """
    from ._errors import TensorfmtError

    _flags(lenient=lenient, strict=strict)
    p = os.fsdecode(path)

    def check(strict_read: bool) -> ValidationReport:
        try:
            doc = open(p, strict=strict_read, format=format, kind=kind, max_alloc=max_alloc)
        except TensorfmtError as e:
            return ValidationReport(p, False, None, None, [], e, False)
        with doc:
            return doc.validate()

    if lenient and not strict:
        return check(False)
    report = check(True)
    if report.ok or strict:
        return report
    loose = check(False)
    if not loose.ok:
        return loose
    return ValidationReport(p, False, loose.format, loose.kind, loose.warnings, report.error, True)


def formats() -> List[Dict[str, Any]]:
    """What is read and written: name, extensions, writable file kinds and writer
    settings (``settings=`` keys as ``"KEY=VALUES"``, each with the kinds it is for, empty
    for all) of every format."""
    return [
        {
            "name": n,
            "extensions": list(ext),
            "write_kinds": list(kinds),
            "enabled": enabled,
            "settings": [{"setting": s, "kinds": list(k)} for s, k in settings],
        }
        for n, ext, kinds, enabled, settings in _native.formats()
    ]


def detect(path: PathLike) -> str:
    """The format of a file (from its content first, its extension second)."""
    return _native.detect(os.fsdecode(path))
