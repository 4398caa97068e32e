// Skinny products with one f32 matrix W (m x n, row-major): the range finder's sketch passes of
// overlays_build, Y = W X and X' = W^T Y, where X and Y have a few tens of columns.
//
// Why our own kernel and not BLIS sgemm: with 22 columns BLIS packs the whole of W again on
// every call and runs far below its peak (docs/benchmarks.md, "Attention side"), and its threads
// spin-wait for each other on a loaded machine.  Here W is streamed once per pass, a block of
// rows at a time, and a pass can compute both products from one read of W: a row block W_i
// gives Y_i = W_i X, and X' += W_i^T Y_i while W_i is still in cache (the power iteration's
// A^T (A Q) per read of A).
//
// Layout: X, Y and X' are row-major with a row stride (in floats) that is a multiple of
// kSketchAlign, so that whole vectors can be loaded on any target; columns past the used ones
// are neither read into a used result nor written meaningfully (keep them zero).
//
// Determinism: every result element is a sum in a fixed order whatever the thread count:
// Y[i, c] = sum over j = 0, 1, ... of W[i, j] X[j, c] (one fused multiply-add after the other),
// and X'[j, c] = sum over the kSketchGroups fixed row groups g in order of P_g[j, c], where P_g
// sums its rows in order.  Threads take whole rows (Y) or whole groups (X').  Lanes are columns,
// never a split of a sum, so the bytes do not depend on the SIMD width either; they do depend on
// whether the target has FMA (every x86 target from AVX2 up does; SSE2-SSE4 round twice).
#pragma once

#include <cstddef>

namespace stk::kernels {

constexpr size_t kSketchAlign = 16;  // row strides of X, Y, X' are multiples of this (floats)
constexpr size_t kSketchGroups = 8;  // fixed row groups of the W^T Y reduction

// The smallest valid row stride for `cols` columns.
inline size_t sketch_stride(size_t cols) { return (cols + kSketchAlign - 1) / kSketchAlign * kSketchAlign; }

// Floats of scratch sketch_pass needs for an X' of n rows with row stride ld_xt.
inline size_t sketch_partials_floats(size_t n, size_t ld_xt) { return kSketchGroups * n * ld_xt; }

// One pass over W (m x n, row-major, row stride ld_w):
//  - x != nullptr: Y (m x cy, stride ld_y) = W X, X n x cy (stride ld_x);
//    x == nullptr: Y is an input (m x cy).
//  - xt != nullptr: X' (n x ct, stride ld_xt) = W^T Y[:, 0..ct), ct <= cy, using `partials`
//    (sketch_partials_floats(n, ld_xt) floats).
// Arguments are validated (STK_E_INVALID_ARGUMENT).  `threads` >= 1 std::threads, this call only.
void sketch_pass(const float *w, size_t m, size_t n, size_t ld_w, const float *x, size_t ld_x, size_t cy, float *y, size_t ld_y,
                 size_t ct, float *xt, size_t ld_xt, float *partials, unsigned threads);

// Y (m x c, row stride ld_y, double) = W X for X (n x c, row stride ld_x, double), W's f32
// entries widened exactly: every Y[i, c] the sum over j in order (rows split between threads).
// The captured energy |A U|^2 and the overlays' Z need A U in double.
void sketch_product_f64(const float *w, size_t m, size_t n, size_t ld_w, const double *x, size_t ld_x, size_t c, double *y,
                        size_t ld_y, unsigned threads);

// The target the dispatcher picked (for benches and tests).
const char *sketch_target();

}  // namespace stk::kernels
