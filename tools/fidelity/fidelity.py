#!/usr/bin/env python3
"""How faithful a converted model is, stage by stage, on a real model's own activations.

Run by hand (torch, transformers, tokenizers, matplotlib from the repository's venv, scripts/make-venv.sh; never in CI); the
command docs/fidelity.md gives reproduces every table and figure:

    python tools/fidelity/fidelity.py --model HF_DIR --gen ROOT_r512 --gen-r2048 ROOT \
        --gen-rv 8=ROOT,16=ROOT,32=ROOT --gen-topl 8=ROOT,32=ROOT --lib build/libstk.so \
        --out docs/fidelity/NAME --name NAME

What it does (docs/fidelity.md says why each comparison is the one it is):
  1. the reference forward pass (refmodel.py) checked against transformers' own forward;
  2. real text: English (scripts/make_english_corpus.py's text, the tokenizer bench's) and code
     (this repository's C++ sources), tokenized by the model's tokenizer, in 512-token contexts;
  3. per layer, per stage, the published arrays (read with sera_arrays.py; the dictionary
     through stk_lookup of libstk.so) against the original on those activations, each beside the
     best achievable at the same budget; results.json, PNG curves and fidelity-tables.md in --out.
"""
import argparse
import ctypes
import glob
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refmodel  # noqa: E402
import sera_arrays as sa  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
CTX = 512


def log(*a):
    print(time.strftime('%H:%M:%S'), *a, file=sys.stderr, flush=True)


def rel(err2, ref2):
    return float(math.sqrt(err2 / ref2)) if ref2 > 0 else float('nan')


# --------------------------------------------------------------------------------------------
# text


