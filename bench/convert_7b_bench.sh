#!/bin/sh
# The whole `stk convert` (no --partial) of the Llama-2-7B-shaped checkpoint against its floor,
# measured in one session:
#   floor = reading the checkpoint (cat of the warm shards to /dev/null, median of 3)
#         + the FFN collapse's three products per layer, S, M+ and M- (each (d x h)(h x d),
#           2 d h d FLOPs; 32 layers: 35.5 TFLOP), at the BLIS sgemm peak bench/ffn_bench measures
#           at the 7B width (d 4096, h 1376) just before and just after the converts (the higher)
#   ours  = `stk convert --threads T` wall time (median of RUNS), peak RSS (/usr/bin/time -v, the
#           largest of the runs) against the bound: the largest layer in f32 + 512 MiB
# Prints each run's stage seconds, the stage digests (every run must give the same ones: the
# script fails otherwise), one summary row, and the load average before and after.
#
# Usage: bench/convert_7b_bench.sh BUILD_DIR [RUNS=3] [THREADS=2] [MODEL_DIR=$STK_BENCH_DATA/llama7b]
# ($STK_BENCH_DATA defaults to BUILD_DIR/bench-data.)
# Needs: /usr/bin/python3 bench/parse_make_checkpoint.py llama7b MODEL_DIR (13.5 GB),
# and BUILD_DIR built with -Dbench=true: ninja -C BUILD_DIR src/cli/stk bench/ffn_bench.
set -eu
build=$1 runs=${2:-3} threads=${3:-2} model=${4:-${STK_BENCH_DATA:-$1/bench-data}/llama7b}
d=4096 h=11008 layers=32
[ -f "$model/config.json" ] || { echo "SKIPPED: $model missing (bench/parse_make_checkpoint.py llama7b $model)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-7bbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
secs() { awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s}'; }
peak() { "$build/bench/ffn_bench" 4096 1376 3 "$threads" | awk '/peak candidate/ {g = $(NF - 5); if (g > m) m = g} END {print m}'; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "stk convert, whole, $model, threads $threads, $runs runs; load average before: $load0"
cat "$model"/*.safetensors >/dev/null
read=$(for i in 1 2 3; do /usr/bin/time -f %e cat "$model"/*.safetensors 2>&1 >/dev/null; done | median)
peak1=$(peak)
walls="" rss=0
for i in $(seq "$runs"); do
  rm -rf "$tmp/out"
  /usr/bin/time -v -o "$tmp/time" "$build/src/cli/stk" convert --in "$model" --out "$tmp/out" --threads "$threads" --json \
    >"$tmp/run$i.json" 2>"$tmp/err" || { cat "$tmp/err" "$tmp/time"; exit 1; }
  w=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time" | secs)
  r=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")
  walls="$walls $w"; [ "$r" -gt "$rss" ] && rss=$r
  /usr/bin/python3 - "$tmp/run$i.json" "$i" "$w" "$r" >"$tmp/digests$i" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("run %s: wall %s s, peak RSS %s KiB; stage seconds: %s" % (sys.argv[2], sys.argv[3], sys.argv[4], ", ".join(
    "%s %.1f" % (s["stage"], s["seconds"]) for s in d["stages"])), file=sys.stderr)
for s in d["stages"]:
    print(s["stage"], s["status"], s["crc32c"], s["sha256_low64"])
EOF
  cmp -s "$tmp/digests1" "$tmp/digests$i" || { echo "FAIL: run $i's stage digests differ from run 1's"; diff "$tmp/digests1" "$tmp/digests$i"; exit 1; }
done
peak2=$(peak)
echo "stage digests (stage, status, crc32c, sha256 low 64 bits):"
sed 's/^/  /' "$tmp/digests1"
wall=$(echo $walls | tr ' ' '\n' | median)
unit=$("$build/src/cli/stk" inspect --in "$model" | sed -n 's/.*largest layer .*(\([0-9]*\) bytes).*/\1/p')
echo "| d, h, layers | read | peak sgemm (before, after) | GEMM floor | floor | convert wall (median of $runs) | vs floor | peak RSS | largest layer + 512 MiB | load (1, 5, 15 min) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk -v d="$d" -v h="$h" -v l="$layers" -v rd="$read" -v p1="$peak1" -v p2="$peak2" -v w="$wall" -v rss="$rss" -v unit="$unit" \
    -v load="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
  pk = p1 > p2 ? p1 : p2
  gm = 3 * 2 * d * h * d * l / (pk * 1e9); fl = rd + gm
  printf "| %d, %d, %d | %.2f s | %.1f (%.1f, %.1f) GFLOP/s | %.1f s | %.1f s | %.1f s | %.2fx | %.0f MiB | %.0f MiB | %s |\n",
         d, h, l, rd, pk, p1, p2, gm, fl, w, w / fl, rss / 1024, unit / 1048576 + 512, load }'
