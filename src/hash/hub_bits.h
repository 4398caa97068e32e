// The hashes behind the bridge's hub bitsets (seed 9.2, 11 hubs_and_routes): which bits a token
// row and a context row set, and which context a position has.  bridge_init builds
// bridge_hubs.bin with them and a runtime computes a position's context key for STK_LOOKUP_HUB
// with them, so they live below both (docs/format.md "Bridge arrays").
#pragma once

#include <cstdint>

#include "hash/hash64.h"

namespace stk {

constexpr uint32_t kBridgeMinContexts = 64, kBridgeMaxContexts = 65536;
constexpr uint32_t kBridgeNoToken = 0xFFFFFFFFu;  // "no previous token" (start of a sequence)

// Salts of the bitset hashes (the ASCII of "brg-tokA", "brg-tokB", "brg-ctxA", "brg-ctxB",
// "brg-ctx0" read as little-endian u64).  Bit of id under salt: ((mix64(id, salt) >> 32) * 64 w) >> 32.
constexpr uint64_t kSaltTokA = 0x416b6f742d677262ull, kSaltTokB = 0x426b6f742d677262ull;
constexpr uint64_t kSaltCtxA = 0x417874632d677262ull, kSaltCtxB = 0x427874632d677262ull;
constexpr uint64_t kSaltCtxId = 0x307874632d677262ull;

// Bit position in [0, 64 w) of id under salt: the top 32 bits of the hash, scaled (multiply-shift).
inline uint32_t hub_bit_of(uint64_t id, uint64_t salt, uint32_t w) {
    return uint32_t(((mix64(id, salt) >> 32) * uint64_t(64 * w)) >> 32);
}

// w words with the two bits of id set (one if the two hashes collide).
inline void hub_two_bit_row(uint64_t id, uint64_t salt_a, uint64_t salt_b, uint32_t w, uint64_t *row) {
    for (uint32_t i = 0; i < w; i++) row[i] = 0;
    const uint32_t a = hub_bit_of(id, salt_a, w), b = hub_bit_of(id, salt_b, w);
    row[a >> 6] |= uint64_t(1) << (a & 63);
    row[b >> 6] |= uint64_t(1) << (b & 63);
}

// Contexts: a power of two, next_pow2(vocab) clamped to [64, 65536].
inline uint32_t bridge_context_count(uint64_t vocab) {
    uint64_t n = kBridgeMinContexts;
    while (n < vocab && n < kBridgeMaxContexts) n <<= 1;
    return uint32_t(n);
}
// The context of a position: a hash bucket of the two previous token ids (kBridgeNoToken where
// there is none).  n_contexts is a power of two.
inline uint32_t bridge_context_id(uint32_t prev1, uint32_t prev2, uint32_t n_contexts) {
    return uint32_t(mix64((uint64_t(prev1) << 32) | prev2, kSaltCtxId) & (n_contexts - 1));
}
// A token row / a context row of a bitset.
inline void bridge_token_row(uint32_t token, uint32_t w, uint64_t *row) { hub_two_bit_row(token, kSaltTokA, kSaltTokB, w, row); }
inline void bridge_context_row(uint32_t context, uint32_t w, uint64_t *row) {
    hub_two_bit_row(context, kSaltCtxA, kSaltCtxB, w, row);
}

}  // namespace stk
