// Fuzz the vocab.json + merges.txt reader: the input is vocab.json, a 0 byte, then merges.txt
// (no 0 byte: all of it is vocab.json and merges.txt is empty).  Then the byte-level encoder.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "tokenizer/vocab_io.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = reinterpret_cast<const char *>(data);
    const void *zero = size ? std::memchr(p, 0, size) : nullptr;
    size_t split = zero ? size_t(static_cast<const char *>(zero) - p) : size;
    std::string_view vocab(p, split), merges = zero ? std::string_view(p + split + 1, size - split - 1) : std::string_view();
    try {
        stk::Vocab v = stk::parse_gpt2_vocab(vocab, merges, "fuzz.vocab.json", "fuzz.merges.txt");
        stk::fuzz::exercise_vocab(v);
    } catch (const stk::Error &) {
    }
    return 0;
}
