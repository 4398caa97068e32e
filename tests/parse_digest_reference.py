#!/usr/bin/env python3
"""An independent reference for the parse_tensors digest (docs/format.md, "parse_tensors digest"),
written from that section alone, in plain Python (no numpy): reads the llama fixture's safetensors
shards (BF16) and llama_f32's single file (F32), builds the canonical stream and prints
crc32c and sha256_low64.  tests/meson.build runs it and compares with the values pinned in
tests/test_parse_tensors.cc.

  python3 tests/parse_digest_reference.py tests/data/models/llama  ->  975b5e2d a678e4ee2ed614fa
  python3 tests/parse_digest_reference.py DIR --expect CRC SHA     (exit 1 on a mismatch)
"""
import glob
import hashlib
import json
import os
import struct
import sys

from crc32c_reference import crc32c  # tests/: bitwise, from the definition

# Role numbers (docs/format.md) and, per streamed tensor of a Llama layout, its record fields.
EMB, Q, K, V, O, W1, W2, LN_G, ROPE, W3, LM_HEAD = 0, 1, 2, 3, 4, 5, 6, 9, 12, 13, 20
SLOT_NONE, SLOT_ATTN, SLOT_FFN, SLOT_FINAL = 0, 1, 2, 3
LAYER_TENSORS = [  # name suffix, role, norm slot; the order inside a unit: role, then slot
    ("self_attn.q_proj.weight", Q, SLOT_NONE),
    ("self_attn.k_proj.weight", K, SLOT_NONE),
    ("self_attn.v_proj.weight", V, SLOT_NONE),
    ("self_attn.o_proj.weight", O, SLOT_NONE),
    ("mlp.gate_proj.weight", W1, SLOT_NONE),
    ("mlp.down_proj.weight", W2, SLOT_NONE),
    ("input_layernorm.weight", LN_G, SLOT_ATTN),
    ("post_attention_layernorm.weight", LN_G, SLOT_FFN),
    ("self_attn.rotary_emb.inv_freq", ROPE, SLOT_NONE),
    ("mlp.up_proj.weight", W3, SLOT_NONE),
]
CHUNK = 65536


def read_tensors(model_dir):
    """name -> (shape, list of f32 bit patterns)"""
    out = {}
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        blob = open(path, "rb").read()
        n = struct.unpack_from("<Q", blob, 0)[0]
        header = json.loads(blob[8:8 + n])
        base = 8 + n
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            a, b = meta["data_offsets"]
            raw = blob[base + a:base + b]
            if meta["dtype"] == "BF16":
                bits = [h << 16 for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
            elif meta["dtype"] == "F32":
                bits = list(struct.unpack("<%dI" % (len(raw) // 4), raw))
            else:
                raise SystemExit("%s: dtype %s not handled by this reference" % (name, meta["dtype"]))
            out[name] = (meta["shape"], bits)
    return out


def f16_bits(x):
    """binary16 pattern of an f32 bit pattern if exact (never for NaN), else None."""
    sign, e, m = (x >> 16) & 0x8000, (x >> 23) & 0xFF, x & 0x7FFFFF
    if e == 0xFF:
        return None if m else sign | 0x7C00
    if e == 0:
        return None if m else sign
    E = e - 127
    if E > 15 or E < -24:
        return None
    if E >= -14:
        return None if m & 0x1FFF else sign | (E + 15) << 10 | m >> 13
    full, sh = m | 0x800000, -E - 1
    return None if full & ((1 << sh) - 1) else sign | full >> sh


def chunk_digest(bits):
    if all(b & 0xFFFF == 0 for b in bits):
        payload = b"B" + struct.pack("<%dH" % len(bits), *[b >> 16 for b in bits])
    else:
        halves = [f16_bits(b) for b in bits]
        if all(h is not None for h in halves):
            payload = b"H" + struct.pack("<%dH" % len(halves), *halves)
        else:
            payload = b"F" + struct.pack("<%dI" % len(bits), *bits)
    return hashlib.sha256(payload).digest()


def record(role, slot, layer, shape):
    rank = len(shape)
    d0, d1 = shape[0], shape[1] if rank == 2 else 1
    n = d0 * d1
    return struct.pack("<BBBBiiIQQQ", role, slot, rank, 0, layer, -1, 0, d0, d1, n)


def main():
    model_dir = sys.argv[1]
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    t = read_tensors(model_dir)
    stream = [("model.embed_tokens.weight", EMB, SLOT_NONE, -1)]
    for L in range(cfg["num_hidden_layers"]):
        stream += [("model.layers.%d.%s" % (L, s), r, sl, L) for s, r, sl in LAYER_TENSORS]
    stream += [("model.norm.weight", LN_G, SLOT_FINAL, -1), ("lm_head.weight", LM_HEAD, SLOT_NONE, -1)]
    data = b"stk.parse_tensors.v2\0" + struct.pack("<Q", len(stream))
    for name, role, slot, layer in stream:
        shape, bits = t[name]
        k = (len(bits) + CHUNK - 1) // CHUNK
        data += record(role, slot, layer, shape) + struct.pack("<Q", k)
        for c in range(k):
            data += chunk_digest(bits[c * CHUNK:(c + 1) * CHUNK])
    sha = hashlib.sha256(data).digest()
    got = "%08x %016x" % (crc32c(data), struct.unpack_from("<Q", sha, 0)[0])
    print(got)
    if len(sys.argv) > 2 and sys.argv[2] == "--expect":
        want = " ".join(sys.argv[3:5])
        if got != want:
            print("MISMATCH: expected %s" % want)
            sys.exit(1)


if __name__ == "__main__":
    main()
