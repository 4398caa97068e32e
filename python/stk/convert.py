"""``stk.convert``: a checkpoint into a generations root, through the C ABI, with progress and
Ctrl-C handled (docs/decisions.md, "Python")."""

from __future__ import annotations

import ctypes
import mmap
import os
import queue
import signal
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Optional, Union

from . import _lib
from ._lib import lib as _c
from .errors import PathLike, Status, StkError, _p, _raise
from .reports import inspect


def _gguf_path(path: str) -> str:
    """stk_model_gguf_path: the GGUF file ``path`` names, "" when it is not a GGUF model."""
    cap = 4096
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = ctypes.c_size_t()
        s = _c.stk_model_gguf_path(_p(path), buf, cap, ctypes.byref(n))
        if s == Status.INVALID_ARGUMENT and n.value >= cap:
            cap = n.value + 1
            continue
        _raise(s)
        return os.fsdecode(buf.value)


def _model_dir(src: PathLike) -> str:
    """``--in`` as the command resolves it: a GGUF file is the model itself (the folder around it
    may hold other GGUFs); another file is a checkpoint file inside its model directory (the
    directory is used); a HuggingFace cache folder ``models--ORG--NAME`` is the snapshot refs/main
    names (else its only snapshot); anything else is passed on as given."""
    p = Path(src)
    if p.exists() and not p.is_dir():
        if _gguf_path(str(p)):
            return str(p)
        return str(p.parent)
    if p.name.startswith("models--") and (p / "snapshots").is_dir():
        ref = p / "refs" / "main"
        rev = ref.read_text().strip() if ref.is_file() else ""
        if not rev or "/" in rev or not (p / "snapshots" / rev).is_dir():
            snaps = [d.name for d in (p / "snapshots").iterdir() if d.is_dir()]
            if len(snaps) != 1:
                return str(p)  # the library names what it misses
            rev = snaps[0]
        return str(p / "snapshots" / rev)
    return str(p)


def _job_warnings(job: ctypes.c_void_p) -> list[str]:
    """stk_job_warning_count / _at: the list ``stk convert`` prints (its --json "warnings")."""
    n = ctypes.c_uint32(0)
    _raise(_c.stk_job_warning_count(job, ctypes.byref(n)))
    out = []
    for i in range(n.value):
        need = ctypes.c_size_t(0)
        buf = ctypes.create_string_buffer(1024)
        if _c.stk_job_warning_at(job, i, buf, len(buf), ctypes.byref(need)) != 0:
            buf = ctypes.create_string_buffer(need.value + 1)
            _raise(_c.stk_job_warning_at(job, i, buf, len(buf), ctypes.byref(need)))
        out.append(buf.value.decode("utf-8", "replace"))
    return out


ProgressCallback = Callable[[str, int, int], Any]


