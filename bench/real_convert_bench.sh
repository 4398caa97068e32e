#!/bin/sh
# The real models' whole conversion against its end-to-end floor (issue 38), measured in one session:
#   floor = reading the GGUF (cat of the warm file to /dev/null, median of 3)
#         + dequantising every tensor at memcpy speed (bench/convert_floor: per tensor, a memcpy
#           of its f32 bytes on T threads, medians summed)
#         + the FFN collapse's three products per layer, S, M+ and M- (each (d x h)(h x d),
#           2 d h d FLOPs), at the BLIS sgemm peak bench/ffn_bench measures on the model's own
#           (d, h) at T threads in the same session
#   ours  = `stk convert --threads T` wall time and peak RSS (/usr/bin/time -v), median of RUNS,
#           and each stage's seconds (the median over the runs of what `stk convert` prints).
# Two stages against their own floors (bench/convert_floor says how each is derived):
#   tokenizer_build_or_wrap  (+ the library's read of the vocabulary, done when the job is sized)
#                            vs reading the GGUF vocabulary arrays and hashing every piece once
#   bridge_init              vs its embeddings at memcpy speed + its leg products at the peak
# Usage: bench/real_convert_bench.sh BUILD_DIR [RUNS=3] [THREADS=2]
# Needs scripts/fetch-real-models.sh first.  Prints three tables and the load average.
set -eu
build=$1 runs=${2:-3} threads=${3:-2}
cache=${STK_MODEL_CACHE:-${STK_CACHE:-$HOME/.cache/stk}/real-models}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-realbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
secs() { awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s}'; }
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$tmp/stages"; : >"$tmp/own"
echo "| model | d, h, layers | GGUF | read | dequant at memcpy | peak sgemm | GEMM floor | floor | convert wall | vs floor | peak RSS | largest unit + 512 MiB | load |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for spec in "SmolLM2-135M Q4_1:smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf:576:1536:30" \
            "Gemma-3-270M Q4_K_M:gemma3-270m/gemma-3-270m-q4_k_m.gguf:640:2048:18"; do
  name=${spec%%:*}; rest=${spec#*:}
  file=$cache/${rest%%:*}; rest=${rest#*:}
  d=${rest%%:*}; rest=${rest#*:}; h=${rest%%:*}; layers=${rest#*:}
  [ -f "$file" ] || { echo "SKIPPED: $file missing (run scripts/fetch-real-models.sh)"; continue; }
  cat "$file" >/dev/null
  read=$(for i in 1 2 3; do /usr/bin/time -f %e cat "$file" 2>&1 >/dev/null; done | median)
  peak=$("$build/bench/ffn_bench" "$d" "$h" 5 "$threads" | awk '/peak candidate/ {g = $(NF - 5); if (g > m) m = g} END {print m}')
  gemm=$(awk -v d="$d" -v h="$h" -v l="$layers" -v p="$peak" 'BEGIN {printf "%.2f", 3 * 2 * d * h * d * l / (p * 1e9)}')
  "$build/bench/convert_floor" "$file" "$peak" "$threads" 3 >"$tmp/floor" 2>/dev/null
  fl() { awk -v k="$1" '$1 == k {print $2}' "$tmp/floor"; }
  deq=$(fl dequant_s)
  walls=""; rss=0
  for i in $(seq "$runs"); do
    rm -rf "$tmp/out"
    /usr/bin/time -v "$build/src/cli/stk" convert --in "$file" --out "$tmp/out" --threads "$threads" >/dev/null 2>"$tmp/err"
    w=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/err" | secs)
    r=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/err")
    walls="$walls $w"; [ "$r" -gt "$rss" ] && rss=$r
    sed -n 's/^stk convert: \([a-z_]*\) *ok *\([0-9.]*\) s.*/\1 \2/p' "$tmp/err" | sed "s/^/$i /" >>"$tmp/runstages"
    # What is outside the stages: describing and sizing the job twice (stk_job_arena_size, then
    # stk_open; the vocabulary is read there), publishing, the summary.
    awk -v w="$w" -v i="$i" '/^stk convert: [a-z_]+ +ok/ {t += $5} END {printf "%s outside_the_stages %.3f\n", i, w - t}' "$tmp/err" >>"$tmp/runstages"
  done
  for st in $(awk '{print $2}' "$tmp/runstages" | awk '!seen[$0]++'); do
    echo "$name $st $(awk -v s="$st" '$2 == s {print $3}' "$tmp/runstages" | median)" >>"$tmp/stages"
  done
  rm -f "$tmp/runstages"
  stage() { awk -v n="$name" -v s="$1" '$1 " " $2 == n && $3 == s {print $4}' "$tmp/stages"; }
  echo "$name|$(awk -v a="$(stage tokenizer_build_or_wrap)" -v b="$(fl vocab_read_s)" 'BEGIN {print a + b}')|$(fl vocab_tokens)|$(fl vocab_bytes)|$(fl tokenizer_floor_s)|$(stage bridge_init)|$(fl bridge_vocab)|$(fl bridge_legs)|$(fl bridge_read_s)|$(fl bridge_gemm_s)|$(fl bridge_floor_s)" >>"$tmp/own"
  wall=$(echo $walls | tr ' ' '\n' | median)
  unit=$("$build/src/cli/stk" inspect --in "$file" | sed -n 's/.*largest layer .*(\([0-9]*\) bytes).*/\1/p')
  awk -v n="$name" -v d="$d" -v h="$h" -v l="$layers" -v sz="$(stat -c %s "$file")" -v rd="$read" -v dq="$deq" -v pk="$peak" \
      -v gm="$gemm" -v w="$wall" -v rss="$rss" -v unit="$unit" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
    fl = rd + dq + gm
    printf "| %s | %d, %d, %d | %.1f MiB | %.2f s | %.2f s | %.1f GFLOP/s | %.2f s | %.2f s | %.2f s | %.1fx | %.0f MiB | %.0f MiB | %s |\n",
           n, d, h, l, sz / 1048576, rd, dq, pk, gm, fl, w, w / fl, rss / 1024, unit / 1048576 + 512, load }'
done
echo
echo "Stage seconds (median over the runs, threads $threads):"
echo
models=$(awk '{print $1 " " $2}' "$tmp/stages" | awk '!seen[$0]++')
printf '| stage |'; echo "$models" | while read -r m; do printf ' %s |' "$m"; done; echo
printf '|---|'; echo "$models" | while read -r m; do printf -- '---:|'; done; echo
for st in $(awk '{print $3}' "$tmp/stages" | awk '!seen[$0]++'); do
  printf '| %s |' "$st"
  echo "$models" | while read -r m; do printf ' %s |' "$(awk -v n="$m" -v s="$st" '$1 " " $2 == n && $3 == s {print $4}' "$tmp/stages")"; done
  echo
done
echo
echo "Two stages against their own floors:"
echo
echo "| model | tokenizer stage + vocabulary read | tokens | vocab bytes | its floor | vs floor | bridge_init | V x legs | embeddings at memcpy | leg GEMMs at peak | its floor | vs floor |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F'|' '{printf "| %s | %.3f s | %d | %d | %.4f s | %.0fx | %.3f s | %d x %d | %.3f s | %.3f s | %.3f s | %.1fx |\n",
            $1, $2, $3, $4, $5, $2 / $5, $6, $7, $8, $9, $10, $11, $6 / $11}' "$tmp/own"
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
