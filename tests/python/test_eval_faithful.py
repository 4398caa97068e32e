"""`stk eval --gen ROOT` on a faithful generation (issue 36 item 4, issue 38 item 3): the generation
as the library runs it (stk.lm, its runtime block's sinks and window) against the original, which
the library computes too (a window of the whole context) unless `--reference transformers`.

On tests/fixtures/eval/tiny-llama converted with `stk convert --profile faithful --sinks 2 --window
16`, contexts of 48 tokens (so the window evicts): the library's original agrees with transformers'
(perplexity to 1e-5 relative, top-1 identical, KL to 1e-6 nats), the converted side's figures are
recomputed here from stk.lm's logits with numpy, the JSON has exactly the keys of today's eval
(a `--swap window` run: the same keys with sinks and window), and the default path runs with torch
and transformers made unimportable.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stk import evaluation
from stk.lm import LanguageModel, Tokenizer
from conftest import SOURCE_ROOT, TINY, TINY_LLAMA  # `text`: conftest's prose

STK = os.environ.get("STK_BIN", str(SOURCE_ROOT / "build-test" / "src" / "cli" / "stk"))
CTX, SINKS, WINDOW = 48, 2, 16

# The keys of `stk eval --json` before a faithful generation could be scored (a `--swap window`
# run's: sinks and window are there when a window is applied), in their order.
TODAY_KEYS = ["command", "model", "gen", "texts", "ctx", "contexts", "swap", "zero", "sinks", "window",
              "perplexity_original", "perplexity_swapped", "kl_mean", "kl_p99", "top1_agreement", "tokens_scored",
              "positions_compared", "positions", "isolated", "layer_errors", "layers", "seconds"]


@pytest.fixture(scope="module")
def faithful(tmp_path_factory):
    root = tmp_path_factory.mktemp("faithful") / "root"
    r = subprocess.run([STK, "convert", "--in", str(TINY_LLAMA), "--out", str(root), "--profile", "faithful",
                        "--ffn", "bf16", "--sinks", str(SINKS), "--window", str(WINDOW), "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return str(root)


def _eval_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "stk", "eval", *args], capture_output=True, text=True,
                          env=env if env is not None else dict(os.environ))


def _log_softmax(x):
    y = x.astype(np.float64)
    y -= y.max(-1, keepdims=True)
    return y - np.log(np.exp(y).sum(-1, keepdims=True))


def test_library_tokenizer_is_transformers(text):
    """The default path tokenizes with the library (stk.lm.Tokenizer): the same ids as the
    AutoTokenizer the transformers reference uses, so both runs score the same tokens."""
    from transformers import AutoTokenizer
    body = open(text, encoding="utf-8").read()
    want = AutoTokenizer.from_pretrained(TINY_LLAMA)(body)["input_ids"]
    assert Tokenizer(TINY_LLAMA).encode(body) == want
    assert len(want) >= 3 * CTX


def test_library_original_agrees_with_transformers(text, faithful):
    lib = evaluation.evaluate(str(TINY_LLAMA), faithful, [text], ctx=CTX, contexts=2)
    ref = evaluation.evaluate(str(TINY_LLAMA), faithful, [text], ctx=CTX, contexts=2, reference="transformers")
    # today's keys, in today's order: a --swap window run of the torch path has the same
    assert list(lib) == TODAY_KEYS and list(ref) == TODAY_KEYS
    today = evaluation.evaluate(str(TINY_LLAMA), None, [text], ctx=CTX, contexts=2, swap="window", sinks=SINKS,
                                window=WINDOW)
    assert list(today) == TODAY_KEYS
    for r in (lib, ref):
        assert r["sinks"] == SINKS and r["window"] == WINDOW  # the runtime block's
        assert r["swap"] == "" and r["zero"] is False and r["isolated"] is False and r["layers"] == []
        assert r["contexts"] == 2 and r["tokens_scored"] == 2 * (CTX - 1) and r["positions_compared"] == 2 * CTX
        assert Path(r["gen"]).parent.parent.resolve() == Path(faithful).resolve()  # ROOT/generations/NAME
    # the converted side is the same library run on the same tokens: the same bits
    assert lib["perplexity_swapped"] == ref["perplexity_swapped"]
    # the original: the library's f32 forward against transformers' (logits within ~1e-6)
    assert lib["perplexity_original"] == pytest.approx(ref["perplexity_original"], rel=1e-5)
    assert lib["top1_agreement"] == ref["top1_agreement"]
    assert lib["kl_mean"] == pytest.approx(ref["kl_mean"], abs=1e-6)
    assert lib["kl_p99"] == pytest.approx(ref["kl_p99"], abs=1e-5)
    # a window of 16 in contexts of 48 (and bf16 weights) moves the distribution
    assert lib["kl_mean"] > 1e-4
    # transformers' own loss on the same tokens is the reference's perplexity of the original
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    ids = AutoTokenizer.from_pretrained(TINY_LLAMA)(open(text, encoding="utf-8").read())["input_ids"]
    m = AutoModelForCausalLM.from_pretrained(TINY_LLAMA, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        nll = [float(m(x, labels=x).loss) for x in (torch.tensor([ids[i * CTX:(i + 1) * CTX]]) for i in range(2))]
    assert ref["perplexity_original"] == pytest.approx(math.exp(sum(nll) / 2), rel=1e-6)


def test_converted_side_is_stk_lm_on_the_generation(text, faithful):
    """Recomputed here: each context fed from position 0 to a fresh stk.lm sequence on the
    generation (2 sinks + 16), the original at sinks 0 + a window of the context."""
    r = evaluation.evaluate(str(TINY_LLAMA), faithful, [text], ctx=CTX, contexts=3)
    ids = Tokenizer(TINY_LLAMA).encode(open(text, encoding="utf-8").read())
    conv = LanguageModel(faithful).sequence(sinks=SINKS, window=WINDOW)
    orig = LanguageModel(TINY_LLAMA).sequence(sinks=0, window=CTX)
    nll_o, nll_s, kl, agree = [], [], [], []
    for i in range(3):
        x = ids[i * CTX:(i + 1) * CTX]
        conv.reset()
        orig.reset()
        ls, lo = conv.feed(x, all_logits=True), orig.feed(x, all_logits=True)
        ps, po = _log_softmax(ls), _log_softmax(lo)
        nll_s += list(-ps[np.arange(CTX - 1), x[1:]])
        nll_o += list(-po[np.arange(CTX - 1), x[1:]])
        kl += list(np.maximum((np.exp(po) * (po - ps)).sum(-1), 0))
        agree += list(lo.argmax(-1) == ls.argmax(-1))
    assert r["perplexity_swapped"] == pytest.approx(math.exp(np.mean(nll_s)), rel=1e-12)
    assert r["perplexity_original"] == pytest.approx(math.exp(np.mean(nll_o)), rel=1e-12)
    assert r["kl_mean"] == pytest.approx(float(np.mean(kl)), rel=1e-9)
    assert r["top1_agreement"] == float(np.mean(agree))
    # --sinks / --window override the runtime block's: a window of the whole context keeps every
    # key, and what is left is the generation's bf16 weights
    w = evaluation.evaluate(str(TINY_LLAMA), faithful, [text], ctx=CTX, contexts=3, window=CTX)
    assert w["sinks"] == SINKS and w["window"] == CTX
    assert w["kl_mean"] < r["kl_mean"] and w["top1_agreement"] >= r["top1_agreement"]


def _no_torch_env(tmp_path):
    """torch and transformers that do not import (as a missing one: ModuleNotFoundError)."""
    fake = tmp_path / "fake"
    for mod in ("torch", "transformers"):
        (fake / mod).mkdir(parents=True)
        (fake / mod / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{mod}'\", name='{mod}')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fake)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def test_the_library_path_needs_no_torch(tmp_path, text, faithful):
    env = _no_torch_env(tmp_path)
    args = ["--model", str(TINY_LLAMA), "--gen", faithful, "--text", text, "--ctx", str(CTX), "--contexts", "2"]
    p = _eval_cli(*args, "--json", env=env)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert list(got) == TODAY_KEYS
    want = evaluation.evaluate(str(TINY_LLAMA), faithful, [text], ctx=CTX, contexts=2)
    for k in ("perplexity_original", "perplexity_swapped", "kl_mean", "kl_p99", "top1_agreement", "tokens_scored"):
        assert got[k] == want[k], k
    # the text output says what each side was
    p = _eval_cli(*args, env=env)
    assert p.returncode == 0, p.stderr
    assert "  original  stk's forward of --model (float32, a window of the whole context: full attention)" in p.stdout
    assert (f"  converted the faithful generation as stk runs it: {SINKS} sinks + a window of {WINDOW}, FFN bf16"
            in p.stdout)
    assert f"top-1 agreement  {want['top1_agreement']:.4f}" in p.stdout
    # --reference transformers is the one that needs them: one line, exit 1
    p = _eval_cli(*args, "--reference", "transformers", env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("stk eval: stk eval needs torch and transformers")


def test_faithful_refusals(text, faithful, converted):
    p = _eval_cli("--model", str(TINY_LLAMA), "--gen", faithful, "--text", text, "--ctx", str(CTX), "--swap", "ffn:0")
    assert p.returncode == 2
    assert "a faithful generation is scored as the library runs it, whole" in p.stderr
    # --reference stk on the default profile's arrays: the swaps run on the library's forward
    # (issue 38; tests/python/test_probe_paths.py compares it with transformers')
    root, _ = converted  # tiny-gpt2's default-profile generation
    p = _eval_cli("--model", str(TINY), "--gen", str(root), "--text", text, "--ctx", "32", "--contexts", "1", "--swap",
                  "ffn:0", "--reference", "stk")
    assert p.returncode == 0, p.stderr
    # a faithful generation of another model
    p = _eval_cli("--model", str(TINY), "--gen", faithful, "--text", text)
    assert p.returncode == 1 and "was converted from another model" in p.stderr


def test_int8_ffn_generation(tmp_path, text):
    """--ffn int8: the generation runs at its converted width; the report says so."""
    root = tmp_path / "int8"
    r = subprocess.run([STK, "convert", "--in", str(TINY_LLAMA), "--out", str(root), "--profile", "faithful",
                        "--ffn", "int8", "--sinks", str(SINKS), "--window", str(CTX)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = evaluation.evaluate(str(TINY_LLAMA), str(root), [text], ctx=CTX, contexts=2)
    assert rep.converted.endswith("FFN int8, policy window") and rep["window"] == CTX
    assert 0 < rep["kl_mean"] < 0.1 and rep["top1_agreement"] > 0.8
