// The model layer of ingestion: a checkpoint's tensors + config.json -> one ModelPlan.
//
// A ModelPlan lists every tensor with its role, layer and expert, in the fixed order that
// parse_tensors visits them (seed 1.3 / 10.3): the embedding unit, layers 0..L-1 (in role order,
// then norm slot, then expert), the final norm, the head.  Fused tensors become several plan
// entries (GPT-2 c_attn -> Q, K, V, each a view of the same source); Conv1D weights are marked
// for transposition to [out, in]; buffers are listed but never counted or converted; a tied head
// is an entry that views the embedding.  Shapes are checked against the config and the parameter
// count against the count the config implies (spec-notes 5: GPT-2 small = 124,439,808).
//
// ModelPlan is plain data (no destructors): the job copies it into its arena; `stk inspect` and
// the tests keep it in a ModelDescription on the heap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "ingest/checkpoint.h"
#include "ingest/config.h"
#include "ingest/model_files.h"
#include "ingest/roles.h"

namespace stk {

struct PlanTensor {
    const char *name = nullptr;  // the stored name (of the viewed tensor for a tied head)
    uint32_t source = 0;         // index into Checkpoint::tensors()
    Role role = Role::NONE;      // never QKV / QKV_B: fused tensors are split
    NormSlot slot = NormSlot::None;
    QkvLayout layout = QkvLayout::Separate;  // != Separate: a part of a fused QKV tensor
    uint8_t part = 0;                        // 0 = Q, 1 = K, 2 = V
    bool transpose = false;                  // source stored [in, out]
    bool buffer = false;                     // not a parameter: never counted (inv_freq, masks, a tied copy)
    bool tied = false;                       // LM_HEAD that views the embedding (no tensor of its own)
    bool composed = false;                   // MLA: a per-head Q/K/V/O the stages read, composed from the
                                             // layer's stored factors (not streamed, not counted);
                                             // `name` / `source` are those of its main factor
    bool streamed = false;                   // visited by parse_tensors (has a role, is not a pure buffer)
    uint8_t group = 0;                       // 0 embeddings, 1 layers, 2 final norm, 3 head
    int32_t layer = kNoLayer;
    int32_t expert = kNoExpert;  // kSharedExpert for the MoE shared expert
    uint32_t rank = 0;           // logical rank: 1 or 2 (0: not streamed)
    uint64_t dims[2] = {0, 0};   // logical shape: [out, in] for matrices, [n] for vectors
    uint64_t n_elements = 0;
    uint64_t src_rows = 0, src_cols = 0;               // the source viewed as [rows, cols] (vectors: [n, 1])
    uint64_t src_offset = 0;                           // element where that view starts (one expert of a stacked tensor)
    uint32_t head_dim = 0, q_heads = 0, kv_heads = 0;  // fused layouts
    uint32_t unit = 0;                                 // index of its stream unit
};

// A run of consecutive streamed tensors converted together (embeddings, one layer, final, head).
struct PlanUnit {
    uint32_t first = 0, count = 0;  // into ModelPlan::tensors
    uint8_t group = 0;
    int32_t layer = kNoLayer;
    uint64_t f32_bytes = 0;  // sum of align64(n_elements * 4) of its tensors
};

struct NonfiniteRecord {
    uint32_t tensor;   // index into ModelPlan::tensors
    uint64_t element;  // logical element index of the first NaN/Inf
    uint64_t count;    // non-finite values in that tensor
};
constexpr uint32_t kMaxNonfiniteRecords = 16;

struct ModelPlan {
    ModelConfig config;
    char format[32] = {};           // Checkpoint::format()
    PlanTensor *tensors = nullptr;  // streamed ones first, in stream order; then the rest by name
    uint32_t n_tensors = 0;
    uint32_t n_streamed = 0;
    PlanUnit *units = nullptr;
    uint32_t n_units = 0;
    uint32_t n_source_tensors = 0;
    uint32_t n_buffers = 0;          // source tensors that are not parameters
    uint32_t n_unmapped = 0;         // source tensors no rule matched
    uint64_t n_params = 0;           // parameters in the checkpoint (buffers, tied copies excluded)
    uint64_t n_params_expected = 0;  // what config.json implies (0: custom model, not derived)
    uint64_t checkpoint_bytes = 0;
    uint64_t max_unit_f32_bytes = 0;  // the largest unit in f32: the arena's layer buffer
    uint64_t max_row_floats = 0;      // scratch for transposed sources (kTransposeBlock rows)

