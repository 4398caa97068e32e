// Highway kernels of elementwise.h.  Static dispatch (HWY_STATIC_TARGET: the best target the
// compiler flags allow); every operation is per lane and unfused, so the bytes do not depend on
// the target.
#include "kernels/elementwise.h"

#include <hwy/highway.h>

#include <cmath>

namespace stk::kernels {

namespace hn = hwy::HWY_NAMESPACE;

void accumulate_squares(const float *x, double *acc, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;  // half-width float vector, one lane per double
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) {
        auto v = hn::PromoteTo(dd, hn::LoadU(df, x + j));
        auto sq = hn::Mul(v, v);  // not MulAdd: fused on some targets only
        hn::StoreU(hn::Add(hn::LoadU(dd, acc + j), sq), dd, acc + j);
    }
    for (; j < n; j++) {
        double v = double(x[j]);
        double sq = v * v;
        acc[j] = acc[j] + sq;
    }
}

void narrow_to_f32(const double *x, float *out, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) hn::StoreU(hn::DemoteTo(df, hn::LoadU(dd, x + j)), df, out + j);
    for (; j < n; j++) out[j] = float(x[j]);
}

void widen_to_f64(const float *x, double *out, size_t n) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;
    const size_t N = hn::Lanes(dd);
    size_t j = 0;
    for (; j + N <= n; j += N) hn::StoreU(hn::PromoteTo(dd, hn::LoadU(df, x + j)), dd, out + j);
    for (; j < n; j++) out[j] = double(x[j]);
}

void scale_by_sqrt_to_f32(const double *x, const double *d, float *out, size_t n) {
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

double sum_squares_f32(const float *x, size_t n) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t j = 0;
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

bool all_finite(const double *x, size_t n) {
    for (size_t j = 0; j < n; j++)
        if (!std::isfinite(x[j])) return false;
    return true;
}

}  // namespace stk::kernels
