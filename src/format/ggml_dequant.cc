// ggml block dequantisation (ggml_dequant.h).  Two codings of the same definitions:
// - the reference (HWY_ONCE part): one plain loop per type, written from gguf-py's numpy code
//   element by element;
// - the kernels (compiled per Highway target, one dispatch per call): each block is decoded to
//   int8 quants plus one f32 scale (and offset) per sub-block, then a vector pass computes
//   scale * float(q) (+/- offset) lane by lane.
// Both compute in f32 in gguf-py's order with no fused multiply-add (the pragmas below), so the
// bytes agree with gguf-py and across targets (tests/ggml_dequant_reference.py, test_gguf.cc).
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC optimize("fp-contract=off")
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "format/ggml_dequant.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "core/float16.h"
#include "format/ggml_dequant.h"

#ifdef __clang__
#  pragma STDC FP_CONTRACT OFF
#endif

#ifndef STK_GGML_DEQUANT_SHARED
#  define STK_GGML_DEQUANT_SHARED
namespace stk::ggml::gd {

// A table: clang-format would put one value per line.
// clang-format off
enum : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12,
    Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35,
};
// clang-format on

// IQ4_NL's non-linear 4-bit grid (ggml's kvalues_iq4nl).
constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// A block's f16 scale: exact (core/float16.h; NaNs come out quiet, the one difference from numpy,
// never met by finite scales).
inline float f16(const uint8_t *p) { return f16_to_f32(uint16_t(p[0] | (p[1] << 8))); }

inline uint32_t le32(const uint8_t *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

struct Layout {
    uint32_t block, bytes;
};
inline Layout layout(uint32_t t) {
    switch (t) {
        case F32: return {1, 4};
        case F16:
        case BF16: return {1, 2};
        case Q4_0:
        case IQ4_NL: return {32, 18};
        case Q4_1: return {32, 20};
        case Q5_0: return {32, 22};
        case Q5_1: return {32, 24};
        case Q8_0: return {32, 34};
        case Q2_K: return {256, 84};
        case Q3_K: return {256, 110};
        case Q4_K: return {256, 144};
        case Q5_K: return {256, 176};
        case Q6_K: return {256, 210};
        case IQ4_XS: return {256, 136};
        case TQ1_0: return {256, 54};
        case TQ2_0: return {256, 66};
        default: return {0, 0};
    }
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (gguf-py's get_scale_min).
inline void k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 2) & 0x30));
        *mn = uint8_t((s[j + 4] >> 4) | ((s[j] >> 2) & 0x30));
    }
}

}  // namespace stk::ggml::gd
#endif  // STK_GGML_DEQUANT_SHARED

HWY_BEFORE_NAMESPACE();
namespace stk::ggml {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
using namespace gd;

// out[s * len + k] = scale[s] * float(q[s * len + k]), then + or - off[s] (mode 1 / 2).
template <int kMode>
HWY_INLINE void Apply(const int8_t *q, const float *scale, const float *off, size_t n_sub, size_t len, float *out) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<int32_t, decltype(df)> di;
    const hn::Rebind<int8_t, decltype(df)> d8;
    const size_t N = hn::Lanes(df);
    for (size_t s = 0; s < n_sub; s++) {
        const auto vs = hn::Set(df, scale[s]);
        const int8_t *qs = q + s * len;
        float *o = out + s * len;
        if (len % N == 0) {
            for (size_t k = 0; k < len; k += N) {
                auto v = hn::Mul(vs, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, qs + k))));
                if (kMode == 1) v = hn::Add(v, hn::Set(df, off[s]));
                if (kMode == 2) v = hn::Sub(v, hn::Set(df, off[s]));
                hn::StoreU(v, df, o + k);
            }
            continue;
        }
        for (size_t k = 0; k < len; k++) {  // vectors wider than a sub-block
            float v = scale[s] * float(qs[k]);
            if (kMode == 1) v = v + off[s];
            if (kMode == 2) v = v - off[s];
            o[k] = v;
        }
    }
}

// Two nibbles: q[j] = low nibble of qs[j], q[j + half] = high nibble, minus `bias`.
HWY_INLINE void Nibbles(const uint8_t *qs, size_t half, int bias, int8_t *q) {
    for (size_t j = 0; j < half; j++) {
        q[j] = int8_t((qs[j] & 0xF) - bias);
        q[j + half] = int8_t((qs[j] >> 4) - bias);
    }
}

