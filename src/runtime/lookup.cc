// stk_generation_open / stk_lookup: the O(1) lookups over a published generation.
#include <sys/stat.h>

#include <cstring>

#include "api/verify.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "runtime/generation.h"

namespace stk {

static bool is_dir_present(const std::string &dir) {
    struct stat st;
    return !dir.empty() && ::stat(dir.c_str(), &st) == 0;
}

std::unique_ptr<stk_generation> map_generation(const std::string &dir) {
    auto g = std::make_unique<stk_generation>();
    g->dir = dir;
    std::string arrays = dir + "/arrays/";
    struct stat st;
    if (::stat((arrays + "linear_mphf.bin").c_str(), &st) == 0) map_linear(*g);
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

void map_linear(stk_generation &g) {
    std::string arrays = g.dir + "/arrays/";
    for (const char *name : {"linear_keys.bin", "linear_weights.bin", "cuckoo_delta.bin"})
        if (!file_exists(arrays + name))
            throw_error(STK_E_MISSING_ARRAY, "%s: linear_mphf.bin is present but arrays/%s is not", g.dir.c_str(), name);
    g.lin_mphf = std::make_unique<ArrayReader>(arrays + "linear_mphf.bin");
    g.lin_keys = std::make_unique<ArrayReader>(arrays + "linear_keys.bin");
    g.lin_weights = std::make_unique<ArrayReader>(arrays + "linear_weights.bin");
    g.lin_delta = std::make_unique<ArrayReader>(arrays + "cuckoo_delta.bin");
    const ArrayHeader &hk = g.lin_keys->header(), &hw = g.lin_weights->header();
    if (g.lin_mphf->header().dtype != uint16_t(DType::U8) || g.lin_delta->header().dtype != uint16_t(DType::U8))
        throw_error(STK_E_CORRUPT, "%s: linear_mphf.bin and cuckoo_delta.bin must be u8 arrays", g.dir.c_str());
    if (hk.dtype != uint16_t(DType::U8) || hk.rank != 2 || hk.dims[1] != 8)
        throw_error(STK_E_CORRUPT, "%s: arrays/linear_keys.bin must be a [C, 8] u8 array", g.dir.c_str());
    if (hw.dtype != uint16_t(DType::F32) || hw.rank != 1 || hw.dims[0] != hk.dims[0])
        throw_error(STK_E_CORRUPT, "%s: arrays/linear_weights.bin must be [C] f32 with C = %llu (linear_keys.bin)", g.dir.c_str(),
                    (unsigned long long)hk.dims[0]);
    attach_linear(g, g.lin_mphf->payload(), size_t(g.lin_mphf->payload_size()), g.lin_keys->payload(), g.lin_weights->payload(),
                  hk.dims[0], g.lin_delta->payload(), size_t(g.lin_delta->payload_size()));
}

void attach_linear(stk_generation &g, const uint8_t *mphf, size_t mphf_len, const uint8_t *keys, const uint8_t *weights,
                   uint64_t c, const uint8_t *delta, size_t delta_len) {
    g.has_linear = false;
    g.linear_mphf = Mphf::load(mphf, mphf_len, "arrays/linear_mphf.bin");
    if (g.linear_mphf.kind != MphfKeyKind::U64 || g.linear_mphf.n_keys != c)
        throw_error(STK_E_CORRUPT, "arrays/linear_mphf.bin: a u64-key function over %llu keys expected (linear_keys.bin), found %llu",
                    (unsigned long long)c, (unsigned long long)g.linear_mphf.n_keys);
    g.linear_delta = CuckooTable::load(delta, delta_len, "arrays/cuckoo_delta.bin");
    g.linear_keys = keys;
    g.linear_weights = weights;
    g.linear_count = c;
    g.has_linear = true;
}

bool linear_find(const stk_generation &g, uint64_t key, float *value, uint32_t *probes) {
    uint32_t n = 1;
    // The MPHF maps every u64 to some index < C; the stored key is the guard.
    uint64_t idx = g.linear_mphf.index_u64(key);
    if (idx < g.linear_count && load_le<uint64_t>(g.linear_keys + 8 * idx) == key) {
        std::memcpy(value, g.linear_weights + 4 * idx, 4);
        if (probes) *probes = n;
        return true;
    }
    uint32_t bits = 0, dp = 0;
    bool found = g.linear_delta.find(key, &bits, &dp);
    if (probes) *probes = n + dp;
    if (found) std::memcpy(value, &bits, 4);
    return found;
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
        case STK_LOOKUP_LINEAR: {
            if (!g.has_linear)
                throw_error(STK_E_MISSING_ARRAY, "%s: arrays/linear_mphf.bin is absent: this generation has no linear dictionary "
                                                 "(see the manifest's records)", g.dir.c_str());
            if (key_len != 8) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: LINEAR key is a u64 (8 bytes), got %zu", key_len);
            uint64_t k = load_le<uint64_t>(static_cast<const uint8_t *>(key));
            float v;
            if (!linear_find(g, k, &v, nullptr))
                throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: linear key %016llx is in neither the base nor the delta (a dropped "
                                                 "entry reads as 0)", (unsigned long long)k);
            put_value(&v, 4, value, value_cap, value_len);
            return;
        }
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
        // A root: CURRENT is read once and that generation pinned: its files stay mapped (valid)
        // when a newer one is published or this one removed.  A removal between reading CURRENT
        // and mapping shows as a missing file: CURRENT is read again (a few times at most).
        for (int attempt = 0;; attempt++) {
            std::string dir;
            try {
                dir = verify_path(out_dir, nullptr);  // manifest, schema digest, every array's checksums
                *out_gen = map_generation(dir).release();
                return;
            } catch (const Error &e) {
                bool vanished = e.status() == STK_E_NOT_FOUND || e.status() == STK_E_MISSING_ARRAY;
                if (!vanished || attempt >= 3 || dir == out_dir || is_dir_present(dir)) throw;
            }
        }
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
