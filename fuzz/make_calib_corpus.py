"""Seed corpus of fuzz/calib_stats.cc: the file stk calibrate wrote for tiny-gpt2 and small files
of every section built from docs/format.md's layout ("Calibration statistics").

    python3 fuzz/make_calib_corpus.py   # from the repository root; rewrites fuzz/corpus/calib_stats/
"""
import hashlib
import os
import shutil
import struct

OUT = os.path.join("fuzz", "corpus", "calib_stats")


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def build(d, dv, n_pairs, sections, tokens=5):
    table = b""
    body = b""
    for li, secs in enumerate(sections):
        table += struct.pack("<IIQ", secs, 0, 10 + li if secs & 1 else 0)
        counts = {1: d * (d + 1) // 2 + d + 2, 2: dv * (dv + 1) // 2, 4: n_pairs, 8: 2 * d * (2 * d + 1) // 2 + 2 * d * d + d}
        for bit in (1, 2, 4, 8):
            if secs & bit:
                body += struct.pack(f"<{counts[bit]}d", *[li + bit + i / 4 for i in range(counts[bit])])
    payload = table + body
    head = bytearray(128)
    struct.pack_into("<8sIIQIIIIIIQQ", head, 0, b"STKCAL01", 1, 0, 0x0123456789ABCDEF, 0xFEEDBEEF, len(sections), d, dv,
                     n_pairs, 0, tokens, 128 + len(payload))
    head[64:96] = hashlib.sha256(payload).digest()
    struct.pack_into("<I", head, 124, crc32c(bytes(head[:124])))
    return bytes(head) + payload


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
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


if __name__ == "__main__":
    main()
