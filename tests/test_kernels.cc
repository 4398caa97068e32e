// src/kernels against plain double loops: GEMM (all transposes, strides; identical bytes at 1 and
// 2 threads), Householder QR (R diag > 0, equal to Gram-Schmidt), eigenvalues, least squares,
// polynomial roots, the Gaussian streams, and the Highway elementwise kernels.
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/checksum.h"

#include "core/prng.h"
#include "kernels/dot.h"
#include "kernels/elementwise.h"
#include "kernels/linalg.h"
#include "kernels/moments.h"
#include "kernels/random.h"
#include "kernels/sketch.h"
#include "test_util.h"

using namespace stk;
using namespace stk::kernels;

#define PINNED_GAUSSIANS 0x3fddc224abc488ceull  // gaussians(12345, 0, 1e6) as little-endian doubles

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
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { gemm(false, false, 1, 1, 1, 1, nullptr, 1, 1, &b, 1, 1, 0, &c, 1, 1, 1); });
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

// Error of got in units in the last place of the double nearest ref.
static double ulps(double got, long double ref) {
    int e;
    std::frexp(double(ref), &e);
    return double(std::fabs((long double)got - ref) / std::ldexp(1.0L, e - 53));
}

// sin and cos of 2 pi v in long double (64-bit significand) with the same exact reduction.
static void ref_sincos_2pi(double v, long double *s, long double *c) {
    const double t = 4 * v, n = std::nearbyint(t);
    const long double x = (long double)(t - n) * 1.5707963267948966192313216916397514L;
    const long double sx = sinl(x), cx = cosl(x);
    switch (int(n) & 3) {
        case 0: *s = sx, *c = cx; break;
        case 1: *s = cx, *c = -sx; break;
        case 2: *s = -sx, *c = -cx; break;
        default: *s = -cx, *c = sx; break;
    }
}

// The pinned log and sin/cos(2 pi .) against long double references, over the inputs the draws
// feed them (k * 2^-53), the clamp's ends and the quadrant boundaries; every compiled SIMD
// target the CPU runs gives the same bytes.
static void pinned_math_accuracy_and_targets(void **) {
    const size_t n = 200000;
    std::vector<double> u(n), v(n);
    uint64_t st = 2024;
    for (size_t i = 0; i < n; i++) {
        u[i] = std::max(0x1.0p-52, to_unit(splitmix64_next(&st)));
        v[i] = to_unit(splitmix64_next(&st));
    }
    const double edges_u[] = {0x1.0p-52, 1.0 - 0x1.0p-52, 0.5, 0x1.6A09E667F3BCCp-1, 0x1.6A09E667F3BCDp-1, 0.75, 1e-10};
    const double edges_v[] = {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0 - 0x1.0p-53, 0x1.0p-53, 0.25 - 0x1.0p-54};
    for (size_t i = 0; i < sizeof edges_u / sizeof *edges_u; i++) u[i] = edges_u[i];
    for (size_t i = 0; i < sizeof edges_v / sizeof *edges_v; i++) v[i] = edges_v[i];
    std::vector<double> lg(n), sn(n), cs(n);
    pinned_log(u.data(), n, lg.data());
    pinned_sincos_2pi(v.data(), n, sn.data(), cs.data());
    double worst_log = 0, worst_sin = 0, worst_cos = 0;
    for (size_t i = 0; i < n; i++) {
        worst_log = std::max(worst_log, ulps(lg[i], logl((long double)u[i])));
        long double rs, rc;
        ref_sincos_2pi(v[i], &rs, &rc);
        if (rs != 0) worst_sin = std::max(worst_sin, ulps(sn[i], rs));
        else assert_true(sn[i] == 0);
        if (rc != 0) worst_cos = std::max(worst_cos, ulps(cs[i], rc));
        else assert_true(cs[i] == 0);
    }
    std::printf("pinned math over %zu inputs: log %.3f ulp, sin(2 pi v) %.3f ulp, cos(2 pi v) %.3f ulp\n", n, worst_log,
                worst_sin, worst_cos);
    assert_true(worst_log < 1.0);  // fdlibm's bound
    assert_true(worst_sin < 2.0);  // the reduction's one rounding of x = w pi/2 plus the kernel
    assert_true(worst_cos < 2.0);
    assert_true(sn[4] == 0 && cs[4] == -1 && sn[2] == 1 && cs[0] == 1);  // v = 0.5, 0.25, 0 exactly

    // Every target: the same bytes for draws, log and sin/cos.
    std::vector<double> g_ref(2 * 1001), g(2 * 1001), lg2(n), sn2(n), cs2(n);
    gaussian_pairs(99, 5, 1001, g_ref.data());
    int tried = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        gaussian_pairs(99, 5, 1001, g.data());
        pinned_log(u.data(), n, lg2.data());
        pinned_sincos_2pi(v.data(), n, sn2.data(), cs2.data());
        if (std::memcmp(g.data(), g_ref.data(), g.size() * 8) || std::memcmp(lg.data(), lg2.data(), n * 8) ||
            std::memcmp(sn.data(), sn2.data(), n * 8) || std::memcmp(cs.data(), cs2.data(), n * 8))
            fail_msg("target %s gives other bytes than the dispatched one", hwy::TargetName(target));
        tried++;
    }
    hwy::SetSupportedTargetsForTest(0);
    std::printf("%d SIMD targets give identical bytes\n", tried);
    assert_true(tried >= 1);
}

