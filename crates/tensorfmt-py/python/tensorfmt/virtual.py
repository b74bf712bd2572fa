"""A VirtualiZarr parser for every format tensorfmt reads (``pip install
tensorfmt[virtual]``): :class:`Parser` turns a file's header into zarr chunk references
(path, offset, length), so zarr, xarray and dask read only the bytes they need, in
place (locally, over HTTP or S3), and a whole archive can be saved once as kerchunk
references or an Icechunk repository without copying a byte of it::

    >>> import os, xarray as xr
    >>> from obspec_utils.registry import ObjectStoreRegistry
    >>> from obstore.store import LocalStore
    >>> from virtualizarr import open_virtual_dataset
    >>> import tensorfmt.virtual
    >>> url = "file://" + os.path.abspath("testdata/pvp/dense_f32.pvp")
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})
    >>> vds = open_virtual_dataset(url, registry=registry, parser=tensorfmt.virtual.Parser())
    >>> vds["values"].dims, vds["values"].data.manifest.shape_chunk_grid     # one chunk per frame
    (('frame', 'y', 'x', 'f'), (3, 1, 1, 1))
    >>> tensorfmt.virtual.to_kerchunk(vds, "refs.json", format="json")   # vds.vz.to_kerchunk, unmasked
    >>> float(xr.open_dataset("refs.json", engine="kerchunk")["values"].sum())
    121.5

The references come from tensorfmt's own readers (their declared tensor layouts),
reading only headers and indexes through the registry's store: a dense PVP movie of any
length costs one 64 KiB read. Arrays keep the names and dimensions of the xarray engine
(``engine="tensorfmt"``), except that ``/`` in a name (Caffe's ``conv1/0``) becomes ``.``
(zarr names cannot hold ``/``; the original is the array's ``tensorfmt_name``
attribute). What is not a byte range of the file (sparse PVP frames, byte-compressed
weights, PINK's interleaved rotation/flip records, computed hexagonal coordinates,
deflated npz members) is left out and listed with the reason in the root group's ``not_virtual`` attribute (a
sparse PVP costs its first block too: its frames have no index to walk, and nothing in
them is a reference). An ONNX model's external data is referenced in its own file beside
the model (its location relative and without ``..``, its size checked and recorded in
``tensorfmt_source``). A
file whose references could be wrong (legacy MPI-split PVP frames, a size that is not
whole frames, weight frames that disagree) is refused with an error naming the field;
one the store cannot find is :class:`tensorfmt.TensorfmtFileNotFoundError`, one it
cannot reach :class:`tensorfmt.TensorfmtIOError`, each naming the URL. A zero-size
array (a PVP run stopped before its first frame) has an empty manifest, which
``vds.vz.to_icechunk`` and :func:`to_kerchunk` write as the empty array (a
concatenation of such files: :func:`to_icechunk`).

Fill values never mask data under xarray's default decoding: floating-point arrays use
NaN, which CF decoding ignores. Integer and boolean arrays need a fill value in zarr v3
metadata too, which zarr v3 readers (Icechunk, the ManifestStore) do not treat as
missing by default; zarr v2 readers (kerchunk references) do, and VirtualiZarr's
``vds.vz.to_kerchunk`` copies it into the v2 metadata. Write kerchunk references with
:func:`to_kerchunk` (``tensorfmt.virtual.to_kerchunk(vds, "refs.json")``, same formats and
options): it writes no fill value for integer and boolean arrays (zarr v2 allows
``null``), so nothing is masked, and gives 0-d tensors the chunk key zarr v2 reads
(VirtualiZarr 2.5 writes ``name/`` for ``name/0``, which reads back as the fill value).

Changed files: the root group records each file's size, modification time and ETag
(``tensorfmt_source``) and when it was parsed (``tensorfmt_parsed_at``);
:func:`check_unchanged` refuses a dataset whose files changed since, and
``vds.vz.to_icechunk(store, last_updated_at=tensorfmt.virtual.last_updated_at(vds))``
lets Icechunk refuse them when reading.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import posixpath
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import urlparse

import numpy as np

from . import _native
from ._args import flag, positive
from ._dims import dims_for, header_attrs, renamed_dims, zarr_names
from ._errors import FormatError, InputChangedError, InvalidArgumentError, TensorfmtError, TensorfmtFileNotFoundError, TensorfmtIOError, naming

try:  # pragma: no cover - import guard
    from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
    from virtualizarr.manifests.utils import create_v3_array_metadata
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("tensorfmt.virtual needs VirtualiZarr 2.x: pip install 'tensorfmt[virtual]'") from e

#: Default size of a chunk cut from a large contiguous tensor (a frame or an entry is
#: always one chunk of its own).
CHUNK_BYTES = 8 << 20


def _json_safe(v: Any) -> Any:
    """Attribute values zarr's JSON can hold: non-finite floats as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, Mapping):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def fill_value(dtype: np.dtype) -> Any:
    """The fill value of a virtual array: NaN for floats (CF decoding never masks with
    it), the least likely value otherwise (the minimum of a signed type, the maximum of
    an unsigned one, False)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return float("nan")
    if dtype.kind == "i":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "u":
        return int(np.iinfo(dtype).max)
    return False


def _head(url: str, store: Any, path: str) -> Dict[str, Any]:
    """The store's metadata of ``url``; its errors in tensorfmt's hierarchy, naming the
    URL: a missing object (or a directory) is :class:`TensorfmtFileNotFoundError`, any
    other failure (a server that cannot be reached, refused access)
    :class:`TensorfmtIOError`."""
    try:
        return _meta(store, path)
    except FileNotFoundError as e:  # obstore's NotFoundError is one
        raise TensorfmtFileNotFoundError(f"{url}: not found: {type(e).__name__}: {_first_line(e)}") from e
    except Exception as e:  # noqa: BLE001 - obstore's GenericError, PermissionError, ...
        raise TensorfmtIOError(f"{url}: reading its metadata failed: {type(e).__name__}: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    """An exception's first line (obstore's messages carry a multi-line debug dump)."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def _meta(store: Any, path: str) -> Dict[str, Any]:
    m = store.head(path)
    last = m.get("last_modified")
    return {
        "size": int(m["size"]),
        "last_modified": last.isoformat() if isinstance(last, _dt.datetime) else None,
        "etag": m.get("e_tag"),
    }


def _check_local_beside(url: str, location: str, tensor: str) -> None:
    """The rules ``tensorfmt.load`` (and ONNX's loader) apply to an external data file
    beside a local model, from the reader itself (an object store has no links to
    follow). The directory is the URL's path as the store reads it (obstore's local
    store takes it literally, without percent-decoding: decoding here would check
    another directory than the one read)."""
    base = os.path.dirname(urlparse(url).path) or "."
    try:
        _native.external_data_file(base, location)
    except TensorfmtIOError:
        raise  # the file cannot be reached: an I/O error, as the store's would be
    except TensorfmtError as e:
        raise FormatError(f"{url}: tensor {tensor!r}: {e}; nothing was described") from e


class _EmptyManifest(ChunkManifest):
    """The manifest of a zero-size array (a PVP run stopped before its first frame, a
    ``(0, 4)`` npy): no chunks. VirtualiZarr 2.5's ``iter_refs`` walks the chunk grid
    with ``np.nditer``, which refuses a grid with a zero-length axis ("Iteration of
    zero-sized operands is not enabled"), so ``vds.vz.to_icechunk`` failed on it; here
    it yields nothing, and Icechunk stores the empty array's metadata alone (as
    :func:`kerchunk_refs` does for kerchunk)."""

    def iter_refs(self) -> Iterator[Tuple[Tuple[int, ...], Any]]:
        if 0 in self.shape_chunk_grid:
            return iter(())
        return super().iter_refs()


