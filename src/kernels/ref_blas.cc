// Reference BLAS's DSYMV, DSYR2K and DGEMV, bit for bit (ref_blas.h says why).  The rule that
// keeps the bits: each output element (y(i), c(i,j)) and each running dot product (dsymv's temp2,
// dgemv's temp) sees the reference's operations in the reference's order, each a separately
// rounded IEEE multiply or add (no fused multiply-add: the pragmas below).  Only the schedule of
// independent chains differs: dsymv and dgemv run 8 columns' dot chains at once (transposed into
// lanes of at most 4, one chain per lane), y and c stay in registers across columns or rank
// updates, and rows go in vector lanes (per lane, so the target's lane count does not matter).
// The cases dsytrd uses take the fast paths (dsymv lower with unit strides, dsyr2k lower not
// transposed, dgemv with a unit y or x stride); every other case is the reference's loop.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC optimize("fp-contract=off")
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ref_blas.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "kernels/ref_blas.h"

#ifdef __clang__
#  pragma STDC FP_CONTRACT OFF
#endif

HWY_BEFORE_NAMESPACE();
namespace stk::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// y[i] = y[i] + t[0] cols[0][i] + t[1] cols[1][i] + ... + t[nb-1] cols[nb-1][i], added one column
// at a time in column order (dsymv's updates of the rows below a block of columns, dgemv's y).
void AxpyChainImpl(double *y, size_t len, const double *const *cols, const double *t, size_t nb) {
    const hn::ScalableTag<double> d;
    const size_t N = hn::Lanes(d);
    size_t i = 0;
    for (; i + 2 * N <= len; i += 2 * N) {
        auto v0 = hn::LoadU(d, y + i), v1 = hn::LoadU(d, y + i + N);
        for (size_t k = 0; k < nb; k++) {
            const auto tk = hn::Set(d, t[k]);
            const double *col = cols[k] + i;
            v0 = hn::Add(v0, hn::Mul(tk, hn::LoadU(d, col)));
            v1 = hn::Add(v1, hn::Mul(tk, hn::LoadU(d, col + N)));
        }
        hn::StoreU(v0, d, y + i);
        hn::StoreU(v1, d, y + i + N);
    }
    for (; i < len; i++) {
        double v = y[i];
        for (size_t k = 0; k < nb; k++) v = v + t[k] * cols[k][i];
        y[i] = v;
    }
}