    // Filled by parse_tensors.
    uint32_t *expert_order = nullptr;  // [n_layers][n_experts]: router-row L2 norm descending,
                                       // ties by index (seed 3.3 / 9.1); empty for dense models
    uint64_t nonfinite_values = 0;
    uint32_t nonfinite_tensors = 0;
    NonfiniteRecord nonfinite[kMaxNonfiniteRecords] = {};
    uint64_t streamed_elements = 0;
};

// What config.json implies, one entry per parameter tensor (after splitting fused ones).
struct ExpectedTensor {
    Role role;
    NormSlot slot;
    int32_t layer, expert;
    uint32_t rank;
    uint64_t dims[2];
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig &cfg);
// Sum over expected_tensors (0 for custom models).
uint64_t expected_param_count(const ModelConfig &cfg);

// The analysis behind a plan, on the heap.  `tensors` must outlive it (names point into them).
struct ModelLayout {
    std::vector<PlanTensor> tensors;
    std::vector<PlanUnit> units;
    ModelPlan summary;  // counts and sizes; its pointers are null
};
// Map names to roles, split, validate against the config (STK_E_PARAM_COUNT naming the tensor).
ModelLayout analyze_model(const ParsedConfig &cfg, const std::vector<TensorRef> &tensors);

// A whole model directory described (config + checkpoint + layout), as `stk inspect` shows it.
struct ModelDescription {
    ModelFiles files;  // what the path named, resolved once (ingest/model_files.h)
    ParsedConfig parsed;
    std::unique_ptr<Checkpoint> checkpoint;
    ModelLayout layout;
    ModelPlan plan;  // points into layout (valid while this object lives)
};
// `dir`: a model directory, or a GGUF (a file, or a directory holding one: ingest/gguf_model.h).
std::unique_ptr<ModelDescription> describe_model(const std::string &dir);
// The same from files resolved at the entry; reads only the files named there.
std::unique_ptr<ModelDescription> describe_model(ModelFiles files);

// The plan copied into an arena (names included); sized by plan_arena_size first.
void plan_arena_size(const ModelDescription &d, ArenaSizer &sizer);
ModelPlan *copy_plan_to_arena(const ModelDescription &d, Arena &arena);

// Seed 3.3 / 9.1: one layer's experts enumerated by the L2 norm of their router row (router:
// [n_experts, cols] f32), largest first, ties by index; sums in double in a fixed order.
// `norm_scratch` holds n_experts doubles; `order` receives the n_experts expert indices.
void order_experts_by_router_norm(const float *router, uint32_t n_experts, uint64_t cols, double *norm_scratch, uint32_t *order);

// Stored rows converted at once when transposing a [in, out] tensor.
constexpr uint64_t kTransposeBlock = 32;

// One plan tensor in f32, row-major in its logical shape, from the source's stored bytes
// (Checkpoint::tensor_bytes).  `row_scratch` holds at least plan.max_row_floats floats
// (kTransposeBlock stored rows).  Allocation-free.
void materialize_f32(const PlanTensor &t, const TensorRef &src, const uint8_t *bytes, float *out, float *row_scratch);
// Logical rows [r0, r1) of a tensor stored in its logical orientation (!t.transpose) into
// out + r0 * cols, as materialize_f32 writes them: ranges of one tensor can be converted at once
// by different threads.  No scratch.
void materialize_f32_rows(const PlanTensor &t, const TensorRef &src, const uint8_t *bytes, uint64_t r0, uint64_t r1, float *out);

}  // namespace stk
