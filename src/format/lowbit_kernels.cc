// Highway kernels of the .lwt element types: see lowbit_kernels.h.  This file is compiled once
// per target (hwy/foreach_target.h); the HWY_ONCE part at the end is the one dispatch point.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "format/lowbit_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>

#include "format/lowbit_kernels.h"

#ifndef STK_LOWBIT_KERNELS_ONCE
#  define STK_LOWBIT_KERNELS_ONCE
#  include <cmath>
namespace stk::kernels {
// Division-free quantisation for the dtypes whose codes have few boundaries (ternary, int2, fp4).
// For x >= 0 (or +inf, or NaN), a representable c >= 2^-2 and a scale s in [kLwtMinScale,
// kLwtMaxScale], returns the float F with
//     fl(x / s) <= c   <=>   x <= F
// where fl is the IEEE division rounded to nearest even (what the scalar reference computes).
// fl(q) <= c exactly when q lies below the midpoint m between c and the next float: q == m would
// need x == m s, which has more than 24 significant bits (m has 25, the last one set), so no
// float x is a tie.  m s has at most 49 significant bits, so it is exact in double, and F is
// the largest float below it.  The packed bytes are unchanged: tests compare every code, every
// tie and the floats next to each boundary at many scales with the scalar reference.
inline float fl_div_le_bound(float c, float s) {
    const double m = (double(c) + double(std::nextafterf(c, INFINITY))) / 2, p = m * double(s);  // both exact
    float f = float(p);  // the nearest float (never p itself), or infinity
    if (double(f) > p) f = std::nextafterf(f, -INFINITY);
    return f;
}
}  // namespace stk::kernels
#endif

HWY_BEFORE_NAMESPACE();
namespace stk::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

const char *TargetName() { return hwy::TargetName(HWY_TARGET); }

#if HWY_TARGET == HWY_SCALAR
// One-lane vectors cannot pair lanes: the scalar reference in format/lowbit.cc does everything.
uint64_t PackBulk(LwtDType, const float *, uint64_t, LwtQuant, uint8_t *) { return 0; }
uint64_t PackBf16Bulk(LwtDType, const uint16_t *, uint64_t, LwtQuant, uint8_t *) { return 0; }
uint64_t UnpackBulk(LwtDType, const uint8_t *, uint64_t, LwtQuant, float *, bool *) { return 0; }
uint64_t StatsF32Bulk(const float *, uint64_t, float *, float *, float *, uint64_t *) { return 0; }
uint64_t StatsBf16Bulk(const uint16_t *, uint64_t, float *, float *, float *, uint64_t *) { return 0; }
void Transpose(const float *src, uint64_t ss, uint64_t rows, uint64_t cols, float *dst, uint64_t ds) {
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) dst[c * ds + r] = src[r * ss + c];
}
#else

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using VU = hn::Vec<DU>;

constexpr unsigned Bits(LwtDType t) {
    return t == LwtDType::F32                                               ? 32
           : (t == LwtDType::F16 || t == LwtDType::BF16)                    ? 16
           : (t == LwtDType::I8 || t == LwtDType::U8)                       ? 8
           : (t == LwtDType::I4 || t == LwtDType::U4 || t == LwtDType::FP4) ? 4
           : t == LwtDType::BINARY                                          ? 1
                                                                            : 2;
}

// Round half to even of |x| <= 2^22, as rne_small in lowbit.cc.
HWY_INLINE VF Rne(DF df, VF x) {
    const VF magic = hn::Set(df, 0x1.8p23f);
    return hn::Sub(hn::Add(x, magic), magic);
}

// f32 -> f16 bits (RNE; NaN quiet with its top payload bits; overflow to infinity), lane by lane
// the integer algorithm of f32_to_f16_rne.
HWY_INLINE VU F16Bits(DF df, VF v) {
    const DU du;
    const DI di;
    const VU x = hn::BitCast(du, v);
    const VU sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
    const VI exp = hn::BitCast(di, hn::And(hn::ShiftRight<23>(x), hn::Set(du, 0xFFu)));
    const VU man = hn::And(x, hn::Set(du, 0x7FFFFFu));
    const VU one = hn::Set(du, 1u);
    // Normal in f16 (exponent 113..142 in f32): the rounding carry may move into the exponent.
    const VU r_norm = hn::ShiftRight<13>(hn::Add(hn::Add(man, hn::Set(du, 0xFFFu)), hn::And(hn::ShiftRight<13>(man), one)));
    const VU e16 = hn::ShiftLeft<10>(hn::BitCast(du, hn::Sub(exp, hn::Set(di, 112))));
    const VU h_norm = hn::Min(hn::Add(e16, r_norm), hn::Set(du, 0x7C00u));
    // Subnormal in f16 (exponent 102..112): shift the full significand right by 126 - exp.
    const VU s = hn::BitCast(du, hn::Min(hn::Max(hn::Sub(hn::Set(di, 126), exp), hn::Set(di, 14)), hn::Set(di, 24)));
    const VU m = hn::Or(man, hn::Set(du, 0x800000u));
    const VU half_m1 = hn::Sub(one << hn::Sub(s, one), one);
    const VU h_sub = hn::Add(hn::Add(m, half_m1), hn::And(m >> s, one)) >> s;
    // Infinity / NaN (exponent 255) and overflow (> 142).
    const VU nan_payload = hn::IfThenElseZero(hn::RebindMask(du, hn::Gt(hn::BitCast(di, man), hn::Zero(di))),
                                              hn::Or(hn::Set(du, 0x200u), hn::ShiftRight<13>(man)));
    const VU h_inf = hn::Or(hn::Set(du, 0x7C00u), nan_payload);

    VU h = hn::Zero(du);
    h = hn::IfThenElse(hn::RebindMask(du, hn::Gt(exp, hn::Set(di, 101))), h_sub, h);
    h = hn::IfThenElse(hn::RebindMask(du, hn::Gt(exp, hn::Set(di, 112))), h_norm, h);
    h = hn::IfThenElse(hn::RebindMask(du, hn::Gt(exp, hn::Set(di, 142))), hn::Set(du, 0x7C00u), h);
    h = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Set(di, 255))), h_inf, h);
    return hn::Or(h, sign);
}

