#!/usr/bin/env python3
"""An independent check of docs/format.md, "PRNG streams" and "ffn_collapse digest": plain
Python (struct, hashlib, math), written from the docs alone, no numpy.

Given a generation converted from bindings/testdata/tiny-gpt2 with --topl 16 (every entry of the
FFN collapse in the base: no delta) and that model directory, it
  1. checks the documented test vectors of mix64;
  2. regenerates prf_W.bin (stream 3, Gaussian i * d_model + j, times sqrt(D_l[j]), rounded
     to f32) from W_K and compares every bit;
  3. regenerates peer_scores.bin (stream 0x108, output h) and compares every byte;
  4. recomputes the ffn_collapse stage digest (crc32c and sha256_low64) from linear_keys.bin,
     linear_weights.bin and the weights' S ranks, and compares it with the manifest's stage table.
Usage: prng_reference.py STK MODEL_DIR   (converts into a temporary root itself)."""
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

from crc32c_reference import crc32c  # tests/: bitwise, from the definition

M64 = (1 << 64) - 1
G = 0x9E3779B97F4A7C15


def splitmix64_next(state):
    state = (state + G) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def mix64(x):
    return splitmix64_next(x)[1]


def stream_seed(master, module, layer):
    return mix64(master ^ mix64(((module << 32) | layer) & M64))


def output(seed, k):
    return mix64((seed + k * G) & M64)


def unit(x):
    return (x >> 11) * 2.0 ** -53


def sincos_2pi(v):
    # The exact reduction of docs/format.md: t = 4v, n = round-half-even(t), w = t - n, x = w pi/2.
    t = 4.0 * v
    n = round(t)  # Python's round is half-to-even
    x = (t - n) * (math.pi / 2)
    s, c = math.sin(x), math.cos(x)
    q = n % 4
    return [(s, c), (c, -s), (-s, -c), (-c, s)][q]


def gaussian(seed, k):
    p = k // 2
    u = min(max(unit(output(seed, 2 * p)), 2.0 ** -52), 1 - 2.0 ** -52)
    v = unit(output(seed, 2 * p + 1))
    s, c = sincos_2pi(v)
    r = math.sqrt(-2.0 * math.log(u))
    return r * c if k % 2 == 0 else r * s


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for name, t in h.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        lo, hi = t["data_offsets"]
        count = (hi - lo) // 4
        out[name] = (t["shape"], struct.unpack("<%df" % count, b[8 + n + lo:8 + n + hi]))
    return out


def read_array(path):
    b = open(path, "rb").read()
    return b[:128], b[128:]


def manifest_stage(manifest_bytes, stage):
    """The (crc32c, sha256_low64) of stage 1..10 in the manifest's stage table: 10 entries of 16
    bytes (u16 stage, u16 state, u32 crc32c, u64 sha256_low64) found by their stage numbers."""
    b = manifest_bytes
    for off in range(0, len(b) - 160, 4):
        ok = all(struct.unpack_from("<H", b, off + 16 * i)[0] == i + 1 for i in range(10))
        if ok:
            _, _, crc, low = struct.unpack_from("<HHIQ", b, off + 16 * (stage - 1))
            return crc, low
    raise AssertionError("no stage table")


