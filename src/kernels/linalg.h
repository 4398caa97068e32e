// Dense linear algebra for the numeric stages: the only place that calls BLIS (GEMM) and LAPACK
// (Householder QR with a non-negative R diagonal, symmetric eigenvalues, least squares, the
// eigenvalues of a general matrix).  docs/decisions.md, "Kernels", says why these libraries.
//
// Every function validates its arguments before the library sees them (BLIS and LAPACKE abort
// or print on bad arguments) and throws stk::Error (STK_E_INVALID_ARGUMENT / STK_E_INTERNAL)
// instead.  Matrices are double; LAPACK routines take column-major storage (the LAPACKE
// row-major wrappers allocate transposed copies: we never use them, so nothing here allocates
// except inside BLIS's packing, which this Debian build does not pool).  Workspace comes from
// the caller (the job's arena): ask the *_workspace() function first.
//
// Determinism: BLIS splits only the m and n dimensions across threads, never k, so every
// element of C is the same sum in the same order at any thread count (tests/test_kernels.cc
// checks the bytes at 1 and 2 threads).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk::kernels {

// C = alpha * op(A) * op(B) + beta * C with explicit row and column strides (in elements), as
// BLIS's typed API takes them: op(A) is m x k, op(B) is k x n, C is m x n.  trans_a / trans_b
// transpose A / B first.  `threads` sets the rntm_t of this call only (no global state).
void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, double alpha, const double *a, ptrdiff_t rs_a, ptrdiff_t cs_a,
          const double *b, ptrdiff_t rs_b, ptrdiff_t cs_b, double beta, double *c, ptrdiff_t rs_c, ptrdiff_t cs_c,
          unsigned threads);
// The same in single precision (BLIS sgemm): overlays' sketch passes over a layer's W_O.
void sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a,
           const float *b, ptrdiff_t rs_b, ptrdiff_t cs_b, float beta, float *c, ptrdiff_t rs_c, ptrdiff_t cs_c,
           unsigned threads);
// The upper triangle (j >= i) of C = alpha * A^T A + beta * C for A k x n (BLIS ssyrk; C n x n,
// its lower triangle untouched): the calibration moments' Gram matrices (kernels/moments.h).
void ssyrk_upper_at_a(size_t n, size_t k, float alpha, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, float beta, float *c,
                      ptrdiff_t rs_c, ptrdiff_t cs_c, unsigned threads);

// Doubles of workspace orthonormalize_columns(m, n) needs (tau and LAPACK's work array).
size_t qr_workspace(size_t m, size_t n);
// Replace the m x n column-major A (lda >= m, m >= n >= 1) by the Q of its Householder QR,
// A = Q R with R's diagonal non-negative (LAPACK dgeqrfp + dorgqr: seed 10.3's sign
// convention, which makes Q unique for a full-rank A).
void orthonormalize_columns(size_t m, size_t n, double *a, size_t lda, double *work, size_t work_len);
// max |Q^T Q - I| over the n x n entries (plain double loops).
double orthonormality_error(size_t m, size_t n, const double *q, size_t ldq);

// Doubles of workspace symmetric_eigenvalues(n) needs.
size_t sym_eig_workspace(size_t n);
// Eigenvalues of the symmetric n x n column-major A (lower triangle read), in ascending order
// into w[n] (LAPACK dsyev).  With vectors, A is replaced by the orthonormal eigenvectors (column
// i belongs to w[i]); without, A is destroyed.
void symmetric_eigen(size_t n, double *a, size_t lda, double *w, bool vectors, double *work, size_t work_len);

// Doubles of workspace general_eigenvalues(n) needs.
size_t gen_eig_workspace(size_t n);
// Eigenvalues wr + i wi of the general n x n column-major A (destroyed) (LAPACK dgeev, values
// only).  Used for the roots of a polynomial through its companion matrix.
void general_eigenvalues(size_t n, double *a, size_t lda, double *wr, double *wi, double *work, size_t work_len);

// Doubles of workspace least_squares(m, n) needs.
size_t lstsq_workspace(size_t m, size_t n);
// min |A x - b|_2 for the m x n column-major A of full column rank, m >= n (LAPACK dgels, QR):
// A is destroyed, b[m] is overwritten, x[0..n) = b[0..n) on return.
void least_squares(size_t m, size_t n, double *a, size_t lda, double *b, double *work, size_t work_len);

}  // namespace stk::kernels
