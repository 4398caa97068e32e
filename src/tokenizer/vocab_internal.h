// Shared by the vocab readers (not part of the tokenizer's interface).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "hash/hash64.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab.h"

namespace stk::detail {

// GPT-2 byte-level spelling (each code point stands for one byte) -> raw bytes; false if some
// code point stands for no byte.
bool byte_level_to_bytes(std::string_view s, std::string *out);

// fn(i) for every character boundary 0 < i < s.size() of UTF-8 text s: the splits of a piece
// into two (the readers that derive merges try each).
template <class Fn>
void for_each_split(std::string_view s, Fn &&fn) {
    const uint8_t *p = reinterpret_cast<const uint8_t *>(s.data()), *end = p + s.size();
    for (size_t i = 0; i < s.size();) {
        uint32_t cp;
        i += size_t(tok::utf8_next(p + i, end, &cp));
        if (i < s.size()) fn(i);
    }
}

// A token for an error message: at most 64 bytes, control bytes escaped.
std::string printable(std::string_view s);

// Spelling -> id, looked up by string_view: an open-addressing table over one vector of entries
// (std::unordered_map's node per token and std::string per lookup made loading GPT-2's
// tokenizer.json take 80 ms, most of `stk tokenize`'s fixed cost).  The iterator-like interface
// (find() == end(), it->second) is what the readers use.
class SpellingMap {
public:
    using Item = std::pair<std::string, uint32_t>;
    const Item *end() const { return nullptr; }
    const Item *find(std::string_view s) const {
        if (slots_.empty()) return nullptr;
        const uint64_t h = hash_of(s);
        const uint32_t tag = tag_of(h);
        for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
            const Slot sl = slots_[i];
            if (sl.at == 0) return nullptr;
            if (sl.tag == tag && items_[sl.at - 1].first == s) return &items_[sl.at - 1];
        }
    }
    // Loads ahead of a find(s): the slot where its probe starts (prefetch_slot), then, a few
    // lookups later, the entry whose tag matches there (prefetch_item).  A hint: nothing changes.
    void prefetch_slot(std::string_view s) const {
        if (!slots_.empty()) __builtin_prefetch(&slots_[size_t(hash_of(s)) & mask_]);
    }
    void prefetch_item(std::string_view s) const {
        if (slots_.empty()) return;
        const uint64_t h = hash_of(s);
        const size_t i = size_t(h) & mask_;
        if (slots_[i].at != 0 && slots_[i].tag == tag_of(h)) __builtin_prefetch(&items_[slots_[i].at - 1]);
    }
    // (the entry, true) if s was new; (the existing entry, false) otherwise.
    std::pair<const Item *, bool> emplace(std::string s, uint32_t id) {
        if (const Item *it = find(s)) return {it, false};
        if (2 * (items_.size() + 1) > slots_.size()) rehash(std::max<size_t>(64, 2 * slots_.size()));
        items_.emplace_back(std::move(s), id);
        place(items_.size() - 1);
        return {&items_.back(), true};
    }
    void reserve(size_t n) {
        items_.reserve(n);
        size_t want = 64;
        while (want < 2 * n) want *= 2;
        if (want > slots_.size()) rehash(want);
    }
    size_t size() const { return items_.size(); }

private:
    static uint64_t hash_of(std::string_view s) { return hash::hash_bytes(s.data(), s.size(), 0); }
    // The hash's high half beside each slot: a probe compares the strings (another cache line,
    // often a miss) only when the tags agree.
    static uint32_t tag_of(uint64_t h) { return uint32_t(h >> 32); }
    void place(size_t item) {
        const uint64_t h = hash_of(items_[item].first);
        size_t i = size_t(h) & mask_;
        while (slots_[i].at != 0) i = (i + 1) & mask_;
        slots_[i] = Slot{uint32_t(item + 1), tag_of(h)};
    }
    void rehash(size_t n_slots) {
        slots_.assign(n_slots, Slot{});
        mask_ = n_slots - 1;
        for (size_t k = 0; k < items_.size(); k++) place(k);
    }
    std::vector<Item> items_;
    // A slot: item index + 1 (0 = empty) and the high half of that item's hash, side by side (a
    // probe reads one cache line; derive_merges' 3 million lookups of a 262,144-token GGUF missed twice).
    struct Slot {
        uint32_t at = 0, tag = 0;
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

// Collects (spelling, piece, id) entries and merges; finish() checks ids are 0..n-1.
struct VocabBuilder {
    Vocab v;
    SpellingMap by_spelling;  // the file's own spelling -> id
    struct Entry {
        uint32_t id;
        std::string piece;
        std::string where;
        std::string_view where_prefix = {};  // set: the place is where_prefix + id + "]"
        std::string place() const { return where_prefix.empty() ? where : std::string(where_prefix) + std::to_string(id) + "]"; }
    };
    std::vector<Entry> entries;

    void add(std::string_view spelling, std::string piece, uint64_t id, const std::string &where);
    // The same where the place is where_prefix + id + "]" (a literal, e.g. "tokenizer.ggml.tokens["),
    // formatted only for an error: a GGUF's 262,144 tokens each formatted theirs.
    void add_indexed(std::string_view spelling, std::string piece, uint64_t id, std::string_view where_prefix);
    uint32_t id_of(std::string_view spelling, const std::string &where) const;
    // where_prefix + index names the merge in an error (formatted only then: 50k merges).
    void add_merge(std::string_view left, std::string_view right, std::string_view where_prefix, size_t index);
    Vocab finish();
};

}  // namespace stk::detail
