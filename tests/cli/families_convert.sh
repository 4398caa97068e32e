#!/bin/sh
# meson test "families-convert": `stk convert` (the whole DAG) then `stk check` on every family
# fixture that transformers wrote (tests/fixtures/families/*/): each must publish with every stage
# "ok" and verify.  Usage: families_convert.sh STK FIXTURES_DIR
set -eu
stk=$1
fixtures=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-families.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
for d in "$fixtures"/*/; do
  m=$(basename "$d")
  "$stk" convert --in "$d" --out "$tmp/$m" --json >"$tmp/$m.json" 2>"$tmp/$m.err" ||
    { echo "$m: convert failed"; cat "$tmp/$m.json" "$tmp/$m.err"; exit 1; }
  python3 - "$tmp/$m.json" "$m" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [s["stage"] for s in d["stages"] if s["status"] != "ok"]
assert d["published"] and not bad and len(d["stages"]) == 10, (sys.argv[2], bad, d["message"])
PY
  "$stk" check --out "$tmp/$m" >"$tmp/$m.chk" 2>&1 || { echo "$m: check failed"; cat "$tmp/$m.chk"; exit 1; }
  echo "ok: $m"
  n=$((n + 1))
done
[ "$n" -ge 17 ] || { echo "only $n family fixtures"; exit 1; }
