// Native bit-packing of .lwt tensors: see lowbit.h and docs/format.md (".lwt element types").
#include "format/lowbit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/float16.h"
#include "format/lowbit_kernels.h"

namespace stk {

namespace {

struct DTypeInfo {
    const char *name;
    unsigned bits;
};
constexpr DTypeInfo kInfo[] = {
    {"?", 0},     {"float32", 32}, {"float16", 16}, {"bfloat16", 16}, {"int8", 8},    {"uint8", 8},  {"int4", 4},
    {"uint4", 4}, {"fp4", 4},      {"int2", 2},     {"uint2", 2},     {"ternary", 2}, {"binary", 1},
    {"q4_0", 0},  {"q8_0", 0},  // block-scaled: sized per block (lwt_packed_bytes)
};

// The largest positive code of a signed dtype; the smallest is -(hi + 1).
inline int32_t signed_hi(LwtDType t) {
    switch (t) {
        case LwtDType::I8: return 127;
        case LwtDType::I4: return 7;
        case LwtDType::I2: return 1;
        default: return 0;
    }
}

// E2M1 magnitudes by code (OCP MX FP4): exponent bias 1, one mantissa bit, no inf/NaN.
constexpr float kFp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Nearest E2M1 magnitude index of a >= 0, ties to the even index (= even mantissa).
inline uint32_t fp4_index(float a) {
    if (a <= 0.25f) return 0;
    if (a < 0.75f) return 1;
    if (a <= 1.25f) return 2;
    if (a < 1.75f) return 3;
    if (a <= 2.5f) return 4;
    if (a < 3.5f) return 5;
    if (a <= 5.0f) return 6;
    return 7;
}

inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// Round half to even for |x| <= 2^22 without a libm call (so the loops vectorise): adding and
// subtracting 1.5 * 2^23 leaves no fraction bits, and the FPU rounds that sum to nearest even.
// Callers clamp x to a few hundred first.
inline float rne_small(float x) { return (x + 0x1.8p23f) - 0x1.8p23f; }  // never built with -ffast-math

}  // namespace

const char *lwt_dtype_name(LwtDType t) {
    uint32_t c = uint32_t(t);
    return lwt_dtype_valid(c) ? kInfo[c].name : "?";
}

bool parse_lwt_dtype(std::string_view name, LwtDType *out) {
    for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++)
        if (name == kInfo[c].name) {
            *out = LwtDType(c);
            return true;
        }
    return false;
}

unsigned lwt_dtype_bits(LwtDType t) {
    uint32_t c = uint32_t(t);
    return lwt_dtype_valid(c) ? kInfo[c].bits : 0;
}

bool lwt_dtype_is_float(LwtDType t) { return t == LwtDType::F32 || t == LwtDType::F16 || t == LwtDType::BF16; }

uint32_t lwt_unsigned_max(LwtDType t) {
    switch (t) {
        case LwtDType::U8: return 255;
        case LwtDType::U4: return 15;
        case LwtDType::U2: return 3;
        default: return 0;
    }
}

bool lwt_packed_bytes(LwtDType t, uint64_t n, uint64_t *out) {
    if (lwt_dtype_is_blocked(t)) return blockq_bytes(lwt_blockq(t), n, out);
    uint64_t bits;
    if (!mul_ok(n, lwt_dtype_bits(t), &bits)) return false;
    *out = bits / 8 + (bits % 8 ? 1 : 0);
    return true;
}

