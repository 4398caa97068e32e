#!/usr/bin/env python3
"""Seed corpus of fuzz/linear_arrays.cc from a published generation's linear arrays.

usage: make_linear_corpus.py <generation dir> <corpus dir> <name>
Writes <name>.bin (the four payloads framed as the target reads them) and two damaged copies:
<name>_short_mphf.bin (the MPHF payload cut by 9 bytes) and <name>_c_off_by_one.bin (C + 1).
Made with: stk convert --in bindings/testdata/tiny-gpt2 --out /tmp/g --partial, then this script.
"""
import os, struct, sys

gen, corpus, name = sys.argv[1:4]
def payload(n):
    with open(os.path.join(gen, "arrays", n), "rb") as f:
        return f.read()[128:]
mphf, keys, weights, delta = (payload(n) for n in ("linear_mphf.bin", "linear_keys.bin", "linear_weights.bin", "cuckoo_delta.bin"))
c = len(keys) // 8
def frame(m, d, c_, k, w):
    return struct.pack("<III", len(m), len(d), c_) + m + d + k + w
os.makedirs(corpus, exist_ok=True)
out = {name: frame(mphf, delta, c, keys, weights),
       name + "_short_mphf": frame(mphf[:-9], delta, c, keys, weights),
       name + "_c_off_by_one": frame(mphf, delta, c + 1, keys + b"\0" * 8, weights + b"\0" * 4)}
for n, b in out.items():
    with open(os.path.join(corpus, n + ".bin"), "wb") as f:
        f.write(b)
