"""Checks of keyword arguments shared by the public functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import InvalidArgumentError, TensorfmtTypeError


def flag(name: str, value: Any) -> bool:
    """``value`` of the bool keyword ``name``: ``True``/``False`` (or a numpy bool); any
    other value raises :class:`TensorfmtTypeError` naming the keyword, instead of being
    read by its truthiness (``flip="no"`` would turn flips on)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TensorfmtTypeError(f"{name}= takes True or False, not {value!r} ({type(value).__name__})")


def flags(**values: Any) -> None:
    """:func:`flag` for each keyword given."""
    for name, value in values.items():
        flag(name, value)


def whole(name: str, value: Any, least: int, what: str = "a whole number") -> int:
    """``value`` of the integer keyword ``name``: a whole number (a Python or numpy
    int, not a bool or a float) of ``least`` or more, else an error naming the keyword
    (``max_alloc=True`` was read as 1 byte, ``chunk_bytes=0`` as chunks that never end)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TensorfmtTypeError(f"{name}= takes {what}, not {value!r} ({type(value).__name__})")
    if value < least:
        raise InvalidArgumentError(f"{name}= must be {least} or more, not {value}")
    return int(value)


def positive(name: str, value: Any) -> int:
    """:func:`whole` above 0: a size (``chunk_bytes``, ``block``)."""
    return whole(name, value, 1)


def byte_limit(name: str, value: Any) -> Any:
    """``None`` or :func:`whole` of 0 or more: a byte limit such as ``max_alloc``."""
    return None if value is None else whole(name, value, 0, "a whole number of bytes or None")


def index(name: str, value: Any, count: int, where: str, unit: str, units: str = "") -> int:
    """``value`` of the index keyword ``name`` into ``count`` items (``unit`` /
    ``units``, e.g. ``feature`` / ``features``) of ``where`` (a file name), negative
    ones counting from the end, as a position ``0..count-1``; else an error naming the
    keyword, the count and the valid range, both ends inclusive."""
    k = whole(name, value, -(2**63))
    if not -count <= k < count:
        plural = unit if count == 1 else (units or unit + "s")
        span = f"0 to {count - 1}, or -{count} to -1" if count > 1 else "0, or -1"
        tail = f" ({span} from the end)" if count else ""
        raise InvalidArgumentError(f"{name}={value} is out of range: {where} has {count} {plural}{tail}")
    return k + count if k < 0 else k
