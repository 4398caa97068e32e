#!/usr/bin/env bash
# The main job on the default that ships in the repo: convert the tiny GPT-2 checkpoint in
# tests/data/models/gpt2 (written by PyTorch; see scripts/make_model_fixtures.py), then verify
# the published output.  Output goes to ${1:-/tmp/stk-demo}.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/stk-demo}
if [ ! -f build/build.ninja ]; then meson setup build >/dev/null; fi
ninja -C build >/dev/null
rm -rf "$out"
./build/src/cli/stk inspect --in tests/data/models/gpt2
./build/src/cli/stk convert --in tests/data/models/gpt2 --out "$out" --partial
./build/src/cli/stk check --out "$out"
