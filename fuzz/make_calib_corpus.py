"""Seed corpus of fuzz/calib_stats.cc: the file stk calibrate wrote for tiny-gpt2 and small files
of every section built from docs/format.md's layout ("Calibration statistics"), version 2 (each
layer table entry holds the crc32c of the layer's section bytes).

    python3 fuzz/make_calib_corpus.py [--upgrade-v1]   # from the repository root

The named seeds are written afresh into fuzz/corpus/calib_stats/; what a campaign merged in is
left as it is.  --upgrade-v1 (run once, 2026-11-29, when the format went to version 2) also
upgrades every other file there that reads as version 1, keeping what is wrong with it: the
version becomes 2, each layer whose reserved u32 was 0 and whose sections lie inside the file gets
its crc32c, and the SHA-256 and the header crc32c are recomputed only where they matched before;
the file is renamed to the SHA-1 of its new bytes.  Not by default: a version 1 input a campaign
merges in since then is a seed of the version 1 refusal.
"""
import hashlib
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from calib_stats_reference import crc32c, layer_spans, reseal, section_values  # noqa: E402 (docs/format.md's layout)

OUT = os.path.join("fuzz", "corpus", "calib_stats")
MAGIC = b"STKCAL01"
SEEDS = ("every-section", "one-layer-ffn", "prf-attn-no-rope", "no-sections", "truncated", "header-only",
         "tiny-gpt2.stats")


def build(d, dv, n_pairs, sections, tokens=5):
    table = b""
    body = b""
    n = section_values(d, dv, n_pairs)
    for li, secs in enumerate(sections):
        table += struct.pack("<IIQ", secs, 0, 10 + li if secs & 1 else 0)
        for bit in (1, 2, 4, 8):
            if secs & bit:
                body += struct.pack(f"<{n[bit]}d", *[li + bit + i / 4 for i in range(n[bit])])
    b = bytearray(128) + table + body
    struct.pack_into("<8sIIQIIIIIIQQ", b, 0, MAGIC, 2, 0, 0x0123456789ABCDEF, 0xFEEDBEEF, len(sections), d, dv,
                     n_pairs, 0, tokens, len(b))
    reseal(b)  # each layer's crc32c, the SHA-256, the header crc32c
    return bytes(b)


def upgrade(b: bytes) -> bytes:
    """A version 1 input as version 2, its defects kept (see the module's docstring)."""
    if len(b) < 12 or b[:8] != MAGIC or struct.unpack_from("<I", b, 8)[0] != 1:
        return b
    out = bytearray(b)
    struct.pack_into("<I", out, 8, 2)
    if len(b) < 128:
        return bytes(out)
    header_ok = crc32c(b[:124]) == struct.unpack_from("<I", b, 124)[0]
    sha_ok = hashlib.sha256(b[128:]).digest() == b[64:96]
    n_layers, d, dv, n_pairs = struct.unpack_from("<4I", b, 28)
    if n_layers <= 65536 and d <= 65536 and dv <= 1 << 20 and n_pairs <= 65536:
        for li, (start, end) in enumerate(layer_spans(b)):
            if end > len(b):
                break
            if struct.unpack_from("<I", b, 128 + 16 * li + 4)[0] == 0:
                struct.pack_into("<I", out, 128 + 16 * li + 4, crc32c(b[start:end]))
    if sha_ok:
        out[64:96] = hashlib.sha256(bytes(out[128:])).digest()
    if header_ok:
        struct.pack_into("<I", out, 124, crc32c(bytes(out[:124])))
    return bytes(out)


def main(upgrade_v1=False):
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "every-section": build(3, 4, 2, [0xF, 0xC]),
        "one-layer-ffn": build(1, 1, 0, [8]),
        "prf-attn-no-rope": build(2, 2, 0, [3, 3, 0]),
        "no-sections": build(4, 8, 4, [0]),
    }
    seeds["truncated"] = seeds["every-section"][:200]
    seeds["header-only"] = seeds["every-section"][:128]
    for name, b in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(b)
    shutil.copy(os.path.join("tests", "data", "calib", "tiny-gpt2.stats"), os.path.join(OUT, "tiny-gpt2.stats"))
    for name in sorted(os.listdir(OUT)) if upgrade_v1 else []:
        if name in SEEDS:
            continue
        path = os.path.join(OUT, name)
        b = open(path, "rb").read()
        u = upgrade(b)
        if u != b:  # named as libFuzzer names a corpus file: the SHA-1 of its bytes
            os.unlink(path)
            with open(os.path.join(OUT, hashlib.sha1(u).hexdigest()), "wb") as f:
                f.write(u)


if __name__ == "__main__":
    main(upgrade_v1="--upgrade-v1" in sys.argv[1:])
