"""PINK self-organising-map binary files with their map layout: data files (training
or mapping input), SOMs, mappings (distances of every entry to every neuron) and
rotation/flip files, cartesian or hexagonal, with hexagonal axial coordinates and
best-matching units:

>>> import tensorfmt.som
>>> som = tensorfmt.som.open("testdata/som/som_hex3.bin")
>>> som.layout, som.map_shape            # or ('cartesian', (10, 10))
('hexagonal', (3, 3))
>>> som.neurons.shape                    # [neurons..., *neuron dims], a view of the file
(7, 2, 2)
>>> som.axial().shape                    # (q, r) of each neuron of a hexagonal map
(7, 2)
>>> m = tensorfmt.som.open("testdata/som/map_cart_2x3.bin")
>>> m.best_matches().tolist(), m.bmu_counts().tolist()     # streamed, bounded memory
([0, 2, 4], [1, 0, 1, 0, 1, 0])

Arrays are zero-copy views of the mapped file (one bulk copy for pre-version-2 files
whose layout needs it).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args, _native
from ._api import _refuse_existing
from ._api import open as _open_document
from ._args import flag as _flag
from ._errors import InvalidArgumentError, TensorfmtTypeError, naming

PathLike = Union[str, "os.PathLike[str]"]


class SomFile:
    """A PINK file opened with the typed reader (see :func:`open`)."""

    def __init__(self, path: PathLike, *, kind: Optional[str] = None, strict: bool = False) -> None:
        self.path = os.fsdecode(path)
        _flag("strict", strict)
        with naming(self.path):
            self._f = _native.open_som(self.path, kind, strict)
        self._doc = _open_document(self.path, format="som", kind=kind, strict=strict)
        layout = self._f.layout()
        self._layout: Optional[Tuple[str, List[int], bool]] = None if layout is None else tuple(layout)  # type: ignore[assignment]

    @property
    def kind(self) -> str:
        """``data``, ``som``, ``mapping`` or ``rotflip``."""
        return str(self._f.kind)

    @property
    def version(self) -> int:
        """The header version: 2, or 1 for files from before PINK 2."""
        return int(self._f.version)

    @property
    def header(self) -> Dict[str, Any]:
        """The header fields, as :attr:`tensorfmt.Document.header`."""
        return self._doc.header

    @property
    def warnings(self) -> List[str]:
        return self._doc.warnings

    @property
    def comments(self) -> List[str]:
        """The header's comment lines (with their ``#``)."""
        return list(self._f.comments())

    @property
    def layout(self) -> Optional[str]:
        """``cartesian`` or ``hexagonal`` (``None`` for data files)."""
        return None if self._layout is None else self._layout[0]

    @property
    def hexagonal(self) -> bool:
        return self.layout == "hexagonal"

    @property
    def layout_inferred(self) -> bool:
        """True when the header says cartesian but the payload size shows a hexagonal
        map (what PINK writes for mappings and rotation/flip files of hexagonal SOMs)."""
        return bool(self._layout is not None and self._layout[2])

    @property
    def map_shape(self) -> Optional[Tuple[int, ...]]:
        """The map's dims as the header writes them (``(d, d)`` for a hexagonal map of
        side ``d``)."""
        return None if self._layout is None else tuple(self._layout[1])

    @property
    def item_shape(self) -> Optional[Tuple[int, ...]]:
        """Dims of one data entry (data files) or one neuron (SOMs)."""
        dims = self._f.item_dims()
        return None if dims is None else tuple(dims)

    @property
    def neuron_count(self) -> Optional[int]:
        return self._f.neuron_count()

    def __len__(self) -> int:
        """Entries (data, mapping and rotation/flip files) or neurons (SOMs)."""
        n = self._f.neuron_count() if self.kind == "som" else self._f.n_entries()
        return int(n or 0)

    def _array(self, name: str, kind: str) -> np.ndarray:
        if self.kind != kind:
            raise InvalidArgumentError(f"{self.path} is a {self.kind} file, not {kind}")
        return self._doc[name]

    @property
    def entries(self) -> np.ndarray:
        """Data files: ``[entries, *item_shape]``."""
        return self._array("data", "data")

    @property
    def neurons(self) -> np.ndarray:
        """SOMs: ``[*map dims, *neuron dims]`` (cartesian) or ``[neurons, *neuron
        dims]`` (hexagonal, PINK's storage order; see :meth:`axial`)."""
        return self._array("som", "som")

    @property
    def distances(self) -> np.ndarray:
        """Mappings: ``[entries, *map dims]`` or ``[entries, neurons]`` (hexagonal)."""
        return self._array("distances", "mapping")

    @property
    def flip(self) -> np.ndarray:
        """Rotation/flip files: the flip byte of every entry for every neuron."""
        return self._array("flip", "rotflip")

    @property
    def angle(self) -> np.ndarray:
        """Rotation/flip files: the rotation angle (radians)."""
        return self._array("angle", "rotflip")

    def neuron(self, i: int) -> np.ndarray:
        """Neuron ``i`` (storage order) of a SOM."""
        if self.kind != "som":
            raise InvalidArgumentError(f"{self.path} is a {self.kind} file, not a SOM")
        return np.asarray(self._f.neuron(int(i)))

    def axial(self) -> np.ndarray:
        """Axial coordinates ``[neurons, 2]`` (``(q, r)``, int32) of a hexagonal map's
        neurons in storage order; neighbours differ by one of the six axial steps."""
        return np.asarray(self._f.hex_axial())

    def best_matches(self) -> np.ndarray:
        """Mappings: the best-matching neuron (storage order) of every entry, -1 where
        every distance is NaN."""
        return np.asarray(self._f.best_matches())

    def bmu_counts(self) -> np.ndarray:
        """Mappings: how many entries each neuron best matches."""
        return np.asarray(self._f.bmu_counts())

    def rotflip(
        self, entry: int, neuron: int, num_rot: int = 360, *, numrot: Optional[int] = None
    ) -> Tuple[bool, float, int]:
        """Rotation/flip files: ``(flipped, angle, transform index)`` of ``entry`` for
        ``neuron``, the index counted for ``num_rot`` rotations as PINK does (the
        keyword ``map`` and ``transform`` take; ``numrot``, its first spelling, is
        still accepted with a ``DeprecationWarning``).

        >>> import tensorfmt.som  # doctest: +SKIP
        >>> tensorfmt.som.open("rotflip.bin").rotflip(0, 0, num_rot=8)  # doctest: +SKIP
        (False, 0.7853981852531433, 1)
        """
        if numrot is not None:
            warnings.warn(
                "rotflip(numrot=...) is spelled num_rot=... (as map and transform spell it)",
                DeprecationWarning,
                stacklevel=2,
            )
            num_rot = numrot
        entry = _args.whole("entry", entry, 0)
        neuron = _args.whole("neuron", neuron, 0)
        num_rot = _args.whole("num_rot", num_rot, 1)
        if num_rot != 1 and num_rot % 4:
            raise InvalidArgumentError(f"num_rot {num_rot}: PINK takes 1 or a multiple of 4 rotations")
        flipped, angle, index = self._f.rotflip(entry, neuron, num_rot)
        return bool(flipped), float(angle), int(index)

    def close(self) -> None:
        self._doc.close()

    def __enter__(self) -> "SomFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        layout = f" {self.layout} {self.map_shape}" if self.layout else ""
        return f"<tensorfmt.som.SomFile {self.kind}{layout} {self.path} len={len(self)}>"


