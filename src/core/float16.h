// The f16 (IEEE binary16) and bf16 conversions, scalar and bit-exact: the reference every vector
// path (format/lowbit_kernels.cc, ingest/dtype_convert.cc) is tested against.  One place for all
// of them: ingest reads f16/bf16 checkpoints, parse_tensors stores exact halves, the .lwt format
// writes them.
#pragma once

#include <cstdint>
#include <cstring>

namespace stk {

inline float f32_from_bits(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

inline uint32_t f32_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// bf16 is the top half of an f32: exact.
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// IEEE binary16 -> binary32, exact for every input (subnormals normalised, infinities kept).
// NaNs keep sign and payload and come out quiet (bit 22 set), as the F16C instruction does, so
// the scalar and the vector paths give identical bits.
inline float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0u));
    if (exp == 0) {
        if (man == 0) return f32_from_bits(sign);
        // Subnormal: value = man * 2^-24, exactly representable in f32.
        int shift = __builtin_clz(man) - 21;  // leading zeros within the 10-bit field + 1
        man = (man << shift) & 0x3FFu;
        exp = uint32_t(1 - shift);
        return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

// f32 -> binary16, round to nearest even; overflow to infinity; NaN stays NaN (quiet, the top
// payload bits kept).
inline uint16_t f32_to_f16_rne(float v) {
    uint32_t x = f32_bits(v);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t man = x & 0x7FFFFFu;
    if (exp == 0xFF) return uint16_t(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0u));
    int32_t e = int32_t(exp) - 127;
    if (e > 15) return uint16_t(sign | 0x7C00u);
    if (e >= -14) {
        uint32_t r = man >> 13, rem = man & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
        uint32_t h = (uint32_t(e + 15) << 10) + r;  // a mantissa carry moves into the exponent
        return uint16_t(sign | (h >= 0x7C00u ? 0x7C00u : h));
    }
    // Subnormal (or zero) in f16: units of 2^-24.
    uint32_t s = uint32_t(-1 - e);
    if (s >= 25 || exp == 0) return uint16_t(sign);  // below half the smallest subnormal
    uint32_t m = 0x800000u | man;
    uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return uint16_t(sign | r);
}

// f32 -> bf16, round to nearest even; NaN made quiet.
inline uint16_t f32_to_bf16_rne(float v) {
    uint32_t x = f32_bits(v);
    if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu)) return uint16_t((x >> 16) | 0x40u);
    return uint16_t((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// The exact binary16 encoding of an f32 bit pattern, if it has one (NaN never: its payload is not
// canonical).
inline bool f16_exact(uint32_t x, uint16_t *h) {
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t e = (x >> 23) & 0xFFu, m = x & 0x7FFFFFu;
    if (e == 0xFF) {
        if (m) return false;  // NaN
        *h = uint16_t(sign | 0x7C00u);
        return true;
    }
    if (e == 0) {  // zero, or an f32 subnormal (far below binary16's smallest subnormal)
        if (m) return false;
        *h = sign;
        return true;
    }
    const int E = int(e) - 127;
    if (E > 15 || E < -24) return false;
    if (E >= -14) {  // binary16 normal: 10 mantissa bits
        if (m & 0x1FFFu) return false;
        *h = uint16_t(sign | uint32_t(E + 15) << 10 | m >> 13);
        return true;
    }
    // binary16 subnormal k * 2^-24: the 24-bit significand shifted right by -E - 1 (14..23).
    const uint32_t full = m | 0x800000u, sh = uint32_t(-E - 1);
    if (full & ((1u << sh) - 1)) return false;
    *h = uint16_t(sign | full >> sh);
    return true;
}

}  // namespace stk
