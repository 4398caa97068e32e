#!/usr/bin/env python3
"""stk's GGUF dequantisation against gguf-py's numpy `gguf.quants.dequantize`, bit for bit.

  ggml_dequant_reference.py GGUF_DUMP              random blocks of every supported type (f16
                                                   scales random but finite; F16 and BF16: all
                                                   65536 bit patterns), written with GGUFWriter,
                                                   read through stk's checkpoint reader
  ggml_dequant_reference.py GGUF_DUMP --real FILE  every tensor of a real GGUF (a split set: its
                                                   first file), hashed in row chunks

Compares the SHA-256 of each tensor's f32 bytes; on a mismatch, the first differing element.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize

DUMP = sys.argv[1]
FAILS = []

# Byte offsets of each type's f16 scales inside a block (kept finite in the random blocks).
SCALES = {QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q8_0: [0], QT.Q2_K: [80, 82],
          QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208], QT.IQ4_NL: [0], QT.IQ4_XS: [0],
          QT.TQ1_0: [52], QT.TQ2_0: [64]}


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)


def dump(path, outdir=None):
    args = [DUMP, "dequant", path] + ([outdir] if outdir else [])
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout), None


def ref_f32(raw, qt):
    """gguf-py's dequantisation of raw stored bytes (rows of the tensor) as float32."""
    if qt == QT.F32:
        return raw.view(np.float32)
    return np.ascontiguousarray(dequantize(raw, qt), dtype=np.float32)


def random_blocks(rng, qt, n_rows, blocks_per_row):
    block, size = gguf.GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, size=(n_rows, blocks_per_row, size), dtype=np.uint8)
    for off in SCALES.get(qt, []):
        # Random finite f16: any sign, exponent 0..30 (subnormals included), any mantissa.
        h = rng.integers(0, 1 << 16, size=(n_rows, blocks_per_row), dtype=np.uint16)
        h = np.where((h & 0x7C00) == 0x7C00, h & 0xBFFF, h).astype(np.uint16)
        raw[..., off:off + 2] = h.view(np.uint8).reshape(n_rows, blocks_per_row, 2)
    return raw.reshape(n_rows, blocks_per_row * size)


