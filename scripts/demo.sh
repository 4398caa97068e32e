#!/usr/bin/env bash
# The main job on the default that ships in the repo: the tiny GPT-2 in
# bindings/testdata/tiny-gpt2 (hub layout: config.json, model.safetensors, vocab.json,
# merges.txt; made by bindings/testdata/generate.py).  Inspect it, convert it into a generations
# root (twice: the second run publishes a second generation chained to the first), verify the
# current generation and the chain, list the generations, and replay a prompt through the
# current generation's O(1) token tables.
# Output goes to ${1:-/tmp/stk-demo} (replaced if it exists).
set -euo pipefail
cd "$(dirname "$0")/.."
model=bindings/testdata/tiny-gpt2
out=${1:-/tmp/stk-demo}
if [ ! -f build/build.ninja ]; then meson setup build >build.setup.log 2>&1 || { cat build.setup.log; exit 1; }; fi
ninja -C build >build.build.log 2>&1 || { tail -40 build.build.log; exit 1; }
stk=./build/src/cli/stk
rm -rf "$out"
$stk inspect --in "$model"
# The whole DAG, published into the generations root $out (twice: two chained generations).
# --allow-uncertified-tokenizer: byte-level BPE never passes Sardinas-Patterson (docs/decisions.md).
$stk convert --in "$model" --out "$out" --allow-uncertified-tokenizer
$stk convert --in "$model" --out "$out" --allow-uncertified-tokenizer --json >/dev/null
$stk check --out "$out"
$stk generations "$out"
$stk replay --out "$out" --prompt "the theorem holds in the end"
