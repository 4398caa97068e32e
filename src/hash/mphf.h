// A minimal perfect hash function (PTHash-style; spec-notes 12 replaces the broken pseudocode of
// seed 4.4 / 11).  docs/format.md "## MPHF" specifies the serialized bytes, docs/decisions.md
// "Decisions: hashing and the tokenizer stage" the choices.
//
//   key --hash--> h (64 bits) --> bucket b in [0, B) (skewed: 60 % of keys into 30 % of buckets)
//   pilot = pilot[b] = W q + r  (r < W, the window: 64, or 1 for M < kMphfWindowMinSlots): one
//           byte per bucket; the few pilots >= 255 are byte 255 plus a u16 in an escape list at
//           index rank[b / 64] (escapes before b's block of 64 buckets) + the escape bytes before
//           b in its block (counted in the cache line the pilot came from)
//   slot  p = (fastrange(mum(h ^ pilot_key(q), C), M) + r) mod M,    M = ceil(K / alpha) >= K
//   index   = p < K ? p : remap[p - K]                            (minimal: index in [0, K))
//
// Build: buckets of about lambda keys, placed largest first; each bucket's pilot is the smallest
// in [0, 2^16) that puts all its keys on free, distinct slots.  A pilot's high bits q pick one
// random base per key and its low bits r shift all of them together, so the W pilots of one q are
// tested at once: AND of the keys' W-slot windows of the free-slot bitmap, lowest set bit = r.
// Keys are grouped by bucket with a partition on h's top bits (bucket_of is monotone in h).
// The function depends only on the key set and the parameters, never on the input order.
// Exhausted search throws STK_E_MPHF_EXHAUSTED; the caller applies seed 18.1 (M += 5 %:
// params.m_scale *= 1.05).  Lookup = one pilot byte read (for the ~3 % of keys in escaped buckets:
// a rank read, a count in the pilot's cache line and an escape read) + one position (rarely one
// remap read) + the caller's equality guard.  Non-keys map to some index in [0, K): the guard
// (stored key or Dec bytes) rejects them.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

#include "core/arena.h"
#include "core/bytes.h"
#include "hash/hash64.h"

namespace stk {

enum class MphfKeyKind : uint32_t { U64 = 1, BYTES = 2 };

struct MphfParams {
    double lambda = 3.5;         // average keys per bucket (measured in bench/mphf_bench)
    double alpha = 0.99;         // load K / M of the search table
    double m_scale = 1.0;        // 18.1 retries multiply M by 1.05 each
    uint64_t salt = 0;           // key hashing salt (manifest: mphf_salt_digest)
    uint32_t pilot_cap = 65536;  // seed 4.4's cap 2^16 (escaped pilots are stored as pilot - 255 in a u16)
};

// Seed 18.1's retries: an exhausted pilot search retries with M grown by 5 %, at most this many
// times (1.05^8 = 1.48).
constexpr uint32_t kMphfMaxRetries = 8;
// The parameters of attempt `attempt` (0: the first) with key salt `salt`.
inline MphfParams mphf_params_at(uint64_t salt, uint32_t attempt) {
    MphfParams p;
    p.salt = salt;
    for (uint32_t i = 0; i < attempt; i++) p.m_scale *= 1.05;
    return p;
}

struct MphfStats {
    uint32_t max_pilot = 0;      // largest pilot used
    uint64_t pilot_trials = 0;   // sum over buckets of (pilot + 1): pilots a one-by-one search tries
    uint64_t window_trials = 0;  // windows of W pilots actually tested (the build's work)
    uint32_t max_bucket = 0;     // keys in the largest bucket
};

constexpr uint32_t kMphfMagic = 0x48504D53u;  // "SMPH" as LE bytes
// A pilot byte of 255 says "escaped": the pilot is 255 + escapes[rank]; pilots 0..254 are their
// byte.  The pilot bytes are padded with zeros to whole blocks of 64; one rank (u32: escapes
// before the block) per block.
constexpr uint8_t kMphfEscape = 255;
constexpr uint64_t kMphfBlock = 64;
inline uint64_t mphf_blocks(uint64_t n_buckets) { return n_buckets / kMphfBlock + (n_buckets % kMphfBlock != 0); }

// Bytes equal to 255 among p[0, k), k < 64: eight bytes at a time, exact (no carries across
// bytes), never reading past p + k.
inline uint32_t mphf_count_escapes(const uint8_t *p, uint32_t k) {
    constexpr uint64_t lo7 = 0x7F7F7F7F7F7F7F7Full;
    uint32_t c = 0;
    auto count = [](uint64_t w) {
        uint64_t x = ~w;                              // bytes 255 -> 0
        uint64_t t = ~(((x & lo7) + lo7) | x | lo7);  // high bit of each byte: byte of x is 0
        return uint32_t(__builtin_popcountll(t));
    };
    uint32_t i = 0;
    for (; i + 8 <= k; i += 8) c += count(load_le<uint64_t>(p + i));
    if (i < k) {
        uint64_t w = 0;
        std::memcpy(&w, p + i, k - i);  // the missing bytes are 0: never counted
        c += count(w);
    }
    return c;
}
constexpr size_t kMphfHeaderSize = 64;

// log2 of the window W of pilots tested together: 64 pilots, or 1 pilot (one independent choice
// per pilot, as many as possible) for small tables, where the build is cheap anyway and 2^16 / 64
// independent choices would make big buckets exhaust more often.
constexpr uint64_t kMphfWindowMinSlots = 1024;
inline uint32_t mphf_window_log2(uint64_t n_slots) { return n_slots >= kMphfWindowMinSlots ? 6 : 0; }

// Bytes equal to 255 among line[0, k), k < 64, of a whole 64-byte block.
inline uint32_t mphf_count_escapes_line(const uint8_t *line, uint32_t k) {
#if defined(__SSE2__)
    const __m128i ff = _mm_set1_epi8(char(0xFF));
    uint64_t m = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(line + 16 * i));
        m |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, ff)))) << (16 * i);
    }
    return uint32_t(__builtin_popcountll(m & ((uint64_t(1) << k) - 1)));