// Eight columns' dot chains, s[k] = s[k] + cols[k][i] x[i] for i in order, and (y not null)
// dsymv's y[i] = y[i] + t[0] cols[0][i] + ... + t[7] cols[7][i] in the same pass.  A chain cannot
// be split between lanes, so each column's N values are transposed into rows of 4 columns
// (StoreInterleaved4) and every chain is one lane of accumulators at most 4 lanes wide, a row
// added at a time: the order of every chain is the reference's whatever N is.
void Chains8Impl(double *y, const double *t, const double *const *cols, const double *x, size_t len, double *s) {
    const hn::CappedTag<double, 4> d;
    const size_t N = hn::Lanes(d), G = 4 / N;  // G vectors hold a row of 4 columns
    using V = decltype(hn::Zero(d));
    HWY_ALIGN double lo[16], hi[16];  // N rows x 4 columns: columns 0-3 and 4-7
    V acc[8];  // acc[g]: columns g N .. g N + N - 1 of 0-3; acc[4 + g]: the same of 4-7
    for (size_t g = 0; g < G; g++) {
        acc[g] = hn::LoadU(d, s + g * N);
        acc[4 + g] = hn::LoadU(d, s + 4 + g * N);
    }
    size_t i = 0;
    for (; i + N <= len; i += N) {
        const V a0 = hn::LoadU(d, cols[0] + i), a1 = hn::LoadU(d, cols[1] + i), a2 = hn::LoadU(d, cols[2] + i),
                a3 = hn::LoadU(d, cols[3] + i), a4 = hn::LoadU(d, cols[4] + i), a5 = hn::LoadU(d, cols[5] + i),
                a6 = hn::LoadU(d, cols[6] + i), a7 = hn::LoadU(d, cols[7] + i);
        if (y) {
            V v = hn::LoadU(d, y + i);
            v = hn::Add(v, hn::Mul(hn::Set(d, t[0]), a0));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[1]), a1));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[2]), a2));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[3]), a3));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[4]), a4));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[5]), a5));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[6]), a6));
            v = hn::Add(v, hn::Mul(hn::Set(d, t[7]), a7));
            hn::StoreU(v, d, y + i);
        }
        hn::StoreInterleaved4(a0, a1, a2, a3, d, lo);
        hn::StoreInterleaved4(a4, a5, a6, a7, d, hi);
        for (size_t r = 0; r < N; r++) {
            const V xr = hn::Set(d, x[i + r]);
            for (size_t g = 0; g < G; g++) {
                acc[g] = hn::Add(acc[g], hn::Mul(hn::LoadU(d, lo + r * 4 + g * N), xr));
                acc[4 + g] = hn::Add(acc[4 + g], hn::Mul(hn::LoadU(d, hi + r * 4 + g * N), xr));
            }
        }
    }
    for (size_t g = 0; g < G; g++) {
        hn::StoreU(acc[g], d, s + g * N);
        hn::StoreU(acc[4 + g], d, s + 4 + g * N);
    }
    for (; i < len; i++) {
        if (y) {
            double v = y[i];
            for (size_t k = 0; k < 8; k++) v = v + t[k] * cols[k][i];
            y[i] = v;
        }
        for (size_t k = 0; k < 8; k++) s[k] = s[k] + cols[k][i] * x[i];
    }
}

