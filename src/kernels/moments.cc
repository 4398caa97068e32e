// kernels/moments.h: the GEMMs through linalg.h (pinned BLIS), the pair Gram in tiles through
// elementwise.h's per-lane kernel, the tiles dealt to the workers by index (core/parallel.h).
#include "kernels/moments.h"

#include <algorithm>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/linalg.h"

namespace stk::kernels {

namespace {
// A tile of the pair Gram: kTileRows x kTileCols entries; x's kTileCols columns (rows x 512 B)
// stay in L2 while the tile's blocks of entries stream every row of them past their registers.
constexpr size_t kTileRows = 8, kTileCols = 64;
}  // namespace

namespace {
// Elements of scratch, refused past kMaxMomentScratch: a bound on the caller's dimensions, checked
// once here for every user of the sizes.
size_t scratch_limit(uint64_t elems) {
    if (elems > kMaxMomentScratch)
        throw_error(STK_E_INVALID_ARGUMENT, "moments: %llu elements of scratch are above %llu", (unsigned long long)elems,
                    (unsigned long long)kMaxMomentScratch);
    return size_t(elems);
}
}  // namespace

size_t moment_gram_scratch(size_t n) { return scratch_limit(checked_mul(n, n, "moment_gram scratch")); }
size_t moment_cross_scratch(size_t n, size_t m) { return scratch_limit(checked_mul(n, m, "moment_cross scratch")); }
size_t moment_causal_pairs_scratch(size_t rows, size_t d) {
    const size_t tb = std::min(rows, kMomentBlock);
    // a block of l(t, s) and of its product with x
    return scratch_limit(checked_add(checked_mul(tb, rows, "pairs scratch"), checked_mul(tb, d, "pairs scratch"),
                                     "pairs scratch"));
}
size_t moment_causal_pairs_scratch_f64(size_t rows, size_t d) {
    return scratch_limit(checked_mul(rows, d, "pairs scratch"));
}

void moment_gram(const float *a, size_t rows, size_t n, double *acc, float *scratch, unsigned threads) {
    for (size_t r0 = 0; r0 < rows; r0 += kMomentBlock) {
        const size_t kb = std::min(kMomentBlock, rows - r0);
        ssyrk_upper_at_a(n, kb, 1.0f, a + r0 * n, ptrdiff_t(n), 1, 0.0f, scratch, ptrdiff_t(n), 1, threads);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i; j < n; j++) acc[i * n + j] += double(scratch[i * n + j]);
    }
}

void moment_cross(const float *a, const float *b, size_t rows, size_t n, size_t m, double *acc, float *scratch,
                  unsigned threads) {
    for (size_t r0 = 0; r0 < rows; r0 += kMomentBlock) {
        const size_t kb = std::min(kMomentBlock, rows - r0);
        sgemm(true, false, n, m, kb, 1.0f, a + r0 * n, ptrdiff_t(n), 1, b + r0 * m, ptrdiff_t(m), 1, 0.0f, scratch, ptrdiff_t(m), 1,
              threads);
        for (size_t i = 0; i < n * m; i++) acc[i] += double(scratch[i]);
    }
}

void moment_causal_pairs(const float *x, const float *q, const float *k, size_t rows, size_t d, size_t dq, double scale,
                         const double *w, double *acc_m, double *acc_b, double *acc_l, float *scratch, double *scratch_f64,
                         unsigned threads) {
    if (rows == 0 || d == 0) return;
    // B and L: l(t, s) for a block of query rows against keys 0..t1, the keys after each t zeroed,
    // then its product with x's rows 0..t1.
    float *lb = scratch;
    float *rb = scratch + std::min(rows, kMomentBlock) * rows;
    for (size_t t0 = 0; t0 < rows; t0 += kMomentBlock) {
        const size_t tb = std::min(kMomentBlock, rows - t0), t1 = t0 + tb;
        sgemm(false, true, tb, t1, dq, float(scale), q + t0 * dq, ptrdiff_t(dq), 1, k, ptrdiff_t(dq), 1, 0.0f, lb, ptrdiff_t(t1),
              1, threads);
        for (size_t i = 0; i < tb; i++) {
            float *row = lb + i * t1;
            const size_t t = t0 + i;
            std::fill(row + t + 1, row + t1, 0.0f);
            double s1 = 0, s2 = 0;
            for (size_t s = 0; s <= t; s++) {
                const double l = row[s];
                s1 += l;
                s2 += l * l;
            }
            acc_l[0] += w[t] * s1;
            acc_l[1] += w[t] * s2;
        }
        sgemm(false, false, tb, d, t1, 1.0f, lb, ptrdiff_t(t1), 1, x, ptrdiff_t(d), 1, 0.0f, rb, ptrdiff_t(d), 1, threads);
        for (size_t i = 0; i < tb; i++) {
            const float *xt = x + (t0 + i) * d, *rt = rb + i * d;
            const double wt = w[t0 + i];
            for (size_t a = 0; a < d; a++) acc_b[a] += wt * (double(xt[a]) * double(rt[a]));
        }
    }

    // M: the tiles of the upper triangle, each a function of x and w alone, so dealing them to
    // any number of workers gives the same bits.
    widen_to_f64(x, scratch_f64, rows * d);
    struct Tile {
        size_t a0, b0;
    };
    std::vector<Tile> tiles;
    for (size_t a0 = 0; a0 < d; a0 += kTileRows)
        for (size_t b0 = a0; b0 < d; b0 += kTileCols) tiles.push_back({a0, b0});
    const unsigned workers = unsigned(std::min<size_t>(threads ? threads : 1, tiles.size()));
    run_workers(workers, [&](unsigned wk) {
        double m_acc[kTileRows * kTileCols];
        for (size_t ti = wk; ti < tiles.size(); ti += workers) {
            const size_t a0 = tiles[ti].a0, b0 = tiles[ti].b0;
            const size_t ra = std::min(kTileRows, d - a0), cb = std::min(kTileCols, d - b0);
            causal_pair_tile(scratch_f64, rows, d, w, a0, ra, b0, cb, m_acc);
            for (size_t r = 0; r < ra; r++)
                for (size_t j = std::max(a0 + r, b0) - b0; j < cb; j++) acc_m[(a0 + r) * d + b0 + j] += m_acc[r * cb + j];
        }
    });
}

}  // namespace stk::kernels