static void gaussian_streams(void **) {
    // Box-Muller on splitmix64 outputs 0 and 1 of the stream, through the pinned functions; and
    // within 1e-15 of the same formula on glibc's log / cos / sin.
    const uint64_t seed = 12345;
    uint64_t x = seed;
    double u = to_unit(splitmix64_next(&x)), v = to_unit(splitmix64_next(&x));
    double g0, g1, lu, sv, cv;
    gaussian_pair(seed, 0, &g0, &g1);
    pinned_log(&u, 1, &lu);
    pinned_sincos_2pi(&v, 1, &sv, &cv);
    assert_true(g0 == std::sqrt(-2 * lu) * cv);
    assert_true(g1 == std::sqrt(-2 * lu) * sv);
    assert_true(std::fabs(g0 - std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v)) < 1e-15);
    assert_true(std::fabs(g1 - std::sqrt(-2 * std::log(u)) * std::sin(2 * M_PI * v)) < 1e-15);
    // Pinned bytes: the first million draws of one stream (a change here changes prf_W's draws).
    {
        std::vector<double> m(1000000);
        gaussians(seed, 0, m.size(), m.data());
        Sha256 h;
        h.update(m.data(), m.size() * 8);
        const uint64_t got = h.finish().low64();
        std::printf("gaussians(12345, 0, 1e6) sha256_low64 %016llx\n", (unsigned long long)got);
        assert_int_equal(got, PINNED_GAUSSIANS);
    }
    // The fused scaled f32 draws equal float(g * scale) of the plain draws, at every offset.
    {
        std::vector<double> g(2 * 1003), scale(2 * 1003);
        std::vector<float> f(2 * 1003);
        for (size_t j = 0; j < scale.size(); j++) scale[j] = 0.01 + 0.37 * double(j % 17);
        for (uint64_t fp : {0ull, 1ull, 77ull}) {
            gaussian_pairs(seed, fp, 1003, g.data());
            scaled_gaussian_pairs(seed, fp, 1003, scale.data(), f.data());
            for (size_t j = 0; j < g.size(); j++) assert_true(f[j] == float(g[j] * scale[j]));
        }
    }
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
    // sum_squares_f32: exactly the documented order (8 partial sums by j mod 8, then pairs), and
    // scale_by_sqrt_to_f32 exactly the scalar formula, on every target the CPU supports, with
    // accumulate_squares' bytes the same on each.
    double ref_s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t j = 0; j < x.size(); j++) {
        double v = double(x[j]);
        double sq = v * v;
        ref_s[j & 7] = ref_s[j & 7] + sq;
    }
    const double ref_sum = ((ref_s[0] + ref_s[1]) + (ref_s[2] + ref_s[3])) + ((ref_s[4] + ref_s[5]) + (ref_s[6] + ref_s[7]));
    std::vector<double> dd(x.size());
    for (size_t i = 0; i < x.size(); i++) dd[i] = 0.25 + std::fabs(std::cos(double(i)));
    int tried = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        assert_true(sum_squares_f32(x.data(), x.size()) == ref_sum);
        std::vector<double> acc2(x.size(), 1.0);
        accumulate_squares(x.data(), acc2.data(), x.size());
        assert_memory_equal(acc2.data(), acc.data(), acc.size() * 8);
        std::vector<float> sc(x.size());
        scale_by_sqrt_to_f32(d.data(), dd.data(), sc.data(), x.size());
        for (size_t i = 0; i < x.size(); i++) {
            double s = std::sqrt(dd[i]);
            double v = d[i] * s;
            if (sc[i] != float(v)) fail_msg("scale_by_sqrt_to_f32 on %s: element %zu", hwy::TargetName(target), i);
        }
        tried++;
    }
    hwy::SetSupportedTargetsForTest(0);
    assert_true(tried >= 1);
    d[500] = NAN;
    assert_false(all_finite(d.data(), d.size()));
}