def open(path: PathLike, *, kind: Optional[str] = None, strict: bool = False) -> SomFile:  # noqa: A001
    """Opens a PINK binary file. ``kind`` (``data``, ``som``, ``mapping``,
    ``rotflip``) chooses the reading of a pre-version-2 file that fits several;
    ``strict`` refuses what PINK itself refuses.

    >>> import numpy as np, tensorfmt, tensorfmt.som
    >>> tensorfmt.save("d.bin", {"data": np.zeros((5, 4, 4), np.float32)}, to="som-data")
    >>> d = tensorfmt.som.open("d.bin")
    >>> d.kind, len(d), d.item_shape, d.entries.shape
    ('data', 5, (4, 4), (5, 4, 4))
    """
    return SomFile(path, kind=kind, strict=strict)


# ---- PINK's mapping step, transforms and best-match tools (issue 32) ----

Source = Union[PathLike, np.ndarray]

_DEFAULTS: Dict[str, Any] = {
    "num_rot": 360,
    "flip": True,
    "neuron_dim": None,
    "euclidean_distance_dim": None,
    "euclidean_distance_shape": "quadratic",
    "interpolation": "bilinear",
}


def _options(options: Dict[str, Any]) -> Dict[str, Any]:
    unknown = set(options) - set(_DEFAULTS) - {"threads"}
    if unknown:
        raise InvalidArgumentError(
            f"unknown mapping option(s) {sorted(unknown)}; expected {sorted(_DEFAULTS)} or threads"
        )
    out = {**_DEFAULTS, "threads": None, **options}
    # Whole numbers in range, named here (not as a failed conversion at the native call).
    for key, lo, optional in (("num_rot", 1, False), ("neuron_dim", 1, True), ("euclidean_distance_dim", 1, True), ("threads", 0, True)):
        v = out[key]
        if v is None and optional:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) < 2**31:
            raise InvalidArgumentError(f"{key} {v!r}: expected a whole number >= {lo}")
        out[key] = int(v)
    out["flip"] = _flag("flip", out["flip"])
    for key in ("euclidean_distance_shape", "interpolation"):
        if not isinstance(out[key], str):
            raise TensorfmtTypeError(f"{key}= takes a name such as {_DEFAULTS[key]!r}, not {out[key]!r}")
    return out


