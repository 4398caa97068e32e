"""A published generation, mapped and verified: its arrays as zero-copy numpy views, its
manifest, and the O(1) lookups (``stk_generation_*``, ``stk_lookup``)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Optional, Union

import numpy as np

from . import _lib
from ._lib import lib as _c
from .errors import PathLike, Status, StkError, _p, _raise
from .reports import inspect


class _Mapping:
    """Owns one open handle (a stk_generation or a stk_lwt) and closes it when the last reference
    goes: every array viewing its bytes references it, so the bytes outlive any array."""

    def __init__(self, handle: ctypes.c_void_p, close: Callable[[ctypes.c_void_p], None], path: str) -> None:
        self.handle = handle
        self._close = close
        self.path = path

    def __del__(self) -> None:
        if self.handle:
            self._close(self.handle)
            self.handle = ctypes.c_void_p()

    def __repr__(self) -> str:
        return f"<stk mapping of {self.path}>"


def _view(owner: _Mapping, address: int, nbytes: int, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    """A read-only numpy array over ``nbytes`` at ``address`` inside ``owner``'s mapping, without a
    copy.  Its base chain: ndarray -> read-only memoryview -> ctypes buffer (``_stk_owner`` = owner)."""
    if nbytes == 0:
        a = np.zeros(shape, dtype=dtype)
        a.flags.writeable = False
        return a
    buf = (ctypes.c_char * nbytes).from_address(address)
    buf._stk_owner = owner  # type: ignore[attr-defined]
    arr = np.frombuffer(memoryview(buf).toreadonly(), dtype=dtype)
    return arr.reshape(shape)


# Sera array dtypes (docs/format.md): numpy element types of the stored bytes.  Q8.8 and Q4.12 are
# int16 fixed point (Generation.dequantized divides by 256 / 4096); bf16 is its raw uint16 bits.
_SERA_DTYPES: dict[int, np.dtype[Any]] = {1: np.dtype("<f8"), 2: np.dtype("<f4"), 3: np.dtype("<i4"), 4: np.dtype("<i2"), 5: np.dtype("i1"),
                6: np.dtype("u1"), 7: np.dtype("<i2"), 8: np.dtype("<i2"), 9: np.dtype("<u2")}
_SERA_DTYPE_NAMES = {1: "f64", 2: "f32", 3: "i32", 4: "i16", 5: "i8", 6: "u8", 7: "q8_8", 8: "q4_12", 9: "bf16", 10: "q4_0", 11: "q8_0"}

_LOOKUP_TOKEN_ID, _LOOKUP_TOKEN_BYTES, _LOOKUP_LINEAR, _LOOKUP_HUB = 1, 2, 3, 4


class _Arrays(Mapping[str, np.ndarray]):
    """name -> read-only numpy array; each array is mapped and verified on first access."""

    def __init__(self, gen: "Generation") -> None:
        self._gen = gen
        self._cache: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = self._gen._array(name)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._gen.array_names)

    def __len__(self) -> int:
        return len(self._gen.array_names)

    def __contains__(self, name: object) -> bool:
        return name in self._gen.array_names


class Generation:
    """A published generation, verified and mapped read-only (stk_generation_open).

    ``root_or_dir``: a generations root (its CURRENT generation is pinned: this object keeps
    answering from it when a newer one is published or it is removed) or a generation directory.

    - ``arrays``: name -> read-only numpy array over the mapped bytes (no copy; each verified on
      first access against its manifest entry);
    - ``manifest``: the manifest, as ``stk inspect --json`` prints it;
    - ``token_id``, ``token_bytes``, ``linear``, ``hub``: the O(1) lookups (stk_lookup).

    Arrays keep the mapping alive: they stay valid after ``close()`` or the end of a ``with``."""

    def __init__(self, root_or_dir: PathLike) -> None:
        h = ctypes.c_void_p()
        _raise(_c.stk_generation_open(_p(root_or_dir), ctypes.byref(h)))
        self._map = _Mapping(h, _c.stk_generation_close, os.fspath(root_or_dir))
        d = ctypes.c_char_p()
        _raise(_c.stk_generation_dir(h, ctypes.byref(d)))
        self.dir: str = os.fsdecode(d.value or b"")
        n = ctypes.c_uint32()
        _raise(_c.stk_generation_array_count(h, ctypes.byref(n)))
        self._count = n.value
        self._names: Optional[list[str]] = None
        self._manifest: Optional[dict[str, Any]] = None
        self.arrays: Mapping[str, np.ndarray] = _Arrays(self)

    def __enter__(self) -> "Generation":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop this object's reference to the mapping (unmapped once no array views it)."""
        self._map = None  # type: ignore[assignment]

    @property
    def _h(self) -> ctypes.c_void_p:
        if self._map is None:
            raise ValueError("stk.Generation: closed")
        return self._map.handle

    @property
    def name(self) -> str:
        """The generation's directory name (``000002-1a2b...``)."""
        return os.path.basename(self.dir)

    @property
    def array_names(self) -> list[str]:
        """Array file names in manifest order."""
        if self._names is None:
            self._names = [self.array_info(i)["name"] for i in range(self._count)]
        return self._names

    def array_info(self, key: Union[int, str]) -> dict[str, Any]:
        """The manifest entry of an array (by index or name): name, stage, dtype, shape, byte_len, flags."""
        v = self._view_struct(key)
        return {"name": v.name.decode(), "stage": _c.stk_stage_name(v.stage).decode() if v.stage else "",
                "dtype": _SERA_DTYPE_NAMES.get(v.dtype, str(v.dtype)), "shape": tuple(v.dims[:v.rank]),
                "byte_len": v.byte_len, "flags": v.flags}

    def _view_struct(self, key: Union[int, str]) -> _lib.ArrayView:
        v = _lib.ArrayView()
        v.struct_size = ctypes.sizeof(v)
        if isinstance(key, int):
            _raise(_c.stk_generation_array_at(self._h, key, ctypes.byref(v)))
        else:
            _raise(_c.stk_generation_array_find(self._h, key.encode(), ctypes.byref(v)))
        return v

    def _array(self, name: str) -> np.ndarray:
        if name not in self.array_names:
            raise KeyError(name)
        v = self._view_struct(name)
        dt = _SERA_DTYPES.get(v.dtype)
        if dt is None:
            raise StkError(Status.BAD_DTYPE, f"{self.dir}/arrays/{name}: dtype {v.dtype}")
        return _view(self._map, v.data, v.byte_len, dt, tuple(v.dims[:v.rank]))

    def dequantized(self, name: str) -> np.ndarray:
        """The array's real values as float32 (a copy): Q8.8 / 256, Q4.12 / 4096, bf16 widened; other
        dtypes converted with numpy's astype."""
        a = self.arrays[name]
        code = self._view_struct(name).dtype
        if code == 7:
            return a.astype(np.float32) / np.float32(256)
        if code == 8:
            return a.astype(np.float32) / np.float32(4096)
        if code == 9:
            return (a.astype(np.uint32) << 16).view(np.float32)
        return a.astype(np.float32)

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest of this generation, as ``stk inspect DIR --json`` prints it."""
        if self._manifest is None:
            self._manifest = inspect(self.dir)
        return self._manifest

    def _lookup(self, kind: int, key: bytes, cap: int = 64) -> bytes:
        n = ctypes.c_size_t()
        while True:
            buf = ctypes.create_string_buffer(cap)
            s = _c.stk_lookup(self._h, kind, key, len(key), buf, cap, ctypes.byref(n))
            if s == Status.INVALID_ARGUMENT and n.value > cap:
                cap = n.value
                continue
            _raise(s)
            return buf.raw[:n.value]

    def token_id(self, piece: bytes) -> int:
        """The id of the token whose bytes are ``piece`` (STK_E_KEY_NOT_FOUND if none; the
        generation needs token tables: STK_E_MISSING_ARRAY in EXT mode)."""
        return int.from_bytes(self._lookup(_LOOKUP_TOKEN_ID, bytes(piece)), "little")

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of token ``token_id``."""
        return self._lookup(_LOOKUP_TOKEN_BYTES, int(token_id).to_bytes(4, "little"))

    def linear(self, key: int) -> float:
        """The linear dictionary's f32 base weight of the u64 feature key ``key``."""
        return float(np.frombuffer(self._lookup(_LOOKUP_LINEAR, int(key).to_bytes(8, "little")), "<f4")[0])

    def hub(self, token: int, context: int) -> np.ndarray:
        """The hub bitset of ``token`` in ``context``: W little-endian u64 words."""
        key = int(token).to_bytes(4, "little") + int(context).to_bytes(4, "little")
        return np.frombuffer(self._lookup(_LOOKUP_HUB, key), "<u8").copy()

    def __repr__(self) -> str:
        return f"<stk.Generation {self.dir}: {self._count} arrays>"
