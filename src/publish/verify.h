// stk_verify's implementation (seed 12.7): the manifest and every array it lists.
#pragma once

#include <string>

#include "stk/stk.h"

namespace stk {
// Throws stk::Error on the first failure; fills report (if non-null) including where it failed.
void verify_generation(const std::string &out_dir, stk_verify_report *report);
// stk_verify: `path` is a generation directory (as verify_generation) or a generations root:
// CURRENT is resolved once, that generation verified (report->failed_file is then relative to
// the root: "generations/<name>/arrays/x.bin") and its curr_hash compared with CURRENT's.
// Returns the directory verified.
std::string verify_path(const std::string &path, stk_verify_report *report);
}  // namespace stk
