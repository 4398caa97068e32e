#!/usr/bin/env bash
# Installs every build and test dependency of stk from Debian's packages (Debian 12).
# Idempotent; run as root (or with sudo available).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PACKAGES=(
  build-essential pkg-config meson ninja-build python3
  clang libclang-rt-14-dev          # fuzzers (libFuzzer) and sanitizer runtimes
  libdeflate-dev                    # inflate for DEFLATED zip entries
  libssl-dev                        # SHA-256 (OpenSSL libcrypto)
  libisal-dev                       # CRC32C (isa-l crc32_iscsi)
  libsimdjson-dev                   # JSON: config.json, safetensors headers, tokenizer.json
  libre2-dev                        # tensor-role regexes (linear time)
  libutf8proc-dev                   # Unicode classes and normalisers for tokenizers
  libhwy-dev                        # SIMD kernels (Highway)
  libblis-dev                       # GEMM (BLIS)
  liblapacke-dev                    # Householder QR, eigenvalues, least squares (LAPACK)
  libblas3 liblapack3               # tests/test_ref_blas.cc: the reference BLAS/LAPACK to compare with
  valgrind                          # tests: memcheck of bridge_init's uninitialised buffers
  libcmocka-dev                     # unit tests
  libcmph-dev                       # peer in the MPHF benchmark (bench/ only)
  golang-go                         # Go binding tests (bindings/go); Rust uses the image's cargo
  python3-numpy python3-torch       # tests/lwt_reader.py: the independent .lwt reader vs PyTorch
  python3-venv                      # the test venv below
)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "install-deps: ${#PACKAGES[@]} packages present"
# The test suite's Python references (gguf-py, safetensors, tokenizers, torch + transformers for
# `stk eval`, mypy, ...) come from PyPI, pinned with their hashes in scripts/requirements-test.txt
# (scripts/upgrade-references.sh writes it), into a venv outside the repo, kept between runs:
# scripts/make-venv.sh makes it; tests/meson.build finds its python3 there.  torch's CUDA wheels
# make it a download of about 5 GB the first time.
venv_python=$(bash "$(dirname "$0")/make-venv.sh")
echo "install-deps: test venv ${venv_python%/bin/python3} ready"
