// The decode GEMV kernel alone (kernels/dot.h) against the memory floor of the same run
// (docs/benchmarks.md "LM runtime", third round).
//
//   build/bench/dot_bench [passes=7]
//
// One token's matrices of SmolLM2-135M as bf16 (30 layers of q 576x576, k and v 192x576, o
// 576x576, gate and up 1536x576, down 576x1536, then the 49,152x576 head; each its own
// allocation, 269 MB) read by dot_rows_bf16 matrix by matrix on one thread; the floor: memchr()
// over one buffer of the same bytes (glibc's AVX2 read loop, as lm_bench's bandwidth).  Prints
// the median GB/s of each and their ratio; the load average at the start.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/dot.h"

using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
    const int passes = argc > 1 ? std::atoi(argv[1]) : 7;
    if (passes < 1) return std::fprintf(stderr, "usage: dot_bench [passes >= 1]\n"), 2;
    struct Matrix {
        size_t rows, cols;
        std::vector<uint16_t> w;
    };
    const size_t D = 576, F = 1536, V = 49152;
    std::vector<Matrix> ms;
    for (int l = 0; l < 30; l++)
        for (auto [r, c] : {std::pair{D, D}, {192, D}, {192, D}, {D, D}, {F, D}, {F, D}, {D, F}})
            ms.push_back({r, c, std::vector<uint16_t>(r * c, 0x3f00)});
    ms.push_back({V, D, std::vector<uint16_t>(V * D, 0x3f00)});
    size_t bytes = 0;
    for (const Matrix &m : ms) bytes += m.w.size() * 2;
    std::vector<uint8_t> flat(bytes, 0);
    std::vector<float> x(F, 0.5f), y(V);
    std::vector<double> tk, tm;
    double load = 0;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &load) != 1) load = -1;
        std::fclose(f);
    }
    for (int p = 0; p <= passes; p++) {  // pass 0 warms (pages touched)
        auto t0 = Clock::now();
        for (const Matrix &m : ms) stk::kernels::dot_rows_bf16(m.w.data(), m.cols, m.rows, x.data(), m.cols, y.data());
        const double k = std::chrono::duration<double>(Clock::now() - t0).count();
        t0 = Clock::now();
        volatile bool found = std::memchr(flat.data(), 1, flat.size()) != nullptr;
        (void)found;
        const double c = std::chrono::duration<double>(Clock::now() - t0).count();
        if (p) tk.push_back(k), tm.push_back(c);
    }
    std::sort(tk.begin(), tk.end());
    std::sort(tm.begin(), tm.end());
    const double gk = double(bytes) / tk[tk.size() / 2] / 1e9, gm = double(bytes) / tm[tm.size() / 2] / 1e9;
    std::printf("load at start %.2f; %zu matrices, %.1f MB bf16, %d passes (median)\n", load, ms.size(), double(bytes) / 1e6, passes);
    std::printf("dot_rows_bf16 %.2f GB/s, memchr %.2f GB/s: %.2fx the floor\n", gk, gm, gk / gm);
    return 0;
}
