// OLMoE (allenai/OLMoE-1B-7B-0924): llama attention with RMS q_norm / k_norm over all heads, routed
// experts (softmax top-k, not renormalised unless norm_topk_prob).
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void olmoe_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qk_norm = QkNorm::Whole;
    llama_bias_keys(c, m);
}

static void olmoe_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: olmoe config without \"num_experts\"", c.source().c_str());
}

static void olmoe_roles(RoleRules &p, const ModelConfig &m) {
    llama_roles(p, m);
    qk_norm_roles(p, "model\\.layers\\." STK_LAYER "\\.self_attn\\.");
    moe_mlp_roles(p, "model\\.layers\\." STK_LAYER "\\.mlp\\.", "gate", "gate_proj", "up_proj", "down_proj");
}

static const char *const kTypes[] = {"olmoe", nullptr};
static const char *const kArchs[] = {"OlmoeForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kOlmoeGgufArchs[] = {"olmoe", nullptr};
extern const GgufFamily kGgufOlmoe = {
    .archs = kOlmoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufQwen2MoeMoe,
    .norm_topk_default = 0,  // OlmoeConfig's default
};

extern const FamilyDef kOlmoeFamily = {
    "olmoe",
    kTypes,
    kArchs,
    &kGgufOlmoe,
    "q/k RMSNorms over all heads, routed experts (softmax top-k)",
    "tests/fixtures/families/olmoe",
    false,
    nullptr,
    olmoe_defaults,
    olmoe_finish,
    olmoe_roles,
};

}  // namespace stk
