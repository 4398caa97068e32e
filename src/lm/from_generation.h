// A WeightSource over a published faithful generation (stk convert --profile faithful;
// docs/format.md "Faithful profile"): the loader of the runtime's weights from Sera's arrays.
#pragma once

#include <memory>
#include <string>

#include "lm/weights.h"

namespace stk::lm {

// gen_dir: a generation directory (a root's CURRENT resolved by the caller: stk_verify /
// publish's verify_path give it).  The manifest is decoded and must hold the runtime block
// (STK_E_INVALID_ARGUMENT naming the directory otherwise: a default-profile generation holds
// no weights); every array it lists is mapped once and verified here (its header against the
// manifest entry, its payload's crc32c and sha256_low64), so a flipped bit is refused before any
// forward reads it.  The ModelConfig is rebuilt from the runtime block; views point into the
// mappings (bf16 / f32 as written; int8 with its per-matrix scale repeated per row).
std::unique_ptr<WeightSource> open_generation_weights(const std::string &gen_dir);

}  // namespace stk::lm
