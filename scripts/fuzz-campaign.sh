#!/usr/bin/env bash
# A fuzzing campaign: every libFuzzer target in fuzz/ for a given time each, under AddressSanitizer
# + UndefinedBehaviorSanitizer (the -Dfuzz=enabled build: the whole library instrumented).
#
#   scripts/fuzz-campaign.sh SECONDS [NAME[=SECONDS] ...]
#
# SECONDS is the time per target; naming targets runs only those (NAME=SECONDS overrides the time
# for one).  For each target it
#   1. fuzzes from fuzz/corpus/<name>/ (one job, fork mode: a crash is saved and fuzzing goes on),
#   2. merges the corpus and what was found into a fresh directory with -merge=1 (keeps only inputs
#      that add coverage) and replaces fuzz/corpus/<name>/ with it (inputs that were already in the
#      corpus keep their names),
#   3. replays every crash / timeout / out-of-memory input, groups them by the sanitizer's report
#      (kind + first frame inside stk), and stores one input per group in
#      fuzz/regressions/<name>/ (meson test replays that folder: it must pass once the bug is fixed),
#   4. prints executions, exec/s, coverage and findings.  Coverage twice: cov (edges) and ft
#      (features) as fork mode counted them at the end of the run, and as one plain pass over
#      the merged corpus counts them (-runs=0; smaller: it sees each input once).
# The table goes to stdout and to $FUZZ_OUT/summary.tsv.  Run it under `nice` on a shared machine.
#
# Environment: FUZZ_BUILD (default build-fuzz), FUZZ_OUT (default /tmp/stk-fuzz-campaign),
# FUZZ_RSS_MB (default 2048), FUZZ_TIMEOUT_S (per input, default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [NAME[=SECONDS] ...]" >&2
  exit 2
fi
default_s=$1
shift
build=${FUZZ_BUILD:-build-fuzz}
out=${FUZZ_OUT:-/tmp/stk-fuzz-campaign}
rss_mb=${FUZZ_RSS_MB:-2048}
input_timeout=${FUZZ_TIMEOUT_S:-10}

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" -Dfuzz=enabled -Dtests=false -Dbench=false
fi

# Targets: the names given, else every fuzz/<name>.cc that defines LLVMFuzzerTestOneInput.
declare -a names secs
if [ $# -gt 0 ]; then
  for arg in "$@"; do
    names+=("${arg%%=*}")
    if [[ $arg == *=* ]]; then secs+=("${arg#*=}"); else secs+=("$default_s"); fi
  done
else
  for f in fuzz/*.cc; do
    grep -q LLVMFuzzerTestOneInput "$f" || continue
    n=$(basename "$f" .cc)
    [ "$n" = replay_main ] && continue
    names+=("$n")
    secs+=("$default_s")
  done
fi

# Build what runs: every target, or only the named ones (a fresh build-fuzz is then much shorter).
if [ $# -gt 0 ]; then
  ninja -C "$build" "${names[@]/#/fuzz/fuzz_}" >/dev/null
else
  ninja -C "$build" >/dev/null
fi

mkdir -p "$out"
summary="$out/summary.tsv"
printf 'target\tseconds\texecs\texec_per_s\trun_cov\trun_ft\tcov\tft\tcorpus_before\tcorpus_after\tcrash_inputs\tfindings\n' >"$summary"

# One line naming a crash: the sanitizer's kind and the first stack frame inside our sources.
signature() {  # binary, input
  local log
  log=$("$1" -runs=1 -timeout="$input_timeout" -rss_limit_mb="$rss_mb" "$2" 2>&1 || true)
  local kind frame
  kind=$(grep -m1 -oE 'runtime error: [^0-9]*|ERROR: AddressSanitizer: [a-z-]+|ERROR: libFuzzer: [a-z-]+|out-of-memory|timeout' <<<"$log" | head -1)
  frame=$(grep -m1 -E '#[0-9]+ .* in stk::.* (/[^ ]*/)?(src|fuzz)/' <<<"$log" | sed -E 's/.* in (stk::[^(]*).*(src|fuzz)\/([^ ]*)$/\1 \2\/\3/' || true)
  [ -n "$frame" ] || frame=$(grep -m1 -oE '(src|fuzz)/[^ :]+:[0-9]+' <<<"$log" || true)
  echo "${kind:-unknown} @ ${frame:-?}"
}

