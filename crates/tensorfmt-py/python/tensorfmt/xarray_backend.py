"""The xarray backend engine ``tensorfmt`` (``pip install tensorfmt[xarray]``): every
format tensorfmt reads opens lazily as an :class:`xarray.Dataset` with named dimensions,
and a directory of files (an OpenPV output or checkpoint directory, a PINK job) as an
:class:`xarray.DataTree`::

    >>> import xarray as xr
    >>> ds = xr.open_dataset("testdata/pvp/dense_f32.pvp", engine="tensorfmt")
    >>> ds["values"].dims, ds["values"].shape, ds["time"].values.tolist()
    (('frame', 'y', 'x', 'f'), (3, 2, 3, 2), [0.5, 1.5, 2.5])
    >>> float(ds["values"].isel(frame=-1).sum())            # reads the last frame only
    76.5
    >>> xr.open_dataset("testdata/pvp/dense_f32.pvp", engine="tensorfmt", chunks={"frame": 2})["values"].chunks[0]
    (2, 1)

Variables carry the names :func:`tensorfmt.load` gives, with equal values; header fields
are attributes. Opening reads the header only; indexing reads the frames (PVP) or
entries (PINK) it touches, each read through tensorfmt's readers (no GIL while
decoding); ``chunks=`` gives dask arrays over the same reads (``chunks={}`` the engine's
preferred chunks: a power of two of whole frames within :data:`PREFERRED_CHUNK_BYTES`,
one chunk for a smaller tensor; see :func:`preferred_frames`). A sparse PVP file opens
lazily as pydata ``sparse`` arrays built from the stored entries of the frames indexed
(``pip install 'tensorfmt[sparse]'``; ``dense=True`` reads dense frames instead), never
densified behind your back. One exception is xarray's: ``chunks=`` (and ``.chunk()``,
and ``open_mfdataset``, which always chunks) makes a numpy block of every lazily loaded
backend array, whatever the engine returns (xarray's ``to_numpy`` densifies a sparse
block); the engine bounds those blocks as a dense movie's preferred chunks (by the
frames' dense size), never one block of the whole file. For dask arrays of COO blocks,
open without ``chunks=`` and call :func:`chunk_sparse`.

Options of ``open_dataset``: ``format`` and ``kind`` as :func:`tensorfmt.open` takes them,
``strict``, ``dense`` (sparse PVP), and ``safe_names``: names without ``/`` (Caffe's
``conv1/0`` becomes ``conv1.0``, the original in the variable's ``tensorfmt_name``
attribute, as the VirtualiZarr parser names them), for ``to_zarr``, which would write
``conv1/0`` as array ``0`` of a group ``conv1`` that ``open_zarr`` does not show, and
``to_netcdf``, which refuses ``/`` and takes flat attributes only: with ``safe_names``
the header's attributes are netCDF's too (nested fields such as a Caffe net's ``layer``
list as one JSON string, bools as ``int8``, flat number lists as 1-D arrays, integers
past int32 as their decimal text, ``None`` left out). xarray's CF decoder keywords
(``mask_and_scale``, ``decode_times``, ``decode_coords``, ``decode_timedelta``,
``use_cftime``, ``concat_characters``; ``decode_cf``) are accepted and change nothing:
the variables carry no CF encoding (no ``units``, ``_FillValue``, ``scale_factor`` or
char arrays; PVP's ``time`` is the simulation time, a float without units)::

    >>> ds = xr.open_dataset("testdata/caffe/v2_tiny.caffemodel", engine="tensorfmt", safe_names=True)
    >>> list(ds), ds["conv1.0"].attrs["tensorfmt_name"]
    (['conv1.0', 'conv1.1', 'ip.0'], 'conv1/0')
    >>> ds.to_netcdf("tiny.nc", engine="scipy")

A tree (``xr.open_datatree``) uses ``safe_names=True`` by default: a DataTree holds no
variable whose name has a ``/``. Each file is a node named by its stem (``V1.pvp`` is
``V1``), or by its whole name where the stem is taken (``a.pvp`` beside ``a.npy``,
``run.pvp`` beside a folder ``run/``). A file that does not open is left out with a
:class:`tensorfmt.TensorfmtWarning` and listed in the root's ``tensorfmt_not_read``
(``strict=True`` refuses the tree): one a format claims by content, and one named with
a tensorfmt extension that no format claims (a damaged header, an empty ``.pvp``;
``.bin`` and ``.data``, which other programs use too, only when their first bytes begin
as a PINK / primitiv header does).
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

import tensorfmt

from . import _native
from ._dims import FRAME_AXES, dims_for, header_attrs, netcdf_attrs, renamed_dims, zarr_names

try:  # pragma: no cover - import guard
    import xarray as xr
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.core import indexing
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("the tensorfmt xarray engine needs xarray: pip install 'tensorfmt[xarray]'") from e

try:  # xarray >= 2025.01: decode_times= / decode_timedelta= also take coder objects
    from xarray.coders import CFDatetimeCoder, CFTimedeltaCoder

    _CODERS: Tuple[type, ...] = (CFDatetimeCoder, CFTimedeltaCoder)
except ImportError:  # pragma: no cover - older xarray
    _CODERS = ()

#: Magic numbers of formats other engines own: never claimed by content.
_FOREIGN = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05", b"GRIB")


def detect_content(path: str) -> Optional[str]:
    """The tensorfmt format of a file judged from its content alone (``None`` when no
    format claims its first bytes)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:  # noqa: PTH123 - a plain read of 4 KiB
            head = f.read(4096)
    except OSError:
        return None
    if head.startswith(_FOREIGN):
        return None
    fmt = _native.detect_content(head, size)
    if fmt == "npz" and not _npy_members_only(path):
        return None
    return fmt


