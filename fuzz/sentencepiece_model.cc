// Fuzz the SentencePiece tokenizer.model reader (our bounded protobuf wire-format parser and the
// ModelProto walk, merges derived from scores), then the encoder over what it accepts.
#include <cstdint>

#include "core/error.h"
#include "tokenizer/vocab_io.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        stk::Vocab v = stk::parse_sentencepiece_model(data, size, "fuzz.model");
        stk::fuzz::exercise_vocab(v);
    } catch (const stk::Error &) {
    }
    return 0;
}
