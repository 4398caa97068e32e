// The reference runtime's C entry points (runtime/refrun.h holds the bodies).
#include <cstring>

#include "core/abi.h"
#include "core/error.h"
#include "runtime/generation.h"
#include "runtime/refrun.h"
#include "stk/stk.h"

using namespace stk;

namespace {

const RefrunModel &model(const stk_generation *gen, const char *fn) {
    if (!gen) throw_error(STK_E_INVALID_ARGUMENT, "%s: gen is NULL", fn);
    return refrun_model(*gen);
}

}  // namespace

extern "C" {

STK_API stk_status stk_refrun_get_info(const stk_generation *gen, stk_refrun_info *out) {
    return guard([&] {
        if (!out) throw_error(STK_E_INVALID_ARGUMENT, "stk_refrun_get_info: out is NULL");
        abi_check_out(out);
        const RefrunModel &m = model(gen, "stk_refrun_get_info");
        stk_refrun_info i;
        std::memset(&i, 0, sizeof i);
        i.struct_size = sizeof i;
        i.n_layers = m.n_layers;
        i.d_model = m.d_model;
        i.d_v = m.d_v;
        i.r = m.r;
        i.r_v = m.r_v;
        i.has_prf = m.has_prf;
        i.has_overlays = m.has_overlays;
        i.has_linear = m.has_linear;
        i.has_linear_bias = m.has_linear_bias;
        i.has_memory = m.has_memory;
        i.n_ffn_units = m.n_units;
        i.memory_sections = uint32_t(m.sections.size());
        i.tau = m.tau;
        i.beta_floor = m.beta_floor;
        i.whitening_eps = m.eps;
        i.prf_state_bytes = m.prf_state_bytes;
        i.prf_state_bytes_memory = m.prf_state_bytes_memory;
        i.scratch_bytes = m.scratch_bytes;
        i.ffn_index_bytes = m.ffn_index_bytes;
        i.memory_state_bytes = m.memory_state_bytes;
        i.ffn_entries = m.n_entries;
        abi_write(out, i);
    });
}

STK_API stk_status stk_prf_reset(const stk_generation *gen, uint32_t layer, uint32_t flags, void *state, size_t state_bytes) {
    return guard([&] { prf_reset(model(gen, "stk_prf_reset"), layer, flags, state, state_bytes); });
}

STK_API stk_status stk_prf_add_key(const stk_generation *gen, uint32_t layer, void *state, size_t state_bytes,
                                   const float *x_key, const float *v, void *scratch, size_t scratch_bytes) {
    return guard(
        [&] { prf_add_key(model(gen, "stk_prf_add_key"), layer, state, state_bytes, x_key, v, scratch, scratch_bytes); });
}

STK_API stk_status stk_prf_read(const stk_generation *gen, uint32_t layer, const void *state, size_t state_bytes,
                                const float *x_query, float *out, void *scratch, size_t scratch_bytes) {
    return guard(
        [&] { prf_read(model(gen, "stk_prf_read"), layer, state, state_bytes, x_query, out, scratch, scratch_bytes); });
}

STK_API stk_status stk_prf_read_parts(const stk_generation *gen, uint32_t layer, const void *state, size_t state_bytes,
                                      const float *x_query, float *out, double *out_log_den, void *scratch,
                                      size_t scratch_bytes) {
    return guard([&] {
        prf_read_parts(model(gen, "stk_prf_read_parts"), layer, state, state_bytes, x_query, out, out_log_den, scratch,
                       scratch_bytes);
    });
}

STK_API stk_status stk_prf_run(const stk_generation *gen, uint32_t layer, void *state, size_t state_bytes, uint64_t n_tokens,
                               const float *x, const float *v, float *out, void *scratch, size_t scratch_bytes) {
    return guard(
        [&] { prf_run(model(gen, "stk_prf_run"), layer, state, state_bytes, n_tokens, x, v, out, scratch, scratch_bytes); });
}

STK_API stk_status stk_overlay_delta(const stk_generation *gen, uint32_t layer, const float *x_query, float *out,
                                     void *scratch, size_t scratch_bytes) {
    return guard([&] { overlay_delta(model(gen, "stk_overlay_delta"), layer, x_query, out, scratch, scratch_bytes); });
}

STK_API stk_status stk_overlay_run(const stk_generation *gen, uint32_t layer, uint64_t n_tokens, const float *x_query,
                                   float *out, void *scratch, size_t scratch_bytes) {
    return guard(
        [&] { overlay_run(model(gen, "stk_overlay_run"), layer, n_tokens, x_query, out, scratch, scratch_bytes); });
}

STK_API stk_status stk_ffn_index_bytes(const stk_generation *gen, size_t *out_bytes) {
    return guard([&] {
        if (!out_bytes) throw_error(STK_E_INVALID_ARGUMENT, "stk_ffn_index_bytes: out_bytes is NULL");
        const RefrunModel &m = model(gen, "stk_ffn_index_bytes");
        if (!m.has_linear)
            throw_error(STK_E_MISSING_ARRAY, "stk_ffn_index_bytes: no linear dictionary: %s", m.linear_reason.c_str());
        *out_bytes = m.ffn_index_bytes;
    });
}

STK_API stk_status stk_ffn_index_build(const stk_generation *gen, void *index, size_t index_bytes) {
    return guard([&] {
        const RefrunModel &m = model(gen, "stk_ffn_index_build");
        ffn_index_build(*gen, m, index, index_bytes);
    });
}

STK_API stk_status stk_ffn_apply(const stk_generation *gen, const void *index, size_t index_bytes, uint32_t unit,
                                 const float *x, float *y) {
    return guard([&] { ffn_apply(model(gen, "stk_ffn_apply"), index, index_bytes, unit, 1, x, y); });
}

STK_API stk_status stk_ffn_apply_batch(const stk_generation *gen, const void *index, size_t index_bytes, uint32_t unit,
                                       uint64_t n_tokens, const float *x, float *y) {
    return guard([&] { ffn_apply(model(gen, "stk_ffn_apply_batch"), index, index_bytes, unit, n_tokens, x, y); });
}

STK_API stk_status stk_ffn_bias(const stk_generation *gen, float *out, size_t n) {
    return guard([&] { ffn_bias(model(gen, "stk_ffn_bias"), out, n); });
}

STK_API stk_status stk_memory_reset(const stk_generation *gen, void *state, size_t state_bytes) {
    return guard([&] { memory_reset(model(gen, "stk_memory_reset"), state, state_bytes); });
}

STK_API stk_status stk_memory_step(const stk_generation *gen, void *state, size_t state_bytes, float u, float *y) {
    return guard([&] { memory_step_state(model(gen, "stk_memory_step"), state, state_bytes, u, y); });
}
}
