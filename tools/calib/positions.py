"""Each layer's FFN dictionary against its FFN on the original model's inputs, over held-out text,
with position 0 and positions 1.. reported apart (issue 39, item 11; docs/fidelity.md
"Calibrated conversions").

The model runs as `stk eval` runs it (transformers, float32, eager; each --text file cut into
contexts of --ctx tokens from position 0).  Hooks read every layer's MLP input x and output y in
the original forward (nothing swapped); each generation's dictionary is applied to the same x by
the reference runtime (stk_ffn_apply), and per layer the relative L2 sqrt(sum |y^ - y|^2 /
sum |y|^2) is summed over every token, over position 0 only, and over positions 1..  Deleting
the FFN (y^ = 0) is 1.0 on each.

  PYTHONPATH=python STK_LIBRARY=BUILD/libstk.so python tools/calib/positions.py --model MODEL \
      --gen data-free=ROOT --gen calibrated=CAL --text eval-english.txt --text eval-code.txt \
      --ctx 512 --contexts 1 [--json OUT.json] [--markdown]
"""
import argparse
import json
import math
import sys

import numpy as np
import torch

import stk
from stk import evaluation
from stk.runtime import ReferenceRuntime

PARTS = ("all", "pos0", "rest")


def measure(model, gens, texts, ctx, contexts):
    m, tok = evaluation._load(model)
    layers = evaluation._decoder_layers(m)
    ctxs = evaluation.contexts_of(tok, texts, ctx, contexts)
    opened = {name: stk.Generation(root) for name, root in gens}
    rts = {name: ReferenceRuntime(g) for name, g in opened.items()}
    # err2 / ref2 per (generation, layer, part)
    err = {(n, li, p): 0.0 for n in rts for li in range(len(layers)) for p in PARTS}
    ref = {(li, p): 0.0 for li in range(len(layers)) for p in PARTS}
    seen = {}
    hooks = [b.mlp.register_forward_hook(lambda mod, a, o, li=li: seen.__setitem__(li, (a[0][0], o[0])))
             for li, b in enumerate(layers)]
    try:
        with torch.no_grad():
            for _, ids in ctxs:
                seen.clear()
                m(torch.tensor([ids]), use_cache=False)
                for li in range(len(layers)):
                    x = seen[li][0].numpy().astype(np.float32)
                    y = seen[li][1].numpy().astype(np.float64)
                    yy = (y * y).sum(1)
                    ref[(li, "pos0")] += float(yy[0])
                    ref[(li, "rest")] += float(yy[1:].sum())
                    for n, rt in rts.items():
                        d = rt.ffn_apply(li, x).astype(np.float64) - y
                        dd = (d * d).sum(1)
                        err[(n, li, "pos0")] += float(dd[0])
                        err[(n, li, "rest")] += float(dd[1:].sum())
    finally:
        for h in hooks:
            h.remove()
        for g in opened.values():
            g.close()
    out = {"model": model, "texts": list(texts), "ctx": ctx, "contexts": len(ctxs), "layers": []}
    for li in range(len(layers)):
        ref[(li, "all")] = ref[(li, "pos0")] + ref[(li, "rest")]
        row = {"layer": li, "ffn_output_energy": {p: ref[(li, p)] / (len(ctxs) * (1 if p == "pos0" else ctx - 1 if p == "rest" else ctx))
                                                  for p in PARTS}}
        for n in rts:
            e = err[(n, li, "pos0")] + err[(n, li, "rest")]
            row[n] = {"all": math.sqrt(e / ref[(li, "all")]),
                      "pos0": math.sqrt(err[(n, li, "pos0")] / ref[(li, "pos0")]),
                      "rest": math.sqrt(err[(n, li, "rest")] / ref[(li, "rest")])}
        out["layers"].append(row)
    return out


def markdown(r, names):
    head = "| layer | " + " | ".join(f"{n}: all / position 0 / 1.." for n in names) + " | mean \\|y\\|^2 at position 0 / at 1.. |"
    lines = [head, "|---:|" + "---|" * (len(names) + 1)]
    for row in r["layers"]:
        cells = [f"{row[n]['all']:.3f} / {row[n]['pos0']:.3f} / {_b(row[n]['rest'])}" for n in names]
        en = row["ffn_output_energy"]
        lines.append(f"| {row['layer']} | " + " | ".join(cells) + f" | {en['pos0']:.3g} / {en['rest']:.3g} |")
    for what, f in (("median", lambda v: sorted(v)[len(v) // 2]), ("worst", max)):
        cells = []
        for n in names:
            cells.append(" / ".join(f"{f([row[n][p] for row in r['layers']]):.3f}" for p in PARTS))
        lines.append(f"| {what} | " + " | ".join(cells) + " | |")
    over = {n: sum(row[n]["rest"] > 1.0 for row in r["layers"]) for n in names}
    lines.append("")
    lines.append("Layers worse than deleting the FFN (rel L2 > 1) on positions 1..: "
                 + ", ".join(f"{n} {over[n]} of {len(r['layers'])}" for n in names) + ".")
    return "\n".join(lines)


def _b(v):
    return f"**{v:.3f}**" if v > 1.0 else f"{v:.3f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--gen", action="append", required=True, metavar="NAME=ROOT")
    p.add_argument("--text", action="append", required=True)
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--contexts", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args()
    gens = [tuple(g.split("=", 1)) for g in a.gen]
    r = measure(a.model, gens, a.text, a.ctx, a.contexts)
    r["gens"] = dict(gens)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    print(markdown(r, [n for n, _ in gens]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
