#!/bin/sh
# meson test "acceptance-calibrated": `stk check --acceptance` on a `convert --calibration`
# generation of the demo model (bindings/testdata/tiny-gpt2, tests/data/calib/tiny-gpt2.stats)
# tells the truth (issue 39): without --calibration the rows whose reference is data-free (16.1
# prf_W-reproducible, 16.2's dictionary rows, 16.5 published/rerun) are skipped with a note saying
# "calibrated" and the statistics' SHA-256 (hashlib's, here), never FAIL; with --calibration STATS
# the reruns convert on them and 16.5 published/rerun runs and passes (every array, the manifest,
# the replay identical); statistics that are not the recorded ones, or given for a data-free
# generation, are refused (exit 1) before any row runs.  Usage: acceptance_calibrated.sh STK SOURCE_ROOT
set -eu
stk=$1
src=$2
model=$src/bindings/testdata/tiny-gpt2
stats=$src/tests/data/calib/tiny-gpt2.stats
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-acccal.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$stk" convert "$model" "$tmp/cal" --calibration "$stats" 2>/dev/null
"$stk" convert "$model" "$tmp/free" 2>/dev/null

rows() {  # rows JSON_FILE MODE: the checks of one table
  python3 - "$1" "$2" "$stats" <<'PY'
import hashlib, json, sys
d = json.load(open(sys.argv[1]))
mode, sha = sys.argv[2], hashlib.sha256(open(sys.argv[3], "rb").read()[128:]).hexdigest()
rows = d["acceptance"]["rows"]
by = {r["test"]: r for r in rows}
# The demo model's one real gating failure (data-free too: acceptance-output pins it) is 16.3's.
failed = [r["test"] for r in rows if r["gating"] and not r["pass"] and not r["skipped"]]
assert all(t.startswith("16.3 ") for t in failed), ("false failures", failed)
assert d["exit_code"] == (1 if failed else 0), (d["exit_code"], failed)
calibrated = [r["test"] for r in rows if r["skipped"] and r["note"].startswith("skipped: calibrated:")]
for r in rows:
    if r["test"] in calibrated:
        assert "sha256 " + sha[:16] in r["note"], r
if mode == "without":
    assert calibrated == ["16.1 prf_W-reproducible", "16.2 linear-dictionary-vs-exact-collapse",
                          "16.2 linear-truncation-recorded", "16.5 published/rerun"], calibrated
    assert "give --calibration STATS" in by["16.5 published/rerun"]["note"], by["16.5 published/rerun"]
    assert not any("(published/rerun)" in t for t in by), "a published/rerun comparison against a data-free rerun"
    t12 = by["16.5 arrays identical (threads 1/2, data-free)"]
    assert t12["pass"] and t12["value"] == 0, t12
else:
    assert calibrated == ["16.1 prf_W-reproducible", "16.2 linear-dictionary-vs-exact-collapse",
                          "16.2 linear-truncation-recorded"], calibrated
    for t in ("16.5 arrays identical (published/rerun)", "16.5 manifest identical (published/rerun)",
              "16.5 replay identical (published/rerun)", "16.5 arrays identical (threads 1/2, calibrated)",
              "16.5 manifest identical (threads 1/2, calibrated)"):
        assert by[t]["gating"] and by[t]["pass"] and by[t]["value"] == 0, by.get(t, (t, "missing", list(by)))
    assert by["16.5 arrays compared (published/rerun)"]["value"] >= 20, by["16.5 arrays compared (published/rerun)"]
print(f"ok {mode} --calibration: {len(rows)} rows, {len(calibrated)} skipped as calibrated, gating failures {failed}")
PY
}

# 1. Without --calibration: no false failure, the four rows skipped as calibrated.
rc=0
"$stk" check "$tmp/cal" --acceptance --model "$model" --json >"$tmp/without.json" 2>"$tmp/without.err" || rc=$?
[ "$rc" -le 1 ] || { echo "FAIL: without --calibration: exit $rc"; cat "$tmp/without.err"; exit 1; }
rows "$tmp/without.json" without
# the table says it in words
rc=0
"$stk" check "$tmp/cal" --acceptance --model "$model" >"$tmp/without.txt" 2>&1 || rc=$?
grep -q "^16.1 prf_W-reproducible  *- .*skipped" "$tmp/without.txt" || { echo "FAIL: table"; cat "$tmp/without.txt"; exit 1; }
grep -q "note: skipped: calibrated: the generation was fitted to calibration statistics" "$tmp/without.txt" ||
  { echo "FAIL: table note"; cat "$tmp/without.txt"; exit 1; }

# 2. With the recorded statistics: the reruns convert on them; published/rerun runs and passes.
rc=0
"$stk" check "$tmp/cal" --acceptance --model "$model" --calibration "$stats" --json >"$tmp/with.json" 2>"$tmp/with.err" || rc=$?
[ "$rc" -le 1 ] || { echo "FAIL: with --calibration: exit $rc"; cat "$tmp/with.err"; exit 1; }
rows "$tmp/with.json" with

# 3. Other statistics (one value changed, layer 0's crc32c, the digest and the header crc32c
#    resealed: a valid file), and statistics for a data-free generation: refused before any row,
#    exit 1, naming both digests.
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" python3 - "$stats" "$tmp/other.stats" <<'PY'
import struct, sys
from calib_stats_reference import reseal
b = bytearray(open(sys.argv[1], "rb").read())
at = 128 + 16 * struct.unpack_from("<I", b, 28)[0]  # the first value of layer 0's first section
struct.pack_into("<d", b, at, struct.unpack_from("<d", b, at)[0] + 1.0)
reseal(b)  # layer 0's crc32c, the SHA-256, the header crc32c (tests/calib_stats_reference.py)
open(sys.argv[2], "wb").write(b)
PY
rc=0
"$stk" check "$tmp/cal" --acceptance --model "$model" --calibration "$tmp/other.stats" >"$tmp/other.out" 2>"$tmp/other.err" || rc=$?
[ "$rc" = 1 ] || { echo "FAIL: other statistics: exit $rc"; cat "$tmp/other.err"; exit 1; }
want=$(python3 -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()[128:]).hexdigest())" "$stats")
grep -q "is not the statistics .* was fitted to: their SHA-256 is [0-9a-f]\{64\}, the manifest records $want" "$tmp/other.err" ||
  { echo "FAIL: other statistics: message"; cat "$tmp/other.err"; exit 1; }
! grep -q "16\.1" "$tmp/other.out" || { echo "FAIL: rows ran with other statistics"; exit 1; }
rc=0
"$stk" check "$tmp/free" --acceptance --model "$model" --calibration "$stats" >/dev/null 2>"$tmp/free.err" || rc=$?
[ "$rc" = 1 ] && grep -q "was converted without calibration statistics" "$tmp/free.err" ||
  { echo "FAIL: --calibration on a data-free generation: exit $rc"; cat "$tmp/free.err"; exit 1; }
rc=0
"$stk" check "$tmp/cal" --calibration "$stats" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "FAIL: --calibration without --acceptance: exit $rc, expected 2 (usage)"; exit 1; }
echo "ok: calibrated acceptance: no false failure; reruns on the statistics; other statistics refused"