// f32 -> bf16 bits (RNE; NaN quiet), as f32_to_bf16_rne.
HWY_INLINE VU Bf16Bits(DF df, VF v) {
    const DU du;
    const DI di;
    const VU x = hn::BitCast(du, v);
    const VU hi = hn::ShiftRight<16>(x);
    const VU rounded = hn::ShiftRight<16>(hn::Add(hn::Add(x, hn::Set(du, 0x7FFFu)), hn::And(hi, hn::Set(du, 1u))));
    const auto nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, hn::And(x, hn::Set(du, 0x7FFFFFFFu))), hn::Set(di, 0x7F800000)));
    return hn::IfThenElse(nan, hn::Or(hi, hn::Set(du, 0x40u)), rounded);
}

// Ternary, int2 and fp4 codes compare |v| with the boundaries of fl(|v| / scale) (see
// fl_div_le_bound) instead of dividing: the same fields, without the division that bounds the
// other quantised dtypes.  thr holds the boundaries in the order the encoders below use.
constexpr bool UsesBounds(LwtDType t) { return t == LwtDType::TERNARY || t == LwtDType::I2 || t == LwtDType::FP4; }
constexpr unsigned kMaxBounds = 7;

// The boundaries for scale s, or false when s lies outside [kLwtMinScale, kLwtMaxScale] (then
// the kernels divide).
inline bool QuantBounds(LwtDType t, float s, float *thr) {
    if (!(s >= kLwtMinScale && s <= kLwtMaxScale)) return false;
    if (t == LwtDType::TERNARY) {
        thr[0] = fl_div_le_bound(0.5f, s);  // code 0: fl <= 0.5 (the tie rounds to 0)
    } else if (t == LwtDType::I2) {
        thr[0] = fl_div_le_bound(0.5f, s);                         // |code| >= 1 above it
        thr[1] = fl_div_le_bound(std::nextafterf(1.5f, 0.0f), s);  // -2 from fl >= 1.5 (-1.5 rounds to -2)
    } else {  // fp4: fp4_index's comparisons; a < c is a <= the float below c
        const float cs[kMaxBounds] = {5.0f,  std::nextafterf(3.5f, 0.0f),  2.5f, std::nextafterf(1.75f, 0.0f),
                                      1.25f, std::nextafterf(0.75f, 0.0f), 0.25f};
        for (unsigned k = 0; k < kMaxBounds; k++) thr[k] = fl_div_le_bound(cs[k], s);
    }
    return true;
}

template <LwtDType T>
HWY_INLINE VU EncodeBounded(DF df, VF v, const float *thr) {
    const DU du;
    const DI di;
    const VF a = hn::Abs(v);
    const VU neg = hn::ShiftRight<31>(hn::BitCast(du, v));
    if constexpr (T == LwtDType::TERNARY) {  // 0, 1, or -1 = 0b11 (NaN: 0, as the scalar code)
        const auto nz = hn::RebindMask(du, hn::Gt(a, hn::Set(df, thr[0])));
        return hn::IfThenElseZero(nz, hn::Or(hn::Set(du, 1u), hn::Add(neg, neg)));
    } else if constexpr (T == LwtDType::I2) {  // v >= 0: 0 or 1; v < 0: 0, -1 or -2 (two's complement, 2 bits)
        const VU m1 = hn::IfThenElseZero(hn::RebindMask(du, hn::Gt(a, hn::Set(df, thr[0]))), hn::Set(du, 1u));
        const VU m2 = hn::IfThenElseZero(hn::RebindMask(du, hn::Gt(a, hn::Set(df, thr[1]))), hn::Set(du, 1u));
        const VU mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(neg, hn::Zero(du))), m1, hn::Add(m1, m2));
        const VU sign_mask = hn::Sub(hn::Zero(du), neg);                               // all ones for v < 0
        return hn::And(hn::Sub(hn::Xor(mag, sign_mask), sign_mask), hn::Set(du, 3u));  // -mag for v < 0
    } else {  // FP4: 7 minus the boundaries |v| lies at or below, by a 3-step search (NaN, inf: 7)
        // thr[0] > thr[1] > ... > thr[6]; each step halves the candidates of the index.
        const auto l2 = a <= hn::Set(df, thr[3]);  // index < 4
        const auto l1 = a <= hn::IfThenElse(l2, hn::Set(df, thr[5]), hn::Set(df, thr[1]));
        const VF t0 = hn::IfThenElse(l2, hn::IfThenElse(l1, hn::Set(df, thr[6]), hn::Set(df, thr[4])),
                                     hn::IfThenElse(l1, hn::Set(df, thr[2]), hn::Set(df, thr[0])));
        const auto l0 = a <= t0;
        const VU idx = hn::Or(hn::Or(hn::IfThenZeroElse(hn::RebindMask(du, l2), hn::Set(du, 4u)),
                                     hn::IfThenZeroElse(hn::RebindMask(du, l1), hn::Set(du, 2u))),
                              hn::IfThenZeroElse(hn::RebindMask(du, l0), hn::Set(du, 1u)));
        return hn::Or(idx, hn::ShiftLeft<3>(neg));
    }
}