// kernels/dot.h: each row's dot product exactly in the documented order (sixteen partial sums by
// column mod 16, product rounded then added, t_l = s_l + s_(l+8), then ((t0 + t4) + (t2 + t6)) +
// ((t1 + t5) + (t3 + t7))),
// written here as plain scalar code, on every target the CPU supports; bf16 rows widened by the
// 16-bit shift; row counts that leave partial groups of four rows, widths that leave a tail of
// columns, a row stride wider than the row; and any split of the rows gives the same bytes.
static float ref_dot(const float *w, const float *x, size_t n) {
    float s[16] = {};
    for (size_t j = 0; j < n; j++) {
        float p = w[j] * x[j];
        s[j & 15] = s[j & 15] + p;
    }
    float t[8];
    for (size_t l = 0; l < 8; l++) t[l] = s[l] + s[l + 8];
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

static void dot_rows_order(void **) {
    for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(15), size_t(16), size_t(17), size_t(64), size_t(579)})
        for (size_t rows : {size_t(1), size_t(3), size_t(4), size_t(13)}) {
            const size_t ld = n + 5;
            std::vector<float> wf(rows * ld), x(n), wwide(rows * ld);
            std::vector<uint16_t> wb(rows * ld);
            for (size_t i = 0; i < wf.size(); i++) {
                wf[i] = float(std::sin(double(i) * 0.37) * 2.0 + 1e-3 * double(i % 17));
                uint32_t bits;
                std::memcpy(&bits, &wf[i], 4);
                wb[i] = uint16_t(bits >> 16);
                const uint32_t back = uint32_t(wb[i]) << 16;
                std::memcpy(&wwide[i], &back, 4);
            }
            for (size_t j = 0; j < n; j++) x[j] = float(std::cos(double(j) * 1.3) * 0.75);
            std::vector<float> ref_f(rows), ref_b(rows);
            for (size_t r = 0; r < rows; r++) {
                ref_f[r] = ref_dot(wf.data() + r * ld, x.data(), n);
                ref_b[r] = ref_dot(wwide.data() + r * ld, x.data(), n);
            }
            int tried = 0;
            for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
                hwy::SetSupportedTargetsForTest(target);
                std::vector<float> yf(rows), yb(rows), ys(rows);
                dot_rows_f32(wf.data(), ld, rows, x.data(), n, yf.data());
                dot_rows_bf16(wb.data(), ld, rows, x.data(), n, yb.data());
                for (size_t r = 0; r < rows; r++) {  // one row at a time: a split of the rows
                    float y1;
                    dot_rows_bf16(wb.data() + r * ld, ld, 1, x.data(), n, &y1);
                    ys[r] = y1;
                }
                std::vector<float> ya(x), yref(x);  // axpy: elementwise, the scalar formula's bytes
                axpy_f32(0.3f, wf.data(), ya.data(), n);
                for (size_t j = 0; j < n; j++) {
                    float p = 0.3f * wf[j];
                    yref[j] = yref[j] + p;
                }
                if (std::memcmp(ya.data(), yref.data(), n * 4)) fail_msg("axpy_f32 on %s: n %zu", hwy::TargetName(target), n);
                // axpy_rows: the bytes of `rows` axpy_f32 calls in row order (weights from x's values)
                std::vector<float> yr(x), yrr(x);
                axpy_rows_f32(x.data(), wf.data(), ld, std::min(rows, n), yr.data(), n);
                for (size_t r = 0; r < std::min(rows, n); r++)
                    for (size_t j = 0; j < n; j++) {
                        float p = x[r] * wf[r * ld + j];
                        yrr[j] = yrr[j] + p;
                    }
                if (std::memcmp(yr.data(), yrr.data(), n * 4)) fail_msg("axpy_rows_f32 on %s: n %zu rows %zu", hwy::TargetName(target), n, rows);
                if (std::memcmp(yf.data(), ref_f.data(), rows * 4) || std::memcmp(yb.data(), ref_b.data(), rows * 4) ||
                    std::memcmp(ys.data(), ref_b.data(), rows * 4))
                    fail_msg("dot_rows on %s: n %zu rows %zu differs from the documented order", hwy::TargetName(target), n, rows);
                tried++;
            }
            hwy::SetSupportedTargetsForTest(0);
            assert_true(tried >= 1);
        }
}

