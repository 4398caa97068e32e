// The positional facts that follow from a ModelConfig, shared by the stages (memory_fit, calib
// jobs, acceptance) and the LM runtime (lm/forward.cc): one copy of each formula.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ingest/config.h"

namespace stk {

// RoPE angles theta_i = base^(-2i / rotary_dim), i < rotary_dim / 2, with the config's
// rope_scaling applied as transformers initialises it (linear, llama3, yarn, longrope's long
// factors; dynamic leaves them unscaled).  Returns the count; *note is set when the scaling is
// not modelled or only in part.  `local`: the angles of the sliding-window layers (Gemma 3's
// rope_local_theta base, never scaled).
uint32_t rope_angles(const ModelConfig &cfg, std::vector<double> &theta, std::string *note, bool local = false);

// ALiBi slopes of `n_heads` heads as BLOOM and the ALiBi paper compute them.
void alibi_slopes(uint32_t n_heads, double *out);

}  // namespace stk
