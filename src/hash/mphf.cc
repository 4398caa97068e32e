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
    return s;
}

// The search itself, over distinct 64-bit hashes.  pilots / remap are the caller's outputs;
// scratch comes from the arena and the caller releases it.
void search(uint64_t *hashes, size_t n, Mphf &f, uint16_t *pilots, uint32_t *remap, const MphfParams &params,
            Arena &arena) {
    const Shape s{f.n_slots, f.n_buckets, f.n_dense};
    uint32_t *start = arena.alloc_array<uint32_t>(s.b + 1);
    uint64_t *sorted = arena.alloc_array<uint64_t>(n);
    for (size_t i = 0; i < n; i++) start[f.bucket_of(hashes[i]) + 1]++;
    for (uint64_t b = 0; b < s.b; b++) start[b + 1] += start[b];
    {
        uint32_t *fill = arena.alloc_array<uint32_t>(s.b);
        for (size_t i = 0; i < n; i++) {
            uint64_t b = f.bucket_of(hashes[i]);
            sorted[start[b] + fill[b]++] = hashes[i];
        }
    }
    // Sort inside each bucket: the result no longer depends on the input order, and duplicates
    // become neighbours.
    uint32_t max_size = 0;
    for (uint64_t b = 0; b < s.b; b++) {
        uint64_t *lo = sorted + start[b], *hi = sorted + start[b + 1];
        std::sort(lo, hi);
        for (uint64_t *q = lo; q + 1 < hi; q++)
            if (q[0] == q[1])
                throw_error(STK_E_INVALID_ARGUMENT, "MPHF: two keys share the 64-bit hash %016llx (duplicate key)", (unsigned long long)q[0]);
        max_size = std::max<uint32_t>(max_size, uint32_t(hi - lo));
    }
    f.stats.max_bucket = max_size;
    // Buckets by size, largest first; ties by bucket index (counting sort: stable).
    uint32_t *by_size = arena.alloc_array<uint32_t>(size_t(max_size) + 2);
    for (uint64_t b = 0; b < s.b; b++) by_size[max_size - (start[b + 1] - start[b]) + 1]++;
    for (uint32_t i = 0; i <= max_size; i++) by_size[i + 1] += by_size[i];
    uint32_t *order = arena.alloc_array<uint32_t>(s.b);
    for (uint64_t b = 0; b < s.b; b++) order[by_size[max_size - (start[b + 1] - start[b])]++] = uint32_t(b);

    uint64_t *taken = arena.alloc_array<uint64_t>((s.m + 63) / 64);
    uint64_t *pos = hashes;  // the input hashes are no longer needed: reuse as position scratch
    const uint32_t cap = params.pilot_cap;
    uint64_t trials = 0;
    uint32_t max_pilot = 0;
    for (uint64_t oi = 0; oi < s.b; oi++) {
        uint32_t b = order[oi];
        const uint64_t *keys = sorted + start[b];
        uint32_t size = start[b + 1] - start[b];
        if (size == 0) break;  // sizes descend: the rest are empty (pilot 0)
        // Pilots are screened 8 at a time on the bucket's first key (8 independent bitmap reads,
        // no branch per pilot); only survivors get the full placement.  The pilot found is the
        // same as a one-by-one search: the smallest that places the whole bucket.
        uint32_t pilot = 0;
        for (;;) {
            if (pilot >= cap)
                throw_error(STK_E_MPHF_EXHAUSTED,
                            "MPHF seed search exhausted: bucket %u with %u keys found no pilot below %u (K=%llu, M=%llu)", b,
                            size, cap, (unsigned long long)n, (unsigned long long)s.m);
            const uint32_t lim = std::min<uint32_t>(8, cap - pilot);
            uint32_t cand = 0;
            for (uint32_t j = 0; j < lim; j++) {
                uint64_t p = hash::fastrange(Mphf::slot_hash(keys[0], Mphf::pilot_key(pilot + j)), s.m);
                cand |= uint32_t(~(taken[p >> 6] >> (p & 63)) & 1) << j;
            }
            bool found = false;
            while (cand && !found) {
                uint32_t j = uint32_t(__builtin_ctz(cand));
                cand &= cand - 1;
                uint64_t pk = Mphf::pilot_key(pilot + j);
                uint32_t placed = 0;
                for (; placed < size; placed++) {
                    uint64_t p = hash::fastrange(Mphf::slot_hash(keys[placed], pk), s.m);
                    uint64_t bit = uint64_t(1) << (p & 63);
                    if (taken[p >> 6] & bit) break;
                    taken[p >> 6] |= bit;
                    pos[placed] = p;
                }
                if (placed == size) {
                    pilot += j;
                    found = true;
                } else {
                    for (uint32_t i = 0; i < placed; i++) taken[pos[i] >> 6] &= ~(uint64_t(1) << (pos[i] & 63));
                }
            }
            if (found) break;
            pilot += lim;
        }
        trials += uint64_t(pilot) + 1;
        pilots[b] = uint16_t(pilot);
        max_pilot = std::max(max_pilot, pilot);
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
}

void size_scratch(ArenaSizer &z, uint64_t n, const Shape &s) {
    z.add_array<uint16_t>(s.b);
    z.add_array<uint32_t>(std::max<uint64_t>(1, s.m - n));
    z.add_array<uint64_t>(n);  // the key hashes
    z.add_array<uint32_t>(s.b + 1);
    z.add_array<uint64_t>(n);
    z.add_array<uint32_t>(s.b);
    z.add_array<uint32_t>(n + 2);  // by_size: max bucket size <= n
    z.add_array<uint32_t>(s.b);
    z.add_array<uint64_t>((s.m + 63) / 64);
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
        uint64_t *h = arena.alloc_array<uint64_t>(n);
        for (size_t i = 0; i < n; i++) h[i] = hash_key(i);
        search(h, n, f, pilots, remap, params, arena);
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
    return build(n, MphfKeyKind::U64, params, arena, [&](size_t i) { return hash::hash_u64(keys[i], params.salt); });
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
    if (load_u32(data + 52) != 0 || load_u64(data + 56) != 0) throw_error(STK_E_CORRUPT, "%s: offset 52: reserved bytes not zero", what);
    const unsigned long long K = f.n_keys, M = f.n_slots, B = f.n_buckets, B1 = f.n_dense;
    if (K == 0) {
        if (M != 0 || B != 0 || B1 != 0 || size != kMphfHeaderSize)
            throw_error(STK_E_CORRUPT, "%s: offset 16: empty MPHF with M=%llu B=%llu and %zu bytes", what, M, B, size);
        return f;
    }
    if (K > (uint64_t(1) << 32) - 2) throw_error(STK_E_CORRUPT, "%s: offset 8: K=%llu keys exceeds 2^32-2", what, K);
    if (M < K) throw_error(STK_E_CORRUPT, "%s: offset 16: M=%llu slots < K=%llu keys", what, M, K);
    if (B < 2 || B1 < 1 || B1 >= B) throw_error(STK_E_CORRUPT, "%s: offset 24: bucket counts B=%llu B1=%llu invalid", what, B, B1);
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
