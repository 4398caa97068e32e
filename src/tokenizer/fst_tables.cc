#include "tokenizer/fst_tables.h"

#include <cstring>

#include "core/checked.h"
#include "core/error.h"

namespace stk {

DecTable DecTable::load(const uint8_t *data, size_t size, const char *what) {
    if (size < kTokHeaderSize) throw_error(STK_E_TRUNCATED, "%s: %zu bytes, shorter than the 64-byte Dec header", what, size);
    if (load_u32(data) != kDecMagic)
        throw_error(STK_E_BAD_MAGIC, "%s: offset 0: not a tokenizer Dec table (magic %08x)", what, load_u32(data));
    DecTable d;
    d.n_tokens = load_u32(data + 4);
    d.l_tok = load_u32(data + 8);
    d.flags = load_u32(data + 12);
    d.residual_id = int32_t(load_u32(data + 16));
    d.n_bytes = load_u64(data + 24);
    if (load_u32(data + 20) != 0) throw_error(STK_E_CORRUPT, "%s: offset 20: reserved bytes not zero", what);
    for (size_t o = 32; o < kTokHeaderSize; o++)
        if (data[o]) throw_error(STK_E_CORRUPT, "%s: offset %zu: reserved bytes not zero", what, o);
    if (d.l_tok == 0 || d.l_tok > hash::kMaxRollingLen)
        throw_error(STK_E_CORRUPT, "%s: offset 8: L_tok %u outside 1..64", what, d.l_tok);
    if (d.flags & ~(kDecFlagCertified | kDecFlagUncertified) || d.flags == (kDecFlagCertified | kDecFlagUncertified))
        throw_error(STK_E_CORRUPT, "%s: offset 12: flags 0x%x", what, d.flags);
    if (d.residual_id < -1 || (d.residual_id >= 0 && uint32_t(d.residual_id) >= d.n_tokens))
        throw_error(STK_E_CORRUPT, "%s: offset 16: residual id %d outside the %u tokens", what, d.residual_id, d.n_tokens);
    if (d.n_bytes > 0xFFFFFFFFull)
        throw_error(STK_E_CORRUPT, "%s: offset 24: %llu piece bytes (u32 offsets)", what, (unsigned long long)d.n_bytes);
    uint64_t need = checked_add(checked_add(kTokHeaderSize, checked_mul(uint64_t(d.n_tokens) + 1, 4, "Dec offsets"), "Dec size"),
                                d.n_bytes, "Dec size");
    if (need != size)
        throw_error(need > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH,
                    "%s: Dec table is %zu bytes, its header (%u tokens, %llu bytes) needs %llu", what, size, d.n_tokens,
                    (unsigned long long)d.n_bytes, (unsigned long long)need);
    d.offsets = data + kTokHeaderSize;
    d.bytes = d.offsets + 4 * (size_t(d.n_tokens) + 1);
    if (d.offset(0) != 0) throw_error(STK_E_CORRUPT, "%s: offset 64: first piece offset %u, expected 0", what, d.offset(0));
    for (uint32_t i = 0; i < d.n_tokens; i++)
        if (d.offset(i + 1) < d.offset(i))
            throw_error(STK_E_CORRUPT, "%s: offset %zu: piece offsets decrease at id %u", what,
                        kTokHeaderSize + 4 * size_t(i + 1), i);
    if (d.offset(d.n_tokens) != d.n_bytes)
        throw_error(STK_E_CORRUPT, "%s: offset %zu: last piece offset %u != %llu bytes", what,
                    kTokHeaderSize + 4 * size_t(d.n_tokens), d.offset(d.n_tokens), (unsigned long long)d.n_bytes);
    return d;
}

TokenTable TokenTable::load(const uint8_t *data, size_t size, uint32_t n, const DecTable &dec, const char *what) {
    if (size < kTokHeaderSize) throw_error(STK_E_TRUNCATED, "%s: %zu bytes, shorter than the 64-byte table header", what, size);
    if (load_u32(data) != kTableMagic)
        throw_error(STK_E_BAD_MAGIC, "%s: offset 0: not a token table (magic %08x)", what, load_u32(data));
    if (load_u32(data + 4) != n)
        throw_error(STK_E_CORRUPT, "%s: offset 4: piece length %u, expected %u", what, load_u32(data + 4), n);
    uint64_t k = load_u64(data + 8), mb = load_u64(data + 16);
    for (size_t o = 24; o < kTokHeaderSize; o++)
        if (data[o]) throw_error(STK_E_CORRUPT, "%s: offset %zu: reserved bytes not zero", what, o);
    if (mb > size - kTokHeaderSize)
        throw_error(STK_E_TRUNCATED, "%s: offset 16: MPHF of %llu bytes in a %zu-byte table", what, (unsigned long long)mb, size);
    TokenTable t;
    t.n = n;
    t.mphf = Mphf::load(data + kTokHeaderSize, size_t(mb), what);
    if (t.mphf.n_keys != k)
        throw_error(STK_E_CORRUPT, "%s: offset 8: %llu keys, its MPHF has %llu", what, (unsigned long long)k,
                    (unsigned long long)t.mphf.n_keys);
    if (t.mphf.kind != MphfKeyKind::U64)
        throw_error(STK_E_CORRUPT, "%s: MPHF over byte strings; T_n is keyed by RH_n (u64)", what);
    uint64_t need = checked_add(kTokHeaderSize + mb, checked_mul(k, 4, "token ids"), "table size");
    if (need != size)
        throw_error(need > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH, "%s: table is %zu bytes, its header needs %llu", what,
                    size, (unsigned long long)need);
    t.ids = data + kTokHeaderSize + mb;
    for (uint64_t i = 0; i < k; i++) {
        uint32_t id = t.id_at(i), len = 0;
        if (id >= dec.n_tokens)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: token id %u >= %u tokens", what,
                        (unsigned long long)(kTokHeaderSize + mb + 4 * i), id, dec.n_tokens);
        const uint8_t *b = dec.piece(id, &len);
        if (len != n)
            throw_error(STK_E_CORRUPT, "%s: offset %llu: token %u has %u bytes, not %u", what,
                        (unsigned long long)(kTokHeaderSize + mb + 4 * i), id, len, n);
        t.first_bytes[b[0] >> 6] |= uint64_t(1) << (b[0] & 63);
    }
    return t;
}

