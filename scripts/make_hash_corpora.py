#!/usr/bin/env python3
"""Seed corpora for fuzz/mphf.cc, fuzz/cuckoo.cc and fuzz/fst_tables.cc.

Usage: make_hash_corpora.py GENERATION_DIR [GENERATION_DIR ...]

Each GENERATION_DIR is an output directory written by the tokenizer stage (it has
arrays/tokenizer_fst.bin and arrays/T_1.bin ...); `meson test lookup tokenizer_stage` leaves such
directories under $TMPDIR/stk-test-tok-*/out; so does `stk convert --in bindings/testdata/tiny-gpt2
--out DIR --partial --allow-uncertified-tokenizer`, whose linear_mphf.bin goes in too.  Real payloads go in as seeds (kept < 64 KiB each),
plus a few structurally valid hand-made ones for the build modes.  Deterministic output.
"""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fuzz', 'corpus')
LIMIT = 64 * 1024


def payload(path):
    with open(path, 'rb') as f:
        return f.read()[128:]  # skip the 128-byte Sera array header


def put(target, name, data):
    if len(data) >= LIMIT:
        return
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return state, z ^ (z >> 31)


def main():
    for gi, gen in enumerate(sys.argv[1:]):
        arrays = os.path.join(gen, 'arrays')
        dec = payload(os.path.join(arrays, 'tokenizer_fst.bin'))
        l_tok = struct.unpack_from('<I', dec, 8)[0]
        for n in range(1, l_tok + 1):
            t = payload(os.path.join(arrays, 'T_%d.bin' % n))
            mb = struct.unpack_from('<Q', t, 16)[0]
            put('mphf', 'g%d_T%d.bin' % (gi, n), b'\x00' + t[64:64 + mb])
            put('fst_tables', 'g%d_T%d.bin' % (gi, n), bytes([n - 1]) + struct.pack('<I', len(dec)) + dec + t)
        linear = os.path.join(arrays, 'linear_mphf.bin')
        if os.path.exists(linear):
            put('mphf', 'g%d_linear.bin' % gi, b'\x00' + payload(linear))
    # Build modes: u64 keys (mphf) and (u64, u32) pairs (cuckoo) from a fixed splitmix64 stream.
    s = 1
    keys = []
    for _ in range(600):
        s, x = splitmix(s)
        keys.append(x)
    put('mphf', 'build_600_keys.bin', b'\x01' + b''.join(struct.pack('<Q', k) for k in keys))
    put('mphf', 'build_small_lambda.bin', b'\x07' + b''.join(struct.pack('<Q', k) for k in keys[:40]))
    put('mphf', 'build_windowed_small.bin', b'\x17' + b''.join(struct.pack('<Q', k) for k in keys[:120]))
    put('cuckoo', 'build_d2_b4.bin', b'\x0b' + b''.join(struct.pack('<QI', k, i) for i, k in enumerate(keys[:300])))
    put('cuckoo', 'build_d1_b1.bin', b'\x01' + b''.join(struct.pack('<QI', k, i) for i, k in enumerate(keys[:50])))
    # A structurally valid serialized cuckoo table (d=2, b=4, S=4, 4 buckets, 5 items in buckets,
    # 1 in the stash, none in the emergency slot), see docs/format.md "## Cuckoo table".
    nb, b, st = 4, 4, 4
    occ = bytes([0b0011, 0b0001, 0, 0b0011]) + bytes(4)
    kv = [0] * (nb * b)
    for slot in (0, 1, 4, 12, 13):
        kv[slot] = keys[slot]
    head = struct.pack('<IIIIQQQIIQII', 0x4B434B53, 2, b, st, nb, 0, 6, 1, 0, 0, 0, 0)
    body = occ + b''.join(struct.pack('<Q', k) for k in kv) + b''.join(struct.pack('<I', i) for i in range(nb * b))
    stash = struct.pack('<QQQQ', keys[99], 0, 0, 0) + struct.pack('<IIII', 7, 0, 0, 0)
    put('cuckoo', 'serialized_d2_b4.bin', b'\x00' + head + body + stash)


if __name__ == '__main__':
    main()
