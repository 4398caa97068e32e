// The bounded cuckoo table (seed 7.5): every item found with its value within d*b+S+1 probes,
// the report's exact counts (deterministic), the load reachable with the kick cap 8, stash ->
// ring -> emergency -> STK_E_TABLE_FULL in that order, serialization and a loader that refuses
// corruption.
#include <algorithm>
#include <memory>

#include "alloc_counter.h"
#include "test_util.h"  // after the standard headers: cmocka defines a `fail` macro

#include "core/checksum.h"
#include "core/prng.h"
#include "hash/cuckoo.h"

using namespace stk;

// Every operator new of this program counts (alloc_counter.h): the hot paths must add none.

namespace {

struct Built {
    std::unique_ptr<uint8_t[]> mem;
    Arena arena;
    CuckooTable t;
    CuckooReport r;
    std::vector<uint64_t> keys;
    std::vector<uint32_t> vals;
    Built(size_t n, const CuckooParams &p, uint64_t seed = 1) : keys(n), vals(n) {
        uint64_t s = seed;
        for (size_t i = 0; i < n; i++) {
            keys[i] = splitmix64_next(&s);
            vals[i] = uint32_t(i * 2654435761u);
        }
        size_t bytes = cuckoo_build_arena_size(n, p);
        mem.reset(new uint8_t[bytes]);
        arena = Arena(mem.get(), bytes);
        t = cuckoo_build(keys.data(), vals.data(), n, p, arena, &r);
    }
};

// Smallest n (of C = 4096 * 4 slots) whose build first needs the stash, scanning by 16.
double first_stash_load(uint32_t kick_cap) {
    CuckooParams p;
    p.kick_cap = kick_cap;
    p.stash = 64;
    const uint64_t C = 4096 * 4;
    for (uint64_t n = C * 80 / 100; n <= C; n += 16) {
        p.load = double(n) / double(C);
        try {
            Built b(n, p, 99);
            if (b.r.stash_used > 0) return double(n) / double(C);
        } catch (const Error &) {
            return double(n) / double(C);
        }
    }
    return 1.0;
}

}  // namespace

static void lookups_and_report(void **) {
    CuckooParams p;  // d=2, b=4, S=4, kicks 8, load 0.90
    Built b(10000, p);
    {
        // No heap allocation in the build or the lookups.
        std::vector<uint8_t> mem(cuckoo_build_arena_size(10000, p));
        Arena a(mem.data(), mem.size());
        size_t before = g_news;
        CuckooTable t = cuckoo_build(b.keys.data(), b.vals.data(), 10000, p, a, nullptr);
        uint32_t v = 0, hits = 0;
        for (uint64_t k : b.keys) hits += t.find(k, &v);
        assert_int_equal(g_news, before);
        assert_int_equal(hits, 10000);
    }
    assert_int_equal(b.t.n_buckets, 2778);  // ceil(10000 / 3.6)
    assert_int_equal(b.r.capacity, 11112);
    assert_int_equal(b.r.ring_capacity, 11112 / 32);
    assert_int_equal(b.r.items, 10000);
    // Deterministic report (pinned): everything in buckets, 989 relocations in all.
    assert_int_equal(b.r.in_buckets, 10000);
    assert_int_equal(b.r.stash_used, 0);
    assert_int_equal(b.r.ring_used, 0);
    assert_int_equal(b.r.emergency_used, 0);
    assert_int_equal(b.r.kicks, 989);
    uint32_t max_probes = 0;
    for (size_t i = 0; i < b.keys.size(); i++) {
        uint32_t v = 0, probes = 0;
        assert_true(b.t.find(b.keys[i], &v, &probes));
        assert_int_equal(v, b.vals[i]);
        max_probes = std::max(max_probes, probes);
    }
    assert_true(max_probes <= 2 * 4 + 4 + 1);
    uint64_t s = 12345;
    for (int i = 0; i < 10000; i++) {
        uint32_t v, probes;
        assert_false(b.t.find(splitmix64_next(&s), &v, &probes));
        assert_true(probes <= 13);  // d*b + S + 1 (stash empty here: 8)
    }
}

static void achievable_load_with_kick_cap_8(void **) {
    // d=2, b=4, kicks <= 8 (BFS): the first stash use comes at 97.2 % load (C = 16384).
    double l8 = first_stash_load(8);
    assert_true(l8 > 0.97 && l8 < 0.975);
    Built b(
        uint64_t(0.96 * 16384),
        [] {
            CuckooParams p;
            p.load = 0.96;
            return p;
        }(),
        99);
    assert_int_equal(b.r.stash_used, 0);
    assert_true(b.r.load() > 0.959);
    assert_true(b.r.max_chain >= 2 && b.r.max_chain <= 8);
    print_message("load %.4f: max chain %u, kicks %llu\n", b.r.load(), b.r.max_chain, (unsigned long long)b.r.kicks);
}

