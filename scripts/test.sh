#!/usr/bin/env bash
# Builds stk and runs the whole test suite twice: a normal build, then an AddressSanitizer +
# UndefinedBehaviorSanitizer build.  Prints a closing "N passed, N failed" line.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
total_pass=0
total_fail=0

run_suite() {  # name, build dir, extra meson args...
  local name=$1 dir=$2
  shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; exit 1; }
  fi
  ninja -C "$dir" -j "$jobs" >"$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; exit 1; }
  local rc=0
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs --no-suite real ${SKIP_SUITES:-} >"$dir.test.log" 2>&1 || rc=$?
  grep -E '^ *[0-9]+/[0-9]+ ' "$dir.test.log" || true
  # pytest's own summary line (tests/python, meson test `python`)
  grep -hE '^[0-9]+ (passed|failed).* in [0-9.]+s$|^no tests ran' "$dir/meson-logs/testlog.txt" | sed 's/^/  pytest: /' || true
  local ok fail
  ok=$(grep -E '^Ok: ' "$dir.test.log" | awk '{print $2}')
  fail=$(grep -E '^(Fail|Timeout|Unexpected Pass): ' "$dir.test.log" | awk '{s += $NF} END {print s + 0}')
  echo "$name: ${ok:-0} passed, ${fail:-0} failed"
  total_pass=$((total_pass + ${ok:-0}))
  total_fail=$((total_fail + ${fail:-0}))
  if [ "$rc" != 0 ]; then
    sed -n '/Summary of Failures/,$p' "$dir.test.log"
    grep -B2 -A40 -E '(FAILED|ERROR|runtime error|AddressSanitizer)' "$dir/meson-logs/testlog.txt" | head -200 || true
  fi
}

# Disk: the three build trees hold ~50 test binaries each, each linking the whole library; with full
# debug info they took 6 GB and a CI machine with little free disk failed at the first link.  The
# release suite is built without debug info and the sanitizer and fuzz builds with line tables only
# (enough for symbolised reports): about a third of that.
echo "disk: $(df -Pk . | awk 'NR == 2 {printf "%.1f GiB free", $4 / 1048576}') before the builds"
run_suite "release" build-test -Dbench=true -Ddebug=false  # benches are built (not run) so they never rot
# (the sanitizer run skips suite 'numeric': tests/meson.build says why)
SKIP_SUITES="--no-suite numeric" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  run_suite "asan+ubsan" build-asan -Dbench=false -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dcpp_args=-g1 -fno-sanitize-recover=undefined" "-Dc_args=-g1 -fno-sanitize-recover=undefined"
# The real trained models (meson suite 'real', release build only): fetched into a cache outside
# the repo, converted whole, checked, acceptance table in build-test/meson-logs/testlog.txt.
# A skip is said loudly: a SKIPPED line with the reason.
real_rc=0
if bash scripts/fetch-real-models.sh >build-test.fetch.log 2>&1; then
  meson test -C build-test --suite real --print-errorlogs >build-test.real.log 2>&1 || real_rc=$?
  grep -E '^ *[0-9]+/[0-9]+ ' build-test.real.log || true
  if grep -q 'SKIP' build-test.real.log; then
    echo "real models: SKIPPED: $(grep -h -m1 'SKIPPED' build-test/meson-logs/testlog.txt || echo 'see build-test.real.log')"
  elif [ "$real_rc" = 0 ]; then
    echo "real models: 1 passed, 0 failed"
    total_pass=$((total_pass + 1))
  else
    echo "real models: 0 passed, 1 failed"
    total_fail=$((total_fail + 1))
    sed -n '/Summary of Failures/,$p' build-test.real.log
    tail -60 build-test/meson-logs/testlog.txt
  fi
else
  echo "real models: SKIPPED: scripts/fetch-real-models.sh failed: $(grep -m1 ERROR build-test.fetch.log || tail -1 build-test.fetch.log)"
fi
grep -h 'WARNING' build-test.fetch.log | head -3 || true
# The binary wheel as a user installs it: scripts/build-wheel.sh builds it (release, the kept
# build-wheel/ folder and ccache make a rerun a relink at most) and repairs it into a manylinux
# wheel with its libraries bundled; tests/wheel_install.py installs it into a fresh venv and runs
# the README's Python block and the `stk` console script from a temporary folder.
if whl=$(bash scripts/build-wheel.sh build-wheel-dist | tail -1) && [ -f "$whl" ]; then
  wrc=0
  python3 tests/wheel_install.py "$whl" . >build-wheel.test.log 2>&1 || wrc=$?
  cat build-wheel.test.log
  wok=$(sed -n 's/^wheel: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' build-wheel.test.log)
  wfail=$(sed -n 's/^wheel: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' build-wheel.test.log)
  if [ -z "$wok" ]; then wok=0; wfail=1; fi  # the script died before its summary
  if [ "$wrc" != 0 ] && [ "$wfail" = 0 ]; then wfail=1; fi
  total_pass=$((total_pass + wok))
  total_fail=$((total_fail + wfail))
else
  echo "wheel: 0 passed, 1 failed (scripts/build-wheel.sh failed; build-wheel.log)"
  total_fail=$((total_fail + 1))
fi
# The libFuzzer targets (clang, whole library instrumented): build them and run each over its
# seed corpus once (-runs=0 executes the corpus only), so the fuzz build never rots.
if command -v clang++ >/dev/null; then
  fdir=build-fuzz
  if [ ! -f "$fdir/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$fdir" -Dfuzz=enabled -Dtests=false -Dbench=false \
      -Dcpp_args=-gline-tables-only -Dc_args=-gline-tables-only >"$fdir.setup.log" 2>&1 ||
      { cat "$fdir.setup.log"; exit 1; }
  fi
  ninja -C "$fdir" -j "$jobs" >"$fdir.build.log" 2>&1 || { tail -50 "$fdir.build.log"; exit 1; }
  fpass=0 ffail=0
  for target in fuzz/corpus/*/; do
    name=$(basename "$target")
    if "$fdir/fuzz/fuzz_$name" -runs=0 "$target" >"$fdir/$name.log" 2>&1; then
      fpass=$((fpass + 1))
    else
      ffail=$((ffail + 1))
      echo "libFuzzer $name: FAILED"
      tail -30 "$fdir/$name.log"
    fi
  done
  echo "libfuzzer corpus runs: ${fpass} passed, ${ffail} failed"
  total_pass=$((total_pass + fpass))
  total_fail=$((total_fail + ffail))
fi
echo "disk: $(du -sh build-test build-asan build-fuzz build-wheel 2>/dev/null | awk '{printf "%s%s %s", sep, $2, $1; sep = ", "}') after the builds"
echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" = 0 ]
