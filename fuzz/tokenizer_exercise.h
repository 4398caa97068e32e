// Shared by the tokenizer fuzz targets: what every accepted vocabulary must satisfy, and the
// encoder run over a few fixed texts (ids in range, deterministic with and without the word
// cache, and decode(encode(text)) == text where the vocabulary makes that exact).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab.h"

namespace stk::fuzz {

inline void exercise_vocab(const Vocab &v) {
    const uint32_t n = v.size();
    if (n == 0 || v.merges.size() != v.merge_results.size()) __builtin_trap();
    for (size_t i = 0; i < v.merges.size(); i++)
        if (v.merges[i].first >= n || v.merges[i].second >= n || v.merge_results[i] >= n) __builtin_trap();
    for (int b = 0; b < 256; b++)
        if (v.byte_piece_ids[b] >= int32_t(n)) __builtin_trap();
    if (v.unk_id >= int32_t(n) || v.bos_id >= int32_t(n) || v.eos_id >= int32_t(n)) __builtin_trap();
    for (uint32_t id : v.pipeline.prefix_ids)
        if (id >= n) __builtin_trap();
    for (uint32_t id : v.pipeline.suffix_ids)
        if (id >= n) __builtin_trap();
    for (const auto &t : v.added_tokens)
        if (t.id >= n) __builtin_trap();

    if (v.model == Vocab::Model::UNIGRAM || !v.pipeline.unsupported.empty()) return;
    static const char *const kTexts[] = {
        "Hello world, I'm here.\n\n  x\t's 123 4567",
        "ab a abc aab",
        "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x99 \xE2\x80\x94 <s> </s> <|endoftext|>",
        "",
    };
    try {
        Tokenizer t(v);
        bool all_bytes =
            v.model == Vocab::Model::BPE_BYTE_LEVEL && v.pipeline.normalizers.empty() && !v.pipeline.byte_level_add_prefix_space;
        if (all_bytes) {
            bool have[256] = {};
            for (uint32_t id = 0; id < n; id++)
                if (v.pieces[id].size() == 1 && !(id < v.is_special.size() && v.is_special[id]))
                    have[uint8_t(v.pieces[id][0])] = true;
            for (bool h : have) all_bytes = all_bytes && h;
        }
        for (const char *text : kTexts) {
            std::vector<uint32_t> a, b;
            t.encode(text, a, true);
            t.encode(text, b, true);  // second time through the word cache
            if (a != b) __builtin_trap();
            for (uint32_t id : a)
                if (id >= n) __builtin_trap();
            std::string back = t.decode(a.data(), a.size());
            if (all_bytes) {
                std::vector<uint32_t> plain;
                t.encode(text, plain, false);
                if (t.decode(plain.data(), plain.size()) != text) __builtin_trap();
            }
        }
    } catch (const Error &) {
        // refused: a byte without a token and no <unk>, a corrupt merge table, ...
    }
}

}  // namespace stk::fuzz
