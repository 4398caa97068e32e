// StableLM 2 (stabilityai/stablelm-2-1_6b): the llama names with LayerNorm (bias), gated SiLU,
// partial rotary (partial_rotary_factor 0.25), Q/K/V biases (use_qkv_bias), optional parallel
// residual under one norm.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void stablelm_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.norm = NormKind::LayerNorm;
    c.boolean("use_qkv_bias", &m.qkv_bias);
    c.boolean("use_parallel_residual", &m.parallel_attn);
    if (m.parallel_attn) m.norms_per_layer = 1;
    bool qk_ln = false;
    if (c.boolean("qk_layernorm", &qk_ln) && qk_ln)
        throw_error(STK_E_UNSUPPORTED, "%s: stablelm with \"qk_layernorm\": true (one LayerNorm per head) is not converted",
                    c.source().c_str());
}

static const char *const kTypes[] = {"stablelm", nullptr};
static const char *const kArchs[] = {"StableLmForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static void stablelm_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("use_parallel_residual")) j.b("use_parallel_residual", v->boolean());
    j.b("use_qkv_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    // Per-head Q/K LayerNorms (StableLM 2 12B) are stacked as attn_q_norm / attn_k_norm, which
    // no rename maps: such a file is refused by that tensor's name.
}
static const char *const kStablelmGgufArchs[] = {"stablelm", nullptr};
extern const GgufFamily kGgufStablelm = {
    .archs = kStablelmGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .rotary_pct = true,
    .config = stablelm_gguf_config,
};

extern const FamilyDef kStablelmFamily = {
    "stablelm",
    kTypes,
    kArchs,
    &kGgufStablelm,
    "llama names with LayerNorm (bias), partial rotary, Q/K/V biases",
    "tests/fixtures/families/stablelm",
    false,
    nullptr,
    stablelm_defaults,
    nullptr,
    llama_roles,
};

}  // namespace stk
