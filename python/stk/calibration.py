"""``stk calibrate``: activation statistics of a model on the user's text, as llama.cpp's
``llama-imatrix`` gathers them, for ``stk convert --calibration STATS``.

The model runs on the library's own forward (``stk.lm``, float32, full attention: transformers'
float32 forward within 1e-4 on every logit, docs/fidelity.md "The LM runtime"), tokenized by the
model's own tokenizer through the library; a probe (``stk_seq_set_probe``) reads, at every layer,
the inputs and outputs the calibrated fits need, and the library sums their moments (float32
GEMMs over blocks of rows, summed in float64, and the pairs' Gram in float64: ``gram`` /
``cross`` / ``causal_pairs``, stk.h's ``stk_moment_*``).
``--reference transformers`` runs the model as transformers runs it instead (float32, eager
attention, the loading and the contexts of ``stk eval``), forward hooks on its own modules reading
the same activations: the cross-check, and the path for families the library's forward refuses.  The file they go into
(docs/format.md, "Calibration statistics"; src/format/calib_stats.h) holds means, not sums:

- ``ffn`` (dense MLPs): x the MLP module's input, y its output, z = [relu(x); relu(-x)];
  G = E[z z^T] (packed upper), X = E[z y^T], E[y_i^2].
- ``attn_out``: o the input of the attention's output projection (W_O's input), C = E[o o^T].
- ``rope_pairs`` (RoPE with transformers' rotate_half pairing): e_f = E[sum over heads of
  |q_f| |k_f|], q and k after any q/k norm and before the rotation, pair f being element f with
  f + rotary_dim/2, the key head of each query head under GQA.
- ``prf_pairs``: x the attention module's input; the pairs (t, s <= t) of each context as if
  ``pairs_per_query`` keys s were drawn uniformly from [0, t] for each query position t (all of
  0..t when t + 1 <= pairs_per_query), taken in expectation rather than drawn: every s <= t with
  the weight min(P, t + 1) / (t + 1) (``pair_weights``), so no sampling noise and no seed;
  l(t, s) = mean over heads of q_h(t).k_h(s) / sqrt(head_dim), q and k as the model's eager
  attention receives them (after norm and rotary); M = E[(x_t o x_s) (x_t o x_s)^T] (packed
  upper), b = E[(x_t o x_s) l], E[l], E[l^2], the means over the pairs' count
  (sum of min(P, t + 1)).

A section a family cannot give is left out (its bit clear) and the command says which and why.
numpy is the default path's only Python dependency; torch and transformers are needed by
``--reference transformers`` only (``pip install .[eval]``), never by the library.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import struct
import sys
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _lib
from .errors import StkError, _raise
from .evaluation import REFERENCES, need_torch

MAGIC = b"STKCAL01"
VERSION = 2  # 1: no per-layer crc32c (the reader refuses it: rerun stk calibrate)
HEADER_BYTES = 128
PRF_PAIRS, ATTN_OUT, ROPE_PAIRS, FFN = 1, 2, 4, 8
SECTION_NAMES = {PRF_PAIRS: "prf_pairs", ATTN_OUT: "attn_out", ROPE_PAIRS: "rope_pairs", FFN: "ffn"}
# The ffn moments read positions 1.. of each context: position 0's FFN output (the attention
# sink's massive activations) is orders of magnitude above the rest and would fit the dictionary
# to that one token (docs/decisions.md "Calibrated fits", issue 39).
FFN_FROM_POSITION = 1
# Families whose rotary pairs are interleaved (element 2f with 2f + 1), not rotate_half's f with
# f + rotary_dim/2, or whose keys carry the rotation apart from the heads (MLA).
_INTERLEAVED_ROPE = {"gptj": "GPT-J rotates interleaved pairs (2f, 2f+1)",
                     "cohere": "Cohere rotates interleaved pairs (2f, 2f+1)",
                     "cohere2": "Cohere rotates interleaved pairs (2f, 2f+1)",
                     "deepseek_v2": "MLA rotates a separate rope part of q and a shared rope key",
                     "deepseek_v3": "MLA rotates a separate rope part of q and a shared rope key"}


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (Castagnoli, reflected, init and final xor 0xFFFFFFFF) of ``data``, continuing
    ``crc``: the library's (``stk_crc32c``, ISA-L), the checksum its reader verifies."""
    a = np.frombuffer(data, dtype=np.uint8)  # a view, no copy
    return int(_lib.lib.stk_crc32c(crc, a.ctypes.data, a.size))


def packed_upper(a: np.ndarray) -> np.ndarray:
    """Row i's columns i .. n-1, rows in order (the layout of calib_packed_index)."""
    out: np.ndarray = a[_triu(a.shape[0])]
    return out


@functools.lru_cache(maxsize=4)
def _triu(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n)


# --------------------------------------------------------------------------------------------
# the model's pieces


