"""The exception hierarchy of tensorfmt.

Every error raised by tensorfmt is a :class:`TensorfmtError`. The subclasses also derive
from the builtin exception a Python user would catch for the same problem, so existing
``except OSError`` / ``except ValueError`` code keeps working::

    >>> import tensorfmt
    >>> try:
    ...     tensorfmt.open("no/such/file.pvp")
    ... except FileNotFoundError as e:
    ...     print(type(e).__name__)
    TensorfmtFileNotFoundError
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Any, Callable, Iterator, Optional, Sequence


class TensorfmtError(Exception):
    """Base class of every tensorfmt error.

    ``offset`` (byte offset in the file) and ``field`` (the header field or structure
    involved) are set when the error concerns a file's content, else ``None``.
    """

    offset: Optional[int] = None
    field: Optional[str] = None


class FormatError(TensorfmtError, ValueError):
    """A file's bytes contradict its format (truncated, bad header field, bad index...)."""


class LimitError(TensorfmtError, ValueError):
    """A declared size or count exceeds the reader's limits (an allocation bomb)."""


class UnsupportedError(TensorfmtError, ValueError):
    """A valid file or request that tensorfmt does not handle (e.g. an unsupported dtype)."""


class InvalidArgumentError(TensorfmtError, ValueError):
    """An argument does not make sense (unknown format, wrong tensor count for .npy...)."""


class TensorNotFoundError(TensorfmtError, KeyError):
    """A tensor name that the file does not hold; ``.name`` is the name asked for."""

    name: Optional[str] = None

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class ClosedError(TensorfmtError, ValueError):
    """An operation on a document after ``close()``."""


class TensorfmtIOError(TensorfmtError, OSError):
    """An I/O error; the message names the path and the operation."""


class TensorfmtFileNotFoundError(TensorfmtIOError, FileNotFoundError):
    """The input file does not exist."""


class TensorfmtFileExistsError(TensorfmtIOError, FileExistsError):
    """The output exists and ``overwrite=True`` was not given."""


class InputChangedError(TensorfmtIOError):
    """An input file was truncated or rewritten by another process while being read."""


class SpaceTypeError(TensorfmtError, TypeError):
    """:mod:`tensorfmt.spaces`: a batch of the wrong kind or dtype for its space (a float
    batch for an integer space, a tuple for a simple space...), a wrong argument type;
    Pylearn2 raised ``TypeError`` there."""


class SpaceNotImplementedError(TensorfmtError, NotImplementedError):
    """:mod:`tensorfmt.spaces`: a conversion between two kinds of space that does not
    exist (e.g. Conv2DSpace to IndexSpace); Pylearn2 raised ``NotImplementedError``."""


class SpaceAssertionError(TensorfmtError, AssertionError):
    """:mod:`tensorfmt.spaces`: a broken precondition that Pylearn2 checked with
    ``assert`` (both ``channels`` and ``num_channels``, a data specs mapping given a
    non-empty value at a NullSpace position...)."""


class SpaceIndexError(TensorfmtError, IndexError):
    """:mod:`tensorfmt.spaces`: an index out of range (a label >= ``max_labels`` or a
    negative label, a ``restrict`` index); Pylearn2 raised ``IndexError`` there."""


class TensorfmtOverflowError(InvalidArgumentError, OverflowError):
    """A number argument out of range (a negative size, a count over 2**64)."""


class TensorfmtTypeError(TensorfmtError, TypeError):
    """An argument of the wrong type."""


class TensorfmtIndexError(TensorfmtError, IndexError):
    """An index out of range (a frame number past the end of a PVP file)."""


def _translate(e: BaseException) -> BaseException:
    """The tensorfmt error for a builtin one raised inside a tensorfmt call (argument
    conversion in the native module); tensorfmt errors and the rest pass as they are."""
    if isinstance(e, TensorfmtError):
        return e
    for builtin, cls in (
        (OverflowError, TensorfmtOverflowError),
        (TypeError, TensorfmtTypeError),
        (ValueError, InvalidArgumentError),
    ):
        if isinstance(e, builtin):
            new = cls(str(e))
            new.__cause__ = e
            return new
    return e


