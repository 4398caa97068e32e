// Highway kernels of elementwise.h.  This file is compiled once per target
// (hwy/foreach_target.h); the HWY_ONCE part at the end is the one dispatch point
// (HWY_DYNAMIC_DISPATCH: the best target the CPU supports).  Every operation is per lane and
// unfused (no FMA: the pragmas below keep the compiler from contracting a * b + c), with no
// horizontal reduction, so the bytes do not depend on the target (tests/test_kernels.cc runs
// every compiled target the CPU supports).
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC optimize("fp-contract=off")
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/elementwise.h"

#ifdef __clang__
#  pragma STDC FP_CONTRACT OFF
#endif

HWY_BEFORE_NAMESPACE();
namespace stk::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

void AccumulateSquaresImpl(const float *x, double *acc, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;  // half-width float vector, one lane per double
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) {
        auto v = hn::PromoteTo(dd, hn::LoadU(df, x + j));
        auto sq = hn::Mul(v, v);
        hn::StoreU(hn::Add(hn::LoadU(dd, acc + j), sq), dd, acc + j);
    }
    for (; j < n; j++) {
        double v = double(x[j]);
        double sq = v * v;
        acc[j] = acc[j] + sq;
    }
}

void NarrowImpl(const double *x, float *out, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) hn::StoreU(hn::DemoteTo(df, hn::LoadU(dd, x + j)), df, out + j);
    for (; j < n; j++) out[j] = float(x[j]);
}

void WidenImpl(const float *x, double *out, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) hn::StoreU(hn::PromoteTo(dd, hn::LoadU(df, x + j)), dd, out + j);
    for (; j < n; j++) out[j] = double(x[j]);
}

void ScaleBySqrtImpl(const double *x, const double *d, float *out, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) {
        auto v = hn::Mul(hn::LoadU(dd, x + j), hn::Sqrt(hn::LoadU(dd, d + j)));
        hn::StoreU(hn::DemoteTo(df, v), df, out + j);
    }
    for (; j < n; j++) {
        double s = std::sqrt(d[j]);
        double v = x[j] * s;
        out[j] = float(v);
    }
}

