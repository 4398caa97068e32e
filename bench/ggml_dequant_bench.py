#!/usr/bin/env python3
"""GGUF dequantisation throughput: stk (Highway kernels, scalar reference) against memcpy of the
f32 output (floor) and gguf-py's numpy `gguf.quants.dequantize` (peer) on the same bytes.
All times are the CPU time of the one thread doing the work (median of RUNS), so a shared
machine's other processes do not count; memory bandwidth is still shared.

  ~/.cache/stk/venv/bin/python bench/ggml_dequant_bench.py BUILD_DIR [N_ELEMENTS] [RUNS]

Writes one tensor of every supported type (N elements, default 8 Mi, random blocks with finite
f16 scales) to a GGUF in a temp dir, runs BUILD_DIR/bench/ggml_dequant_bench on it, times gguf-py
on each tensor's stored bytes (median of RUNS after a warm-up) and prints a Markdown table (output GB/s = 4 bytes per element written).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize

build = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 8 << 20
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
TYPES = [QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K,
         QT.IQ4_NL, QT.IQ4_XS, QT.TQ1_0, QT.TQ2_0]
rng = np.random.default_rng(5)


def median(f):
    f()
    t = []
    for _ in range(runs):
        a = time.thread_time()  # CPU time, as the C++ side measures (numpy runs on this thread)
        f()
        t.append(time.thread_time() - a)
    return sorted(t)[len(t) // 2]


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "bench.gguf")
    w = gguf.GGUFWriter(path, "bench")
    raws = {}
    for qt in TYPES:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        rows = 1024
        raw = rng.integers(0, 256, size=(rows, n // rows // block * size), dtype=np.uint8)
        raw[:, 1::2] &= 0xBF  # every f16 field finite (scales, and the F16 values themselves)
        raws[qt.name] = (qt, raw)
        w.add_tensor(qt.name.lower(), raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = subprocess.run([os.path.join(build, "bench", "ggml_dequant_bench"), path, str(runs)], capture_output=True, text=True,
                       check=True)
    target = p.stderr.strip()
    rows = [json.loads(line) for line in p.stdout.splitlines()]

print(f"{n} elements per type, median of {runs} runs; {target}")
print()
print("| type | stk kernels GB/s | x memcpy | scalar ref GB/s | gguf-py GB/s | stk / gguf-py |")
print("|---|---:|---:|---:|---:|---:|")
for r in rows:
    qt, raw = raws[r["type"]]
    out_bytes = 4 * r["elements"]
    t_peer = median(lambda: dequantize(raw, qt))
    gbs = lambda t: out_bytes / t / 1e9
    print(f"| {r['type']} | {gbs(r['kernel_s']):.2f} | {r['memcpy_s'] / r['kernel_s']:.2f} | {gbs(r['reference_s']):.2f} | "
          f"{gbs(t_peer):.2f} | {t_peer / r['kernel_s']:.1f}x |", flush=True)
print(f"\nmemcpy of the f32 output: {4 * rows[0]['elements'] / rows[0]['memcpy_s'] / 1e9:.2f} GB/s written")