def _guard_native(module: object) -> None:
    """Wraps every function of the native module with :func:`_guarded`, so that a
    builtin ``OverflowError``, ``TypeError`` or ``ValueError`` (raised while converting
    arguments, before any tensorfmt code runs) becomes the matching
    :class:`TensorfmtError` subclass, which keeps the builtin base (issue 24: every
    failure of a tensorfmt call is a ``TensorfmtError``)."""
    import types

    for attr in dir(module):
        f = getattr(module, attr)
        if isinstance(f, types.BuiltinFunctionType):
            setattr(module, attr, _guarded(f))


#: Set (to True) on an exception raised by the caller's own code that a tensorfmt call
#: ran (``tensorfmt.spaces`` validate callbacks, ``progress=`` callbacks): :func:`_guarded`
#: lets it pass unchanged.
_CALLERS_OWN = "_tensorfmt_callers_own"


def mark_callers_own(e: BaseException) -> None:
    """Marks ``e``, raised by the caller's own code, to reach the caller unchanged."""
    try:
        setattr(e, _CALLERS_OWN, True)
    except Exception:  # an exception type that takes no attributes
        pass


def callers_own(f: Callable[..., Any]) -> Callable[..., Any]:
    """The caller's callable ``f``, whatever it raises marked as the caller's own (so
    ``except MyError`` around the tensorfmt call catches it, as around any call that
    runs a callback)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except BaseException as e:
            mark_callers_own(e)
            raise

    return run


# The methods of a public class that take a caller's arguments besides the public ones.
_GUARDED_DUNDERS = frozenset({"__init__", "__call__", "__getitem__", "__setitem__", "__contains__"})


def _guarded(f: Any, type_error: type = TensorfmtTypeError) -> Any:
    """``f`` with its builtin ``OverflowError``, ``TypeError``, ``ValueError`` and
    ``IndexError`` turned into the matching :class:`TensorfmtError` subclass
    (``type_error`` for a ``TypeError``, and for an ``AttributeError``, which a public
    call raises only for an argument of the wrong type); the rest passes as it is."""
    import functools

    if getattr(f, "_tensorfmt_guarded", False):
        return f

    @functools.wraps(f)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (OverflowError, TypeError, ValueError, IndexError, AttributeError) as e:
            if isinstance(e, TensorfmtError) or getattr(e, _CALLERS_OWN, False):
                raise  # ours already, or raised by the caller's own code (a callback)
            if isinstance(e, IndexError):
                t: BaseException = TensorfmtIndexError(str(e))
            elif isinstance(e, (TypeError, AttributeError)):
                # An AttributeError here is an argument of the wrong type (`ax=-1`).
                t = type_error(str(e))
            else:
                t = _translate(e)
            raise t from e

    guarded._tensorfmt_guarded = True  # type: ignore[attr-defined]
    return guarded


def _guard_public(namespace: dict[str, Any], type_error: type = TensorfmtTypeError) -> None:
    """Guards what a module exports (its ``__all__``) as :func:`_guard_native` guards
    the native module: the functions, and the public methods (with ``__init__``,
    ``__call__`` and item access) of the classes defined in tensorfmt. A bad argument
    that Python itself trips over (``os.fspath(None)``, ``int("x")``, ``None < 1``)
    is then a :class:`TensorfmtError` like every other failure of a tensorfmt call,
    without a check written at every entry."""
    import types

    for name in namespace.get("__all__", ()):
        obj = namespace.get(name)
        if not str(getattr(obj, "__module__", "")).startswith("tensorfmt"):
            continue
        if isinstance(obj, types.FunctionType):
            namespace[name] = _guarded(obj, type_error)
        elif isinstance(obj, type) and not issubclass(obj, BaseException):
            for attr, f in list(vars(obj).items()):
                public = not attr.startswith("_") or attr in _GUARDED_DUNDERS
                if public and isinstance(f, types.FunctionType):
                    setattr(obj, attr, _guarded(f, type_error))


class TensorfmtWarning(UserWarning):
    """A file was written, but the original program will not read all of it (e.g. a
    PINK file with a data type other than f32), or fewer tensors were written than
    given (the format holds fewer)."""


__all__ = [
    "TensorfmtWarning",
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
    "SpaceTypeError",
    "SpaceNotImplementedError",
    "SpaceAssertionError",
    "SpaceIndexError",
    "TensorfmtOverflowError",
    "TensorfmtTypeError",
    "TensorfmtIndexError",
]


#: The CLI's flags as the Python keywords that do the same (messages from the shared
#: Rust code name the flags; a Python caller sees the keyword). A flag whose keyword the
#: message already names (``--dense / dense=True``) is left as it is.
CLI_KEYWORDS = {
    "--tensor": "tensors=",
    "--dtype": "dtype=",
    "--set": "settings=",
    "--input-shape": "input_shape=",
    "--to": "to=",
    "--from": "format=",
    "--kind": "kind=",
    "--frames": "frames=",
    "--sparse": "sparse=True",
    "--dense": "dense=True",
    "--like": "like=",
    "--hex": "hex=True",
    "--proto": "proto=",
    "--dynamic-batch": "dynamic_batch=True",
    "--stop-before": "stop_before=",
    "--max-alloc": "max_alloc=",
    "--strict": "strict=True",
    "--lenient": "lenient=True",
}

_CLI_FLAG = re.compile(
    r"(?<![\w-])(--[a-z][a-z-]*)(?![\w-])"
    r"(?:[ =]([A-Za-z_][\w.]*)=([^\s,);:]+(?:,[^\s,);:]+)*)| ([A-Z][\w.]*)(?![\w=]))?"
)


def python_words(message: str) -> str:
    """``message`` with the CLI flags of :data:`CLI_KEYWORDS` named as Python keywords:
    ``--tensor`` is ``tensors=``, ``--set iter=N`` is ``settings={'iter': N}``,
    ``--input-shape data=N,C,H,W`` is ``input_shape={'data': (N,C,H,W)}``."""

    def keyword(m: "re.Match[str]") -> str:
        flag, key, value, placeholder = m.group(1), m.group(2), m.group(3), m.group(4)
        word = CLI_KEYWORDS.get(flag)
        if word is None or word.split("=")[0] + "=" in message:
            return m.group(0)
        if placeholder is not None:
            return f"{word}{placeholder}" if word.endswith("=") else f"{word} {placeholder}"
        if key is None:
            return word
        if flag == "--input-shape":
            return f"{word}{{{key!r}: ({value})}}"
        if flag == "--set":
            return f"{word}{{{key!r}: {value}}}"
        return f"{word} {key}={value}"

    return _CLI_FLAG.sub(keyword, message)


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` call made by the function calling
    this one point at the first frame outside the tensorfmt package (and outside xarray,
    which calls the ``tensorfmt`` engine): the user's line that called tensorfmt, however
    deep inside the package the warning is emitted."""
    frame = sys._getframe(1)  # the function that will call warnings.warn: level 1
    level = 1
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] in _INSIDE:
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


