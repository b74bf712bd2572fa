"""Issue 24, item 7 and 8: signals during long native calls, in child interpreters.

Ctrl-C (SIGINT) during a long ``convert`` stops it within a moment, removes its
temporary file and raises ``KeyboardInterrupt``; SIGTERM leaves no hidden temporary
file either. A ``WeightsWriter`` whose first frame is rejected leaves no empty file."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tensorfmt
import tensorfmt.pvp

# x 1024 f32 = 4 GiB of zeros, sparse on disk: long enough (seconds of deflate even on
# an idle machine) that the signal always lands mid-conversion; 384 MiB finished first.
ROWS = 1024 * 1024


def _big_npy(path, rows=ROWS):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 1024), }" % rows
    total = 10 + len(header) + 1
    header += " " * (-total % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.truncate(f.tell() + rows * 1024 * 4)


CHILD = textwrap.dedent(
    """
    import sys, time, tensorfmt
    src, dst = sys.argv[1], sys.argv[2]
    try:
        tensorfmt.convert(src, dst, to="npz", dtype="f64", settings={"compress": "deflate"})
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", time.monotonic(), flush=True)
    """
)


def _temporaries(d):
    return [n for n in os.listdir(d) if n.endswith(".tmp")]


def _start(tmp_path):
    src = tmp_path / "big.npy"
    _big_npy(src)
    dst = tmp_path / "out.npz"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(src), str(dst)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    start = time.monotonic()
    while not _temporaries(tmp_path):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() - start < 120, "no temporary file appeared"
        time.sleep(0.005)
    time.sleep(0.05)
    return child, dst


def _ctrl_c(child, timeout):
    """Sends Ctrl-C and checks that the child raised KeyboardInterrupt within 2 s (it
    prints the time it caught it)."""
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=timeout)
    assert out.startswith("KeyboardInterrupt"), (out, err)
    honoured = float(out.split()[1]) - sent
    assert honoured < 2.0, f"KeyboardInterrupt {honoured:.1f} s after Ctrl-C"


def test_ctrl_c_stops_a_long_convert_and_removes_its_temporary(tmp_path):
    child, dst = _start(tmp_path)
    _ctrl_c(child, timeout=60)
    assert not dst.exists()
    assert _temporaries(tmp_path) == []


READ_CHILD = textwrap.dedent(
    """
    import sys, time, tensorfmt
    src, what = sys.argv[1], sys.argv[2]
    print("started", flush=True)
    try:
        if what == "stats":
            with tensorfmt.open(src) as doc:
                doc.stats("big")
        elif what == "diff":
            tensorfmt.diff(src, src)
        else:
            tensorfmt.validate(src)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", time.monotonic(), flush=True)
    """
)


@pytest.mark.parametrize("what", ["stats", "diff"])
def test_ctrl_c_stops_a_long_read(tmp_path, what):
    """Read-only calls over 64 GiB (streamed statistics, a diff) stop between pieces
    too; they used to run to the end before Ctrl-C was seen."""
    src = tmp_path / "big.npy"
    _big_npy(src, rows=16 * ROWS)  # 64 GiB of holes: reading them takes many seconds
    child = subprocess.Popen(
        [sys.executable, "-c", READ_CHILD, str(src), what], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "started"
    time.sleep(0.5)  # inside the native call
    _ctrl_c(child, timeout=120)


def test_sigterm_leaves_no_temporary_file(tmp_path):
    child, dst = _start(tmp_path)
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM
    assert not dst.exists()
    assert _temporaries(tmp_path) == []


def test_a_weights_writer_whose_first_frame_is_rejected_leaves_no_file(tmp_path):
    p = tmp_path / "w.pvp"
    with pytest.raises(tensorfmt.TensorfmtError):
        with tensorfmt.pvp.WeightsWriter(p, nxp=2, nyp=2, nfp=1, nf=1) as w:
            w.write_frame(0.0, np.zeros(3, np.float32))  # not a frame's size
    assert not p.exists()
    w = tensorfmt.pvp.WeightsWriter(p, nxp=2, nyp=2, nfp=1, nf=1)
    with pytest.raises(tensorfmt.TensorfmtError):
        w.write_frame(0.0, np.zeros(3, np.float32))
    del w
    assert not p.exists()


def test_document_repr_escapes_control_characters_and_bounds_names(tmp_path):
    evil = "a\x1b[31mred\nsplit"
    p = tmp_path / "e\x1b[2Jvil.safetensors"
    tensorfmt.save(p, {evil: np.zeros(2, np.float32), "n" * 70_000: np.ones(1, np.float32)})
    with tensorfmt.open(p) as doc:
        r = repr(doc)
    assert "\x1b" not in r and "\n" not in r, r
    assert "\\u{1b}[31mred\\nsplit" in r
    assert len(r) < 1000


def test_every_failure_of_a_call_is_a_tensorfmt_error(tmp_path):
    with pytest.raises(tensorfmt.TensorfmtError) as e:
        tensorfmt.open(tmp_path / "x.npy", max_alloc=-1)
    assert isinstance(e.value, (OverflowError, ValueError))
