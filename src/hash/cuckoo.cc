#include "hash/cuckoo.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"
#include "core/prng.h"

namespace stk {

namespace {

struct Layout {
    uint64_t keys, vals, skeys, svals, total;
};

Layout layout(uint64_t nb, uint32_t b, uint32_t s) {
    Layout l;
    uint64_t slots = checked_mul(nb, b, "cuckoo slots");
    l.keys = checked_add(kCuckooHeaderSize, align_up(nb, 8), "cuckoo size");
    l.vals = checked_add(l.keys, checked_mul(slots, 8, "cuckoo keys"), "cuckoo size");
    l.skeys = checked_add(l.vals, align_up(checked_mul(slots, 4, "cuckoo values"), 8), "cuckoo size");
    l.svals = l.skeys + 8ull * s;
    l.total = l.svals + align_up(4ull * s, 8);
    return l;
}

void check_params(const CuckooParams &p) {
    if (p.d < 1 || p.d > 8) throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: d = %u outside 1..8", p.d);
    if (p.b < 1 || p.b > 8) throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: b = %u outside 1..8", p.b);
    if (p.stash > 64) throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: stash = %u above 64", p.stash);
    if (p.kick_cap > 64) throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: kick cap = %u above 64", p.kick_cap);
    if (!(p.load > 0.05 && p.load <= 1.0)) throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: load %g outside (0.05, 1]", p.load);
}

uint64_t buckets_for(uint64_t n, const CuckooParams &p) {
    return std::max<uint64_t>(1, uint64_t(std::ceil(double(n) / (double(p.b) * p.load))));
}

struct Builder {
    CuckooTable &t;
    const CuckooParams &p;
    uint64_t kicks = 0;
    uint32_t max_chain = 0;
    Builder(CuckooTable &table, const CuckooParams &params) : t(table), p(params) {}

    bool place_free(uint64_t key, uint32_t val) {
        const uint8_t mask = uint8_t((1u << t.b) - 1);
        for (uint32_t i = 0; i < t.d; i++) {
            uint64_t bk = t.bucket(key, i);
            uint8_t free = uint8_t(~t.occ[bk] & mask);
            if (free) {
                uint64_t slot = bk * t.b + uint32_t(__builtin_ctz(free));
                store_le<uint64_t>(t.keys + 8 * slot, key);
                store_le<uint32_t>(t.vals + 4 * slot, val);
                t.occ[bk] |= uint8_t(free & -free);
                return true;
            }
        }
        return false;
    }
    // Breadth-first search for the shortest chain of at most kick_cap relocations that frees a
    // slot for the key (libcuckoo's BFS insertion; a random walk with only 8 kicks stalls near
    // 87 % load).  Bounded: at most kBfsNodes slots examined.  On failure nothing moved and the
    // key itself is homeless.
    static constexpr uint32_t kBfsNodes = 1024;
    struct Node {
        uint64_t bucket;
        uint32_t slot, parent, depth;
    };
    Node q[kBfsNodes];