def _layers(model: Any) -> tuple[Any, str]:
    inner = getattr(model, "model", None)
    if inner is not None and getattr(inner, "layers", None) is not None:
        return inner.layers, "model.layers"
    dec = getattr(inner, "decoder", None)
    if dec is not None and getattr(dec, "layers", None) is not None:
        return dec.layers, "model.decoder.layers"
    tr = getattr(model, "transformer", None)
    for name in ("h", "blocks"):
        if tr is not None and getattr(tr, name, None) is not None:
            return getattr(tr, name), f"transformer.{name}"
    raise NotImplementedError(f"stk calibrate: {type(model).__name__} has none of model.layers, model.decoder.layers, "
                              "transformer.h, transformer.blocks")


def _child(mod: Any, names: Sequence[str]) -> tuple[Any, str]:
    for n in names:
        c = getattr(mod, n, None)
        if c is not None:
            return c, n
    return None, ""


class _Layer:
    """One layer's accumulators (float64 sums; divided by their counts when written)."""

    def __init__(self) -> None:
        self.ffn_g: Any = None
        self.ffn_x: Any = None
        self.ffn_yy: Any = None
        self.ffn_n = 0
        self.attn_c: Any = None
        self.attn_n = 0
        self.rope: Any = None
        self.rope_n = 0
        self.prf_m: Any = None
        self.prf_b: Any = None
        self.prf_l: Any = np.zeros(2)
        self.prf_n = 0
        # per forward
        self.x_attn: Any = None
        self.q_pre: Any = None
        self.k_pre: Any = None


def _add(acc: Any, v: Any) -> Any:
    return v if acc is None else acc + v


def pair_weights(t_len: int, per_query: int) -> np.ndarray:
    """The PRF pairs' weight of each query position t: min(P, t + 1) / (t + 1), so that every
    key s <= t weighted by it sums to the expectation of drawing P keys uniformly from 0..t (all
    of 0..t where t + 1 <= P), and the weights over s sum to min(P, t + 1), the count of pairs."""
    t = np.arange(t_len, dtype=np.float64)
    return np.minimum(float(per_query), t + 1) / (t + 1)


def pair_count(t_len: int, per_query: int) -> int:
    """The pairs one context of t_len positions stands for: sum over t of min(P, t + 1)."""
    return int(sum(min(per_query, t + 1) for t in range(t_len)))


# The moments' sums, in the library (stk.h's stk_moment_*; kernels/moments.h): float32 GEMMs
# over blocks of 1,024 rows in the pinned BLIS context, each block's sum added into the float64
# accumulator, and the PRF pairs' Gram in float64 throughout, so the file is the same bits at any
# thread count and on any CPU.  Measured against the same sums in float64 (docs/fidelity.md,
# "Calibration in float32"): a relative 5.4e-7 of a section's largest value at most on SmolLM2,
# 185 times inside the 1e-4 the library's path keeps from transformers'
# (tests/python/test_probe_paths.py).


def _f32(a: Any) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _acc(acc: np.ndarray, shape: tuple[int, ...]) -> int:
    if acc.dtype != np.float64 or acc.shape != shape or not acc.flags.c_contiguous or not acc.flags.writeable:
        raise ValueError(f"accumulator: float64 {shape}, C-contiguous and writeable (got {acc.dtype} {acc.shape})")
    return int(acc.ctypes.data)


def gram(acc: np.ndarray, a: Any, threads: int = 1) -> None:
    """acc[i, j] += sum over rows r of a[r, i] a[r, j] for j >= i (the upper triangle; the lower
    is left as it is), acc float64 [n, n], a [rows, n] (as float32)."""
    a = _f32(a)
    _raise(_lib.lib.stk_moment_gram(a.ctypes.data, a.shape[0], a.shape[1], _acc(acc, (a.shape[1], a.shape[1])), threads))


def cross(acc: np.ndarray, a: Any, b: Any, threads: int = 1) -> None:
    """acc += a^T b, acc float64 [n, m], a [rows, n] and b [rows, m] (as float32)."""
    a, b = _f32(a), _f32(b)
    if b.ndim != 2 or b.shape[0] != a.shape[0]:
        raise ValueError(f"cross: b {b.shape} against a {a.shape}")
    _raise(_lib.lib.stk_moment_cross(a.ctypes.data, b.ctypes.data, a.shape[0], a.shape[1], b.shape[1],
                                     _acc(acc, (a.shape[1], b.shape[1])), threads))


def causal_pairs(acc_m: np.ndarray, acc_b: np.ndarray, acc_l: np.ndarray, x: Any, q: Any, k: Any, scale: float,
                 weights: np.ndarray, threads: int = 1) -> None:
    """The PRF pairs' sums of one context (stk_moment_causal_pairs): every pair (t, s <= t)
    weighted by weights[t], l(t, s) = scale * q[t] . k[s];
    acc_m[a, b] += sum_t w_t sum_{s<=t} (x_t o x_s)_a (x_t o x_s)_b (b >= a), acc_b += sum_t w_t
    sum_{s<=t} (x_t o x_s) l(t, s), acc_l += (the sum of l, of l^2)."""
    x, q, k = _f32(x), _f32(q), _f32(k)
    t, d = x.shape
    if q.shape[0] != t or k.shape != q.shape:
        raise ValueError(f"causal_pairs: q {q.shape}, k {k.shape} against x {x.shape}")
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if w.shape != (t,):
        raise ValueError(f"causal_pairs: weights {w.shape}, want ({t},)")
    _raise(_lib.lib.stk_moment_causal_pairs(x.ctypes.data, q.ctypes.data, k.ctypes.data, t, d, q.shape[1], float(scale),
                                            w.ctypes.data, _acc(acc_m, (d, d)), _acc(acc_b, (d,)), _acc(acc_l, (2,)),
                                            threads))


