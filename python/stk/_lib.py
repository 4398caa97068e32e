"""ctypes declarations of include/stk/stk.h (the public C ABI) and where libstk and the stk binary are.

Only the public header is used: what the C, Rust and Go bindings see.  ctypes releases the GIL
for the duration of every foreign call.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_size_t, c_uint32, c_uint64, c_void_p)
from pathlib import Path

_HERE = Path(__file__).resolve().parent

# STK_VERSION_NUMBER of the header these declarations follow.
HEADER_VERSION = 100


def library_path() -> str:
    """libstk.so: $STK_LIBRARY (an in-tree build's tests set it), else the copy inside the package."""
    env = os.environ.get("STK_LIBRARY")
    if env:
        return env
    p = _HERE / "libstk.so"
    if p.exists():
        return str(p)
    raise ImportError(f"stk: libstk.so is not in {_HERE} and STK_LIBRARY is not set: install the package with "
                      "`pip install .` from the repository, or point STK_LIBRARY at a build's libstk.so")


def binary_path() -> str:
    """The stk command: $STK_BIN, else the copy inside the package."""
    env = os.environ.get("STK_BIN")
    if env:
        return env
    p = _HERE / "_bin" / "stk"
    if p.exists():
        return str(p)
    raise FileNotFoundError(f"stk: the stk binary is not in {_HERE / '_bin'} and STK_BIN is not set")


class JobParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("in_dir", c_char_p), ("out_dir", c_char_p), ("r", c_uint32),
                ("rv", c_uint32), ("l_tok", c_uint32), ("top_l", c_uint32), ("threads", c_uint32),
                ("flags", c_uint32), ("calibration", c_char_p),
                ("sinks", c_uint32), ("window", c_uint32), ("policy", c_uint32), ("recent", c_uint32)]


class VerifyReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("arrays_checked", c_uint32), ("bytes_checked", c_uint64),
                ("failed_file", c_char * 256), ("failed_offset", c_uint64)]


class ArrayView(Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char * 64), ("stage", c_uint32), ("dtype", c_uint32),
                ("rank", c_uint32), ("flags", c_uint32), ("dims", c_uint64 * 5), ("byte_len", c_uint64),
                ("data", c_void_p)]


class JobInfo(Structure):  # experimental tier of stk.h
    _fields_ = [("struct_size", c_size_t), ("tokenizer_mode", c_uint32), ("tokenizer_certified_run", c_uint32),
                ("vocab_size", c_uint32), ("l_tok", c_uint32), ("tokenizer_reason", c_char * 512)]


class ExportParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("in_dir", c_char_p), ("out_path", c_char_p), ("dtype", c_uint32),
                ("reserved", c_uint32), ("threads", c_uint32)]


class ExportReport(Structure):
    _fields_ = [("struct_size", c_size_t), ("tensors", c_uint64), ("parameters", c_uint64),
                ("file_bytes", c_uint64), ("data_crc32", c_uint32), ("tied_lm_head", c_uint32)]


class LwtTensor(Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char * 128), ("dtype", c_uint32), ("ndim", c_uint32),
                ("shape", c_uint64 * 8), ("n_elements", c_uint64), ("size_bytes", c_uint64), ("scale", c_float),
                ("zero_point", c_uint32), ("data", c_void_p)]


STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER = 0x1
STK_JOB_ALLOW_NONFINITE = 0x2
STK_JOB_PUBLISH_ROOT = 0x4
STK_JOB_MEMORY_FIT_LSQ = 0x8
STK_JOB_PROFILE_FAITHFUL = 0x10
STK_JOB_FAITHFUL_FFN_INT8 = 0x20
STK_JOB_FAITHFUL_FFN_Q4_0 = 0x40
STK_JOB_FAITHFUL_FFN_Q8_0 = 0x80
STK_JOB_FAITHFUL_FFN_BF16 = 0x100
STK_STAGE_COUNT = 10


