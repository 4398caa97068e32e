// The calibrated fits of `stk convert --calibration STATS` (docs/decisions.md "Calibrated fits"
// has the math and the choices): functions over plain double arrays (the moments of
// src/format/calib_stats.h: means, packed upper triangles), so that the tests recompute them
// with numpy from the same numbers.  No allocation: the caller passes every buffer (the stages'
// arenas).  Deterministic: fixed loop orders, no threads inside.
#pragma once

#include <cstdint>

namespace stk {

// ---- FFN dictionary values by least squares ---------------------------------------------------
// z = [relu(x); relu(-x)] (n = 2 d entries: z index s * d + j for sign s, input j), y the FFN
// output.  G = E[z z^T] packed upper (order n), X = E[z y^T] row-major [n, d], yy = E[y_i^2].
// One output i of one dictionary unit holds the entries S = {(s, j)} (z indices zs[0..k)).

// The ridge of output i's system: kCalibFfnRidge times the mean of G's diagonal over S (relative
// to the diagonal, so it does not depend on the activations' scale); 1 when that mean is 0 (no
// entry of S was ever active: the solution is then 0 whatever the ridge).
constexpr double kCalibFfnRidge = 1e-4;
double calib_ffn_lambda(const double *G, uint64_t n, const uint32_t *zs, uint32_t k);

// Solves (G[S, S] + lambda I) m = X[S, i] by Cholesky into m[0..k).  work: k * k doubles.
// Returns lambda.  A factor that breaks down (not positive definite: G is a mean of outer
// products, so only by rounding) is refused with STK_E_INTERNAL naming output i.
double calib_ffn_solve(const double *G, uint64_t n, const double *X, uint64_t d, uint64_t i, const uint32_t *zs, uint32_t k,
                       double *m, double *work);

// E[(y_i - sum_q m[q] z_zs[q])^2] = yy_i - 2 m^T X[S, i] + m^T G[S, S] m (the moments' error of
// output i with values m; may round below 0 by a few ulps: clamped at 0).
double calib_ffn_output_error(const double *G, uint64_t n, const double *X, uint64_t d, const double *yy, uint64_t i,
                              const uint32_t *zs, uint32_t k, const double *m);

// ---- PRF whitener D fitted to the head-averaged logits ----------------------------------------
// PRF attention computes E[phi(x) . phi(y)] = exp(x^T D y / tau) (docs/format.md, "prf_build
// arrays"); the model's attention weight is exp(l), l the head-averaged logit q.k / sqrt(head_dim).
// With w = x o y (elementwise) the fit minimises E[(w^T D / tau - l)^2] over the diagonal D:
// (M + lambda I) D = tau b, M = E[w w^T] packed upper (order d), b = E[w l], el = {E[l], E[l^2]},
// lambda = kCalibPrfRidge * mean diag M, solved inside the box [kWhiteningEps, upper] (an active
// set: the box-constrained minimiser, not the clamped free one): the PRF needs D >= 0 (prf_W = g
// sqrt(D)), and upper < tau keeps the expected denominator prod_j (1 - (D_j / tau)^2)^(-1/2)
// finite.
constexpr double kCalibPrfRidge = 1e-6;
constexpr uint32_t kCalibPrfMaxPasses = 256;  // active-set passes at most (each one d^3 / 3 solve)
struct CalibPrfFit {
    double lambda = 0;
    double r2 = 0;            // 1 - E[(w^T D / tau - l)^2] / Var(l) of the clamped D (Var(l) = E[l^2] - E[l]^2)
    double r2_free = 0;       // the same for d_free (the data-free diagonal), for comparison
    double r2_unclamped = 0;  // the same for the unconstrained solve
    uint32_t negative = 0;    // entries at the lower bound kWhiteningEps
    uint32_t high = 0;        // entries at the upper bound
    uint32_t passes = 0;      // active-set passes (kCalibPrfMaxPasses: stopped there)
};
// work: d * d + 3 d doubles.  d_free may be null (r2_free left 0).
CalibPrfFit calib_prf_fit(const double *M, const double *b, const double *el, uint64_t d, double tau, double upper,
                          const double *d_free, double *D, double *work);
// E[(w^T D / tau - l)^2] from the moments.
double calib_prf_error(const double *M, const double *b, const double *el, uint64_t d, double tau, const double *D);

// ---- Overlay basis U weighted by the attention outputs' covariance -----------------------------
// W = W_O (d_model x d_v, row-major), C = E[o o^T] (d_v x d_v, packed upper), P = U U^T.  The
// error of a basis U (d_v x rv, column-major, orthonormal) on the moments:
//   e(U) = tr(W (I - P) C (I - P) W^T) / tr(W C W^T)
// (docs/decisions.md's "0.84 -> 0.53" measures this).  calib_overlay_fit computes, with S =
// C^(1/2) (symmetric, from C's eigenvectors; negative rounding eigenvalues as 0) and V the rv
// leading eigenvectors of S W^T W S (= W S's right singular vectors):
//   candidate 1: U = orth(S V), the range the issue names (W L with any factor L L^T = C has the
//                same left singular vectors and L V' spans the same space as S V);
//   candidate 2: U = V, the plain top eigenvectors of C^(1/2) W^T W C^(1/2);
// and keeps whichever of {data-free U, 1, 2} has the smallest e(U) (ties: the earlier).
enum CalibOverlayChoice : uint32_t { kOverlayDataFree = 0, kOverlayRange = 1, kOverlayEigen = 2 };
struct CalibOverlayFit {
    uint32_t choice = kOverlayDataFree;
    double err[3] = {0, 0, 0};  // e(U) of the data-free U, candidate 1, candidate 2
};
// Doubles of scratch calib_overlay_fit needs.
uint64_t calib_overlay_scratch(uint64_t dm, uint64_t dv, uint64_t rv);
CalibOverlayFit calib_overlay_fit(const double *W, uint64_t dm, uint64_t dv, const double *C_packed, const double *U_free,
                                  uint64_t rv, double *U_out, double *scratch);
// e(U) alone (scratch: calib_overlay_scratch doubles).
double calib_overlay_error(const double *W, uint64_t dm, uint64_t dv, const double *C_packed, const double *U, uint64_t rv,
                           double *scratch);

// ---- Memory bank on the activations' RoPE kernel -----------------------------------------------
// h(t) = sum_l sum_f e[l][f] cos(theta[f] t) / sum_l sum_f e[l][f], t < n, over the layers whose
// e (kCalibRopePairs: E[sum_heads |q_f| |k_f|]) is not null (tools/fidelity/fidelity.py's
// `kernel` with the activations' pair energies in place of the weights').  Returns the layers
// used; h all zero when none (or every e is 0).
uint32_t calib_rope_kernel(const double *const *e, uint32_t n_layers, const double *theta, uint32_t n_pairs, uint64_t n,
                           double *h);
// cos(a, b) = a.b / (|a| |b|) over n entries (0 when either is 0).
double calib_cosine(const double *a, const double *b, uint64_t n);

// ---- Dense helpers ------------------------------------------------------------------------------
// In-place Cholesky of the k x k row-major symmetric positive definite A (lower factor L, A = L
// L^T, the upper part left as is).  Returns false when a pivot is not positive.
bool calib_cholesky(double *a, uint32_t k);
// Solves L L^T x = b in place (b becomes x) with the factor of calib_cholesky.
void calib_cholesky_solve(const double *l, uint32_t k, double *b);

}  // namespace stk
