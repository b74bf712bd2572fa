"""Shared locations for the Python tests: the repo's fixtures and the shared corpus."""

import importlib
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
TESTDATA = REPO / "testdata"


def corpus_dir() -> pathlib.Path:
    """The shared corpus (`$TENSORFMT_CORPUS` or `../shared/corpus` beside the repo)."""
    env = os.environ.get("TENSORFMT_CORPUS")
    return pathlib.Path(env) if env else REPO.parent / "shared" / "corpus"


def require_corpus(sub: str) -> pathlib.Path:
    """The corpus folder `sub`; absent, a loud skip (a failure when `CI=true`)."""
    d = corpus_dir() / sub
    if not d.is_dir():
        msg = f"SKIPPING: corpus folder {d} is absent (set TENSORFMT_CORPUS)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg + " and CI=true requires it")
        print(msg)
        pytest.skip(msg)
    return d


def optional_corpus(sub: str) -> pathlib.Path:
    """A corpus folder beyond the corpus' contract (files a session added to the shared
    corpus, such as real trained detectors fetched for issue 30): absent, a loud skip
    even under ``CI=true``, since a CI machine's corpus may predate them."""
    d = corpus_dir() / sub
    if not d.is_dir():
        msg = f"SKIPPING: optional corpus folder {d} is absent (not part of the corpus contract)"
        print(msg)
        pytest.skip(msg)
    return d


def require_module(name: str, reason: str = ""):
    """``pytest.importorskip`` that fails under ``CI=true``: every test requirement is
    installed by ``cargo xtask test``, so a missing one there is a broken install, not a
    reason to skip (a skipped module used to hide every test in it). torch may be
    missing with the reason xtask gives (``TENSORFMT_TORCH_UNAVAILABLE``)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        msg = f"SKIPPING: {name} is not installed ({e}){': ' + reason if reason else ''}"
        why = os.environ.get("TENSORFMT_TORCH_UNAVAILABLE")
        if name.split(".")[0] == "torch" and why:
            msg += f"; installing torch failed: {why}"
        elif os.environ.get("CI") == "true":
            pytest.fail(msg + " (cargo xtask test installs it) and CI=true requires it", pytrace=False)
        print(msg)
        pytest.skip(msg, allow_module_level=True)


def fixtures():
    """Every golden fixture of testdata/ (the files with a .dump beside them)."""
    return sorted(p for p in TESTDATA.rglob("*") if p.is_file() and p.with_name(p.name + ".dump").exists())


@pytest.fixture
def tmp(tmp_path):
    return tmp_path
