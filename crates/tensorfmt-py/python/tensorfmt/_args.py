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


def positive(name: str, value: Any) -> int:
    """``value`` of the size keyword ``name``: a whole number above 0 (a bool, a float or
    0 is refused, naming the keyword, instead of a read-ahead of 0 bytes or chunks that
    never end)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TensorfmtTypeError(f"{name}= takes a whole number, not {value!r} ({type(value).__name__})")
    if value <= 0:
        raise InvalidArgumentError(f"{name}= must be above 0, not {value}")
    return int(value)


def byte_limit(name: str, value: Any) -> Any:
    """``value`` of a byte-limit keyword such as ``max_alloc``: ``None`` or a whole
    number of bytes, 0 or more (``True`` was read as 1 byte, a float as an error about
    integers that did not name the keyword)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TensorfmtTypeError(f"{name}= takes a whole number of bytes or None, not {value!r} ({type(value).__name__})")
    if value < 0:
        raise InvalidArgumentError(f"{name}= must be 0 or more bytes, not {value}")
    return int(value)