def corpora(tok, n_tokens):
    """English: the text of scripts/make_english_corpus.py (licences first); code: the repo's
    C++ sources in sorted order.  Each gives n_tokens / 2 tokens, cut into CTX-token contexts.
    A tokenizer that starts every sequence with BOS (Gemma) gets BOS at the head of every
    context, as the model saw in training; one that adds nothing (SmolLM2) gets plain slices."""
    bos = tok.encode('').ids
    eng_path = '/tmp/stk-fidelity-english.txt'
    if not os.path.exists(eng_path):
        subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'make_english_corpus.py'), eng_path, '0.5'], check=True,
                       stdout=subprocess.DEVNULL)
    eng = open(eng_path, encoding='utf-8').read()
    code = ''.join(open(p, encoding='utf-8').read() for p in
                   sorted(glob.glob(os.path.join(REPO, 'src', '**', '*.cc'), recursive=True) +
                          glob.glob(os.path.join(REPO, 'src', '**', '*.h'), recursive=True)))
    out = []
    for kind, text in (('english', eng), ('code', code)):
        n = CTX - len(bos)
        ids = tok.encode(text[: 20 * n_tokens], add_special_tokens=False).ids[: n_tokens // 2 // CTX * n]
        for i in range(0, len(ids) - n + 1, n):
            out.append((kind, bos + ids[i: i + n]))
    return out


# --------------------------------------------------------------------------------------------
# libstk lookups


class Lib:
    def __init__(self, path, gen):
        self.lib = ctypes.CDLL(path)
        self.lib.stk_generation_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        self.lib.stk_lookup.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        self.g = ctypes.c_void_p()
        st = self.lib.stk_generation_open(gen.encode(), ctypes.byref(self.g))
        if st != 0:
            raise SystemExit(f'stk_generation_open({gen}) = {st}')

    def linear_value(self, key_u64):
        """One STK_LOOKUP_LINEAR lookup: the f32 value, or None when the key is absent."""
        self._key.value = key_u64
        st = self.lib.stk_lookup(self.g, 3, self._kp, 8, self._vp, 4, self._np)
        if st == 0:
            return self._val.value
        if st != 63:
            raise SystemExit(f'stk_lookup: status {st}')
        return None

    def linear_map(self, unit, d, support, n_absent, rng):
        """The dictionary's M+ and M- of one unit: every key of `support` (a [2, d, d] bool mask,
        the emulated dictionary) looked up, plus n_absent random keys outside it (which must be
        absent).  Returns the map, the keys found in the support, and the absent keys found."""
        self._key, self._val, self._n = ctypes.c_uint64(), ctypes.c_float(), ctypes.c_size_t()
        self._kp, self._vp, self._np = ctypes.byref(self._key), ctypes.byref(self._val), ctypes.byref(self._n)
        M = np.zeros((2, d, d), np.float32)
        found = 0
        for s, i, j in zip(*np.nonzero(support)):
            v = self.linear_value((int(s) << 63) | (unit << 48) | (int(i) << 24) | int(j))
            if v is not None:
                M[s, i, j] = v
                found += 1
        outside = np.argwhere(~support)
        stray = 0
        for s, i, j in outside[rng.choice(len(outside), min(n_absent, len(outside)), replace=False)]:
            if self.linear_value((int(s) << 63) | (unit << 48) | (int(i) << 24) | int(j)) is not None:
                stray += 1
        return M, found, stray

    def hub(self, token, ctx):
        key = struct.pack('<II', token, ctx)
        buf = ctypes.create_string_buffer(64)
        n = ctypes.c_size_t()
        st = self.lib.stk_lookup(self.g, 4, key, 8, buf, 64, ctypes.byref(n))
        if st != 0:
            raise SystemExit(f'stk_lookup(HUB) = {st}')
        return buf.raw[: n.value]


M64 = (1 << 64) - 1


def mix64(x, seed=None):
    if seed is not None:
        return mix64(x ^ mix64(seed ^ 0xD6E8FEB86659FD93))
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


# --------------------------------------------------------------------------------------------
# PRF


def prf_layer(x, v_heads, o_true, qr, kr, prf_W, r_list, beta_floor, hd, H, Hkv, per_head, rng, acc, scale=None):
    """One layer, one context.  x [T, d] the attention input; v_heads [T, H, hd] values expanded to
    the query heads; o_true [T, H*hd] the model's attention output; qr/kr post-RoPE.

    The runtime computation (docs/format.md "prf_build"): phi_i(x) = r^-1/2 exp(w_i.x/sqrt(tau) -
    x^T D x/(2 tau)), D the column variance of W_K that made prf_W (recovered as the mean square of
    prf_W's columns would be noisy: we take it from W_K itself, passed in via acc['D']), one kernel
    per layer shared by the heads; out_m = phi(x_m)^T R_m / max(phi(x_m)^T s_m, beta_floor) with
    R_m, s_m the sums over keys n <= m."""
    T = x.shape[0]
    tau = math.sqrt(hd)
    D = acc['D']
    xd = x.double()
    quad = (xd * xd * D).sum(-1) / (2 * tau)                      # x^T D x / (2 tau)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    V = v_heads.reshape(T, -1).double()
    ot = o_true.double()
    ref2 = float((ot ** 2).sum())
    # top-1 of each head (true attention)
    scale = hd ** -0.5 if scale is None else scale              # the model's own score scale
    s_true = torch.einsum('qhd,khd->hqk', qr, kr.repeat_interleave(H // Hkv, 1)) * scale
    s_true = s_true.masked_fill(~causal, float('-inf'))
    top_true = s_true.argmax(-1)                                  # [H, T]
    valid = torch.arange(T) >= 1
    # the surrogate kernel exactly (no sampling): exp(x^T D y / tau)
    logit_s = (xd * D) @ xd.T / tau
    ls = logit_s.masked_fill(~causal, float('-inf'))
    Ps = torch.softmax(ls, -1)
    o_s = Ps @ V
    acc['surrogate_err2'] += float(((o_s - ot) ** 2).sum())
    acc['ref2'] += ref2
    acc['surr2'] += float((o_s ** 2).sum())
    acc['surrogate_top1'] += float((ls.argmax(-1)[None, :] == top_true)[:, valid].float().sum())
    acc['top1_n'] += float(H * valid.sum())
    qd = (xd * xd * D).sum(-1)
    acc['spread'] += float(((qd[:, None] + qd[None, :]) / tau + 2 * logit_s)[causal].mean())   # E|x+y|_D^2 / tau
    acc['spread_n'] += 1
    # runtime PRF, nested r: the first r rows of the r_max draw are the r draw (same stream)
    a = (x.float() @ prf_W.T).double() / math.sqrt(tau) - quad[:, None]   # [T, r_max] log of sqrt(r) phi
    acc['f32_overflow'] = max(acc.get('f32_overflow', 0.0), float((a > 88.7).float().mean()))  # exp beyond f32
    # computed in f32 after a shift (query rows by their own max, keys by one global max): the
    # kernel is scaled by exp(-sq[m] - sk) and so is the floor it is compared with - the same
    # outputs as the unshifted formula, without overflow.
    sq = a.max(-1, keepdim=True).values
    sk = a.max()
    eq = (a - sq).exp().float()
    ek = (a - sk).exp().float()
    floor = (beta_floor * torch.exp(-(sq[:, 0] + sk))).float()
    Vf = V.float()
    Kc = torch.zeros(T, T)
    prev = 0
    for r in r_list:
        Kc += eq[:, prev:r] @ ek[:, prev:r].T
        prev = r
        K = (Kc / r).masked_fill(~causal, 0.0)
        dsum = K.sum(-1)
        o = ((K @ Vf) / torch.maximum(dsum, floor)[:, None]).double()
        acc[f'prf_err2_{r}'] += float(((o - ot) ** 2).sum())
        acc[f'prf_vs_surrogate_err2_{r}'] += float(((o - o_s) ** 2).sum())
        acc[f'prf_top1_{r}'] += float((K.argmax(-1)[None, :] == top_true)[:, valid].float().sum())
        acc[f'floor_hits_{r}'] += float((dsum < floor).float().sum())
    acc['rows'] += T
    if not per_head:
        return
    # the best a random-feature map can do at the same r: PRF on the head's own q, k (the kernel
    # exp(scale q.k) itself, scale = 1/sqrt(hd) or Gemma's query_pre_attn_scalar^-1/2), shifted
    # per query row (the ratio is shift-invariant, no floor)
    r_max = r_list[-1]
    ke = kr.repeat_interleave(H // Hkv, 1)
    st = math.sqrt(scale)
    for h in range(H):
        w = torch.from_numpy(rng.standard_normal((r_max, hd))).float()
        qa = qr[:, h] @ w.T * st - (qr[:, h] ** 2).sum(-1, keepdim=True) * scale / 2
        ka = ke[:, h] @ w.T * st - (ke[:, h] ** 2).sum(-1, keepdim=True) * scale / 2
        qa = (qa - qa.max(-1, keepdim=True).values).exp()
        ka = (ka - ka.max()).exp()
        Kc = torch.zeros(T, T)
        prev = 0
        vh = v_heads[:, h]
        oh = o_true.view(T, H, hd)[:, h]
        for r in r_list:
            Kc += qa[:, prev:r] @ ka[:, prev:r].T
            prev = r
            K = Kc.masked_fill(~causal, 0.0)
            o = (K @ vh) / K.sum(-1, keepdim=True)
            acc[f'head_err2_{r}'] += float(((o - oh).double() ** 2).sum())
            acc[f'head_top1_{r}'] += float((K.argmax(-1) == top_true[h])[valid].float().sum())
        acc['head_ref2'] += float((oh.double() ** 2).sum())
        acc['head_top1_n'] += float(valid.sum())


# --------------------------------------------------------------------------------------------
# FFN dictionary


def collapse_maps(m, l):
    """The exact collapse of a gated FFN (docs/format.md "Linear dictionary"): M+ = W2 (relu(Wg) *
    Wu), M- = W2 (relu(-Wg) * -Wu), and the influence bound S = |W2| (|Wg| |Wu|)."""
    Wg = m.layer(l, 'mlp.gate_proj').double()
    Wu = m.layer(l, 'mlp.up_proj').double()
    W2 = m.layer(l, 'mlp.down_proj').double()
    Mp = W2 @ (Wg.clamp_min(0) * Wu)
    Mm = W2 @ ((-Wg).clamp_min(0) * (-Wu))
    S = W2.abs() @ (Wg.abs() * Wu.abs())
    return Mp.numpy(), Mm.numpy(), S.numpy()


def truncate(M, S, topl, cap, eps=1e-6):
    """The stage's selection, per column j: base = top-L outputs of S[:, j] (ties: smaller i);
    delta = the rest by |M| descending until what is left holds <= eps of the column's energy,
    at most `cap` entries, never an exact zero.  Returns the kept map and the entry count."""
    d = M.shape[0]
    out = np.zeros_like(M)
    order_s = np.argsort(-S, axis=0, kind='stable')
    base = order_s[:topl]                                           # [topl, d]
    cols = np.arange(d)
    out[base, cols[None, :]] = M[base, cols[None, :]]
    if cap == 0:
        return out, topl * d
    rest = M.copy()
    rest[base, cols[None, :]] = 0.0
    energy = (M ** 2).sum(0)
    base_e = (M[base, cols[None, :]] ** 2).sum(0)
    order = np.argsort(-np.abs(rest), axis=0, kind='stable')      # ties: smaller i
    vals = np.take_along_axis(rest, order, 0)
    # entry k is taken iff what is left before it exceeds eps of the column's energy
    left_before = (energy - base_e)[None, :] - (np.cumsum(vals ** 2, 0) - vals ** 2)
    take = (left_before > eps * energy[None, :]) & (vals != 0)
    take[cap:] = False
    take = np.cumsum(~take, 0) == 0                                  # a prefix of the ranking
    n_delta = int(take.sum())
    np.put_along_axis(out, order, np.where(take, vals, 0.0) + np.take_along_axis(out, order, 0), 0)
    return out, topl * d + n_delta


def orth_apply(Mp, Mm, X):
    """y = sum_j |x_j| M^{sign x_j}[:, j] = M+ relu(x) + M- relu(-x)."""
    return np.maximum(X, 0) @ Mp.T + np.maximum(-X, 0) @ Mm.T


def ridge(X, Y, lam=1e-3):
    G = X.T @ X
    G += lam * np.trace(G) / G.shape[0] * np.eye(G.shape[0])
    return np.linalg.solve(G, X.T @ Y)                               # [in, out]


def topk_per_col(W, k):
    """Keep the k largest |entries| of each column of W (columns = input features)."""
    if k >= W.shape[0]:
        return W
    idx = np.argsort(-np.abs(W), axis=0)[:k]
    out = np.zeros_like(W)
    np.put_along_axis(out, idx, np.take_along_axis(W, idx, 0), 0)
    return out


# --------------------------------------------------------------------------------------------
# memory


def sos_response(coeff, n):
    """Impulse response of the published bank (docs/format.md "memory_fit": parallel DF-II-T
    sections, outputs added)."""
    y = np.zeros(n)
    for b0, b1, a1, a2 in coeff:
        s1 = s2 = 0.0
        for t in range(n):
            u = 1.0 if t == 0 else 0.0
            yt = b0 * u + s1
            s1 = b1 * u + a1 * yt + s2
            s2 = a2 * yt
            y[t] += yt
    return y


def prony(c, K, clamp=0.999):
    """Least-squares fit of c[t] by 2K damped modes (linear prediction, roots, amplitudes by
    least squares): the best K-section bank of this family at the budget of K sections."""
    p = 2 * K
    n = len(c)
    A = np.column_stack([c[p - 1 - i: n - 1 - i] for i in range(p)])
    a = np.linalg.lstsq(A, c[p:], rcond=None)[0]
    z = np.roots(np.concatenate([[1.0], -a]))
    z = np.where(np.abs(z) >= clamp, z / np.abs(z) * clamp, z)
    V = np.vander(z, n, increasing=True).T                          # [n, p]
    amp = np.linalg.lstsq(V, c.astype(complex), rcond=None)[0]
    return np.real(V @ amp)


def cos_rel(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))), float(np.linalg.norm(a - b) / np.linalg.norm(b))


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True)
    ap.add_argument('--gen', required=True, help='the default conversion (r 512, r_v 12, top-L 12)')
    ap.add_argument('--gen-r2048', required=True, help='a conversion at --r 2048 (prf_W rows nest: r < 2048 is a prefix)')
    ap.add_argument('--gen-rv', default='', help='RV=ROOT,... conversions at other --rv')
    ap.add_argument('--gen-topl', default='', help='TOPL=ROOT,... conversions at other --topl')
    ap.add_argument('--lib', required=True, help='libstk.so')
    ap.add_argument('--out', required=True)
    ap.add_argument('--name', required=True)
    ap.add_argument('--tokens', type=int, default=12288)
    ap.add_argument('--prf-contexts', type=int, default=8, help='contexts (of 512) the PRF runs on')
    ap.add_argument('--head-contexts', type=int, default=2, help='contexts for the per-head PRF reference')
    ap.add_argument('--head-layer-stride', type=int, default=3)
    ap.add_argument('--ffn-stride', type=int, default=2, help='keep every n-th token for the FFN fits')
    ap.add_argument('--lookup-layers', default='0,15,29')
    ap.add_argument('--ffn-sparse-k', default='1,6,58', help='active-feature counts for the sparse reading of the dictionary')
    ap.add_argument('--cache', help='save the captures here after the forward passes (a pickle; large)')
    ap.add_argument('--from-cache', help='start from a --cache file instead of running the model')
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(int(os.environ.get('FIDELITY_THREADS', '2')))
    t0 = time.time()
    R = dict(name=args.name, model=os.path.abspath(args.model))

    m = refmodel.Model(args.model)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.model, 'tokenizer.json'))
    d, L, H, Hkv, hd = m.d, m.L, m.H, m.Hkv, m.hd
    R['shape'] = dict(d_model=d, layers=L, heads=H, kv_heads=Hkv, head_dim=hd, ffn=m.layer(0, 'mlp.up_proj').shape[0],
                      rope_theta=m.rope_theta, rope_local_theta=m.rope_local_theta, layer_types=m.layer_types,
                      sliding_window=m.window, family=m.kind, vocab=m.embed.shape[0])

    names = ('R', 'ctxs', 'prf_W', 'r_list', 'beta_floor', 'rng', 'prf_acc', 'ffn_in', 'ffn_out', 'pair_e', 'token_ids',
             'prf_ctx', 'head_ctx', 'o_real')
    if args.from_cache:
        # the forward pass's captures and the PRF sums, saved by an earlier run (--cache)
        st = pickle.load(open(args.from_cache, 'rb'))
        (R, ctxs, prf_W, r_list, beta_floor, rng, prf_acc, ffn_in, ffn_out, pair_e, token_ids, prf_ctx, head_ctx,
         o_real) = (st[k] for k in names)
    else:
        # 1. the reference against transformers
        ctxs = corpora(tok, args.tokens)
        R['text'] = dict(contexts=len(ctxs), tokens=len(ctxs) * CTX, english=sum(k == 'english' for k, _ in ctxs),
                         code=sum(k == 'code' for k, _ in ctxs), context=CTX)
        chat = ('<start_of_turn>user\nWhat is 2 + 2?<end_of_turn>\n<start_of_turn>model\n' if m.gemma else
                '<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n')
        prompts = ['The capital of France is Paris. The capital of Germany is',
                   'def fibonacci(n):\n    if n < 2:\n        return n\n    return', chat]
        chk = refmodel.check_against_transformers(args.model, m, [tok.encode(p).ids for p in prompts] + [ctxs[0][1], ctxs[-1][1]])
        for c, p in zip(chk, prompts + ['<english context 0>', '<code context>']):
            c['prompt'] = p
            c['last_top5_ref_text'] = [tok.decode([i]) for i in c['last_top5_ref']]
        R['reference_check'] = chk
        log('reference check', [(c['max_abs_diff'], c['argmax_agree']) for c in chk])

        # published arrays
        prf_W = sa.read_array(args.gen_r2048, 'prf_W.bin')
        prf512 = sa.read_array(args.gen, 'prf_W.bin')
        R['prf_nested'] = bool(np.array_equal(prf_W[:, :512], prf512))
        r_list = [256, 512, 1024, 2048]
        beta_floor = 1e-3  # the manifest record "12.2 beta_floor > 0" of both conversions
        D_all = []
        for l in range(L):
            Wk = m.layer(l, 'self_attn.k_proj').double()
            D_all.append((Wk ** 2).mean(0).clamp_min(1e-8))
        rng = np.random.default_rng(1234)

        prf_acc = [dict() for _ in range(L)]
        from collections import defaultdict
        prf_acc = [defaultdict(float) for _ in range(L)]
        for l in range(L):
            prf_acc[l]['D'] = D_all[l]
        ffn_in = [[] for _ in range(L)]
        ffn_out = [[] for _ in range(L)]
        pair_e = np.zeros((L, hd // 2))            # memory: energy per layer and rotary pair from real q, k
        logits_top1 = []
        token_ids = []
        prf_ctx = set(range(0, len(ctxs), max(1, len(ctxs) // args.prf_contexts))[: args.prf_contexts]) if args.prf_contexts else set()
        head_ctx = set(sorted(prf_ctx)[:: max(1, len(prf_ctx) // max(1, args.head_contexts))][: args.head_contexts])
        o_real = [[] for _ in range(L)]
        for ci, (kind, ids) in enumerate(ctxs):
            t = torch.tensor(ids)
            logits, caps = m.forward(t, capture=set(range(L)))
            token_ids.append(ids)
            logits_top1.append(float((logits[:-1].argmax(-1) == t[1:]).float().mean()))
            for l in range(L):
                c = caps[l]
                ffn_in[l].append(c['f_in'][:: args.ffn_stride].numpy())
                ffn_out[l].append(c['f_out'][:: args.ffn_stride].numpy())
                qp = c['q'].view(CTX, H, 2, hd // 2)
                kp = c['k'].repeat_interleave(H // Hkv, 1).view(CTX, H, 2, hd // 2)
                pair_e[l] += (qp.norm(dim=2) * kp.norm(dim=2)).sum((0, 1)).double().numpy()
                if ci in prf_ctx:
                    o_real[l].append(c['o'].double().numpy())
                    ve = c['v'].repeat_interleave(H // Hkv, 1)
                    prf_layer(c['x'], ve, c['o'], c['qr'], c['kr'], torch.from_numpy(prf_W[l].copy()), r_list, beta_floor,
                              hd, H, Hkv, ci in head_ctx and l % args.head_layer_stride == 0, rng, prf_acc[l], m.scale)
            log(f'context {ci + 1}/{len(ctxs)} ({kind})')
        R['text']['next_token_top1'] = float(np.mean(logits_top1))
        if args.cache:
            vals = (R, ctxs, prf_W, r_list, beta_floor, rng, prf_acc, ffn_in, ffn_out, pair_e, token_ids, prf_ctx, head_ctx, o_real)
            pickle.dump(dict(zip(names, vals)), open(args.cache, 'wb'), protocol=4)
            log('cache written', args.cache)

    # ---- PRF summary
    prf = []
    for l in range(L):
        a = prf_acc[l]
        row = dict(layer=l, surrogate_rel=rel(a['surrogate_err2'], a['ref2']),
                   surrogate_top1=a['surrogate_top1'] / a['top1_n'], spread=a['spread'] / a['spread_n'],
                   f32_overflow=a.get('f32_overflow', 0.0))
        for r in r_list:
            row[f'rel_{r}'] = rel(a[f'prf_err2_{r}'], a['ref2'])
            row[f'mc_rel_{r}'] = rel(a[f'prf_vs_surrogate_err2_{r}'], a['surr2'])
            row[f'top1_{r}'] = a[f'prf_top1_{r}'] / a['top1_n']
            row[f'floor_{r}'] = a[f'floor_hits_{r}'] / a['rows']
            if a['head_ref2']:
                row[f'head_rel_{r}'] = rel(a[f'head_err2_{r}'], a['head_ref2'])
                row[f'head_top1_{r}'] = a[f'head_top1_{r}'] / a['head_top1_n']
        prf.append(row)
    R['prf'] = dict(layers=prf, r=r_list, beta_floor=beta_floor, contexts=len(prf_ctx), head_contexts=len(head_ctx),
                    head_layer_stride=args.head_layer_stride,
                    bytes={r: dict(prf_W=L * r * d * 4, state=L * r * (H * hd + 1) * 4) for r in r_list},
                    kv_cache_tokens_same_bytes={r: r * (H * hd + 1) / (2 * Hkv * hd) for r in r_list})
    log('prf done')

    # ---- overlays
    rv_gens = {12: args.gen}
    for part in filter(None, args.gen_rv.split(',')):
        k, v = part.split('=')
        rv_gens[int(k)] = v
    ov = []
    pubs = {rv: (sa.read_array(g, 'overlays_U.bin'), sa.read_array(g, 'overlays_H.bin')) for rv, g in rv_gens.items()}
    for l in range(L):
        Wo = m.layer(l, 'self_attn.o_proj').double().numpy()           # [d_model, d_v]
        A = np.concatenate(o_real[l])                                   # [N, d_v] real attention outputs
        Y = A @ Wo.T
        sv = np.linalg.svd(Wo, full_matrices=False)
        s2 = sv[1] ** 2
        ev = np.linalg.eigvalsh(Y.T @ Y)[::-1]                           # the data optimum (in sample)
        for rv in sorted(rv_gens):
            Ul = pubs[rv][0][l].astype(np.float64)
            Hl = pubs[rv][1][l].astype(np.float64)
            Vr = sv[2][:rv].T                                            # top right singular vectors
            y_pub = (A @ Ul) @ (Wo @ Ul).T
            y_svd = (A @ Vr) @ (Wo @ Vr).T
            ov.append(dict(layer=l, rv=rv, energy=float(((Wo @ Ul) ** 2).sum() / s2.sum()),
                           energy_opt=float(s2[:rv].sum() / s2.sum()),
                           out_rel=float(np.linalg.norm(Y - y_pub) / np.linalg.norm(Y)),
                           out_rel_svd=float(np.linalg.norm(Y - y_svd) / np.linalg.norm(Y)),
                           out_rel_data=float(math.sqrt(max(ev[rv:].sum(), 0) / ev.sum())),
                           H_orth=float(np.abs(Hl.T @ Hl - np.eye(rv)).max())))
    log('overlays done')
    ov_bytes = {rv: sum(sa.array_bytes(g, n) - 128 for n in ('overlays_U.bin', 'overlays_H.bin', 'overlays_DeltaW.bin'))
                for rv, g in rv_gens.items()}
    R['overlays'] = dict(rows=ov, bytes={rv: ov_bytes[rv] for rv in sorted(rv_gens)},
                         tokens=sum(len(x) for x in o_real[0]) * 0 + len(prf_ctx) * CTX)
    del o_real

    # ---- FFN dictionary
    topl_gens = {12: args.gen}
    for part in filter(None, args.gen_topl.split(',')):
        k, v = part.split('=')
        topl_gens[int(k)] = v
    lib = Lib(args.lib, sa.generation_dir(args.gen))
    lookup_layers = [int(x) for x in args.lookup_layers.split(',') if x != '']
    caps_list = [0, 16, 64, 256, d]
    topls = [8, 12, 16, 32]
    ffn = []
    lookup_check = []
    for l in range(L):
        X = np.concatenate(ffn_in[l]).astype(np.float64)
        Y = np.concatenate(ffn_out[l]).astype(np.float64)
        ffn_in[l] = ffn_out[l] = None
        n = X.shape[0]
        tr = np.arange(n) % 2 == 0
        te = ~tr
        Xt, Yt = X[te], Y[te]
        y2 = float((Yt ** 2).sum())
        Mp, Mm, S = collapse_maps(m, l)
        row = dict(layer=l, n_test=int(te.sum()), x_rms=float(np.sqrt((Xt ** 2).mean())),
                   x_absmax_median=float(np.median(np.abs(Xt).max(1))))
        row['collapse_exact'] = rel(((orth_apply(Mp, Mm, Xt) - Yt) ** 2).sum(), y2)
        for topl in topls:
            for cap in caps_list:
                if cap not in (64,) and topl != 12:
                    continue
                Tp, np_ = truncate(Mp, S, topl, cap)
                Tm, nm_ = truncate(Mm, S, topl, cap)
                row[f'dict_{topl}_{cap}'] = rel(((orth_apply(Tp, Tm, Xt) - Yt) ** 2).sum(), y2)
                row[f'dict_vs_collapse_{topl}_{cap}'] = rel(((orth_apply(Tp - Mp, Tm - Mm, Xt)) ** 2).sum(),
                                                             ((orth_apply(Mp, Mm, Xt)) ** 2).sum())
                row[f'entries_{topl}_{cap}'] = np_ + nm_
                if topl == 12 and cap == 64 and l in lookup_layers:
                    sup = np.stack([Tp != 0, Tm != 0])
                    Mlk, found, stray = lib.linear_map(l, d, sup, 20000, rng)
                    lookup_check.append(dict(layer=l, found=found, emulated=np_ + nm_, stray_of_20000=stray,
                                             max_abs_diff=float(max(np.abs(Mlk[0] - Tp).max(), np.abs(Mlk[1] - Tm).max())),
                                             rel_lookup=rel(((orth_apply(Mlk[0], Mlk[1], Xt) - Yt) ** 2).sum(), y2)))
                    row['dict_lookup'] = lookup_check[-1]['rel_lookup']
        # sparse use (the spec's reading: a few active features): top-k |x_j| through the collapse
        for k in [int(x) for x in args.ffn_sparse_k.split(',')]:
            idx = np.argsort(-np.abs(Xt), 1)[:, :k]
            Xs = np.zeros_like(Xt)
            np.put_along_axis(Xs, idx, np.take_along_axis(Xt, idx, 1), 1)
            ys = orth_apply(Mp, Mm, Xs)
            yf = m.ffn(l, torch.from_numpy(Xs).float()).double().numpy()
            row[f'sparse{k}_vs_ffn_sparse'] = rel(((ys - yf) ** 2).sum(), (yf ** 2).sum())
            row[f'sparse{k}_vs_true'] = rel(((ys - Yt) ** 2).sum(), y2)
            row[f'ffn_sparse{k}_vs_true'] = rel(((yf - Yt) ** 2).sum(), y2)
        # the best at the same budget: least squares on the model's own activations (train half)
        W = ridge(X[tr], Y[tr])                                          # dense linear [d, d]
        row['ls_dense'] = rel(((Xt @ W - Yt) ** 2).sum(), y2)
        Xo = np.hstack([np.maximum(X, 0), np.maximum(-X, 0)])
        Wo2 = ridge(Xo[tr], Y[tr])                                       # the dictionary's own form
        Xot = Xo[te]
        row['ls_orthant'] = rel(((Xot @ Wo2 - Yt) ** 2).sum(), y2)
        for topl in topls:
            kcol = min(d, topl + 64)
            Wt = np.vstack([topk_per_col(Wo2[:d].T, kcol).T, topk_per_col(Wo2[d:].T, kcol).T])
            row[f'ls_orthant_budget_{topl}'] = rel(((Xot @ Wt - Yt) ** 2).sum(), y2)
        for cap in caps_list:
            kcol = min(d, 12 + cap)
            Wt = np.vstack([topk_per_col(Wo2[:d].T, kcol).T, topk_per_col(Wo2[d:].T, kcol).T])
            row[f'ls_orthant_cap_{cap}'] = rel(((Xot @ Wt - Yt) ** 2).sum(), y2)
        row['zero'] = 1.0
        ffn.append(row)
        log('ffn layer', l, {k: round(v, 3) for k, v in row.items() if isinstance(v, float) and k.startswith(('dict_12_64', 'ls_', 'collapse', 'dict_lookup'))})
    dict_bytes = sum(sa.array_bytes(args.gen, n) - 128 for n in ('linear_mphf.bin', 'linear_keys.bin', 'linear_weights.bin', 'cuckoo_delta.bin'))
    R['ffn'] = dict(rows=ffn, lookup_check=lookup_check, caps=caps_list, topls=topls, published_bytes=dict_bytes,
                    published_entries=None, ffn_stride=args.ffn_stride, sparse_k=[int(x) for x in args.ffn_sparse_k.split(',')])
    log('ffn done')

    # ---- memory
    # The published bank fits one base (memory_fit: rope_theta, Gemma's global base).  Targets:
    # the kernel of the layers that use that base, and where the model has a second (Gemma's
    # sliding layers: rope_local_base_freq) the kernel of those layers with their own base and of
    # every layer with its own base; plus 16.3's weight-energy target (every layer, global base).
    theta = m.inv_freq.numpy()
    pair_w = np.zeros(hd // 2)
    for l in range(L):
        Wq = m.layer(l, 'self_attn.q_proj').double().numpy().reshape(H, 2, hd // 2, d)
        Wk = m.layer(l, 'self_attn.k_proj').double().numpy().reshape(Hkv, 2, hd // 2, d)
        for h in range(H):
            pair_w += np.linalg.norm(Wq[h], axis=(0, 2)) * np.linalg.norm(Wk[h // (H // Hkv)], axis=(0, 2))
    coeff = sa.read_array(args.gen, 'memory_coeff.bin')
    pair_e = np.asarray(pair_e)
    if pair_e.ndim == 1:                          # a cache from before per-layer energies
        pair_e = pair_e[None, :]
    glob = [l for l in range(L) if m.layer_types[l] != 'sliding_attention']
    loc = [l for l in range(L) if m.layer_types[l] == 'sliding_attention']

    def kernel(layers, n, per_layer_base=True):
        t = np.arange(n)
        num = np.zeros(n)
        den = 0.0
        for l in layers:
            th = m.layer_inv_freq(l).numpy() if per_layer_base else theta
            e = pair_e[l] if pair_e.shape[0] == L else pair_e[0]
            num += (e[None, :] * np.cos(np.outer(t, th))).sum(1)
            den += e.sum()
        return num / den

    targets = {'activations': lambda n: kernel(glob if pair_e.shape[0] == L else [0], n),
               'weights': lambda n: (pair_w[None, :] * np.cos(np.outer(np.arange(n), theta))).sum(1) / pair_w.sum()}
    if loc and pair_e.shape[0] == L:
        targets['activations, sliding layers, local base'] = lambda n: kernel(loc, n)
        targets['activations, every layer, its own base'] = lambda n: kernel(range(L), n)
    mem = dict(theta_bar=float(theta.mean()), coeff=coeff.tolist(), windows={}, rope_theta=m.rope_theta,
               rope_local_theta=m.rope_local_theta, global_layers=glob, sliding_layers=loc,
               fitted_base=m.rope_theta)
    for n in (32, 512):
        t = np.arange(n)
        pub = sos_response(coeff, n)
        w = {}
        for tname, f in targets.items():
            tgt = f(n)
            e = {'published AR(2)': cos_rel(pub, tgt), 'constant 1': cos_rel(np.ones(n), tgt),
                 '0.995^t': cos_rel(0.995 ** t, tgt)}
            for K in (1, 2, 3, 6):
                e[f'least-squares fit, {K} section(s)'] = cos_rel(prony(tgt, K), tgt)
            w[tname] = e
        mem['windows'][n] = w
    mem['curve'] = dict(t=list(range(512)), published=sos_response(coeff, 512).tolist(),
                        **{k: f(512).tolist() for k, f in targets.items() if k != 'weights'})
    mem['pair_energy_activations'] = (pair_e.sum(0) / pair_e.sum()).tolist()
    mem['pair_energy_weights'] = (pair_w / pair_w.sum()).tolist()
    mem['pair_energy_per_layer'] = pair_e.tolist()          # memory_bank.py scores other banks from these
    R['memory'] = mem

    # ---- bridge
    guard = sa.read_array(args.gen, 'bridge_guard.bin')          # [V, K, 24]
    V = guard.shape[0]
    flags = guard[:, :, 2:4].copy().view('<u2')[..., 0]
    mrg = guard[:, :, 4:8].copy().view('<f4')[..., 0]
    Ub = guard[:, :, 12:16].copy().view('<f4')[..., 0]
    Vb = guard[:, :, 16:20].copy().view('<f4')[..., 0]
    slack = 0.01
    occ = np.concatenate([np.array(x) for x in token_ids])
    occ = occ[occ < V]
    prom = (flags & 1).astype(bool)
    br = dict(tokens=int(len(occ)), distinct=int(len(np.unique(occ))),
              pair_rate_real=float(prom[occ].mean()), token_all4_real=float(prom[occ].all(1).mean()),
              pair_rate_vocab=float(prom.mean()), token_all4_vocab=float(prom.all(1).mean()))
    ratio = mrg / ((Ub + Vb) / slack)                           # m / (sd_in + sd_out)
    sl = [0.0025, 0.005, 0.01, 0.02, 0.04, 0.08]
    br['slack_curve'] = {s: dict(real=float(((mrg > 0) & (ratio > s))[occ].mean()), vocab=float(((mrg > 0) & (ratio > s)).mean())) for s in sl}
    br['slack_at_0.9_real'] = float(np.quantile(np.where(mrg > 0, ratio, -1)[occ].ravel(), 0.1))
    # the hub bitsets on real (token, context) pairs, through stk_lookup
    nctx = sa.read_array(args.gen, 'bridge_hubs.bin').shape[0] - V
    pops = []
    for ids in token_ids[:4]:
        for i, tkn in enumerate(ids):
            p1 = ids[i - 1] if i >= 1 else 0xFFFFFFFF
            p2 = ids[i - 2] if i >= 2 else 0xFFFFFFFF
            c = mix64((p1 << 32) | p2, 0x307874632d677262) & (nctx - 1)
            pops.append(sum(bin(b).count('1') for b in lib.hub(tkn, c)))
    br['hub_popcount_hist'] = {int(k): int(v) for k, v in zip(*np.unique(pops, return_counts=True))}
    R['bridge'] = br
    R['seconds'] = time.time() - t0
    json.dump(R, open(os.path.join(args.out, 'results.json'), 'w'), indent=1, default=float)
    log('done in', R['seconds'])


if __name__ == '__main__':
    main()
