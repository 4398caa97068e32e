// The tokenizer a GGUF's metadata describes (tokenizer.ggml.*), built the way the reference,
// transformers' GGUF loader (integrations/gguf/gguf_tokenizer_mapping.py), builds it:
//   - model "gpt2": byte-level BPE (GPT2Tokenizer: the GPT-2 split, merges from the file); tokens
//     marked CONTROL (3) become special added tokens, USER_DEFINED (4) plain added tokens.
//     tokenizer.ggml.pre picks the split regex as the reference's GGUF_PRE_TOKENIZER_SPLITS does
//     (llama-bpe -> Llama 3's, qwen2 -> Qwen2's, gpt-4o, tekken, ...; tok::split_for_gguf_pre).
//   - model "llama": SentencePiece-style BPE with byte fallback; merges from the file, else derived
//     from the vocabulary as transformers' generate_merges does (by score; for Gemma by position,
//     after respelling tokens of spaces with U+2581).  Gemma: spaces -> U+2581, no prefix
//     (GemmaTokenizer); others: Metaspace with a prefix on the first word (LlamaTokenizer).
//   - add_bos_token / add_eos_token: the ids added around the text.
// Any other tokenizer.ggml.model is refused by name.
#include <algorithm>

#include "core/parallel.h"
#include "ingest/gguf.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab_internal.h"
#include "tokenizer/vocab_io.h"