def _npy_members_only(path: str) -> bool:
    """Whether a zip archive is numpy's: at least one member, every member a ``.npy``
    file (a ``.docx``, a zip of notes are not npz). Reads the central directory only.
    A directory Python's zipfile cannot read is left to tensorfmt's npz reader, whose
    error names the file."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = [i.filename for i in z.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return True
    return bool(names) and all(n.endswith(".npy") for n in names)


#: ``chunks={}`` (also ``open_mfdataset``'s default) cuts a tensor larger than this into
#: chunks of whole frames (entries) of at most this many bytes; ``chunks="auto"`` into
#: multiples of them up to dask's ``array.chunk-size``.
PREFERRED_CHUNK_BYTES = 32 << 20


def preferred_frames(shape: Tuple[int, ...], dtype: Any) -> Optional[int]:
    """The frames (entries) per chunk the engine declares as ``preferred_chunks`` for a
    tensor of ``shape`` whose axis 0 is frames: ``None`` (one chunk) when the whole
    tensor fits in :data:`PREFERRED_CHUNK_BYTES`, else the largest power of two of
    frames that fits (at least one).

    Any run of frames is one strided view of the file, so no chunking is cheaper to read
    than another; what costs is a chunk's fixed overhead (a task, a mapping, and in a
    reduction over frames a frame-sized partial result per chunk), which one-frame
    chunks would pay per frame (a 1 GiB movie of 1 MiB frames: 1024 tasks, 16 x slower
    than 32 MiB chunks). A power of two, so that explicit chunks of 2^n frames of at
    least that many agree with it (xarray warns about explicit chunks that split a
    preferred one; here such a split costs nothing more than the smaller chunks).

    >>> preferred_frames((1024, 512, 512, 1), "float32"), preferred_frames((3, 2, 3, 2), "float32")
    (32, None)
    """
    if not shape:
        return None
    frame_bytes = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize
    if shape[0] * frame_bytes <= PREFERRED_CHUNK_BYTES:
        return None
    fit = max(1, PREFERRED_CHUNK_BYTES // max(1, frame_bytes))
    return 1 << (fit.bit_length() - 1)


class _File:
    """One opened file: what every lazy array of it shares. Reads open the file again
    for the frames they need (so a read holds no mapping afterwards: the resident set
    stays at the pieces read, and threads never share a reader)."""

    def __init__(self, path: str, fmt: Optional[str], kind: Optional[str], strict: bool) -> None:
        self.path = path
        self.format = fmt
        self.kind = kind
        self.strict = strict
        #: A dense PVP movie: frames are read as strided views of the mapping.
        self.dense_pvp = False
        self._whole: Dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        # Sent to dask workers (processes, a distributed cluster) as what opens the file
        # again there: the path and options, not the lock or the arrays read here.
        state = dict(self.__dict__)
        del state["_lock"]
        state["_whole"] = {}
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Forgets the whole tensors read (what ``Dataset.close`` calls)."""
        self._whole.clear()

    def open(self, **kw: Any) -> "tensorfmt.Document":
        return tensorfmt.open(self.path, format=self.format, kind=self.kind, strict=self.strict, **kw)

    def frames(self, name: str, start: int, stop: int) -> np.ndarray:
        """Frames (entries) ``start..stop`` of tensor ``name``: a read-only view of a
        fresh mapping where the layout allows (dense PVP frames, PINK payloads), which
        is unmapped when the last view of it goes (a dask task's chunk, once reduced),
        so the resident set follows the chunks in flight, not the file."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tensorfmt.TensorfmtWarning)  # said once, at open
            if self.format == "pvp" and name == "values" and self.dense_pvp:
                return tensorfmt.pvp._open(self.path, strict=self.strict, warn=False).movie(start, stop)
            with self.open(frames=(start, stop)) as doc:
                return doc[name]

    def whole(self, name: str) -> np.ndarray:
        with self._lock:
            a = self._whole.get(name)
            if a is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", tensorfmt.TensorfmtWarning)
                    with self.open() as doc:
                        a = doc[name]  # a view of the mapping where the layout allows
                self._whole[name] = a
            return a


class TensorfmtArray(BackendArray):
    """A lazy tensor of a file: indexing reads only the frames (entries) it touches."""

    def __init__(self, file: _File, name: str, shape: Tuple[int, ...], dtype: np.dtype, by_frame: bool) -> None:
        self.file = file
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.by_frame = by_frame

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._getitem)

    def _getitem(self, key: Tuple[Any, ...]) -> np.ndarray:
        if not self.by_frame or not self.shape:
            return np.asarray(self.file.whole(self.name)[key])

        def read(start: int, stop: int) -> np.ndarray:
            if start == stop:
                return np.empty((0,) + self.shape[1:], self.dtype)
            return self.file.frames(self.name, start, stop)

        return np.asarray(_index_frames(key, self.shape[0], read))


def _index_frames(key: Tuple[Any, ...], n: int, read: Any) -> Any:
    """Basic indexing (ints and slices) of an axis of ``n`` frames through ``read(start,
    stop)``, which reads one contiguous run of frames: a slice reads the run from its
    first to its last frame (of any step, either direction) and steps through it; an
    integer reads its frame. The reads take slice rules, which clamp, so an integer out
    of range is numpy's IndexError here."""
    first, rest = key[0], tuple(key[1:])
    if isinstance(first, slice):
        start, _, step = first.indices(n)
        count = len(range(*first.indices(n)))
        if count == 0:
            return read(0, 0)[(slice(None),) + rest]
        last = start + (count - 1) * step
        lo, hi = min(start, last), max(start, last) + 1
        return read(lo, hi)[(slice(start - lo, None, step),) + rest]
    k = int(first)
    if not -n <= k < n:
        raise IndexError(f"index {k} is out of bounds for axis 0 with size {n}")
    k %= n
    return read(k, k + 1)[(0,) + rest]


