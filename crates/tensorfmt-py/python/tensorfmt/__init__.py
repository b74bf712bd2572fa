"""tensorfmt: the tensor files of older ML systems as zero-copy numpy arrays.

Reads and writes PetaVision PVP files, PINK self-organising-map binaries, primitiv
model files and Caffe models / mean files / solver states, plus npy, npz and
safetensors:

>>> import tensorfmt
>>> doc = tensorfmt.open("testdata/pvp/dense_f32.pvp")  # lazy, mapped; a Mapping of arrays
>>> frames = doc["values"]                  # [frames, ny, nx, nf], a view of the file
>>> tensorfmt.save("v1.safetensors", {"values": frames})
>>> tensorfmt.convert("testdata/caffe/v2_tiny.caffemodel", "net.npz")
['conv1/0', 'conv1/1', 'ip/0']

See :func:`open`, :func:`load`, :func:`save`, :func:`convert`, :func:`diff`,
:func:`validate`, the per-format modules :mod:`tensorfmt.pvp` (frames, streaming
writers), :mod:`tensorfmt.som`, :mod:`tensorfmt.primitiv` and :mod:`tensorfmt.caffe`
(what a dict of arrays cannot say), Pylearn2 spaces in
:mod:`tensorfmt.spaces`, pictures in :mod:`tensorfmt.plot` (matplotlib), and the optional
:mod:`tensorfmt.dask` (``pip install tensorfmt[dask]``).
"""

from . import _native, caffe, primitiv, pvp, som, spaces
from ._api import (
    DiffResult,
    Document,
    TensorDiff,
    TensorInfo,
    ValidationReport,
    convert,
    detect,
    diff,
    formats,
    load,
    open,
    save,
    validate,
)
from ._errors import (
    _guard_native,
    _guard_public,
    ClosedError,
    FormatError,
    InputChangedError,
    InvalidArgumentError,
    LimitError,
    TensorfmtError,
    TensorfmtFileExistsError,
    TensorfmtFileNotFoundError,
    TensorfmtIOError,
    TensorNotFoundError,
    TensorfmtIndexError,
    TensorfmtOverflowError,
    TensorfmtTypeError,
    TensorfmtWarning,
    UnsupportedError,
)

__version__ = _native.__version__

# Builtin errors raised while the native module converts arguments become
# TensorfmtError subclasses (keeping their builtin bases).
_guard_native(_native)

__all__ = [
    "open",
    "load",
    "save",
    "convert",
    "diff",
    "validate",
    "formats",
    "detect",
    "Document",
    "TensorInfo",
    "DiffResult",
    "TensorDiff",
    "ValidationReport",
    "TensorfmtError",
    "FormatError",
    "LimitError",
    "UnsupportedError",
    "InvalidArgumentError",
    "TensorNotFoundError",
    "ClosedError",
    "TensorfmtIOError",
    "TensorfmtFileNotFoundError",
    "TensorfmtFileExistsError",
    "InputChangedError",
    "TensorfmtTypeError",
    "TensorfmtIndexError",
    "TensorfmtOverflowError",
    "TensorfmtWarning",
]

# So are the errors Python raises on a bad argument before any tensorfmt code runs.
_guard_public(globals())
