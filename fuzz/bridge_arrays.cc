// Fuzz a generation's bridge bitsets as stk_lookup reads them, after the array headers and
// checksums (which a hostile writer can make valid): input = u32 LE rows, u32 LE tokens, u8 W,
// then the payload of bridge_hubs.bin (the rest of the input).  attach_bridge validates or throws;
// after it, HUB lookups of every (token, context) the input names, of the edges and of ids just
// out of range never read outside the payload (ASan), answer false exactly for ids out of range,
// and return rows holding 2..4 bits (1-2 per row).
#include <cstdint>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"
#include "runtime/generation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9) return 0;
    const uint64_t rows = stk::load_u32(data), tokens = stk::load_u32(data + 4);
    const uint32_t w = data[8];
    // The payload in its own exact-size heap block, so ASan sees any read past it.
    std::vector<uint8_t> hubs(data + 9, data + size);
    stk_generation g;
    try {
        stk::attach_bridge(g, hubs.data(), hubs.size(), rows, w, tokens);
    } catch (const stk::Error &) {
        if (g.has_bridge) __builtin_trap();
        return 0;
    }
    auto probe = [&](uint32_t t, uint32_t c) {
        uint64_t out[3] = {};
        const bool in = t < g.bridge_tokens && c < g.bridge_contexts;
        if (stk::bridge_hub_bitset(g, t, c, out) != in) __builtin_trap();
        if (!in) return;
        uint32_t bits = 0;
        for (uint32_t i = 0; i < g.bridge_w; i++) bits += uint32_t(__builtin_popcountll(out[i]));
        if (bits < 1 || bits > 4) __builtin_trap();
    };
    const uint32_t nt = uint32_t(g.bridge_tokens), nc = g.bridge_contexts;
    for (uint32_t t : {0u, nt - 1, nt, nt + 1, 0xFFFFFFFFu})
        for (uint32_t c : {0u, nc - 1, nc, 0xFFFFFFFFu}) probe(t, c);
    for (size_t i = 0; i + 8 <= hubs.size() && i < 8 * 4096; i += 8)
        probe(stk::load_u32(hubs.data() + i) % (nt + 2), stk::load_u32(hubs.data() + i + 4) % (nc + 2));
    return 0;
}
