"""stk, the Sera Transfer Kit, from Python.

The same operations as the ``stk`` command, under the same names::

    import stk
    summary = stk.convert("bindings/testdata/tiny-gpt2", "/tmp/stk-root")   # publish a generation
    with stk.Generation("/tmp/stk-root") as gen:                            # verify and map it
        w = gen.arrays["prf_W.bin"]            # read-only numpy view of the mapped bytes, no copy
    weights = stk.read_lwt("model.lwt")        # name -> numpy array

How it reaches the library (docs/decisions.md, "Python"): the conversion, verification, mapped
arrays, lookups and ``.lwt`` files go through libstk's public C ABI (``stk.h``) with ctypes, which
releases the GIL during every call; the reports the C ABI does not produce (``inspect``,
``check``, ``tokenize``: the ``--json`` objects of the command) come from the ``stk`` binary
shipped inside the package, so they have exactly the command's fields.  ``python -m stk ARGS``
runs that binary.
"""

from __future__ import annotations

import ctypes
import enum
import json
import mmap
import os
import queue
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from . import _lib
from ._lib import lib as _c

__all__ = ["Status", "StkError", "inspect", "convert", "check", "tokenize", "Generation", "export_lwt", "read_lwt",
           "LwtFile", "LWT_DTYPES", "version"]

__version__ = _c.stk_version_string().decode()

PathLike = Union[str, "os.PathLike[str]"]


class Status(enum.IntEnum):
    """stk_status: libstk's status codes (values pinned by stk.h)."""
    OK = 0
    INVALID_ARGUMENT = 1
    STRUCT_SIZE = 2
    ARENA_TOO_SMALL = 3
    NOT_IMPLEMENTED = 4
    STAGE_ORDER = 5
    CANCELLED = 6
    IO = 10
    NOT_FOUND = 11
    OUTPUT_EXISTS = 12
    TRUNCATED = 20
    BAD_MAGIC = 21
    BAD_DTYPE = 22
    BAD_RANK = 23
    DIMS_OVERFLOW = 24
    SIZE_MISMATCH = 25
    MISALIGNED = 26
    CHECKSUM = 27
    MISSING_ARRAY = 28
    SCHEMA = 29
    BAD_HEADER = 30
    CORRUPT = 31
    UNSUPPORTED = 40
    UNSAFE_PICKLE = 41
    LFS_POINTER = 42
    UNKNOWN_MODEL = 43
    BAD_JSON = 44
    NONFINITE = 45
    PARAM_COUNT = 46
    SP_REJECTED = 60
    MPHF_EXHAUSTED = 61
    TABLE_FULL = 62
    KEY_NOT_FOUND = 63
    NOMEM = 90
    INTERNAL = 99


class StkError(Exception):
    """A libstk failure: ``status`` (an int, a :class:`Status` when known), ``status_name``
    ("STK_E_CHECKSUM") and ``message`` (names the file, tensor and offset where there is one).
    Errors reported by the ``stk`` command also carry its whole ``--json`` object as ``result``."""

    def __init__(self, status: int, message: str, result: Optional[dict] = None) -> None:
        try:
            self.status: int = Status(status)
        except ValueError:
            self.status = status
        self.status_name: str = _c.stk_status_str(status).decode().split(":")[0]
        self.message: str = message
        self.result = result
        super().__init__(f"{self.status_name}: {message}")


def _raise(status: int) -> None:
    """stk_last_error() is per thread: call this on the thread that made the failing call."""
    if status != 0:
        raise StkError(status, (_c.stk_last_error() or b"").decode("utf-8", "replace"))


def version() -> str:
    """The version of the libstk actually loaded ("0.1.0")."""
    return _c.stk_version_string().decode()


def _p(path: PathLike) -> bytes:
    return os.fsencode(os.fspath(path))


# ---------------------------------------------------------------------------------------------
# The stk command's JSON reports