// c[i] = (c[i] + a[l lda + i] t1[l]) + b[l ldb + i] t2[l] for l = 0..k-1 in order, skipping the l
// with use[l] == 0 (dsyr2k's rank-2 updates of one column, rows j..n-1).
void Syr2kColumnImpl(double *c, size_t len, const double *a, size_t lda, const double *b, size_t ldb, const double *t1,
                     const double *t2, const uint8_t *use, size_t k) {
    const hn::ScalableTag<double> d;
    const size_t N = hn::Lanes(d);
    size_t i = 0;
    for (; i + 4 * N <= len; i += 4 * N) {
        auto c0 = hn::LoadU(d, c + i), c1 = hn::LoadU(d, c + i + N), c2 = hn::LoadU(d, c + i + 2 * N),
             c3 = hn::LoadU(d, c + i + 3 * N);
        for (size_t l = 0; l < k; l++) {
            if (!use[l]) continue;
            const auto s1 = hn::Set(d, t1[l]), s2 = hn::Set(d, t2[l]);
            const double *al = a + l * lda + i, *bl = b + l * ldb + i;
            c0 = hn::Add(hn::Add(c0, hn::Mul(hn::LoadU(d, al), s1)), hn::Mul(hn::LoadU(d, bl), s2));
            c1 = hn::Add(hn::Add(c1, hn::Mul(hn::LoadU(d, al + N), s1)), hn::Mul(hn::LoadU(d, bl + N), s2));
            c2 = hn::Add(hn::Add(c2, hn::Mul(hn::LoadU(d, al + 2 * N), s1)), hn::Mul(hn::LoadU(d, bl + 2 * N), s2));
            c3 = hn::Add(hn::Add(c3, hn::Mul(hn::LoadU(d, al + 3 * N), s1)), hn::Mul(hn::LoadU(d, bl + 3 * N), s2));
        }
        hn::StoreU(c0, d, c + i);
        hn::StoreU(c1, d, c + i + N);
        hn::StoreU(c2, d, c + i + 2 * N);
        hn::StoreU(c3, d, c + i + 3 * N);
    }
    for (; i + N <= len; i += N) {
        auto c0 = hn::LoadU(d, c + i);
        for (size_t l = 0; l < k; l++)
            if (use[l])
                c0 = hn::Add(hn::Add(c0, hn::Mul(hn::LoadU(d, a + l * lda + i), hn::Set(d, t1[l]))),
                             hn::Mul(hn::LoadU(d, b + l * ldb + i), hn::Set(d, t2[l])));
        hn::StoreU(c0, d, c + i);
    }
    for (; i < len; i++) {
        double v = c[i];
        for (size_t l = 0; l < k; l++)
            if (use[l]) v = v + a[l * lda + i] * t1[l] + b[l * ldb + i] * t2[l];
        c[i] = v;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
extern "C" void xerbla_(const char *srname, const int *info, size_t srname_len);

namespace stk::kernels {

HWY_EXPORT(AxpyChainImpl);
HWY_EXPORT(Syr2kColumnImpl);
HWY_EXPORT(Chains8Impl);

namespace {

bool lsame(const char *c, char upper) { return *c == upper || *c == char(upper - 'A' + 'a'); }

// Fortran's A(I,J) with 1-based I, J.
inline size_t at(int i, int j, size_t ld) { return size_t(i - 1) + size_t(j - 1) * ld; }

// The 1-based index of a strided vector's first element, as the reference sets KX / KY: 1 for a
// positive stride, 1 - (len - 1) inc for a negative one (the vector is walked backwards).
int first_index(int len, int inc) { return inc > 0 ? 1 : 1 - (len - 1) * inc; }

// y := beta y over len elements of a 1-based strided Y, as the reference's first loops (zeros for
// beta 0, not a product: a NaN or infinity already in y does not survive).
void scale_y(double *Y, int len, int ky, int incy, double beta) {
    if (beta == 1.0) return;
    for (int i = 1, iy = ky; i <= len; i++, iy += incy) Y[iy] = beta == 0.0 ? 0.0 : beta * Y[iy];
}

constexpr int kChains = 8;  // columns whose chains run interleaved

// s[k] = s[k] + a[k lda + i] x[i] for i = 0..len-1 in order, for the nb <= kChains columns at a
// (dgemv's transposed temp; with y, dsymv's temp2 and its y updates, t the columns' factors).
void chains(double *y, const double *t, const double *a, size_t lda, const double *x, size_t len, double *s, int nb) {
    const double *cols[kChains];
    for (int k = 0; k < nb; k++) cols[k] = a + size_t(k) * lda;
    if (nb == kChains) {
        HWY_DYNAMIC_DISPATCH(Chains8Impl)(y, t, cols, x, len, s);
        return;
    }
    if (y) HWY_DYNAMIC_DISPATCH(AxpyChainImpl)(y, len, cols, t, size_t(nb));
    for (size_t i = 0; i < len; i++)
        for (int k = 0; k < nb; k++) s[k] = s[k] + cols[k][i] * x[i];
}

// dsymv, lower triangle, unit strides: the reference's loop 100, 8 columns at a time.  For a
// block of columns jb..jb+nb-1: the triangle inside the block in the reference's order, then the
// rows below it (their y updates column by column, the columns' temp2 chains row by row), then
// y(j) + alpha temp2(j).  Each y(i) still receives its column updates in column order and each
// temp2 its rows in row order, so every rounding is the reference's.
void symv_lower_unit(int n, double alpha, const double *a, size_t lda, const double *x, double *y) {
    for (int jb = 0; jb < n; jb += kChains) {
        const int nb = std::min(kChains, n - jb);
        double t1[kChains], t2[kChains];
        for (int k = 0; k < nb; k++) {
            t1[k] = alpha * x[jb + k];
            t2[k] = 0.0;
        }
        for (int k = 0; k < nb; k++) {
            const int j = jb + k;
            const double *col = a + size_t(j) * lda;
            y[j] = y[j] + t1[k] * col[j];
            for (int i = j + 1; i < jb + nb; i++) {
                y[i] = y[i] + t1[k] * col[i];
                t2[k] = t2[k] + col[i] * x[i];
            }
        }
        const int i0 = jb + nb;
        if (i0 < n) {
            chains(y + i0, t1, a + size_t(jb) * lda + size_t(i0), lda, x + i0, size_t(n - i0), t2, nb);
        }
        for (int k = 0; k < nb; k++) y[jb + k] = y[jb + k] + alpha * t2[k];
    }
}

// dgemv, not transposed, unit y stride: the reference's loop 60, 8 columns' updates per pass over
// y.  LAPACK 3.11's dgemv updates y for every column, also where x(j) is zero (older versions
// skipped those; an infinity in such a column then gives NaN here as there).
void gemv_n_unit_y(int m, int n, double alpha, const double *a, size_t lda, const double *X, int kx, int incx, double *y) {
    const double *cols[kChains];
    double t[kChains];
    int nb = 0, jx = kx;
    for (int j = 1; j <= n; j++, jx += incx) {
        t[nb] = alpha * X[jx];
        cols[nb++] = a + size_t(j - 1) * lda;
        if (nb == kChains || j == n) {
            HWY_DYNAMIC_DISPATCH(AxpyChainImpl)(y, size_t(m), cols, t, size_t(nb));
            nb = 0;
        }
    }
}

// dgemv, transposed, unit x stride: the reference's loop 100, 8 columns' dot chains at once.
void gemv_t_unit_x(int m, int n, double alpha, const double *a, size_t lda, const double *x, double *Y, int ky, int incy) {
    int jy = ky;
    for (int jb = 1; jb <= n; jb += kChains) {
        const int nb = std::min(kChains, n - jb + 1);
        double s[kChains] = {};
        chains(nullptr, nullptr, a + size_t(jb - 1) * lda, lda, x, size_t(m), s, nb);
        for (int k = 0; k < nb; k++, jy += incy) Y[jy] = Y[jy] + alpha * s[k];
    }
}

constexpr int kSyr2kChunk = 64;  // rank updates whose coefficients are prepared at once

// dsyr2k, lower triangle, not transposed: the reference's loop 180 after beta, each column's rows
// j..n with all its rank updates applied in l order while they sit in registers.
void syr2k_lower_n(int n, int k, double alpha, const double *a, size_t lda, const double *b, size_t ldb, double *c,
                   size_t ldc) {
    double t1[kSyr2kChunk], t2[kSyr2kChunk];
    uint8_t use[kSyr2kChunk];
    for (int j = 1; j <= n; j++) {
        for (int l0 = 1; l0 <= k; l0 += kSyr2kChunk) {
            const int kc = std::min(kSyr2kChunk, k - l0 + 1);
            for (int q = 0; q < kc; q++) {
                const double ajl = a[at(j, l0 + q, lda)], bjl = b[at(j, l0 + q, ldb)];
                use[q] = (ajl != 0.0) || (bjl != 0.0);
                t1[q] = alpha * bjl;
                t2[q] = alpha * ajl;
            }
            HWY_DYNAMIC_DISPATCH(Syr2kColumnImpl)(c + at(j, j, ldc), size_t(n - j + 1), a + at(j, l0, lda), lda,
                                                  b + at(j, l0, ldb), ldb, t1, t2, use, size_t(kc));
        }
    }
}

}  // namespace
}  // namespace stk::kernels

using stk::kernels::at;
using stk::kernels::first_index;
using stk::kernels::lsame;
using stk::kernels::scale_y;

extern "C" void dsymv_(const char *uplo, const int *n_, const double *alpha_, const double *a, const int *lda_,
                       const double *x, const int *incx_, const double *beta_, double *y, const int *incy_, size_t) {
    const int n = *n_, lda = *lda_, incx = *incx_, incy = *incy_;
    const double alpha = *alpha_, beta = *beta_;
    int info = 0;
    if (!lsame(uplo, 'U') && !lsame(uplo, 'L'))
        info = 1;
    else if (n < 0)
        info = 2;
    else if (lda < std::max(1, n))
        info = 5;
    else if (incx == 0)
        info = 7;
    else if (incy == 0)
        info = 10;
    if (info != 0) {
        xerbla_("DSYMV ", &info, 6);
        return;
    }
    if (n == 0 || (alpha == 0.0 && beta == 1.0)) return;
    const size_t ld = size_t(lda);
    const int kx = first_index(n, incx), ky = first_index(n, incy);
    double *Y = y - 1;  // 1-based, as the reference indexes
    const double *X = x - 1;
    scale_y(Y, n, ky, incy, beta);
    if (alpha == 0.0) return;
    if (lsame(uplo, 'U')) {
        int jx = kx, jy = ky;
        for (int j = 1; j <= n; j++, jx += incx, jy += incy) {
            const double temp1 = alpha * X[jx];
            double temp2 = 0.0;
            int ix = kx, iy = ky;
            for (int i = 1; i <= j - 1; i++, ix += incx, iy += incy) {
                Y[iy] = Y[iy] + temp1 * a[at(i, j, ld)];
                temp2 = temp2 + a[at(i, j, ld)] * X[ix];
            }
            Y[jy] = Y[jy] + temp1 * a[at(j, j, ld)] + alpha * temp2;
        }
    } else if (incx == 1 && incy == 1) {
        stk::kernels::symv_lower_unit(n, alpha, a, ld, x, y);
    } else {
        int jx = kx, jy = ky;
        for (int j = 1; j <= n; j++, jx += incx, jy += incy) {
            const double temp1 = alpha * X[jx];
            double temp2 = 0.0;
            Y[jy] = Y[jy] + temp1 * a[at(j, j, ld)];
            int ix = jx, iy = jy;
            for (int i = j + 1; i <= n; i++) {
                ix += incx;
                iy += incy;
                Y[iy] = Y[iy] + temp1 * a[at(i, j, ld)];
                temp2 = temp2 + a[at(i, j, ld)] * X[ix];
            }
            Y[jy] = Y[jy] + alpha * temp2;
        }
    }
}

extern "C" void dsyr2k_(const char *uplo, const char *trans, const int *n_, const int *k_, const double *alpha_,
                        const double *a, const int *lda_, const double *b, const int *ldb_, const double *beta_, double *c,
                        const int *ldc_, size_t, size_t) {
    const int n = *n_, k = *k_, lda = *lda_, ldb = *ldb_, ldc = *ldc_;
    const double alpha = *alpha_, beta = *beta_;
    const bool notrans = lsame(trans, 'N'), upper = lsame(uplo, 'U');
    const int nrowa = notrans ? n : k;
    int info = 0;
    if (!upper && !lsame(uplo, 'L'))
        info = 1;
    else if (!notrans && !lsame(trans, 'T') && !lsame(trans, 'C'))
        info = 2;
    else if (n < 0)
        info = 3;
    else if (k < 0)
        info = 4;
    else if (lda < std::max(1, nrowa))
        info = 7;
    else if (ldb < std::max(1, nrowa))
        info = 9;
    else if (ldc < std::max(1, n))
        info = 12;
    if (info != 0) {
        xerbla_("DSYR2K", &info, 6);
        return;
    }
    if (n == 0 || ((alpha == 0.0 || k == 0) && beta == 1.0)) return;
    const size_t la = size_t(lda), lb = size_t(ldb), lc = size_t(ldc);
    // The rows of column j that the triangle holds: 1..j (upper) or j..n (lower).
    auto first = [&](int j) { return upper ? 1 : j; };
    auto last = [&](int j) { return upper ? j : n; };
    auto scale = [&](int j) {
        for (int i = first(j); i <= last(j); i++) c[at(i, j, lc)] = beta == 0.0 ? 0.0 : beta * c[at(i, j, lc)];
    };
    if (alpha == 0.0) {
        for (int j = 1; j <= n; j++) scale(j);
        return;
    }
    if (notrans && !upper) {
        for (int j = 1; j <= n; j++)
            if (beta != 1.0) scale(j);
        stk::kernels::syr2k_lower_n(n, k, alpha, a, la, b, lb, c, lc);
    } else if (notrans) {
        for (int j = 1; j <= n; j++) {
            if (beta != 1.0) scale(j);
            for (int l = 1; l <= k; l++) {
                if (a[at(j, l, la)] != 0.0 || b[at(j, l, lb)] != 0.0) {
                    const double temp1 = alpha * b[at(j, l, lb)], temp2 = alpha * a[at(j, l, la)];
                    for (int i = 1; i <= j; i++)
                        c[at(i, j, lc)] = c[at(i, j, lc)] + a[at(i, l, la)] * temp1 + b[at(i, l, lb)] * temp2;
                }
            }
        }
    } else {
        for (int j = 1; j <= n; j++)
            for (int i = first(j); i <= last(j); i++) {
                double temp1 = 0.0, temp2 = 0.0;
                for (int l = 1; l <= k; l++) {
                    temp1 = temp1 + a[at(l, i, la)] * b[at(l, j, lb)];
                    temp2 = temp2 + b[at(l, i, lb)] * a[at(l, j, la)];
                }
                c[at(i, j, lc)] = beta == 0.0 ? alpha * temp1 + alpha * temp2
                                              : beta * c[at(i, j, lc)] + alpha * temp1 + alpha * temp2;
            }
    }
}

extern "C" void dgemv_(const char *trans, const int *m_, const int *n_, const double *alpha_, const double *a,
                       const int *lda_, const double *x, const int *incx_, const double *beta_, double *y, const int *incy_,
                       size_t) {
    const int m = *m_, n = *n_, lda = *lda_, incx = *incx_, incy = *incy_;
    const double alpha = *alpha_, beta = *beta_;
    const bool notrans = lsame(trans, 'N');
    int info = 0;
    if (!notrans && !lsame(trans, 'T') && !lsame(trans, 'C'))
        info = 1;
    else if (m < 0)
        info = 2;
    else if (n < 0)
        info = 3;
    else if (lda < std::max(1, m))
        info = 6;
    else if (incx == 0)
        info = 8;
    else if (incy == 0)
        info = 11;
    if (info != 0) {
        xerbla_("DGEMV ", &info, 6);
        return;
    }
    if (m == 0 || n == 0 || (alpha == 0.0 && beta == 1.0)) return;
    const int lenx = notrans ? n : m, leny = notrans ? m : n;
    const int kx = first_index(lenx, incx), ky = first_index(leny, incy);
    const size_t ld = size_t(lda);
    double *Y = y - 1;
    const double *X = x - 1;
    scale_y(Y, leny, ky, incy, beta);
    if (alpha == 0.0) return;
    if (notrans && incy == 1) {
        stk::kernels::gemv_n_unit_y(m, n, alpha, a, ld, X, kx, incx, y);
    } else if (notrans) {
        int jx = kx;
        for (int j = 1; j <= n; j++, jx += incx) {
            const double temp = alpha * X[jx];
            int iy = ky;
            for (int i = 1; i <= m; i++, iy += incy) Y[iy] = Y[iy] + temp * a[at(i, j, ld)];
        }
    } else if (incx == 1) {
        stk::kernels::gemv_t_unit_x(m, n, alpha, a, ld, x, Y, ky, incy);
    } else {
        int jy = ky;
        for (int j = 1; j <= n; j++, jy += incy) {
            double temp = 0.0;
            int ix = kx;
            for (int i = 1; i <= m; i++, ix += incx) temp = temp + a[at(i, j, ld)] * X[ix];
            Y[jy] = Y[jy] + alpha * temp;
        }
    }
}
#endif  // HWY_ONCE
