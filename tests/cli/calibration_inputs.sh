#!/bin/bash
# meson test "calibration-inputs": `stk convert --calibration STATS` with STATS that cannot be
# statistics, end to end (issue 39 item 4): a FIFO nobody writes is refused naming it (exit 5),
# never waited on; a 64 GiB sparse file with a valid header (file_bytes = its size) is refused in
# well under a second, whether its layer table describes fewer bytes or describes the whole file
# with another model's d_model (checked before hashing: hashing 64 GiB took 597 s); a flipped
# payload byte is reported at its layer (version 2's per-layer crc32c): the layer, its sections and
# their byte range, never at the digest field (64); a version 1 file is refused: rerun calibrate.
# Nothing is left behind.  `timeout` bounds each run: a hang or a full hash fails the test.
# Usage: calibration_inputs.sh STK SOURCE_ROOT
set -u
stk=$1
src=$2
model=$src/bindings/testdata/tiny-gpt2
stats=$src/tests/data/calib/tiny-gpt2.stats
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-calin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

run() {  # LABEL EXPECTED_RC GREP STATS: convert into a new root, bounded in time
  local label=$1 want=$2 pattern=$3 file=$4 rc=0 t0 t1
  t0=$(date +%s.%N)
  timeout 60 "$stk" convert "$model" "$tmp/root-$label" --calibration "$file" >/dev/null 2>"$tmp/$label.err" || rc=$?
  t1=$(date +%s.%N)
  [ "$rc" != 124 ] || fail "$label: still running after 60 s"
  [ "$rc" = "$want" ] || fail "$label: exit $rc, expected $want: $(cat "$tmp/$label.err")"
  grep -q -- "$pattern" "$tmp/$label.err" || fail "$label: message: $(cat "$tmp/$label.err")"
  [ ! -e "$tmp/root-$label" ] || fail "$label: left a root: $(ls -a "$tmp/root-$label")"
  echo "ok $label: exit $rc in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') s: $(tail -n 1 "$tmp/$label.err" | cut -c1-160)"
}

mkfifo "$tmp/fifo.stats"
run fifo 5 "$tmp/fifo.stats: not a regular file (a FIFO (named pipe))" "$tmp/fifo.stats"

# Headers written here from docs/format.md's layout (crc32c in Python), over 64 GiB sparse files.
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" python3 - "$tmp" <<'PY' || { echo "SKIPPED: no 64 GiB sparse file here"; exit 77; }
import os, struct, sys
from calib_stats_reference import crc32c
tmp = sys.argv[1]
def write(name, n_layers, d_model, d_v, sections, size):
    h = bytearray(128)
    h[0:8] = b"STKCAL01"
    struct.pack_into("<II", h, 8, 2, 0)
    struct.pack_into("<4I", h, 28, n_layers, d_model, d_v, 0)
    struct.pack_into("<QQ", h, 48, 96, size)
    struct.pack_into("<I", h, 124, crc32c(bytes(h[:124])))
    table = b"".join(struct.pack("<IIQ", s, 0, 0) for s in sections)  # layer crc32c 0: never reached
    with open(os.path.join(tmp, name), "wb") as f:
        f.write(h + table)
        f.truncate(size)
G = 64 << 30
write("huge.stats", 2, 16, 16, [0, 0], G)  # tiny-gpt2's shape; the table describes 160 bytes
d = 32768  # two ffn sections at d_model 32768: 160 + 2 * 8 * (4 d^2 + 2 d) bytes, all described
write("wide.stats", 2, d, 16, [8, 8], 160 + 2 * 8 * (4 * d * d + 2 * d))
PY
run huge 1 "offset 160: the header and layer table describe 160 bytes, the file has 68719476736" "$tmp/huge.stats"
run wide 2 "d_model is 32768, this model's is 16" "$tmp/wide.stats"
rm -f "$tmp/huge.stats" "$tmp/wide.stats"

# A payload value flipped (header intact): named at its layer, with the layer's sections and
# byte range (both layers of tiny-gpt2.stats hold the same sections: layer 1 is the second half).
size=$(stat -c %s "$stats")
layer1=$((size - (size - 160) / 2))
python3 - "$stats" "$tmp/flipped.stats" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) - 3] ^= 0x10  # inside the last value of the last section
open(sys.argv[2], "wb").write(b)
PY
run flipped 1 "flipped.stats: offset $layer1: layer 1: its sections (prf_pairs, attn_out, ffn), bytes \[$layer1, $size), have crc32c 0x[0-9a-f]*, but its layer table entry at offset 144 records 0x[0-9a-f]* (at offset 148)" "$tmp/flipped.stats"

# A version 1 file (the version field set back, the header crc32c resealed): refused, rerun calibrate.
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" python3 - "$stats" "$tmp/v1.stats" <<'PY'
import struct, sys
from calib_stats_reference import reseal_header
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", b, 8, 1)
reseal_header(b)
open(sys.argv[2], "wb").write(b)
PY
run v1 1 "v1.stats: offset 8: calibration statistics version 1: made by an older \`stk calibrate\`.*rerun \`stk calibrate\` to write version 2" "$tmp/v1.stats"