class Parser:
    """VirtualiZarr's parser protocol (``Parser()(url, registry) -> ManifestStore``) for
    PVP, PINK, Caffe, ONNX, primitiv, npy, npz and safetensors files.

    ``format`` / ``kind`` / ``strict``: as :func:`tensorfmt.open` takes them (the format
    is detected from the first bytes otherwise); ``skip_variables``: names left out;
    ``chunk_bytes``: the size of the chunks a large contiguous tensor is cut into (a
    frame or an entry is always one chunk); ``block``: the read-ahead of header walks;
    ``max_fetch``: the most bytes read to describe one file; ``fortran``: how
    column-major tensors (primitiv, Fortran-order npy) are chunked: ``"transpose"``
    (chunks of about ``chunk_bytes`` through zarr's transpose codec: Icechunk and every
    zarr v3 reader) or ``"columns"`` (one column per chunk, no codec: also kerchunk
    references, which VirtualiZarr writes as zarr v2 metadata, where the transpose codec
    has no equivalent).
    """

    def __init__(
        self,
        *,
        format: Optional[str] = None,  # noqa: A002 - the keyword tensorfmt.open takes
        kind: Optional[str] = None,
        strict: bool = False,
        skip_variables: Optional[Iterable[str]] = None,
        chunk_bytes: int = CHUNK_BYTES,
        block: int = 64 << 10,
        max_fetch: int = 256 << 20,
        fortran: str = "transpose",
    ) -> None:
        if fortran not in ("transpose", "columns"):
            raise InvalidArgumentError(f"fortran= is 'transpose' or 'columns', not {fortran!r}")
        self.fortran = fortran
        self.format = format
        self.kind = kind
        self.strict = flag("strict", strict)
        self.skip_variables = set(skip_variables or ())
        self.chunk_bytes = positive("chunk_bytes", chunk_bytes)
        self.block = positive("block", block)
        self.max_fetch = positive("max_fetch", max_fetch)
        #: What the last call fetched: ``{"fetched": bytes, "requests": n}``.
        self.last_fetch: Dict[str, int] = {}

    def describe(self, url: str, registry: Any) -> Dict[str, Any]:
        """The native description of ``url`` (formats, tensors, chunk offsets), read
        through ``registry``'s store."""
        store, path = registry.resolve(url)
        before = _head(url, store, path)

        def store_error(e: Exception, what: str) -> TensorfmtIOError:
            # The store's own exception (obstore's, a server that ignores Range...) as
            # an I/O error of the file, in tensorfmt's hierarchy.
            return TensorfmtIOError(f"{url}: {what} failed: {type(e).__name__}: {e}")

        def read_range(offset: int, length: int) -> bytes:
            try:
                return bytes(store.get_range(path, start=offset, length=length))
            except Exception as e:  # noqa: BLE001 - any store error, re-raised typed
                raise store_error(e, f"reading bytes {offset}..{offset + length}") from e

        def read_ranges(starts: List[int], lengths: List[int]) -> List[bytes]:
            try:
                return [bytes(b) for b in store.get_ranges(path, starts=starts, lengths=lengths)]
            except Exception as e:  # noqa: BLE001
                raise store_error(e, f"reading {len(starts)} byte ranges") from e

        with naming(url):
            d = _native.describe_remote(
                read_range,
                before["size"],
                name=posixpath.basename(urlparse(url).path) or None,
                format=self.format,
                kind=self.kind,
                strict=self.strict,
                read_ranges=read_ranges,
                block=self.block,
                max_fetch=self.max_fetch,
                chunk_bytes=self.chunk_bytes,
                fortran_columns=self.fortran == "columns",
            )
        try:
            after = _meta(store, path)
        except FileNotFoundError as e:  # removed while its header was read
            raise InputChangedError(f"{url}: the file was removed while its header was read; nothing was described") from e
        except Exception as e:  # noqa: BLE001
            raise TensorfmtIOError(f"{url}: reading its metadata failed: {type(e).__name__}: {_first_line(e)}") from e
        if (after["size"], after["last_modified"], after["etag"]) != (before["size"], before["last_modified"], before["etag"]):
            raise InputChangedError(f"{url}: the file changed while its header was read; nothing was described")
        d["source"] = before
        self.last_fetch = {"fetched": d["fetched"], "requests": d["requests"]}
        return d

    def _beside(self, url: str, t: Mapping[str, Any], offsets: np.ndarray, registry: Any, sources: Dict[str, Any]) -> str:
        """The URL of the file a tensor lies in beside ``url`` (an ONNX model's external
        data), its size checked against the tensor's range (to its end when the model
        gives no length) and recorded in ``sources``."""
        location = posixpath.normpath(str(t["file"]))  # relative, no '..' (checked in Rust)
        if any(c in location for c in "%#?"):
            # A URL would read these as an escape, a fragment or a query: another file.
            raise FormatError(f"{url}: tensor {t['name']!r}: external data location {location!r} holds '%', '#' or '?', which a URL cannot carry as they are; nothing was described")
        other = url.rsplit("/", 1)[0] + "/" + location
        if urlparse(url).scheme == "file":
            _check_local_beside(url, location, str(t["name"]))
        if other not in sources:
            store, path = registry.resolve(other)
            with naming(other):
                try:
                    sources[other] = _meta(store, path)
                except Exception as e:  # noqa: BLE001 - the store's own error, typed
                    raise TensorfmtIOError(f"{other}: the external data file of {url} cannot be read: {type(e).__name__}: {e}") from e
        size = sources[other]["size"]
        end = int(offsets.max()) + int(t["chunk_len"]) if offsets.size else 0
        if end > size or (t["file_to_end"] and end != size):
            need = "end at" if t["file_to_end"] else "fit in"
            raise FormatError(
                f"{url}: tensor {t['name']!r}: its external data (bytes ..{end} of {location!r}) must "
                f"{need} the file's {size} bytes; nothing was described"
            )
        return other

    def __call__(self, url: str, registry: Any) -> ManifestStore:
        d = self.describe(url, registry)
        fmt, header = d["format"], d["header"]
        all_names = [t["name"] for t in d["tensors"]]
        znames = zarr_names(all_names)
        arrays: Dict[str, ManifestArray] = {}
        not_virtual: Dict[str, str] = {}
        sources: Dict[str, Any] = {}  # files beside this one (ONNX external data)
        for t in d["tensors"]:
            name = t["name"]
            if name in self.skip_variables:
                continue
            if t["not_virtual"]:
                not_virtual[znames[name]] = t["not_virtual"]
                continue
            shape = tuple(int(s) for s in t["shape"])
            dtype = np.dtype(t["zarr_dtype"])
            dims = renamed_dims(dims_for(fmt, name, shape, header, all_names), name, znames[name])
            attrs: Dict[str, Any] = {}
            if znames[name] != name:
                attrs["tensorfmt_name"] = name
            if fmt == "pvp" and "time" in all_names and name != "time" and dims[:1] == ("frame",):
                attrs["coordinates"] = "time"
            codecs: List[Dict[str, Any]] = []
            chunk_shape = tuple(int(c) for c in t["chunk_shape"])
            if t["order"] == "F" and sum(c > 1 for c in chunk_shape) > 1:
                codecs.append({"name": "transpose", "configuration": {"order": list(range(len(shape)))[::-1]}})
            codecs.append({"name": "bytes", "configuration": {"endian": "big" if t["big_endian"] else "little"}})
            metadata = create_v3_array_metadata(
                shape=shape,
                data_type=dtype,
                chunk_shape=chunk_shape,
                fill_value=fill_value(dtype),
                codecs=codecs,
                attributes=attrs,
                dimension_names=dims,
            )
            grid = tuple(int(g) for g in t["grid_shape"])
            offsets = np.asarray(t["offsets"], dtype=np.uint64).reshape(grid)
            where = url
            if t.get("file") is not None:
                where = self._beside(url, t, offsets, registry, sources)
            if offsets.size == 0:
                manifest = _EmptyManifest(entries={}, shape=grid)
            else:
                manifest = ChunkManifest.from_arrays(
                    paths=np.full(grid, where, dtype=np.dtypes.StringDType()),
                    offsets=offsets,
                    lengths=np.full(grid, t["chunk_len"], dtype=np.uint64),
                )
            arrays[znames[name]] = ManifestArray(metadata=metadata, chunkmanifest=manifest)
        attrs = {k: _json_safe(v) for k, v in header_attrs(header).items()}
        attrs.update(
            tensorfmt_format=fmt,
            tensorfmt_kind=d["kind"],
            tensorfmt_source={url: d["source"], **sources},
            tensorfmt_parsed_at=_dt.datetime.now(_dt.timezone.utc).isoformat(),
            not_virtual=not_virtual,
        )
        if d["warnings"]:
            attrs["tensorfmt_warnings"] = list(d["warnings"])
        return ManifestStore(group=ManifestGroup(arrays=arrays, attributes=attrs), registry=registry)


