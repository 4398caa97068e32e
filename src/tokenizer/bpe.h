// The real encoders: byte-level BPE (GPT-2 pre-tokenizer + merges by rank), tokenizer.json BPE
// (normalizers, Metaspace, byte_fallback, added/special tokens, post-processor ids) and
// SentencePiece BPE (tokenizer.model, merges ranked by piece score), plus decoding.
// Ids are identical to HF tokenizers / tiktoken / sentencepiece on the references in
// tests/data/third_party (tests/test_bpe.cc, tests/test_sentencepiece.cc).
//
// Speed: a merge table over (left id, right id) pairs (open addressing, one probe on average), a
// per-word cache, an O(n^2) scan for short words and a heap over a linked list for long ones; all
// buffers are members reused across calls, so steady-state encoding allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace stk {

// u64 -> u64 open-addressing map, keys != kEmpty.  Sized once; never rehashes after build.
class U64Map {
public:
    static constexpr uint64_t kEmpty = ~0ull;
    void reserve(size_t n);
    // Inserts if absent; returns false (and keeps the old value) if the key was there.
    bool insert(uint64_t key, uint64_t value);
    // The value, or kEmpty.
    uint64_t get(uint64_t key) const {
        if (mask_ == 0) return kEmpty;
        size_t i = size_t(hash(key)) & mask_;
        for (;;) {
            const Slot &s = slots_[i];
            if (s.key == key) return s.value;
            if (s.key == kEmpty) return kEmpty;
            i = (i + 1) & mask_;
        }
    }
    size_t size() const { return count_; }

private:
    struct Slot {
        uint64_t key, value;
    };
    static uint64_t hash(uint64_t k) {
        k ^= k >> 33;
        k *= 0xFF51AFD7ED558CCDull;
        k ^= k >> 29;
        return k;
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0, count_ = 0;
};

class Tokenizer {
public:
    // Throws STK_E_NOT_IMPLEMENTED (Unigram) or STK_E_UNSUPPORTED (Vocab::pipeline.unsupported)
    // when the vocabulary cannot encode text.  `vocab` must outlive the Tokenizer.
    explicit Tokenizer(const Vocab &vocab);
    Tokenizer(const Tokenizer &) = delete;
    Tokenizer &operator=(const Tokenizer &) = delete;

    // Appends the ids of `text` to out.  add_special: the post-processor's ids (e.g. Llama's <s>).
    // Not thread-safe (the word cache and buffers are per Tokenizer): one per thread.
    void encode(std::string_view text, std::vector<uint32_t> &out, bool add_special = true);

    // ids -> text bytes.  STK_E_INVALID_ARGUMENT naming the position of an id outside the vocab.
    std::string decode(const uint32_t *ids, size_t n, bool skip_special = false) const;

    const Vocab &vocab() const { return v_; }
    uint64_t cache_hits() const { return hits_; }
    uint64_t cache_misses() const { return misses_; }

private:
    void encode_segment(std::string_view seg, bool first_segment, std::vector<uint32_t> &out);
    void encode_word(std::string_view word, std::vector<uint32_t> &out, bool cacheable);
    void symbols_of(std::string_view word);  // -> syms_
    [[noreturn]] void missing_byte(uint8_t b) const;
    void bpe(std::vector<uint32_t> &out);  // syms_ -> out
    void bpe_scan(std::vector<uint32_t> &out);
    void bpe_heap(std::vector<uint32_t> &out);
    uint64_t merge_of(uint32_t a, uint32_t b) const { return merges_.get((uint64_t(a) << 32) | b); }
    std::string_view normalize(std::string_view seg);

    const Vocab &v_;
    bool byte_level_;
    U64Map merges_;                                              // (left << 32 | right) -> (rank << 32 | result)
    U64Map chars_;                                               // SentencePiece-style: packed UTF-8 char -> id
    int32_t byte_id_[256];                                       // byte-level: byte -> id of the single-byte token
    std::vector<std::vector<Vocab::AddedToken>> added_by_byte_;  // first byte -> tokens, longest first
    bool has_added_ = false;
    // Vocab::ignore_merges: piece bytes -> id (views into the Vocab's pieces; empty otherwise)
    std::unordered_map<std::string_view, uint32_t> whole_;

    // word cache: (hash, key bytes) -> ids, cleared when full (output never depends on it)
    struct CacheSlot {
        uint64_t hash;
        uint32_t key_off, key_len, val_off, val_len;
    };
    std::vector<CacheSlot> cache_;
    std::string cache_keys_;
    std::vector<uint32_t> cache_vals_;
    size_t cache_count_ = 0;
    uint64_t hits_ = 0, misses_ = 0;

    // reused buffers
    std::vector<uint32_t> syms_, ranks_, results_;
    struct Node {
        uint32_t id;
        int32_t prev, next;
    };
    std::vector<Node> nodes_;
    struct HeapItem {
        uint32_t rank, pos, result;
    };
    std::vector<HeapItem> heap_;
    std::string norm_a_, norm_b_, word_buf_;
};

}  // namespace stk
