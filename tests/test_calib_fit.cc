// The calibrated fits (src/stages/calib_fit.h) against numpy's recomputation from the same
// moments (tools/calib/fit_reference.py -> calib_fit_expected.h): the FFN values' ridge solve and
// its moment errors, the PRF whitener's solve, clamp and R^2.  Tolerance: 1e-9 relative (the
// library factors by Cholesky, numpy by LU: both well inside it on these conditioned systems).
#include <cmath>
#include <algorithm>
#include <vector>

#include "calib_fit_expected.h"
#include "format/calib_stats.h"
#include "stages/calib_fit.h"
#include "test_util.h"

using namespace stk;

static void near(double got, double want, double rel, const char *what, unsigned at) {
    const double tol = rel * std::max(1.0, std::fabs(want));
    if (!(std::fabs(got - want) <= tol)) fail_msg("%s[%u]: %.17g, numpy %.17g (tolerance %.3g)", what, at, got, want, tol);
}

static void ffn_values_match_numpy(void **) {
    const uint64_t d = kFfnD, n = 2 * d;
    unsigned at = 0;
    for (unsigned i = 0; i < d; i++) {
        const unsigned k = kFfnSetLen[i];
        std::vector<double> m(k), work(k * k);
        const double lambda = calib_ffn_solve(kFfnG, n, kFfnX, d, i, kFfnSets + at, k, m.data(), work.data());
        double diag = 0;
        for (unsigned q = 0; q < k; q++) diag += kFfnG[calib_packed_index(n, kFfnSets[at + q], kFfnSets[at + q])];
        near(lambda, kCalibFfnRidge * diag / k, 1e-15, "lambda", i);
        for (unsigned q = 0; q < k; q++) near(m[q], kFfnM[at + q], 1e-9, "m", at + q);
        near(calib_ffn_output_error(kFfnG, n, kFfnX, d, kFfnYY, i, kFfnSets + at, k, m.data()), kFfnErr[i], 1e-9, "err", i);
        near(calib_ffn_output_error(kFfnG, n, kFfnX, d, kFfnYY, i, kFfnSets + at, k, kFfnM0 + at), kFfnErr0[i], 1e-9, "err0",
             i);
        // The least-squares values do better on the moments than the data-free ones.
        assert_true(kFfnErr[i] < kFfnErr0[i]);
        at += k;
    }
}

static void ffn_silent_entries_get_zero(void **) {
    // An output whose entries were never active (G's rows 0, X's 0): lambda 1, values 0.
    const uint64_t d = 2, n = 4;
    std::vector<double> G(n * (n + 1) / 2, 0.0), X(n * d, 0.0), yy(d, 1.0);
    const uint32_t zs[2] = {1, 3};
    double m[2] = {5, 5}, work[4];
    assert_true(calib_ffn_solve(G.data(), n, X.data(), d, 0, zs, 2, m, work) == 1.0);
    assert_true(m[0] == 0.0 && m[1] == 0.0);
    assert_true(calib_ffn_output_error(G.data(), n, X.data(), d, yy.data(), 0, zs, 2, m) == 1.0);
}

static void prf_whitener_matches_numpy(void **) {
    std::vector<double> D(kPrfD), work(kPrfD * kPrfD + 3 * kPrfD);
    const CalibPrfFit f = calib_prf_fit(kPrfM, kPrfB, kPrfEl, kPrfD, kPrfTau, kPrfUpper, kPrfDfree, D.data(), work.data());
    for (unsigned j = 0; j < kPrfD; j++) near(D[j], kPrfDexp[j], 1e-9, "D", j);
    assert_true(f.passes < kCalibPrfMaxPasses);
    near(f.r2, kPrfR2, 1e-9, "r2", 0);
    near(f.r2_free, kPrfR2Free, 1e-9, "r2_free", 0);
    near(f.r2_unclamped, kPrfR2Unclamped, 1e-9, "r2_unclamped", 0);
    assert_int_equal(f.negative, kPrfNegative);
    assert_int_equal(f.high, kPrfHigh);
}

static void cholesky_solves(void **) {
    // [[4, 2], [2, 3]] x = [2, 1]: x = [0.5, 0].
    double a[4] = {4, 2, 2, 3}, b[2] = {2, 1};
    assert_true(calib_cholesky(a, 2));
    calib_cholesky_solve(a, 2, b);
    near(b[0], 0.5, 1e-15, "x", 0);
    near(b[1], 0.0, 1e-15, "x", 1);
    double s[4] = {1, 2, 2, 1};  // indefinite
    assert_false(calib_cholesky(s, 2));
}

static void overlay_basis_matches_numpy(void **) {
    std::vector<double> scratch(calib_overlay_scratch(kOvDm, kOvDv, kOvRv)), U(kOvDv * kOvRv);
    const CalibOverlayFit f = calib_overlay_fit(kOvW, kOvDm, kOvDv, kOvC, kOvUfree, kOvRv, U.data(), scratch.data());
    for (unsigned c = 0; c < 3; c++) near(f.err[c], kOvErr[c], 1e-9, "err", c);
    assert_int_equal(f.choice, kOvChoice);
    const double *want = f.choice == 0 ? kOvUfree : f.choice == 1 ? kOvUa : kOvUb;
    for (unsigned i = 0; i < kOvDv * kOvRv; i++) near(U[i], want[i], 1e-9, "U", i);
    // Each candidate's error alone, and the weighted ones no worse than the data-free basis here.
    near(calib_overlay_error(kOvW, kOvDm, kOvDv, kOvC, kOvUa, kOvRv, scratch.data()), kOvErr[1], 1e-9, "err(Ua)", 0);
    assert_true(f.err[f.choice] <= f.err[0]);
}

static void rope_kernel_matches_numpy(void **) {
    const double *e[kRopeL] = {kRopeE, nullptr, kRopeE + 2 * kRopePairs};  // layer 1 without the section
    std::vector<double> h(kRopeN);
    assert_int_equal(calib_rope_kernel(e, kRopeL, kRopeTheta, kRopePairs, kRopeN, h.data()), 2);
    for (unsigned t = 0; t < kRopeN; t++) near(h[t], kRopeH[t], 1e-12, "h", t);
    near(calib_cosine(h.data(), kRopeH, kRopeN), 1.0, 1e-12, "cos", 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ffn_values_match_numpy),
        cmocka_unit_test(ffn_silent_entries_get_zero),
        cmocka_unit_test(prf_whitener_matches_numpy),
        cmocka_unit_test(cholesky_solves),
        cmocka_unit_test(overlay_basis_matches_numpy),
        cmocka_unit_test(rope_kernel_matches_numpy),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
