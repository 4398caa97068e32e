#!/usr/bin/env python3
"""Seed corpus of fuzz/bridge_arrays.cc from a published generation's bridge arrays.

usage: make_bridge_corpus.py <generation dir> <corpus dir> <name>
Writes <name>.bin (bridge_hubs.bin's payload framed as the target reads it: u32 rows, u32 tokens
= bridge_qDin.bin's rows, u8 W, payload) and damaged copies: <name>_short.bin (payload cut by 3
bytes), <name>_tokens_all.bin (tokens = rows: no context row), <name>_three_bits.bin (a context
row with a third bit).
Made with: stk convert --in bindings/testdata/tiny-gpt2 --out /tmp/g --partial, then this script.
"""
import os, struct, sys

gen, corpus, name = sys.argv[1:4]
def read(n):
    with open(os.path.join(gen, "arrays", n), "rb") as f:
        b = f.read()
    dims = struct.unpack_from("<5Q", b, 8)
    return dims, b[128:]
hdims, hubs = read("bridge_hubs.bin")
qdims, _ = read("bridge_qDin.bin")
rows, w, tokens = hdims[0], hdims[1], qdims[0]
def frame(r, t, w_, p):
    return struct.pack("<IIB", r, t, w_) + p
bad = bytearray(hubs)
bad[(rows - 1) * w * 8] ^= 0x80 if not (bad[(rows - 1) * w * 8] & 0x80) else 0x40
os.makedirs(corpus, exist_ok=True)
out = {name: frame(rows, tokens, w, hubs),
       name + "_short": frame(rows, tokens, w, hubs[:-3]),
       name + "_tokens_all": frame(rows, rows, w, hubs),
       name + "_three_bits": frame(rows, tokens, w, bytes(bad))}
for n, b in out.items():
    with open(os.path.join(corpus, n + ".bin"), "wb") as f:
        f.write(b)
