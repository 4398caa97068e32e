#!/usr/bin/env python3
"""Writes a GPT-2 of width 8 (narrower than the default overlay rank 12) into DIR: the tokenizer
files of bindings/testdata/tiny-gpt2, its config with n_embd 8, and F32 weights drawn from a
fixed LCG.  Plain Python (no numpy): safetensors is an 8-byte header length, a JSON header, data.
Usage: narrow_model.py SOURCE_ROOT DIR"""
import json, os, shutil, struct, sys

src, out = sys.argv[1], sys.argv[2]
tiny = os.path.join(src, "bindings", "testdata", "tiny-gpt2")
os.makedirs(out, exist_ok=True)
for f in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(tiny, f), out)
cfg = json.load(open(os.path.join(tiny, "config.json")))
d, v, p, L = 8, cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
cfg["n_embd"] = d
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
shapes = {"wte.weight": [v, d], "wpe.weight": [p, d], "ln_f.weight": [d], "ln_f.bias": [d]}
for l in range(L):
    b = f"h.{l}."
    shapes.update({b + "ln_1.weight": [d], b + "ln_1.bias": [d], b + "ln_2.weight": [d], b + "ln_2.bias": [d],
                   b + "attn.c_attn.weight": [d, 3 * d], b + "attn.c_attn.bias": [3 * d],
                   b + "attn.c_proj.weight": [d, d], b + "attn.c_proj.bias": [d],
                   b + "mlp.c_fc.weight": [d, 4 * d], b + "mlp.c_fc.bias": [4 * d],
                   b + "mlp.c_proj.weight": [4 * d, d], b + "mlp.c_proj.bias": [d]})
state = 20261125
def draw():
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    return ((state >> 11) / 2**53 - 0.5) * 0.2
header, data = {}, b""
for name in sorted(shapes):
    n = 1
    for x in shapes[name]:
        n *= x
    vals = [1.0 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight" else draw()
            for _ in range(n)]
    raw = struct.pack("<%df" % n, *vals)
    header[name] = {"dtype": "F32", "shape": shapes[name], "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
