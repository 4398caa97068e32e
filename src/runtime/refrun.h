// The reference runtime of the arrays (docs/format.md "Reference runtime"; docs/decisions.md
// "The reference runtime"): per token, what Sera computes from each module of a published
// generation - PRF attention (state R, s), the overlay correction deltaC, the FFN through the
// linear dictionary, one step of the positional memory.  The C entry points are in
// api/refrun_api.cc.  Every step works in caller memory (state, scratch, index) sized by
// refrun_info, allocates nothing, runs on the calling thread, and sums every output element in
// one fixed order, so its bits do not depend on how many threads the caller runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/memory_step.h"
#include "stk/stk.h"

namespace stk {

// What the runtime reads of one generation, resolved once (refrun_model) and kept with it.
struct RefrunModel {
    uint64_t tag = 0;  // the manifest's curr_hash (first 8 bytes, LE): states and indexes carry it
    uint32_t n_layers = 0, d_model = 0, d_v = 0, r = 0, r_v = 0;
    double tau = 0, beta_floor = 0, eps = 0;
    // PRF (prf_build): pointers into the mapped, verified payloads.
    bool has_prf = false;
    std::string prf_reason;  // why not, when !has_prf
    const float *prf_w = nullptr, *mu = nullptr, *sig2 = nullptr, *r_init = nullptr, *s_init = nullptr;
    std::vector<double> diag;     // [L, d_model]: D recovered from prf_W and its generator stream
    std::vector<double> inv_sig;  // [L, r]: 1 / sqrt(max(sig2, eps))
    std::vector<double> mu_d;     // [L, r]
    bool init_zero = true;        // R_init and s_init are all zero (the state starts empty)
    // Overlays (overlays_build).
    bool has_overlays = false;
    std::string overlays_reason;
    const float *ov_h = nullptr, *ov_u = nullptr, *ov_z = nullptr;
    // Positional memory (memory_fit).
    bool has_memory = false;
    std::string memory_reason;
    std::vector<SosSection> sections;
    std::vector<SosState> regs0;  // delaybuf_init.bin
    // Linear dictionary (ffn_collapse + mphf_cuckoo).
    bool has_linear = false, has_linear_bias = false;
    std::string linear_reason;
    uint32_t n_units = 0;
    uint64_t n_entries = 0;  // keys the index holds (base + delta, each resolved once)
    const float *linear_bias = nullptr;
    // Sizes (bytes) of the caller's buffers.
    size_t prf_state_bytes = 0, prf_state_bytes_memory = 0, scratch_bytes = 0, ffn_index_bytes = 0, memory_state_bytes = 0;
};

// The generation's model, built on first use (maps and verifies the arrays, recovers D: the one
// step that allocates) and kept until stk_generation_close.  Thread-safe.
const RefrunModel &refrun_model(const stk_generation &g);

constexpr uint32_t kPrfMemory = 0x1;  // STK_PRF_MEMORY

// PRF attention, one layer.  `state` / `scratch` are 8-byte aligned caller memory of at least
// the sizes refrun_model gives (STK_E_INVALID_ARGUMENT naming what otherwise).
void prf_reset(const RefrunModel &m, uint32_t layer, uint32_t flags, void *state, size_t state_bytes);
void prf_add_key(const RefrunModel &m, uint32_t layer, void *state, size_t state_bytes, const float *x, const float *v,
                 void *scratch, size_t scratch_bytes);
void prf_read(const RefrunModel &m, uint32_t layer, const void *state, size_t state_bytes, const float *x, float *out,
              void *scratch, size_t scratch_bytes);
// num / den without beta_floor (0 when den is 0) and log(den) unshifted (-inf when den is 0).
void prf_read_parts(const RefrunModel &m, uint32_t layer, const void *state, size_t state_bytes, const float *x, float *out,
                    double *log_den, void *scratch, size_t scratch_bytes);
void prf_run(const RefrunModel &m, uint32_t layer, void *state, size_t state_bytes, uint64_t n, const float *x,
             const float *v, float *out, void *scratch, size_t scratch_bytes);

// deltaC(q) = U ((phi_w(q)^T H) Z), in value space (d_v).
void overlay_delta(const RefrunModel &m, uint32_t layer, const float *x, float *out, void *scratch, size_t scratch_bytes);
void overlay_run(const RefrunModel &m, uint32_t layer, uint64_t n, const float *x, float *out, void *scratch,
                 size_t scratch_bytes);

// The linear dictionary as a CSR in caller memory: every key resolved through linear_find.
void ffn_index_build(const stk_generation &g, const RefrunModel &m, void *index, size_t bytes);
// The same index from a list of (key, value) pairs (the bench's synthetic dictionary): keys of
// at most m.n_units units and d_model m.d_model, n <= m.n_entries.
void ffn_index_from(const RefrunModel &m, void *index, size_t bytes, const uint64_t *keys, const float *values, uint64_t n);
// The buffer sizes of m from its shapes (refrun_model fills them; a synthetic model calls this).
void refrun_sizes(RefrunModel &m);
void ffn_apply(const RefrunModel &m, const void *index, size_t bytes, uint32_t unit, uint64_t n, const float *x, float *y);
void ffn_bias(const RefrunModel &m, float *out, size_t n);

// One step of the positional memory bank (memory_step.h), state in caller memory.
void memory_reset(const RefrunModel &m, void *state, size_t bytes);
void memory_step_state(const RefrunModel &m, void *state, size_t bytes, float u, float *y);

}  // namespace stk
