// Fuzz the byte-level split regexes written by hand (tokenizer/pretokenize.cc): the first byte
// picks the split, the rest is the text (any bytes, valid UTF-8 or not).  Checks: every pre-token
// ends past its start, inside the text, on a character boundary; a pre-token holding a \p{N}
// character holds only those, at most 3 (Llama 3, GPT-4o) or 1 (Qwen2, Qwen3.5, Tekken); then
// the byte-level encoder over a 256-byte vocabulary with that split decodes back to the text,
// the same with a warm word cache.  First byte % 12 >= 6: with BPE ignore_merges (Llama 3's
// tokenizer.json), where the token " the", which no merge builds, is found whole.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"

namespace {

using stk::tok::Split;

const Split kSplits[] = {Split::GPT2, Split::LLAMA3, Split::QWEN2, Split::QWEN35, Split::GPT4O, Split::TEKKEN};

// Every byte as a token, and two merges (" t" and "he") so words go through the merge loop;
// " the" is a token no merge reaches (only ignore_merges gives it).
stk::Vocab byte_vocab() {
    stk::Vocab v;
    v.model = stk::Vocab::Model::BPE_BYTE_LEVEL;
    v.pipeline.pre_tokenizer = stk::Vocab::PreTokenizer::BYTE_LEVEL;
    v.source = "fuzz byte vocabulary";
    for (int b = 0; b < 256; b++) v.pieces.push_back(std::string(1, char(b)));
    v.pieces.push_back(" t");
    v.pieces.push_back("he");
    v.pieces.push_back(" the");
    v.merges = {{' ', 't'}, {'h', 'e'}};
    v.merge_results = {256, 257};
    v.is_special.assign(v.pieces.size(), 0);
    v.piece_types.assign(v.pieces.size(), uint8_t(stk::Vocab::PieceType::NORMAL));
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const Split split = kSplits[data[0] % 6];
    const uint8_t *s = data + 1;
    const size_t n = size - 1;
    const int max_digits = split == Split::LLAMA3 || split == Split::GPT4O ? 3 : 1;
    for (size_t i = 0; i < n;) {
        const size_t e = stk::tok::pretoken_end(split, s, n, i);
        if (e <= i || e > n) __builtin_trap();
        int digits = 0, others = 0;
        size_t j = i;
        while (j < e) {
            uint32_t cp;
            j += size_t(stk::tok::utf8_next(s + j, s + n, &cp));
            if (cp != stk::tok::kInvalid && stk::tok::char_class(cp) == stk::tok::kNumber) digits++;
            else others++;
        }
        if (j != e) __builtin_trap();  // not on a character boundary
        if (split != Split::GPT2 && digits && (others || digits > max_digits)) __builtin_trap();
        i = e;
    }
    static const stk::Vocab base = byte_vocab();
    static stk::Vocab v[12];
    static bool ready = false;
    if (!ready) {
        for (int k = 0; k < 12; k++) {
            v[k] = base;
            v[k].pipeline.byte_level_split = kSplits[k % 6];
            v[k].ignore_merges = k >= 6;
        }
        ready = true;
    }
    try {
        const int k = data[0] % 12;
        stk::Tokenizer t(v[k]);
        const std::string text(reinterpret_cast<const char *>(s), n);
        std::vector<uint32_t> a, b;
        t.encode(text, a, false);
        t.encode(text, b, false);
        if (a != b || t.decode(a.data(), a.size()) != text) __builtin_trap();
        for (uint32_t id : a)
            if (id == 258 && k < 6) __builtin_trap();  // " the" only whole, with ignore_merges
    } catch (const stk::Error &) {
        __builtin_trap();  // every byte has a token: nothing to refuse
    }
    return 0;
}
