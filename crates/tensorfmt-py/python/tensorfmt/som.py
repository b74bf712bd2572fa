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
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _native
from ._api import open as _open_document
from ._errors import InvalidArgumentError

PathLike = Union[str, "os.PathLike[str]"]


class SomFile:
    """A PINK file opened with the typed reader (see :func:`open`)."""

    def __init__(self, path: PathLike, *, kind: Optional[str] = None, strict: bool = False) -> None:
        self.path = os.fspath(path)
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

    def rotflip(self, entry: int, neuron: int, numrot: int = 360) -> Tuple[bool, float, int]:
        """Rotation/flip files: ``(flipped, angle, transform index)`` of ``entry`` for
        ``neuron``, the index counted for ``numrot`` rotations as PINK does."""
        flipped, angle, index = self._f.rotflip(int(entry), int(neuron), int(numrot))
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


__all__ = ["open", "SomFile"]
