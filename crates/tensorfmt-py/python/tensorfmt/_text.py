"""Text shown to people (``repr``): names and paths come from files, so control
characters are escaped and long names cut, as the CLI does (issue 24)."""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

NAME_MAX = 120


def esc(s: Any) -> str:
    """``s`` as text with every control character escaped (``\\n``, ``\\u{1b}``...).

    >>> esc("a\\x1b[31mb\\n")
    'a\\\\u{1b}[31mb\\\\n'
    """
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), "\\u{%x}" % ord(m.group())), str(s))


def name(s: Any) -> str:
    """A name escaped and cut to :data:`NAME_MAX` characters, with its length.

    >>> name("n" * 200).endswith("(200 bytes)")
    True
    """
    e = esc(s)
    if len(e) <= NAME_MAX:
        return e
    return f"{e[: NAME_MAX - 24]}... ({len(str(s).encode('utf-8', 'surrogateescape'))} bytes)"


def summary(a: Any) -> str:
    """An array as ``float32[20, 1, 5, 5]`` (reprs of typed records show shapes, not
    megabytes of values).

    >>> import numpy as np
    >>> summary(np.zeros((2, 3), np.float32))
    'float32[2, 3]'
    """
    if a is None:
        return "None"
    return f"{a.dtype}{list(a.shape)}"
