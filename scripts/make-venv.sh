#!/usr/bin/env bash
# Makes (or brings up to date) the one Python venv of the repository: the test suite's references
# pinned in scripts/requirements-test.txt, hashes checked (numpy, gguf, safetensors, tokenizers,
# sentencepiece, torch, transformers, accelerate, mypy, matplotlib, ...).  tests/meson.build runs
# the Python tests with its python3, and the hand-run tools (tools/fidelity/run-*.sh, bench/*.py,
# tests/fixtures/*/generate.py, scripts/make_*.py) take it as their python.
#
#   ${STK_VENV:-${STK_CACHE:-$HOME/.cache/stk}/venv}      made with Debian 12's /usr/bin/python3
#
# scripts/install-deps.sh runs this after the system packages (python3-venv among them); run it
# alone when only the venv is missing.  torch's CUDA wheels make the first run a download of about
# 5 GB; later runs install nothing new.  Prints the venv's python3 last.
set -euo pipefail
venv=${STK_VENV:-${STK_CACHE:-$HOME/.cache/stk}/venv}
if [ ! -x "$venv/bin/python3" ]; then /usr/bin/python3 -m venv "$venv"; fi
"$venv/bin/python3" -m pip install -q --disable-pip-version-check --require-hashes \
  -r "$(dirname "$0")/requirements-test.txt"
echo "$venv/bin/python3"
