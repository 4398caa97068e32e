#include "stages/plan.h"

#include "core/checked.h"
#include "core/error.h"
#include "stages/policy.h"
#include "stages/stages.h"

namespace stk {

ArraySpec::ArraySpec(std::string n, DType t, std::initializer_list<uint64_t> d) : name(std::move(n)), dtype(t) {
    if (d.size() < 1 || d.size() > kMaxRank) throw_error(STK_E_INTERNAL, "array %s: rank %zu", name.c_str(), d.size());
    rank = uint32_t(d.size());
    uint32_t i = 0;
    for (uint64_t x : d) dims[i++] = x;
}

uint64_t ArraySpec::payload_bytes() const { return array_payload_bytes(dtype, rank, dims, name.c_str()); }

uint64_t ArraySpec::file_bytes() const { return checked_add(payload_bytes(), kArrayHeaderSize, "array file bytes"); }

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

// One place: the stage that publishes arrays -> its planner (in the stage's own file, beside
// the dims functions its writer calls).  parse_tensors, manifest_emit and check publish none.
StagePlanFn stage_planner(stk_stage id) {
    switch (id) {
        case STK_STAGE_TOKENIZER: return tokenizer_stage_plan;
        case STK_STAGE_PRF: return prf_build_plan;
        case STK_STAGE_OVERLAYS: return overlays_build_plan;
        case STK_STAGE_FFN_COLLAPSE: return ffn_collapse_plan;
        case STK_STAGE_MPHF_CUCKOO: return mphf_cuckoo_plan;
        case STK_STAGE_MEMORY_FIT: return memory_fit_plan;
        case STK_STAGE_BRIDGE_INIT: return bridge_init_plan;
        default: return nullptr;
    }
}

ArrayPlan plan_job_arrays(const JobInputs &in) {
    if (!in.model) throw_error(STK_E_INVALID_ARGUMENT, "plan_job_arrays: no model description");
    ArrayPlan plan;
    const StageDef *table = stage_table();
    for (int i = 0; i < STK_STAGE_COUNT; i++) {
        StagePlanFn f = stage_planner(table[i].id);
        if (f && table[i].run) f(in, plan);
    }
    // Seed 1.4: a stage whose input stage is disabled is disabled too (overlays on prf).
    for (PlannedArray &a : plan.arrays) {
        const stk_stage needed = stage_depends_on(a.stage);
        if (needed > STK_STAGE_COUNT || a.presence == PlanPresence::Disabled) continue;
        for (const PlannedArray &b : plan.arrays)
            if (b.stage == needed && b.presence == PlanPresence::Disabled) {
                a.presence = PlanPresence::Disabled;
                a.reason = std::string("disabled with ") + stage_table()[needed - 1].name + ": " + b.reason;
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
