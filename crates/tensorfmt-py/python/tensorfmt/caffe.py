"""Caffe files with what a dict of arrays cannot say: layers with their names and
types, blobs with Caffe's full shape, the legacy 4-D dims (num, channels, height,
width) of old files, and ``diff`` beside ``data``; solver states with their counters.

:func:`open` reads a ``.caffemodel`` (V0, V1, V2), a mean file (``.binaryproto``), a
BlobProtoVector or a ``.solverstate``; the arrays are zero-copy views of the mapped file
where Caffe stores them packed (one bulk copy otherwise):

>>> import tensorfmt.caffe
>>> net = tensorfmt.caffe.open("testdata/caffe/v2_tiny.caffemodel")
>>> for layer in net.layers:
...     print(layer.name, layer.type, [b.shape for b in layer.blobs])
conv1 Convolution [(2, 1, 2, 2), (2,)]
ip InnerProduct [(3, 2)]
>>> net["conv1"].blobs[0].data.shape     # read-only
(2, 1, 2, 2)
>>> mean = tensorfmt.caffe.open("testdata/caffe/mean_legacy.binaryproto").blobs[0]
>>> mean.legacy, mean.data.shape         # (num, channels, height, width)
((1, 3, 2, 2), (1, 3, 2, 2))

For a flat ``{"conv1/0": array}`` dict use :func:`tensorfmt.load`.
"""

from __future__ import annotations

import functools
import numbers
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._text import summary as _summary
from ._args import flag as _flag, flags as _flags
from ._errors import InvalidArgumentError, TensorfmtTypeError, TensorNotFoundError, naming, python_words, warn, warn_leniency

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Blob:
    """One blob. ``shape`` is Caffe's (``data.shape``; the flat dict of
    :func:`tensorfmt.load` squeezes legacy ``(1, 1, M, N)`` blobs to ``[M, N]`` as
    modern Caffe does); ``legacy`` the ``(num, channels, height, width)`` fields when
    the file uses them; ``source`` the field the values came from (``data``,
    ``double_data``, ``raw_data``)."""

    shape: Tuple[int, ...]
    legacy: Optional[Tuple[int, int, int, int]]
    source: str
    data: np.ndarray
    diff: Optional[np.ndarray]

    def __repr__(self) -> str:
        legacy = f", legacy={self.legacy}" if self.legacy is not None else ""
        diff = f", diff={_summary(self.diff)}" if self.diff is not None else ""
        return f"Blob({_summary(self.data)}{legacy}, source={self.source!r}{diff})"


@functools.lru_cache(maxsize=None)
def _fields(type_name: str) -> Dict[str, Tuple[bool, Any, Optional[str]]]:
    """``{field: (repeated, default, message type)}`` of a caffe.proto message."""
    return {name: (repeated, default, mtype) for name, repeated, default, mtype in _native.caffe_message_fields(type_name)}


