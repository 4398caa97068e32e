"""The reference runtime of a generation's arrays (docs/format.md "Reference runtime").

Per token, what Sera computes from each module of a published generation, through libstk's
``stk_prf_*``, ``stk_overlay_*``, ``stk_ffn_*`` and ``stk_memory_*`` (experimental tier of
stk.h).  Every method takes and returns float32 numpy arrays, one C call per layer and
sequence::

    import stk
    from stk.runtime import ReferenceRuntime
    with stk.Generation(root) as gen:
        rt = ReferenceRuntime(gen)
        o = rt.prf_run(layer, X, V)        # [T, d_v]: token t attends to keys 0..t (itself included)
        dc = rt.overlay_delta(layer, X)    # [T, d_v]: deltaC(q), value space
        y = rt.ffn_apply(unit, X)          # [T, d_model]: the linear dictionary, no bias
        m = rt.memory_run(u)               # [T]: the positional memory bank's output

X is the hidden state the layer's attention reads (after its input norm), V the concatenated
head values (kv heads repeated to n_heads).  The state and scratch buffers are numpy arrays
owned here (sized by ``stk_refrun_get_info``); the C steps allocate nothing and release the GIL.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Optional, Union

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from .generation import Generation

from . import _lib
from ._lib import lib as _c
from .errors import StkError

__all__ = ["ReferenceRuntime", "PrfState", "MemoryState"]


def _raise(status: int) -> None:
    if status != 0:
        raise StkError(status, (_c.stk_last_error() or b"").decode("utf-8", "replace"))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _f32(a: ArrayLike, name: str, width: int) -> np.ndarray:
    """A C-contiguous float32 [T, width] array (a [width] vector becomes [1, width])."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name}: shape {a.shape}, expected [T, {width}]")
    return a


