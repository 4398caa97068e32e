// Blocked transform-while-packing GEMM over BLIS (see abs_gemm.h).
#include "kernels/abs_gemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/blis_pinned.h"

namespace stk {

namespace {

// One BLIS call, always single-threaded: our threads own output blocks, BLIS owns none.
void sgemm_block(uint64_t m, uint64_t n, uint64_t k, const float *A, uint64_t rsa, const float *B, uint64_t rsb, float beta,
                 float *C, uint64_t rsc) {
    cntx_t *cntx = kernels::pinned_blis_context();
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(1, &rntm);
    float alpha = 1.0f;
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, dim_t(m), dim_t(n), dim_t(k), &alpha, const_cast<float *>(A), inc_t(rsa),
                 1, const_cast<float *>(B), inc_t(rsb), 1, &beta, C, inc_t(rsc), 1, cntx, &rntm);
}

// Rows [i0, i1) of |A[:, k0 .. k0 + kc)| into out (row stride kc).
void pack_a_abs(const float *A, uint64_t lda, uint64_t i0, uint64_t i1, uint64_t k0, uint64_t kc, float *out) {
    for (uint64_t i = i0; i < i1; i++) {
        const float *src = A + i * lda + k0;
        float *dst = out + i * kc;
        for (uint64_t k = 0; k < kc; k++) dst[k] = std::fabs(src[k]);
    }
}

// dst[j] = f(g[j], u[j]) for j < nc.  Eight at a time in an inner loop of fixed count: GCC's -O2
// cost model vectorizes that one (the plain loop stayed scalar, a branch per element for Pos and
// Neg: pack_b was 3 % of SmolLM2's convert); the same operations per element, so the same bits.
template <class F>
inline void pack_row(float *__restrict dst, const float *__restrict g, const float *__restrict u, uint64_t nc, F f) {
    uint64_t j = 0;
    for (; j + 8 <= nc; j += 8)
        for (uint64_t q = 0; q < 8; q++) dst[j + q] = f(g[j + q], u[j + q]);
    for (; j < nc; j++) dst[j] = f(g[j], u[j]);
}

void pack_b(PackB op, const float *B, const float *B2, uint64_t ldb, uint64_t k0, uint64_t kc, uint64_t j0, uint64_t nc,
            float *out) {
    for (uint64_t k = 0; k < kc; k++) {
        const float *g = B + (k0 + k) * ldb + j0;
        const float *u = B2 ? B2 + (k0 + k) * ldb + j0 : g;  // without B2, u is unused
        float *dst = out + k * nc;
        switch (op) {
            case PackB::Abs:
                if (B2) pack_row(dst, g, u, nc, [](float x, float y) { return std::fabs(x) * std::fabs(y); });
                else pack_row(dst, g, u, nc, [](float x, float) { return std::fabs(x); });
                break;
            case PackB::Pos:
                if (B2) pack_row(dst, g, u, nc, [](float x, float y) { return (x > 0.0f ? x : 0.0f) * y; });
                else pack_row(dst, g, u, nc, [](float x, float) { return x > 0.0f ? x : 0.0f; });
                break;
            case PackB::Neg:
                if (B2) pack_row(dst, g, u, nc, [](float x, float y) { return (x < 0.0f ? -x : 0.0f) * -y; });
                else pack_row(dst, g, u, nc, [](float x, float) { return x < 0.0f ? -x : 0.0f; });
                break;
        }
    }
}

// Runs body(block) for every column block, block b on thread b % threads.
template <class F>
void for_column_blocks(uint64_t n_blocks, unsigned threads, F body) {
    if (threads <= 1 || n_blocks <= 1) {
        for (uint64_t b = 0; b < n_blocks; b++) body(b, 0u);
        return;
    }
    unsigned t_used = n_blocks < threads ? unsigned(n_blocks) : threads;
    run_workers(t_used, [&](unsigned t) {
        for (uint64_t b = t; b < n_blocks; b += t_used) body(b, t);
    });
}

// The column grid the threads share: the definition's blocks of kGemmNB columns; in a product of
// at least kGemmNB rows each full block is computed as two halves of kGemmNB / 2 (dealt whole,
// d = 576 = 512 + 64 left one worker 8/9 of every collapse product), and the last, narrower block
// whole.  A half is the same BLIS call on half the columns and gives the whole call's bits there:
// tests/test_ffn_collapse.cc `blis_half_blocks_match_whole` (with fewer rows BLIS's small-matrix
// path can sum a half apart from the whole, so such products keep their blocks whole).
constexpr uint64_t kHalfNB = kGemmNB / 2;

uint64_t column_blocks(uint64_t m, uint64_t n) {
    return m >= kGemmNB ? n / kGemmNB * 2 + (n % kGemmNB ? 1 : 0) : (n + kGemmNB - 1) / kGemmNB;
}

void column_block(uint64_t b, uint64_t m, uint64_t n, uint64_t &j0, uint64_t &nc) {
    const uint64_t halves = m >= kGemmNB ? n / kGemmNB * 2 : 0;
    j0 = b < halves ? b * kHalfNB : halves * kHalfNB + (b - halves) * kGemmNB;
    nc = b < halves ? kHalfNB : std::min(kGemmNB, n - j0);
}

}  // namespace