    bool on_path(uint32_t at, uint64_t bk, uint32_t slot) const {
        for (uint32_t i = at; i != ~0u; i = q[i].parent)
            if (q[i].bucket == bk && q[i].slot == slot) return true;
        return false;
    }
    bool insert(uint64_t key, uint32_t val) {
        if (place_free(key, val)) return true;
        if (p.kick_cap == 0) return false;
        const uint8_t mask = uint8_t((1u << t.b) - 1);
        uint32_t head = 0, tail = 0;
        for (uint32_t i = 0; i < t.d; i++) {
            uint64_t bk = t.bucket(key, i);
            bool dup = false;
            for (uint32_t j = 0; j < i; j++) dup |= t.bucket(key, j) == bk;
            if (dup) continue;
            for (uint32_t s = 0; s < t.b && tail < kBfsNodes; s++) q[tail++] = {bk, s, ~0u, 1};
        }
        while (head < tail) {
            uint32_t at = head++;
            const Node nd = q[at];
            uint64_t vk = t.key_at(nd.bucket * t.b + nd.slot);
            for (uint32_t j = 0; j < t.d; j++) {
                uint64_t nb = t.bucket(vk, j);
                if (nb == nd.bucket) continue;
                uint8_t free = uint8_t(~t.occ[nb] & mask);
                if (free) {
                    // Move along the chain from its far end: each item into the slot freed after it.
                    uint64_t to_bucket = nb;
                    uint32_t to_slot = uint32_t(__builtin_ctz(free));
                    t.occ[nb] |= uint8_t(1u << to_slot);
                    for (uint32_t i = at; i != ~0u; i = q[i].parent) {
                        uint64_t from = q[i].bucket * t.b + q[i].slot, to = to_bucket * t.b + to_slot;
                        store_le<uint64_t>(t.keys + 8 * to, t.key_at(from));
                        store_le<uint32_t>(t.vals + 4 * to, t.val_at(from));
                        to_bucket = q[i].bucket;
                        to_slot = q[i].slot;
                        kicks++;
                    }
                    max_chain = std::max(max_chain, nd.depth);
                    uint64_t root = to_bucket * t.b + to_slot;
                    store_le<uint64_t>(t.keys + 8 * root, key);
                    store_le<uint32_t>(t.vals + 4 * root, val);
                    return true;
                }
                if (nd.depth >= p.kick_cap) continue;
                for (uint32_t s = 0; s < t.b && tail < kBfsNodes; s++)
                    if (!on_path(at, nb, s)) q[tail++] = {nb, s, at, nd.depth + 1};
            }
        }
        return false;
    }
};

// How many keys ahead a loop over keys prefetches their buckets (a table larger than the caches
// otherwise costs a few dependent misses per key, which the hint overlaps).
constexpr size_t kPrefetchAhead = 16;

}  // namespace

bool CuckooTable::find(uint64_t key, uint32_t *value, uint32_t *probes) const {
    uint32_t n = 0;
    bool hit = false;
    for (uint32_t i = 0; i < d && !hit; i++) {
        uint64_t bk = bucket(key, i);
        uint8_t o = occ[bk];
        for (uint32_t s = 0; s < b; s++) {
            n++;
            uint64_t slot = bk * b + s;
            if ((o >> s & 1) && key_at(slot) == key) {
                *value = val_at(slot);
                hit = true;
                break;
            }
        }
    }
    for (uint32_t s = 0; s < stash_count && !hit; s++) {
        n++;
        if (load_le<uint64_t>(skeys + 8 * s) == key) {
            *value = load_le<uint32_t>(svals + 4 * s);
            hit = true;
        }
    }
    if (!hit && emergency_used) {
        n++;
        if (emergency_key == key) {
            *value = emergency_value;
            hit = true;
        }
    }
    if (probes) *probes = n;
    return hit;
}

size_t cuckoo_build_arena_size(uint64_t n, const CuckooParams &p) {
    check_params(p);
    uint64_t nb = buckets_for(n, p);
    ArenaSizer z;
    z.add(size_t(layout(nb, p.b, p.stash).total));
    z.add_array<uint64_t>(nb * p.b / 32 + 1);  // ring keys
    z.add_array<uint32_t>(nb * p.b / 32 + 1);  // ring values
    z.add(sizeof(Builder), alignof(Builder));
    return z.total();
}

CuckooTable cuckoo_build(const uint64_t *keys, const uint32_t *values, size_t n, const CuckooParams &p, Arena &arena,
                         CuckooReport *report) {
    check_params(p);
    CuckooTable t;
    t.d = p.d;
    t.b = p.b;
    t.stash = p.stash;
    t.salt = p.salt;
    t.n_buckets = buckets_for(n, p);
    size_t mark0 = arena.mark();
    try {
        Layout l = layout(t.n_buckets, t.b, t.stash);
        // One block in serialized order (the header part stays unused): serialize() is a copy.
        uint8_t *blk = arena.alloc_array<uint8_t>(size_t(l.total));
        t.occ = blk + kCuckooHeaderSize;
        t.keys = blk + l.keys;
        t.vals = blk + l.vals;
        t.skeys = blk + l.skeys;
        t.svals = blk + l.svals;
        size_t mark = arena.mark();
        uint64_t cap = t.n_buckets * t.b;
        uint32_t q = uint32_t(std::min<uint64_t>(cap / 32, 0xFFFFFFFFu));
        uint64_t *rk = arena.alloc_array<uint64_t>(size_t(q) + 1);
        uint32_t *rv = arena.alloc_array<uint32_t>(size_t(q) + 1);
        uint32_t ring_n = 0;
        // The BFS queue is 24 KiB: in the arena, not on the stack.
        Builder *bldp = new (arena.alloc(sizeof(Builder), alignof(Builder))) Builder(t, p);
        Builder &bld = *bldp;
        auto homeless = [&](uint64_t k, uint32_t v, bool ring_ok) {
            if (t.stash_count < t.stash) {
                store_le<uint64_t>(t.skeys + 8 * t.stash_count, k);
                store_le<uint32_t>(t.svals + 4 * t.stash_count, v);
                t.stash_count++;
            } else if (ring_ok && ring_n < q) {
                rk[ring_n] = k;
                rv[ring_n] = v;
                ring_n++;
            } else if (!t.emergency_used) {
                t.emergency_used = 1;
                t.emergency_key = k;
                t.emergency_value = v;
            } else {
                throw_error(
                    STK_E_TABLE_FULL,
                    "cuckoo table full: key %016llx homeless after %u kicks with stash %u/%u, ring %u/%u and the emergency "
                    "slot used (%zu items, capacity %llu)",
                    (unsigned long long)k, p.kick_cap, t.stash_count, t.stash, ring_n, q, n, (unsigned long long)cap);
            }
        };
        for (size_t i = 0; i < n; i++) {
            if (i + kPrefetchAhead < n) t.prefetch(keys[i + kPrefetchAhead]);  // a hint: the table is the same
            uint32_t dummy;
            if (t.find(keys[i], &dummy))
                throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: duplicate key %016llx at position %zu", (unsigned long long)keys[i],
                            i);
            uint64_t k = keys[i];
            uint32_t v = values[i];
            if (!bld.insert(k, v)) homeless(k, v, true);
        }
        // The ring: one more insertion attempt each, in order, after everything else.
        // (A key inserted twice while its first copy waited in the ring shows up here.)
        for (uint32_t r = 0; r < ring_n; r++) {
            uint64_t k = rk[r];
            uint32_t v = rv[r], dummy;
            if (t.find(k, &dummy)) throw_error(STK_E_INVALID_ARGUMENT, "cuckoo: duplicate key %016llx", (unsigned long long)k);
            if (!bld.insert(k, v)) homeless(k, v, false);
        }
        t.items = n;
        if (report) {
            uint64_t occupied = 0;
            for (uint64_t bk = 0; bk < t.n_buckets; bk++) occupied += uint32_t(__builtin_popcount(t.occ[bk]));
            report->items = n;
            report->capacity = cap;
            report->in_buckets = occupied;
            report->stash_used = t.stash_count;
            report->ring_capacity = q;
            report->ring_used = ring_n;
            report->emergency_used = t.emergency_used;
            report->kicks = bld.kicks;
            report->max_chain = bld.max_chain;
        }
        arena.reset(mark);
    } catch (...) {
        arena.reset(mark0);
        throw;
    }
    return t;
}

