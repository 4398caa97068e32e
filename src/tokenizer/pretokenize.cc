#include "tokenizer/pretokenize.h"

#include <utf8proc.h>

namespace stk::tok {

int utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = char(cp);
        return 1;
    }
    if (cp < 0x800) {
        out[0] = char(0xC0 | (cp >> 6));
        out[1] = char(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = char(0xE0 | (cp >> 12));
        out[1] = char(0x80 | ((cp >> 6) & 0x3F));
        out[2] = char(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = char(0xF0 | (cp >> 18));
    out[1] = char(0x80 | ((cp >> 12) & 0x3F));
    out[2] = char(0x80 | ((cp >> 6) & 0x3F));
    out[3] = char(0x80 | (cp & 0x3F));
    return 4;
}

namespace {

// ASCII classes, built once: the hot path never calls into utf8proc for English text.
struct AsciiTable {
    uint8_t cls[128];
    AsciiTable() {
        for (int c = 0; c < 128; c++) {
            CharClass k = kOther;
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) k = kLetter;
            else if (c >= '0' && c <= '9') k = kNumber;
            else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) k = kSpace;
            cls[c] = k;
        }
    }
};
const AsciiTable kAscii;

bool is_white_space(uint32_t cp) {
    // Unicode White_Space (PropList.txt), which is what \s means in Rust's regex, fancy-regex
    // (tiktoken) and Oniguruma (HF tokenizers).
    switch (cp) {
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000: return true;
        default: return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || (cp >= 0x2000 && cp <= 0x200A);
    }
}

}  // namespace

CharClass char_class(uint32_t cp) {
    if (cp < 128) return CharClass(kAscii.cls[cp]);
    if (cp > 0x10FFFF) return kOther;
    if (is_white_space(cp)) return kSpace;
    switch (utf8proc_category(utf8proc_int32_t(cp))) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: return kLetter;
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO: return kNumber;
        default: return kOther;
    }
}

static inline CharClass class_at(const uint8_t *s, size_t n, size_t i, int *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return CharClass(kAscii.cls[s[i]]);
    }
    uint32_t cp;
    *len = utf8_next(s + i, s + n, &cp);
    return char_class(cp);
}

static inline size_t run_of(const uint8_t *s, size_t n, size_t i, CharClass cls) {
    while (i < n) {
        if (s[i] < 0x80) {  // ASCII fast path
            if (kAscii.cls[s[i]] != cls) break;
            i++;
            continue;
        }
        int len;
        if (class_at(s, n, i, &len) != cls) break;
        i += size_t(len);
    }
    return i;
}

size_t gpt2_pretoken_end(const uint8_t *s, size_t n, size_t i) {
    // 's 't 're 've 'm 'll 'd (case-sensitive, tried first at this position)
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n) {
            uint8_t d = s[i + 2];
            if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l')) return i + 3;
        }
    }
    int len;
    // " ?X+" for X in letters, numbers, other: the optional space is U+0020 only.
    if (s[i] == ' ' && i + 1 < n) {
        CharClass next = class_at(s, n, i + 1, &len);
        if (next != kSpace) return run_of(s, n, i + 1 + size_t(len), next);
    }
    CharClass cls = class_at(s, n, i, &len);
    if (cls != kSpace) return run_of(s, n, i + size_t(len), cls);
    // \s+(?!\S) | \s+ : a whitespace run; if something non-space follows, leave its last
    // character to start the next pre-token (unless the run is that one character).
    size_t last = i, j = i;
    while (j < n) {
        int l;
        if (class_at(s, n, j, &l) != kSpace) break;
        last = j;
        j += size_t(l);
    }
    if (j == n || last == i) return j;
    return last;
}

uint32_t byte_to_unicode(uint8_t b) {
    // Printable Latin-1 stands for itself; the other 68 bytes map to U+0100.. in byte order.
    static const struct Map {
        uint32_t cp[256];
        Map() {
            uint32_t next = 256;
            for (int c = 0; c < 256; c++) {
                bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
                cp[c] = printable ? uint32_t(c) : next++;
            }
        }
    } map;
    return map.cp[b];
}

int unicode_to_byte(uint32_t cp) {
    static const struct Inv {
        int16_t b[324];
        Inv() {
            for (int16_t &x : b) x = -1;
            for (int c = 0; c < 256; c++) b[byte_to_unicode(uint8_t(c))] = int16_t(c);
        }
    } inv;
    return cp < 324 ? inv.b[cp] : -1;
}

}  // namespace stk::tok
