"""``.lwt`` weight files: ``export_lwt`` writes one from a checkpoint, ``read_lwt`` maps one."""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import numpy as np

from . import _lib
from ._lib import lib as _c
from .convert import _model_dir
from .errors import PathLike, Status, StkError, _p, _raise
from .generation import _Mapping, _view


LWT_DTYPES = {"float32": 1, "float16": 2, "bfloat16": 3, "int8": 4, "uint8": 5, "int4": 6, "uint4": 7, "fp4": 8,
              "int2": 9, "uint2": 10, "ternary": 11, "binary": 12, "q4_0": 13, "q8_0": 14}
_LWT_NAMES = {v: k for k, v in LWT_DTYPES.items()}
# Element types of the stored bytes for the types numpy has (bfloat16: raw uint16 bits); the packed
# low-bit and block-scaled (q4_0, q8_0: ggml's blocks) types are their bytes (uint8), unpacked by
# read_lwt(dequantize=True).
_LWT_NUMPY: dict[int, np.dtype[Any]] = {1: np.dtype("<f4"), 2: np.dtype("<f2"), 3: np.dtype("<u2"), 4: np.dtype("i1"), 5: np.dtype("u1")}


def export_lwt(src: PathLike, out: PathLike, dtype: str = "float32", *, threads: Optional[int] = None) -> dict[str, Any]:
    """``stk export --in SRC --out OUT --dtype DTYPE``: the checkpoint's weights as one ``.lwt`` file
    (matrices in ``dtype``, one of LWT_DTYPES; vectors float32).  Returns the report: tensors,
    parameters, file_bytes, data_crc32, tied_lm_head."""
    if dtype not in LWT_DTYPES:
        raise StkError(Status.INVALID_ARGUMENT, f"unknown dtype {dtype!r}: one of {', '.join(LWT_DTYPES)}")
    p = _lib.ExportParams()
    p.struct_size = ctypes.sizeof(p)
    p.in_dir, p.out_path = _p(_model_dir(src)), _p(out)
    p.dtype = LWT_DTYPES[dtype]
    p.threads = threads or 0
    rep = _lib.ExportReport()
    rep.struct_size = ctypes.sizeof(rep)
    _raise(_c.stk_export_lwt(ctypes.byref(p), ctypes.byref(rep)))
    return {"out": os.fspath(out), "dtype": dtype, "tensors": rep.tensors, "parameters": rep.parameters,
            "file_bytes": rep.file_bytes, "data_crc32": f"{rep.data_crc32:08x}", "tied_lm_head": bool(rep.tied_lm_head)}


class LwtFile(Mapping[str, np.ndarray]):
    """A ``.lwt`` file mapped read-only and validated (stk_lwt_open): name -> numpy array.

    Without ``dequantize``: float32 and float16 tensors are views of the mapped bytes (no copy),
    bfloat16 a view of its uint16 bits, int8/uint8 views of the stored integers, and the packed
    low-bit types (int4 ... binary) a uint8 view of their packed bytes.  With ``dequantize``:
    float32 stays a view, every other type is unpacked and dequantised by libstk
    (stk_lwt_read_f32: ``(q - zero_point) * scale``) into a new float32 array of the tensor's shape.
    ``info(name)`` gives the index entry (dtype, shape, scale, zero_point, ...)."""

    def __init__(self, path: PathLike, *, dequantize: bool = False) -> None:
        h = ctypes.c_void_p()
        _raise(_c.stk_lwt_open(_p(path), ctypes.byref(h)))
        self._map = _Mapping(h, _c.stk_lwt_close, os.fspath(path))
        self.path = os.fspath(path)
        self.dequantize = dequantize
        n = ctypes.c_uint32()
        hdr, hlen = ctypes.c_void_p(), ctypes.c_size_t()
        _raise(_c.stk_lwt_info(h, ctypes.byref(n), ctypes.byref(hdr), ctypes.byref(hlen)))
        self.header: dict[str, Any] = json.loads(ctypes.string_at(hdr.value or 0, hlen.value)) if hlen.value else {}
        self._entries: dict[str, _lib.LwtTensor] = {}
        for i in range(n.value):
            t = _lib.LwtTensor()
            t.struct_size = ctypes.sizeof(t)
            _raise(_c.stk_lwt_tensor_at(h, i, ctypes.byref(t)))
            self._entries[t.name.decode()] = t
        self._cache: dict[str, np.ndarray] = {}

    def info(self, name: str) -> dict[str, Any]:
        t = self._entries[name]
        return {"name": name, "dtype": _LWT_NAMES.get(t.dtype, str(t.dtype)), "shape": tuple(t.shape[:t.ndim]),
                "n_elements": t.n_elements, "size_bytes": t.size_bytes, "scale": t.scale, "zero_point": t.zero_point}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = self._load(name)
        return self._cache[name]

    def _load(self, name: str) -> np.ndarray:
        t = self._entries[name]
        shape = tuple(t.shape[:t.ndim])
        if t.dtype == 1 or (not self.dequantize and t.dtype in _LWT_NUMPY):
            return _view(self._map, t.data, t.size_bytes, _LWT_NUMPY[t.dtype], shape)
        if not self.dequantize:
            return _view(self._map, t.data, t.size_bytes, np.dtype("u1"), (t.size_bytes,))
        out = np.empty(shape, dtype=np.float32)
        _raise(_c.stk_lwt_read_f32(self._map.handle, name.encode(), out.ctypes.data, out.size))
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<stk.LwtFile {self.path}: {len(self)} tensors>"


def read_lwt(path: PathLike, *, dequantize: bool = False) -> LwtFile:
    """Map a ``.lwt`` file: name -> numpy array (see :class:`LwtFile`)."""
    return LwtFile(path, dequantize=dequantize)
