// A tokenizer vocabulary read from any supported file, normalised to raw bytes.
// Owner: src/tokenizer (readers: vocab_*.cc, entry point vocab_io.h).  Consumers: BPE/SentencePiece
// encoders (bpe.h), the tokenizer stage (bytepieces, Sardinas-Patterson, per-length tables, greedy
// encoder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/pretokenize.h"

namespace stk {

struct Vocab {
    enum class Model : uint8_t {
        BPE_BYTE_LEVEL,     // GPT-2 style: pieces are bytes via the byte-to-unicode map
        BPE_SENTENCEPIECE,  // SentencePiece / HF BPE with "▁" for spaces and optional byte_fallback
        UNIGRAM,            // SentencePiece unigram (scores)
    };
    // SentencePiece's ModelProto.SentencePiece.Type values (pinned by sentencepiece_model.proto).
    enum class PieceType : uint8_t { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

    Model model = Model::BPE_BYTE_LEVEL;
    // id -> the token's raw bytes as it appears in decoded text.  Byte-level BPE: the unicode
    // form mapped back to bytes.  SentencePiece: "▁" kept as U+2581 (3 bytes); byte pieces
    // "<0xNN>" decoded to the single byte NN and listed in byte_piece_ids.
    std::vector<std::string> pieces;
    std::vector<float> scores;                          // SentencePiece scores (may be empty)
    std::vector<std::pair<uint32_t, uint32_t>> merges;  // BPE merges by rank: (left id, right id)
    std::vector<uint32_t> merge_results;                // parallel to merges: id of left+right
    // true: merges were derived from SentencePiece scores (tokenizer.model BPE); a merge's
    // priority is its result's score (higher first, equal scores: leftmost first), as
    // sentencepiece's bpe_model.cc does.  false: priority is the index in `merges`.
    bool merges_from_scores = false;
    std::vector<uint8_t> is_special;  // id -> 1 for added/special/control tokens
    bool special(uint32_t id) const { return id < is_special.size() && is_special[id]; }
    std::vector<uint8_t> piece_types;  // id -> PieceType (NORMAL unless the file says)
    int32_t byte_piece_ids[256];       // byte -> id of <0xNN>, -1 if none
    bool byte_fallback = false;
    // tokenizer.json BPE "ignore_merges" (Llama 3): a pre-token that is itself a token of the
    // vocabulary is that token, without merging (byte-level vocabularies only).
    bool ignore_merges = false;
    int32_t unk_id = -1, bos_id = -1, eos_id = -1;
    std::string source;  // file it was read from (messages)

    // Tokens matched in the raw input text before normalisation (tokenizer.json added_tokens,
    // SentencePiece USER_DEFINED pieces): leftmost-longest, never split by the model.
    struct AddedToken {
        std::string content;  // the text as written in the input (UTF-8)
        uint32_t id;
        bool special;
    };
    std::vector<AddedToken> added_tokens;

    // What the encoder does to text before and after the model (tokenizer.json normalizer,
    // pre_tokenizer, post_processor; SentencePiece normalizer_spec).  docs/decisions.md,
    // "tokenizer files and encoders", lists what is supported.
    struct NormalizerOp {
        enum Kind : uint8_t { NFC, NFD, NFKC, NFKD, PREPEND, REPLACE, SP_REMOVE_EXTRA_SPACES } kind;
        std::string a, b;  // PREPEND: a; REPLACE: a -> b
    };
    enum class PreTokenizer : uint8_t {
        NONE,        // the whole (normalised) segment is one word
        BYTE_LEVEL,  // a regex split (byte_level_split, when byte_level_regex) then bytes -> byte tokens
        METASPACE,   // ' ' -> replacement, optional prefix, split before each replacement
    };
    struct Pipeline {
        std::vector<NormalizerOp> normalizers;
        PreTokenizer pre_tokenizer = PreTokenizer::NONE;
        bool byte_level_regex = true;                    // ByteLevel use_regex, or a Split before it
        tok::Split byte_level_split = tok::Split::GPT2;  // which regex (GGUF tokenizer.ggml.pre, tokenizer.json Split)
        bool byte_level_add_prefix_space = false;
        std::string metaspace_replacement = "\xE2\x96\x81";  // U+2581
        uint8_t metaspace_prepend = 1;                       // 0 never, 1 always, 2 first segment only
        bool metaspace_split = true;
        std::vector<uint32_t> prefix_ids, suffix_ids;  // post-processor (e.g. Llama's <s>)
        bool strip_leading_space_on_decode = false;    // SentencePiece dummy prefix / Prepend
        // Non-empty: the vocabulary was read but encoding text with it is refused (the message
        // says which normaliser / pre-tokenizer / model is not supported).
        std::string unsupported;
    } pipeline;

    Vocab() {
        for (int &b : byte_piece_ids) b = -1;
    }
    uint32_t size() const { return uint32_t(pieces.size()); }
};

}  // namespace stk