def _f32(name: str, value: Any) -> Dict[str, Any]:
    a = np.require(np.asarray(value, dtype=np.float32), requirements=["C", "A"])
    return {
        "owner": a,
        "address": a.__array_interface__["data"][0] if a.size else 0,
        "len": int(a.size),
        "shape": list(a.shape),
    }


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, bytes, os.PathLike))


def _path_of(x: Any) -> Optional[str]:
    """The path ``x`` names, or None for an array."""
    if isinstance(x, (str, bytes, os.PathLike)):
        return os.fsdecode(x)
    return None


def map(data: Source, som: Source, *, progress: Any = None, **options: Any) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:  # noqa: A001
    """PINK's mapping step, as ``Pink --cuda-off --map`` computes it (bit for bit):
    every entry's distance to every neuron, minimised over the entry's rotations and
    flips, and the best rotation/flip.

    ``data`` is a PINK data file or an array ``[entries, d, d]`` / ``[entries,
    channels, d, d]``; ``som`` a SOM file or an array ``[*map dims, (channels,) nd,
    nd]``. Options, with PINK's defaults: ``num_rot=360`` (1 or a multiple of 4),
    ``flip=True``, ``neuron_dim`` (must equal the SOM's), ``euclidean_distance_dim``
    (image side x sqrt(2)/2 when rotating with a quadratic region, else the image side),
    ``euclidean_distance_shape`` (``"quadratic"`` or ``"circular"``), ``interpolation``
    (``"bilinear"``; ``"nearest_neighbor"`` only with 1 or 4 rotations, as on PINK's CPU
    path); ``threads`` (default: every core); ``progress(done, total)`` counts entries.
    The work runs without the GIL; Ctrl-C stops it at the next entry.

    Returns ``(distances, rotflip)``: ``distances`` shaped as ``tensorfmt.load`` of
    PINK's mapping file (``[entries, *map dims]``, ``[entries, neurons]`` for a
    hexagonal SOM), ``rotflip`` as ``tensorfmt.load`` of its rotation/flip file
    (``{"flip": uint8, "angle": float32 radians}``, each ``[entries, neurons]``).

    >>> import numpy as np, tensorfmt.som
    >>> d = "testdata/som/mapping/"
    >>> dist, rf = tensorfmt.som.map(d + "data_16.bin", d + "som_cart3x3.bin", num_rot=4, flip=False)
    >>> dist.shape, rf["angle"].shape
    ((20, 3, 3), (20, 9))
    >>> bool((dist == tensorfmt.load(d + "map_cart_4_noflip.bin")["distances"]).all())
    True
    """
    o = _options(options)
    data_path = _path_of(data)
    som_path = _path_of(som)
    data_array = None if data_path is not None else _f32("data", data)
    som_array = None
    map_dims: Optional[Tuple[int, ...]] = None
    if som_path is None:
        s = np.asarray(som, dtype=np.float32)
        if data_array is not None:
            rank = len(data_array["shape"]) - 1
        else:
            with open(data_path) as f:  # type: ignore[arg-type]
                rank = len(f.item_shape or ())
        if data_array is not None and len(data_array["shape"]) not in (3, 4):
            raise InvalidArgumentError(
                f"data: expected [entries, d, d] or [entries, channels, d, d], got shape {tuple(data_array['shape'])}"
            )
        if s.ndim <= rank:
            raise InvalidArgumentError(f"som: expected [*map dims, *neuron dims of rank {rank}], got shape {s.shape}")
        map_dims = tuple(s.shape[: s.ndim - rank])
        som_array = _f32("som", s.reshape((-1,) + s.shape[s.ndim - rank :]))
    elif data_array is not None and len(data_array["shape"]) not in (3, 4):
        raise InvalidArgumentError(
            f"data: expected [entries, d, d] or [entries, channels, d, d], got shape {tuple(data_array['shape'])}"
        )
    # The native mapper opens the files itself: its errors name the file they concern
    # only as "som:"; a header problem is found here first, naming the file.
    for p in (data_path, som_path):
        if p is not None:
            with naming(p):
                _native.open_som(p, None, False)
    dist, flip, angle, layout = _native.som_map(
        data_path,
        data_array,
        som_path,
        som_array,
        o,
        _progress(progress),
    )
    distances = np.asarray(dist)
    dims = tuple(layout[1]) if layout is not None else map_dims
    if dims is not None:
        distances = distances.reshape((distances.shape[0],) + tuple(dims))
    return distances, {"flip": np.asarray(flip), "angle": np.asarray(angle)}


