// A tokenizer vocabulary read from any supported file, normalised to raw bytes.
// Owner: src/tokenizer (readers: vocab_*.cc).  Consumers: BPE/SentencePiece encoders, the
// tokenizer stage (bytepieces, Sardinas-Patterson, per-length tables, greedy encoder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stk {

struct Vocab {
    enum class Model : uint8_t {
        BPE_BYTE_LEVEL,  // GPT-2 style: pieces are bytes via the byte-to-unicode map
        BPE_SENTENCEPIECE, // SentencePiece / HF BPE with "▁" for spaces and optional byte_fallback
        UNIGRAM,         // SentencePiece unigram (scores)
    };
    Model model = Model::BPE_BYTE_LEVEL;
    // id -> the token's raw bytes as it appears in decoded text.  Byte-level BPE: the unicode
    // form mapped back to bytes.  SentencePiece: "▁" kept as U+2581 (3 bytes); byte pieces
    // "<0xNN>" decoded to the single byte NN and listed in byte_piece_ids.
    std::vector<std::string> pieces;
    std::vector<float> scores;                          // SentencePiece scores (may be empty)
    std::vector<std::pair<uint32_t, uint32_t>> merges;  // BPE merges by rank: (left id, right id)
    std::vector<uint8_t> is_special;                    // id -> 1 for added/special/control tokens
    int32_t byte_piece_ids[256];                        // byte -> id of <0xNN>, -1 if none
    bool byte_fallback = false;
    int32_t unk_id = -1, bos_id = -1, eos_id = -1;
    std::string source;                                 // file it was read from (messages)

    Vocab() { for (int &b : byte_piece_ids) b = -1; }
    uint32_t size() const { return uint32_t(pieces.size()); }
};

}  // namespace stk
