"""primitiv files with their structure: models as nested parameters (``enc.w``,
``dec.attn.b`` ...) each with its value and optimizer statistics (``Adam.m1``...),
single parameters, tensors with their batch size, shapes, and optimizer states with
their configuration:

>>> import tensorfmt.primitiv
>>> m = tensorfmt.primitiv.open("testdata/primitiv/model_nested_adam.data")
>>> sorted(m.parameters)[:3]
['b', 'dec.attn.a_parameter_name_that_is_exactly_40_char', 'dec.w']
>>> p = m.parameters["dec.w"]          # the value is a read-only view, in primitiv's logical shape
>>> p.value.shape, sorted(p.stats)
((2, 2), ['Adam.m1', 'Adam.m2'])
>>> m.tree()["dec"]["w"] is p          # the same Parameter, nested as in the Model
True
>>> tensorfmt.primitiv.open("testdata/primitiv/optimizer_adam.data").optimizer.name
'Adam'

Values come in primitiv's logical shape ``[d0, d1, ...]`` with a trailing batch axis
when the batch is above 1 (:attr:`Parameter.batch` tells).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _native
from ._api import Document
from ._api import open as _open_document
from ._errors import InvalidArgumentError
from ._text import summary as _summary

PathLike = Union[str, "os.PathLike[str]"]

_SHAPE = re.compile(r"^\[([0-9, ]*)\]x([0-9]+)$")


def _shape(text: Any) -> Tuple[Tuple[int, ...], int]:
    """``"[2, 3]x1"`` (how the header describes a tensor) as ``((2, 3), 1)``."""
    m = _SHAPE.match(str(text))
    if not m:
        raise InvalidArgumentError(f"unexpected primitiv shape description {text!r}")
    dims = tuple(int(d) for d in m.group(1).split(",") if d.strip())
    return dims, int(m.group(2))


@dataclass(frozen=True)
class Parameter:
    """One parameter: its ``value``, its optimizer ``stats`` by name, and the primitiv
    shape (``dims`` and ``batch``) of the value and of each stat."""

    name: str
    value: np.ndarray
    dims: Tuple[int, ...]
    batch: int
    stats: Dict[str, np.ndarray] = field(default_factory=dict)
    stat_shapes: Dict[str, Tuple[Tuple[int, ...], int]] = field(default_factory=dict)

    def __repr__(self) -> str:
        stats = ", ".join(f"{k}: {_summary(v)}" for k, v in self.stats.items())
        return (
            f"Parameter({self.name!r}, value={_summary(self.value)}, dims={self.dims}, "
            f"batch={self.batch}, stats={{{stats}}})"
        )


@dataclass(frozen=True)
class Optimizer:
    """An optimizer state: the optimizer's ``name`` (e.g. ``Adam``) and its
    configuration values by key (``Optimizer.epoch``, ``Adam.alpha``...)."""

    name: Optional[str]
    uint_configs: Dict[str, int]
    float_configs: Dict[str, float]


def _parameter(
    doc: Document, name: str, value: str, shape: str, stats: List[Tuple[str, str, str]]
) -> Parameter:
    """A parameter from where the document exports it: ``value`` is the export name of
    its value, each stat ``(key, export name, shape)``. Stats are keyed by their own
    key, whatever it is (a stat may be called ``value``; a parameter file exports it
    as ``value~2``, next to the value's ``value``)."""
    dims, batch = _shape(shape)
    return Parameter(
        name=name,
        value=doc[value],
        dims=dims,
        batch=batch,
        stats={k: doc[n] for k, n, _ in stats},
        stat_shapes={k: _shape(s) for k, _, s in stats},
    )


def _model_path(name: str) -> List[str]:
    """The keys of a model export name: split at unescaped dots, escapes undone
    (``a\\.b`` is the one key ``a.b``; ``\\\\``, ``\\/`` and ``\\xNN`` likewise; see the
    primitiv crate's ``Model::export_name``)."""
    keys: List[str] = []
    cur: List[str] = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "\\" and i + 1 < len(name):
            nxt = name[i + 1]
            if nxt == "x" and i + 3 < len(name):
                cur.append(chr(int(name[i + 2 : i + 4], 16)))
                i += 4
                continue
            cur.append(nxt)
            i += 2
            continue
        if c == ".":
            keys.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    keys.append("".join(cur))
    return keys


class PrimitivFile:
    """A primitiv file opened with its structure (see :func:`open`).

    ``kind`` is ``model``, ``parameter``, ``tensor``, ``shape`` or ``optimizer``:
    models have :attr:`parameters` (and :meth:`tree`), parameter files
    :attr:`parameter`, tensor files :attr:`tensor`, :attr:`dims` and :attr:`batch`,
    shape files :attr:`dims` and :attr:`batch`, optimizer files :attr:`optimizer`.
    """

    def __init__(self, path: PathLike, *, strict: bool = False) -> None:
        self.path = os.fsdecode(path)
        self._doc = _open_document(self.path, format="primitiv", strict=strict)
        h = self._doc.header
        self.version: str = str(h.get("version"))
        self.kind: str = self._doc.kind.split()[0]
        self.parameters: Dict[str, Parameter] = {}
        self.parameter: Optional[Parameter] = None
        self.tensor: Optional[np.ndarray] = None
        self.dims: Optional[Tuple[int, ...]] = None
        self.batch: Optional[int] = None
        self.optimizer: Optional[Optimizer] = None
        if self.kind in ("model", "parameter"):
            # Every parameter with the export names of its value and stats (the header
            # describes only a model's first 32, to stay small).
            for name, value, shape, stats in _native.primitiv_parameters(self.path, strict=strict) or []:
                p = _parameter(self._doc, name, value, shape, stats)
                if self.kind == "model":
                    self.parameters[name] = p
                else:
                    self.parameter = p
        elif self.kind in ("tensor", "shape"):
            self.dims = tuple(int(d) for d in h.get("dims", []))
            self.batch = int(h.get("batch", 1))
            if self.kind == "tensor":
                self.tensor = self._doc["tensor"]
        elif self.kind == "optimizer":
            self.optimizer = Optimizer(
                name=h.get("optimizer"),
                uint_configs={k: int(v) for k, v in (h.get("uint_configs") or {}).items()},
                float_configs={k: float(v) for k, v in (h.get("float_configs") or {}).items()},
            )

    @property
    def header(self) -> Dict[str, Any]:
        return self._doc.header

    def tree(self) -> Dict[str, Any]:
        """Models: the parameters nested by the dots of their names, as primitiv's
        sub-models hold them (``tree()["dec"]["attn"]["b"]``)."""
        if self.kind != "model":
            raise InvalidArgumentError(f"{self.path} is a {self.kind} file, not a model")
        root: Dict[str, Any] = {}
        for name, p in self.parameters.items():
            node = root
            *parents, leaf = _model_path(name)
            for part in parents:
                nxt = node.setdefault(part, {})
                if not isinstance(nxt, dict):  # a parameter and a sub-model share a name
                    nxt = node[part] = {"": nxt}
                node = nxt
            if isinstance(node.get(leaf), dict):
                node[leaf][""] = p
            else:
                node[leaf] = p
        return root

    def close(self) -> None:
        self._doc.close()

    def __enter__(self) -> "PrimitivFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        more = f" parameters={len(self.parameters)}" if self.kind == "model" else ""
        return f"<tensorfmt.primitiv.PrimitivFile {self.kind} {self.path}{more}>"


def open(path: PathLike, *, strict: bool = False) -> PrimitivFile:  # noqa: A001
    """Opens a primitiv file with its structure.

    >>> import numpy as np, tensorfmt, tensorfmt.primitiv
    >>> tensorfmt.save("m.data", {"enc.w": np.ones((3, 2), np.float32),
    ...                                "enc.w/Adam.m1": np.zeros((3, 2), np.float32)},
    ...                to="primitiv:model")
    >>> m = tensorfmt.primitiv.open("m.data")
    >>> m.kind, list(m.parameters), sorted(m.tree()["enc"]["w"].stats)
    ('model', ['enc.w'], ['Adam.m1'])
    """
    return PrimitivFile(path, strict=strict)


__all__ = ["open", "PrimitivFile", "Parameter", "Optimizer"]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
