"""Every PVP corpus file through tensorfmt.open and tensorfmt.pvp, checked against the
header fields and expected values of the corpus's SOURCES.md (the same entries and the
same checks as crates/tensorfmt-pvp/tests/corpus.rs)."""

import json
import re

import numpy as np
import pytest

import tensorfmt
import tensorfmt.pvp
from conftest import corpus_dir, require_corpus


def entries():
    text = (corpus_dir() / "pvp" / "SOURCES.md").read_text() if (corpus_dir() / "pvp").is_dir() else ""
    out = {}
    for m in re.finditer(r"^### `([^`]+)`\n(.*?)(?=^### |\Z)", text, re.S | re.M):
        section = m.group(2)
        header = re.search(r"^\* header: (.*)$", section, re.M)
        expected = re.search(r"^\* expected: (.*)$", section, re.M)
        if not (header and expected):
            continue
        h = dict(kv.split("=", 1) for kv in header.group(1).split())
        x = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in expected.group(1).split("; "))}
        out[m.group(1)] = (h, x)
    return out


ENTRIES = entries()


def close(a, b, what):
    tol = 1e-6 * max(abs(a), abs(b), 1.0)
    assert abs(a - b) <= tol, f"{what}: got {a}, expected {b}"


def test_the_corpus_lists_the_files():
    require_corpus("pvp")
    assert len(ENTRIES) >= 39


@pytest.mark.parametrize("name", sorted(ENTRIES) or ["(corpus absent)"])
def test_corpus_file(name):
    d = require_corpus("pvp")
    h, x = ENTRIES[name]
    path = d / name
    f = tensorfmt.pvp.open(path)
    assert len(f) == x["nframes"]
    if x.get("exact"):
        assert not any("partial" in w for w in f.warnings), f.warnings
    total = 0.0
    times = []
    if f.kind == "dense":
        movie = f.movie()
        first = x.get("frame0_first8", x.get("first8"))
        # File order of frame 0 (one process: the same as row-major [ny, nx, nf]).
        if "mpi_blocks_per_frame" not in x:
            got = np.asarray(movie[0]).reshape(-1)[:8]
            np.testing.assert_array_equal(got, np.float32(first[: len(got)]))
        for fr in f:
            times.append(fr.time)
        total = float(np.asarray(movie, dtype=np.float64).sum())
    elif f.kind == "sparse":
        frames = list(f)
        counts = [len(fr.indices) for fr in frames]
        assert counts[: len(x["numActive"])] == x["numActive"]
        for i, (k, v) in enumerate(x["frame0_first6"]):
            assert (int(frames[0].indices[i]), float(frames[0].values[i])) == (k, float(np.float32(v)))
        times = [fr.time for fr in frames]
        total = float(sum(fr.values.astype(np.float64).sum() for fr in frames))
        indptr, indices, data, width = f.csr()
        assert width == int(h["nx"]) * int(h["ny"]) * int(h["nf"])
        assert indptr[-1] == sum(counts)
        close(float(data.astype(np.float64).sum()), total, "csr sum")
        sp = f.to_scipy()
        assert sp.shape == (len(frames), width)
    else:
        g = f.weight_geometry
        assert g["patch_header_bytes"] == x["patch_header_bytes"]
        assert g["arbors"] == x["arbors"]
        distinct = set()
        for k, fr in enumerate(f):
            times.append(fr.time)
            wmin, wmax = x["wminmax"][k]
            assert (fr.wmin, fr.wmax) == (float(np.float32(wmin)), float(np.float32(wmax)))
            w = fr.weights.reshape(-1)
            if k == 0:
                np.testing.assert_array_equal(w[: len(x["first8"])], np.float32(x["first8"]))
            total += float(w.astype(np.float64).sum())
            distinct.update(zip(fr.patch_nx.tolist(), fr.patch_ny.tolist(), fr.patch_offset.tolist()))
        assert len(distinct) == x["patch_headers_distinct"]
        for nx, ny, off in x["patch_headers_sample"]:
            assert (nx, ny, off or 0) in distinct
    close(total, x["sum"], "sum")
    if "times" in x:
        assert times[: len(x["times"])] == x["times"]
    # The generic document: header fields, shapes, the same sum, validate.
    with tensorfmt.open(path) as doc:
        for k, v in h.items():
            close(float(doc.header[k]), float(v), k)
        main = "weights" if f.kind == "weights" else "values"
        info = doc.info(main)
        assert info.shape[0] == x["nframes"]
        if info.dtype == np.float32:
            close(float(doc[main].astype(np.float64).sum()), x["sum"], "document sum")
        np.testing.assert_array_equal(doc["time"], np.array(times))
        assert doc.validate().ok
