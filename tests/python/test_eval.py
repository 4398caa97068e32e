"""stk eval (python/stk/evaluation.py) on tests/fixtures/eval/tiny-llama, a Llama written by
transformers (scripts/make_eval_fixture.py).  The references are transformers' own forward and
loss, and the generation's linear dictionary read key by key through stk_lookup (not through the
reference runtime's index)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import stk
from stk import evaluation
from conftest import SOURCE_ROOT, TINY, TINY_LLAMA  # `text`: conftest's prose
CTX = 48


@pytest.fixture(scope="module")
def llama_gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama") / "root"
    stk.convert(TINY_LLAMA, root, threads=2)
    return str(root)


def _reference(text):
    """transformers' own: tokens as AutoTokenizer gives them, loss as the model computes it."""
    tok = AutoTokenizer.from_pretrained(TINY_LLAMA)
    m = AutoModelForCausalLM.from_pretrained(TINY_LLAMA, dtype=torch.float32, attn_implementation="eager").eval()
    ids = tok(open(text, encoding="utf-8").read())["input_ids"]
    nll = []
    with torch.no_grad():
        for i in range(2):
            x = torch.tensor([ids[i * CTX:(i + 1) * CTX]])
            nll.append(float(m(x, labels=x).loss) * (CTX - 1))
    return m, ids, math.exp(sum(nll) / (2 * (CTX - 1)))


def test_parse_swap():
    assert evaluation.parse_swap("ffn:15,prf:0-2,overlays:1+3,memory") == [
        evaluation.Swap("ffn", (15,)), evaluation.Swap("prf", (0, 1, 2)), evaluation.Swap("overlays", (1, 3)),
        evaluation.Swap("memory", None)]
    assert evaluation.parse_swap("") == []
    with pytest.raises(ValueError, match="unknown module 'mlp'"):
        evaluation.parse_swap("mlp:1")
    with pytest.raises(ValueError, match="layer range '3-1' is empty"):
        evaluation.parse_swap("ffn:3-1")


def test_nothing_swapped_is_the_original(text):
    _, _, ppl = _reference(text)
    r = evaluation.evaluate(str(TINY_LLAMA), None, [text], ctx=CTX, contexts=2)
    assert r["contexts"] == 2 and r["tokens_scored"] == 2 * (CTX - 1) and r["positions_compared"] == 2 * CTX
    assert r["perplexity_swapped"] == r["perplexity_original"]
    assert r["kl_mean"] == 0.0 and r["kl_p99"] == 0.0 and r["top1_agreement"] == 1.0
    assert r["layers"] == []
    # transformers' own perplexity on the same tokens (its loss is a float32 mean: 6 digits)
    assert r["perplexity_original"] == pytest.approx(ppl, rel=1e-6)


def test_zero_deletes_the_module(text):
    r = evaluation.evaluate(str(TINY_LLAMA), None, [text], ctx=CTX, contexts=2, swap="ffn:1", zero=True)
    assert r["layers"] == [{"module": "ffn", "layer": 1, "rel_l2": 1.0}]  # |0 - y| / |y|
    assert r["kl_mean"] > 0 and r["perplexity_swapped"] != r["perplexity_original"]


def _dictionary_ffn(gen_root, layer, x):
    """y = M+ relu(x) + M- relu(-x), every entry of unit `layer` read through stk_lookup."""
    d = x.shape[-1]
    mp, mm = np.zeros((d, d)), np.zeros((d, d))
    with stk.Generation(gen_root) as g:
        for s, M in ((0, mp), (1, mm)):
            for i in range(d):
                for j in range(d):
                    key = (s << 63) | (layer << 48) | (i << 24) | j
                    try:
                        M[i, j] = g.linear(key)
                    except stk.StkError as e:
                        assert e.status == stk.Status.KEY_NOT_FOUND
    return np.maximum(x, 0) @ mp.T + np.maximum(-x, 0) @ mm.T