// 16 bytes of IQ4 nibbles -> q[0..16) = grid[low nibbles], q[16..32) = grid[high nibbles]: one
// byte shuffle per half where the target has 16-byte vectors.
HWY_INLINE void Iq4Lookup(const uint8_t *qs, int8_t *q) {
#if HWY_TARGET == HWY_SCALAR
    for (int j = 0; j < 16; j++) {
        q[j] = kIq4nl[qs[j] & 0xF];
        q[j + 16] = kIq4nl[qs[j] >> 4];
    }
#else
    const hn::Full128<int8_t> d8;
    const hn::Full128<uint8_t> du;
    const auto grid = hn::LoadU(d8, kIq4nl);
    const auto v = hn::LoadU(du, qs);
    const auto lo = hn::BitCast(d8, hn::And(v, hn::Set(du, uint8_t(0x0F))));
    const auto hi = hn::BitCast(d8, hn::ShiftRight<4>(v));
    hn::StoreU(hn::TableLookupBytes(grid, lo), d8, q);
    hn::StoreU(hn::TableLookupBytes(grid, hi), d8, q + 16);
#endif
}

void DequantImpl(uint32_t type, const uint8_t *src, uint64_t n_blocks, float *out) {
    const Layout L = layout(type);
    alignas(64) int8_t q[256];
    float sc[16], off[16];
    for (uint64_t b = 0; b < n_blocks; b++) {
        const uint8_t *x = src + b * L.bytes;
        float *y = out + b * L.block;
        switch (type) {
            case Q4_0:
                Nibbles(x + 2, 16, 8, q);
                sc[0] = f16(x);
                Apply<0>(q, sc, off, 1, 32, y);
                break;
            case Q4_1:
                Nibbles(x + 4, 16, 0, q);
                sc[0] = f16(x);
                off[0] = f16(x + 2);
                Apply<1>(q, sc, off, 1, 32, y);
                break;
            case Q5_0:
            case Q5_1: {
                const bool one = type == Q5_1;
                const uint32_t qh = le32(x + (one ? 4 : 2));
                const uint8_t *qs = x + (one ? 8 : 6);
                const int bias = one ? 0 : 16;
                for (int j = 0; j < 16; j++) {
                    q[j] = int8_t(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - bias);
                    q[j + 16] = int8_t(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - bias);
                }
                sc[0] = f16(x);
                if (one) {
                    off[0] = f16(x + 2);
                    Apply<1>(q, sc, off, 1, 32, y);
                } else {
                    Apply<0>(q, sc, off, 1, 32, y);
                }
                break;
            }
            case Q8_0:
                std::memcpy(q, x + 2, 32);
                sc[0] = f16(x);
                Apply<0>(q, sc, off, 1, 32, y);
                break;
            case IQ4_NL:
                Iq4Lookup(x + 2, q);
                sc[0] = f16(x);
                Apply<0>(q, sc, off, 1, 32, y);
                break;
            case Q2_K: {
                const uint8_t *scales = x, *qs = x + 16;
                const float d = f16(x + 80), dmin = f16(x + 82);
                for (int h = 0; h < 2; h++)
                    for (int s = 0; s < 4; s++)
                        for (int l = 0; l < 32; l++) q[(h * 4 + s) * 32 + l] = int8_t((qs[h * 32 + l] >> (2 * s)) & 3);
                for (int j = 0; j < 16; j++) {
                    sc[j] = d * float(scales[j] & 0xF);
                    off[j] = dmin * float(scales[j] >> 4);
                }
                Apply<2>(q, sc, off, 16, 16, y);
                break;
            }
            case Q3_K: {
                const uint8_t *hm = x, *qs = x + 32, *s = x + 96;
                const float d = f16(x + 108);
                // Element e = 32 j + l (j = 4 h + k): crumb k of qs[32 h + l], minus 4 unless bit j
                // of hm[l] is set.
                for (int h = 0; h < 2; h++)
                    for (int k = 0; k < 4; k++) {
                        const int j = h * 4 + k;
                        int8_t *o = q + j * 32;
                        for (int l = 0; l < 32; l++)
                            o[l] = int8_t(((qs[h * 32 + l] >> (2 * k)) & 3) - ((((hm[l] >> j) & 1) ^ 1) << 2));
                    }
                for (int i = 0; i < 16; i++) {
                    const int lo = (i < 8 ? s[i] : s[i - 8] >> 4) & 0xF;
                    const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
                    sc[i] = d * float(int8_t(lo | (hi << 4)) - 32);
                }
                Apply<0>(q, sc, off, 16, 16, y);
                break;
            }
            case Q4_K:
            case Q5_K: {
                const bool five = type == Q5_K;
                const float d = f16(x), dmin = f16(x + 2);
                const uint8_t *s = x + 4, *qh = x + 16, *qs = x + (five ? 48 : 16);
                // Sub-blocks 2c and 2c + 1: the low and high nibbles of qs[32c ..]; Q5_K's fifth bit
                // of element e is bit e / 32 of qh[e % 32].
                for (int c = 0; c < 4; c++) {
                    int8_t *o = q + c * 64;
                    for (int l = 0; l < 32; l++) {
                        o[l] = int8_t(qs[c * 32 + l] & 0xF);
                        o[32 + l] = int8_t(qs[c * 32 + l] >> 4);
                    }
                    if (five)
                        for (int l = 0; l < 32; l++) {
                            o[l] = int8_t(o[l] | (((qh[l] >> (2 * c)) & 1) << 4));
                            o[32 + l] = int8_t(o[32 + l] | (((qh[l] >> (2 * c + 1)) & 1) << 4));
                        }
                }
                for (int j = 0; j < 8; j++) {
                    uint8_t a, m;
                    k_scale_min(s, j, &a, &m);
                    sc[j] = d * float(a);
                    off[j] = dmin * float(m);
                }
                Apply<2>(q, sc, off, 8, 32, y);
                break;
            }
            case Q6_K: {
                const uint8_t *ql = x, *qh = x + 128;
                const int8_t *scales = reinterpret_cast<const int8_t *>(x + 192);
                const float d = f16(x + 208);
                // Element h*128 + r takes nibble r / 64 of ql[h*64 + r % 64] and crumb r / 32 of
                // qh[h*32 + r % 32]; one pass over l = r % 32 fills the four quarters.
                for (int h = 0; h < 2; h++) {
                    const uint8_t *a = ql + h * 64, *c = qh + h * 32;
                    int8_t *o = q + h * 128;
                    for (int l = 0; l < 32; l++) {
                        o[l] = int8_t(((a[l] & 0xF) | ((c[l] & 3) << 4)) - 32);
                        o[32 + l] = int8_t(((a[32 + l] & 0xF) | (((c[l] >> 2) & 3) << 4)) - 32);
                        o[64 + l] = int8_t(((a[l] >> 4) | (((c[l] >> 4) & 3) << 4)) - 32);
                        o[96 + l] = int8_t(((a[32 + l] >> 4) | (((c[l] >> 6) & 3) << 4)) - 32);
                    }
                }
                for (int j = 0; j < 16; j++) sc[j] = d * float(scales[j]);
                Apply<0>(q, sc, off, 16, 16, y);
                break;
            }
            case IQ4_XS: {
                const float d = f16(x);
                const uint32_t sh = uint32_t(x[2] | (x[3] << 8));
                const uint8_t *sl = x + 4, *qs = x + 8;
                for (int i = 0; i < 8; i++) {
                    const int lo = (sl[i / 2] >> (4 * (i % 2))) & 0xF;
                    const int hi = (sh >> (2 * i)) & 3;
                    sc[i] = d * float(int8_t(lo | (hi << 4)) - 32);
                    Iq4Lookup(qs + i * 16, q + i * 32);
                }
                Apply<0>(q, sc, off, 8, 32, y);
                break;
            }
            case TQ1_0: {
                static const uint8_t kPow3[5] = {1, 3, 9, 27, 81};
                const uint8_t *qs = x, *qh = x + 48;
                auto trit = [](uint8_t v) { return int8_t(((uint16_t(v) * 3) >> 8) - 1); };
                for (int k = 0; k < 5; k++) {
                    for (int l = 0; l < 32; l++) q[k * 32 + l] = trit(uint8_t(qs[l] * kPow3[k]));
                    for (int l = 0; l < 16; l++) q[160 + k * 16 + l] = trit(uint8_t(qs[32 + l] * kPow3[k]));
                }
                for (int k = 0; k < 4; k++)
                    for (int l = 0; l < 4; l++) q[240 + k * 4 + l] = trit(uint8_t(qh[l] * kPow3[k]));
                sc[0] = f16(x + 52);
                Apply<0>(q, sc, off, 1, 256, y);
                break;
            }
            case TQ2_0:
                for (int h = 0; h < 2; h++)
                    for (int s = 0; s < 4; s++)
                        for (int l = 0; l < 32; l++) q[(h * 4 + s) * 32 + l] = int8_t(((x[h * 32 + l] >> (2 * s)) & 3) - 1);
                sc[0] = f16(x + 64);
                Apply<0>(q, sc, off, 1, 256, y);
                break;
            default: break;
        }
    }
}

