// The C entry points of the tokenizers (a model's own encoder, tokenizer/bpe.h; the greedy
// tables built in memory, tokenizer/vocab_greedy.h) and of replay (runtime/replay.h): what
// `stk tokenize` and `stk replay` print.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/abi.h"
#include "core/checked.h"
#include "core/error.h"
#include "runtime/generation.h"
#include "runtime/replay.h"
#include "tokenizer/bpe.h"
#include "tokenizer/fst_tables.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_greedy.h"
#include "tokenizer/vocab_io.h"
#include "stk/stk.h"

#include <sys/mman.h>

using namespace stk;

namespace {

// An uninitialised buffer of ids in 2 MiB-aligned memory marked for transparent huge pages
// (where the kernel has them on madvise): the greedy encoder's writes fault in a 2 MiB page at a
// time instead of 4 KiB (a 24 MB greedy run: 15.2 K page faults -> 6.3 K).
struct FreeDeleter {
    void operator()(uint32_t *p) const { std::free(p); }
};
using HugeBuffer = std::unique_ptr<uint32_t[], FreeDeleter>;
HugeBuffer huge_page_buffer(size_t n) {
    constexpr size_t kHuge = size_t(2) << 20;
    const uint64_t bytes = checked_add(checked_mul(n, sizeof(uint32_t), "ids"), kHuge - 1, "ids") / kHuge * kHuge;
    void *p = std::aligned_alloc(kHuge, bytes);
    if (!p) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: ignored where not supported
    return HugeBuffer(static_cast<uint32_t *>(p));
}

}  // namespace

struct stk_tokenizer {
    Vocab vocab;
    uint32_t kind = STK_TOKENIZE_BPE;
    uint32_t l_tok = 0;
    size_t longest = 0;
    std::unique_ptr<Tokenizer> bpe;
    std::unique_ptr<GreedyTables> greedy;
    std::vector<uint32_t> bpe_ids;
    HugeBuffer greedy_ids;  // uninitialised: only the pages the encoder writes are touched
    std::string decoded;
};

struct stk_replay {
    std::string mode, digest;
    std::vector<ReplayModuleStatus> modules;
    std::vector<ReplayToken> rows;
    std::vector<std::string> lines;
    uint32_t mismatches = 0;
};

