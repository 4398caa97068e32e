#!/bin/sh
# meson test "full-disk": convert and check on a small tmpfs that runs out of space.  No SIGBUS
# (zero runs of arrays are allocated, not holes: src/core/output_file.h), a named ENOSPC error
# (exit 5), nothing left behind (no staging directory, no CURRENT.tmp, no orphan generation: a
# failed CURRENT swap removes the generation it renamed), CURRENT unchanged; `stk check` of a
# root on a full tmpfs verifies; an array written sparse by an older stk, read on a full tmpfs,
# is a message and exit 5 (the SIGBUS handler), not a crash.
# Needs mount(2) (root); exit 77 (skipped, said loudly) where it is not permitted.
# Usage: full_disk.sh STK SOURCE_ROOT
set -u
stk=$1
src=$2
model=$src/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-full.XXXXXX")
mnt=$tmp/mnt
mkdir "$mnt"
cleanup() { umount "$mnt" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! mount -t tmpfs -o size=4m tmpfs "$mnt" 2>"$tmp/mount.err"; then
  echo "SKIPPED: cannot mount a tmpfs here ($(cat "$tmp/mount.err")): the full-disk test needs root"
  exit 77
fi
avail() { df -B1 --output=avail "$mnt" | tail -1; }
# Leave exactly $1 bytes free (the filler takes the rest).
leave() { rm -f "$mnt/fill"; head -c $(( $(avail) - $1 )) /dev/zero >"$mnt/fill" 2>/dev/null; }
leftovers() { find "$1" -name '.staging-*' -o -name '.trash-*' -o -name 'CURRENT.tmp' -o -name '.*.tmp.*' 2>/dev/null; }

# What a generation takes on this tmpfs.
a0=$(avail)
"$stk" convert "$model" "$mnt/measure" 2>/dev/null || fail "convert with room"
need=$(( a0 - $(avail) ))
rm -rf "$mnt/measure"
"$stk" convert "$model" "$mnt/root" 2>/dev/null || fail "the first generation"
cp "$mnt/root/CURRENT" "$tmp/CURRENT.before"
ls "$mnt/root/generations" >"$tmp/gens.before"

# A second generation with free space just short of, then just above, what it needs.
enospc=0 at_current=0 published=0
free=$(( need - 24576 ))
while [ $free -le $(( need + 8192 )) ] && [ $published = 0 ]; do
  leave $free
  "$stk" convert "$model" "$mnt/root" >/dev/null 2>"$tmp/err"
  rc=$?
  if grep -q SIGBUS "$tmp/err"; then fail "free $free: SIGBUS: $(cat "$tmp/err")"; fi
  [ -z "$(leftovers "$mnt/root")" ] || fail "free $free: left $(leftovers "$mnt/root")"
  case $rc in
    0) published=1 ;;
    5) grep -q "No space left on device" "$tmp/err" || fail "free $free: exit 5 without ENOSPC named: $(cat "$tmp/err")"
       grep -q "CURRENT.tmp" "$tmp/err" && at_current=$((at_current + 1))
       enospc=$((enospc + 1))
       cmp -s "$tmp/CURRENT.before" "$mnt/root/CURRENT" || fail "free $free: CURRENT changed by a failed run"
       ls "$mnt/root/generations" | cmp -s - "$tmp/gens.before" || fail "free $free: an orphan generation: $(ls "$mnt/root/generations")" ;;
    *) fail "free $free: exit $rc: $(cat "$tmp/err")" ;;
  esac
  free=$(( free + 2048 ))
done
[ $published = 1 ] || fail "never published with $free bytes free (a generation took $need)"
[ $enospc -ge 5 ] || fail "only $enospc runs hit ENOSPC"
[ $at_current -ge 1 ] || fail "no run failed at the CURRENT swap (CURRENT.tmp): the sweep missed it"

# stk check of the root with the tmpfs full.
leave 0
"$stk" check "$mnt/root" >/dev/null 2>"$tmp/err" || fail "check on a full tmpfs: $(cat "$tmp/err")"

# An array written sparse (as stk wrote zero runs before), read with the tmpfs full.
rm -f "$mnt/fill"
gen=$(ls "$mnt/root/generations" | tail -1)
mkdir "$tmp/plain"
cp -r "$mnt/root/generations/$gen" "$tmp/plain/g"
mkdir "$mnt/sparse"
cp -r --sparse=always "$tmp/plain/g" "$mnt/sparse/"
[ "$(du -B1 "$mnt/sparse/g/arrays/R_init.bin" | cut -f1)" -lt "$(stat -c %s "$mnt/sparse/g/arrays/R_init.bin")" ] ||
  fail "cp --sparse=always made no hole in R_init.bin"
leave 0
"$stk" check "$mnt/sparse/g" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 5 ] || fail "sparse array on a full tmpfs: exit $rc, expected 5: $(cat "$tmp/err")"
grep -q "^stk check: a mapped file could not be read or written (SIGBUS): the file system is full" "$tmp/err" ||
  fail "sparse array on a full tmpfs: message: $(cat "$tmp/err")"
echo "ok: full disk ($enospc runs refused with ENOSPC, $at_current at the CURRENT swap; a generation takes $need bytes)"
