"""The language-model runtime (stk.h's ``stk_lm_*`` / ``stk_seq_*``; docs/decisions.md "The LM
runtime"): a Transformer's forward over a fixed state of ``sinks`` first positions plus a ring of
the ``window`` most recent, per layer.  With sinks + window >= the context it is the exact model::

    from stk.lm import LanguageModel
    lm = LanguageModel("path/to/model-or.gguf")          # weights kept as f32 (bf16=True: half)
    seq = lm.sequence(sinks=4, window=252, threads=2)   # policy="tova" / "h2o" / "tova-head": which stay
    logits = seq.feed(token_ids)                        # [vocab]: the last token's
    every = seq.feed(more_ids, all_logits=True)         # [n, vocab]
    seq.reset()
    tok = Tokenizer("path/to/model-or.gguf")            # the model's own encoder (stk_tokenizer_*)
    ids = tok.encode("text")                            # the post-processor's special ids added
    seq.set_probe(fn, points=("attn_out", "ffn_out"))   # fn(p: Probe) at those points of every layer

A probe (stk.h's ``stk_seq_set_probe``; docs/decisions.md "Probes") sees the activations of every
layer for every chunk the forward computes, as a numpy view of the sequence's own buffer; at the
writable points (attn_out, attn_proj, ffn_out) what it leaves in ``p.data`` goes on.

A family the runtime does not compute raises StkError (STK_E_NOT_IMPLEMENTED) naming it.  The
sequence's arena is a numpy buffer owned by the Sequence; the C calls allocate nothing and
release the GIL.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Callable, Iterable, Optional, Union

import numpy as np
from numpy.typing import ArrayLike

from . import _lib
from ._lib import lib as _c
from .errors import StkError

__all__ = ["LanguageModel", "Probe", "Sequence", "Tokenizer", "POINTS"]

POINTS = _lib.STK_PROBE_POINTS  # the probe points, in the forward's order within a layer


def _raise(status: int) -> None:
    if status != 0:
        raise StkError(status, (_c.stk_last_error() or b"").decode("utf-8", "replace"))


class _Handle:
    """A C handle closed once: by close(), or when the object goes (also one whose constructor
    raised before it had a handle)."""
    _h = ctypes.c_void_p()  # falsy: no handle

    def _close_handle(self, h: ctypes.c_void_p) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self._h:
            self._close_handle(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self) -> None:
        self.close()


class LanguageModel(_Handle):
    """Weights + config, read-only: any number of sequences share them.  Attributes: ``vocab_size``,
    ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``head_dim``, ``model_type``; ``runtime``:
    a faithful generation's runtime block (``{"sinks", "window", "policy", "recent"}``, the
    defaults of ``sequence()``), None for a model read from its checkpoint; ``ffn_dtype``: what the
    FFN matrices hold ("f32", "bf16", "int8", "q4_0", "q8_0")."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], bf16: bool = False, ffn: str = "") -> None:
        """``ffn``: "q4_0" / "q8_0" keeps the FFN matrices block-scaled (quantised at open)."""
        self._h = ctypes.c_void_p()
        flags = _lib.STK_LM_WEIGHTS_BF16 if bf16 else _lib.STK_LM_WEIGHTS_F32
        if ffn:
            if ffn not in _lib.STK_LM_WEIGHTS_FFN:
                raise ValueError(f"ffn={ffn!r}: one of {sorted(_lib.STK_LM_WEIGHTS_FFN)}")
            flags |= _lib.STK_LM_WEIGHTS_FFN[ffn]
        _raise(_c.stk_lm_open(os.fsencode(path), flags, ctypes.byref(self._h)))
        info = _lib.LmInfo()
        info.struct_size = ctypes.sizeof(info)
        _raise(_c.stk_lm_get_info(self._h, ctypes.byref(info)))
        self.vocab_size, self.n_layers, self.d_model = info.vocab_size, info.n_layers, info.d_model
        self.n_heads, self.n_kv_heads, self.head_dim = info.n_heads, info.n_kv_heads, info.head_dim
        self.model_type = info.model_type.decode()
        names = {v: k for k, v in _lib.STK_SEQ_POLICIES.items()}
        self.runtime: Optional[dict[str, Any]] = (
            {"sinks": info.sinks, "window": info.window, "policy": names.get(info.policy, str(info.policy)),
             "recent": info.recent} if info.generation else None)
        self.ffn_dtype = {2: "f32", 9: "bf16", 5: "int8", 10: "q4_0", 11: "q8_0"}.get(info.ffn_dtype, str(info.ffn_dtype))

    def sequence(self, sinks: Optional[int] = None, window: Optional[int] = None, threads: int = 1, max_batch: int = 64,
                 policy: Optional[str] = None, recent: int = 0) -> "Sequence":
        """``policy``: which ``window`` non-sink positions the state keeps ("window", "tova", "h2o",
        "tova-head"; docs/decisions.md "Retention policies"); ``recent``: h2o's protected newest.
        None: a faithful generation's runtime block's (its recent too when ``recent`` is 0), else
        4 sinks, a window of 252 and the window policy."""
        rt = self.runtime
        return Sequence(self, (rt["sinks"] if rt else 4) if sinks is None else sinks,
                        (rt["window"] if rt else 252) if window is None else window, threads, max_batch,
                        "default" if policy is None else policy, recent)

    def _close_handle(self, h: ctypes.c_void_p) -> None:
        _c.stk_lm_close(h)


