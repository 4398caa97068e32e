// Shared by the vocab readers (not part of the tokenizer's interface).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "tokenizer/vocab.h"

namespace stk::detail {

// GPT-2 byte-level spelling (each code point stands for one byte) -> raw bytes; false if some
// code point stands for no byte.
bool byte_level_to_bytes(std::string_view s, std::string *out);

// A token for an error message: at most 64 bytes, control bytes escaped.
std::string printable(std::string_view s);

// Collects (spelling, piece, id) entries and merges; finish() checks ids are 0..n-1.
struct VocabBuilder {
    Vocab v;
    std::unordered_map<std::string, uint32_t> by_spelling;  // the file's own spelling -> id
    struct Entry {
        uint32_t id;
        std::string piece;
        std::string where;
    };
    std::vector<Entry> entries;

    void add(std::string_view spelling, std::string piece, uint64_t id, const std::string &where);
    uint32_t id_of(std::string_view spelling, const std::string &where) const;
    void add_merge(std::string_view left, std::string_view right, const std::string &where);
    Vocab finish();
};

}  // namespace stk::detail