def _wrap(value: Any) -> Any:
    if isinstance(value, tuple):
        return Message(value[0], value[1])
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class Message:
    """A message of Caffe's schema (``caffe.proto``) as ``caffe_pb2`` shows it: every
    field of its type is an attribute. A field the file does not set reads as the
    schema's default (``group`` 1, ``bias_term`` True, ``eps`` 1e-5), a repeated field
    as a list (empty when absent), a nested message as a ``Message`` (empty when
    absent), an enum as its number (``pooling_param.pool == 0`` is MAX). As in
    ``caffe_pb2``, ``HasField(name)`` says whether the file sets a field and
    ``ListFields()`` lists ``(name, value)`` of those it sets; ``to_dict()`` gives them
    as nested dicts. Read-only.

    >>> import tensorfmt.caffe
    >>> conv = tensorfmt.caffe.open("testdata/caffe/v2_tiny.caffemodel")["conv1"].params
    >>> conv.type, conv.bottom, conv.convolution_param
    ('Convolution', ['data'], ConvolutionParameter(num_output=2))
    >>> c = conv.convolution_param       # unset fields: caffe.proto's defaults
    >>> c.num_output, c.group, c.bias_term, c.stride, c.HasField("group")
    (2, 1, True, [], False)
    >>> conv.HasField("batch_norm_param"), conv.batch_norm_param.eps   # float32 1e-5, as caffe_pb2
    (False, 9.999999747378752e-06)
    """

    __slots__ = ("_type", "_set")

    _type: str
    _set: Dict[str, Any]

    def __init__(self, type_name: str, fields: Dict[str, Any]) -> None:
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_set", {k: _wrap(v) for k, v in fields.items()})

    @property
    def type_name(self) -> str:
        """The message's full name (``caffe.ConvolutionParameter``)."""
        return self._type

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        spec = _fields(self._type).get(name)
        if spec is None:
            raise AttributeError(f"{self._type} has no field {name!r}")
        if name in self._set:
            value = self._set[name]
            return list(value) if isinstance(value, list) else value
        repeated, default, mtype = spec
        if repeated:
            return []
        if mtype is not None:
            return Message(mtype, {})
        return default

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._type} is read-only")

    def __dir__(self) -> List[str]:
        return sorted(set(_fields(self._type)) | {"HasField", "ListFields", "to_dict", "type_name"})

    def HasField(self, name: str) -> bool:  # noqa: N802 - caffe_pb2's name
        """Whether the file sets field ``name`` (ValueError for a name the type lacks)."""
        if name not in _fields(self._type):
            raise InvalidArgumentError(f"{self._type} has no field {name!r}")
        return name in self._set

    def ListFields(self) -> List[Tuple[str, Any]]:  # noqa: N802 - caffe_pb2's name
        """``(name, value)`` of every field the file sets, in field-number order."""
        return [(k, getattr(self, k)) for k in self._set]

    def to_dict(self) -> Dict[str, Any]:
        """The fields the file sets, nested messages as dicts."""

        def plain(v: Any) -> Any:
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v

        return {k: plain(v) for k, v in self._set.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and self._type == other._type and self._set == other._set

    def __hash__(self) -> int:
        return hash(self._type)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._set.items())
        return f"{self._type.rsplit('.', 1)[-1]}({inner})"


@dataclass(frozen=True)
class Layer:
    """One layer of a net: its ``name``, ``type`` (V1/V0 enum types given as the
    modern strings), weight ``blobs`` and ``params``: the layer's fields other than
    its blobs as a V2 ``LayerParameter`` :class:`Message` (``params.convolution_param
    .stride``, ``params.inner_product_param.transpose``, ``params.bottom``); V1 and
    V0 layers are upgraded to V2 as Caffe does, so a V1 file's ``convolution_param``
    reads the same way. ``None`` for a V0 ``padding`` layer (folded into the layer it
    feeds, whose ``pad`` it becomes)."""

    name: str
    type: str
    blobs: List[Blob]
    _params: Optional[Tuple[str, Dict[str, Any]]] = field(default=None, repr=False, compare=False)
    _params_error: Optional[BaseException] = field(default=None, repr=False, compare=False)

    @property
    def params(self) -> Optional[Message]:
        """The layer's parameters (raises the :class:`FormatError` or
        :class:`LimitError` of a layer whose parameters do not decode)."""
        if self._params_error is not None:
            raise self._params_error
        return None if self._params is None else Message(*self._params)

    def __repr__(self) -> str:
        blobs = ", ".join(_summary(b.data) for b in self.blobs)
        return f"Layer({self.name!r}, {self.type!r}, blobs=[{blobs}])"


def _blob(d: Dict[str, Any]) -> Blob:
    diff = d["diff"]
    return Blob(
        shape=tuple(d["shape"]),
        legacy=None if d["legacy"] is None else tuple(d["legacy"]),
        source=d["source"],
        data=np.asarray(d["data"]),
        diff=None if diff is None else np.asarray(diff),
    )


