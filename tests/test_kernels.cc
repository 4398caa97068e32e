// src/kernels against plain double loops: GEMM (all transposes, strides; identical bytes at 1 and
// 2 threads), Householder QR (R diag > 0, equal to Gram-Schmidt), eigenvalues, least squares,
// polynomial roots, the Gaussian streams, and the Highway elementwise kernels.
#include <cmath>
#include <vector>

#include "core/prng.h"
#include "kernels/elementwise.h"
#include "kernels/linalg.h"
#include "kernels/random.h"
#include "test_util.h"

using namespace stk;
using namespace stk::kernels;

static std::vector<double> randn(size_t n, uint32_t tag) {
    std::vector<double> v(n);
    gaussians(stream_seed(7, 99, tag), 0, n, v.data());
    return v;
}

static void gemm_matches_naive(void **) {
    const size_t m = 37, n = 23, k = 19;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            // A stored as (ta ? k x m : m x k) row-major, B as (tb ? n x k : k x n) column-major.
            std::vector<double> A = randn(m * k, 1), B = randn(k * n, 2), C(m * n, 0.5), ref(m * n);
            auto a_at = [&](size_t i, size_t p) { return ta ? A[p * m + i] : A[i * k + p]; };
            auto b_at = [&](size_t p, size_t j) { return tb ? B[p * n + j] : B[j * k + p]; };
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    double s = 0;
                    for (size_t p = 0; p < k; p++) s += a_at(i, p) * b_at(p, j);
                    ref[i * n + j] = 2.0 * s + 3.0 * 0.5;
                }
            // Strides of the stored matrices; gemm transposes them.
            gemm(ta, tb, m, n, k, 2.0, A.data(), ta ? ptrdiff_t(m) : ptrdiff_t(k), 1, B.data(), 1,
                 tb ? ptrdiff_t(n) : ptrdiff_t(k), 3.0, C.data(), ptrdiff_t(n), 1, 1);
            for (size_t i = 0; i < m * n; i++) assert_true(std::fabs(C[i] - ref[i]) < 1e-12 * (1 + std::fabs(ref[i])));
        }
}

static void gemm_bytes_do_not_depend_on_threads(void **) {
    const size_t m = 300, n = 170, k = 257;
    std::vector<double> A = randn(m * k, 3), B = randn(k * n, 4), C1(m * n), C2(m * n);
    gemm(false, false, m, n, k, 1.0, A.data(), ptrdiff_t(k), 1, B.data(), ptrdiff_t(n), 1, 0.0, C1.data(), 1, ptrdiff_t(m), 1);
    gemm(false, false, m, n, k, 1.0, A.data(), ptrdiff_t(k), 1, B.data(), ptrdiff_t(n), 1, 0.0, C2.data(), 1, ptrdiff_t(m), 2);
    assert_memory_equal(C1.data(), C2.data(), C1.size() * 8);
}

static void gemm_refuses_bad_arguments(void **) {
    double a = 1, b = 1, c = 0;
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { gemm(false, false, 1, 1, 1, 1, &a, 0, 1, &b, 1, 1, 0, &c, 1, 1, 1); });
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { gemm(false, false, 1, 1, 1, 1, &a, 1, 1, &b, 1, 1, 0, &c, 1, 1, 0); });
    test::expect_error(STK_E_INVALID_ARGUMENT,
                       [&] { gemm(false, false, 1, 1, 1, 1, nullptr, 1, 1, &b, 1, 1, 0, &c, 1, 1, 1); });
    std::vector<double> w(qr_workspace(4, 4));
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { orthonormalize_columns(2, 3, &a, 2, w.data(), w.size()); });
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { orthonormalize_columns(8, 4, w.data(), 8, w.data(), 3); });
}

static void qr_is_gram_schmidt_with_positive_diagonal(void **) {
    const size_t m = 50, n = 7;
    std::vector<double> A = randn(m * n, 5), Q = A, G = A;  // column-major
    std::vector<double> w(qr_workspace(m, n));
    orthonormalize_columns(m, n, Q.data(), m, w.data(), w.size());
    assert_true(orthonormality_error(m, n, Q.data(), m) < 1e-13);
    for (size_t c = 0; c < n; c++) {  // modified Gram-Schmidt: R diag > 0 by construction
        for (size_t p = 0; p < c; p++) {
            double d = 0;
            for (size_t i = 0; i < m; i++) d += G[p * m + i] * G[c * m + i];
            for (size_t i = 0; i < m; i++) G[c * m + i] -= d * G[p * m + i];
        }
        double nr = 0;
        for (size_t i = 0; i < m; i++) nr += G[c * m + i] * G[c * m + i];
        for (size_t i = 0; i < m; i++) G[c * m + i] /= std::sqrt(nr);
    }
    for (size_t i = 0; i < m * n; i++) assert_true(std::fabs(Q[i] - G[i]) < 1e-12);
}

