// Fuzz the MPHF.  First byte even: the rest is a serialized MPHF: load it (validation), decode
// the pilots (byte or escape), then look up keys taken from the input - every index must be below
// K (or "none" for an empty function).
// First byte odd: the rest is a list of u64 keys: build (bit 4 of the first byte: a table 12x
// larger, so small key sets reach the windowed search too), check the bijection, serialize, load,
// and check the loaded function agrees (determinism through the byte form).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"
#include "hash/mphf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    try {
        if ((data[0] & 1) == 0) {
            stk::Mphf f = stk::Mphf::load(p, n, "fuzz.mphf");
            // Every pilot decodes (the escaped ones through rank + count + escape list) below 2^16,
            // and a byte of 255 exactly when the pilot is escaped.
            for (uint64_t b = 0; b < f.n_buckets && b < 4096; b++) {
                uint32_t pilot = f.pilot(b);
                if (pilot > 65535 || (f.pilots[b] == stk::kMphfEscape) != (pilot >= stk::kMphfEscape)) __builtin_trap();
            }
            for (size_t i = 0; i + 8 <= n && i < 4096; i += 8) {
                uint64_t a = f.index_u64(stk::load_u64(p + i));
                uint64_t b = f.index_bytes(p + i, std::min<size_t>(n - i, 40));
                if (f.empty() ? (a != ~uint64_t(0) || b != ~uint64_t(0)) : (a >= f.n_keys || b >= f.n_keys)) __builtin_trap();
            }
        } else {
            std::vector<uint64_t> keys(std::min<size_t>(n / 8, 512));
            for (size_t i = 0; i < keys.size(); i++) keys[i] = stk::load_u64(p + 8 * i);
            std::sort(keys.begin(), keys.end());
            keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
            stk::MphfParams params;
            params.lambda = 1.0 + (data[0] >> 1) % 4;  // lambda 1..4 (5+ is slow under ASan)
            // M = 12 K / 0.99 reaches the 64-pilot windows (M >= 1024) from 85 keys on.
            if (data[0] & 0x10) params.m_scale = 12.0;
            std::vector<uint8_t> mem(stk::mphf_build_arena_size(keys.size(), params));
            stk::Arena arena(mem.data(), mem.size());
            stk::Mphf f = stk::mphf_build_u64(keys.data(), keys.size(), params, arena);
            std::vector<uint8_t> seen(keys.size(), 0);
            for (uint64_t k : keys) {
                uint64_t i = f.index_u64(k);
                if (i >= keys.size() || seen[i]) __builtin_trap();
                seen[i] = 1;
            }
            std::vector<uint8_t> blob(f.serialized_size());
            f.serialize(blob.data());
            stk::Mphf g = stk::Mphf::load(blob.data(), blob.size(), "fuzz.mphf");
            for (uint64_t k : keys)
                if (g.index_u64(k) != f.index_u64(k)) __builtin_trap();
        }
    } catch (const stk::Error &) {
    }
    return 0;
}