class CaffeFile:
    """A Caffe file opened with the typed reader (see :func:`open`).

    ``kind`` is ``caffemodel``, ``binaryproto``, ``blobprotovector`` or
    ``solverstate``. Models have ``name``, ``version`` and ``layers`` (also by name:
    ``f["conv1"]``); mean files and BlobProtoVectors ``blobs``; solver states ``iter``,
    ``learned_net``, ``current_step`` and ``history`` (blobs).
    """

    def close(self) -> None:
        """Nothing to let go of (the contents are read at open); for ``with`` blocks, as
        the other typed files have."""

    def __enter__(self) -> "CaffeFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __init__(self, path: PathLike, *, kind: Optional[str] = None, strict: bool = False) -> None:
        self.path = os.fsdecode(path)
        self._strict = _flag("strict", strict)
        with naming(self.path):
            d = _native.caffe_contents(self.path, kind, strict)
        self.kind: str = d["kind"]
        self.name: Optional[str] = d.get("name")
        self.version: Optional[str] = d.get("version")
        self.warnings: List[str] = list(d.get("warnings", []))
        self.layers: List[Layer] = [
            Layer(l["name"], l["type"], [_blob(b) for b in l["blobs"]], l.get("params"), l.get("params_error"))
            for l in d.get("layers", [])
        ]
        self.blobs: List[Blob] = [_blob(b) for b in d.get("blobs", [])]
        # Solver states: absent fields read as their proto2 defaults, as caffe_pb2 does
        # (old solvers did not write current_step); None for the other kinds.
        state = self.kind == "solverstate"
        self.iter: Optional[int] = (d["iter"] or 0) if state else None
        self.learned_net: Optional[str] = (d["learned_net"] or "") if state else None
        self.current_step: Optional[int] = (d["current_step"] or 0) if state else None
        self.history: List[Blob] = [_blob(b) for b in d.get("history", [])]

    def __getitem__(self, name: str) -> Layer:
        """The first layer called ``name`` (through an index built on first use, so
        looking every layer up by name stays linear in the layers)."""
        key = (id(self.layers), len(self.layers))
        cached = self.__dict__.get("_by_name")
        if cached is None or cached[0] != key:
            by_name: Dict[str, Layer] = {}
            for layer in self.layers:
                by_name.setdefault(layer.name, layer)
            cached = self._by_name = (key, by_name)
        try:
            return cached[1][name]
        except KeyError:
            err = TensorNotFoundError(f"{self.path}: no layer named {name!r}")
            err.name = name
            raise err from None

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def weights(self) -> Dict[str, List[np.ndarray]]:
        """``{layer name: [blob data, ...]}`` for the layers that have blobs (the
        ``net.params`` of pycaffe; the first layer of a name, as Caffe copies weights),
        shaped as :func:`tensorfmt.load` shapes them (a legacy V1 bias ``(1, 1, 1, 32)``
        is ``(32,)`` in both).

        >>> import tensorfmt, tensorfmt.caffe
        >>> net = tensorfmt.caffe.open("testdata/caffe/v1_legacy.caffemodel")
        >>> flat = tensorfmt.load("testdata/caffe/v1_legacy.caffemodel")
        >>> all(w.shape == flat[f"{name}/{i}"].shape
        ...     for name, ws in net.weights().items() for i, w in enumerate(ws))
        True
        """
        import warnings

        from ._api import open as _open_document
        from ._errors import TensorfmtWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TensorfmtWarning)  # open() said them already
            with _open_document(self.path, format="caffe", kind=self.kind, strict=self._strict) as doc:
                shapes = {i.name: i.shape for i in doc.tensors}
        out: Dict[str, List[np.ndarray]] = {}
        for layer in self.layers:
            if layer.blobs and layer.name not in out:
                out[layer.name] = [
                    b.data.reshape(shapes.get(f"{layer.name}/{i}", b.data.shape)) for i, b in enumerate(layer.blobs)
                ]
        return out

    def __repr__(self) -> str:
        what = {
            "caffemodel": f"layers={len(self.layers)}",
            "solverstate": f"iter={self.iter} history={len(self.history)}",
        }.get(self.kind, f"blobs={len(self.blobs)}")
        return f"<tensorfmt.caffe.CaffeFile {self.kind} {self.path} {what}>"


def open(path: PathLike, *, kind: Optional[str] = None, strict: bool = False) -> CaffeFile:  # noqa: A001
    """Opens a Caffe file. ``kind`` forces the reading of a file whose kind the bytes
    do not tell (``caffemodel``, ``binaryproto``, ``blobprotovector``,
    ``solverstate``); ``strict`` refuses nets mixing ``layer`` and ``layers`` as Caffe
    does (by default their ``layers`` are read, as OpenCV did, with a warning).

    >>> import numpy as np, tensorfmt, tensorfmt.caffe
    >>> tensorfmt.save("n.caffemodel", {"ip/0": np.ones((3, 2), np.float32)})
    >>> net = tensorfmt.caffe.open("n.caffemodel")
    >>> net.kind, [l.name for l in net.layers], net["ip"].blobs[0].shape
    ('caffemodel', ['ip'], (3, 2))
    """
    f = CaffeFile(path, kind=kind, strict=strict)
    warn_leniency(f.path, f.warnings)
    return f


