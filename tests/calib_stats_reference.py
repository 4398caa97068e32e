"""Calibration statistics written from docs/format.md ("Calibration statistics", version 2), not
from stk's reader or writer: CRC32C from its definition (crc32c_reference.py), each layer's byte
range from the header's dimensions and the table's section bits, and resealing a changed file (its
layers' crc32c, the payload SHA-256, the header crc32c).  Plain Python (the CLI tests run the
system python3).  Used by tests/cli/calibration_inputs.sh, tests/cli/acceptance_calibrated.sh,
tests/python/test_calibrate.py and fuzz/make_calib_corpus.py."""
import hashlib
import struct

from crc32c_reference import crc32c  # noqa: F401 (the scripts import it from here too)


def section_values(d, dv, n_pairs):
    """f64 values per section bit at d_model d, d_v dv, n_pairs rotary pairs."""
    return {1: d * (d + 1) // 2 + d + 2, 2: dv * (dv + 1) // 2, 4: n_pairs, 8: 2 * d * (2 * d + 1) // 2 + 2 * d * d + d}


def layer_spans(b):
    """Each layer's section bytes [start, end), for the layers whose table entry lies inside b
    (a span may end past b's end in a truncated or hostile file)."""
    n_layers, d, dv, n_pairs = struct.unpack_from("<4I", b, 28)
    counts = section_values(d, dv, n_pairs)
    spans, at = [], 128 + 16 * n_layers
    for li in range(n_layers):
        if 128 + 16 * (li + 1) > len(b):
            break
        secs = struct.unpack_from("<I", b, 128 + 16 * li)[0]
        n = 8 * sum(counts[bit] for bit in (1, 2, 4, 8) if secs & bit)
        spans.append((at, at + n))
        at += n
    return spans


def reseal_header(b):
    struct.pack_into("<I", b, 124, crc32c(bytes(b[:124])))


def reseal(b):
    """Every checksum of bytearray b recomputed: a valid file again."""
    for li, (start, end) in enumerate(layer_spans(b)):
        struct.pack_into("<I", b, 128 + 16 * li + 4, crc32c(bytes(b[start:end])))
    b[64:96] = hashlib.sha256(bytes(b[128:])).digest()
    reseal_header(b)
