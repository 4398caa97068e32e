// Qwen1.5-MoE / Qwen2-MoE (Qwen/Qwen1.5-MoE-A2.7B): routed experts, a shared expert with a
// sigmoid gate, Q/K/V biases, decoder_sparse_step and mlp_only_layers.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void qwen2_moe_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qkv_bias = true;
}

static void qwen2_moe_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: qwen2_moe config without \"num_experts\"", c.source().c_str());
    m.shared_expert_gate = m.shared_expert_ffn_dim > 0;
}

static void qwen2_moe_roles(RoleRules &p, const ModelConfig &m) {
    llama_roles(p, m);
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.mlp\\.";
    moe_mlp_roles(p, lp, "gate", "gate_proj", "up_proj", "down_proj");
    p.add(lp + "shared_expert\\.gate_proj\\.weight", Role::FFN_W1).shared = true;
    p.add(lp + "shared_expert\\.up_proj\\.weight", Role::FFN_W3).shared = true;
    p.add(lp + "shared_expert\\.down_proj\\.weight", Role::FFN_W2).shared = true;
    p.add(lp + "shared_expert_gate\\.weight", Role::SHARED_GATE);
}

static const char *const kTypes[] = {"qwen2_moe", nullptr};
static const char *const kArchs[] = {"Qwen2MoeForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
// conversion/qwen.py: the shared-expert gate [1, d] stored as [d].
static const char *const kQwen2MoeGgufArchs[] = {"qwen2moe", nullptr};
static const char *const kQwen2MoeVectorRows[] = {"ffn_gate_inp_shexp", nullptr};
extern const GgufFamily kGgufQwen2Moe = {
    .archs = kQwen2MoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufQwen2MoeMoe,
    .vector_rows = kQwen2MoeVectorRows,
    .norm_topk_default = 0,  // Qwen2MoeConfig's default
};

extern const FamilyDef kQwen2MoeFamily = {
    "qwen2_moe",
    kTypes,
    kArchs,
    &kGgufQwen2Moe,
    "MoE experts, a shared expert and its gate",
    "tests/data/models/qwen2_moe",
    false,
    nullptr,
    qwen2_moe_defaults,
    qwen2_moe_finish,
    qwen2_moe_roles,
};

}  // namespace stk
