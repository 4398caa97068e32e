// Cuckoo table load: for d=2, b=4 and the kick caps 1, 2, 4, 8 (the spec's L_cuckoo) and 64, the
// load at which an insertion first needs the stash, on C = 4 * 2^16 slots (smallest n found by
// bisection on the deterministic build), and build ns/item at 90 % load.
//
//   mphf_cuckoo_load
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/prng.h"
#include "hash/cuckoo.h"

using namespace stk;

static bool needs_stash(const std::vector<uint64_t> &keys, const std::vector<uint32_t> &vals, size_t n, uint64_t C, uint32_t cap,
                        CuckooReport *rep) {
    CuckooParams p;
    p.kick_cap = cap;
    p.stash = 64;
    p.load = double(n) / double(C);
    size_t bytes = cuckoo_build_arena_size(n, p);
    std::unique_ptr<uint8_t[]> mem(new uint8_t[bytes]);
    Arena a(mem.get(), bytes);
    try {
        cuckoo_build(keys.data(), vals.data(), n, p, a, rep);
    } catch (const Error &) {
        return true;
    }
    return rep->stash_used > 0;
}

int main() {
    const uint64_t C = 4ull << 16;
    std::vector<uint64_t> keys(C);
    std::vector<uint32_t> vals(C);
    uint64_t s = 2024;
    for (size_t i = 0; i < C; i++) keys[i] = splitmix64_next(&s), vals[i] = uint32_t(i);
    std::printf("| kick cap | first stash use at load | longest chain below it |\n|---|---|---|\n");
    for (uint32_t cap : {1u, 2u, 4u, 8u, 64u}) {
        size_t lo = C / 2, hi = C;  // lo: no stash, hi: stash (or full)
        CuckooReport rep;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (needs_stash(keys, vals, mid, C, cap, &rep)) hi = mid;
            else lo = mid;
        }
        needs_stash(keys, vals, lo, C, cap, &rep);
        std::printf("| %u | %.4f | %u |\n", cap, double(hi) / double(C), rep.max_chain);
    }
    CuckooParams p;
    size_t n = size_t(0.9 * double(C));
    std::vector<double> t;
    for (int r = 0; r < 5; r++) {
        size_t bytes = cuckoo_build_arena_size(n, p);
        std::unique_ptr<uint8_t[]> mem(new uint8_t[bytes]);
        Arena a(mem.get(), bytes);
        auto t0 = std::chrono::steady_clock::now();
        cuckoo_build(keys.data(), vals.data(), n, p, a, nullptr);
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e9 / double(n));
    }
    std::sort(t.begin(), t.end());
    std::printf("build at 90 %% load, d=2 b=4 kick cap 8: %.1f ns/item (median of 5)\n", t[2]);
    return 0;
}
