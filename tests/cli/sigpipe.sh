#!/bin/bash
# meson test "sigpipe": a reader that leaves (`stk convert ... 2>&1 | head -5`) does not kill a
# run: SIGPIPE is ignored (src/cli/cleanup.h), the lost lines are lost, the run finishes through
# its own paths: the generation is published and verifies, no .staging-PID-N is left, the exit
# code is the run's (0), never 141.
# Usage: sigpipe.sh STK SOURCE_ROOT
set -u
stk=$1
src=$2
model=$src/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-pipe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
leftovers() { find "$1" -name '.staging-*' -o -name '.trash-*' -o -name 'CURRENT.tmp' -o -name '.*.tmp.*' 2>/dev/null; }

# 1. stdout and stderr a pipe whose reader is already gone (deterministic: the first write fails).
#    Python's subprocess gives the child SIGPIPE's default action back (restore_signals).
for json in "" --json; do
  python3 - "$stk" "$model" "$tmp/closed$json" $json <<'PY' >"$tmp/rc" || fail "closed pipe $json: the runner"
import os, subprocess, sys
r, w = os.pipe()
os.close(r)  # nobody reads: every write to w is EPIPE (or SIGPIPE)
p = subprocess.run(sys.argv[1:2] + ["convert"] + sys.argv[2:], stdout=w, stderr=w, stdin=subprocess.DEVNULL)
print(p.returncode)
PY
  rc=$(cat "$tmp/rc")
  [ "$rc" = 0 ] || fail "convert $json into a closed pipe: exit $rc (141: killed by SIGPIPE)"
  [ -z "$(leftovers "$tmp/closed$json")" ] || fail "closed pipe $json: left $(leftovers "$tmp/closed$json")"
  "$stk" check "$tmp/closed$json" >/dev/null 2>&1 || fail "closed pipe $json: the published root does not check"
done

# 2. The user's command as typed: head leaves after 5 lines (how many lines the run wrote by then
#    depends on timing; whichever, the run completes and exits 0).
"$stk" convert "$model" "$tmp/head" 2>&1 | head -5 >"$tmp/head.out"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail "convert 2>&1 | head -5: exit $rc"
[ "$(wc -l <"$tmp/head.out")" -le 5 ] || fail "head printed more than 5 lines"
[ -z "$(leftovers "$tmp/head")" ] || fail "| head -5: left $(leftovers "$tmp/head")"
"$stk" check "$tmp/head" >/dev/null 2>&1 || fail "| head -5: the published root does not check"

# 3. A reading command into a closed pipe: check prints its verdict line and exits with it.
python3 - "$stk" "$tmp/head" <<'PY' >"$tmp/rc" || fail "check: the runner"
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
print(subprocess.run([sys.argv[1], "check", sys.argv[2]], stdout=w, stderr=w).returncode)
PY
[ "$(cat "$tmp/rc")" = 0 ] || fail "check into a closed pipe: exit $(cat "$tmp/rc")"
echo "ok: convert (text and --json) into a closed pipe and into head -5: exit 0, published, nothing left"
