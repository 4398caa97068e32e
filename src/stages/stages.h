// Entry points of the DAG stages (one file each in src/stages/).
#pragma once

#include "stages/job.h"

namespace stk {

void parse_tensors_size(const JobInputs &in, ArenaSizer &s);
void parse_tensors_run(Job &job);

void tokenizer_stage_size(const JobInputs &in, ArenaSizer &s);
void tokenizer_stage_run(Job &job);
// The vocabulary the tokenizer stage will take, read whole for a job (stk_open): null if the
// model has no tokenizer file or it does not parse (the stage reads it again and refuses it).
// The caller owns it (Job::vocab).
Vocab *tokenizer_stage_read_vocab(const JobInputs &in);

void prf_build_size(const JobInputs &in, ArenaSizer &s);
void prf_build_run(Job &job);

void overlays_build_size(const JobInputs &in, ArenaSizer &s);
void overlays_build_run(Job &job);

void memory_fit_size(const JobInputs &in, ArenaSizer &s);
void memory_fit_run(Job &job);

void ffn_collapse_size(const JobInputs &in, ArenaSizer &s);
void ffn_collapse_run(Job &job);

void mphf_cuckoo_size(const JobInputs &in, ArenaSizer &s);
void mphf_cuckoo_run(Job &job);

void bridge_init_size(const JobInputs &in, ArenaSizer &s);
void bridge_init_run(Job &job);

void manifest_emit_run(Job &job);
// The manifest's seed_digest of normalised parameters (docs/format.md).
void params_seed_digest(const stk_job_params &p, uint64_t master_seed, uint8_t out[32]);
void check_stage_run(Job &job);

}  // namespace stk

namespace stk {
// Publication into a generations root (publish_job.cc; STK_JOB_PUBLISH_ROOT).
constexpr size_t kPublishPathSlack = 64;  // arena bytes per path beyond the root's length
void publish_begin(Job &job);             // stk_open: lock, clean leftovers, staging dir, prev_hash
void publish_job(Job &job);               // check stage, after it verified the staging directory
void publish_release(Job &job);           // stk_close: drop an unpublished staging dir, unlock
}  // namespace stk

namespace stk {
// The arrays each stage publishes, for `stk convert --dry-run` (src/stages/plan.h): every stage
// computes them with the dims functions its writer uses.
struct ArrayPlan;
void tokenizer_stage_plan(const JobInputs &in, ArrayPlan &plan);
void prf_build_plan(const JobInputs &in, ArrayPlan &plan);
void overlays_build_plan(const JobInputs &in, ArrayPlan &plan);
void ffn_collapse_plan(const JobInputs &in, ArrayPlan &plan);
void mphf_cuckoo_plan(const JobInputs &in, ArrayPlan &plan);
void memory_fit_plan(const JobInputs &in, ArrayPlan &plan);
void bridge_init_plan(const JobInputs &in, ArrayPlan &plan);
}  // namespace stk
