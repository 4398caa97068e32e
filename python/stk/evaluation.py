"""``stk eval``: what a converted model keeps, end to end.

The original model runs on the library's own forward (``stk.lm`` at full attention: transformers'
float32 forward within 1e-4 on every logit), tokenized by the library; the same forward then runs
with chosen modules computed by the library's reference runtime of the arrays
(``stk.runtime.ReferenceRuntime``), or with those modules deleted (``zero=True``), each written
over the block's output at the forward's probe points (docs/decisions.md "Probes"), and the two are
compared on the user's own text: perplexity of each, the KL divergence of the swapped model's
next-token distribution from the original's (mean and 99th percentile over positions), top-1
agreement, and for each swapped module and layer the relative L2 of its output against the output
of the module it replaced (measured inside the swapped run, on the swapped run's own inputs).

What a swap computes (docs/decisions.md, "The reference runtime and `stk eval`"):

- ``ffn``: the layer's MLP output is the linear dictionary's ``sum_j |x_j| M^{sign x_j}[:, j]`` of
  the MLP's input (the post-attention norm's output).
- ``prf``: the attention block's output is ``o_proj`` of the PRF read-out of the attention input
  (the input norm's output) against the state of every key up to and including the query's own
  position, the values being the layer's own ``v_proj`` heads (GQA heads repeated).
- ``overlays``: PRF attention plus the overlay correction deltaC(q), added in value space before
  ``o_proj``; it implies ``prf`` at those layers.
- ``memory``: PRF attention whose state is filtered by the generation's memory bank (each key's
  contribution weighted by the bank's impulse response at its lag); it implies ``prf``.

A faithful generation (``stk convert --profile faithful``: the model's own weights and a runtime
block) is scored as the library runs it, with no swap: ``--gen ROOT`` alone.  Its logits come from
``stk.lm`` on the generation (its runtime block's sinks and window unless --sinks / --window say
otherwise), and the original's from ``stk.lm`` on --model with a window of the whole context (full
attention: transformers' float32 forward, docs/fidelity.md "The LM runtime"), both tokenized by the
model's own tokenizer through the library (``stk.lm.Tokenizer``): numpy is the only Python
dependency of that path.  ``--reference transformers`` takes the original (and the tokens) from
transformers instead, the cross-check.

``--reference transformers`` runs both models as transformers runs them (float32, eager attention)
with the swapped modules installed as torch modules: the cross-check.  The swaps the probe points
cannot express (``window``, ``window-prf``, the ``ffn-*`` low-bit copies: they change the
attention's mask or the FFN's weights) always run there, and the command says so.  torch and
transformers are needed for those only (``pip install .[eval]``), never by the library, and not by
the default path.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from . import _lib
from .errors import Status, StkError, _raise
from .generation import Generation

# Every --swap module, what it swaps in, and whether it is one of the spec's arrays or beyond the
# format: the one list `--help`, the errors and docs/cli.md's list are written from.
SWAP_MODULES: dict[str, tuple[bool, str]] = {
    "ffn": (True, "the FFN as the generation's linear dictionary"),
    "prf": (True, "attention as PRF attention over the generation's whitener"),
    "overlays": (True, "prf plus the overlay correction"),
    "memory": (True, "prf with the memory bank filtering its state"),
    # Beyond the spec's arrays (a proposal to Sera, docs/proposal-faithful-runtime.md): exact
    # softmax over S sink tokens plus a window of the last W (`window`; `window-prf` adds the
    # generation's PRF state holding every key that left the window, in the same normalisation),
    # and the FFN's own weights through the .lwt low-bit packing (docs/spec/lowbit-packing.txt) at
    # one scale per tensor, or as bfloat16.
    "window": (False, "the model's attention over the first --sinks and the last --window positions"),
    "window-prf": (False, "window plus the PRF state of every key that left it (needs --gen)"),
    "ffn-bfloat16": (False, "the FFN's own weights as bfloat16"),
    "ffn-int8": (False, "the FFN's own weights as int8 (stk export --dtype int8)"),
    "ffn-int4": (False, "the FFN's own weights as int4"),
    "ffn-ternary": (False, "the FFN's own weights as ternary"),
}
MODULES = tuple(m for m, (spec, _) in SWAP_MODULES.items() if spec)
BEYOND = tuple(m for m, (spec, _) in SWAP_MODULES.items() if not spec)
ALL_MODULES = MODULES + BEYOND


def swap_modules_text() -> str:
    """The modules --swap takes, in one sentence (the --help text and every --swap error)."""
    return f"{', '.join(MODULES)}; beyond the format: {', '.join(BEYOND)}"


def swap_modules_help() -> str:
    """One line per --swap module: `python -m stk eval --help`'s list."""
    return "\n".join(f"  {m:<13} {why}" + ("" if spec else " [beyond the format]")
                     for m, (spec, why) in SWAP_MODULES.items())


_STAGE_PARSE_TENSORS = 1  # stk_stage STK_STAGE_PARSE_TENSORS


# --------------------------------------------------------------------------------------------
# --swap


@dataclass(frozen=True)
class Swap:
    """One entry of ``--swap``: a module and the layers it replaces (None: every layer)."""
    module: str
    layers: Optional[tuple[int, ...]]


def parse_swap(spec: str) -> list[Swap]:
    """``"ffn:15,prf:0-29,overlays"`` -> Swaps.  LAYERS is ``N``, ``A-B`` (inclusive) or several
    joined by ``+`` (``ffn:0+7+15``); a module without LAYERS swaps every layer."""
    out: list[Swap] = []
    if not spec.strip():
        return out
    for part in spec.split(","):
        part = part.strip()
        name, colon, layers = part.partition(":")
        if name not in ALL_MODULES:
            raise ValueError(f"--swap {spec!r}: unknown module {name!r} (the modules: {swap_modules_text()})")
        if not colon:
            out.append(Swap(name, None))
            continue
        if not layers:
            raise ValueError(f"--swap {spec!r}: no layers after '{name}:' (give N, A-B or N+M, or {name} without ':' "
                             "for every layer)")
        picked: list[int] = []
        for piece in layers.split("+"):
            a, dash, b = piece.partition("-")
            try:
                lo, hi = int(a), int(b) if dash else int(a)
            except ValueError:
                raise ValueError(f"--swap {spec!r}: layers {layers!r} are not N, A-B or N+M") from None
            if lo < 0 or hi < lo:
                raise ValueError(f"--swap {spec!r}: layer range {piece!r} is empty or negative")
            picked.extend(range(lo, hi + 1))
        out.append(Swap(name, tuple(sorted(set(picked)))))
    return out


def _plan(swaps: Sequence[Swap], n_layers: int) -> dict[str, set[int]]:
    """Module -> layers, checked against the model; overlays and memory imply prf."""
    plan: dict[str, set[int]] = {m: set() for m in ALL_MODULES}
    for s in swaps:
        layers = range(n_layers) if s.layers is None else s.layers
        for layer in layers:
            if layer >= n_layers:
                raise ValueError(f"--swap {s.module}: layer {layer} does not exist (the model has {n_layers}: 0-{n_layers - 1})")
            plan[s.module].add(layer)
    return plan


# --------------------------------------------------------------------------------------------
# the user's inputs, each checked before the model loads


DEFAULT_CTX = 512


