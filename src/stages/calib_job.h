// `stk convert --calibration STATS` in the job: the statistics opened once (stk_open), checked
// against the model's shape (stk_open) and digest (parse_tensors), and what the stages ask of
// them.  The fits themselves: stages/calib_fit.h; the file: format/calib_stats.h.
#pragma once

#include <cstdint>

#include "stages/job.h"

namespace stk {

struct ModelDescription;
struct ModelConfig;

// The plan's numbers a statistics file must match (calib_stats.h's header fields).
struct CalibShape {
    uint32_t n_layers = 0, d_model = 0, d_v = 0, n_pairs = 0;
};
CalibShape calib_shape_of(const ModelConfig &cfg);

// stk_open: maps and validates params.calibration (CalibStats throws naming the file), refuses
// one whose n_layers / d_model / d_v / n_pairs differ from the model's (STK_E_INVALID_ARGUMENT
// naming the file, the field and both values), and records its digest and token count.
void calib_open(Job &job, const ModelDescription &model);
// End of parse_tensors: refuses statistics of another model (STK_E_INVALID_ARGUMENT naming both
// digests, crc32c / sha256_low64 hex).  No-op without --calibration.
void calib_check_model(Job &job);

}  // namespace stk
