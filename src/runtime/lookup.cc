// stk_generation_open / stk_lookup: the O(1) lookups over a published generation.
#include "core/error.h"
#include "stk/stk.h"

using namespace stk;

extern "C" {
STK_API stk_status stk_generation_open(const char *out_dir, stk_generation **out_gen) {
    return guard([&] { throw_error(STK_E_NOT_IMPLEMENTED, "stk_generation_open is not implemented yet"); });
}
STK_API void stk_generation_close(stk_generation *) {}
STK_API stk_status stk_lookup(const stk_generation *, stk_lookup_kind, const void *, size_t, void *, size_t, size_t *) {
    return guard([&] { throw_error(STK_E_NOT_IMPLEMENTED, "stk_lookup is not implemented yet"); });
}
}