def need_torch(command: str) -> Optional[str]:
    """None when torch and transformers import; else the sentence saying what to install (the
    first thing `stk eval` / `stk calibrate` check, so a missing torch is one line, not a traceback)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return (f"stk {command} needs torch and transformers, which the rest of stk does not: pip install 'stk[eval]' "
                f"(or: pip install torch transformers accelerate gguf); {e}")
    return None


def read_text(path: str | os.PathLike[str]) -> str:
    """A --text file's contents: a regular file, UTF-8, no NUL byte; refused naming the file."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ValueError(f"--text {p}: no such file")
    if not os.path.isfile(p):
        raise ValueError(f"--text {p}: not a regular file")
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"--text {p}: cannot be read: {e.strerror}") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise ValueError(f"--text {p}: a binary file, not UTF-8 text (a NUL byte at offset {nul})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"--text {p}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start} "
                         f"{e.reason})") from None


def check_model_path(model: str | os.PathLike[str]) -> None:
    """--model names a HF directory (with config.json) or a .gguf file."""
    p = os.fspath(model)
    if not os.path.exists(p):
        raise ValueError(f"--model {p}: no such file or directory (give a HF model directory or a .gguf file)")
    if os.path.isdir(p):
        if not os.path.isfile(os.path.join(p, "config.json")):
            raise ValueError(f"--model {p}: a directory without config.json, not a HF model directory")
    elif not p.endswith(".gguf"):
        raise ValueError(f"--model {p}: neither a HF model directory nor a .gguf file")


_POSITION_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_seq_len")


def max_positions(config: Any) -> Optional[tuple[int, str]]:
    """The model's position limit and the config field it is read from; None when it declares none."""
    for cfg in (config, getattr(config, "text_config", None)):
        if cfg is None:
            continue
        fields = cfg.to_dict() if hasattr(cfg, "to_dict") else vars(cfg)  # the names as config.json spells them
        for name in _POSITION_FIELDS:
            v = fields.get(name)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v, name
    return None


def resolve_ctx(ctx: Optional[int], config: Any) -> int:
    """--ctx against the model's positions: the default (None) is 512 or the model's limit when it
    has fewer; a --ctx above the limit is refused before anything runs."""
    limit = max_positions(config)
    return ctx_within(ctx, None if limit is None else (limit[0], f"{limit[1]} in its config"))


def library_positions(model: str) -> Optional[tuple[int, str]]:
    """The model's position limit as stk reads it (``stk inspect``'s max_positions: the config's
    field or the GGUF's context_length); None when it declares none.  No transformers."""
    from .reports import inspect
    n = int(inspect(model).get("max_positions") or 0)
    return (n, "max_positions as stk inspect reads it") if n > 0 else None


def model_positions(model: str) -> Optional[tuple[int, str]]:
    """The model's position limit without transformers: an HF directory's config.json field (the
    names resolve_ctx reads, so the refusals say the same), else stk's reading (library_positions)."""
    cfg_path = os.path.join(os.fspath(model), "config.json")
    if os.path.isfile(cfg_path):
        try:
            with open(cfg_path, encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError):
            cfg = None
        for c in (cfg, cfg.get("text_config") if isinstance(cfg, dict) else None):
            if not isinstance(c, dict):
                continue
            for name in _POSITION_FIELDS:
                v = c.get(name)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    return v, f"{name} in its config"
    return library_positions(model)


def ctx_within(ctx: Optional[int], limit: Optional[tuple[int, str]]) -> int:
    """resolve_ctx against a known limit: (positions, where they were read)."""
    if ctx is None:
        return DEFAULT_CTX if limit is None else min(DEFAULT_CTX, limit[0])
    if limit is not None and ctx > limit[0]:
        raise ValueError(f"--ctx {ctx}: the model has {limit[0]} positions ({limit[1]}); "
                         f"give --ctx {limit[0]} or less")
    return ctx