def _sparse_module() -> Any:
    try:
        import sparse
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("sparse PVP files open as pydata sparse arrays: pip install 'tensorfmt[sparse]' (or open with dense=True)") from e
    return sparse


def _sparse_frames(path: str, strict: bool, start: int, stop: int) -> Any:
    """Frames ``start..stop`` of a sparse PVP file as a pydata ``sparse.COO`` ``[frame,
    y, x, f]`` built from their stored entries (a repeated neuron keeps its last value,
    as the reader's dense frames do)."""
    sparse = _sparse_module()
    f = tensorfmt.pvp.open(path, strict=strict, kind="sparse")
    ny, nx, nf = f.shape
    indptr, indices, data, width = f.csr(start, stop)
    frames = len(indptr) - 1
    rows = np.repeat(np.arange(frames, dtype=np.int64), np.diff(indptr))
    keys = rows * np.int64(width) + indices.astype(np.int64)
    # The last of a repeated (frame, neuron) wins: unique over the reversed order.
    uniq, first = np.unique(keys[::-1], return_index=True)
    values = np.asarray(data)[::-1][first]
    frame, k = np.divmod(uniq, np.int64(width))
    y, rem = np.divmod(k, np.int64(nx * nf))
    x, fe = np.divmod(rem, np.int64(nf))
    coords = np.stack([frame, y, x, fe])
    return sparse.COO(coords, values, shape=(frames, ny, nx, nf), sorted=True, has_duplicates=False)