#: Top-level packages whose frames are not the caller's line.
_INSIDE = ("tensorfmt", "xarray")


def warn(message: str) -> None:
    """``message`` as a :class:`TensorfmtWarning` attributed to the caller's line (the
    first frame outside the package)."""
    import warnings as _warnings

    _warnings.warn(python_words(message), TensorfmtWarning, stacklevel=caller_stacklevel())


def warn_leniency(path: str, warnings: Sequence[str], stacklevel: Optional[int] = None) -> None:
    """Each thing the lenient reader accepted (a crash-truncated PVP file read up to its
    last whole frame, ...) as a :class:`TensorfmtWarning`, attributed to the caller's
    line (``stacklevel`` is ignored: the first frame outside the package is found)."""
    for w in warnings:
        warn(f"{path}: {w}")


@contextlib.contextmanager
def naming(where: str) -> Iterator[None]:
    """A :class:`TensorfmtError` raised inside names ``where`` (a path or URL) first,
    unless its message already does: one bad file among thousands (an archive's tree, a
    series) is found by its name."""
    where = os.fsdecode(where)  # a bytes path names the file as text
    try:
        yield
    except TensorfmtError as e:
        if e.args and isinstance(e.args[0], str) and not _names(e.args[0], where):
            e.args = (f"{where}: {e.args[0]}",) + e.args[1:]
        raise


def _names(message: str, where: str) -> bool:
    """Whether ``message`` names ``where`` as a whole path, not as the start of a longer
    one (``e.onnx`` inside ``e.onnx.data`` names the data file, not the model)."""
    at = message.find(where)
    while at >= 0:
        end = at + len(where)
        if end == len(message) or not (message[end].isalnum() or message[end] in "._-/"):
            return True
        at = message.find(where, at + 1)
    return False
