// Karp-Rabin rolling hashes of seed 4.3: RH(b_0..b_{n-1}) = sum b_i * B^(n-1-i) mod 2^64 with
// B = 257.  Unsigned overflow is the "mod 2^64"; every update is a multiply-add, no branch.
// For n <= 7 the value is the exact base-257 number (< 2^64), so distinct pieces of one length
// never collide; from n = 8 on two pieces may, and the tables' Dec guard keeps lookups exact.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk::hash {

constexpr uint64_t kRollingBase = 257;
constexpr uint32_t kMaxRollingLen = 64;  // the CLI's Ltok cap

// P[i] = B^i mod 2^64 for i <= kMaxRollingLen.
struct RollingPowers {
    uint64_t p[kMaxRollingLen + 1];
    constexpr RollingPowers() : p() {
        p[0] = 1;
        for (uint32_t i = 1; i <= kMaxRollingLen; i++) p[i] = p[i - 1] * kRollingBase;
    }
};
inline constexpr RollingPowers kRollingPowers{};

// RH of n bytes.
inline uint64_t rolling_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = h * kRollingBase + p[i];
    return h;
}

// Slide a window of length n one byte: drop `out` (the oldest byte), append `in`.
inline uint64_t rolling_roll(uint64_t h, uint8_t out, uint8_t in, uint32_t n) {
    return (h - uint64_t(out) * kRollingPowers.p[n - 1]) * kRollingBase + in;
}

// Prefix hashes of the windows starting at p: out[k] = RH(p[0..k]) for k < n.  The greedy encoder
// computes all L_tok candidate lengths at one position this way (n multiply-adds).
inline void rolling_prefixes(const uint8_t *p, uint32_t n, uint64_t *out) {
    uint64_t h = 0;
    for (uint32_t k = 0; k < n; k++) {
        h = h * kRollingBase + p[k];
        out[k] = h;
    }
}

}  // namespace stk::hash