def kerchunk_refs(ds: Any) -> Dict[str, Any]:
    """The kerchunk references of a virtual dataset: VirtualiZarr's
    ``dataset_to_kerchunk_refs``, variable by variable, made exact under xarray's default
    decoding. Integer and boolean arrays get no fill value (``null``: zarr v2 readers
    would mask every element equal to it); a 0-d array's chunk gets its zarr v2 key
    ``name/0`` (VirtualiZarr writes ``name/``); a zero-size array (a PVP run stopped
    before its first frame), which VirtualiZarr's manifest walk refuses, is its metadata
    without chunks; a transpose-codec array, which zarr v2 cannot describe, is refused."""
    import json

    from virtualizarr.utils import convert_v3_to_v2_metadata
    from virtualizarr.writers.kerchunk import to_kerchunk_json, variable_to_kerchunk_arr_refs
    from xarray.conventions import encode_dataset_coordinates

    variables, attrs = encode_dataset_coordinates(ds)
    out: Dict[str, Any] = {".zgroup": '{"zarr_format":2}', ".zattrs": json.dumps(_json_safe(attrs))}
    for name, var in variables.items():
        virtual = isinstance(var.data, ManifestArray)
        if virtual and any(type(c).__name__ == "TransposeCodec" for c in var.data.metadata.codecs):
            raise InvalidArgumentError(
                f"{name}: a column-major tensor chunked through zarr's transpose codec, which zarr v2 "
                "(kerchunk) cannot describe; parse with Parser(fortran=\"columns\") for kerchunk references"
            )
        if virtual and 0 in var.shape:
            zarray = json.loads(to_kerchunk_json(convert_v3_to_v2_metadata(var.data.metadata)))
            zattrs = {**var.attrs, **var.encoding, "_ARRAY_DIMENSIONS": list(var.dims)}
            arr: Dict[str, Any] = {".zattrs": json.dumps(_json_safe(zattrs))}
        else:
            arr = variable_to_kerchunk_arr_refs(var, str(name))
            zarray = json.loads(arr[".zarray"])
        if virtual and var.dtype.kind in "iub":
            zarray["fill_value"] = None
        arr[".zarray"] = json.dumps(zarray, separators=(",", ":"))
        if var.ndim == 0 and "" in arr:
            arr["0"] = arr.pop("")
        out.update({f"{name}/{k}": v for k, v in arr.items()})
    return {"version": 1, "refs": out}


