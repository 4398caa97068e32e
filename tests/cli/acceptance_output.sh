#!/bin/sh
# meson test "acceptance-output": what `stk check --acceptance` prints, on the demo model
# (bindings/testdata/tiny-gpt2) converted by `stk convert` into a root, twice (a chained
# generation).  Every row once; skipped rows say "skipped" (no value, no verdict); 16.5's
# published-vs-rerun rows run on the CLI generation and pass; a --model that is not the
# generation's source is refused before any row runs; the demo model's one failing gating row is
# 16.3 cos@32 at 0.966 (the README says why).  Usage: acceptance_output.sh STK SOURCE_ROOT
set -eu
stk=$1
src=$2
model=$src/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-accout.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$stk" convert "$model" "$tmp/root" 2>/dev/null
"$stk" convert "$model" "$tmp/root" 2>/dev/null  # the current generation now names a predecessor

# 1. With the model: exit 1 (the one gating failure), JSON rows checked value by value.
rc=0
"$stk" check "$tmp/root" --acceptance --model "$model" --json >"$tmp/with.json" 2>"$tmp/with.err" || rc=$?
[ "$rc" = 1 ] || { echo "with --model: exit $rc, expected 1 (16.3 on the demo model)"; cat "$tmp/with.err"; exit 1; }
python3 - "$tmp/with.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["acceptance"]["rows"]
names = [r["test"] for r in rows]
dup = sorted({n for n in names if names.count(n) > 1})
assert not dup, ("rows printed twice", dup)
assert not any(r["skipped"] for r in rows), [r["test"] for r in rows if r["skipped"]]
by = {r["test"]: r for r in rows}
for t in ("16.5 arrays identical (published/rerun)", "16.5 manifest identical (published/rerun)",
          "16.5 replay identical (published/rerun)"):
    assert t in by, ("missing", t, names)
    assert by[t]["gating"] and by[t]["pass"] and by[t]["value"] == 0, by[t]
assert "before prev_hash" in by["16.5 manifest identical (published/rerun)"]["definition"]
assert by["16.5 arrays compared (published/rerun)"]["value"] == 22, by["16.5 arrays compared (published/rerun)"]
assert by["16.5 manifest identical (threads 1/2)"]["definition"].endswith("(curr_hash included)")
failed = [r for r in rows if r["gating"] and not r["pass"]]
assert [r["test"] for r in failed] == ["16.3 cos@32 published-SOS-fit"], [r["test"] for r in failed]
assert abs(failed[0]["value"] - 0.966161) < 1e-5 and failed[0]["threshold"] == 0.97, failed[0]
assert d["acceptance"]["passed"] is False and d["exit_code"] == 1
PY

# 2. The text table: each row once, no nan.
rc=0
"$stk" check "$tmp/root" --acceptance --model "$model" >"$tmp/with.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { echo "text: exit $rc"; exit 1; }
if grep -qi "nan" "$tmp/with.txt"; then echo "a nan in the table"; grep -i nan "$tmp/with.txt"; exit 1; fi
n=$(grep -c "^16.3 cos@32 published-SOS-fit " "$tmp/with.txt")
[ "$n" = 1 ] || { echo "16.3 cos@32 printed $n times"; exit 1; }

# 3. Without the model: the rows that need it say skipped, with null values, and pass.
"$stk" check "$tmp/root" --acceptance --json >"$tmp/without.json" 2>/dev/null
python3 - "$tmp/without.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["acceptance"]["rows"]
sk = {r["test"]: r for r in rows if r["skipped"]}
assert sorted(sk) == ["16.1 model-scale", "16.2 linear-collapse", "16.3 memory", "16.5 determinism"], sorted(sk)
for r in sk.values():
    assert r["value"] is None and not r["gating"] and not r["pass"] and r["note"].startswith("skipped: "), r
assert d["acceptance"]["passed"] is True and d["exit_code"] == 0
PY
"$stk" check "$tmp/root" --acceptance >"$tmp/without.txt" 2>/dev/null
grep -q "^16.5 determinism  *-  *-  *skipped " "$tmp/without.txt" || { echo "no skipped 16.5 row"; cat "$tmp/without.txt"; exit 1; }
grep -q "; 4 skipped$" "$tmp/without.txt" || { echo "no skipped count"; tail -3 "$tmp/without.txt"; exit 1; }
if grep -qi "nan\|(meets).*skipped\|skipped.*(meets)" "$tmp/without.txt"; then echo "nan or a verdict on a skipped row"; exit 1; fi

# 4. Another model: refused up front, exit 1, the digests named, no table.
rc=0
"$stk" check "$tmp/root" --acceptance --model "$src/tests/data/models/gpt2" >"$tmp/other.out" 2>"$tmp/other.err" || rc=$?
[ "$rc" = 1 ] || { echo "other model: exit $rc, expected 1"; cat "$tmp/other.err"; exit 1; }
grep -q "is not the model .* was converted from: its weights' parse_tensors digest is crc32c" "$tmp/other.err" ||
  { echo "other model: message"; cat "$tmp/other.err"; exit 1; }
[ ! -s "$tmp/other.out" ] || { echo "other model: a table was printed"; cat "$tmp/other.out"; exit 1; }
[ "$(wc -l <"$tmp/other.err")" = 1 ] || { echo "other model: more than one line"; cat "$tmp/other.err"; exit 1; }
echo "ok: acceptance output"
