#!/usr/bin/env python3
"""Retention policies of the LM runtime on a real model, measured by the library alone
(docs/fidelity.md, "Retention policies on real models").

    python tools/lm/retention.py LIBSTK MODEL.gguf TEXT... [--ctx 512] [--per-file 1]
        [--states 64,128,256] [--policies window,tova,h2o,tova-head] [--sinks 4] [--ffn q4_0]

The original is the library's own run at full context (sinks 0, a window of the whole context:
equal to transformers' float32 forward, docs/fidelity.md "The LM runtime on real models").  Each
(policy, state) runs a sequence of `sinks` + (state - sinks) positions per layer over the same
contexts (each text tokenized by the GGUF's own tokenizer through transformers, cut into
consecutive contexts of CTX tokens, the first PER_FILE of each).  Printed per row: top-1
agreement with the original over every position and over the positions past the state (where
the policy has evicted), mean KL(original || policy) in nats, perplexity of the policy and of the
original on the next token.  --ffn TYPE: the policy runs (not the original) keep the FFN
weights as TYPE (STK_LM_WEIGHTS_FFN_*).  --json FILE writes every row, rewritten after every
chunk (positions_done says how far a run stopped early got).
"""
import argparse
import ctypes
import json
import os
import sys
import time
from ctypes import byref, c_size_t, c_void_p

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import lm_forward_reference as lfr  # noqa: E402
import lm_policy_reference as lpr  # noqa: E402

FFN_FLAGS = {"": 0, "q4_0": 0x10, "q8_0": 0x20}  # STK_LM_WEIGHTS_FFN_* (stk.h)


class Stats:
    def __init__(self, state):
        self.state = state
        self.agree, self.agree_past, self.kl, self.nll, self.nll_o = [], [], [], [], []

    def add(self, pos0, lo, ls, nxt):
        po = lo.astype(np.float64)
        po -= po.max(1, keepdims=True)
        po -= np.log(np.exp(po).sum(1, keepdims=True))
        ps = ls.astype(np.float64)
        ps -= ps.max(1, keepdims=True)
        ps -= np.log(np.exp(ps).sum(1, keepdims=True))
        a = np.argmax(lo, 1) == np.argmax(ls, 1)
        self.agree.append(a)
        past = np.arange(pos0, pos0 + len(lo)) >= self.state
        self.agree_past.append(a[past])
        self.kl.append(np.maximum((np.exp(po) * (po - ps)).sum(1), 0))
        k = len(nxt)
        self.nll.append(-ps[np.arange(k), nxt])
        self.nll_o.append(-po[np.arange(k), nxt])

    def row(self):
        cat = np.concatenate
        ap = cat(self.agree_past)
        return {"top1": float(cat(self.agree).mean()), "top1_past_state": float(ap.mean()) if len(ap) else None,
                "positions": int(len(cat(self.agree))), "positions_past_state": int(len(ap)),
                "kl": float(cat(self.kl).mean()), "ppl": float(np.exp(cat(self.nll).mean())),
                "ppl_original": float(np.exp(cat(self.nll_o).mean()))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("lib")
    p.add_argument("gguf")
    p.add_argument("texts", nargs="+")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--per-file", type=int, default=1)
    p.add_argument("--states", default="64,128,256")
    p.add_argument("--policies", default="window,tova,h2o,tova-head")
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunk", type=int, default=128)
    p.add_argument("--ffn", default="", choices=sorted(FFN_FLAGS))
    p.add_argument("--json")
    a = p.parse_args()

    import transformers
    os.environ.setdefault("STK_LIBRARY", os.path.abspath(a.lib))  # the stk package loads this build's library
    from stk.evaluation import contexts_of
    tok = transformers.AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(a.gguf)),
                                                     gguf_file=os.path.basename(a.gguf))
    ctxs = contexts_of(tok, a.texts, a.ctx, a.per_file)
    lib = ctypes.CDLL(a.lib)
    lpr.declare(lib)
    lm = c_void_p()
    lfr.check(lib, lib.stk_lm_open(a.gguf.encode(), 0, byref(lm)), "stk_lm_open")
    lmq = lm
    if a.ffn:
        lmq = c_void_p()
        lfr.check(lib, lib.stk_lm_open(a.gguf.encode(), FFN_FLAGS[a.ffn], byref(lmq)), "stk_lm_open ffn")
    info = lfr.LmInfo(ctypes.sizeof(lfr.LmInfo))
    lfr.check(lib, lib.stk_lm_get_info(lm, byref(info)), "info")
    V = info.vocab_size
    rows = [(pol, st) for st in map(int, a.states.split(",")) for pol in a.policies.split(",") if st < a.ctx]
    if a.ffn:
        rows.append(("window", a.ctx))  # the FFN type alone, every position in the state
    stats = {r: Stats(r[1]) for r in rows}
    t0 = time.time()

    def report(done):
        out = {"model": os.path.basename(a.gguf), "ctx": a.ctx, "contexts": [os.path.basename(c[0]) for c in ctxs],
               "sinks": a.sinks, "ffn": a.ffn or "f32", "seconds": round(time.time() - t0), "positions_done": done,
               "rows": [dict(policy=pol, state=st, **s.row()) for (pol, st), s in stats.items() if s.agree]}
        if a.json:  # rewritten after every chunk, so a run stopped early leaves the positions it scored
            with open(a.json + ".tmp", "w") as f:
                json.dump(out, f, indent=1)
            os.replace(a.json + ".tmp", a.json)
        return out

    for ci, (path, ids) in enumerate(ctxs):
        full = lpr.LibSeq(lib, lm, "window", 0, a.ctx, threads=a.threads)
        seqs = {r: lpr.LibSeq(lib, lmq, r[0], min(a.sinks, r[1] - 1), r[1] - min(a.sinks, r[1] - 1), threads=a.threads) for r in rows}
        for c0 in range(0, a.ctx, a.chunk):
            part = ids[c0:c0 + a.chunk]
            lo = full.feed(part, V)
            nxt = np.asarray(ids[c0 + 1:c0 + len(part) + 1])
            for r, s in seqs.items():
                ls = s.feed(part, V)
                stats[r].add(c0, lo, ls, nxt)
            report(ci * a.ctx + c0 + len(part))
        full.close()
        for s in seqs.values():
            s.close()
        print(f"context {ci + 1}/{len(ctxs)} ({os.path.basename(path)}) done at {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    out = report(len(ctxs) * a.ctx)
    print(f"{out['model']}  ctx {a.ctx}  {len(ctxs)} contexts  ffn {out['ffn']}")
    print(f"{'policy':10s} {'state':>5s} {'top-1':>6s} {'past':>6s} {'KL':>7s} {'ppl':>8s} {'orig ppl':>8s}")
    for r in out["rows"]:
        pol, st = r["policy"], r["state"]
        past = f"{r['top1_past_state']:.3f}" if r["top1_past_state"] is not None else "-"
        print(f"{pol:10s} {st:5d} {r['top1']:6.3f} {past:>6s} {r['kl']:7.4f} {r['ppl']:8.3f} {r['ppl_original']:8.3f}")
    lib.stk_lm_close(lm)
    if a.ffn:
        lib.stk_lm_close(lmq)


if __name__ == "__main__":
    main()
