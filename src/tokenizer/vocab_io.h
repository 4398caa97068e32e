// Tokenizer file readers: every supported file format into a Vocab (tokenizer/vocab.h).
// All readers treat their input as hostile: sizes are bounded by the file, every error names the
// file and the line, JSON path or byte offset, and nothing is returned half-built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/vocab.h"

namespace stk {

// Largest tokenizer file read (tokenizer.json of 256k-token vocabularies is ~20 MB).
constexpr uint64_t kMaxTokenizerFileBytes = 512ull << 20;
// Largest vocabulary accepted (ids must fit the tables downstream).
constexpr uint32_t kMaxVocabSize = 1u << 24;

class GgufFile;

// Picks the tokenizer of a HF model directory: tokenizer.json, else vocab.json + merges.txt
// (or the official encoder.json + vocab.bpe), else tokenizer.model; or, for a GGUF model (a
// .gguf file, or a directory holding one and no config.json: ingest/gguf_model.h), the tokenizer
// its metadata describes.  STK_E_NOT_FOUND if none.
Vocab load_vocab_dir(const std::string &model_dir);
// The same from a model's resolved files (ingest/model_files.h): no probe of the directory.
struct ModelFiles;
// What a read builds: the whole tokenizer, or its pieces alone (ids, pieces, special and added
// tokens, piece types; no merges), which is what sizing a job needs.  A GGUF's merges are most
// of its read (a SentencePiece GGUF derives them from the vocabulary); the other formats are
// read whole either way.  `threads`: workers for that derivation (the same merges at any count).
enum class VocabRead { WHOLE, PIECES };
Vocab load_vocab(const ModelFiles &files, VocabRead what = VocabRead::WHOLE, unsigned threads = 1);

// The tokenizer of a GGUF's tokenizer.ggml.* metadata (vocab_gguf.cc says how it is built).
Vocab load_gguf_vocab(const std::string &path, VocabRead what = VocabRead::WHOLE, unsigned threads = 1);
Vocab parse_gguf_vocab(const GgufFile &f, const std::string &name, VocabRead what = VocabRead::WHOLE, unsigned threads = 1);

Vocab load_tokenizer_json(const std::string &path);
Vocab load_gpt2_vocab(const std::string &vocab_json_path, const std::string &merges_path);
Vocab load_sentencepiece_model(const std::string &path);

// The same from bytes in memory (fuzzers and tests); names are used in messages.
Vocab parse_tokenizer_json(const uint8_t *data, size_t size, const std::string &name);
Vocab parse_gpt2_vocab(std::string_view vocab_json, std::string_view merges_txt, const std::string &vocab_name,
                       const std::string &merges_name);
Vocab parse_sentencepiece_model(const uint8_t *data, size_t size, const std::string &name);

}  // namespace stk