def _tmp_name(out: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(out)), f".{os.path.basename(out)}.tmp-{os.getpid()}")


def check_out(out: str | os.PathLike[str]) -> None:
    """--out can be written: not a directory, in a directory that exists and takes a new file (a
    probe file is created and removed), checked before the model runs.  OSError naming --out."""
    p = os.fspath(out)
    if os.path.isdir(p):
        raise OSError(f"--out {p}: a directory; give the path of the statistics file to write")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise OSError(f"--out {p}: the directory {parent} does not exist")
    probe = _tmp_name(p)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        raise OSError(f"--out {p}: cannot create a file in {parent}: {e.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def calibrate(model: str, texts: Sequence[str], out: str, *, ctx: Optional[int] = None, contexts: int = 8,
              pairs_per_query: int = 16, progress: bool | Callable[[int, int], None] = True,
              ffn_from_position: int = FFN_FROM_POSITION, reference: Optional[str] = None,
              threads: int = 0) -> dict[str, Any]:
    """Run ``model`` on ``texts`` and write the statistics file ``out``; returns the report (the
    fields of ``stk calibrate --json``, docs/cli.md).  ``ctx`` None: 512, or the model's positions
    when it has fewer.  ``ffn_from_position``: the first position of each context the ffn moments
    read (1, docs/decisions.md "Calibrated fits"; 0 only to measure what the old fit did).
    ``reference``: what runs the model, the library's forward ("stk", the default) or
    transformers' ("transformers", needs torch).  ``threads``: the library's (0: every core)."""
    from .evaluation import check_model_path, model_digest, read_text

    reference = reference or "stk"
    if reference not in REFERENCES:
        raise ValueError(f"--reference {reference}: one of {', '.join(REFERENCES)}")
    if reference == "transformers":
        missing = need_torch("calibrate")
        if missing:
            raise ModuleNotFoundError(missing)
    if ctx is not None and ctx <= ffn_from_position:
        raise ValueError(f"--ctx {ctx}: at least {ffn_from_position + 1} tokens (the ffn moments read positions "
                         f"{ffn_from_position}.. of each context)")
    if contexts < 1:
        raise ValueError(f"--contexts {contexts}: at least 1")
    if pairs_per_query < 1:
        raise ValueError(f"--pairs-per-query {pairs_per_query}: at least 1")
    if not texts:
        raise ValueError("stk calibrate: give at least one --text FILE")
    # Every argument, and --out, is checked before the model loads.
    for t in texts:
        read_text(t)
    check_model_path(model)
    check_out(out)
    t0 = time.monotonic()
    if reference == "transformers":
        mo = _moments_transformers(model, texts, ctx, contexts, pairs_per_query, progress, ffn_from_position)
    else:
        mo = _moments_library(model, texts, ctx, contexts, pairs_per_query, progress, ffn_from_position, threads)
    return _write(model, out, mo, pairs_per_query, reference, t0)


class _Moments:
    """What a forward gathered: the accumulators per layer and the model's shape."""

    def __init__(self, accs: list[_Layer], want: list[int], notes: list[str], n_layers: int, d_model: int, d_v: int,
                 n_pairs: int, tokens: int, n_contexts: int, ctx: int, layer_path: str) -> None:
        self.accs, self.want, self.notes = accs, want, notes
        self.n_layers, self.d_model, self.d_v, self.n_pairs = n_layers, d_model, d_v, n_pairs
        self.tokens, self.n_contexts, self.ctx, self.layer_path = tokens, n_contexts, ctx, layer_path


def _contexts_bar(progress: bool | Callable[[int, int], None], total: int) -> tuple[Any, Callable[[int], None]]:
    bar = None
    if progress is True:
        try:
            from tqdm import tqdm
            bar = tqdm(total=total, unit="context", desc="stk calibrate", file=sys.stderr)
        except ImportError:
            bar = None

    def step(done: int) -> None:
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(done, total)
    return bar, step


