// The bounded cuckoo delta table of seed 7.5 (spec-notes 13): u64 key -> u32 value (the FFN
// stage stores f32 bits).  d candidate buckets of b slots, a stash of S slots, at most L_cuckoo
// (= 8) kicks per insertion, a ring of Q = C/32 deferred items (build time only: retried once
// after all insertions), and at most one emergency slot per table (= per shard).  A lookup probes
// at most d*b + S + 1 slots.  Insertion order is the caller's; victims are chosen by a fixed
// splitmix64 stream, so the table's bytes depend only on the input sequence and the parameters.
// docs/format.md "## Cuckoo table" specifies the serialized bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/arena.h"
#include "core/bytes.h"
#include "hash/hash64.h"

namespace stk {

struct CuckooParams {
    uint32_t d = 2;         // choices
    uint32_t b = 4;         // slots per bucket
    uint32_t stash = 4;     // S
    uint32_t kick_cap = 8;  // L_cuckoo
    double load = 0.90;     // sizing: buckets = ceil(n / (b * load))
    uint64_t salt = 0;      // manifest salts.key_salt_digest
};

struct CuckooReport {
    uint64_t items = 0;
    uint64_t capacity = 0;  // C = buckets * b
    uint64_t in_buckets = 0;
    uint32_t stash_used = 0;
    uint32_t ring_capacity = 0;  // Q = C / 32
    uint32_t ring_used = 0;      // items that went through the ring
    uint32_t emergency_used = 0;
    uint64_t kicks = 0;      // relocations in all
    uint32_t max_chain = 0;  // longest relocation chain of one insertion (<= kick cap)
    double load() const { return capacity ? double(in_buckets) / double(capacity) : 0.0; }
};

constexpr uint32_t kCuckooMagic = 0x4B434B53u;  // "SKCK" as LE bytes
constexpr size_t kCuckooHeaderSize = 64;

class CuckooTable {
public:
    uint32_t d = 0, b = 0, stash = 0;
    uint64_t n_buckets = 0, salt = 0, items = 0;
    uint32_t stash_count = 0;
    uint32_t emergency_used = 0;
    uint64_t emergency_key = 0;
    uint32_t emergency_value = 0;
    // Byte views (LE, no alignment needed): occupancy u8[buckets], keys u64[buckets*b],
    // values u32[buckets*b], stash keys u64[S], stash values u32[S].
    uint8_t *occ = nullptr, *keys = nullptr, *vals = nullptr, *skeys = nullptr, *svals = nullptr;

    uint64_t bucket(uint64_t key, uint32_t choice) const {
        return hash::fastrange(hash::hash_u64(key, salt + 0x9E3779B97F4A7C15ull * (choice + 1)), n_buckets);
    }
    uint64_t key_at(uint64_t slot) const { return load_le<uint64_t>(keys + 8 * slot); }
    uint32_t val_at(uint64_t slot) const { return load_le<uint32_t>(vals + 4 * slot); }

    // True and *value if present.  *probes (optional) counts slots compared: <= d*b + S + 1.
    bool find(uint64_t key, uint32_t *value, uint32_t *probes = nullptr) const;
    // A hint only (no result, nothing changes): starts loading the cache lines find(key) reads
    // (each choice's occupancy byte, keys and values), so that a loop over many keys can issue it
    // a few keys ahead and overlap the misses of a table larger than the caches.  The empty asm
    // keeps the loop: inlined into a caller's loop, GCC 12 at -O2 deleted it whole (a loop with
    // nothing but prefetches counts as free of side effects), so the hint did nothing before.
    void prefetch(uint64_t key) const {
        for (uint32_t i = 0; i < d; i++) {
            const uint64_t bk = bucket(key, i);
            __builtin_prefetch(occ + bk);
            __builtin_prefetch(keys + 8 * bk * b);
            __builtin_prefetch(vals + 4 * bk * b);
            asm volatile("" : : "r"(bk));
        }
    }

    size_t serialized_size() const;
    void serialize(uint8_t *out) const;
    // Validates sizes, parameters and occupancy (STK_E_* naming `what` and the offset).  The
    // views point into data (read-only use).
    static CuckooTable load(const uint8_t *data, size_t size, const char *what);
};

size_t cuckoo_build_arena_size(uint64_t n, const CuckooParams &p);
// serialized_size() of a table built over n items with these params (it depends on n and the
// sizing alone, not on the keys); what `stk convert --dry-run` plans for a cuckoo blob.
size_t cuckoo_serialized_size_for(uint64_t n, const CuckooParams &p);

// Inserts keys[i] -> values[i] in order.  Duplicate keys: STK_E_INVALID_ARGUMENT.  Kicks,
// stash, ring and the emergency slot all exhausted: STK_E_TABLE_FULL.  No heap allocation.
CuckooTable cuckoo_build(const uint64_t *keys, const uint32_t *values, size_t n, const CuckooParams &p, Arena &arena,
                         CuckooReport *report);

}  // namespace stk
