#!/usr/bin/env python3
"""docs/fidelity.md's end-to-end tables: `stk eval` rows on one model, run in one process (the
model is loaded once), written as JSON (every report) and as the markdown tables the page shows.

    python tools/fidelity/eval_tables.py --model M.gguf --gen ROOT --texts DIR --name NAME \
        --layers 0,15,29 --out docs/fidelity/eval/smollm2 [--tables format,beyond] [--contexts 4]

DIR is what scripts/eval_texts.py writes; the rows read DIR/eval-english.txt and DIR/eval-code.txt
(text no fit has seen).  Each row is the command `python -m stk eval --model M --gen ROOT --text
DIR/eval-english.txt --text DIR/eval-code.txt --ctx 512 --contexts N --swap SWAP [--zero]`; the
markdown gives that command once, and the swap of each row.
"""
import argparse
import json
import os
import sys

from stk import evaluation


def rows_format(layers, n_layers):
    """The spec's modules: each alone at some layers, each at every layer, all together; each
    beside its deleted baseline on the same contexts."""
    out = []
    for layer in layers:
        out += [(f"ffn:{layer}", False), (f"ffn:{layer}", True), (f"prf:{layer}", False), (f"overlays:{layer}", False),
                (f"memory:{layer}", False), (f"prf:{layer}", True)]
    out += [("ffn", False), ("ffn", True), ("prf", False), ("overlays", False), ("memory", False), ("prf", True),
            ("ffn,overlays", False), ("ffn,prf", True)]
    return out


def rows_beyond(layers, n_layers):
    """What the arrays cannot hold: windows of exact softmax, the FFN's own weights at low bit width."""
    return [("window", False, 4, 60), ("window", False, 0, 64), ("window", False, 4, 124), ("window", False, 4, 252),
            ("ffn-int8", False, 4, 60), ("ffn-int4", False, 4, 60), ("ffn-ternary", False, 4, 60),
            ("window,ffn-int8", False, 4, 124), ("window,ffn-int4", False, 4, 124)]


def rows_long(layers, n_layers):
    """The window at contexts several times its size (run with --ctx 2048)."""
    return [("window", False, 4, 252), ("window", False, 4, 508), ("window", False, 0, 512), ("window", False, 4, 1020),
            ("ffn-bfloat16", False, 4, 60), ("window,ffn-bfloat16", False, 4, 508), ("window,ffn-int8", False, 4, 508),
            ("window-prf", False, 4, 252), ("window-prf", False, 4, 508)]


