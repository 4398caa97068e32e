// Checkpoint readers: open + convert-to-f32 throughput over a generated safetensors file (bf16,
// f16, f32 tensors) and a torch zip written by the same bytes, page cache warm.
//
//   floor: reading the same mapped bytes (a sum over u64 words: memory bandwidth)
//   ours:  convert_to_f32 in 1 Mi-element chunks into a reused buffer (what parse_tensors does)
//   peer:  the x86 F16C instruction (vcvtph2ps) for f16 and an AVX2 shift for bf16: the
//          fastest exact conversion the hardware offers
// All three read the same mapping, whose pages are faulted in by an untimed pass first (the
// first timed reader would otherwise pay the page faults for the others), and write into the
// same output buffer, touched before any timing.
//
// Usage: ingest_convert_bench [MiB per dtype, default 256] [runs, default 5]
// Prints the median of the runs in GB/s of source bytes.
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/output_file.h"
#include "ingest/checkpoint.h"

using namespace stk;
using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

__attribute__((target("avx2,f16c"))) static void f16c_convert(const uint8_t *src, uint64_t n, float *out) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 2 * i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = _cvtsh_ss(h);
    }
}

// bf16 -> f32 is a 16-bit shift; AVX2 does 8 at once (the peer gets the same vector width the
// f16 peer and our Highway path get).
__attribute__((target("avx2"))) static void bf16_shift(const uint8_t *src, uint64_t n, float *out) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 2 * i));
        __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), w);
    }
    for (; i < n; i++) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        uint32_t b = uint32_t(h) << 16;
        std::memcpy(&out[i], &b, 4);
    }
}

static volatile uint64_t g_sink;

int main(int argc, char **argv) {
    uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
    int runs = argc > 2 ? std::atoi(argv[2]) : 5;
    const char *tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp ? tmp : "/tmp") + "/stk-ingest-bench-" + std::to_string(getpid()) + ".safetensors";
    const uint64_t bytes = mib << 20;

    // Write: bf16, f16, f32 tensors of `bytes` each, values from a fixed LCG (finite, varied).
    {
        std::string header = "{";
        const char *names[3] = {"bf16", "f16", "f32"};
        const char *dts[3] = {"BF16", "F16", "F32"};
        const uint64_t es[3] = {2, 2, 4};
        for (int i = 0; i < 3; i++) {
            char buf[256];
            std::snprintf(buf, sizeof buf, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                          i ? "," : "", names[i], dts[i], (unsigned long long)(bytes / es[i]), (unsigned long long)(i * bytes),
                          (unsigned long long)((i + 1) * bytes));
            header += buf;
        }
        header += "}";
        while (header.size() % 8) header += ' ';
        OutputFile f(path);
        uint64_t n = header.size();
        f.write(&n, 8);
        f.write(header.data(), header.size());
        std::vector<uint16_t> chunk(1 << 20);
        uint32_t x = 12345;
        for (int t = 0; t < 3; t++) {
            for (uint64_t done = 0; done < bytes; done += chunk.size() * 2) {
                for (auto &v : chunk) {
                    x = x * 1664525u + 1013904223u;
                    // bf16/f16/f32 halves with exponent bits kept away from inf/NaN
                    v = uint16_t((x >> 16) & 0x3FFF) | uint16_t((x & 1) << 15);
                }
                f.write(chunk.data(), chunk.size() * 2);
            }
        }
        f.commit();
    }

    std::vector<float> buf(1 << 20);
    std::vector<double> t_open, floor_bw[3], ours_bw[3], peer_bw[2];
    for (int r = 0; r < runs; r++) {
        auto t0 = Clock::now();
        auto ck = open_checkpoint(path);
        t_open.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        std::vector<uint8_t> scratch;
        for (int i = 0; i < 3; i++) {
            const TensorRef &t = ck->tensors()[i];  // bf16, f16, f32 (sorted)
            const uint8_t *b = ck->tensor_bytes(t, scratch);
            // untimed: fault in every page of the mapping once, so no timed pass pays for the others
            uint64_t pre = 0;
            for (uint64_t off = 0; off < t.n_bytes; off += 4096) pre += b[off];
            g_sink = pre;
            // floor
            t0 = Clock::now();
            uint64_t s = 0;
            for (uint64_t off = 0; off + 8 <= t.n_bytes; off += 8) {
                uint64_t w;
                std::memcpy(&w, b + off, 8);
                s += w;
            }
            g_sink = s;
            floor_bw[i].push_back(t.n_bytes / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
            // ours
            t0 = Clock::now();
            for (uint64_t e = 0; e < t.n_elements; e += buf.size()) {
                uint64_t n = std::min<uint64_t>(buf.size(), t.n_elements - e);
                convert_to_f32(t, b, e, n, buf.data());
                g_sink += uint64_t(buf[n - 1]);
            }
            ours_bw[i].push_back(t.n_bytes / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
            // peer
            if (i < 2) {
                t0 = Clock::now();
                size_t es = src_dtype_size(t.dtype);
                for (uint64_t e = 0; e < t.n_elements; e += buf.size()) {
                    uint64_t n = std::min<uint64_t>(buf.size(), t.n_elements - e);
                    if (i == 0) bf16_shift(b + e * es, n, buf.data());
                    else f16c_convert(b + e * es, n, buf.data());
                    g_sink += uint64_t(buf[n - 1]);
                }
                peer_bw[i].push_back(t.n_bytes / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
            }
        }
    }
    unlink(path.c_str());
    std::printf("ingest_convert_bench: %llu MiB per dtype, %d runs, medians\n", (unsigned long long)mib, runs);
    std::printf("open_checkpoint (header parse + validation): %.3f ms\n", median(t_open) * 1e3);
    const char *names[3] = {"bf16", "f16", "f32"};
    const char *peers[2] = {"AVX2 shift", "F16C vcvtph2ps"};
    for (int i = 0; i < 3; i++) {
        std::printf("%-5s floor (read) %6.2f GB/s   convert_to_f32 %6.2f GB/s (%.0f%% of floor)", names[i], median(floor_bw[i]),
                    median(ours_bw[i]), 100 * median(ours_bw[i]) / median(floor_bw[i]));
        if (i < 2) std::printf("   peer %s %6.2f GB/s", peers[i], median(peer_bw[i]));
        std::printf("\n");
    }
    return 0;
}