def main():
    stk, model = sys.argv[1], sys.argv[2]
    # 1. Test vectors.
    assert mix64(0) == 0xE220A8397B1DCDAF, hex(mix64(0))
    assert mix64(1) == 0x910A2DEC89025CC1, hex(mix64(1))
    cfg = json.load(open(os.path.join(model, "config.json")))
    d, L = cfg["n_embd"], cfg["n_layer"]
    with tempfile.TemporaryDirectory(prefix="stk-prng-") as tmp:
        root = os.path.join(tmp, "root")
        subprocess.run([stk, "convert", model, root, "--topl", str(d)], check=True, stderr=subprocess.DEVNULL)
        name = open(os.path.join(root, "CURRENT")).read().split()[0]
        gen = os.path.join(root, "generations", name)
        w = read_safetensors(os.path.join(model, "model.safetensors"))

        # 2. prf_W: W_K of GPT-2 is columns d..2d of the Conv1D c_attn.weight [d, 3d] (HF layout
        #    [d_kv, d_model]: W_K[i, j] = c_attn.weight[j, d + i]).
        hdr, payload = read_array(os.path.join(gen, "arrays", "prf_W.bin"))
        Lh, r, dm = struct.unpack_from("<QQQ", hdr, 8)
        assert (Lh, dm) == (L, d), (Lh, r, dm)
        stored = struct.unpack("<%dI" % (L * r * d), payload)
        differ = 0
        for l in range(L):
            shape, c_attn = w["h.%d.attn.c_attn.weight" % l]
            D = []
            for j in range(d):
                acc = 0.0
                for i in range(d):  # rows of W_K in order, each square exact in double
                    x = float(c_attn[j * 3 * d + d + i])
                    acc += x * x
                m = acc / d
                D.append(m if m > 1e-8 else 1e-8)
            sq = [math.sqrt(x) for x in D]
            seed = stream_seed(0, 3, l)
            for i in range(r):
                for j in range(d):
                    want = f32_bits(gaussian(seed, i * d + j) * sq[j])
                    differ += want != stored[(l * r + i) * d + j]
        assert differ == 0, "prf_W: %d of %d f32 values differ" % (differ, L * r * d)

        # 3. peer_scores: q8_8 128 + (output h mod 5) - 2 of stream (0x108, 0).
        hdr, payload = read_array(os.path.join(gen, "arrays", "peer_scores.bin"))
        H = len(payload) // 2
        seed = stream_seed(0, 0x108, 0)
        want = struct.pack("<%dh" % H, *[128 + output(seed, h) % 5 - 2 for h in range(H)])
        assert payload == want, "peer_scores differ"

        # 4. The ffn_collapse digest: keys and values from linear_keys.bin / linear_weights.bin,
        #    ordered by (unit, column, sign, S rank); no delta at top-L = d_model.
        _, kb = read_array(os.path.join(gen, "arrays", "linear_keys.bin"))
        _, vb = read_array(os.path.join(gen, "arrays", "linear_weights.bin"))
        C = len(kb) // 8
        keys = struct.unpack("<%dQ" % C, kb)
        vals = vb[:4 * C]
        value_of = {keys[i]: vals[4 * i:4 * i + 4] for i in range(C)}
        assert C == L * 2 * d * d, C
        order = []
        for u in range(L):  # dense: one unit per layer
            _, fc = w["h.%d.mlp.c_fc.weight" % u]    # [d, 4d] = W1^T
            _, pr = w["h.%d.mlp.c_proj.weight" % u]  # [4d, d] = W2^T
            hdim = 4 * d
            for j in range(d):
                S = []
                for i in range(d):
                    acc = 0.0
                    for h in range(hdim):
                        acc += abs(pr[h * d + i]) * abs(fc[j * hdim + h])
                    S.append((-acc, i))
                ranked = [i for _, i in sorted(S)]
                for s in (0, 1):
                    for i in ranked:
                        order.append((s << 63) | (u << 48) | (i << 24) | j)
        assert sorted(order) == sorted(keys), "the base keys are not every (unit, sign, i, j)"
        stream = b"stk.ffn_collapse.v1\0" + struct.pack("<QQ", C, 0)
        stream += b"".join(struct.pack("<Q", k) for k in order)
        stream += b"".join(value_of[k] for k in order)
        names = set(os.listdir(os.path.join(gen, "arrays")))
        if "linear_bias.bin" in names:
            hdr, _ = read_array(os.path.join(gen, "arrays", "linear_bias.bin"))
            stream += b"linear_bias.bin\0" + hdr[:120] + bytes(8)  # header_crc fed as zeros
        crc = crc32c(stream)
        low64 = struct.unpack("<Q", hashlib.sha256(stream).digest()[:8])[0]
        mcrc, mlow = manifest_stage(open(os.path.join(gen, "sera_manifest.bin"), "rb").read(), 5)
        assert (crc, low64) == (mcrc, mlow), "ffn_collapse digest: recomputed %08x %016x, manifest %08x %016x" % (
            crc, low64, mcrc, mlow)
    print("ok: mix64 vectors; prf_W (%d values), peer_scores (%d), ffn_collapse digest %08x %016x recomputed from the docs"
          % (L * r * d, H, crc, low64))


if __name__ == "__main__":
    main()
