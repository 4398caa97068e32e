// Test-only: the 50,257 GPT-2 pieces as raw bytes, read from tests/data/third_party/gpt2/encoder.json with
// simdjson and GPT-2's byte-to-unicode map inverted.  Independent of the library's vocab readers
// on purpose (a second implementation to check the hash structures against).
#pragma once

#include <simdjson.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace stk::test {

inline std::vector<std::string> gpt2_pieces() {
    // bytes_to_unicode(): printable bytes map to themselves, the other 68 to 256, 257, ...
    int cp_to_byte[512];
    for (int &v : cp_to_byte) v = -1;
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp_to_byte[printable ? b : next++] = b;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc = parser.load(third_party_data("gpt2/encoder.json"));
    std::vector<std::string> pieces(doc.get_object().size());
    for (auto field : doc.get_object()) {
        std::string_view k = field.key;
        uint64_t id = field.value.get_uint64();
        std::string bytes;
        for (size_t i = 0; i < k.size();) {
            unsigned char c = k[i];
            int cp, len;
            if (c < 0x80) cp = c, len = 1;
            else if ((c >> 5) == 6) cp = c & 0x1F, len = 2;
            else cp = c & 0x0F, len = 3;
            for (int j = 1; j < len; j++) cp = (cp << 6) | (k[i + j] & 0x3F);
            i += len;
            assert_true(cp < 512 && cp_to_byte[cp] >= 0);
            bytes.push_back(char(cp_to_byte[cp]));
        }
        assert_true(id < pieces.size());
        pieces[id] = bytes;
    }
    return pieces;
}

}  // namespace stk::test