// The plain types: vector conversions.
void PlainImpl(uint32_t type, const uint8_t *src, uint64_t n, float *out) {
    if (type == F32) {
        std::memcpy(out, src, n * 4);
        return;
    }
    const hn::ScalableTag<float> df;
    const hn::Rebind<uint16_t, decltype(df)> d16;
    const hn::Rebind<uint32_t, decltype(df)> du;
    const size_t N = hn::Lanes(df);
    uint64_t i = 0;
    if (type == BF16) {
        for (; i + N <= n; i += N) {
            auto w = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t *>(src) + i)));
            hn::StoreU(hn::BitCast(df, w), df, out + i);
        }
        for (; i < n; i++) {
            uint32_t b = uint32_t(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
            std::memcpy(out + i, &b, 4);
        }
        return;
    }
    // F16: finite and infinite values convert exactly on every target; NaNs go through the
    // scalar definition (quiet, payload kept), whatever the target's conversion does with them.
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const auto exp_mask = hn::Set(d16, uint16_t(0x7C00));
    for (; i + N <= n; i += N) {
        const auto bits = hn::LoadU(d16, reinterpret_cast<const uint16_t *>(src) + i);
        const auto man = hn::And(bits, hn::Set(d16, uint16_t(0x03FF)));
        if (!hn::AllFalse(d16, hn::And(hn::Eq(hn::And(bits, exp_mask), exp_mask), hn::Ne(man, hn::Zero(d16))))) {
            for (size_t k = 0; k < N; k++) out[i + k] = f16(src + 2 * (i + k));
            continue;
        }
        hn::StoreU(hn::PromoteTo(df, hn::BitCast(dh, bits)), df, out + i);
    }
    for (; i < n; i++) out[i] = f16(src + 2 * i);
}

