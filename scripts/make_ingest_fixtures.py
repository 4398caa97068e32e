#!/usr/bin/python3
"""Writes the checkpoint-reader fixtures under tests/data/ingest/ (small: a few KB each).

Run with Debian's python (it has torch): /usr/bin/python3 scripts/make_ingest_fixtures.py

- safetensors/: files written by an independent writer (this script, struct + json), covering
  every dtype of the format, a scalar and an empty tensor, and a two-shard checkpoint with its
  model.safetensors.index.json.
- torch/: files written by torch.save itself (the real zip format), a DEFLATED re-zip, a
  sharded pytorch_model.bin pair, the legacy format, and hostile archives (a pickle that would
  run os.system, entry names with ../ or an absolute path, a storage missing from the archive).
- expected.json: for every tensor of every fixture (and of tests/data/third_party/tensors), its values
  as f32 bit patterns (u32), computed here independently (numpy / torch.load / bit formulas),
  NaN as null.

The output is deterministic: rerunning it rewrites identical bytes except for torch's random
serialization_id entry (torch >= 1.13), which the readers ignore.
"""
import collections
import io
import json
import math
import os
import pickle
import struct
import sys
import zipfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "ingest")
SHARED = os.path.join(ROOT, "tests", "data", "third_party", "tensors")
MARKER = "/tmp/stk-unsafe-pickle-marker"

expected = {}


# ---------------------------------------------------------------------------------------------
# An independent safetensors writer and reader (struct + json only).

def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes) in data order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, raw in tensors:
            f.write(raw)


def f16_bits_to_f32(b):
    s = -1.0 if b & 0x8000 else 1.0
    e = (b >> 10) & 0x1F
    m = b & 0x3FF
    if e == 0x1F:
        return None if m else s * math.inf
    if e == 0:
        return s * m * 2.0 ** -24
    return s * (1 + m / 1024) * 2.0 ** (e - 15)


def bf16_bits_to_f32(b):
    return float(np.frombuffer(struct.pack("<I", b << 16), dtype="<f4")[0])


def e4m3_bits_to_f32(b):
    s = -1.0 if b & 0x80 else 1.0
    e = (b >> 3) & 0xF
    m = b & 0x7
    if e == 0xF and m == 0x7:
        return None
    if e == 0:
        return s * m * 2.0 ** -9
    return s * (1 + m / 8) * 2.0 ** (e - 7)


def e5m2_bits_to_f32(b):
    return f16_bits_to_f32(b << 8)


def as_f32_int(v):
    """An integer to the nearest f32 (ties to even) without a double rounding through f64."""
    if v == 0:
        return 0
    sign = 0x80000000 if v < 0 else 0
    a = abs(v)
    e = a.bit_length() - 1
    if e > 23:
        shift = e - 23
        q, r = a >> shift, a & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        a = q << shift
    return sign | int(np.float32(float(a)).view(np.uint32))


