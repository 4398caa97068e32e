"""pytest setup for the stk package.

meson test runs these against the build directory (tests/meson.build sets STK_LIBRARY, STK_BIN and
PYTHONPATH=python/); run by hand against an installed package, nothing needs setting.
"""
import os
import shutil
import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(os.environ.get("STK_SOURCE_ROOT", Path(__file__).resolve().parents[2]))
TINY = SOURCE_ROOT / "bindings" / "testdata" / "tiny-gpt2"
TINY_LLAMA = SOURCE_ROOT / "tests" / "fixtures" / "eval" / "tiny-llama"  # scripts/make_eval_fixture.py
sys.path.insert(0, str(SOURCE_ROOT / "tests"))  # lwt_reader.py: the independent .lwt reference


@pytest.fixture(scope="session")
def tiny() -> Path:
    return TINY


@pytest.fixture(scope="session")
def text(tmp_path_factory):
    """English-like prose: enough for 3 contexts of 48 tokens with tiny-llama's 261-token vocabulary
    (stk eval / stk calibrate tests)."""
    p = tmp_path_factory.mktemp("text") / "prose.txt"
    p.write_text("the then in hello there, the thin thing in the heather. " * 40, encoding="utf-8")
    return str(p)


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """One generations root with the tiny model converted once (tests that only read share it)."""
    import stk
    root = tmp_path_factory.mktemp("root") / "root"
    summary = stk.convert(TINY, root, threads=2)
    return root, summary


@pytest.fixture()
def fresh_root(tmp_path):
    root = tmp_path / "root"
    yield root
    shutil.rmtree(root, ignore_errors=True)
