#include "stages/plan.h"

#include "core/checked.h"
#include "core/error.h"
#include "stages/faithful.h"
#include "stages/policy.h"
#include "stages/stages.h"

namespace stk {

PlannedArray &ArrayPlan::add(stk_stage stage, ArraySpec spec, bool exact, const std::string &why) {
    PlannedArray a;
    a.spec = std::move(spec);
    a.stage = stage;
    a.exact = exact;
    a.reason = why;
    arrays.push_back(std::move(a));
    return arrays.back();
}

void ArrayPlan::disable_stage(stk_stage stage, const std::string &why) {
    for (PlannedArray &a : arrays)
        if (a.stage == stage) {
            a.presence = PlanPresence::Disabled;
            a.reason = why;
        }
}

ArrayPlan plan_job_arrays(const JobInputs &in) {
    if (!in.model) throw_error(STK_E_INVALID_ARGUMENT, "plan_job_arrays: no model description");
    ArrayPlan plan;
    const StageDef *table = stage_table();
    for (int i = 0; i < STK_STAGE_COUNT; i++)  // each planner in its stage's file, beside the dims its writer uses
        if (table[i].plan && table[i].run) table[i].plan(in, plan);
    // The faithful profile does not run the spec's numeric stages (registry.cc records them
    // disabled): their arrays are planned disabled, with the same reason.
    if (job_is_faithful(in.params))
        for (int i = 0; i < STK_STAGE_COUNT; i++)
            if (stage_skipped_by_profile(table[i].id))
                plan.disable_stage(table[i].id, std::string(table[i].name) +
                                                    " not run: the faithful profile stores the model's own weights instead");
    // Seed 1.4: a stage whose input stage is disabled is disabled too (overlays on prf).
    for (PlannedArray &a : plan.arrays) {
        const stk_stage needed = stage_depends_on(a.stage);
        if (needed > STK_STAGE_COUNT || a.presence == PlanPresence::Disabled) continue;
        for (const PlannedArray &b : plan.arrays)
            if (b.stage == needed && b.presence == PlanPresence::Disabled) {
                a.presence = PlanPresence::Disabled;
                a.reason = std::string("disabled with ") + find_stage(needed)->name + ": " + b.reason;
                break;
            }
    }
    return plan;
}

ArrayPlanTotals plan_totals(const ArrayPlan &plan) {
    ArrayPlanTotals t;
    for (const PlannedArray &a : plan.arrays) {
        if (a.presence == PlanPresence::Disabled) {
            t.disabled++;
            continue;
        }
        (a.presence == PlanPresence::Optional ? t.optional : t.written)++;
        uint64_t &sum = a.exact ? t.payload_exact : t.payload_bound;
        sum = checked_add(sum, a.spec.payload_bytes(), "planned payload bytes");
        t.file_bytes = checked_add(t.file_bytes, a.spec.file_bytes(), "planned file bytes");
    }
    checked_add(t.payload_exact, t.payload_bound, "planned payload bytes");
    return t;
}

const char *plan_presence_name(PlanPresence p) {
    switch (p) {
        case PlanPresence::Written: return "written";
        case PlanPresence::Optional: return "optional";
        case PlanPresence::Disabled: return "disabled";
    }
    return "?";
}

}  // namespace stk
