"""Hostile inputs through Python: truncations and header-field allocation bombs of every
fixture (and the small corpus files) raise TensorfmtError or read fine — never a crash,
never a MemoryError, never another exception type, always in bounded time.

The cases are generated here from the files themselves, in the spirit of the Rust
truncation tests (every file cut at its structure boundaries and a sample of other
lengths) and hostile tests (declared sizes far beyond the bytes present)."""

import os
import struct
import time

import numpy as np
import pytest

import tensorfmt
from conftest import corpus_dir, fixtures

# A read that takes longer than this on a file of a few KiB is itself a failure.
SECONDS_PER_CASE = 2.0


def small_corpus_files():
    d = corpus_dir()
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.rglob("*")):
        # Net definitions and schemas (caffe/nets/) are text, not tensor files: the
        # prototxt reader has its own hostile tests (crates/tensorfmt-caffe/tests/).
        if p.suffix in (".prototxt", ".proto", ".snippet"):
            continue
        if p.is_file() and p.suffix not in (".md", ".json") and p.stat().st_size <= 64 * 1024:
            out.append(p)
    return out


FILES = fixtures() + small_corpus_files()


def exercise(path, fmt):
    """Opens, reads every tensor, streams stats and validates; returns the outcome."""
    start = time.monotonic()
    try:
        # Untrusted input: cap decoded tensors at 64 MiB (a 2 KiB sparse file whose
        # header declares 65537 features would otherwise densify to 6.7 GB, within the
        # 16 GiB default).
        with tensorfmt.open(path, format=fmt, max_alloc=64 << 20) as doc:
            for name in doc:
                arr = doc[name]
                assert arr.shape == doc.info(name).shape
                doc.stats(name)
            doc.validate()
        outcome = "ok"
    except tensorfmt.TensorfmtError as e:
        assert str(e), "an error must say what is wrong"
        outcome = type(e).__name__
    elapsed = time.monotonic() - start
    assert elapsed < SECONDS_PER_CASE, f"{path}: {elapsed:.1f} s"
    return outcome


def cut_lengths(n):
    lengths = set(range(0, min(n, 136)))
    lengths.update(n * k // 24 for k in range(24))
    lengths.update({n - 1, n - 2, n - 4, n - 8})
    return sorted(x for x in lengths if 0 <= x < n)


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, p.parents[1]))
def test_truncations(path, tmp_path):
    data = path.read_bytes()
    fmt = tensorfmt.detect(path)
    cut = tmp_path / ("cut" + path.suffix)
    outcomes = set()
    for n in cut_lengths(len(data)):
        cut.write_bytes(data[:n])
        outcomes.add(exercise(cut, fmt))
    # A file cut short cannot always be valid: something must have been refused.
    assert outcomes - {"ok"}, f"{path}: every truncation was accepted"


BOMBS32 = [0x7FFFFFFF, 0xFFFFFFFF, 0x40000000, 0x00010001]
BOMBS64 = [0x7FFFFFFFFFFFFFFF, 0x0000100000000001]


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, p.parents[1]))
def test_header_field_bombs(path, tmp_path):
    data = bytearray(path.read_bytes())
    fmt = tensorfmt.detect(path)
    bomb = tmp_path / ("bomb" + path.suffix)
    head = min(len(data), 128)
    for off in range(0, head - 3, 4):
        for value in BOMBS32:
            patched = bytearray(data)
            patched[off : off + 4] = struct.pack("<I", value)
            bomb.write_bytes(bytes(patched))
            exercise(bomb, fmt)
    for off in range(0, head - 7, 8):
        for value in BOMBS64:
            patched = bytearray(data)
            patched[off : off + 8] = struct.pack("<Q", value)
            bomb.write_bytes(bytes(patched))
            exercise(bomb, fmt)


def test_declared_sizes_are_checked_before_allocating(tmp_path):
    # An npy header declaring 2^40 float64 values over 16 bytes of data.
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"
    header = header + " " * (63 - (10 + len(header)) % 64) + "\n"
    p = tmp_path / "bomb.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 16)
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.load(p)
    # A safetensors header claiming 2^62 bytes.
    q = tmp_path / "bomb.safetensors"
    q.write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.load(q)
    # A PVP dense header whose frame is 2^31 values, over one 8-byte timestamp: the
    # frame cannot be there, so the file has no whole frame.
    ints = [80, 20, 4, 65536, 32768, 1, 1, 0, 4, 3, 1, 1, 65536, 32768, 0, 0, 0, 1]
    r = tmp_path / "bomb.pvp"
    r.write_bytes(struct.pack("<18i", *ints) + struct.pack("<d", 0.0) + struct.pack("<d", 1.0))
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.load(r, strict=True)


def test_a_saved_array_of_a_hostile_shape_is_refused(tmp_path):
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.save(tmp_path / "x.pvp", {"values": np.zeros((2, 0, 3, 1, 5), np.float32)})
