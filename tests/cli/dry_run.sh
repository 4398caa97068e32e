#!/bin/sh
# meson test "convert-dry-run": `stk convert --dry-run` against the conversion it plans, on the
# tiny model of every family in tests/data/models and on bindings/testdata/tiny-gpt2.  For each:
# the dry run (human and --json) exits 0 and creates nothing (its --out root does not exist
# after it), its human output fits 100 columns; then the real convert, and every published
# array is in the plan (same stage, dtype, and dims / payload / file bytes when the plan says
# "exact", <= the plan's otherwise; never one the plan says is disabled), every array the plan
# says is written is published (unless the failure policy disabled its stage), the totals add up
# and the plan's arena is the one the conversion allocated.  tiny-gpt2 (the one model with a
# tokenizer: byte-level BPE) runs twice: plain (the plan must say the token tables are disabled,
# EXT mode) and with --allow-uncertified-tokenizer (the tables written, T_n within their
# bounds); llama runs once more with a SentencePiece tokenizer.model beside it (not byte-level
# BPE: the token tables disabled, EXT wrapper), and tiny-gpt2's weights once more with GPT-2's
# full vocabulary (the T_n bounds over thousands of keys), and with a 5-token vocabulary that
# Sardinas-Patterson certifies (the plan says "optional", the run writes the tables).  Five
# models once more in the faithful profile: its arrays are the plan's, exactly, and the numeric
# stages' arrays are planned disabled by the profile.
# Usage: dry_run.sh STK MODELS_DIR TINY_GPT2_DIR
set -eu
stk=$1
models=$2
tiny=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-dryrun.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