// One vector of values -> their stored fields (the low Bits(T) bits of each u32 lane).
template <LwtDType T>
HWY_INLINE VU Encode(DF df, VF v, VF scale, VI zero_point) {
    const DU du;
    const DI di;
    if constexpr (T == LwtDType::F16) {
        return F16Bits(df, v);
    } else if constexpr (T == LwtDType::BF16) {
        return Bf16Bits(df, v);
    } else if constexpr (T == LwtDType::I8 || T == LwtDType::I4 || T == LwtDType::I2 || T == LwtDType::TERNARY) {
        constexpr float hi = T == LwtDType::I8 ? 127.0f : T == LwtDType::I4 ? 7.0f : 1.0f;
        constexpr bool ter = T == LwtDType::TERNARY;  // codes -1, 0, 1 (int2 also has -2)
        constexpr float pre_lo = ter ? -2.0f : -hi - 2.0f, pre_hi = ter ? 2.0f : hi + 1.0f, lo = ter ? -1.0f : -hi - 1.0f;
        constexpr uint32_t mask = T == LwtDType::I8 ? 0xFFu : T == LwtDType::I4 ? 0xFu : 0x3u;
        VF x = hn::Min(hn::Max(hn::Div(v, scale), hn::Set(df, pre_lo)), hn::Set(df, pre_hi));
        x = hn::Min(hn::Max(Rne(df, x), hn::Set(df, lo)), hn::Set(df, hi));
        return hn::And(hn::BitCast(du, hn::ConvertTo(di, x)), hn::Set(du, mask));
    } else if constexpr (T == LwtDType::U8 || T == LwtDType::U4 || T == LwtDType::U2) {
        constexpr int32_t umax = T == LwtDType::U8 ? 255 : T == LwtDType::U4 ? 15 : 3;
        VF x = hn::Min(hn::Max(hn::Div(v, scale), hn::Set(df, -float(umax) - 1.0f)), hn::Set(df, float(umax) + 1.0f));
        VI code = hn::Add(hn::ConvertTo(di, Rne(df, x)), zero_point);
        return hn::BitCast(du, hn::Min(hn::Max(code, hn::Zero(di)), hn::Set(di, umax)));
    } else if constexpr (T == LwtDType::FP4) {
        // Nearest E2M1 magnitude index with fp4_index's comparisons (ties to the even index).
        const VF a = hn::Abs(hn::Div(v, scale));
        VI idx = hn::Set(di, 7);  // each true comparison adds -1
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a <= hn::Set(df, 5.0f))));
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a < hn::Set(df, 3.5f))));
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a <= hn::Set(df, 2.5f))));
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a < hn::Set(df, 1.75f))));
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a <= hn::Set(df, 1.25f))));
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a < hn::Set(df, 0.75f))));
        idx = hn::Add(idx, hn::VecFromMask(di, hn::RebindMask(di, a <= hn::Set(df, 0.25f))));
        const VU sign = hn::ShiftLeft<3>(hn::ShiftRight<31>(hn::BitCast(du, v)));
        return hn::Or(hn::BitCast(du, idx), sign);
    } else {  // BINARY
        return hn::IfThenElseZero(hn::RebindMask(du, hn::Gt(v, hn::Zero(df))), hn::Set(du, 1u));
    }
}

// Two vectors of W-bit fields (elements 2j, 2j+1 in adjacent lanes) -> one vector of 2W-bit
// fields, the earlier element in the high bits: lane j = lane 2j << W | lane 2j+1.
template <unsigned W>
HWY_INLINE VU PairUp(DU du, VU first, VU second) {
    const hn::Repartition<uint64_t, DU> d64;
    auto join = [&](VU v) {
        auto w = hn::BitCast(d64, v);  // little-endian: lane 2j in the low half
        return hn::BitCast(du, hn::Or(hn::ShiftLeft<W>(w), hn::ShiftRight<32>(w)));
    };
    return hn::ConcatEven(du, join(second), join(first));
}

// How far ahead the streaming kernels prefetch: a page, so the next page's translation and first
// lines are under way before the loads reach it (the hardware prefetchers stop at 4 KiB pages
// of the mapped checkpoint).  7B binary export, one thread: 2.9 -> 2.5 user-s, 2.1 -> 1.7 sys-s.
constexpr size_t kPrefetchBytes = 4096;
// Prefetch the lines of [p + kPrefetchBytes, p + kPrefetchBytes + bytes) (a hint: never faults;
// the address is computed as an integer, as it may lie past the input's end).
template <class T>
HWY_INLINE void PrefetchAhead(const T *p, size_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p) + kPrefetchBytes;
    for (size_t k = 0; k < bytes; k += 64) hwy::Prefetch(reinterpret_cast<const uint8_t *>(a + k));
}

