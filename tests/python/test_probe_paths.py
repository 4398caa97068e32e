"""`stk calibrate` and `stk eval` (default profile) on the library's own forward, read through its
probe (stk_seq_set_probe; docs/decisions.md "Probes"), against the same commands on transformers'
forward (`reference="transformers"`, whose moments and figures tests/python/test_calibrate.py and
test_eval.py check against hooks written in the tests): the tiny family fixtures' statistics
within a relative 1e-4 of each section's largest value, the eval figures on
tests/fixtures/eval/tiny-llama within the tolerances stated below; and both commands with torch
unimportable."""
import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

import stk
from stk import evaluation
from conftest import SOURCE_ROOT, TINY, TINY_LLAMA  # `text`: conftest's prose
from test_calibrate import _read
from test_eval_faithful import _no_torch_env

CTX = 48
SECTION_TOL = 1e-4  # |library - transformers| / max |transformers| per section


@pytest.fixture(scope="module")
def llama_gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama") / "root"
    stk.convert(TINY_LLAMA, root, threads=2)
    return str(root)


def _family(tmp_path_factory, name):
    """tests/fixtures/families/NAME with the tiny Llama's tokenizer beside it (ids taken modulo 256)."""
    d = tmp_path_factory.mktemp(name) / name
    shutil.copytree(SOURCE_ROOT / "tests" / "fixtures" / "families" / name, d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY_LLAMA / f, d / f)
    return d


@pytest.mark.parametrize("family,ctx", [("llama", 48), ("gpt2", 32), ("qwen3", 40), ("gemma2", 40), ("phi", 40)])
def test_calibrate_library_equals_transformers(tmp_path, tmp_path_factory, text, family, ctx, monkeypatch):
    model = {"llama": TINY_LLAMA, "gpt2": TINY}.get(family) or _family(tmp_path_factory, family)
    if family not in ("llama", "gpt2"):
        orig = evaluation.contexts_of
        monkeypatch.setattr(evaluation, "contexts_of", lambda tok, texts, c, n: [
            (p, [i % 256 for i in ids]) for p, ids in orig(tok, texts, c, n)])
    a, b = tmp_path / "stk.stats", tmp_path / "hf.stats"
    ra = stk.calibrate(str(model), [text], str(a), ctx=ctx, contexts=3, progress=False)
    rb = stk.calibrate(str(model), [text], str(b), ctx=ctx, contexts=3, progress=False, reference="transformers")
    assert ra["reference"] == "stk" and rb["reference"] == "transformers"
    for k in ("tokens", "contexts", "ctx", "layers", "d_model", "d_v", "n_pairs", "sections", "left_out"):
        assert ra[k] == rb[k], k
    _, ha, la = _read(a)
    _, hb, lb = _read(b)
    for k in ("magic", "version", "flags", "low", "crc", "L", "d", "dv", "npairs", "tokens", "file_bytes"):
        assert ha[k] == hb[k], k
    worst = 0.0
    for x, y in zip(la, lb):
        assert x["sections"] == y["sections"] and x["pairs"] == y["pairs"]
        for key in ("M", "b", "l", "C", "e", "G", "X", "yy"):
            if key in y:
                rel = float(np.abs(x[key] - y[key]).max() / max(np.abs(y[key]).max(), 1e-300))
                worst = max(worst, rel)
    print(f"calibrate {family}: library vs transformers, max relative difference {worst:.3g}")
    assert worst <= SECTION_TOL


