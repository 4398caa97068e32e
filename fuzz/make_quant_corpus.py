#!/usr/bin/env python3
"""Write the seed corpus of fuzz/quant_pairs.cc into fuzz/corpus/quant_pairs/ (stdlib only).

Each seed is the target's 9-byte control prefix (flags: 1 fp8, 2 mxfp4, 4 two shards, bits 3-7
the chunk cut; block rows, block cols as u16 LE; the first shard's length as u32 LE) and one or
two safetensors files, cut from the real-shaped fixtures: tests/fixtures/fp8/good (F8_E4M3 /
F8_E5M2 weights and their float32 scale_inv grids, made by transformers' own quantisation),
tests/fixtures/fp8/deepseek_v3 (DeepSeek-V3's tensor names) and tests/fixtures/mxfp4/packed
(gpt-oss MXFP4 blocks and scales).  Beside the well-formed pairs, one seed per hostile pairing
that tests/test_quant_pairs.cc refuses.  Every seed is well under 2 KB.

    python3 fuzz/make_quant_corpus.py
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fuzz", "corpus", "quant_pairs")
FIX = os.path.join(ROOT, "tests", "fixtures")


def read_st(path):
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n])
    data = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], data[s:e])
    return out


def st(tensors):
    """tensors: list of (name, dtype, shape, bytes), written in that order."""
    header, off = {}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def prefix(flags, br, bc, first_len=0, cut=11):
    return struct.pack("<BHHI", flags | (cut << 3), br, bc, first_len)


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def bf16(vals):
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)


def corner(t, rows, cols):
    _, shape, data = t
    return b"".join(data[r * shape[1]:r * shape[1] + cols] for r in range(rows))


def main():
    good = read_st(os.path.join(FIX, "fp8", "good", "model.safetensors"))
    ds_names = sorted(n for n, (dt, _, _) in read_st(os.path.join(FIX, "fp8", "deepseek_v3", "model.safetensors")).items()
                      if dt == "F8_E4M3")
    packed_path = os.path.join(FIX, "mxfp4", "packed.safetensors")
    with open(packed_path, "rb") as f:
        packed_bytes = f.read()
    packed = read_st(packed_path)
    scales = list(struct.unpack("<4f", good["b.weight_scale_inv"][2])) + list(struct.unpack("<4f", good["a.weight_scale_inv"][2]))
    w = ds_names[0]  # e.g. model.layers.1.mlp.down_proj.weight
    e4 = corner(good["b.weight"], 6, 10)  # [6, 10] of real e4m3 codes
    e5 = corner(good["c.weight"], 5, 7)   # [5, 7] of real e5m2 codes
    plain = ("model.norm.weight", "BF16", [4], bf16([1.0, -2.0, 0.5, 3.0]))
    down = "model.layers.0.mlp.experts.down_proj"
    blocks = packed[down + "_blocks"]   # U8 [3, 5, 1, 16]
    sc = packed[down + "_scales"]       # U8 [3, 5, 1]
    b1 = blocks[2][:5 * 16]             # expert 0: [5, 1, 16]
    s1 = sc[2][:5]

    seeds = {
        # fp8, well formed
        "fp8_e4m3_4x4": prefix(1, 4, 4) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [2, 3], f32(scales[:6])), plain]),
        "fp8_e5m2_bf16_scale": prefix(1, 3, 8, cut=17) + st([(w, "F8_E5M2", [5, 7], e5), (w + "_scale_inv", "BF16", [2, 1], bf16(scales[:2]))]),
        "fp8_block_128": prefix(1, 128, 128) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [1, 1], f32(scales[:1]))]),
        "fp8_two_weights": prefix(1, 2, 4, cut=5) + st([(ds_names[1], "F8_E4M3", [5, 7], e4[:35]), (ds_names[1] + "_scale_inv", "F32", [3, 2], f32(scales[:6])),
                                                        (w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [3, 3], f32(scales + scales[:1]))]),
        # fp8, hostile (tests/test_quant_pairs.cc fp8_refusals)
        "fp8_missing_scale": prefix(1, 4, 4) + st([(w, "F8_E4M3", [6, 10], e4)]),
        "fp8_orphan_scale": prefix(1, 4, 4) + st([(w + "_scale_inv", "F32", [2, 3], f32(scales[:6]))]),
        "fp8_scale_shape": prefix(1, 4, 4) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [3, 2], f32(scales[:6]))]),
        "fp8_scale_f16": prefix(1, 4, 4) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F16", [2, 3], bytes(range(12)))]),
        "fp8_weight_bf16": prefix(1, 4, 4) + st([(w, "BF16", [6, 10], e4 + e4), (w + "_scale_inv", "F32", [2, 3], f32(scales[:6]))]),
        "fp8_weight_rank1": prefix(1, 4, 4) + st([(w, "F8_E4M3", [60], e4), (w + "_scale_inv", "F32", [2, 3], f32(scales[:6]))]),
        "fp8_huge_rows": prefix(1, 128, 128) + st([(w, "F8_E4M3", [2**64 - 1, 0], b""), (w + "_scale_inv", "F32", [0, 0], b"")]),
        "fp8_block_0": prefix(1, 0, 128) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [1, 1], f32(scales[:1]))]),
        "fp8_nan_inf_scale": prefix(1, 4, 4) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [2, 3], f32([float("nan"), 1, 1, 1, 1, float("inf")]))]),
        # mxfp4, well formed
        "mxfp4_gpt_oss_packed": prefix(2, 0, 0) + packed_bytes,
        "mxfp4_expert0": prefix(2, 0, 0, cut=13) + st([(down + "_blocks", "U8", [5, 1, 16], b1), (down + "_scales", "U8", [5, 1], s1), plain]),
        "fp8_and_mxfp4": prefix(3, 4, 4) + st([(w, "F8_E4M3", [6, 10], e4), (w + "_scale_inv", "F32", [2, 3], f32(scales[:6])),
                                               (down + "_blocks", "U8", [5, 1, 16], b1), (down + "_scales", "U8", [5, 1], s1)]),
        # mxfp4, hostile (tests/test_quant_pairs.cc mxfp4_refusals, tests/test_mxfp4.cc)
        "mxfp4_no_scales": prefix(2, 0, 0) + st([(down + "_blocks", "U8", [5, 1, 16], b1)]),
        "mxfp4_no_blocks": prefix(2, 0, 0) + st([(down + "_scales", "U8", [5, 1], s1)]),
        "mxfp4_blocks_i8": prefix(2, 0, 0) + st([(down + "_blocks", "I8", [5, 1, 16], b1), (down + "_scales", "U8", [5, 1], s1)]),
        "mxfp4_scales_f16": prefix(2, 0, 0) + st([(down + "_blocks", "U8", [5, 1, 16], b1), (down + "_scales", "F16", [5, 1], s1 + s1)]),
        "mxfp4_rank2": prefix(2, 0, 0) + st([(down + "_blocks", "U8", [5, 16], b1), (down + "_scales", "U8", [5], s1)]),
        "mxfp4_width8": prefix(2, 0, 0) + st([(down + "_blocks", "U8", [5, 2, 8], b1), (down + "_scales", "U8", [5, 2], s1 + s1)]),
        "mxfp4_short_scales": prefix(2, 0, 0) + st([(down + "_blocks", "U8", [5, 1, 16], b1), (down + "_scales", "U8", [4, 1], s1[:4])]),
        "mxfp4_huge_groups": prefix(2, 0, 0) + st([(down + "_blocks", "U8", [0, 2**59, 16], b""), (down + "_scales", "U8", [0, 2**59], b"")]),
    }
    # Two shards: the fp8 scale beside its weight's shard (accepted); MXFP4 blocks and scales
    # apart (refused).
    a = st([(w, "F8_E4M3", [6, 10], e4)])
    seeds["fp8_scale_other_shard"] = prefix(5, 4, 4, len(a)) + a + st([(w + "_scale_inv", "F32", [2, 3], f32(scales[:6]))])
    a = st([(down + "_blocks", "U8", [5, 1, 16], b1)])
    seeds["mxfp4_scales_other_shard"] = prefix(6, 0, 0, len(a)) + a + st([(down + "_scales", "U8", [5, 1], s1)])

    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds.items():
        assert len(data) < 2048, name
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), os.path.relpath(OUT, ROOT)))


if __name__ == "__main__":
    main()
