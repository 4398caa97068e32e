#!/usr/bin/env bash
# .lwt export against a floor measured in the same run: reading the checkpoint and writing an
# output of the same size as the export's (cat > file; then head -c from /dev/zero for the rest).
#   bench/lwt_export_bench.sh STK_BIN MODEL_DIR OUT_DIR DTYPE [RUNS]
# Prints wall seconds and peak RSS (KiB, /usr/bin/time) per run, then the medians and the ratio.
# Export runs first in each run, so both it and the floor find the checkpoint in the page cache
# when it fits in memory.
set -euo pipefail
STK=$1 MODEL=$2 OUT=$3 DTYPE=$4 RUNS=${5:-3}
mkdir -p "$OUT"
ckpt=$(ls "$MODEL"/*.safetensors "$MODEL"/*.bin 2>/dev/null || true)
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ex=() fl=() rss=()
for r in $(seq "$RUNS"); do
  rm -f "$OUT/x.lwt" "$OUT/floor.bin"
  /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$STK" export --in "$MODEL" --out "$OUT/x.lwt" --dtype "$DTYPE" >/dev/null
  read -r e m < "$OUT/time.txt"; ex+=("$e"); rss+=("$m")
  size=$(stat -c %s "$OUT/x.lwt")
  rm -f "$OUT/x.lwt"  # the floor's file takes its place (a 7B float32 output is 27 GB)
  s=$(date +%s.%N)
  cat $ckpt > /dev/null
  head -c "$size" /dev/zero > "$OUT/floor.bin"; sync -f "$OUT/floor.bin"
  f=$(echo "$(date +%s.%N) - $s" | bc); fl+=("$f")
  echo "run $r: export ${e}s (peak RSS ${m} KiB, output $size bytes), floor ${f}s"
done
me=$(printf '%s\n' "${ex[@]}" | median); mf=$(printf '%s\n' "${fl[@]}" | median)
echo "median export ${me}s, floor ${mf}s, ratio $(echo "scale=2; $me / $mf" | bc); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$OUT/x.lwt" "$OUT/floor.bin" "$OUT/time.txt"
