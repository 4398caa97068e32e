#!/usr/bin/env python3
"""The LM runtime's retention policies (stk_seq_params.policy; docs/decisions.md "Retention
policies") against a numpy reference of each eviction rule on a masked float64 forward.

The reference (below, written from the rule's text in lm/forward.h, not from the C++) runs the
Llama fixture tests/data/models/llama_f32 (2 layers, 4 heads over 2 key/value heads, head_dim 16)
token by token: per layer, the held positions (one set, or one per key/value head for
tova-head); at position p >= S with W non-sink positions held, it evicts the oldest (window),
the lowest weight of the last query averaged over the heads (tova, tova-head: over the group's
heads), or the lowest accumulated weight outside the `recent` newest (h2o), ties to the oldest;
then p is held and attended with softmax over the held positions only.  First the reference
itself is checked: with S + W >= the context its logits equal transformers' recorded forward
(tests/fixtures/lm/data_llama_f32.full.npy, max |delta| <= 1e-5).

Then for every policy and (S, W) in (0, 6), (2, 5), (1, 9), over 48 tokens:
  - fed one token per call: after every token, the held positions of every layer (and key/value
    head) equal the reference's, and the logits agree within BOUND with the same argmax;
  - fed in one call (max_batch 64: the GEMM path) and in chunks of 7: the same logits within
    BOUND, the same held positions at the end; 1 and 3 threads bit-equal;
  - each eviction's margin (the victim's score against the next candidate's) is printed; the
    smallest must exceed 1e-6 so that f32 against f64 cannot flip a choice.
Block-scaled FFN weights (STK_LM_WEIGHTS_FFN_Q4_0 / _Q8_0): the library's logits, at full state
and with tova 2 + 5, equal the reference's with every FFN matrix replaced by gguf-py's
dequantize(quantize(W)) of the same ggml type (within BOUND, equal argmax; GEMV and GEMM paths).
And the refusals: policy 4, and h2o with recent >= window, are STK_E_INVALID_ARGUMENT; the arena
of a scored policy is larger than the window's by the slots' positions and scores.

Usage: lm_policy_reference.py LIBSTK
"""
import ctypes
import os
import sys
from ctypes import POINTER, Structure, byref, c_float, c_int32, c_size_t, c_uint32, c_uint64, c_void_p

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import lm_forward_reference as lfr  # noqa: E402

MODEL = os.path.join(ROOT, "tests", "data", "models", "llama_f32")
BOUND = 1e-4
POLICIES = {"window": 0, "tova": 1, "h2o": 2, "tova-head": 3}
STK_E_INVALID_ARGUMENT = 1


class SeqParams2(Structure):  # stk_seq_params with issue 37's appended fields
    _fields_ = lfr.SeqParams._fields_ + [("policy", c_uint32), ("recent", c_uint32)]


# ---- the reference -------------------------------------------------------------------------------

class Llama:
    def __init__(self, path):
        import json
        from safetensors.numpy import load_file
        self.cfg = json.load(open(os.path.join(path, "config.json")))
        self.t = {k: v.astype(np.float64) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
        c = self.cfg
        self.L, self.nh, self.nkv = c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c["hidden_size"] // self.nh
        self.eps = c["rms_norm_eps"]
        inv = (1.0 / (c["rope_theta"] ** (np.arange(0, self.hd, 2, dtype=np.int64).astype(np.float32) / self.hd))).astype(np.float32)
        self.inv = inv

    def with_ffn(self, qtype):
        """A copy whose FFN matrices are gguf-py's dequantize(quantize(W)) in `qtype`, row by row."""
        from gguf import quants
        q = Llama.__new__(Llama)
        q.__dict__.update(self.__dict__)
        q.t = dict(self.t)
        for k, v in self.t.items():
            if ".mlp." in k:
                w32 = v.astype(np.float32)
                q.t[k] = quants.dequantize(quants.quantize(w32, qtype), qtype).reshape(w32.shape).astype(np.float64)
        return q

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x) + self.eps) * w

    def rope(self, x, p):
        ang = (np.float32(p) * self.inv).astype(np.float64)
        cs, sn = np.cos(ang), np.sin(ang)
        h = self.hd // 2
        a, b = x[..., :h], x[..., h:]
        return np.concatenate([a * cs - b * sn, b * cs + a * sn], -1)