def _moments_library(model: str, texts: Sequence[str], ctx: Optional[int], contexts: int, pairs_per_query: int,
                     progress: bool | Callable[[int, int], None], ffn_from_position: int, threads: int) -> _Moments:
    """The moments from the library's forward (stk.lm at full attention, one chunk a context),
    read through a probe: numpy only."""
    from . import evaluation
    from .lm import LanguageModel, Tokenizer

    tok = Tokenizer(os.fspath(model))
    ctx = evaluation.ctx_within(ctx, evaluation.model_positions(os.fspath(model)))
    if ctx <= ffn_from_position:
        raise ValueError(f"--ctx {ctx}: at least {ffn_from_position + 1} tokens")
    lm = LanguageModel(os.fspath(model))
    n_layers, d_model, h = lm.n_layers, lm.d_model, lm.n_heads
    model_type = lm.model_type
    threads = threads or os.cpu_count() or 1
    seq = lm.sequence(sinks=0, window=ctx, threads=threads, max_batch=ctx)
    accs = [_Layer() for _ in range(n_layers)]
    want = [PRF_PAIRS | ATTN_OUT | ROPE_PAIRS | FFN] * n_layers
    notes: list[str] = []
    shape = {"d_v": 0, "n_pairs": 0}
    held: dict[str, np.ndarray] = {}  # this layer's points read so far
    weights: list[np.ndarray] = []    # this context's pair weights

    def probe(p: Any) -> None:
        li, a = p.layer, accs[p.layer]
        if p.point in ("attn_in", "q_pre", "q", "ffn_in"):
            held[p.point] = np.array(p.data, dtype=np.float32)  # the forward's own float32 values, copied
            if p.point == "q_pre":
                held["heads"] = np.array([p.heads, p.head_width, p.rot_offset, p.rot_pairs, p.interleaved])
        elif p.point == "k_pre" and want[li] & ROPE_PAIRS:
            heads, hd, off, npairs, inter = (int(v) for v in held["heads"])
            why = ""
            if model_type in _INTERLEAVED_ROPE:
                why = _INTERLEAVED_ROPE[model_type]
            elif npairs == 0:
                why = f"{model_type} has no rotary position embedding"
            elif inter or off:
                why = f"{model_type} rotates interleaved pairs (2f, 2f+1) or a part apart from the heads"
            if why:
                want[li] &= ~ROPE_PAIRS
                notes.append(f"layer {li}: rope_pairs left out: {why}")
                return
            t = p.data.shape[0]
            q = held["q_pre"].astype(np.float64).reshape(t, heads, hd)
            k = np.repeat(np.asarray(p.data, dtype=np.float64).reshape(t, p.heads, hd), heads // p.heads, axis=1)
            qn = np.sqrt(q[..., :npairs] ** 2 + q[..., npairs:2 * npairs] ** 2)
            kn = np.sqrt(k[..., :npairs] ** 2 + k[..., npairs:2 * npairs] ** 2)
            a.rope = _add(a.rope, (qn * kn).sum((0, 1)))
            a.rope_n += t
            shape["n_pairs"] = npairs
        elif p.point == "k":
            # the pairs' logits l(t, s) = mean over heads of q_h(t).k_h(s) / sqrt(head_dim):
            # q against the keys repeated to the query heads (GQA), scaled by 1 / (h sqrt(hd))
            t, hd = p.data.shape[0], p.head_width
            k = np.repeat(np.asarray(p.data, dtype=np.float32).reshape(t, p.heads, hd), h // p.heads, axis=1)
            if a.prf_m is None:
                a.prf_m, a.prf_b, a.prf_l = np.zeros((d_model, d_model)), np.zeros(d_model), np.zeros(2)
            causal_pairs(a.prf_m, a.prf_b, a.prf_l, held["attn_in"], held["q"], k.reshape(t, h * hd),
                         1.0 / (h * math.sqrt(hd)), weights[0], threads)
            a.prf_n += pair_count(t, pairs_per_query)
        elif p.point == "attn_out":
            o = p.data
            if a.attn_c is None:
                a.attn_c = np.zeros((o.shape[1], o.shape[1]))
            gram(a.attn_c, o, threads)
            a.attn_n += o.shape[0]
            shape["d_v"] = o.shape[1]
        elif p.point == "ffn_out" and want[li] & FFN:
            if p.moe:
                want[li] &= ~FFN
                notes.append(f"layer {li}: ffn left out: the layer's FFN is a mixture of experts (dense MLPs only)")
                return
            x = held["ffn_in"][ffn_from_position:]
            y = np.asarray(p.data[ffn_from_position:], dtype=np.float32)
            z = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=1)
            if a.ffn_g is None:
                a.ffn_g, a.ffn_x = np.zeros((z.shape[1], z.shape[1])), np.zeros((z.shape[1], y.shape[1]))
            gram(a.ffn_g, z, threads)
            cross(a.ffn_x, z, y, threads)
            yd = y.astype(np.float64)
            a.ffn_yy = _add(a.ffn_yy, (yd * yd).sum(0))
            a.ffn_n += x.shape[0]

    seq.set_probe(probe, ("attn_in", "q_pre", "k_pre", "q", "k", "attn_out", "ffn_in", "ffn_out"))
    tokens = 0
    ctxs = evaluation.contexts_of(tok, texts, ctx, contexts)
    bar, step = _contexts_bar(progress, len(ctxs))
    try:
        for ci, (_, ids) in enumerate(ctxs):
            weights[:] = [pair_weights(len(ids), pairs_per_query)]
            seq.reset()
            seq.feed(ids)
            tokens += len(ids)
            step(ci + 1)
    finally:
        if bar is not None:
            bar.close()
        seq.set_probe(None)
    return _Moments(accs, want, notes, n_layers, d_model, shape["d_v"] or h * lm.head_dim, shape["n_pairs"], tokens,
                    len(ctxs), ctx, "stk.lm")


def _moments_transformers(model: str, texts: Sequence[str], ctx: Optional[int], contexts: int, pairs_per_query: int,
                          progress: bool | Callable[[int, int], None], ffn_from_position: int) -> _Moments:
    """The moments from transformers' forward (float32, eager), read by hooks on its modules."""
    import torch

    from .evaluation import _load, contexts_of, resolve_ctx
    m, tok = _load(os.fspath(model))
    ctx = resolve_ctx(ctx, m.config)
    if ctx <= ffn_from_position:
        raise ValueError(f"--ctx {ctx}: at least {ffn_from_position + 1} tokens")
    cfg = m.config
    layers, layers_name = _layers(m)
    n_layers = len(layers)
    d_model = int(cfg.hidden_size)
    h = int(cfg.num_attention_heads)
    notes: list[str] = []  # why a section is left out
    model_type = str(getattr(cfg, "model_type", "?"))

    accs = [_Layer() for _ in range(n_layers)]
    hooks: list[Any] = []
    attn_of: dict[int, int] = {}  # id(attention module) -> layer
    d_v = 0
    n_pairs = 0
    want = [0] * n_layers
    rot_dim_seen: list[int] = []

    rot_cfg = _rotary_dim(m, int(getattr(cfg, "head_dim", 0) or d_model // h))
    for li, layer in enumerate(layers):
        mlp, mlp_name = _child(layer, ("mlp", "feed_forward", "ffn", "block_sparse_moe"))
        attn, attn_name = _child(layer, ("self_attn", "attn", "self_attention", "attention"))
        # FFN
        if mlp is None:
            notes.append(f"layer {li}: ffn left out: {type(layer).__name__} has no MLP module to hook (it applies "
                         "its FFN layers itself)")
        elif hasattr(mlp, "experts") or hasattr(mlp, "router") or mlp_name == "block_sparse_moe":
            notes.append(f"layer {li}: ffn left out: {type(mlp).__name__} is a mixture of experts (dense MLPs only)")
        else:
            want[li] |= FFN

            def ffn_hook(mod: Any, args: Any, output: Any, li: int = li) -> None:
                # [batch 1, t, d]: positions ffn_from_position.. (the first token's massive
                # activations would otherwise dominate the moments: docs/decisions.md)
                x = args[0][:, ffn_from_position:].reshape(-1, d_model).double()
                y = (output[0] if isinstance(output, tuple) else output)[:, ffn_from_position:]
                y = y.reshape(-1, d_model).double()
                z = torch.cat([torch.relu(x), torch.relu(-x)], dim=1)
                a = accs[li]
                a.ffn_g = _add(a.ffn_g, z.T @ z)
                a.ffn_x = _add(a.ffn_x, z.T @ y)
                a.ffn_yy = _add(a.ffn_yy, (y * y).sum(0))
                a.ffn_n += x.shape[0]

            hooks.append(mlp.register_forward_hook(ffn_hook))
        if attn is None:
            notes.append(f"layer {li}: prf_pairs, attn_out, rope_pairs left out: no attention module")
            continue
        attn_of[id(attn)] = li
        # attention output projection's input
        oproj, oname = _child(attn, ("o_proj", "c_proj", "out_proj", "dense", "wo"))
        if oproj is None:
            notes.append(f"layer {li}: attn_out left out: {type(attn).__name__} has no o_proj/c_proj/out_proj/dense")
        else:
            want[li] |= ATTN_OUT

            def o_hook(mod: Any, args: Any, li: int = li) -> None:
                o = args[0].reshape(-1, args[0].shape[-1]).double()
                a = accs[li]
                a.attn_c = _add(a.attn_c, o.T @ o)
                a.attn_n += o.shape[0]
            hooks.append(oproj.register_forward_pre_hook(o_hook))
            w = getattr(oproj, "weight", None)
            if w is not None:
                # nn.Linear: [out, in]; GPT-2's Conv1D: [in, out]
                d_v = int(w.shape[1] if isinstance(oproj, torch.nn.Linear) else w.shape[0])

        # the attention input (PRF's x)
        def attn_pre(mod: Any, args: Any, kwargs: Any, li: int = li) -> None:
            hs = args[0] if args else kwargs.get("hidden_states")
            accs[li].x_attn = hs.reshape(-1, d_model)
        hooks.append(attn.register_forward_pre_hook(attn_pre, with_kwargs=True))
        want[li] |= PRF_PAIRS

        # q and k before the rotation
        qn, _ = _child(attn, ("q_norm", "q_layernorm"))
        kn, _ = _child(attn, ("k_norm", "k_layernorm"))
        qp, _ = _child(attn, ("q_proj",))
        kp, _ = _child(attn, ("k_proj",))
        qsrc, ksrc = (qn, kn) if qn is not None and kn is not None else (qp, kp)
        if model_type in _INTERLEAVED_ROPE:
            notes.append(f"layer {li}: rope_pairs left out: {_INTERLEAVED_ROPE[model_type]}")
        elif rot_cfg is None:
            notes.append(f"layer {li}: rope_pairs left out: {model_type} has no rotary position embedding")
        elif qsrc is None or ksrc is None:
            notes.append(f"layer {li}: rope_pairs left out: {type(attn).__name__} has no separate q_proj/k_proj "
                         "(or q_norm/k_norm) to read q and k before the rotation")
        else:
            def q_hook(mod: Any, args: Any, output: Any, li: int = li) -> None:
                accs[li].q_pre = output
            def k_hook(mod: Any, args: Any, output: Any, li: int = li) -> None:
                accs[li].k_pre = output
            hooks.append(qsrc.register_forward_hook(q_hook))
            hooks.append(ksrc.register_forward_hook(k_hook))
            want[li] |= ROPE_PAIRS

    # The real logits: the q and k the modeling module's eager attention receives.
    mods = {sys.modules[type(_child(layer, ("self_attn", "attn", "self_attention", "attention"))[0]).__module__]
            for layer in layers if _child(layer, ("self_attn", "attn", "self_attention", "attention"))[0] is not None}
    patched: list[tuple[Any, Any]] = []
    captured: dict[int, tuple[Any, Any]] = {}
    for mm in mods:
        orig = getattr(mm, "eager_attention_forward", None)
        if orig is None:
            continue

        def eager(module: Any, query: Any, key: Any, *args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
            li = attn_of.get(id(module))
            if li is not None:
                captured[li] = (query, key)
            return _orig(module, query, key, *args, **kwargs)
        patched.append((mm, orig))
        setattr(mm, "eager_attention_forward", eager)
    if not patched:
        for li in range(n_layers):
            if want[li] & PRF_PAIRS:
                want[li] &= ~PRF_PAIRS
                notes.append(f"layer {li}: prf_pairs left out: {model_type}'s modeling code has no eager_attention_forward "
                             "to read q and k from")

    tokens = 0
    try:
        ctxs = contexts_of(tok, texts, ctx, contexts)
        bar = None
        if progress is True:
            try:
                from tqdm import tqdm
                bar = tqdm(total=len(ctxs), unit="context", desc="stk calibrate", file=sys.stderr)
            except ImportError:
                bar = None
        with torch.no_grad():
            for ci, (_, ids) in enumerate(ctxs):
                captured.clear()
                for a in accs:
                    a.x_attn = a.q_pre = a.k_pre = None
                t_len = len(ids)
                m(torch.tensor([ids]), use_cache=False)
                tokens += t_len
                for li in range(n_layers):
                    a = accs[li]
                    if want[li] & PRF_PAIRS:
                        if li not in captured or a.x_attn is None:
                            want[li] &= ~PRF_PAIRS
                            notes.append(f"layer {li}: prf_pairs left out: its attention did not go through eager_attention_forward")
                        else:
                            q, k = captured[li]  # [1, h, t, hd], [1, hkv, t, hd]
                            _pairs_float64(a, a.x_attn.double(), q[0].double(), k[0].double(), pair_weights(t_len, pairs_per_query))
                            a.prf_n += pair_count(t_len, pairs_per_query)
                    if want[li] & ROPE_PAIRS:
                        if li not in captured or a.q_pre is None or a.k_pre is None:
                            want[li] &= ~ROPE_PAIRS
                            notes.append(f"layer {li}: rope_pairs left out: q/k were not seen")
                            continue
                        hd = captured[li][0].shape[-1]
                        hk = captured[li][1].shape[1]
                        rot = _rotary_dim(m, hd)
                        if rot is None:
                            want[li] &= ~ROPE_PAIRS
                            notes.append(f"layer {li}: rope_pairs left out: {model_type} has no rotary embedding")
                            continue
                        rot_dim_seen.append(rot)
                        half = rot // 2
                        qv = a.q_pre.reshape(t_len, h, hd).double()
                        kv = a.k_pre.reshape(t_len, hk, hd).double().repeat_interleave(h // hk, dim=1)
                        qn_ = torch.sqrt(qv[..., :half] ** 2 + qv[..., half:rot] ** 2)
                        kn_ = torch.sqrt(kv[..., :half] ** 2 + kv[..., half:rot] ** 2)
                        a.rope = _add(a.rope, (qn_ * kn_).sum((0, 1)))
                        a.rope_n += t_len
                if bar is not None:
                    bar.update(1)
                elif callable(progress):
                    progress(ci + 1, len(ctxs))
        if bar is not None:
            bar.close()
    finally:
        for hk_ in hooks:
            hk_.remove()
        for mm, orig in patched:
            setattr(mm, "eager_attention_forward", orig)

    if any(w & ROPE_PAIRS for w in want):
        n_pairs = rot_dim_seen[0] // 2
        if any(r != rot_dim_seen[0] for r in rot_dim_seen):
            raise NotImplementedError("stk calibrate: layers with different rotary widths")
    if d_v == 0:
        d_v = h * int(getattr(cfg, "head_dim", 0) or d_model // h)
    return _Moments(accs, want, notes, n_layers, d_model, d_v, n_pairs, tokens, len(ctxs), ctx, layers_name)


def _pairs_float64(a: _Layer, x: Any, q: Any, k: Any, weights: np.ndarray) -> None:
    """The PRF pairs' sums of one context in float64 torch (the cross-check path): x [t, d],
    q [h, t, hd], k [hkv, t, hd]; the same definition as ``causal_pairs``, computed as it reads:
    l = the masked mean over heads of q k^T / sqrt(hd), B = sum_t w_t x_t o (l x)_t, and M from
    the running sum C_t = sum_{s<=t} x_s x_s^T as sum_t w_t (x_t x_t^T) o C_t."""
    import torch
    t, d = x.shape
    h, hk, hd = q.shape[0], k.shape[0], q.shape[-1]
    lg = torch.einsum("htd,hsd->ts", q, k.repeat_interleave(h // hk, dim=0)) / h / math.sqrt(hd)
    lg = torch.tril(lg)
    w = torch.from_numpy(weights)
    if a.prf_m is None:
        a.prf_m, a.prf_b, a.prf_l = torch.zeros(d, d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64), np.zeros(2)
    a.prf_b = a.prf_b + (w[:, None] * x * (lg @ x)).sum(0)
    a.prf_l[0] += float((w * lg.sum(1)).sum())
    a.prf_l[1] += float((w * (lg * lg).sum(1)).sum())
    c = torch.zeros(d, d, dtype=torch.float64)
    m = a.prf_m
    for i in range(t):
        p = torch.outer(x[i], x[i])
        c += p
        m += w[i] * p * c
    a.prf_m = m


def _np(a: Any) -> np.ndarray:
    """A float64 sum as numpy (torch's tensors on the transformers path)."""
    return a if isinstance(a, np.ndarray) else np.asarray(a.numpy())


def _write(model: str, out: str, mo: _Moments, pairs_per_query: int, reference: str, t0: float) -> dict[str, Any]:
    """The statistics file (docs/format.md) from the moments, and the report."""
    from .evaluation import model_digest
    accs, n_layers, d_model, d_v, n_pairs, tokens = mo.accs, mo.n_layers, mo.d_model, mo.d_v, mo.n_pairs, mo.tokens
    crc, low = model_digest(os.fspath(model))

    # The file, a layer at a time (SmolLM2's is 400 MB: no second copy of it in memory).  The
    # payload's SHA-256 starts with the layer table, which holds each layer's crc32c: a first pass
    # computes the crcs and writes the layers' bytes after the table's place, a second reads them
    # back (the page cache) into the digest.
    def layer_bytes(li: int) -> tuple[list[bytes], list[str]]:
        a, secs = accs[li], mo.want[li]
        parts: list[bytes] = []
        names = []
        if secs & PRF_PAIRS:
            n = a.prf_n
            parts.append(np.concatenate([packed_upper(_np(a.prf_m)) / n, _np(a.prf_b) / n,
                                         [a.prf_l[0] / n, a.prf_l[1] / n]]).astype("<f8").tobytes())
            names.append("prf_pairs")
        if secs & ATTN_OUT:
            parts.append((packed_upper(_np(a.attn_c)) / a.attn_n).astype("<f8").tobytes())
            names.append("attn_out")
        if secs & ROPE_PAIRS:
            parts.append((_np(a.rope) / a.rope_n).astype("<f8").tobytes())
            names.append("rope_pairs")
        if secs & FFN:
            n = a.ffn_n
            parts.append(np.concatenate([packed_upper(_np(a.ffn_g)) / n, (_np(a.ffn_x) / n).ravel(),
                                         _np(a.ffn_yy) / n]).astype("<f8").tobytes())
            names.append("ffn")
        for part in parts:
            if not np.all(np.isfinite(np.frombuffer(part, dtype="<f8"))):
                raise ValueError(f"{model}: a moment is not finite (the model's activations overflow float64)")
        return parts, names

    out = os.fspath(out)
    tmp = _tmp_name(out)
    table = bytearray()
    present: list[list[str]] = []
    sha = hashlib.sha256()
    try:
        with open(tmp, "w+b") as f:
            body_at = HEADER_BYTES + 16 * n_layers
            f.seek(body_at)
            for li in range(n_layers):
                parts, names = layer_bytes(li)
                # the table entry: sections, the crc32c of the layer's section bytes, the PRF pairs
                layer_crc = 0
                for part in parts:
                    layer_crc = crc32c(part, layer_crc)
                    f.write(part)
                secs = mo.want[li]
                table += struct.pack("<IIQ", secs, layer_crc, accs[li].prf_n if secs & PRF_PAIRS else 0)
                present.append(names)
                del parts
            file_bytes = f.tell()
            sha.update(table)
            f.seek(body_at)
            while True:
                chunk = f.read(1 << 24)
                if not chunk:
                    break
                sha.update(chunk)
            digest = sha.digest()
            head = bytearray(HEADER_BYTES)
            struct.pack_into("<8sIIQIIIIIIQQ", head, 0, MAGIC, VERSION, 0, low, crc, n_layers, d_model, d_v, n_pairs, 0,
                             tokens, file_bytes)
            head[64:96] = digest
            struct.pack_into("<I", head, 124, crc32c(bytes(head[:124])))
            f.seek(0)
            f.write(head)
            f.write(table)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    uniq_notes = _group_notes(mo.notes)
    return {
        "command": "calibrate",
        "model": os.fspath(model),
        "path": out,
        "digest": digest.hex(),
        "bytes": file_bytes,
        "tokens": tokens,
        "contexts": mo.n_contexts,
        "ctx": mo.ctx,
        "pairs_per_query": pairs_per_query,
        "reference": reference,
        "layers": n_layers,
        "layer_path": mo.layer_path,
        "d_model": d_model,
        "d_v": d_v,
        "n_pairs": n_pairs,
        "sections": present,
        "left_out": uniq_notes,
        "seconds": round(time.monotonic() - t0, 1),
    }


def _group_notes(notes: Sequence[str]) -> list[str]:
    """"layer N: WHY" lines -> one line per WHY naming its layers."""
    by: dict[str, list[int]] = {}
    for n in dict.fromkeys(notes):
        head, _, why = n.partition(": ")
        by.setdefault(why, []).append(int(head.split()[1]))
    out = []
    for why, ls in by.items():
        what, _, reason = why.partition(" left out: ")
        out.append(f"{what} at layers {', '.join(map(str, ls))}: {reason}")
    return out


def _rotary_dim(model: Any, head_dim: int) -> Optional[int]:
    """The rotary width per head (partial_rotary_factor where the config has one), None without RoPE."""
    cfg = model.config
    rope = dict(getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {})
    if rope and all(isinstance(v, dict) for v in rope.values()):  # per layer type (Gemma 3)
        rope = next(iter(rope.values()))
    has_theta = getattr(cfg, "rope_theta", None) is not None or "rope_theta" in rope
    if not has_theta:
        return None
    factor = float(getattr(cfg, "partial_rotary_factor", None) or rope.get("partial_rotary_factor", 1.0) or 1.0)
    return int(head_dim * factor) // 2 * 2


# --------------------------------------------------------------------------------------------
# the command


def _format(r: dict[str, Any]) -> str:
    lines = [f"stk calibrate: {r['model']} -> {r['path']}",
             f"  {r['contexts']} contexts of {r['ctx']} tokens ({r['tokens']} tokens), {r['layers']} layers, "
             f"{r['bytes']} bytes",
             f"  sha256 {r['digest']}"]
    kinds = sorted({",".join(s) for s in r["sections"]})
    lines.append("  sections per layer: " + "; ".join(k or "(none)" for k in kinds))
    for n in r["left_out"]:
        lines.append(f"  left out: {n}")
    lines.append(f"  {r['seconds']} s")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="stk calibrate", description=(
        "Activation statistics of a model on your text, computed by stk's own forward (float32, full attention; "
        "numpy only), written to a checksummed file for stk convert --calibration. --reference transformers: "
        "transformers' forward instead (needs pip install 'stk[eval]')."))
    p.add_argument("--model", required=True, help="the model: a HF directory or a .gguf file")
    p.add_argument("--text", action="append", required=True, metavar="FILE", help="a UTF-8 text (repeatable)")
    p.add_argument("--out", required=True, metavar="STATS", help="the statistics file to write")
    p.add_argument("--ctx", type=int, default=None, help="tokens per context (default 512, or the model's positions "
                   "when it has fewer)")
    p.add_argument("--contexts", type=int, default=8, help="at most this many contexts per --text file (default 8)")
    p.add_argument("--pairs-per-query", type=int, default=16,
                   help="PRF pairs: the keys per query position whose uniform draw the pairs' weights are the "
                        "expectation of (default 16)")
    p.add_argument("--reference", choices=REFERENCES, default="stk", help="what runs the model: stk's own forward "
                   "(default) or transformers' (needs torch)")
    p.add_argument("--threads", type=int, default=0, help="stk's forward: threads (default: every core)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.reference == "transformers":
        missing = need_torch("calibrate")
        if missing:
            print(f"stk calibrate: {missing}", file=sys.stderr)
            return 1
    try:
        r = calibrate(a.model, a.text, a.out, ctx=a.ctx, contexts=a.contexts, pairs_per_query=a.pairs_per_query,
                      progress=True, reference=a.reference, threads=a.threads)
    except ValueError as e:
        print(f"stk calibrate: {e}", file=sys.stderr)
        return 2
    except NotImplementedError as e:
        print(f"stk calibrate: not implemented: {e}", file=sys.stderr)
        return 3
    except StkError as e:
        print(f"stk calibrate: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the output's directory missing or not writable, a text unreadable
        print(f"stk calibrate: {e}", file=sys.stderr)
        return 1
    for n in r["left_out"]:
        print(f"stk calibrate: left out: {n}", file=sys.stderr)
    print(json.dumps(r, indent=2) if a.json else _format(r))
    return 0
