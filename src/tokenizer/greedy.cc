#include "tokenizer/greedy.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace stk {

namespace {

[[noreturn]] void no_token(const FstTables &t, uint8_t byte, size_t at) {
    throw_error(STK_E_KEY_NOT_FOUND, "greedy encoder: byte 0x%02x at offset %zu has no token and the vocabulary has no unk", byte,
                at);
}

// Up to 8 bytes at p as a little-endian u64, zero above byte n (never reads past p + n).
inline uint64_t load_upto8(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n < 8 ? n : 8);
    return v;
}

// kKeep[n]: the low n bytes of a u64.
constexpr uint64_t kKeep[9] = {
    0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFull, 0xFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFull, ~uint64_t(0)};

// RH_n of the n <= 8 bytes in the low bytes of w (the rest zero) without a loop: RH_8 of the
// zero-padded word is RH_n * 257^(8-n) (seed 4.3's polynomial), and 257 is odd, so multiplying by
// its inverse^(8-n) mod 2^64 gives RH_n exactly.  RH_8 by a tree: 3 dependent multiplies, not 8.
constexpr uint64_t kB = hash::kRollingBase;
constexpr uint64_t inverse_mod_2_64(uint64_t a) {
    uint64_t x = a;  // Newton: each step doubles the correct low bits (a * a = 1 mod 8 for odd a)
    for (int i = 0; i < 6; i++) x *= 2 - a * x;
    return x;
}
constexpr uint64_t kInvB = inverse_mod_2_64(kB);
static_assert(kB * kInvB == 1, "257 is odd, so invertible mod 2^64");
struct InvPowers {
    uint64_t p[9];
    constexpr InvPowers() : p() {
        p[0] = 1;
        for (int i = 1; i <= 8; i++) p[i] = p[i - 1] * kInvB;
    }
};
constexpr InvPowers kInvPow{};

inline uint64_t rolling_hash_word(uint64_t w, uint32_t n) {
    const uint64_t q01 = (w & 0xFF) * kB + ((w >> 8) & 0xFF), q23 = ((w >> 16) & 0xFF) * kB + ((w >> 24) & 0xFF);
    const uint64_t q45 = ((w >> 32) & 0xFF) * kB + ((w >> 40) & 0xFF), q67 = ((w >> 48) & 0xFF) * kB + (w >> 56);
    const uint64_t rh8 = (q01 * (kB * kB) + q23) * (kB * kB * kB * kB) + q45 * (kB * kB) + q67;
    return rh8 * kInvPow.p[8 - n];
}

