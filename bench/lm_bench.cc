// The LM runtime's prompt and decode speed (lm/forward.h), each against a floor measured in the
// same run (issue 36 item 5; docs/benchmarks.md, "LM runtime").
//
//   build/bench/lm_bench PATH [f32|bf16] [prompt=256] [decode=64] [threads=2] [runs=5] [sinks=4] [window=252]
//
// PATH: an HF model directory or a GGUF (its weights kept as f32 or bf16 in memory), or a
// faithful generation (a generations root or one generation directory: its own widths).
//   decode floor = bytes read per decoded token / the read bandwidth of this run, where the bytes
//                  are every matrix the token's forward reads (attention, FFN: MoE at top_k of
//                  n_experts' average, the head; the embedding's one row) at its stored width,
//                  plus the KV state a query reads (sinks + window positions, or fewer, of every
//                  layer's keys and values in f32); norms and biases are left out (< 0.1 %);
//                  the bandwidth: `threads` threads memchr()ing (a read-only AVX2 loop in glibc)
//                  disjoint parts of a 1 GiB buffer, median of 5;
//   prompt floor = 2 x (the layers' matrix parameters x prompt tokens + the head's x the chunks of
//                  64: a prompt's logits are its last row's) FLOPs (the attention's own products
//                  left out) at the BLIS sgemm peak (the pinned context the runtime uses): the better of
//                  (64 x d_model) (d_model x ffn) and (64 x d_model) (d_model x 64) (the
//                  runtime's blocks) at `threads`, median of 5 each.
// Ours: the prompt fed at once (split into chunks of 64), then `decode` tokens one at a time
// (each the argmax of the last logits); median of `runs` after one warm-up run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "kernels/linalg.h"
#include "lm/forward.h"
#include "api/lm_open.h"
#include "lm/weights.h"

using namespace stk;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Bytes of a view at its stored width (int8: the per-row scales too).
double view_bytes(const lm::TensorView &v) {
    if (!v) return 0;
    const double n = double(v.n_elements());
    switch (v.dtype) {
    case lm::WDType::F32: return 4 * n;
    case lm::WDType::BF16: return 2 * n;
    case lm::WDType::I8: return n + 4.0 * double(v.rows);
    case lm::WDType::Q4_0: return n / 32 * 18;
    case lm::WDType::Q8_0: return n / 32 * 34;
    }
    return 0;
}

struct Counted {
    double bytes = 0;   // read per decoded token (matrices and head)
    double params = 0;       // matrix parameters every prompt token multiplies (for the prompt FLOPs)
    double head_params = 0;  // the head's: multiplied once per prompt chunk (its last row's logits)
};

Counted count_weights(const lm::WeightSource &w) {
    const ModelConfig &c = w.config();
    Counted k;
    auto add = [&](const lm::TensorView &v, double share) {
        k.bytes += share * view_bytes(v);
        k.params += share * double(v.n_elements());
    };
    const Role dense[] = {Role::Q, Role::K, Role::V, Role::O, Role::MLA_Q_A, Role::MLA_Q_B, Role::MLA_KV_A, Role::MLA_KV_B,
                          Role::FFN_W1, Role::FFN_W2, Role::FFN_W3, Role::ROUTER_GATE};
    for (uint32_t l = 0; l < c.n_layers; l++) {
        for (Role r : dense) add(w.find(r, int32_t(l)), 1);
        if (c.n_experts) {
            const double share = double(c.top_k) / double(c.n_experts);
            for (uint32_t e = 0; e < c.n_experts; e++)
                for (Role r : {Role::FFN_W1, Role::FFN_W2, Role::FFN_W3}) add(w.find(r, int32_t(l), int32_t(e)), share);
            for (Role r : {Role::FFN_W1, Role::FFN_W2, Role::FFN_W3}) add(w.find(r, int32_t(l), kSharedExpert), 1);
        }
    }
    const lm::TensorView head = w.find(Role::LM_HEAD), emb = w.find(Role::EMB);
    const double params = k.params;
    add(head ? head : emb, 1);
    k.head_params = k.params - params;
    k.params = params;
    k.bytes += emb ? view_bytes(emb) / double(emb.rows) : 0;  // the token's embedding row
    return k;
}

// Read bandwidth (bytes/s): `threads` threads each memchr() their part of a zeroed buffer.
double read_bandwidth(unsigned threads) {
    const size_t bytes = size_t(1) << 30;
    std::vector<uint8_t> buf(bytes, 0);
    std::vector<double> t;
    for (int rep = 0; rep < 5; rep++) {
        std::vector<std::thread> ts;
        const auto t0 = Clock::now();
        for (unsigned i = 0; i < threads; i++)
            ts.emplace_back([&, i] {
                const size_t a = bytes / threads * i, n = bytes / threads;
                if (std::memchr(buf.data() + a, 1, n)) std::abort();
            });
        for (auto &th : ts) th.join();
        t.push_back(seconds_since(t0));
    }
    return double(bytes) / median(t);
}