def reference(m, tokens, policy, S, W, recent=0):
    """Logits [T, vocab] and, after every token, the held positions: held[t][layer][table]."""
    per_head = policy == "tova-head"
    G = m.nkv if per_head else 1
    group = m.nh // m.nkv
    R = (recent or W // 2) if policy == "h2o" else 0
    # per layer, per table: {position: score}; keys / values of every position (a reference may keep all)
    state = [[dict() for _ in range(G)] for _ in range(m.L)]
    K = [[None] * len(tokens) for _ in range(m.L)]
    V = [[None] * len(tokens) for _ in range(m.L)]
    logits, held, margins = [], [], []
    t = m.t
    for p, tok in enumerate(tokens):
        x = t["model.embed_tokens.weight"][tok].copy()
        for li in range(m.L):
            pre = f"model.layers.{li}."
            h = m.rms(x, t[pre + "input_layernorm.weight"])
            q = (t[pre + "self_attn.q_proj.weight"] @ h).reshape(m.nh, m.hd)
            k = (t[pre + "self_attn.k_proj.weight"] @ h).reshape(m.nkv, m.hd)
            v = (t[pre + "self_attn.v_proj.weight"] @ h).reshape(m.nkv, m.hd)
            q, k = m.rope(q, p), m.rope(k, p)
            K[li][p], V[li][p] = k, v
            for g in range(G):
                st = state[li][g]
                nonsink = [kp for kp in st if kp >= S]
                if p >= S and len(nonsink) == W:
                    if policy == "window":
                        cand = nonsink
                    elif policy == "h2o":
                        cand = [kp for kp in nonsink if kp + R < p] or nonsink
                    else:
                        cand = nonsink
                    if policy == "window":
                        victim = min(cand)
                    else:
                        order = sorted(cand, key=lambda kp: (st[kp], kp))
                        victim = order[0]
                        if len(order) > 1:
                            margins.append(st[order[1]] - st[order[0]])
                    del st[victim]
                st[p] = 0.0
            out = np.zeros((m.nh, m.hd))
            wsum = [dict() for _ in range(G)]
            for hh in range(m.nh):
                kh = hh // group
                g = kh if per_head else 0
                ps = sorted(state[li][g])
                sc = np.array([q[hh] @ K[li][kp][kh] for kp in ps]) / np.sqrt(m.hd)
                w = np.exp(sc - sc.max())
                w /= w.sum()
                out[hh] = sum(wi * V[li][kp][kh] for wi, kp in zip(w, ps))
                for wi, kp in zip(w, ps):
                    wsum[g][kp] = wsum[g].get(kp, 0.0) + wi
            for g in range(G):
                n_heads = group if per_head else m.nh
                for kp in state[li][g]:
                    mean = wsum[g][kp] / n_heads
                    state[li][g][kp] = state[li][g][kp] + mean if policy == "h2o" else mean
            x = x + t[pre + "self_attn.o_proj.weight"] @ out.reshape(-1)
            h2 = m.rms(x, t[pre + "post_attention_layernorm.weight"])
            gt = t[pre + "mlp.gate_proj.weight"] @ h2
            up = t[pre + "mlp.up_proj.weight"] @ h2
            x = x + t[pre + "mlp.down_proj.weight"] @ (gt / (1 + np.exp(-gt)) * up)
        logits.append(t["lm_head.weight"] @ m.rms(x, t["model.norm.weight"]))
        held.append([[sorted(state[li][g]) for g in range(G)] for li in range(m.L)])
    return np.array(logits), held, margins


# ---- the library ---------------------------------------------------------------------------------

def declare(lib):
    lfr.declare(lib)
    lib.stk_seq_arena_size.argtypes = [c_void_p, POINTER(SeqParams2), POINTER(c_size_t)]
    lib.stk_seq_open.argtypes = [c_void_p, POINTER(SeqParams2), c_void_p, c_size_t, POINTER(c_void_p)]
    lib.stk_seq_kept.restype = c_uint32
    lib.stk_seq_kept.argtypes = [c_void_p, c_uint32, c_uint32, POINTER(c_uint64), c_size_t, POINTER(c_size_t)]


class LibSeq:
    def __init__(self, lib, lm, policy, S, W, threads=1, max_batch=64, recent=0):
        self.lib = lib
        p = SeqParams2(ctypes.sizeof(SeqParams2), S, W, threads, max_batch, POLICIES[policy], recent)
        n = c_size_t()
        lfr.check(lib, lib.stk_seq_arena_size(lm, byref(p), byref(n)), "stk_seq_arena_size")
        self.arena_bytes = n.value
        self.arena = ctypes.create_string_buffer(n.value)
        self.h = c_void_p()
        lfr.check(lib, lib.stk_seq_open(lm, byref(p), self.arena, n, byref(self.h)), "stk_seq_open")

    def feed(self, toks, vocab):
        t = np.asarray(toks, np.int32)
        out = np.zeros((len(t), vocab), np.float32)
        lfr.check(self.lib, self.lib.stk_seq_feed(self.h, t.ctypes.data_as(POINTER(c_int32)), len(t),
                                                  out.ctypes.data_as(POINTER(c_float))), "stk_seq_feed")
        return out

    def kept(self, layer, head):
        buf = (c_uint64 * 4096)()
        n = c_size_t()
        lfr.check(self.lib, self.lib.stk_seq_kept(self.h, layer, head, buf, 4096, byref(n)), "stk_seq_kept")
        return list(buf[:n.value])

    def close(self):
        self.lib.stk_seq_close(self.h)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    declare(lib)
    m = Llama(MODEL)
    vocab = m.cfg["vocab_size"]
    failures = []
    rng = np.random.default_rng(37)
    tokens = rng.integers(0, vocab, 48).tolist()

    # The reference against transformers' recorded forward (16 tokens, full state).
    import json
    ref = json.load(open(os.path.join(HERE, "fixtures", "lm", "reference.json")))["models"]["data_llama_f32"]
    hf = np.load(os.path.join(HERE, "fixtures", "lm", "data_llama_f32.full.npy"))
    own, _, _ = reference(m, ref["token_ids"], "tova", 0, 64)
    d = float(np.max(np.abs(own - hf)))
    print(f"numpy reference at full state vs transformers: max|delta logit| {d:.2e}")
    if d > 1e-5:
        failures.append(f"the numpy reference is not the model: {d}")

    lm = c_void_p()
    lfr.check(lib, lib.stk_lm_open(MODEL.encode(), 0, byref(lm)), "stk_lm_open")
    all_margins = []
    sizes = {}
    for policy in POLICIES:
        for S, W in ((0, 6), (2, 5), (1, 9)):
            want, held, margins = reference(m, tokens, policy, S, W)
            all_margins += margins
            G = m.nkv if policy == "tova-head" else 1
            name = f"{policy} {S}+{W}"
            # one token per call: the held sets after every token
            s = LibSeq(lib, lm, policy, S, W, threads=1, max_batch=1)
            sizes[(policy, S, W)] = s.arena_bytes
            got = np.zeros((len(tokens), vocab), np.float32)
            bad_held = 0
            for i, tk in enumerate(tokens):
                got[i] = s.feed([tk], vocab)[0]
                for li in range(m.L):
                    for g in range(G):
                        if s.kept(li, g) != held[i][li][g]:
                            bad_held += 1
                            if bad_held == 1:
                                print(f"  {name}: after token {i} layer {li} table {g}: library {s.kept(li, g)} reference {held[i][li][g]}")
            s.close()
            dd = float(np.max(np.abs(got - want)))
            top = np.argmax(got, 1) == np.argmax(want, 1)
            ok = bad_held == 0 and dd <= BOUND and top.all()
            print(f"  {name:16s} token by token: held sets {'equal' if not bad_held else f'{bad_held} differ'} at all "
                  f"{len(tokens)} steps, max|delta logit| {dd:.2e}, top-1 {int(top.sum())}/{len(top)}  {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(name + " token by token")
            # batched, chunked, threads
            outs = {}
            for threads, mb, chunk in ((1, 64, 48), (3, 64, 48), (2, 7, 7), (1, 64, 7)):
                s = LibSeq(lib, lm, policy, S, W, threads=threads, max_batch=mb)
                o = np.concatenate([s.feed(tokens[a:a + chunk], vocab) for a in range(0, len(tokens), chunk)])
                end = [[s.kept(li, g) for g in range(G)] for li in range(m.L)]
                s.close()
                outs[(threads, mb, chunk)] = o
                dd = float(np.max(np.abs(o - want)))
                good = dd <= BOUND and (np.argmax(o, 1) == np.argmax(want, 1)).all() and end == held[-1]
                if not good:
                    failures.append(f"{name} threads {threads} batch {mb} chunk {chunk}: max|delta| {dd:.2e}, held {end == held[-1]}")
            if not np.array_equal(outs[(1, 64, 48)], outs[(3, 64, 48)]):
                failures.append(f"{name}: threads 1 and 3 differ in the bits")
            print(f"  {name:16s} batched / chunked / 1-3 threads: {'ok' if not any(f.startswith(name) for f in failures) else 'FAIL'}")
    mn = min(all_margins)
    print(f"smallest eviction margin (reference, f64): {mn:.2e} over {len(all_margins)} scored evictions")
    if mn <= 1e-6:
        failures.append(f"an eviction margin of {mn:.2e}: the choice is not decided in f32")
    # The scores are state: a scored policy's arena holds positions + scores beside the window's.
    for S, W in ((0, 6), (2, 5), (1, 9)):
        if not sizes[("tova", S, W)] > sizes[("window", S, W)] or not sizes[("tova-head", S, W)] > sizes[("tova", S, W)]:
            failures.append(f"arena sizes at {S}+{W}: {[sizes[(p, S, W)] for p in POLICIES]}")
    # Block-scaled FFN weights against gguf-py's round trip of the same type.
    from gguf import GGMLQuantizationType as QT
    for qname, flag, qt in (("q4_0", 0x10, QT.Q4_0), ("q8_0", 0x20, QT.Q8_0)):
        mq = m.with_ffn(qt)
        lmq = c_void_p()
        lfr.check(lib, lib.stk_lm_open(MODEL.encode(), flag, byref(lmq)), "stk_lm_open " + qname)
        for policy, S, W in (("window", 0, 64), ("tova", 2, 5)):
            want, held, _ = reference(mq, tokens, policy, S, W)
            plain, _, _ = reference(m, tokens, policy, S, W)
            for mb in (1, 64):
                s = LibSeq(lib, lmq, policy, S, W, max_batch=mb)
                got = s.feed(tokens, vocab)
                end = [[s.kept(li, 0)] for li in range(m.L)]
                s.close()
                dd = float(np.max(np.abs(got - want)))
                top = np.argmax(got, 1) == np.argmax(want, 1)
                ok = dd <= BOUND and top.all() and end == held[-1]
                print(f"  ffn {qname} {policy} {S}+{W} batch {mb}: max|delta logit| vs gguf-py round trip {dd:.2e} "
                      f"(vs unquantised {float(np.max(np.abs(got - plain))):.2e}), top-1 {int(top.sum())}/{len(top)}  "
                      f"{'ok' if ok else 'FAIL'}")
                if not ok:
                    failures.append(f"ffn {qname} {policy} batch {mb}")
        lib.stk_lm_close(lmq)
    # Refusals.
    for pol, rec in ((4, 0), (2, 5)):
        p = SeqParams2(ctypes.sizeof(SeqParams2), 0, 5, 1, 64, pol, rec)
        n = c_size_t()
        st = lib.stk_seq_arena_size(lm, byref(p), byref(n))
        msg = lib.stk_last_error().decode()
        print(f"policy {pol} recent {rec}: status {st}: {msg}")
        if st != STK_E_INVALID_ARGUMENT:
            failures.append(f"policy {pol} recent {rec} accepted (status {st})")
    # An older caller (the first struct's size): the window, as before.
    p = lfr.SeqParams(ctypes.sizeof(lfr.SeqParams), 2, 5, 1, 1)
    n = c_size_t()
    lfr.check(lib, lib.stk_seq_arena_size(lm, ctypes.cast(byref(p), POINTER(SeqParams2)), byref(n)), "old struct")
    print(f"arena bytes at 2+5 (batch 1): window {sizes[('window', 2, 5)]}, tova {sizes[('tova', 2, 5)]}, "
          f"h2o {sizes[('h2o', 2, 5)]}, tova-head {sizes[('tova-head', 2, 5)]}; the first struct version {n.value}")
    if n.value != sizes[("window", 2, 5)]:
        failures.append("the first version's struct does not give the window")
    lib.stk_lm_close(lm)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