inline uint64_t load8(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// The per-call state of the encoder: the tables' fields it reads, in locals, and the stats.
struct Encoder {
    const FstTables &t;
    const uint8_t *text;
    size_t n;
    uint32_t L;
    const uint64_t *filter;
    uint64_t filter_mask;
    uint32_t filter_shift;
    // lens[b]: bit k set when T_{k+1} has a piece that starts with byte b (256 x L_tok bit tests
    // per call; the tables hold it from load).  Lengths outside the mask cannot match: skipped.
    uint64_t lens[256];
    uint64_t probes = 0, residual = 0;
    uint32_t max_at = 0;
    // A direct-mapped memo of 8-byte windows -> token (only with the accelerator and L_tok <= 8,
    // where the window decides the token; English repeats its words).  Set up per call.
    struct MemoEntry {
        uint64_t win;
        uint32_t id, len;  // len 0: empty
    };
    static constexpr uint32_t kMemoLog2 = 10;  // 16 KiB on the stack: short texts
    static constexpr uint32_t kBigMemoLog2 =
        12;  // 64 KiB for long texts (kBigMemoMinBytes and more), on the heap: measured
             // on 24 MB of English (`stk tokenize`), 2^12 to 2^15 alike, ~5 % faster than 2^10
    MemoEntry *memo = nullptr;
    uint32_t memo_shift = 64 - kMemoLog2;

    Encoder(const FstTables &tables, const uint8_t *txt, size_t len)
        : t(tables),
          text(txt),
          n(len),
          L(tables.dec.l_tok),
          filter(tables.filter),
          filter_mask(tables.filter_mask),
          filter_shift(tables.filter_shift) {
        for (uint32_t b = 0; b < 256; b++) {
            uint64_t m = 0;
            for (uint32_t k = 1; k <= L; k++)
                if (t.t[k].has_first_byte(uint8_t(b))) m |= uint64_t(1) << (k - 1);
            lens[b] = m;
        }
    }

    // The token at i (< n): its id in *id, its length returned; 0 when no token covers text[i]
    // and the vocabulary has no residual id.
    [[gnu::always_inline]] inline uint32_t step(size_t i, uint32_t *id_out) {
        const size_t left = n - i;
        const uint8_t *p = text + i;
        uint64_t mask = lens[p[0]];
        if (left < L) mask &= (uint64_t(1) << left) - 1;  // residual flush at EOF: lengths that fit
        // the input's next 8 bytes once: pieces of <= 8 bytes are compared with one masked u64
        const uint64_t win = left >= 8 ? load8(p) : load_upto8(p, left);
        MemoEntry *memo_slot = nullptr;
        if (memo && left >= 8) {
            // with L_tok <= 8 the token at p depends on these 8 bytes only: a window seen before
            // gives the same token (ids unchanged; the probes were made and guarded then)
            memo_slot = &memo[(win * 0x9E3779B97F4A7C15ull) >> memo_shift];
            if (memo_slot->len && memo_slot->win == win) {
                *id_out = memo_slot->id;
                return memo_slot->len;
            }
        }
        if (filter) {
            // all 8 filter reads are independent: they overlap, and the probe below nearly always
            // hits at the first length left standing
            uint64_t pass = 0;
#pragma GCC unroll 8
            for (uint32_t len = 1; len <= kPieceWordMaxLen; len++) {
                const uint64_t h = FstTables::filter_hash(win & kKeep[len], len);
                pass |= ((filter[(h >> filter_shift) & filter_mask] >> (h >> 58)) & 1) << (len - 1);
            }
            mask &= pass | ~uint64_t(0xFF);
        }
        uint32_t at = 0;
        uint64_t rh[hash::kMaxRollingLen];
        uint32_t have_rh = 0;  // without the guard words: every prefix hash at once, on first need
        while (mask) {
            const uint32_t len = 64 - uint32_t(__builtin_clzll(mask));
            mask &= ~(uint64_t(1) << (len - 1));
            at++;
            const TokenTable &tt = t.t[len];
            if (tt.words) {  // len <= 8
                const uint64_t idx = tt.mphf.index_u64(rolling_hash_word(win & kKeep[len], len));
                if (((tt.words[idx] ^ win) & kKeep[len]) == 0) {
                    *id_out = tt.id_at(idx);
                    if (memo_slot) *memo_slot = {win, *id_out, len};
                    return done(at, len);
                }
                continue;
            }
            if (len > have_rh) {
                hash::rolling_prefixes(p, len, rh);
                have_rh = len;
            }
            const uint32_t cand = tt.id_at(tt.mphf.index_u64(rh[len - 1]));
            const uint32_t off = t.dec.offset(cand);  // Dec[cand] has len bytes (checked by load)
            bool eq;
            if (len <= 8) {
                const uint64_t piece = off + 8 <= t.dec.n_bytes ? load8(t.dec.bytes + off) : load_upto8(t.dec.bytes + off, len);
                eq = ((piece ^ win) & kKeep[len]) == 0;
            } else {
                eq = std::memcmp(t.dec.bytes + off, p, len) == 0;
            }
            if (eq) {
                *id_out = cand;
                return done(at, len);
            }
        }
        if (t.dec.residual_id < 0) return done(at, 0);
        residual++;
        *id_out = uint32_t(t.dec.residual_id);
        return done(at, 1);
    }
    uint32_t done(uint32_t at, uint32_t len) {
        probes += at;
        max_at = std::max(max_at, at);
        return len;
    }

    // Plain greedy from byte `from` to the end, ids written from out[k]; returns the new count.
    size_t run(size_t from, uint32_t *out, size_t k) {
        for (size_t i = from; i < n;) {
            uint32_t id;
            const uint32_t len = step(i, &id);
            if (len == 0) no_token(t, text[i], i);
            out[k++] = id;
            i += len;
        }
        return k;
    }

    void report(GreedyStats *stats) const {
        if (!stats) return;
        stats->probes += probes;
        stats->max_probes_at = std::max(stats->max_probes_at, max_at);
        stats->residual_bytes += residual;
    }
};

constexpr size_t kMemoMinBytes = 256;  // below it, clearing the memo (16 KiB) costs more than it saves
constexpr size_t kBigMemoMinBytes = size_t(1) << 20;

}  // namespace