check() {  # check NAME MODEL_DIR [convert options...]
  name=$1
  dir=$2
  shift 2
  root="$tmp/$name"
  "$stk" convert --in "$dir" --out "$root" --dry-run --json "$@" >"$tmp/$name.plan.json" ||
    { echo "$name: dry run failed"; cat "$tmp/$name.plan.json"; exit 1; }
  "$stk" convert --in "$dir" --out "$root" --dry-run "$@" >"$tmp/$name.plan.txt" ||
    { echo "$name: dry run (text) failed"; exit 1; }
  [ ! -e "$root" ] || { echo "$name: the dry run created $root"; exit 1; }
  "$stk" convert --in "$dir" --out "$root" --json "$@" >"$tmp/$name.convert.json" 2>/dev/null ||
    { echo "$name: convert failed"; cat "$tmp/$name.convert.json"; exit 1; }
  "$stk" inspect "$root" --json >"$tmp/$name.inspect.json" ||
    { echo "$name: inspect failed"; exit 1; }
  # A dry run into a root that holds generations leaves every file as it was.
  (cd "$root" && find . -printf '%p %s %T@\n' | sort) >"$tmp/$name.before"
  "$stk" convert --in "$dir" --out "$root" --dry-run --json "$@" >"$tmp/$name.plan2.json" ||
    { echo "$name: dry run into an existing root failed"; exit 1; }
  (cd "$root" && find . -printf '%p %s %T@\n' | sort) >"$tmp/$name.after"
  cmp -s "$tmp/$name.before" "$tmp/$name.after" || { echo "$name: the dry run changed $root"; exit 1; }
  python3 - "$tmp" "$name" "$@" <<'PY'
import json, os, sys
tmp, name, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
load = lambda k: json.load(open(os.path.join(tmp, "%s.%s.json" % (name, k))))
plan, conv, insp = load("plan"), load("convert"), load("inspect")
assert plan["ok"] and plan["dry_run"] is True and conv["published"], (name, plan["message"], conv["message"])
for line in open(os.path.join(tmp, name + ".plan.txt")).read().splitlines():
    assert len(line) <= 100, (name, "line over 100 columns", line)
planned = {a["name"]: a for a in plan["arrays"]}
text = open(os.path.join(tmp, name + ".plan.txt")).read()
assert all("\n  %s " % n in text for n in planned), (name, "an array missing from the text plan")
assert load("plan2")["arrays"] == plan["arrays"], (name, "the plan changed once the root existed")
assert len(planned) == len(plan["arrays"]), (name, "an array planned twice")
state = {s["stage"]: s["status"] for s in conv["stages"]}
gen = conv["generation_dir"]
published = {a["name"]: a for a in insp["arrays"]}
assert len(published) == conv["arrays"], (name, len(published), conv["arrays"])
for n, a in published.items():
    assert n in planned, (name, "published but not planned", n)
    p = planned[n]
    assert p["status"] != "disabled", (name, n, "published but planned disabled", p["reason"])
    assert p["stage"] == a["stage"] and p["dtype"] == a["dtype"], (name, n, p, a)
    size = os.path.getsize(os.path.join(gen, "arrays", n))
    assert size == a["bytes"] + 128, (name, n, size, a["bytes"])
    if p["exact"]:
        assert p["shape"] == a["shape"] and p["bytes"] == a["bytes"] and p["file_bytes"] == size, (name, n, p, a, size)
    else:
        assert len(p["shape"]) == len(a["shape"]), (name, n, p["shape"], a["shape"])
        assert all(x <= y for x, y in zip(a["shape"], p["shape"])), (name, n, p["shape"], a["shape"])
        assert a["bytes"] <= p["bytes"] and size <= p["file_bytes"], (name, n, a["bytes"], p["bytes"])
for n, p in planned.items():
    if p["status"] == "written" and n not in published:
        assert state[p["stage"]] == "disabled", (name, "planned as written, not published", n, state[p["stage"]])
    if p["status"] != "written":
        assert p["reason"], (name, n, "optional/disabled without a reason")
live = [p for p in plan["arrays"] if p["status"] != "disabled"]
t = plan["array_totals"]
assert t["arrays"] == len(live) and t["written"] + t["optional"] == t["arrays"], (name, t)
assert t["disabled"] == len(plan["arrays"]) - len(live), (name, t)
assert t["bytes"] == sum(p["bytes"] for p in live) == t["bytes_exact"] + t["bytes_bound"], (name, t)
assert t["file_bytes"] == sum(p["file_bytes"] for p in live), (name, t)
assert t["exact"] == all(p["exact"] for p in live), (name, t)
assert conv["bytes"] <= t["bytes"] and conv["arrays"] <= t["arrays"], (name, conv["bytes"], t)
if t["exact"] and t["optional"] == 0:
    assert conv["bytes"] == t["bytes"], (name, conv["bytes"], t["bytes"])
assert plan["arena_bytes"] == conv["arena_bytes"], (name, plan["arena_bytes"], conv["arena_bytes"])
assert sum(s["arrays"] for s in plan["stages"]) == t["arrays"], (name, plan["stages"])
tok = [p for p in plan["arrays"] if p["stage"] == "tokenizer_build_or_wrap"]
mode = conv["tokenizer"]["mode"]
if mode in ("fst", "fst_uncertified"):
    assert all(p["name"] in published for p in tok), (name, mode, "token tables planned but not written")
else:
    assert not any(p["name"] in published for p in tok), (name, mode)
    assert all(p["status"] in ("disabled", "optional") for p in tok), (name, mode, tok)
if name == "tiny-gpt2":  # byte-level BPE without the flag: the plan knows it ends in EXT mode
    assert mode == "ext" and len(tok) == 9 and all(p["status"] == "disabled" for p in tok), (name, mode, tok)
    assert "allow-uncertified-tokenizer" in tok[0]["reason"], tok[0]["reason"]
if name == "llama-sp":  # SentencePiece: the EXT wrapper
    assert mode == "ext" and tok and all(p["status"] == "disabled" for p in tok), (name, mode, tok)
    assert "not byte-level BPE" in tok[0]["reason"], tok[0]["reason"]
if name == "certified":  # SP decides at run time: optional in the plan, certified FST in the run
    assert mode == "fst" and len(tok) == 9 and all(p["status"] == "optional" for p in tok), (name, mode, tok)
if name in ("gpt2", "llama", "bloom"):  # no tokenizer file
    assert mode == "absent" and len(tok) == 1 and tok[0]["status"] == "disabled", (name, mode, tok)
if "--allow-uncertified-tokenizer" in opts:
    assert mode == "fst_uncertified" and all(p["status"] == "written" for p in tok), (name, mode)
    assert any(p["name"] == "T_1.bin" and not p["exact"] for p in tok), (name, tok)
if "faithful" in opts:  # the model's own weights: exactly the arrays written, the numeric stages off
    mine = {n for n, p in planned.items() if p["stage"] == "parse_tensors"}
    assert mine and mine == {n for n, a in published.items() if a["stage"] == "parse_tensors"}, (name, mine)
    assert all(planned[n]["exact"] and planned[n]["status"] == "written" for n in mine), (name, mine)
    numeric = ("prf_build", "overlays_build", "ffn_collapse", "mphf_cuckoo", "memory_fit", "bridge_init")
    for p in plan["arrays"]:
        if p["stage"] in numeric:
            assert p["status"] == "disabled" and "faithful profile" in p["reason"], (name, p)
print("ok: %s: %d arrays planned (%d disabled), %d published, %d of <= %d payload bytes%s" % (
    name, t["arrays"], t["disabled"], conv["arrays"], conv["bytes"], t["bytes"], "" if t["exact"] else " (bounded)"))
PY
}

