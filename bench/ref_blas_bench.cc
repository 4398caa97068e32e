// dsyev (eigenvalues only, the call overlays_build makes per layer) through the library, whose
// dsymv / dsyr2k / dgemv are kernels/ref_blas.cc's, against the reference LAPACK over the
// reference BLAS (the shared libraries, loaded by their own paths) on the same Gram matrix in the
// same run: seconds per call (median of RUNS, one thread), the ratio, and whether the eigenvalues
// are the same bits.
//   ref_blas_bench [n=576] [runs=7]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/linalg.h"

using syev_fn = void (*)(const char *, const char *, const int *, double *, const int *, double *, double *, const int *,
                         int *, size_t, size_t);

int main(int argc, char **argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) : 576, runs = argc > 2 ? std::atoi(argv[2]) : 7;
    if (n <= 0 || runs <= 0) return 2;
    if (!dlopen(STK_REF_BLAS_SO, RTLD_NOW | RTLD_GLOBAL)) return std::fprintf(stderr, "%s\n", dlerror()), 1;
    void *lapack = dlopen(STK_REF_LAPACK_SO, RTLD_NOW | RTLD_LOCAL);
    if (!lapack) return std::fprintf(stderr, "%s\n", dlerror()), 1;
    auto ref_syev = reinterpret_cast<syev_fn>(dlsym(lapack, "dsyev_"));
    // A Gram matrix of a random n x 2n matrix (W_O's shape class), column-major.
    std::mt19937_64 rng(5);
    std::normal_distribution<double> g;
    std::vector<double> f(size_t(n) * 2 * size_t(n)), gram(size_t(n) * size_t(n));
    for (double &v : f) v = g(rng);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < 2 * n; p++) s += f[size_t(i) * 2 * n + p] * f[size_t(j) * 2 * n + p];
            gram[size_t(i) * n + j] = s;
        }
    const size_t lwork = stk::kernels::sym_eig_workspace(size_t(n));
    const size_t un = static_cast<size_t>(n);
    std::vector<double> a(gram.size()), w(un), w_ref(un), work(lwork);
    std::vector<double> ours, ref;
    for (int r = 0; r < runs; r++) {
        a = gram;
        auto t0 = std::chrono::steady_clock::now();
        stk::kernels::symmetric_eigen(size_t(n), a.data(), size_t(n), w.data(), false, work.data(), lwork);
        ours.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        a = gram;
        const int lw = int(lwork);
        int info = 0;
        t0 = std::chrono::steady_clock::now();
        ref_syev("N", "L", &n, a.data(), &n, w_ref.data(), work.data(), &lw, &info, 1, 1);
        ref.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (info != 0) return std::fprintf(stderr, "reference dsyev info %d\n", info), 1;
    }
    std::sort(ours.begin(), ours.end());
    std::sort(ref.begin(), ref.end());
    const double mo = ours[ours.size() / 2], mr = ref[ref.size() / 2];
    const bool same = std::memcmp(w.data(), w_ref.data(), w.size() * sizeof(double)) == 0;
    std::printf("dsyev n=%d runs=%d: library %.4f s, reference %.4f s, %.2fx faster; eigenvalues %s\n", n, runs, mo, mr,
                mr / mo, same ? "the same bits" : "DIFFER");
    return same ? 0 : 1;
}
