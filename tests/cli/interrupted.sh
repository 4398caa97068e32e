#!/bin/sh
# meson test "interrupted-runs": what convert and export leave behind when they are interrupted
# or fail.  SIGINT / SIGTERM are raised at a chosen file operation (STK_TEST_CRASH_AT +
# STK_TEST_CRASH_SIGNAL, src/core/output_file.h), mid-conversion: the staging directory
# (.staging-PID-N) and the export's .NAME.tmp.PID are removed, "interrupted" is printed and the
# exit code is 128 + the signal.  A refused model leaves no root it created; the error is printed
# once with no summary after it; a read-only generations/ is refused before the conversion.
# Usage: interrupted.sh STK SOURCE_ROOT
set -u
stk=$1
src=$2
model=$src/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-intr.XXXXXX")
cleanup() { umount "$tmp/ro/generations" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
leftovers() { find "$1" -name '.staging-*' -o -name '.trash-*' -o -name 'CURRENT.tmp' -o -name '.*.tmp.*' 2>/dev/null; }

# 1. SIGINT at file operation 100 (inside prf_build's arrays) of a convert into a new root.
STK_TEST_CRASH_AT=100 STK_TEST_CRASH_SIGNAL=2 "$stk" convert "$model" "$tmp/new" >"$tmp/1.out" 2>"$tmp/1.err"
rc=$?
[ "$rc" = 130 ] || fail "SIGINT: exit $rc, expected 130"
grep -q "^stk convert: interrupted (SIGINT); removed what this run had staged in $tmp/new: nothing was published$" "$tmp/1.err" ||
  fail "SIGINT: message: $(cat "$tmp/1.err")"
[ ! -e "$tmp/new" ] || fail "SIGINT: the root this run created is still there: $(ls -a "$tmp/new")"

# 2. SIGTERM, --json, into a root that holds a generation: it stays current and alone.
"$stk" convert "$model" "$tmp/root" 2>/dev/null || fail "first convert"
cp "$tmp/root/CURRENT" "$tmp/CURRENT.before"
ls "$tmp/root/generations" >"$tmp/gens.before"
STK_TEST_CRASH_AT=100 STK_TEST_CRASH_SIGNAL=15 "$stk" convert "$model" "$tmp/root" --json >"$tmp/2.json" 2>"$tmp/2.err"
rc=$?
[ "$rc" = 143 ] || fail "SIGTERM: exit $rc, expected 143"
python3 - "$tmp/2.json" <<'PY' || fail "SIGTERM: JSON"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["command"] == "convert" and d["ok"] is False and d["exit_code"] == 143 and d["error"] == "interrupted", d
assert d["message"].startswith("interrupted (SIGTERM)"), d
PY
[ -z "$(leftovers "$tmp/root")" ] || fail "SIGTERM: left $(leftovers "$tmp/root")"
cmp -s "$tmp/CURRENT.before" "$tmp/root/CURRENT" || fail "SIGTERM: CURRENT changed"
ls "$tmp/root/generations" | cmp -s - "$tmp/gens.before" || fail "SIGTERM: generations/ changed"
"$stk" check "$tmp/root" >/dev/null 2>&1 || fail "SIGTERM: the root no longer checks"

# 3. export interrupted at its second write: no .a.lwt.tmp.PID, no a.lwt.
mkdir "$tmp/ex"
STK_TEST_CRASH_AT=3 STK_TEST_CRASH_SIGNAL=2 "$stk" export --in "$model" --out "$tmp/ex/a.lwt" >/dev/null 2>"$tmp/3.err"
rc=$?
[ "$rc" = 130 ] || fail "export SIGINT: exit $rc"
grep -q "^stk export: interrupted (SIGINT); removed what this run had staged in $tmp/ex: no output file was written$" "$tmp/3.err" ||
  fail "export SIGINT: message: $(cat "$tmp/3.err")"
[ -z "$(ls -A "$tmp/ex")" ] || fail "export SIGINT: left $(ls -A "$tmp/ex")"

# 4. A refused model (NaN weights): no root left, the error once, nothing after it.
"$stk" convert "$src/tests/data/models/nonfinite" "$tmp/refused" >/dev/null 2>"$tmp/4.err"
rc=$?
[ "$rc" = 1 ] || fail "refused: exit $rc"
[ ! -e "$tmp/refused" ] || fail "refused: left a root: $(ls -a "$tmp/refused")"
[ "$(grep -c "is NaN" "$tmp/4.err")" = 1 ] || fail "refused: the error is not printed exactly once: $(cat "$tmp/4.err")"
tail -1 "$tmp/4.err" | grep -q "^stk convert: stage parse_tensors failed: STK_E_NONFINITE" || fail "refused: something after the error: $(cat "$tmp/4.err")"
if grep -q "WARNING\|tokenizer \|published" "$tmp/4.err"; then fail "refused: a summary after the error: $(cat "$tmp/4.err")"; fi
# ... and into a root that already exists, the root stays as it was.
"$stk" convert "$src/tests/data/models/nonfinite" "$tmp/root" >/dev/null 2>&1
[ -z "$(leftovers "$tmp/root")" ] || fail "refused into a root: left $(leftovers "$tmp/root")"
ls "$tmp/root/generations" | cmp -s - "$tmp/gens.before" || fail "refused into a root: generations/ changed"

# 5. A read-only generations/ (a read-only bind mount: root ignores permission bits): refused
#    before the conversion, exit 5.
mkdir -p "$tmp/ro/generations"
if mount --bind "$tmp/ro/generations" "$tmp/ro/generations" 2>/dev/null &&
   mount -o remount,ro,bind "$tmp/ro/generations" 2>/dev/null; then
  "$stk" convert "$model" "$tmp/ro" >/dev/null 2>"$tmp/5.err"
  rc=$?
  [ "$rc" = 5 ] || fail "read-only: exit $rc: $(cat "$tmp/5.err")"
  grep -q "generations is not writable: a conversion could not publish into it" "$tmp/5.err" || fail "read-only: $(cat "$tmp/5.err")"
  if grep -q "parse_tensors" "$tmp/5.err"; then fail "read-only: found after a stage ran: $(cat "$tmp/5.err")"; fi
  umount "$tmp/ro/generations"
else
  echo "SKIPPED (loudly): the read-only generations/ case: mount --bind is not permitted here"
fi
echo "ok: interrupted and failed runs"
