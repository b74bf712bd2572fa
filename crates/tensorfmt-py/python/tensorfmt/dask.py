"""tensorfmt on dask: lazy arrays over files larger than memory, and whole collections
converted on a cluster (``pip install tensorfmt[dask]``).

:func:`from_file` gives a lazy ``dask.array`` over a file's frames (dense or sparse PVP
activity, PINK data entries, or any tensor whose first axis is frames), read a chunk of
frames at a time; :func:`convert_many` converts many files on whatever cluster the user
has (a ``distributed.Client``; the local threaded scheduler otherwise) and returns one
result per file, errors included::

    >>> import tensorfmt.dask
    >>> movie = tensorfmt.dask.from_file("testdata/pvp/dense_f32.pvp")   # chunks of about 128 MiB
    >>> movie.shape, movie.mean(axis=0).compute().shape
    ((3, 2, 3, 2), (2, 3, 2))
    >>> paths = ["testdata/pvp/dense_f32.pvp", "testdata/caffe/v2_tiny.caffemodel", "testdata/nets"]
    >>> results = tensorfmt.dask.convert_many(paths, "out", to="safetensors")
    >>> [(r["status"], r["output"]) for r in results]   # the tree below the common parent
    [('ok', 'out/pvp/dense_f32.safetensors'), ('ok', 'out/caffe/v2_tiny.safetensors'), ('failed', 'out/nets.safetensors')]
    >>> [r["error"].split(": ", 2)[2] for r in results if r["status"] == "failed"]
    ['not a regular file (a directory); nothing was read']

On a cluster, pass ``client=distributed.Client(...)`` (e.g. ``Client("scheduler:8786")``).
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

import tensorfmt

PathLike = Union[str, "os.PathLike[str]"]

try:  # pragma: no cover - import guard
    import dask
    import dask.array as da
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("tensorfmt.dask needs dask: pip install 'tensorfmt[dask]'") from e


def _default_name(doc: "tensorfmt.Document") -> str:
    for candidate in ("values", "data"):
        if candidate in doc:
            return candidate
    names = list(doc)
    if not names:
        raise tensorfmt.InvalidArgumentError(f"{doc.path} holds no tensors")
    return names[0]


def _read_frames(path: str, name: str, start: int, stop: int, options: Dict[str, Any]) -> np.ndarray:
    with tensorfmt.open(path, frames=(start, stop), **options) as doc:
        return doc[name]


def _read_rows(path: str, name: str, start: int, stop: int, options: Dict[str, Any]) -> np.ndarray:
    """Rows ``start:stop`` of a tensor of a file without frames (npy, npz,
    safetensors, primitiv, Caffe, ONNX, a PINK SOM): a slice of the mapped file where
    the tensor is a view of it, else of the tensor decoded once for this chunk."""
    with tensorfmt.open(path, **options) as doc:
        return np.array(doc.get_slice(name)[start:stop])


def _has_frames(doc: "tensorfmt.Document") -> bool:
    """Whether ``frames=`` selects in this file: PVP files and PINK entry files."""
    return doc.format == "pvp" or (doc.format == "som" and doc.kind != "som")


#: Default size of one chunk of :func:`from_file`: large enough that a task's fixed
#: cost (opening the file, scheduling) is small beside reading its bytes, small
#: enough that a few chunks per worker fit in memory.
CHUNK_BYTES = 128 << 20

#: :func:`convert_many` puts consecutive files into one task until they hold this many
#: bytes (or :data:`BATCH_FILES` files), so that small files do not pay a task each.
BATCH_BYTES = 64 << 20
BATCH_FILES = 64


def from_file(
    path: PathLike,
    name: Optional[str] = None,
    *,
    chunk_frames: Optional[int] = None,
    chunk_bytes: int = CHUNK_BYTES,
    **options: Any,
) -> "da.Array":
    """A lazy ``dask.array`` over tensor ``name`` (default ``values`` or ``data``) of a
    file, chunked along its first axis (frames / entries): ``chunk_frames`` frames per
    chunk when given, else as many whole frames as fit in ``chunk_bytes`` (default
    :data:`CHUNK_BYTES`, at least one frame), so a chunk's fixed cost stays small
    whatever the frame size.

    Each chunk opens the file with ``frames=(start, stop)``, so a task reads only its
    frames (dense PVP chunks are views of the mapping; sparse PVP frames are expanded
    chunk by chunk); in other files (npy, npz, safetensors, primitiv, Caffe, ONNX) a
    chunk is a slice of the tensor, read from the mapped file where the tensor is a
    view of it (a deflated npz member is inflated once per chunk: give it one chunk). ``options`` are :func:`tensorfmt.open`'s keywords (``strict``,
    ``kind``, ``format``...).

    >>> import tensorfmt, tensorfmt.dask, numpy as np
    >>> tensorfmt.save("/tmp/m.pvp", {"values": np.ones((10, 4, 4, 1), np.float32)}, overwrite=True)
    >>> tensorfmt.dask.from_file("/tmp/m.pvp", chunk_frames=3).sum().compute()
    np.float32(160.0)
    """
    from ._args import positive

    if chunk_frames is not None:
        chunk_frames = positive("chunk_frames", chunk_frames)
    chunk_bytes = positive("chunk_bytes", chunk_bytes)
    p = os.fsdecode(path)
    for forbidden in ("frames", "sparse"):
        if forbidden in options:
            raise tensorfmt.InvalidArgumentError(f"from_file chunks by frames itself; {forbidden}= is not accepted")
    with tensorfmt.open(p, **options) as doc:
        name = name or _default_name(doc)
        info = doc.info(name)
        read = _read_frames if _has_frames(doc) else _read_rows
    if not info.shape:
        raise tensorfmt.InvalidArgumentError(f"{p}: {name} has no frame axis")
    frames, rest = info.shape[0], info.shape[1:]
    if chunk_frames is None:
        frame_bytes = int(np.prod(rest, dtype=np.int64)) * np.dtype(info.dtype).itemsize
        chunk_frames = max(1, chunk_bytes // max(1, frame_bytes))
    token = dask.base.tokenize(p, os.stat(p).st_mtime_ns, name, chunk_frames, sorted(options.items()))
    blocks = []
    for start in range(0, frames, chunk_frames):
        stop = min(start + chunk_frames, frames)
        task = dask.delayed(read, pure=True, name=f"tensorfmt-{token}-{start}")
        blocks.append(da.from_delayed(task(p, name, start, stop, dict(options)), (stop - start,) + rest, info.dtype))
    if not blocks:
        return da.zeros((0,) + rest, dtype=info.dtype)
    return da.concatenate(blocks, axis=0)


def _extension(to: str) -> str:
    fmt = to.split(":", 1)[0]
    aliases = {"som-data": "som", "som-mapping": "som", "som-rotflip": "som"}
    fmt = aliases.get(fmt, fmt)
    for f in tensorfmt.formats():
        if f["name"] == fmt or fmt in f["write_kinds"]:
            return f["extensions"][0]
    raise tensorfmt.InvalidArgumentError(f"unknown output format {to!r}")


def _convert_one(src: str, dst: str, to: str, overwrite: bool, options: Dict[str, Any]) -> Dict[str, Any]:
    start = time.monotonic()
    result: Dict[str, Any] = {"path": src, "output": dst, "status": "ok", "tensors": [], "bytes": 0, "error": None}
    try:
        if os.path.exists(dst) and os.path.samefile(src, dst):
            # Not "already converted": the output would replace its own input.
            raise tensorfmt.InvalidArgumentError(f"the output {dst} is the input")
        if not overwrite and os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
            result["status"] = "skipped"
        else:
            os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
            result["tensors"] = tensorfmt.convert(src, dst, to=to, overwrite=True, **options)
            result["bytes"] = os.path.getsize(dst)
    except Exception as e:  # noqa: BLE001 - one bad file never stops the run
        result["status"] = "failed"
        result["error"] = f"{type(e).__name__}: {e}"
    result["seconds"] = time.monotonic() - start
    return result


def _convert_batch(batch: List[Tuple[str, str]], to: str, overwrite: bool, options: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [_convert_one(s, d, to, overwrite, options) for s, d in batch]


def _batches(
    jobs: List[Tuple[str, str]], batch_bytes: int, batch_files: int, parts: int = 1
) -> List[List[Tuple[str, str]]]:
    """Consecutive jobs grouped until a group holds ``batch_bytes`` of input or
    ``batch_files`` files (a large file is a group of its own). With ``parts`` workers,
    the file count per group is evened out so that the groups fill whole rounds of the
    workers (200 files on 2 workers: 4 groups of 50, not 64, 64, 64 and 8, which left
    one worker idle for a round)."""
    parts = max(1, parts)
    rounds = -(-len(jobs) // (parts * max(1, batch_files)))
    if rounds:
        batch_files = min(batch_files, -(-len(jobs) // (parts * rounds)))
    out: List[List[Tuple[str, str]]] = []
    cur: List[Tuple[str, str]] = []
    size = 0
    for job in jobs:
        try:
            n = os.path.getsize(job[0])
        except OSError:
            n = 0  # reported by the conversion itself
        if cur and (size + n > batch_bytes or len(cur) >= batch_files):
            out.append(cur)
            cur, size = [], 0
        cur.append(job)
        size += n
    if cur:
        out.append(cur)
    return out


def _worker_count(client: Any) -> int:
    """Threads the work runs on: the cluster's, or this machine's for dask's local
    scheduler."""
    if client is not None:
        try:
            return max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
        except Exception:  # noqa: BLE001 - an unusual client: no balancing
            return 1
    return os.cpu_count() or 1


def convert_many(
    paths: Iterable[PathLike],
    out_dir: PathLike,
    *,
    to: str = "safetensors",
    client: Any = None,
    overwrite: bool = False,
    batch_bytes: int = BATCH_BYTES,
    batch_files: int = BATCH_FILES,
    **options: Any,
) -> List[Dict[str, Any]]:
    """Converts every file of ``paths`` into ``out_dir`` (mirroring their tree below
    their common parent, with the extension of ``to``) on ``client`` (a
    ``distributed.Client``; default: the current client if there is one, else dask's
    local scheduler). Consecutive small files share a task (up to ``batch_bytes`` of
    input or ``batch_files`` files; a large file is a task of its own), so a cluster
    does not spend more on scheduling than on converting.

    Returns one dict per input, in input order: ``path``, ``output``, ``status``
    (``ok``, ``skipped``: output newer than input, or ``failed``), ``tensors``,
    ``bytes``, ``seconds`` and ``error``. A bad file is reported, never raised, so a
    run over thousands of files finishes; rerunning it skips what is done. Inputs whose
    outputs would collide (``x.pvp`` and ``x.npy`` both ``x.npz``) all fail with a
    ``CollisionError`` message, and nothing is written for them.
    """
    from ._args import flag, positive

    flag("overwrite", overwrite)
    batch_bytes = positive("batch_bytes", batch_bytes)
    batch_files = positive("batch_files", batch_files)
    srcs = [os.path.abspath(os.fsdecode(p)) for p in paths]
    if not srcs:
        return []
    root = os.path.commonpath([os.path.dirname(s) for s in srcs])
    ext = _extension(to)
    jobs: List[Tuple[str, str]] = []
    for s in srcs:
        rel = os.path.relpath(s, root)
        jobs.append((s, os.path.join(os.fsdecode(out_dir), os.path.splitext(rel)[0] + "." + ext)))
    # Outputs that collide (``x.pvp`` and ``x.npy`` both ``x.npz``, or one input named
    # twice) are found before anything is written, and every job of such a group fails
    # (outputs never overwrite each other; names are never mangled).
    by_output: Dict[str, List[int]] = {}
    for k, (_, d) in enumerate(jobs):
        by_output.setdefault(os.path.normcase(os.path.abspath(d)), []).append(k)
    results: List[Any] = [None] * len(jobs)
    runnable: List[int] = []
    for k, (s, d) in enumerate(jobs):
        others = [jobs[j][0] for j in by_output[os.path.normcase(os.path.abspath(d))] if j != k]
        if others:
            results[k] = {
                "path": s,
                "output": d,
                "status": "failed",
                "tensors": [],
                "bytes": 0,
                "error": f"CollisionError: {d} would also be the output of {', '.join(others)}; "
                "outputs never overwrite each other, so none of them is converted",
                "seconds": 0.0,
            }
        else:
            runnable.append(k)
    if client is None:
        try:
            from distributed import get_client

            client = get_client()
        except (ImportError, ValueError):
            client = None
    # Runnable jobs in batches (by bytes and file count): small files share a task, and
    # the batches are evened out over the workers.
    todo = [jobs[k] for k in runnable]
    batches = _batches(todo, batch_bytes, max(1, batch_files), _worker_count(client))
    if client is not None:
        futures = [client.submit(_convert_batch, b, to, overwrite, options, pure=False) for b in batches]
        done = client.gather(futures) if futures else []
    else:
        tasks = [dask.delayed(_convert_batch, pure=False)(b, to, overwrite, options) for b in batches]
        done = list(dask.compute(*tasks)) if tasks else []
    for k, r in zip(runnable, [r for batch in done for r in batch]):
        results[k] = r
    return results

__all__ = ["from_file", "convert_many"]

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
