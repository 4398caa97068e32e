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
    if (!(p.m_scale >= 1.0 && p.m_scale <= 16.0)) throw_error(STK_E_INVALID_ARGUMENT, "MPHF m_scale %g outside [1, 16]", p.m_scale);
    if (p.pilot_cap == 0 || p.pilot_cap > 65536) throw_error(STK_E_INVALID_ARGUMENT, "MPHF pilot cap %u outside [1, 65536]", p.pilot_cap);
    if (k > (uint64_t(1) << 32) - 2) throw_error(STK_E_INVALID_ARGUMENT, "MPHF over %llu keys: at most 2^32-2", (unsigned long long)k);
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
template <class HashFn>
void search(size_t n, HashFn &&hash_key, Mphf &f, uint16_t *pilots, uint32_t *remap, const MphfParams &params,
            Arena &arena) {
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
    z.add_array<uint16_t>(s.b);                               // output: pilots
    z.add_array<uint32_t>(std::max<uint64_t>(1, s.m - n));    // output: remap
    const uint32_t dbits = partition_bits(n);
    z.add_array<uint64_t>(n);                                 // hashes, then grouped by bucket
    z.add_array<uint32_t>((uint64_t(1) << dbits) + 1);        // part offsets
    z.add_array<uint64_t>(n);                                 // hashes by part, then bases
    z.add_array<uint32_t>(uint64_t(1) << dbits);              // part cursors
    z.add_array<uint32_t>(s.b + 1);                           // bucket starts
    z.add_array<uint32_t>(part_bucket_span(s, dbits) + 1);    // one part's bucket counts
    z.add_array<uint32_t>(n + 2);                             // size classes (max bucket <= n)
    z.add_array<uint32_t>(s.b);                               // order
    z.add_array<uint64_t>((s.m + 64 + 63) / 64 + 1);          // taken bitmap, slots [0, 64) again, a zero word
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
    uint16_t *pilots = nullptr;
    uint32_t *remap = nullptr;
    size_t mark = 0;
    try {
        pilots = arena.alloc_array<uint16_t>(s.b);
        remap = arena.alloc_array<uint32_t>(std::max<uint64_t>(1, s.m - n));
        f.pilots = reinterpret_cast<const uint8_t *>(pilots);
        f.remap = reinterpret_cast<const uint8_t *>(remap);
        mark = arena.mark();
        search(n, hash_key, f, pilots, remap, params, arena);
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

size_t Mphf::serialized_size() const {
    size_t pil = size_t(n_keys ? n_buckets : 0) * 2;
    size_t after = align_up(kMphfHeaderSize + pil, 4);
    return after + size_t(n_slots - n_keys) * 4;
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
    store_le<uint32_t>(out + 48, 16);
    store_le<uint32_t>(out + 52, window_log2);
    if (n_keys == 0) return;
    std::memcpy(out + kMphfHeaderSize, pilots, size_t(n_buckets) * 2);
    size_t r = align_up(kMphfHeaderSize + size_t(n_buckets) * 2, 4);
    std::memcpy(out + r, remap, size_t(n_slots - n_keys) * 4);
}

Mphf Mphf::load(const uint8_t *data, size_t size, const char *what) {
    if (size < kMphfHeaderSize)
        throw_error(STK_E_TRUNCATED, "%s: MPHF blob of %zu bytes is shorter than its 64-byte header", what, size);
    if (load_u32(data) != kMphfMagic) throw_error(STK_E_BAD_MAGIC, "%s: offset 0: not an MPHF blob (magic %08x)", what, load_u32(data));
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
    if (load_u32(data + 48) != 16) throw_error(STK_E_CORRUPT, "%s: offset 48: pilot width %u, expected 16", what, load_u32(data + 48));
    if (load_u64(data + 56) != 0) throw_error(STK_E_CORRUPT, "%s: offset 56: reserved bytes not zero", what);
    const unsigned long long K = f.n_keys, M = f.n_slots, B = f.n_buckets, B1 = f.n_dense;
    const uint32_t window = load_u32(data + 52);
    if (K == 0) {
        if (M != 0 || B != 0 || B1 != 0 || window != 0 || size != kMphfHeaderSize)
            throw_error(STK_E_CORRUPT, "%s: offset 16: empty MPHF with M=%llu B=%llu and %zu bytes", what, M, B, size);
        return f;
    }
    if (K > (uint64_t(1) << 32) - 2) throw_error(STK_E_CORRUPT, "%s: offset 8: K=%llu keys exceeds 2^32-2", what, K);
    if (M < K) throw_error(STK_E_CORRUPT, "%s: offset 16: M=%llu slots < K=%llu keys", what, M, K);
    if (B < 2 || B1 < 1 || B1 >= B) throw_error(STK_E_CORRUPT, "%s: offset 24: bucket counts B=%llu B1=%llu invalid", what, B, B1);
    // Derived from M, stored so that a blob of another layout is refused.  W <= M: every slot
    // base + r (base < M, r < W) is below 2M, and one subtraction wraps it.
    f.derive_constants();
    if (window != f.window_log2)
        throw_error(STK_E_CORRUPT, "%s: offset 52: pilot window log2 %u, expected %u for M=%llu", what, window, f.window_log2, M);
    // Sizes from untrusted counts: checked arithmetic, then an exact length match.
    uint64_t pil = checked_mul(B, 2, "MPHF pilots");
    uint64_t rem = checked_mul(M - K, 4, "MPHF remap");
    uint64_t need = checked_add(align_up(checked_add(kMphfHeaderSize, pil, "MPHF size"), 4), rem, "MPHF size");
    if (need != size)
        throw_error(need > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH,
                    "%s: MPHF blob is %zu bytes, its header (K=%llu M=%llu B=%llu) needs %llu", what, size, K, M, B,
                    (unsigned long long)need);
    f.pilots = data + kMphfHeaderSize;
    size_t r = size_t(align_up(kMphfHeaderSize + pil, 4));
    f.remap = data + r;
    for (uint64_t i = 0; i < M - K; i++)
        if (f.remap_at(i) >= K)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: remap entry %u >= K=%llu", what, (unsigned long long)(r + i * 4),
                        f.remap_at(i), K);
    return f;
}

}  // namespace stk