// BLIS sgemm FLOP/s on (m x k)(k x n), the runtime's pinned context and threading.
double sgemm_peak(size_t m, size_t n, size_t k, unsigned threads) {
    std::vector<float> a(m * k, 0.5f), b(n * k, 0.25f), c(m * n);
    std::vector<double> t;
    for (int rep = 0; rep < 6; rep++) {
        const auto t0 = Clock::now();
        kernels::sgemm(false, true, m, n, k, 1.0f, a.data(), ptrdiff_t(k), 1, b.data(), ptrdiff_t(k), 1, 0.0f, c.data(), ptrdiff_t(n),
                       1, threads);
        if (rep) t.push_back(seconds_since(t0));
    }
    return 2.0 * double(m) * double(n) * double(k) / median(t);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PATH [f32|bf16] [prompt=256] [decode=64] [threads=2] [runs=5] [sinks=4] [window=252]\n", argv[0]);
        return 2;
    }
    const std::string path = argv[1];
    const std::string width = argc > 2 ? argv[2] : "bf16";
    const uint64_t prompt = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 256;
    const uint64_t decode = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 64;
    const unsigned threads = argc > 5 ? unsigned(std::atoi(argv[5])) : 2;
    const int runs = argc > 6 ? std::atoi(argv[6]) : 5;
    lm::SeqOptions o;
    o.sinks = argc > 7 ? uint32_t(std::atoi(argv[7])) : 4;
    o.window = argc > 8 ? uint32_t(std::atoi(argv[8])) : 252;
    o.threads = threads;
    try {
        bool generation = false;
        const auto t_open = Clock::now();
        std::unique_ptr<lm::WeightSource> w =
            lm::open_weights(path, width == "f32" ? lm::WDType::F32 : lm::WDType::BF16, lm::WDType::F32, &generation);
        const double open_s = seconds_since(t_open);
        const ModelConfig &c = w->config();
        const std::string why = lm::unsupported(c);
        if (!why.empty()) throw_error(STK_E_NOT_IMPLEMENTED, "%s", why.c_str());
        const Counted k = count_weights(*w);
        const uint64_t nkv = c.n_kv_heads ? c.n_kv_heads : c.n_heads;
        const double kv_row = double(c.n_layers) * double(nkv) * 2.0 * double(c.head_dim) * 4.0;  // keys + values, f32

        std::vector<uint8_t> arena(lm::arena_size(*w, o));
        lm::Sequence seq(*w, o, arena.data(), arena.size());
        std::vector<int32_t> toks(prompt);
        for (uint64_t i = 0; i < prompt; i++) toks[i] = int32_t((i * 7919 + 13) % seq.vocab());

        std::vector<double> tp, td;
        for (int r = 0; r <= runs; r++) {
            seq.reset();
            auto t0 = Clock::now();
            seq.feed(toks.data(), toks.size());
            const double p = seconds_since(t0);
            t0 = Clock::now();
            for (uint64_t i = 0; i < decode; i++) {
                const float *lg = seq.logits();
                const int32_t next = int32_t(std::max_element(lg, lg + seq.vocab()) - lg);
                seq.feed(&next, 1);
            }
            const double d = seconds_since(t0);
            if (r) tp.push_back(p), td.push_back(d);  // run 0 warms the caches and the pool
        }
        const double bw = read_bandwidth(threads);
        const uint64_t held = std::min<uint64_t>(prompt + decode / 2, uint64_t(o.sinks) + o.window);
        const double per_token = k.bytes + double(held) * kv_row;
        const double decode_floor = bw / per_token, decode_ours = double(decode) / median(td);
        // The better of the FFN's whole shape and the runtime's own call (64 widened rows at a
        // time): at 7B the whole (d x ffn) f32 operand streams from DRAM and reads as half the
        // rate the blocked calls reach, which would not be a floor.
        const uint64_t pm = std::min<uint64_t>(prompt, 64);
        const double peak = std::max(sgemm_peak(pm, c.ffn_dim ? c.ffn_dim : c.moe_ffn_dim, c.d_model, threads), sgemm_peak(pm, 64, c.d_model, threads));
        const double chunks = double((prompt + 63) / 64);
        const double prompt_floor = peak * double(prompt) / (2.0 * (k.params * double(prompt) + k.head_params * chunks)), prompt_ours = double(prompt) / median(tp);
        std::printf("%s (%s, %s): %u layers, d %u, vocab %llu; opened in %.2f s; threads %u, state %u + %u, %d runs (median)\n",
                    path.c_str(), c.model_type, generation ? "faithful generation" : width.c_str(), c.n_layers, c.d_model,
                    (unsigned long long)c.vocab_size, open_s, threads, o.sinks, o.window, runs);
        std::printf("| model | weights read / token | state read / token | read bandwidth | decode floor | decode | vs floor | sgemm peak | prompt floor | prompt (%llu) | vs floor |\n",
                    (unsigned long long)prompt);
        std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
        std::printf("| %s | %.1f MiB | %.2f MiB | %.1f GB/s | %.1f tok/s | %.1f tok/s | %.2fx | %.1f GFLOP/s | %.1f tok/s | %.1f tok/s | %.2fx |\n",
                    c.model_type, k.bytes / 1048576.0, double(held) * kv_row / 1048576.0, bw / 1e9, decode_floor, decode_ours,
                    decode_ours / decode_floor, peak / 1e9, prompt_floor, prompt_ours, prompt_ours / prompt_floor);
    } catch (const Error &e) {
        std::fprintf(stderr, "lm_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
