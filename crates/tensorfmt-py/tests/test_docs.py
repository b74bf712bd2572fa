"""Every Python example a user reads runs: the README's ```python blocks and the
docstring examples (``>>>``) of every module of the package.

Each example runs on its own, in a fresh temporary directory holding a ``testdata``
link to the repository's fixtures: it may read ``testdata/...`` and write any relative
name, and it cannot lean on files another example wrote.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.metadata
import os
import pathlib
import pkgutil
import re
import sys
import tomllib
import warnings

import pytest

from conftest import REPO, TESTDATA

import tensorfmt


def _python_blocks(text: str):
    """``(line, source)`` of every fenced ```python block."""
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


README_TEXT = (REPO / "README.md").read_text(encoding="utf-8")
README_BLOCKS = _python_blocks(README_TEXT)


def _installed_before(line: int) -> set:
    """The distributions a reader who ran every ``pip install ./crates/tensorfmt-py[...]``
    the README shows above ``line`` has: the package's dependencies and those extras'."""
    project = tomllib.loads((REPO / "crates/tensorfmt-py/pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    above = "\n".join(README_TEXT.splitlines()[: line - 1])
    for m in re.finditer(r"pip install \"?\./crates/tensorfmt-py(?:\[([\w,-]+)\])?", above):
        for extra in (m.group(1) or "").split(","):
            if extra:
                wanted += project["optional-dependencies"][extra]
    return {re.split(r"[\[<>=~! ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in wanted}


def _imported(source: str) -> set:
    """The top-level modules a block imports that are neither tensorfmt nor the standard
    library."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n != "tensorfmt" and n not in sys.stdlib_module_names}


@pytest.mark.parametrize("line,source", README_BLOCKS, ids=[f"README.md:{l}" for l, _ in README_BLOCKS])
def test_readme_blocks_import_only_what_the_readme_installs(line, source):
    """Issue 34 item 2: a reader who installs what the README says above a block can
    run it (the Caffe -> ONNX example needed onnxruntime, which nothing installed)."""
    have = _installed_before(line)
    dists = importlib.metadata.packages_distributions()
    for module in sorted(_imported(source)):
        provided_by = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        assert provided_by & have, (
            f"README.md:{line} imports {module}, which no pip install above it provides "
            f"(installed there: {sorted(have)})"
        )


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A fresh working directory with ``testdata`` pointing at the fixtures."""
    (tmp_path / "testdata").symlink_to(TESTDATA, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_has_python_examples():
    assert len(README_BLOCKS) >= 2


@pytest.mark.parametrize("line,source", README_BLOCKS, ids=[f"README.md:{l}" for l, _ in README_BLOCKS])
def test_readme_python_block_runs(line, source, sandbox):
    code = compile(source, f"README.md:{line}", "exec")
    with warnings.catch_warnings():
        # A README example that warns is one a user would be puzzled by.
        warnings.simplefilter("error")
        # Twice in the same folder: a user runs an example again, and its outputs are
        # replaced (as save and the PVP writers do by default), not refused.
        for _ in range(2):
            exec(code, {"__name__": "__readme__"})


def _modules():
    names = ["tensorfmt"]
    for info in pkgutil.iter_modules(tensorfmt.__path__, "tensorfmt."):
        if info.name != "tensorfmt._native":
            names.append(info.name)
    return sorted(names)


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    out = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError as e:  # an optional extra (dask, matplotlib) not installed
            out.append(pytest.param(name, None, marks=pytest.mark.skip(reason=f"{name}: {e}")))
            continue
        for test in finder.find(module, name):
            if test.examples:
                out.append(pytest.param(name, test, id=test.name))
    return out


DOCTESTS = _doctests()


def test_docstrings_have_examples():
    """The package documents its main entry points with runnable examples."""
    names = {p.values[1].name for p in DOCTESTS if p.values[1] is not None}
    for expected in [
        "tensorfmt._api.open",
        "tensorfmt._api.load",
        "tensorfmt._api.save",
        "tensorfmt._api.convert",
        "tensorfmt.pvp.open",
        "tensorfmt.caffe.open",
        "tensorfmt.som.open",
        "tensorfmt.primitiv.open",
    ]:
        assert expected in names


@pytest.mark.parametrize("module,test", DOCTESTS)
def test_docstring_examples_run(module, test, sandbox):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    # A copy: a docstring's names do not leak into the next one.
    test.globs = dict(test.globs)
    failures = []
    runner.run(test, out=failures.append)
    runner_failed = runner.summarize(verbose=False).failed
    assert not runner_failed, "".join(failures)


def test_doc_examples_name_only_files_in_testdata():
    """No example reads an invented path: every ``testdata/...`` it names exists."""
    texts = [s for _, s in README_BLOCKS] + [
        p.values[1].docstring or "" for p in DOCTESTS if p.values[1] is not None
    ]
    for text in texts:
        for rel in re.findall(r"testdata/[\w./-]+", text):
            assert (REPO / rel.rstrip(".")).exists(), rel


def test_docstring_code_blocks_are_examples_that_run():
    """A literal block (``::``) in a docstring is an example a user copies: it must be
    a ``>>>`` doctest, which the tests above run (prose code blocks named files that do
    not exist and names never defined)."""
    bad = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for test in doctest.DocTestFinder(exclude_empty=False).find(module, name):
            doc = test.docstring or ""
            for m in re.finditer(r"::\n\n((?:[ ]+.*\n?)+)", doc):
                first = m.group(1).lstrip()
                if not first.startswith(">>>"):
                    bad.append(f"{test.name}: {first.splitlines()[0]}")
    assert not bad, "docstring code blocks that are not doctests:\n" + "\n".join(bad)
