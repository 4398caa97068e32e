#!/usr/bin/env bash
# The floor of a job that reads a checkpoint and writes one file: read the checkpoint files
# (cat > /dev/null) and write BYTES zero bytes to OUT_FILE, then sync it (the jobs fsync their
# output before the rename), then remove it.  Prints "WALL CPU" seconds (/usr/bin/time; CPU is
# user + system).  Used by bench/lwt_export_bench.sh and bench/export_vs_llamacpp.sh.
#   bench/read_write_floor.sh BYTES OUT_FILE CHECKPOINT_FILE...
set -euo pipefail
bytes=$1 out=$2
shift 2
t=$(mktemp)
/usr/bin/time -f "%e %U %S" -o "$t" bash -c 'f=$1 n=$2; shift 2; cat "$@" > /dev/null; head -c "$n" /dev/zero > "$f"; sync -f "$f"' _ "$out" "$bytes" "$@"
read -r e u s <"$t"
rm -f "$t" "$out"
echo "$e $(echo "$u + $s" | bc)"