def test_calibrate_needs_no_torch(tmp_path, text):
    env = _no_torch_env(tmp_path)
    out = tmp_path / "c.stats"
    p = subprocess.run([sys.executable, "-m", "stk", "calibrate", "--model", str(TINY_LLAMA), "--text", text, "--out",
                        str(out), "--ctx", str(CTX), "--contexts", "2", "--json"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["reference"] == "stk" and r["tokens"] == 2 * CTX and out.exists()
    # the same statistics as the in-process call (torch importable there)
    want = stk.calibrate(str(TINY_LLAMA), [text], str(tmp_path / "d.stats"), ctx=CTX, contexts=2, progress=False)
    assert r["digest"] == want["digest"]
    p = subprocess.run([sys.executable, "-m", "stk", "calibrate", "--model", str(TINY_LLAMA), "--text", text, "--out",
                        str(tmp_path / "e.stats"), "--reference", "transformers"], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "needs torch and transformers" in p.stderr


# The eval figures: perplexities within a relative 1e-5; KL (nats) within 1e-6 + 1e-3 relative;
# top-1 agreement within one position in 200; each module's rel_l2 within a relative 1e-4.
def _agree(a, b):
    for k in ("ctx", "contexts", "tokens_scored", "positions_compared", "swap", "zero", "isolated"):
        assert a[k] == b[k], k
    assert a["perplexity_original"] == pytest.approx(b["perplexity_original"], rel=1e-5)
    assert a["perplexity_swapped"] == pytest.approx(b["perplexity_swapped"], rel=1e-5)
    for k in ("kl_mean", "kl_p99"):
        assert abs(a[k] - b[k]) <= 1e-6 + 1e-3 * abs(b[k]), (k, a[k], b[k])
    assert abs(a["top1_agreement"] - b["top1_agreement"]) <= 1 / 200
    assert [(e["module"], e["layer"]) for e in a["layers"]] == [(e["module"], e["layer"]) for e in b["layers"]]
    worst = 0.0
    for x, y in zip(a["layers"], b["layers"]):
        for k in ("rel_l2", "rel_l2_isolated"):
            if k in y:
                assert x[k] == pytest.approx(y[k], rel=1e-4), (x, y)
                worst = max(worst, abs(x[k] - y[k]) / y[k])
    return worst


@pytest.mark.parametrize("swap,zero,isolated", [("", False, False), ("ffn:1", True, False), ("ffn:0", False, False),
                                                 ("prf:0,overlays:1,ffn", False, True), ("memory:1", False, False),
                                                 ("prf:1", True, False)])
def test_eval_library_equals_transformers(text, llama_gen, swap, zero, isolated):
    gen = None if (zero or not swap) else llama_gen
    a = evaluation.evaluate(str(TINY_LLAMA), gen, [text], ctx=CTX, contexts=2, swap=swap, zero=zero, isolated=isolated)
    b = evaluation.evaluate(str(TINY_LLAMA), gen, [text], ctx=CTX, contexts=2, swap=swap, zero=zero, isolated=isolated,
                            reference="transformers")
    worst = _agree(a, b)
    print(f"eval --swap {swap!r} zero={zero} isolated={isolated}: perplexity swapped {a['perplexity_swapped']:.6f} vs "
          f"{b['perplexity_swapped']:.6f}, kl_mean {a['kl_mean']:.4g} vs {b['kl_mean']:.4g}, rel_l2 worst relative "
          f"difference {worst:.3g}")
    if not swap:
        assert a["kl_mean"] == 0.0 and a["perplexity_swapped"] == a["perplexity_original"]
    if swap:
        assert a["perplexity_swapped"] != a["perplexity_original"]


def test_eval_needs_no_torch(tmp_path, text, llama_gen):
    env = _no_torch_env(tmp_path)
    args = ["--model", str(TINY_LLAMA), "--gen", llama_gen, "--text", text, "--ctx", str(CTX), "--contexts", "2"]
    p = subprocess.run([sys.executable, "-m", "stk", "eval", *args, "--swap", "ffn:0,prf:1", "--json"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    want = evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=2, swap="ffn:0,prf:1")
    for k in ("perplexity_original", "perplexity_swapped", "kl_mean", "kl_p99", "top1_agreement", "layers"):
        assert got[k] == want[k], k
    # a swap the probe points cannot express stays on transformers' forward, and says so
    p = subprocess.run([sys.executable, "-m", "stk", "eval", *args, "--swap", "window:0"], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "--swap window: computed inside transformers' forward" in p.stderr
    r = evaluation.evaluate(str(TINY_LLAMA), None, [text], ctx=CTX, contexts=1, swap="window:0", sinks=2, window=8)
    assert r.note is not None and r.note.startswith("--swap window: computed inside transformers' forward")
    assert math.isfinite(r["kl_mean"])
