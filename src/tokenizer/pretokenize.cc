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

// ---- The other splits: one matcher for the Llama 3 / Qwen family, one for GPT-4o / Tekken ----

namespace {

// Character properties as bits (a character may have several: Lo is a letter, "upper" and "lower").
enum : uint8_t {
    kPL = 1,       // \p{L}
    kPN = 2,       // \p{N}
    kPS = 4,       // \s (White_Space)
    kPM = 8,       // \p{M}
    kPUp = 16,     // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    kPLow = 32,    // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    kPCrLf = 64,   // [\r\n]
    kPChar = 128,  // every character (so "none of these" is a mask test)
};

struct AsciiProps {
    uint8_t p[128];
    AsciiProps() {
        for (int c = 0; c < 128; c++) {
            uint8_t k = kPChar;
            if (c >= 'a' && c <= 'z') k |= kPL | kPLow;
            else if (c >= 'A' && c <= 'Z') k |= kPL | kPUp;
            else if (c >= '0' && c <= '9') k |= kPN;
            else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) k |= kPS;
            if (c == '\r' || c == '\n') k |= kPCrLf;
            p[c] = k;
        }
    }
};
const AsciiProps kAsciiProps;

uint8_t props_of(uint32_t cp) {
    if (cp < 128) return kAsciiProps.p[cp];
    if (cp > 0x10FFFF) return kPChar;
    if (is_white_space(cp)) return kPChar | kPS;
    switch (utf8proc_category(utf8proc_int32_t(cp))) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LT: return kPChar | kPL | kPUp;
        case UTF8PROC_CATEGORY_LL: return kPChar | kPL | kPLow;
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: return kPChar | kPL | kPUp | kPLow;
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ME: return kPChar | kPM | kPUp | kPLow;
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO: return kPChar | kPN;
        default: return kPChar;
    }
}

inline uint8_t props_at(const uint8_t *s, size_t n, size_t i, int *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return kAsciiProps.p[s[i]];
    }
    uint32_t cp;
    *len = utf8_next(s + i, s + n, &cp);
    return cp == kInvalid ? uint8_t(kPChar) : props_of(cp);
}