size_t cuckoo_serialized_size_for(uint64_t n, const CuckooParams &p) {
    return size_t(layout(buckets_for(n, p), p.b, p.stash).total);
}

size_t CuckooTable::serialized_size() const { return size_t(layout(n_buckets, b, stash).total); }

void CuckooTable::serialize(uint8_t *out) const {
    Layout l = layout(n_buckets, b, stash);
    std::memset(out, 0, size_t(l.total));
    store_le<uint32_t>(out, kCuckooMagic);
    store_le<uint32_t>(out + 4, d);
    store_le<uint32_t>(out + 8, b);
    store_le<uint32_t>(out + 12, stash);
    store_le<uint64_t>(out + 16, n_buckets);
    store_le<uint64_t>(out + 24, salt);
    store_le<uint64_t>(out + 32, items);
    store_le<uint32_t>(out + 40, stash_count);
    store_le<uint32_t>(out + 44, emergency_used);
    store_le<uint64_t>(out + 48, emergency_key);
    store_le<uint32_t>(out + 56, emergency_value);
    std::memcpy(out + kCuckooHeaderSize, occ, size_t(n_buckets));
    std::memcpy(out + l.keys, keys, size_t(n_buckets * b * 8));
    std::memcpy(out + l.vals, vals, size_t(n_buckets * b * 4));
    std::memcpy(out + l.skeys, skeys, size_t(stash) * 8);
    std::memcpy(out + l.svals, svals, size_t(stash) * 4);
}

