"""torch interop: torch.from_numpy on returned arrays, tensorfmt.save of torch tensors."""

import warnings

import numpy as np

import tensorfmt
from conftest import TESTDATA, require_module

# `cargo xtask test` installs torch from PyPI and, where it cannot (no space, no
# network), says why (TENSORFMT_TORCH_UNAVAILABLE): then these tests skip loudly; a torch
# missing for any other reason fails under CI=true.
torch = require_module("torch")


def test_from_numpy_on_a_returned_array():
    with tensorfmt.open(TESTDATA / "core" / "model.safetensors") as doc:
        for name in doc:
            arr = doc[name]
            # Read-only arrays: torch warns (once) about writability but shares the memory.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                t = torch.from_numpy(arr)
            assert t.shape == arr.shape
            assert t.data_ptr() == arr.__array_interface__["data"][0]
            np.testing.assert_array_equal(t.numpy(), arr)


def test_save_a_dict_of_torch_tensors(tmp_path):
    tensors = {
        "w": torch.arange(12, dtype=torch.float32).reshape(3, 4),
        "t": torch.arange(12, dtype=torch.float64).reshape(3, 4).t(),  # non-contiguous
        "g": torch.ones(2, 2, requires_grad=True),
        "h": torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
        "i": torch.tensor([1, 2, 3], dtype=torch.int64),
    }
    p = tmp_path / "t.safetensors"
    tensorfmt.save(p, tensors)
    back = tensorfmt.load(p)
    for name, t in tensors.items():
        want = t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy()
        np.testing.assert_array_equal(back[name], want)
    with tensorfmt.open(p) as doc:
        assert doc.info("h").stored_dtype == "bf16"
    # And the file is what safetensors' own torch loader expects.
    st = require_module("safetensors.torch")
    loaded = st.load_file(str(p))
    assert loaded["h"].dtype == torch.bfloat16
    assert torch.equal(loaded["t"], tensors["t"].contiguous())


def test_in_place_torch_ops_on_a_mapped_array_neither_crash_nor_touch_the_file(tmp_path):
    # torch only warns that the array is read-only; training code then updates the
    # tensor in place. The mapping is copy-on-write, so the process writes private
    # copies of the pages: no segfault, and the file keeps its bytes. Run in a child so
    # that a crash fails this test instead of killing pytest.
    import subprocess
    import sys

    path = tmp_path / "w.safetensors"
    tensorfmt.save(path, {"w": np.ones((256, 256), np.float32)})
    before = path.read_bytes()
    code = f"""
import warnings, torch, tensorfmt
warnings.simplefilter("ignore", UserWarning)
doc = tensorfmt.open({str(path)!r})
t = torch.from_numpy(doc["w"])
t.mul_(3).add_(1)
assert float(t.sum()) == 4.0 * 256 * 256
assert float(doc["w"].sum()) == 4.0 * 256 * 256   # the same (private) pages
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr)
    assert path.read_bytes() == before
    np.testing.assert_array_equal(tensorfmt.load(path)["w"], np.ones((256, 256), np.float32))
