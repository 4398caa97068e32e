#!/usr/bin/env python3
"""GGUF files written by gguf-py's GGUFWriter read back exactly by stk (tests/gguf_dump).

Cases: version 3 and version 2 (same little-endian layout, version field patched), metadata of
every value type (scalars at their limits, empty and non-ASCII strings, arrays of every element
type, arrays of strings, arrays nested three deep), alignment 64 and 8, tensors of every ggml
type's block layout, a split set (opened from any of its files and as an explicit list), and a
big-endian file (refused).  The metadata is compared with the values given to the writer and the
tensor infos with gguf-py's GGUFReader.

usage: gguf_reference.py GGUF_DUMP
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
import gguf.quants
from gguf import GGUFValueType as VT, GGMLQuantizationType as QT

DUMP = sys.argv[1]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run_dump(*args):
    p = subprocess.run([DUMP, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def expect_value(v, t, sub, got, key):
    """Compare a value given to the writer (v of type t) with gguf_dump's JSON rendering."""
    if t == VT.ARRAY:
        check(isinstance(got, dict), f"{key}: an array")
        items = got["items"]
        check(len(items) == len(v), f"{key}: {len(items)} items, expected {len(v)}")
        et = sub if sub is not None else VT.get_type(v[0])
        check(got["elem"] == TYPE_NAMES[et], f"{key}: element type {got['elem']} vs {TYPE_NAMES[et]}")
        for i, (a, b) in enumerate(zip(v, items)):
            expect_value(a, et, None, b, f"{key}[{i}]")
    elif t == VT.STRING:
        b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        check(got == b.hex(), f"{key}: string {got!r} vs {b.hex()!r}")
    elif t in (VT.FLOAT32, VT.FLOAT64):
        want = float(np.float32(v)) if t == VT.FLOAT32 else float(v)
        if np.isnan(want):
            check(got == "nan", f"{key}: {got} vs nan")
        elif np.isinf(want):
            check(got == ("inf" if want > 0 else "-inf"), f"{key}: {got} vs {want}")
        else:
            check(float(got) == want, f"{key}: {got!r} vs {want!r}")
    elif t == VT.BOOL:
        check(got is bool(v), f"{key}: {got} vs {v}")
    else:
        check(got == int(v), f"{key}: {got} vs {v}")


TYPE_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32", VT.INT32: "i32",
              VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string", VT.ARRAY: "array", VT.UINT64: "u64",
              VT.INT64: "i64", VT.FLOAT64: "f64"}

# (key, value, type, sub_type) in the order written.
METADATA = [
    ("t.u8", 255, VT.UINT8, None),
    ("t.i8", -128, VT.INT8, None),
    ("t.u16", 65535, VT.UINT16, None),
    ("t.i16", -32768, VT.INT16, None),
    ("t.u32", 4294967295, VT.UINT32, None),
    ("t.i32", -2147483648, VT.INT32, None),
    ("t.u64", 18446744073709551615, VT.UINT64, None),
    ("t.i64", -9223372036854775808, VT.INT64, None),
    ("t.f32", 3.4028234663852886e38, VT.FLOAT32, None),
    ("t.f32.small", 1e-45, VT.FLOAT32, None),
    ("t.f32.nan", float("nan"), VT.FLOAT32, None),
    ("t.f64", -2.2250738585072014e-308, VT.FLOAT64, None),
    ("t.f64.inf", float("-inf"), VT.FLOAT64, None),
    ("t.bool.true", True, VT.BOOL, None),
    ("t.bool.false", False, VT.BOOL, None),
    ("t.str", "héllo ▁wörld \U0001F600", VT.STRING, None),
    ("t.str.empty", "", VT.STRING, None),
    ("t.arr.u8", [0, 1, 255], VT.ARRAY, VT.UINT8),
    ("t.arr.i8", [-1, 0, 127], VT.ARRAY, VT.INT8),
    ("t.arr.u16", [65535, 1], VT.ARRAY, VT.UINT16),
    ("t.arr.i16", [-32768, 7], VT.ARRAY, VT.INT16),
    ("t.arr.u32", [1, 2, 3], VT.ARRAY, VT.UINT32),
    ("t.arr.i32", [-5, 5], VT.ARRAY, VT.INT32),
    ("t.arr.u64", [18446744073709551615, 0], VT.ARRAY, VT.UINT64),
    ("t.arr.i64", [-9223372036854775808, 9], VT.ARRAY, VT.INT64),
    ("t.arr.f32", [0.1, -2.5, 1e30], VT.ARRAY, VT.FLOAT32),
    ("t.arr.f64", [0.1, -1e300], VT.ARRAY, VT.FLOAT64),
    ("t.arr.bool", [True, False, True], VT.ARRAY, VT.BOOL),
    ("t.arr.str", ["a", "", "<|endoftext|>", "ü\n\x00x"], VT.ARRAY, VT.STRING),
    ("t.arr.nested", [[1, 2, 3], [4], [5, 6]], VT.ARRAY, VT.ARRAY),
    ("t.arr.nested.str", [["x", "yy"], ["", "zzz", "w"]], VT.ARRAY, VT.ARRAY),
    ("t.arr.nested3", [[[1], [2, 3]], [[4, 5, 6]]], VT.ARRAY, VT.ARRAY),
]

