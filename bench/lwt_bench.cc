// Packing / unpacking throughput of every .lwt dtype (format/lowbit.cc) against a memcpy floor
// measured in the same run: N f32 values (default 16 Mi), median of R runs (default 5).
//   build/bench/lwt_bench [N] [R]
// Prints, per dtype: pack and unpack in GB/s of f32 data (4 bytes per element), and the ratio to
// memcpy of the same f32 buffer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "format/lowbit.h"

using namespace stk;

template <class F>
static double median_seconds(int runs, F &&f) {
    std::vector<double> t;
    for (int r = 0; r < runs; r++) {
        auto a = std::chrono::steady_clock::now();
        f();
        auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (16ull << 20);
    int runs = argc > 2 ? std::atoi(argv[2]) : 5;
    std::vector<float> v(n), back(n), copy(n);
    uint64_t s = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        v[i] = float(double(s >> 11) * 0x1p-53 - 0.5) * 0.04f;
    }
    const double gb = double(n) * 4 / 1e9;
    double t_copy = median_seconds(runs, [&] { std::memcpy(copy.data(), v.data(), n * 4); });
    std::printf("n=%llu f32 values (%.3f GB), median of %d runs\n", (unsigned long long)n, gb, runs);
    std::printf("memcpy floor: %.2f GB/s\n", gb / t_copy);
    std::printf("%-9s %10s %8s %10s %8s\n", "dtype", "pack GB/s", "x copy", "unpack", "x copy");
    std::vector<uint8_t> packed(n * 4);
    for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++) {
        LwtDType t = LwtDType(c);
        LwtQuant q = lwt_choose_quant(t, v.data(), n);
        double tp = median_seconds(runs, [&] { lwt_pack(t, v.data(), n, q, packed.data()); });
        double tu = median_seconds(runs, [&] { lwt_unpack(t, packed.data(), n, q, back.data()); });
        std::printf("%-9s %10.2f %8.2f %10.2f %8.2f\n", lwt_dtype_name(t), gb / tp, t_copy / tp, gb / tu, t_copy / tu);
    }
    return 0;
}
