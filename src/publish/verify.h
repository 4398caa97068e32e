// stk_verify's implementation (seed 12.7): the manifest and every array it lists.
#pragma once

#include <string>

#include "stk/stk.h"

namespace stk {
// Verifies every array; throws stk::Error naming the first failure (in manifest order) and
// listing the others; fills report (if non-null, today's whole struct)
// including where it failed.  Arrays are hashed on at most `threads` threads (the caller's
// choice; one for generations under 8 MiB); the result does not depend on it.
void verify_generation(const std::string &out_dir, stk_verify_report *report, unsigned threads);
// stk_verify: `path` is a generation directory (as verify_generation) or a generations root:
// CURRENT is resolved once, that generation verified (report->failed_file is then relative to
// the root: "generations/<name>/arrays/x.bin") and its curr_hash compared with CURRENT's.
// Returns the directory verified.
std::string verify_path(const std::string &path, stk_verify_report *report, unsigned threads);

// The thread count of callers that have none of their own (stk_verify, stk_generation_open):
// the hardware's, at most 8.
unsigned verify_default_threads();
}  // namespace stk
