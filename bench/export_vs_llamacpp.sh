#!/usr/bin/env bash
# stk export (.lwt) beside llama.cpp's own converter (convert_hf_to_gguf.py, HF -> GGUF) on the
# same checkpoint, in the same run, with a floor measured in that run: reading the checkpoint and
# writing a file of the output's size (cat > /dev/null; head -c from /dev/zero; sync -f).
#   bench/export_vs_llamacpp.sh STK_BIN MODEL_DIR OUT_DIR LLAMA_CPP_DIR PYTHON [RUNS] [THREADS]
# Two pairs: stk --dtype bfloat16 beside --outtype bf16 (both store the bf16 weights as they are),
# and stk --dtype int8 (one scale per row) beside --outtype q8_0 (one scale per 32 values).
# llama.cpp is not part of this repository and nothing here builds it: give a checkout
# (convert_hf_to_gguf.py, conversion/, gguf-py/) and a Python with torch, numpy and safetensors.
# The converter is run as scripts/make_gguf_fixtures.py runs it for a model with no tokenizer
# files (set_vocab made a no-op); it is single-threaded, stk runs with --threads THREADS.
# Per run and tool: wall seconds, CPU seconds (user + system), peak RSS (KiB, /usr/bin/time);
# then the medians, each tool's ratio to its floor, and stk's time as a fraction of llama.cpp's.
set -euo pipefail
STK=$1 MODEL=$2 OUT=$3 LLAMA=$4 PY=$5 RUNS=${6:-3} THREADS=${7:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
ckpt=$(ls "$MODEL"/*.safetensors | tr "\n" " ")
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timed() {  # output file, command...: runs it, echoes "wall cpu rss size", removes the output
  local f=$1
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$OUT/time.txt" "$@" >/dev/null 2>"$OUT/stderr.txt" ||
    { cat "$OUT/stderr.txt" >&2; exit 1; }
  local e u s m
  read -r e u s m <"$OUT/time.txt"
  echo "$e $(echo "$u + $s" | bc) $m $(stat -c %s "$f")"
  rm -f "$f"
}
floor() {  # bytes: read the checkpoint, write that many bytes; echoes wall seconds
  # shellcheck disable=SC2086  # $ckpt: the checkpoint files, split on purpose
  bash "$root/bench/read_write_floor.sh" "$1" "$OUT/floor.bin" $ckpt | cut -d' ' -f1
}
llamacpp=("$PY" -c "import sys; sys.path.insert(0, '$root/scripts'); import make_gguf_fixtures as m; exec(m.CHILD)"
  "$LLAMA" llama "$MODEL")
for pair in bfloat16:bf16 int8:q8_0; do
  ours=${pair%%:*} theirs=${pair#*:}
  sw=() lw=() sf=() lf=()
  for r in $(seq "$RUNS"); do
    read -r e c m size < <(timed "$OUT/x.lwt" "$STK" export --in "$MODEL" --out "$OUT/x.lwt" --dtype "$ours" --threads "$THREADS")
    f=$(floor "$size")
    echo "run $r: stk export --dtype $ours: ${e}s wall, ${c} CPU-s, peak RSS ${m} KiB, $size bytes; floor ${f}s; load $(cut -d' ' -f1 /proc/loadavg)"
    sw+=("$e") sf+=("$f")
    read -r e c m size < <(timed "$OUT/x.gguf" "${llamacpp[@]}" --outtype "$theirs" --outfile "$OUT/x.gguf")
    f=$(floor "$size")
    echo "run $r: llama.cpp --outtype $theirs: ${e}s wall, ${c} CPU-s, peak RSS ${m} KiB, $size bytes; floor ${f}s; load $(cut -d' ' -f1 /proc/loadavg)"
    lw+=("$e") lf+=("$f")
  done
  ms=$(printf '%s\n' "${sw[@]}" | median) ml=$(printf '%s\n' "${lw[@]}" | median)
  fs=$(printf '%s\n' "${sf[@]}" | median) fl=$(printf '%s\n' "${lf[@]}" | median)
  echo "$ours vs $theirs, threads $THREADS: stk median ${ms}s (floor ${fs}s, $(echo "scale=3; $ms / $fs" | bc)x)," \
    "llama.cpp median ${ml}s (floor ${fl}s, $(echo "scale=3; $ml / $fl" | bc)x); stk / llama.cpp $(echo "scale=3; $ms / $ml" | bc)"
done
rm -f "$OUT/time.txt" "$OUT/stderr.txt"
