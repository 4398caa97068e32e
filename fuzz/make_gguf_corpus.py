#!/usr/bin/env python3
"""Seed corpus of fuzz/gguf_header: small GGUFs written by gguf-py's GGUFWriter (v3, v2, metadata
of every type incl. nested arrays, alignment 8 / 64, one tensor of every dequantised type, the
files of a split set, big-endian) and hostile headers built by hand (huge counts, long strings,
n_dims 5, a product that overflows, overlapping offsets).

usage: make_gguf_corpus.py OUTDIR   (run with the test venv's python: it needs gguf)
"""
import os
import struct
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT, GGUFValueType as VT

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1)


def writer_file(name, alignment=None, split=0, endian=gguf.GGUFEndian.LITTLE, types=None, version=None):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.gguf")
        w = gguf.GGUFWriter(p, "llama", split_max_tensors=split, endianess=endian)
        if alignment:
            w.add_custom_alignment(alignment)
        w.add_uint8("a.u8", 7)
        w.add_int8("a.i8", -7)
        w.add_uint16("a.u16", 700)
        w.add_int16("a.i16", -700)
        w.add_uint32("a.u32", 70000)
        w.add_int32("a.i32", -70000)
        w.add_uint64("a.u64", 1 << 40)
        w.add_int64("a.i64", -(1 << 40))
        w.add_float32("a.f32", 0.5)
        w.add_float64("a.f64", -0.25)
        w.add_bool("a.bool", True)
        w.add_string("a.str", "tok")
        w.add_array("a.strs", ["a", "bc", ""])
        w.add_key_value("a.nested", [[1, 2], [3]], VT.ARRAY, sub_type=VT.ARRAY)
        w.add_key_value("a.f32s", [0.5, 1.5], VT.ARRAY, sub_type=VT.FLOAT32)
        for i, qt in enumerate(types or [QT.F32]):
            block, size = gguf.GGML_QUANT_SIZES[qt]
            raw = rng.integers(0, 256, size=(2, size), dtype=np.uint8)
            for r in range(2):  # finite f16 bytes anywhere a scale may sit
                raw[r, 1::2] &= 0xBF
            w.add_tensor(f"blk.{i}.w", raw, raw_dtype=qt)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        files = sorted(f for f in os.listdir(d))
        for j, f in enumerate(files):
            b = bytearray(open(os.path.join(d, f), "rb").read())
            if version is not None:
                b[4:8] = struct.pack("<I", version)
            suffix = "" if len(files) == 1 else f"-part{j + 1}"
            open(os.path.join(out, f"{name}{suffix}.gguf"), "wb").write(bytes(b))


ALL = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K,
       QT.Q6_K, QT.IQ4_NL, QT.IQ4_XS, QT.TQ1_0, QT.TQ2_0]
writer_file("v3-all-types", types=ALL)
writer_file("v2", version=2, types=[QT.Q4_0])
writer_file("align64", alignment=64, types=[QT.Q4_K, QT.F16])
writer_file("align8", alignment=8, types=[QT.Q8_0])
writer_file("split", split=1, types=[QT.Q6_K, QT.F32])
writer_file("big-endian", endian=gguf.GGUFEndian.BIG, types=[QT.F32])


def raw(name, b):
    open(os.path.join(out, name + ".gguf"), "wb").write(b)


def hdr(n_tensors, n_kv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def s(x):
    return struct.pack("<Q", len(x)) + x


raw("huge-ntensors", hdr(1 << 60, 0))
raw("huge-keylen", hdr(0, 1) + struct.pack("<Q", 1 << 63) + bytes(8))
raw("ndims5", hdr(1, 0) + s(b"t") + struct.pack("<I", 5) + bytes(64))
raw("ne-overflow", hdr(1, 0) + s(b"t") + struct.pack("<IQQIQ", 2, (1 << 63) - 1, 2, 24, 0))
raw("overlap", hdr(2, 0) + s(b"a") + struct.pack("<IQIQ", 1, 16, 0, 0) + s(b"b") + struct.pack("<IQIQ", 1, 8, 0, 32)
    + bytes(128))
raw("deep-array", hdr(0, 1) + s(b"k") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 20 + bytes(16))
