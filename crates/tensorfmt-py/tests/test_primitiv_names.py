"""Issue 24 item 8: a model parameter stored under one key holding a dot (``"a.b"``)
and one under the path ``["a", "b"]`` keep their own names (``a\\.b`` and ``a.b``)
through ``tensorfmt.primitiv.open(...).parameters``, ``tree()`` and a round trip."""

import numpy as np

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
