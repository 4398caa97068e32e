// Mixtral (mistralai/Mixtral-8x7B-v0.1): the llama layout with block_sparse_moe experts (w1 gate,
// w2 down, w3 up) and a softmax top-k router whose weights are renormalised.
#include "core/error.h"
#include "ingest/family.h"

namespace stk {

static void mixtral_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    llama_bias_keys(c, m);
}

static void mixtral_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: mixtral config without \"num_local_experts\"", c.source().c_str());
    m.norm_topk_prob = true;  // Mixtral renormalises the top-k
}

static void mixtral_roles(RoleRules &p, const ModelConfig &m) {
    llama_roles(p, m);
    moe_mlp_roles(p, "model\\.layers\\." STK_LAYER "\\.block_sparse_moe\\.", "gate", "w1", "w3", "w2");
}

static const char *const kTypes[] = {"mixtral", nullptr};
static const char *const kArchs[] = {"MixtralForCausalLM", nullptr};

extern const FamilyDef kMixtralFamily = {
    "mixtral",
    kTypes,
    kArchs,
    nullptr,  // no GGUF part: GGUF writes Mixtral as "llama" with llama.expert_count (the llama family's)
    "as llama, with MoE experts and a router",
    "tests/data/models/mixtral",
    false,
    nullptr,
    mixtral_defaults,
    mixtral_finish,
    mixtral_roles,
};

}  // namespace stk
