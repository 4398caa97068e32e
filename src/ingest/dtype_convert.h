// Element conversions of source checkpoint dtypes to f32.  Scalar, bit-exact definitions (the
// reference) plus the bulk contiguous loop convert_to_f32 uses; see docs/decisions.md
// ("Ingestion readers: F8").
#pragma once

#include <cstdint>

#include "core/float16.h"
#include "ingest/checkpoint.h"

namespace stk {

// OCP FP8 E5M2 (torch.float8_e5m2): the top byte of a binary16.
inline float f8e5m2_to_f32(uint8_t b) { return f16_to_f32(uint16_t(b) << 8); }

// OCP FP8 E4M3FN (torch.float8_e4m3fn, safetensors F8_E4M3): bias 7, no infinities,
// S.1111.111 is NaN, max 448, subnormals m/8 * 2^-6.
inline float f8e4m3_to_f32(uint8_t b) {
    uint32_t sign = uint32_t(b & 0x80u) << 24;
    uint32_t exp = (b >> 3) & 0xFu;
    uint32_t man = b & 0x7u;
    if (exp == 0xF && man == 0x7) return f32_from_bits(sign | 0x7FC00000u);
    if (exp == 0) {
        if (man == 0) return f32_from_bits(sign);
        float v = float(man) * 0x1.0p-9f;  // m/8 * 2^-6, exact
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 120) << 23) | (man << 20));
}

// One element of type t at p, as f32 (integers round to nearest, BOOL: nonzero -> 1).
float element_to_f32(SrcDType t, const uint8_t *p);

// `count` contiguous elements of type t starting at src.
void convert_contiguous(SrcDType t, const uint8_t *src, uint64_t count, float *out);

}  // namespace stk
