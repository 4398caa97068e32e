// Cohere Command-R (CohereForAI/c4ai-command-r-v01): attention and FFN in parallel under one
// LayerNorm without bias, RoPE on interleaved pairs, gated SiLU, tied head, the logits multiplied by
// logit_scale (recorded).  Command R+ (use_qk_norm: a LayerNorm per head) is refused by name.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void cohere_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.tied_embeddings = true;
    m.norm = NormKind::LayerNorm;
    m.norm_bias = false;
    m.parallel_attn = true;
    m.norms_per_layer = 1;
    m.rope_interleaved = true;
    llama_bias_keys(c, m);
    m.logit_scale = 0.0625;  // CohereConfig's default
    c.f64("logit_scale", &m.logit_scale);
    bool qk = false;
    if (c.boolean("use_qk_norm", &qk) && qk)
        throw_error(STK_E_UNSUPPORTED,
                    "%s: cohere with \"use_qk_norm\": true (one LayerNorm per head, Command R+) is not converted",
                    c.source().c_str());
}

static const char *const kTypes[] = {"cohere", nullptr};
static const char *const kArchs[] = {"CohereForCausalLM", nullptr};
extern const GgufFamily kGgufCohere;  // its GGUF part (families/gguf_legacy.cc for now)

extern const FamilyDef kCohereFamily = {
    "cohere",
    kTypes,
    kArchs,
    &kGgufCohere,
    "parallel block under one bias-free LayerNorm, interleaved RoPE, gated SiLU, logit_scale",
    "tests/fixtures/families/cohere",
    false,
    nullptr,
    cohere_defaults,
    nullptr,
    llama_roles,
};

}  // namespace stk
