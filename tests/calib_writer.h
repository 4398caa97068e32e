// Test-only: a calibration statistics file written from the layout of docs/format.md /
// src/format/calib_stats.h (not through the library's reader), with moments that are genuine
// means of seeded random samples (so every packed matrix is positive semi-definite).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/prng.h"
#include "format/calib_stats.h"
#include "test_util.h"

namespace stk::test {

struct StatsSpec {
    uint32_t model_crc = 0;
    uint64_t model_sha = 0;
    uint32_t n_layers = 0, d_model = 0, d_v = 0, n_pairs = 0;
    uint64_t tokens = 64;
    uint32_t sections = kCalibAllSections;  // every layer's
    uint64_t seed = 1;
};

struct StatsRng {
    uint64_t s;
    double next() {  // uniform in [-1, 1)
        s += 0x9E3779B97F4A7C15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return double(z >> 11) / double(1ull << 52) - 1.0;
    }
};

inline void put_packed_mean(std::vector<double> &out, const std::vector<std::vector<double>> &v) {
    const size_t n = v[0].size();
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) {
            double s = 0;
            for (const auto &x : v) s += x[i] * x[j];
            out.push_back(s / double(v.size()));
        }
}

// Writes the file; returns its bytes.
inline std::vector<uint8_t> write_stats(const std::string &path, const StatsSpec &sp) {
    StatsRng rng{sp.seed};
    const size_t T = 48, d = sp.d_model;
    std::vector<double> pay;
    std::vector<size_t> layer_at;  // each layer's first value in pay, then pay's end
    for (uint32_t l = 0; l < sp.n_layers; l++) {
        layer_at.push_back(pay.size());
        if (sp.sections & kCalibPrfPairs) {
            std::vector<std::vector<double>> w(T, std::vector<double>(d));
            std::vector<double> lv(T);
            for (size_t t = 0; t < T; t++) {
                double acc = 0;
                for (size_t j = 0; j < d; j++) {
                    w[t][j] = rng.next() * rng.next() * 4;
                    acc += w[t][j] * (0.02 + 0.01 * double(j % 3));
                }
                lv[t] = acc + 0.05 * rng.next();
            }
            put_packed_mean(pay, w);
            double el = 0, el2 = 0;
            for (size_t j = 0; j < d; j++) {
                double b = 0;
                for (size_t t = 0; t < T; t++) b += w[t][j] * lv[t];
                pay.push_back(b / double(T));
            }
            for (size_t t = 0; t < T; t++) el += lv[t], el2 += lv[t] * lv[t];
            pay.push_back(el / double(T));
            pay.push_back(el2 / double(T));
        }
        if (sp.sections & kCalibAttnOut) {
            std::vector<std::vector<double>> o(T, std::vector<double>(sp.d_v));
            for (auto &x : o)
                for (auto &v : x) v = rng.next();
            put_packed_mean(pay, o);
        }
        if (sp.sections & kCalibRopePairs)
            for (uint32_t f = 0; f < sp.n_pairs; f++) pay.push_back(1.0 + rng.next() * 0.5);
        if (sp.sections & kCalibFfn) {
            std::vector<std::vector<double>> z(T, std::vector<double>(2 * d)), y(T, std::vector<double>(d));
            for (size_t t = 0; t < T; t++) {
                for (size_t j = 0; j < d; j++) {
                    const double x = rng.next();
                    z[t][j] = x > 0 ? x : 0;
                    z[t][d + j] = x < 0 ? -x : 0;
                }
                for (size_t i = 0; i < d; i++) y[t][i] = 0.3 * (z[t][i] - z[t][d + (i + 1) % d]) + 0.1 * rng.next();
            }
            put_packed_mean(pay, z);
            for (size_t a = 0; a < 2 * d; a++)
                for (size_t i = 0; i < d; i++) {
                    double s = 0;
                    for (size_t t = 0; t < T; t++) s += z[t][a] * y[t][i];
                    pay.push_back(s / double(T));
                }
            for (size_t i = 0; i < d; i++) {
                double s = 0;
                for (size_t t = 0; t < T; t++) s += y[t][i] * y[t][i];
                pay.push_back(s / double(T));
            }
        }
    }
    layer_at.push_back(pay.size());
    const uint64_t table = 16ull * sp.n_layers, total = 128 + table + 8 * pay.size();
    std::vector<uint8_t> f(total, 0);
    auto u32 = [&](size_t at, uint32_t v) { std::memcpy(&f[at], &v, 4); };
    auto u64 = [&](size_t at, uint64_t v) { std::memcpy(&f[at], &v, 8); };
    std::memcpy(&f[0], "STKCAL01", 8);
    u32(8, 2);
    u64(16, sp.model_sha);
    u32(24, sp.model_crc);
    u32(28, sp.n_layers);
    u32(32, sp.d_model);
    u32(36, sp.d_v);
    u32(40, sp.n_pairs);
    u64(48, sp.tokens);
    u64(56, total);
    std::memcpy(f.data() + 128 + table, pay.data(), 8 * pay.size());
    for (uint32_t l = 0; l < sp.n_layers; l++) {
        u32(128 + 16 * l, sp.sections);
        // the crc32c of the layer's section bytes (version 2)
        u32(128 + 16 * l + 4, crc32c(f.data() + 128 + table + 8 * layer_at[l], 8 * (layer_at[l + 1] - layer_at[l])));
        u64(128 + 16 * l + 8, (sp.sections & kCalibPrfPairs) ? T : 0);
    }
    Sha256 sh;
    sh.update(&f[128], size_t(total - 128));
    Sha256Digest dg = sh.finish();
    std::memcpy(&f[64], dg.bytes, 32);
    u32(124, crc32c(f.data(), 124));
    write_bytes(path, f);
    return f;
}

}  // namespace stk::test
