// The FFN collapse's GEMMs against BLIS sgemm peak, measured in the same run on the same shape.
//   build/bench/ffn_bench [d h reps threads]     (defaults 1024 2752 5 2: Llama-7B's h/d ratio)
//   build/bench/ffn_bench --acceptance <generation dir> <model dir>   (prints the 16.2 rows)
// Per FFN unit the collapse runs three products of shape (d x h) (h x d): S = |W2| |W1| (both
// operands transformed while packing), M+ and M- (B transformed).  Reported: median seconds and
// GFLOP/s of each, of BLIS sgemm on the same shape with BLIS's own threading and with our
// fixed-block scheme (1-thread BLIS per output block), and efficiency = collapse / best peak.
#include <blis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cstring>

#include "acceptance/acceptance.h"
#include "core/error.h"
#include "core/prng.h"
#include "kernels/abs_gemm.h"

using namespace stk;

int main(int argc, char **argv) {
    if (argc == 4 && std::strcmp(argv[1], "--acceptance") == 0) {
        AcceptanceContext ctx;
        ctx.out_dir = argv[2];
        ctx.model_dir = argv[3];
        std::vector<AcceptanceRow> rows;
        try {
            acceptance_linear(ctx, rows);
        } catch (const Error &e) {
            std::fprintf(stderr, "%s\n", e.what());
            return 1;
        }
        for (const AcceptanceRow &r : rows)
            std::printf("%-42s %s %10.4g %s %-8.4g %s | %s%s%s\n", r.test.c_str(), r.gating ? "GATE" : "info", r.value,
                        r.comparison.c_str(), r.threshold, r.pass ? "pass" : "FAIL", r.definition.c_str(),
                        r.note.empty() ? "" : " | ", r.note.c_str());
        return 0;
    }
    const uint64_t d = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
    const uint64_t h = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2752;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
    const unsigned threads = argc > 4 ? unsigned(std::atoi(argv[4])) : 2;
    std::vector<float> w1(h * d), w2(d * h), w3(h * d), C(d * d);
    uint64_t s = 42;
    for (auto *v : {&w1, &w2, &w3})
        for (float &x : *v) x = float(to_unit(splitmix64_next(&s)) - 0.5) * 0.04f;
    std::vector<float> scratch(abs_gemm_scratch_floats(d) * threads);
    const double flop = 2.0 * double(d) * double(d) * double(h);

    // The five products are timed round-robin, rep by rep, so a load change on a shared machine
    // hits all of them alike; each figure is the median of its reps.
    std::vector<std::function<void()>> fns = {
        [&] {  // BLIS with its own threading over the whole product
            rntm_t rntm;
            bli_rntm_init(&rntm);
            bli_rntm_set_num_threads(dim_t(threads), &rntm);
            float one = 1, zero = 0;
            bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, dim_t(d), dim_t(d), dim_t(h), &one, w2.data(), inc_t(h), 1,
                         w1.data(), inc_t(d), 1, &zero, C.data(), inc_t(d), 1, nullptr, &rntm);
        },
        [&] { plain_sgemm(d, d, h, w2.data(), h, w1.data(), d, C.data(), d, threads); },
        [&] {
            abs_gemm(d, d, h, PackA::Abs, w2.data(), h, PackB::Abs, w1.data(), nullptr, d, C.data(), d, scratch.data(), threads);
        },
        [&] {
            abs_gemm(d, d, h, PackA::Copy, w2.data(), h, PackB::Pos, w1.data(), nullptr, d, C.data(), d, scratch.data(), threads);
        },
        [&] {
            abs_gemm(d, d, h, PackA::Abs, w2.data(), h, PackB::Abs, w1.data(), w3.data(), d, C.data(), d, scratch.data(),
                     threads);
        },
    };
    std::vector<std::vector<double>> times(fns.size());
    for (auto &f : fns) f();  // warm-up (BLIS pack pool, page faults)
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < fns.size(); i++) {
            auto a = std::chrono::steady_clock::now();
            fns[i]();
            times[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
        }
    auto med = [&](size_t i) {
        std::sort(times[i].begin(), times[i].end());
        return times[i][times[i].size() / 2];
    };
    const double t_blis = med(0), t_plain = med(1), t_s = med(2), t_p = med(3), t_g = med(4);
    const double peak = std::max(flop / t_blis, flop / t_plain);
    std::printf("shape d %llu h %llu, %u threads, median of %d (%.2f GFLOP per product)\n", (unsigned long long)d,
                (unsigned long long)h, threads, reps, flop / 1e9);
    auto line = [&](const char *what, double t) {
        std::printf("  %-44s %8.4f s  %7.2f GFLOP/s  %5.1f %% of peak\n", what, t, flop / t / 1e9, 100.0 * flop / t / peak);
    };
    line("BLIS sgemm, BLIS threads (peak candidate)", t_blis);
    line("BLIS sgemm, fixed blocks (peak candidate)", t_plain);
    line("collapse S = |W2||W1| (abs while packing)", t_s);
    line("collapse M+ = W2 relu(W1)", t_p);
    line("collapse S gated = |W2|(|Wg||Wu|)", t_g);
    std::printf("  per unit (S + M+ + M-): %.4f s, efficiency %.1f %% of peak\n", t_s + 2 * t_p,
                100.0 * 3 * flop / (t_s + 2 * t_p) / peak);
    return 0;
}