def convert(src: PathLike, root: PathLike, *, r: Optional[int] = None, rv: Optional[int] = None,
            ltok: Optional[int] = None, topl: Optional[int] = None, threads: Optional[int] = None,
            allow_uncertified_tokenizer: bool = False, allow_nonfinite: bool = False,
            progress: Union[None, bool, ProgressCallback] = None,
            calibration: Optional[PathLike] = None, profile: str = "default", ffn: Optional[str] = None,
            sinks: Optional[int] = None, window: Optional[int] = None, policy: Optional[str] = None,
            recent: Optional[int] = None) -> dict[str, Any]:
    """Convert the checkpoint ``src`` into the generations root ``root`` (``stk convert SRC ROOT``):
    run every stage, and once the check stage has verified the new generation, publish it and make
    it current.  Options as the command's (``None``: the library's default: r 512, rv 12, ltok 8,
    topl 12, threads 1).  ``calibration``: a statistics file of ``python -m stk calibrate``
    (``stk convert --calibration STATS``): the stages fit to it; None converts without data.
    ``profile``: "default" (the spec's arrays) or "faithful" (``--profile faithful``: the model's
    own weights and the manifest's runtime block, docs/format.md "Faithful profile"); ``ffn``
    ("bf16", "int8", "q4_0" or "q8_0"), ``sinks``, ``window``, ``policy`` ("window", "tova", "h2o",
    "tova-head": the retention policy the runtime block records) and ``recent`` (h2o's) are that
    profile's options (None: its defaults q8_0, 4, 252, window and window / 2) and are refused
    with the default profile (ValueError).

    ``progress``: a callable ``progress(stage_name, index, total)`` called on this thread as each
    stage starts (index 1..total), or True for a tqdm bar (when tqdm is installed).

    The stages run on a worker thread without the GIL.  Ctrl-C, or any exception raised by
    ``progress``, cancels the job (stk_job_cancel: the running stage stops at its next
    layer/tensor) and removes the staging directory, and a root this call created: then
    KeyboardInterrupt (or the exception) is raised, and nothing was published.  A Ctrl-C that comes
    once the check stage has published (the generation is current) does not raise: the summary is
    returned, with a RuntimeWarning saying so, as ``stk convert`` reports it (exit 0, published).
    ``src`` is resolved as the command's ``--in``: a ``.gguf`` file is the model itself, even in a
    folder that holds other GGUFs.

    Returns the summary: ``generation`` (curr_hash), ``generation_name``, ``generation_dir``,
    ``previous``, ``arrays``, ``bytes``, ``arena_bytes``, ``tokenizer`` (mode, vocab_size, ltok and
    the reason for the mode, from stk_job_get_info), ``disabled`` (the manifest's feature_disabled
    records), ``stages`` (status, seconds, crc32c, sha256_low64, message) and ``warnings`` (the
    library's list, stk_job_warning_at: the text ``stk convert`` prints), under the keys
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
    if calibration is not None:
        params.calibration = _p(os.fspath(calibration))
    if profile not in ("default", "faithful"):
        raise ValueError(f"profile {profile!r}: expected 'default' or 'faithful'")
    if ffn not in (None, "bf16", "int8", "q4_0", "q8_0"):
        raise ValueError(f"ffn {ffn!r}: expected 'bf16', 'int8', 'q4_0' or 'q8_0'")
    if profile == "faithful":
        params.flags |= _lib.STK_JOB_PROFILE_FAITHFUL
        params.flags |= {"int8": _lib.STK_JOB_FAITHFUL_FFN_INT8, "q4_0": _lib.STK_JOB_FAITHFUL_FFN_Q4_0,
                         "q8_0": _lib.STK_JOB_FAITHFUL_FFN_Q8_0, "bf16": _lib.STK_JOB_FAITHFUL_FFN_BF16}.get(ffn or "", 0)
        params.sinks, params.window = sinks or 0, window or 0
        if policy is not None and policy not in _lib.STK_SEQ_POLICIES:
            raise ValueError(f"policy {policy!r}: one of {sorted(_lib.STK_SEQ_POLICIES)}")
        params.policy, params.recent = _lib.STK_SEQ_POLICIES[policy or "window"], recent or 0
    elif ffn is not None or sinks is not None or window is not None or policy is not None or recent is not None:
        raise ValueError("ffn, sinks, window, policy and recent need profile='faithful'")

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
    out_existed = os.path.lexists(out_dir)
    # Anonymous mapping: pages are zero and only touched as the job uses them.
    arena = mmap.mmap(-1, max(size.value, 1))
    arena_ref = ctypes.c_char.from_buffer(arena)
    job = ctypes.c_void_p()
    published = False
    job_warnings: list[str] = []
    with _SigintToCancel() as sigint:
        try:
            _raise(_c.stk_open(ctypes.byref(params), ctypes.addressof(arena_ref), size.value, ctypes.byref(job)))
            sigint.job = job
            stages, failure, gen_dir, tok_reason = _run_stages(job, callback, sigint)
            published = failure is None
            if published:
                job_warnings = _job_warnings(job)  # before stk_close: the job holds them
            if published and bar is not None:
                bar.n = _lib.STK_STAGE_COUNT
                bar.set_postfix_str("published")
        finally:
            sigint.job = None
            if bar is not None:
                bar.close()
            _c.stk_close(job)  # a job that did not publish: its staging directory is removed here
            del arena_ref
            arena.close()
            if not published and not out_existed:
                _remove_created_root(out_dir)  # as the command does: a root this call created goes
        if not published:
            if sigint.count:
                raise KeyboardInterrupt  # nothing was published
            assert failure is not None
            raise failure
        assert gen_dir is not None  # every stage ran and the job named its published generation
        manifest = inspect(gen_dir)
        if sigint.count:  # Ctrl-C once the check stage had published: the generation is current
            warnings.warn(f"stk.convert: interrupted after {os.path.basename(gen_dir)} was published and made "
                          f"current in {out_dir}; returning its summary", RuntimeWarning, stacklevel=2)
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
            "disabled": disabled, "stages": stages, "warnings": job_warnings,
        }


def _remove_created_root(root: str) -> None:
    """A root this call created and did not publish into: its LOCK and empty generations/ go, then
    the root itself if that leaves it empty (stk.h's STK_LOCK_FILE_NAME, STK_GENERATIONS_DIR_NAME)."""
    steps: list[tuple[Callable[[str], None], str]] = [
        (os.unlink, os.path.join(root, "LOCK")), (os.rmdir, os.path.join(root, "generations")), (os.rmdir, root)]
    for step, path in steps:
        try:
            step(path)
        except OSError:
            pass


class _SigintToCancel:
    """While a conversion runs on the main thread with Python's default SIGINT handler, Ctrl-C
    does not raise KeyboardInterrupt wherever the main thread happens to be (possibly after the
    check stage has published): it is counted and cancels the job (stk_job_cancel: the running
    stage stops at its next progress point, and the check stage tests it once more just before
    publishing), and convert() then says truthfully what happened: KeyboardInterrupt when nothing
    was published, the summary (with a RuntimeWarning) when the generation was.  Elsewhere (another
    thread, a handler of the caller's own) nothing is changed."""

    def __init__(self) -> None:
        self.count = 0
        self.job: Optional[ctypes.c_void_p] = None
        self._old: Any = None
        self._installed = False

    def _handler(self, signum: int, frame: Optional[FrameType]) -> None:
        self.count += 1
        if self.job is not None:
            _c.stk_job_cancel(self.job)

    def __enter__(self) -> "_SigintToCancel":
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._old = signal.signal(signal.SIGINT, self._handler)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._old)


