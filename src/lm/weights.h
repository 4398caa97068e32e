// The weights the language-model runtime reads (issue 36 item 2): one interface, two sources.
//
// The forward (lm/forward.h) sees a model as a ModelConfig (ingest/config.h: every family's
// facts normalised) and tensor views looked up by (Role, NormSlot, layer, expert), in the HF
// layout transformers uses: matrices [out, in] row-major (Conv1D transposed, fused QKV and
// gate_up split, GGUF's Q/K row permutation and norm +1 undone: ingest presents them so), vectors
// [n] as rows n, cols 1.  Sources:
//   - open_model_weights: an ingested model (HF directory or GGUF, through describe_model and
//     materialize_f32), every tensor converted once to f32 or bf16 in memory;
//   - a faithful generation (stk convert --profile faithful): its loader implements WeightSource
//     over the mapped arrays (bf16 / int8 with per-row scales), written beside that profile.
// A view is valid while its source lives; the source is immutable after construction, so any
// number of sequences may read it from any threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ingest/config.h"
#include "ingest/roles.h"
#include "format/lowbit.h"

namespace stk::lm {

enum class WDType : uint8_t {
    F32 = 0,
    BF16 = 1,  // widened to f32 on the fly (core/float16.h bf16_to_f32)
    I8 = 2,    // int8 values, row r scaled by row_scale[r] (value = q * row_scale[r])
    Q4_0 = 3,  // block-scaled (format/lowbit.h BlockQType): each row cols / 32 blocks of 18 bytes
    Q8_0 = 4,  // ... of 34 bytes; cols a multiple of 32
};
// The block type of a Q4_0 / Q8_0 view.
bool wdtype_block(WDType t, BlockQType *out);
const char *wdtype_name(WDType t);

struct TensorView {
    const void *data = nullptr;  // null: the source has no such tensor
    WDType dtype = WDType::F32;
    uint64_t rows = 0, cols = 0;        // [out, in]; a vector is [n, 1]
    const float *row_scale = nullptr;   // I8 only: rows floats
    explicit operator bool() const { return data != nullptr; }
    uint64_t n_elements() const { return rows * cols; }
};

// The lookup key.  `slot` tells the norms apart (LN_G / LN_B: NormSlot::Attn, Ffn, Final, ...);
// it is NormSlot::None for every other role.  `layer` is kNoLayer for model-level tensors (EMB,
// POS_EMB, LM_HEAD, the final norm); `expert` kNoExpert for dense tensors, kSharedExpert for the
// MoE shared expert, e >= 0 for routed expert e.  ROUTER_GATE / ROUTER_B / SHARED_GATE carry
// expert kNoExpert.
struct WeightKey {
    Role role = Role::NONE;
    NormSlot slot = NormSlot::None;
    int32_t layer = kNoLayer;
    int32_t expert = kNoExpert;
};

// What a faithful generation's runtime block says a sequence keeps by default (issue 37): its
// sinks, window, retention policy (forward.h's Policy numbers) and H2O's recent count, and the
// FFN element type it was converted with (the array dtype codes: 9 bf16, 5 int8, 10 q4_0, 11 q8_0).
struct RuntimeDefaults {
    uint32_t sinks = 0, window = 0, policy = 0, recent = 0, ffn_dtype = 0;
};

class WeightSource {
public:
    virtual ~WeightSource() = default;
    virtual const ModelConfig &config() const = 0;
    // A generation's runtime defaults; null for a model read from its checkpoint.
    virtual const RuntimeDefaults *runtime_defaults() const { return nullptr; }
    // The tensor under `key`, or an empty view.  A tied head (config().tied_embeddings) may be
    // absent under LM_HEAD: the forward then reads EMB.
    virtual TensorView find(const WeightKey &key) const = 0;
    // What the weights came from, for messages ("model dir /x", "generation /y #3").
    virtual std::string describe() const = 0;

    TensorView find(Role r, int32_t layer = kNoLayer, int32_t expert = kNoExpert, NormSlot slot = NormSlot::None) const {
        return find(WeightKey{r, slot, layer, expert});
    }
};

// An HF model directory or a GGUF (file or directory holding one), read through ingest: the
// plan's streamed tensors (MLA's stored factors, not the stages' composed Q/K/V/O) are
// materialised once as f32 and kept as `keep` (F32 or BF16; I8 is refused:
// STK_E_INVALID_ARGUMENT).  Matrices of an MoE layer's experts are kept the same way.  `ffn`
// Q4_0 / Q8_0: the FFN matrices (FFN_W1 / W2 / W3, dense, routed and shared experts) are kept
// block-scaled instead (quantised once from f32 by blockq_quantize, row by row; a row length
// not a multiple of 32 is STK_E_INVALID_ARGUMENT naming the tensor).  Errors are ingest's
// (STK_E_* naming file and tensor).
std::unique_ptr<WeightSource> open_model_weights(const std::string &path, WDType keep = WDType::F32, WDType ffn = WDType::F32);

}  // namespace stk::lm
