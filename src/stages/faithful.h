// The faithful profile (STK_JOB_PROFILE_FAITHFUL; docs/format.md "Faithful profile"): the model's
// own weights as arrays, one per (layer, kind), and the manifest's runtime block.  parse_tensors
// runs it after its hash loop, so the arrays are that stage's (its digest covers their headers);
// the spec's numeric stages do not run in this profile (docs/decisions.md, "Faithful profile").
#pragma once

#include <cstdint>
#include <string>

#include "stages/job.h"

namespace stk {

struct PlanTensor;
struct ModelPlan;
class StageDigest;
struct ArrayPlan;

inline bool job_is_faithful(const stk_job_params &p) { return (p.flags & STK_JOB_PROFILE_FAITHFUL) != 0; }

// The array kind a plan tensor is written under ("attn_q", "experts_w1", "final_norm.w", ...),
// or null for one the profile does not write (a tied head, a pure buffer).  Throws
// STK_E_NOT_IMPLEMENTED naming the role for a role the profile has no array for.
const char *faithful_kind(const PlanTensor &t);
// Its array file name (ingest/faithful_names.h): "<kind>.bin", "L<layer, 4 digits>.<kind>.bin".
std::string faithful_array_name(const PlanTensor &t);

// `stk convert --dry-run` (stages/plan.h): the arrays faithful_write writes, from the same layout
// (nothing outside the faithful profile).
void faithful_plan(const JobInputs &in, ArrayPlan &plan);
// Arena the writer needs beside parse_tensors' own buffers (one tensor in f32 and encoded).
void faithful_size(const JobInputs &in, ArenaSizer &s);
// Write every array of the profile in stream order (one tensor in memory at a time), record
// them on the job under parse_tensors, feed `digest`, fill the manifest draft's runtime block.
void faithful_write(Job &job, const ModelPlan &plan, StageDigest &digest);

}  // namespace stk