// N values from f32 (Src = float) or from bf16 bits (Src = uint16_t: widened, exact).
template <class Src>
HWY_INLINE VF LoadValues(DF df, const Src *p) {
    if constexpr (sizeof(Src) == 2) {
        const DU du;
        const hn::Rebind<uint16_t, DU> d16;
        return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
    } else {
        return hn::LoadU(df, p);
    }
}

template <LwtDType T, bool kBounded, class Src>
uint64_t PackWith(const Src *v, uint64_t n, LwtQuant q, const float *bounds, uint8_t *out) {
    float thr[kMaxBounds] = {};  // a local copy: the stores to out cannot alias it
    if constexpr (kBounded) std::memcpy(thr, bounds, sizeof thr);
    const DF df;
    const DU du;
    const DI di;
    const size_t N = hn::Lanes(df);
    const VF scale = hn::Set(df, q.scale);
    const VI zp = hn::Set(di, int32_t(q.zero_point));
    constexpr unsigned b = Bits(T);
    uint64_t i = 0;
    if constexpr (b == 16) {
        const hn::Rebind<uint16_t, DI> d16;
        for (; i + N <= n; i += N) {
            PrefetchAhead(v + i, N * sizeof(Src));
            hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, Encode<T>(df, LoadValues(df, v + i), scale, zp))), d16,
                       reinterpret_cast<uint16_t *>(out + 2 * i));
        }
    } else if constexpr (b == 8) {
        const hn::Rebind<uint8_t, DI> d8;
        for (; i + N <= n; i += N) {
            PrefetchAhead(v + i, N * sizeof(Src));
            hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, Encode<T>(df, LoadValues(df, v + i), scale, zp))), d8, out + i);
        }
    } else {
        // 8 / b vectors of fields -> one vector of bytes (one per u32 lane) -> N bytes.
        const hn::Rebind<uint8_t, DI> d8;
        constexpr unsigned per = 8 / b;
        auto enc = [&](uint64_t at) {
            if constexpr (kBounded) return EncodeBounded<T>(df, LoadValues(df, v + at), thr);
            else return Encode<T>(df, LoadValues(df, v + at), scale, zp);
        };
        for (; i + per * N <= n; i += per * N) {
            PrefetchAhead(v + i, per * N * sizeof(Src));
            VU bytes;
            if constexpr (b == 4) {
                bytes = PairUp<4>(du, enc(i), enc(i + N));
            } else if constexpr (b == 2) {
                VU a = PairUp<2>(du, enc(i), enc(i + N));
                VU c = PairUp<2>(du, enc(i + 2 * N), enc(i + 3 * N));
                bytes = PairUp<4>(du, a, c);
            } else {
                VU a = PairUp<2>(du, PairUp<1>(du, enc(i), enc(i + N)), PairUp<1>(du, enc(i + 2 * N), enc(i + 3 * N)));
                VU c =
                    PairUp<2>(du, PairUp<1>(du, enc(i + 4 * N), enc(i + 5 * N)), PairUp<1>(du, enc(i + 6 * N), enc(i + 7 * N)));
                bytes = PairUp<4>(du, a, c);
            }
            hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, bytes)), d8, out + i / per);
        }
    }
    return i - i % 8;  // whole bytes of every width (i is a multiple of N >= 4 and, below 8 bits, of 8)
}

template <LwtDType T, class Src>
uint64_t PackT(const Src *v, uint64_t n, LwtQuant q, uint8_t *out) {
    if constexpr (UsesBounds(T)) {
        float thr[kMaxBounds];
        if (QuantBounds(T, q.scale, thr)) return PackWith<T, true>(v, n, q, thr, out);
    }
    return PackWith<T, false>(v, n, q, nullptr, out);
}

// f16 bits (low 16 bits of each lane) -> f32, exactly as f16_to_f32.
HWY_INLINE VF F16ToF32(DF df, VU h) {
    const DU du;
    const DI di;
    const VU sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    const VU exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
    const VU man = hn::And(h, hn::Set(du, 0x3FFu));
    const VU normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(man));
    const VU sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, man)), hn::Set(df, 0x1p-24f)));
    const auto man_nz = hn::RebindMask(du, hn::Gt(hn::BitCast(di, man), hn::Zero(di)));
    const VU special =
        hn::Or(hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(man)), hn::IfThenElseZero(man_nz, hn::Set(du, 0x00400000u)));
    VU bits = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Zero(du))), sub, normal);
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Set(du, 0x1Fu))), special, bits);
    return hn::BitCast(df, hn::Or(bits, sign));
}

// Fields of width b (< 8) of elements [first, first + N): lane i holds the byte of element
// first + i shifted so that its field is in the top bits (bits 31..32-b).
template <unsigned b>
HWY_INLINE VU FieldsAtTop(DU du, VU bytes, uint64_t first) {
    constexpr unsigned per = 8 / b, log_per = b == 4 ? 1 : b == 2 ? 2 : 3;
    const VU e = hn::Iota(du, uint32_t(first));
    const VU which = hn::ShiftRight<log_per>(e);
    const VU pos = hn::And(e, hn::Set(du, per - 1));
    const VU shift = hn::Add(hn::Set(du, 24u), hn::Mul(pos, hn::Set(du, b)));
    return hn::TableLookupLanes(bytes, hn::IndicesFromVec(du, which)) << shift;
}