def test_ffn_swap_is_the_dictionary(text, llama_gen):
    m, ids, _ = _reference(text)
    r = evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=2, swap="ffn:0")
    # layer 0's FFN input is the original's (nothing before it is swapped): recompute its error
    err2 = ref2 = 0.0
    for i in range(2):
        cap = {}
        h = m.model.layers[0].mlp.register_forward_hook(lambda mod, a, out: cap.update(x=a[0][0], y=out[0]))
        with torch.no_grad():
            m(torch.tensor([ids[i * CTX:(i + 1) * CTX]]), use_cache=False)
        h.remove()
        y = _dictionary_ffn(llama_gen, 0, cap["x"].double().numpy())
        err2 += float(((y - cap["y"].double().numpy()) ** 2).sum())
        ref2 += float((cap["y"].double().numpy() ** 2).sum())
    (entry,) = r["layers"]
    assert entry["module"] == "ffn" and entry["layer"] == 0
    assert entry["rel_l2"] == pytest.approx(math.sqrt(err2 / ref2), rel=1e-5)
    assert r["perplexity_swapped"] != r["perplexity_original"]


def test_attention_swaps_report_each_layer(text, llama_gen):
    r = evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=1, swap="prf:0,overlays:1,ffn")
    assert [(e["module"], e["layer"]) for e in r["layers"]] == [("ffn", 0), ("prf", 0), ("ffn", 1), ("overlays", 1)]
    for e in r["layers"]:
        assert math.isfinite(e["rel_l2"]) and e["rel_l2"] > 0
    assert 0 <= r["top1_agreement"] <= 1 and r["kl_p99"] >= r["kl_mean"] * 0


def test_generation_of_another_model_is_refused(text, converted):
    root, summary = converted  # tiny-gpt2's generation
    with pytest.raises(stk.StkError) as e:
        evaluation.evaluate(str(TINY_LLAMA), str(root), [text], ctx=CTX, contexts=1, swap="ffn:0")
    msg = str(e.value)
    assert "was converted from another model" in msg
    digest = next(s for s in summary["stages"] if s["stage"] == "parse_tensors")
    assert f"crc32c {digest['crc32c']}" in msg  # the generation's, as the manifest records it
    assert msg.count("crc32c") == 2


def test_command_json(text):
    out = subprocess.run([sys.executable, "-m", "stk", "eval", "--model", str(TINY_LLAMA), "--text", text,
                          "--ctx", str(CTX), "--contexts", "1", "--swap", "ffn:1", "--zero", "--json"],
                         capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    for k in ("perplexity_original", "perplexity_swapped", "kl_mean", "kl_p99", "top1_agreement", "tokens_scored",
              "layers", "positions"):
        assert k in r
    assert r["tokens_scored"] == CTX - 1 and r["layers"] == [{"module": "ffn", "layer": 1, "rel_l2": 1.0}]


def test_window_prf_whole_window_is_the_original(text, llama_gen):
    """A window as long as the context carries no key: the exact part alone is the model's attention."""
    r = evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=1, swap="window-prf", sinks=2,
                            window=CTX)
    assert [e["module"] for e in r["layers"]] == ["window-prf", "window-prf"]
    assert max(e["rel_l2"] for e in r["layers"]) <= 1e-6
    assert r["perplexity_swapped"] == pytest.approx(r["perplexity_original"], rel=1e-6)
    assert r["sinks"] == 2 and r["window"] == CTX


