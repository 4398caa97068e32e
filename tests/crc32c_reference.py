"""CRC32C (Castagnoli) from its definition, bitwise: reflected polynomial 0x82F63B78, init and final
xor 0xFFFFFFFF, crc32c(b"123456789") = 0xE3069283; `crc` continues an earlier value.  The one copy
the Python references in tests/ share (prng_reference.py, parse_digest_reference.py,
calib_stats_reference.py), independent of stk's CRC (isa-l) and of python/stk's table-driven one."""


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for x in data:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF
