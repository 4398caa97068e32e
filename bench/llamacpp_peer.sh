#!/usr/bin/env bash
# llama.cpp as the peer of the LM runtime (issue 36 item 5; docs/benchmarks.md "LM runtime").
#
#   bench/llamacpp_peer.sh [build|run] [threads...]
#
# build: fetches PyPI's sdist of llama-cpp-python (it vendors llama.cpp's source) into
#        $STK_PEER_DIR (default ~/.cache/stk/peer), checks its sha256, unpacks it and builds
#        llama.cpp's CPU tools llama-bench and llama-quantize with cmake (Release, no GPU backend,
#        GGML_NATIVE=ON: the -march=native ggml would pick on this CPU; no curl), then widens the
#        cached SmolLM2 Q4_1 GGUF to BF16 (llama-quantize --allow-requantize IN OUT BF16: the same
#        weights our bf16 run widens).
# run:   llama-bench -p 256 -n 64 -t T -r 5 on that BF16 GGUF for each T (default 2 1), then our
#        bench/lm_bench on the Q4_1 GGUF kept as bf16 with the same prompt, decode and threads,
#        so both come from the same session.  The load average at the start is printed.
# Nothing of llama.cpp lands in the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
peer="${STK_PEER_DIR:-$HOME/.cache/stk/peer}"
models="${STK_REAL_MODELS:-$HOME/.cache/stk/real-models}"
version=0.3.16
sha=34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6
url="https://files.pythonhosted.org/packages/e4/b4/c8cd17629ced0b9644a71d399a91145aedef109c0333443bef015e45b704/llama_cpp_python-$version.tar.gz"
src="$peer/llama_cpp_python-$version/vendor/llama.cpp"
bld="$peer/build-$version"
q41="$models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"
bf16="$peer/SmolLM2-135M-Instruct.BF16.gguf"
lm_bench="${LM_BENCH:-$here/build/bench/lm_bench}"
mode="${1:-run}"
shift || true
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(2 1)

if [ "$mode" = build ]; then
    mkdir -p "$peer"
    tarball="$peer/llama_cpp_python-$version.tar.gz"
    # The sdist from PyPI's files host (pip download would build its metadata first).
    [ -f "$tarball" ] || curl -fsSL -o "$tarball" "$url"
    echo "$sha  $tarball" | sha256sum -c -
    [ -d "$src" ] || tar xzf "$tarball" -C "$peer"
    cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
    cmake --build "$bld" --target llama-bench llama-quantize -j "${JOBS:-2}"
    [ -f "$bf16" ] || "$bld/bin/llama-quantize" --allow-requantize "$q41" "$bf16" BF16
    ls -la "$bf16"
    exit 0
fi

[ -x "$bld/bin/llama-bench" ] && [ -f "$bf16" ] || { echo "llamacpp_peer.sh: run '$0 build' first" >&2; exit 1; }
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "llama.cpp: the one vendored by llama-cpp-python $version (PyPI sdist), BF16 GGUF widened from $(basename "$q41")"
for t in "${threads[@]}"; do
    "$bld/bin/llama-bench" -m "$bf16" -p 256 -n 64 -t "$t" -r 5 -o md
    "$lm_bench" "$q41" bf16 256 64 "$t" 5
done