# One tensor per layout: ne[0] a multiple of each type's block.
TENSOR_TYPES = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K,
                QT.Q5_K, QT.Q6_K, QT.IQ4_NL, QT.IQ4_XS, QT.TQ1_0, QT.TQ2_0, QT.IQ2_XXS, QT.I32, QT.F64]


def write(path, alignment=None, split_max_tensors=0, endian=gguf.GGUFEndian.LITTLE, types=None):
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "test", split_max_tensors=split_max_tensors, endianess=endian)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, v, t, sub in METADATA:
        w.add_key_value(key, v, t, sub_type=sub)
    for i, qt in enumerate(types or TENSOR_TYPES):
        block, size = gguf.GGML_QUANT_SIZES[qt]
        rows = 1 + i % 3
        ne0 = block * (1 + i % 2)
        nbytes = rows * (ne0 // block) * size
        raw = rng.integers(0, 256, size=nbytes, dtype=np.uint8).reshape(rows, nbytes // rows)
        raw[:, 1::2] &= 0xBF  # every f16 field finite (NaN payloads are not pinned: docs/decisions.md)
        if i == 3:  # a 3-d and a 1-d tensor too
            raw = raw.reshape(1, rows, nbytes // rows)
        w.add_tensor(f"blk.{i}.{qt.name.lower()}", raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def compare(paths, label, expect_files=1, first_file_metadata=True):
    code, out, err = run_dump("info", *paths)
    check(code == 0, f"{label}: gguf_dump info failed: {err.strip()}")
    if code != 0:
        return None
    got = json.loads(out)
    check(got["files"] == expect_files, f"{label}: {got['files']} files, expected {expect_files}")
    # Metadata: exactly the keys given (plus what the writer adds), in file order, by value.
    r = gguf.GGUFReader(paths[0])
    keys = [bytes.fromhex(kv["key"]).decode() for kv in got["metadata"]]
    ref_keys = [k for k in r.fields.keys() if not k.startswith("GGUF.")]  # its header pseudo-fields
    check(keys == ref_keys, f"{label}: keys {keys} vs gguf-py {ref_keys}")
    by_key = {bytes.fromhex(kv["key"]).decode(): kv for kv in got["metadata"]}
    for key, v, t, sub in METADATA:
        check(key in by_key, f"{label}: key {key} missing")
        if key in by_key:
            check(by_key[key]["type"] == TYPE_NAMES[t], f"{label}: {key} type {by_key[key]['type']}")
            expect_value(v, t, sub, by_key[key]["value"], f"{label}: {key}")
    # Tensors: the reader's view of every file, in split order.
    ref = []
    for fi, p in enumerate(paths if len(paths) > 1 else [paths[0]]):
        for t in gguf.GGUFReader(p).tensors:
            ref.append((t.name, [int(x) for x in t.shape], int(t.tensor_type), int(t.n_elements), int(t.n_bytes), fi,
                        int(t.data_offset)))
    mine = [(bytes.fromhex(t["name"]).decode(), t["ne"], t["type"], t["n_elements"], t["n_bytes"], t["file"], t["offset"])
            for t in got["tensors"]]
    check(mine == ref, f"{label}: tensors differ:\n stk    {mine}\n gguf-py {ref}")
    for t in got["tensors"]:
        check(t["shape"] == t["ne"][::-1], f"{label}: shape {t['shape']} is not ne {t['ne']} reversed")
    return got


with tempfile.TemporaryDirectory() as d:
    # Version 3, alignment 64.
    p3 = os.path.join(d, "v3.gguf")
    write(p3, alignment=64)
    got = compare([p3], "v3 align 64")
    if got:
        check(got["version"] == 3 and got["alignment"] == 64, f"v3: version {got['version']} alignment {got['alignment']}")
        check(len(got["tensors"]) == len(TENSOR_TYPES), "v3: tensor count")

    # Version 2: the same layout; only the version field differs.
    p2 = os.path.join(d, "v2.gguf")
    with open(p3, "rb") as f:
        b = bytearray(f.read())
    b[4:8] = (2).to_bytes(4, "little")
    with open(p2, "wb") as f:
        f.write(b)
    got = compare([p2], "v2")
    if got:
        check(got["version"] == 2, "v2: version")

    # Default alignment (32) and alignment 8.
    for al in (None, 8):
        p = os.path.join(d, f"align{al}.gguf")
        write(p, alignment=al)
        got = compare([p], f"align {al}")
        if got:
            check(got["alignment"] == (al or 32), f"align {al}: {got['alignment']}")

    # A split set: 3 tensors per file.
    ps = os.path.join(d, "model.gguf")
    write(ps, split_max_tensors=3)
    n = (len(TENSOR_TYPES) + 2) // 3
    parts = [os.path.join(d, f"model-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]
    check(all(os.path.exists(p) for p in parts), f"split: writer made {sorted(os.listdir(d))}")
    for i, start in enumerate([parts[0], parts[-1]]):
        code, out, err = run_dump("info", start)
        check(code == 0, f"split from {start}: {err.strip()}")
        if code == 0:
            got = json.loads(out)
            check(got["files"] == n and len(got["tensors"]) == len(TENSOR_TYPES),
                  f"split from {os.path.basename(start)}: {got['files']} files, {len(got['tensors'])} tensors")
    compare(parts, "split explicit", expect_files=n)
    # Through the checkpoint reader (supported types only: IQ2_XXS, I32 and F64 are refused there):
    # one checkpoint over the set, every tensor once, bit-exact with gguf-py; opened from a
    # directory holding the set too.
    sd = os.path.join(d, "splitdir")
    os.mkdir(sd)
    supported = [qt for qt in TENSOR_TYPES if qt not in (QT.IQ2_XXS, QT.I32, QT.F64)]
    write(os.path.join(sd, "m.gguf"), split_max_tensors=4, types=supported)
    m = (len(supported) + 3) // 4
    sparts = [os.path.join(sd, f"m-{i:05d}-of-{m:05d}.gguf") for i in range(1, m + 1)]
    for start in (sparts[-1], sd):
        code, out, err = run_dump("dequant", start)
        check(code == 0, f"split as a checkpoint from {start}: {err.strip()}")
        if code != 0:
            continue
        got = json.loads(out)
        check(got["format"] == "gguf-split" and len(got["tensors"]) == len(supported),
              f"split as a checkpoint: format {got['format']}, {len(got['tensors'])} tensors")
        sums = {bytes.fromhex(t["name"]).decode(): t["sha256"] for t in got["tensors"]}
        for p in sparts:
            for t in gguf.GGUFReader(p).tensors:
                ref = np.ascontiguousarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type), dtype=np.float32)
                check(sums.get(t.name) == hashlib.sha256(ref.tobytes()).hexdigest(),
                      f"split as a checkpoint: {t.name} differs from gguf-py")
    # A second model beside the set: the directory is refused, naming both.
    write(os.path.join(sd, "other.gguf"), types=[QT.F32])
    code, out, err = run_dump("dequant", sd)
    check(code == 1 and "STK_E_INVALID_ARGUMENT" in err and "holds 2 GGUF models" in err and "other.gguf" in err
          and "m-00001-of-" in err, f"two models in a directory: {code} {err.strip()}")
    # Out of order or incomplete: refused, naming split.no / split.count.
    code, out, err = run_dump("info", parts[1], parts[0], *parts[2:])
    check(code == 1 and "STK_E_CORRUPT" in err and "split.no is 1" in err, f"split out of order: {code} {err.strip()}")
    code, out, err = run_dump("info", *parts[:-1])
    check(code == 1 and "split.count is" in err, f"split incomplete: {code} {err.strip()}")
    os.rename(parts[-1], parts[-1] + ".moved")
    code, out, err = run_dump("info", parts[0])
    check(code == 1 and "STK_E_NOT_FOUND" in err and "missing" in err, f"split missing file: {code} {err.strip()}")
    os.rename(parts[-1] + ".moved", parts[-1])

    # Big-endian (gguf-py writes them): refused by name.
    pb = os.path.join(d, "be.gguf")
    write(pb, endian=gguf.GGUFEndian.BIG)
    code, out, err = run_dump("info", pb)
    check(code == 1 and "STK_E_UNSUPPORTED" in err and "big-endian GGUF" in err and "offset 4" in err,
          f"big-endian: {code} {err.strip()}")

if FAILS:
    print(f"{len(FAILS)} failure(s)")
    sys.exit(1)
print("gguf-reference: all cases match gguf-py")
