// The O(1) lookups over a published generation (stk_lookup's body; the C entry points are in
// api/generation_api.cc).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "runtime/generation.h"

namespace stk {

std::unique_ptr<stk_generation> map_generation(const std::string &dir) {
    auto g = std::make_unique<stk_generation>();
    g->dir = dir;
    // stk_generation_open has verified the manifest; unit tests map bare token tables without one.
    const std::string mpath = dir + "/" + kManifestFileName;
    if (file_exists(mpath)) g->manifest = read_manifest(mpath);
    g->views.resize(g->manifest.arrays.size());
    std::string arrays = dir + "/arrays/";
    struct stat st;
    if (::stat((arrays + "linear_mphf.bin").c_str(), &st) == 0) map_linear(*g);
    if (::stat((arrays + "bridge_hubs.bin").c_str(), &st) == 0) map_bridge(*g);
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

void generation_array(const stk_generation &g, uint32_t index, stk_array_view &out) {
    if (index >= g.manifest.arrays.size())
        throw_error(STK_E_KEY_NOT_FOUND, "%s: array index %u, the manifest lists %zu", g.dir.c_str(), index,
                    g.manifest.arrays.size());
    const ManifestArray &e = g.manifest.arrays[index];
    const ArrayReader *r;
    {
        std::lock_guard<std::mutex> lock(g.views_mu);
        if (!g.views[index]) {
            auto reader =
                std::make_unique<ArrayReader>(g.dir + "/" + kArraysDirName + "/" + e.name);  // header + payload checksums
            const ArrayHeader &h = reader->header();
            bool same = uint16_t(h.dtype) == e.dtype && h.rank == e.rank && h.byte_len == e.byte_len && h.crc32c == e.crc32c &&
                        h.sha256_low64 == e.sha256_low64 && h.flags == e.flags;
            for (uint32_t i = 0; i < kMaxRank; i++) same = same && h.dims[i] == e.dims[i];
            if (!same)
                throw_error(STK_E_SIZE_MISMATCH,
                            "%s: header differs from the manifest entry of %s (dtype, dims, byte_len, flags or digests)",
                            reader->path().c_str(), e.name);
            g.views[index] = std::move(reader);
        }
        r = g.views[index].get();
    }
    std::memset(out.name, 0, sizeof out.name);
    std::memcpy(out.name, e.name, std::min(sizeof out.name - 1, sizeof e.name));
    out.stage = e.stage;
    out.dtype = e.dtype;
    out.rank = e.rank;
    out.flags = e.flags;
    for (uint32_t i = 0; i < kMaxRank; i++) out.dims[i] = e.dims[i];
    out.byte_len = e.byte_len;
    out.data = r->payload();
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
        throw_error(STK_E_CORRUPT,
                    "arrays/linear_mphf.bin: a u64-key function over %llu keys expected (linear_keys.bin), found %llu",
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

void map_bridge(stk_generation &g) {
    std::string arrays = g.dir + "/arrays/";
    if (!file_exists(arrays + "bridge_qDin.bin"))
        throw_error(STK_E_MISSING_ARRAY, "%s: bridge_hubs.bin is present but arrays/bridge_qDin.bin is not", g.dir.c_str());
    g.br_hubs = std::make_unique<ArrayReader>(arrays + "bridge_hubs.bin");
    g.br_qdin = std::make_unique<ArrayReader>(arrays + "bridge_qDin.bin");
    const ArrayHeader &hh = g.br_hubs->header(), &hq = g.br_qdin->header();
    if (hh.dtype != uint16_t(DType::U8) || hh.rank != 3 || hh.dims[2] != 8 || hh.dims[1] < 2 || hh.dims[1] > 3)
        throw_error(STK_E_CORRUPT, "%s: arrays/bridge_hubs.bin must be a [rows, W, 8] u8 array with W in {2, 3}", g.dir.c_str());
    if (hq.dtype != uint16_t(DType::I16) || hq.rank != 2 || hq.dims[1] != 64 * hh.dims[1])
        throw_error(STK_E_CORRUPT, "%s: arrays/bridge_qDin.bin must be [vocab, %llu] i16 (64 W hubs)", g.dir.c_str(),
                    (unsigned long long)(64 * hh.dims[1]));
    attach_bridge(g, g.br_hubs->payload(), size_t(g.br_hubs->payload_size()), hh.dims[0], uint32_t(hh.dims[1]), hq.dims[0]);
}

void attach_bridge(stk_generation &g, const uint8_t *hubs, size_t len, uint64_t rows, uint32_t w, uint64_t tokens) {
    g.has_bridge = false;
    if (w < 2 || w > 3) throw_error(STK_E_CORRUPT, "arrays/bridge_hubs.bin: W = %u; 2 or 3 expected", w);
    if (rows > (uint64_t(1) << 40) || rows * w * 8 != len)
        throw_error(STK_E_CORRUPT, "arrays/bridge_hubs.bin: %llu rows of %u words need %llu bytes; the payload has %zu",
                    (unsigned long long)rows, w, (unsigned long long)(rows <= (uint64_t(1) << 40) ? rows * w * 8 : 0), len);
    if (tokens == 0 || tokens >= rows || tokens > 0xFFFFFFFFull)
        throw_error(STK_E_CORRUPT, "arrays/bridge_hubs.bin: %llu rows cannot hold %llu token rows and a context row",
                    (unsigned long long)rows, (unsigned long long)tokens);
    const uint64_t ctx = rows - tokens;
    if (ctx > 65536 || (ctx & (ctx - 1)))
        throw_error(STK_E_CORRUPT, "arrays/bridge_hubs.bin: %llu context rows; a power of two <= 65536 expected",
                    (unsigned long long)ctx);
    for (uint64_t r = 0; r < rows; r++) {
        uint32_t bits = 0;
        for (uint32_t i = 0; i < w; i++) bits += uint32_t(__builtin_popcountll(load_le<uint64_t>(hubs + (r * w + i) * 8)));
        if (bits < 1 || bits > 2)
            throw_error(STK_E_CORRUPT, "arrays/bridge_hubs.bin: offset %llu: row %llu has %u bits set; 1 or 2 expected",
                        (unsigned long long)(r * w * 8), (unsigned long long)r, bits);
    }
    g.bridge_hubs = hubs;
    g.bridge_tokens = tokens;
    g.bridge_contexts = uint32_t(ctx);
    g.bridge_w = w;
    g.has_bridge = true;
}

bool bridge_hub_bitset(const stk_generation &g, uint32_t token, uint32_t context, uint64_t *out) {
    if (!g.has_bridge || token >= g.bridge_tokens || context >= g.bridge_contexts) return false;
    const uint8_t *t = g.bridge_hubs + uint64_t(token) * g.bridge_w * 8;
    const uint8_t *c = g.bridge_hubs + (g.bridge_tokens + context) * g.bridge_w * 8;
    for (uint32_t i = 0; i < g.bridge_w; i++) out[i] = load_le<uint64_t>(t + 8 * i) | load_le<uint64_t>(c + 8 * i);
    return true;
}

static void put_value(const void *src, size_t len, void *value, size_t value_cap, size_t *value_len) {
    *value_len = len;
    if (len > value_cap)
        throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: value needs %zu bytes, value_cap is %zu", len, value_cap);
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
        case STK_LOOKUP_TOKEN_BYTES: break;
        case STK_LOOKUP_LINEAR: {
            if (!g.has_linear)
                throw_error(STK_E_MISSING_ARRAY,
                            "%s: arrays/linear_mphf.bin is absent: this generation has no linear dictionary "
                            "(see the manifest's records)",
                            g.dir.c_str());
            if (key_len != 8) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: LINEAR key is a u64 (8 bytes), got %zu", key_len);
            uint64_t k = load_le<uint64_t>(static_cast<const uint8_t *>(key));
            float v;
            if (!linear_find(g, k, &v, nullptr))
                throw_error(STK_E_KEY_NOT_FOUND,
                            "stk_lookup: linear key %016llx is in neither the base nor the delta (a dropped "
                            "entry reads as 0)",
                            (unsigned long long)k);
            put_value(&v, 4, value, value_cap, value_len);
            return;
        }
        case STK_LOOKUP_HUB: {
            if (!g.has_bridge)
                throw_error(STK_E_MISSING_ARRAY,
                            "%s: arrays/bridge_hubs.bin is absent: this generation has no bridge "
                            "(see the manifest's records)",
                            g.dir.c_str());
            if (key_len != 8)
                throw_error(STK_E_INVALID_ARGUMENT,
                            "stk_lookup: HUB key is a u32 token id and a u32 context id (8 bytes), got %zu", key_len);
            const uint8_t *kb = static_cast<const uint8_t *>(key);
            const uint32_t token = load_le<uint32_t>(kb), context = load_le<uint32_t>(kb + 4);
            uint64_t words[3];
            if (!bridge_hub_bitset(g, token, context, words))
                throw_error(STK_E_KEY_NOT_FOUND,
                            "stk_lookup: HUB key (token %u, context %u) outside the %llu tokens and %u contexts", token, context,
                            (unsigned long long)g.bridge_tokens, g.bridge_contexts);
            uint8_t outb[24];
            for (uint32_t i = 0; i < g.bridge_w; i++) store_le<uint64_t>(outb + 8 * i, words[i]);
            put_value(outb, size_t(8) * g.bridge_w, value, value_cap, value_len);
            return;
        }
        default: throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: unknown lookup kind %d", int(kind));
    }
    if (!g.has_tokenizer)
        throw_error(STK_E_MISSING_ARRAY,
                    "%s: arrays/tokenizer_fst.bin is absent: this generation has no greedy tokenizer tables "
                    "(EXT mode or no tokenizer; see the manifest's invariant records)",
                    g.dir.c_str());
    if (kind == STK_LOOKUP_TOKEN_ID) {
        const uint8_t *p = static_cast<const uint8_t *>(key);
        if (key_len == 0 || key_len > g.tok.dec.l_tok)
            throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: %zu-byte key: the tables hold pieces of 1..%u bytes", key_len,
                        g.tok.dec.l_tok);
        int64_t id = g.tok.find(p, key_len);
        if (id < 0) throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: no token has these %zu bytes", key_len);
        uint8_t out[4];
        store_le<uint32_t>(out, uint32_t(id));
        put_value(out, 4, value, value_cap, value_len);
        return;
    }
    if (key_len != 4) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: TOKEN_BYTES key is a u32 id (4 bytes), got %zu", key_len);
    uint32_t id = load_u32(key);
    if (id >= g.tok.dec.n_tokens)
        throw_error(STK_E_KEY_NOT_FOUND, "stk_lookup: token id %u outside the %u tokens", id, g.tok.dec.n_tokens);
    uint32_t len;
    const uint8_t *b = g.tok.dec.piece(id, &len);
    put_value(b, len, value, value_cap, value_len);
}

}  // namespace stk
