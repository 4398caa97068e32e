// Reference BLAS's DSYMV, DSYR2K and DGEMV, bit for bit, vectorised.
//
// Why: LAPACK's dsyev (overlays_build's exact optimum, kernels/linalg.h) spends most of its time
// in the tridiagonal reduction's dsymv, dsyr2k and dgemv, which Debian's reference BLAS runs one scalar
// chain at a time.  The numeric mode (docs/decisions.md) wants reference BLAS's bits on every
// CPU, so a tuned BLAS (BLIS, OpenBLAS: other summation orders, fused multiply-adds) cannot
// replace them.  These definitions do every floating-point operation of the reference routines,
// per output element in the reference's order, unfused; only the schedule differs (several
// columns' chains interleaved, rows in vector lanes).  The linker takes them instead of the
// reference archive's (they are defined before LAPACK asks for them: see linalg.cc's anchor).
// tests/test_ref_blas.cc compares them bit for bit with the reference shared library.
#pragma once

#include <cstddef>

extern "C" {
// Fortran's calling convention (gfortran): every argument by reference, each CHARACTER
// argument's length appended as a size_t.
void dsymv_(const char *uplo, const int *n, const double *alpha, const double *a, const int *lda, const double *x,
            const int *incx, const double *beta, double *y, const int *incy, size_t uplo_len);
void dsyr2k_(const char *uplo, const char *trans, const int *n, const int *k, const double *alpha, const double *a,
             const int *lda, const double *b, const int *ldb, const double *beta, double *c, const int *ldc,
             size_t uplo_len, size_t trans_len);
void dgemv_(const char *trans, const int *m, const int *n, const double *alpha, const double *a, const int *lda,
            const double *x, const int *incx, const double *beta, double *y, const int *incy, size_t trans_len);
}