CuckooTable CuckooTable::load(const uint8_t *data, size_t size, const char *what) {
    if (size < kCuckooHeaderSize)
        throw_error(STK_E_TRUNCATED, "%s: %zu bytes, shorter than the 64-byte cuckoo header", what, size);
    if (load_u32(data) != kCuckooMagic)
        throw_error(STK_E_BAD_MAGIC, "%s: offset 0: not a cuckoo table (magic %08x)", what, load_u32(data));
    CuckooTable t;
    t.d = load_u32(data + 4);
    t.b = load_u32(data + 8);
    t.stash = load_u32(data + 12);
    t.n_buckets = load_u64(data + 16);
    t.salt = load_u64(data + 24);
    t.items = load_u64(data + 32);
    t.stash_count = load_u32(data + 40);
    t.emergency_used = load_u32(data + 44);
    t.emergency_key = load_u64(data + 48);
    t.emergency_value = load_u32(data + 56);
    if (t.d < 1 || t.d > 8) throw_error(STK_E_CORRUPT, "%s: offset 4: d = %u outside 1..8", what, t.d);
    if (t.b < 1 || t.b > 8) throw_error(STK_E_CORRUPT, "%s: offset 8: b = %u outside 1..8", what, t.b);
    if (t.stash > 64) throw_error(STK_E_CORRUPT, "%s: offset 12: stash = %u above 64", what, t.stash);
    if (t.n_buckets == 0) throw_error(STK_E_CORRUPT, "%s: offset 16: zero buckets", what);
    if (t.stash_count > t.stash)
        throw_error(STK_E_CORRUPT, "%s: offset 40: stash count %u > stash %u", what, t.stash_count, t.stash);
    if (t.emergency_used > 1) throw_error(STK_E_CORRUPT, "%s: offset 44: emergency flag %u", what, t.emergency_used);
    if (load_u32(data + 60) != 0) throw_error(STK_E_CORRUPT, "%s: offset 60: reserved bytes not zero", what);
    if (t.n_buckets > size)
        throw_error(STK_E_TRUNCATED, "%s: offset 16: %llu buckets in %zu bytes", what, (unsigned long long)t.n_buckets, size);
    Layout l = layout(t.n_buckets, t.b, t.stash);
    if (l.total != size)
        throw_error(l.total > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH,
                    "%s: cuckoo table is %zu bytes, its header needs %llu", what, size, (unsigned long long)l.total);
    uint8_t *base = const_cast<uint8_t *>(data);  // views are only read
    t.occ = base + kCuckooHeaderSize;
    t.keys = base + l.keys;
    t.vals = base + l.vals;
    t.skeys = base + l.skeys;
    t.svals = base + l.svals;
    const uint8_t mask = uint8_t((1u << t.b) - 1);
    uint64_t count = t.stash_count + t.emergency_used;
    for (uint64_t bk = 0; bk < t.n_buckets; bk++) {
        if (t.occ[bk] & ~mask)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: occupancy bits beyond b = %u", what,
                        (unsigned long long)(kCuckooHeaderSize + bk), t.b);
        count += uint32_t(__builtin_popcount(t.occ[bk]));
    }
    if (count != t.items)
        throw_error(STK_E_CORRUPT, "%s: offset 32: %llu items, the table holds %llu", what, (unsigned long long)t.items,
                    (unsigned long long)count);
    return t;
}

}  // namespace stk