def _shapes(input_shape: Optional[Dict[str, Sequence[int]]]) -> Optional[List[Tuple[str, List[int]]]]:
    """``input_shape`` checked as the CLI's ``--input-shape`` is: a name and positive
    whole dimensions (240.5 or True is not silently a dimension)."""
    if input_shape is None:
        return None
    if not isinstance(input_shape, Mapping):
        raise TensorfmtTypeError(f"input_shape is a dict {{name: (d, ...)}}, not {type(input_shape).__name__}")
    out = []
    for k, v in input_shape.items():
        listed = isinstance(v, np.ndarray) or (isinstance(v, Sequence) and not isinstance(v, (str, bytes)))
        dims: List[Any] = list(v) if listed else []
        ok = (
            isinstance(k, str)
            and bool(k)
            and bool(dims)
            and all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) > 0 for d in dims)
        )
        if not ok:
            raise InvalidArgumentError(f"input_shape {k!r}: {v!r}: needs a name and positive whole dimensions (e.g. (1, 3, 224, 224))")
        out.append((k, [int(d) for d in dims]))
    return out


def _opt(p: Optional[PathLike]) -> Optional[str]:
    return None if p is None else os.fsdecode(p)


def to_onnx(
    caffemodel: PathLike,
    prototxt: PathLike,
    out: PathLike,
    *,
    proto: Optional[PathLike] = None,
    input_shape: Optional[Dict[str, Sequence[int]]] = None,
    outputs: Union[str, Sequence[str], None] = None,
    dynamic_batch: bool = False,
    strict: bool = False,
    stop_before: Union[str, Sequence[str], None] = None,
    rpn: Optional[Mapping[str, Union[int, float]]] = None,
    external_data: bool = False,
    overwrite: bool = True,
) -> Dict[str, Any]:
    """Converts a Caffe net (weights + deploy prototxt) to an ONNX model (opset 17),
    written atomically to ``out``; the same as ``tensorfmt convert MODEL.caffemodel
    OUT.onnx --prototxt DEPLOY.prototxt``.

    ``proto``: a fork's ``caffe.proto`` for prototxts with fields the builtin schema
    lacks (the deploy fields of SSD, OpenCV, Faster R-CNN, R-FCN, DeepLab, PSPNet,
    SegNet, ENet, ShuffleNet and the YOLOv2 ports are built in); ``input_shape``:
    ``{"data": (1, 3, 224, 224)}`` replaces the prototxt's shapes; ``outputs``: blob
    names (or one name) to expose instead of the net's outputs; ``dynamic_batch``: a symbolic batch dimension; ``stop_before``: layer names or types
    (``"DetectionOutput"``) the graph stops before, with every layer that reads what
    they compute: the blobs they read become the outputs (for runtimes without
    NonMaxSuppression, or NMS of your own); ``rpn``: Faster R-CNN / R-FCN test-time
    RPN constants of the proposal layers, ``{"post_nms_top_n": 100}``
    (``pre_nms_top_n``, ``post_nms_top_n``, ``nms_thresh``, ``min_size``; default: the
    prototxt's ``proposal_param``, or py-faster-rcnn's 6000, 300, 0.7, 16);
    ``external_data``: the weights in ``OUT.onnx.data`` beside the model (ONNX's external
    data, as ``onnx.save_model(..., save_as_external_data=True)`` writes it; always so
    past protobuf's 2 GiB). A net with layers that have no lowering raises (listing
    every one of them) and writes nothing. ``out`` must be named ``.onnx``; an existing
    one is replaced unless ``overwrite=False`` (as :func:`tensorfmt.save`), an input
    never. Errors are those of :func:`tensorfmt.save` (a missing folder is a
    ``FileNotFoundError``); each of ``warnings`` is also emitted as a
    :class:`tensorfmt.TensorfmtWarning`.

    Returns ``{"inputs", "outputs", "shapes", "stopped_before", "warnings", "nodes"}``
    (``stopped_before``: the ``(name, type)`` of every layer cut by ``stop_before``;
    ``shapes``: Caffe's shapes, for a DetectionOutput top the bound ``[1, 1,
    keep_top_k, 7]`` of its run-time row count)::

        >>> import numpy as np, onnxruntime as ort, tensorfmt.caffe
        >>> net = "testdata/nets/lenet_tiny.prototxt"
        >>> tensorfmt.caffe.write_random_weights(net, "lenet.caffemodel")   # stand-in weights
        ['conv1', 'ip1']
        >>> info = tensorfmt.caffe.to_onnx("lenet.caffemodel", net, "lenet.onnx")
        >>> info["inputs"], info["outputs"], info["shapes"]["prob"]
        (['data'], ['prob'], [1, 10])
        >>> sess = ort.InferenceSession("lenet.onnx")
        >>> (prob,) = sess.run(None, {"data": np.zeros((1, 1, 28, 28), np.float32)})
        >>> prob.shape
        (1, 10)
    """
    from ._api import _refuse_existing

    _flags(dynamic_batch=dynamic_batch, strict=strict, external_data=external_data)
    dst = os.fsdecode(out)
    if os.path.splitext(dst)[1].lower() != ".onnx":
        raise InvalidArgumentError(f"the output is an ONNX model; name it .onnx, not {dst}")
    _refuse_existing(dst, overwrite, {"external_data": "true"} if external_data else None)
    # An input as the output (or as its .data file) is refused by the lowering itself.
    result = _native.caffe_to_onnx(
        os.fsdecode(caffemodel),
        os.fsdecode(prototxt),
        dst,
        proto=_opt(proto),
        input_shape=_shapes(input_shape),
        outputs=None if outputs is None else [outputs] if isinstance(outputs, str) else [str(o) for o in outputs],
        dynamic_batch=dynamic_batch,
        strict=strict,
        stop_before=None if stop_before is None else [stop_before] if isinstance(stop_before, str) else [str(s) for s in stop_before],
        rpn=None if rpn is None else [(str(k), _rpn_value(k, v)) for k, v in rpn.items()],
        external_data=external_data,
    )
    result["warnings"] = [python_words(w) for w in result["warnings"]]
    for w in result["warnings"]:
        warn(f"{dst}: {w}")
    return result