class SparseFramesArray(BackendArray):
    """A sparse PVP file's activity, lazily: indexing builds a ``sparse.COO`` of the
    frames it touches only (opening reads the header and the frame index; ``chunks=``
    gives dask arrays of COO blocks). Never densified: ``.values`` raises as pydata
    sparse does; ``.data.todense()`` (or ``dense=True`` at open) is the user's choice."""

    def __init__(self, path: str, strict: bool, shape: Tuple[int, ...], dtype: np.dtype) -> None:
        self.path = path
        self.strict = strict
        self.shape = shape
        self.dtype = dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._getitem)

    def _getitem(self, key: Tuple[Any, ...]) -> Any:
        return _index_frames(key, self.shape[0], lambda a, b: _sparse_frames(self.path, self.strict, a, b))


def _sparse_backed(var: "xr.Variable") -> bool:
    """Whether ``var`` is (still) the lazy sparse activity of a PVP file, read through
    :class:`SparseFramesArray` (without reading it: ``var.data`` would)."""
    x: Any = var._data
    while x is not None:
        if isinstance(x, SparseFramesArray):
            return True
        x = getattr(x, "array", None)
    return False


class _SparseBlocks:
    """What ``dask.array.from_array`` reads COO blocks from: basic indexing of a lazy
    sparse variable, which reads the frames of the block only (a plain class, not an
    array: dask keeps what ``__getitem__`` returns, a ``sparse.COO``)."""

    def __init__(self, var: "xr.Variable") -> None:
        self.var = var
        self.shape = var.shape
        self.dtype = var.dtype
        self.ndim = var.ndim

    def __getitem__(self, key: Tuple[Any, ...]) -> Any:
        return self.var[key].data