for i in "${!names[@]}"; do
  name=${names[$i]}
  t=${secs[$i]}
  bin="$build/fuzz/fuzz_$name"
  corpus="fuzz/corpus/$name"
  [ -x "$bin" ] || { echo "no fuzz binary $bin" >&2; exit 1; }
  mkdir -p "$corpus"
  w="$out/$name"
  rm -rf "$w"
  mkdir -p "$w/new" "$w/merged" "$w/crashes"
  before=$(find "$corpus" -type f | wc -l)

  # 1. Fuzz.  New inputs go to $w/new (the first corpus directory); the seeds are read only.
  "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$t" -timeout="$input_timeout" -rss_limit_mb="$rss_mb" \
    -artifact_prefix="$w/crashes/" -print_final_stats=1 \
    "$w/new" "$corpus" >"$w/fuzz.log" 2>&1 || true
  # The last progress line of fork mode: "#N: cov: C ft: F corp: K exec/s E oom/timeout/crash: ..."
  last=$(grep -E '^#[0-9]+: cov: ' "$w/fuzz.log" | tail -1 || true)
  execs=$(sed -nE 's/^#([0-9]+): .*/\1/p' <<<"$last")
  eps=$(sed -nE 's/.* exec\/s:? ([0-9]+).*/\1/p' <<<"$last")
  run_cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  run_ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")

  # 2. Merge corpus + new into a fresh directory (minimised), then replace the corpus with it.
  "$bin" -merge=1 -timeout="$input_timeout" -rss_limit_mb="$rss_mb" "$w/merged" "$corpus" "$w/new" \
    >"$w/merge.log" 2>&1 || true
  if [ "$(find "$w/merged" -type f | wc -l)" -gt 0 ]; then
    declare -A seed_name=()
    for f in "$corpus"/*; do
      [ -f "$f" ] || continue
      seed_name[$(sha1sum "$f" | cut -c1-40)]=$(basename "$f")
    done
    rm -f "$corpus"/*
    for f in "$w/merged"/*; do
      h=$(sha1sum "$f" | cut -c1-40)
      cp "$f" "$corpus/${seed_name[$h]:-$h}"
    done
    unset seed_name
  fi
  after=$(find "$corpus" -type f | wc -l)
  # Coverage of the merged corpus as one run measures it (the fork-mode counters are per job).
  covline=$("$bin" -runs=0 -timeout="$input_timeout" -rss_limit_mb="$rss_mb" "$corpus" 2>&1 |
    grep -E 'INITED|DONE' | tail -1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$covline")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$covline")

  # 3. Group the crashes by signature; keep the smallest input of each group as a regression.
  ncrash=$(find "$w/crashes" -type f | wc -l)
  declare -A seen=()
  findings=0
  : >"$w/findings.txt"
  while IFS= read -r f; do
    sig=$(signature "$bin" "$f")
    [ -n "${seen[$sig]:-}" ] && continue
    seen[$sig]=1
    findings=$((findings + 1))
    mkdir -p "fuzz/regressions/$name"
    h=$(sha1sum "$f" | cut -c1-12)
    cp "$f" "fuzz/regressions/$name/$(basename "$f" | cut -d- -f1)-$h"
    echo "$sig  ($(basename "$f"), $(stat -c %s "$f") bytes)" >>"$w/findings.txt"
  done < <(find "$w/crashes" -type f -printf '%s %p\n' | sort -n | cut -d' ' -f2-)
  unset seen

  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$t" "${execs:-?}" "${eps:-?}" "${run_cov:-?}" \
    "${run_ft:-?}" "${cov:-?}" "${ft:-?}" "$before" "$after" "$ncrash" "$findings" >>"$summary"
  echo "== $name: ${t}s, ${execs:-?} execs, ${eps:-?} exec/s, cov ${run_cov:-?} ft ${run_ft:-?} during the run," \
    "merged corpus cov ${cov:-?} ft ${ft:-?}, corpus $before -> $after, $ncrash crash inputs, $findings distinct findings"
  sed 's/^/   /' "$w/findings.txt"
done

echo
column -t -s$'\t' "$summary"
echo "logs and crash inputs: $out"
