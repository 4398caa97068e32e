// LAPACK behind validated, allocation-free calls (see linalg.h); GEMM (BLIS) is in gemm.cc, as
// blis.h and lapack.h declare the BLAS helper lsame_ differently and cannot share a file.
#include "kernels/linalg.h"

#include <lapacke.h>

#include <climits>
#include <cmath>

#include "core/error.h"
#include "kernels/ref_blas.h"

// dsyev's tridiagonal reduction calls dsymv_, dsyr2k_ and dgemv_: this reference pulls ref_blas.cc's
// bit-exact definitions out of a static libstk before the linker searches LAPACK's archive, which
// would otherwise take the reference BLAS archive's (same bits, slower).
[[gnu::used]] static void *const kRefBlasAnchor[] = {reinterpret_cast<void *>(&dsymv_), reinterpret_cast<void *>(&dsyr2k_),
                                                       reinterpret_cast<void *>(&dgemv_)};

namespace stk::kernels {

namespace {

constexpr size_t kBlock = 64;  // LAPACK's block size bound used to size workspaces

void check_dim(size_t v, const char *what) {
    if (v > size_t(INT_MAX) / 128) throw_error(STK_E_INVALID_ARGUMENT, "linalg: %s = %zu is too large", what, v);
}

void check_lapack(lapack_int info, const char *routine) {
    if (info < 0) throw_error(STK_E_INTERNAL, "linalg: %s rejected argument %d", routine, int(-info));
    if (info > 0) throw_error(STK_E_INTERNAL, "linalg: %s did not converge (info %d)", routine, int(info));
}

void check_work(size_t have, size_t need, const char *routine) {
    if (have < need)
        throw_error(STK_E_INVALID_ARGUMENT, "linalg: %s needs %zu doubles of workspace, got %zu", routine, need, have);
}

}  // namespace

size_t qr_workspace(size_t m, size_t n) { return n + kBlock * (n ? n : 1); }

void orthonormalize_columns(size_t m, size_t n, double *a, size_t lda, double *work, size_t work_len) {
    check_dim(m, "m");
    check_dim(n, "n");
    if (n == 0 || m < n || lda < m || !a) throw_error(STK_E_INVALID_ARGUMENT, "linalg: QR of %zu x %zu (lda %zu)", m, n, lda);
    check_work(work_len, qr_workspace(m, n), "dgeqrfp/dorgqr");
    double *tau = work, *w = work + n;
    lapack_int lw = lapack_int(work_len - n);
    check_lapack(LAPACKE_dgeqrfp_work(LAPACK_COL_MAJOR, lapack_int(m), lapack_int(n), a, lapack_int(lda), tau, w, lw), "dgeqrfp");
    check_lapack(
        LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, lapack_int(m), lapack_int(n), lapack_int(n), a, lapack_int(lda), tau, w, lw),
        "dorgqr");
}

double orthonormality_error(size_t m, size_t n, const double *q, size_t ldq) {
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0;
            for (size_t r = 0; r < m; r++) s += q[i * ldq + r] * q[j * ldq + r];
            double e = std::fabs(s - (i == j ? 1.0 : 0.0));
            if (!(e <= worst)) worst = e;  // NaN propagates as "worst"
        }
    return worst;
}

size_t sym_eig_workspace(size_t n) { return (kBlock + 2) * (n ? n : 1); }

void symmetric_eigen(size_t n, double *a, size_t lda, double *w, bool vectors, double *work, size_t work_len) {
    check_dim(n, "n");
    if (n == 0 || lda < n || !a || !w) throw_error(STK_E_INVALID_ARGUMENT, "linalg: eigenvalues of %zu x %zu", n, n);
    check_work(work_len, sym_eig_workspace(n), "dsyev");
    check_lapack(LAPACKE_dsyev_work(LAPACK_COL_MAJOR, vectors ? 'V' : 'N', 'L', lapack_int(n), a, lapack_int(lda), w, work,
                                    lapack_int(work_len)),
                 "dsyev");
}

size_t gen_eig_workspace(size_t n) { return (kBlock + 2) * (n ? n : 1) + 8; }

void general_eigenvalues(size_t n, double *a, size_t lda, double *wr, double *wi, double *work, size_t work_len) {
    check_dim(n, "n");
    if (n == 0 || lda < n || !a || !wr || !wi) throw_error(STK_E_INVALID_ARGUMENT, "linalg: eigenvalues of %zu x %zu", n, n);
    check_work(work_len, gen_eig_workspace(n), "dgeev");
    double dummy = 0;
    check_lapack(LAPACKE_dgeev_work(LAPACK_COL_MAJOR, 'N', 'N', lapack_int(n), a, lapack_int(lda), wr, wi, &dummy, 1, &dummy, 1,
                                    work, lapack_int(work_len)),
                 "dgeev");
}

size_t lstsq_workspace(size_t m, size_t n) { return n + kBlock * (m + n + 1); }

void least_squares(size_t m, size_t n, double *a, size_t lda, double *b, double *work, size_t work_len) {
    check_dim(m, "m");
    check_dim(n, "n");
    if (n == 0 || m < n || lda < m || !a || !b) throw_error(STK_E_INVALID_ARGUMENT, "linalg: least squares %zu x %zu", m, n);
    check_work(work_len, lstsq_workspace(m, n), "dgels");
    check_lapack(LAPACKE_dgels_work(LAPACK_COL_MAJOR, 'N', lapack_int(m), lapack_int(n), 1, a, lapack_int(lda), b, lapack_int(m),
                                    work, lapack_int(work_len)),
                 "dgels");
}

}  // namespace stk::kernels
