// Fuzz the Sera array header decoder and the payload verification of what it accepts.  Each input
// runs twice: as given (the header crc at offset 120 rejects almost every mutation), and with the
// header crc recomputed, so the fuzzer reaches the dtype / rank / dims / byte_len / flags checks.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/checksum.h"
#include "core/error.h"
#include "format/array.h"

static void one(const uint8_t *data, size_t size) {
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
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size);
    if (size >= stk::kArrayHeaderSize) {
        std::vector<uint8_t> b(data, data + size);
        stk::store_le<uint64_t>(&b[120], stk::crc32c(b.data(), 120));
        one(b.data(), b.size());
    }
    return 0;
}
