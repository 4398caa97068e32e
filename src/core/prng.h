// The spec's PRNG (seed 5.1) and 64-bit mixers.  Pure functions of their inputs: determinism.
#pragma once

#include <cstdint>

namespace stk {

// splitmix64 as written in seed 5.1: advances *state and returns the mixed value.
inline uint64_t splitmix64_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// One full splitmix64 step from state x, the golden-ratio increment included (not the bare
// finaliser: mix64(0) = 0xE220A8397B1DCDAF); docs/format.md "PRNG streams".
inline uint64_t mix64(uint64_t x) {
    uint64_t s = x;
    return splitmix64_next(&s);
}

// Seeded mixer of a key: independent-looking functions for different seeds.
inline uint64_t mix64(uint64_t key, uint64_t seed) { return mix64(key ^ mix64(seed ^ 0xD6E8FEB86659FD93ull)); }

// A PRNG stream named by (module, layer, counter) - seed 10.4: no data-dependent reseeding.
inline uint64_t stream_seed(uint64_t master, uint32_t module_id, uint32_t layer_id) {
    return mix64(master ^ mix64((uint64_t(module_id) << 32) | layer_id));
}

// Top 53 bits as a double in [0, 1) (seed 5.1: u = (x >> 11) * 2^-53).
inline double to_unit(uint64_t x) { return double(x >> 11) * 0x1.0p-53; }

}  // namespace stk
