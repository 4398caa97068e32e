#!/usr/bin/env bash
# Upgrades the test suite's Python references on purpose, in one command:
#   1. re-resolves scripts/requirements-test.in with pip-compile (pip-tools) into the lock
#      scripts/requirements-test.txt: every package, transitive ones included, at one exact version
#      with the SHA-256 of each of its files on PyPI; and scripts/requirements-wheel.in (the
#      packaging tools of scripts/build-wheel.sh) the same way into scripts/requirements-wheel.txt;
#   2. rewrites the pins of pyproject.toml's optional dependencies (`eval = [...]`) to the
#      lock's versions;
#   3. installs the lock into the repository's venv (scripts/make-venv.sh:
#      ${STK_VENV:-${STK_CACHE:-$HOME/.cache/stk}/venv}), hashes checked;
#   4. reruns the tests that use the references (meson test --no-suite real in the build folder
#      ${STK_BUILD:-build-test}, set up as scripts/test.sh's release build if absent).
# Then review `git diff` and commit the locks and pyproject.toml together.
#
# Usage: scripts/upgrade-references.sh                  every reference to its newest release
#        scripts/upgrade-references.sh NAME...          only those packages; the rest keep their pins
#        scripts/upgrade-references.sh --no-upgrade     keep every pin (after adding a name to
#                                                       requirements-test.in); the lock otherwise
#                                                       comes back unchanged
#        --no-test (with any of the above)              steps 1-3 only
#
# pip-tools runs from its own venv under ${STK_CACHE:-$HOME/.cache/stk}/tools-venv, made here at
# the versions pinned below.  The lock is resolved for the Python that runs pip-compile (Debian
# 12's /usr/bin/python3, CPython 3.11, on Linux x86_64: the CI's machine).
set -euo pipefail
cd "$(dirname "$0")/.."
PIP_VERSION=26.3
PIP_TOOLS_VERSION=7.6.2

upgrade=(--upgrade)
run_tests=1
names=()
for a in "$@"; do
  case "$a" in
    --no-upgrade) upgrade=() ;;
    --no-test) run_tests=0 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) echo "upgrade-references: unknown option $a" >&2; exit 2 ;;
    *) names+=("$a") ;;
  esac
done
if [ ${#names[@]} -gt 0 ]; then
  upgrade=()
  for n in "${names[@]}"; do upgrade+=(--upgrade-package "$n"); done
fi

cache=${STK_CACHE:-$HOME/.cache/stk}
tools=$cache/tools-venv
if [ ! -x "$tools/bin/pip-compile" ] || \
   [ "$("$tools/bin/python3" -m pip show pip-tools 2>/dev/null | sed -n 's/^Version: //p')" != "$PIP_TOOLS_VERSION" ]; then
  /usr/bin/python3 -m venv "$tools"
  "$tools/bin/python3" -m pip install -q --disable-pip-version-check \
    "pip==$PIP_VERSION" "pip-tools==$PIP_TOOLS_VERSION"
fi

# 1. The locks.  A machine's own wheel folder (PIP_FIND_LINKS) must not enter them.
compile_lock() {  # IN OUT: pip-compile scripts/IN into the file scripts/OUT
  (cd scripts && env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL \
    "$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
    --no-emit-find-links --no-emit-index-url --no-header --resolver=backtracking \
    ${upgrade[@]+"${upgrade[@]}"} -o "$2" "$1")
}
new=$(mktemp scripts/requirements-test.txt.XXXXXX)
trap 'rm -f "$new" "$new.body"' EXIT
cp scripts/requirements-test.txt "$new.body"
compile_lock requirements-test.in "$(basename "$new.body")"
# The packaging tools of scripts/build-wheel.sh: their own lock (their venv is not the test venv).
compile_lock requirements-wheel.in requirements-wheel.txt
{ cat <<'EOF'
# The test suite's Python references, pinned with their hashes: written by
# scripts/upgrade-references.sh from scripts/requirements-test.in (do not edit by hand), installed
# by scripts/make-venv.sh (install-deps.sh runs it) into the repository's venv with pip's hash
# checking.  Resolved for CPython 3.11 on Linux x86_64 (Debian 12's python3); torch pulls
# the CUDA wheels (nvidia-*, triton) there, about 5 GB.
EOF
  cat "$new.body"; } > "$new"
mv "$new" scripts/requirements-test.txt
chmod 644 scripts/requirements-test.txt

# 2. pyproject.toml's pinned optional dependencies follow the lock.
/usr/bin/python3 - <<'EOF'
import re
lock = {}
for line in open("scripts/requirements-test.txt"):
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^ \\]+)", line)
    if m:
        lock[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
text = open("pyproject.toml").read()
def repin(m):
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    if name not in lock:
        raise SystemExit(f"upgrade-references: pyproject.toml pins {m.group(1)}, "
                         "which scripts/requirements-test.in does not list")
    return f'"{m.group(1)}=={lock[name]}"'
head, sep, rest = text.partition("[project.optional-dependencies]")
if not sep:
    raise SystemExit("upgrade-references: pyproject.toml has no [project.optional-dependencies]")
body, sep2, tail = rest.partition("\n[")
body = re.sub(r'"([A-Za-z0-9][A-Za-z0-9._-]*)==[^"]+"', repin, body)
open("pyproject.toml", "w").write(head + sep + body + sep2 + tail)
EOF

# 3. The venv.
py=$(bash scripts/make-venv.sh)
echo "upgrade-references: lock written, venv ${py%/bin/python3} updated"
git --no-pager diff --stat -- scripts/requirements-test.txt scripts/requirements-wheel.txt pyproject.toml 2>/dev/null || true

# 4. The tests that read the references.
if [ "$run_tests" = 1 ]; then
  build=${STK_BUILD:-build-test}
  if [ ! -f "$build/build.ninja" ]; then meson setup "$build" -Dbench=true -Ddebug=false; fi
  ninja -C "$build"
  meson test -C "$build" --no-suite real --print-errorlogs
  echo "upgrade-references: tests pass; the real-model references: meson test -C $build --suite real"
fi