def _run_json(command: str, *args: str) -> dict:
    """Run ``stk COMMAND ARGS --json`` and return its one JSON object; StkError when not ok."""
    proc = subprocess.run([_lib.binary_path(), command, *args, "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise StkError(Status.INTERNAL, f"stk {command} printed no JSON (exit {proc.returncode}): "
                       f"{proc.stderr.strip()[-2000:]}") from None
    # (`stk inspect FILE.lwt --json` prints its own object without the shared keys: the exit code says)
    if not result.get("ok", proc.returncode == 0):
        raise StkError(int(result.get("status_code", Status.INTERNAL)), str(result.get("message", "")), result)
    return result


def inspect(path: PathLike) -> dict:
    """What ``stk inspect PATH --json`` prints: a checkpoint (architecture, tensors and their roles),
    a generations root or generation (manifest: hash, tokenizer mode, stages, arrays, records), or a
    ``.lwt`` file (header, tensors, CRC32)."""
    return _run_json("inspect", os.fspath(path))


def check(root: PathLike, acceptance: bool = False, model: Optional[PathLike] = None) -> dict:
    """``stk check ROOT --json``: verify the current generation and the chain (every array's
    checksums); with ``acceptance`` also the spec's acceptance tests (``model`` gives them the
    weights).  Returns the command's JSON object; a failed verification raises StkError (status
    STK_E_CHECKSUM, ..., with the object as ``.result``)."""
    args = [os.fspath(root)]
    if acceptance:
        args.append("--acceptance")
    if model is not None:
        args += ["--model", os.fspath(model)]
    return _run_json("check", *args)


def tokenize(src: PathLike, text: str, *, mode: str = "bpe", ltok: Optional[int] = None) -> list[int]:
    """Token ids of ``text``, as ``stk tokenize --in SRC --prompt TEXT --json`` gives them: ``mode``
    "bpe" uses the model's own tokenizer (BPE or SentencePiece), "greedy" the O(1) greedy encoder."""
    args = ["--in", os.fspath(src), "--prompt", text, "--mode", mode]
    if ltok is not None:
        args += ["--ltok", str(ltok)]
    return list(_run_json("tokenize", *args)["ids"])


# ---------------------------------------------------------------------------------------------
# convert

def _model_dir(src: PathLike) -> str:
    """``--in`` as the command takes it: a model directory, a file inside one, or a HuggingFace
    cache folder ``models--ORG--NAME`` (the snapshot refs/main names)."""
    p = Path(src)
    if p.is_file():
        return str(p.parent)
    ref = p / "refs" / "main"
    if p.name.startswith("models--") and ref.is_file():
        return str(p / "snapshots" / ref.read_text().strip())
    return str(p)


ProgressCallback = Callable[[str, int, int], Any]


def convert(src: PathLike, root: PathLike, *, r: Optional[int] = None, rv: Optional[int] = None,
            ltok: Optional[int] = None, topl: Optional[int] = None, threads: Optional[int] = None,
            allow_uncertified_tokenizer: bool = False, allow_nonfinite: bool = False,
            progress: Union[None, bool, ProgressCallback] = None) -> dict:
    """Convert the checkpoint ``src`` into the generations root ``root`` (``stk convert SRC ROOT``):
    run every stage, and once the check stage has verified the new generation, publish it and make
    it current.  Options as the command's (``None``: the library's default: r 512, rv 12, ltok 8,
    topl 12, threads 1).

    ``progress``: a callable ``progress(stage_name, index, total)`` called on this thread as each
    stage starts (index 1..total), or True for a tqdm bar (when tqdm is installed).

    The stages run on a worker thread without the GIL.  Ctrl-C (KeyboardInterrupt), or any
    exception raised by ``progress``, cancels the job (stk_job_cancel: the running stage stops at
    its next layer/tensor), removes the staging directory and re-raises: nothing is published.

    Returns the summary: ``generation`` (curr_hash), ``generation_name``, ``generation_dir``,
    ``previous``, ``arrays``, ``bytes``, ``arena_bytes``, ``tokenizer`` (mode, vocab_size, ltok and
    the reason for the mode, from stk_job_get_info), ``disabled`` (the manifest's feature_disabled
    records) and ``stages`` (status, seconds, crc32c, sha256_low64, message), under the keys
    ``stk convert --json`` uses for them.
    """
    in_dir, out_dir = _model_dir(src), os.fspath(root)
    params = _lib.JobParams()
    params.struct_size = ctypes.sizeof(params)
    params.in_dir, params.out_dir = _p(in_dir), _p(out_dir)
    params.r, params.rv, params.l_tok, params.top_l = r or 0, rv or 0, ltok or 0, topl or 0
    params.threads = threads or 0
    params.flags = _lib.STK_JOB_PUBLISH_ROOT
    if allow_uncertified_tokenizer:
        params.flags |= _lib.STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER
    if allow_nonfinite:
        params.flags |= _lib.STK_JOB_ALLOW_NONFINITE

    callback: Optional[ProgressCallback] = None
    bar = None
    if progress is True:
        try:
            from tqdm import tqdm
        except ImportError:
            warnings.warn("stk.convert(progress=True): tqdm is not installed, no progress bar", stacklevel=2)
        else:
            bar = tqdm(total=_lib.STK_STAGE_COUNT, unit="stage", desc="stk convert")

            def callback(name: str, index: int, total: int) -> None:
                bar.n = index - 1
                bar.set_postfix_str(name)
    elif callable(progress):
        callback = progress

    size = ctypes.c_size_t(0)
    _raise(_c.stk_job_arena_size(ctypes.byref(params), ctypes.byref(size)))
    # Anonymous mapping: pages are zero and only touched as the job uses them.
    arena = mmap.mmap(-1, max(size.value, 1))
    arena_ref = ctypes.c_char.from_buffer(arena)
    job = ctypes.c_void_p()
    try:
        _raise(_c.stk_open(ctypes.byref(params), ctypes.addressof(arena_ref), size.value, ctypes.byref(job)))
        stages, failure, gen_dir, tok_reason = _run_stages(job, callback)
        if failure is None and bar is not None:
            bar.n = _lib.STK_STAGE_COUNT
            bar.set_postfix_str("published")
    finally:
        if bar is not None:
            bar.close()
        _c.stk_close(job)  # a job that did not publish: its staging directory is removed here
        del arena_ref
        arena.close()
    if failure is not None:
        raise failure
    manifest = inspect(gen_dir)
    tok = manifest["tokenizer"]
    disabled = [{"stage": rec["stage"], "text": rec["text"]} for rec in manifest["records"]
                if rec["kind"] == "feature_disabled"]
    return {
        "command": "convert", "ok": True, "in": in_dir, "out": out_dir, "published": True,
        "generation": manifest["generation"], "root": out_dir,
        "generation_name": os.path.basename(gen_dir), "generation_dir": gen_dir,
        "previous": manifest["previous"], "arrays": manifest["arrays_count"], "bytes": manifest["bytes"],
        "arena_bytes": size.value,
        "tokenizer": {"mode": tok["mode"], "reason": tok_reason, "vocab_size": tok["vocab_size"], "ltok": tok["ltok"]},
        "disabled": disabled, "stages": stages,
    }


def _run_stages(job: ctypes.c_void_p, callback: Optional[ProgressCallback]):
    """The stages on a worker thread (no GIL while each runs); this thread waits, calls the progress
    callback between stages and turns Ctrl-C into stk_job_cancel."""
    events: queue.Queue = queue.Queue()
    go = threading.Event()
    stop = threading.Event()
    stages: list[dict] = []
    out: dict = {}

    def work() -> None:
        try:
            for i in range(1, _lib.STK_STAGE_COUNT + 1):
                name = _c.stk_stage_name(i).decode()
                events.put(("start", i, name))
                go.wait()
                go.clear()
                if stop.is_set():
                    return
                t0 = time.perf_counter()
                s = _c.stk_stage_run(job, i)
                rec = {"stage": name, "status": "ok" if s == 0 else _c.stk_status_str(s).decode().split(":")[0],
                       "seconds": time.perf_counter() - t0, "crc32c": "", "sha256_low64": "",
                       "message": (_c.stk_last_error() or b"").decode("utf-8", "replace") if s else ""}
                if s == 0:
                    crc, sha = ctypes.c_uint32(), ctypes.c_uint64()
                    if _c.stk_stage_digest(job, i, ctypes.byref(crc), ctypes.byref(sha)) == 0:
                        rec["crc32c"], rec["sha256_low64"] = f"{crc.value:08x}", f"{sha.value:016x}"
                stages.append(rec)
                if s != 0:
                    out["failure"] = StkError(s, f"stage {name} failed: {rec['message']}")
                    return
            d = ctypes.c_char_p()
            _raise(_c.stk_job_generation_dir(job, ctypes.byref(d)))
            out["dir"] = os.fsdecode(d.value)
            info = _lib.JobInfo()
            info.struct_size = ctypes.sizeof(info)
            _raise(_c.stk_job_get_info(job, ctypes.byref(info)))
            out["tokenizer_reason"] = info.tokenizer_reason.decode("utf-8", "replace")
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            out["failure"] = e
        finally:
            events.put(("end", 0, ""))

    worker = threading.Thread(target=work, name="stk-convert", daemon=True)
    worker.start()
    try:
        while True:
            try:
                kind, index, name = events.get(timeout=0.1)  # interruptible: Ctrl-C lands here
            except queue.Empty:
                continue
            if kind == "end":
                break
            if callback is not None:
                callback(name, index, _lib.STK_STAGE_COUNT)
            go.set()
    except BaseException:
        stop.set()
        _c.stk_job_cancel(job)  # the running stage stops at its next progress point
        go.set()
        while worker.is_alive():
            worker.join(0.1)
        raise
    worker.join()
    return stages, out.get("failure"), out.get("dir"), out.get("tokenizer_reason", "")


# ---------------------------------------------------------------------------------------------
# Zero-copy views

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


def _view(owner: _Mapping, address: int, nbytes: int, dtype: np.dtype, shape: tuple) -> np.ndarray:
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
_SERA_DTYPES = {1: np.dtype("<f8"), 2: np.dtype("<f4"), 3: np.dtype("<i4"), 4: np.dtype("<i2"), 5: np.dtype("i1"),
                6: np.dtype("u1"), 7: np.dtype("<i2"), 8: np.dtype("<i2"), 9: np.dtype("<u2")}
_SERA_DTYPE_NAMES = {1: "f64", 2: "f32", 3: "i32", 4: "i16", 5: "i8", 6: "u8", 7: "q8_8", 8: "q4_12", 9: "bf16"}

_LOOKUP_TOKEN_ID, _LOOKUP_TOKEN_BYTES, _LOOKUP_LINEAR, _LOOKUP_HUB = 1, 2, 3, 4


class _Arrays(Mapping):
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
        self.dir: str = os.fsdecode(d.value)
        n = ctypes.c_uint32()
        _raise(_c.stk_generation_array_count(h, ctypes.byref(n)))
        self._count = n.value
        self._names: Optional[list[str]] = None
        self._manifest: Optional[dict] = None
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

    def array_info(self, key: Union[int, str]) -> dict:
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
    def manifest(self) -> dict:
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


# ---------------------------------------------------------------------------------------------
# .lwt weight files

LWT_DTYPES = {"float32": 1, "float16": 2, "bfloat16": 3, "int8": 4, "uint8": 5, "int4": 6, "uint4": 7, "fp4": 8,
              "int2": 9, "uint2": 10, "ternary": 11, "binary": 12}
_LWT_NAMES = {v: k for k, v in LWT_DTYPES.items()}
# Element types of the stored bytes for the types numpy has (bfloat16: raw uint16 bits); the packed
# low-bit types are their bytes (uint8), unpacked by read_lwt(dequantize=True).
_LWT_NUMPY = {1: np.dtype("<f4"), 2: np.dtype("<f2"), 3: np.dtype("<u2"), 4: np.dtype("i1"), 5: np.dtype("u1")}


def export_lwt(src: PathLike, out: PathLike, dtype: str = "float32", *, threads: Optional[int] = None) -> dict:
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


class LwtFile(Mapping):
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
        self.header: dict = json.loads(ctypes.string_at(hdr.value, hlen.value)) if hlen.value else {}
        self._entries: dict[str, _lib.LwtTensor] = {}
        for i in range(n.value):
            t = _lib.LwtTensor()
            t.struct_size = ctypes.sizeof(t)
            _raise(_c.stk_lwt_tensor_at(h, i, ctypes.byref(t)))
            self._entries[t.name.decode()] = t
        self._cache: dict[str, np.ndarray] = {}

    def info(self, name: str) -> dict:
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
from . import runtime  # noqa: E402,F401  (stk.runtime: the reference runtime of the arrays)
