#include "hash/mphf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"

namespace stk {

namespace {

struct Shape {
    uint64_t m, b, b1;
    uint32_t wlog;
};

Shape shape_for(uint64_t k, const MphfParams &p) {
    if (!(p.lambda >= 1.0 && p.lambda <= 64.0)) throw_error(STK_E_INVALID_ARGUMENT, "MPHF lambda %g outside [1, 64]", p.lambda);
    if (!(p.alpha > 0.5 && p.alpha <= 1.0)) throw_error(STK_E_INVALID_ARGUMENT, "MPHF alpha %g outside (0.5, 1]", p.alpha);
    if (!(p.m_scale >= 1.0 && p.m_scale <= 16.0))
        throw_error(STK_E_INVALID_ARGUMENT, "MPHF m_scale %g outside [1, 16]", p.m_scale);
    if (p.pilot_cap == 0 || p.pilot_cap > 65536)
        throw_error(STK_E_INVALID_ARGUMENT, "MPHF pilot cap %u outside [1, 65536]", p.pilot_cap);
    if (k > (uint64_t(1) << 32) - 2)
        throw_error(STK_E_INVALID_ARGUMENT, "MPHF over %llu keys: at most 2^32-2", (unsigned long long)k);
    Shape s{};
    if (k == 0) return s;
    s.m = std::max<uint64_t>(k, uint64_t(std::ceil(double(k) / p.alpha * p.m_scale)));
    s.b = std::max<uint64_t>(2, uint64_t(std::ceil(double(k) / p.lambda)));
    s.b1 = std::clamp<uint64_t>(uint64_t(std::ceil(0.3 * double(s.b))), 1, s.b - 1);
    s.wlog = mphf_window_log2(s.m);
    return s;
}

// Uninitialised scratch (every element is written before it is read).
template <class T>
T *scratch(Arena &arena, uint64_t n) {
    return static_cast<T *>(arena.alloc(size_t(checked_mul(n, sizeof(T), "MPHF scratch")), 64));
}

// Slots base .. base + 63 (mod M) of the bitmap as one word (bit i = slot base + i).  The bitmap
// keeps a copy of slots [0, 64) at bits [M, M + 64), so a window never needs to wrap.
inline uint64_t window_at(const uint64_t *taken, uint64_t base) {
    const uint64_t *w = taken + (base >> 6);
    return uint64_t((((__uint128_t)w[1] << 64) | w[0]) >> (base & 63));
}

[[noreturn]] void throw_duplicate(uint64_t h) {
    throw_error(STK_E_INVALID_ARGUMENT, "MPHF: two keys share the 64-bit hash %016llx (duplicate key)", (unsigned long long)h);
}

// Two keys of a bucket with the same hash share every slot, so no pilot places the bucket: checked
// only when a search hits that (a collision inside the bucket, or exhaustion).  O(size^2), rare.
void check_duplicates(const uint64_t *keys, uint32_t size) {
    for (uint32_t i = 0; i < size; i++)
        for (uint32_t j = i + 1; j < size; j++)
            if (keys[i] == keys[j]) throw_duplicate(keys[i]);
}

// Parts of about 2^11 keys or more (the counting sort inside a part stays in L1/L2), at most 2^9
// of them (few enough write streams for the caches and the TLB; 2^8..2^12 measured alike).
constexpr uint32_t kMaxPartBits = 9;
uint32_t partition_bits(uint64_t n) {
    uint32_t d = 0;
    while (d < kMaxPartBits && (n >> (d + 11)) != 0) d++;
    return d;
}
inline uint64_t part_of(uint64_t h, uint32_t dbits) { return dbits ? h >> (64 - dbits) : 0; }
// Buckets a part's hash range [d 2^(64-D), (d+1) 2^(64-D)) can touch: its width times the larger
// multiplier, plus the boundary buckets.
uint64_t part_bucket_span(const Shape &s, uint32_t dbits) {
    if (dbits == 0) return s.b;
    Mphf g;
    g.n_buckets = s.b;
    g.n_dense = s.b1;
    g.n_keys = 1;
    g.n_slots = s.m;
    g.derive_constants();
    uint64_t mul = std::max(g.dense_mul, g.sparse_mul);
    return std::min<uint64_t>(s.b, hash::fastrange(uint64_t(1) << (64 - dbits), mul) + 3);
}

// The search.  hash_key(i) gives key i's 64-bit hash; pilots / remap are the caller's outputs;
// scratch comes from the arena and the caller releases it.
// Where a build leaves the function: the pilot bytes (zeroed, whole blocks), the ranks, the
// escapes (capacity B; f.n_escapes used) and the remap.
struct Outputs {
    uint8_t *pilots;
    uint32_t *ranks;
    uint16_t *escapes;
    uint32_t *remap;
};

// Pilots (u16 per bucket) into bytes, ranks and escapes, in bucket order.
void encode_pilots(const uint16_t *pilots, uint64_t n_buckets, const Outputs &out, Mphf &f) {
    uint64_t e = 0;
    for (uint64_t b = 0; b < n_buckets; b++) {
        if (b % kMphfBlock == 0) out.ranks[b / kMphfBlock] = uint32_t(e);
        const uint16_t p = pilots[b];
        if (p < kMphfEscape) {
            out.pilots[b] = uint8_t(p);
        } else {
            out.pilots[b] = kMphfEscape;
            out.escapes[e++] = uint16_t(p - kMphfEscape);
        }
    }
    f.n_escapes = e;
}

template <class HashFn>
void search(size_t n, HashFn &&hash_key, Mphf &f, const Outputs &out, const MphfParams &params, Arena &arena) {
    const Shape s{f.n_slots, f.n_buckets, f.n_dense, f.window_log2};
    // Group the hashes by bucket without random writes over the whole array: bucket_of is
    // monotone in h, so a partition by the top D bits of h (2^D sequential write streams), then a
    // counting sort inside each part (its buckets are a short contiguous range) sorts them by
    // bucket.  The order inside a bucket follows the input; the result does not depend on it (a
    // pilot places a set of keys).
    const uint32_t dbits = partition_bits(n);
    const size_t parts = size_t(1) << dbits;
    uint64_t *hashes = scratch<uint64_t>(arena, n);
    uint32_t *part_at = arena.alloc_array<uint32_t>(parts + 1);
    const auto key_hash = hash_key;  // a local copy: the stores below cannot alias its captures
    for (size_t i = 0; i < n; i++) {
        uint64_t h = key_hash(i);
        hashes[i] = h;
        part_at[part_of(h, dbits) + 1]++;
    }
    for (size_t d = 0; d < parts; d++) part_at[d + 1] += part_at[d];
    uint64_t *by_part = scratch<uint64_t>(arena, n);
    {
        uint32_t *cur = scratch<uint32_t>(arena, parts);
        std::memcpy(cur, part_at, parts * sizeof(uint32_t));
        for (size_t i = 0; i < n; i++) {
            uint64_t h = hashes[i];
            by_part[cur[part_of(h, dbits)]++] = h;
        }
    }
    // Inside part d: counts per bucket of its range [lo, hi] (at most part_bucket_span buckets),
    // then scatter back into `hashes` at the part's offset.  start[b] = first key of bucket b.
    uint32_t *start = arena.alloc_array<uint32_t>(s.b + 1);
    uint32_t *local = arena.alloc_array<uint32_t>(part_bucket_span(s, dbits) + 1);
    for (size_t d = 0; d < parts; d++) {
        const uint32_t c0 = part_at[d], c1 = part_at[d + 1];
        if (c0 == c1) continue;
        const uint64_t first = dbits ? f.bucket_of(uint64_t(d) << (64 - dbits)) : 0;  // the part's smallest h
        uint64_t last = first;
        for (uint32_t i = c0; i < c1; i++) {
            uint64_t b = f.bucket_of(by_part[i]);
            local[b - first]++;
            last = std::max(last, b);
        }
        uint32_t at = c0;
        for (uint64_t b = first; b <= last; b++) {
            uint32_t c = local[b - first];
            start[b + 1] += c;  // sizes for now; prefix sums below
            local[b - first] = at;
            at += c;
        }
        for (uint32_t i = c0; i < c1; i++) {
            uint64_t h = by_part[i];
            hashes[local[f.bucket_of(h) - first]++] = h;
        }
        std::memset(local, 0, size_t(last - first + 1) * sizeof(uint32_t));
    }
    uint32_t max_size = 0, non_empty = 0;
    for (uint64_t b = 0; b < s.b; b++) {
        max_size = std::max(max_size, start[b + 1]);
        non_empty += start[b + 1] != 0;
        start[b + 1] += start[b];
    }
    f.stats.max_bucket = max_size;
    const uint64_t *sorted = hashes;
    uint64_t *base = by_part;  // free again: per-key base scratch of the bucket being placed
    // Processing order: size descending, ties by bucket index (counting sort, stable).
    uint32_t *cls = scratch<uint32_t>(arena, uint64_t(n) + 2);  // max_size <= n
    std::memset(cls, 0, (size_t(max_size) + 2) * sizeof(uint32_t));
    for (uint64_t b = 0; b < s.b; b++) cls[max_size - (start[b + 1] - start[b]) + 1]++;
    for (uint32_t i = 0; i <= max_size; i++) cls[i + 1] += cls[i];
    uint32_t *order = scratch<uint32_t>(arena, s.b);
    for (uint64_t b = 0; b < s.b; b++) order[cls[max_size - (start[b + 1] - start[b])]++] = uint32_t(b);

    uint64_t *taken = arena.alloc_array<uint64_t>((s.m + 64 + 63) / 64 + 1);
    uint16_t *pilots = arena.alloc_array<uint16_t>(s.b);  // empty buckets keep pilot 0
    const uint64_t m = s.m, cap = params.pilot_cap;
    auto set_bit = [&](uint64_t p) {
        taken[p >> 6] |= uint64_t(1) << (p & 63);
        if (p < 64) taken[(p + m) >> 6] |= uint64_t(1) << ((p + m) & 63);
    };
    auto clear_bit = [&](uint64_t p) {
        taken[p >> 6] &= ~(uint64_t(1) << (p & 63));
        if (p < 64) taken[(p + m) >> 6] &= ~(uint64_t(1) << ((p + m) & 63));
    };
    const uint32_t wlog = s.wlog;
    const uint64_t W = uint64_t(1) << wlog, wmask = W == 64 ? ~uint64_t(0) : (uint64_t(1) << W) - 1;
    uint64_t trials = 0, windows = 0;
    uint32_t max_pilot = 0;
    for (uint32_t oi = 0; oi < non_empty; oi++) {
        // The next buckets' keys are random reads (of a sweep per size class): fetch ahead.
        if (oi + 16 < non_empty) __builtin_prefetch(&start[order[oi + 16]]);
        if (oi + 8 < non_empty) __builtin_prefetch(&sorted[start[order[oi + 8]]]);
        const uint32_t b = order[oi];
        const uint64_t *keys = sorted + start[b];
        const uint32_t size = start[b + 1] - start[b];
        uint64_t q = 0, r = 0;
        for (;; q++) {
            const uint64_t first = q << wlog;  // the pilots q W .. q W + W - 1
            if (first >= cap) {
                check_duplicates(keys, size);
                throw_error(STK_E_MPHF_EXHAUSTED,
                            "MPHF seed search exhausted: bucket %u with %u keys found no pilot below %llu (K=%llu, M=%llu)", b,
                            size, (unsigned long long)cap, (unsigned long long)n, (unsigned long long)s.m);
            }
            // All W pilots at once: bit r of `ok` = every key's slot base + r is free.
            uint64_t ok = cap - first >= W ? wmask : wmask & ((uint64_t(1) << (cap - first)) - 1);
            const uint64_t pk = Mphf::pilot_key(q);
            // Buckets of up to 8 keys: no early exit, a branch on `ok` per key mispredicts more
            // than the few extra windows cost (measured: 5-8 % faster builds).
            if (size <= 8) {
                for (uint32_t i = 0; i < size; i++) {
                    uint64_t p = hash::fastrange(Mphf::slot_hash(keys[i], pk), m);
                    base[i] = p;
                    ok &= ~window_at(taken, p);
                }
            } else {
                for (uint32_t i = 0; i < size && ok; i++) {
                    uint64_t p = hash::fastrange(Mphf::slot_hash(keys[i], pk), m);
                    base[i] = p;
                    ok &= ~window_at(taken, p);
                }
            }
            if (!ok) continue;
            // The smallest r places the bucket unless two of its keys share a base (then no r of
            // this q does: all slots shift together).
            r = uint64_t(__builtin_ctzll(ok));
            uint32_t placed = 0;
            for (; placed < size; placed++) {
                uint64_t p = base[placed] + r;
                p = p >= m ? p - m : p;
                base[placed] = p;
                if (taken[p >> 6] & (uint64_t(1) << (p & 63))) break;
                set_bit(p);
            }
            if (placed == size) break;
            if (q == 0) check_duplicates(keys, size);
            for (uint32_t i = 0; i < placed; i++) clear_bit(base[i]);
        }
        const uint32_t pilot = uint32_t((q << wlog) + r);
        windows += q + 1;
        trials += uint64_t(pilot) + 1;
        pilots[b] = uint16_t(pilot);
        max_pilot = std::max(max_pilot, pilot);
    }
    encode_pilots(pilots, s.b, out, f);
    uint32_t *remap = out.remap;
    // Minimal: each taken slot at or beyond K gets one of the free slots below K, in order.
    // Word scans: the free slots below K are ~1 % of them.
    uint64_t free_word = 0, free_bits = ~taken[0];
    for (uint64_t p = n; p < s.m; p++) {
        if (!(taken[p >> 6] & (uint64_t(1) << (p & 63)))) continue;
        while (free_bits == 0) free_bits = ~taken[++free_word];
        remap[p - n] = uint32_t(free_word * 64 + uint64_t(__builtin_ctzll(free_bits)));
        free_bits &= free_bits - 1;
    }
    f.stats.max_pilot = max_pilot;
    f.stats.pilot_trials = trials;
    f.stats.window_trials = windows;
}

void size_scratch(ArenaSizer &z, uint64_t n, const Shape &s) {
    z.add_array<uint8_t>(kMphfBlock * mphf_blocks(s.b));    // output: pilot bytes, whole blocks
    z.add_array<uint32_t>(mphf_blocks(s.b));                // output: ranks
    z.add_array<uint16_t>(s.b);                             // output: escapes (at most B)
    z.add_array<uint32_t>(std::max<uint64_t>(1, s.m - n));  // output: remap
    const uint32_t dbits = partition_bits(n);
    z.add_array<uint64_t>(n);                               // hashes, then grouped by bucket
    z.add_array<uint32_t>((uint64_t(1) << dbits) + 1);      // part offsets
    z.add_array<uint64_t>(n);                               // hashes by part, then bases
    z.add_array<uint32_t>(uint64_t(1) << dbits);            // part cursors
    z.add_array<uint32_t>(s.b + 1);                         // bucket starts
    z.add_array<uint32_t>(part_bucket_span(s, dbits) + 1);  // one part's bucket counts
    z.add_array<uint32_t>(n + 2);                           // size classes (max bucket <= n)
    z.add_array<uint32_t>(s.b);                             // order
    z.add_array<uint64_t>((s.m + 64 + 63) / 64 + 1);        // taken bitmap, slots [0, 64) again, a zero word
    z.add_array<uint16_t>(s.b);                             // pilots before encoding
}

template <class HashFn>
Mphf build(size_t n, MphfKeyKind kind, const MphfParams &params, Arena &arena, HashFn &&hash_key) {
    Shape s = shape_for(n, params);
    Mphf f;
    f.kind = kind;
    f.n_keys = n;
    f.n_slots = s.m;
    f.n_buckets = s.b;
    f.n_dense = s.b1;
    f.salt = params.salt;
    f.derive_constants();
    f.salt_mixed = hash::salt_key(params.salt);
    if (n == 0) return f;
    // Outputs first; everything after `mark` is scratch, released on return.  A throw releases
    // the outputs too (18.1 retries start from the same arena state).
    size_t mark0 = arena.mark();
    size_t mark = 0;
    try {
        // Pilot bytes zeroed (the padding past B stays 0); remap entries of free slots beyond K
        // stay 0 (still < K); unused escape capacity is never read.
        Outputs out{arena.alloc_array<uint8_t>(kMphfBlock * mphf_blocks(s.b)), scratch<uint32_t>(arena, mphf_blocks(s.b)),
                    scratch<uint16_t>(arena, s.b), arena.alloc_array<uint32_t>(std::max<uint64_t>(1, s.m - n))};
        f.pilots = out.pilots;
        f.ranks = reinterpret_cast<const uint8_t *>(out.ranks);
        f.escapes = reinterpret_cast<const uint8_t *>(out.escapes);
        f.remap = reinterpret_cast<const uint8_t *>(out.remap);
        mark = arena.mark();
        search(n, hash_key, f, out, params, arena);
    } catch (...) {
        arena.reset(mark0);
        throw;
    }
    arena.reset(mark);
    return f;
}

}  // namespace

size_t mphf_build_arena_size(uint64_t n_keys, const MphfParams &params) {
    Shape s = shape_for(n_keys, params);
    ArenaSizer z;
    if (n_keys) size_scratch(z, n_keys, s);
    return z.total();
}

Mphf mphf_build_u64(const uint64_t *keys, size_t n, const MphfParams &params, Arena &arena) {
    // Captures by value: the hash stores cannot alias them, so the salt work leaves the loop.
    const uint64_t skey = hash::salt_key(params.salt);
    return build(n, MphfKeyKind::U64, params, arena, [keys, skey](size_t i) { return hash::hash_u64_keyed(keys[i], skey); });
}

Mphf mphf_build_bytes(const uint8_t *blob, const uint64_t *offsets, size_t n, const MphfParams &params, Arena &arena) {
    for (size_t i = 0; i < n; i++)
        if (offsets[i + 1] < offsets[i]) throw_error(STK_E_INVALID_ARGUMENT, "MPHF key %zu: offsets decrease", i);
    const uint64_t salt = params.salt;
    return build(n, MphfKeyKind::BYTES, params, arena, [blob, offsets, salt](size_t i) {
        return hash::hash_bytes(blob + offsets[i], size_t(offsets[i + 1] - offsets[i]), salt);
    });
}

void Mphf::derive_constants() {
    window_log2 = n_keys ? mphf_window_log2(n_slots) : 0;
    if (n_keys == 0) {
        dense_mul = sparse_mul = 0;
        return;
    }
    // fastrange(h, floor(B1 2^64 / T)) <= h B1 / T < B1 for h < T; likewise above T.
    dense_mul = uint64_t(((__uint128_t)n_dense << 64) / kDenseThreshold);
    sparse_mul = uint64_t(((__uint128_t)(n_buckets - n_dense) << 64) / (~kDenseThreshold + 1));
}

namespace {
// Byte offsets of the sections after the 64-byte header (docs/format.md "## MPHF"), from counts
// already validated (load) or built.
struct Sections {
    uint64_t ranks, escapes, remap, end;
};
Sections sections_of(uint64_t b, uint64_t e, uint64_t m_minus_k) {
    Sections x;
    x.ranks = checked_add(kMphfHeaderSize, checked_mul(mphf_blocks(b), kMphfBlock, "MPHF pilots"), "MPHF size");
    x.escapes = checked_add(x.ranks, checked_mul(mphf_blocks(b), 4, "MPHF ranks"), "MPHF size");
    x.remap = align_up(checked_add(x.escapes, checked_mul(e, 2, "MPHF escapes"), "MPHF size"), 4);
    x.end = checked_add(x.remap, checked_mul(m_minus_k, 4, "MPHF remap"), "MPHF size");
    return x;
}
}  // namespace

size_t mphf_serialized_size_bound(uint64_t n_keys, const MphfParams &params) {
    const Shape s = shape_for(n_keys, params);
    if (n_keys == 0) return kMphfHeaderSize;
    return size_t(sections_of(s.b, s.b, s.m - n_keys).end);
}

size_t Mphf::serialized_size() const {
    if (n_keys == 0) return kMphfHeaderSize;
    return size_t(sections_of(n_buckets, n_escapes, n_slots - n_keys).end);
}

void Mphf::serialize(uint8_t *out) const {
    std::memset(out, 0, serialized_size());
    store_le<uint32_t>(out + 0, kMphfMagic);
    store_le<uint32_t>(out + 4, uint32_t(kind));
    store_le<uint64_t>(out + 8, n_keys);
    store_le<uint64_t>(out + 16, n_slots);
    store_le<uint64_t>(out + 24, n_buckets);
    store_le<uint64_t>(out + 32, n_dense);
    store_le<uint64_t>(out + 40, salt);
    store_le<uint32_t>(out + 48, 8);
    store_le<uint32_t>(out + 52, window_log2);
    store_le<uint32_t>(out + 56, uint32_t(n_escapes));
    if (n_keys == 0) return;
    const Sections x = sections_of(n_buckets, n_escapes, n_slots - n_keys);
    std::memcpy(out + kMphfHeaderSize, pilots, size_t(mphf_blocks(n_buckets) * kMphfBlock));
    std::memcpy(out + x.ranks, ranks, size_t(mphf_blocks(n_buckets) * 4));
    std::memcpy(out + x.escapes, escapes, size_t(n_escapes) * 2);
    std::memcpy(out + x.remap, remap, size_t(n_slots - n_keys) * 4);
}

Mphf Mphf::load(const uint8_t *data, size_t size, const char *what) {
    if (size < kMphfHeaderSize)
        throw_error(STK_E_TRUNCATED, "%s: MPHF blob of %zu bytes is shorter than its 64-byte header", what, size);
    if (load_u32(data) != kMphfMagic)
        throw_error(STK_E_BAD_MAGIC, "%s: offset 0: not an MPHF blob (magic %08x)", what, load_u32(data));
    Mphf f;
    uint32_t kind = load_u32(data + 4);
    if (kind != 1 && kind != 2) throw_error(STK_E_CORRUPT, "%s: offset 4: unknown MPHF key kind %u", what, kind);
    f.kind = MphfKeyKind(kind);
    f.n_keys = load_u64(data + 8);
    f.n_slots = load_u64(data + 16);
    f.n_buckets = load_u64(data + 24);
    f.n_dense = load_u64(data + 32);
    f.salt = load_u64(data + 40);
    f.salt_mixed = hash::salt_key(f.salt);
    // Width 16 was the layout before 2026-11-23 (a u16 pilot per bucket, no escapes): refused.
    if (load_u32(data + 48) != 8)
        throw_error(STK_E_CORRUPT, "%s: offset 48: pilot width %u, expected 8", what, load_u32(data + 48));
    if (load_u32(data + 60) != 0) throw_error(STK_E_CORRUPT, "%s: offset 60: reserved bytes not zero", what);
    const unsigned long long K = f.n_keys, M = f.n_slots, B = f.n_buckets, B1 = f.n_dense;
    const uint32_t window = load_u32(data + 52);
    const unsigned long long E = load_u32(data + 56);
    f.n_escapes = E;
    if (K == 0) {
        if (M != 0 || B != 0 || B1 != 0 || window != 0 || E != 0 || size != kMphfHeaderSize)
            throw_error(STK_E_CORRUPT, "%s: offset 16: empty MPHF with M=%llu B=%llu and %zu bytes", what, M, B, size);
        return f;
    }
    if (K > (uint64_t(1) << 32) - 2) throw_error(STK_E_CORRUPT, "%s: offset 8: K=%llu keys exceeds 2^32-2", what, K);
    if (M < K) throw_error(STK_E_CORRUPT, "%s: offset 16: M=%llu slots < K=%llu keys", what, M, K);
    // B = max(2, ceil(K / lambda)) with lambda >= 1: at most max(K, 2).
    if (B < 2 || B > std::max(K, 2ull) || B1 < 1 || B1 >= B)
        throw_error(STK_E_CORRUPT, "%s: offset 24: bucket counts B=%llu B1=%llu invalid for K=%llu", what, B, B1, K);
    // Derived from M, stored so that a blob of another layout is refused.  W <= M: every slot
    // base + r (base < M, r < W) is below 2M, and one subtraction wraps it.
    f.derive_constants();
    if (window != f.window_log2)
        throw_error(STK_E_CORRUPT, "%s: offset 52: pilot window log2 %u, expected %u for M=%llu", what, window, f.window_log2, M);
    if (E > B) throw_error(STK_E_CORRUPT, "%s: offset 56: E=%llu escaped pilots > B=%llu buckets", what, E, B);
    // Sizes from untrusted counts: checked arithmetic, then an exact length match.
    const Sections x = sections_of(B, E, M - K);
    if (x.end != size)
        throw_error(x.end > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH,
                    "%s: MPHF blob is %zu bytes, its header (K=%llu M=%llu B=%llu E=%llu) needs %llu", what, size, K, M, B, E,
                    (unsigned long long)x.end);
    f.pilots = data + kMphfHeaderSize;
    f.ranks = data + x.ranks;
    f.escapes = data + x.escapes;
    // Every rank equals the escape bytes before its block, the bytes past bucket B-1 in the last
    // block are zero, and the escape bytes total E: then an escaped bucket's rank (its block's
    // rank + the escape bytes before it in the block) is < E.
    uint64_t e = 0;
    const uint64_t nblk = mphf_blocks(B);
    for (uint64_t j = 0; j < nblk; j++) {
        const uint8_t *line = f.pilots + kMphfBlock * j;
        const uint64_t at = kMphfHeaderSize + kMphfBlock * j;
        if (load_u32(f.ranks + 4 * j) != e)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: rank of pilot block %llu is %u, the pilot bytes say %llu", what,
                        (unsigned long long)(x.ranks + 4 * j), (unsigned long long)j, load_u32(f.ranks + 4 * j),
                        (unsigned long long)e);
        const uint64_t used = std::min<uint64_t>(kMphfBlock, B - kMphfBlock * j);
        for (uint64_t i = 0; i < kMphfBlock; i++) {
            if (i >= used && line[i] != 0)
                throw_error(STK_E_CORRUPT, "%s: offset %llu: padding byte after the last pilot is not zero", what,
                            (unsigned long long)(at + i));
            e += line[i] == kMphfEscape;
        }
    }
    if (e != E)
        throw_error(STK_E_CORRUPT, "%s: offset 56: E=%llu escaped pilots, the pilot bytes say %llu", what, E,
                    (unsigned long long)e);
    // Escaped pilots are >= 255 and below the cap 2^16 (pilot - 255 <= 65280).
    for (uint64_t i = 0; i < E; i++)
        if (load_u16(f.escapes + 2 * i) > 65535 - kMphfEscape)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: escaped pilot 255 + %u >= 2^16", what,
                        (unsigned long long)(x.escapes + 2 * i), load_u16(f.escapes + 2 * i));
    const size_t r = size_t(x.remap);
    f.remap = data + r;
    for (uint64_t i = 0; i < M - K; i++)
        if (f.remap_at(i) >= K)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: remap entry %u >= K=%llu", what, (unsigned long long)(r + i * 4),
                        f.remap_at(i), K);
    return f;
}

}  // namespace stk
