#!/bin/sh
# meson test "narrow-model": the default --rv 12 on a model narrower than 12 (a GPT-2 of width 8
# written by tests/cli/narrow_model.py) is clamped to min(r, d_v, d_model) = 8, recorded in the
# manifest (a note record of overlays_build, value 8, bound 12) and said in the summary and the
# JSON warnings; an --rv 12 the user chose is refused as before (exit 2), never changed.
# Usage: narrow_model.sh STK SOURCE_ROOT
set -u
stk=$1
src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-narrow.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
python3 "$src/tests/cli/narrow_model.py" "$src" "$tmp/m" || fail "writing the model"
"$stk" convert "$tmp/m" "$tmp/root" --json >"$tmp/c.json" 2>"$tmp/c.err"; rc=$?
[ $rc = 0 ] || fail "convert with the default rv: exit $rc: $(cat "$tmp/c.err")"
"$stk" inspect "$tmp/root" --json >"$tmp/i.json" 2>/dev/null || fail inspect
python3 - "$tmp/c.json" "$tmp/i.json" <<'PY' || fail "values"
import json, sys
c = json.load(open(sys.argv[1]))
w = [x for x in c["warnings"] if x.startswith("--rv: the default 12 exceeds min(r, d_v, d_model)")]
assert len(w) == 1 and "the overlay rank is 8 (recorded in the manifest)" in w[0], c["warnings"]
i = json.loads(open(sys.argv[2]).read())
rec = [r for r in i["records"] if r["text"].startswith("rv clamped")]
assert len(rec) == 1, i["records"]
r = rec[0]
assert r["stage"] == "overlays_build" and r["kind"] == "note" and r["value"] == 8 and r["bound"] == 12, r
assert r["text"] == "rv clamped: the default 12 exceeds min(r, d_v, d_model) = 8 for this model", r["text"]
u = [a for a in i["arrays"] if a["name"] == "overlays_U.bin"][0]
assert u["shape"] == [2, 8, 8], u
PY
"$stk" convert "$tmp/m" "$tmp/root2" --rv 12 >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 2 ] || fail "--rv 12 given: exit $rc"
grep -q "rv = 12: the overlay rank must be in \[1, min(r 512, d_v 8, d_model 8)\]" "$tmp/e" || fail "--rv 12: $(cat "$tmp/e")"
"$stk" convert "$tmp/m" "$tmp/root3" --dry-run --json >"$tmp/d.json" 2>/dev/null || fail "dry run"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['rv'] == 8, d['rv']" "$tmp/d.json" || fail "dry run rv"
echo "ok: the default rv clamped on a width-8 model"
