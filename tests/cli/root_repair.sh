#!/bin/sh
# meson test "root-repair": a generations root whose CURRENT was deleted or names a generation
# that is not there, and symbolic links where a root holds plain files.
#  - check says CURRENT was deleted (exit 5); gc refuses to remove the chain as orphans (exit 5);
#  - convert points CURRENT at the newest generation that verifies, chains onto it and says so
#    (a WARNING, and in the JSON's warnings): the chain stays whole;
#  - CURRENT or an array file that is a symbolic link is refused, naming it (check exit 4,
#    convert exit 1), even when the link leads to a valid file.
#  - a CURRENT naming a generation that is not there, none left: one message and status (exit 5)
#    from check, inspect, generations and gc; convert starts a new chain and says so.
# Usage: root_repair.sh STK SOURCE_ROOT
set -u
stk=$1
model=$2/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-repair.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
r=$tmp/root
"$stk" convert "$model" "$r" 2>/dev/null || fail convert1
"$stk" convert "$model" "$r" --ltok 7 2>/dev/null || fail convert2
g2=$(ls "$r/generations" | tail -1)

# 1. CURRENT deleted.
rm "$r/CURRENT"
"$stk" check "$r" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 5 ] || fail "check without CURRENT: exit $rc"
grep -q "a generations root with 2 entries in generations/ but no CURRENT: the pointer to the current generation was deleted" "$tmp/e" ||
  fail "check without CURRENT: $(cat "$tmp/e")"
"$stk" generations "$r" --gc --keep 1 >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 5 ] || fail "gc without CURRENT: exit $rc"
grep -q "has 2 generations but no valid CURRENT .*gc would remove them all; nothing removed" "$tmp/e" || fail "gc: $(cat "$tmp/e")"
[ "$(ls "$r/generations" | wc -l)" = 2 ] || fail "gc removed something"
"$stk" convert "$model" "$r" --json >"$tmp/j" 2>/dev/null || fail "convert after CURRENT was deleted"
python3 - "$tmp/j" "$g2" <<'PY' || fail "convert after CURRENT was deleted: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
g2 = sys.argv[2]
assert d["published"] and d["generation_name"].startswith("000003-"), d["generation_name"]
assert d["previous"].startswith(g2[7:]), (d["previous"], g2)
w = [x for x in d["warnings"] if "CURRENT was missing or named a generation that is not there" in x]
assert len(w) == 1 and g2[7:] in w[0], d["warnings"]
PY
"$stk" check "$r" --json >"$tmp/c" 2>/dev/null || fail "check after repair"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['chain']) == 3, d['chain']" "$tmp/c" || fail "chain after repair"

# 2. CURRENT names a generation that is not there: repaired the same way.
echo "000009-0123456789abcdef 0123456789abcdef000000000000000000000000000000000000000000000000" >"$r/CURRENT"
"$stk" convert "$model" "$r" 2>"$tmp/e" || fail "convert with a dangling CURRENT: $(cat "$tmp/e")"
tr '\n' ' ' <"$tmp/e" | tr -s ' ' | grep -q "WARNING: [^ ]*/CURRENT was missing or named a generation that is not there" ||
  fail "no warning: $(cat "$tmp/e")"
"$stk" check "$r" --json >"$tmp/c" 2>/dev/null || fail "check after the second repair"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['chain']) == 4, d['chain']" "$tmp/c" || fail "chain of 4"

# 3. Symbolic links: CURRENT (to a valid copy of itself, and out of the root), an array file.
cp "$r/CURRENT" "$tmp/CURRENT.copy"
for target in "$tmp/CURRENT.copy" /etc/hostname; do
  rm "$r/CURRENT"; ln -s "$target" "$r/CURRENT"
  "$stk" check "$r" >/dev/null 2>"$tmp/e"; rc=$?
  [ $rc = 4 ] || fail "CURRENT -> $target: check exit $rc"
  grep -q "$r/CURRENT is a symbolic link: a generation's files are plain files; refused" "$tmp/e" || fail "CURRENT link: $(cat "$tmp/e")"
  "$stk" convert "$model" "$r" >/dev/null 2>"$tmp/e"; rc=$?
  [ $rc = 1 ] || fail "CURRENT -> $target: convert exit $rc"
done
rm "$r/CURRENT"; cp "$tmp/CURRENT.copy" "$r/CURRENT"
"$stk" check "$r" >/dev/null 2>&1 || fail "check with CURRENT restored"
cur=$(cut -d' ' -f1 "$r/CURRENT")
a=$r/generations/$cur/arrays/prf_W.bin
cp "$a" "$tmp/prf_W.bin"; rm "$a"; ln -s "$tmp/prf_W.bin" "$a"
"$stk" check "$r" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 4 ] || fail "array link: check exit $rc"
grep -q "arrays/prf_W.bin is a symbolic link" "$tmp/e" || fail "array link: $(cat "$tmp/e")"
# 4. CURRENT names a generation that is not there and none is left: check, the listing, gc, inspect
#    and convert say the same thing (STK_E_NOT_FOUND, exit 5), gc leaves CURRENT as it is, and
#    convert starts a new chain and says so.
r4=$tmp/dangling
"$stk" convert "$model" "$r4" 2>/dev/null || fail "convert into $r4"
g=$(cut -d' ' -f1 "$r4/CURRENT")
rm -rf "$r4/generations/$g"
cp "$r4/CURRENT" "$tmp/CURRENT.dangling"
why="$r4/CURRENT points to a missing generation $g (no $r4/generations/$g)"
repair="The next stk convert into $r4 repairs CURRENT: it points it at the newest generation that verifies and chains onto it, or starts a new chain when none is left (and says which)"
for cmd in "check:there is no current generation to read" "inspect:there is no current generation to read" \
           "generations:no generation is current" \
           "generations --gc:gc keeps the current generation and the chain behind it, and there is none: nothing removed"; do
  verb=${cmd%%:*}; tail=${cmd#*:}
  # shellcheck disable=SC2086
  "$stk" $verb "$r4" >/dev/null 2>"$tmp/e"; rc=$?
  [ $rc = 5 ] || fail "$verb with a dangling CURRENT: exit $rc: $(cat "$tmp/e")"
  first=$(head -1 "$tmp/e")
  [ "$first" = "stk ${verb%% *}: STK_E_NOT_FOUND: file not found: $why: $tail. $repair" ] || fail "$verb: $first"
done
cmp -s "$r4/CURRENT" "$tmp/CURRENT.dangling" || fail "gc changed the dangling CURRENT"
"$stk" convert "$model" "$r4" --json >"$tmp/j" 2>/dev/null || fail "convert with a dangling CURRENT and no generation"
python3 - "$tmp/j" "$r4" <<'PY' || fail "convert over a dangling CURRENT: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["published"] and d["previous"] is None, (d["generation_name"], d["previous"])
w = [x for x in d["warnings"] if "CURRENT" in x]
assert w == [sys.argv[2] + "/CURRENT was missing or named a generation that is not there: no generation in it "
             "verifies, so the new generation starts a new chain (previous none) and CURRENT now names it"], d["warnings"]
PY
"$stk" check "$r4" >/dev/null 2>&1 || fail "check after the new chain"
echo "ok: root repair and symbolic links"
