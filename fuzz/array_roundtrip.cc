// Round trip of the Sera array format through its real writer and reader (src/format/array.cc):
// the input chooses dtype, rank, dims, flags, the payload and how it is chunked; ArrayWriter
// writes the file, ArrayReader maps and verifies it, and write_array writes what was read to a
// second file.  Whatever the writer accepts, the reader must accept with the same header and
// payload, and the second file must be byte-identical to the first (write -> read -> write).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/array.h"
#include "roundtrip_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Cursor c(data, size);
    uint16_t dtype = c.u8() % 11;  // 0 and 10 are not dtypes: the writer must refuse them
    uint32_t rank = c.u8() % 7;    // 0 and 6 are not ranks
    uint64_t dims[stk::kMaxRank] = {1, 1, 1, 1, 1};
    for (uint32_t i = 0; i < stk::kMaxRank; i++) dims[i] = c.u8() % 9;  // payloads stay small
    uint32_t flags = uint32_t(c.u8());
    uint32_t chunk = 1 + c.u8();
    std::vector<uint8_t> body(data + c.at, data + size);

    const std::string &dir = fuzz::scratch_dir();
    std::string first = dir + "/first.bin", second = dir + "/second.bin";
    stk::ArrayHeader written;
    try {
        stk::ArrayWriter w(first, stk::DType(dtype), rank, dims, flags);
        uint64_t len = w.byte_len();
        std::vector<uint8_t> payload(len);
        for (uint64_t i = 0; i < len; i++) payload[i] = body.empty() ? uint8_t(i) : body[i % body.size()];
        for (uint64_t at = 0; at < len; at += chunk) w.append(payload.data() + at, size_t(std::min<uint64_t>(chunk, len - at)));
        written = w.finish();
    } catch (const stk::Error &) {
        unlink(first.c_str());
        return 0;  // refused by the writer: nothing published
    }
    // Accepted by the writer: the reader must take it (any stk::Error here escapes and aborts).
    {
        stk::ArrayReader r(first, true);
        const stk::ArrayHeader &h = r.header();
        uint8_t a[stk::kArrayHeaderSize], b[stk::kArrayHeaderSize];
        stk::encode_array_header(written, a);
        stk::encode_array_header(h, b);
        if (std::memcmp(a, b, sizeof a) != 0) __builtin_trap();
        stk::write_array(second, stk::DType(h.dtype), h.rank, h.dims, r.payload(), h.flags);
    }
    std::vector<uint8_t> x = fuzz::slurp(first), y = fuzz::slurp(second);
    if (x.empty() || x != y) __builtin_trap();
    stk::ArrayHeader again = stk::decode_array_header(x.data(), x.size(), first);
    stk::verify_array_payload(again, x.data() + stk::kArrayHeaderSize, first);
    unlink(first.c_str());
    unlink(second.c_str());
    return 0;
}
