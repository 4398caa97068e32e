// Granite 3 (ibm-granite/granite-3.1-2b-instruct): the llama layout with multipliers on the
// embedding (embedding_multiplier), the attention logits (attention_multiplier replaces
// 1/sqrt(head_dim)), the residual branches (residual_multiplier) and the logits (1/logits_scaling).
// GraniteMoE (ibm-granite/granite-3.1-1b-a400m-instruct): the same with experts stored as 3-D
// block_sparse_moe.input_linear [E, 2F, D] ([gate; up] per expert) and output_linear [E, D, F],
// viewed one expert at a time (RoleRule::stacked), and a softmax over the top-k router logits
// (= softmax top-k renormalised: exact).
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void granite_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.tied_embeddings = true;
    llama_bias_keys(c, m);
    c.f64("embedding_multiplier", &m.emb_multiplier);
    c.f64("attention_multiplier", &m.attn_scale);
    c.f64("residual_multiplier", &m.residual_multiplier);
    double ls = 1;
    if (c.f64("logits_scaling", &ls) && ls != 0) m.logit_scale = 1 / ls;
}

static void granitemoe_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: granitemoe config without \"num_local_experts\"", c.source().c_str());
    m.norm_topk_prob = true;  // softmax over the top-k logits
}

static void granitemoe_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.", mp = lp + "block_sparse_moe\\.";
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    llama_attention_roles(p, lp);
    p.add(mp + "router\\.layer\\.weight", Role::ROUTER_GATE);
    p.add(mp + "router\\.weight", Role::ROUTER_GATE);  // transformers >= 5's own names
    p.add(mp + "input_linear\\.weight", Role::FFN_W13).stacked = true;
    p.add(mp + "experts\\.gate_up_proj", Role::FFN_W13).stacked = true;
    p.add(mp + "output_linear\\.weight", Role::FFN_W2).stacked = true;
    p.add(mp + "experts\\.down_proj", Role::FFN_W2).stacked = true;
    p.norm("model\\.norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"granite", nullptr};
static const char *const kArchs[] = {"GraniteForCausalLM", nullptr};
extern const GgufFamily kGgufGranite;  // its GGUF part (families/gguf_legacy.cc for now)

extern const FamilyDef kGraniteFamily = {
    "granite",
    kTypes,
    kArchs,
    &kGgufGranite,
    "llama layout with embedding, attention, residual and logit multipliers",
    "tests/fixtures/families/granite",
    false,
    nullptr,
    granite_defaults,
    nullptr,
    llama_roles,
};

static const char *const kMoeTypes[] = {"granitemoe", nullptr};
static const char *const kMoeArchs[] = {"GraniteMoeForCausalLM", nullptr};
extern const GgufFamily kGgufGranitemoe;

extern const FamilyDef kGranitemoeFamily = {
    "granitemoe",
    kMoeTypes,
    kMoeArchs,
    &kGgufGranitemoe,
    "Granite with 3-D stacked experts viewed per expert, softmax over the top-k logits",
    "tests/fixtures/families/granitemoe",
    false,
    nullptr,
    granite_defaults,
    granitemoe_finish,
    granitemoe_roles,
};

}  // namespace stk
