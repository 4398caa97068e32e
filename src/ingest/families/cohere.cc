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

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static void cohere_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("logit_scale")) j.f("logit_scale", *v);
    // Command R+'s per-head Q/K LayerNorms: the family refuses use_qk_norm by name.
    j.b("use_qk_norm", m.tensor("blk.0.attn_q_norm.weight") != nullptr);
    gguf_llama_bias_keys(m, j);
}
static const char *const kCohereGgufArchs[] = {"command-r", nullptr};
extern const GgufFamily kGgufCohere = {
    .archs = kCohereGgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals, .config = cohere_gguf_config};

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
