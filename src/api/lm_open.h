// Which weight source a path names, for stk_lm_open and bench/lm_bench (the API layer: it reads
// publish's generations root as well as lm's sources).
#pragma once

#include <memory>
#include <string>

#include "lm/weights.h"

namespace stk::lm {
// What stk_lm_open (and bench/lm_bench) opens for `path`: a generations root (its CURRENT) or a
// directory holding a manifest -> open_generation_weights, at the widths it was written in (an
// FFN block type `ffn` other than F32 must be the one the generation's FFN holds, else
// STK_E_NOT_IMPLEMENTED); anything else ->
// open_model_weights(path, keep, ffn).  *generation (optional): which one it was.
std::unique_ptr<WeightSource> open_weights(const std::string &path, WDType keep, WDType ffn, bool *generation = nullptr);

}  // namespace stk::lm
