// Row dot products of a matrix-vector product (the LM runtime's decode GEMV), on Highway (one
// dynamic dispatch point, dot.cc).  Every row's dot product has one fixed order, the same on every
// SIMD target, on the scalar fallback and whichever rows are computed together:
//   sixteen partial sums s_l (l = j mod 16), each over j in increasing order, each step the
//   product w[j] * x[j] rounded to f32 and then added (no fused multiply-add), then
//   t_l = s_l + s_(l+8) for l < 8 and y = ((t0 + t4) + (t2 + t6)) + ((t1 + t5) + (t3 + t7)).
// (Sixteen, not eight: two independent chains of vector adds per row, so the add latency does not
// bound a row's stream; docs/benchmarks.md "LM runtime", third round.)
// So a row split over any number of threads gives the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk::kernels {

// y[r] = sum_j f32(w[r * ld + j]) * x[j] for r < rows, j < n (w bfloat16 bits: widened exactly).
void dot_rows_bf16(const uint16_t *w, size_t ld, size_t rows, const float *x, size_t n, float *y);
// The same with f32 weights.
void dot_rows_f32(const float *w, size_t ld, size_t rows, const float *x, size_t n, float *y);

// y[j] = y[j] + a * x[j] for j < n, the product rounded then added (no FMA): elementwise, so the
// same bytes as the scalar loop on every target.
void axpy_f32(float a, const float *x, float *y, size_t n);
// y[j] = y[j] + a[s] * V[s * ldv + j] for s = 0, 1, ..., rows - 1 in that order, j < n: the bytes of
// `rows` calls of axpy_f32, with y kept in registers across the rows (attention's weighted sum of
// values).
void axpy_rows_f32(const float *a, const float *V, size_t ldv, size_t rows, float *y, size_t n);

}  // namespace stk::kernels
