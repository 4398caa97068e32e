// The reference runtime's per-token steps on the 7B shape (Qwen2-7B: d_model 3584, 28 layers,
// 28 heads x 128 = d_v 3584, r 512, r_v 12), on synthetic arrays in memory (no conversion of a
// 7B checkpoint needed): tokens per second of each step, and the bytes each step must read (and
// write) per token, its memory-bandwidth floor.  docs/benchmarks.md says how to read it.
//
//   build-test/bench/refrun_bench [tokens]     (default 64 tokens per step)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/prng.h"
#include "kernels/random.h"
#include "runtime/refrun.h"

using namespace stk;

namespace {

constexpr uint32_t kDModel = 3584, kDv = 3584, kR = 512, kRv = 12, kLayers = 28, kTopL = 12, kDeltaPerCol = 8;

std::vector<float> gaussians_f32(uint32_t module, size_t n, double scale) {
    std::vector<double> g(n);
    kernels::gaussians(stream_seed(0, module, 0), 0, n, g.data());
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = float(g[i] * scale);
    return f;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr int kReps = 5;  // every figure is the median of kReps runs

template <class F> double median_seconds(F &&run) {
    std::vector<double> t;
    for (int i = 0; i < kReps; i++) {
        auto t0 = std::chrono::steady_clock::now();
        run();
        t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    return t[kReps / 2];
}

// The floor, measured in the same run: this machine's bandwidth reading 256 MB and writing 256 MB
// (a copy, the pattern of a state that is read and written back), median of kReps.
double g_bandwidth = 0;

void measure_bandwidth() {
    std::vector<double> a(size_t(32) << 20, 1.0), b(size_t(32) << 20);
    const double s = median_seconds([&] { std::memcpy(b.data(), a.data(), a.size() * sizeof(double)); a[0] += b[1]; });
    g_bandwidth = 2.0 * a.size() * sizeof(double) / s;
    std::printf("floor: memcpy of 256 MB reads + writes %.1f GB/s (median of %d)\n", g_bandwidth / 1e9, kReps);
}

void report(const char *step, uint64_t tokens, double s, double read_bytes, double write_bytes) {
    const double floor_tps = g_bandwidth / (read_bytes + write_bytes);
    std::printf("%-28s %10.1f tokens/s  %9.3f ms/token  reads %8.2f MB/token  writes %8.2f MB/token  "
                "floor %9.1f tokens/s  (%.2fx the floor's time)\n",
                step, tokens / s, 1e3 * s / tokens, read_bytes / 1e6, write_bytes / 1e6, floor_tps, (s / tokens) * floor_tps);
}

}  // namespace

int main(int argc, char **argv) {
    const uint64_t T = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {  // a figure taken under load is not a figure
        char buf[128] = {0};
        if (std::fgets(buf, sizeof buf, f)) std::printf("load average at start: %s", buf);
        std::fclose(f);
    }
    measure_bandwidth();
    // One layer's arrays (the steps read one layer at a time; n_layers only sizes the index).
    RefrunModel m;
    m.tag = 0x7b;
    m.n_layers = 1;
    m.d_model = kDModel;
    m.d_v = kDv;
    m.r = kR;
    m.r_v = kRv;
    m.tau = std::sqrt(128.0);
    m.beta_floor = 1e-3;
    m.eps = 1e-8;
    const double dscale = 1.0 / std::sqrt(double(kDModel));  // W_K column scale of a trained model
    std::vector<float> W = gaussians_f32(3, size_t(kR) * kDModel, dscale), mu(kR, 0.0f), sig2(kR, 1.0f),
                       R0(size_t(kR) * kDv, 0.0f), s0(kR, 0.0f);
    std::vector<float> H = gaussians_f32(4, size_t(kR) * kRv, 1 / std::sqrt(double(kR))),
                       U = gaussians_f32(5, size_t(kDv) * kRv, 1 / std::sqrt(double(kDv))),
                       Z = gaussians_f32(6, size_t(kRv) * kRv, 1.0);
    m.prf_w = W.data();
    m.mu = mu.data();
    m.sig2 = sig2.data();
    m.r_init = R0.data();
    m.s_init = s0.data();
    m.diag.assign(kDModel, dscale * dscale);
    m.inv_sig.assign(kR, 1.0);
    m.mu_d.assign(kR, 0.0);
    m.has_prf = true;
    m.ov_h = H.data();
    m.ov_u = U.data();
    m.ov_z = Z.data();
    m.has_overlays = true;
    m.sections = {SosSection{1, 0, 2 * 0.995 * std::cos(0.05), -0.995 * 0.995}};  // RoPE's AR(2), K = 1
    m.regs0 = {SosState{}};
    m.has_memory = true;
    // The dictionary: every (unit, sign, j) with top-L base entries plus a few delta entries.
    m.n_units = kLayers;
    const uint64_t per_col = kTopL + kDeltaPerCol;
    m.n_entries = uint64_t(kLayers) * 2 * kDModel * per_col;
    m.has_linear = true;
    refrun_sizes(m);
    std::printf("7B shape (Qwen2-7B): d_model %u, d_v %u, r %u, r_v %u, %u FFN units, %llu dictionary entries "
                "(%llu per column); %llu tokens per step\n",
                kDModel, kDv, kR, kRv, kLayers, (unsigned long long)m.n_entries, (unsigned long long)per_col,
                (unsigned long long)T);
    std::printf("buffers: PRF state %.1f MB (memory-filtered %.1f MB), scratch %.1f KB, FFN index %.1f MB\n",
                m.prf_state_bytes / 1e6, m.prf_state_bytes_memory / 1e6, m.scratch_bytes / 1e3, m.ffn_index_bytes / 1e6);

    std::vector<float> X = gaussians_f32(7, size_t(T) * kDModel, 1.0), V = gaussians_f32(8, size_t(T) * kDv, 1.0),
                       out(size_t(T) * kDv);
    std::vector<double> scratch(m.scratch_bytes / 8);
    const double w_bytes = 4.0 * kR * kDModel, state_bytes = 8.0 * (double(kR) * kDv + kR);
    for (uint32_t flags : {0u, kPrfMemory}) {
        const size_t sb = flags ? m.prf_state_bytes_memory : m.prf_state_bytes;
        std::vector<double> state(sb / 8);
        const double s = median_seconds([&] {
            prf_reset(m, 0, flags, state.data(), sb);
            prf_run(m, 0, state.data(), sb, T, X.data(), V.data(), out.data(), scratch.data(), m.scratch_bytes);
        });
        // Per token: prf_W once (key and query share x), the state read and written by the key,
        // read again by the query; memory-filtered, the registers too.
        const double regs = flags ? 16.0 * (double(kR) * kDv + kR) : 0;
        report(flags ? "prf_run (memory-filtered)" : "prf_run (add_key + read)", T, s, w_bytes + 2 * state_bytes + regs,
               state_bytes + regs);
    }
    {
        const double s = median_seconds([&] { overlay_run(m, 0, T, X.data(), out.data(), scratch.data(), m.scratch_bytes); });
        report("overlay_delta", T, s, w_bytes + 4.0 * (double(kR) * kRv + double(kDv) * kRv + kRv * kRv), 0);
    }
    {
        std::vector<uint64_t> keys;
        std::vector<float> vals;
        keys.reserve(m.n_entries);
        vals.reserve(m.n_entries);
        uint64_t x = 0x1234;
        for (uint64_t u = 0; u < kLayers; u++)
            for (uint64_t s = 0; s < 2; s++)
                for (uint64_t j = 0; j < kDModel; j++)
                    for (uint64_t k = 0; k < per_col; k++) {
                        const uint64_t i = (j * 2654435761ull + k * 40503ull) % kDModel;  // distinct per column
                        keys.push_back(s << 63 | u << 48 | i << 24 | j);
                        x = x * 6364136223846793005ull + 1442695040888963407ull;
                        vals.push_back(float(int64_t(x >> 40) - (1ll << 23)) / float(1 << 23));
                    }
        std::vector<uint64_t> index(m.ffn_index_bytes / 8);
        auto t0 = std::chrono::steady_clock::now();
        ffn_index_from(m, index.data(), m.ffn_index_bytes, keys.data(), vals.data(), keys.size());
        std::printf("ffn index build (synthetic keys, no lookups): %.2f s\n", seconds_since(t0));
        std::vector<float> y(size_t(T) * kDModel);
        const double s = median_seconds([&] { ffn_apply(m, index.data(), m.ffn_index_bytes, 3, T, X.data(), y.data()); });
        // Per token: one sign's entries of every column of one unit, and their offsets.
        report("ffn_apply (one unit)", T, s, 8.0 * kDModel * per_col + 8.0 * 2 * kDModel + 4.0 * kDModel,
               4.0 * kDModel);
    }
    {
        std::vector<double> st(m.memory_state_bytes / 8);
        memory_reset(m, st.data(), m.memory_state_bytes);
        const uint64_t n = T * 100000;
        float y = 0, acc = 0;
        const double s = median_seconds([&] {
            memory_reset(m, st.data(), m.memory_state_bytes);
            for (uint64_t t = 0; t < n; t++) {
                memory_step_state(m, st.data(), m.memory_state_bytes, t == 0 ? 1.0f : 0.0f, &y);
                acc += y;
            }
        });
        report("memory_step", n, s, 32.0 * m.sections.size(), 16.0 * m.sections.size());
        if (!std::isfinite(acc)) std::printf("(non-finite)\n");
    }
    std::printf("bridge (stk_lookup HUB): one row read of %u bytes per token; see bench/bridge_bench.cc\n", 2 * 8 * 2);
    return 0;
}
