"""Dimension names and attributes shared by the xarray engine
(:mod:`tensorfmt.xarray_backend`) and the VirtualiZarr parser (:mod:`tensorfmt.virtual`),
so both give a file the same names and dimensions."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Sequence, Tuple

#: Variables whose axis 0 counts frames (PVP) or entries (PINK data, mappings,
#: rotation/flip files): chunked one index at a time where a chunk must be a byte range.
FRAME_AXES = {"frame", "entry"}


def _item(rank: int, prefix: str = "") -> Tuple[str, ...]:
    """Names of an image's axes: ``x``; ``y, x``; ``channel, y, x``."""
    names = {1: ("x",), 2: ("y", "x"), 3: ("channel", "y", "x")}.get(rank)
    if names is None:
        names = tuple(f"item_{i}" for i in range(rank))
    return tuple(prefix + n for n in names)


def _map(rank: int) -> Tuple[str, ...]:
    """Names of a SOM's map axes, by position in C order as for an image, the last axis
    ``x``: ``neuron`` (hexagonal or 1-d); ``neuron_y, neuron_x``; ``neuron_z, neuron_y,
    neuron_x`` (a 3-d map: no axis of a map is a channel); ``neuron_0, ...`` beyond.
    The axes are the header's dims in its order (PINK writes ``[width, height(,
    depth)]``, so axis 0 holds the width); the names say where an axis is, not which
    of PINK's names it has (PINK's own tools disagree about them, ``som.md``).

    >>> _map(1), _map(2), _map(3)
    (('neuron',), ('neuron_y', 'neuron_x'), ('neuron_z', 'neuron_y', 'neuron_x'))
    """
    if rank == 1:
        return ("neuron",)
    names = {2: ("y", "x"), 3: ("z", "y", "x")}.get(rank) or tuple(str(i) for i in range(rank))
    return tuple("neuron_" + n for n in names)


def _layout_rank(header: Mapping[str, Any], key: str) -> int:
    layout = header.get(key)
    if isinstance(layout, Mapping) and isinstance(layout.get("dims"), list):
        return len(layout["dims"])
    return -1


def dims_for(fmt: str, name: str, shape: Sequence[int], header: Mapping[str, Any], names: Sequence[str]) -> Tuple[str, ...]:
    """The dimension names of tensor ``name`` of shape ``shape`` in a file of format
    ``fmt`` whose header is ``header`` and whose tensors are ``names``:

    - PVP: ``values`` ``(frame, y, x, f)`` (a random-state file adds ``word``), ``time``
      ``(frame,)``, ``weights`` ``(frame, arbor, patch, nyp, nxp, nfp)``;
    - PINK: ``data`` ``(entry, y, x)`` (``x`` / ``channel, y, x`` by rank), ``som``
      ``(neuron, y, x)`` hexagonal or ``(neuron_y, neuron_x, y, x)`` cartesian (a 3-d
      map ``neuron_z, neuron_y, neuron_x``; see :func:`_map`), ``hex_axial`` ``(neuron,
      axial)``, ``distances`` ``(entry, neuron...)``, ``flip`` / ``angle`` ``(entry,
      neuron)``;
    - anything else: ``<name>_dim0, <name>_dim1, ...`` (each tensor its own axes).
    """
    n = len(shape)
    generic = tuple(f"{name}_dim{i}" for i in range(n))
    if fmt == "pvp":
        if name == "time" and n == 1:
            return ("frame",)
        if name == "weights" and n == 6:
            return ("frame", "arbor", "patch", "nyp", "nxp", "nfp")
        if name == "values" and n >= 4:
            return ("frame", "y", "x", "f") + tuple("word" if i == 0 else f"word_{i}" for i in range(n - 4))
        return generic
    if fmt == "som" and n >= 1:
        if name == "data":
            return ("entry",) + _item(n - 1)
        if name == "hex_axial" and n == 2:
            return ("neuron", "axial")
        if name in ("flip", "angle") and n == 2:
            return ("entry", "neuron")
        if name == "distances":
            return ("entry",) + _map(n - 1)
        if name == "som":
            item = _layout_rank(header, "neuron_layout")
            if "hex_axial" in names:
                return ("neuron",) + _item(n - 1)
            if 0 <= item < n:
                return _map(n - item) + _item(item)
        return generic
    return generic


def header_attrs(header: Mapping[str, Any]) -> Dict[str, Any]:
    """Header fields as attributes: plain numbers, strings, lists and dicts."""
    return {str(k): v for k, v in header.items()}


