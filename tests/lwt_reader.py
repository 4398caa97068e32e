#!/usr/bin/python3
"""An independent .lwt reader, written from docs/format.md ("LWT weight file") alone, not from
stk's code (version 1: seed 001's 216-byte entries; version 2: 224-byte entries).  It exports the tiny fixtures with the built `stk export` in every dtype, parses each
file with numpy (layout, header, index, alignment, zlib's CRC32), and compares every tensor with
what PyTorch loads from the source pytorch_model.bin: float32 bit for bit (Conv1D weights
transposed), float16/bfloat16 as IEEE round-to-nearest-even of the source, and the integer types
code for code against the quantisation rules of the docs re-implemented here.

usage: lwt_reader.py            (STK_BIN, STK_TEST_DATA, STK_SOURCE_ROOT from the environment)
Exit 77 (meson: skipped) when numpy or torch is not installed.  tests/python imports its
parsing and quantisation functions (numpy only) as the reference for stk.read_lwt.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)
torch = None  # imported by main(): only the PyTorch comparison needs it

DTYPES = {1: ("float32", 32), 2: ("float16", 16), 3: ("bfloat16", 16), 4: ("int8", 8), 5: ("uint8", 8),
          6: ("int4", 4), 7: ("uint4", 4), 8: ("fp4", 4), 9: ("int2", 2), 10: ("uint2", 2),
          11: ("ternary", 2), 12: ("binary", 1), 13: ("q4_0", 0), 14: ("q8_0", 0)}
# Block-scaled types: bytes per block of 32 values (docs/format.md, "Block-scaled types").
BLOCK_BYTES = {"q4_0": 18, "q8_0": 34}
FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)
KEYS = ["version", "model_type", "config", "dtype", "byte_order", "tensor_count", "total_bytes",
        "parameter_count", "tied_lm_head", "data_crc32"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_lwt(path, legacy=False):
    b = open(path, "rb").read()
    if b[:8] != b"LWATCHV1":
        fail(f"{path}: magic")
    (n,) = struct.unpack_from("<Q", b, 8)
    header = json.loads(b[16:16 + n].decode("utf-8"), object_pairs_hook=list)
    if [k for k, _ in header] != KEYS:
        fail(f"{path}: header fields {[k for k, _ in header]}")
    h = dict(header)
    h["config"] = dict(h["config"])
    if h["version"] not in (1, 2) or h["byte_order"] != "little":
        fail(f"{path}: version/byte_order")
    # Version 1 (float32 only): seed 001's C struct, 216 bytes; version 2: 224 bytes with dtype,
    # scale and zero_point.  legacy=True: a version-1 file with 224-byte entries, as stk wrote
    # them before version 2 existed.
    ext = h["version"] == 2 or legacy
    es = 224 if ext else 216
    if not ext and h["dtype"] != "float32":
        fail(f"{path}: version 1 with dtype {h['dtype']}")
    count = h["tensor_count"]
    index_at = 16 + n
    data_at = (index_at + es * count + 63) // 64 * 64
    if any(b[index_at + es * count:data_at]):
        fail(f"{path}: padding before data")
    if len(b) != data_at + h["total_bytes"] or h["total_bytes"] % 64:
        fail(f"{path}: file size {len(b)} vs data at {data_at} + {h['total_bytes']}")
    data = b[data_at:]
    if "%08x" % (zlib.crc32(data) & 0xFFFFFFFF) != h["data_crc32"]:
        fail(f"{path}: crc32")
    tensors = []
    expect_off = 0
    for i in range(count):
        e = b[index_at + es * i: index_at + es * (i + 1)]
        name = e[:128].split(b"\0", 1)[0].decode("utf-8")
        ndim, code = struct.unpack_from("<II", e, 128)
        shape = struct.unpack_from("<8Q", e, 136)
        off, size = struct.unpack_from("<QQ", e, 200)
        if ext:
            (scale,) = struct.unpack_from("<f", e, 216)
            (zp,) = struct.unpack_from("<I", e, 220)
        else:
            code, scale, zp = 1, 1.0, 0
        if any(shape[ndim:]):
            fail(f"{name}: shape beyond ndim")
        shape = shape[:ndim]
        nel = int(np.prod(shape, dtype=np.uint64)) if ndim else 1
        bits = DTYPES[code][1]
        dname = DTYPES[code][0]
        if dname in BLOCK_BYTES:
            if not ndim or shape[-1] % 32 or scale != 1.0 or zp != 0:
                fail(f"{name}: {dname} rows of whole blocks, scale 1, zero point 0")
            packed = nel // 32 * BLOCK_BYTES[dname]
        else:
            packed = (nel * bits + 7) // 8
        if size != packed or off != expect_off or off % 64:
            fail(f"{name}: size/offset")
        expect_off = (off + size + 63) // 64 * 64
        tensors.append(dict(name=name, dtype=DTYPES[code][0], bits=bits, shape=shape, n=nel,
                            raw=np.frombuffer(data, dtype=np.uint8, count=size, offset=off),
                            scale=np.float32(scale), zp=zp))
    if expect_off != h["total_bytes"]:
        fail(f"{path}: total_bytes")
    if sum(t["n"] for t in tensors) != h["parameter_count"]:
        fail(f"{path}: parameter_count")
    return h, tensors


def fields(t):
    """Unpacked fields as uint32, per the bit orders of the docs."""
    raw, n, bits = t["raw"], t["n"], t["bits"]
    if bits == 32:
        return raw.view("<u4")[:n].astype(np.uint32)
    if bits == 16:
        return raw.view("<u2")[:n].astype(np.uint32)
    if bits == 8:
        return raw[:n].astype(np.uint32)
    per = 8 // bits
    i = np.arange(n)
    shift = 8 - bits * (1 + i % per)
    f = (raw[i // per].astype(np.uint32) >> shift.astype(np.uint32)) & ((1 << bits) - 1)
    last_used = (n % per) * bits
    if n % per and raw[n // per] & ((1 << (8 - last_used)) - 1):
        fail(f"{t['name']}: padding bits")
    return f


def block_values(t):
    """The values of a block-scaled tensor: per block of 32, d (binary16) then the codes; Q4_0
    element j in the low nibble of byte 2 + j (j < 16) or the high nibble of byte 2 + j - 16,
    value (q - 8) * d; Q8_0 the int8 q[j], value q * d (one binary32 product)."""
    bb = BLOCK_BYTES[t["dtype"]]
    blocks = t["raw"][:t["n"] // 32 * bb].reshape(-1, bb)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    if t["dtype"] == "q4_0":
        qs = blocks[:, 2:]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32) - 8
    else:
        q = blocks[:, 2:].view(np.int8).astype(np.int32)
    return (d * q.astype(np.float32)).astype(np.float32).reshape(-1)


def block_quantise(d, v):
    """The docs' rule for a block-scaled type (gguf-py's quantize): the packed bytes of float32 v."""
    x = v.astype(np.float32).reshape(-1, 32)
    with np.errstate(divide="ignore", invalid="ignore"):
        if d == "q4_0":
            m = x[np.arange(len(x)), np.argmax(np.abs(x), axis=1)][:, None]  # the first of largest |v|
            s = (m / np.float32(-8)).astype(np.float32)
            ids = np.where(s == 0, np.float32(0), np.float32(1) / s).astype(np.float32)
            q = np.trunc((x * ids).astype(np.float32) + np.float32(8.5)).astype(np.float32)
            q = np.clip(q, 0, 15).astype(np.uint8)
            body = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
        else:
            s = (np.abs(x).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
            ids = np.where(s == 0, np.float32(0), np.float32(1) / s).astype(np.float32)
            p = (x * ids).astype(np.float32)
            a = np.abs(p)
            fl = np.floor(a)  # half away from zero, exactly: a - floor(a) and its double are exact
            body = (np.sign(p) * (fl + np.floor(np.float32(2) * (a - fl)))).astype(np.int8).view(np.uint8)
    return np.concatenate([s.astype(np.float16).view(np.uint8).reshape(-1, 2), body], axis=1).reshape(-1)


def values(t):
    if t["dtype"] in BLOCK_BYTES:
        return block_values(t)
    f = fields(t)
    d, s = t["dtype"], t["scale"]
    if d == "float32":
        return f.astype(np.uint32).view(np.float32)
    if d == "float16":
        return f.astype(np.uint16).view(np.float16).astype(np.float32)
    if d == "bfloat16":
        return (f << 16).astype(np.uint32).view(np.float32)
    if d in ("int8", "int4", "int2", "ternary"):
        b = t["bits"]
        code = np.where(f >= (1 << (b - 1)), f.astype(np.int64) - (1 << b), f.astype(np.int64))
        return code.astype(np.float32) * s
    if d in ("uint8", "uint4", "uint2"):
        return (f.astype(np.int64) - t["zp"]).astype(np.float32) * s
    if d == "fp4":
        m = FP4[f & 7] * s
        return np.where(f & 8, -m, m).astype(np.float32)
    if d == "binary":
        return np.where(f == 1, s, -s).astype(np.float32)
    fail(d)


def quantise(d, v):
    """The docs' quantisation rule: (fields, scale, zero_point) for float32 values v."""
    v = v.astype(np.float32)
    bits = {"int8": 8, "int4": 4, "int2": 2, "uint8": 8, "uint4": 4, "uint2": 2}.get(d)
    zp = 0
    if d.startswith("int"):
        absmax = float(np.max(np.abs(v))) if v.size else 0.0
        scale = np.float32(absmax / (2 ** (bits - 1) - 1))
    elif d.startswith("uint"):
        lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
        scale = np.float32((hi - lo) / (2 ** bits - 1))
    elif d == "fp4":
        scale = np.float32(float(np.max(np.abs(v))) / 6.0)
    else:  # ternary, binary: mean |v|, summed in element order in binary64
        scale = np.float32(np.cumsum(np.abs(v.astype(np.float64)))[-1] / v.size)
    if not scale >= np.float32(2.0 ** -100):
        scale = np.float32(1.0)
    q = v / scale  # binary32
    if d.startswith("int"):
        code = np.clip(np.rint(q), -(2 ** (bits - 1)), 2 ** (bits - 1) - 1).astype(np.int64)
        return code & ((1 << bits) - 1), scale, 0
    if d.startswith("uint"):
        zp = int(np.clip(np.rint(np.float32(-lo) / scale), 0, 2 ** bits - 1))
        return np.clip(np.rint(q) + zp, 0, 2 ** bits - 1).astype(np.int64), scale, zp
    if d == "fp4":
        a = np.abs(q)
        idx = np.select([a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0], range(7), 7)
        return np.where(np.signbit(v), 8, 0) | idx, scale, 0
    if d == "ternary":
        return np.clip(np.rint(q), -1, 1).astype(np.int64) & 3, scale, 0
    if d == "binary":
        return (v > 0).astype(np.int64), scale, 0
    fail(d)


