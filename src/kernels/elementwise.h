// Elementwise kernels on Highway (one dynamic dispatch point, this file's .cc).  Every result is
// computed lane by lane without reassociation (no horizontal reductions, no fused multiply-add),
// so the bytes are the same on every SIMD target Highway picks and on the scalar fallback.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk::kernels {

// acc[j] += double(x[j])^2 for j < n (the column sums of squares of a row-major matrix, one row
// at a time: each acc[j] is summed in row order, a fixed order).
void accumulate_squares(const float *x, double *acc, size_t n);

// out[j] = float(x[j]) for j < n (round to nearest even).
void narrow_to_f32(const double *x, float *out, size_t n);

// out[j] = double(x[j]) for j < n (exact).
void widen_to_f64(const float *x, double *out, size_t n);

// out[j] = float(x[j] * sqrt(d[j])) for j < n (sqrt and product correctly rounded in double,
// then rounded to nearest even): prf_W's row of 5.3.
void scale_by_sqrt_to_f32(const double *x, const double *d, float *out, size_t n);

// sum_j double(x[j])^2 in a fixed order independent of the SIMD target: eight partial sums
// (j mod 8, each in index order), then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
double sum_squares_f32(const float *x, size_t n);

// One tile of kernels/moments.h's causal pair Gram: for the entries (a, b) = (a0 + r, b0 + j),
// r < ra, j < cb, over every row t of x (rows x d, double) in order, starting from S = M = 0,
//   S += x_t[a] x_t[b];   M += ((w[t] x_t[a]) x_t[b]) S
// (S after the row's update: the pair s = t is in); M into m_out[ra][cb] row-major.
void causal_pair_tile(const double *x, size_t rows, size_t d, const double *w, size_t a0, size_t ra, size_t b0, size_t cb,
                      double *m_out);

// True if every x[j] is finite.
bool all_finite(const double *x, size_t n);

// The index of the first x[j] that is NaN or infinite (its exponent bits all ones), n if none.
size_t first_nonfinite_f32(const float *x, size_t n);

// The OR of the low 16 bits of every x[j]'s bits: 0 when every value is exact in bfloat16.
uint32_t or_low16_f32(const float *x, size_t n);

}  // namespace stk::kernels