def test_window_prf_combines_the_window_and_the_carried_state(text, llama_gen):
    """sinks 0, window 1: each query sees its own key exactly (rotary cancels at distance 0, so the
    logit is q.k / sqrt(head_dim) of the projections) and every earlier key through the PRF state;
    per head o = (e^l v + e^lp o_p) / (e^l + e^lp), o_p and lp from stk_prf_read_parts."""
    from stk.runtime import ReferenceRuntime
    m, _ = evaluation._load(str(TINY_LLAMA))
    attn = m.model.layers[0].self_attn
    cap = {}
    h1 = attn.register_forward_pre_hook(lambda mod, a, kw: cap.update(x=(a[0] if a else kw["hidden_states"])[0]),
                                        with_kwargs=True)
    h2 = attn.o_proj.register_forward_pre_hook(lambda mod, a: cap.update(o=a[0][0]))
    try:
        evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=1, swap="window-prf:0", sinks=0,
                            window=1)
    finally:
        h1.remove()
        h2.remove()
    x = cap["x"]
    H, Hkv, hd = evaluation._attn_geometry(attn, m.config)
    with torch.no_grad():
        q = attn.q_proj(x).reshape(CTX, H, hd).double().numpy()
        k = attn.k_proj(x).reshape(CTX, Hkv, hd).repeat_interleave(H // Hkv, dim=1).double().numpy()
        v = attn.v_proj(x).reshape(CTX, Hkv, hd).repeat_interleave(H // Hkv, dim=1).double().numpy()
    xs = x.numpy().astype(np.float32)
    with stk.Generation(llama_gen) as gen:
        st = ReferenceRuntime(gen).prf_state(0)
        want = np.empty((CTX, H, hd))
        for t in range(CTX):
            lt = (q[t] * k[t]).sum(-1) / math.sqrt(hd)
            if t == 0:
                want[t] = v[t]
                continue
            st.add_key(xs[t - 1], v[t - 1].reshape(-1).astype(np.float32))
            op, lp = st.read_parts(xs[t])
            w = 1.0 / (1.0 + np.exp(lt - lp))
            want[t] = (1 - w)[:, None] * v[t] + w[:, None] * op.reshape(H, hd)
    got = cap["o"].double().numpy().reshape(CTX, H, hd)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- fused attention projections (issue 39, item 9) -----------------------------------------

def _attention_io(m, blocks, name, layer, ids):
    """The attention block's input (its hidden_states) and output in the original forward."""
    cap = {}
    attn = getattr(blocks[layer], name)
    h1 = attn.register_forward_pre_hook(lambda mod, a, kw: cap.update(x=(a[0] if a else kw["hidden_states"])[0]),
                                        with_kwargs=True)
    h2 = attn.register_forward_hook(lambda mod, a, o: cap.update(y=(o[0] if isinstance(o, tuple) else o)[0]))
    try:
        with torch.no_grad():
            m(torch.tensor([ids]), use_cache=False)
    finally:
        h1.remove()
        h2.remove()
    return cap["x"].double().numpy(), cap["y"].double().numpy()


def _prf_reference(gen_root, layer, xs, values, out_proj, overlays):
    """sqrt(sum |W_O o + b - y|^2 / sum |y|^2) over the contexts, o the reference runtime's PRF
    read-out of x against the values the test split out of the fused weight itself."""
    from stk.runtime import ReferenceRuntime
    err2 = ref2 = 0.0
    with stk.Generation(gen_root) as g:
        rt = ReferenceRuntime(g)
        for x, y in xs:
            x32 = x.astype(np.float32)
            o = rt.prf_run(layer, x32, values(x).astype(np.float32)).astype(np.float64)
            if overlays:
                o = o + rt.overlay_delta(layer, x32)
            out = out_proj(o)
            err2 += float(((out - y) ** 2).sum())
            ref2 += float((y ** 2).sum())
    return math.sqrt(err2 / ref2)


def _same_on_the_library(ref, lib):
    """The library's forward (the default path, which splits fused projections at ingestion) gives
    the transformers path's per-module errors within a relative 1e-4 (a rel_l2 of 1e-4 is a
    difference of nearly equal outputs: their float32 inputs' last bits show)."""
    assert [(e["module"], e["layer"]) for e in lib["layers"]] == [(e["module"], e["layer"]) for e in ref["layers"]]
    for a, b in zip(lib["layers"], ref["layers"]):
        assert a["rel_l2"] == pytest.approx(b["rel_l2"], rel=1e-4)
        assert a["rel_l2_isolated"] == pytest.approx(b["rel_l2_isolated"], rel=1e-4)
    assert lib["perplexity_swapped"] == pytest.approx(ref["perplexity_swapped"], rel=1e-5)


def test_gpt2_fused_c_attn_attention_swaps(text, converted):
    """tiny-gpt2 (the repository's demo model): c_attn is [q | k | v] of 16 columns each (Conv1D,
    x @ W + b); the values are its last 16 columns, W_O is c_proj.  Layer 0's error is on the
    original inputs in both measures; layer 1's isolated error too."""
    from safetensors.numpy import load_file
    root, _ = converted
    ctx = 32
    r = evaluation.evaluate(str(TINY), str(root), [text], ctx=ctx, contexts=2, swap="prf:0,overlays:1", isolated=True,
                            reference="transformers")  # the split of c_attn inside transformers' modules
    _same_on_the_library(r, evaluation.evaluate(str(TINY), str(root), [text], ctx=ctx, contexts=2, swap="prf:0,overlays:1",
                                                isolated=True))
    w = load_file(str(TINY / "model.safetensors"))
    m, tok = evaluation._load(str(TINY))
    ids = tok(open(text, encoding="utf-8").read())["input_ids"]
    got = {(e["module"], e["layer"]): e for e in r["layers"]}
    assert sorted(got) == [("overlays", 1), ("prf", 0)]
    for (module, layer) in got:
        wa, ba = w[f"h.{layer}.attn.c_attn.weight"].astype(np.float64), w[f"h.{layer}.attn.c_attn.bias"].astype(np.float64)
        wp, bp = w[f"h.{layer}.attn.c_proj.weight"].astype(np.float64), w[f"h.{layer}.attn.c_proj.bias"].astype(np.float64)
        xs = [_attention_io(m, m.transformer.h, "attn", layer, ids[i * ctx:(i + 1) * ctx]) for i in range(2)]
        want = _prf_reference(root, layer, xs, lambda x: x @ wa[:, 32:48] + ba[32:48], lambda o: o @ wp + bp,
                              module == "overlays")
        assert got[(module, layer)]["rel_l2_isolated"] == pytest.approx(want, rel=1e-5)
        if layer == 0:
            assert got[(module, layer)]["rel_l2"] == pytest.approx(want, rel=1e-5)
        assert 1e-5 < want < 10  # not zero: the swap computed something of its own
    assert r["perplexity_swapped"] != r["perplexity_original"] and 0 <= r["top1_agreement"] <= 1


@pytest.fixture(scope="module")
def falcon(tmp_path_factory):
    """tests/fixtures/families/falcon (new_decoder_architecture: 4 query heads, 2 key/value heads,
    one fused query_key_value) with the tiny Llama's tokenizer beside it, converted."""
    import shutil
    d = tmp_path_factory.mktemp("falcon") / "falcon"
    shutil.copytree(SOURCE_ROOT / "tests" / "fixtures" / "families" / "falcon", d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY_LLAMA / f, d / f)
    root = d.parent / "root"
    stk.convert(d, root, threads=2, allow_uncertified_tokenizer=True)
    return d, str(root)


def test_falcon_fused_qkv_attention_swap(text, falcon, monkeypatch):
    """Falcon's query_key_value rows come in 2 groups (one per key/value head) of [q_0, q_1, k, v],
    16 rows each: query head j reads the v rows of group j // 2; W_O is `dense` (no bias)."""
    from safetensors.torch import load_file
    d, root = falcon
    orig = evaluation.contexts_of
    monkeypatch.setattr(evaluation, "contexts_of", lambda tok, texts, c, n: [
        (p, [i % 256 for i in ids]) for p, ids in orig(tok, texts, c, n)])  # the fixture's vocabulary is 256
    ctx = 40
    r = evaluation.evaluate(str(d), root, [text], ctx=ctx, contexts=2, swap="prf:0,memory:1", isolated=True,
                            reference="transformers")  # the split of query_key_value inside transformers' modules
    _same_on_the_library(r, evaluation.evaluate(str(d), root, [text], ctx=ctx, contexts=2, swap="prf:0,memory:1",
                                                isolated=True))
    w = {k: v.double().numpy() for k, v in load_file(str(d / "model.safetensors")).items()}
    m, tok = evaluation._load(str(d))
    ids = [i % 256 for i in tok(open(text, encoding="utf-8").read())["input_ids"]]
    got = {(e["module"], e["layer"]): e for e in r["layers"]}
    assert sorted(got) == [("memory", 1), ("prf", 0)]
    layer = 0
    qkv = w[f"transformer.h.{layer}.self_attention.query_key_value.weight"]  # [(4 + 2 * 2) * 16, 64]
    wo = w[f"transformer.h.{layer}.self_attention.dense.weight"]
    v_rows = np.concatenate([qkv[g * 64 + 48:g * 64 + 64] for j in range(4) for g in [j // 2]])  # [4 * 16, 64]
    xs = [_attention_io(m, m.transformer.h, "self_attention", layer, ids[i * ctx:(i + 1) * ctx]) for i in range(2)]
    want = _prf_reference(root, layer, xs, lambda x: x @ v_rows.T, lambda o: o @ wo.T, False)
    assert got[("prf", 0)]["rel_l2"] == pytest.approx(want, rel=1e-5)
    assert got[("prf", 0)]["rel_l2_isolated"] == pytest.approx(want, rel=1e-5)
    assert 1e-5 < want < 10
    assert math.isfinite(got[("memory", 1)]["rel_l2"]) and got[("memory", 1)]["rel_l2"] > 0


# ---- --isolated (issue 39, item 10) -----------------------------------------------------------

def test_isolated_measures_each_module_on_the_original_inputs(text, llama_gen):
    """Every FFN swapped: layer 0's input is the original's either way; layer 1's swapped-run
    input is already changed by layer 0's dictionary, its isolated one is the original model's
    (recomputed here from hooks on the unswapped model and the dictionary read through stk_lookup)."""
    m, ids, _ = _reference(text)
    r = evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=2, swap="ffn", isolated=True)
    plain = evaluation.evaluate(str(TINY_LLAMA), llama_gen, [text], ctx=CTX, contexts=2, swap="ffn")
    want = []
    for layer in range(2):
        err2 = ref2 = 0.0
        for i in range(2):
            cap = {}
            h = m.model.layers[layer].mlp.register_forward_hook(lambda mod, a, out: cap.update(x=a[0][0], y=out[0]))
            with torch.no_grad():
                m(torch.tensor([ids[i * CTX:(i + 1) * CTX]]), use_cache=False)
            h.remove()
            y = _dictionary_ffn(llama_gen, layer, cap["x"].double().numpy())
            err2 += float(((y - cap["y"].double().numpy()) ** 2).sum())
            ref2 += float((cap["y"].double().numpy() ** 2).sum())
        want.append(math.sqrt(err2 / ref2))
    e0, e1 = r["layers"]
    assert (e0["module"], e0["layer"], e1["module"], e1["layer"]) == ("ffn", 0, "ffn", 1)
    assert e0["rel_l2_isolated"] == pytest.approx(want[0], rel=1e-5) and e0["rel_l2"] == pytest.approx(want[0], rel=1e-5)
    assert e1["rel_l2_isolated"] == pytest.approx(want[1], rel=1e-5)
    assert abs(e1["rel_l2"] - want[1]) > 1e-3  # the drifted measure is another number
    # the swapped run and the scores are those of a run without --isolated (the original forward unchanged)
    assert [e["rel_l2"] for e in plain["layers"]] == [e["rel_l2"] for e in r["layers"]]
    for k in ("perplexity_original", "perplexity_swapped", "kl_mean", "top1_agreement"):
        assert r[k] == plain[k]
    assert r["isolated"] is True and "rel_l2_isolated" in r["layer_errors"] and "original model's inputs" in r["layer_errors"]
    assert "rel_l2_isolated" not in plain["layers"][0]
    text_out = evaluation._format(r)
    assert "swapped run: on the swapped run's inputs; isolated: on the original model's inputs" in text_out
    assert f"ffn              1  {e1['rel_l2']:>11.4f}  {e1['rel_l2_isolated']:>9.4f}" in text_out
