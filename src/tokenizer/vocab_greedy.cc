// The greedy encoder's tables built in memory from a Vocab, for `stk tokenize --mode greedy` and
// bench/tokenize_bench (no job, nothing written).  The same selection as the tokenizer stage
// (src/stages/tokenizer_stage.cc): non-special pieces of 1..L_tok bytes; equal bytes and equal
// RH_n keep the lowest id; unk as the residual id.  The stage's published tables are built by the
// stage itself; this is a convenience for measuring and trying the greedy encoder.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "hash/rolling_hash.h"
#include "tokenizer/fst_tables.h"
#include "tokenizer/vocab_greedy.h"

namespace stk {

GreedyTables::GreedyTables(const Vocab &vocab, uint32_t l_tok) {
    const uint32_t V = vocab.size(), L = l_tok;
    if (L == 0 || L > hash::kMaxRollingLen)
        throw_error(STK_E_INVALID_ARGUMENT, "Ltok = %u: outside 1..%u", L, hash::kMaxRollingLen);
    if (vocab.model != Vocab::Model::BPE_BYTE_LEVEL)
        throw_error(STK_E_UNSUPPORTED,
                    "%s: the greedy encoder needs a byte-level BPE vocabulary (this one is tokenized in EXT mode)",
                    vocab.source.c_str());
    tables = std::make_unique<FstTables>();
    std::vector<uint32_t> cand;
    uint64_t total = 0;
    for (uint32_t id = 0; id < V; id++) {
        size_t len = vocab.pieces[id].size();
        total += len;
        if (len >= 1 && len <= L && !vocab.special(id)) cand.push_back(id);
    }
    if (total > 0xFFFFFFFFull) throw_error(STK_E_UNSUPPORTED, "%s: more than 4 GiB of piece bytes", vocab.source.c_str());
    // By (length, bytes, id).  The first 8 bytes as a big-endian word order like memcmp, so most
    // comparisons are two integer compares (the indirect memcmp sort was a visible share of
    // `stk tokenize`'s start-up in a profile; not benched on its own).
    struct Ranked {
        uint64_t len, head;
        uint32_t id;
    };
    std::vector<Ranked> ranked(cand.size());
    for (size_t i = 0; i < cand.size(); i++) {
        const std::string &p = vocab.pieces[cand[i]];
        uint64_t head = 0;
        for (size_t k = 0; k < 8; k++) head = (head << 8) | (k < p.size() ? uint8_t(p[k]) : 0);
        ranked[i] = {p.size(), head, cand[i]};
    }
    std::sort(ranked.begin(), ranked.end(), [&](const Ranked &a, const Ranked &b) {
        if (a.len != b.len) return a.len < b.len;
        if (a.head != b.head) return a.head < b.head;
        if (a.len > 8) {
            int c = std::memcmp(vocab.pieces[a.id].data() + 8, vocab.pieces[b.id].data() + 8, a.len - 8);
            if (c) return c < 0;
        }
        return a.id < b.id;
    });
    for (size_t i = 0; i < cand.size(); i++) cand[i] = ranked[i].id;
    cand.erase(std::unique(cand.begin(), cand.end(), [&](uint32_t a, uint32_t b) { return vocab.pieces[a] == vocab.pieces[b]; }),
               cand.end());

    // Dec
    dec_blob.resize(dec_size_for(vocab.pieces, &total, vocab.source.c_str()));
    tables->dec =
        build_dec(vocab.pieces, L, kDecFlagUncertified, vocab.unk_id >= 0 && uint32_t(vocab.unk_id) < V ? vocab.unk_id : -1,
                  dec_blob.data(), dec_blob.size(), "tokenizer_fst.bin (in memory)");

    // T_1..T_L
    struct KeyId {
        uint64_t key;
        uint32_t id;
    };
    size_t first = 0;
    for (uint32_t n = 1; n <= L; n++) {
        std::vector<KeyId> kid;
        while (first < cand.size() && vocab.pieces[cand[first]].size() == n) {
            const std::string &p = vocab.pieces[cand[first]];
            kid.push_back({hash::rolling_hash(reinterpret_cast<const uint8_t *>(p.data()), n), cand[first]});
            first++;
        }
        std::sort(kid.begin(), kid.end(),
                  [](const KeyId &a, const KeyId &b) { return a.key != b.key ? a.key < b.key : a.id < b.id; });
        kid.erase(std::unique(kid.begin(), kid.end(), [](const KeyId &a, const KeyId &b) { return a.key == b.key; }), kid.end());
        std::vector<uint64_t> keys(kid.size());
        for (size_t i = 0; i < kid.size(); i++) keys[i] = kid[i].key;
        MphfParams mp;
        mp.salt = 0x544F4B454E495A45ull + n;
        for (uint32_t attempt = 0;; attempt++) {
            arenas.emplace_back(mphf_build_arena_size(keys.size(), mp) + 4096);
            Arena A(arenas.back().data(), arenas.back().size());
            Mphf f;
            try {
                f = mphf_build_u64(keys.data(), keys.size(), mp, A);
            } catch (const Error &e) {
                arenas.pop_back();
                if (e.status() != STK_E_MPHF_EXHAUSTED || attempt == 8) throw;
                mp.m_scale *= 1.05;  // 18.1
                continue;
            }
            {
                std::vector<uint32_t> ids(std::max<size_t>(kid.size(), 1));
                for (const KeyId &k : kid) ids[f.index_u64(k.key)] = k.id;
                blobs.emplace_back(TokenTable::serialized_size(f));
                serialize_token_table(n, f, ids.data(), blobs.back().data());
                arenas.pop_back();  // the serialized blob holds everything a lookup reads
                tables->t[n] = TokenTable::load(blobs.back().data(), blobs.back().size(), n, tables->dec, "T_n (in memory)");
                break;
            }
        }
    }
    // the encoder's guard words and filter (derived, in memory only)
    accel.resize(greedy_accel_words(*tables));
    attach_greedy_accel(*tables, accel.data());
}

GreedyTables::~GreedyTables() = default;

}  // namespace stk
