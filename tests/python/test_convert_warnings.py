"""stk.convert's warnings are the library's, the same list as ``stk convert --json`` (issue 32 item
13), and the parse progress of a GGUF counts the bytes the file stores (gguf-py's tensor sizes, no
stk code), not their f32 size."""
import ctypes
import json
import shutil
import subprocess

import pytest

import stk
from stk import _lib
from conftest import SOURCE_ROOT

GGUF = SOURCE_ROOT / "tests" / "data" / "gguf"


def cli(*args):
    return subprocess.run([_lib.binary_path(), *map(str, args)], capture_output=True, text=True)


def test_warnings_are_the_commands(tmp_path, tiny):
    s = stk.convert(tiny, tmp_path / "py")
    c = json.loads(cli("convert", tiny, tmp_path / "cli", "--json").stdout)
    assert s["warnings"] == c["warnings"]
    assert len(s["warnings"]) == 1 and s["warnings"][0].startswith("tokenizer in EXT mode: no token tables are written")


def test_repaired_current_warning_is_the_commands(tmp_path, tiny):
    stk.convert(tiny, tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    for r in ("a", "b"):
        (tmp_path / r / "CURRENT").unlink()
    s = stk.convert(tiny, tmp_path / "a", r=256)
    c = json.loads(cli("convert", tiny, tmp_path / "b", "--r", "256", "--json").stdout)
    assert s["warnings"][1:] == [w.replace(str(tmp_path / "b"), str(tmp_path / "a")) for w in c["warnings"][1:]]
    assert s["warnings"][0] == c["warnings"][0]
    assert s["warnings"][1] == (f"{tmp_path / 'a'}/CURRENT was missing or named a generation that is not there: it was "
                                f"first pointed at the newest generation that verifies ({s['previous'][:16]}...), "
                                "and the new generation chains onto it")


# The stored bytes of every tensor, as gguf-py's reader gives them (no stk code).  Not here: the
# files whose tensors stk rebuilds in f32 from llama.cpp's layout (GPT-2's transposed matrices,
# DeepSeek's and gpt-oss's gathered ones): their progress counts the rebuilt f32 (docs/cli.md).
@pytest.mark.parametrize("name", ["tiny-llama-q8_0", "tiny-llama-f32", "tiny-llama-bf16", "tiny-internlm2-q8_0",
                                  "tiny-granitemoe-q8_0", "tiny-gpt-oss-mxfp4-bf16", "tiny-gemma-bf16"])
def test_parse_progress_counts_stored_bytes(tmp_path, name):
    gguf = pytest.importorskip("gguf")
    path = GGUF / f"{name}.gguf"
    want = sum(int(t.n_bytes) for t in gguf.GGUFReader(path).tensors)
    c = _lib.lib
    p = _lib.JobParams()
    p.struct_size = ctypes.sizeof(p)
    p.in_dir, p.out_dir, p.flags = str(path).encode(), str(tmp_path / "root").encode(), _lib.STK_JOB_PUBLISH_ROOT
    size = ctypes.c_size_t()
    assert c.stk_job_arena_size(ctypes.byref(p), ctypes.byref(size)) == 0
    arena = ctypes.create_string_buffer(size.value)
    job = ctypes.c_void_p()
    assert c.stk_open(ctypes.byref(p), arena, size.value, ctypes.byref(job)) == 0
    try:
        assert c.stk_stage_run(job, 1) == 0
        done, total, unit = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_char_p()
        assert c.stk_job_progress(job, ctypes.byref(done), ctypes.byref(total), ctypes.byref(unit)) == 0
        assert (unit.value, done.value, total.value) == (b"B", want, want)
    finally:
        c.stk_close(job)