def bf16_rne(v):
    x = v.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint32)


def load_safetensors(path):
    """{name: float32 array} from a .safetensors file, read per the published format (u64 header
    length, JSON {name: {dtype, shape, data_offsets}}, the byte buffer): F32, F16, BF16."""
    b = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", b, 0)
    header = json.loads(b[8:8 + n].decode("utf-8"))
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        raw = np.frombuffer(b, dtype=np.uint8, count=hi - lo, offset=8 + n + lo)
        if t["dtype"] == "BF16":
            v = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            v = raw.view("<f2").astype(np.float32)
        elif t["dtype"] == "F32":
            v = raw.view("<f4").astype(np.float32)
        else:
            fail(f"{path}: {name}: dtype {t['dtype']}")
        out[name] = v.reshape(t["shape"])
    return out


def load_state(model_dir):
    """The checkpoint's tensors as float32 numpy arrays: model.safetensors by the reader above,
    else pytorch_model.bin by PyTorch."""
    st = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(st):
        return load_safetensors(st)
    state = torch.load(os.path.join(model_dir, "pytorch_model.bin"), map_location="cpu")
    return {k: v.to(torch.float32).numpy() for k, v in state.items()}


def check_model(stk, model_dir, gpt2, tmp):
    state = load_state(model_dir)
    for code, (dname, _) in DTYPES.items():
        out = os.path.join(tmp, os.path.basename(model_dir) + "." + dname + ".lwt")
        r = subprocess.run([stk, "export", "--in", model_dir, "--out", out, "--dtype", dname],
                           capture_output=True, text=True)
        if r.returncode != 0 and dname in BLOCK_BYTES and "whole blocks of 32" in r.stderr:
            odd = [k for k, v in state.items() if v.ndim >= 2 and v.shape[-1] % 32]  # refused: rows not whole blocks
            if not odd:
                fail(f"stk export {dname} refused a model whose rows are whole blocks: {r.stderr}")
            print(f"{model_dir}: {dname} refused ({odd[0]} has rows of {state[odd[0]].shape[-1]})")
            continue
        if r.returncode != 0:
            fail(f"stk export {dname}: {r.stderr}")
        h, tensors = read_lwt(out)
        if h["dtype"] != dname:
            fail(f"{out}: dtype")
        if h["version"] != (1 if dname == "float32" else 2):
            fail(f"{out}: version {h['version']} for {dname}")
        names = set()
        for t in tensors:
            names.add(t["name"])
            src_name = t["name"][len("transformer."):] if gpt2 else t["name"]
            if src_name not in state:
                fail(f"{out}: {t['name']} is not a tensor of the checkpoint")
            src = state[src_name]
            if gpt2 and src.ndim == 2 and src_name.startswith("h.") and src_name.endswith(".weight"):
                src = src.T  # Conv1D [in, out] -> [out, in]
            src = np.ascontiguousarray(src).reshape(-1)
            if tuple(t["shape"]) != tuple(np.ascontiguousarray(src).shape) and t["n"] != src.size:
                fail(f"{t['name']}: shape")
            want = dname if len(t["shape"]) >= 2 else "float32"
            if t["dtype"] != want:
                fail(f"{t['name']}: dtype {t['dtype']}, expected {want}")
            got = values(t)
            f = fields(t) if t["dtype"] not in BLOCK_BYTES else None
            if t["dtype"] in BLOCK_BYTES:
                ok = np.array_equal(t["raw"], block_quantise(t["dtype"], src))
                err = np.abs(got - src).reshape(-1, 32).max(axis=1)
                step = np.abs(got).reshape(-1, 32).max(axis=1) / (8 if t["dtype"] == "q4_0" else 127)
                if ok and np.any(err > step * 1.0001 + 1e-30):
                    fail(f"{t['name']} {dname}: a block's error beyond its step")
            elif t["dtype"] == "float32":
                ok = np.array_equal(got.view(np.uint32), src.astype(np.float32).view(np.uint32))
            elif t["dtype"] == "float16":
                ok = np.array_equal(f.astype(np.uint16), src.astype(np.float16).view(np.uint16))
            elif t["dtype"] == "bfloat16":
                ok = np.array_equal(f, bf16_rne(src))
            else:
                codes, scale, zp = quantise(t["dtype"], src)
                ok = np.array_equal(f.astype(np.int64), codes) and scale == t["scale"] and zp == t["zp"]
                err = float(np.max(np.abs(got - src)))
                if ok and t["dtype"] in ("int8", "uint8") and err > float(t["scale"]) * 0.5001:
                    fail(f"{t['name']} {dname}: error {err} beyond half a step {t['scale']}")
            if not ok:
                fail(f"{out}: tensor {t['name']} ({t['dtype']}) differs from the source")
        # Every parameter of the checkpoint is there (buffers and the tied head excepted).
        for k, v in state.items():
            if k.endswith("attn.bias") and gpt2 or k.endswith("masked_bias") or "rotary_emb" in k or k.endswith(".attention.bias"):
                continue
            name = "transformer." + k if gpt2 else k
            if name not in names and not (k == "lm_head.weight" and h["tied_lm_head"]):
                fail(f"{out}: {name} missing")
        if gpt2 and (not h["tied_lm_head"] or h["tensor_count"] != 2 + 12 * h["config"]["n_layer"] + 2):
            fail(f"{out}: GPT-2 layout")
    print(f"{model_dir}: {len(DTYPES)} dtypes agree with PyTorch")


