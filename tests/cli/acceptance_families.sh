#!/bin/sh
# meson test "acceptance-families": `stk convert` (the whole DAG, no --partial) on the tiny model
# of every family in tests/data/models, then `stk check --acceptance --model` on the published
# root: the conversion must exit 0 with every stage "ok" and every gating acceptance row must
# pass (16.1-16.5; reported rows never fail).  Usage: acceptance_families.sh STK MODELS_DIR
set -eu
stk=$1
models=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-accept.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for m in gpt2 llama llama_f32 mixtral qwen2_moe gpt_neox bloom; do
  "$stk" convert --in "$models/$m" --out "$tmp/$m" --json >"$tmp/$m.json" 2>/dev/null ||
    { echo "$m: convert failed"; cat "$tmp/$m.json"; exit 1; }
  python3 - "$tmp/$m.json" "$m" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [s["stage"] for s in d["stages"] if s["status"] != "ok"]
assert d["published"] and not bad and len(d["stages"]) == 10, (sys.argv[2], bad, d["message"])
PY
  "$stk" check --out "$tmp/$m" --acceptance --model "$models/$m" >"$tmp/$m.acc" 2>&1 ||
    { echo "$m: acceptance failed"; grep -E "FAIL|gating" "$tmp/$m.acc"; exit 1; }
  echo "ok: $m: $(grep -E 'gating rows' "$tmp/$m.acc")"
done
