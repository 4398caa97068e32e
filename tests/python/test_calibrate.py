"""stk calibrate (python/stk/calibration.py) on tests/fixtures/eval/tiny-llama (a Llama written by
transformers: RoPE, GQA), bindings/testdata/tiny-gpt2 (GPT-2: fused c_attn, Conv1D, no RoPE) and
tests/fixtures/families/qwen3 (q_norm / k_norm before the rotation).
The reference is written here from docs/format.md ("Calibration statistics"): transformers' own
forward, read with hooks registered by the test, the Llama logits recomputed from q_proj/k_proj and
the model's rotary embedding, the moments in numpy float64; the header checked byte by byte with
hashlib and a CRC32C written from its definition."""
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import stk
from stk import calibration, evaluation
from conftest import SOURCE_ROOT, TINY, TINY_LLAMA  # `text`: conftest's prose
from calib_stats_reference import crc32c as crc32c_ref  # tests/: bitwise, from CRC32C's definition
PPQ = 16


def test_crc32c_check_value():
    assert crc32c_ref(b"123456789") == 0xE3069283
    # the writer's crc32c (numpy over 1024-byte chunks by 32-bit words from 4 KiB on), whole and continued
    assert calibration.crc32c(b"123456789") == 0xE3069283
    data = np.random.default_rng(7).integers(0, 256, 40001, dtype=np.uint8).tobytes()
    want = crc32c_ref(data)
    assert calibration.crc32c(data) == want
    assert calibration.crc32c(data[17000:], calibration.crc32c(data[:17000])) == want


def _triu(a):
    return a[np.triu_indices(a.shape[0])]


def _weight(t):
    """docs/format.md: each key s <= t of query t weighted min(PPQ, t + 1) / (t + 1), the
    expectation of PPQ keys drawn uniformly from 0..t."""
    return min(PPQ, t + 1) / (t + 1)


