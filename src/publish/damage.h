// Where a damaged array payload differs from an intact copy (`stk check` on a root, through
// stk_locate_damage): one checksum covers a whole payload, so the byte is found by comparison
// with the same array (same digests) in another generation of the root.
#pragma once

#include <cstdint>
#include <string>

namespace stk {

// rel = "generations/NAME/arrays/X.bin" under `root`: another generation whose manifest lists X
// with the same crc32c, sha256_low64 and byte_len, and whose file verifies, compared byte by byte
// with the damaged file.  True with *at (file offset, header included) and *witness (that
// generation's name) set; false when `rel` is not such a path or no generation holds a copy
// that differs.  Throws what reading a manifest or an array throws.
bool locate_damage(const std::string &root, const std::string &rel, uint64_t *at, std::string *witness);

}  // namespace stk
