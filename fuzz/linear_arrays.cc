// Fuzz a generation's linear dictionary as stk_lookup reads it, after the array headers and
// checksums (which a hostile writer can make valid): input = u32 LE mphf_len, u32 LE delta_len,
// u32 LE C, then mphf_len bytes of linear_mphf.bin's payload, delta_len bytes of cuckoo_delta.bin's,
// C * 8 key bytes and C * 4 weight bytes.  attach_linear validates or throws; after it, lookups
// of the stored keys and of keys taken from the input never read outside the payloads (ASan)
// and never probe more than 1 + d*b + S + 1 slots.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"
#include "runtime/generation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 12) return 0;
    const uint64_t ml = stk::load_u32(data), dl = stk::load_u32(data + 4), c = stk::load_u32(data + 8);
    const uint64_t need = 12 + ml + dl + c * 12;
    if (need > size) return 0;
    // Each payload in its own exact-size heap block, so ASan sees any read past one.
    std::vector<uint8_t> mphf(data + 12, data + 12 + ml), delta(data + 12 + ml, data + 12 + ml + dl),
        keys(data + 12 + ml + dl, data + 12 + ml + dl + c * 8), weights(data + 12 + ml + dl + c * 8, data + need);
    stk_generation g;
    try {
        stk::attach_linear(g, mphf.data(), mphf.size(), keys.data(), weights.data(), c, delta.data(), delta.size());
    } catch (const stk::Error &) {
        return 0;
    }
    const uint32_t bound = 1 + g.linear_delta.d * g.linear_delta.b + g.linear_delta.stash + 1;
    auto probe = [&](uint64_t key) {
        float v;
        uint32_t probes = 0;
        stk::linear_find(g, key, &v, &probes);
        if (probes > bound) __builtin_trap();
    };
    for (uint64_t i = 0; i < c && i < 4096; i++) probe(stk::load_u64(keys.data() + 8 * i));
    for (size_t i = need; i + 8 <= size && i < need + 8 * 1024; i += 8) probe(stk::load_u64(data + i));
    for (uint64_t k = 0; k < 256; k++) probe(stk::mix64(k));
    return 0;
}
