// The FFN collapse (seed 7) and its linear dictionary: what ffn_collapse hands to mphf_cuckoo,
// the key layout, and the FFN units of a model.  docs/decisions.md "FFN collapse and the linear
// dictionary" gives the reasons; docs/format.md the bytes.
//
// A unit is one FFN: a dense layer's, or one expert of an MoE layer (routed experts in the
// router-norm order of seed 3.3, then the shared expert).  For unit u and input feature j the
// collapse is the exact response of the FFN, with ReLU for its activation and its hidden bias
// left out, to x = +e_j and to x = -e_j:
//   M+[:, j] = W2 relu(W1[:, j])            M-[:, j] = W2 relu(-W1[:, j])          (plain)
//   M+[:, j] = W2 (relu(Wg[:, j]) * Wu[:, j])  M-[:, j] = W2 (relu(-Wg[:, j]) * -Wu[:, j])  (gated)
// so that y(x) = sum_j |x_j| M^{sign x_j}[:, j].  A key addresses ONE entry M^s[i, j]:
//   key = s << 63 | u << 48 | i << 24 | j      (s sign bit, u < 2^15, i, j < 2^24)
// Base (linear_weights, through the MPHF): for every (s, u, j) the top-L outputs i of column j of
// S = |W2| |W1| (gated: |W2| (|Wg| |Wu|)), ties by smaller i.  Delta (cuckoo_delta): the other
// entries of the column by |M| descending (ties by smaller i), until what is left holds at most
// kLinearEps of the column's energy, at most kLinearDeltaCap of them.  What is left is the
// truncation, recorded in the manifest.
#pragma once

#include <cstdint>

#include "stages/job.h"

namespace stk {

struct ModelPlan;

constexpr double kLinearEps = 1e-6;       // energy share of a column the truncation may drop
constexpr uint32_t kLinearDeltaCap = 64;  // delta entries per (sign, unit, column) at most
constexpr uint32_t kLinearMaxUnits = 1u << 15;
constexpr uint64_t kLinearMaxDim = 1u << 24;
constexpr uint32_t kNoTensor = 0xFFFFFFFFu;

inline uint64_t linear_key(uint32_t sign, uint32_t unit, uint64_t i, uint64_t j) {
    return (uint64_t(sign) << 63) | (uint64_t(unit) << 48) | (i << 24) | j;
}
inline uint32_t linear_key_sign(uint64_t k) { return uint32_t(k >> 63); }
inline uint32_t linear_key_unit(uint64_t k) { return uint32_t(k >> 48) & 0x7FFFu; }
inline uint64_t linear_key_out(uint64_t k) { return (k >> 24) & 0xFFFFFFu; }
inline uint64_t linear_key_in(uint64_t k) { return k & 0xFFFFFFu; }

// One FFN of the model: indices into ModelPlan::tensors (kNoTensor: absent).
struct FfnUnit {
    int32_t layer = -1;
    int32_t expert = -1;  // kNoExpert (dense), 0.. (routed, original index), kSharedExpert
    uint32_t id = 0;      // the key's unit field: position in ffn_units() order
    uint32_t w1 = kNoTensor, w2 = kNoTensor, w3 = kNoTensor, b1 = kNoTensor, b2 = kNoTensor;
    uint64_t hidden = 0;  // h
    bool gated() const { return w3 != kNoTensor; }
};

// The units in key order: layers ascending; in a layer the dense FFN, or the routed experts in
// plan.expert_order (router-row norm descending, ties by index) then the shared expert.
// `out` holds ffn_units_max(plan) entries.  Returns the count.  Shapes are checked (STK_E_*
// naming the tensor); a unit without W1 or W2 is STK_E_UNSUPPORTED.
uint64_t ffn_units_max(const ModelPlan &plan);
uint32_t ffn_units(const ModelPlan &plan, FfnUnit *out);

// What ffn_collapse hands to mphf_cuckoo (arena memory of the job).
struct LinearHandoff {
    uint32_t d = 0, top_l = 0, n_units = 0;
    uint64_t n_base = 0, n_delta = 0;
    uint64_t *base_keys = nullptr;  // in (unit, sign, column, rank) order
    float *base_vals = nullptr;
    uint64_t *delta_keys = nullptr;  // in (unit, sign, column, |value| rank) order
    uint32_t *delta_vals = nullptr;  // f32 bits
    float *bias = nullptr;           // [d]: seed 7.6's global bias (null: the model has no FFN biases)
    double bias_norm = 0;
    double trunc_col_max = 0;         // max over columns of sqrt(dropped energy / column energy)
    double trunc_total = 0;           // sqrt(sum dropped / sum energy) over all columns
    uint64_t dropped = 0;             // nonzero entries dropped
    uint64_t capped_columns = 0;      // columns where kLinearDeltaCap, not kLinearEps, stopped the delta
    float tau_low = 0, tau_high = 0;  // min and max |value| in the delta
};

// Upper bounds of n_base and n_delta for this plan and top_l (arena sizing).
void linear_capacity(const ModelPlan &plan, uint32_t top_l, uint64_t *max_base, uint64_t *max_delta);
// n_base (exact) and the most n_delta can be for `units` FFN units of width d at top_l.
void linear_counts(uint64_t units, uint64_t d, uint32_t top_l, uint64_t *n_base, uint64_t *max_delta);

// What the model's FFNs make of the linear dictionary, from the plan alone (`stk convert
// --dry-run`): the units, the exact base count, the delta bound, and whether linear_bias.bin
// is written (a dense unit has an FFN bias).
struct LinearOutline {
    uint32_t n_units = 0;
    uint64_t d = 0, n_base = 0, max_delta = 0;
    bool bias = false;
};
LinearOutline linear_outline(const ModelPlan &plan, uint32_t top_l);

// Test hook: when nonzero, mphf_cuckoo's first MPHF attempts use this pilot cap (forces seed 18.1).
extern uint32_t g_linear_test_pilot_cap;
extern uint32_t g_linear_test_pilot_cap_attempts;  // attempts that use it (then 65536)

}  // namespace stk