namespace stk {

namespace {

size_t code_points(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

bool is_byte_piece(std::string_view t, int *byte) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>' || !hex(t[3]) || !hex(t[4])) return false;
    *byte = int(std::stoul(std::string(t.substr(3, 2)), nullptr, 16));
    return true;
}

// transformers' generate_merges(vocab, vocab_scores): every split of every token into two tokens,
// ranked by the result's score (higher first), then the longer left part, then the longer right
// part; splits of one token in (left id, right id) order before that (stable) sort.
void derive_merges(detail::VocabBuilder &b, const std::vector<std::string> &spell, const std::vector<double> &score,
                   unsigned threads) {
    struct M {
        double score;
        uint32_t llen, rlen, left, right, result;
    };
    // Every split's two parts of the token kAhead2 ahead have their slots loaded, and those of
    // the token kAhead1 ahead their entries: the lookups below mostly hit the cache (a
    // 262,144-token table does not fit in it).
    constexpr uint32_t kAhead1 = 2, kAhead2 = 6;
    auto ahead = [&](uint32_t id, bool item) {
        if (id >= spell.size() || spell[id].size() > 256) return;
        const std::string_view s = spell[id];
        detail::for_each_split(s, [&](size_t i) {
            if (item) {
                b.by_spelling.prefetch_item(s.substr(0, i));
                b.by_spelling.prefetch_item(s.substr(i));
            } else {
                b.by_spelling.prefetch_slot(s.substr(0, i));
                b.by_spelling.prefetch_slot(s.substr(i));
            }
        });
    };
    // The splits of contiguous id ranges, one per worker (read-only lookups), joined in id order.
    const uint32_t n_ids = uint32_t(spell.size());
    const unsigned n = unsigned(std::max<uint64_t>(1, std::min<uint64_t>(threads, n_ids / 4096 + 1)));
    std::vector<std::vector<M>> parts(n);
    run_workers(n, [&](unsigned w) {
        std::vector<M> &all = parts[w];
        for (uint32_t id = uint32_t(uint64_t(n_ids) * w / n), id1 = uint32_t(uint64_t(n_ids) * (w + 1) / n); id < id1; id++) {
            ahead(id + kAhead2, false);
            ahead(id + kAhead1, true);
            const std::string &s = spell[id];
            if (s.size() > 256) continue;  // no merge result is this long; keeps the pass linear in the file
            const size_t first = all.size();
            detail::for_each_split(s, [&](size_t i) {
                auto l = b.by_spelling.find(std::string_view(s).substr(0, i));
                if (l == b.by_spelling.end()) return;
                auto r = b.by_spelling.find(std::string_view(s).substr(i));
                if (r == b.by_spelling.end()) return;
                all.push_back(
                    {score[id], uint32_t(code_points(l->first)), uint32_t(code_points(r->first)), l->second, r->second, id});
            });
            std::sort(all.begin() + ptrdiff_t(first), all.end(),
                      [](const M &a, const M &c) { return a.left != c.left ? a.left < c.left : a.right < c.right; });
        }
    });
    std::vector<M> all = std::move(parts[0]);
    for (unsigned w = 1; w < n; w++) all.insert(all.end(), parts[w].begin(), parts[w].end());
    std::stable_sort(all.begin(), all.end(), [](const M &a, const M &c) {
        if (a.score != c.score) return a.score > c.score;
        if (a.llen != c.llen) return a.llen > c.llen;
        return a.rlen > c.rlen;
    });
    for (const M &m : all) {
        b.v.merges.emplace_back(m.left, m.right);
        b.v.merge_results.push_back(m.result);
    }
}

}  // namespace

Vocab parse_gguf_vocab(const GgufFile &f, const std::string &name, VocabRead what, unsigned threads) {
    const bool merges_too = what == VocabRead::WHOLE;
    const GgufValue *model = f.find("tokenizer.ggml.model");
    const GgufValue *tokens_v = f.find("tokenizer.ggml.tokens");
    if (!model || !tokens_v)
        throw_error(STK_E_NOT_FOUND, "%s: no tokenizer in the GGUF metadata (tokenizer.ggml.model / tokenizer.ggml.tokens)",
                    name.c_str());
    const std::string kind(model->str());
    if (kind != "gpt2" && kind != "llama")
        throw_error(STK_E_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' is not supported (gpt2 and llama are)", name.c_str(),
                    detail::printable(kind).c_str());
    const std::vector<std::string_view> tokens = tokens_v->strings();
    const size_t n = tokens.size();
    if (n == 0 || n >= kMaxVocabSize)
        throw_error(STK_E_CORRUPT, "%s: tokenizer.ggml.tokens holds %zu tokens (1..%u)", name.c_str(), n, kMaxVocabSize - 1);
    std::vector<int64_t> types(n, 1);
    if (const GgufValue *t = f.find("tokenizer.ggml.token_type")) {
        types = t->ints();
        if (types.size() != n)
            throw_error(STK_E_CORRUPT, "%s: tokenizer.ggml.token_type has %zu entries for %zu tokens", name.c_str(), types.size(),
                        n);
    }
    std::vector<float> scores;
    if (const GgufValue *s = f.find("tokenizer.ggml.scores")) {
        scores = s->floats();
        if (scores.size() != n)
            throw_error(STK_E_CORRUPT, "%s: tokenizer.ggml.scores has %zu entries for %zu tokens", name.c_str(), scores.size(),
                        n);
    }
    auto id_key = [&](const char *key) -> int32_t {
        const GgufValue *v = f.find(key);
        if (!v) return -1;
        uint64_t id = v->as_uint();
        if (id >= n)
            throw_error(STK_E_CORRUPT, "%s: %s = %llu is outside the %zu tokens", name.c_str(), key, (unsigned long long)id, n);
        return int32_t(id);
    };
    auto flag = [&](const char *key, bool def) {
        const GgufValue *v = f.find(key);
        return v ? v->boolean() : def;
    };
    const GgufValue *arch_v = f.find("general.architecture");
    const std::string arch = arch_v ? std::string(arch_v->str()) : "";

    detail::VocabBuilder b;
    Vocab &v = b.v;
    v.source = name;
    b.by_spelling.reserve(n);
    b.entries.reserve(n);
    v.is_special.assign(n, 0);
    v.piece_types.assign(n, uint8_t(Vocab::PieceType::NORMAL));
    std::vector<std::string> spell;  // llama: the spellings derive_merges splits

    if (kind == "gpt2") {
        v.model = Vocab::Model::BPE_BYTE_LEVEL;
        v.pipeline.pre_tokenizer = Vocab::PreTokenizer::BYTE_LEVEL;
        std::string bytes;
        for (uint32_t id = 0; id < n; id++) {
            std::string_view t = tokens[id];
            const int64_t type = types[id];
            if (type == 3 || type == 4) {
                // Added tokens are matched in the raw text as written (the reference skips a
                // CONTROL token spelled outside the byte alphabet; it stays an ordinary entry).
                bool spelled = detail::byte_level_to_bytes(t, &bytes);
                if (type == 4 || spelled) v.added_tokens.push_back({std::string(t), id, type == 3});
                b.add_indexed(t, std::string(t), id, "tokenizer.ggml.tokens[");
                v.piece_types[id] = uint8_t(type);
                continue;
            }
            if (!detail::byte_level_to_bytes(t, &bytes)) bytes.assign(t);  // raw text: its UTF-8 bytes
            b.add_indexed(t, bytes, id, "tokenizer.ggml.tokens[");
        }
        const GgufValue *merges = f.find("tokenizer.ggml.merges");
        if (!merges) throw_error(STK_E_CORRUPT, "%s: a gpt2 tokenizer without tokenizer.ggml.merges", name.c_str());
        const std::vector<std::string_view> ms = merges_too ? merges->strings() : std::vector<std::string_view>();
        for (size_t i = 0; i < ms.size(); i++) {
            size_t sp = ms[i].find(' ');
            if (sp == std::string_view::npos || ms[i].find(' ', sp + 1) != std::string_view::npos)
                throw_error(STK_E_CORRUPT, "%s: tokenizer.ggml.merges[%zu]: '%s' is not two tokens separated by one space",
                            name.c_str(), i, detail::printable(ms[i]).c_str());
            b.add_merge(ms[i].substr(0, sp), ms[i].substr(sp + 1), "tokenizer.ggml.merges[", i);
        }
        // The regex text is split with before the merges: transformers' GGUF loader maps
        // tokenizer.ggml.pre to it (a name it does not list, like "default", keeps GPT-2's).
        if (const GgufValue *pre = f.find("tokenizer.ggml.pre"))
            tok::split_for_gguf_pre(pre->str(), &v.pipeline.byte_level_split);
    } else {
        // SentencePiece-style BPE (LlamaTokenizer / GemmaTokenizer of transformers).
        const bool gemma = arch == "gemma" || arch == "gemma2" || arch == "gemma3";
        v.model = Vocab::Model::BPE_SENTENCEPIECE;
        v.byte_fallback = true;
        spell.resize(n);
        for (uint32_t id = 0; id < n; id++) {
            std::string t(tokens[id]);
            // Gemma stores a token of spaces as spaces; GemmaTokenizer looks it up as U+2581s.
            if (gemma && t.find(' ') != std::string::npos && t.find_first_not_of(" \t\n\r\f\v") == std::string::npos) {
                std::string r;
                for (size_t k = 0; k < code_points(t); k++) r += "\xE2\x96\x81";
                t = r;
            }
            spell[id] = t;
            std::string piece = t;
            int byte;
            if (types[id] == 6 && is_byte_piece(t, &byte)) {
                piece.assign(1, char(byte));
                v.byte_piece_ids[byte] = int32_t(id);
            }
            if (types[id] >= 1 && types[id] <= 6) v.piece_types[id] = uint8_t(types[id]);
            b.add_indexed(t, std::move(piece), id, "tokenizer.ggml.tokens[");
        }
        for (uint32_t id = 0; id < n; id++) {
            if (types[id] == 3) v.added_tokens.push_back({std::string(tokens[id]), id, true});
            // USER_DEFINED tokens are added when the vocabulary holds them as the file spells them.
            if (types[id] == 4 && b.by_spelling.find(tokens[id]) != b.by_spelling.end())
                v.added_tokens.push_back({std::string(tokens[id]), id, false});
        }
        if (!merges_too) {
            // Pieces alone: neither the file's merges nor derived ones.
        } else if (const GgufValue *merges = f.find("tokenizer.ggml.merges")) {
            const std::vector<std::string_view> ms = merges->strings();
            for (size_t i = 0; i < ms.size(); i++) {
                size_t sp = ms[i].find(' ');
                if (sp == std::string_view::npos)
                    throw_error(STK_E_CORRUPT, "%s: tokenizer.ggml.merges[%zu]: '%s' is not two tokens", name.c_str(), i,
                                detail::printable(ms[i]).c_str());
                b.add_merge(ms[i].substr(0, sp), ms[i].substr(sp + 1), "tokenizer.ggml.merges[", i);
            }
        } else {
            std::vector<double> key(n);
            if (!gemma && scores.empty())
                throw_error(STK_E_CORRUPT, "%s: a llama tokenizer with neither merges nor scores", name.c_str());
            for (uint32_t id = 0; id < n; id++) key[id] = gemma ? -double(id) : double(scores[id]);
            derive_merges(b, spell, key, threads);
        }
        v.unk_id = id_key("tokenizer.ggml.unknown_token_id");
        using Op = Vocab::NormalizerOp;
        if (gemma) {
            v.pipeline.normalizers.push_back({Op::REPLACE, " ", "\xE2\x96\x81"});
        } else {
            v.pipeline.pre_tokenizer = Vocab::PreTokenizer::METASPACE;
            v.pipeline.metaspace_prepend = 2;  // LlamaTokenizer (legacy=False): "first"
            v.pipeline.metaspace_split = false;
            v.pipeline.strip_leading_space_on_decode = true;
        }
    }
    v.bos_id = id_key("tokenizer.ggml.bos_token_id");
    v.eos_id = id_key("tokenizer.ggml.eos_token_id");
    if (kind == "gpt2" && v.unk_id < 0) v.unk_id = -1;
    if (flag("tokenizer.ggml.add_bos_token", kind == "llama") && v.bos_id >= 0)
        v.pipeline.prefix_ids.push_back(uint32_t(v.bos_id));
    if (flag("tokenizer.ggml.add_eos_token", false) && v.eos_id >= 0) v.pipeline.suffix_ids.push_back(uint32_t(v.eos_id));
    return b.finish();
}

Vocab load_gguf_vocab(const std::string &path, VocabRead what, unsigned threads) {
    GgufFile f(path);
    return parse_gguf_vocab(f, path, what, threads);
}

}  // namespace stk
