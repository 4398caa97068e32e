#!/usr/bin/env bash
# Reproduces docs/fidelity.md's Gemma 3 270M section: every table, figure and the acceptance
# output.  Run by hand from the repository root after building (meson setup build-test &&
# ninja -C build-test src/cli/stk libstk.so.0.1.0), `bash scripts/fetch-real-models.sh`
# (which assembles the Q4_K_M GGUF under ${STK_CACHE:-~/.cache/stk}/real-models/gemma3-270m) and
# `bash scripts/make-venv.sh` (torch, transformers, tokenizers, safetensors, matplotlib; PY
# defaults to that venv's python3):
#   bash tools/fidelity/run-gemma3.sh [WORK_DIR] [BUILD_DIR]
# WORK_DIR holds the HF directory, the conversions and the capture cache (~2 GB).
set -euo pipefail
W=${1:-/tmp/stk-fidelity-gemma3}; B=${2:-build-test}
PY=${PY:-${STK_VENV:-${STK_CACHE:-$HOME/.cache/stk}/venv}/bin/python3}
STK=$B/src/cli/stk; OUT=docs/fidelity/gemma3
mkdir -p "$W" "$OUT"
GGUF_DIR=${GGUF_DIR:-${STK_MODEL_CACHE:-${STK_CACHE:-$HOME/.cache/stk}/real-models}/gemma3-270m}
GGUF=gemma-3-270m-q4_k_m.gguf
[ -f "$GGUF_DIR/$GGUF" ] || { echo "run-gemma3: $GGUF_DIR/$GGUF missing: run scripts/fetch-real-models.sh" >&2; exit 1; }
[ -f "$W/hf/model.safetensors" ] || $PY tools/fidelity/gguf2hf.py "$GGUF_DIR" "$GGUF" "$W/hf"
conv() { [ -f "$W/gen-$1/CURRENT" ] || $STK convert --in "$W/hf" --out "$W/gen-$1" --threads 2 "${@:2}" >/dev/null; }
conv r512; conv r2048 --r 2048; conv rv8 --rv 8; conv rv16 --rv 16; conv rv32 --rv 32; conv lsq --memory-fit lsq
# top-L enters through tools/fidelity's emulation of the stage (checked key for key against
# stk_lookup on the default conversion), so no --topl conversions are needed for the curves.
OPENBLAS_NUM_THREADS=1 nice $PY tools/fidelity/fidelity.py --model "$W/hf" --gen "$W/gen-r512" --gen-r2048 "$W/gen-r2048" \
  --gen-rv 8=$W/gen-rv8,16=$W/gen-rv16,32=$W/gen-rv32 \
  --lib $B/libstk.so --out $OUT --name "Gemma 3 270M" --tokens 10240 --prf-contexts 2 \
  --head-contexts 1 --head-layer-stride 3 --lookup-layers 0,17 --ffn-sparse-k 1,6,64 --cache "$W/cache.pkl"
$PY tools/fidelity/report.py $OUT
# the published memory banks (the default AR(2), --memory-fit lsq) on the real activations' RoPE kernel
$PY tools/fidelity/memory_bank.py --model "$W/hf" --energies "$W/cache.pkl" --bank "spec AR(2) (default)=$W/gen-r512" \
  --bank "--memory-fit lsq=$W/gen-lsq" --json $OUT/memory-banks.json > $OUT/memory-banks.md
$STK check --out "$W/gen-r512" --acceptance --model "$W/hf" > $OUT/acceptance.txt || true
