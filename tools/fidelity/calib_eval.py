"""The end-to-end rows of docs/fidelity.md "Calibrated conversions": a calibrated generation's FFN
dictionary and PRF attention, each swapped in at one layer beside that module deleted (`--zero`),
then every FFN, every attention and both, on the held-out texts (scripts/eval_texts.py).

  python tools/fidelity/calib_eval.py --model MODEL --gen ROOT --layers 5,15,25 --texts DIR --out OUT.json
  python tools/fidelity/calib_eval.py --markdown OUT.json [--free FORMAT.json]

Rows already in OUT.json are kept (a rerun continues).  --markdown prints the table; --free adds
the data-free generation's row for the same swap from eval_tables.py's format.json where it has one.
"""
import argparse
import json
import os
import sys


def rows_spec(layers):
    spec = []
    for layer in layers:
        spec += [(f"ffn:{layer}", False), (f"ffn:{layer}", True), (f"prf:{layer}", False), (f"prf:{layer}", True)]
    return spec + [("ffn", False), ("prf", False), ("overlays", False), ("ffn,overlays", False)]


def layers_summary(r):
    v = [e["rel_l2"] for e in r["layers"]]
    if len(v) == 1:
        return f"{v[0]:.3f}"
    v.sort()
    return f"median {v[len(v) // 2]:.3f} ({v[0]:.3f}-{v[-1]:.3f})"


def ppl(x):
    return f"{x:.3f}" if x < 1e4 else f"{x:.2e}"


def markdown(rows, free):
    out = ["| swap | perplexity | KL mean | top-1 agreement | module rel L2 | data-free generation: perplexity, top-1 |",
           "|---|---:|---:|---:|---|---|"]
    for r in rows:
        name = f"`{r['swap']}`" + (" deleted (`--zero`)" if r["zero"] else " calibrated")
        f = free.get((r["swap"], r["zero"]))
        fcol = "" if r["zero"] or f is None else f"{ppl(f['perplexity_swapped'])}, {f['top1_agreement']:.3f}"
        out.append(f"| {name} | {ppl(r['perplexity_swapped'])} | {r['kl_mean']:.4f} | {r['top1_agreement']:.3f} | "
                   f"{layers_summary(r)} | {fcol} |")
    r0 = rows[0]
    head = (f"{r0['contexts']} contexts of {r0['ctx']} tokens ({r0['tokens_scored']} scored tokens); original "
            f"perplexity {r0['perplexity_original']:.3f}.")
    return head + "\n\n" + "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--gen")
    ap.add_argument("--layers", default="")
    ap.add_argument("--texts")
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    ap.add_argument("--free")
    a = ap.parse_args()
    if a.markdown:
        free = {}
        if a.free:
            for r in json.load(open(a.free)):
                free[(r["swap"], r["zero"])] = r
        print(markdown(json.load(open(a.markdown)), free))
        return
    from stk import evaluation
    texts = [os.path.join(a.texts, "eval-english.txt"), os.path.join(a.texts, "eval-code.txt")]
    rows = json.load(open(a.out)) if os.path.exists(a.out) else []
    done = {(r["swap"], r["zero"]) for r in rows}
    for swap, zero in rows_spec([int(x) for x in a.layers.split(",") if x]):
        if (swap, zero) in done:
            continue
        print(f"{swap}{' --zero' if zero else ''}", file=sys.stderr, flush=True)
        r = evaluation.evaluate(a.model, a.gen, texts, ctx=512, contexts=1, swap=swap, zero=zero)
        # no machine's paths in the published JSON
        r["model"], r["gen"], r["texts"] = os.path.basename(r["model"]), "ROOT", [os.path.basename(t) for t in r["texts"]]
        rows.append(r)
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