static void eigen_lstsq_and_roots(void **) {
    // Symmetric: Q diag(1..6) Q^T.
    const size_t n = 6;
    std::vector<double> Q = randn(n * n, 6), w(std::max(qr_workspace(n, n), sym_eig_workspace(n)));
    orthonormalize_columns(n, n, Q.data(), n, w.data(), w.size());
    std::vector<double> S(n * n, 0.0), ev(n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t k = 0; k < n; k++) S[j * n + i] += Q[k * n + i] * double(k + 1) * Q[k * n + j];
    symmetric_eigen(n, S.data(), n, ev.data(), false, w.data(), w.size());
    for (size_t i = 0; i < n; i++) assert_true(std::fabs(ev[i] - double(i + 1)) < 1e-12);
    // Least squares: fit y = 2 + 3 t exactly.
    std::vector<double> A(2 * 10), b(10), lw(lstsq_workspace(10, 2));
    for (size_t t = 0; t < 10; t++) {
        A[t] = 1;
        A[10 + t] = double(t);
        b[t] = 2 + 3 * double(t);
    }
    least_squares(10, 2, A.data(), 10, b.data(), lw.data(), lw.size());
    assert_true(std::fabs(b[0] - 2) < 1e-12 && std::fabs(b[1] - 3) < 1e-12);
    // Roots of (z - 0.5)(z + 0.25)(z^2 + 0.81): companion of z^4 - c1 z^3 - ... - c4.
    // (z^2 - 0.25 z - 0.125)(z^2 + 0.81) = z^4 - 0.25 z^3 + 0.685 z^2 - 0.2025 z - 0.10125
    const double c[4] = {0.25, -0.685, 0.2025, 0.10125};
    std::vector<double> C(16, 0.0), wr(4), wi(4), gw(gen_eig_workspace(4));
    for (int j = 0; j < 4; j++) C[j * 4] = c[j];
    for (int i = 1; i < 4; i++) C[(i - 1) * 4 + i] = 1;
    general_eigenvalues(4, C.data(), 4, wr.data(), wi.data(), gw.data(), gw.size());
    int found = 0;
    for (int i = 0; i < 4; i++) {
        if (std::fabs(wr[i] - 0.5) < 1e-10 && std::fabs(wi[i]) < 1e-10) found++;
        if (std::fabs(wr[i] + 0.25) < 1e-10 && std::fabs(wi[i]) < 1e-10) found++;
        if (std::fabs(wr[i]) < 1e-10 && std::fabs(std::fabs(wi[i]) - 0.9) < 1e-10) found++;
    }
    assert_int_equal(found, 4);
}

static void gaussian_streams(void **) {
    // Plain Box-Muller on splitmix64 outputs 0 and 1 of the stream.
    const uint64_t seed = 12345;
    uint64_t x = seed;
    double u = to_unit(splitmix64_next(&x)), v = to_unit(splitmix64_next(&x));
    double g0, g1;
    gaussian_pair(seed, 0, &g0, &g1);
    assert_true(g0 == std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v));
    assert_true(g1 == std::sqrt(-2 * std::log(u)) * std::sin(2 * M_PI * v));
    // Any window of the stream equals the same indices of the whole.
    std::vector<double> all(101), part(40);
    gaussians(seed, 0, all.size(), all.data());
    for (uint64_t first : {0ull, 1ull, 7ull, 60ull}) {
        for (size_t len : {size_t(0), size_t(1), size_t(2), size_t(39), size_t(40)}) {
            if (first + len > all.size()) continue;
            gaussians(seed, first, len, part.data());
            for (size_t i = 0; i < len; i++) assert_true(part[i] == all[first + i]);
        }
    }
    // Moments of 100k draws: mean within 4 SE, variance within 2 %.
    std::vector<double> big(100000);
    gaussians(seed, 0, big.size(), big.data());
    double s = 0, s2 = 0;
    for (double g : big) {
        s += g;
        s2 += g * g;
    }
    assert_true(std::fabs(s / big.size()) < 4 / std::sqrt(double(big.size())));
    assert_true(std::fabs(s2 / big.size() - 1) < 0.02);
    int neg = 0;
    for (int i = 0; i < 1000; i++) neg += random_sign(seed, i) < 0;
    assert_true(neg > 430 && neg < 570);
}

static void elementwise_kernels(void **) {
    std::vector<float> x(1031);
    for (size_t i = 0; i < x.size(); i++) x[i] = float(std::sin(double(i)) * 3.5);
    std::vector<double> acc(x.size(), 1.0), wide(x.size());
    accumulate_squares(x.data(), acc.data(), x.size());
    widen_to_f64(x.data(), wide.data(), x.size());
    for (size_t i = 0; i < x.size(); i++) {
        assert_true(acc[i] == 1.0 + double(x[i]) * double(x[i]));
        assert_true(wide[i] == double(x[i]));
    }
    std::vector<float> back(x.size());
    std::vector<double> d(x.size());
    for (size_t i = 0; i < x.size(); i++) d[i] = std::sin(double(i)) * 3.5;
    narrow_to_f32(d.data(), back.data(), x.size());
    for (size_t i = 0; i < x.size(); i++) assert_true(back[i] == float(d[i]));
    assert_true(all_finite(d.data(), d.size()));
    d[500] = NAN;
    assert_false(all_finite(d.data(), d.size()));
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_matches_naive),
        cmocka_unit_test(gemm_bytes_do_not_depend_on_threads),
        cmocka_unit_test(gemm_refuses_bad_arguments),
        cmocka_unit_test(qr_is_gram_schmidt_with_positive_diagonal),
        cmocka_unit_test(eigen_lstsq_and_roots),
        cmocka_unit_test(gaussian_streams),
        cmocka_unit_test(elementwise_kernels),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
