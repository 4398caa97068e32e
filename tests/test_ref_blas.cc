// kernels/ref_blas.cc against the reference BLAS itself: Debian's reference libblas.so.3 (the
// same sources as the static archive the library would otherwise link) is loaded by its own path
// and every routine we replace is called on the same inputs on both sides; the outputs must be
// the same bits (NaNs only as NaN: IEEE leaves their payload to the operand order).  Every case
// runs under every Highway target this CPU supports.  Then dsyev, the routine the replacements
// serve, through the library against the reference liblapack.so.3 over the reference BLAS.
#include <dlfcn.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/linalg.h"
#include "kernels/ref_blas.h"
#include "test_util.h"

namespace {

using symv_fn = decltype(&dsymv_);
using syr2k_fn = decltype(&dsyr2k_);
using gemv_fn = decltype(&dgemv_);
using syev_fn = void (*)(const char *, const char *, const int *, double *, const int *, double *, double *, const int *,
                         int *, size_t, size_t);

struct Reference {
    symv_fn symv = nullptr;
    syr2k_fn syr2k = nullptr;
    gemv_fn gemv = nullptr;
    syev_fn syev = nullptr;
};

Reference load_reference() {
    Reference r;
    // RTLD_GLOBAL: liblapack.so.3 below then binds its BLAS calls to this very library.
    void *blas = dlopen(STK_REF_BLAS_SO, RTLD_NOW | RTLD_GLOBAL);
    if (!blas) fail_msg("cannot load the reference BLAS %s: %s", STK_REF_BLAS_SO, dlerror());
    r.symv = reinterpret_cast<symv_fn>(dlsym(blas, "dsymv_"));
    r.syr2k = reinterpret_cast<syr2k_fn>(dlsym(blas, "dsyr2k_"));
    r.gemv = reinterpret_cast<gemv_fn>(dlsym(blas, "dgemv_"));
    void *lapack = dlopen(STK_REF_LAPACK_SO, RTLD_NOW | RTLD_LOCAL);
    if (!lapack) fail_msg("cannot load the reference LAPACK %s: %s", STK_REF_LAPACK_SO, dlerror());
    r.syev = reinterpret_cast<syev_fn>(dlsym(lapack, "dsyev_"));
    assert_non_null(r.symv);
    assert_non_null(r.syr2k);
    assert_non_null(r.gemv);
    assert_non_null(r.syev);
    return r;
}

const Reference &reference() {
    static const Reference r = load_reference();
    return r;
}

// Values with the cases the reference treats specially: exact zeros (dsyr2k and dgemv skip a
// column whose coefficients are zero, which an infinity elsewhere makes observable), signed
// zeros, infinities, a NaN.
std::vector<double> values(size_t n, std::mt19937_64 &rng, bool specials) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::uniform_int_distribution<int> pick(0, 99);
    std::vector<double> v(n);
    for (double &x : v) {
        const int p = pick(rng);
        if (!specials || p >= 12)
            x = u(rng);
        else if (p < 6)
            x = 0.0;
        else if (p < 8)
            x = -0.0;
        else if (p < 10)
            x = p == 8 ? INFINITY : -INFINITY;
        else if (p < 11)
            x = NAN;
        else
            x = u(rng) * 1e300;
    }
    return v;
}

// Same bits, or both NaN.
void assert_same(const std::vector<double> &ours, const std::vector<double> &ref, const char *what) {
    assert_int_equal(ours.size(), ref.size());
    for (size_t i = 0; i < ours.size(); i++) {
        if (std::isnan(ours[i]) && std::isnan(ref[i])) continue;
        if (std::memcmp(&ours[i], &ref[i], sizeof(double)) != 0)
            fail_msg("%s: element %zu is %.17g here, %.17g in the reference BLAS", what, i, ours[i], ref[i]);
    }
}

template <class F>
void every_target(F &&f) {
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        f();
    }
    hwy::SetSupportedTargetsForTest(0);
}

void symv_matches_reference(void **) {
    const Reference &r = reference();
    std::mt19937_64 rng(1);
    size_t cases = 0;
    every_target([&] {
        for (const char *uplo : {"L", "U", "l", "u"})
            for (int n : {0, 1, 2, 3, 7, 8, 9, 16, 17, 33, 70})
                for (int incx : {1, 2, -1, -3})
                    for (int incy : {1, 3, -2})
                        for (double alpha : {0.0, 1.0, -1.0, 0.3})
                            for (double beta : {0.0, 1.0, 0.7})
                                for (bool specials : {false, true}) {
                                    const int lda = n + 3;
                                    const std::vector<double> a = values(size_t(lda) * size_t(n ? n : 1), rng, specials),
                                                              x = values(size_t(n ? n : 1) * size_t(std::abs(incx)), rng,
                                                                         specials);
                                    std::vector<double> y = values(size_t(n ? n : 1) * size_t(std::abs(incy)), rng, false),
                                                        y_ref = y;
                                    dsymv_(uplo, &n, &alpha, a.data(), &lda, x.data(), &incx, &beta, y.data(), &incy, 1);
                                    r.symv(uplo, &n, &alpha, a.data(), &lda, x.data(), &incx, &beta, y_ref.data(), &incy, 1);
                                    assert_same(y, y_ref, "dsymv");
                                    cases++;
                                }
    });
    assert_true(cases >= 4 * 11 * 4 * 3 * 4 * 3 * 2);
}

