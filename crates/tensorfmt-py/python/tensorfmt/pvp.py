"""PetaVision PVP files, frame by frame.

:func:`open` gives a :class:`PvpFile` whose frames are read lazily: dense frames are
zero-copy views of the mapped file (``movie()`` is the whole file as one strided view),
sparse frames come as active-neuron indices and values (``to_scipy()`` gives CSR), and
weight frames carry their patch geometry::

    import tensorfmt.pvp
    f = tensorfmt.pvp.open("output/a1_V1.pvp")
    for frame in f:                      # lazy
        print(frame.time, frame.values.mean())
    csr = tensorfmt.pvp.open("output/a2_S1.pvp").to_scipy()    # sparse files

Writing: :class:`DenseWriter`, :class:`SparseWriter` and :class:`WeightsWriter` (see
their docs), or :func:`tensorfmt.save` with ``to="pvp:dense"`` / ``"pvp:sparse"`` /
``"pvp:weights"``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _native
from ._errors import InvalidArgumentError

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


class PvpFile:
    """A PVP file opened with the typed reader (see :func:`open`)."""

    def __init__(self, path: PathLike, *, strict: bool = False) -> None:
        self.path = os.fspath(path)
        self._f = _native.open_pvp(self.path, strict)
        self._len: Optional[int] = None

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
        """What the lenient reader accepted (e.g. a crash-truncated last frame)."""
        return list(self._f.warnings)

    def __len__(self) -> int:
        if self._len is None:
            self._len = self._f.frame_count()
        return self._len

    def _index(self, k: int) -> int:
        n = len(self)
        if not -n <= k < n:
            raise IndexError(f"frame {k} out of range (the file has {n})")
        return k % n

    def frame(self, k: int) -> Union[Frame, WeightFrame]:
        """Frame ``k`` (negative counts from the end)."""
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

    def __getitem__(self, k: int) -> Union[Frame, WeightFrame]:
        return self.frame(k)

    def __iter__(self) -> Iterator[Union[Frame, WeightFrame]]:
        for k in range(len(self)):
            yield self.frame(k)

    def times(self) -> np.ndarray:
        """Every frame's time."""
        return np.asarray(self._f.times(), dtype=np.float64)

    def movie(self, start: int = 0, stop: Optional[int] = None) -> np.ndarray:
        """Dense files: frames ``start..stop`` as one ``[frames, ny, nx, nf]`` array, a
        strided zero-copy view of the file (one bulk copy for multi-process files)."""
        if self.kind != "dense":
            raise InvalidArgumentError(f"{self.path} is {self.kind}; movie() is for dense files")
        stop = len(self) if stop is None else stop
        return np.asarray(self._f.dense_frames(start, stop))

    def csr(self, start: int = 0, stop: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Sparse files: frames ``start..stop`` as ``(indptr, indices, data, width)``."""
        if self.kind != "sparse":
            raise InvalidArgumentError(f"{self.path} is {self.kind}; csr() is for sparse files")
        stop = len(self) if stop is None else stop
        indptr, indices, data, width = self._f.csr(start, stop)
        return np.asarray(indptr), np.asarray(indices), np.asarray(data), width

    def to_scipy(self, start: int = 0, stop: Optional[int] = None) -> Any:
        """Sparse files: frames as a ``scipy.sparse.csr_array`` ``[frames, nx*ny*nf]``
        (needs scipy)."""
        try:
            import scipy.sparse
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("to_scipy() needs scipy: pip install scipy") from e
        indptr, indices, data, width = self.csr(start, stop)
        make = getattr(scipy.sparse, "csr_array", scipy.sparse.csr_matrix)
        return make((data, indices, indptr), shape=(len(indptr) - 1, width))

    @property
    def weight_geometry(self) -> Dict[str, Any]:
        """Weight files: ``shared``, ``nxp``, ``nyp``, ``nfp``, ``numpatches``, ``arbors``,
        ``patch_header_bytes`` (8, or 4 in legacy files)."""
        shared, nxp, nyp, nfp, numpatches, arbors, phb = self._f.weight_geometry()
        return dict(
            shared=shared, nxp=nxp, nyp=nyp, nfp=nfp, numpatches=numpatches, arbors=arbors, patch_header_bytes=phb
        )

    def __repr__(self) -> str:
        return f"<tensorfmt.pvp.PvpFile {self.kind} {self.path} frames={len(self)} shape={self.shape}>"


def open(path: PathLike, *, strict: bool = False) -> PvpFile:  # noqa: A001
    """Opens a PVP file for frame-by-frame access.

    >>> import tensorfmt, tensorfmt.pvp, numpy as np
    >>> tensorfmt.save("/tmp/m.pvp", {"values": np.ones((2, 3, 4, 1), np.float32)}, overwrite=True)
    >>> f = tensorfmt.pvp.open("/tmp/m.pvp")
    >>> len(f), f.shape, f[1].values.shape
    (2, (3, 4, 1), (3, 4, 1))
    """
    return PvpFile(path, strict=strict)
