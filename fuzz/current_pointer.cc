// Fuzz the parser of a generations root's CURRENT pointer ("<name> <64 hex>\n", read by every
// reader that opens a root).  Whatever it accepts must encode back to exactly the same bytes.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "publish/generations.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = reinterpret_cast<const char *>(data);
    try {
        stk::CurrentPointer c = stk::parse_current(p, size, "CURRENT");
        if (stk::encode_current(c.name, c.curr_hash) != std::string(p, size)) __builtin_trap();
    } catch (const stk::Error &) {
    }
    return 0;
}