#else
    return mphf_count_escapes(line, k);
#endif
}

// A built or loaded function: a view over memory that must outlive it (arena or mapped file).
class Mphf {
public:
    MphfKeyKind kind = MphfKeyKind::U64;
    uint64_t n_keys = 0;       // K
    uint64_t n_slots = 0;      // M
    uint64_t n_buckets = 0;    // B
    uint64_t n_dense = 0;      // B1: buckets [0, B1) receive 60 % of the keys
    uint32_t window_log2 = 0;  // W = 2^window_log2 <= M (mphf_window_log2(M))
    uint64_t dense_mul = 0;    // floor(B1 2^64 / T): fastrange(h, dense_mul) < B1 for h < T
    uint64_t sparse_mul = 0;   // floor((B - B1) 2^64 / (2^64 - T))
    uint64_t salt = 0;
    uint64_t salt_mixed = hash::salt_key(0);  // hash::salt_key(salt), kept to save 3 multiplies per lookup
    uint64_t n_escapes = 0;                   // E: buckets whose pilot is >= 255
    const uint8_t *pilots = nullptr;          // u8 [64 ceil(B / 64)], zero past B (byte pointers: no alignment needed)
    const uint8_t *ranks = nullptr;           // u32 LE [ceil(B / 64)]: escapes before each block of 64 buckets
    const uint8_t *escapes = nullptr;         // u16 LE [E]: pilot - 255 of the escaped buckets, in bucket order
    const uint8_t *remap = nullptr;           // u32 LE [M - K]
    MphfStats stats;                          // build only (zero when loaded)

    bool empty() const { return n_keys == 0; }
    uint32_t pilot(uint64_t b) const { return pilots[b] != kMphfEscape ? pilots[b] : escaped_pilot(b); }
    // Validated (load) or built: the rank of an escaped bucket is < E.
    uint32_t escaped_pilot(uint64_t b) const {
        const uint64_t rank = load_le<uint32_t>(ranks + 4 * (b / kMphfBlock)) +
                              mphf_count_escapes_line(pilots + (b & ~(kMphfBlock - 1)), uint32_t(b % kMphfBlock));
        return kMphfEscape + uint32_t(load_le<uint16_t>(escapes + 2 * rank));
    }
    uint32_t remap_at(uint64_t i) const { return load_le<uint32_t>(remap + 4 * i); }

