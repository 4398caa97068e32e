// Packing / unpacking throughput of every .lwt dtype (format/lowbit.cc with the Highway kernels
// of format/lowbit_kernels.cc, and the scalar reference) against memory-bandwidth floors
// measured in the same run: N f32 values (default 16 Mi = 64 MB, far beyond the caches), median
// of R runs (default 7) after one warm-up.
//   build/bench/lwt_bench [N] [R]
// Throughput is memory traffic: bytes read + bytes written per second (pack reads 4 N bytes and
// writes the packed size; unpack the reverse).  Floors: memcpy of the f32 buffer (reads and
// writes 4 N bytes) and a streaming read (a sum of the f32 buffer).  "x memcpy" is the ratio of a
// kernel's traffic rate to memcpy's: >= 0.5 is the target (50 % of memory bandwidth).
// Then the same from bf16 bits (export packs a bf16 checkpoint straight from its mapping): the
// values rounded to bf16, 2 N bytes read; and the statistics pass (lwt_stats_add over f32,
// lwt_stats_add_bf16 over the bits; min/max, and the exact |v| sum for ternary), which only
// reads: against the streaming read ("x read").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "format/lowbit.h"
#include "ingest/dtype_convert.h"
#include "format/lowbit_kernels.h"

using namespace stk;

template <class F>
static double median_seconds(int runs, F &&f) {
    f();  // warm-up: page faults, frequency
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
    int runs = argc > 2 ? std::atoi(argv[2]) : 7;
    std::vector<float> v(n), back(n), copy(n);
    uint64_t s = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        v[i] = float(double(s >> 11) * 0x1p-53 - 0.5) * 0.04f;
    }
    const double f32_bytes = double(n) * 4;
    double t_copy = median_seconds(runs, [&] { std::memcpy(copy.data(), v.data(), n * 4); });
    volatile float sink = 0;
    double t_read = median_seconds(runs, [&] {
        float acc[16] = {};
        for (uint64_t i = 0; i + 16 <= n; i += 16)
            for (int k = 0; k < 16; k++) acc[k] += v[i + k];
        sink = acc[0] + acc[15];
    });
    const double bw_copy = 2 * f32_bytes / t_copy / 1e9;
    std::printf("n=%llu f32 values (%.3f GB), median of %d runs, Highway target %s\n", (unsigned long long)n, f32_bytes / 1e9,
                runs, kernels::lowbit_target_name().c_str());
    std::printf("floors: memcpy %.2f GB/s of traffic (read + write), streaming read %.2f GB/s\n", bw_copy,
                f32_bytes / t_read / 1e9);
    std::printf("%-9s %9s %8s %9s %8s | %9s %8s %9s %8s  (GB/s of traffic, x memcpy)\n", "dtype", "pack", "x copy", "unpack",
                "x copy", "pack ref", "x copy", "unpk ref", "x copy");
    std::vector<uint8_t> packed(n * 4), ref(n * 4);
    for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++) {
        LwtDType t = LwtDType(c);
        LwtQuant q = lwt_choose_quant(t, v.data(), n);
        uint64_t nb = 0;
        lwt_packed_bytes(t, n, &nb);
        const double traffic = f32_bytes + double(nb);
        double tp = median_seconds(runs, [&] { lwt_pack(t, v.data(), n, q, packed.data()); });
        double tu = median_seconds(runs, [&] { lwt_unpack(t, packed.data(), n, q, back.data()); });
        double tps = median_seconds(runs, [&] { lwt_pack_scalar(t, v.data(), n, q, ref.data()); });
        double tus = median_seconds(runs, [&] { lwt_unpack_scalar(t, packed.data(), n, q, copy.data()); });
        bool same = std::memcmp(packed.data(), ref.data(), nb) == 0 && std::memcmp(back.data(), copy.data(), n * 4) == 0;
        auto rate = [&](double sec) { return traffic / sec / 1e9; };
        std::printf("%-9s %9.2f %8.2f %9.2f %8.2f | %9.2f %8.2f %9.2f %8.2f%s\n", lwt_dtype_name(t), rate(tp), rate(tp) / bw_copy,
                    rate(tu), rate(tu) / bw_copy, rate(tps), rate(tps) / bw_copy, rate(tus), rate(tus) / bw_copy,
                    same ? "" : "  MISMATCH with the scalar reference");
        if (!same) return 1;
    }
    // From bf16 bits: pack (checked against lwt_pack of the converted values) and statistics.
    std::vector<uint16_t> h(n);
    for (uint64_t i = 0; i < n; i++) {
        h[i] = f32_to_bf16_rne(v[i]);
        v[i] = bf16_to_f32(h[i]);
    }
    const uint8_t *hb = reinterpret_cast<const uint8_t *>(h.data());
    const double read_bw = f32_bytes / t_read / 1e9;
    std::printf("\nfrom bf16 bits (%.3f GB):\n%-9s %9s %8s | %12s %8s | %12s %8s  (GB/s of traffic)\n", double(n) * 2 / 1e9,
                "dtype", "pack", "x copy", "stats f32", "x read", "stats bf16", "x read");
    for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++) {
        LwtDType t = LwtDType(c);
        if (lwt_dtype_is_float(t)) continue;
        LwtQuant q = lwt_choose_quant(t, v.data(), n);
        uint64_t nb = 0;
        lwt_packed_bytes(t, n, &nb);
        double tp = median_seconds(runs, [&] { lwt_pack_bf16(t, hb, n, q, packed.data()); });
        lwt_pack(t, v.data(), n, q, ref.data());
        if (std::memcmp(packed.data(), ref.data(), nb) != 0) {
            std::printf("%s: MISMATCH between lwt_pack_bf16 and lwt_pack\n", lwt_dtype_name(t));
            return 1;
        }
        double tsf = median_seconds(runs, [&] {
            LwtQuantStats st;
            lwt_stats_add(t, &st, v.data(), n);
        });
        double tsb = median_seconds(runs, [&] {
            LwtQuantStats st;
            lwt_stats_add_bf16(t, &st, hb, n);
        });
        const double pack_rate = (double(n) * 2 + double(nb)) / tp / 1e9, sf = f32_bytes / tsf / 1e9,
                     sb = double(n) * 2 / tsb / 1e9;
        std::printf("%-9s %9.2f %8.2f | %12.2f %8.2f | %12.2f %8.2f\n", lwt_dtype_name(t), pack_rate, pack_rate / bw_copy, sf,
                    sf / read_bw, sb, sb / read_bw);
    }
    return 0;
}