def chunk_sparse(obj: Any, frames: Optional[int] = None) -> Any:
    """``obj`` (a Dataset or DataArray the engine opened, without ``chunks=``) with its
    sparse PVP activity as dask arrays of pydata ``sparse.COO`` blocks of ``frames``
    frames each (default: the engine's preferred chunks, :func:`preferred_frames` of
    the frames' dense size; one block for a small file). Each block reads the stored
    entries of its frames only; nothing is densified. The other variables are left as
    they are (``.chunk()`` them as usual).

    xarray's own ``chunks=`` (and ``.chunk()``, and ``open_mfdataset``, which always
    chunks) cannot do this: it makes a numpy block of every lazily loaded backend
    array, so a sparse file's blocks come out dense (bounded, one preferred chunk
    each). Combine files with ``xr.concat`` / ``xr.combine_nested`` after
    ``chunk_sparse``; dask concatenates COO blocks as COO. Reduce with
    ``skipna=False`` (a PVP activity holds no NaN): xarray's default NaN-skipping path
    over dask COO blocks (``where(isnan(a), 0, a)``) peaked at the dense size (570 MiB
    for a 64-frame 256x256x16 file, against none with ``skipna=False``).

    >>> import xarray as xr
    >>> ds = chunk_sparse(xr.open_dataset("testdata/pvp/sparse_values_dt4.pvp", engine="tensorfmt"), frames=2)
    >>> v = ds["values"].data
    >>> v.chunks[0], type(v._meta).__name__, type(v.blocks[0].compute()).__name__
    ((2, 1), 'COO', 'COO')
    """
    import dask.array as da

    sparse = _sparse_module()
    if frames is not None:
        from ._args import positive

        frames = positive("frames", frames)

    def convert(var: "xr.Variable") -> "xr.Variable":
        n = frames or preferred_frames(var.shape, var.dtype) or max(1, var.shape[0])
        meta = sparse.COO.from_numpy(np.empty((0,) * var.ndim, var.dtype))
        data = da.from_array(_SparseBlocks(var), chunks=(n,) + tuple(var.shape[1:]), asarray=False, fancy=False, meta=meta, name=False)
        return var.copy(deep=False, data=data)

    if isinstance(obj, xr.DataArray):
        return obj.copy(deep=False, data=convert(obj.variable).data) if _sparse_backed(obj.variable) else obj
    if not isinstance(obj, xr.Dataset):
        raise tensorfmt.InvalidArgumentError(f"chunk_sparse takes an xarray Dataset or DataArray, not {type(obj).__name__}")
    out = obj.copy(deep=False)
    for name, var in obj.variables.items():
        if var.ndim and _sparse_backed(var):
            out[name] = convert(var)
    return out


def open_tensorfmt_dataset(
    path: Any,
    *,
    drop_variables: Optional[Iterable[str]] = None,
    format: Optional[str] = None,  # noqa: A002 - the keyword tensorfmt.open takes
    kind: Optional[str] = None,
    strict: bool = False,
    dense: bool = False,
    safe_names: bool = False,
) -> "xr.Dataset":
    """The dataset of one file (see the module docs)."""
    if not isinstance(path, (str, os.PathLike)):
        raise tensorfmt.InvalidArgumentError(
            f"the tensorfmt engine opens files by path (str or os.PathLike), not {type(path).__name__}: "
            "its readers map the file"
        )
    from ._args import flags

    flags(strict=strict, dense=dense, safe_names=safe_names)
    p = os.fsdecode(path)
    drop = set(drop_variables or ())
    with tensorfmt.open(p, format=format, kind=kind, strict=strict) as doc:  # errors name p
        fmt, doc_kind = doc.format, doc.kind
        header = doc.header
        infos = doc.tensors
        description = doc.description
    names = [i.name for i in infos]
    # `/` in a name (Caffe's conv1/0) is a group to zarr and refused by netCDF.
    renamed = zarr_names(names) if safe_names else {n: n for n in names}
    drop |= {n for n in names if renamed[n] in drop}
    file = _File(p, fmt, kind, strict)
    file.dense_pvp = fmt == "pvp" and doc_kind == "dense"
    variables: Dict[str, Any] = {}
    coords: Dict[str, Any] = {}
    for info in infos:
        if info.name in drop:
            continue
        dims = dims_for(fmt, info.name, info.shape, header, names)
        # A tensor's own axes are named after it: renamed with it (no `/` left).
        dims = renamed_dims(dims, info.name, renamed[info.name])
        if fmt == "pvp" and doc_kind == "sparse" and info.name == "values" and not dense:
            _sparse_module()  # the extra's error at open, not at the first read
            lazy = SparseFramesArray(p, strict, tuple(info.shape), np.dtype(info.dtype))
            # Chunks bounded as a dense movie's (by the frames' dense size): xarray's
            # chunks={} (open_mfdataset's default) makes one numpy block of each chunk.
            frames = preferred_frames(info.shape, info.dtype)
            sparse_encoding = {"preferred_chunks": {dims[0]: frames}} if frames is not None else {}
            variables[info.name] = xr.Variable(dims, indexing.LazilyIndexedArray(lazy), encoding=sparse_encoding)
            continue
        by_frame = bool(dims) and dims[0] in FRAME_AXES and fmt in ("pvp", "som")
        array = TensorfmtArray(file, info.name, tuple(info.shape), info.dtype, by_frame)
        encoding: Dict[str, Any] = {"dtype": info.dtype}
        frames_per_chunk = preferred_frames(info.shape, info.dtype) if by_frame else None
        if frames_per_chunk is not None:
            encoding["preferred_chunks"] = {dims[0]: frames_per_chunk}
        attrs = {"tensorfmt_name": info.name} if renamed[info.name] != info.name else None
        var = xr.Variable(dims, indexing.LazilyIndexedArray(array), attrs=attrs, encoding=encoding)
        if fmt == "pvp" and info.name == "time":
            coords[info.name] = var
        else:
            variables[renamed[info.name]] = var
    if fmt == "som" and "hex_axial" in names and "hex_axial" not in drop:
        axial = np.asarray(file.whole("hex_axial"))
        coords["q"] = xr.Variable(("neuron",), axial[:, 0])
        coords["r"] = xr.Variable(("neuron",), axial[:, 1])
    attrs = header_attrs(header)
    attrs.update(tensorfmt_format=fmt, tensorfmt_kind=doc_kind, tensorfmt_description=description)
    if safe_names:
        attrs = netcdf_attrs(attrs)  # to_netcdf refuses bools, dicts and nested lists
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    ds.set_close(file.close)  # a bound method pickles; a lambda does not
    return ds


