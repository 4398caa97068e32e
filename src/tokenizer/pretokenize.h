// Pre-tokenizers and the Unicode facts they need: UTF-8 decoding, the character classes of the
// GPT-2 split (letter / number / whitespace / other), the GPT-2 split itself written by hand (the
// regex has a lookahead, which RE2 lacks), and GPT-2's byte <-> unicode map.
#pragma once

#include <cstddef>
#include <cstdint>

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

// GPT-2's bytes_to_unicode(): the code point that stands for byte b in vocab.json / merges.txt.
uint32_t byte_to_unicode(uint8_t b);
// The inverse: the byte a code point stands for, or -1 if it stands for none.
int unicode_to_byte(uint32_t cp);

}  // namespace stk::tok