def _rpn_value(key: Any, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorfmtTypeError(f"rpn[{key!r}]: expected a number, got {value!r}")
    return str(int(value)) if isinstance(value, numbers.Integral) else repr(float(value))


def state_dict(
    caffemodel: PathLike,
    prototxt: Optional[PathLike] = None,
    *,
    proto: Optional[PathLike] = None,
    naming: str = "torch",
) -> Dict[str, np.ndarray]:
    """A caffemodel's blobs under PyTorch parameter names, ready for
    ``module.load_state_dict({k: torch.from_numpy(v.copy()) ...}, strict=True)``.

    ``naming="torch"``: ``conv1.weight``/``conv1.bias`` (Convolution, Deconvolution,
    InnerProduct, Scale), ``prelu.weight``; BatchNorm becomes ``running_mean`` and
    ``running_var`` (divided by Caffe's scale factor), ``num_batches_tracked`` and the
    ``weight``/``bias`` of the Scale layer its output flows into (needs ``prototxt``;
    ones and zeros when no Scale follows). Characters torch module names cannot hold
    become ``_``. ``naming="caffe"``: ``conv1/0``, ``conv1/1`` as stored. Arrays are
    read-only views where the file allows.
    """
    pairs = _native.caffe_state_dict(os.fsdecode(caffemodel), _opt(prototxt), proto=_opt(proto), naming=naming)
    return {name: np.asarray(a) for name, a in pairs}


def write_random_weights(
    prototxt: PathLike,
    out: PathLike,
    *,
    seed: int = 0,
    proto: Optional[PathLike] = None,
    input_shape: Optional[Dict[str, Sequence[int]]] = None,
) -> List[str]:
    """Writes a caffemodel with seeded random weights for every layer of ``prototxt``
    that has parameters (shapes by Caffe's own rules; BatchNorm variances positive,
    scale factor 1). For testing converters and runtimes without the real weights.
    Returns the names of the layers written."""
    return list(
        _native.caffe_random_weights(
            os.fsdecode(prototxt), os.fsdecode(out), seed=seed, proto=_opt(proto), input_shape=_shapes(input_shape)
        )
    )


def supported_layers() -> List[str]:
    """The Caffe layer types :func:`to_onnx` lowers. A type may still be refused for its
    parameters (STOCHASTIC pooling, ``use_global_stats: false``, DetectionOutput's
    ``eta < 1``, ...): the error lists every such layer.

    >>> import tensorfmt.caffe
    >>> "Convolution" in tensorfmt.caffe.supported_layers()
    True
    """
    return list(_native.caffe_supported_layers())


__all__ = ["open", "CaffeFile", "Layer", "Blob", "Message", "to_onnx", "state_dict", "write_random_weights", "supported_layers"]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
