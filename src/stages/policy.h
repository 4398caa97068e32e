// The failure policy of seed 1.4 ("any bound breach => disable optional features and emit an
// invariant record; conversion must still complete"), in one place (docs/decisions.md "Failure
// policy").
//
// A bound breach is a numeric bound an optional stage could not meet after its seed-18 remedy:
// a non-finite result, a failed 12.x check, exhausted retries (MPHF pilots, a full cuckoo
// table).  A stage signals it by throwing BoundBreach (or an Error whose status is one of the
// numeric-exhaustion statuses, see is_bound_breach).  job_run_stage then removes whatever the
// stage wrote, restores the manifest fields and hand-offs it changed, records the breach (stage,
// bound, measured value, bound value) as a "feature disabled" record, and the job goes on.
// Later stages that need the disabled one are disabled too, with their own record.
//
// Everything else stops the job: refused input (corrupt or hostile checkpoint, wrong shapes),
// I/O errors, an arena too small, a bug (STK_E_INTERNAL), and any error of a stage that is not
// optional (parse_tensors, manifest_emit, check).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/test_fault.h"
#include "stages/job.h"

namespace stk {

class BoundBreach : public Error {
public:
    // bound: the bound's short name ("12.3 H/U orthonormal"); value: what was measured; limit:
    // the bound it was held to.  Both numbers go into the record (non-finite ones as 0).
    BoundBreach(stk_status status, const char *bound, double value, double limit, std::string message)
        : Error(status, std::move(message)), bound_(bound), value_(value), limit_(limit) {}
    const char *bound() const noexcept { return bound_; }
    double value() const noexcept { return value_; }
    double limit() const noexcept { return limit_; }

private:
    const char *bound_;  // a string literal
    double value_, limit_;
};

[[noreturn]] void throw_breach(stk_status status, const char *bound, double value, double limit, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

// True for the stages whose feature may be disabled (tokenizer FST, prf, overlays, ffn_collapse,
// mphf_cuckoo, memory_fit, bridge_init).
bool stage_is_optional(stk_stage id);

// The stage whose output `id` needs, or STK_STAGE_COUNT+1 (none): overlays_build reads prf_W,
// mphf_cuckoo builds on ffn_collapse's entries.  One table (policy.cc); a new stage adds a row.
stk_stage stage_depends_on(stk_stage id);

// The manifest feature a stage provides (seed 17.3: a stage that did not run disables it).
Feature stage_feature(int stage);

// True if this error from an optional stage is a bound breach (not an input refusal or a bug).
bool is_bound_breach(const Error &e);

// What job_run_stage keeps before a stage runs so that a breach can undo the stage.
struct StageSnapshot {
    uint32_t n_arrays = 0;
    uint32_t n_records = 0;
    size_t arena_mark = 0;
    ManifestFields fields;
    const uint32_t *p_gen = nullptr;
    uint32_t n_pgen = 0;
    TokenizerPlan *tokenizer = nullptr;
    LinearHandoff *linear = nullptr;
    std::vector<std::string> files;  // names under <out>/arrays before the stage
};
StageSnapshot policy_snapshot(Job &job);

// Undo the stage (its files, array log entries, fields, hand-offs, arena) and record the breach.
void policy_disable(Job &job, stk_stage id, const StageSnapshot &snap, const BoundBreach &b);
// The same for an error that is_bound_breach classifies but that carries no bound.
void policy_disable(Job &job, stk_stage id, const StageSnapshot &snap, const Error &e);
// A stage skipped because the stage it needs was disabled: record it, mark it done and disabled.
void policy_disable_dependent(Job &job, stk_stage id, stk_stage needed);
// The stages a profile does not run: the faithful profile skips the spec's numeric stages
// (prf_build, overlays_build, ffn_collapse, mphf_cuckoo, memory_fit, bridge_init).
bool stage_skipped_by_profile(stk_stage id);
// Such a stage: recorded "feature disabled" with the profile as the reason, marked done and disabled.
void policy_disable_by_profile(Job &job, stk_stage id);
// After a stage that ran: an 18.5 note if array headers were recomputed while it wrote
// (`before`: array_header_repairs() when it started).
void policy_note_header_repairs(Job &job, stk_stage id, uint64_t before);

// Test-only fault injection: src/core/test_fault.h (the names this module and the stages use are
// listed there).

}  // namespace stk