namespace {

// Exact, order-independent sum of |v| (see LwtQuantStats), `add(first, k, bins)` adding values
// [first, first + k) to the kExpBins entries (each growing by less than 2^25 per value); k
// never crosses a multiple of 2^38 values.
template <class Add>
void add_abs_sum_by(LwtQuantStats *s, uint64_t n, uint64_t max_piece, Add &&add) {
    constexpr unsigned B = LwtQuantStats::kExpBins;
    for (uint64_t done = 0; done < n;) {
        // Each entry grows by < 2^25 per value: carry at most every 2^38 values (< 2^63).
        if (s->n + done >= (1ull << 38) && (s->n + done) % (1ull << 38) == 0)
            for (unsigned e = 0; e + 1 < B; e++) {
                s->abs_sum[e + 1] += s->abs_sum[e] >> 1;  // entry e + 1 is worth twice entry e
                s->abs_sum[e] &= 1;
            }
        const uint64_t k = std::min<uint64_t>({n - done, (1ull << 38) - (s->n + done) % (1ull << 38), max_piece});
        uint64_t bins[B] = {};
        add(done, k, bins);
        for (unsigned e = 0; e < B; e++) s->abs_sum[e] += bins[e];
        done += k;
    }
}

// One value after the vector kernel: finite, min/max, and (bins) its significand into its
// exponent's entry.
inline bool stats_one(LwtQuantStats *s, float v, uint64_t *bins) {
    if (!std::isfinite(v)) return false;
    const float a = std::fabs(v);
    s->absmax = a > s->absmax ? a : s->absmax;
    s->lo = v < s->lo ? v : s->lo;
    s->hi = v > s->hi ? v : s->hi;
    if (bins) {
        const uint32_t x = f32_bits(a), e = x >> 23, m = x & 0x7FFFFFu;
        bins[e ? e : 1] += e ? (m | 0x800000u) : m;
    }
    return true;
}

// The statistics of n values in pieces of at most 2^31 (ternary and binary: bins as
// add_abs_sum_by's; the others: no sum), `piece(first, k, bins)` doing values [first, first + k).
template <class Piece>
bool stats_add_by(LwtDType t, LwtQuantStats *s, uint64_t n, Piece &&piece) {
    bool ok = true;
    if (t == LwtDType::TERNARY || t == LwtDType::BINARY)
        add_abs_sum_by(s, n, 1ull << 31, [&](uint64_t first, uint64_t k, uint64_t *bins) { ok = ok && piece(first, k, bins); });
    else ok = piece(0, n, nullptr);
    if (!ok) return false;
    s->n += n;
    return true;
}

}  // namespace

bool lwt_stats_add(LwtDType t, LwtQuantStats *s, const float *v, uint64_t n) {
    return stats_add_by(t, s, n, [&](uint64_t first, uint64_t k, uint64_t *bins) {
        const float *p = v + first;
        const uint64_t done = kernels::lwt_stats_f32_bulk(p, k, &s->absmax, &s->lo, &s->hi, bins);
        if (done == UINT64_MAX) return false;
        for (uint64_t i = done; i < k; i++)
            if (!stats_one(s, p[i], bins)) return false;
        return true;
    });
}

bool lwt_stats_add_bf16(LwtDType t, LwtQuantStats *s, const uint8_t *bits, uint64_t n) {
    return stats_add_by(t, s, n, [&](uint64_t first, uint64_t k, uint64_t *bins) {
        const uint8_t *p = bits + 2 * first;
        uint64_t done = 0;
        if (reinterpret_cast<uintptr_t>(p) % 2 == 0)  // little-endian hosts: the bits as they lie
            done = kernels::lwt_stats_bf16_bulk(reinterpret_cast<const uint16_t *>(p), k, &s->absmax, &s->lo, &s->hi, bins);
        if (done == UINT64_MAX) return false;
        for (uint64_t i = done; i < k; i++)
            if (!stats_one(s, bf16_to_f32(load_le<uint16_t>(p + 2 * i)), bins)) return false;
        return true;
    });
}

bool lwt_stats_merge(LwtQuantStats *s, const LwtQuantStats &b) {
    if (s->n + b.n >= LwtQuantStats::kCarryEvery || s->n + b.n < s->n) return false;
    s->absmax = b.absmax > s->absmax ? b.absmax : s->absmax;
    s->lo = b.lo < s->lo ? b.lo : s->lo;
    s->hi = b.hi > s->hi ? b.hi : s->hi;
    for (unsigned e = 0; e < LwtQuantStats::kExpBins; e++) s->abs_sum[e] += b.abs_sum[e];  // < 2^63 each (kCarryEvery)
    s->n += b.n;
    return true;
}