def main():
    global torch
    try:
        import torch
    except ImportError as e:  # pragma: no cover
        print(f"skipped: {e}")
        return 77
    stk = os.environ.get("STK_BIN")
    data = os.environ.get("STK_TEST_DATA", "tests/data")
    if not stk:
        fail("STK_BIN is not set")
    tmp = tempfile.mkdtemp(prefix="lwt_reader.")
    try:
        check_model(stk, os.path.join(data, "models", "gpt2"), True, tmp)
        check_model(stk, os.path.join(data, "models", "gpt_neox"), False, tmp)
        # gpt-oss with unquantised experts, as transformers writes them (bf16 safetensors): the
        # 3-D gate_up_proj [E, d, 2f] and down_proj [E, f, d] stored as the checkpoint holds them.
        root = os.environ.get("STK_SOURCE_ROOT", ".")
        check_model(stk, os.path.join(root, "tests", "fixtures", "families", "gpt_oss"), False, tmp)
        # The test vector of docs/format.md, as committed in the fuzz corpus, and the same file in
        # the layout stk wrote before version 2 (version 1, 224-byte entries).
        for name, legacy in (("test_vector.lwt", False), ("test_vector_v1_224.lwt", True)):
            h, ts = read_lwt(os.path.join(root, "fuzz", "corpus", "lwt", name), legacy)
            vals = {t["name"]: values(t).tolist() for t in ts}
            if vals != {"a": [1.0, -2.0], "b": [0.0, -1.0, 7.0]} or h["data_crc32"] != "483e3deb":
                fail(f"test vector {name}: {vals} {h}")
            print(f"test vector {name}: ok")
    finally:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
