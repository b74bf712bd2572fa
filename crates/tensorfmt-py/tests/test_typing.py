"""Typing: the stub of the native module matches it (mypy's stubtest), the package
type-checks (``mypy -p tensorfmt``), and user code gets precise types without
narrowing every access (``pvp.open(p, kind="dense")[k]`` is a ``Frame``)."""

import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, require_module

CONFIG = str(REPO / "crates" / "tensorfmt-py" / "pyproject.toml")

require_module("mypy", reason="mypy is in the test requirements (xtask/src/test.rs)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One mypy cache for the module: numpy's stubs are parsed once."""
    return str(tmp_path_factory.mktemp("mypy-cache"))


def _mypy(args, cwd):
    out = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.returncode, out.stdout + out.stderr


def test_stubtest_finds_the_stub_and_the_extension_agree(tmp_path):
    code, out = _mypy(["mypy.stubtest", "tensorfmt._native"], tmp_path)
    assert code == 0, out


def test_the_package_type_checks(tmp_path, cache):
    code, out = _mypy(["mypy", "--config-file", CONFIG, "--cache-dir", cache, "-p", "tensorfmt"], tmp_path)
    assert code == 0, out


def test_user_code_gets_precise_types(tmp_path, cache):
    user = tmp_path / "user.py"
    user.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import tensorfmt, tensorfmt.pvp

            dense = tensorfmt.pvp.open("a.pvp", kind="dense")
            values: np.ndarray = dense[3].values
            times = [f.time for f in dense[5:8]]
            weights: np.ndarray = tensorfmt.pvp.open("w.pvp", kind="weights")[0].weights
            f = tensorfmt.pvp.open("any.pvp")
            if isinstance(f, tensorfmt.pvp.WeightsFile):
                w = f[0].wmax
            doc = tensorfmt.open("x.npz")
            kind: str = doc.kind
            """
        )
    )
    code, out = _mypy(["mypy", "--config-file", CONFIG, "--cache-dir", cache, "--strict", str(user)], tmp_path)
    assert code == 0, out
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        textwrap.dedent(
            """
            import tensorfmt, tensorfmt.pvp

            tensorfmt.pvp.open("a.pvp", kind="dense")[0].weights
            tensorfmt.load("a.pvp", framwork="pt")
            """
        )
    )
    code, out = _mypy(["mypy", "--config-file", CONFIG, "--cache-dir", cache, str(wrong)], tmp_path)
    assert code != 0
    assert '"Frame" has no attribute "weights"' in out, out
    assert 'Unexpected keyword argument "framwork"' in out, out