// The eight partial sums of elementwise.h as 8 / L vectors of L <= 8 lanes: lane l of vector v
// is partial sum v * L + l, i.e. the elements j = 8 t + v * L + l in order of t.
double SumSquaresImpl(const float *x, size_t n) {
    constexpr size_t kL = HWY_LANES(double) < 8 ? HWY_LANES(double) : 8;
    constexpr size_t kV = 8 / kL;
    const hn::CappedTag<double, kL> dd;
    const hn::Rebind<float, decltype(dd)> df;
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t j = 0;
    if (hn::Lanes(dd) == kL) {
        hn::Vec<decltype(dd)> acc[kV];
        HWY_UNROLL(8) for (size_t v = 0; v < kV; v++) acc[v] = hn::Zero(dd);
        for (; j + 8 <= n; j += 8)
            HWY_UNROLL(8) for (size_t v = 0; v < kV; v++) {
                auto e = hn::PromoteTo(dd, hn::LoadU(df, x + j + v * kL));
                acc[v] = hn::Add(acc[v], hn::Mul(e, e));
            }
        HWY_UNROLL(8) for (size_t v = 0; v < kV; v++) hn::StoreU(acc[v], dd, s + v * kL);
    }
    for (; j + 8 <= n; j += 8)
        for (size_t l = 0; l < 8; l++) {
            double v = double(x[j + l]);
            double sq = v * v;
            s[l] = s[l] + sq;
        }
    for (; j < n; j++) {
        double v = double(x[j]);
        double sq = v * v;
        s[j & 7] = s[j & 7] + sq;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// moments.h's causal pair tile.  Each lane is one (a, b) entry, its running S and M in registers
// while every row t streams past (R rows x 2 vectors at a time); the columns past the last whole
// pair of vectors take the same operations one entry at a time.
// One entry's update for row t: S += xa xb; M += ((w xa) xb) S, unfused.
template <class V>
HWY_INLINE void CausalPairStep(V vxa, V vwxa, V xb, V &s, V &m) {
    s = hn::Add(s, hn::Mul(vxa, xb));
    m = hn::Add(m, hn::Mul(hn::Mul(vwxa, xb), s));
}

// Rows a (and a + 1 when two) by the 2 vectors of columns at b, every row t.
template <bool kTwo, class D>
HWY_INLINE void CausalPairBlock(D dd, const double *x, size_t rows, size_t d, const double *w, size_t a, size_t b,
                                double *m_out, size_t ld) {
    const size_t N = hn::Lanes(dd);
    auto s00 = hn::Zero(dd), s01 = hn::Zero(dd), s10 = hn::Zero(dd), s11 = hn::Zero(dd);
    auto m00 = hn::Zero(dd), m01 = hn::Zero(dd), m10 = hn::Zero(dd), m11 = hn::Zero(dd);
    for (size_t t = 0; t < rows; t++) {
        const double *xt = x + t * d;
        const auto xb0 = hn::LoadU(dd, xt + b), xb1 = hn::LoadU(dd, xt + b + N);
        const double wt = w[t];
        const double xa0 = xt[a];
        const auto vxa0 = hn::Set(dd, xa0), vwxa0 = hn::Set(dd, wt * xa0);
        CausalPairStep(vxa0, vwxa0, xb0, s00, m00);
        CausalPairStep(vxa0, vwxa0, xb1, s01, m01);
        if (kTwo) {
            const double xa1 = xt[a + 1];
            const auto vxa1 = hn::Set(dd, xa1), vwxa1 = hn::Set(dd, wt * xa1);
            CausalPairStep(vxa1, vwxa1, xb0, s10, m10);
            CausalPairStep(vxa1, vwxa1, xb1, s11, m11);
        }
    }
    hn::StoreU(m00, dd, m_out);
    hn::StoreU(m01, dd, m_out + N);
    if (kTwo) {
        hn::StoreU(m10, dd, m_out + ld);
        hn::StoreU(m11, dd, m_out + ld + N);
    }
}

void CausalPairTileImpl(const double *x, size_t rows, size_t d, const double *w, size_t a0, size_t ra, size_t b0, size_t cb,
                        double *m_out) {
    const hn::ScalableTag<double> dd;
    const size_t N = hn::Lanes(dd);
    const size_t whole = cb / (2 * N) * (2 * N);
    for (size_t j = 0; j < whole; j += 2 * N) {
        size_t r = 0;
        for (; r + 2 <= ra; r += 2) CausalPairBlock<true>(dd, x, rows, d, w, a0 + r, b0 + j, m_out + r * cb + j, cb);
        if (r < ra) CausalPairBlock<false>(dd, x, rows, d, w, a0 + r, b0 + j, m_out + r * cb + j, cb);
    }
    for (size_t r = 0; r < ra; r++)
        for (size_t j = whole; j < cb; j++) {
            double s = 0, m = 0;
            for (size_t t = 0; t < rows; t++) {
                const double *xt = x + t * d;
                const double xa = xt[a0 + r], xb = xt[b0 + j];
                const double u = xa * xb;
                s = s + u;
                const double wxa = w[t] * xa;
                const double v = wxa * xb;
                const double vs = v * s;
                m = m + vs;
            }
            m_out[r * cb + j] = m;
        }
}

// Bit tests of f32 values, in integer lanes: a block of kScanBlock values is OR-reduced without
// a branch; only a block that holds a non-finite value is searched one by one.
constexpr size_t kScanBlock = 1024;

size_t FirstNonfiniteImpl(const float *x, size_t n) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const size_t N = hn::Lanes(df);
    const auto exp = hn::Set(du, 0x7F800000u);
    for (size_t i0 = 0; i0 < n; i0 += kScanBlock) {
        const size_t m = std::min(kScanBlock, n - i0);
        auto bad = hn::Zero(du);
        size_t k = 0;
        for (; k + N <= m; k += N) bad = hn::Or(bad, hn::VecFromMask(du, hn::Eq(hn::And(hn::BitCast(du, hn::LoadU(df, x + i0 + k)), exp), exp)));
        bool any = !hn::AllTrue(du, hn::Eq(bad, hn::Zero(du)));
        for (; k < m && !any; k++) any = !std::isfinite(x[i0 + k]);
        if (any)
            for (size_t j = 0; j < m; j++)
                if (!std::isfinite(x[i0 + j])) return i0 + j;
    }
    return n;
}

uint32_t OrLow16Impl(const float *x, size_t n) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const size_t N = hn::Lanes(df);
    const auto low = hn::Set(du, 0xFFFFu);
    auto acc0 = hn::Zero(du), acc1 = hn::Zero(du);
    size_t j = 0;
    for (; j + 2 * N <= n; j += 2 * N) {
        acc0 = hn::Or(acc0, hn::And(hn::BitCast(du, hn::LoadU(df, x + j)), low));
        acc1 = hn::Or(acc1, hn::And(hn::BitCast(du, hn::LoadU(df, x + j + N)), low));
    }
    HWY_ALIGN uint32_t lanes[HWY_LANES(uint32_t)];
    hn::Store(hn::Or(acc0, acc1), du, lanes);
    uint32_t r = 0;
    for (size_t l = 0; l < N; l++) r |= lanes[l];
    for (; j < n; j++) {
        uint32_t b;
        std::memcpy(&b, x + j, 4);
        r |= b & 0xFFFFu;
    }
    return r;
}

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stk::kernels {

HWY_EXPORT(AccumulateSquaresImpl);
HWY_EXPORT(NarrowImpl);
HWY_EXPORT(WidenImpl);
HWY_EXPORT(ScaleBySqrtImpl);
HWY_EXPORT(SumSquaresImpl);
HWY_EXPORT(CausalPairTileImpl);
HWY_EXPORT(FirstNonfiniteImpl);
HWY_EXPORT(OrLow16Impl);

void accumulate_squares(const float *x, double *acc, size_t n) { HWY_DYNAMIC_DISPATCH(AccumulateSquaresImpl)(x, acc, n); }
void narrow_to_f32(const double *x, float *out, size_t n) { HWY_DYNAMIC_DISPATCH(NarrowImpl)(x, out, n); }
void widen_to_f64(const float *x, double *out, size_t n) { HWY_DYNAMIC_DISPATCH(WidenImpl)(x, out, n); }
void scale_by_sqrt_to_f32(const double *x, const double *d, float *out, size_t n) {
    HWY_DYNAMIC_DISPATCH(ScaleBySqrtImpl)(x, d, out, n);
}
double sum_squares_f32(const float *x, size_t n) { return HWY_DYNAMIC_DISPATCH(SumSquaresImpl)(x, n); }

void causal_pair_tile(const double *x, size_t rows, size_t d, const double *w, size_t a0, size_t ra, size_t b0, size_t cb,
                      double *m_out) {
    HWY_DYNAMIC_DISPATCH(CausalPairTileImpl)(x, rows, d, w, a0, ra, b0, cb, m_out);
}

size_t first_nonfinite_f32(const float *x, size_t n) { return HWY_DYNAMIC_DISPATCH(FirstNonfiniteImpl)(x, n); }
uint32_t or_low16_f32(const float *x, size_t n) { return HWY_DYNAMIC_DISPATCH(OrLow16Impl)(x, n); }

bool all_finite(const double *x, size_t n) {
    for (size_t j = 0; j < n; j++)
        if (!std::isfinite(x[j])) return false;
    return true;
}

}  // namespace stk::kernels
#endif  // HWY_ONCE