#: Extensions other programs use too (OpenPV checkpoints write ``timeinfo.bin``, an ONNX
#: model's external data is often ``x.data``): a file named so whose content no format
#: claims is taken for a damaged tensor file only when its first bytes begin as the
#: format's header does (PINK v2: version 2 and a file type 0..3, or a ``#`` comment
#: block; primitiv: its magic).
_SHARED_EXTENSIONS = {
    "bin": lambda head: head[:1] == b"#" or (len(head) >= 8 and head[:4] == b"\2\0\0\0" and head[4] < 4 and head[5:8] == b"\0\0\0"),
    "data": lambda head: head[:10] == bytes([0xCE, 0, 0, 0, 0, 0xCE, 0, 0, 0, 1]),
}


def _our_extension(path: str) -> bool:
    """Whether a file no format claims by content is named as one of ours (and so is a
    damaged tensor file, to be reported rather than passed over)."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1][1:].lower()
    if name.startswith(".") or not ext:
        return False  # hidden files and our own temporaries
    if ext == "data" and name[: -len(".data")].lower().endswith(".onnx") and os.path.isfile(path[: -len(".data")]):
        return False  # m.onnx.data beside m.onnx: that model's external data
    if ext in _SHARED_EXTENSIONS:
        try:
            with open(path, "rb") as f:  # noqa: PTH123 - a plain read of 16 bytes
                head = f.read(16)
        except OSError:
            return True  # unreadable: reported with tensorfmt's reason
        return bool(_SHARED_EXTENSIONS[ext](head))
    return ext in _format_extensions()


@functools.lru_cache(maxsize=None)
def _format_extensions() -> frozenset:
    return frozenset(e for f in tensorfmt.formats() if f["enabled"] for e in f["extensions"])


def _tree_files(root: str) -> List[Tuple[str, str]]:
    """``(node path, file)`` of every tensor file under ``root``, in order: each file
    a format claims by content, and each file named with one of our extensions that
    none claims (a damaged file: opening it fails and it is reported, not passed over)."""
    out: List[Tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        parts = [] if rel == "." else rel.split(os.sep)
        stems: Dict[str, int] = {}
        found = [(f, os.path.join(dirpath, f)) for f in sorted(filenames)]
        found = [(f, full) for f, full in found if os.path.isfile(full) and (detect_content(full) or _our_extension(full))]
        for f, _ in found:
            stem = os.path.splitext(f)[0]
            stems[stem] = stems.get(stem, 0) + 1
        # A node is named by its file's stem unless that name is taken: by another
        # file's stem (a.pvp, a.npy), by a sibling folder (run.pvp beside run/, whose
        # files would become the file's children) or by another file's whole name
        # (a.pvp.npy beside a.pvp and a.npy): then by its whole name, which no sibling
        # file or folder shares.
        taken = set(dirnames) | {f for f, _ in found}
        for f, full in found:
            stem = os.path.splitext(f)[0]
            node = stem if stems[stem] == 1 and stem and stem not in taken else f
            node = node.replace("/", "_") or "_"
            out.append(("/" + "/".join(parts + [node]), full))
    return out


#: xarray's CF decoder keywords, which it passes to the engine whenever they are given
#: (``decode_cf=False`` sets each to False).
DECODERS = ("mask_and_scale", "decode_times", "concat_characters", "decode_coords", "use_cftime", "decode_timedelta")


def _check_decoders(**decoders: Any) -> None:
    """Checks xarray's CF decoder keywords, which change nothing here: tensorfmt's
    variables carry no CF encoding (no ``units``/``calendar``, ``_FillValue``,
    ``scale_factor`` or char arrays; PVP's ``time`` is the simulation time, without
    units), so decoding them gives them unchanged, as it gives a netCDF file's
    variables without those attributes."""
    from ._args import flag

    for name, value in decoders.items():
        if value is None:
            continue
        if name == "decode_coords":
            if not (isinstance(value, (bool, np.bool_)) or value in ("coordinates", "all")):
                raise tensorfmt.InvalidArgumentError(f"decode_coords= takes True, False, 'coordinates' or 'all', not {value!r}")
        elif name in ("decode_times", "decode_timedelta"):
            # bool, or xarray's coder objects (CFDatetimeCoder / CFTimedeltaCoder), or
            # a mapping of variable names to those.
            if not isinstance(value, (bool, np.bool_, *_CODERS, Mapping)):
                raise tensorfmt.TensorfmtTypeError(f"{name}= takes True, False or an xarray coder, not {value!r} ({type(value).__name__})")
        else:
            flag(name, value)


class TensorfmtBackendEntrypoint(BackendEntrypoint):
    """``engine="tensorfmt"``: PVP, PINK, primitiv, Caffe, ONNX, npy, npz and safetensors
    files as datasets; directories of them as trees."""

    description = "Legacy ML tensor files (PetaVision PVP, PINK, primitiv, Caffe, ONNX) and npy/npz/safetensors via tensorfmt"
    url = "https://example.invalid/tensorfmt"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "format", "kind", "strict", "dense", "safe_names", *DECODERS)
    supports_groups = True

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        try:
            p = os.fsdecode(filename_or_obj)
        except TypeError:
            return False
        if not isinstance(p, str):
            return False
        if os.path.isdir(p):
            # xarray asks every engine about a directory (a zarr store is one) and the
            # same question serves open_dataset, which opens files only: a directory
            # opens as a tree with engine="tensorfmt" given, never by guessing.
            return False
        return detect_content(p) is not None

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: Optional[Iterable[str]] = None,
        format: Optional[str] = None,  # noqa: A002
        kind: Optional[str] = None,
        strict: bool = False,
        dense: bool = False,
        safe_names: bool = False,
        mask_and_scale: Any = None,
        decode_times: Any = None,
        concat_characters: Any = None,
        decode_coords: Any = None,
        use_cftime: Any = None,
        decode_timedelta: Any = None,
    ) -> "xr.Dataset":
        _check_decoders(
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )
        return open_tensorfmt_dataset(
            filename_or_obj, drop_variables=drop_variables, format=format, kind=kind, strict=strict, dense=dense, safe_names=safe_names
        )

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: Optional[Iterable[str]] = None,
        strict: bool = False,
        dense: bool = False,
        safe_names: bool = True,
        **kwargs: Any,
    ) -> Dict[str, "xr.Dataset"]:
        """The nodes of a tree: ``safe_names`` is on by default, since a DataTree holds
        no variable whose name has a ``/`` (Caffe's ``conv1/0``); with
        ``safe_names=False`` such a file is refused, naming it."""
        _check_decoders(**{k: kwargs.pop(k) for k in DECODERS if k in kwargs})
        root = os.fsdecode(filename_or_obj)

        def node(path: str, **kw: Any) -> "xr.Dataset":
            ds = self.open_dataset(path, drop_variables=drop_variables, strict=strict, dense=dense, safe_names=safe_names, **kw)
            return checked(path, ds)

        def checked(path: str, ds: "xr.Dataset") -> "xr.Dataset":
            slashed = [str(n) for n in ds.variables if "/" in str(n)]
            if slashed:
                raise tensorfmt.InvalidArgumentError(
                    f"{path}: a DataTree cannot hold variables named with '/' ({', '.join(slashed[:3])}"
                    f"{', ...' if len(slashed) > 3 else ''}); open the tree with safe_names=True (the default), "
                    "which names them with '.' and keeps the original in their tensorfmt_name attribute"
                )
            return ds

        if not os.path.isdir(root):
            return {"/": node(root, **kwargs)}
        if kwargs:
            # format= / kind= name one file's format; a directory mixes them.
            raise TypeError(f"open_datatree of a directory takes no {', '.join(sorted(kwargs))} (they apply to one file)")
        groups: Dict[str, xr.Dataset] = {}
        # A file that looks like a tensor file but does not open (one crash-damaged file
        # in a run's output) leaves its node out, with a warning, and is listed in the
        # root's `tensorfmt_not_read` ({node: reason}); strict=True refuses the tree.
        not_read: Dict[str, str] = {}
        for name, path in _tree_files(root):
            try:
                ds = self.open_dataset(path, drop_variables=drop_variables, strict=strict, dense=dense, safe_names=safe_names)
            except tensorfmt.TensorfmtError as e:
                if strict:
                    raise
                not_read[name] = str(e)
                warnings.warn(f"{path}: left out of the tree (strict=True refuses the tree): {e}", tensorfmt.TensorfmtWarning, stacklevel=3)
                continue
            groups[name] = checked(path, ds)
        root_attrs: Dict[str, Any] = {"tensorfmt_directory": os.path.abspath(root)}
        if not_read:
            root_attrs["tensorfmt_not_read"] = not_read
        groups["/"] = xr.Dataset(attrs=root_attrs)
        # Intermediate directories without files of their own.
        for name in list(groups):
            parts = name.strip("/").split("/")
            for i in range(1, len(parts)):
                groups.setdefault("/" + "/".join(parts[:i]), xr.Dataset())
        return dict(sorted(groups.items(), key=lambda kv: (kv[0].count("/"), kv[0])))

    def open_datatree(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: Optional[Iterable[str]] = None,
        strict: bool = False,
        dense: bool = False,
        safe_names: bool = True,
        **kwargs: Any,
    ) -> "xr.DataTree":
        groups = self.open_groups_as_dict(filename_or_obj, drop_variables=drop_variables, strict=strict, dense=dense, safe_names=safe_names, **kwargs)
        return xr.DataTree.from_dict(groups)


__all__ = ["TensorfmtBackendEntrypoint", "TensorfmtArray", "open_tensorfmt_dataset", "chunk_sparse", "detect_content", "preferred_frames", "PREFERRED_CHUNK_BYTES"]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
