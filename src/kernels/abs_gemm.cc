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

// The column grid.  The definition's blocks are kGemmNB columns wide (the last one narrower), each
// summed by one BLIS call per depth block.  In a product of at least kGemmNB rows a call on a
// column range of a full block, cut at multiples of 8, gives the whole call's bits there
// (tests/test_ffn_collapse.cc `blis_column_pieces_match_whole`), so the threads share the full
// blocks' columns evenly instead of by blocks: thread t owns [n t / T, n (t + 1) / T) (rounded
// down to kPieceAlign) and makes one call per block its range meets.  Dealt by whole blocks,
// d = 576 = 512 + 64 left one worker 5/9 or more of every collapse product.  The last, narrower
// block is never cut (an edge inside it moves to its start): a piece of it can take BLIS's
// small-matrix path where the whole did not (201 columns: different sums).  With fewer rows
// than kGemmNB that path can sum any piece apart from the whole (m = 96), so such products keep
// their blocks whole, dealt round-robin.
constexpr uint64_t kPieceAlign = 16;
struct ColumnPlan {
    uint64_t n;
    uint64_t full;     // columns in full blocks (even ranges cut only these)
    unsigned workers;  // threads that get columns
    bool even;         // even ranges (m >= kGemmNB and a full block) or whole blocks round-robin
};
ColumnPlan column_plan(uint64_t m, uint64_t n, unsigned threads) {
    ColumnPlan p{n, n / kGemmNB * kGemmNB, 1, m >= kGemmNB && n >= kGemmNB};
    const uint64_t units = p.even ? p.full / kPieceAlign + (n > p.full ? 1 : 0) : (n + kGemmNB - 1) / kGemmNB;
    p.workers = unsigned(std::min<uint64_t>(std::max(threads, 1u), units));
    return p;
}
uint64_t range_edge(const ColumnPlan &p, unsigned t) {
    if (t >= p.workers) return p.n;
    const uint64_t e = p.n * t / p.workers / kPieceAlign * kPieceAlign;
    return e > p.full ? p.full : e;  // never inside the last, narrower block
}
// Calls body(j0, nc, t) for every call of thread t, in ascending column order.
template <class F>
void for_thread_calls(const ColumnPlan &p, unsigned t, F body) {
    if (!p.even) {
        for (uint64_t j0 = uint64_t(t) * kGemmNB; j0 < p.n; j0 += uint64_t(p.workers) * kGemmNB)
            body(j0, std::min(kGemmNB, p.n - j0), t);
        return;
    }
    const uint64_t lo = range_edge(p, t), hi = range_edge(p, t + 1);
    for (uint64_t j0 = lo; j0 < hi;) {
        const uint64_t block_end = std::min((j0 / kGemmNB + 1) * kGemmNB, hi);
        body(j0, block_end - j0, t);
        j0 = block_end;
    }
}
// Runs every thread's calls (the caller's thread is thread 0).
template <class F>
void for_column_calls(const ColumnPlan &p, F body) {
    if (p.workers <= 1) return for_thread_calls(p, 0, body);
    run_workers(p.workers, [&](unsigned t) { for_thread_calls(p, t, body); });
}
}  // namespace

uint64_t abs_gemm_scratch_floats(uint64_t m) { return m * kGemmKB + kGemmKB * kGemmNB + 16; }

void abs_gemm(uint64_t m, uint64_t n, uint64_t k, PackA opa, const float *A, uint64_t lda, PackB opb, const float *B,
              const float *B2, uint64_t ldb, float *C, uint64_t ldc, float *scratch, unsigned threads) {
    if (m == 0 || n == 0) return;
    const ColumnPlan plan = column_plan(m, n, threads);
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
        for_column_calls(plan, [&](uint64_t j0, uint64_t nc, unsigned t) {
            float *bp = bps + t * (kGemmKB * kGemmNB + 16);
            pack_b(opb, B, B2, ldb, k0, kc, j0, nc, bp);
            sgemm_block(m, nc, kc, a, rsa, bp, nc, k0 == 0 ? 0.0f : 1.0f, C + j0, ldc);
        });
    }
}

void plain_sgemm(uint64_t m, uint64_t n, uint64_t k, const float *A, uint64_t lda, const float *B, uint64_t ldb, float *C,
                 uint64_t ldc, unsigned threads) {
    if (m == 0 || n == 0) return;
    for_column_calls(column_plan(m, n, threads), [&](uint64_t j0, uint64_t nc, unsigned) {
        sgemm_block(m, nc, k, A, lda, B + j0, ldb, 0.0f, C + j0, ldc);
    });
}

}  // namespace stk
