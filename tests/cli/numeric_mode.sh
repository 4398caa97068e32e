#!/bin/sh
# meson test "numeric-mode" (issue 40: the same bytes on every CPU).  Every model fixture (the
# family fixtures transformers wrote, tests/data/models/*, tiny-gpt2) is converted whole under
# BLIS's own choice (at 1 and 2 threads) and under each kernel family of BLIS forced by
# BLIS_ARCH_TYPE (2 threads; AVX-512's skx and knl included: stk never runs the forced
# configuration's kernels, so they run on a CPU without AVX-512 too); each generation's name
# (the hash of its manifest, which holds every array's checksums and every stage digest) must
# equal the pinned value in tests/data/numeric_mode_generations.txt, taken once for every machine.  An id BLIS was not built with is refused by name, not aborted on.
# Usage: numeric_mode.sh STK SOURCE_ROOT        (STK_REPIN=1 rewrites the pinned file)
set -eu
stk=$1
root=$2
pins=$root/tests/data/numeric_mode_generations.txt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-numeric.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The forced configurations: blis.h's arch_t ids of the x86-64 family, one per kernel family
# (0 skx, 1 knl, 3 haswell, 4 sandybridge, 5 penryn, 6 zen3; zen, zen2 and the bulldozer line
# reuse haswell's or sandybridge's kernels).  STK_NUMERIC_ARCHS="0 1 2 ... 12" tries them all.
archs=${STK_NUMERIC_ARCHS:-"0 1 3 4 5 6"}
models=""
for d in "$root"/tests/fixtures/families/*/ "$root"/tests/data/models/*/ "$root"/bindings/testdata/tiny-gpt2/; do
  [ -f "$d/config.json" ] || continue
  case "$(basename "$d")" in nonfinite) continue ;; esac  # refused by design (NaN weights)
  models="$models $d"
done
: >"$tmp/got"
n=0
for d in $models; do
  m=$(basename "$d")
  first=""
  for run in "-1" "-2" $(for a in $archs; do echo "$a-2"; done); do
    a=${run%-*} t=${run#*-}
    {
      out="$tmp/$m-a$a-t$t"
      if [ -n "$a" ]; then env BLIS_ARCH_TYPE="$a" "$stk" convert --in "$d" --out "$out" --threads "$t" >"$out.log" 2>&1
      else env -u BLIS_ARCH_TYPE "$stk" convert --in "$d" --out "$out" --threads "$t" >"$out.log" 2>&1; fi ||
        { echo "$m: convert failed with BLIS_ARCH_TYPE='$a' threads $t"; cat "$out.log"; exit 1; }
      h=$(ls "$out/generations")
      rm -rf "$out"
      if [ -z "$first" ]; then first=$h; echo "$m $h" >>"$tmp/got"
      elif [ "$h" != "$first" ]; then
        echo "$m: BLIS_ARCH_TYPE='$a' threads $t gives generation $h, BLIS's own choice at 1 thread $first"; exit 1
      fi
    }
  done
  echo "ok: $m ($first)"
  n=$((n + 1))
done
[ "$n" -ge 30 ] || { echo "only $n model fixtures"; exit 1; }
# An id this BLIS does not have: refused with the variable named (BLIS itself would abort()).
d=$root/tests/data/models/llama/
if env BLIS_ARCH_TYPE=24 "$stk" convert --in "$d" --out "$tmp/generic" >"$tmp/generic.log" 2>&1; then
  echo "BLIS_ARCH_TYPE=24 was not refused"; exit 1
fi
grep -q "BLIS_ARCH_TYPE=24 names a BLIS configuration this build does not have" "$tmp/generic.log" ||
  { echo "BLIS_ARCH_TYPE=24: unexpected message"; cat "$tmp/generic.log"; exit 1; }
[ ! -e "$tmp/generic" ] || { echo "BLIS_ARCH_TYPE=24 was not refused before the output was made"; exit 1; }
if [ "${STK_REPIN:-}" = 1 ]; then
  real=$(grep '^real ' "$pins" 2>/dev/null || true)  # the real models' lines (tests/real/real_models.sh)
  { echo "# The generation of each model fixture converted whole (stk convert, defaults, a new root):"
    echo "# the same on every x86-64 CPU with AVX2+FMA (tests/cli/numeric_mode.sh; STK_REPIN=1 rewrites)."
    cat "$tmp/got"; [ -z "$real" ] || echo "$real"; } >"$pins"
  echo "pinned $n generations into $pins"
  exit 0
fi
grep -v -e '^#' -e '^real ' "$pins" >"$tmp/want"
if ! diff "$tmp/want" "$tmp/got" >"$tmp/diff"; then
  echo "generations differ from the pinned ones ($pins):"; cat "$tmp/diff"; exit 1
fi
echo "numeric mode: $n models x ($(echo $archs | wc -w) forced BLIS configurations + BLIS's own at 1 and 2 threads): one generation each, equal to the pins"