double lwt_stats_abs_total(const LwtQuantStats &s, uint64_t canonical[LwtQuantStats::kExpBins]) {
    constexpr unsigned B = LwtQuantStats::kExpBins;
    uint64_t b[B];
    std::copy(s.abs_sum, s.abs_sum + B, b);
    for (unsigned e = 0; e + 1 < B; e++) {  // one bit an entry but the last (< 2^64: see kCarryEvery)
        b[e + 1] += b[e] >> 1;
        b[e] &= 1;
    }
    if (canonical) std::copy(b, b + B, canonical);
    // The number's bits; the last entry may hold several (2^64 values of 2^127 would).
    uint8_t bit[B + 64] = {};
    for (unsigned e = 0; e + 1 < B; e++) bit[e] = uint8_t(b[e]);
    for (unsigned j = 0; j < 64; j++) bit[B - 1 + j] = uint8_t((b[B - 1] >> j) & 1);
    int top = int(B) + 63;
    while (top >= 0 && !bit[top]) top--;
    if (top < 0) return 0.0;
    // The 64 bits from the top down, the ones below folded into the lowest as a sticky bit:
    // uint64 -> double then rounds once, to nearest even, as the exact number would.
    const int low = top >= 63 ? top - 63 : 0;
    uint64_t m = 0;
    for (int e = top; e >= low; e--) m = m << 1 | bit[e];
    for (int e = low - 1; e >= 0; e--)
        if (bit[e]) {
            m |= 1;
            break;
        }
    return std::ldexp(double(m), low - 150);
}

LwtQuant lwt_quant_from_stats(LwtDType t, const LwtQuantStats &s) {
    LwtQuant q;
    if (!lwt_dtype_has_scale(t)) return q;
    float scale = 1.0f;
    uint32_t umax = lwt_unsigned_max(t);
    if (umax) {
        scale = float((double(s.hi) - double(s.lo)) / umax);
        if (!(scale >= 0x1p-100f) || !std::isfinite(scale)) scale = 1.0f;
        q.scale = scale;
        q.zero_point = uint32_t(clampf(std::nearbyint(-s.lo / scale), 0.0f, float(umax)));
        return q;
    }
    if (t == LwtDType::TERNARY || t == LwtDType::BINARY) {
        // The exact sum, rounded once to binary64 (whatever entries hold it), then the mean.
        scale = s.n ? float(lwt_stats_abs_total(s, nullptr) / double(s.n)) : 1.0f;
    } else {
        double qmax = t == LwtDType::FP4 ? 6.0 : double(signed_hi(t));
        scale = float(double(s.absmax) / qmax);
    }
    if (!(scale >= 0x1p-100f) || !std::isfinite(scale)) scale = 1.0f;
    q.scale = scale;
    return q;
}

LwtQuant lwt_choose_quant(LwtDType t, const float *v, uint64_t n) {
    if (!lwt_dtype_has_scale(t)) return LwtQuant{};
    LwtQuantStats s;
    lwt_stats_add(t, &s, v, n);  // finite values (the caller checks): see lowbit.h
    return lwt_quant_from_stats(t, s);
}

