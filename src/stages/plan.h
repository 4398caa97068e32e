// The array plan of a job (`stk convert --dry-run`): for every stage, the arrays it will publish
// with their dtype and dims, computed from the inputs alone (the model described once, the
// options, the tokenizer files) by the same dims functions the stage's writer calls.  Sizes that
// depend on the values (MPHF and cuckoo blobs, the delta entries, the memory sections) are upper
// bounds; arrays a stage writes only on some data (bridge_guard) are "optional"; arrays of a
// feature the inputs or options switch off are "disabled" with the reason.  docs/cli.md
// ("convert --dry-run") documents the JSON keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/array.h"
#include "stages/job.h"

namespace stk {

// Whether the stage will write the array, as far as the inputs tell.
enum class PlanPresence : uint8_t {
    Written,   // written (unless the failure policy disables the stage on a bound breach, seed 1.4)
    Optional,  // written only on some data (`reason` says when)
    Disabled,  // not written: the inputs or options switch the feature off (`reason` says why)
};

struct PlannedArray {
    ArraySpec spec;
    stk_stage stage = STK_STAGE_PARSE_TENSORS;
    bool exact = true;  // false: dims (and so the bytes) are upper bounds
    PlanPresence presence = PlanPresence::Written;
    std::string reason;  // why not exact / optional / disabled ("" when written exactly)
};

struct ArrayPlan {
    std::vector<PlannedArray> arrays;
    // Adds one array of `stage`; returns it for the caller to mark.
    PlannedArray &add(stk_stage stage, ArraySpec spec, bool exact = true, const std::string &why = "");
    // Marks every array of `stage` planned so far disabled with `why` (a feature switched off).
    void disable_stage(stk_stage stage, const std::string &why);
};

// What a plan sums: the arrays that will or may be written (disabled ones are not counted),
// their payload split into exact sizes and upper bounds (checked sums).
struct ArrayPlanTotals {
    uint64_t written = 0, optional = 0, disabled = 0;
    uint64_t payload_exact = 0, payload_bound = 0, file_bytes = 0;
    uint64_t arrays() const { return written + optional; }
    uint64_t payload() const { return payload_exact + payload_bound; }  // no overflow: checked when summed
};
ArrayPlanTotals plan_totals(const ArrayPlan &plan);

// The whole job's plan, stages in DAG order; throws what the stages' sizing would (a refused
// model).  Reads the tokenizer files of in.params.in_dir; writes nothing.
ArrayPlan plan_job_arrays(const JobInputs &in);

const char *plan_presence_name(PlanPresence p);  // "written", "optional", "disabled"

}  // namespace stk
