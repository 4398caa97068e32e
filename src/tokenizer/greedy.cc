#include "tokenizer/greedy.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace stk {

namespace {

[[noreturn]] void no_token(const FstTables &t, uint8_t byte, size_t at) {
    throw_error(STK_E_KEY_NOT_FOUND, "greedy encoder: byte 0x%02x at offset %zu has no token and the vocabulary has no unk", byte, at);
}

// Up to 8 bytes at p as a little-endian u64, zero above byte n (never reads past p + n).
inline uint64_t load_upto8(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n < 8 ? n : 8);
    return v;
}

// kKeep[n]: the low n bytes of a u64.
constexpr uint64_t kKeep[9] = {0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFull, 0xFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFull,
                               ~uint64_t(0)};

inline uint64_t load8(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

}  // namespace

size_t greedy_encode(const FstTables &t, const uint8_t *text, size_t n, uint32_t *out, GreedyStats *stats) {
    const uint32_t L = t.dec.l_tok;
    // lens[b]: bit k set when T_{k+1} has a piece that starts with byte b (256 x L_tok bit tests
    // per call; the tables hold it from load).  Lengths outside the mask cannot match: skipped.
    uint64_t lens[256];
    for (uint32_t b = 0; b < 256; b++) {
        uint64_t m = 0;
        for (uint32_t k = 1; k <= L; k++)
            if (t.t[k].has_first_byte(uint8_t(b))) m |= uint64_t(1) << (k - 1);
        lens[b] = m;
    }
    const uint64_t *filter = t.filter;
    const uint64_t filter_mask = t.filter_mask;
    const uint8_t *dec_bytes = t.dec.bytes;
    const uint64_t dec_n = t.dec.n_bytes;
    const int32_t residual_id = t.dec.residual_id;
    uint64_t probes = 0, residual = 0;
    uint32_t max_at = 0;
    size_t k = 0;
    uint64_t rh[hash::kMaxRollingLen];
    for (size_t i = 0; i < n;) {
        const size_t left = n - i;
        const uint8_t *p = text + i;
        uint64_t mask = lens[p[0]];
        if (left < L) mask &= (uint64_t(1) << left) - 1;  // residual flush at EOF: lengths that fit
        // the input's next 8 bytes once: pieces of <= 8 bytes are compared with one masked u64
        const uint64_t win = left >= 8 ? load8(p) : load_upto8(p, left);
        if (filter) {
            // all 8 filter reads are independent: they overlap, and the probe below nearly always
            // hits at the first length left standing
            uint64_t pass = 0;
            for (uint32_t len = 1; len <= kPieceWordMaxLen; len++) {
                const uint64_t h = FstTables::filter_hash(win & kKeep[len], len), bits = FstTables::filter_bits(h);
                pass |= uint64_t((filter[(h >> 12) & filter_mask] & bits) == bits) << (len - 1);
            }
            mask &= pass | ~uint64_t(0xFF);
        }
        const uint32_t top = mask ? 64 - uint32_t(__builtin_clzll(mask)) : 0;
        hash::rolling_prefixes(p, top, rh);
        uint32_t at = 0;
        int64_t id = -1;
        uint32_t len = 0;
        while (mask) {
            len = 64 - uint32_t(__builtin_clzll(mask));
            mask &= ~(uint64_t(1) << (len - 1));
            at++;
            const TokenTable &tt = t.t[len];
            const uint64_t idx = tt.mphf.index_u64(rh[len - 1]);
            if (tt.words) {  // len <= 8
                if (((tt.words[idx] ^ win) & kKeep[len]) == 0) {
                    id = tt.id_at(idx);
                    break;
                }
                continue;
            }
            const uint32_t cand = tt.id_at(idx);
            const uint32_t off = t.dec.offset(cand);  // Dec[cand] has len bytes (checked by load)
            bool eq;
            if (len <= 8) {
                const uint64_t piece = off + 8 <= dec_n ? load8(dec_bytes + off) : load_upto8(dec_bytes + off, len);
                eq = ((piece ^ win) & kKeep[len]) == 0;
            } else {
                eq = std::memcmp(dec_bytes + off, p, len) == 0;
            }
            if (eq) {
                id = cand;
                break;
            }
        }
        probes += at;
        max_at = std::max(max_at, at);
        if (id < 0) {
            if (residual_id < 0) no_token(t, p[0], i);
            id = residual_id;
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
            throw_error(STK_E_INVALID_ARGUMENT, "decode: token id %u at position %zu outside the %u tokens", ids[i], i, t.dec.n_tokens);
        uint32_t len;
        const uint8_t *p = t.dec.piece(ids[i], &len);
        if (len > out_cap - at) throw_error(STK_E_INVALID_ARGUMENT, "decode: output buffer of %zu bytes too small", out_cap);
        std::memcpy(out + at, p, len);
        at += len;
    }
    return at;
}

}  // namespace stk