namespace {

// One dtype's encode and decode, specialised so the packing loops below carry no per-element
// dispatch (lwt_encode / lwt_decode are the same functions behind one switch).
template <LwtDType T>
inline uint32_t enc(float v, LwtQuant q) {
    if constexpr (T == LwtDType::F32) return f32_bits(v);
    else if constexpr (T == LwtDType::F16) return f32_to_f16_rne(v);
    else if constexpr (T == LwtDType::BF16) return f32_to_bf16_rne(v);
    else if constexpr (T == LwtDType::I8 || T == LwtDType::I4 || T == LwtDType::I2) {
        constexpr float hi = T == LwtDType::I8 ? 127.0f : T == LwtDType::I4 ? 7.0f : 1.0f;
        constexpr uint32_t mask = T == LwtDType::I8 ? 0xFFu : T == LwtDType::I4 ? 0xFu : 0x3u;
        return uint32_t(int32_t(clampf(rne_small(clampf(v / q.scale, -hi - 2.0f, hi + 1.0f)), -hi - 1.0f, hi))) & mask;
    } else if constexpr (T == LwtDType::U8 || T == LwtDType::U4 || T == LwtDType::U2) {
        constexpr int32_t umax = T == LwtDType::U8 ? 255 : T == LwtDType::U4 ? 15 : 3;
        float r = rne_small(clampf(v / q.scale, -float(umax) - 1.0f, float(umax) + 1.0f));
        int32_t code = int32_t(r) + int32_t(q.zero_point);
        return uint32_t(code < 0 ? 0 : (code > umax ? umax : code));
    } else if constexpr (T == LwtDType::FP4) {
        return (std::signbit(v) ? 8u : 0u) | fp4_index(std::fabs(v / q.scale));
    } else if constexpr (T == LwtDType::TERNARY) {
        return uint32_t(int32_t(clampf(rne_small(clampf(v / q.scale, -2.0f, 2.0f)), -1.0f, 1.0f))) & 3u;
    } else {
        return v > 0.0f ? 1u : 0u;
    }
}

template <LwtDType T>
inline float dec(uint32_t field, LwtQuant q) {
    if constexpr (T == LwtDType::F32) return f32_from_bits(field);
    else if constexpr (T == LwtDType::F16) return f16_to_f32(uint16_t(field));
    else if constexpr (T == LwtDType::BF16) return bf16_to_f32(uint16_t(field));
    else if constexpr (T == LwtDType::I8 || T == LwtDType::I4 || T == LwtDType::I2 || T == LwtDType::TERNARY) {
        constexpr unsigned b = T == LwtDType::I8 ? 8 : T == LwtDType::I4 ? 4 : 2;
        return float(int32_t(field << (32 - b)) >> (32 - b)) * q.scale;  // sign-extend the b-bit field
    } else if constexpr (T == LwtDType::U8 || T == LwtDType::U4 || T == LwtDType::U2) {
        return float(int32_t(field) - int32_t(q.zero_point)) * q.scale;
    } else if constexpr (T == LwtDType::FP4) {
        float m = kFp4[field & 7u] * q.scale;
        return (field & 8u) ? -m : m;
    } else {
        return field ? q.scale : -q.scale;
    }
}

constexpr unsigned bits_t(LwtDType t) {
    return t == LwtDType::F32                                               ? 32
           : (t == LwtDType::F16 || t == LwtDType::BF16)                    ? 16
           : (t == LwtDType::I8 || t == LwtDType::U8)                       ? 8
           : (t == LwtDType::I4 || t == LwtDType::U4 || t == LwtDType::FP4) ? 4
           : t == LwtDType::BINARY                                          ? 1
                                                                            : 2;
}

template <LwtDType T>
void pack_t(const float *v, uint64_t n, LwtQuant q, uint8_t *out) {
    constexpr unsigned b = bits_t(T);
    if constexpr (b == 32) {
        std::memcpy(out, v, n * 4);
    } else if constexpr (b == 16) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t h = enc<T>(v[i], q);
            out[2 * i] = uint8_t(h);
            out[2 * i + 1] = uint8_t(h >> 8);
        }
    } else if constexpr (b == 8) {
        for (uint64_t i = 0; i < n; i++) out[i] = uint8_t(enc<T>(v[i], q));
    } else {
        constexpr unsigned per = 8 / b;
        const uint64_t full = n / per;
        for (uint64_t j = 0; j < full; j++) {  // one output byte per step: no read-modify-write
            uint32_t byte = 0;
            for (unsigned k = 0; k < per; k++) byte |= enc<T>(v[j * per + k], q) << (8 - b * (k + 1));
            out[j] = uint8_t(byte);
        }
        if (n % per) {
            uint32_t byte = 0;
            for (unsigned k = 0; k < n % per; k++) byte |= enc<T>(v[full * per + k], q) << (8 - b * (k + 1));
            out[full] = uint8_t(byte);
        }
    }
}