size_t greedy_encode(const FstTables &t, const uint8_t *text, size_t n, uint32_t *out, GreedyStats *stats) {
    Encoder e(t, text, n);
    Encoder::MemoEntry memo[size_t(1) << Encoder::kMemoLog2];  // 16 KiB of stack, no heap
    std::unique_ptr<Encoder::MemoEntry[]> big_memo;
    if (t.filter && t.dec.l_tok <= kPieceWordMaxLen && n >= kMemoMinBytes) {
        if (n >= kBigMemoMinBytes) {
            // a long text repeats more distinct windows than 1024 entries hold: a larger memo
            // (in L2) answers more positions; its size never changes the ids
            big_memo.reset(new Encoder::MemoEntry[size_t(1) << Encoder::kBigMemoLog2]());
            e.memo = big_memo.get();
            e.memo_shift = 64 - Encoder::kBigMemoLog2;
        } else {
            std::memset(memo, 0, sizeof memo);
            e.memo = memo;
        }
    }
    size_t k = e.run(0, out, 0);
    e.report(stats);
    return k;
}

size_t greedy_encode_reference(const FstTables &t, const uint8_t *text, size_t n, uint32_t *out, GreedyStats *stats) {
    const uint32_t L = t.dec.l_tok;
    uint64_t rh[hash::kMaxRollingLen];
    uint64_t probes = 0;
    uint32_t max_at = 0;
    uint64_t residual = 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t maxn = uint32_t(std::min<size_t>(L, n - i));
        hash::rolling_prefixes(text + i, maxn, rh);
        uint32_t at = 0;
        int64_t id = -1;
        uint32_t len = maxn;
        for (; len >= 1; len--) {
            if (t.t[len].n_keys() == 0) continue;
            at++;
            id = t.find_hashed(text + i, len, rh[len - 1]);
            if (id >= 0) break;
        }
        probes += at;
        max_at = std::max(max_at, at);
        if (id < 0) {
            if (t.dec.residual_id < 0) no_token(t, text[i], i);
            id = t.dec.residual_id;
            len = 1;
            residual++;
        }
        out[k++] = uint32_t(id);
        i += len;
    }
    if (stats) {
        stats->probes += probes;
        stats->max_probes_at = std::max(stats->max_probes_at, max_at);
        stats->residual_bytes += residual;
    }
    return k;
}

size_t fst_decode(const FstTables &t, const uint32_t *ids, size_t n, uint8_t *out, size_t out_cap) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t.dec.n_tokens)
            throw_error(STK_E_INVALID_ARGUMENT, "decode: token id %u at position %zu outside the %u tokens", ids[i], i,
                        t.dec.n_tokens);
        uint32_t len;
        const uint8_t *p = t.dec.piece(ids[i], &len);
        if (len > out_cap - at) throw_error(STK_E_INVALID_ARGUMENT, "decode: output buffer of %zu bytes too small", out_cap);
        std::memcpy(out + at, p, len);
        at += len;
    }
    return at;
}

}  // namespace stk
