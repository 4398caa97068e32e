// Cuckoo table load: for d=2, b=4 and the kick caps 1, 2, 4, 8 (the spec's L_cuckoo) and 64, the
// load at which an insertion first needs the stash, on C = 4 * 2^16 slots (smallest n found by
// bisection on the deterministic build), and build ns/item at 90 % load.  Then a table of the
// real models' size (N keys, default 1.8 M: SmolLM2-135M's delta entries, a 30 MB table larger
// than the caches): its build and mphf_cuckoo's 12.4 read-back loop (every key found with its
// value, CuckooTable::prefetch issued 16 keys ahead), seconds, median of 5.
//
//   mphf_cuckoo_load [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

int main(int argc, char **argv) {
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

    const size_t big = argc > 1 ? size_t(std::strtoull(argv[1], nullptr, 10)) : 1800000;
    std::vector<uint64_t> bk(big);
    std::vector<uint32_t> bv(big);
    for (size_t i = 0; i < big; i++) bk[i] = splitmix64_next(&s), bv[i] = uint32_t(splitmix64_next(&s));
    const size_t bytes = cuckoo_build_arena_size(big, p);
    std::unique_ptr<uint8_t[]> mem(new uint8_t[bytes]);
    std::vector<double> tb, tr;
    uint64_t found = 0;
    for (int r = 0; r < 5; r++) {
        Arena a(mem.get(), bytes);
        auto t0 = std::chrono::steady_clock::now();
        CuckooTable table = cuckoo_build(bk.data(), bv.data(), big, p, a, nullptr);
        auto t1 = std::chrono::steady_clock::now();
        found = 0;
        for (size_t e = 0; e < big; e++) {
            if (e + 16 < big) table.prefetch(bk[e + 16]);
            uint32_t v = 0, probes = 0;
            found += table.find(bk[e], &v, &probes) && v == bv[e];
        }
        auto t2 = std::chrono::steady_clock::now();
        tb.push_back(std::chrono::duration<double>(t1 - t0).count());
        tr.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(tb.begin(), tb.end());
    std::sort(tr.begin(), tr.end());
    std::printf("%zu keys at 90 %% load (%.1f MB table): build %.3f s, read-back %.3f s (%zu found; median of 5)\n", big,
                double(cuckoo_serialized_size_for(big, p)) / 1e6, tb[2], tr[2], size_t(found));
    return found == big ? 0 : 1;
}