template <LwtDType T>
uint64_t unpack_t(const uint8_t *in, uint64_t n, LwtQuant q, float *out) {
    constexpr unsigned b = bits_t(T);
    if constexpr (b == 32) {
        std::memcpy(out, in, n * 4);
        return n;
    } else if constexpr (b == 16) {
        for (uint64_t i = 0; i < n; i++) out[i] = dec<T>(uint32_t(in[2 * i]) | uint32_t(in[2 * i + 1]) << 8, q);
        return n;
    } else if constexpr (b == 8) {
        for (uint64_t i = 0; i < n; i++) out[i] = dec<T>(in[i], q);
        return n;
    } else {
        constexpr unsigned per = 8 / b;
        constexpr uint32_t mask = (1u << b) - 1u;
        bool bad = false;
        const uint64_t full = n / per;
        for (uint64_t j = 0; j < full; j++) {  // one input byte per step
            const uint32_t byte = in[j];
            for (unsigned k = 0; k < per; k++) {
                uint32_t f = (byte >> (8 - b * (k + 1))) & mask;
                if constexpr (T == LwtDType::TERNARY) bad |= f == 2;
                out[j * per + k] = dec<T>(f, q);
            }
        }
        for (uint64_t i = full * per; i < n; i++) {
            uint32_t f = (uint32_t(in[full]) >> (8 - b * (1 + unsigned(i % per)))) & mask;
            if constexpr (T == LwtDType::TERNARY) bad |= f == 2;
            out[i] = dec<T>(f, q);
        }
        if (bad)
            for (uint64_t i = 0; i < n; i++)
                if (((uint32_t(in[i / per]) >> (8 - b * (1 + unsigned(i % per)))) & mask) == 2) return i;
        if (n % per) {
            uint64_t used = n % per * b;  // bits of the last byte holding elements
            if (in[n / per] & ((1u << (8 - used)) - 1u)) return n + 1;
        }
        return n;
    }
}

#define STK_LWT_DISPATCH(t, CALL)                                        \
  switch (t) {                                                           \
    case LwtDType::F32: CALL(LwtDType::F32); STK_LWT_NON_F32_CASES(CALL) \
    STK_LWT_BLOCK_CASES break;                                           \
  }

}  // namespace

uint32_t lwt_encode(LwtDType t, float v, LwtQuant q) {
#define CALL(T) return enc<T>(v, q)
    STK_LWT_DISPATCH(t, CALL)
#undef CALL
    return 0;
}

float lwt_decode(LwtDType t, uint32_t field, LwtQuant q) {
#define CALL(T) return dec<T>(field, q)
    STK_LWT_DISPATCH(t, CALL)
#undef CALL
    return 0.0f;
}

uint32_t lwt_field_at(LwtDType t, const uint8_t *in, uint64_t i) {
    switch (lwt_dtype_bits(t)) {
        case 32: {
            uint32_t x;
            std::memcpy(&x, in + i * 4, 4);  // little-endian hosts only
            return x;
        }
        case 16: return uint32_t(in[i * 2]) | uint32_t(in[i * 2 + 1]) << 8;
        case 8: return in[i];
        case 4: return (in[i / 2] >> ((i % 2) ? 0 : 4)) & 0xFu;
        case 2: return (in[i / 4] >> (6 - 2 * (i % 4))) & 0x3u;
        case 1: return (in[i / 8] >> (7 - i % 8)) & 0x1u;
    }
    return 0;
}

void lwt_pack_scalar(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out){
#define CALL(T) return pack_t<T>(v, n, q, out)
    STK_LWT_DISPATCH(t, CALL)
#undef CALL
}

uint64_t lwt_unpack_scalar(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out) {
#define CALL(T) return unpack_t<T>(in, n, q, out)
    STK_LWT_DISPATCH(t, CALL)
#undef CALL
    return 0;
}

void lwt_pack(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out) {
    if (lwt_dtype_is_blocked(t)) return blockq_quantize(lwt_blockq(t), v, n, out);
    uint64_t done = kernels::lwt_pack_bulk(t, v, n, q, out);  // a multiple of 8: whole bytes
    uint64_t at = done * lwt_dtype_bits(t) / 8;
    lwt_pack_scalar(t, v + done, n - done, q, out + at);
}