// The sketch passes (src/kernels/sketch.h): Y = W X and X' = W^T Y against double loops, on
// sizes that leave partial row blocks, column blocks and row groups; the same bytes at 1, 2 and 3
// threads, fused or not, and on every FMA target the CPU has.
static void sketch_pass_matches_naive(void **) {
    const size_t m = 103, n = 77, ld_w = 80, cy = 34, ct = 22, ldy = sketch_stride(cy), ldt = sketch_stride(ct);
    assert_int_equal(ldy, 48);
    assert_int_equal(ldt, 32);
    std::vector<double> wd = randn(m * ld_w, 11), xd = randn(n * ldy, 12);
    std::vector<float> w(m * ld_w), x(n * ldy, 0.0f);
    for (size_t i = 0; i < w.size(); i++) w[i] = float(wd[i]);
    for (size_t j = 0; j < n; j++)
        for (size_t c = 0; c < cy; c++) x[j * ldy + c] = float(xd[j * ldy + c]);
    std::vector<float> part(sketch_partials_floats(n, ldt));
    auto run = [&](unsigned threads, std::vector<float> &y, std::vector<float> &xt) {
        y.assign(m * ldy, 0.0f);
        xt.assign(n * ldt, 0.0f);
        sketch_pass(w.data(), m, n, ld_w, x.data(), ldy, cy, y.data(), ldy, ct, xt.data(), ldt, part.data(), threads);
    };
    std::vector<float> y1, t1;
    run(1, y1, t1);
    double worst_y = 0, worst_t = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < cy; c++) {
            double s = 0, bound = 0;
            for (size_t j = 0; j < n; j++) {
                s += double(w[i * ld_w + j]) * double(x[j * ldy + c]);
                bound += std::fabs(double(w[i * ld_w + j]) * double(x[j * ldy + c]));
            }
            worst_y = std::max(worst_y, std::fabs(double(y1[i * ldy + c]) - s) / bound);
        }
    for (size_t j = 0; j < n; j++)
        for (size_t c = 0; c < ct; c++) {
            double s = 0, bound = 0;
            for (size_t i = 0; i < m; i++) {
                s += double(w[i * ld_w + j]) * double(y1[i * ldy + c]);
                bound += std::fabs(double(w[i * ld_w + j]) * double(y1[i * ldy + c]));
            }
            worst_t = std::max(worst_t, std::fabs(double(t1[j * ldt + c]) - s) / bound);
        }
    std::printf("sketch_pass (%s): max error / sum|terms|: W X %.3g, W^T Y %.3g\n", sketch_target(), worst_y, worst_t);
    assert_true(worst_y < 1e-5);  // f32 sums of <= 103 terms: n eps = 6e-6 at worst
    assert_true(worst_t < 1e-5);
    for (unsigned threads : {2u, 3u, 9u}) {
        std::vector<float> y, t;
        run(threads, y, t);
        assert_memory_equal(y.data(), y1.data(), y.size() * 4);
        assert_memory_equal(t.data(), t1.data(), t.size() * 4);
    }
    // Unfused: the product alone, then W^T Y with Y as the input: the same bytes.
    std::vector<float> y2(m * ldy, 0.0f), t2(n * ldt, 0.0f);
    sketch_pass(w.data(), m, n, ld_w, x.data(), ldy, cy, y2.data(), ldy, 0, nullptr, 0, nullptr, 2);
    assert_memory_equal(y2.data(), y1.data(), y2.size() * 4);
    sketch_pass(w.data(), m, n, ld_w, nullptr, 0, cy, y2.data(), ldy, ct, t2.data(), ldt, part.data(), 1);
    assert_memory_equal(t2.data(), t1.data(), t2.size() * 4);
    // Every target with FMA (AVX2 and up on x86): the same bytes.
    int tried = 0;