def random_case(d):
    rng = np.random.default_rng(20261125)
    path = os.path.join(d, "random.gguf")
    w = gguf.GGUFWriter(path, "test")
    cases = []
    for qt in [QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.IQ4_NL,
               QT.IQ4_XS, QT.TQ1_0, QT.TQ2_0, QT.MXFP4]:
        block = gguf.GGML_QUANT_SIZES[qt][0]
        raw = random_blocks(rng, qt, 64, max(1, 1024 // block))  # 64 rows, >= 1024 elements each
        cases.append((f"{qt.name}.weight", qt, raw))
    # Every bit pattern of F16 and BF16 (NaNs, infinities, subnormals); random F32 bytes.
    every = np.arange(1 << 16, dtype=np.uint16).view(np.uint8).reshape(256, 512)
    cases.append(("F16.weight", QT.F16, every))
    cases.append(("BF16.weight", QT.BF16, every))
    cases.append(("F32.weight", QT.F32, rng.integers(0, 256, size=(16, 256), dtype=np.uint8)))
    for name, qt, raw in cases:
        w.add_tensor(name, raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    got, err = dump(path, d)
    check(got is not None, f"random: gguf_dump dequant refused: {err}")
    if got is None:
        return
    by_name = {bytes.fromhex(t["name"]).decode(): t for t in got["tensors"]}
    for name, qt, raw in cases:
        t = by_name.get(name)
        check(t is not None, f"random: {name} missing")
        if t is None:
            continue
        ref = ref_f32(raw, qt)
        shape = list(ref.shape)
        check(t["shape"] == shape, f"random: {name} shape {t['shape']} vs gguf-py {shape}")
        want = {QT.F16: "F16", QT.BF16: "BF16"}.get(qt, "F32")
        check(t["dtype"] == want, f"random: {name} presented as {t['dtype']}, expected {want}")
        if t["sha256"] != hashlib.sha256(ref.tobytes()).hexdigest():
            mine = np.fromfile(t["file"], dtype=np.uint32)
            theirs = ref.view(np.uint32).ravel()
            differ = mine != theirs
            if qt == QT.F16:
                # The one documented difference: a signalling NaN comes out quiet (bit 22 set, sign
                # and payload kept; stk's f16 conversion everywhere, as F16C and torch do), where
                # numpy keeps it signalling.  Still NaN either way.
                snan = ((theirs & 0x7F800000) == 0x7F800000) & ((theirs & 0x007FFFFF) != 0) & ((theirs & 0x00400000) == 0)
                differ &= ~(snan & (mine == (theirs | 0x00400000)))
                check(int(snan.sum()) == 1022, f"random: F16: {int(snan.sum())} signalling NaN patterns, expected 1022")
            bad = np.nonzero(differ)[0]
            if len(bad) == 0:
                print(f"ok {name}: {ref.size} elements bit-exact (signalling NaNs come out quiet)", flush=True)
                continue
            i = int(bad[0]) if len(bad) else -1
            check(False, f"random: {name}: {len(bad)} elements differ from gguf-py; first at {i}: "
                         f"stk {mine[i]:#010x} gguf-py {theirs[i]:#010x}")
        else:
            print(f"ok {name}: {ref.size} elements bit-exact", flush=True)

    # A type outside the list: refused naming the type and the tensor.
    p2 = os.path.join(d, "iq2.gguf")
    w = gguf.GGUFWriter(p2, "test")
    w.add_tensor("blk.0.ffn_up.weight", rng.integers(0, 256, size=(2, 66), dtype=np.uint8), raw_dtype=QT.IQ2_XXS)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got, err = dump(p2)
    check(got is None and err and "STK_E_UNSUPPORTED" in err and "'blk.0.ffn_up.weight'" in err and "IQ2_XXS" in err,
          f"IQ2_XXS: expected a refusal naming the tensor and type, got {err!r}")


def real_case(path):
    got, err = dump(path)
    check(got is not None, f"{path}: gguf_dump dequant refused: {err}")
    if got is None:
        return
    mine = {bytes.fromhex(t["name"]).decode(): t["sha256"] for t in got["tensors"]}
    # The files of the set: a split name expands to all of them.
    files = [path]
    base = os.path.basename(path)
    if "-of-" in base and base.endswith(".gguf"):
        stem, tail = base[:-5].rsplit("-of-", 1)
        prefix = stem.rsplit("-", 1)[0]
        files = [os.path.join(os.path.dirname(path), f"{prefix}-{i:05d}-of-{tail}.gguf") for i in range(1, int(tail) + 1)]
    n = 0
    types = {}
    for f in files:
        for t in gguf.GGUFReader(f).tensors:
            qt = QT(int(t.tensor_type))
            raw = np.asarray(t.data)
            rows = raw.reshape(-1, raw.shape[-1]) if raw.ndim > 1 else raw.reshape(1, -1)
            h = hashlib.sha256()
            step = max(1, (1 << 22) // max(1, rows.shape[1]))  # ~4 MiB of stored rows at a time
            for r in range(0, rows.shape[0], step):
                chunk = rows[r:r + step]
                h.update(ref_f32(chunk.view(np.uint8) if qt not in (QT.F32,) else chunk.view(np.uint8), qt).tobytes())
            check(mine.get(t.name) == h.hexdigest(), f"{os.path.basename(path)}: tensor {t.name} ({qt.name}) differs from gguf-py")
            n += 1
            types[qt.name] = types.get(qt.name, 0) + 1
    check(n == len(mine), f"{path}: gguf-py has {n} tensors, stk {len(mine)}")
    print(f"ok {os.path.basename(path)}: {n} tensors bit-exact ({', '.join(f'{k} x{v}' for k, v in sorted(types.items()))})")


if len(sys.argv) > 2 and sys.argv[2] == "--real":
    for p in sys.argv[3:]:
        real_case(p)
else:
    with tempfile.TemporaryDirectory() as d:
        random_case(d)

if FAILS:
    print(f"{len(FAILS)} failure(s)")
    sys.exit(1)
print("ggml-dequant-reference: bit-exact with gguf-py")
