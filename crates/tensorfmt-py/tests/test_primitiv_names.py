"""Issue 24 item 8: a model parameter stored under one key holding a dot (``"a.b"``)
and one under the path ``["a", "b"]`` keep their own names (``a\\.b`` and ``a.b``)
through ``tensorfmt.primitiv.open(...).parameters``, ``tree()`` and a round trip."""

import struct

import numpy as np
import pytest

import tensorfmt
import tensorfmt.primitiv


def test_colliding_model_keys_keep_both_parameters(tmp_path):
    p = tmp_path / "m.data"
    one, two = np.ones(2, np.float32), np.arange(3, dtype=np.float32)
    tensorfmt.save(p, {"a\\.b": one, "a.b": two}, to="primitiv:model")
    f = tensorfmt.primitiv.open(p)
    assert sorted(f.parameters) == ["a.b", "a\\.b"]
    tree = f.tree()
    assert set(tree) == {"a.b", "a"} and set(tree["a"]) == {"b"}
    back = tensorfmt.load(p)
    np.testing.assert_array_equal(back["a\\.b"], one)
    np.testing.assert_array_equal(back["a.b"], two)


def test_two_spellings_of_one_key_are_refused(tmp_path):
    """``a\\.b`` and ``a\\x2eb`` are both the key ``a.b``: the writer kept one array
    (the other name's) with only a "wrote 1 of 2 tensors" warning. primitiv's
    ``Model::add`` refuses a name twice; so does the writer, writing nothing: naming
    both, or first the spelling that is not the reader's (``a\\x2eb`` is written
    ``a\\.b``)."""
    x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    for a, b in [("a\\.b", "a\\x2eb"), ("a\\x2Eb", "a\\x2eb")]:
        p = tmp_path / "dup.data"
        with pytest.raises(tensorfmt.TensorfmtError) as e:
            tensorfmt.save(p, {a: x, b: y}, to="primitiv:model")
        said = str(e.value).replace('"', "'")
        assert repr(a) in said or repr(b) in said
        assert not p.exists()
    with pytest.raises(tensorfmt.TensorfmtError, match='"Ab"'):
        tensorfmt.save(tmp_path / "x.data", {"\\x41b": x}, to="primitiv:model")


# A primitiv file built byte by byte (msgpack), independent of our writer.
def _u32(x):
    return b"\xce" + struct.pack(">I", x)


def _f32(*v):
    return b"\xc4" + bytes([4 * len(v)]) + struct.pack("<%df" % len(v), *v)


def _shape(dims, batch):
    return bytes([0x90 + len(dims)]) + b"".join(_u32(d) for d in dims) + _u32(batch)


def _param(value, stats):
    """value = (dims, batch, floats); stats = [(key, dims, batch, floats)]."""
    out = _shape(value[0], value[1]) + _f32(*value[2]) + _u32(len(stats))
    for key, dims, batch, vals in stats:
        out += bytes([0xA0 + len(key)]) + key.encode() + _shape(dims, batch) + _f32(*vals)
    return out


def test_a_stat_named_value_stays_a_stat(tmp_path):
    """primitiv allows any stat key, ``value`` too. The typed view merged the stats into
    one dict with the value (``{"value": value, **stats}``): in a parameter file the
    stat vanished, in a model the value took the stat's dims and batch. The stat is
    kept under its own key; ``load`` exports a parameter file's one as ``value~2``."""
    stats = [("value", [3], 2, [7, 8, 9, 10, 11, 12]), ("Adam.m1", [2], 1, [5, 6])]
    header = _u32(0) + _u32(1)
    p = tmp_path / "param.data"
    p.write_bytes(header + _u32(0x200) + _param(([2], 1, [1, 2]), stats))
    with pytest.warns(tensorfmt.TensorfmtWarning, match="value~2"):
        f = tensorfmt.primitiv.open(p)
    par = f.parameter
    assert (par.dims, par.batch) == ((2,), 1)
    np.testing.assert_array_equal(par.value, [1, 2])
    assert par.stat_shapes == {"value": ((3,), 2), "Adam.m1": ((2,), 1)}
    with pytest.warns(tensorfmt.TensorfmtWarning, match="value~2"):
        flat = tensorfmt.load(p)
    np.testing.assert_array_equal(par.stats["value"], flat["value~2"])
    assert par.stats["value"].shape == (3, 2)
    # In a model.
    m = tmp_path / "model.data"
    m.write_bytes(header + _u32(0x300) + _u32(1) + b"\x91\xa1w" + _param(([2], 1, [1, 2]), stats))
    w = tensorfmt.primitiv.open(m).parameters["w"]
    assert (w.dims, w.batch) == ((2,), 1)
    np.testing.assert_array_equal(w.value, [1, 2])
    assert w.stat_shapes == {"value": ((3,), 2), "Adam.m1": ((2,), 1)}
    np.testing.assert_array_equal(w.stats["value"], tensorfmt.load(m)["w/value"])
    # The header keeps them apart too.
    assert tensorfmt.open(m).header["entries"]["w"] == {
        "value": "[2]x1",
        "stats": {"value": "[3]x2", "Adam.m1": "[2]x1"},
    }