namespace {
// The filter's size: about 32 bits per piece, a power of two, at least one word.
uint32_t filter_log2_words(size_t pieces) {
    uint32_t lg = 0;
    while ((uint64_t(64) << lg) < uint64_t(pieces) * 32 && lg < 40) lg++;
    return lg;
}
size_t accel_pieces(const FstTables &t) {
    size_t total = 0;
    for (uint32_t n = 1; n <= t.dec.l_tok && n <= kPieceWordMaxLen; n++) total += size_t(t.t[n].n_keys());
    return total;
}
}  // namespace

size_t greedy_accel_words(const FstTables &t) {
    size_t pieces = accel_pieces(t);
    return pieces + (size_t(1) << filter_log2_words(pieces));
}

void attach_greedy_accel(FstTables &t, uint64_t *mem) {
    const uint32_t lg = filter_log2_words(accel_pieces(t));
    uint64_t *filter = mem;
    std::memset(filter, 0, sizeof(uint64_t) << lg);
    mem += size_t(1) << lg;
    const uint64_t fmask = (uint64_t(1) << lg) - 1;
    for (uint32_t n = 1; n <= t.dec.l_tok && n <= kPieceWordMaxLen; n++) {
        TokenTable &tt = t.t[n];
        for (uint64_t i = 0; i < tt.n_keys(); i++) {
            uint32_t len;
            const uint8_t *b = t.dec.piece(tt.id_at(i), &len);  // len == n: checked by TokenTable::load
            uint64_t w = 0;
            std::memcpy(&w, b, len);
            mem[i] = w;  // host order = LE (core/bytes.h asserts it), as the encoder loads its window
            uint64_t h = FstTables::filter_hash(w, n);
            filter[(h >> (58 - lg)) & fmask] |= uint64_t(1) << (h >> 58);
        }
        tt.words = tt.n_keys() ? mem : nullptr;
        mem += tt.n_keys();
    }
    t.filter = filter;
    t.filter_mask = fmask;
    t.filter_shift = 58 - lg;
}