#if HWY_ARCH_X86
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        if (target > HWY_AVX2) continue;  // SSE2-SSE4: no FMA, two roundings (sketch.h)
        hwy::SetSupportedTargetsForTest(target);
        std::vector<float> y, t;
        run(2, y, t);
        if (std::memcmp(y.data(), y1.data(), y.size() * 4) || std::memcmp(t.data(), t1.data(), t.size() * 4))
            fail_msg("sketch_pass on %s gives other bytes", hwy::TargetName(target));
        tried++;
    }
    hwy::SetSupportedTargetsForTest(0);
#endif
    std::printf("sketch_pass: %d FMA targets give identical bytes\n", tried);
    // The double product (A U for the captured energy): against long double, any thread count.
    {
        const size_t c = 12, ld = sketch_stride(c);
        std::vector<double> xd2 = randn(n * ld, 13), yd1(m * ld, 0.0), yd2(m * ld, 0.0);
        sketch_product_f64(w.data(), m, n, ld_w, xd2.data(), ld, c, yd1.data(), ld, 1);
        sketch_product_f64(w.data(), m, n, ld_w, xd2.data(), ld, c, yd2.data(), ld, 3);
        assert_memory_equal(yd1.data(), yd2.data(), yd1.size() * 8);
        double worst = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t cc = 0; cc < c; cc++) {
                long double s = 0, bound = 0;
                for (size_t j = 0; j < n; j++) {
                    s += (long double)w[i * ld_w + j] * xd2[j * ld + cc];
                    bound += std::fabs((long double)w[i * ld_w + j] * xd2[j * ld + cc]);
                }
                worst = std::max(worst, double(std::fabs((long double)yd1[i * ld + cc] - s) / bound));
            }
        std::printf("sketch_product_f64: max error / sum|terms| %.3g\n", worst);
        assert_true(worst < 1e-14);  // n eps of double: 77 x 1.1e-16
    }
    // Refusals: a stride that is not a multiple of 16, X' wider than Y, no scratch.
    test::expect_error(STK_E_INVALID_ARGUMENT,
                       [&] { sketch_pass(w.data(), m, n, ld_w, x.data(), 40, cy, y2.data(), ldy, 0, nullptr, 0, nullptr, 1); });
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] {
        sketch_pass(w.data(), m, n, ld_w, x.data(), ldy, cy, y2.data(), ldy, cy + 1, t2.data(), ldy, part.data(), 1);
    });
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] {
        sketch_pass(w.data(), m, n, ld_w, x.data(), ldy, cy, y2.data(), ldy, ct, t2.data(), ldt, nullptr, 1);
    });
    test::expect_error(STK_E_INVALID_ARGUMENT,
                       [&] { sketch_pass(w.data(), m, n, n - 1, x.data(), ldy, cy, y2.data(), ldy, 0, nullptr, 0, nullptr, 1); });
}

// kernels/moments.h (stk calibrate's sums) against plain double loops over the definitions: the
// Gram's upper triangle (the lower left as it was) and the cross product over three row blocks
// (1,024 + 1,024 + 452) within float32 GEMM error; the causal pairs' M, written in float64
// throughout, against the explicit sum over every pair (t, s <= t) to 1e-12, B and L (float32
// GEMMs) to 1e-5; and every sum the same bytes at 1, 2 and 3 threads and on every Highway target.
// The f32 bit scans against one-value-at-a-time loops, with NaN / Inf / subnormals / values
// not exact in bfloat16 planted at every place of short arrays and at block edges of long ones,
// on every Highway target.
static void f32_bit_scans_match_loops(void **) {
    std::vector<float> base(5000);
    std::vector<double> g = randn(base.size(), 40);
    for (size_t i = 0; i < base.size(); i++) {  // bf16-exact values: the low 16 bits cleared
        float f = float(g[i]);
        uint32_t b;
        std::memcpy(&b, &f, 4);
        b &= 0xFFFF0000u;
        std::memcpy(&base[i], &b, 4);
    }
    auto first_loop = [](const float *x, size_t n) {
        for (size_t i = 0; i < n; i++)
            if (!std::isfinite(x[i])) return i;
        return n;
    };
    auto low_loop = [](const float *x, size_t n) {
        uint32_t r = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t b;
            std::memcpy(&b, x + i, 4);
            r |= b & 0xFFFFu;
        }
        return r;
    };
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 1e-45f, 1.0000001f, -3.4028235e38f};
    size_t cases = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(7), size_t(8), size_t(17), size_t(33), size_t(1023),
                         size_t(1024), size_t(1025), size_t(4099)}) {
            std::vector<float> x(base.begin(), base.begin() + ptrdiff_t(n));
            assert_int_equal(first_nonfinite_f32(x.data(), n), n);
            assert_int_equal(or_low16_f32(x.data(), n), 0);
            const size_t places[] = {0, 1, n / 2, 1023, 1024, n - 1};
            for (size_t p : places) {
                if (p >= n) continue;
                for (float sp : specials) {
                    std::vector<float> y = x;
                    y[p] = sp;
                    if (p + 5 < n) y[p + 5] = NAN;  // a later one does not matter
                    assert_int_equal(first_nonfinite_f32(y.data(), n), first_loop(y.data(), n));
                    assert_int_equal(or_low16_f32(y.data(), n), low_loop(y.data(), n));
                    cases++;
                }
            }
        }
    }
    hwy::SetSupportedTargetsForTest(0);
    assert_true(cases > 200);
}