def _declare(lib: ctypes.CDLL) -> None:
    st = c_uint32  # stk_status (an enum: int-sized)
    sigs = {
        "stk_status_str": (c_char_p, [st]),
        "stk_last_error": (c_char_p, []),
        "stk_version_number": (c_uint32, []),
        "stk_version_string": (c_char_p, []),
        "stk_stage_name": (c_char_p, [c_uint32]),
        "stk_job_arena_size": (st, [POINTER(JobParams), POINTER(c_size_t)]),
        "stk_open": (st, [POINTER(JobParams), c_void_p, c_size_t, POINTER(c_void_p)]),
        "stk_stage_run": (st, [c_void_p, c_uint32]),
        "stk_stage_digest": (st, [c_void_p, c_uint32, POINTER(c_uint32), POINTER(c_uint64)]),
        "stk_job_cancel": (None, [c_void_p]),
        "stk_job_get_info": (st, [c_void_p, POINTER(JobInfo)]),
        "stk_close": (None, [c_void_p]),
        "stk_job_generation_dir": (st, [c_void_p, POINTER(c_char_p)]),
        "stk_verify": (st, [c_char_p, POINTER(VerifyReport)]),
        "stk_generation_open": (st, [c_char_p, POINTER(c_void_p)]),
        "stk_generation_close": (None, [c_void_p]),
        "stk_generation_dir": (st, [c_void_p, POINTER(c_char_p)]),
        "stk_generation_array_count": (st, [c_void_p, POINTER(c_uint32)]),
        "stk_generation_array_at": (st, [c_void_p, c_uint32, POINTER(ArrayView)]),
        "stk_generation_array_find": (st, [c_void_p, c_char_p, POINTER(ArrayView)]),
        "stk_lookup": (st, [c_void_p, c_uint32, c_void_p, c_size_t, c_void_p, c_size_t, POINTER(c_size_t)]),
        "stk_export_lwt": (st, [POINTER(ExportParams), POINTER(ExportReport)]),
        "stk_lwt_open": (st, [c_char_p, POINTER(c_void_p)]),
        "stk_lwt_close": (None, [c_void_p]),
        "stk_lwt_info": (st, [c_void_p, POINTER(c_uint32), POINTER(c_void_p), POINTER(c_size_t)]),
        "stk_lwt_tensor_at": (st, [c_void_p, c_uint32, POINTER(LwtTensor)]),
        "stk_lwt_find": (st, [c_void_p, c_char_p, POINTER(LwtTensor)]),
        "stk_lwt_read_f32": (st, [c_void_p, c_char_p, c_void_p, c_size_t]),
        "stk_crc32c": (c_uint32, [c_uint32, c_void_p, c_size_t]),
        "stk_moment_gram": (st, [c_void_p, c_size_t, c_size_t, c_void_p, c_uint32]),
        "stk_moment_cross": (st, [c_void_p, c_void_p, c_size_t, c_size_t, c_size_t, c_void_p, c_uint32]),
        "stk_moment_causal_pairs": (st, [c_void_p, c_void_p, c_void_p, c_size_t, c_size_t, c_size_t, c_double, c_void_p,
                                         c_void_p, c_void_p, c_void_p, c_uint32]),
        "stk_model_gguf_path": (st, [c_char_p, c_char_p, c_size_t, POINTER(c_size_t)]),
        "stk_job_warning_count": (st, [c_void_p, POINTER(c_uint32)]),
        "stk_job_warning_at": (st, [c_void_p, c_uint32, c_char_p, c_size_t, POINTER(c_size_t)]),
        "stk_job_progress": (st, [c_void_p, POINTER(c_uint64), POINTER(c_uint64), POINTER(c_char_p)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    _declare(lib)
    have = lib.stk_version_number()
    if have != HEADER_VERSION:  # 0.x: any version may change a struct (as the Rust and Go bindings)
        raise ImportError(f"stk: libstk {lib.stk_version_string().decode()} ({have}) does not match the "
                          f"bindings' header version {HEADER_VERSION}")
    return lib


lib = load()


# -- The reference runtime of the arrays (python/stk/runtime.py; stk.h's stk_refrun_*, stk_prf_*,
# stk_overlay_*, stk_ffn_*, stk_memory_*).
class RefrunInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t),
                ("n_layers", c_uint32), ("d_model", c_uint32), ("d_v", c_uint32), ("r", c_uint32), ("r_v", c_uint32),
                ("has_prf", c_uint32), ("has_overlays", c_uint32), ("has_linear", c_uint32),
                ("has_linear_bias", c_uint32), ("has_memory", c_uint32),
                ("n_ffn_units", c_uint32), ("memory_sections", c_uint32),
                ("tau", ctypes.c_double), ("beta_floor", ctypes.c_double), ("whitening_eps", ctypes.c_double),
                ("prf_state_bytes", c_size_t), ("prf_state_bytes_memory", c_size_t), ("scratch_bytes", c_size_t),
                ("ffn_index_bytes", c_size_t), ("memory_state_bytes", c_size_t), ("ffn_entries", c_uint64)]


STK_PRF_MEMORY = 0x1


def _declare_refrun(lib: ctypes.CDLL) -> None:
    st, vp, sz, u32, u64, fp = c_uint32, c_void_p, c_size_t, c_uint32, c_uint64, c_void_p
    sigs = {
        "stk_refrun_get_info": (st, [vp, POINTER(RefrunInfo)]),
        "stk_prf_reset": (st, [vp, u32, u32, vp, sz]),
        "stk_prf_add_key": (st, [vp, u32, vp, sz, fp, fp, vp, sz]),
        "stk_prf_read": (st, [vp, u32, vp, sz, fp, fp, vp, sz]),
        "stk_prf_read_parts": (st, [vp, u32, vp, sz, fp, fp, ctypes.POINTER(ctypes.c_double), vp, sz]),
        "stk_prf_run": (st, [vp, u32, vp, sz, u64, fp, fp, fp, vp, sz]),
        "stk_overlay_delta": (st, [vp, u32, fp, fp, vp, sz]),
        "stk_overlay_run": (st, [vp, u32, u64, fp, fp, vp, sz]),
        "stk_ffn_index_bytes": (st, [vp, POINTER(c_size_t)]),
        "stk_ffn_index_build": (st, [vp, vp, sz]),
        "stk_ffn_apply": (st, [vp, vp, sz, u32, fp, fp]),
        "stk_ffn_apply_batch": (st, [vp, vp, sz, u32, u64, fp, fp]),
        "stk_ffn_bias": (st, [vp, fp, sz]),
        "stk_memory_reset": (st, [vp, vp, sz]),
        "stk_memory_step": (st, [vp, vp, sz, c_float, POINTER(c_float)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


_declare_refrun(lib)


# -- The language-model runtime (python/stk/lm.py; stk.h's stk_lm_*, stk_seq_*).
class SeqParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("sinks", c_uint32), ("window", c_uint32), ("threads", c_uint32),
                ("max_batch", c_uint32), ("policy", c_uint32), ("recent", c_uint32)]


class LmInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("vocab_size", c_uint64), ("n_layers", c_uint32), ("d_model", c_uint32),
                ("n_heads", c_uint32), ("n_kv_heads", c_uint32), ("head_dim", c_uint32), ("model_type", c_char * 32),
                ("generation", c_uint32), ("sinks", c_uint32), ("window", c_uint32), ("policy", c_uint32),
                ("recent", c_uint32), ("ffn_dtype", c_uint32)]


# stk.h's probes (stk_seq_set_probe): the data a callback receives.
class ProbeData(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("layer", c_uint32), ("point", c_uint32), ("position", c_uint64),
                ("n_tokens", c_uint64), ("width", c_uint64), ("data", POINTER(c_float)), ("writable", c_uint32),
                ("flags", c_uint32), ("heads", c_uint32), ("head_width", c_uint32), ("rot_offset", c_uint32),
                ("rot_pairs", c_uint32)]


PROBE_FN = ctypes.CFUNCTYPE(ctypes.c_int, c_void_p, POINTER(ProbeData))
# STK_PROBE_*: the points, by name, in the forward's order within a layer.
STK_PROBE_POINTS = ("attn_in", "q_pre", "k_pre", "q", "k", "v", "attn_out", "attn_proj", "ffn_in", "ffn_out")
STK_PROBE_LAYER_MOE, STK_PROBE_LAYER_SLIDING, STK_PROBE_ROPE_INTERLEAVED = 0x1, 0x2, 0x4


# stk.h's tokenizers (stk_tokenizer_*): the model's own encoder, for stk.lm.Tokenizer.
class TokenizerParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("path", c_char_p), ("kind", c_uint32), ("l_tok", c_uint32)]


STK_TOKENIZE_BPE = 1
STK_TOKENIZE_ADD_SPECIAL = 0x1
STK_LM_WEIGHTS_F32 = 0
STK_LM_WEIGHTS_BF16 = 1
STK_LM_WEIGHTS_FFN = {"q4_0": 0x10, "q8_0": 0x20}  # or'ed: the FFN matrices block-scaled
STK_SEQ_POLICIES = {"window": 0, "tova": 1, "h2o": 2, "tova-head": 3}
STK_SEQ_POLICY_DEFAULT = 0xFFFFFFFF  # the model's own: a faithful generation's runtime block's policy


def _declare_lm(lib: ctypes.CDLL) -> None:
    st, vp, sz = c_uint32, c_void_p, c_size_t
    sigs = {
        "stk_lm_open": (st, [c_char_p, c_uint32, POINTER(c_void_p)]),
        "stk_lm_close": (None, [vp]),
        "stk_lm_get_info": (st, [vp, POINTER(LmInfo)]),
        "stk_seq_arena_size": (st, [vp, POINTER(SeqParams), POINTER(c_size_t)]),
        "stk_seq_open": (st, [vp, POINTER(SeqParams), vp, sz, POINTER(c_void_p)]),
        "stk_seq_feed": (st, [vp, vp, sz, vp]),
        "stk_seq_logits": (st, [vp, POINTER(POINTER(c_float)), POINTER(c_size_t), POINTER(c_uint64)]),
        "stk_seq_reset": (st, [vp]),
        "stk_seq_close": (None, [vp]),
        "stk_seq_kept": (st, [vp, c_uint32, c_uint32, POINTER(c_uint64), sz, POINTER(c_size_t)]),
        "stk_seq_set_probe": (st, [vp, c_uint32, PROBE_FN, vp]),
        "stk_seq_attn_project": (st, [vp, c_uint32, vp, c_uint64, vp]),
        "stk_tokenizer_open": (st, [POINTER(TokenizerParams), POINTER(c_void_p)]),
        "stk_tokenizer_close": (None, [vp]),
        "stk_tokenizer_encode": (st, [vp, c_char_p, sz, c_uint32, POINTER(POINTER(c_uint32)), POINTER(c_size_t)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


_declare_lm(lib)
