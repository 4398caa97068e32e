#!/usr/bin/env bash
# The main job on the default that ships in the repo: the tiny GPT-2 in
# bindings/testdata/tiny-gpt2 (hub layout: config.json, model.safetensors, vocab.json,
# merges.txt; made by bindings/testdata/generate.py).  Builds the stk command only (build/src/cli/stk;
# the tests and benches are not built), then: inspect the model, convert it into a generations
# root (twice: the second run publishes a second generation chained to the first), verify the
# current generation and the chain, list the generations, and replay a prompt through the
# current generation's O(1) token tables.
# Output goes to ${1:-/tmp/stk-demo}: a directory that does not exist, an empty one, or a
# generations root from an earlier run (replaced); anything else is refused, never deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
model=bindings/testdata/tiny-gpt2
out=${1:-/tmp/stk-demo}

# A generations root holds generations/ and nothing but the root's own files.
is_generations_root() {
  [ -d "$1/generations" ] || return 1
  local e
  for e in "$1"/* "$1"/.[!.]*; do
    [ -e "$e" ] || continue
    case "$(basename "$e")" in
      CURRENT | CURRENT.tmp* | LOCK | generations | .staging-* | .trash-*) ;;
      *) return 1 ;;
    esac
  done
}
if [ -e "$out" ] || [ -L "$out" ]; then
  if [ ! -d "$out" ] || [ -L "$out" ]; then
    echo "demo.sh: $out exists and is not a directory; give another output directory" >&2
    exit 2
  elif is_generations_root "$out"; then
    echo "demo.sh: replacing the generations root $out (from an earlier run)"
    rm -rf "$out"
  elif [ -n "$(ls -A "$out")" ]; then
    echo "demo.sh: $out is not empty and is not a generations root; give another output directory" >&2
    exit 2
  fi
fi

if [ -n "${STK_BIN:-}" ]; then  # a stk already built (the test of this script)
  stk=$STK_BIN
else
  if [ ! -f build/build.ninja ]; then
    echo "demo.sh: configuring build/ (meson setup build)"
    meson setup build >build.setup.log 2>&1 || { cat build.setup.log; exit 1; }
  fi
  echo "demo.sh: building the stk command (ninja -C build src/cli/stk)"
  ninja -C build src/cli/stk
  stk=./build/src/cli/stk
  echo "demo.sh: the command is $stk ('meson install -C build' puts it in /usr/local/bin)"
  echo
fi
set -x
$stk inspect --in "$model"
# The whole DAG, published into the generations root $out (twice: two chained generations).
# --allow-uncertified-tokenizer: byte-level BPE never passes Sardinas-Patterson (docs/decisions.md).
$stk convert --in "$model" --out "$out" --allow-uncertified-tokenizer
$stk convert --in "$model" --out "$out" --allow-uncertified-tokenizer --json >/dev/null
$stk check --out "$out"
$stk generations "$out"
$stk replay --out "$out" --prompt "the theorem holds in the end"