for m in gpt2 llama llama_f32 mixtral qwen2_moe gpt_neox bloom; do
  check "$m" "$models/$m"
done
check tiny-gpt2 "$tiny"
# The faithful profile (docs/format.md "Faithful profile"): its weight arrays planned exactly.
check llama-faithful "$models/llama" --profile faithful
check gpt2-faithful "$models/gpt2" --profile faithful --window 8 --sinks 1
check mixtral-faithful-int8 "$models/mixtral" --profile faithful --ffn int8
check qwen2_moe-faithful "$models/qwen2_moe" --profile faithful
check gpt_neox-faithful "$models/gpt_neox" --profile faithful
check tiny-gpt2-fst "$tiny" --allow-uncertified-tokenizer
mkdir "$tmp/llama-sp-model"
for f in "$models"/llama/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$tmp/llama-sp-model/"; done
ln -s "$(cd "$models/../third_party/sentencepiece" && pwd)/llama2.tokenizer.model" "$tmp/llama-sp-model/tokenizer.model"
check llama-sp "$tmp/llama-sp-model"
# tiny-gpt2's weights with GPT-2's own 50257-token vocabulary: T_1..T_8 over thousands of keys.
mkdir "$tmp/gpt2-vocab-model"
for f in config.json model.safetensors; do ln -s "$(cd "$tiny" && pwd)/$f" "$tmp/gpt2-vocab-model/"; done
for f in vocab.json merges.txt; do
  ln -s "$(cd "$models/../third_party/gpt2/hf-dir" && pwd)/$f" "$tmp/gpt2-vocab-model/"
done
check gpt2-vocab "$tmp/gpt2-vocab-model" --allow-uncertified-tokenizer
# A byte-level BPE vocabulary Sardinas-Patterson certifies ("bc" without a single "b"): the plan
# cannot know before the stage runs, so the token tables are "optional"; the convert writes them.
mkdir "$tmp/certified-model"
for f in config.json model.safetensors; do ln -s "$(cd "$tiny" && pwd)/$f" "$tmp/certified-model/"; done
printf '{"a": 0, "bc": 1, "c": 2, "\\u0120": 3, "<|endoftext|>": 4}' >"$tmp/certified-model/vocab.json"
printf '#version: 0.2\n' >"$tmp/certified-model/merges.txt"
check certified "$tmp/certified-model"
