// stk_verify's implementation (seed 12.7): the manifest and every array it lists.
#pragma once

#include <string>

#include "stk/stk.h"

namespace stk {
// Throws stk::Error on the first failure; fills report (if non-null) including where it failed.
void verify_generation(const std::string &out_dir, stk_verify_report *report);
}  // namespace stk