void lwt_pack_bf16(LwtDType t, const uint8_t *bits, uint64_t n, LwtQuant q, uint8_t *out) {
    if (lwt_dtype_is_blocked(t)) {  // 1,024 values (32 blocks) at a time through f32
        const BlockQType b = lwt_blockq(t);
        float buf[1024];
        for (uint64_t at = 0; at < n;) {
            const uint64_t k = std::min<uint64_t>(1024, n - at);
            for (uint64_t i = 0; i < k; i++) buf[i] = bf16_to_f32(load_le<uint16_t>(bits + 2 * (at + i)));
            blockq_quantize(b, buf, k, out + at / kBlockQElems * blockq_block_bytes(b));
            at += k;
        }
        return;
    }
    uint64_t done = 0;
    if (reinterpret_cast<uintptr_t>(bits) % 2 == 0)  // little-endian hosts: the bits as they lie
        done = kernels::lwt_pack_bf16_bulk(t, reinterpret_cast<const uint16_t *>(bits), n, q, out);
    float tail[64];  // the rest through the scalar reference, 64 values (8 bytes of any width) at a time
    for (uint64_t at = done; at < n;) {
        const uint64_t k = std::min<uint64_t>(64, n - at);
        for (uint64_t i = 0; i < k; i++) tail[i] = bf16_to_f32(load_le<uint16_t>(bits + 2 * (at + i)));
        lwt_pack_scalar(t, tail, k, q, out + at * lwt_dtype_bits(t) / 8);
        at += k;
    }
}

uint64_t lwt_unpack(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out) {
    if (lwt_dtype_is_blocked(t)) {
        const BlockQType b = lwt_blockq(t);
        const uint64_t bad = blockq_first_bad_scale(b, in, n);
        if (bad < n / kBlockQElems) return bad * kBlockQElems;
        blockq_dequantize(b, in, n, out);
        return n;
    }
    bool invalid = false;
    uint64_t done = kernels::lwt_unpack_bulk(t, in, n, q, out, &invalid);
    if (invalid) return lwt_unpack_scalar(t, in, n, q, out);  // finds the first invalid field
    uint64_t r = lwt_unpack_scalar(t, in + done * lwt_dtype_bits(t) / 8, n - done, q, out + done);
    return done + r;  // n, the index of an invalid field, or n + 1 (padding)
}

}  // namespace stk

// ---- block-scaled types (lowbit.h) -------------------------------------------------------------