// The scratch sizes are the only ones the C entry points allocate by: checked, bounded.
static void moment_scratch_is_bounded(void **) {
    assert_int_equal(moment_gram_scratch(576), 576 * 576);
    assert_int_equal(moment_cross_scratch(576, 1536), 576 * 1536);
    assert_int_equal(moment_causal_pairs_scratch(512, 576), 512 * 512 + 512 * 576);
    assert_int_equal(moment_causal_pairs_scratch(5000, 64), 1024 * 5000 + 1024 * 64);  // one block of queries
    assert_int_equal(moment_causal_pairs_scratch_f64(512, 576), 512 * 576);
    assert_int_equal(moment_gram_scratch(size_t(1) << 15), kMaxMomentScratch / 2);
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [] { moment_gram_scratch((size_t(1) << 15) * 2); }),
                    "scratch are above 2147483648");
    assert_contains(test::expect_error(STK_E_DIMS_OVERFLOW, [] { moment_cross_scratch(SIZE_MAX / 2, 3); }), "overflows");
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [] { moment_causal_pairs_scratch(size_t(1) << 22, 1); }),
                    "scratch are above");
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [] { moment_causal_pairs_scratch_f64(size_t(1) << 24, 1024); }),
                    "scratch are above");
    // Through the C entry point: refused before anything is allocated or read.
    float a = 1.0f;
    double acc = 0.0;
    assert_int_equal(stk_moment_gram(&a, 1, size_t(1) << 16, &acc, 1), STK_E_INVALID_ARGUMENT);
    assert_true(acc == 0.0);
}