def as_f32(x):
    """The f32 bit pattern of x (round to nearest even), None for NaN (payloads not compared)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    with np.errstate(over="ignore"):
        return int(np.array([x], dtype=np.float64).astype(np.float32).view(np.uint32)[0])


NP = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "<i1",
      "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "<u1"}


def read_safetensors_values(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for name, info in h.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        dt = info["dtype"]
        if dt in NP:
            vals = [as_f32(float(v)) if dt[0] == "F" else as_f32_int(int(v)) for v in np.frombuffer(raw, dtype=NP[dt])]
        elif dt == "F16":
            vals = [as_f32(f16_bits_to_f32(v)) for v in struct.unpack("<%dH" % (len(raw) // 2), raw)]
        elif dt == "BF16":
            vals = [as_f32(bf16_bits_to_f32(v)) for v in struct.unpack("<%dH" % (len(raw) // 2), raw)]
        elif dt == "F8_E4M3":
            vals = [as_f32(e4m3_bits_to_f32(v)) for v in raw]
        elif dt == "F8_E5M2":
            vals = [as_f32(e5m2_bits_to_f32(v)) for v in raw]
        elif dt == "BOOL":
            vals = [as_f32(1.0 if v else 0.0) for v in raw]
        else:
            raise ValueError(dt)
        out[name] = {"dtype": dt, "shape": info["shape"], "values": vals}
    return out


def make_safetensors():
    d = os.path.join(OUT, "safetensors")
    os.makedirs(d, exist_ok=True)
    u16 = lambda xs: struct.pack("<%dH" % len(xs), *xs)
    tensors = [
        ("bf16", "BF16", [2, 3], u16([0x3F80, 0xC049, 0x0001, 0x7F80, 0x8000, 0x7F7F])),
        ("bool", "BOOL", [4], bytes([1, 0, 1, 1])),
        ("empty", "F32", [0, 3], b""),
        ("f16", "F16", [8], u16([0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFC00, 0x7E00, 0x8000, 0x3C00])),
        ("f32", "F32", [2, 2], struct.pack("<4f", 1.5, -2.25, 1e-45, 3.4028234663852886e38)),
        ("f64", "F64", [3], struct.pack("<3d", -1.5, 0.1, 1e300)),
        ("f8_e4m3", "F8_E4M3", [8], bytes([0x01, 0x07, 0x08, 0x7E, 0x7F, 0xFE, 0x38, 0x80])),
        ("f8_e5m2", "F8_E5M2", [6], bytes([0x01, 0x04, 0x7B, 0x7C, 0x3C, 0xFD])),
        ("i16", "I16", [2], struct.pack("<2h", -32768, 32767)),
        ("i32", "I32", [2], struct.pack("<2i", -2147483648, 16777217)),
        ("i64", "I64", [3], struct.pack("<3q", -(2 ** 53) - 1, 2 ** 40, -1)),
        ("i8", "I8", [2], struct.pack("<2b", -128, 127)),
        ("scalar", "F32", [], struct.pack("<f", 7.0)),
        ("u16", "U16", [1], struct.pack("<H", 65535)),
        ("u32", "U32", [1], struct.pack("<I", 4294967295)),
        ("u64", "U64", [2], struct.pack("<2Q", 2 ** 64 - 1, 12345)),
        ("u8", "U8", [2], bytes([0, 255])),
    ]
    p = os.path.join(d, "all_dtypes.safetensors")
    write_safetensors(p, tensors, {"format": "pt", "writer": "make_ingest_fixtures.py"})
    expected["safetensors/all_dtypes.safetensors"] = read_safetensors_values(p)

    # Two shards and their index.
    sd = os.path.join(d, "sharded")
    os.makedirs(sd, exist_ok=True)
    f32 = lambda xs: struct.pack("<%df" % len(xs), *xs)
    shard1 = [("model.embed.weight", "F32", [2, 2], f32([1, 2, 3, 4])),
              ("model.layers.0.w", "BF16", [2], u16([0x3F80, 0x4000]))]
    shard2 = [("lm_head.weight", "F16", [3], u16([0x3C00, 0x4000, 0x4200])),
              ("model.layers.1.w", "F32", [1], f32([-8.5]))]
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    wm = {}
    for shard, fname in zip([shard1, shard2], names):
        sp = os.path.join(sd, fname)
        write_safetensors(sp, shard, {"format": "pt"})
        for t in shard:
            wm[t[0]] = fname
        for k, v in read_safetensors_values(sp).items():
            expected.setdefault("safetensors/sharded", {})[k] = v
    with open(os.path.join(sd, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 24}, "weight_map": dict(sorted(wm.items()))}, f, indent=2)


# ---------------------------------------------------------------------------------------------
# torch.save fixtures

def torch_values(t):
    if t.dtype == torch.bool:
        return [as_f32(1.0 if v else 0.0) for v in t.flatten().tolist()]
    if not t.dtype.is_floating_point:
        return [as_f32_int(v) for v in t.flatten().tolist()]
    return [as_f32(v) for v in t.detach().to(torch.float64).flatten().tolist()]


TORCH_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
               torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
               torch.uint8: "U8", torch.bool: "BOOL"}


def record_torch(key, path, prefix=""):
    obj = torch.load(path, weights_only=True)
    out = expected.setdefault(key, {})

    def walk(o, pre):
        for k, v in o.items():
            if isinstance(v, dict):
                walk(v, pre + k + ".")
            else:
                out[pre + k] = {"dtype": TORCH_DTYPE[v.dtype], "shape": list(v.shape), "values": torch_values(v)}
    walk(obj, prefix)


def rezip(src, dst, method=zipfile.ZIP_DEFLATED, drop=None, rename=None, replace=None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=method) as zout:
        for info in zin.infolist():
            name = info.filename
            if drop and name.endswith(drop):
                continue
            data = zin.read(name)
            if replace and name.endswith(replace[0]):
                data = replace[1]
            if rename and name.endswith(rename[0]):
                name = rename[1]
            zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            zi.compress_type = method
            zout.writestr(zi, data)


class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


def make_torch():
    d = os.path.join(OUT, "torch")
    os.makedirs(d, exist_ok=True)
    g = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 4 - 1
    basic = collections.OrderedDict()
    basic["f32"] = g
    basic["f16"] = torch.tensor([0.5, -65504.0, 6.1035156e-05, 5.9604645e-08], dtype=torch.float16)
    basic["bf16"] = torch.tensor([1.0, -3.140625, 1e30, -0.0], dtype=torch.bfloat16)
    basic["f64"] = torch.tensor([0.1, -2.5], dtype=torch.float64)
    basic["i64"] = torch.tensor([-5, 0, 2 ** 40], dtype=torch.int64)
    basic["i32"] = torch.tensor([7, -7], dtype=torch.int32)
    basic["u8"] = torch.tensor([0, 200], dtype=torch.uint8)
    basic["bool"] = torch.tensor([True, False, True])
    basic["scalar"] = torch.tensor(3.5)
    basic["param"] = torch.nn.Parameter(torch.tensor([[1.0, 2.0]]))
    p = os.path.join(d, "basic.pt")
    torch.save(basic, p)
    record_torch("torch/basic.pt", p)

    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    views = collections.OrderedDict()
    views["base"] = base
    views["t"] = base.t()            # non-contiguous, shares the storage
    views["row"] = base[1]           # storage offset 4
    views["col"] = base[:, 2]        # offset 2, stride 4
    views["other"] = torch.tensor([9.0, 8.0])
    p = os.path.join(d, "views.pt")
    torch.save(views, p)
    record_torch("torch/views.pt", p)

    nested = {"model_state_dict": collections.OrderedDict([("w", torch.tensor([1.0, -1.0]))]), "epoch_w": torch.tensor([3])}
    p = os.path.join(d, "nested.pt")
    torch.save(nested, p)
    record_torch("torch/nested.pt", p)

    p = os.path.join(d, "deflated.pt")
    rezip(os.path.join(d, "basic.pt"), p)
    record_torch("torch/deflated.pt", p)

    sd = os.path.join(d, "sharded")
    os.makedirs(sd, exist_ok=True)
    s1 = collections.OrderedDict([("a.weight", torch.tensor([1.0, 2.0])), ("b.weight", torch.tensor([[3, 4]], dtype=torch.int64))])
    s2 = collections.OrderedDict([("c.weight", torch.tensor([0.25], dtype=torch.float16))])
    wm = {}
    for i, s in enumerate([s1, s2]):
        fname = "pytorch_model-%05d-of-00002.bin" % (i + 1)
        torch.save(s, os.path.join(sd, fname))
        for k in s:
            wm[k] = fname
        record_torch("torch/sharded", os.path.join(sd, fname))
    with open(os.path.join(sd, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 18}, "weight_map": wm}, f, indent=2)

    # What HF's save_pretrained writes: a module's state_dict (an OrderedDict carrying a _metadata
    # attribute, pickled with BUILD), parameters and a buffer.
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2), torch.nn.BatchNorm1d(2))
    with torch.no_grad():
        m[0].weight.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3) / 8)
        m[0].bias.copy_(torch.tensor([0.5, -0.5]))
    p = os.path.join(d, "module_state_dict.pt")
    torch.save(m.state_dict(), p)
    record_torch("torch/module_state_dict.pt", p)

    # A broadcast view (stride 0): real torch output, refused (a few bytes standing for many elements).
    torch.save({"e": torch.tensor([1.0, 2.0]).expand(3, 2)}, os.path.join(d, "expanded.pt"))

    legacy = collections.OrderedDict(basic)
    legacy["t"] = views["t"]
    legacy["col"] = views["col"]
    legacy["base"] = views["base"]
    p = os.path.join(d, "legacy.pt")
    torch.save(legacy, p, _use_new_zipfile_serialization=False)
    record_torch("torch/legacy.pt", p)

    # Hostile archives built from a real one.
    evil = pickle.dumps(collections.OrderedDict([("w", Evil())]), protocol=2)
    rezip(os.path.join(d, "basic.pt"), os.path.join(d, "malicious.pt"), zipfile.ZIP_STORED, replace=("data.pkl", evil))
    evil_eval = pickle.dumps({"w": Evil()}, protocol=4)  # STACK_GLOBAL form
    rezip(os.path.join(d, "basic.pt"), os.path.join(d, "malicious_proto4.pt"), zipfile.ZIP_STORED,
          replace=("data.pkl", evil_eval))
    rezip(os.path.join(d, "basic.pt"), os.path.join(d, "missing_storage.pt"), zipfile.ZIP_STORED, drop="data/0")
    rezip(os.path.join(d, "basic.pt"), os.path.join(d, "traversal.pt"), zipfile.ZIP_STORED,
          rename=("version", "basic/../../version"))
    rezip(os.path.join(d, "basic.pt"), os.path.join(d, "absolute.pt"), zipfile.ZIP_STORED,
          rename=("version", "/etc/version"))
    with zipfile.ZipFile(os.path.join(d, "absolute.pt")) as z:
        assert any(n.startswith("/") for n in z.namelist()), "zipfile stripped the leading /"


def patch_candle(dst, old, new):
    """candle_test.pt with one byte pattern of its data.pkl replaced (a hostile edit)."""
    src = os.path.join(SHARED, "candle_test.pt")
    with zipfile.ZipFile(src) as z:
        pkl = z.read("test/data.pkl")
    assert pkl.count(old) == 1, old
    rezip(src, dst, zipfile.ZIP_STORED, replace=("data.pkl", pkl.replace(old, new)))


def make_patched():
    d = os.path.join(OUT, "torch")
    # numel 8 -> 9: the storage entry (64 bytes) is too small for 9 int64.
    patch_candle(os.path.join(d, "storage_size_mismatch.pt"), b"cpuq\x07K\x08t", b"cpuq\x07K\x09t")
    # size (2, 4) -> (2, 5) with stride (4, 1): the view's last element (9) is outside the 8.
    patch_candle(os.path.join(d, "view_out_of_storage.pt"), b"K\x02K\x04\x86", b"K\x02K\x05\x86")
    # storage key '0' -> '7': no such entry.
    patch_candle(os.path.join(d, "unknown_storage_key.pt"), b"X\x01\x00\x00\x000q", b"X\x01\x00\x00\x007q")


def make_shared():
    for f in sorted(os.listdir(SHARED)):
        if f.endswith(".safetensors"):
            expected["shared/" + f] = read_safetensors_values(os.path.join(SHARED, f))
    for f in ["candle_test.pt", "candle_test_with_key.pt"]:
        record_torch("shared/" + f, os.path.join(SHARED, f))


def main():
    make_safetensors()
    make_torch()
    make_patched()
    make_shared()
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    if os.path.exists(MARKER):
        print("warning: %s exists (something executed a fixture pickle?)" % MARKER, file=sys.stderr)


if __name__ == "__main__":
    main()