def netcdf_attrs(attrs: Mapping[str, Any]) -> Dict[str, Any]:
    """``attrs`` as values every netCDF writer takes (NETCDF3 included: scipy's): strings
    and numbers stay, integers past int32 become their decimal text, bools ``int8``
    (as xarray stores bool variables), flat lists of numbers 1-D arrays, anything
    nested (lists of dicts, dicts, lists of strings) one JSON string, and ``None`` is
    left out. The engine's attributes with ``safe_names=True``.

    >>> a = netcdf_attrs({"nx": 3, "layer": [{"name": "ip"}], "flip": True, "dims": [5, 5], "x": None})
    >>> a["nx"], a["layer"], a["flip"].dtype.name, a["dims"].tolist(), "x" in a
    (3, '[{"name": "ip"}]', 'int8', [5, 5], False)
    """
    import json

    import numpy as np

    def number(v: Any) -> bool:
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))

    def int32(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and -(2**31) <= int(v) < 2**31

    out: Dict[str, Any] = {}
    for k, v in attrs.items():
        if v is None:
            continue
        if isinstance(v, (bool, np.bool_)):
            out[str(k)] = np.int8(v)
        elif isinstance(v, str):
            out[str(k)] = v
        elif number(v):
            out[str(k)] = v if not isinstance(v, (int, np.integer)) or int32(v) else str(int(v))
        elif isinstance(v, (list, tuple)) and v and all(number(x) for x in v):
            if all(int32(x) for x in v):
                out[str(k)] = np.asarray(v, dtype=np.int32)
            elif all(isinstance(x, (int, np.integer)) for x in v):
                out[str(k)] = json.dumps([int(x) for x in v])
            else:
                out[str(k)] = np.asarray(v, dtype=np.float64)
        else:
            out[str(k)] = json.dumps(v, default=_json_default, ensure_ascii=False)
    return out


def _json_default(v: Any) -> Any:
    """JSON for the numpy scalars and arrays a header may hold."""
    tolist = getattr(v, "tolist", None)
    return tolist() if callable(tolist) else str(v)


_ZARR_KEYS = {"zarr.json", ".zattrs", ".zgroup", ".zarray", ".zmetadata"}


def _reserved(z: str) -> bool:
    """A name zarr cannot give an array: empty, periods only, the ``__`` prefix zarr v3
    keeps for itself, or one of its metadata keys (``zarr.json``, ``.zattrs``, ...)."""
    return not z or set(z) == {"."} or z.startswith("__") or z in _ZARR_KEYS


def renamed_dims(dims: Sequence[str], name: str, new: str) -> Tuple[str, ...]:
    """``dims`` of tensor ``name`` with its own axes (``<name>_dim<i>``) named after
    ``new``, its zarr / netCDF-safe name, so that no dimension keeps a ``/`` either.

    >>> renamed_dims(("conv1/0_dim0", "frame"), "conv1/0", "conv1.0")
    ('conv1.0_dim0', 'frame')
    """
    own = name + "_dim"
    return tuple(new + d[len(name) :] if d.startswith(own) else d for d in dims)


def zarr_names(names: Iterable[str]) -> Dict[str, str]:
    """Array names for zarr and netCDF (no ``/``, which zarr reads as a group and
    netCDF refuses): ``/`` becomes ``.``; a name that would then collide with another
    keeps a percent-encoded ``/`` (``%2F``, and ``%`` as ``%25``) instead, and one that
    still collides gets ``~N``. A name zarr keeps for itself (periods only, a ``__``
    prefix, a metadata key such as ``zarr.json`` or ``.zattrs``) is prefixed with
    ``~``. Distinct names stay distinct. The parser's names, and the engine's with
    ``safe_names=True``.

    >>> zarr_names(["conv1/0", "conv1.0", "fc"])
    {'conv1/0': 'conv1%2F0', 'conv1.0': 'conv1.0', 'fc': 'fc'}
    >>> zarr_names(["a/b", "a.b", "a%2Fb"])
    {'a/b': 'a%2Fb~1', 'a.b': 'a.b', 'a%2Fb': 'a%2Fb'}
    >>> zarr_names(["zarr.json", "..", "__x"])
    {'zarr.json': '~zarr.json', '..': '~..', '__x': '~__x'}
    """
    names = list(names)
    kept = {n for n in names if "/" not in n and not _reserved(n)}
    out: Dict[str, str] = {}
    used = set(kept)
    for n in names:
        if n in kept:
            out[n] = n
            continue
        z = n.replace("/", ".")
        if z in used:
            z = n.replace("%", "%25").replace("/", "%2F")
        if _reserved(z):
            z = "~" + z
        base, k = z, 0
        while z in used:
            k += 1
            z = f"{base}~{k}"
        used.add(z)
        out[n] = z
    return out