static void moments_match_definitions(void **) {
    const size_t rows = 2500, n = 37, m = 11;
    std::vector<double> A = randn(rows * n, 11), Bd = randn(rows * m, 12);
    std::vector<float> a(A.begin(), A.end()), b(Bd.begin(), Bd.end());
    std::vector<double> g(n * n, -7.0), x(n * m, 0.5);
    std::vector<float> scratch(std::max(moment_gram_scratch(n), moment_cross_scratch(n, m)));
    moment_gram(a.data(), rows, n, g.data(), scratch.data(), 2);
    moment_cross(a.data(), b.data(), rows, n, m, x.data(), scratch.data(), 2);
    double gmax = 0, gerr = 0, xmax = 0, xerr = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double want = 0;
            for (size_t r = 0; r < rows; r++) want += double(a[r * n + i]) * double(a[r * n + j]);
            if (j < i) {
                assert_true(g[i * n + j] == -7.0);  // the lower triangle is not written
                continue;
            }
            gmax = std::max(gmax, std::fabs(want));
            gerr = std::max(gerr, std::fabs(g[i * n + j] - (-7.0 + want)));
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++) {
            double want = 0.5;
            for (size_t r = 0; r < rows; r++) want += double(a[r * n + i]) * double(b[r * m + j]);
            xmax = std::max(xmax, std::fabs(want));
            xerr = std::max(xerr, std::fabs(x[i * m + j] - want));
        }
    assert_true(gerr <= 1e-6 * gmax);
    assert_true(xerr <= 1e-6 * xmax);

    // causal pairs: 70 rows, d = 13 (a tail past the SIMD width), dq = 9, weights min(16, t+1)/(t+1)
    const size_t T = 70, d = 13, dq = 9;
    std::vector<double> X = randn(T * d, 13), Q = randn(T * dq, 14), K = randn(T * dq, 15), w(T);
    std::vector<float> xf(X.begin(), X.end()), qf(Q.begin(), Q.end()), kf(K.begin(), K.end());
    for (size_t t = 0; t < T; t++) w[t] = double(std::min<size_t>(16, t + 1)) / double(t + 1);
    const double scale = 0.125;
    std::vector<double> rm(d * d, 0), rb(d, 0), rl(2, 0);
    for (size_t t = 0; t < T; t++)
        for (size_t s = 0; s <= t; s++) {
            double l = 0;
            for (size_t j = 0; j < dq; j++) l += double(qf[t * dq + j]) * double(kf[s * dq + j]);
            l *= scale;
            rl[0] += w[t] * l;
            rl[1] += w[t] * l * l;
            for (size_t i = 0; i < d; i++) {
                const double pi = double(xf[t * d + i]) * double(xf[s * d + i]);
                rb[i] += w[t] * pi * l;
                for (size_t j = i; j < d; j++) rm[i * d + j] += w[t] * pi * (double(xf[t * d + j]) * double(xf[s * d + j]));
            }
        }
    std::vector<float> ps(moment_causal_pairs_scratch(T, d));
    std::vector<double> ps64(moment_causal_pairs_scratch_f64(T, d));
    auto run = [&](unsigned threads, std::vector<double> &om, std::vector<double> &ob, std::vector<double> &ol) {
        om.assign(d * d, 0);
        ob.assign(d, 0);
        ol.assign(2, 0);
        moment_causal_pairs(xf.data(), qf.data(), kf.data(), T, d, dq, scale, w.data(), om.data(), ob.data(), ol.data(), ps.data(),
                            ps64.data(), threads);
    };
    std::vector<double> om, ob, ol;
    run(1, om, ob, ol);
    double mmax = 0, merr = 0;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
            if (j < i) {
                assert_true(om[i * d + j] == 0.0);
                continue;
            }
            mmax = std::max(mmax, std::fabs(rm[i * d + j]));
            merr = std::max(merr, std::fabs(om[i * d + j] - rm[i * d + j]));
        }
    assert_true(merr <= 1e-12 * mmax);
    double bmax = 0, berr = 0;
    for (size_t i = 0; i < d; i++) {
        bmax = std::max(bmax, std::fabs(rb[i]));
        berr = std::max(berr, std::fabs(ob[i] - rb[i]));
    }
    assert_true(berr <= 1e-5 * bmax);
    assert_true(std::fabs(ol[0] - rl[0]) <= 1e-5 * std::fabs(rl[1]));
    assert_true(std::fabs(ol[1] - rl[1]) <= 1e-5 * rl[1]);
    for (unsigned threads : {2u, 3u}) {
        std::vector<double> m2, b2, l2;
        run(threads, m2, b2, l2);
        assert_memory_equal(m2.data(), om.data(), om.size() * 8);
        assert_memory_equal(b2.data(), ob.data(), ob.size() * 8);
        assert_memory_equal(l2.data(), ol.data(), ol.size() * 8);
    }
    int tried = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        std::vector<double> m2, b2, l2;
        run(2, m2, b2, l2);
        if (std::memcmp(m2.data(), om.data(), om.size() * 8) != 0) fail_msg("causal pairs on %s: other bytes", hwy::TargetName(target));
        tried++;
    }
    hwy::SetSupportedTargetsForTest(0);
    assert_true(tried >= 1);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_matches_naive),         cmocka_unit_test(gemm_bytes_do_not_depend_on_threads),
        cmocka_unit_test(gemm_refuses_bad_arguments), cmocka_unit_test(qr_is_gram_schmidt_with_positive_diagonal),
        cmocka_unit_test(eigen_lstsq_and_roots),      cmocka_unit_test(pinned_math_accuracy_and_targets),
        cmocka_unit_test(gaussian_streams),           cmocka_unit_test(elementwise_kernels),
        cmocka_unit_test(sketch_pass_matches_naive),  cmocka_unit_test(dot_rows_order),
        cmocka_unit_test(moments_match_definitions),
        cmocka_unit_test(moment_scratch_is_bounded),
        cmocka_unit_test(f32_bit_scans_match_loops),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
