// The calibrated fits over plain arrays (calib_fit.h; docs/decisions.md "Calibrated fits").
#include "stages/calib_fit.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "core/error.h"
#include "format/calib_stats.h"
#include "kernels/linalg.h"
#include "stages/attn_common.h"

namespace stk {

bool calib_cholesky(double *a, uint32_t k) {
    for (uint32_t j = 0; j < k; j++) {
        double *rj = a + uint64_t(j) * k;
        double s = rj[j];
        for (uint32_t p = 0; p < j; p++) s -= rj[p] * rj[p];
        if (!(s > 0)) return false;
        const double djj = std::sqrt(s);
        rj[j] = djj;
        for (uint32_t i = j + 1; i < k; i++) {
            double *ri = a + uint64_t(i) * k;
            double t = ri[j];
            for (uint32_t p = 0; p < j; p++) t -= ri[p] * rj[p];
            ri[j] = t / djj;
        }
    }
    return true;
}

void calib_cholesky_solve(const double *l, uint32_t k, double *b) {
    for (uint32_t i = 0; i < k; i++) {  // L y = b
        const double *ri = l + uint64_t(i) * k;
        double t = b[i];
        for (uint32_t p = 0; p < i; p++) t -= ri[p] * b[p];
        b[i] = t / ri[i];
    }
    for (uint32_t i = k; i-- > 0;) {  // L^T x = y
        double t = b[i];
        for (uint32_t p = i + 1; p < k; p++) t -= l[uint64_t(p) * k + i] * b[p];
        b[i] = t / l[uint64_t(i) * k + i];
    }
}

double calib_ffn_lambda(const double *G, uint64_t n, const uint32_t *zs, uint32_t k) {
    double s = 0;
    for (uint32_t q = 0; q < k; q++) s += G[calib_packed_index(n, zs[q], zs[q])];
    const double mean = k ? s / double(k) : 0.0;
    return mean > 0 ? kCalibFfnRidge * mean : 1.0;
}

double calib_ffn_solve(const double *G, uint64_t n, const double *X, uint64_t d, uint64_t i, const uint32_t *zs, uint32_t k,
                       double *m, double *work) {
    const double lambda = calib_ffn_lambda(G, n, zs, k);
    for (uint32_t a = 0; a < k; a++) {
        double *row = work + uint64_t(a) * k;
        for (uint32_t b = 0; b <= a; b++) row[b] = G[calib_packed_index(n, zs[a], zs[b])];
        row[a] += lambda;
        m[a] = X[uint64_t(zs[a]) * d + i];
    }
    if (!calib_cholesky(work, k))
        throw_error(STK_E_INTERNAL, "calibrated FFN fit: output %llu's system of %u entries is not positive definite",
                    (unsigned long long)i, k);
    calib_cholesky_solve(work, k, m);
    return lambda;
}

double calib_ffn_output_error(const double *G, uint64_t n, const double *X, uint64_t d, const double *yy, uint64_t i,
                              const uint32_t *zs, uint32_t k, const double *m) {
    double lin = 0, quad = 0;
    for (uint32_t a = 0; a < k; a++) {
        lin += m[a] * X[uint64_t(zs[a]) * d + i];
        double t = G[calib_packed_index(n, zs[a], zs[a])] * m[a];
        for (uint32_t b = 0; b < a; b++) t += 2.0 * G[calib_packed_index(n, zs[a], zs[b])] * m[b];
        quad += m[a] * t;
    }
    const double e = yy[i] - 2.0 * lin + quad;
    return e > 0 ? e : 0.0;
}

double calib_prf_error(const double *M, const double *b, const double *el, uint64_t d, double tau, const double *D) {
    // E[(w^T D' - l)^2] = D'^T M D' - 2 D'^T b + E[l^2], D' = D / tau.
    double lin = 0, quad = 0;
    for (uint64_t a = 0; a < d; a++) {
        const double da = D[a] / tau;
        lin += da * b[a];
        double t = M[calib_packed_index(d, a, a)] * da;
        for (uint64_t c = 0; c < a; c++) t += 2.0 * M[calib_packed_index(d, a, c)] * (D[c] / tau);
        quad += da * t;
    }
    const double e = quad - 2.0 * lin + el[1];
    return e > 0 ? e : 0.0;
}

CalibPrfFit calib_prf_fit(const double *M, const double *b, const double *el, uint64_t d, double tau, double upper,
                          const double *d_free, double *D, double *work) {
    CalibPrfFit f;
    double s = 0;
    for (uint64_t a = 0; a < d; a++) s += M[calib_packed_index(d, a, a)];
    const double mean = d ? s / double(d) : 0.0;
    f.lambda = mean > 0 ? kCalibPrfRidge * mean : 1.0;
    const double lo = kWhiteningEps;
    double *fac = work, *rhs = work + d * d, *state = rhs + d;  // state: 0 free, -1 at lo, +1 at hi
    uint32_t *free_idx = reinterpret_cast<uint32_t *>(state + d);  // d u32 in the last d doubles
    auto mr = [&](uint64_t a, uint64_t c) { return M[calib_packed_index(d, a, c)] + (a == c ? f.lambda : 0.0); };
    const double var = el[1] - el[0] * el[0];
    auto r2 = [&](const double *x) { return var > 0 ? 1.0 - calib_prf_error(M, b, el, d, tau, x) / var : 0.0; };
    // Solves the free entries with the bound ones fixed: Mr[F, F] x_F = tau b_F - Mr[F, B] x_B.
    auto solve_free = [&]() {
        uint32_t k = 0;
        for (uint64_t a = 0; a < d; a++)
            if (state[a] == 0) free_idx[k++] = uint32_t(a);
        for (uint32_t p = 0; p < k; p++) {
            const uint64_t a = free_idx[p];
            for (uint32_t q = 0; q <= p; q++) fac[uint64_t(p) * k + q] = mr(a, free_idx[q]);
            double r = tau * b[a];
            for (uint64_t c = 0; c < d; c++)
                if (state[c] != 0) r -= mr(a, c) * D[c];
            rhs[p] = r;
        }
        if (!calib_cholesky(fac, k))
            throw_error(STK_E_INTERNAL, "calibrated PRF fit: the %u x %u system is not positive definite", k, k);
        calib_cholesky_solve(fac, k, rhs);
        for (uint32_t p = 0; p < k; p++) D[free_idx[p]] = rhs[p];
    };
    for (uint64_t a = 0; a < d; a++) state[a] = 0;
    solve_free();
    f.r2_unclamped = r2(D);
    // The box [lo, upper] by an active set (Lawson-Hanson style, deterministic order): entries that
    // leave the box go to their bound; then a bound entry whose gradient points inside is freed
    // (the largest first); until neither happens (the KKT point of this strictly convex problem)
    // or kCalibPrfMaxPasses passes.
    for (f.passes = 0; f.passes < kCalibPrfMaxPasses; f.passes++) {
        bool moved = false;
        for (uint64_t a = 0; a < d; a++) {
            if (state[a] != 0) continue;
            if (!(D[a] >= lo)) {
                D[a] = lo;
                state[a] = -1;
                moved = true;
            } else if (D[a] > upper) {
                D[a] = upper;
                state[a] = 1;
                moved = true;
            }
        }
        if (!moved) {
            // Gradient of D^T Mr D - 2 tau b^T D at the bound entries: free the worst violator.
            uint64_t best = d;
            double worst = 0;
            for (uint64_t a = 0; a < d; a++) {
                if (state[a] == 0) continue;
                double g = -tau * b[a];
                for (uint64_t c = 0; c < d; c++) g += mr(a, c) * D[c];
                const double v = state[a] < 0 ? -g : g;  // > 0: moving inside lowers the objective
                if (v > worst * (1 + 1e-12) && v > 1e-14 * (std::fabs(tau * b[a]) + mean)) {
                    worst = v;
                    best = a;
                }
            }
            if (best == d) break;
            state[best] = 0;
        }
        solve_free();
    }
    // The last solve may leave a free entry a rounding outside: back to the box.
    for (uint64_t a = 0; a < d; a++) {
        if (!(D[a] >= lo)) D[a] = lo, state[a] = -1;
        if (D[a] > upper) D[a] = upper, state[a] = 1;
        f.negative += state[a] < 0;
        f.high += state[a] > 0;
    }
    f.r2 = r2(D);
    if (d_free) f.r2_free = r2(d_free);
    return f;
}

uint32_t calib_rope_kernel(const double *const *e, uint32_t n_layers, const double *theta, uint32_t n_pairs, uint64_t n,
                           double *h) {
    for (uint64_t t = 0; t < n; t++) h[t] = 0;
    double total = 0;
    uint32_t used = 0;
    for (uint32_t l = 0; l < n_layers; l++) {
        if (!e[l]) continue;
        used++;
        for (uint32_t f = 0; f < n_pairs; f++) {
            total += e[l][f];
            for (uint64_t t = 0; t < n; t++) h[t] += e[l][f] * std::cos(theta[f] * double(t));
        }
    }
    if (total > 0)
        for (uint64_t t = 0; t < n; t++) h[t] /= total;
    else
        for (uint64_t t = 0; t < n; t++) h[t] = 0;
    return used;
}

double calib_cosine(const double *a, const double *b, uint64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (uint64_t i = 0; i < n; i++) {
        ab += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// ---- Overlays ----------------------------------------------------------------------------------

namespace {

constexpr unsigned kOvThreads = 1;  // BLIS: the bytes do not depend on it; one is enough here

struct OvScratch {
    double *C, *Q, *eig, *S, *T, *M, *Ua, *Ub, *WU, *B, *BC, *work;
    size_t work_len;
};
OvScratch ov_scratch(uint64_t dm, uint64_t dv, uint64_t rv, double *base) {
    OvScratch o;
    double *p = base;
    auto take = [&](uint64_t n) {
        double *r = p;
        p += n;
        return r;
    };
    o.C = take(dv * dv);
    o.Q = take(dv * dv);
    o.eig = take(dv);
    o.S = take(dv * dv);
    o.T = take(dm * dv);
    o.M = take(dv * dv);
    o.Ua = take(dv * rv);
    o.Ub = take(dv * rv);
    o.WU = take(dm * rv);
    o.B = take(dm * dv);
    o.BC = take(dm * dv);
    o.work_len = std::max(kernels::sym_eig_workspace(size_t(dv)), kernels::qr_workspace(size_t(dv), size_t(rv)));
    o.work = take(o.work_len);
    return o;
}

void unpack(const double *packed, uint64_t n, double *full) {
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < n; j++) full[i * n + j] = packed[calib_packed_index(n, i, j)];
}

// tr(B C B^T) with B = W - (W U) U^T; C full.
double ov_err_raw(const double *W, uint64_t dm, uint64_t dv, const double *C, const double *U, uint64_t rv, OvScratch &s) {
    std::memcpy(s.B, W, size_t(dm * dv) * sizeof(double));
    if (U) {
        kernels::gemm(false, false, dm, rv, dv, 1.0, W, ptrdiff_t(dv), 1, U, 1, ptrdiff_t(dv), 0.0, s.WU, ptrdiff_t(rv), 1,
                      kOvThreads);
        kernels::gemm(false, true, dm, dv, rv, -1.0, s.WU, ptrdiff_t(rv), 1, U, 1, ptrdiff_t(dv), 1.0, s.B, ptrdiff_t(dv), 1,
                      kOvThreads);
    }
    kernels::gemm(false, false, dm, dv, dv, 1.0, s.B, ptrdiff_t(dv), 1, C, ptrdiff_t(dv), 1, 0.0, s.BC, ptrdiff_t(dv), 1,
                  kOvThreads);
    double e = 0;
    for (uint64_t i = 0; i < dm * dv; i++) e += s.BC[i] * s.B[i];
    return e;
}

}  // namespace

uint64_t calib_overlay_scratch(uint64_t dm, uint64_t dv, uint64_t rv) {
    return 5 * dv * dv + dv + 3 * dm * dv + 2 * dv * rv + dm * rv +
           std::max(kernels::sym_eig_workspace(size_t(dv)), kernels::qr_workspace(size_t(dv), size_t(rv)));
}

double calib_overlay_error(const double *W, uint64_t dm, uint64_t dv, const double *C_packed, const double *U, uint64_t rv,
                           double *scratch) {
    OvScratch s = ov_scratch(dm, dv, rv, scratch);
    unpack(C_packed, dv, s.C);
    const double total = ov_err_raw(W, dm, dv, s.C, nullptr, rv, s);
    return total > 0 ? ov_err_raw(W, dm, dv, s.C, U, rv, s) / total : 0.0;
}

CalibOverlayFit calib_overlay_fit(const double *W, uint64_t dm, uint64_t dv, const double *C_packed, const double *U_free,
                                  uint64_t rv, double *U_out, double *scratch) {
    OvScratch s = ov_scratch(dm, dv, rv, scratch);
    unpack(C_packed, dv, s.C);
    // S = Q diag(sqrt(max(w, 0))) Q^T (C symmetric: its row-major and column-major forms agree).
    std::memcpy(s.Q, s.C, size_t(dv * dv) * sizeof(double));
    kernels::symmetric_eigen(size_t(dv), s.Q, size_t(dv), s.eig, true, s.work, s.work_len);
    for (uint64_t c = 0; c < dv; c++) {
        const double q = std::sqrt(std::sqrt(std::max(s.eig[c], 0.0)));  // Q diag(w^(1/4)): S = R R^T
        for (uint64_t i = 0; i < dv; i++) s.Q[c * dv + i] *= q;
    }
    kernels::gemm(false, true, dv, dv, dv, 1.0, s.Q, 1, ptrdiff_t(dv), s.Q, 1, ptrdiff_t(dv), 0.0, s.S, ptrdiff_t(dv), 1,
                  kOvThreads);
    // T = W S; M = T^T T; its rv leading eigenvectors (largest-magnitude entry positive).
    kernels::gemm(false, false, dm, dv, dv, 1.0, W, ptrdiff_t(dv), 1, s.S, ptrdiff_t(dv), 1, 0.0, s.T, ptrdiff_t(dv), 1,
                  kOvThreads);
    kernels::gemm(true, false, dv, dv, dm, 1.0, s.T, ptrdiff_t(dv), 1, s.T, ptrdiff_t(dv), 1, 0.0, s.M, 1, ptrdiff_t(dv),
                  kOvThreads);
    kernels::symmetric_eigen(size_t(dv), s.M, size_t(dv), s.eig, true, s.work, s.work_len);
    for (uint64_t c = 0; c < rv; c++) {
        const double *v = s.M + (dv - 1 - c) * dv;
        uint64_t arg = 0;
        for (uint64_t i = 1; i < dv; i++)
            if (std::fabs(v[i]) > std::fabs(v[arg])) arg = i;
        const double sign = v[arg] < 0 ? -1.0 : 1.0;
        for (uint64_t i = 0; i < dv; i++) s.Ub[c * dv + i] = sign * v[i];
    }
    // Candidate 1: orth(S V) (column-major d_v x rv).
    kernels::gemm(false, false, dv, rv, dv, 1.0, s.S, ptrdiff_t(dv), 1, s.Ub, 1, ptrdiff_t(dv), 0.0, s.Ua, 1, ptrdiff_t(dv),
                  kOvThreads);
    kernels::orthonormalize_columns(size_t(dv), size_t(rv), s.Ua, size_t(dv), s.work, s.work_len);
    CalibOverlayFit f;
    const double total = ov_err_raw(W, dm, dv, s.C, nullptr, rv, s);
    const double *cand[3] = {U_free, s.Ua, s.Ub};
    for (uint32_t c = 0; c < 3; c++) {
        f.err[c] = total > 0 ? ov_err_raw(W, dm, dv, s.C, cand[c], rv, s) / total : 0.0;
        if (f.err[c] < f.err[f.choice]) f.choice = c;
    }
    std::memmove(U_out, cand[f.choice], size_t(dv * rv) * sizeof(double));  // U_out may be U_free
    return f;
}

}  // namespace stk
