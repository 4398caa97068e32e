// 64-bit hashing shared by the MPHF, the cuckoo table and the tokenizer tables: a seeded mixer
// for u64 keys, a wyhash-style hash of byte strings (written here; every byte counts, zero bytes
// included, and the length is mixed in so "\0" and "\0\0" differ), and fastrange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/prng.h"

namespace stk::hash {

// 64x64 -> 128 multiply folded to 64 bits (the "mum" of wyhash / rapidhash).
inline uint64_t mum(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return uint64_t(r) ^ uint64_t(r >> 64);
}

// Maps a uniformly distributed x onto [0, n) without division (Lemire's fastrange).
inline uint64_t fastrange(uint64_t x, uint64_t n) { return uint64_t(((__uint128_t)x * n) >> 64); }

// A u64 key under a salt: mix64 (one splitmix64 step: golden-ratio increment, then the finaliser)
// of key ^ f(salt).  A bijection for a fixed salt, so distinct keys never collide here.
inline uint64_t salt_key(uint64_t salt) { return mix64(salt ^ 0x2545F4914F6CDD1Dull); }
inline uint64_t hash_u64(uint64_t key, uint64_t salt) { return mix64(key ^ salt_key(salt)); }
// The same with salt_key(salt) computed once (hot loops).
inline uint64_t hash_u64_keyed(uint64_t key, uint64_t skey) { return mix64(key ^ skey); }

namespace detail {
inline uint64_t r64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline uint64_t r32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
constexpr uint64_t kS0 = 0x2d358dccaa6c78a5ull, kS1 = 0x8bb84b93962eacc9ull, kS2 = 0x4b33a62ed433d4a3ull;
}  // namespace detail

// Hash of n bytes under a salt.  Short inputs (<= 16 bytes, all token pieces of L_tok <= 16)
// take two overlapping loads and two multiplies.
inline uint64_t hash_bytes(const void *data, size_t n, uint64_t salt) {
    using namespace detail;
    const uint8_t *p = static_cast<const uint8_t *>(data);
    uint64_t seed = salt ^ mum(salt ^ kS0, kS1);
    uint64_t a, b;
    if (n <= 16) {
        if (n >= 4) {
            size_t d = (n >> 3) << 2;
            a = (r32(p) << 32) | r32(p + d);
            b = (r32(p + n - 4) << 32) | r32(p + n - 4 - d);
        } else if (n > 0) {
            a = (uint64_t(p[0]) << 16) | (uint64_t(p[n >> 1]) << 8) | p[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = n;
        uint64_t s1 = seed, s2 = seed;
        while (i > 32) {
            seed = mum(r64(p) ^ kS1, r64(p + 8) ^ seed);
            s1 = mum(r64(p + 16) ^ kS2, r64(p + 24) ^ s1);
            p += 32;
            i -= 32;
        }
        seed ^= s1 ^ s2;
        if (i > 16) {
            seed = mum(r64(p) ^ kS1, r64(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = r64(p + i - 16);
        b = r64(p + i - 8);
    }
    a ^= kS1;
    b ^= seed;
    __uint128_t r = (__uint128_t)a * b;
    a = uint64_t(r);
    b = uint64_t(r >> 64);
    return mum(a ^ kS0 ^ uint64_t(n), b ^ kS1);
}

}  // namespace stk::hash
