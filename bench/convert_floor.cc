// The parts of a real model's convert floor that bench/real_convert_bench.sh cannot take from cat
// and ffn_bench, measured in the same session (docs/benchmarks.md, "Real models"):
//
//   convert_floor FILE.gguf PEAK_GFLOPS [THREADS=2] [RUNS=3]
//
//   dequant   every tensor's f32 output written at memcpy speed: per tensor, a memcpy of
//             n_elements * 4 bytes buffer to buffer (split over THREADS threads, as the
//             conversion's readers may be), median of RUNS after a warm-up, summed over tensors.
//   tokenizer what the tokenizer stage must at least do with a GGUF vocabulary: read its arrays
//             (tokenizer.ggml.tokens, scores, token_type, merges: their bytes as stored, copied at
//             memcpy speed) and touch every piece once (one 64-bit hash of each token string).
//             Also the library's own read of that vocabulary (load_gguf_vocab, median of RUNS):
//             the job reads it when it is sized and hands it to the stage's run, so the stage's
//             printed seconds do not include it (docs/benchmarks.md adds it back).
//   bridge    what bridge_init must at least do: the token embedding (and an untied output
//             embedding) dequantised at memcpy speed (the dequant figures of those tensors) plus
//             its leg products, 2 V d H FLOPs per embedding (H = 128 hubs), at PEAK_GFLOPS (the
//             BLIS sgemm peak ffn_bench measured in the same session).
// Prints `key value` lines (seconds, bytes, counts) for the script.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "hash/hash64.h"
#include "ingest/gguf.h"
#include "stages/bridge_init.h"
#include "tokenizer/vocab.h"
#include "tokenizer/vocab_io.h"

using namespace stk;
using Clock = std::chrono::steady_clock;

template <class F>
static double median_seconds(int runs, F &&f) {
    f();  // warm-up: page faults, frequency
    std::vector<double> t;
    for (int r = 0; r < runs; r++) {
        const auto t0 = Clock::now();
        f();
        t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Bytes a GGUF metadata value takes as stored (strings: u64 length + bytes).
static uint64_t stored_value_bytes(const GgufValue &v) {
    if (v.type() == GgufType::STRING) return 8 + v.str().size();
    if (v.type() != GgufType::ARRAY) return 8;
    uint64_t n = 0;
    if (v.elem_type() == GgufType::STRING) {
        for (std::string_view s : v.strings()) n += 8 + s.size();
        return n;
    }
    switch (v.elem_type()) {
        case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return v.size();
        case GgufType::U16: case GgufType::I16: return 2 * v.size();
        case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8 * v.size();
        default: return 4 * v.size();
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: convert_floor FILE.gguf PEAK_GFLOPS [THREADS] [RUNS]\n");
        return 2;
    }
    const double peak = std::atof(argv[2]);
    const unsigned threads = argc > 3 ? unsigned(std::max(1, std::atoi(argv[3]))) : 2;
    const int runs = argc > 4 ? std::max(1, std::atoi(argv[4])) : 3;
    if (!(peak > 0)) {
        std::fprintf(stderr, "convert_floor: PEAK_GFLOPS must be > 0\n");
        return 2;
    }
    GgufFile g(argv[1]);

    // Dequantisation at memcpy speed, tensor by tensor.
    uint64_t most = 1, f32_bytes = 0;
    for (const GgufTensorInfo &t : g.tensors()) most = std::max(most, t.n_elements);
    std::vector<float> a(most, 1.0f), b(most, 0.0f);
    double dequant = 0, emb_read = 0;
    uint64_t vocab = 0, d = 0, legs = 0;
    for (const GgufTensorInfo &t : g.tensors()) {
        const uint64_t n = t.n_elements;
        f32_bytes += n * 4;
        const double s = median_seconds(runs, [&] {
            run_workers(threads, [&](unsigned w) {
                const uint64_t i0 = n * w / threads, i1 = n * (w + 1) / threads;
                std::memcpy(b.data() + i0, a.data() + i0, size_t(i1 - i0) * 4);
            });
        });
        dequant += s;
        // ggml's token_embd.weight / output.weight: ne = [d, V].
        if (t.name == "token_embd.weight" || t.name == "output.weight") {
            emb_read += s;
            legs++;
            d = t.ne[0];
            vocab = t.ne[1];
        }
    }
    std::printf("tensors %zu\nf32_bytes %llu\ndequant_s %.4f\n", g.tensors().size(), (unsigned long long)f32_bytes, dequant);

    // The tokenizer stage's floor: the vocabulary arrays copied, every piece hashed once.
    uint64_t vbytes = 0, tokens = 0;
    std::vector<std::string_view> pieces;
    for (const GgufKV &kv : g.metadata()) {
        const std::string_view k = kv.key;
        if (k == "tokenizer.ggml.tokens" || k == "tokenizer.ggml.scores" || k == "tokenizer.ggml.token_type" ||
            k == "tokenizer.ggml.merges") {
            vbytes += stored_value_bytes(kv.value);
            if (k == "tokenizer.ggml.tokens") pieces = kv.value.strings();
        }
    }
    tokens = pieces.size();
    std::vector<uint8_t> va(vbytes ? vbytes : 1, 1), vb(vbytes ? vbytes : 1);
    uint64_t sink = 0;
    const double tok_copy = median_seconds(runs, [&] { std::memcpy(vb.data(), va.data(), va.size()); });
    const double tok_hash = median_seconds(runs, [&] {
        for (std::string_view p : pieces) sink += hash::hash_bytes(p.data(), p.size(), 0);
    });
    const double vocab_read = tokens ? median_seconds(runs, [&] { sink += load_gguf_vocab(argv[1]).size(); }) : 0.0;
    std::printf("vocab_tokens %llu\nvocab_bytes %llu\ntokenizer_floor_s %.5f\nvocab_read_s %.4f\n", (unsigned long long)tokens,
                (unsigned long long)vbytes, tok_copy + tok_hash, vocab_read);

    // bridge_init's floor: its embeddings' dequantisation and its leg products at the peak.
    const double flops = 2.0 * double(vocab) * double(d) * double(kBridgeHubs) * double(legs);
    const double gemm = flops / (peak * 1e9);
    std::printf("bridge_vocab %llu\nbridge_d %llu\nbridge_legs %llu\nbridge_read_s %.4f\nbridge_gemm_s %.4f\nbridge_floor_s %.4f\n",
                (unsigned long long)vocab, (unsigned long long)d, (unsigned long long)legs, emb_read, gemm, emb_read + gemm);
    std::fprintf(stderr, "(%llu)\n", (unsigned long long)(sink & 1));
    return 0;
}