class Sequence(_Handle):
    """One sequence's state (the KV ring) in an arena owned here."""

    def __init__(self, lm: LanguageModel, sinks: int, window: int, threads: int, max_batch: int, policy: str = "window",
                 recent: int = 0) -> None:
        self.lm = lm  # keeps the weights alive
        if policy != "default" and policy not in _lib.STK_SEQ_POLICIES:
            raise ValueError(f"policy={policy!r}: one of {sorted(_lib.STK_SEQ_POLICIES)}")
        code = _lib.STK_SEQ_POLICY_DEFAULT if policy == "default" else _lib.STK_SEQ_POLICIES[policy]
        p = _lib.SeqParams(ctypes.sizeof(_lib.SeqParams), sinks, window, threads, max_batch, code, recent)
        n = ctypes.c_size_t()
        _raise(_c.stk_seq_arena_size(lm._h, ctypes.byref(p), ctypes.byref(n)))
        self._arena = np.zeros(max(n.value, 8) // 8 + 1, dtype=np.float64)
        self._h = ctypes.c_void_p()
        self._probe_cb: Any = None  # the ctypes callback (kept alive while the C side holds it)
        self._probe_error: list[BaseException] = []  # what the probe raised during the last feed
        _raise(_c.stk_seq_open(lm._h, ctypes.byref(p), ctypes.c_void_p(self._arena.ctypes.data), self._arena.nbytes,
                               ctypes.byref(self._h)))

    def feed(self, tokens: ArrayLike, all_logits: bool = False) -> np.ndarray:
        """Feed token ids at the next positions: the last one's logits [vocab], or every one's [n, vocab]."""
        t = np.ascontiguousarray(tokens, dtype=np.int32).reshape(-1)
        out = np.zeros((len(t), self.lm.vocab_size), np.float32) if all_logits else None
        st = _c.stk_seq_feed(self._h, ctypes.c_void_p(t.ctypes.data), len(t),
                             ctypes.c_void_p(out.ctypes.data) if out is not None else None)
        if self._probe_error:
            err = self._probe_error.pop()
            self._probe_error.clear()
            raise err
        _raise(st)
        return out if out is not None else self.logits()

    def logits(self) -> np.ndarray:
        ptr, voc, pos = ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t(), ctypes.c_uint64()
        _raise(_c.stk_seq_logits(self._h, ctypes.byref(ptr), ctypes.byref(voc), ctypes.byref(pos)))
        return np.ctypeslib.as_array(ptr, (voc.value,)).copy()

    @property
    def position(self) -> int:
        pos = ctypes.c_uint64()
        _raise(_c.stk_seq_logits(self._h, None, None, ctypes.byref(pos)))
        return pos.value

    def reset(self) -> None:
        _raise(_c.stk_seq_reset(self._h))

    def kept(self, layer: int, kv_head: int = 0) -> list[int]:
        """The positions layer ``layer``'s state holds now (``kv_head``'s under "tova-head"), ascending."""
        n = ctypes.c_size_t()
        _raise(_c.stk_seq_kept(self._h, layer, kv_head, None, 0, ctypes.byref(n)))
        buf = (ctypes.c_uint64 * max(n.value, 1))()
        _raise(_c.stk_seq_kept(self._h, layer, kv_head, buf, n.value, ctypes.byref(n)))
        return list(buf[:n.value])

    def set_probe(self, fn: "Optional[Callable[[Probe], None]]", points: "Iterable[str]" = POINTS) -> None:
        """Call ``fn(p)`` at ``points`` (names of POINTS) of every layer for every chunk fed; None:
        no probe.  An exception ``fn`` raises stops the feed and is raised again by ``feed``."""
        mask = 0
        for name in points:
            if name not in POINTS:
                raise ValueError(f"probe point {name!r}: one of {', '.join(POINTS)}")
            mask |= 1 << POINTS.index(name)
        self._probe_error.clear()
        if fn is None:
            self._probe_cb = None
            _raise(_c.stk_seq_set_probe(self._h, 0, _lib.PROBE_FN(), None))
            return
        user_fn, errors = fn, self._probe_error  # not self: no cycle through the callback

        def trampoline(_user: int, d: "ctypes._Pointer[_lib.ProbeData]") -> int:
            try:
                user_fn(Probe(d.contents))
                return 0
            except BaseException as e:  # noqa: BLE001 - handed back to feed()
                errors.append(e)
                return 1
        self._probe_cb = _lib.PROBE_FN(trampoline)  # kept alive as long as the sequence may call it
        _raise(_c.stk_seq_set_probe(self._h, mask, self._probe_cb, None))

    def attn_project(self, layer: int, x: ArrayLike) -> np.ndarray:
        """W_O x (+ bias) of ``layer`` for x [n, heads * head width] (attn_out's width): [n, d_model]."""
        a = np.ascontiguousarray(x, dtype=np.float32)
        a = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
        y = np.empty((a.shape[0], self.lm.d_model), np.float32)
        _raise(_c.stk_seq_attn_project(self._h, layer, ctypes.c_void_p(a.ctypes.data), a.shape[0], ctypes.c_void_p(y.ctypes.data)))
        return y

    def _close_handle(self, h: ctypes.c_void_p) -> None:
        _c.stk_seq_close(h)


class Probe:
    """One probe call: ``layer``, ``point`` (a name of POINTS), ``position`` (of the chunk's first
    token), ``data`` ([n_tokens, width] float32, a view of the forward's buffer valid during the
    call; writable at attn_out, attn_proj and ffn_out), ``heads`` / ``head_width``, ``rot_offset``
    / ``rot_pairs`` (q and k: the part of each head RoPE rotates), and the layer's ``moe``,
    ``sliding`` and ``interleaved`` (RoPE pairs (2f, 2f+1)) facts."""
    __slots__ = ("layer", "point", "position", "data", "writable", "heads", "head_width", "rot_offset", "rot_pairs",
                 "moe", "sliding", "interleaved")

    def __init__(self, d: "_lib.ProbeData") -> None:
        self.layer, self.point, self.position = d.layer, POINTS[d.point], d.position
        self.data = np.ctypeslib.as_array(d.data, (d.n_tokens, d.width))
        self.writable = bool(d.writable)
        if not self.writable:
            self.data.flags.writeable = False
        self.heads, self.head_width, self.rot_offset, self.rot_pairs = d.heads, d.head_width, d.rot_offset, d.rot_pairs
        self.moe = bool(d.flags & _lib.STK_PROBE_LAYER_MOE)
        self.sliding = bool(d.flags & _lib.STK_PROBE_LAYER_SLIDING)
        self.interleaved = bool(d.flags & _lib.STK_PROBE_ROPE_INTERLEAVED)


class Tokenizer(_Handle):
    """A model's own encoder (stk.h's ``stk_tokenizer_*``, BPE or SentencePiece: the ids HF
    tokenizers give) read from a model directory or a GGUF; no transformers needed."""

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._h = ctypes.c_void_p()
        self._path = os.fsencode(path)  # kept alive: the params point at it during open
        p = _lib.TokenizerParams(ctypes.sizeof(_lib.TokenizerParams), self._path, _lib.STK_TOKENIZE_BPE, 0)
        _raise(_c.stk_tokenizer_open(ctypes.byref(p), ctypes.byref(self._h)))

    def encode(self, text: str, special: bool = True) -> list[int]:
        """The ids of ``text``; ``special``: with the post-processor's special ids (Llama's <s>), as
        a HF tokenizer's ``tokenizer(text)`` gives them."""
        data = text.encode("utf-8")
        ids, n = ctypes.POINTER(ctypes.c_uint32)(), ctypes.c_size_t()
        _raise(_c.stk_tokenizer_encode(self._h, data, len(data), _lib.STK_TOKENIZE_ADD_SPECIAL if special else 0,
                                       ctypes.byref(ids), ctypes.byref(n)))
        return np.ctypeslib.as_array(ids, (n.value,)).tolist() if n.value else []

    def __call__(self, text: str) -> dict[str, list[int]]:
        """``{"input_ids": ids}``, as a HF tokenizer's call (stk.evaluation.contexts_of takes either)."""
        return {"input_ids": self.encode(text)}

    def _close_handle(self, h: ctypes.c_void_p) -> None:
        _c.stk_tokenizer_close(h)
