// Fuzz the calibration statistics reader (format/calib_stats.cc).  Each input runs four times:
// as given (at whatever alignment the driver placed it: a misaligned start is refused), copied to
// 8-aligned storage, copied with the payload's SHA-256 and the header crc32c recomputed (so
// mutations of the header reach the dimension, layer table and size checks, and a changed layer
// byte the per-layer crc32c), and with every layer's crc32c recomputed too (as far as the table's
// sizes lie inside the input), so mutations reach the finiteness checks.  For an accepted file,
// every view of every layer is read whole: it must lie inside the input, 8-aligned, where the
// layout puts it (the sections back to back after the layer table, ending at the file's end),
// every value finite, each layer's bytes matching the crc32c it records.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/checksum.h"
#include "core/error.h"
#include "format/calib_stats.h"

static void view(const double *v, uint64_t n, const uint8_t *base, uint64_t size, uint64_t *at) {
    if (v == nullptr) __builtin_trap();
    const uint8_t *p = reinterpret_cast<const uint8_t *>(v);
    if (p != base + *at || reinterpret_cast<uintptr_t>(p) % 8 != 0) __builtin_trap();
    if (n > (size - *at) / 8) __builtin_trap();
    double s = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!std::isfinite(v[i])) __builtin_trap();
        s += v[i] * 0.0;
    }
    if (s != 0) __builtin_trap();
    *at += 8 * n;
}

static void one(const uint8_t *data, size_t size) {
    try {
        stk::CalibStats c(data, size, "fuzz.stats");
        const uint64_t d = c.d_model(), dv = c.d_v(), d2 = 2 * d;
        uint64_t at = stk::kCalibHeaderBytes + stk::kCalibLayerEntryBytes * c.n_layers();
        for (uint32_t l = 0; l < c.n_layers(); l++) {
            const stk::CalibLayer &L = c.layer(l);
            const uint64_t start = at;
            if (L.sections & ~uint32_t(stk::kCalibAllSections)) __builtin_trap();
            if ((L.pairs != 0) != bool(L.sections & stk::kCalibPrfPairs)) __builtin_trap();
            if (L.sections & stk::kCalibPrfPairs) {
                view(L.prf_m, stk::calib_packed_count(d), data, size, &at);
                view(L.prf_b, d, data, size, &at);
                view(L.prf_l, 2, data, size, &at);
            } else if (L.prf_m || L.prf_b || L.prf_l) {
                __builtin_trap();
            }
            if (L.sections & stk::kCalibAttnOut) view(L.attn_out, stk::calib_packed_count(dv), data, size, &at);
            else if (L.attn_out) __builtin_trap();
            if (L.sections & stk::kCalibRopePairs) {
                if (c.n_pairs() == 0) __builtin_trap();
                view(L.rope_pairs, c.n_pairs(), data, size, &at);
            } else if (L.rope_pairs) {
                __builtin_trap();
            }
            if (L.sections & stk::kCalibFfn) {
                view(L.ffn_g, stk::calib_packed_count(d2), data, size, &at);
                view(L.ffn_x, d2 * d, data, size, &at);
                view(L.ffn_yy, d, data, size, &at);
            } else if (L.ffn_g || L.ffn_x || L.ffn_yy) {
                __builtin_trap();
            }
            if (L.crc32c != stk::crc32c(data + start, at - start)) __builtin_trap();
            if (L.crc32c != stk::load_u32(data + stk::kCalibHeaderBytes + stk::kCalibLayerEntryBytes * l + 4)) __builtin_trap();
        }
        if (at != size) __builtin_trap();
        if (c.tokens() == 0 || c.digest_hex().size() != 64) __builtin_trap();
        stk::Sha256Digest h = stk::sha256(data + 128, size - 128);
        if (std::memcmp(h.bytes, c.digest(), 32) != 0) __builtin_trap();
    } catch (const stk::Error &) {
    }
}

// Each layer's crc32c over its section bytes (docs/format.md's sizes from the header's dimensions,
// within their limits), as far as they lie inside the input.
static void reseal_layers(uint8_t *b, size_t size) {
    const uint64_t L = stk::load_u32(b + 28), d = stk::load_u32(b + 32), dv = stk::load_u32(b + 36),
                   np = stk::load_u32(b + 40);
    if (L > 65536 || d > 65536 || dv > (1u << 20) || np > 65536) return;
    uint64_t at = stk::kCalibHeaderBytes + stk::kCalibLayerEntryBytes * L;
    for (uint64_t l = 0; l < L && at <= size; l++) {
        uint8_t *e = b + stk::kCalibHeaderBytes + stk::kCalibLayerEntryBytes * l;
        const uint32_t secs = stk::load_u32(e);
        uint64_t n = 0;
        if (secs & stk::kCalibPrfPairs) n += d * (d + 1) / 2 + d + 2;
        if (secs & stk::kCalibAttnOut) n += dv * (dv + 1) / 2;
        if (secs & stk::kCalibRopePairs) n += np;
        if (secs & stk::kCalibFfn) n += 2 * d * (2 * d + 1) / 2 + 2 * d * d + d;
        if (n > (size - at) / 8) return;
        stk::store_le<uint32_t>(e + 4, stk::crc32c(b + at, 8 * n));
        at += 8 * n;
    }
}

static void reseal_digest(uint8_t *b, size_t size) {
    stk::Sha256Digest h = stk::sha256(b + 128, size - 128);
    std::memcpy(b + 64, h.bytes, 32);
    stk::store_le<uint32_t>(b + 124, stk::crc32c(b, 124));
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size);
    std::vector<uint64_t> store(size / 8 + 1);
    uint8_t *b = reinterpret_cast<uint8_t *>(store.data());
    if (size) std::memcpy(b, data, size);
    one(b, size);
    if (size >= stk::kCalibHeaderBytes) {
        reseal_digest(b, size);
        one(b, size);
        reseal_layers(b, size);
        reseal_digest(b, size);
        one(b, size);
    }
    return 0;
}