def to_kerchunk(
    ds: Any,
    filepath: Optional[str] = None,
    format: str = "dict",  # noqa: A002 - VirtualiZarr's keyword
    record_size: int = 100_000,
    categorical_threshold: int = 10,
) -> Optional[Dict[str, Any]]:
    """``vds.vz.to_kerchunk(filepath, format)`` with :func:`kerchunk_refs`' references:
    ``format`` ``"dict"`` (returned), ``"json"`` or ``"parquet"`` (written to
    ``filepath``), the same options as VirtualiZarr's.

    >>> import os, xarray as xr, tensorfmt
    >>> from obspec_utils.registry import ObjectStoreRegistry
    >>> from obstore.store import LocalStore
    >>> from virtualizarr import open_virtual_dataset
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})
    >>> url = "file://" + os.path.abspath("testdata/core/i16_fortran_2x3.npy")
    >>> vds = open_virtual_dataset(url, registry=registry, parser=Parser(fortran="columns"))
    >>> to_kerchunk(vds, "i16.json", format="json")
    >>> ds = xr.open_dataset("i16.json", engine="kerchunk")       # xarray's default decoding
    >>> v = ds["i16_fortran_2x3"]
    >>> v.dtype, v.values.tolist() == tensorfmt.load("testdata/core/i16_fortran_2x3.npy")["i16_fortran_2x3"].tolist()
    (dtype('int16'), True)
    """
    refs = kerchunk_refs(ds)
    if format == "dict":
        return refs
    if filepath is None:
        raise InvalidArgumentError(f"to_kerchunk(format={format!r}) needs a filepath")
    if format == "json":
        import json

        with open(filepath, "w") as f:  # noqa: PTH123
            json.dump(refs, f, separators=(",", ":"))
        return None
    if format == "parquet":
        from kerchunk.df import refs_to_dataframe

        refs_to_dataframe(refs, url=str(filepath), record_size=record_size, categorical_threshold=categorical_threshold)
        return None
    raise InvalidArgumentError(f"to_kerchunk: format is 'dict', 'json' or 'parquet', not {format!r}")


def to_icechunk(ds: Any, store: Any, **kwargs: Any) -> None:
    """``vds.vz.to_icechunk(store, **kwargs)`` that also writes zero-size arrays whose
    manifest is VirtualiZarr's own: the parser's empty manifests already write (see
    :class:`_EmptyManifest`), but ``xr.concat`` of them (a series of runs stopped before
    their first frame) makes a new one, whose walk VirtualiZarr 2.5 refuses ("Iteration
    of zero-sized operands is not enabled"). Same keywords as VirtualiZarr's
    (``group``, ``append_dim``, ``last_updated_at``, ...)."""
    out = ds.copy(deep=False)
    for name, var in ds.variables.items():
        data = var.data
        if isinstance(data, ManifestArray) and 0 in var.shape and not isinstance(data.manifest, _EmptyManifest):
            empty = _EmptyManifest(entries={}, shape=data.manifest.shape_chunk_grid)
            out[name] = var.copy(deep=False, data=ManifestArray(metadata=data.metadata, chunkmanifest=empty))
    out.vz.to_icechunk(store, **kwargs)


