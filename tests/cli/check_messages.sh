#!/bin/sh
# meson test "check-messages": what stk check and stk inspect say.
#  - check of a missing path: "no such directory" (exit 5);
#  - a flipped byte: the damaged byte's offset and 4 KiB block (located against the identical
#    array of the root's other generation), in the text and the JSON's offset (exit 4);
#  - two damaged arrays: both reported (the first, then "1 more array failed");
#  - inspect of a published generation: check "passed", manifest_emit "= curr_hash", whole stage
#    names; inspect of one array file: its header and verified payload (a damaged one: exit 4).
# Usage: check_messages.sh STK SOURCE_ROOT
set -u
stk=$1
model=$2/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-checkmsg.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$stk" check "$tmp/nonexistent" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 5 ] || fail "missing path: exit $rc"
grep -q "$tmp/nonexistent: no such directory" "$tmp/e" || fail "missing path: $(cat "$tmp/e")"

r=$tmp/root
"$stk" convert "$model" "$r" 2>/dev/null || fail convert1
"$stk" convert "$model" "$r" 2>/dev/null || fail convert2
cur=$(cut -d' ' -f1 "$r/CURRENT")
g=$r/generations/$cur

# inspect before any damage.
"$stk" inspect "$r" >"$tmp/i" 2>&1 || fail "inspect"
grep -q "^check  *passed  *(published" "$tmp/i" || fail "inspect: check state: $(grep '^check' "$tmp/i")"
grep -q "^manifest_emit  *ran  *= curr_hash ($(echo "$cur" | cut -d- -f2)" "$tmp/i" || fail "inspect: manifest_emit: $(grep '^manifest_emit' "$tmp/i")"
grep -A1 "^overlays_build$" "$tmp/i" | grep -q "^  overlays_H.bin  *f32" || fail "inspect: stage heading: $(cat "$tmp/i")"
grep -q "^tokenizer_build_or_wrap  " "$tmp/i" || fail "inspect: stage name cut"
if grep -q "~" "$tmp/i"; then fail "inspect: a cut name: $(grep '~' "$tmp/i")"; fi
if awk 'length > 100' "$tmp/i" | grep -q .; then fail "inspect: a line over 100: $(awk 'length > 100' "$tmp/i")"; fi
"$stk" inspect "$g/arrays/prf_W.bin" >"$tmp/a" 2>&1 || fail "inspect array: $(cat "$tmp/a")"
grep -q "^shape  *2x512x16 (rank 3)" "$tmp/a" || fail "inspect array: $(cat "$tmp/a")"
"$stk" inspect "$g/arrays/prf_W.bin" --json >"$tmp/a.json" 2>/dev/null || fail "inspect array --json"
python3 - "$tmp/a.json" <<'PY' || fail "inspect array JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "array" and d["dtype"] == "f32" and d["shape"] == [2, 512, 16] and d["bytes"] == 65536, d
assert d["payload_verified"] is True and d["ok"] is True, d
PY

# A flipped byte at payload offset 5000 (file offset 5128), and a second array removed.
python3 - "$g/arrays/prf_W.bin" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[5128] ^= 0x10
open(p, "wb").write(bytes(b))
PY
"$stk" inspect "$g/arrays/prf_W.bin" >/dev/null 2>&1; rc=$?
[ $rc = 4 ] || fail "inspect of a damaged array: exit $rc"
rm "$g/arrays/bridge_hubs.bin"
"$stk" check "$r" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 4 ] || fail "damaged: exit $rc"
grep -q "the first damaged byte is at offset 5128 (4 KiB block 1 at 4096): compared with the identical array of generation 000001-" "$tmp/e" ||
  fail "damaged: no block named: $(cat "$tmp/e")"
grep -q "1 more array failed:" "$tmp/e" || fail "damaged: the second failure is not reported: $(cat "$tmp/e")"
grep -q "bridge_hubs.bin listed in the manifest is missing" "$tmp/e" || fail "damaged: bridge_hubs.bin not named: $(cat "$tmp/e")"
"$stk" check "$r" --json >"$tmp/c.json" 2>/dev/null
python3 - "$tmp/c.json" "$cur" <<'PY' || fail "damaged: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 4 and d["file"] == "generations/%s/arrays/prf_W.bin" % sys.argv[2], d
assert d["offset"] == 5128, d["offset"]
assert "bridge_hubs.bin" in d["message"], d["message"]
PY
echo "ok: check and inspect messages"
