"""Every primitiv corpus file through tensorfmt.open, checked against the corpus's
expected.json (the file the Rust corpus tests read too)."""

import json

import numpy as np
import pytest

import tensorfmt
from conftest import corpus_dir, require_corpus


def expected():
    p = corpus_dir() / "primitiv" / "expected.json"
    return json.loads(p.read_text()) if p.exists() else {}


EXPECTED = expected()


def params(x):  # noqa: D401
    """`(key, parameter)` pairs: one for a parameter file, every entry of a model."""
    if "parameter" in x:
        return [("", x["parameter"])]
    if "model" in x:
        return [(".".join(e["key"]), e["parameter"]) for e in x["model"]]
    return []


@pytest.mark.parametrize("name", sorted(EXPECTED) or ["(corpus absent)"])
def test_corpus_file(name):
    d = require_corpus("primitiv")
    x = EXPECTED[name]
    path = d / name
    assert path.stat().st_size == x["size"]
    with tensorfmt.open(path) as doc:
        assert doc.format == "primitiv"
        for kind in ("model", "parameter", "optimizer", "shape", "tensor"):
            if kind in x:
                assert doc.description.startswith(kind), (doc.description, kind)
        arrays = doc.to_dict()
        for key, p in params(x):
            v = p["value"]
            name_ = key if key else "value"
            arr = arrays[name_]
            assert arr.size == v["n_floats"], name_
            if "data_f32" in v:
                # primitiv stores column-major (then batch): compare in file order.
                np.testing.assert_array_equal(arr.reshape(-1, order="F"), np.float32(v["data_f32"]))
            for stat in p.get("stats", []):
                sname = f"{key}/{stat['key']}" if key else stat["key"]
                got = arrays[sname]
                t = stat["tensor"]
                assert got.size == t["n_floats"], sname
                if "data_f32" in t:
                    np.testing.assert_array_equal(got.reshape(-1, order="F"), np.float32(t["data_f32"]))
        if "tensor" in x:
            v = x["tensor"]
            (arr,) = [a for a in arrays.values()]
            assert arr.size == v["n_floats"]
            if "data_f32" in v:
                np.testing.assert_array_equal(arr.reshape(-1, order="F"), np.float32(v["data_f32"]))
        if "optimizer" in x:
            assert isinstance(doc.header, dict) and doc.header
