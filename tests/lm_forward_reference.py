#!/usr/bin/env python3
"""The LM runtime (stk_lm_* / stk_seq_*, include/stk/stk.h) against transformers' own float32
eager forward, recorded by tests/fixtures/lm/forward_reference.py for every tiny fixture.

For every model of tests/fixtures/lm/reference.json:
  - full: sinks 0 + a window of the whole context: the library's logits at every position
    against transformers'; prints max |delta logit|, asserts the argmax equal at every position
    and max |delta| <= BOUND;
  - window: sinks + window as recorded (the `stk eval --swap window` definition): the same
    assertions against the masked reference;
  - token by token (max_batch 1, the GEMV path) and the prompt path (max_batch 64, GEMM), and
    1 and 3 threads: each equal to the reference within the bound; the thread counts bit-equal.
A model the library refuses must be refused with STK_E_NOT_IMPLEMENTED and a message naming
its family; the list of refused models is printed.  Exit 0 when all hold.

Usage: lm_forward_reference.py LIBSTK [NAME...]
"""
import ctypes
import json
import os
import sys
from ctypes import POINTER, Structure, byref, c_char, c_char_p, c_float, c_int32, c_size_t, c_uint32, c_uint64, c_void_p

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REF = os.path.join(HERE, "fixtures", "lm")
BOUND = 1e-4  # max |delta logit|: f32 sums in another order than torch's (measured: at most 1.9e-6)
STK_E_NOT_IMPLEMENTED = 4


class SeqParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("sinks", c_uint32), ("window", c_uint32), ("threads", c_uint32),
                ("max_batch", c_uint32)]


class LmInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("vocab_size", c_uint64), ("n_layers", c_uint32), ("d_model", c_uint32),
                ("n_heads", c_uint32), ("n_kv_heads", c_uint32), ("head_dim", c_uint32), ("model_type", c_char * 32)]


def declare(lib):
    st = c_uint32
    for name, res, args in (
            ("stk_last_error", c_char_p, []),
            ("stk_lm_open", st, [c_char_p, c_uint32, POINTER(c_void_p)]),
            ("stk_lm_close", None, [c_void_p]),
            ("stk_lm_get_info", st, [c_void_p, POINTER(LmInfo)]),
            ("stk_seq_arena_size", st, [c_void_p, POINTER(SeqParams), POINTER(c_size_t)]),
            ("stk_seq_open", st, [c_void_p, POINTER(SeqParams), c_void_p, c_size_t, POINTER(c_void_p)]),
            ("stk_seq_feed", st, [c_void_p, POINTER(c_int32), c_size_t, POINTER(c_float)]),
            ("stk_seq_logits", st, [c_void_p, POINTER(POINTER(c_float)), POINTER(c_size_t), POINTER(c_uint64)]),
            ("stk_seq_reset", st, [c_void_p]),
            ("stk_seq_close", None, [c_void_p])):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def check(lib, st, what):
    if st != 0:
        raise RuntimeError(f"{what}: status {st}: {lib.stk_last_error().decode()}")