def state_bytes(cfg, swap, sinks, window):
    """Fixed state per sequence a runtime must hold for the attention swap (f32 K and V per kept
    position, per layer), or the FFN weight bytes at that width, for the table."""
    n_layers = cfg.num_hidden_layers
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    parts = []
    if "window" in swap:
        parts.append(f"KV cache {(sinks + window) * 2 * kv * hd * 4 * n_layers:,} B")
    if "window-prf" in swap:  # the PRF state (R, s) as f32, r = 512 (stk convert's default)
        parts.append(f"PRF state {512 * (cfg.num_attention_heads * hd + 1) * 4 * n_layers:,} B")
    for dt, bits in (("bfloat16", 16), ("int8", 8), ("int4", 4), ("ternary", 2)):
        if f"ffn-{dt}" in swap:
            n = 3 * cfg.hidden_size * cfg.intermediate_size * n_layers
            parts.append(f"FFN weights {n * bits // 8:,} B (f32: {n * 4:,} B)")
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--gen")
    ap.add_argument("--texts", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--layers", default="0")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tables", default="format,beyond")
    ap.add_argument("--contexts", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--markdown-only", action="store_true", help="rewrite the .md tables from the .json, run nothing")
    a = ap.parse_args()
    texts = [os.path.join(a.texts, "eval-english.txt"), os.path.join(a.texts, "eval-code.txt")]
    os.makedirs(a.out, exist_ok=True)
    layers = [int(x) for x in a.layers.split(",")]
    if a.markdown_only:
        for table in a.tables.split(","):
            rows = json.load(open(os.path.join(a.out, f"{table}.json")))
            with open(os.path.join(a.out, f"{table}.md"), "w") as f:
                f.write(markdown(a, table, rows))
        return
    m, _ = evaluation._load(os.fspath(a.model))
    n_layers = m.config.num_hidden_layers
    for table in a.tables.split(","):
        path = os.path.join(a.out, f"{table}.json")
        done = {}
        if os.path.exists(path):
            for r in json.load(open(path)):
                done[(r["swap"], r["zero"], r.get("sinks"), r.get("window"))] = r
        rows = []
        spec = {"format": rows_format, "beyond": rows_beyond, "long": rows_long}[table](layers, n_layers)
        for row in spec:
            swap, zero = row[0], row[1]
            sinks, window = (row[2], row[3]) if len(row) > 2 else (4, 60)
            key_sw = ",".join(s.module + ("" if s.layers is None else ":" + "+".join(map(str, s.layers)))
                              for s in evaluation.parse_swap(swap))
            key = (key_sw, zero, sinks if "window" in swap else None, window if "window" in swap else None)
            if key in done:
                rows.append(done[key])
                continue
            print(f"[{table}] {swap}{' --zero' if zero else ''}", file=sys.stderr, flush=True)
            r = evaluation.evaluate(a.model, a.gen, texts, ctx=a.ctx, contexts=a.contexts, swap=swap, zero=zero,
                                    sinks=sinks, window=window)
            r["state"] = state_bytes(m.config, swap, sinks, window)
            # no machine's paths in the published JSON: the model's file name, ROOT, the texts' names
            r["model"], r["gen"] = os.path.basename(r["model"]), "ROOT" if r["gen"] else None
            r["texts"] = [os.path.basename(t) for t in r["texts"]]
            rows.append(r)
            json.dump(rows, open(path, "w"), indent=1)
        json.dump(rows, open(path, "w"), indent=1)
        with open(os.path.join(a.out, f"{table}.md"), "w") as f:
            f.write(markdown(a, table, rows))


def _layers_summary(r):
    if not r["layers"]:
        return ""
    vals = sorted(e["rel_l2"] for e in r["layers"])
    if len(vals) == 1:
        return f"{vals[0]:.3f}"
    return f"median {vals[len(vals) // 2]:.3f} ({vals[0]:.3f}-{vals[-1]:.3f})"


def _ppl(x):
    return f"{x:.3f}" if x < 1e5 else f"{x:.2e}"


def markdown(a, table, rows):
    r0 = rows[0]
    cmd = (f"python -m stk eval --model MODEL --gen ROOT --text eval-english.txt --text eval-code.txt --ctx {r0['ctx']} "
           f"--contexts {r0['contexts'] // 2} --swap SWAP [--zero]")
    lines = [f"{a.name}, {r0['contexts']} contexts of {r0['ctx']} tokens ({r0['tokens_scored']} scored tokens); "
             f"original perplexity {r0['perplexity_original']:.3f}. Each row: `{cmd}`.", ""]
    if table == "format":
        lines += ["| swap | perplexity | KL mean | KL p99 | top-1 agreement | module rel L2 |", "|---|---:|---:|---:|---:|---|"]
        for r in rows:
            sw = f"`{r['swap']}`" + (" deleted (`--zero`)" if r["zero"] else "")
            lines.append(f"| {sw} | {_ppl(r['perplexity_swapped'])} | {r['kl_mean']:.4f} | {r['kl_p99']:.3f} | "
                         f"{r['top1_agreement']:.3f} | {_layers_summary(r)} |")
    else:
        lines += ["| swap | sinks + window | fixed state | perplexity | KL mean | KL p99 | top-1 agreement | module rel L2 |",
                  "|---|---|---|---:|---:|---:|---:|---|"]
        for r in rows:
            sw = f"`{r['swap']}`"
            win = f"{r['sinks']} + {r['window']}" if "sinks" in r else ""
            lines.append(f"| {sw} | {win} | {r.get('state', '')} | {_ppl(r['perplexity_swapped'])} | {r['kl_mean']:.4f} | "
                         f"{r['kl_p99']:.3f} | {r['top1_agreement']:.3f} | {_layers_summary(r)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