def _reference(model_dir, text, ctx, n_ctx, family):
    """The moments per layer, from hooks registered here on transformers' modules."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    ids = [i % m.config.vocab_size for i in tok(open(text, encoding="utf-8").read())["input_ids"]]
    n_ctx = min(n_ctx, len(ids) // ctx)
    cfg = m.config
    rope = family in ("llama", "qwen3")
    if rope:
        blocks = m.model.layers
        attn_of = lambda b: b.self_attn
        oproj_of = lambda b: b.self_attn.o_proj
    else:
        blocks = m.transformer.h
        attn_of = lambda b: b.attn
        oproj_of = lambda b: b.attn.c_proj
    L, d = len(blocks), cfg.hidden_size
    H = cfg.num_attention_heads
    hd = d // H if family == "gpt2" else cfg.head_dim
    hkv = cfg.num_key_value_heads if rope else H
    seen = {}
    hooks = []
    for li, b in enumerate(blocks):
        hooks.append(b.mlp.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(("ffn", li), (a[0], o))))
        hooks.append(oproj_of(b).register_forward_pre_hook(lambda mod, a, li=li: seen.__setitem__(("o", li), a[0])))
        hooks.append(attn_of(b).register_forward_pre_hook(
            lambda mod, a, kw, li=li: seen.__setitem__(("x", li), (a[0] if a else kw["hidden_states"], kw)), with_kwargs=True))
        if family == "qwen3":  # q and k after their RMSNorm, before the rotation
            hooks.append(b.self_attn.q_norm.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(("q", li), o)))
            hooks.append(b.self_attn.k_norm.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(("k", li), o)))
        elif family == "llama":
            hooks.append(b.self_attn.q_proj.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(("q", li), o)))
            hooks.append(b.self_attn.k_proj.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(("k", li), o)))
        else:
            hooks.append(b.attn.c_attn.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(("qkv", li), o)))
    acc = [dict(G=0, X=0, yy=0, C=0, e=0, M=0, b=0, l1=0.0, l2=0.0, n=0, nf=0, np=0) for _ in range(L)]
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    with torch.no_grad():
        for c in range(n_ctx):
            chunk = ids[c * ctx:(c + 1) * ctx]
            seen.clear()
            m(torch.tensor([chunk]), use_cache=False)
            for li in range(L):
                a = acc[li]
                # the ffn moments skip each context's position 0 (docs/format.md)
                x = seen[("ffn", li)][0][0, 1:].numpy().astype(np.float64)
                y = seen[("ffn", li)][1][0, 1:].numpy().astype(np.float64)
                z = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=1)
                a["G"] = a["G"] + z.T @ z
                a["X"] = a["X"] + z.T @ y
                a["yy"] = a["yy"] + (y * y).sum(0)
                a["nf"] += ctx - 1
                o = seen[("o", li)][0].numpy().astype(np.float64)
                a["C"] = a["C"] + o.T @ o
                a["n"] += ctx
                xa_t, kw = seen[("x", li)]
                xa = xa_t[0].numpy().astype(np.float64)
                if rope:
                    q = seen[("q", li)].reshape(1, ctx, H, hd).transpose(1, 2)
                    k = seen[("k", li)].reshape(1, ctx, hkv, hd).transpose(1, 2)
                    qn = q[0].numpy().astype(np.float64)
                    kn = np.repeat(k[0].numpy().astype(np.float64), H // hkv, axis=0)
                    half = hd // 2
                    a["e"] = a["e"] + (np.sqrt(qn[..., :half] ** 2 + qn[..., half:] ** 2)
                                       * np.sqrt(kn[..., :half] ** 2 + kn[..., half:] ** 2)).sum((0, 1))
                    cos, sin = kw["position_embeddings"]
                    qr, kr = apply_rotary_pos_emb(q, k, cos, sin)
                    qr = qr[0].numpy().astype(np.float64)
                    kr = np.repeat(kr[0].numpy().astype(np.float64), H // hkv, axis=0)
                else:
                    qkv = seen[("qkv", li)][0]
                    qr = qkv[:, :d].reshape(ctx, H, hd).transpose(0, 1).numpy().astype(np.float64)
                    kr = qkv[:, d:2 * d].reshape(ctx, H, hd).transpose(0, 1).numpy().astype(np.float64)
                for t in range(ctx):  # every pair (t, s <= t), one query at a time
                    s = np.arange(t + 1)
                    lg = np.einsum("hd,hsd->s", qr[:, t, :], kr[:, s, :]) / H / math.sqrt(hd)
                    p = xa[t] * xa[s]
                    w = _weight(t)
                    a["M"] = a["M"] + w * (p.T @ p)
                    a["b"] = a["b"] + w * (p.T @ lg)
                    a["l1"] += w * lg.sum()
                    a["l2"] += w * (lg * lg).sum()
                    a["np"] += min(PPQ, t + 1)
    for h_ in hooks:
        h_.remove()
    return acc, n_ctx * ctx, (L, d, H * hd, hd // 2 if rope else 0)


def _read(path):
    """The file as docs/format.md lays it out (written here, not stk's reader)."""
    b = open(path, "rb").read()
    (magic, version, flags, low, crc, L, d, dv, npairs, res, tokens, fbytes) = struct.unpack_from("<8sIIQIIIIIIQQ", b, 0)
    hdr = dict(magic=magic, version=version, flags=flags, low=low, crc=crc, L=L, d=d, dv=dv, npairs=npairs, res=res,
               tokens=tokens, file_bytes=fbytes, sha=b[64:96], res2=b[96:124], hcrc=struct.unpack_from("<I", b, 124)[0])
    layers = []
    at = 128 + 16 * L
    for li in range(L):
        secs, lcrc, pairs = struct.unpack_from("<IIQ", b, 128 + 16 * li)
        out = dict(sections=secs, crc=lcrc, pairs=pairs, start=at)

        def take(n):
            nonlocal at
            v = np.frombuffer(b, dtype="<f8", count=n, offset=at)
            at += 8 * n
            return v
        if secs & 1:
            out["M"] = take(d * (d + 1) // 2)
            out["b"] = take(d)
            out["l"] = take(2)
        if secs & 2:
            out["C"] = take(dv * (dv + 1) // 2)
        if secs & 4:
            out["e"] = take(npairs)
        if secs & 8:
            out["G"] = take(2 * d * (2 * d + 1) // 2)
            out["X"] = take(2 * d * d).reshape(2 * d, d)
            out["yy"] = take(d)
        out["end"] = at
        layers.append(out)
    assert at == len(b)
    return b, hdr, layers


def _close(got, want):
    want = np.asarray(want, dtype=np.float64)
    scale = max(float(np.abs(want).max()), 1e-300)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * scale)


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory):
    """tests/fixtures/families/qwen3 (q_norm / k_norm before the rotation) with the tiny Llama's
    tokenizer beside it (the fixture has none); its ids are taken modulo the vocabulary of 256."""
    d = tmp_path_factory.mktemp("qwen3") / "qwen3"
    shutil.copytree(SOURCE_ROOT / "tests" / "fixtures" / "families" / "qwen3", d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY_LLAMA / f, d / f)
    return d


@pytest.mark.parametrize("family,ctx", [("llama", 48), ("gpt2", 32), ("qwen3", 40)])
def test_moments_match_reference(tmp_path, text, family, ctx, request, monkeypatch):
    model = {"llama": TINY_LLAMA, "gpt2": TINY}.get(family) or request.getfixturevalue("tiny_qwen3")
    if family == "qwen3":
        orig = evaluation.contexts_of
        monkeypatch.setattr(evaluation, "contexts_of", lambda tok, texts, c, n: [
            (p, [i % 256 for i in ids]) for p, ids in orig(tok, texts, c, n)])
    out = tmp_path / "model.stats"
    # transformers' forward here (the library's is checked against it: tests/python/test_probe_paths.py)
    r = stk.calibrate(str(model), [text], str(out), ctx=ctx, contexts=3, pairs_per_query=PPQ, progress=False,
                      reference="transformers")
    acc, tokens, (L, d, dv, npairs) = _reference(model, text, ctx, 3, family)
    b, hdr, layers = _read(out)
    # header, byte by byte
    assert hdr["magic"] == b"STKCAL01" and hdr["version"] == 2 and hdr["flags"] == 0 and hdr["res"] == 0
    assert hdr["res2"] == bytes(28)
    assert (hdr["crc"], hdr["low"]) == evaluation.model_digest(str(model))
    assert (hdr["L"], hdr["d"], hdr["dv"], hdr["npairs"]) == (L, d, dv, npairs)
    assert hdr["tokens"] == tokens == r["tokens"]
    assert hdr["file_bytes"] == len(b) == os.path.getsize(out)
    assert hdr["sha"] == hashlib.sha256(b[128:]).digest()
    assert r["digest"] == hashlib.sha256(b[128:]).hexdigest()
    assert hdr["hcrc"] == crc32c_ref(b[:124])
    want_secs = 0xB if family == "gpt2" else 0xF
    for li, (got, a) in enumerate(zip(layers, acc)):
        assert got["sections"] == want_secs
        assert got["crc"] == crc32c_ref(b[got["start"]:got["end"]])  # version 2: the layer's section bytes
        assert got["pairs"] == a["np"]
        n, n_p = a["n"], a["np"]
        assert a["nf"] == n - 3  # 3 contexts, position 0 of each left out of the ffn moments
        _close(got["G"], _triu(a["G"] / a["nf"]))
        _close(got["X"], a["X"] / a["nf"])
        _close(got["yy"], a["yy"] / a["nf"])
        _close(got["C"], _triu(a["C"] / n))
        _close(got["M"], _triu(a["M"] / n_p))
        _close(got["b"], a["b"] / n_p)
        _close(got["l"], [a["l1"] / n_p, a["l2"] / n_p])
        if family != "gpt2":
            _close(got["e"], a["e"] / n)
        else:
            assert "e" not in got
    assert r["sections"] == [["prf_pairs", "attn_out"] + (["rope_pairs"] if family != "gpt2" else []) + ["ffn"]] * L
    if family == "gpt2":
        assert r["left_out"] == ["rope_pairs at layers 0, 1: gpt2 has no rotary position embedding"]
    # pairs counted: t + 1 for the first PPQ positions, PPQ for each later one (the draws they stand for)
    assert layers[0]["pairs"] == 3 * (PPQ * (PPQ + 1) // 2 + (ctx - PPQ) * PPQ)


def test_packed_index_layout():
    # element (i, j), i <= j, of a packed upper triangle of order n: i*n - i*(i-1)/2 + (j - i)
    n = 5
    a = np.arange(n * n).reshape(n, n)
    p = _triu(a)
    for i in range(n):
        for j in range(i, n):
            assert p[i * n - i * (i - 1) // 2 + (j - i)] == a[i, j]


def test_missing_text_refused(tmp_path, text):
    out = tmp_path / "x.stats"
    with pytest.raises(ValueError, match=r"--text .*nope\.txt: no such file"):
        stk.calibrate(str(TINY_LLAMA), [text, str(tmp_path / "nope.txt")], str(out), ctx=48, progress=False)
    assert not out.exists()
    assert os.listdir(tmp_path) == []


def test_command_json_and_refusal(tmp_path, text):
    out = tmp_path / "c.stats"
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "stk", "calibrate", "--model", str(TINY), "--text", text, "--out", str(out),
                        "--ctx", "32", "--contexts", "1", "--json"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["path"] == str(out) and r["contexts"] == 1 and r["tokens"] == 32 and r["layers"] == 2
    assert r["digest"] == hashlib.sha256(open(out, "rb").read()[128:]).hexdigest()
    assert "stk calibrate: left out: rope_pairs at layers 0, 1: gpt2 has no rotary position embedding" in p.stderr
    p = subprocess.run([sys.executable, "-m", "stk", "calibrate", "--model", str(TINY), "--text", str(tmp_path / "none"),
                        "--out", str(tmp_path / "d.stats")], capture_output=True, text=True, env=env)
    assert p.returncode == 2
    assert p.stderr.strip() == f"stk calibrate: --text {tmp_path / 'none'}: no such file"
    assert not (tmp_path / "d.stats").exists()