namespace stk {

const char *blockq_name(BlockQType t) { return t == BlockQType::Q4_0 ? "q4_0" : "q8_0"; }

bool parse_blockq(std::string_view name, BlockQType *out) {
    if (name == "q4_0") *out = BlockQType::Q4_0;
    else if (name == "q8_0") *out = BlockQType::Q8_0;
    else return false;
    return true;
}

uint64_t blockq_block_bytes(BlockQType t) { return t == BlockQType::Q4_0 ? 18 : 34; }

bool blockq_bytes(BlockQType t, uint64_t n, uint64_t *out) {
    if (n % kBlockQElems) return false;
    const uint64_t blocks = n / kBlockQElems;
    if (blocks > UINT64_MAX / blockq_block_bytes(t)) return false;
    *out = blocks * blockq_block_bytes(t);
    return true;
}

namespace {

// The product rounded to f32 on its own (gguf-py's numpy does each operation apart).
inline float mul_f32(float a, float b) {
    const float p = a * b;
    return p;
}

// The codes of one block under the f32 scale d (gguf-py's rule), and its stored f16 scale h.
void encode_block(BlockQType t, const float *x, float d, uint16_t h, uint8_t *o) {
    const float id = d != 0 ? 1.0f / d : 0.0f;
    if (t == BlockQType::Q4_0) {
        uint8_t q[kBlockQElems];
        for (uint64_t j = 0; j < kBlockQElems; j++) {
            volatile float p = mul_f32(x[j], id);  // no fused multiply-add: numpy rounds the product
            const float s = p + 8.5f;
            const float c = std::trunc(s);
            q[j] = uint8_t(!(c > 0) ? 0 : c > 15 ? 15 : int(c));  // NaN (id = inf over 0): 0, as numpy on x86
        }
        for (uint64_t j = 0; j < 16; j++) o[2 + j] = uint8_t(q[j] | (q[j + 16] << 4));
    } else {
        for (uint64_t j = 0; j < kBlockQElems; j++) {
            const float p = std::round(mul_f32(x[j], id));  // half away from zero, as np_roundf
            o[2 + j] = uint8_t(int8_t(p != p ? 0 : p < -128 ? -128 : p > 127 ? 127 : int(p)));  // NaN: 0
        }
    }
    o[0] = uint8_t(h & 0xff);
    o[1] = uint8_t(h >> 8);
}

}  // namespace

void blockq_quantize(BlockQType t, const float *v, uint64_t n, uint8_t *out) {
    for (uint64_t b = 0; b < n / kBlockQElems; b++) {
        const float *x = v + b * kBlockQElems;
        float d;
        if (t == BlockQType::Q4_0) {
            float amax = std::fabs(x[0]), m = x[0];  // the first of largest |v| (numpy's argmax), its sign kept
            for (uint64_t j = 1; j < kBlockQElems; j++)
                if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), m = x[j];
            d = m / -8.0f;
        } else {
            float amax = 0;
            for (uint64_t j = 0; j < kBlockQElems; j++) amax = std::max(amax, std::fabs(x[j]));
            d = amax / 127.0f;
        }
        // The codes take the f32 scale; the block stores it rounded to f16.
        encode_block(t, x, d, f32_to_f16_rne(d), out + b * blockq_block_bytes(t));
    }
}

void blockq_quantize_scaled(BlockQType t, const float *v, uint64_t n, const uint16_t *d, uint8_t *out) {
    for (uint64_t b = 0; b < n / kBlockQElems; b++)
        encode_block(t, v + b * kBlockQElems, f16_to_f32(d[b]), d[b], out + b * blockq_block_bytes(t));
}

uint64_t blockq_first_bad_scale(BlockQType t, const uint8_t *in, uint64_t n) {
    for (uint64_t b = 0; b < n / kBlockQElems; b++)
        if ((blockq_scale_bits(t, in, b) & 0x7c00u) == 0x7c00u) return b;  // exponent all ones: inf or NaN
    return n / kBlockQElems;
}

void blockq_dequantize(BlockQType t, const uint8_t *in, uint64_t n, float *out) {
    for (uint64_t b = 0; b < n / kBlockQElems; b++) {
        const uint8_t *o = in + b * blockq_block_bytes(t);
        const float d = f16_to_f32(uint16_t(o[0] | (o[1] << 8)));
        float *y = out + b * kBlockQElems;
        if (t == BlockQType::Q4_0) {
            for (uint64_t j = 0; j < 16; j++) {
                y[j] = d * float(int(o[2 + j] & 15) - 8);
                y[j + 16] = d * float(int(o[2 + j] >> 4) - 8);
            }
        } else {
            for (uint64_t j = 0; j < kBlockQElems; j++) y[j] = d * float(int8_t(o[2 + j]));
        }
    }
}

float blockq_dot(BlockQType t, const uint8_t *row, const float *x, uint64_t n) {
    float total = 0;
    for (uint64_t b = 0; b < n / kBlockQElems; b++) {
        const uint8_t *o = row + b * blockq_block_bytes(t);
        const float d = f16_to_f32(uint16_t(o[0] | (o[1] << 8)));
        const float *xb = x + b * kBlockQElems;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (t == BlockQType::Q4_0) {
            for (uint64_t j = 0; j < 16; j++) {
                acc[j & 7] += float(int(o[2 + j] & 15) - 8) * xb[j];
                acc[j & 7] += float(int(o[2 + j] >> 4) - 8) * xb[j + 16];
            }
        } else {
            for (uint64_t j = 0; j < kBlockQElems; j++) acc[j & 7] += float(int8_t(o[2 + j])) * xb[j];
        }
        total += d * (((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])));
    }
    return total;
}

}  // namespace stk