def contexts_of(tokenizer: Any, texts: Sequence[str], ctx: int, per_file: int) -> list[tuple[str, list[int]]]:
    """Each text tokenized on its own (the tokenizer's default special tokens included), cut into
    consecutive contexts of ``ctx`` tokens, at most ``per_file`` of them; a shorter tail is dropped."""
    out: list[tuple[str, list[int]]] = []
    for path in texts:
        ids = list(tokenizer(read_text(path))["input_ids"])
        n = min(per_file, len(ids) // ctx)
        if n == 0:
            raise ValueError(f"--text {path}: {len(ids)} tokens, fewer than one context of --ctx {ctx}")
        out.extend((os.fspath(path), ids[i * ctx:(i + 1) * ctx]) for i in range(n))
    return out


# --------------------------------------------------------------------------------------------
# the model and its generation


@functools.lru_cache(maxsize=1)
def _load(model: str) -> tuple[Any, Any]:
    """transformers' own loading (kept for the next call on the same model: the swaps are undone
    after every forward): a HF directory, or a GGUF through its gguf_file= reader."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_model_path(model)
    kw: dict[str, Any] = {}
    path = os.fspath(model)
    if os.path.isfile(path) and path.endswith(".gguf"):
        kw["gguf_file"] = os.path.basename(path)
        path = os.path.dirname(os.path.abspath(path))
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager", **kw)
    except (OSError, ValueError, KeyError, TypeError) as e:  # transformers' words for a model it cannot read
        raise ValueError(f"--model {model}: transformers cannot load it: {e}") from None
    m.eval()
    return m, tok


@functools.lru_cache(maxsize=4)
def model_digest(model: str, faithful: Optional[tuple[str, int, int]] = None) -> tuple[int, int]:
    """The parse_tensors digest (crc32c, sha256_low64) of ``model``'s weights, as stk computes it
    for a conversion: the stage run alone, into a staging directory that is removed.
    ``faithful``: (ffn dtype, sinks, window) of a faithful conversion, whose stage writes the
    model's own weights (another digest)."""
    c = _lib.lib
    with tempfile.TemporaryDirectory(prefix="stk-eval-digest-") as tmp:
        params = _lib.JobParams()
        params.struct_size = ctypes.sizeof(params)
        params.in_dir = os.fsencode(os.fspath(model))
        params.out_dir = os.fsencode(os.path.join(tmp, "out"))
        params.threads = 0
        params.flags = _lib.STK_JOB_ALLOW_NONFINITE
        if faithful is not None:
            params.flags |= _lib.STK_JOB_PROFILE_FAITHFUL | {
                "int8": _lib.STK_JOB_FAITHFUL_FFN_INT8, "q4_0": _lib.STK_JOB_FAITHFUL_FFN_Q4_0,
                "q8_0": _lib.STK_JOB_FAITHFUL_FFN_Q8_0, "bf16": _lib.STK_JOB_FAITHFUL_FFN_BF16}.get(faithful[0], 0)
            params.sinks, params.window = faithful[1], faithful[2]
        size = ctypes.c_size_t(0)
        _raise(c.stk_job_arena_size(ctypes.byref(params), ctypes.byref(size)))
        arena = ctypes.create_string_buffer(max(size.value, 1) + 64)
        base = (ctypes.addressof(arena) + 63) // 64 * 64
        job = ctypes.c_void_p()
        _raise(c.stk_open(ctypes.byref(params), ctypes.c_void_p(base), size.value, ctypes.byref(job)))
        try:
            _raise(c.stk_stage_run(job, _STAGE_PARSE_TENSORS))
            crc, low = ctypes.c_uint32(), ctypes.c_uint64()
            _raise(c.stk_stage_digest(job, _STAGE_PARSE_TENSORS, ctypes.byref(crc), ctypes.byref(low)))
        finally:
            c.stk_close(job)
        return crc.value, low.value


def generation_digest(gen: Generation) -> tuple[int, int]:
    """The parse_tensors digest the generation's manifest records."""
    for st in gen.manifest["stages"]:
        if st["stage"] == "parse_tensors" and st["state"] == "ran":
            return int(st["crc32c"], 16), int(st["sha256_low64"], 16)
    raise StkError(Status.INVALID_ARGUMENT, f"{gen.dir}: the manifest records no parse_tensors digest to compare --model with")


# --------------------------------------------------------------------------------------------
# the swapped modules


class _Meter:
    """Sum of squared error and of squared reference of one module at one layer."""
    __slots__ = ("err2", "ref2")

    def __init__(self) -> None:
        self.err2 = 0.0
        self.ref2 = 0.0

    def add(self, got: np.ndarray, ref: np.ndarray) -> None:
        d = got.astype(np.float64) - ref.astype(np.float64)
        self.err2 += float(np.dot(d.ravel(), d.ravel()))
        r = ref.astype(np.float64).ravel()
        self.ref2 += float(np.dot(r, r))

    def rel_l2(self) -> float:
        return math.sqrt(self.err2 / self.ref2) if self.ref2 > 0 else float("nan")


def _decoder_layers(model: Any) -> Any:
    """The decoder blocks: ``model.layers`` (Llama and its kin) or ``transformer.h`` (GPT-2, Falcon)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        layers = getattr(getattr(model, "transformer", None), "h", None)
    if layers is None:
        raise NotImplementedError(f"stk eval: {type(model).__name__} has neither model.layers nor transformer.h; the swaps "
                                  "are implemented for decoders laid out as Llama's, GPT-2's or Falcon's")
    return layers


# A block's attention and FFN modules, by the names transformers gives them.
_ATTN_NAMES = ("self_attn", "attn", "self_attention")


def _attn_name(blk: Any) -> str:
    for n in _ATTN_NAMES:
        if getattr(blk, n, None) is not None:
            return n
    raise NotImplementedError(f"stk eval: {type(blk).__name__} has none of {', '.join(_ATTN_NAMES)}")


def _out_proj(attn: Any) -> Any:
    """The attention's output projection W_O: o_proj (Llama), c_proj (GPT-2), dense (Falcon)."""
    for n in ("o_proj", "c_proj", "dense"):
        if getattr(attn, n, None) is not None:
            return getattr(attn, n)
    raise NotImplementedError(f"{type(attn).__name__} has no o_proj / c_proj / dense output projection")


def _values(attn: Any, x: Any, h: int, hkv: int, hd: int) -> Any:
    """The attention's value heads at every position, [t, h * hd], each query head's value head
    (GQA / MQA heads repeated): from v_proj, or split out of the fused projection as the family's
    own forward splits it (GPT-2's c_attn is [q | k | v]; Falcon's query_key_value is split by its
    _split_heads, which broadcasts each key/value head over its query heads)."""
    t = x.shape[0]
    if getattr(attn, "v_proj", None) is not None:
        v = attn.v_proj(x).reshape(t, hkv, hd)
        return v.repeat_interleave(h // hkv, dim=1).reshape(t, h * hd)
    if getattr(attn, "c_attn", None) is not None and not getattr(attn, "is_cross_attention", False):
        d = int(attn.split_size)
        return attn.c_attn(x)[:, 2 * d:3 * d]
    if getattr(attn, "query_key_value", None) is not None and hasattr(attn, "_split_heads"):
        _, _, v = attn._split_heads(attn.query_key_value(x)[None])  # [1, t, heads, hd]; MQA: 1 head
        v = v[0]
        if v.shape[1] == 1:
            v = v.expand(t, h, v.shape[-1])
        return v.reshape(t, -1)
    raise NotImplementedError(f"{type(attn).__name__} has none of v_proj, c_attn (GPT-2), query_key_value (Falcon)")


def _attn_geometry(attn: Any, config: Any) -> tuple[int, int, int]:
    hd = int(getattr(attn, "head_dim", 0) or getattr(config, "head_dim", 0) or config.hidden_size // config.num_attention_heads)
    h = int(config.num_attention_heads)
    hkv = int(getattr(config, "num_key_value_heads", None) or h)
    return h, hkv, hd


def _check_plan(plan: dict[str, set[int]]) -> None:
    """One replacement per block: an FFN is the dictionary or one low-bit copy; an attention block
    is PRF (with overlays and/or memory) or the window."""
    ffn_kinds = ("ffn",) + tuple(m for m in BEYOND if m.startswith("ffn-"))
    for i, a in enumerate(ffn_kinds):
        for b in ffn_kinds[i + 1:]:
            both = plan[a] & plan[b]
            if both:
                raise ValueError(f"--swap: layer {min(both)}'s FFN is given twice ({a} and {b})")
    attn_kinds = {"window": plan["window"], "window-prf": plan["window-prf"],
                  "prf": plan["prf"] | plan["overlays"] | plan["memory"]}
    names = list(attn_kinds)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = attn_kinds[a] & attn_kinds[b]
            if both:
                raise ValueError(f"--swap: layer {min(both)}'s attention is given twice ({a} and {b})")


def _lowbit_ffn_weights(model_path: str, dtype: str, layers: Iterable[int]) -> dict[int, dict[str, np.ndarray]]:
    """The FFN weights of ``layers`` as ``stk export --dtype DTYPE`` stores them, read back
    dequantized: what a runtime holding the model's own FFN at that width would multiply by."""
    from .lwt import export_lwt, read_lwt
    want = sorted(set(layers))
    out: dict[int, dict[str, np.ndarray]] = {layer: {} for layer in want}
    with tempfile.TemporaryDirectory(prefix="stk-eval-lowbit-") as tmp:
        path = os.path.join(tmp, f"ffn-{dtype}.lwt")
        export_lwt(model_path, path, dtype)
        f = read_lwt(path, dequantize=True)
        for layer in want:
            prefix = f"model.layers.{layer}.mlp."
            for name in f:
                if name.startswith(prefix) and name.endswith(".weight"):
                    out[layer][name[len(prefix):-len(".weight")]] = np.array(f[name], dtype=np.float32)
            if not out[layer]:
                raise NotImplementedError(f"--swap ffn-{dtype}:{layer}: the .lwt export has no {prefix}*.weight tensors")
    return out


def _install(model: Any, rt: Any, plan: dict[str, set[int]], zero: bool, meters: dict[tuple[str, int], _Meter],
             sinks: int = 4, window: int = 60, lowbit: Optional[dict[str, dict[int, dict[str, np.ndarray]]]] = None,
             passthrough: bool = False) -> list[Callable[[], None]]:
    """Replace the planned modules in ``model``; returns the undo callables.  With ``passthrough``
    each replacement is computed and measured but the original module's output goes on: the
    forward stays the original's, and ``meters`` get each module's error on the original model's
    inputs (``--isolated``)."""
    import copy

    import torch

    layers = _decoder_layers(model)
    undo: list[Callable[[], None]] = []
    cfg = model.config

    class FFN(torch.nn.Module):
        def __init__(self, orig: Any, layer: int) -> None:
            super().__init__()
            self.orig, self.layer = orig, layer

        def forward(self, x: Any) -> Any:
            ref = self.orig(x)
            flat = x.reshape(-1, x.shape[-1]).detach().cpu().numpy().astype(np.float32)
            y = np.zeros_like(flat) if zero else rt.ffn_apply(self.layer, flat)
            meters[("ffn", self.layer)].add(y, ref.reshape(flat.shape).detach().cpu().numpy())
            if passthrough:
                return ref
            return torch.from_numpy(np.ascontiguousarray(y)).reshape(ref.shape).to(ref.dtype)

    class Attention(torch.nn.Module):
        def __init__(self, orig: Any, layer: int, module: str, overlays: bool, memory: bool) -> None:
            super().__init__()
            self.orig, self.layer, self.module = orig, layer, module
            self.overlays, self.memory = overlays, memory
            self.h, self.hkv, self.hd = _attn_geometry(orig, cfg)

        def forward(self, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            ref_out = self.orig(hidden_states, *args, **kwargs)
            ref = ref_out[0] if isinstance(ref_out, tuple) else ref_out
            if hidden_states.shape[0] != 1:
                raise NotImplementedError("stk eval runs one context at a time (batch 1)")
            x = hidden_states[0]
            if zero:
                out = torch.zeros_like(ref)
            else:
                v = _values(self.orig, x, self.h, self.hkv, self.hd)
                xn = x.detach().cpu().numpy().astype(np.float32)
                vn = v.detach().cpu().numpy().astype(np.float32)
                o = rt.prf_run(self.layer, xn, vn, memory=self.memory)
                if self.overlays:
                    o = o + rt.overlay_delta(self.layer, xn)
                out = _out_proj(self.orig)(torch.from_numpy(np.ascontiguousarray(o)).to(ref.dtype))[None]
            meters[(self.module, self.layer)].add(out.detach().cpu().numpy(), ref.detach().cpu().numpy())
            if passthrough:
                return ref_out
            if isinstance(ref_out, tuple):
                return (out,) + tuple(None for _ in ref_out[1:])
            return out

    class Window(torch.nn.Module):
        """The model's own attention, softmax restricted to the first ``sinks`` positions and the
        last ``window`` (the query's own included): StreamingLLM's fixed-size cache."""
        def __init__(self, orig: Any, layer: int) -> None:
            super().__init__()
            self.orig, self.layer = orig, layer

        def forward(self, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            ref_out = self.orig(hidden_states, *args, **kwargs)
            ref = ref_out[0] if isinstance(ref_out, tuple) else ref_out
            mask = kwargs.get("attention_mask")
            if mask is None or mask.dim() != 4:
                raise NotImplementedError("--swap window: the model did not pass a 4-D attention mask to eager attention")
            t = hidden_states.shape[1]
            q = torch.arange(t)[:, None]
            k = torch.arange(t)[None, :]
            keep = (k < sinks) | (q - k < window)
            if mask.dtype == torch.bool:
                new = mask & keep
            else:
                new = mask.masked_fill(~keep, torch.finfo(mask.dtype).min)
            out_all = self.orig(hidden_states, *args, **dict(kwargs, attention_mask=new))
            out = torch.zeros_like(ref) if zero else (out_all[0] if isinstance(out_all, tuple) else out_all)
            meters[("window", self.layer)].add(out.detach().cpu().numpy(), ref.detach().cpu().numpy())
            if passthrough:
                return ref_out
            if isinstance(ref_out, tuple):
                return (out,) + tuple(None for _ in ref_out[1:])
            return out

    class WindowPrf(torch.nn.Module):
        """Exact softmax over the first ``sinks`` positions and the last ``window``, as the model's
        own attention computes it (its q/k norms, rotary and scaling: the family's attention
        function is intercepted), plus the PRF state of every key that left the window, combined
        in one normalisation per head: o = (Z_w o_w + Z_p o_p) / (Z_w + Z_p), Z_p = phi(q)^T s and
        o_p = phi(q)^T R / Z_p from stk_prf_read_parts.  On a layer with its own sliding window
        (Gemma's local layers) no key is carried: the model itself forgets them."""
        def __init__(self, orig: Any, layer: int) -> None:
            super().__init__()
            self.orig, self.layer = orig, layer
            self.h, self.hkv, self.hd = _attn_geometry(orig, cfg)
            self.carry = not getattr(orig, "sliding_window", None)

        def forward(self, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            ref_out = self.orig(hidden_states, *args, **kwargs)
            ref = ref_out[0] if isinstance(ref_out, tuple) else ref_out
            if hidden_states.shape[0] != 1:
                raise NotImplementedError("stk eval runs one context at a time (batch 1)")
            if zero:
                out = torch.zeros_like(ref)
            else:
                mod = sys.modules[type(self.orig).__module__]
                eager = getattr(mod, "eager_attention_forward", None)
                if eager is None or getattr(cfg, "_attn_implementation", "eager") != "eager":
                    raise NotImplementedError(f"--swap window-prf:{self.layer}: {type(self.orig).__name__} does not run "
                                              "through its module's eager_attention_forward")
                x = hidden_states[0].detach().cpu().numpy().astype(np.float32)
                setattr(mod, "eager_attention_forward", functools.partial(self._attend, x))
                try:
                    out_all = self.orig(hidden_states, *args, **kwargs)
                finally:
                    setattr(mod, "eager_attention_forward", eager)
                out = out_all[0] if isinstance(out_all, tuple) else out_all
            meters[("window-prf", self.layer)].add(out.detach().cpu().numpy(), ref.detach().cpu().numpy())
            if passthrough:
                return ref_out
            if isinstance(ref_out, tuple):
                return (out,) + tuple(None for _ in ref_out[1:])
            return out

        def _attend(self, x: np.ndarray, module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                    dropout: float = 0.0, scaling: Optional[float] = None, softcap: Optional[float] = None,
                    **_: Any) -> tuple[Any, None]:
            t, h, hd = query.shape[2], self.h, self.hd
            k = key.repeat_interleave(h // key.shape[1], dim=1)
            v = value.repeat_interleave(h // value.shape[1], dim=1)
            logits = (query[0].double() @ k[0].double().transpose(1, 2)) * (scaling if scaling is not None else hd ** -0.5)
            if softcap is not None:
                logits = torch.tanh(logits / softcap) * softcap
            if attention_mask is not None:
                m4 = attention_mask[0, 0, :, :t]
                logits = logits.masked_fill(~m4, float("-inf")) if m4.dtype == torch.bool else logits + m4.double()
            qp = torch.arange(t)[:, None]
            kp = torch.arange(t)[None, :]
            logits = logits.masked_fill(~((kp < sinks) | (qp - kp < window)), float("-inf"))
            lz = torch.logsumexp(logits, dim=-1)                       # [h, t]
            o = torch.softmax(logits, dim=-1) @ v[0].double()           # [h, t, hd]
            if self.carry:
                vcat = v[0].transpose(0, 1).reshape(t, h * hd).detach().cpu().numpy().astype(np.float32)
                st = rt.prf_state(self.layer)
                lz_n = lz.numpy()
                o_n = o.numpy()
                for q in range(t):
                    s = q - window
                    if s >= sinks:
                        st.add_key(x[s], vcat[s])
                        op, lp = st.read_parts(x[q])
                        w = 1.0 / (1.0 + np.exp(lz_n[:, q] - lp))           # the carried keys' share, per head
                        o_n[:, q] = (1 - w)[:, None] * o_n[:, q] + w[:, None] * op.reshape(h, hd).astype(np.float64)
                o = torch.from_numpy(o_n)
            return o.to(query.dtype)[None].transpose(1, 2).contiguous(), None

    class LowBitFFN(torch.nn.Module):
        def __init__(self, orig: Any, layer: int, module: str, weights: dict[str, np.ndarray]) -> None:
            super().__init__()
            self.orig, self.layer, self.module = orig, layer, module
            self.copy = copy.deepcopy(orig)
            with torch.no_grad():
                for name, w in weights.items():
                    lin = getattr(self.copy, name)
                    if tuple(lin.weight.shape) != w.shape:
                        raise NotImplementedError(f"--swap {module}:{layer}: {name} is {tuple(lin.weight.shape)} in "
                                                  f"transformers and {w.shape} in the .lwt export")
                    lin.weight.copy_(torch.from_numpy(w))

        def forward(self, x: Any) -> Any:
            ref = self.orig(x)
            out = torch.zeros_like(ref) if zero else self.copy(x)
            meters[(self.module, self.layer)].add(out.detach().cpu().numpy(), ref.detach().cpu().numpy())
            return ref if passthrough else out

    def put(blk: Any, name: str, new: Any) -> None:
        undo.append(functools.partial(setattr, blk, name, getattr(blk, name)))
        setattr(blk, name, new)

    for module in (m for m in BEYOND if m.startswith("ffn-")):
        for layer in sorted(plan[module]):
            blk = layers[layer]
            meters.setdefault((module, layer), _Meter())
            weights = {} if lowbit is None else lowbit[module][layer]
            put(blk, "mlp", LowBitFFN(blk.mlp, layer, module, weights))
    for module, cls in (("window", Window), ("window-prf", WindowPrf)):
        for layer in sorted(plan[module]):
            blk = layers[layer]
            name = _attn_name(blk)
            meters.setdefault((module, layer), _Meter())
            put(blk, name, cls(getattr(blk, name), layer))
    attn_layers = plan["prf"] | plan["overlays"] | plan["memory"]
    for layer in sorted(plan["ffn"]):
        blk = layers[layer]
        orig = blk.mlp
        if hasattr(orig, "experts") or hasattr(orig, "gate") and not hasattr(orig, "gate_proj"):
            raise NotImplementedError(f"stk eval --swap ffn:{layer}: layer {layer}'s FFN is a mixture of experts; "
                                      "swapping MoE layers (router + per-expert dictionary units) is not implemented")
        meters.setdefault(("ffn", layer), _Meter())
        put(blk, "mlp", FFN(orig, layer))
    for layer in sorted(attn_layers):
        blk = layers[layer]
        name = _attn_name(blk)
        orig = getattr(blk, name)
        module = "memory" if layer in plan["memory"] else "overlays" if layer in plan["overlays"] else "prf"
        try:
            _out_proj(orig)
            if not any(getattr(orig, n, None) is not None for n in ("v_proj", "c_attn", "query_key_value")):
                raise NotImplementedError(f"{type(orig).__name__} has none of v_proj, c_attn (GPT-2), query_key_value (Falcon)")
        except NotImplementedError as e:
            raise NotImplementedError(f"stk eval --swap {module}:{layer}: {e}") from None
        meters.setdefault((module, layer), _Meter())
        put(blk, name, Attention(orig, layer, module, layer in plan["overlays"], layer in plan["memory"]))
    return undo


# --------------------------------------------------------------------------------------------
# scoring


@dataclass
class _Scores:
    nll_o: list[np.ndarray] = field(default_factory=list)
    nll_s: list[np.ndarray] = field(default_factory=list)
    kl: list[np.ndarray] = field(default_factory=list)
    agree: list[np.ndarray] = field(default_factory=list)

    def add(self, ids: Sequence[int], lo: np.ndarray, ls: np.ndarray, rows: int = 16) -> None:
        """One context's logits [t, vocab] of the original (lo) and the swapped / converted model
        (ls), in float64, ``rows`` positions at a time (a 262,144-token vocabulary is 2 MiB a row).
        With Z = log sum exp of a row and p = softmax(lo): the NLL of token i is Z - x[i], and
        KL(p || softmax(ls)) = sum p (lo - ls) - (Z_o - Z_s), one exp per logit and side."""
        t = len(ids)
        nxt = np.asarray(ids[1:], dtype=np.int64)
        nll_o, nll_s = np.empty(t - 1), np.empty(t - 1)
        kl, agree = np.empty(t), np.empty(t, dtype=bool)
        for a in range(0, t, rows):
            b = min(t, a + rows)
            eo, es = lo[a:b].astype(np.float64), ls[a:b].astype(np.float64)
            d = eo - es
            mo, ms = eo.max(-1, keepdims=True), es.max(-1, keepdims=True)
            eo -= mo
            es -= ms
            np.exp(eo, out=eo)
            np.exp(es, out=es)
            so, ss = eo.sum(-1), es.sum(-1)
            zo, zs = mo[:, 0] + np.log(so), ms[:, 0] + np.log(ss)
            k = min(b, t - 1) - a  # the rows with a next token
            at = np.arange(k)
            nll_o[a:a + k] = zo[:k] - lo[a:a + k][at, nxt[a:a + k]]
            nll_s[a:a + k] = zs[:k] - ls[a:a + k][at, nxt[a:a + k]]
            kl[a:b] = np.maximum(np.einsum("ij,ij->i", eo, d) / so - (zo - zs), 0.0)
            agree[a:b] = lo[a:b].argmax(-1) == ls[a:b].argmax(-1)
        self.nll_o.append(nll_o)
        self.nll_s.append(nll_s)
        self.kl.append(kl)
        self.agree.append(agree)


REFERENCES = ("stk", "transformers")


class Report(dict[str, Any]):
    """The report (``stk eval --json``'s object); ``original`` / ``converted``: what each side
    was, for the text output (a faithful generation's run); ``note``: a line for stderr (swaps
    that ran inside transformers' forward)."""
    original: Optional[str] = None
    converted: Optional[str] = None
    note: Optional[str] = None


# The --swap modules the library's probe points cannot express (they change the attention's own
# mask or the FFN's weights, not a block's output): computed inside transformers' forward.
TORCH_ONLY = ("window", "window-prf", "ffn-bfloat16", "ffn-int8", "ffn-int4", "ffn-ternary")


def torch_only_note(mods: Sequence[str]) -> str:
    return (f"--swap {', '.join(mods)}: computed inside transformers' forward (the library's probe points replace a "
            "block's output, not the attention's mask or the FFN's weights)")


def faithful_runtime(gen: Generation) -> Optional[dict[str, Any]]:
    """A faithful generation's runtime block as ``stk inspect --json`` prints it (sinks, window,
    ffn_dtype); None for the default profile's."""
    m = gen.manifest
    if m.get("profile") != "faithful":
        return None
    rt = m.get("runtime")
    return dict(rt) if isinstance(rt, dict) else None


def evaluate(model: str, gen: Optional[str], texts: Sequence[str], *, ctx: Optional[int] = None, contexts: int = 8,
             swap: str | Sequence[Swap] = "", zero: bool = False, threads: int = 0, sinks: Optional[int] = None,
             window: Optional[int] = None, isolated: bool = False, progress: bool | Callable[[int, int], None] = False,
             reference: Optional[str] = None, policy: Optional[str] = None, recent: Optional[int] = None) -> dict[str, Any]:
    """Run the original and the swapped model on ``texts`` and return the report (the fields of
    ``stk eval --json``, docs/cli.md).  ``ctx`` None: 512, or the model's positions when fewer.
    ``isolated``: each swapped module's error is also measured on the original model's inputs.
    ``sinks`` / ``window``: the window swaps' (default 4 and 60).

    ``gen`` a faithful generation (and no swap): the generation as the library runs it (its own
    sinks and window unless ``sinks`` / ``window`` are given; its retention policy unless ``policy``
    ("window", "tova", "h2o", "tova-head"; ``recent``: h2o's) is) against the original, computed by
    the library (``reference`` None or "stk") or by transformers (``reference="transformers"``)."""
    if reference is not None and reference not in REFERENCES:
        raise ValueError(f"--reference {reference}: one of {', '.join(REFERENCES)}")
    if reference == "transformers":
        missing = need_torch("eval")
        if missing:
            raise ModuleNotFoundError(missing)

    # Every argument is checked before the model loads.
    swaps = parse_swap(swap) if isinstance(swap, str) else list(swap)
    if ctx is not None and ctx < 2:
        raise ValueError(f"--ctx {ctx}: at least 2 tokens (a context scores its next tokens)")
    if contexts < 1:
        raise ValueError(f"--contexts {contexts}: at least 1")
    if not texts:
        raise ValueError("stk eval: give at least one --text FILE")
    if (sinks is not None and sinks < 0) or (window is not None and window < 1):
        raise ValueError(f"--sinks {sinks} --window {window}: sinks >= 0 and window >= 1")
    if policy is not None and policy not in _lib.STK_SEQ_POLICIES:
        raise ValueError(f"--policy {policy}: one of {', '.join(_lib.STK_SEQ_POLICIES)}")
    if recent is not None and (recent < 0 or policy not in (None, "h2o")):
        raise ValueError(f"--recent {recent}: h2o's recent positions (>= 0), with --policy h2o or a generation's h2o")
    for t in texts:
        read_text(t)
    check_model_path(model)
    modules = {s.module for s in swaps}
    needs_gen = bool(modules & set(MODULES + ("window-prf",)))
    if needs_gen and not zero and gen is None:
        raise ValueError("stk eval --swap: give --gen ROOT|DIR, the generation of --model whose arrays replace the modules")
    gen_obj = None
    if gen is not None:
        gen_obj = Generation(gen)
    try:
        faithful = faithful_runtime(gen_obj) if gen_obj is not None else None
        if faithful is not None:
            assert gen_obj is not None
            if swaps or zero or isolated:
                raise ValueError(f"--gen {gen_obj.dir}: a faithful generation is scored as the library runs it, whole: "
                                 "--swap, --zero and --isolated apply to the default profile's arrays")
            return _evaluate_faithful(model, gen_obj, faithful, texts, ctx, contexts, threads, sinks, window,
                                      reference or "stk", progress, policy, recent)
        if policy is not None or recent is not None:
            raise ValueError("--policy / --recent: the retention policy of a faithful generation's runtime (--gen of "
                             "stk convert --profile faithful)")
        torch_only = sorted(modules & set(TORCH_ONLY))
        if reference == "transformers" or torch_only:
            missing = need_torch("eval" + (f" --swap {','.join(torch_only)}" if torch_only and reference != "transformers"
                                           else ""))
            if missing:
                if torch_only and reference != "transformers":
                    missing = f"{torch_only_note(torch_only)}; {missing}"
                raise ModuleNotFoundError(missing)
            r = _evaluate(model, gen_obj, texts, swaps, ctx, contexts, zero, threads, 4 if sinks is None else sinks,
                          60 if window is None else window, isolated, progress, needs_gen)
            if torch_only and reference != "transformers":
                r.note = torch_only_note(torch_only)
            return r
        return _evaluate_library(model, gen_obj, texts, swaps, ctx, contexts, zero, threads, isolated, progress, needs_gen)
    finally:
        if gen_obj is not None:
            gen_obj.close()


def _check_digest(model: str, gen_obj: Generation, faithful: Optional[dict[str, Any]] = None) -> None:
    """--gen must have been converted from --model: the parse_tensors digests are equal (``faithful``:
    the generation's runtime block, the profile its stage ran with)."""
    want = generation_digest(gen_obj)
    have = model_digest(os.fspath(model), None if faithful is None else
                        (str(faithful.get("ffn_dtype", "bf16")), int(faithful["sinks"]), int(faithful["window"])))
    if want != have:
        raise StkError(Status.INVALID_ARGUMENT,
                       f"--gen {gen_obj.dir} was converted from another model: its parse_tensors digest is crc32c "
                       f"{want[0]:08x} sha256_low64 {want[1]:016x}, --model {model} has crc32c {have[0]:08x} "
                       f"sha256_low64 {have[1]:016x}")


def _progress_bar(progress: bool | Callable[[int, int], None], total: int) -> Callable[[int], None]:
    """What each finished context calls (i + 1 of total); .close on the tqdm bar at the end."""
    if progress is True:
        try:
            from tqdm import tqdm
        except ImportError:
            return lambda done: None
        bar = tqdm(total=total, unit="context", desc="stk eval", file=sys.stderr)

        def step(done: int) -> None:
            bar.update(1)
            if done == total:
                bar.close()
        return step
    if callable(progress):
        cb = progress
        return lambda done: cb(done, total)
    return lambda done: None


def _evaluate_faithful(model: str, gen_obj: Generation, runtime: dict[str, Any], texts: Sequence[str],
                       ctx: Optional[int], contexts: int, threads: int, sinks: Optional[int], window: Optional[int],
                       reference: str, progress: bool | Callable[[int, int], None], policy: Optional[str] = None,
                       recent: Optional[int] = None) -> dict[str, Any]:
    """A faithful generation run by the library (stk.lm) against the original (stk.lm at a window of
    the whole context, or transformers); torch is imported only for the latter."""
    from .lm import LanguageModel, Tokenizer

    _check_digest(model, gen_obj, runtime)
    sinks = int(runtime["sinks"]) if sinks is None else sinks
    window = int(runtime["window"]) if window is None else window
    nthreads = threads or os.cpu_count() or 1
    t0 = time.monotonic()
    if reference == "transformers":
        import torch
        if threads:
            torch.set_num_threads(threads)
        m, tok = _load(os.fspath(model))
        ctx = resolve_ctx(ctx, m.config)

        def original(ids: list[int]) -> np.ndarray:
            with torch.no_grad():
                out: np.ndarray = m(torch.tensor([ids]), use_cache=False).logits[0].float().numpy()
                return out
        said = "transformers' float32 eager forward of --model (the cross-check)"
    else:
        tok = Tokenizer(os.fspath(model))
        ctx = ctx_within(ctx, library_positions(os.fspath(model)))
        full = LanguageModel(os.fspath(model)).sequence(sinks=0, window=ctx, threads=nthreads)

        def original(ids: list[int]) -> np.ndarray:
            full.reset()
            return full.feed(ids, all_logits=True)
        said = "stk's forward of --model (float32, a window of the whole context: full attention)"
    ctxs = contexts_of(tok, texts, ctx, contexts)
    policy = str(runtime.get("policy", "window")) if policy is None else policy
    if recent is None:
        recent = int(runtime.get("recent", 0)) if policy == runtime.get("policy") else 0
    if recent and policy != "h2o":
        raise ValueError(f"--recent {recent}: only the h2o policy keeps recent positions (the policy is {policy})")
    conv = LanguageModel(gen_obj.dir).sequence(sinks=sinks, window=window, threads=nthreads, policy=policy, recent=recent)
    scores = _Scores()
    step = _progress_bar(progress, len(ctxs))
    for i, (_, ids) in enumerate(ctxs):
        conv.reset()
        ls = conv.feed(ids, all_logits=True)
        scores.add(ids, original(ids), ls)
        step(i + 1)
    r = _report(model, gen_obj, texts, ctx, len(ctxs), "", False, (sinks, window), scores, False, [], t0)
    r.original = said
    r.converted = (f"the faithful generation as stk runs it: {sinks} sinks + a window of {window}, FFN "
                   f"{runtime.get('ffn_dtype', 'bf16')}, policy {policy}" + (f" (recent {recent})" if recent else ""))
    return r


def _evaluate_library(model: str, gen_obj: Optional[Generation], texts: Sequence[str], swaps: list[Swap],
                      ctx: Optional[int], contexts: int, zero: bool, threads: int, isolated: bool,
                      progress: bool | Callable[[int, int], None], needs_gen: bool) -> Report:
    """The original and the swapped model both computed by the library's forward (stk.lm at full
    attention, one chunk a context), tokenized by the library: numpy only.  A swap overwrites a
    block's output at the forward's probe points (docs/decisions.md "Probes"): ffn the FFN's
    output (from its input), prf / overlays / memory the attention block's output after W_O (from
    the attention's input and its value heads), each as ``_install`` computes it inside
    transformers; --isolated measures them in the original run without overwriting."""
    from .lm import LanguageModel, Tokenizer

    rt: Any = None
    if gen_obj is not None:
        _check_digest(model, gen_obj)
    t0 = time.monotonic()
    tok = Tokenizer(os.fspath(model))
    ctx = ctx_within(ctx, model_positions(os.fspath(model)))
    lm = LanguageModel(os.fspath(model))
    plan = _plan(swaps, lm.n_layers)
    _check_plan(plan)
    swapped_any = any(plan.values())
    if gen_obj is not None and needs_gen and not zero:
        from .runtime import ReferenceRuntime
        rt = ReferenceRuntime(gen_obj)
    ctxs = contexts_of(tok, texts, ctx, contexts)
    seq = lm.sequence(sinks=0, window=ctx, threads=threads or os.cpu_count() or 1, max_batch=ctx)
    attn_mod = {layer: "memory" if layer in plan["memory"] else "overlays" if layer in plan["overlays"] else "prf"
                for layer in plan["prf"] | plan["overlays"] | plan["memory"]}
    ffn_layers = set(plan["ffn"])
    h, hkv = lm.n_heads, lm.n_kv_heads

    def swapper(meters: dict[tuple[str, int], _Meter], passthrough: bool) -> Callable[[Any], None]:
        for layer in sorted(ffn_layers):
            meters.setdefault(("ffn", layer), _Meter())
        for layer, mod in attn_mod.items():
            meters.setdefault((mod, layer), _Meter())
        held: dict[str, np.ndarray] = {}

        def probe(p: Any) -> None:
            li = p.layer
            if p.point == "ffn_in" and li in ffn_layers:
                if p.moe:
                    raise NotImplementedError(f"stk eval --swap ffn:{li}: layer {li}'s FFN is a mixture of experts; "
                                              "swapping MoE layers (router + per-expert dictionary units) is not implemented")
                held["ffn_in"] = np.array(p.data)
            elif p.point == "ffn_out" and li in ffn_layers:
                ref = np.array(p.data)
                y = np.zeros_like(ref) if zero else rt.ffn_apply(li, held["ffn_in"])
                meters[("ffn", li)].add(y, ref)
                if not passthrough:
                    p.data[...] = y
            elif li in attn_mod:
                if p.point == "attn_in":
                    held["x"] = np.array(p.data)
                elif p.point == "v":
                    t = p.data.shape[0]  # each query head's value head (GQA heads repeated)
                    held["v"] = np.repeat(np.asarray(p.data).reshape(t, p.heads, p.head_width), h // p.heads,
                                          axis=1).reshape(t, -1)
                elif p.point == "attn_proj":
                    ref = np.array(p.data)
                    if zero:
                        out = np.zeros_like(ref)
                    else:
                        mod = attn_mod[li]
                        o = rt.prf_run(li, held["x"], held["v"], memory=mod == "memory")
                        if mod == "overlays":
                            o = o + rt.overlay_delta(li, held["x"])
                        out = seq.attn_project(li, o)
                    meters[(attn_mod[li], li)].add(out, ref)
                    if not passthrough:
                        p.data[...] = out
        return probe

    points = ("attn_in", "v", "attn_proj", "ffn_in", "ffn_out")
    meters: dict[tuple[str, int], _Meter] = {}
    meters_iso: dict[tuple[str, int], _Meter] = {}
    scores = _Scores()
    step = _progress_bar(progress, len(ctxs))
    try:
        for i, (_, ids) in enumerate(ctxs):
            # The original forward; with --isolated every planned module is computed beside the
            # block it replaces, on the original's own input, and the original's output goes on.
            seq.set_probe(swapper(meters_iso, True) if isolated and swapped_any else None, points)
            seq.reset()
            lo = seq.feed(ids, all_logits=True)
            if swapped_any:
                seq.set_probe(swapper(meters, False), points)
                seq.reset()
                ls = seq.feed(ids, all_logits=True)
            else:
                ls = lo
            scores.add(ids, lo, ls)
            step(i + 1)
    finally:
        seq.set_probe(None)
    layers, swap_text = _layer_rows(meters, meters_iso, isolated, swaps)
    return _report(model, gen_obj, texts, ctx, len(ctxs), swap_text, zero, None, scores, isolated, layers, t0)


def _layer_rows(meters: dict[tuple[str, int], _Meter], meters_iso: dict[tuple[str, int], _Meter], isolated: bool,
                swaps: Sequence[Swap]) -> tuple[list[dict[str, Any]], str]:
    """The report's ``layers`` rows (by layer, then module in ALL_MODULES' order; ``rel_l2_isolated``
    with --isolated) and its ``swap`` text, for both references."""
    layers = []
    for (mod, layer), meter in sorted(meters.items(), key=lambda kv: (kv[0][1], ALL_MODULES.index(kv[0][0]))):
        e: dict[str, Any] = {"module": mod, "layer": layer, "rel_l2": meter.rel_l2()}
        if isolated:
            e["rel_l2_isolated"] = meters_iso[(mod, layer)].rel_l2()
        layers.append(e)
    swap_text = ",".join(f"{s.module}" + ("" if s.layers is None else ":" + "+".join(map(str, s.layers))) for s in swaps)
    return layers, swap_text


def _report(model: str, gen_obj: Optional[Generation], texts: Sequence[str], ctx: int, n_contexts: int, swap: str,
            zero: bool, sinks_window: Optional[tuple[int, int]], scores: _Scores, isolated: bool,
            layers: list[dict[str, Any]], t0: float) -> Report:
    """The report's keys, in their order, for every kind of run."""
    nll_o = np.concatenate(scores.nll_o)
    nll_s = np.concatenate(scores.nll_s)
    kl = np.concatenate(scores.kl)
    agree = np.concatenate(scores.agree)
    return Report({
        "command": "eval",
        "model": os.fspath(model),
        "gen": gen_obj.dir if gen_obj is not None else None,
        "texts": [os.fspath(t) for t in texts],
        "ctx": ctx,
        "contexts": n_contexts,
        "swap": swap,
        "zero": zero,
        **({"sinks": sinks_window[0], "window": sinks_window[1]} if sinks_window is not None else {}),
        "perplexity_original": float(math.exp(nll_o.mean())),
        "perplexity_swapped": float(math.exp(nll_s.mean())),
        "kl_mean": float(kl.mean()),
        "kl_p99": float(np.percentile(kl, 99)),
        "top1_agreement": float(agree.mean()),
        "tokens_scored": int(nll_o.size),
        "positions_compared": int(kl.size),
        "positions": (f"perplexity: the next token at positions 0..{ctx - 2} of each context ({ctx - 1} per context); "
                      f"KL and top-1: every position 0..{ctx - 1} ({ctx} per context); each context starts at position 0"),
        "isolated": isolated,
        "layer_errors": LAYER_ERRORS_ISOLATED if isolated else LAYER_ERRORS,
        "layers": layers,
        "seconds": round(time.monotonic() - t0, 1),
    })


def _evaluate(model: str, gen_obj: Optional[Generation], texts: Sequence[str], swaps: list[Swap], ctx: Optional[int],
              contexts: int, zero: bool, threads: int, sinks: int, window: int, isolated: bool,
              progress: bool | Callable[[int, int], None], needs_gen: bool) -> Report:
    import torch

    rt = None
    if gen_obj is not None:
        _check_digest(model, gen_obj)
    if threads:
        torch.set_num_threads(threads)
    t0 = time.monotonic()
    m, tok = _load(os.fspath(model))
    ctx = resolve_ctx(ctx, m.config)
    plan = _plan(swaps, len(_decoder_layers(m)))
    _check_plan(plan)
    swapped_any = any(plan.values())
    lowbit = None
    if not zero and any(plan[mod] for mod in BEYOND if mod.startswith("ffn-")):
        lowbit = {mod: _lowbit_ffn_weights(model, mod[len("ffn-"):], plan[mod]) for mod in BEYOND if mod.startswith("ffn-") and plan[mod]}
    if gen_obj is not None and needs_gen and not zero:
        from .runtime import ReferenceRuntime
        rt = ReferenceRuntime(gen_obj)
    ctxs = contexts_of(tok, texts, ctx, contexts)
    meters: dict[tuple[str, int], _Meter] = {}
    meters_iso: dict[tuple[str, int], _Meter] = {}
    scores = _Scores()
    step = _progress_bar(progress, len(ctxs))
    with torch.no_grad():
        for i, (_, ids) in enumerate(ctxs):
            x = torch.tensor([ids])
            # The original forward; with --isolated every planned module is computed beside the
            # module it replaces, on that module's own (original) input, and the original's
            # output goes on.
            undo = _install(m, rt, plan, zero, meters_iso, sinks, window, lowbit, passthrough=True) \
                if isolated and swapped_any else []
            try:
                lo = m(x, use_cache=False).logits[0]
            finally:
                for u in reversed(undo):
                    u()
            undo = _install(m, rt, plan, zero, meters, sinks, window, lowbit) if swapped_any else []
            try:
                ls = m(x, use_cache=False).logits[0]
            finally:
                for u in reversed(undo):
                    u()
            scores.add(ids, lo.float().numpy(), ls.float().numpy())
            step(i + 1)
    layers, swap_text = _layer_rows(meters, meters_iso, isolated, swaps)
    return _report(model, gen_obj, texts, ctx, len(ctxs), swap_text, zero,
                   (sinks, window) if plan["window"] or plan["window-prf"] else None, scores, isolated, layers, t0)


LAYER_ERRORS = ("rel_l2: the relative L2 of each swapped module's output against the output of the module it "
                "replaced, inside the swapped run (its input already changed by the swapped modules before it)")
LAYER_ERRORS_ISOLATED = (LAYER_ERRORS + "; rel_l2_isolated: the same on the original model's inputs (the module's "
                         "own error, each module alone)")


# --------------------------------------------------------------------------------------------
# the command


def _format(r: dict[str, Any]) -> str:
    original, converted = getattr(r, "original", None), getattr(r, "converted", None)
    other = "swapped" if converted is None else "converted"
    lines = [
        f"stk eval: {r['model']}" + (f" against {r['gen']}" if r["gen"] else ""),
        f"  texts     {', '.join(r['texts'])}: {r['contexts']} contexts of {r['ctx']} tokens",
    ]
    if converted is None:
        lines.append(f"  swap      {r['swap'] or '(nothing)'}{' -> zero (module deleted)' if r['zero'] else ''}")
    else:
        lines.append(f"  original  {original}")
        lines.append(f"  converted {converted}")
    lines += [
        f"  scored    {r['positions']}",
        f"  perplexity  original {r['perplexity_original']:.4f}   {other} {r['perplexity_swapped']:.4f}"
        f"   ({r['tokens_scored']} tokens)",
        f"  KL(original || {other})  mean {r['kl_mean']:.4g} nats   p99 {r['kl_p99']:.4g} nats   ({r['positions_compared']} positions)",
        f"  top-1 agreement  {r['top1_agreement']:.4f}",
    ]
    if r["layers"]:
        if r.get("isolated"):
            lines.append("  per module, relative L2 of its output against the output it replaced:")
            lines.append("    swapped run: on the swapped run's inputs; isolated: on the original model's inputs")
            lines.append(f"    {'module':<12} {'layer':>5}  {'swapped run':>11}  {'isolated':>9}")
            for e in r["layers"]:
                lines.append(f"    {e['module']:<12} {e['layer']:>5}  {e['rel_l2']:>11.4f}  {e['rel_l2_isolated']:>9.4f}")
        else:
            lines.append("  per module (relative L2 of its output against the output it replaced, on the swapped run's inputs):")
            for e in r["layers"]:
                lines.append(f"    {e['module']:<12} layer {e['layer']:>3}  {e['rel_l2']:.4f}")
    lines.append(f"  {r['seconds']} s")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="stk eval", formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "What a converted model keeps: the original model (stk's own forward, float32, full attention) against the "
        "same forward with modules computed from a generation's arrays by stk's reference runtime; numpy only. "
        "--reference transformers: both from transformers' forward (needs pip install 'stk[eval]'), as are the "
        "window, window-prf and ffn-* swaps. A faithful generation (stk convert --profile faithful; --gen alone, "
        "no --swap) is scored as the library runs it against the original run by the library at full attention."),
        epilog="--swap modules:\n" + swap_modules_help())
    p.add_argument("--model", required=True, help="the model: a HF directory or a .gguf file")
    p.add_argument("--gen", help="a generations root or generation directory converted from --model")
    p.add_argument("--text", action="append", required=True, metavar="FILE", help="a UTF-8 text (repeatable)")
    p.add_argument("--ctx", type=int, default=None, help=f"tokens per context (default {DEFAULT_CTX}, or the model's "
                   "positions when it has fewer)")
    p.add_argument("--contexts", type=int, default=8, help="at most this many contexts per --text file (default 8)")
    p.add_argument("--swap", default="", help=f"modules to swap, comma-separated: {swap_modules_text()} (listed "
                   "below); each optionally :LAYERS (N, A-B, N+M), e.g. ffn:15,prf:0-29 (default: nothing)")
    p.add_argument("--sinks", type=int, default=None, help="window swaps: the first S positions every query sees "
                   "(default 4); a faithful --gen: its runtime block's")
    p.add_argument("--window", type=int, default=None, help="window swaps: the last W positions every query sees, its "
                   "own included (default 60); a faithful --gen: its runtime block's")
    p.add_argument("--policy", choices=tuple(_lib.STK_SEQ_POLICIES), default=None, help="a faithful --gen: the "
                   "retention policy its sequences keep (default: its runtime block's)")
    p.add_argument("--recent", type=int, default=None, help="with --policy h2o: the most recent positions never "
                   "evicted (default window / 2; a generation's h2o: its runtime block's)")
    p.add_argument("--reference", choices=REFERENCES, default=None, help="what computes the models (a faithful "
                   "--gen: the original), stk's own forward at full attention (default) or transformers' (needs torch)")
    p.add_argument("--zero", action="store_true", help="replace the --swap modules by zero (the 'module deleted' baseline)")
    p.add_argument("--isolated", action="store_true", help="also measure each swapped module's error on the original "
                   "model's inputs (rel_l2_isolated), beside the swapped run's (rel_l2)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's); stk's forward: threads "
                   "(default: every core)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    try:
        r = evaluate(a.model, a.gen, a.text, ctx=a.ctx, contexts=a.contexts, swap=a.swap, zero=a.zero,
                     threads=a.threads, sinks=a.sinks, window=a.window, isolated=a.isolated, progress=True,
                     reference=a.reference, policy=a.policy, recent=a.recent)
        note = getattr(r, "note", None)
        if note:
            print(f"stk eval: {note}", file=sys.stderr)
    except ModuleNotFoundError as e:  # need_torch's sentence: a path that needs torch, without it
        print(f"stk eval: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"stk eval: {e}", file=sys.stderr)
        return 2
    except NotImplementedError as e:
        print(f"stk eval: not implemented: {e}", file=sys.stderr)
        return 3
    except StkError as e:
        print(f"stk eval: {e}", file=sys.stderr)
        return 1
    print(json.dumps(r, indent=2) if a.json else _format(r))
    return 0
