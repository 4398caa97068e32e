#!/bin/sh
# Tokenizer encode benchmark, all encoders on the same text in the same run:
#   1. the English corpus (scripts/make_english_corpus.py -> bench/out/english.txt, >= 10 MB)
#   2. the peers under Node: tiktoken (gpt2) and HF tokenizers (the hub's gpt2 tokenizer.json)
#   3. stk's real BPE and greedy encoder, ids checked against the peers'
# Usage (from the repository root, after `meson setup build -Dbench=true && ninja -C build` and
# `npm ci --prefix bench/node`):  sh bench/tokenize_bench.sh [BUILD_DIR] [RUNS]
set -e
BUILD=${1:-build}
RUNS=${2:-5}
MODEL=tests/data/third_party/gpt2/hf-dir
OUT=bench/out/tokenize
mkdir -p "$OUT"
python3 scripts/make_english_corpus.py bench/out/english.txt 10
node bench/node/tokenize_peers.js bench/out/english.txt "$MODEL/tokenizer.json" "$OUT" "$RUNS" > "$OUT/peers.jsonl"
grep '"peer":"tiktoken"' "$OUT/peers.jsonl" > "$OUT/tiktoken.json"
grep '"peer":"hf_tokenizers"' "$OUT/peers.jsonl" > "$OUT/hf_tokenizers.json"
grep '"peer":"tiktoken_whole"' "$OUT/peers.jsonl" > "$OUT/tiktoken_whole.json"
"$BUILD/bench/tokenize_bench" bench/out/english.txt "$MODEL" "$OUT" "$RUNS"
