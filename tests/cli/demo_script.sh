#!/bin/sh
# meson test "demo-script": scripts/demo.sh (README, "Two commands") with the stk just built
# (STK_BIN: no second build).  A non-empty directory that is not a generations root, and a file,
# are refused and left as they were; a fresh directory gets a root with two chained generations;
# running it again on that root replaces it.
#   usage: demo_script.sh STK_BIN SOURCE_ROOT
set -eu
STK_BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # demo.sh changes directory
src=$2
export STK_BIN
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-demo-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
die() { echo "demo_script: $*" >&2; exit 1; }

mkdir "$tmp/busy"
echo keep >"$tmp/busy/notes.txt"
if bash "$src/scripts/demo.sh" "$tmp/busy" >"$tmp/o1" 2>&1; then die "a non-empty directory was accepted"; fi
grep -q "is not empty and is not a generations root" "$tmp/o1" || die "refusal message: $(cat "$tmp/o1")"
[ "$(cat "$tmp/busy/notes.txt")" = keep ] || die "the refused directory was changed"
echo x >"$tmp/file"
if bash "$src/scripts/demo.sh" "$tmp/file" >"$tmp/o2" 2>&1; then die "a file was accepted"; fi
grep -q "exists and is not a directory" "$tmp/o2" || die "refusal message: $(cat "$tmp/o2")"
[ "$(cat "$tmp/file")" = x ] || die "the refused file was changed"
echo "ok: refusals"

for run in 1 2; do
  bash "$src/scripts/demo.sh" "$tmp/root" >"$tmp/run$run" 2>&1 || { cat "$tmp/run$run"; die "run $run failed"; }
  n=$(ls "$tmp/root/generations" | wc -l)
  [ "$n" = 2 ] || die "run $run: $n generations, expected 2"
  grep -q "state digest" "$tmp/run$run" || die "run $run: no replay output"
done
grep -q "replacing the generations root" "$tmp/run2" || die "run 2 did not say it replaces the root"
echo "ok: two runs, two chained generations each"