class PrfState:
    """One layer's PRF attention state (R, s) in a numpy buffer: ``add_key``, ``read``, ``run``."""

    def __init__(self, rt: "ReferenceRuntime", layer: int, memory: bool = False) -> None:
        self._rt = rt
        self.layer = layer
        self.memory = memory
        info = rt.info
        n = info.prf_state_bytes_memory if memory else info.prf_state_bytes
        self._state = np.zeros(max(n, 8) // 8, dtype=np.float64)
        self._bytes = n
        self.reset()

    def reset(self) -> None:
        """Back to R_init / s_init (no key)."""
        rt = self._rt
        _raise(_c.stk_prf_reset(rt._h, self.layer, _lib.STK_PRF_MEMORY if self.memory else 0, _ptr(self._state),
                                self._bytes))

    def add_key(self, x_key: ArrayLike, v: ArrayLike) -> None:
        rt = self._rt
        x = _f32(x_key, "x_key", rt.d_model)
        vv = _f32(v, "v", rt.d_v)
        _raise(_c.stk_prf_add_key(rt._h, self.layer, _ptr(self._state), self._bytes, _ptr(x), _ptr(vv),
                                  _ptr(rt._scratch), rt.info.scratch_bytes))

    def read(self, x_query: ArrayLike) -> np.ndarray:
        """[d_v] = phi_w(q)^T R / max(phi_w(q)^T s, beta_floor)."""
        rt = self._rt
        x = _f32(x_query, "x_query", rt.d_model)
        out = np.empty(rt.d_v, dtype=np.float32)
        _raise(_c.stk_prf_read(rt._h, self.layer, _ptr(self._state), self._bytes, _ptr(x), _ptr(out),
                               _ptr(rt._scratch), rt.info.scratch_bytes))
        return out

    def read_parts(self, x_query: ArrayLike) -> tuple[np.ndarray, float]:
        """([d_v] num / den with no beta_floor, log den unshifted): what a caller needs to combine
        this state with other attention (0 and -inf for an empty state)."""
        rt = self._rt
        x = _f32(x_query, "x_query", rt.d_model)
        out = np.empty(rt.d_v, dtype=np.float32)
        log_den = ctypes.c_double()
        _raise(_c.stk_prf_read_parts(rt._h, self.layer, _ptr(self._state), self._bytes, _ptr(x), _ptr(out),
                                     ctypes.byref(log_den), _ptr(rt._scratch), rt.info.scratch_bytes))
        return out, log_den.value

    def run(self, X: ArrayLike, V: ArrayLike) -> np.ndarray:
        """For each t: add key (X[t], V[t]), then read X[t]: [T, d_v], continuing this state."""
        rt = self._rt
        x = _f32(X, "X", rt.d_model)
        v = _f32(V, "V", rt.d_v)
        if x.shape[0] != v.shape[0]:
            raise ValueError(f"X has {x.shape[0]} rows, V {v.shape[0]}")
        out = np.empty((x.shape[0], rt.d_v), dtype=np.float32)
        _raise(_c.stk_prf_run(rt._h, self.layer, _ptr(self._state), self._bytes, x.shape[0], _ptr(x), _ptr(v),
                              _ptr(out), _ptr(rt._scratch), rt.info.scratch_bytes))
        return out


class MemoryState:
    """The positional memory bank's registers: ``step(u) -> y`` (f32), ``run(u) -> y``."""

    def __init__(self, rt: "ReferenceRuntime") -> None:
        self._rt = rt
        self._bytes = rt.info.memory_state_bytes
        self._state = np.zeros(max(self._bytes, 8) // 8, dtype=np.float64)
        self.reset()

    def reset(self) -> None:
        _raise(_c.stk_memory_reset(self._rt._h, _ptr(self._state), self._bytes))

    def step(self, u: float) -> float:
        y = ctypes.c_float()
        _raise(_c.stk_memory_step(self._rt._h, _ptr(self._state), self._bytes, float(u), ctypes.byref(y)))
        return y.value

    def run(self, u: ArrayLike) -> np.ndarray:
        u = np.asarray(u, dtype=np.float32).reshape(-1)
        return np.array([self.step(x) for x in u], dtype=np.float32)


class ReferenceRuntime:
    """The reference runtime over one open generation (a :class:`stk.Generation`, or a path that
    is opened here).  Attributes: ``info`` (the C struct), and ``n_layers``, ``d_model``, ``d_v``,
    ``r``, ``r_v``, ``n_ffn_units``, ``memory_sections``, ``tau``, ``beta_floor``,
    ``whitening_eps`` and ``has_prf``, ``has_overlays``, ``has_linear``, ``has_linear_bias``,
    ``has_memory``.  One scratch buffer per object: use one object per thread."""

    # set from the RefrunInfo struct in __init__ (one attribute per field)
    n_layers: int
    d_model: int
    d_v: int
    r: int
    r_v: int
    n_ffn_units: int
    memory_sections: int
    tau: float
    beta_floor: float
    whitening_eps: float
    has_prf: bool
    has_overlays: bool
    has_linear: bool
    has_linear_bias: bool
    has_memory: bool

    def __init__(self, gen: Union["os.PathLike[str]", str, "Generation"]) -> None:
        if isinstance(gen, (str, os.PathLike)):
            from .generation import Generation
            gen = Generation(gen)
        self.gen: Generation = gen  # keeps the mapping open
        info = _lib.RefrunInfo()
        info.struct_size = ctypes.sizeof(info)
        _raise(_c.stk_refrun_get_info(self._h, ctypes.byref(info)))
        self.info = info
        for name, *_ in _lib.RefrunInfo._fields_[1:]:
            v = getattr(info, name)
            setattr(self, name, bool(v) if name.startswith("has_") else v)
        self._scratch = np.zeros(max(info.scratch_bytes, 8) // 8, dtype=np.float64)
        self._index: Optional[np.ndarray] = None

    @property
    def _h(self) -> ctypes.c_void_p:
        return self.gen._h

    # -- PRF attention ---------------------------------------------------------------------------
    def prf_state(self, layer: int, memory: bool = False) -> PrfState:
        """A fresh state of `layer` (memory=True: R and s filtered by the positional memory bank)."""
        return PrfState(self, layer, memory)

    def prf_run(self, layer: int, X: ArrayLike, V: ArrayLike, memory: bool = False) -> np.ndarray:
        """Causal PRF attention over one sequence from an empty state: [T, d_v]."""
        return self.prf_state(layer, memory).run(X, V)

    # -- overlays --------------------------------------------------------------------------------
    def overlay_delta(self, layer: int, Xq: ArrayLike) -> np.ndarray:
        """deltaC(q) = U ((phi_w(q)^T H) Z) for each row of Xq: [T, d_v] (value space)."""
        x = _f32(Xq, "Xq", self.d_model)
        out = np.empty((x.shape[0], self.d_v), dtype=np.float32)
        _raise(_c.stk_overlay_run(self._h, layer, x.shape[0], _ptr(x), _ptr(out), _ptr(self._scratch),
                                  self.info.scratch_bytes))
        return out

    # -- FFN through the linear dictionary -------------------------------------------------------
    def ffn_index(self) -> np.ndarray:
        """The dictionary's index (built on first use, ``info.ffn_index_bytes`` bytes)."""
        if self._index is None:
            n = self.info.ffn_index_bytes
            idx = np.zeros(max(n, 8) // 8, dtype=np.uint64)
            _raise(_c.stk_ffn_index_build(self._h, _ptr(idx), n))
            self._index = idx
        return self._index

    def ffn_apply(self, unit: int, X: ArrayLike) -> np.ndarray:
        """y = sum_j |x_j| M^{sign x_j}[:, j] of FFN unit `unit` for each row of X: [T, d_model].
        linear_bias is not added (see :meth:`ffn_bias`)."""
        idx = self.ffn_index()
        x = _f32(X, "X", self.d_model)
        y = np.empty_like(x)
        _raise(_c.stk_ffn_apply_batch(self._h, _ptr(idx), self.info.ffn_index_bytes, unit, x.shape[0], _ptr(x),
                                      _ptr(y)))
        return y

    def ffn_bias(self) -> Optional[np.ndarray]:
        """linear_bias.bin: the sum over all dense layers of W2 relu(b1) + b2 (None without FFN biases)."""
        if not self.has_linear_bias:
            return None
        out = np.empty(self.d_model, dtype=np.float32)
        _raise(_c.stk_ffn_bias(self._h, _ptr(out), self.d_model))
        return out

    # -- positional memory -----------------------------------------------------------------------
    def memory_state(self) -> MemoryState:
        return MemoryState(self)

    def memory_run(self, u: ArrayLike) -> np.ndarray:
        """The bank's output for the input sequence u from the initial registers: [T] float32."""
        return self.memory_state().run(u)
