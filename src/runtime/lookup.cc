// stk_generation_open / stk_lookup: the O(1) lookups over a published generation.
#include <sys/stat.h>

#include <cstring>

#include "api/verify.h"
#include "core/error.h"
#include "runtime/generation.h"

namespace stk {

std::unique_ptr<stk_generation> map_generation(const std::string &dir) {
    auto g = std::make_unique<stk_generation>();
    g->dir = dir;
    std::string arrays = dir + "/arrays/";
    struct stat st;
    if (::stat((arrays + "tokenizer_fst.bin").c_str(), &st) != 0) return g;  // no FST: token lookups disabled
    g->fst = std::make_unique<ArrayReader>(arrays + "tokenizer_fst.bin");
    std::string fst_name = "arrays/tokenizer_fst.bin";
    g->tok.dec = DecTable::load(g->fst->payload(), g->fst->payload_size(), fst_name.c_str());
    for (uint32_t n = 1; n <= g->tok.dec.l_tok; n++) {
        std::string name = "arrays/T_" + std::to_string(n) + ".bin";
        g->tables.push_back(std::make_unique<ArrayReader>(dir + "/" + name));
        const ArrayReader &r = *g->tables.back();
        g->tok.t[n] = TokenTable::load(r.payload(), r.payload_size(), n, g->tok.dec, name.c_str());
    }
    // The greedy encoder's in-memory accelerator (same ids, ~3x faster): built once per mapping.
    g->greedy_accel.resize(greedy_accel_words(g->tok));
    attach_greedy_accel(g->tok, g->greedy_accel.data());
    g->has_tokenizer = true;
    return g;
}

static void put_value(const void *src, size_t len, void *value, size_t value_cap, size_t *value_len) {
    *value_len = len;
    if (len > value_cap) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: value needs %zu bytes, value_cap is %zu", len, value_cap);
    if (len) std::memcpy(value, src, len);
}

void generation_lookup(const stk_generation &g, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                       size_t value_cap, size_t *value_len) {
    if (!value_len) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: value_len is NULL");
    *value_len = 0;
    if (!key && key_len) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: key is NULL");
    if (!value && value_cap) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: value is NULL");
    switch (kind) {
        case STK_LOOKUP_TOKEN_ID:
        case STK_LOOKUP_TOKEN_BYTES:
            break;
        case STK_LOOKUP_LINEAR:
            throw_error(STK_E_NOT_IMPLEMENTED, "stk_lookup: LINEAR lookups need the mphf_cuckoo stage, which is not implemented yet");
        case STK_LOOKUP_HUB:
            throw_error(STK_E_NOT_IMPLEMENTED, "stk_lookup: HUB lookups need the bridge_init stage, which is not implemented yet");
        default:
            throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: unknown lookup kind %d", int(kind));
    }
    if (!g.has_tokenizer)
        throw_error(STK_E_MISSING_ARRAY, "%s: arrays/tokenizer_fst.bin is absent: this generation has no greedy tokenizer tables "
                                         "(EXT mode or no tokenizer; see the manifest's invariant records)", g.dir.c_str());
    if (kind == STK_LOOKUP_TOKEN_ID) {
        const uint8_t *p = static_cast<const uint8_t *>(key);
        if (key_len == 0 || key_len > g.tok.dec.l_tok)
            throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: %zu-byte key: the tables hold pieces of 1..%u bytes", key_len, g.tok.dec.l_tok);
        int64_t id = g.tok.find(p, key_len);
        if (id < 0) throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: no token has these %zu bytes", key_len);
        uint8_t out[4];
        store_le<uint32_t>(out, uint32_t(id));
        put_value(out, 4, value, value_cap, value_len);
        return;
    }
    if (key_len != 4) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: TOKEN_BYTES key is a u32 id (4 bytes), got %zu", key_len);
    uint32_t id = load_u32(key);
    if (id >= g.tok.dec.n_tokens) throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: token id %u outside the %u tokens", id, g.tok.dec.n_tokens);
    uint32_t len;
    const uint8_t *b = g.tok.dec.piece(id, &len);
    put_value(b, len, value, value_cap, value_len);
}

}  // namespace stk

using namespace stk;

extern "C" {

STK_API stk_status stk_generation_open(const char *out_dir, stk_generation **out_gen) {
    return guard([&] {
        if (!out_dir || !out_gen) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_open: NULL argument");
        *out_gen = nullptr;
        verify_generation(out_dir, nullptr);  // manifest, schema digest, every array's checksums
        *out_gen = map_generation(out_dir).release();
    });
}

STK_API void stk_generation_close(stk_generation *gen) { delete gen; }

STK_API stk_status stk_lookup(const stk_generation *gen, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                              size_t value_cap, size_t *value_len) {
    return guard([&] {
        if (!gen) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: gen is NULL");
        generation_lookup(*gen, kind, key, key_len, value, value_cap, value_len);
    });
}
}
