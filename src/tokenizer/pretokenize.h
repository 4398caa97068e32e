// Pre-tokenizers and the Unicode facts they need: UTF-8 decoding, the character classes of the
// splits (letter / number / whitespace / mark / other), the split regexes of byte-level BPE
// written by hand (they have a lookahead, which RE2 lacks), and GPT-2's byte <-> unicode map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stk::tok {

// One UTF-8 character at p (p < end): its length 1..4 and code point.  A byte that does not start
// a well-formed sequence (overlong, surrogate, > U+10FFFF, truncated) is one character of length
// 1 with code point 0xFFFD-like sentinel kInvalid.
constexpr uint32_t kInvalid = 0xFFFFFFFFu;
inline int utf8_next(const uint8_t *p, const uint8_t *end, uint32_t *cp) {
    uint8_t b = p[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t left = size_t(end - p);
    if (b >= 0xC2 && b <= 0xDF && left >= 2 && (p[1] & 0xC0) == 0x80) {
        *cp = (uint32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (b >= 0xE0 && b <= 0xEF && left >= 3 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80) {
        uint32_t c = (uint32_t(b & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) {
            *cp = c;
            return 3;
        }
    }
    if (b >= 0xF0 && b <= 0xF4 && left >= 4 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) {
        uint32_t c = (uint32_t(b & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        if (c >= 0x10000 && c <= 0x10FFFF) {
            *cp = c;
            return 4;
        }
    }
    *cp = kInvalid;
    return 1;
}

// Appends the UTF-8 encoding of cp (<= 0x10FFFF) to out; returns the byte count.
int utf8_encode(uint32_t cp, char out[4]);

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };
// \p{L} (Lu Ll Lt Lm Lo), \p{N} (Nd Nl No), \s (Unicode White_Space), else other.  Tables from
// utf8proc (Unicode 15).  Invalid code points are kOther.
CharClass char_class(uint32_t cp);

// The GPT-2 / tiktoken r50k pre-tokenizer:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Returns the end of the pre-token that starts at s[i] (i < n); always > i.
size_t gpt2_pretoken_end(const uint8_t *s, size_t n, size_t i);

// The regexes byte-level BPE vocabularies split text with before their merges, by the name of the
// model family that introduced each.  Each is matched exactly as HF tokenizers' Split (Oniguruma)
// matches it: leftmost alternative first, backtracking, \s = Unicode White_Space, \p{..} =
// general categories (utf8proc), (?i:...) with Unicode case folding (so 'S and U+017F match 's).
enum class Split : uint8_t {
    GPT2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    LLAMA3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
             //   |\s*[\r\n]+|\s+(?!\S)|\s+
    QWEN2,   // LLAMA3 with \p{N} (one digit per pre-token)
    QWEN35,  // QWEN2 with \p{M} counted with the letters: [\p{L}\p{M}]+ and [^\s\p{L}\p{M}\p{N}]+
    GPT4O,   // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|..|'d)?
             //   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|..|'d)?
             //   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
    TEKKEN,  // GPT4O without the contractions and with \p{N} (one digit per pre-token)
};
// "gpt2", "llama3", ...: for messages and `stk inspect`.
const char *split_name(Split s);
// The split a GGUF tokenizer.ggml.pre names, as transformers' GGUF loader maps it
// (GGUF_PRE_TOKENIZER_SPLITS; a name it does not list keeps GPT-2's split).  false: not listed.
bool split_for_gguf_pre(std::string_view pre, Split *out);
// The split a tokenizer.json Split pre-tokenizer's Regex pattern is (the exact pattern text).
bool split_for_regex(std::string_view pattern, Split *out);

// The end of the pre-token that starts at s[i] (i < n) under `split`; always > i.  Bytes that are
// not well-formed UTF-8 are single characters of no class (never produced from a Rust/Python str).
size_t pretoken_end(Split split, const uint8_t *s, size_t n, size_t i);

// GPT-2's bytes_to_unicode(): the code point that stands for byte b in vocab.json / merges.txt.
uint32_t byte_to_unicode(uint8_t b);
// The inverse: the byte a code point stands for, or -1 if it stands for none.
int unicode_to_byte(uint32_t cp);

}  // namespace stk::tok
