// Qwen3-MoE (Qwen/Qwen3-30B-A3B): Qwen3 attention, routed experts (softmax top-k, norm_topk_prob),
// decoder_sparse_step and mlp_only_layers; no shared expert.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void qwen3_moe_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qk_norm = QkNorm::PerHead;
    llama_bias_keys(c, m);
}

static void qwen3_moe_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: qwen3_moe config without \"num_experts\"", c.source().c_str());
}

static void qwen3_moe_roles(RoleRules &p, const ModelConfig &m) {
    llama_roles(p, m);
    qk_norm_roles(p, "model\\.layers\\." STK_LAYER "\\.self_attn\\.");
    moe_mlp_roles(p, "model\\.layers\\." STK_LAYER "\\.mlp\\.", "gate", "gate_proj", "up_proj", "down_proj");
}

static const char *const kTypes[] = {"qwen3_moe", nullptr};
static const char *const kArchs[] = {"Qwen3MoeForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kQwen3MoeGgufArchs[] = {"qwen3moe", nullptr};
extern const GgufFamily kGgufQwen3Moe = {
    .archs = kQwen3MoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufQwen2MoeMoe,
    .norm_topk_default = 1,
};

extern const FamilyDef kQwen3MoeFamily = {
    "qwen3_moe",
    kTypes,
    kArchs,
    &kGgufQwen3Moe,
    "Qwen3 attention with routed experts (softmax top-k)",
    "tests/fixtures/families/qwen3_moe",
    false,
    nullptr,
    qwen3_moe_defaults,
    qwen3_moe_finish,
    qwen3_moe_roles,
};

}  // namespace stk
