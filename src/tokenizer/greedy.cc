#include "tokenizer/greedy.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace stk {

size_t greedy_encode(const FstTables &t, const uint8_t *text, size_t n, uint32_t *out, GreedyStats *stats) {
    const uint32_t L = t.dec.l_tok;
    uint64_t rh[hash::kMaxRollingLen];
    uint64_t probes = 0;
    uint32_t max_at = 0;
    uint64_t residual = 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t maxn = uint32_t(std::min<size_t>(L, n - i));
        hash::rolling_prefixes(text + i, maxn, rh);  // RH of every candidate length, n mul-adds
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
            if (t.dec.residual_id < 0)
                throw_error(STK_E_KEY_NOT_FOUND, "greedy encoder: byte 0x%02x at offset %zu has no token and the vocabulary has no unk",
                            text[i], i);
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