template <LwtDType T>
uint64_t UnpackT(const uint8_t *in, uint64_t n, LwtQuant q, float *out, bool *invalid) {
    const DF df;
    const DU du;
    const DI di;
    const size_t N = hn::Lanes(df);
    const VF scale = hn::Set(df, q.scale);
    const VI zp = hn::Set(di, int32_t(q.zero_point));
    constexpr unsigned b = Bits(T);
    uint64_t i = 0;
    if constexpr (T == LwtDType::F16 || T == LwtDType::BF16) {
        const hn::Rebind<uint16_t, DU> d16;
        for (; i + N <= n; i += N) {
            VU h = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t *>(in + 2 * i)));
            VF f = T == LwtDType::F16 ? F16ToF32(df, h) : hn::BitCast(df, hn::ShiftLeft<16>(h));
            hn::StoreU(f, df, out + i);
        }
    } else if constexpr (T == LwtDType::I8) {
        const hn::Rebind<int8_t, DI> d8;
        for (; i + N <= n; i += N)
            hn::StoreU(
                hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t *>(in + i)))), scale), df,
                out + i);
    } else if constexpr (T == LwtDType::U8) {
        const hn::Rebind<uint8_t, DI> d8;
        for (; i + N <= n; i += N)
            hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::Sub(hn::PromoteTo(di, hn::LoadU(d8, in + i)), zp)), scale), df, out + i);
    } else {
        constexpr unsigned per = 8 / b;
        const hn::Rebind<uint8_t, DU> d8;
        auto bad = hn::MaskFromVec(hn::Zero(di));
        for (; i + per * N <= n; i += per * N) {
            // N bytes hold per * N elements; output vector k covers elements [k N, (k + 1) N).
            const VU bytes = hn::PromoteTo(du, hn::LoadU(d8, in + i / per));
            for (unsigned k = 0; k < per; k++) {
                const VU top = FieldsAtTop<b>(du, bytes, uint64_t(k) * N);
                VF f;
                if constexpr (T == LwtDType::I4 || T == LwtDType::I2 || T == LwtDType::TERNARY) {
                    const VI code = hn::ShiftRight<32 - b>(hn::BitCast(di, top));  // sign-extends
                    if constexpr (T == LwtDType::TERNARY) bad = hn::Or(bad, hn::Eq(code, hn::Set(di, -2)));
                    f = hn::Mul(hn::ConvertTo(df, code), scale);
                } else if constexpr (T == LwtDType::U4 || T == LwtDType::U2) {
                    const VI code = hn::BitCast(di, hn::ShiftRight<32 - b>(top));
                    f = hn::Mul(hn::ConvertTo(df, hn::Sub(code, zp)), scale);
                } else if constexpr (T == LwtDType::FP4) {
                    const VU field = hn::ShiftRight<28>(top);
                    const VU e = hn::And(hn::ShiftRight<1>(field), hn::Set(du, 3u));
                    const VU m = hn::And(field, hn::Set(du, 1u));
                    // E2M1 magnitude: e > 0: 2^(e-1) (1 + m/2); e == 0: m / 2.
                    const VU normal = hn::Or(hn::ShiftLeft<23>(hn::Add(e, hn::Set(du, 126u))), hn::ShiftLeft<22>(m));
                    const VU subn = hn::IfThenElseZero(hn::RebindMask(du, hn::Eq(m, hn::Set(du, 1u))), hn::Set(du, 0x3F000000u));
                    const VU mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(e, hn::Zero(du))), subn, normal);
                    const VF prod = hn::Mul(hn::BitCast(df, mag), scale);
                    const VU sign = hn::ShiftLeft<28>(hn::And(field, hn::Set(du, 8u)));
                    f = hn::BitCast(df, hn::Xor(hn::BitCast(du, prod), sign));
                } else {  // BINARY: 1 -> +scale, 0 -> -scale
                    const auto one = hn::RebindMask(df, hn::Lt(hn::BitCast(di, top), hn::Zero(di)));
                    f = hn::IfThenElse(one, scale, hn::Neg(scale));
                }
                hn::StoreU(f, df, out + i + uint64_t(k) * N);
            }
        }
        if (!hn::AllFalse(di, bad)) *invalid = true;
    }
    return i - i % 8;
}

#  define STK_LOWBIT_CASES(CALL) \
    STK_LWT_NON_F32_CASES(CALL)  \
    STK_LWT_BLOCK_CASES          \
    case LwtDType::F32:          \
      break;

// The dtype dispatch of packing, from f32 values or from bf16 bits.
template <class Src>
uint64_t PackFrom(LwtDType t, const Src *v, uint64_t n, LwtQuant q, uint8_t *out) {
    switch (t) {
#  define CALL(T) return PackT<T>(v, n, q, out)
        STK_LOWBIT_CASES(CALL)
#  undef CALL
    }
    return 0;
}
uint64_t PackBulk(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out) { return PackFrom(t, v, n, q, out); }
uint64_t PackBf16Bulk(LwtDType t, const uint16_t *v, uint64_t n, LwtQuant q, uint8_t *out) { return PackFrom(t, v, n, q, out); }

