// Fuzz the tokenizer.json reader (simdjson DOM + our walk of model / normalizer / pre_tokenizer /
// post_processor / added_tokens), then the encoder over what it accepts.
#include <cstdint>

#include "core/error.h"
#include "tokenizer/vocab_io.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        stk::Vocab v = stk::parse_tokenizer_json(data, size, "fuzz.tokenizer.json");
        stk::fuzz::exercise_vocab(v);
    } catch (const stk::Error &) {
    }
    return 0;
}
