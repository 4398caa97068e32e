// The calibration moments `stk calibrate` writes (docs/format.md, "Calibration statistics"):
// float32 activations in, float64 sums out, added into the caller's accumulators.  The GEMMs run
// in the pinned BLIS context and the pair kernel per lane (kernels/elementwise.h), so the sums are
// the same bits at any thread count and on every CPU the numeric mode runs on (numpy's BLAS,
// which computed them before, picks its kernels per CPU).
//
// Precision: a GEMM sums at most kMomentBlock rows in float32, the blocks' sums are added in
// float64 (the accumulators); the pair Gram is float64 throughout (a product of two float32
// values is exact in float64).
#pragma once

#include <cstddef>

namespace stk::kernels {

inline constexpr size_t kMomentBlock = 1024;

// Scratch each call needs, in elements (float32; the pairs' doubles in _f64).  A count that
// overflows or passes kMaxMomentScratch (8 GiB of floats) throws STK_E_INVALID_ARGUMENT.
inline constexpr size_t kMaxMomentScratch = size_t(1) << 31;
size_t moment_gram_scratch(size_t n);
size_t moment_cross_scratch(size_t n, size_t m);
size_t moment_causal_pairs_scratch(size_t rows, size_t d);
size_t moment_causal_pairs_scratch_f64(size_t rows, size_t d);

// acc[i][j] += sum_r a[r][i] a[r][j] for j >= i (acc n x n row-major; the lower triangle is left
// as it is).  a: rows x n, row-major.
void moment_gram(const float *a, size_t rows, size_t n, double *acc, float *scratch, unsigned threads);

// acc[i][j] += sum_r a[r][i] b[r][j] (acc n x m row-major).  a: rows x n, b: rows x m.
void moment_cross(const float *a, const float *b, size_t rows, size_t n, size_t m, double *acc, float *scratch,
                  unsigned threads);

// The PRF pairs' moments, every pair (t, s <= t) of one context weighted by w[t]:
//   l(t, s) = scale * q_t . k_s                          (float32 GEMM)
//   M[a][b] += sum_t w[t] sum_{s<=t} x_t[a] x_s[a] x_t[b] x_s[b]   (b >= a; acc_m d x d row-major)
//   B[a]    += sum_t w[t] x_t[a] sum_{s<=t} l(t, s) x_s[a]          (the inner sum a float32 GEMM)
//   L[0]    += sum_t w[t] sum_{s<=t} l(t, s),  L[1] += the same of l(t, s)^2
// x: rows x d, q and k: rows x dq (row-major).  With w[t] = min(P, t + 1) / (t + 1) this is the
// expectation of the sums over P keys drawn uniformly from 0..t per query (calibration.py).
void moment_causal_pairs(const float *x, const float *q, const float *k, size_t rows, size_t d, size_t dq, double scale,
                         const double *w, double *acc_m, double *acc_b, double *acc_l, float *scratch, double *scratch_f64,
                         unsigned threads);

}  // namespace stk::kernels