void serialize_dec(const DecTable &d, uint8_t *out) {
    std::memset(out, 0, kTokHeaderSize);
    store_le<uint32_t>(out, kDecMagic);
    store_le<uint32_t>(out + 4, d.n_tokens);
    store_le<uint32_t>(out + 8, d.l_tok);
    store_le<uint32_t>(out + 12, d.flags);
    store_le<uint32_t>(out + 16, uint32_t(d.residual_id));
    store_le<uint64_t>(out + 24, d.n_bytes);
    // memmove: the stage builds offsets and bytes in place, right behind the header
    std::memmove(out + kTokHeaderSize, d.offsets, 4 * (size_t(d.n_tokens) + 1));
    std::memmove(out + kTokHeaderSize + 4 * (size_t(d.n_tokens) + 1), d.bytes, size_t(d.n_bytes));
}

void serialize_token_table(uint32_t n, const Mphf &m, const uint32_t *ids, uint8_t *out) {
    std::memset(out, 0, kTokHeaderSize);
    store_le<uint32_t>(out, kTableMagic);
    store_le<uint32_t>(out + 4, n);
    store_le<uint64_t>(out + 8, m.n_keys);
    store_le<uint64_t>(out + 16, m.serialized_size());
    m.serialize(out + kTokHeaderSize);
    std::memcpy(out + kTokHeaderSize + m.serialized_size(), ids, 4 * size_t(m.n_keys));
}

size_t dec_size_for(const std::vector<std::string> &pieces, uint64_t *total_bytes, const char *source) {
    uint64_t total = 0;
    for (const std::string &p : pieces) total += p.size();
    if (total > 0xFFFFFFFFull)
        throw_error(STK_E_UNSUPPORTED, "%s: %llu bytes of pieces (at most 4 GiB)", source, (unsigned long long)total);
    *total_bytes = total;
    return DecTable::serialized_size(uint32_t(pieces.size()), total);
}

DecTable build_dec(const std::vector<std::string> &pieces, uint32_t l_tok, uint32_t flags, int32_t residual_id, uint8_t *out,
                   size_t out_size, const char *name) {
    uint64_t total = 0;
    if (dec_size_for(pieces, &total, name) != out_size)
        throw_error(STK_E_INTERNAL, "%s: Dec buffer of %zu bytes, expected %zu", name, out_size,
                    dec_size_for(pieces, &total, name));
    const uint32_t V = uint32_t(pieces.size());
    DecTable d;
    d.n_tokens = V;
    d.l_tok = l_tok;
    d.flags = flags;
    d.residual_id = residual_id;
    d.n_bytes = total;
    uint8_t *offs = out + kTokHeaderSize, *bytes = offs + 4 * (size_t(V) + 1);
    uint32_t at = 0;
    store_le<uint32_t>(offs, 0);
    for (uint32_t id = 0; id < V; id++) {
        std::memcpy(bytes + at, pieces[id].data(), pieces[id].size());
        at += uint32_t(pieces[id].size());
        store_le<uint32_t>(offs + 4 * (size_t(id) + 1), at);
    }
    d.offsets = offs;
    d.bytes = bytes;
    serialize_dec(d, out);  // the header; offsets and bytes are already in place
    return DecTable::load(out, out_size, name);
}

}  // namespace stk