uint64_t UnpackBulk(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out, bool *invalid) {
    switch (t) {
#  define CALL(T) return UnpackT<T>(in, n, q, out, invalid)
        STK_LOWBIT_CASES(CALL)
#  undef CALL
    }
    return 0;
}
#  undef STK_LOWBIT_CASES

// The statistics of the quantisation rule (LwtQuantStats) over f32 values or bf16 bits, in one
// read: lo = min(0, v...), hi = max(0, v...), absmax as the largest magnitude's bits (which
// order as the floats do; NaN/Inf when its exponent is all ones) and, when bins is not null,
// the exact sum of |v| that ternary and binary need.
//
// The sum is exact and order-independent.  Values whose exponent lies in a window of
// kStatsWindow exponents [e0, e0 + 16) are multiples of u = 2^(e0 - 150) below 2^39 u:
//   - bf16: the 8-bit significand shifted left by e - e0, summed in 32-bit lanes (a lane stays
//     below 2^8 * 2^15 * 128 = 2^30 over a block of 128 vectors), in units of 2^16 u;
//   - f32: the values themselves, widened to binary64 and summed there: every partial sum is a
//     multiple of u below 2^39 * 2^7 u = 2^46 u over a block, so no addition rounds.
// Each block's total, an integer number of u below 2^55, goes into bins[e0] (its low 24 bits)
// and bins[e0 + 24] (the rest): the same number the one-value-at-a-time entries hold, each
// entry growing by less than 2^25 per value.  Nonzero values outside the window (outliers above
// it, the tail below it, subnormals) are compressed out of their vector and added one at a
// time, each its significand into its exponent's entry (as stats_one in format/lowbit.cc).
//
// The window is where most of the first 1024 values have their exponents (among windows
// holding as many, the highest: trained weights have outliers above their bulk), and moves to
// where most of a block's values lie when an eighth of them fell outside it.  No sample spread
// over the input: its cache misses were a third of a 64 Ki-value call.  The choice of window
// changes the speed, never the number.
//
// bins has LwtQuantStats::kExpBins entries.  Returns how many values it did (whole vectors), or
// UINT64_MAX when one of them is NaN or infinite (bins then meaningless).
constexpr uint32_t kStatsWindow = 16;
template <class Src, bool kAbs>
uint64_t Stats(const Src *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins) {
    constexpr bool kBf16 = sizeof(Src) == 2;
    const DF df;
    const DU du;
    const hn::Half<DF> dh;
    const hn::Rebind<double, hn::Half<DF> > d64;
    const size_t N = hn::Lanes(df);
    const uint64_t bulk = n / N * N;
    if (bulk == 0) return 0;
    auto exponent_of = [&](uint64_t i) -> uint32_t {
        if constexpr (kBf16) return (v[i] >> 7) & 0xFFu;
        else {
            uint32_t x;
            std::memcpy(&x, v + i, 4);
            return (x >> 23) & 0xFFu;
        }
    };
    // The window where most of values [from, from + count) have their exponents.
    auto window_of = [&](uint64_t from, uint64_t count) {
        uint32_t seen[256] = {};
        for (uint64_t i = from; i < from + count; i++) seen[exponent_of(i)]++;
        seen[0] = 0;  // zeros and subnormals go one at a time
        uint32_t in = 0, best = 0, w0 = 1;
        for (uint32_t e = 1; e < 256; e++) {
            in += seen[e] - (e > kStatsWindow ? seen[e - kStatsWindow] : 0);  // window [e - 15, e]
            if (in >= best) best = in, w0 = e >= kStatsWindow ? e - (kStatsWindow - 1) : 1;
        }
        return std::min<uint32_t>(w0, 256 - kStatsWindow);
    };
    uint32_t e0 = 1;
    if constexpr (kAbs) e0 = window_of(0, std::min<uint64_t>(bulk, 1024));
    const VU mag_mask = hn::Set(du, kBf16 ? 0x7FFFu : 0x7FFFFFFFu);
    VU base = hn::Set(du, e0);
    const VU width = hn::Set(du, kStatsWindow), shift_mask = hn::Set(du, kStatsWindow - 1);
    VU maxmag = hn::Zero(du);
    VF vlo = hn::Zero(df), vhi = hn::Zero(df);
    constexpr uint64_t kBlock = 128;
    HWY_ALIGN uint32_t lanes[HWY_MAX_BYTES / 4];
    HWY_ALIGN double lanes64[HWY_MAX_BYTES / 8];
    HWY_ALIGN uint32_t fixed[(kBlock + 1) * (HWY_MAX_BYTES / 4)];  // the values outside the window
    for (uint64_t i = 0; i < bulk;) {
        const uint64_t begin = i, end = std::min<uint64_t>(bulk, i + kBlock * N);
        VU acc = hn::Zero(du);
        auto acc_lo = hn::Zero(d64), acc_hi = hn::Zero(d64);
        size_t n_out = 0;
        for (; i < end; i += N) {
            PrefetchAhead(v + i, N * sizeof(Src));
            VU u;
            if constexpr (kBf16) u = hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint16_t, DU>(), v + i));
            else u = hn::BitCast(du, hn::LoadU(df, v + i));
            const VU mag = hn::And(u, mag_mask);
            maxmag = hn::Max(maxmag, mag);
            const VF x = kBf16 ? hn::BitCast(df, hn::ShiftLeft<16>(u)) : hn::BitCast(df, u);
            vlo = hn::Min(vlo, x);
            vhi = hn::Max(vhi, x);
            if constexpr (kAbs) {
                const VU t = hn::Sub(hn::ShiftRight < kBf16 ? 7 : 23 > (mag), base);  // wraps below e0
                const auto in = hn::Lt(t, width);
                if constexpr (kBf16) {
                    const VU m = hn::IfThenElseZero(in, hn::Or(hn::And(mag, hn::Set(du, 0x7Fu)), hn::Set(du, 0x80u)));
                    acc = hn::Add(acc, hn::Shl(m, hn::And(t, shift_mask)));
                } else {
                    const VF a = hn::BitCast(df, hn::IfThenElseZero(in, mag));
                    acc_lo = hn::Add(acc_lo, hn::PromoteTo(d64, hn::LowerHalf(dh, a)));
                    acc_hi = hn::Add(acc_hi, hn::PromoteTo(d64, hn::UpperHalf(dh, a)));
                }
                const auto out = hn::AndNot(in, hn::Ne(mag, hn::Zero(du)));  // zeros add nothing
                if (!hn::AllFalse(du, out)) {                                // a full store, then keep the compressed lanes
                    hn::StoreU(hn::Compress(mag, out), du, fixed + n_out);
                    n_out += hn::CountTrue(du, out);
                }
            }
        }
        if constexpr (kAbs) {
            uint64_t total = 0;  // in units of 2^(e0 - 150)
            if constexpr (kBf16) {
                hn::Store(acc, du, lanes);
                for (size_t k = 0; k < N; k++) total += uint64_t(lanes[k]) << 16;
            } else {
                const double unit = std::ldexp(1.0, 150 - int(e0));  // exact: integers below 2^53
                for (auto part : {acc_lo, acc_hi}) {
                    hn::Store(part, d64, lanes64);
                    for (size_t k = 0; k < hn::Lanes(d64); k++) total += uint64_t(lanes64[k] * unit);
                }
            }
            bins[e0] += total & 0xFFFFFFu;
            bins[e0 + 24] += total >> 24;
            for (size_t k = 0; k < n_out; k++) {
                const uint32_t x = fixed[k];
                uint32_t e, m;
                if constexpr (kBf16) e = x >> 7, m = (x & 0x7Fu) << 16;
                else e = x >> 23, m = x & 0x7FFFFFu;
                bins[e ? e : 1] += e ? (m | 0x800000u) : m;
            }
            if (n_out * 8 > end - begin) {  // an eighth of the block outside: move the window there
                e0 = window_of(begin, end - begin);
                base = hn::Set(du, e0);
            }
        }
    }
    const uint32_t top = hn::GetLane(hn::MaxOfLanes(du, maxmag));
    if (top >= (kBf16 ? 0x7F80u : 0x7F800000u)) return UINT64_MAX;
    const uint32_t top_bits = kBf16 ? top << 16 : top;
    float a;
    std::memcpy(&a, &top_bits, 4);
    // Exact reductions (max/min), so the lane order does not matter.
    const float l = hn::GetLane(hn::MinOfLanes(df, vlo)), h = hn::GetLane(hn::MaxOfLanes(df, vhi));
    if (a > *absmax) *absmax = a;
    if (l < *lo) *lo = l;
    if (h > *hi) *hi = h;
    return bulk;
}