const char *TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace stk::ggml
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stk::ggml {

using namespace gd;

HWY_EXPORT(DequantImpl);
HWY_EXPORT(PlainImpl);
HWY_EXPORT(TargetName);

bool ggml_dequant_supported(uint32_t type) { return layout(type).block != 0; }
uint32_t ggml_dequant_block(uint32_t type) { return layout(type).block; }
uint32_t ggml_dequant_block_bytes(uint32_t type) { return layout(type).bytes; }

bool ggml_dequantize(uint32_t type, const uint8_t *src, uint64_t n_blocks, float *out) {
    if (!ggml_dequant_supported(type)) return false;
    if (n_blocks == 0) return true;  // out may be null (an empty tensor's empty scratch)
    if (type == F32 || type == F16 || type == BF16) HWY_DYNAMIC_DISPATCH(PlainImpl)(type, src, n_blocks, out);
    else HWY_DYNAMIC_DISPATCH(DequantImpl)(type, src, n_blocks, out);
    return true;
}

std::vector<int64_t> ggml_dequant_targets() { return hwy::SupportedAndGeneratedTargets(); }
std::string ggml_dequant_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

// The reference: element e of block b, straight from gguf-py's reshapes.
bool ggml_dequantize_reference(uint32_t type, const uint8_t *src, uint64_t n_blocks, float *out) {
    const Layout L = layout(type);
    if (!L.block) return false;
    for (uint64_t b = 0; b < n_blocks; b++) {
        const uint8_t *x = src + b * L.bytes;
        float *y = out + b * L.block;
        for (uint32_t e = 0; e < L.block; e++) {
            float v = 0;
            switch (type) {
                case F32: std::memcpy(&v, x, 4); break;
                case F16: v = f16(x); break;
                case BF16: v = bf16_to_f32(uint16_t(x[0] | (x[1] << 8))); break;
                case Q4_0: {
                    int nib = e < 16 ? x[2 + e] & 0xF : x[2 + e - 16] >> 4;
                    v = f16(x) * float(int8_t(nib - 8));
                    break;
                }
                case Q4_1: {
                    int nib = e < 16 ? x[4 + e] & 0xF : x[4 + e - 16] >> 4;
                    v = f16(x) * float(nib);
                    v = v + f16(x + 2);
                    break;
                }
                case Q5_0:
                case Q5_1: {
                    const bool one = type == Q5_1;
                    const uint8_t *qs = x + (one ? 8 : 6);
                    int nib = e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
                    int hb = (le32(x + (one ? 4 : 2)) >> e) & 1;
                    int qv = (nib | (hb << 4)) - (one ? 0 : 16);
                    v = f16(x) * float(qv);
                    if (one) v = v + f16(x + 2);
                    break;
                }
                case Q8_0: v = float(int8_t(x[2 + e])) * f16(x); break;
                case IQ4_NL: v = f16(x) * float(kIq4nl[e < 16 ? x[2 + e] & 0xF : x[2 + e - 16] >> 4]); break;
                case Q2_K: {
                    uint32_t h = e / 128, s = (e / 32) % 4, l = e % 32, sb = e / 16;
                    float dl = f16(x + 80) * float(x[sb] & 0xF);
                    float ml = f16(x + 82) * float(x[sb] >> 4);
                    float qv = float((x[16 + h * 32 + l] >> (2 * s)) & 3);
                    v = dl * qv;
                    v = v - ml;
                    break;
                }
                case Q3_K: {
                    uint32_t h = e / 128, k = (e / 32) % 4, l = e % 32, i = e / 16;
                    const uint8_t *s = x + 96;
                    int lo = (i < 8 ? s[i] & 0xF : (s[i - 8] >> 4) & 0xF);
                    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
                    float dl = f16(x + 108) * float(int8_t((lo | (hi << 4)) - 32));
                    int low = (x[32 + h * 32 + l] >> (2 * k)) & 3;
                    int high = ((x[l] >> (e / 32)) & 1) ^ 1;
                    v = dl * float(low - (high << 2));
                    break;
                }
                case Q4_K:
                case Q5_K: {
                    const bool five = type == Q5_K;
                    uint32_t j = e / 32, c = j / 2, t = j % 2, l = e % 32;
                    uint8_t a, m;
                    k_scale_min(x + 4, int(j), &a, &m);
                    float dd = f16(x) * float(a), dm = f16(x + 2) * float(m);
                    int qv = (x[(five ? 48 : 16) + c * 32 + l] >> (4 * t)) & 0xF;
                    if (five) qv |= ((x[16 + l] >> j) & 1) << 4;
                    v = dd * float(qv);
                    v = v - dm;
                    break;
                }
                case Q6_K: {
                    uint32_t h = e / 128, r = e % 128;
                    int lo = (x[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
                    int hi = (x[128 + h * 32 + r % 32] >> (2 * (r / 32))) & 3;
                    float dl = f16(x + 208) * float(int8_t(x[192 + e / 16]));
                    v = dl * float(int8_t((lo | (hi << 4)) - 32));
                    break;
                }
                case IQ4_XS: {
                    uint32_t i = e / 32, t = (e % 32) / 16, l = e % 16;
                    int lo = (x[4 + i / 2] >> (4 * (i % 2))) & 0xF;
                    int hi = (uint32_t(x[2] | (x[3] << 8)) >> (2 * i)) & 3;
                    float dl = f16(x) * float(int8_t((lo | (hi << 4)) - 32));
                    v = dl * float(kIq4nl[(x[8 + i * 16 + l] >> (4 * t)) & 0xF]);
                    break;
                }
                case TQ1_0: {
                    static const uint8_t kPow3[5] = {1, 3, 9, 27, 81};
                    uint8_t byte;
                    if (e < 160) byte = uint8_t(x[e % 32] * kPow3[e / 32]);
                    else if (e < 240) byte = uint8_t(x[32 + (e - 160) % 16] * kPow3[(e - 160) / 16]);
                    else byte = uint8_t(x[48 + (e - 240) % 4] * kPow3[(e - 240) / 4]);
                    v = f16(x + 52) * float(int8_t(((uint16_t(byte) * 3) >> 8) - 1));
                    break;
                }
                case TQ2_0: {
                    uint32_t h = e / 128, s = (e / 32) % 4, l = e % 32;
                    v = f16(x + 64) * float(int8_t(((x[h * 32 + l] >> (2 * s)) & 3) - 1));
                    break;
                }
                default: break;
            }
            y[e] = v;
        }
    }
    return true;
}

}  // namespace stk::ggml
#endif  // HWY_ONCE
