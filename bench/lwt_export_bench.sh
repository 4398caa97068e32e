#!/usr/bin/env bash
# .lwt export against a floor measured in the same run: reading the checkpoint and writing an
# output of the same size as the export's (cat > /dev/null; then head -c from /dev/zero and
# sync -f, as export fsyncs its output).
#   bench/lwt_export_bench.sh STK_BIN MODEL_DIR OUT_DIR DTYPE [RUNS] [THREADS]
# (THREADS: stk export --threads, default 1; the floor is single-threaded either way.)
# Prints, per run, wall seconds, CPU seconds (user + system) and peak RSS (KiB, /usr/bin/time)
# of the export and wall and CPU seconds of the floor, then the medians, the ratio of the
# medians of wall time, and the load average.  Export runs first in each run, so both it and
# the floor find the checkpoint in the page cache when it fits in memory.
set -euo pipefail
STK=$1 MODEL=$2 OUT=$3 DTYPE=$4 RUNS=${5:-3} THREADS=${6:-1}
mkdir -p "$OUT"
ckpt=$(ls "$MODEL"/*.safetensors "$MODEL"/*.bin 2>/dev/null | tr "\n" " " || true)
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ex=() excpu=() fl=() flcpu=() rss=()
for r in $(seq "$RUNS"); do
  rm -f "$OUT/x.lwt" "$OUT/floor.bin"
  /usr/bin/time -f "%e %U %S %M" -o "$OUT/time.txt" "$STK" export --in "$MODEL" --out "$OUT/x.lwt" --dtype "$DTYPE" --threads "$THREADS" >/dev/null
  read -r e u s m < "$OUT/time.txt"; c=$(echo "$u + $s" | bc); ex+=("$e"); excpu+=("$c"); rss+=("$m")
  size=$(stat -c %s "$OUT/x.lwt")
  rm -f "$OUT/x.lwt"  # the floor's file takes its place (a 7B float32 output is 27 GB)
  # shellcheck disable=SC2086  # $ckpt: the checkpoint files, split on purpose
  read -r f fc < <(bash "$(dirname "$0")/read_write_floor.sh" "$size" "$OUT/floor.bin" $ckpt); fl+=("$f"); flcpu+=("$fc")
  echo "run $r: export ${e}s wall ${c} CPU-s (peak RSS ${m} KiB, output $size bytes), floor ${f}s wall ${fc} CPU-s; load $(cut -d' ' -f1 /proc/loadavg)"
done
me=$(printf '%s\n' "${ex[@]}" | median); mf=$(printf '%s\n' "${fl[@]}" | median)
mec=$(printf '%s\n' "${excpu[@]}" | median); mfc=$(printf '%s\n' "${flcpu[@]}" | median)
echo "threads $THREADS: median export ${me}s (${mec} CPU-s), floor ${mf}s (${mfc} CPU-s), ratio $(echo "scale=2; $me / $mf" | bc); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$OUT/x.lwt" "$OUT/floor.bin" "$OUT/time.txt"
