// stk_plan_* (the conversion plan of `stk convert --dry-run`), stk_model_gguf_path and
// stk_dtype_name: what a front end needs before a job runs, from the metadata alone.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/abi.h"
#include "core/arena.h"
#include "core/checked.h"
#include "core/error.h"
#include "format/array.h"
#include "ingest/gguf_model.h"
#include "ingest/model.h"
#include "stages/job.h"
#include "stages/plan.h"
#include "stk/stk.h"

using namespace stk;

// The model described once, the options normalised against it, the arena and the array plan.
struct stk_plan {
    std::unique_ptr<ModelDescription> model;
    stk_job_params params{};
    size_t arena_bytes = 0;
    ArrayPlan arrays;
    ArrayPlanTotals totals;
    uint64_t stage_arena[STK_STAGE_COUNT] = {};
};

namespace {

static_assert(STK_ARRAY_HEADER_BYTES == kArrayHeaderSize, "stk.h and format/array.h disagree on the header size");

void plan_stages(stk_plan &p, const JobInputs &in) {
    const StageDef *table = stage_table();
    for (int i = 0; i < STK_STAGE_COUNT; i++) {
        if (!table[i].size) continue;
        ArenaSizer s;
        table[i].size(in, s);
        p.stage_arena[i] = s.total() - 64;  // ArenaSizer's slack for the base's misalignment, once per job
    }
}

uint32_t presence_of(PlanPresence p) {
    switch (p) {
        case PlanPresence::Written: return STK_PLAN_WRITTEN;
        case PlanPresence::Optional: return STK_PLAN_OPTIONAL;
        case PlanPresence::Disabled: return STK_PLAN_DISABLED;
    }
    return STK_PLAN_WRITTEN;
}

template <size_t N>
void copy_text(char (&dst)[N], const char *src, size_t max) {
    std::snprintf(dst, N, "%.*s", int(strnlen(src, max)), src);
}

}  // namespace

extern "C" {

STK_API const char *stk_dtype_name(uint32_t dtype) { return dtype_name(dtype <= 0xFFFF ? uint16_t(dtype) : 0); }

STK_API stk_status stk_model_gguf_path(const char *path, char *out, size_t out_cap, size_t *out_len) {
    return guard([&] {
        if (!path || !out_len || (!out && out_cap)) throw_error(STK_E_INVALID_ARGUMENT, "stk_model_gguf_path: NULL argument");
        const std::string gguf = gguf_model_file(path);
        *out_len = gguf.size();
        if (gguf.size() >= out_cap)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_model_gguf_path: the path needs %zu bytes, out_cap is %zu", gguf.size() + 1,
                        out_cap);
        std::memcpy(out, gguf.c_str(), gguf.size() + 1);
    });
}

STK_API stk_status stk_plan_open(const stk_job_params *params, stk_plan **out_plan) {
    return guard([&] {
        if (!params || !out_plan) throw_error(STK_E_INVALID_ARGUMENT, "stk_plan_open: NULL argument");
        *out_plan = nullptr;
        const stk_job_params in = abi_read(params);
        auto p = std::make_unique<stk_plan>();
        p->params = normalize_params(in);
        p->model = describe_model(p->params.in_dir);
        p->params = normalize_params_for(in, *p->model);  // the default rv clamped on a narrow model
        const JobInputs inputs{p->params, p->model.get()};
        p->arena_bytes = job_arena_size_for(inputs);
        p->arrays = plan_job_arrays(inputs);
        p->totals = plan_totals(p->arrays);
        plan_stages(*p, inputs);
        p->params.in_dir = p->params.out_dir = nullptr;  // the caller's strings: not kept
        *out_plan = p.release();
    });
}

STK_API void stk_plan_close(stk_plan *plan) { delete plan; }

STK_API stk_status stk_plan_get_info(const stk_plan *plan, stk_plan_info *out) {
    return guard([&] {
        if (!plan || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_plan_get_info: NULL argument");
        abi_check_out(out);
        stk_plan_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        const stk_job_params &p = plan->params;
        const ModelPlan &m = plan->model->plan;
        const ArrayPlanTotals &t = plan->totals;
        v.r = p.r, v.rv = p.rv, v.l_tok = p.l_tok, v.top_l = p.top_l, v.threads = p.threads;
        v.n_layers = m.config.n_layers;
        v.n_tensors = m.n_tensors;
        v.array_count = uint32_t(plan->arrays.arrays.size());
        v.n_params = m.n_params;
        v.checkpoint_bytes = m.checkpoint_bytes;
        v.arena_bytes = plan->arena_bytes;
        v.largest_unit_f32_bytes = m.max_unit_f32_bytes;
        v.expected_peak_bytes = checked_add(v.arena_bytes, m.max_unit_f32_bytes, "expected peak");
        v.arrays_written = t.written, v.arrays_optional = t.optional, v.arrays_disabled = t.disabled;
        v.payload_exact_bytes = t.payload_exact, v.payload_bound_bytes = t.payload_bound;
        v.file_bytes = t.file_bytes;
        copy_text(v.model_type, m.config.model_type, sizeof m.config.model_type);
        copy_text(v.format, m.format, sizeof m.format);
        abi_write(out, v);
    });
}

STK_API stk_status stk_plan_array_at(const stk_plan *plan, uint32_t index, stk_plan_array *out) {
    return guard([&] {
        if (!plan || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_plan_array_at: NULL argument");
        abi_check_out(out);
        if (index >= plan->arrays.arrays.size())
            throw_error(STK_E_KEY_NOT_FOUND, "stk_plan_array_at: index %u, the plan has %zu arrays", index,
                        plan->arrays.arrays.size());
        const PlannedArray &a = plan->arrays.arrays[index];
        stk_plan_array v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        copy_text(v.name, a.spec.name.c_str(), sizeof v.name - 1);
        v.stage = uint32_t(a.stage);
        v.dtype = uint32_t(a.spec.dtype);
        v.rank = a.spec.rank;
        v.exact = a.exact ? 1 : 0;
        v.presence = presence_of(a.presence);
        for (uint32_t i = 0; i < 5; i++) v.dims[i] = i < a.spec.rank ? a.spec.dims[i] : 1;
        v.payload_bytes = a.spec.payload_bytes();
        v.file_bytes = a.spec.file_bytes();
        v.reason = a.reason.c_str();
        abi_write(out, v);
    });
}

STK_API stk_status stk_plan_stage_info(const stk_plan *plan, stk_stage stage, stk_plan_stage *out) {
    return guard([&] {
        if (!plan || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_plan_stage_info: NULL argument");
        const StageDef *d = find_stage(stage);
        if (!d) throw_error(STK_E_INVALID_ARGUMENT, "stk_plan_stage_info: unknown stage %d", int(stage));
        abi_check_out(out);
        stk_plan_stage v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.implemented = d->run ? 1 : 0;
        for (const PlannedArray &a : plan->arrays.arrays) v.arrays += a.stage == stage && a.presence != PlanPresence::Disabled;
        v.arena_bytes = plan->stage_arena[int(stage) - 1];
        abi_write(out, v);
    });
}

}  // extern "C"