static void stash_ring_emergency_full(void **) {
    // One slot per key and one choice: collisions must go stash -> ring -> emergency.
    CuckooParams p;
    p.d = 1;
    p.b = 1;
    p.stash = 1;
    p.load = 0.25;
    Built b8(8, p, 7);
    assert_int_equal(b8.r.stash_used, 1);
    assert_int_equal(b8.r.ring_used, 0);
    assert_int_equal(b8.r.emergency_used, 0);
    Built b16(16, p, 7);
    assert_int_equal(b16.r.stash_used, 1);
    assert_int_equal(b16.r.ring_capacity, 2);
    assert_int_equal(b16.r.ring_used, 1);
    assert_int_equal(b16.r.emergency_used, 1);
    for (size_t i = 0; i < 16; i++) {
        uint32_t v, probes;
        assert_true(b16.t.find(b16.keys[i], &v, &probes));
        assert_int_equal(v, b16.vals[i]);
        assert_true(probes <= 1 * 1 + 1 + 1);
    }
    std::string m = test::expect_error(STK_E_TABLE_FULL, [&] { Built b24(24, p, 7); });
    assert_contains(m, "stash 1/1, ring 3/3 and the emergency slot used (24 items, capacity 96)");
    // Duplicates refused.
    CuckooParams q;
    std::vector<uint64_t> k = {1, 2, 3, 2};
    std::vector<uint32_t> v = {1, 2, 3, 4};
    std::vector<uint8_t> mem(cuckoo_build_arena_size(4, q));
    Arena a(mem.data(), mem.size());
    m = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { cuckoo_build(k.data(), v.data(), 4, q, a, nullptr); });
    assert_contains(m, "duplicate key 0000000000000002 at position 3");
    assert_int_equal(a.used(), 0);
}

static void serialization(void **) {
    CuckooParams p;
    p.d = 1;
    p.b = 1;
    p.stash = 1;
    p.load = 0.25;
    Built b(16, p, 7);  // uses stash and the emergency slot
    std::vector<uint8_t> blob(b.t.serialized_size());
    b.t.serialize(blob.data());
    assert_int_equal(blob.size(), 64 + 64 + 8 * 64 + 4 * 64 + 8 * 1 + 8);
    CuckooTable t = CuckooTable::load(blob.data(), blob.size(), "cuckoo_delta.bin");
    for (size_t i = 0; i < 16; i++) {
        uint32_t v;
        assert_true(t.find(b.keys[i], &v));
        assert_int_equal(v, b.vals[i]);
    }
    // Same input, same bytes (pinned).
    Built again(16, p, 7);
    std::vector<uint8_t> blob2(again.t.serialized_size());
    again.t.serialize(blob2.data());
    assert_memory_equal(blob.data(), blob2.data(), blob.size());
    std::vector<uint8_t> bad = blob;
    std::string m =
        test::expect_error(STK_E_TRUNCATED, [&] { CuckooTable::load(bad.data(), bad.size() - 8, "cuckoo_delta.bin"); });
    assert_contains(m, "cuckoo_delta.bin");
    bad[64 + 3] |= 0x2;  // occupancy bit beyond b = 1
    m = test::expect_error(STK_E_CORRUPT, [&] { CuckooTable::load(bad.data(), bad.size(), "x"); });
    assert_contains(m, "offset 67");
    bad = blob;
    bad[32] ^= 1;  // item count
    test::expect_error(STK_E_CORRUPT, [&] { CuckooTable::load(bad.data(), bad.size(), "x"); });
    bad = blob;
    bad[16] = 0xFF;  // bucket count
    test::expect_error(STK_E_TRUNCATED, [&] { CuckooTable::load(bad.data(), bad.size(), "x"); });
    bad = blob;
    bad[4] = 9;  // d
    test::expect_error(STK_E_CORRUPT, [&] { CuckooTable::load(bad.data(), bad.size(), "x"); });
}

// cuckoo_serialized_size_for (what `stk convert --dry-run` plans) is the built table's size: it
// depends on the item count and the sizing load alone.
static void serialized_size_for(void **) {
    for (size_t n : {size_t(0), size_t(1), size_t(100), size_t(5000)}) {
        for (double load : {0.90, 0.75}) {
            CuckooParams p;
            p.load = load;
            Built b(n, p, 11 + n);
            assert_int_equal(b.t.serialized_size(), cuckoo_serialized_size_for(n, p));
        }
    }
    CuckooParams lo, hi;
    lo.load = 0.75;
    assert_true(cuckoo_serialized_size_for(5000, lo) > cuckoo_serialized_size_for(5000, hi));  // a lower load: more buckets
    assert_true(cuckoo_serialized_size_for(5001, hi) >= cuckoo_serialized_size_for(5000, hi));
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lookups_and_report),        cmocka_unit_test(achievable_load_with_kick_cap_8),
        cmocka_unit_test(stash_ring_emergency_full), cmocka_unit_test(serialization),
        cmocka_unit_test(serialized_size_for),
    };
    return cmocka_run_group_tests_name("cuckoo", tests, nullptr, nullptr);
}