uint64_t StatsF32Bulk(const float *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins) {
    return bins ? Stats<float, true>(v, n, absmax, lo, hi, bins) : Stats<float, false>(v, n, absmax, lo, hi, nullptr);
}
uint64_t StatsBf16Bulk(const uint16_t *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins) {
    return bins ? Stats<uint16_t, true>(v, n, absmax, lo, hi, bins) : Stats<uint16_t, false>(v, n, absmax, lo, hi, nullptr);
}

// 4 x 4 blocks through 128-bit vectors (every target but scalar has them); rows and columns
// beyond the last whole block are copied one value at a time.
void Transpose4(const float *src, uint64_t ss, uint64_t rows, uint64_t cols, float *dst, uint64_t ds) {
    const hn::Full128<float> d4;
    const uint64_t r4 = rows / 4 * 4, c4 = cols / 4 * 4;
    for (uint64_t r = 0; r < r4; r += 4) {
        const float *s0 = src + r * ss;
        for (uint64_t c = 0; c < c4; c += 4) {
            const auto a = hn::LoadU(d4, s0 + c), b = hn::LoadU(d4, s0 + ss + c);
            const auto e = hn::LoadU(d4, s0 + 2 * ss + c), f = hn::LoadU(d4, s0 + 3 * ss + c);
            const auto ab_lo = hn::InterleaveLower(d4, a, b), ef_lo = hn::InterleaveLower(d4, e, f);  // a0 b0 a1 b1
            const auto ab_hi = hn::InterleaveUpper(d4, a, b), ef_hi = hn::InterleaveUpper(d4, e, f);  // a2 b2 a3 b3
            float *o = dst + c * ds + r;
            hn::StoreU(hn::ConcatLowerLower(d4, ef_lo, ab_lo), d4, o);  // a0 b0 e0 f0
            hn::StoreU(hn::ConcatUpperUpper(d4, ef_lo, ab_lo), d4, o + ds);
            hn::StoreU(hn::ConcatLowerLower(d4, ef_hi, ab_hi), d4, o + 2 * ds);
            hn::StoreU(hn::ConcatUpperUpper(d4, ef_hi, ab_hi), d4, o + 3 * ds);
        }
        for (uint64_t c = c4; c < cols; c++)
            for (uint64_t k = 0; k < 4; k++) dst[c * ds + r + k] = src[(r + k) * ss + c];
    }
    for (uint64_t r = r4; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) dst[c * ds + r] = src[r * ss + c];
}

