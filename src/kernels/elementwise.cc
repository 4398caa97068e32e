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

#include <cmath>
#include <cstdint>
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
        for (size_t v = 0; v < kV; v++) acc[v] = hn::Zero(dd);
        for (; j + 8 <= n; j += 8)
            for (size_t v = 0; v < kV; v++) {
                auto e = hn::PromoteTo(dd, hn::LoadU(df, x + j + v * kL));
                acc[v] = hn::Add(acc[v], hn::Mul(e, e));
            }
        for (size_t v = 0; v < kV; v++) hn::StoreU(acc[v], dd, s + v * kL);
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

// The dot products of elementwise.h: the same eight partial sums as SumSquaresImpl (lane l of
// vector v is partial sum v * L + l), in float, each product rounded before its add.
template <class D, class Widen>
HWY_INLINE void DotLanes(D df, const float *x, size_t n, Widen widen, float *s, size_t *done) {
    constexpr size_t kL = HWY_LANES(float) < 8 ? HWY_LANES(float) : 8;
    constexpr size_t kV = 8 / kL;
    size_t j = 0;
    if (hn::Lanes(df) == kL) {
        hn::Vec<D> acc[kV];
        for (size_t v = 0; v < kV; v++) acc[v] = hn::Zero(df);
        for (; j + 8 <= n; j += 8)
            for (size_t v = 0; v < kV; v++) acc[v] = hn::Add(acc[v], hn::Mul(widen(j + v * kL), hn::LoadU(df, x + j + v * kL)));
        for (size_t v = 0; v < kV; v++) hn::StoreU(acc[v], df, s + v * kL);
    }
    *done = j;
}

float DotF32Impl(const float *w, const float *x, size_t n) {
    constexpr size_t kL = HWY_LANES(float) < 8 ? HWY_LANES(float) : 8;
    const hn::CappedTag<float, kL> df;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t j = 0;
    DotLanes(df, x, n, [&](size_t at) { return hn::LoadU(df, w + at); }, s, &j);
    for (; j < n; j++) {
        float p = w[j] * x[j];
        s[j & 7] = s[j & 7] + p;
    }
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

// Rows r0 .. r0 + rows of a bf16 matrix (row stride `stride` elements) dotted with x, four rows
// at a time so four independent sums are in flight; each row's sum is DotF32Impl's order.
void DotBf16RowsImpl(const uint16_t *w, size_t stride, size_t rows, const float *x, size_t n, float *out) {
    constexpr size_t kL = HWY_LANES(float) < 8 ? HWY_LANES(float) : 8;
    constexpr size_t kV = 8 / kL;
    const hn::CappedTag<float, kL> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::Rebind<uint16_t, decltype(df)> d16;
    auto widen = [&](const uint16_t *p) { return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p)))); };
    auto finish = [&](const uint16_t *row, float *s, size_t j) {
        for (; j < n; j++) {
            uint32_t u = uint32_t(row[j]) << 16;
            float f;
            std::memcpy(&f, &u, 4);
            float p = f * x[j];
            s[j & 7] = s[j & 7] + p;
        }
        return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    };
    size_t r = 0;
    if (hn::Lanes(df) == kL) {
        for (; r + 4 <= rows; r += 4) {
            const uint16_t *w0 = w + r * stride, *w1 = w0 + stride, *w2 = w1 + stride, *w3 = w2 + stride;
            hn::Vec<decltype(df)> a0[kV], a1[kV], a2[kV], a3[kV];
            for (size_t v = 0; v < kV; v++) a0[v] = a1[v] = a2[v] = a3[v] = hn::Zero(df);
            size_t j = 0;
            for (; j + 8 <= n; j += 8)
                for (size_t v = 0; v < kV; v++) {
                    const size_t at = j + v * kL;
                    const auto xv = hn::LoadU(df, x + at);
                    a0[v] = hn::Add(a0[v], hn::Mul(widen(w0 + at), xv));
                    a1[v] = hn::Add(a1[v], hn::Mul(widen(w1 + at), xv));
                    a2[v] = hn::Add(a2[v], hn::Mul(widen(w2 + at), xv));
                    a3[v] = hn::Add(a3[v], hn::Mul(widen(w3 + at), xv));
                }
            float s[4][8];
            for (size_t v = 0; v < kV; v++) {
                hn::StoreU(a0[v], df, s[0] + v * kL);
                hn::StoreU(a1[v], df, s[1] + v * kL);
                hn::StoreU(a2[v], df, s[2] + v * kL);
                hn::StoreU(a3[v], df, s[3] + v * kL);
            }
            for (size_t k = 0; k < 4; k++) out[r + k] = finish(w + (r + k) * stride, s[k], j);
        }
    }
    for (; r < rows; r++) {
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t j = 0;
        DotLanes(df, x, n, [&](size_t at) { return widen(w + r * stride + at); }, s, &j);
        out[r] = finish(w + r * stride, s, j);
    }
}

float DotI8Impl(const int8_t *w, const float *x, size_t n, float scale) {
    constexpr size_t kL = HWY_LANES(float) < 8 ? HWY_LANES(float) : 8;
    const hn::CappedTag<float, kL> df;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<int8_t, decltype(df)> d8;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t j = 0;
    DotLanes(df, x, n, [&](size_t at) { return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, w + at))); }, s, &j);
    for (; j < n; j++) {
        float p = float(w[j]) * x[j];
        s[j & 7] = s[j & 7] + p;
    }
    for (float &a : s) a = a * scale;
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
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
HWY_EXPORT(DotF32Impl);
HWY_EXPORT(DotBf16RowsImpl);
HWY_EXPORT(DotI8Impl);

void accumulate_squares(const float *x, double *acc, size_t n) { HWY_DYNAMIC_DISPATCH(AccumulateSquaresImpl)(x, acc, n); }
void narrow_to_f32(const double *x, float *out, size_t n) { HWY_DYNAMIC_DISPATCH(NarrowImpl)(x, out, n); }
void widen_to_f64(const float *x, double *out, size_t n) { HWY_DYNAMIC_DISPATCH(WidenImpl)(x, out, n); }
void scale_by_sqrt_to_f32(const double *x, const double *d, float *out, size_t n) {
    HWY_DYNAMIC_DISPATCH(ScaleBySqrtImpl)(x, d, out, n);
}
double sum_squares_f32(const float *x, size_t n) { return HWY_DYNAMIC_DISPATCH(SumSquaresImpl)(x, n); }
float dot_f32(const float *w, const float *x, size_t n) { return HWY_DYNAMIC_DISPATCH(DotF32Impl)(w, x, n); }
void dot_bf16_rows(const uint16_t *w, size_t stride, size_t rows, const float *x, size_t n, float *out) {
    HWY_DYNAMIC_DISPATCH(DotBf16RowsImpl)(w, stride, rows, x, n, out);
}
float dot_i8(const int8_t *w, const float *x, size_t n, float scale) { return HWY_DYNAMIC_DISPATCH(DotI8Impl)(w, x, n, scale); }

bool all_finite(const double *x, size_t n) {
    for (size_t j = 0; j < n; j++)
        if (!std::isfinite(x[j])) return false;
    return true;
}

}  // namespace stk::kernels
#endif  // HWY_ONCE
