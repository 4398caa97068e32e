#!/usr/bin/env bash
# The stk command compiles against the public headers alone (include/stk/) plus its own files
# (src/cli/): each src/cli/*.cc is compiled (syntax only) with no other include directory, so an
# #include of an internal header fails here, not only in tests/include_graph.py's reading.
# usage: cli_public_only.sh SOURCE_ROOT CXX [CXX args...]
set -euo pipefail
root=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$root/src/cli" "$tmp/cli"  # "cli/cli.h" and the like resolve; nothing else under src/ does
n=0
for f in "$root"/src/cli/*.cc; do
  "$@" -std=c++20 -fsyntax-only -DSTK_EXPERIMENTAL -I"$root/include" -I"$tmp" "$f"
  n=$((n + 1))
done
echo "$n files of src/cli compile against include/stk/ alone"
[ "$n" -ge 10 ]