def _run_stages(job: ctypes.c_void_p, callback: Optional[ProgressCallback], sigint: _SigintToCancel
                ) -> tuple[list[dict[str, Any]], Optional[BaseException], Optional[str], str]:
    """The stages on a worker thread (no GIL while each runs); this thread waits, calls the progress
    callback between stages, and after Ctrl-C (``sigint.count``) starts no further stage."""
    events: queue.Queue[tuple[str, int, str]] = queue.Queue()
    go = threading.Event()
    stop = threading.Event()
    stages: list[dict[str, Any]] = []
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            for i in range(1, _lib.STK_STAGE_COUNT + 1):
                name = _c.stk_stage_name(i).decode()
                events.put(("start", i, name))
                go.wait()
                go.clear()
                if stop.is_set():
                    out["failure"] = StkError(Status.CANCELLED, f"cancelled before stage {name}")
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
            out["dir"] = os.fsdecode(d.value or b"")
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
            if callback is not None and not sigint.count:
                callback(name, index, _lib.STK_STAGE_COUNT)
            if sigint.count:
                stop.set()
            go.set()
    except BaseException as e:
        # an exception from the progress callback (or a KeyboardInterrupt where Ctrl-C is not
        # turned into a cancel): cancel, wait for the worker, and say what happened
        stop.set()
        _c.stk_job_cancel(job)  # the running stage stops at its next progress point
        go.set()
        while worker.is_alive():
            worker.join(0.1)
        if not (isinstance(e, KeyboardInterrupt) and "dir" in out and "failure" not in out):
            raise
        sigint.count += 1  # Ctrl-C after the check stage published: the summary, with a warning
    worker.join()
    return stages, out.get("failure"), out.get("dir"), out.get("tokenizer_reason", "")