extern "C" {

// ---- tokenizers

STK_API stk_status stk_tokenizer_open(const stk_tokenizer_params *params, stk_tokenizer **out_tok) {
    return guard([&] {
        if (!params || !out_tok) throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_open: NULL argument");
        *out_tok = nullptr;
        const stk_tokenizer_params p = abi_read(params);
        if (!p.path) throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_open: NULL path");
        const uint32_t kind = p.kind ? p.kind : uint32_t(STK_TOKENIZE_BPE);
        if (kind != STK_TOKENIZE_BPE && kind != STK_TOKENIZE_GREEDY)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_open: kind %u is not an stk_tokenize_kind", kind);
        const uint32_t l_tok = p.l_tok ? p.l_tok : 8;
        if (l_tok > 64) throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_open: l_tok %u is more than 64", l_tok);
        auto t = std::make_unique<stk_tokenizer>();
        t->vocab = load_vocab_dir(p.path);
        t->kind = kind;
        for (const std::string &s : t->vocab.pieces) t->longest = s.size() > t->longest ? s.size() : t->longest;
        if (kind == STK_TOKENIZE_BPE) {
            t->bpe = std::make_unique<Tokenizer>(t->vocab);
        } else {
            t->l_tok = l_tok;
            t->greedy = std::make_unique<GreedyTables>(t->vocab, l_tok);
        }
        *out_tok = t.release();
    });
}

STK_API void stk_tokenizer_close(stk_tokenizer *tok) { delete tok; }

STK_API stk_status stk_tokenizer_get_info(const stk_tokenizer *tok, stk_tokenizer_info *out) {
    return guard([&] {
        if (!tok || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_get_info: NULL argument");
        abi_check_out(out);
        stk_tokenizer_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.source = tok->vocab.source.c_str();
        v.kind = tok->kind;
        v.vocab_size = uint32_t(tok->vocab.pieces.size());
        v.longest_piece = uint32_t(tok->longest);
        v.l_tok = tok->l_tok;
        abi_write(out, v);
    });
}

STK_API stk_status stk_tokenizer_encode(stk_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                                        const uint32_t **out_ids, size_t *out_count) {
    return guard([&] {
        if (!tok || (!text && len) || !out_ids || !out_count)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_encode: NULL argument");
        if (flags & ~STK_TOKENIZE_ADD_SPECIAL)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_encode: unknown flags 0x%x", flags);
        *out_ids = nullptr;
        *out_count = 0;
        const std::string_view s(text ? text : "", len);
        if (tok->bpe) {
            tok->bpe_ids.clear();
            // about one id per byte at most: reserved, not touched, so the vector never regrows
            // (each regrowth copied the ids and faulted in fresh pages)
            tok->bpe_ids.reserve(len + 64);
            tok->bpe->encode(s, tok->bpe_ids, (flags & STK_TOKENIZE_ADD_SPECIAL) != 0);
            *out_ids = tok->bpe_ids.data();
            *out_count = tok->bpe_ids.size();
        } else {
            tok->greedy_ids = huge_page_buffer(len + 1);  // at most one id per byte
            *out_count =
                greedy_encode(*tok->greedy->tables, reinterpret_cast<const uint8_t *>(s.data()), len, tok->greedy_ids.get());
            *out_ids = tok->greedy_ids.get();
        }
    });
}

STK_API stk_status stk_tokenizer_decode(stk_tokenizer *tok, const uint32_t *ids, size_t count, const char **out_text,
                                        size_t *out_len) {
    return guard([&] {
        if (!tok || (!ids && count) || !out_text || !out_len)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_decode: NULL argument");
        *out_text = nullptr;
        *out_len = 0;
        if (tok->bpe) {
            tok->decoded = tok->bpe->decode(ids, count);
        } else {
            tok->decoded.resize(size_t(checked_mul(count, tok->longest, "decoded bytes")));
            tok->decoded.resize(fst_decode(*tok->greedy->tables, ids, count, reinterpret_cast<uint8_t *>(tok->decoded.data()),
                                           tok->decoded.size()));
        }
        *out_text = tok->decoded.data();
        *out_len = tok->decoded.size();
    });
}

STK_API stk_status stk_tokenizer_piece(const stk_tokenizer *tok, uint32_t id, const char **out_bytes, size_t *out_len) {
    return guard([&] {
        if (!tok || !out_bytes || !out_len) throw_error(STK_E_INVALID_ARGUMENT, "stk_tokenizer_piece: NULL argument");
        if (id >= tok->vocab.pieces.size())
            throw_error(STK_E_INVALID_ARGUMENT, "%s: id %u is outside the vocabulary (%zu ids)", tok->vocab.source.c_str(), id,
                        tok->vocab.pieces.size());
        *out_bytes = tok->vocab.pieces[id].data();
        *out_len = tok->vocab.pieces[id].size();
    });
}

// ---- replay

STK_API stk_status stk_replay_run(const stk_generation *gen, const stk_replay_params *params, stk_replay **out_replay) {
    return guard([&] {
        if (!gen || !params || !out_replay) throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_run: NULL argument");
        *out_replay = nullptr;
        const stk_replay_params p = abi_read(params);
        if (!p.prompt && p.prompt_len) throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_run: NULL prompt");
        auto r = std::make_unique<stk_replay>();
        std::vector<std::string> texts;  // EXT mode: each token's text from the model's vocabulary
        const std::string prompt(p.prompt ? p.prompt : "", p.prompt_len);
        const std::vector<uint32_t> ids = replay_token_ids(*gen, prompt, p.model_dir ? p.model_dir : "", false, &r->mode, &texts);
        Replayer rp(*gen);
        for (uint32_t id : ids) {
            r->rows.push_back(rp.step(id));
            r->lines.push_back(rp.line(r->rows.size() - 1, r->rows.back()));
            // The generation has no token tables in EXT mode: the text comes from the tokenizer
            // (after line(): the diagnostic line and the digest are the generation's alone).
            if (r->rows.size() <= texts.size()) r->rows.back().bytes = texts[r->rows.size() - 1];
            if (r->mode == "greedy" && !r->rows.back().round_trip) r->mismatches++;
        }
        r->digest = rp.finish_digest();
        r->modules = rp.modules();
        *out_replay = r.release();
    });
}

STK_API void stk_replay_close(stk_replay *replay) { delete replay; }

STK_API stk_status stk_replay_get_info(const stk_replay *replay, stk_replay_info *out) {
    return guard([&] {
        if (!replay || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_get_info: NULL argument");
        abi_check_out(out);
        stk_replay_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.mode = replay->mode.c_str();
        v.n_tokens = replay->rows.size();
        v.n_modules = uint32_t(replay->modules.size());
        v.lookup_mismatches = replay->mismatches;
        v.state_digest = replay->digest.c_str();
        abi_write(out, v);
    });
}

STK_API stk_status stk_replay_module_at(const stk_replay *replay, uint32_t index, stk_replay_module *out) {
    return guard([&] {
        if (!replay || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_module_at: NULL argument");
        abi_check_out(out);
        if (index >= replay->modules.size())
            throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_module_at: module index %u, the replay has %zu", index,
                        replay->modules.size());
        const ReplayModuleStatus &m = replay->modules[index];
        stk_replay_module v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.name = m.name;
        v.enabled = m.enabled ? 1 : 0;
        v.detail = m.detail.c_str();
        abi_write(out, v);
    });
}

STK_API stk_status stk_replay_token_at(const stk_replay *replay, uint64_t index, stk_replay_token *out) {
    return guard([&] {
        if (!replay || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_token_at: NULL argument");
        abi_check_out(out);
        if (index >= replay->rows.size())
            throw_error(STK_E_INVALID_ARGUMENT, "stk_replay_token_at: token index %llu, the replay has %zu",
                        (unsigned long long)index, replay->rows.size());
        const ReplayToken &r = replay->rows[index];
        stk_replay_token v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.id = r.id;
        v.round_trip = r.round_trip ? 1 : 0;
        v.bytes = r.bytes.data();
        v.bytes_len = r.bytes.size();
        v.line = replay->lines[index].c_str();
        v.lin_unit = r.lin_unit;
        v.lin_input = r.lin_input;
        v.lin_sign = r.lin_sign;
        v.lin_base = r.lin_base;
        v.lin_delta = r.lin_delta;
        v.lin_zero = r.lin_zero;
        v.lin_probes = r.lin_probes;
        v.prf_floored = r.prf_floored;
        v.lin_norm = r.lin_norm;
        v.prf_den0 = r.prf_den0;
        v.prf_feature_sum = r.prf_feat_sum;
        v.overlays_delta_norm = r.ov_norm;
        v.mem_u = r.mem_u;
        v.mem_y = double(r.mem_y);
        v.hub_context = r.hub_context;
        v.hub_bits = r.hub_bits;
        v.hub_outside = r.hub_outside ? 1 : 0;
        abi_write(out, v);
    });
}

}  // extern "C"
