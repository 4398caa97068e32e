// GEMM of linalg.h on BLIS's typed expert API, in the pinned context of blis_pinned.h.
#include <climits>
#include <mutex>

#include "core/error.h"
#include "kernels/blis_pinned.h"
#include "kernels/linalg.h"
#include "kernels/numeric_mode.h"

// Not in blis.h (the configuration's init functions are internal): it fills a context with the
// haswell configuration's kernels and blocksizes.  Our libblis is the static one, so it links.
extern "C" void bli_cntx_init_haswell(cntx_t *cntx);

namespace stk::kernels {

cntx_t *pinned_blis_context() {
    static cntx_t cntx;
    static std::once_flag once;
    // Checked once: stk_open refuses first; this guards the library's other GEMM users (the LM
    // runtime).  A throw leaves the flag unset, so the next call checks again.
    std::call_once(once, [] {
        require_numeric_mode();
        bli_init();
        bli_cntx_init_haswell(&cntx);
    });
    return &cntx;
}

namespace {
void check_dim(size_t v, const char *what) {
    if (v > size_t(INT_MAX) / 128) throw_error(STK_E_INVALID_ARGUMENT, "linalg: %s = %zu is too large", what, v);
}

void check_gemm(size_t m, size_t n, size_t k, const void *a, const void *b, const void *c, ptrdiff_t rs_a, ptrdiff_t cs_a,
                ptrdiff_t rs_b, ptrdiff_t cs_b, ptrdiff_t rs_c, ptrdiff_t cs_c, unsigned threads) {
    check_dim(m, "m");
    check_dim(n, "n");
    check_dim(k, "k");
    if (!c || (k && (!a || !b))) throw_error(STK_E_INVALID_ARGUMENT, "linalg: gemm with a null matrix");
    // BLIS requires one unit stride per matrix (or general strides); a zero or negative stride
    // is an error we report rather than let BLIS abort on.
    if (rs_a <= 0 || cs_a <= 0 || rs_b <= 0 || cs_b <= 0 || rs_c <= 0 || cs_c <= 0)
        throw_error(STK_E_INVALID_ARGUMENT, "linalg: gemm strides must be positive");
    if (threads == 0 || threads > 1024) throw_error(STK_E_INVALID_ARGUMENT, "linalg: gemm threads = %u", threads);
}

// Both precisions through one body: validate (BLIS aborts on bad arguments), size a runtime
// object with the job's threads, call the typed expert API (bli_dgemm_ex / bli_sgemm_ex).
template <class T>
void blis_gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, T alpha, const T *a, ptrdiff_t rs_a, ptrdiff_t cs_a,
               const T *b, ptrdiff_t rs_b, ptrdiff_t cs_b, T beta, T *c, ptrdiff_t rs_c, ptrdiff_t cs_c, unsigned threads) {
    if (m == 0 || n == 0) {
        check_dim(m, "m");
        check_dim(n, "n");
        return;
    }
    check_gemm(m, n, k, a, b, c, rs_a, cs_a, rs_b, cs_b, rs_c, cs_c, threads);
    cntx_t *cntx = pinned_blis_context();
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(dim_t(threads), &rntm);
    const trans_t ta = trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb = trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    T al = alpha, be = beta;
    if constexpr (sizeof(T) == sizeof(double))
        bli_dgemm_ex(ta, tb, dim_t(m), dim_t(n), dim_t(k), &al, const_cast<T *>(a), inc_t(rs_a), inc_t(cs_a), const_cast<T *>(b),
                     inc_t(rs_b), inc_t(cs_b), &be, c, inc_t(rs_c), inc_t(cs_c), cntx, &rntm);
    else
        bli_sgemm_ex(ta, tb, dim_t(m), dim_t(n), dim_t(k), &al, const_cast<T *>(a), inc_t(rs_a), inc_t(cs_a), const_cast<T *>(b),
                     inc_t(rs_b), inc_t(cs_b), &be, c, inc_t(rs_c), inc_t(cs_c), cntx, &rntm);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, double alpha, const double *a, ptrdiff_t rs_a, ptrdiff_t cs_a,
          const double *b, ptrdiff_t rs_b, ptrdiff_t cs_b, double beta, double *c, ptrdiff_t rs_c, ptrdiff_t cs_c,
          unsigned threads) {
    blis_gemm(trans_a, trans_b, m, n, k, alpha, a, rs_a, cs_a, b, rs_b, cs_b, beta, c, rs_c, cs_c, threads);
}

void sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a,
           const float *b, ptrdiff_t rs_b, ptrdiff_t cs_b, float beta, float *c, ptrdiff_t rs_c, ptrdiff_t cs_c,
           unsigned threads) {
    blis_gemm(trans_a, trans_b, m, n, k, alpha, a, rs_a, cs_a, b, rs_b, cs_b, beta, c, rs_c, cs_c, threads);
}

void ssyrk_upper_at_a(size_t n, size_t k, float alpha, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, float beta, float *c,
                      ptrdiff_t rs_c, ptrdiff_t cs_c, unsigned threads) {
    if (n == 0) return;
    // the same checks as a GEMM of op(A) = A^T (n x k) by A (k x n) into C (n x n)
    check_gemm(n, n, k, a, a, c, rs_a, cs_a, rs_a, cs_a, rs_c, cs_c, threads);
    cntx_t *cntx = pinned_blis_context();
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(dim_t(threads), &rntm);
    float al = alpha, be = beta;
    // BLIS's syrk is C = alpha op(A) op(A)^T + beta C with op(A) m x k: op(A) = A^T here.
    bli_ssyrk_ex(BLIS_UPPER, BLIS_TRANSPOSE, dim_t(n), dim_t(k), &al, const_cast<float *>(a), inc_t(rs_a), inc_t(cs_a), &be, c,
                 inc_t(rs_c), inc_t(cs_c), cntx, &rntm);
}

}  // namespace stk::kernels