// The end of the run from i of characters that have some bit of `any` and none of `none`.
inline size_t run_props(const uint8_t *s, size_t n, size_t i, uint8_t any, uint8_t none) {
    while (i < n) {
        int len;
        uint8_t p = props_at(s, n, i, &len);
        if (!(p & any) || (p & none)) break;
        i += size_t(len);
    }
    return i;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its end, or i.  Under Unicode case folding only U+017F (long
// s, UTF-8 C5 BF) folds to one of these ASCII letters besides their capitals.
inline size_t contraction_end(const uint8_t *s, size_t n, size_t i) {
    if (i + 1 >= n || s[i] != '\'') return i;
    const uint8_t c = s[i + 1] | 0x20;  // ASCII lower case (only letters are compared)
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
    if (s[i + 1] == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return i + 3;
    if (i + 2 < n) {
        const uint8_t d = s[i + 2] | 0x20;
        if (((c == 'r' || c == 'v') && d == 'e') || (c == 'l' && d == 'l')) return i + 3;
    }
    return i;
}

// \p{N}{1,max}
inline size_t digits_end(const uint8_t *s, size_t n, size_t i, int max) {
    for (int k = 0; k < max && i < n; k++) {
        int len;
        if (!(props_at(s, n, i, &len) & kPN)) break;
        i += size_t(len);
    }
    return i;
}

// The tail every one of these regexes shares, from a whitespace character at i:
// \s*[\r\n]+ | \s+(?!\S) | \s+
size_t space_end(const uint8_t *s, size_t n, size_t i) {
    size_t j = i, last = i, after_nl = 0;  // after_nl: just past the run's last \r or \n
    while (j < n) {
        int len;
        uint8_t p = props_at(s, n, j, &len);
        if (!(p & kPS)) break;
        last = j;
        j += size_t(len);
        if (p & kPCrLf) after_nl = j;
    }
    if (after_nl) return after_nl;  // \s* backs off to the last newline, [\r\n]+ takes it
    if (j == n || last == i) return j;
    return last;  // \s+(?!\S): leave the last space to the next pre-token
}

// " ?[^\s<letters>\p{N}]+<tail>*" from i (s[i] is ' ' or such a character): its end, or i.
inline size_t other_end(const uint8_t *s, size_t n, size_t i, uint8_t word, uint8_t tail_slash) {
    const uint8_t none = kPS | kPN | word;
    size_t j = i;
    if (s[j] == ' ') j++;
    size_t e = run_props(s, n, j, kPChar, none);
    if (e == j) return i;
    while (e < n && (s[e] == '\r' || s[e] == '\n' || (tail_slash && s[e] == '/'))) e++;
    return e;
}

// LLAMA3, QWEN2, QWEN35: `word` is kPL (\p{L}) or kPL | kPM ([\p{L}\p{M}]).
size_t llama3_end(const uint8_t *s, size_t n, size_t i, int max_digits, uint8_t word) {
    size_t e = contraction_end(s, n, i);
    if (e != i) return e;
    int len;
    const uint8_t p = props_at(s, n, i, &len);
    // [^\r\n\p{L}\p{N}]?<word>+ : a word, or one such character and the word after it.  (A mark
    // taken as the optional character in QWEN35 ends where the word run from it would.)
    if (p & word) return run_props(s, n, i + size_t(len), word, 0);
    if (!(p & (kPCrLf | kPL | kPN)) && i + size_t(len) < n) {
        int l2;
        if (props_at(s, n, i + size_t(len), &l2) & word) return run_props(s, n, i + size_t(len) + size_t(l2), word, 0);
    }
    if (p & kPN) return digits_end(s, n, i, max_digits);
    e = other_end(s, n, i, word, 0);
    if (e != i) return e;
    return space_end(s, n, i);
}

// [<Up>]*[<Low>]+ from j: its end, or j.  The greedy [<Up>]* backs off until [<Low>]+ can start:
// at the first non-<Up> character if it is <Low>, else at the last <Up> that is also <Low>.
inline size_t cased_lower_end(const uint8_t *s, size_t n, size_t j) {
    size_t k = j, last_both = SIZE_MAX;
    while (k < n) {
        int len;
        uint8_t p = props_at(s, n, k, &len);
        if (!(p & kPUp)) break;
        if (p & kPLow) last_both = k;
        k += size_t(len);
    }
    if (k < n) {
        int len;
        if (props_at(s, n, k, &len) & kPLow) return run_props(s, n, k + size_t(len), kPLow, 0);
    }
    if (last_both == SIZE_MAX) return j;
    int len;
    props_at(s, n, last_both, &len);
    return last_both + size_t(len);  // the characters after it are <Up> only
}
// [<Up>]+[<Low>]* from j: its end, or j.
inline size_t cased_upper_end(const uint8_t *s, size_t n, size_t j) {
    size_t k = run_props(s, n, j, kPUp, 0);
    if (k == j) return j;
    return run_props(s, n, k, kPLow, 0);
}

// GPT4O (contractions, \p{N}{1,3}) and TEKKEN (neither).
size_t gpt4o_end(const uint8_t *s, size_t n, size_t i, bool contractions, int max_digits) {
    int len;
    const uint8_t p = props_at(s, n, i, &len);
    const bool prefix = !(p & (kPCrLf | kPL | kPN));  // [^\r\n\p{L}\p{N}] may start the word
    for (int alt = 0; alt < 2; alt++) {
        // Each alternative: first with the optional character taken, then without it.
        for (int with = prefix ? 1 : 0; with >= 0; with--) {
            const size_t j = with ? i + size_t(len) : i;
            if (j >= n) continue;
            size_t e = alt == 0 ? cased_lower_end(s, n, j) : cased_upper_end(s, n, j);
            if (e == j) continue;
            return contractions ? contraction_end(s, n, e) : e;
        }
    }
    if (p & kPN) return digits_end(s, n, i, max_digits);
    size_t e = other_end(s, n, i, kPL, 1);
    if (e != i) return e;
    return space_end(s, n, i);
}

}  // namespace

size_t pretoken_end(Split split, const uint8_t *s, size_t n, size_t i) {
    switch (split) {
        case Split::GPT2: return gpt2_pretoken_end(s, n, i);
        case Split::LLAMA3: return llama3_end(s, n, i, 3, kPL);
        case Split::QWEN2: return llama3_end(s, n, i, 1, kPL);
        case Split::QWEN35: return llama3_end(s, n, i, 1, kPL | kPM);
        case Split::GPT4O: return gpt4o_end(s, n, i, true, 3);
        case Split::TEKKEN: return gpt4o_end(s, n, i, false, 1);
    }
    return n;
}

namespace {

struct SplitInfo {
    Split split;
    const char *name;
    const char *regex;  // as tokenizer.json writes it
};
const SplitInfo kSplits[] = {
    {Split::GPT2, "gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
    {Split::LLAMA3, "llama3",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {Split::QWEN2, "qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {Split::QWEN35, "qwen35",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {Split::GPT4O, "gpt-4o",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {Split::TEKKEN, "tekken",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
};

}  // namespace

const char *split_name(Split s) {
    for (const SplitInfo &x : kSplits)
        if (x.split == s) return x.name;
    return "?";
}

bool split_for_regex(std::string_view pattern, Split *out) {
    for (const SplitInfo &x : kSplits)
        if (pattern == x.regex) {
            *out = x.split;
            return true;
        }
    return false;
}

bool split_for_gguf_pre(std::string_view pre, Split *out) {
    // transformers' GGUF_PRE_TOKENIZER_SPLITS (integrations/gguf/gguf_tokenizer_mapping.py), and
    // five names llama.cpp gives one of these regexes.
    static const struct {
        const char *pre;
        Split split;
    } kPre[] = {
        {"llama3", Split::LLAMA3},       {"llama-v3", Split::LLAMA3},
        {"llama-bpe", Split::LLAMA3},    {"falcon3", Split::LLAMA3},
        {"falcon-h1", Split::LLAMA3},    {"pixtral", Split::LLAMA3},
        {"midm-2.0", Split::LLAMA3},     {"lfm2", Split::LLAMA3},
        {"jina-v5-nano", Split::LLAMA3}, {"dbrx", Split::LLAMA3},
        {"smaug-bpe", Split::LLAMA3},    {"tekken", Split::TEKKEN},
        {"qwen2", Split::QWEN2},         {"deepseek-r1-qwen", Split::QWEN2},
        {"kormo", Split::QWEN2},         {"f2llmv2", Split::QWEN2},
        {"megrez", Split::QWEN2},        {"qwen35", Split::QWEN35},
        {"gpt-4o", Split::GPT4O},        {"llama4", Split::GPT4O},
        {"kanana2", Split::GPT4O},       {"talkie", Split::GPT4O},
        {"minimax-m2", Split::GPT4O},
        // Not in transformers' table (its loader keeps GPT-2's split for them), but llama.cpp
        // (llama-vocab.cpp) splits them with exactly Llama 3's regex (GLM-4) or Qwen2's
        // (StableLM 2, Hunyuan, Grok-2), as their own tokenizer.json files do.
        {"glm4", Split::LLAMA3},         {"chatglm-bpe", Split::LLAMA3},
        {"stablelm2", Split::QWEN2},     {"hunyuan", Split::QWEN2},
        {"grok-2", Split::QWEN2},
    };
    for (const auto &x : kPre)
        if (pre == x.pre) {
            *out = x.split;
            return true;
        }
    return false;
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
