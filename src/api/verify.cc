#include "api/verify.h"

#include "core/error.h"

namespace stk {
void verify_generation(const std::string &out_dir, stk_verify_report *) {
    throw_error(STK_E_NOT_IMPLEMENTED, "%s: stk_verify is not implemented yet", out_dir.c_str());
}
}  // namespace stk
