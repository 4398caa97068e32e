// Granite 3 (ibm-granite/granite-3.1-2b-instruct): the llama layout with multipliers on the
// embedding (embedding_multiplier), the attention logits (attention_multiplier replaces
// 1/sqrt(head_dim)), the residual branches (residual_multiplier) and the logits (1/logits_scaling).
#include "ingest/family.h"

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

static const char *const kTypes[] = {"granite", nullptr};
static const char *const kArchs[] = {"GraniteForCausalLM", nullptr};
static const char *const kGguf[] = {"granite", nullptr};

extern const FamilyDef kGraniteFamily = {
    "granite",
    kTypes,
    kArchs,
    kGguf,
    "llama layout with embedding, attention, residual and logit multipliers",
    "tests/fixtures/families/granite",
    false,
    nullptr,
    granite_defaults,
    nullptr,
    llama_roles,
};

}  // namespace stk