def run(lib, lm, tokens, sinks, window, threads, max_batch):
    p = SeqParams(ctypes.sizeof(SeqParams), sinks, window, threads, max_batch)
    n = c_size_t()
    check(lib, lib.stk_seq_arena_size(lm, byref(p), byref(n)), "stk_seq_arena_size")
    arena = ctypes.create_string_buffer(n.value)
    seq = c_void_p()
    check(lib, lib.stk_seq_open(lm, byref(p), arena, n, byref(seq)), "stk_seq_open")
    info = LmInfo(ctypes.sizeof(LmInfo))
    check(lib, lib.stk_lm_get_info(lm, byref(info)), "stk_lm_get_info")
    out = np.zeros((len(tokens), info.vocab_size), np.float32)
    toks = np.asarray(tokens, np.int32)
    try:
        check(lib, lib.stk_seq_feed(seq, toks.ctypes.data_as(POINTER(c_int32)), len(toks),
                                    out.ctypes.data_as(POINTER(c_float))), "stk_seq_feed")
        last, voc, pos = POINTER(c_float)(), c_size_t(), c_uint64()
        check(lib, lib.stk_seq_logits(seq, byref(last), byref(voc), byref(pos)), "stk_seq_logits")
        assert pos.value == len(toks) and voc.value == info.vocab_size
        assert np.array_equal(np.ctypeslib.as_array(last, (voc.value,)), out[-1])
        # reset, then the same run again: the same bits
        check(lib, lib.stk_seq_reset(seq), "stk_seq_reset")
        again = np.zeros_like(out)
        check(lib, lib.stk_seq_feed(seq, toks.ctypes.data_as(POINTER(c_int32)), len(toks),
                                    again.ctypes.data_as(POINTER(c_float))), "stk_seq_feed after reset")
        assert np.array_equal(again, out), "a reset sequence does not repeat its logits"
    finally:
        lib.stk_seq_close(seq)
    return out


def compare(name, kind, got, want):
    d = float(np.max(np.abs(got.astype(np.float64) - want)))
    top = np.argmax(got, 1) == np.argmax(want, 1)
    ok = bool(top.all()) and d <= BOUND
    print(f"  {name:16s} {kind:26s} max|delta logit| {d:.3e}  top-1 {int(top.sum())}/{len(top)}  {'ok' if ok else 'FAIL'}")
    return ok


def main():
    lib = ctypes.CDLL(sys.argv[1])
    declare(lib)
    ref = json.load(open(os.path.join(REF, "reference.json")))
    only = set(sys.argv[2:])
    failures, refused, ran = [], [], []
    for name, e in sorted(ref["models"].items()):
        if only and name not in only:
            continue
        if "skipped" in e:
            print(f"{name}: no reference ({e['skipped'][:90]})")
            continue
        lm = c_void_p()
        st = lib.stk_lm_open(os.path.join(ROOT, e["path"]).encode(), 0, byref(lm))
        if st == STK_E_NOT_IMPLEMENTED:
            msg = lib.stk_last_error().decode()
            refused.append((name, msg))
            if "does not run" not in msg:
                failures.append(f"{name}: refused without naming the family: {msg}")
            continue
        if st != 0:
            failures.append(f"{name}: stk_lm_open status {st}: {lib.stk_last_error().decode()}")
            continue
        ran.append(name)
        try:
            toks = e["token_ids"]
            T = len(toks)
            full = np.load(os.path.join(REF, f"{name}.full.npy"))
            outs = {}
            for threads, mb in ((1, 64), (3, 64), (1, 1), (2, 5)):
                outs[(threads, mb)] = run(lib, lm, toks, 0, T, threads, mb)
                if not compare(name, f"full t{threads} batch{mb}", outs[(threads, mb)], full):
                    failures.append(f"{name}: full context, threads {threads}, batch {mb}")
            if not np.array_equal(outs[(1, 64)], outs[(3, 64)]):
                failures.append(f"{name}: threads 1 and 3 differ in the bits")
            if e.get("window"):
                win = np.load(os.path.join(REF, f"{name}.window.npy"))
                for threads, mb in ((1, 64), (2, 1), (1, 3)):
                    got = run(lib, lm, toks, ref["sinks"], ref["window"], threads, mb)
                    if not compare(name, f"sinks {ref['sinks']} + {ref['window']} t{threads} b{mb}", got, win):
                        failures.append(f"{name}: window, threads {threads}, batch {mb}")
        except Exception as ex:  # a failure of one model is reported, the others still run
            failures.append(f"{name}: {type(ex).__name__}: {ex}")
        finally:
            lib.stk_lm_close(lm)
    print(f"ran {len(ran)}: {' '.join(ran)}")
    print(f"refused {len(refused)}:")
    for n, m in refused:
        print(f"  {n}: {m}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
