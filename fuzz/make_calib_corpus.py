"""Seed corpus of fuzz/calib_stats.cc: the file stk calibrate wrote for tiny-gpt2 and small files
of every section built from docs/format.md's layout ("Calibration statistics"), version 2 (each
layer table entry holds the crc32c of the layer's section bytes).

    python3 fuzz/make_calib_corpus.py   # from the repository root; rewrites fuzz/corpus/calib_stats/

The named seeds are written afresh.  Every other file there (what a campaign merged in) that
reads as version 1 is upgraded in place, keeping what is wrong with it: the version becomes 2,
each layer whose reserved u32 was 0 and whose sections lie inside the file gets its crc32c, and
the SHA-256 and the header crc32c are recomputed only where they matched before; the file is
renamed to the SHA-1 of its new bytes.
"""
import hashlib
import os
import shutil
import struct

OUT = os.path.join("fuzz", "corpus", "calib_stats")
MAGIC = b"STKCAL01"
SEEDS = ("every-section", "one-layer-ffn", "prf-attn-no-rope", "no-sections", "truncated", "header-only",
         "tiny-gpt2.stats")


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def counts(d, dv, n_pairs):
    return {1: d * (d + 1) // 2 + d + 2, 2: dv * (dv + 1) // 2, 4: n_pairs, 8: 2 * d * (2 * d + 1) // 2 + 2 * d * d + d}


def build(d, dv, n_pairs, sections, tokens=5):
    table = b""
    body = b""
    n = counts(d, dv, n_pairs)
    for li, secs in enumerate(sections):
        layer = b""
        for bit in (1, 2, 4, 8):
            if secs & bit:
                layer += struct.pack(f"<{n[bit]}d", *[li + bit + i / 4 for i in range(n[bit])])
        table += struct.pack("<IIQ", secs, crc32c(layer), 10 + li if secs & 1 else 0)
        body += layer
    payload = table + body
    head = bytearray(128)
    struct.pack_into("<8sIIQIIIIIIQQ", head, 0, MAGIC, 2, 0, 0x0123456789ABCDEF, 0xFEEDBEEF, len(sections), d, dv,
                     n_pairs, 0, tokens, 128 + len(payload))
    head[64:96] = hashlib.sha256(payload).digest()
    struct.pack_into("<I", head, 124, crc32c(bytes(head[:124])))
    return bytes(head) + payload


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
        n = counts(d, dv, n_pairs)
        at = 128 + 16 * n_layers
        for li in range(n_layers):
            e = 128 + 16 * li
            if at > len(b):
                break
            secs, reserved = struct.unpack_from("<II", b, e)
            size = 8 * sum(n[bit] for bit in (1, 2, 4, 8) if secs & bit)
            if at + size > len(b):
                break
            if reserved == 0:
                struct.pack_into("<I", out, e + 4, crc32c(b[at:at + size]))
            at += size
    if sha_ok:
        out[64:96] = hashlib.sha256(bytes(out[128:])).digest()
    if header_ok:
        struct.pack_into("<I", out, 124, crc32c(bytes(out[:124])))
    return bytes(out)


def main():
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
    for name in sorted(os.listdir(OUT)):
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
    main()