// 8 x 8 blocks through 256-bit vectors where the target has them (AVX2, AVX-512: 24 shuffles
// for 64 values instead of 32), the rows below the last whole 8-row strip and the columns past
// the last whole block through Transpose4.
void Transpose(const float *src, uint64_t ss, uint64_t rows, uint64_t cols, float *dst, uint64_t ds) {
    uint64_t r8 = 0;
#  if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    const hn::Full256<float> d8;
    const hn::Full256<double> d64;
    r8 = rows / 8 * 8;
    const uint64_t c8 = cols / 8 * 8;
    for (uint64_t r = 0; r < r8; r += 8) {
        const float *s0 = src + r * ss;
        for (uint64_t c = 0; c < c8; c += 8) {
            decltype(hn::Zero(d8)) x[8], t[8];
            for (int k = 0; k < 8; k++) x[k] = hn::LoadU(d8, s0 + k * ss + c);
            for (int k = 0; k < 8; k += 2) {  // per 128-bit half: a0 b0 a1 b1 | a4 b4 a5 b5, and a2 b2 a3 b3 | a6 b6 a7 b7
                t[k] = hn::InterleaveLower(d8, x[k], x[k + 1]);
                t[k + 1] = hn::InterleaveUpper(d8, x[k], x[k + 1]);
            }
            decltype(hn::Zero(d8)) u[8];  // u[j], j < 4: rows 0-3 of columns j | j + 4; u[j + 4]: rows 4-7
            for (int h = 0; h < 2; h++) {
                const auto a = hn::BitCast(d64, t[4 * h]), b = hn::BitCast(d64, t[4 * h + 1]);
                const auto e = hn::BitCast(d64, t[4 * h + 2]), f = hn::BitCast(d64, t[4 * h + 3]);
                u[4 * h + 0] = hn::BitCast(d8, hn::InterleaveLower(d64, a, e));
                u[4 * h + 1] = hn::BitCast(d8, hn::InterleaveUpper(d64, a, e));
                u[4 * h + 2] = hn::BitCast(d8, hn::InterleaveLower(d64, b, f));
                u[4 * h + 3] = hn::BitCast(d8, hn::InterleaveUpper(d64, b, f));
            }
            float *o = dst + c * ds + r;
            for (int j = 0; j < 4; j++) {
                hn::StoreU(hn::ConcatLowerLower(d8, u[j + 4], u[j]), d8, o + j * ds);
                hn::StoreU(hn::ConcatUpperUpper(d8, u[j + 4], u[j]), d8, o + (j + 4) * ds);
            }
        }
        if (c8 < cols) Transpose4(s0 + c8, ss, 8, cols - c8, dst + c8 * ds + r, ds);
    }
#  endif
    if (r8 < rows) Transpose4(src + r8 * ss, ss, rows - r8, cols, dst + r8, ds);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stk::kernels {

HWY_EXPORT(PackBulk);
HWY_EXPORT(PackBf16Bulk);
HWY_EXPORT(UnpackBulk);
HWY_EXPORT(StatsF32Bulk);
HWY_EXPORT(TargetName);
HWY_EXPORT(Transpose);
HWY_EXPORT(StatsBf16Bulk);

uint64_t lwt_stats_bf16_bulk(const uint16_t *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins) {
    return HWY_DYNAMIC_DISPATCH(StatsBf16Bulk)(v, n, absmax, lo, hi, bins);
}

void lwt_transpose_f32(const float *src, uint64_t src_stride, uint64_t rows, uint64_t cols, float *dst, uint64_t dst_stride) {
    HWY_DYNAMIC_DISPATCH(Transpose)(src, src_stride, rows, cols, dst, dst_stride);
}

uint64_t lwt_pack_bulk(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out) {
    return HWY_DYNAMIC_DISPATCH(PackBulk)(t, v, n, q, out);
}

uint64_t lwt_pack_bf16_bulk(LwtDType t, const uint16_t *v, uint64_t n, LwtQuant q, uint8_t *out) {
    return HWY_DYNAMIC_DISPATCH(PackBf16Bulk)(t, v, n, q, out);
}

uint64_t lwt_unpack_bulk(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out, bool *invalid_field) {
    return HWY_DYNAMIC_DISPATCH(UnpackBulk)(t, in, n, q, out, invalid_field);
}

uint64_t lwt_stats_f32_bulk(const float *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins) {
    return HWY_DYNAMIC_DISPATCH(StatsF32Bulk)(v, n, absmax, lo, hi, bins);
}

std::vector<int64_t> lowbit_targets() { return hwy::SupportedAndGeneratedTargets(); }
std::string lowbit_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace stk::kernels
#endif  // HWY_ONCE
