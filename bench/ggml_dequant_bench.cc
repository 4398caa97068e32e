// Dequantisation throughput of every tensor of a GGUF (format/ggml_dequant: the dispatched
// Highway kernels and the scalar reference) against memcpy of the f32 output, median of R runs
// after one warm-up.  bench/ggml_dequant_bench.py writes the GGUF (one tensor per type, random
// blocks) and times gguf-py's numpy dequantize on the same bytes as the peer.
//   build/bench/ggml_dequant_bench FILE.gguf [R]
// One JSON object per tensor on stdout: type, elements, seconds (median) of memcpy (4 bytes per
// element, buffer to buffer), the kernels and the reference; the kernels' bytes are checked
// against the reference's.
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "format/ggml_dequant.h"
#include "ingest/gguf.h"

using namespace stk;

// CPU time of this thread: on a shared machine the wall clock counts other processes' slices.
template <class F>
static double thread_seconds(F &&f) {
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    f();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return double(b.tv_sec - a.tv_sec) + 1e-9 * double(b.tv_nsec - a.tv_nsec);
}

template <class F>
static double median_seconds(int runs, F &&f) {
    f();  // warm-up: page faults, frequency
    std::vector<double> t;
    for (int r = 0; r < runs; r++) {
        t.push_back(thread_seconds([&] { f(); }));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: ggml_dequant_bench FILE.gguf [RUNS]\n");
        return 2;
    }
    const int runs = argc > 2 ? std::atoi(argv[2]) : 7;
    GgufFile g(argv[1]);
    std::fprintf(stderr, "Highway target %s\n", ggml::ggml_dequant_target_name().c_str());
    for (const GgufTensorInfo &t : g.tensors()) {
        if (!ggml::ggml_dequant_supported(t.type)) continue;
        const uint64_t n = t.n_elements, blocks = n / ggml::ggml_dequant_block(t.type);
        // Private copy of the stored bytes (no page faults of the mapping in the timed loop).
        std::vector<uint8_t> src(g.tensor_data(t), g.tensor_data(t) + t.n_bytes);
        std::vector<float> out(n), ref(n), a(n), b(n);
        const double t_copy = median_seconds(runs, [&] { std::memcpy(b.data(), a.data(), n * 4); });
        const double t_kernel = median_seconds(runs, [&] { ggml::ggml_dequantize(t.type, src.data(), blocks, out.data()); });
        const double t_ref =
            median_seconds(runs, [&] { ggml::ggml_dequantize_reference(t.type, src.data(), blocks, ref.data()); });
        const bool same = std::memcmp(out.data(), ref.data(), n * 4) == 0;
        std::printf(
            "{\"type\": \"%s\", \"elements\": %llu, \"stored_bytes\": %llu, \"memcpy_s\": %.6g, \"kernel_s\": %.6g, "
            "\"reference_s\": %.6g, \"same_bytes\": %s}\n",
            ggml_type_name(t.type).c_str(), (unsigned long long)n, (unsigned long long)t.n_bytes, t_copy, t_kernel, t_ref,
            same ? "true" : "false");
        std::fflush(stdout);
        if (!same) return 1;
    }
    return 0;
}