void syr2k_matches_reference(void **) {
    const Reference &r = reference();
    std::mt19937_64 rng(2);
    every_target([&] {
        for (const char *uplo : {"L", "U"})
            for (const char *trans : {"N", "T", "C", "n"})
                for (int n : {0, 1, 2, 5, 8, 17, 40})
                    for (int k : {0, 1, 3, 32, 33, 70})
                        for (double alpha : {0.0, 1.0, -1.0, 0.6})
                            for (double beta : {0.0, 1.0, 0.4})
                                for (bool specials : {false, true}) {
                                    const bool nt = trans[0] == 'N' || trans[0] == 'n';
                                    const int rows = nt ? n : k, cols = nt ? k : n;
                                    const int lda = std::max(1, rows) + 2, ldb = std::max(1, rows) + 5, ldc = n + 1;
                                    const std::vector<double> a = values(size_t(lda) * size_t(cols ? cols : 1), rng, specials),
                                                              b = values(size_t(ldb) * size_t(cols ? cols : 1), rng, specials);
                                    std::vector<double> c = values(size_t(ldc) * size_t(n ? n : 1), rng, false), c_ref = c;
                                    dsyr2k_(uplo, trans, &n, &k, &alpha, a.data(), &lda, b.data(), &ldb, &beta, c.data(),
                                            &ldc, 1, 1);
                                    r.syr2k(uplo, trans, &n, &k, &alpha, a.data(), &lda, b.data(), &ldb, &beta,
                                            c_ref.data(), &ldc, 1, 1);
                                    assert_same(c, c_ref, "dsyr2k");
                                }
    });
}

void gemv_matches_reference(void **) {
    const Reference &r = reference();
    std::mt19937_64 rng(3);
    every_target([&] {
        for (const char *trans : {"N", "T", "C", "t"})
            for (int m : {0, 1, 5, 17, 40})
                for (int n : {0, 1, 7, 8, 9, 31})
                    for (int incx : {1, 2, -1, 41})
                        for (int incy : {1, 2, -1})
                            for (double alpha : {0.0, 1.0, -1.0, 0.45})
                                for (double beta : {0.0, 1.0, 0.25})
                                    for (bool specials : {false, true}) {
                                        const bool nt = trans[0] == 'N';
                                        const int lenx = nt ? n : m, leny = nt ? m : n, lda = std::max(1, m) + 1;
                                        const std::vector<double> a = values(size_t(lda) * size_t(n ? n : 1), rng, specials),
                                                                  x = values(size_t(lenx ? lenx : 1) * size_t(std::abs(incx)),
                                                                             rng, specials);
                                        std::vector<double> y = values(size_t(leny ? leny : 1) * size_t(std::abs(incy)),
                                                                       rng, false),
                                                            y_ref = y;
                                        dgemv_(trans, &m, &n, &alpha, a.data(), &lda, x.data(), &incx, &beta, y.data(),
                                               &incy, 1);
                                        r.gemv(trans, &m, &n, &alpha, a.data(), &lda, x.data(), &incx, &beta,
                                               y_ref.data(), &incy, 1);
                                        assert_same(y, y_ref, "dgemv");
                                    }
    });
}

// dsyev through the library (LAPACK linked statically, over these replacements) against the
// reference shared LAPACK over the reference shared BLAS: the same eigenvalue bits, at the sizes
// where dsytrd runs blocked (n above its crossover of 32) and unblocked.
void syev_matches_reference(void **) {
    const Reference &r = reference();
    std::mt19937_64 rng(4);
    every_target([&] {
        for (int n : {5, 31, 97, 200}) {
            const std::vector<double> f = values(size_t(n) * size_t(n + 7), rng, false);
            std::vector<double> g(size_t(n) * size_t(n));
            for (int i = 0; i < n; i++)  // a Gram matrix, as overlays_build's
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int p = 0; p < n + 7; p++) s += f[size_t(i) * size_t(n + 7) + size_t(p)] * f[size_t(j) * size_t(n + 7) + size_t(p)];
                    g[size_t(i) * size_t(n) + size_t(j)] = s;
                }
            const size_t lwork = stk::kernels::sym_eig_workspace(size_t(n));
            const size_t un = static_cast<size_t>(n);
            std::vector<double> a = g, w(un), work(lwork), a_ref = g, w_ref(un), work_ref(lwork);
            stk::kernels::symmetric_eigen(size_t(n), a.data(), size_t(n), w.data(), false, work.data(), lwork);
            const int lw = int(lwork);
            int info = -1;
            r.syev("N", "L", &n, a_ref.data(), &n, w_ref.data(), work_ref.data(), &lw, &info, 1, 1);
            assert_int_equal(info, 0);
            assert_same(w, w_ref, "dsyev eigenvalues");
        }
    });
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(symv_matches_reference),
        cmocka_unit_test(syr2k_matches_reference),
        cmocka_unit_test(gemv_matches_reference),
        cmocka_unit_test(syev_matches_reference),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