def combine_attrs(attrs: List[Mapping[str, Any]], context: Any = None) -> Dict[str, Any]:
    """xarray's ``combine_attrs`` for a series of virtual datasets (``xr.concat(vdss,
    dim="frame", coords="minimal", compat="override",
    combine_attrs=tensorfmt.virtual.combine_attrs)``): the first dataset's attributes,
    with ``tensorfmt_source`` holding every file's record (size, modification time,
    ETag) and ``tensorfmt_parsed_at`` the earliest parse, so :func:`check_unchanged`
    checks each file against its own record. Variables keep their first attributes."""
    out: Dict[str, Any] = dict(attrs[0]) if attrs else {}
    sources: Dict[str, Any] = {}
    parsed: List[str] = []
    for a in attrs:
        sources.update(a.get("tensorfmt_source", {}) or {})
        if a.get("tensorfmt_parsed_at"):
            parsed.append(a["tensorfmt_parsed_at"])
    if sources:
        out["tensorfmt_source"] = sources
    if parsed:
        out["tensorfmt_parsed_at"] = min(parsed, key=_dt.datetime.fromisoformat)
    return out


def parsed_at(obj: Any) -> _dt.datetime:
    """When the (first) file of a virtual dataset (or its attributes) was parsed."""
    attrs = getattr(obj, "attrs", obj)
    stamp = attrs.get("tensorfmt_parsed_at") if isinstance(attrs, Mapping) else None
    if not isinstance(stamp, str):
        raise InvalidArgumentError(
            "parsed_at takes a virtual dataset made by tensorfmt.virtual.Parser (or its attrs), "
            f"which carry tensorfmt_parsed_at; got {type(obj).__name__} without it"
        )
    return _dt.datetime.fromisoformat(stamp)


def last_updated_at(obj: Any) -> _dt.datetime:
    """The ``last_updated_at`` to give ``vds.vz.to_icechunk(store, ...)`` so Icechunk
    refuses the chunks of a file modified after it was parsed: :func:`parsed_at`
    rounded up to the next second (Icechunk keeps whole seconds; a file modified within
    the second it was parsed in goes unnoticed)."""
    t = parsed_at(obj)
    return t.replace(microsecond=0) + _dt.timedelta(seconds=1)


def _paths(ds: Any) -> List[str]:
    from virtualizarr.manifests import ManifestArray

    out: set = set()
    for var in ds.variables.values():
        if isinstance(var.data, ManifestArray):
            out.update(var.data.manifest.iter_nonempty_paths())
    return sorted(out)


def check_unchanged(ds: Any, registry: Any) -> None:
    """Raises :class:`tensorfmt.InputChangedError` naming every file a virtual dataset
    refers to (concatenated ones included) that was modified after the dataset was
    parsed (``tensorfmt_parsed_at``), whose size or ETag differs from the recorded one,
    or that was deleted; returns None when all are unchanged. A file the store cannot
    reach for another reason is a :class:`tensorfmt.TensorfmtIOError` naming it."""
    since = parsed_at(ds)
    recorded: Mapping[str, Any] = ds.attrs.get("tensorfmt_source", {})
    changed = []
    for url in _paths(ds):
        store, path = registry.resolve(url)
        try:
            now = _head(url, store, path)
        except TensorfmtFileNotFoundError:
            changed.append(f"{url} (deleted)")
            continue
        was = recorded.get(url)
        modified = now["last_modified"] and _dt.datetime.fromisoformat(now["last_modified"]) > since
        differs = was is not None and (now["size"], now["etag"]) != (was["size"], was["etag"])
        if modified or differs:
            changed.append(url)
    if changed:
        raise InputChangedError(f"changed since they were referenced: {', '.join(changed)}")


__all__ = ["Parser", "check_unchanged", "parsed_at", "last_updated_at", "fill_value", "zarr_names", "kerchunk_refs", "to_kerchunk", "to_icechunk", "combine_attrs", "CHUNK_BYTES"]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