def geometry(image_shape: Sequence[int], neuron_shape: Sequence[int], **options: Any) -> Dict[str, int]:
    """What :func:`map` resolves for images of ``image_shape`` and neurons of
    ``neuron_shape`` (each ``(d, d)`` or ``(channels, d, d)``) with ``options``: PINK's
    defaults filled in and checked (the same errors :func:`map` raises).

    >>> import tensorfmt.som
    >>> tensorfmt.som.geometry((64, 64), (91, 91))
    {'channels': 1, 'image_dim': 64, 'neuron_dim': 91, 'euclidean_distance_dim': 45, 'transforms': 720}
    """
    o = _options(options)
    shapes = [[_args.whole(name, v, 1) for v in shape] for name, shape in (("image_shape", image_shape), ("neuron_shape", neuron_shape))]
    c, d, nd, edd, t = _native.som_geometry(shapes[0], shapes[1], o)
    return {"channels": c, "image_dim": d, "neuron_dim": nd, "euclidean_distance_dim": edd, "transforms": t}


def _progress(progress: Any) -> Any:
    from ._api import _progress_callback

    return _progress_callback(progress)


def map_files(
    data: PathLike,
    som: PathLike,
    map_path: PathLike,
    rotflip_path: Optional[PathLike] = None,
    *,
    ids: Union[None, bool, Sequence[str]] = None,
    progress: Any = None,
    overwrite: bool = True,
    **options: Any,
) -> Dict[str, int]:
    """``Pink --map DATA MAP SOM --store-rot-flip ROTFLIP`` (the CLI's ``tensorfmt
    som-map``): writes PINK's mapping file and, with ``rotflip_path``, its rotation/flip
    file, byte for byte as PINK 2.5 writes them (each written to a temporary file and
    renamed: nothing is left behind on error). ``ids`` (one per entry; default ``None``:
    the data file's ``# id`` lines) go into both files' comment blocks; ``ids=False``
    writes none (the CLI's ``--no-ids``: the files are then PINK's, byte for byte).
    Options as :func:`map`.
    An existing output is replaced unless ``overwrite=False`` (as :func:`tensorfmt.save`);
    an output that is one of the inputs (or both outputs one file) is always refused.
    Returns ``{"entries", "neurons", "ids"}``.

    >>> import tensorfmt.som
    >>> from pathlib import Path
    >>> d = "testdata/som/mapping/"
    >>> tensorfmt.som.map_files(d + "data_15.bin", d + "som_cart4x2_d15.bin", "out.map", "out.rotflip", num_rot=28)
    {'entries': 12, 'neurons': 8, 'ids': 0}
    >>> Path("out.map").read_bytes() == Path(d + "map_d15_28_flip.bin").read_bytes()
    True
    """
    o = _options(options)
    id_list: Optional[List[str]] = None
    if ids is not None and not (isinstance(ids, (bool, np.bool_)) and not ids):
        if isinstance(ids, (str, bytes, bool, np.bool_)) or not isinstance(ids, Iterable):
            raise TensorfmtTypeError(
                f"ids= takes a sequence of ids (one per entry), None (the data file's ids) or False (none), not {ids!r} ({type(ids).__name__})"
            )
        id_list = [str(i) for i in ids]
    outs = [os.fsdecode(map_path)] + ([] if rotflip_path is None else [os.fsdecode(rotflip_path)])
    ins = [os.fsdecode(data), os.fsdecode(som)]
    for i, out in enumerate(outs):
        for other in ins + outs[:i]:
            if os.path.abspath(out) == os.path.abspath(other) or (
                os.path.exists(out) and os.path.exists(other) and os.path.samefile(out, other)
            ):
                if other in ins:
                    raise InvalidArgumentError(f"the output {out} is the input {other}; an input is never overwritten")
                raise InvalidArgumentError(f"the two outputs {other} and {out} are one file")
        _refuse_existing(out, overwrite)
    for p in ins:
        with naming(p):
            _native.open_som(p, None, False)
    entries, neurons, n_ids = _native.som_map_files(
        os.fsdecode(data),
        os.fsdecode(som),
        os.fsdecode(map_path),
        None if rotflip_path is None else os.fsdecode(rotflip_path),
        id_list,
        o,
        _progress(progress),
        data_ids=ids is None,
    )
    return {"entries": int(entries), "neurons": int(neurons), "ids": int(n_ids)}