    // Monotone in h (the top bits pick the bucket), so sorting hashes groups them by bucket: the
    // first 60 % of the hash range covers buckets [0, B1), the rest [B1, B).
    uint64_t bucket_of(uint64_t h) const {
        return h < kDenseThreshold ? hash::fastrange(h, dense_mul) : n_dense + hash::fastrange(h - kDenseThreshold, sparse_mul);
    }
    // The key of a pilot's window q = pilot >> log2(W).
    static uint64_t pilot_key(uint64_t q) { return q * 0xC2B2AE3D27D4EB4Full; }
    // One 64x64->128 multiply folded (mum) mixes the key hash with the window's key: the search
    // costs two multiplies per key and window of 64 pilots.
    static uint64_t slot_hash(uint64_t h, uint64_t pk) { return hash::mum(h ^ pk, 0x9E3779B97F4A7C15ull); }
    // base + r wraps around the table (base < M, r < W <= M): every slot is reached alike.
    uint64_t slot_of(uint64_t h, uint64_t pilot) const {
        uint64_t p = hash::fastrange(slot_hash(h, pilot_key(pilot >> window_log2)), n_slots) +
                     (pilot & ((uint64_t(1) << window_log2) - 1));
        return p >= n_slots ? p - n_slots : p;
    }

    // Index in [0, K) of the key with hash h; ~0 for an empty function.  Never reads out of
    // bounds, for any h, on any validated (loaded) or built function (r < W <= M, so
    // base + r < 2M).
    // Always inlined: as a call it cost the greedy encoder ~10 % of its time (perf).
    [[gnu::always_inline]] uint64_t index_of_hash(uint64_t h) const {
        if (n_keys == 0) return ~uint64_t(0);
        const uint64_t b = bucket_of(h);
        const uint8_t v = pilots[b];
        uint64_t p = slot_of(h, __builtin_expect(v != kMphfEscape, 1) ? v : escaped_pilot(b));
        return p < n_keys ? p : remap_at(p - n_keys);
    }
    uint64_t hash_u64(uint64_t key) const { return hash::hash_u64_keyed(key, salt_mixed); }
    uint64_t hash_bytes(const void *p, size_t n) const { return hash::hash_bytes(p, n, salt); }
    [[gnu::always_inline]] uint64_t index_u64(uint64_t key) const { return index_of_hash(hash_u64(key)); }
    [[gnu::always_inline]] uint64_t index_bytes(const void *p, size_t n) const { return index_of_hash(hash_bytes(p, n)); }

    // window_log2 and the bucket multipliers from K, M, B, B1 (after a build or a load).
    void derive_constants();

    size_t serialized_size() const;
    void serialize(uint8_t *out) const;  // exactly serialized_size() bytes
    // Validates everything a lookup depends on (STK_E_CORRUPT / STK_E_TRUNCATED naming `what` and
    // the byte offset); the result points into data.
    static Mphf load(const uint8_t *data, size_t size, const char *what);

    static constexpr uint64_t kDenseThreshold = 0x9999999999999800ull;  // ~0.6 * 2^64
};

// Arena bytes that building a function over n keys needs (outputs and scratch).
size_t mphf_build_arena_size(uint64_t n_keys, const MphfParams &params);
// The largest serialized_size() a function built over n keys with these params can have (every
// bucket escaped: E = B); what `stk convert --dry-run` plans for an MPHF blob.
size_t mphf_serialized_size_bound(uint64_t n_keys, const MphfParams &params);

// Build over u64 keys / byte strings (key i = blob[offsets[i], offsets[i+1])).  Outputs (pilots,
// ranks, escapes, remap) stay in the arena; scratch is released before returning.  Duplicate keys are
// STK_E_INVALID_ARGUMENT.  No heap allocation.
Mphf mphf_build_u64(const uint64_t *keys, size_t n, const MphfParams &params, Arena &arena);
Mphf mphf_build_bytes(const uint8_t *blob, const uint64_t *offsets, size_t n, const MphfParams &params, Arena &arena);

}  // namespace stk
