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
    uint64_t m, b, b1, w;
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
    s.w = mphf_window(s.m);
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

// The search.  hash_key(i) gives key i's 64-bit hash; pilots / remap are the caller's outputs;
// scratch comes from the arena and the caller releases it.
template <class HashFn>
void search(size_t n, HashFn &&hash_key, Mphf &f, uint16_t *pilots, uint32_t *remap, const MphfParams &params,
            Arena &arena) {
    const Shape s{f.n_slots, f.n_buckets, f.n_dense, mphf_window(f.n_slots)};
    // Pass 1: hash every key once, count bucket sizes.
    uint64_t *hashes = scratch<uint64_t>(arena, n);
    uint32_t *cnt = arena.alloc_array<uint32_t>(s.b);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = hash_key(i);
        hashes[i] = h;
        cnt[f.bucket_of(h)]++;
    }
    uint32_t max_size = 0;
    for (uint64_t b = 0; b < s.b; b++) max_size = std::max(max_size, cnt[b]);
    f.stats.max_bucket = max_size;
    // Processing order: size descending, ties by bucket index (counting sort, stable).
    uint32_t *cls = scratch<uint32_t>(arena, uint64_t(n) + 2);  // max_size <= n
    std::memset(cls, 0, (size_t(max_size) + 2) * sizeof(uint32_t));
    for (uint64_t b = 0; b < s.b; b++) cls[max_size - cnt[b] + 1]++;
    for (uint32_t i = 0; i <= max_size; i++) cls[i + 1] += cls[i];
    uint32_t *order = scratch<uint32_t>(arena, s.b);
    for (uint64_t b = 0; b < s.b; b++) order[cls[max_size - cnt[b]]++] = uint32_t(b);
    // Keys laid out in processing order, so the search reads them front to back: cnt becomes each
    // bucket's write cursor, and after the scatter its end.  The order inside a bucket is the
    // input order, which the result does not depend on (a pilot places a set of keys).
    uint32_t non_empty = 0;
    {
        uint32_t at = 0;
        for (; non_empty < s.b; non_empty++) {
            uint32_t b = order[non_empty], c = cnt[b];
            if (c == 0) break;  // sizes descend: the rest are empty (pilot 0)
            cnt[b] = at;
            at += c;
        }
    }
    uint64_t *sorted = scratch<uint64_t>(arena, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = hashes[i];
        sorted[cnt[f.bucket_of(h)]++] = h;
    }
    uint64_t *base = hashes;  // the hashes are in `sorted` now: reuse as per-key base scratch

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
    const uint64_t wmask = s.w == 64 ? ~uint64_t(0) : (uint64_t(1) << s.w) - 1;
    uint64_t trials = 0, windows = 0;
    uint32_t max_pilot = 0;
    const uint64_t *keys = sorted;
    for (uint32_t oi = 0; oi < non_empty; oi++) {
        const uint32_t b = order[oi];
        const uint32_t size = uint32_t(sorted + cnt[b] - keys);
        uint64_t q = 0, r = 0;
        for (;; q++) {
            if (q * 64 >= cap) {
                check_duplicates(keys, size);
                throw_error(STK_E_MPHF_EXHAUSTED,
                            "MPHF seed search exhausted: bucket %u with %u keys found no pilot below %llu (K=%llu, M=%llu)", b,
                            size, (unsigned long long)cap, (unsigned long long)n, (unsigned long long)s.m);
            }
            // Pilots 64q .. 64q+63 at once: bit r of `ok` = every key's slot base + r is free.
            uint64_t ok = cap - q * 64 >= 64 ? wmask : wmask & ((uint64_t(1) << (cap - q * 64)) - 1);
            const uint64_t pk = Mphf::pilot_key(q);
            for (uint32_t i = 0; i < size && ok; i++) {
                uint64_t p = hash::fastrange(Mphf::slot_hash(keys[i], pk), m);
                base[i] = p;
                ok &= ~window_at(taken, p);
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
        const uint32_t pilot = uint32_t(q * 64 + r);
        windows += q + 1;
        trials += uint64_t(pilot) + 1;
        pilots[b] = uint16_t(pilot);
        max_pilot = std::max(max_pilot, pilot);
        keys += size;
    }
    // Minimal: each taken slot at or beyond K gets one of the free slots below K, in order.
    uint64_t free_slot = 0;
    for (uint64_t p = n; p < s.m; p++) {
        if (!(taken[p >> 6] & (uint64_t(1) << (p & 63)))) continue;
        while (taken[free_slot >> 6] & (uint64_t(1) << (free_slot & 63))) free_slot++;
        remap[p - n] = uint32_t(free_slot++);
    }
    f.stats.max_pilot = max_pilot;
    f.stats.pilot_trials = trials;
    f.stats.window_trials = windows;
}

void size_scratch(ArenaSizer &z, uint64_t n, const Shape &s) {
    z.add_array<uint16_t>(s.b);                               // output: pilots
    z.add_array<uint32_t>(std::max<uint64_t>(1, s.m - n));    // output: remap
    z.add_array<uint64_t>(n);                                 // hashes, then bases
    z.add_array<uint32_t>(s.b);                               // sizes, then cursors
    z.add_array<uint32_t>(n + 2);                             // size classes (max bucket <= n)
    z.add_array<uint32_t>(s.b);                               // order
    z.add_array<uint64_t>(n);                                 // hashes by bucket
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
    const uint64_t skey = hash::salt_key(params.salt);
    return build(n, MphfKeyKind::U64, params, arena, [&](size_t i) { return hash::hash_u64_keyed(keys[i], skey); });
}

Mphf mphf_build_bytes(const uint8_t *blob, const uint64_t *offsets, size_t n, const MphfParams &params, Arena &arena) {
    for (size_t i = 0; i < n; i++)
        if (offsets[i + 1] < offsets[i]) throw_error(STK_E_INVALID_ARGUMENT, "MPHF key %zu: offsets decrease", i);
    return build(n, MphfKeyKind::BYTES, params, arena,
                 [&](size_t i) { return hash::hash_bytes(blob + offsets[i], size_t(offsets[i + 1] - offsets[i]), params.salt); });
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
    store_le<uint32_t>(out + 52, uint32_t(n_keys ? mphf_window(n_slots) : 0));
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
    const uint64_t w = mphf_window(M);
    if (window != w) throw_error(STK_E_CORRUPT, "%s: offset 52: pilot window %u, expected %llu for M=%llu", what, window, (unsigned long long)w, M);
    // Sizes from untrusted counts: checked arithmetic, then an exact length match.
    uint64_t pil = checked_mul(B, 2, "MPHF pilots");
    uint64_t rem = checked_mul(M - K, 4, "MPHF remap");
    uint64_t need = checked_add(align_up(checked_add(kMphfHeaderSize, pil, "MPHF size"), 4), rem, "MPHF size");
    if (need != size)
        throw_error(need > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH,
                    "%s: MPHF blob is %zu bytes, its header (K=%llu M=%llu B=%llu) needs %llu", what, size, K, M, B,
                    (unsigned long long)need);
    f.pilots = data + kMphfHeaderSize;
    // A slot is base (< M) + r, minus M when >= M: in bounds when every pilot's r = pilot mod 64
    // is below W (only W = M < 64 needs the check).
    if (w < 64)
        for (uint64_t b = 0; b < B; b++)
            if ((f.pilot(b) & 63) >= w)
                throw_error(STK_E_CORRUPT, "%s: offset %llu: pilot %u has r=%u >= window %llu", what,
                            (unsigned long long)(kMphfHeaderSize + 2 * b), f.pilot(b), f.pilot(b) & 63, (unsigned long long)w);
    size_t r = size_t(align_up(kMphfHeaderSize + pil, 4));
    f.remap = data + r;
    for (uint64_t i = 0; i < M - K; i++)
        if (f.remap_at(i) >= K)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: remap entry %u >= K=%llu", what, (unsigned long long)(r + i * 4),
                        f.remap_at(i), K);
    return f;
}

}  // namespace stk