def _chw(a: np.ndarray, what: str) -> Tuple[np.ndarray, int, int]:
    if a.ndim == 2:
        c, d = 1, a.shape[0]
    elif a.ndim == 3:
        c, d = a.shape[0], a.shape[1]
    else:
        raise InvalidArgumentError(f"{what}: expected [d, d] or [channels, d, d], got shape {a.shape}")
    if a.shape[-1] != a.shape[-2]:
        raise InvalidArgumentError(f"{what}: must be square, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype="<f4"), c, d


def _index(flip: Any, angle: float, num_rot: int) -> int:
    """The transform index of a rotation/flip record: ``angle`` must be one of the
    ``num_rot`` angles PINK tries (``k 2 pi / num_rot``: a record of a mapping made
    with another ``num_rot`` names another image), ``flip`` 0 or 1."""
    def number(convert: Any, value: Any) -> Any:
        # A string or an object is the caller's mistake, said in the TensorfmtError
        # hierarchy (int("no") raised a bare ValueError).
        try:
            return convert(value)
        except (TypeError, ValueError, OverflowError):
            return None

    n = number(int, num_rot)
    if isinstance(num_rot, bool) or n is None or not 1 <= n < 2**31:
        raise InvalidArgumentError(f"num_rot {num_rot!r}: expected a whole number >= 1")
    num_rot = n
    f = number(float, flip)
    if isinstance(flip, str) or f not in (0.0, 1.0):
        raise InvalidArgumentError(f"flip {flip!r}: expected 0 or 1 (PINK's flip byte)")
    a = number(float, angle)
    if isinstance(angle, str) or a is None:
        raise InvalidArgumentError(f"angle {angle!r}: expected a number of radians")
    if not np.isfinite(a):
        raise InvalidArgumentError(f"angle {angle!r}: not a finite number of radians (a rotation/flip record's angle is k * 2 pi / num_rot)")
    step = float(np.float32(2 * np.pi) / np.float32(num_rot))
    q = a / step
    k = int(round(q))
    if not np.isfinite(q) or abs(q - k) > 1e-3:
        raise InvalidArgumentError(
            f"angle {angle!r}: not one of the {num_rot} angles k * 2 pi / {num_rot} PINK tries "
            f"(the num_rot of the mapping it comes from?)"
        )
    return k % num_rot + (num_rot if f else 0)


def transform(
    image: Any, flip: Any, angle: float, *, num_rot: int = 360, neuron_dim: Optional[int] = None,
    interpolation: str = "bilinear",
) -> np.ndarray:
    """The image as PINK compares it with a neuron under rotation/flip ``(flip,
    angle)`` (a record of a rotation/flip file; ``angle`` in radians, a multiple of
    ``2 pi / num_rot``): rotated clockwise by ``angle`` (quarter turns exact, the rest
    bilinear, in PINK's float32 arithmetic), mirrored upside down when ``flip``, at
    neuron size (``neuron_dim``, default PINK's: ``int(2 d / sqrt(2) + 1)``, or ``d``
    for one rotation). ``image``: ``[d, d]`` or ``[channels, d, d]``.

    >>> import numpy as np, tensorfmt.som
    >>> img = np.zeros((3, 3), np.float32); img[0, 1] = 1      # top centre
    >>> float(tensorfmt.som.transform(img, False, np.pi / 2, num_rot=4, neuron_dim=3)[1, 2])   # now right
    1.0
    """
    a, c, d = _chw(np.asarray(image), "image")
    num_rot = _args.whole("num_rot", num_rot, 1)
    if not isinstance(interpolation, str):
        raise TensorfmtTypeError(f"interpolation= takes 'bilinear' or 'nearest_neighbor', not {interpolation!r}")
    nd = _args.whole("neuron_dim", neuron_dim, 1) if neuron_dim is not None else (d if num_rot == 1 else int(2 * d / np.sqrt(2) + 1))
    t = _index(flip, angle, num_rot)
    out = _native.som_transform(a.tobytes(), c, d, nd, num_rot, bool(flip), t, interpolation)
    shape = (nd, nd) if a.ndim == 2 else (c, nd, nd)
    return np.frombuffer(out, dtype="<f4").reshape(shape).copy()


def align(neuron: Any, flip: Any, angle: float, *, num_rot: int = 360, image_dim: Optional[int] = None) -> np.ndarray:
    """The inverse of :func:`transform`: ``neuron`` (``[nd, nd]`` or ``[channels, nd,
    nd]``) brought into the frame of an image it matched under ``(flip, angle)``, at
    ``image_dim`` (default ``nd``): mirror undone, quarter turns undone exactly, the
    rest rotated back bilinearly; 0 where the neuron does not reach.

    >>> import numpy as np, tensorfmt.som
    >>> img = np.arange(16, dtype=np.float32).reshape(4, 4)
    >>> n = tensorfmt.som.transform(img, True, np.pi / 2, num_rot=4, neuron_dim=4)
    >>> bool((tensorfmt.som.align(n, True, np.pi / 2, num_rot=4) == img).all())
    True
    """
    a, c, nd = _chw(np.asarray(neuron), "neuron")
    num_rot = _args.whole("num_rot", num_rot, 1)
    d = nd if image_dim is None else _args.whole("image_dim", image_dim, 1)
    t = _index(flip, angle, num_rot)
    out = _native.som_align(a.tobytes(), c, nd, d, num_rot, bool(flip), t)
    shape = (d, d) if a.ndim == 2 else (c, d, d)
    return np.frombuffer(out, dtype="<f4").reshape(shape).copy()


def crop(image: Any, euclidean_distance_dim: int) -> np.ndarray:
    """The central ``euclidean_distance_dim`` square of ``image`` (``[d, d]`` or
    ``[channels, d, d]``), from row and column ``(d - edd) // 2``: the region PINK's
    quadratic distance sums over.

    >>> import numpy as np, tensorfmt.som
    >>> tensorfmt.som.crop(np.arange(16).reshape(4, 4), 2).tolist()
    [[5, 6], [9, 10]]
    """
    a = np.asarray(image)
    e = _args.whole("euclidean_distance_dim", euclidean_distance_dim, 1)
    if a.ndim not in (2, 3) or a.shape[-2] != a.shape[-1]:
        raise InvalidArgumentError(f"crop takes a [d, d] or [channels, d, d] image, not one of shape {a.shape}")
    d = a.shape[-1]
    if e > d:
        raise InvalidArgumentError(f"euclidean_distance_dim {e}: must be 1..={d} for an image of shape {a.shape}")
    b = (d - e) // 2
    return a[..., b : b + e, b : b + e]


def ids(path: PathLike) -> Optional[List[str]]:
    """The catalogue ids a PINK file carries (one ``# id <text>`` comment line per
    entry, written by :func:`write_data` and carried by :func:`map_files` and
    ``tensorfmt som-map``), or None.

    >>> import tensorfmt.som
    >>> tensorfmt.som.ids("testdata/som/mapping/data_16.bin")[:2]
    ['J1000+0000', 'J1037+7919']
    """
    return _native.som_ids(os.fsdecode(path))


def write_data(path: PathLike, data: Any, *, ids: Optional[Sequence[str]] = None, comments: Sequence[str] = ()) -> int:
    """Writes a PINK data file (f32) from ``[entries, d, d]`` or ``[entries, channels,
    d, d]``, with the catalogue ``ids`` (one per entry: ASCII, no line breaks) as ``#
    id`` comment lines, which PINK skips and :func:`map_files` carries into its outputs.
    Returns the number of entries.

    >>> import numpy as np, tensorfmt.som
    >>> tensorfmt.som.write_data("cat.bin", np.zeros((2, 8, 8)), ids=["src-1", "src-2"])
    2
    >>> tensorfmt.som.ids("cat.bin")
    ['src-1', 'src-2']
    """
    a = np.asarray(data, dtype=np.float32)
    if a.ndim not in (3, 4) or a.shape[0] == 0:
        raise InvalidArgumentError(f"data: expected [entries, d, d] or [entries, channels, d, d], got shape {a.shape}")
    return int(
        _native.som_write_data(
            os.fsdecode(path), _f32("data", a), None if ids is None else [str(i) for i in ids], [str(c) for c in comments]
        )
    )


def _distances(distances: Any) -> np.ndarray:
    if _is_path(distances):
        from ._errors import TensorfmtWarning

        with warnings.catch_warnings():
            # PINK labels hexagonal mappings cartesian: expected here, not news.
            warnings.simplefilter("ignore", TensorfmtWarning)
            distances = open(distances).distances  # type: ignore[arg-type]
    d = np.asarray(distances)
    if d.ndim < 2 or 0 in d.shape[1:]:
        raise InvalidArgumentError(f"distances: expected [entries, *map dims] with at least one neuron, got shape {d.shape}")
    return d.reshape(d.shape[0], int(np.prod(d.shape[1:])))


def best_matches(distances: Any) -> np.ndarray:
    """The best-matching neuron (storage order) of every entry of a mapping (a file or
    :func:`map`'s ``distances``): the first smallest distance, NaN ignored, -1 where
    every distance is NaN.

    >>> import tensorfmt.som
    >>> m = "testdata/som/mapping/map_hex5_36_flip.bin"
    >>> tensorfmt.som.best_matches(m)[:5].tolist()
    [18, 14, 10, 15, 15]
    >>> int(tensorfmt.som.counts(m).sum())
    20
    """
    d = _distances(distances)
    filled = np.where(np.isnan(d), np.inf, d)
    best = np.argmin(filled, axis=1).astype(np.int64)
    best[np.isnan(d).all(axis=1)] = -1
    return best


def counts(distances: Any) -> np.ndarray:
    """How many entries each neuron best matches (storage order, ``[neurons]``)."""
    d = _distances(distances)
    b = best_matches(d)
    return np.bincount(b[b >= 0], minlength=d.shape[1]).astype(np.int64)


def neuron_entries(distances: Any, neuron: int) -> Tuple[np.ndarray, np.ndarray]:
    """The entries whose best match is ``neuron``, closest first: ``(entries,
    distances)`` (ties keep entry order).

    >>> import tensorfmt.som
    >>> e, dist = tensorfmt.som.neuron_entries("testdata/som/mapping/map_hex5_36_flip.bin", 0)
    >>> bool((dist[:-1] <= dist[1:]).all())
    True
    """
    d = _distances(distances)
    neuron = _args.whole("neuron", neuron, 0)
    if neuron >= d.shape[1]:
        raise InvalidArgumentError(f"neuron {neuron}: the map has {d.shape[1]} neurons")
    entries = np.flatnonzero(best_matches(d) == neuron)
    values = d[entries, neuron]
    order = np.argsort(values, kind="stable")
    return entries[order], values[order]


def worst_matches(distances: Any, count: int = 10) -> Tuple[np.ndarray, np.ndarray]:
    """The ``count`` entries farthest from their best-matching neuron, worst first:
    ``(entries, distances to their best match)`` (the outliers a SOM does not
    describe; ties keep entry order).

    >>> import tensorfmt.som
    >>> e, dist = tensorfmt.som.worst_matches("testdata/som/mapping/map_hex5_36_flip.bin", 3)
    >>> len(e), bool(dist[0] >= dist[-1])
    (3, True)
    """
    d = _distances(distances)
    b = best_matches(d)
    valid = np.flatnonzero(b >= 0)
    best = d[valid, b[valid]]
    order = np.argsort(-best, kind="stable")[: _args.whole("count", count, 0)]
    return valid[order], best[order]


__all__ = [
    "open",
    "SomFile",
    "map",
    "map_files",
    "geometry",
    "transform",
    "align",
    "crop",
    "ids",
    "write_data",
    "best_matches",
    "counts",
    "neuron_entries",
    "worst_matches",
]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
