// Fuzz the Sera array header decoder and the payload verification of what it accepts.
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "format/array.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        stk::ArrayHeader h = stk::decode_array_header(data, size, "fuzz.bin");
        // Accepted: the payload must be exactly in bounds; verifying it must not read past it.
        stk::verify_array_payload(h, data + stk::kArrayHeaderSize, "fuzz.bin");
        // Round trip: re-encoding an accepted header gives the same 128 bytes.
        uint8_t again[stk::kArrayHeaderSize];
        stk::encode_array_header(h, again);
        if (memcmp(again, data, sizeof again) != 0) __builtin_trap();
    } catch (const stk::Error &) {
    }
    return 0;
}
