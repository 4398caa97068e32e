// What the attention-side stages (prf_build, overlays_build, memory_fit) and their acceptance
// suites share: the attention shape of a model, a reader of one plan tensor at a time, the PRF
// draw, and the positional-memory fit.  docs/decisions.md ("Attention side") gives the reasons.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingest/model.h"
#include "ingest/rope.h"
#include "runtime/memory_step.h"

namespace stk {

// The attention dimensions every stage uses.  d_kv: rows of W_K (n_kv_heads * head_dim, GQA);
// d_v: the width of the concatenated head values, W_O's input (n_heads * head_dim).
struct AttnShape {
    uint32_t d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    uint64_t d_kv = 0, d_v = 0;
};
// Validated against the bounds the stages need (STK_E_BAD_JSON naming the field otherwise).
AttnShape attn_shape(const ModelConfig &cfg);

// The stages' own parameter checks (STK_E_INVALID_ARGUMENT): r in [8, 4096] and even,
// 1 <= rv <= min(r, d_v, d_model).
void check_attention_params(const stk_job_params &p, const AttnShape &s);

// One plan tensor at a time, in f32 (src/ingest's materialize_f32), from the checkpoint the
// plan was made from (the job's, opened once at stk_open: Job::source).  read() maps the
// tensor's pages and hands them back, so the resident set stays at one tensor.
//
// MLA models (DeepSeek-V2/V3): Q, K, V, O are composed entries (PlanTensor::composed); read()
// forms them from the layer's stored factors with BLIS sgemm on `threads` threads (BLIS splits
// only m and n: the bytes do not depend on the count), the factors of one layer at a time in
// the reader's own scratch (bounded by one layer's factors).
class WeightReader {
public:
    WeightReader(const Checkpoint &ckpt, const ModelPlan &plan, unsigned threads = 1);
    ~WeightReader();
    // The dense (expert == none) tensor of `role` in `layer`, or null (a composed one first).
    const PlanTensor *find(Role role, int32_t layer) const;
    // Like find, but a missing tensor or one whose shape is not rows x cols is STK_E_PARAM_COUNT
    // naming the tensor (or the role and layer).
    const PlanTensor &require(Role role, int32_t layer, uint64_t rows, uint64_t cols) const;
    // out: n_elements floats; row_scratch: plan.max_row_floats floats (at least 1).
    void read(const PlanTensor &t, float *out, float *row_scratch);
    // The tensor's stored bytes (mapped; inflated for a compressed zip entry), for convert_to_f32
    // on ranges of them; valid until the next call.  release(t) when done.
    const uint8_t *stored_bytes(const PlanTensor &t);
    void release(const PlanTensor &t);

private:
    const PlanTensor &factor(Role role, NormSlot slot, int32_t layer) const;
    void read_factor(Role role, NormSlot slot, int32_t layer, std::vector<float> &buf, float *row_scratch);
    void compose_mla(const PlanTensor &t, float *out, float *row_scratch);

    const ModelPlan &plan_;
    const Checkpoint &ckpt_;
    unsigned threads_;
    std::vector<uint8_t> inflate_;
    std::vector<float> fa_, fb_, fg_, tmp_;  // MLA factors of one layer
};

// ---- PRF (seed 5) -----------------------------------------------------------------------------

constexpr double kWhiteningEps = 1e-8;  // eps_wk of 5.2

// tau of 5.3: sqrt(head_dim), so that E[phi(q).phi(k)] = exp(q.k / sqrt(head_dim)) is the
// softmax kernel of the model's own attention.
double prf_tau(const AttnShape &s);
// The PRNG stream of prf_W's layer (seed 10.4: module kStreamPrf, this layer, counter = draw).
uint64_t prf_stream(uint64_t master_seed, uint32_t layer);
// 5.2: d[j] = max(mean_i W_K[i, j]^2, eps) for the rows x cols row-major W_K (all K rows: GQA's
// n_kv_heads * head_dim).  acc: cols doubles of scratch; the result replaces it.
void whitening_diagonal(const float *wk, uint64_t rows, uint64_t cols, double *d);
// 5.3: prf_W[i, j] = g(i * cols + j) * sqrt(d[j]) in f32, g the Gaussians of the stream in
// row-major order.  scratch: cols doubles.
void prf_rows(uint64_t stream, const double *d, uint64_t r, uint64_t cols, float *out, double *scratch);
// Rows [i0, i1) of the same matrix into out (row i0 first): any split gives the same bytes.
void prf_rows_range(uint64_t stream, const double *d, uint64_t i0, uint64_t i1, uint64_t cols, float *out, double *scratch);
// The same from sqrt(d) (sqrt_d[j] = sqrt(d[j]), computed once per layer): identical bytes.
// scratch: cols doubles (used only when cols is odd).
void prf_rows_range_sqrt(uint64_t stream, const double *sqrt_d, uint64_t i0, uint64_t i1, uint64_t cols, float *out,
                         double *scratch);
// 5.5: the expected denominator of one key at cold start: E over independent x, y ~ N(0, I) of
// exp(x^T D y / tau) = prod_j (1 - (d_j / tau)^2)^(-1/2); +inf if some d_j >= tau.
double expected_denominator(const double *d, uint64_t n, double tau);

// ---- Overlays (seed 6) ------------------------------------------------------------------------

constexpr uint32_t kOverlayOversampling = 10;  // p of the range finder (Halko et al. 10.5)
constexpr uint32_t kOverlayPowerIters = 2;     // q power iterations

// ---- Positional memory (seed 8) ---------------------------------------------------------------

constexpr double kRopeRho = 0.995;    // 8.1 damping
constexpr uint32_t kMaxSections = 6;  // 8.2: L <= 6

// rope_angles and alibi_slopes: ingest/rope.h.
// The RoPE kernel the weights imply (16.3's surrogate; with STK_JOB_MEMORY_FIT_LSQ, what
// memory_fit fits): h(t) = sum_i e_i cos(theta_i t) / sum_i e_i for t < n, e_i = sum over layers
// and heads of |W_Q pair i| |W_K pair i| (Frobenius norms of rows i and i + n_pairs of the head's
// query block and its key head's key block).  theta: the n_pairs angles of rope_angles.
// wq: d_v * d_model floats, wk: d_kv * d_model, row_scratch: plan.max_row_floats (at least 1).
void rope_energy_kernel(WeightReader &reader, const AttnShape &s, const std::vector<double> &theta, size_t n, float *wq,
                        float *wk, float *row_scratch, double *h);

struct SosFit {
    uint32_t n_sections = 0;
    SosSection sections[kMaxSections];
    double rel_l2 = 0;         // |h - fit| / |h| over the samples fitted
    uint32_t scale_steps = 0;  // 18.3 multiplications by 0.95 applied (all sections)
    uint32_t clamped = 0;      // poles still outside after 3 steps, moved to radius 0.999
    double max_radius = 0, min_radius = 0;
};
// Doubles of workspace fit_sos needs for n samples.
size_t fit_sos_workspace(size_t n);
// 8.2: a parallel bank of at most max_sections second-order sections fitted to h[0..n) by least
// squares (linear prediction for the poles, companion-matrix roots, then the numerators), orders
// 2, 4, ... tried in turn; the first with rel_l2 <= 1e-4, else the best, is returned.
SosFit fit_sos(const double *h, size_t n, uint32_t max_sections, double *work, size_t work_len);

}  // namespace stk