uint64_t abs_gemm_scratch_floats(uint64_t m) { return m * kGemmKB + kGemmKB * kGemmNB + 16; }

void abs_gemm(uint64_t m, uint64_t n, uint64_t k, PackA opa, const float *A, uint64_t lda, PackB opb, const float *B,
              const float *B2, uint64_t ldb, float *C, uint64_t ldc, float *scratch, unsigned threads) {
    if (m == 0 || n == 0) return;
    const uint64_t n_blocks = column_blocks(m, n);
    if (k == 0) {
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) C[i * ldc + j] = 0.0f;
        return;
    }
    // The scratch: |A|'s depth block (m x KB), shared by every column block, then one B block per
    // thread.  Depth blocks outermost, so A is read (and |A| packed) once per product instead of
    // once per column block; each output block still gets its depth blocks in ascending order,
    // from the same packed values, so C's bytes are those of any other order of the blocks.
    float *ap = scratch;
    float *bps = scratch + m * kGemmKB;
    const unsigned t_rows = threads < m ? threads : unsigned(m);
    for (uint64_t k0 = 0; k0 < k; k0 += kGemmKB) {
        const uint64_t kc = k - k0 < kGemmKB ? k - k0 : kGemmKB;
        const float *a = A + k0;
        uint64_t rsa = lda;
        if (opa == PackA::Abs) {
            if (t_rows <= 1) pack_a_abs(A, lda, 0, m, k0, kc, ap);
            else
                run_workers(t_rows, [&](unsigned t) { pack_a_abs(A, lda, m * t / t_rows, m * (t + 1) / t_rows, k0, kc, ap); });
            a = ap;
            rsa = kc;
        }
        for_column_blocks(n_blocks, threads, [&](uint64_t blk, unsigned t) {
            uint64_t j0, nc;
            column_block(blk, m, n, j0, nc);
            float *bp = bps + t * (kGemmKB * kGemmNB + 16);
            pack_b(opb, B, B2, ldb, k0, kc, j0, nc, bp);
            sgemm_block(m, nc, kc, a, rsa, bp, nc, k0 == 0 ? 0.0f : 1.0f, C + j0, ldc);
        });
    }
}

void plain_sgemm(uint64_t m, uint64_t n, uint64_t k, const float *A, uint64_t lda, const float *B, uint64_t ldb, float *C,
                 uint64_t ldc, unsigned threads) {
    if (m == 0 || n == 0) return;
    const uint64_t n_blocks = column_blocks(m, n);
    for_column_blocks(n_blocks, threads, [&](uint64_t blk, unsigned) {
        uint64_t j0, nc;
        column_block(blk, m, n, j0, nc);
        sgemm_block(m, nc, k, A, lda, B + j0, ldb, 0.0f, C + j0, ldc);
    });
}

}  // namespace stk
