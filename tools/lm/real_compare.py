#!/usr/bin/env python3
"""The LM runtime on a real model against transformers' float32 eager forward (docs/fidelity.md,
"The LM runtime on real models").

    python tools/lm/real_compare.py LIBSTK MODEL.gguf HF_DIR TEXT [--ctx 512] [--sinks 4 --window 252]

HF_DIR is the GGUF dequantised by tools/fidelity/gguf2hf.py (the same weights transformers reads);
the library reads the GGUF itself (stk's own ingestion).  TEXT's first CTX tokens (HF_DIR's
tokenizer) are run (1) at full context (sinks 0, window CTX): max |delta logit| and top-1
agreement with transformers at every position; (2) with sinks + window against transformers'
forward with the same mask (tests/fixtures/lm/forward_reference.py's `windowed`, the `stk eval
--swap window` definition): max |delta| and top-1; and the windowed run's top-1 agreement with
the full original (the proposal's number).  Prints one JSON object.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "lm"))
import forward_reference  # noqa: E402
import lm_forward_reference as lfr  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("lib")
    p.add_argument("gguf")
    p.add_argument("hf")
    p.add_argument("text")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--window", type=int, default=252)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bf16", action="store_true", help="the library keeps the weights as bf16")
    a = p.parse_args()
    tok = transformers.AutoTokenizer.from_pretrained(a.hf)
    ids = np.array(tok(open(a.text, encoding="utf-8").read())["input_ids"][:a.ctx], np.int64)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.hf, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        full = model(torch.from_numpy(ids)[None]).logits[0].float().numpy()
    forward_reference.SINKS, forward_reference.WINDOW = a.sinks, a.window
    win_ref, why = forward_reference.windowed(model, ids)

    lib = ctypes.CDLL(a.lib)
    lfr.declare(lib)
    lm = ctypes.c_void_p()
    lfr.check(lib, lib.stk_lm_open(a.gguf.encode(), 1 if a.bf16 else 0, ctypes.byref(lm)), "stk_lm_open")
    t0 = time.time()
    got_full = lfr.run(lib, lm, ids.tolist(), 0, len(ids), a.threads, 64)
    t_full = time.time() - t0
    got_win = lfr.run(lib, lm, ids.tolist(), a.sinks, a.window, a.threads, 64)
    lib.stk_lm_close(lm)

    def stats(got, want):
        return {"max_abs_delta_logit": float(np.max(np.abs(got.astype(np.float64) - want))),
                "top1_agreement": float(np.mean(np.argmax(got, 1) == np.argmax(want, 1)))}

    out = {"model": os.path.basename(a.gguf), "tokens": int(len(ids)), "weights": "bf16" if a.bf16 else "f32",
           "transformers": transformers.__version__,
           "full_context_vs_transformers": stats(got_full, full),
           f"sinks{a.sinks}_window{a.window}_vs_original": stats(got_win, full),
           "library_seconds_full_run_incl_two_passes": round(t_full, 1)}
    if win_ref is not None:
        out[f"sinks{a.sinks}_window{a.window}_vs_transformers_same_mask"] = stats(got_win, win_ref)
        out["transformers_window_vs_original_top1"] = float(np.mean(np.argmax(win_ref, 1) == np.argmax(full, 1)))
    else:
        out["window_reference"] = why
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
