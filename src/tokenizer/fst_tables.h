// The tokenizer's O(1) tables (seed 2.4, 4.3-4.5): tokenizer_fst.bin (Dec: token id -> bytes)
// and T_1.bin .. T_Ltok.bin (bytes of length n -> token id, over the MPHF, keyed by the
// Karp-Rabin hash RH_n).  Built by the tokenizer stage, loaded (validated) by the runtime.
// Byte layouts: docs/format.md "## Tokenizer tables".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "hash/hash64.h"
#include "hash/mphf.h"
#include "hash/rolling_hash.h"

namespace stk {

struct FstTables;

constexpr uint32_t kDecMagic = 0x46544B53u;    // "SKTF" as LE bytes: the Dec table
constexpr uint32_t kTableMagic = 0x54544B53u;  // "SKTT": one T_n
constexpr size_t kTokHeaderSize = 64;
constexpr uint32_t kDecFlagCertified = 1u << 0;    // Sardinas-Patterson certified the pieces
constexpr uint32_t kDecFlagUncertified = 1u << 1;  // built on request although SP rejected

// tokenizer_fst.bin: every token id's bytes (all ids, also pieces longer than L_tok and
// special tokens, so any id decodes).
struct DecTable {
    uint32_t n_tokens = 0;
    uint32_t l_tok = 0;
    uint32_t flags = 0;
    int32_t residual_id = -1;  // emitted for a byte no token covers (unk); -1: none
    uint64_t n_bytes = 0;
    const uint8_t *offsets = nullptr;  // u32 LE [n_tokens + 1]
    const uint8_t *bytes = nullptr;

    uint32_t offset(uint32_t id) const { return load_le<uint32_t>(offsets + 4 * size_t(id)); }
    // Bytes of a valid id (< n_tokens).
    const uint8_t *piece(uint32_t id, uint32_t *len) const {
        uint32_t a = offset(id);
        *len = offset(id + 1) - a;
        return bytes + a;
    }
    static size_t serialized_size(uint32_t n_tokens, uint64_t n_bytes) {
        return kTokHeaderSize + 4 * (size_t(n_tokens) + 1) + size_t(n_bytes);
    }
    // Validates header, offsets (monotone, within n_bytes) and the exact size.
    static DecTable load(const uint8_t *data, size_t size, const char *what);
};

// T_n.bin: the pieces of length n.
struct TokenTable {
    uint32_t n = 0;
    Mphf mphf;
    const uint8_t *ids = nullptr;  // u32 LE [K], in MPHF index order
    // Derived by load (not stored): bit b set when some piece of this table starts with byte b.
    // The greedy encoder skips a length no piece at the current first byte has.
    uint64_t first_bytes[4] = {0, 0, 0, 0};
    // Optional, derived, never stored (attach_piece_words): for n <= 8, word[i] = the n bytes of
    // the piece at MPHF index i as a zero-padded LE u64, so the equality guard is one load and one
    // compare instead of three dependent loads (ids -> Dec offsets -> Dec bytes).
    const uint64_t *words = nullptr;

    uint64_t n_keys() const { return mphf.n_keys; }
    uint32_t id_at(uint64_t i) const { return load_le<uint32_t>(ids + 4 * i); }
    bool has_first_byte(uint8_t b) const { return (first_bytes[b >> 6] >> (b & 63)) & 1; }
    // Candidate id for bytes whose RH_n is rh (unguarded; -1 for an empty table).
    int64_t candidate(uint64_t rh) const {
        if (mphf.n_keys == 0) return -1;
        return id_at(mphf.index_u64(rh));
    }
    static size_t serialized_size(const Mphf &m) { return kTokHeaderSize + m.serialized_size() + 4 * size_t(m.n_keys); }
    // Validates the header and the MPHF; every id must be < dec.n_tokens and Dec[id] n bytes long.
    static TokenTable load(const uint8_t *data, size_t size, uint32_t n, const DecTable &dec, const char *what);
};

// The greedy encoder's accelerator, derived from loaded tables, in memory only (never written):
// the guard words of T_1..T_min(L_tok, 8) (TokenTable::words) and a filter of the pieces of
// <= 8 bytes (FstTables::filter).  greedy_accel_words: how many u64 the tables need;
// attach_greedy_accel fills them into mem (the caller owns it; it must outlive the tables' use).
// Without it greedy_encode gives the same ids, more slowly.
constexpr uint32_t kPieceWordMaxLen = 8;
size_t greedy_accel_words(const FstTables &t);
void attach_greedy_accel(FstTables &t, uint64_t *mem);

void serialize_dec(const DecTable &d, uint8_t *out);

// The Dec table of a vocabulary (every id's bytes, in id order), serialized.  dec_size_for says
// how many bytes (and the total piece bytes; STK_E_UNSUPPORTED past 4 GiB, naming `source`);
// build_dec fills exactly that many bytes at out and returns the loaded (validated) view of them.
size_t dec_size_for(const std::vector<std::string> &pieces, uint64_t *total_bytes, const char *source);
DecTable build_dec(const std::vector<std::string> &pieces, uint32_t l_tok, uint32_t flags, int32_t residual_id, uint8_t *out,
                   size_t out_size, const char *name);
void serialize_token_table(uint32_t n, const Mphf &m, const uint32_t *ids, uint8_t *out);

// The whole set: Dec plus T_1..T_Ltok.
struct FstTables {
    DecTable dec;
    TokenTable t[hash::kMaxRollingLen + 1];
    // attach_greedy_accel: a one-bit-per-piece Bloom filter over (n, piece) for the pieces of
    // n <= 8 bytes in T_n, about 32 bits per piece.  No false negatives, so a length it rules out
    // cannot match and is not probed; a few % false positives, which the probe then rejects.
    // One multiply per length: the encoder tests all 8 lengths at a position with 8 independent
    // loads before its first probe.
    const uint64_t *filter = nullptr;
    uint64_t filter_mask = 0;    // words - 1 (a power of two)
    uint32_t filter_shift = 58;  // word index = (h >> filter_shift) & filter_mask, bit = h >> 58

    static uint64_t filter_hash(uint64_t word, uint32_t n) {
        return (word + uint64_t(n) * 0x9E3779B97F4A7C15ull) * 0xD6E8FEB86659FD93ull;
    }
    bool filter_has(uint64_t h) const { return (filter[(h >> filter_shift) & filter_mask] >> (h >> 58)) & 1; }

    // Guarded lookup: the id whose bytes are exactly p[0..n), or -1.
    int64_t find(const uint8_t *p, size_t n) const {
        if (n == 0 || n > dec.l_tok) return -1;
        return find_hashed(p, uint32_t(n), hash::rolling_hash(p, n));
    }
    int64_t find_hashed(const uint8_t *p, uint32_t n, uint64_t rh) const {
        int64_t id = t[n].candidate(rh);
        if (id < 0) return -1;
        uint32_t len;
        const uint8_t *b = dec.piece(uint32_t(id), &len);
        return len == n && std::memcmp(b, p, n) == 0 ? id : -1;
    }
};

}  // namespace stk
