#!/usr/bin/env python3
"""`stk generate` on tiny GPT-2 against transformers' greedy generate (tests/fixtures/lm/generate.json,
recorded by tests/fixtures/lm/generate_reference.py).

For every recorded prompt: `stk generate --in MODEL --prompt P --tokens N --json` must give the
prompt ids transformers' tokenizer gave and the N ids its greedy generate gave, and decode them to
the bytes of those ids.  Sampling: the same seed gives the same ids twice, ids inside the
vocabulary; another seed is a different run of the same length.  Refusals: a sequence past the
model's 32 learned positions, --seed without --temperature, no model, --gen on a generation of
the default profile (exit 3, STK_E_NOT_IMPLEMENTED naming it).

Usage: cli_generate.py STK SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def run(stk, *args):
    p = subprocess.run([stk, "generate", *args, "--json"], capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def main():
    stk, root = sys.argv[1], sys.argv[2]
    ref = json.load(open(os.path.join(root, "tests/fixtures/lm/generate.json")))
    model = os.path.join(root, ref["model"])
    vocab = json.load(open(os.path.join(model, "vocab.json")))
    # GPT-2's byte-level alphabet: the decoded bytes of an id are its piece mapped back to bytes.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_of = {chr(c): b for b, c in zip(bs, cs)}
    piece = {i: p for p, i in vocab.items()}
    fails = []
    for case in ref["cases"]:
        code, out, err = run(stk, "--in", model, "--prompt", case["prompt"], "--tokens", str(ref["tokens"]))
        if code != 0:
            fails.append(f"{case['prompt']!r}: exit {code}: {err.strip()}")
            continue
        want_text = bytes(byte_of[ch] for i in case["ids"] for ch in piece[i]).hex()
        ok = out["prompt_ids"] == case["prompt_ids"] and out["ids"] == case["ids"] and out["text_hex"] == want_text
        print(f"{case['prompt']!r}: prompt {out['prompt_ids']} -> {out['ids']} {'ok' if ok else 'FAIL'}")
        if not ok:
            fails.append(f"{case['prompt']!r}: stk {out['prompt_ids']} -> {out['ids']} ({out['text_hex']}), "
                         f"transformers {case['prompt_ids']} -> {case['ids']} ({want_text})")
    # Seeded sampling: repeatable, inside the vocabulary.
    args = ["--in", model, "--prompt", "hello", "--tokens", "10", "--temperature", "1.5", "--seed", "7"]
    a, b = run(stk, *args)[1], run(stk, *args)[1]
    c = run(stk, *args[:-1], "8")[1]
    n_vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
    if not (a["ok"] and a["mode"] == "sample" and a["ids"] == b["ids"] and len(a["ids"]) == 10
            and all(0 <= i < n_vocab for i in a["ids"])):
        fails.append(f"sampling is not repeatable: {a} / {b}")
    if not (c["ok"] and c["seed"] == 8 and len(c["ids"]) == 10 and c["ids"] != a["ids"]):
        fails.append(f"seed 8: {c}")
    print(f"sampled (T 1.5, seed 7): {a['ids']}; seed 8: {c['ids']}")
    # Refusals.
    for args, want_code, words in (
            (["--in", model, "--prompt", "hello", "--tokens", "40"], 2, "past the 32 the model learned"),
            (["--in", model, "--prompt", "hello", "--seed", "3"], 2, "--seed needs --temperature"),
            (["--prompt", "hello"], 2, "needs --in MODEL or --gen ROOT"),
            (["--in", model, "--prompt", "hello", "--temperature", "0"], 2, "--temperature takes a number > 0")):
        code, out, err = run(stk, *args)
        if code != want_code or words not in out["message"] + err:
            fails.append(f"{args}: exit {code}, {out['message']!r}; want {want_code} and {words!r}")
    # A generation of the default profile holds no weights the runtime reads: refused by name.  A
    # faithful one (stk convert --profile faithful: bf16 matrices) runs, each array verified as it
    # is mapped; on this model its greedy ids are those of the checkpoint's own weights.
    with tempfile.TemporaryDirectory() as tmp:
        root_dir = os.path.join(tmp, "root")
        subprocess.run([stk, "convert", model, root_dir, "--allow-uncertified-tokenizer"], check=True, capture_output=True)
        code, out, err = run(stk, "--gen", root_dir, "--in", model, "--prompt", "hello")
        if code == 0 or out["status"] != "STK_E_INVALID_ARGUMENT" or root_dir not in out["message"] \
                or "--profile faithful" not in out["message"]:
            fails.append(f"--gen on a default-profile root: exit {code}, {out['status']}: {out['message']!r}")
        print(f"--gen ROOT (default profile): exit {code}: {out['message']}")
        faithful = os.path.join(tmp, "faithful")
        subprocess.run([stk, "convert", model, faithful, "--profile", "faithful", "--ffn", "bf16"], check=True,
                       capture_output=True)
        for case in ref["cases"]:
            code, out, err = run(stk, "--gen", faithful, "--in", model, "--prompt", case["prompt"], "--tokens",
                                 str(ref["tokens"]))
            if code != 0 or out.get("ids") != case["ids"]:
                fails.append(f"--gen on a faithful root: exit {code}, {out.get('ids')} against {case['ids']}: "
                             f"{out.get('message')!r}")
            print(f"--gen ROOT (faithful profile): exit {code}: ids {out.get('ids')}")
    for f in fails:
        print("FAIL", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
