#!/usr/bin/env python3
"""The block-scaled types of format/lowbit.h (Q4_0, Q8_0; docs/format.md "Block-scaled types")
against gguf-py's quantize / dequantize of the same ggml types (gguf.quants), byte for byte.

Inputs: random normal rows at several scales, rows with one outlier, all-zero blocks, blocks of
equal values of either sign, -0.0, values at the rounding boundaries (k + 0.5 codes), tiny
(subnormal-scale) and large (f16-overflow-free) magnitudes.  Asserts:
  - quantize: the library's bytes equal gguf.quants.quantize's;
  - dequantize: the library's f32 values equal gguf.quants.dequantize's, bit for bit, on those
    blocks and on random block bytes (every code and scale pattern, NaN / inf scales excluded);
  - dot: each row's dot product with x within 1e-5 relative of float64's over the dequantised row.

Usage: blockq_reference.py BLOCKQ_DUMP
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

TYPES = {"q4_0": (T.Q4_0, 18), "q8_0": (T.Q8_0, 34)}


def run(tool, *args):
    subprocess.run([tool, *args], check=True)


def inputs(rng):
    rows = []
    for s in (1e-3, 0.02, 1.0, 300.0):
        rows.append(rng.standard_normal(32 * 64).astype(np.float32) * np.float32(s))
    r = rng.standard_normal(32 * 16).astype(np.float32)
    r[5] = 40.0
    r[37] = -40.0
    rows.append(r)
    rows.append(np.zeros(64, np.float32))
    rows.append(np.array([-0.0] * 32 + [0.0] * 31 + [-0.0], np.float32))
    rows.append(np.full(32, 0.75, np.float32))
    rows.append(np.full(32, -0.75, np.float32))
    # codes at exact half steps: v = (k + 0.5) * d for d = max / -8 (q4_0) and absmax / 127 (q8_0)
    k = np.arange(-16, 16, dtype=np.float32)
    b = (k + np.float32(0.5)) / np.float32(16)
    b[0] = -1.0
    rows.append(b.astype(np.float32))
    b8 = (np.arange(-16, 16, dtype=np.float32) + np.float32(0.5)) / np.float32(127)
    b8[0] = 1.0
    rows.append(b8.astype(np.float32))
    rows.append((rng.standard_normal(32 * 8) * 1e-6).astype(np.float32))
    rows.append((rng.standard_normal(32 * 8) * 2e3).astype(np.float32))
    return np.concatenate(rows)


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(37)
    v = inputs(rng)
    failures = []
    with tempfile.TemporaryDirectory() as d:
        p = lambda n: os.path.join(d, n)  # noqa: E731
        v.tofile(p("in.f32"))
        for name, (qt, bb) in TYPES.items():
            want = quants.quantize(v.reshape(-1, 32), qt).reshape(-1)
            run(tool, "quantize", name, p("in.f32"), p("got.bin"))
            got = np.fromfile(p("got.bin"), np.uint8)
            same = got.size == want.size and np.array_equal(got, want)
            nbad = int((got.reshape(-1, bb) != want.reshape(-1, bb)).any(1).sum()) if got.size == want.size else -1
            print(f"{name}: quantize {v.size} values ({v.size // 32} blocks): {'bytes equal gguf-py' if same else f'{nbad} blocks differ'}")
            if not same:
                failures.append(f"{name} quantize")
            # dequantize: the blocks above, and random bytes with finite f16 scales
            rb = rng.integers(0, 256, (4096, bb), dtype=np.uint8)
            sc = rb[:, :2].copy().view(np.uint16)
            sc &= np.uint16(0xBBFF)  # exponent field never all ones: finite scales
            rb[:, :2] = sc.view(np.uint8)
            blocks = np.concatenate([want.reshape(-1, bb), rb])
            blocks.tofile(p("b.bin"))
            run(tool, "dequant", name, p("b.bin"), p("out.f32"))
            gotf = np.fromfile(p("out.f32"), np.float32)
            wantf = quants.dequantize(blocks.reshape(-1), qt).reshape(-1).astype(np.float32)
            same = np.array_equal(gotf.view(np.uint32), wantf.view(np.uint32))
            print(f"{name}: dequantize {len(blocks)} blocks: {'bits equal gguf-py' if same else 'DIFFER'}")
            if not same:
                failures.append(f"{name} dequantize")
            # dot: rows of 256 values against x
            rows = want.reshape(-1, bb)[:(len(want) // bb) // 8 * 8].reshape(-1, 8 * bb)
            rows.tofile(p("rows.bin"))
            x = rng.standard_normal(256).astype(np.float32)
            x.tofile(p("x.f32"))
            run(tool, "dot", name, p("rows.bin"), p("x.f32"), p("dot.f32"))
            gd = np.fromfile(p("dot.f32"), np.float32)
            deq = quants.dequantize(rows.reshape(-1), qt).reshape(len(rows), 256).astype(np.float64)
            ref = deq @ x.astype(np.float64)
            err = np.abs(gd - ref) / (np.abs(deq) @ np.abs(x.astype(np.float64)) + 1e-30)
            print(f"{name}: dot over {len(rows)} rows of 256: max error / sum|w x| {err.max():.2e}")
            if err.max() > 1e-5:
                failures.append(f"{name} dot")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
