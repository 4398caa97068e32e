#!/bin/sh
# meson test "tokenizer-arena": the tokenizer stage's arena is bounded by the vocabulary it reads
# (tokens, piece bytes), not by the file's size.  tiny-gpt2's vocab.json padded with 8 MiB of
# JSON whitespace (the same 261 tokens) plans within 64 KiB of the plain one (the file-size bound
# planned about 78 bytes per file byte: +650 MB), and converts.  Usage: tokenizer_arena.sh STK SOURCE_ROOT
set -u
stk=$1
model=$2/bindings/testdata/tiny-gpt2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-tokarena.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cp -r "$model" "$tmp/m"
python3 - "$tmp/m/vocab.json" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read().rstrip()
assert s.endswith("}")
open(p, "w").write(s[:-1] + " " * (8 << 20) + "}")
PY
arena() { "$stk" convert "$1" "$tmp/unused" --dry-run --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['arena_bytes'])"; }
plain=$(arena "$model") || fail "dry run, plain"
padded=$(arena "$tmp/m") || fail "dry run, padded"
[ $((padded - plain)) -le 65536 ] && [ $((plain - padded)) -le 65536 ] ||
  fail "arena $padded bytes with an 8 MiB vocab.json, $plain without: not bounded by the vocabulary"
"$stk" convert "$tmp/m" "$tmp/root" >/dev/null 2>"$tmp/e" || fail "convert with the padded vocab.json: $(cat "$tmp/e")"
echo "ok: tokenizer arena $padded bytes (plain $plain) for an 8 MiB vocab.json"
