// Gemma 3 text (google/gemma-3-270m, gemma-3-1b-pt; model_type gemma3_text): RMSNorm whose gain is
// 1 + weight (Gemma3RMSNorm), sandwich norms (input / post_attention around attention,
// pre_feedforward / post_feedforward around the FFN), per-head q_norm / k_norm, the embedding
// scaled by sqrt(hidden_size), gated gelu_pytorch_tanh FFN, tied head, GQA with head_dim
// independent of the width, attention scale query_pre_attn_scalar^-1/2, and layers that
// alternate a sliding window (RoPE base rope_local_base_freq) with full attention (rope_theta,
// rope_scaling).
#include <cmath>

#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void gemma3_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.tied_embeddings = true;
    set_activation(m, "gelu_pytorch_tanh");
    m.norm_offset = 1.0;
    m.post_norms = true;
    m.qk_norm = QkNorm::PerHead;
    m.rope_theta = 1000000.0;      // Gemma3TextConfig.default_theta["global"]
    m.rope_local_theta = 10000.0;  // ["local"]
    m.sliding_window = 4096;
    m.attn_scale = 1.0 / 16;  // query_pre_attn_scalar 256
}

static void gemma3_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.emb_multiplier = std::sqrt(double(m.d_model));
    llama_bias_keys(c, m);
    uint64_t v;
    if (c.u64("sliding_window", &v)) m.sliding_window = uint32_t(v < kMaxPositions ? v : kMaxPositions);
    if (c.u64("query_pre_attn_scalar", &v) && v > 0) m.attn_scale = 1.0 / std::sqrt(double(v));
    c.f64("attn_logit_softcapping", &m.attn_softcap);
    c.f64("final_logit_softcapping", &m.final_softcap);
    uint64_t pattern = 6;
    c.u64("sliding_window_pattern", &pattern);
    read_sliding_layers(c, m, uint32_t(pattern));
}

void gemma_sandwich_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    llama_ends_roles(p);
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "post_attention_layernorm", NormSlot::PostAttn);
    p.norm(lp + "pre_feedforward_layernorm", NormSlot::Ffn);
    p.norm(lp + "post_feedforward_layernorm", NormSlot::PostFfn);
    qk_norm_roles(p, lp + "self_attn\\.");
    llama_qkvo_roles(p, lp);
    llama_mlp_roles(p, lp);
}

static const char *const kTypes[] = {"gemma3_text", nullptr};
static const char *const kArchs[] = {"Gemma3ForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static void gemma3_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    if (const GgufValue *v = m.get("final_logit_softcapping")) j.f("final_logit_softcapping", *v);
    if (const GgufValue *v = m.get("attn_logit_softcapping")) j.f("attn_logit_softcapping", *v);
    if (const GgufValue *v = m.get("attention.key_length")) j.u("query_pre_attn_scalar", v->as_uint());
}
static const char *const kGemma3GgufArchs[] = {"gemma3", nullptr};
extern const GgufFamily kGgufGemma3 = {
    .archs = kGemma3GgufArchs,
    .layer = kGgufGemma3Layer,
    .globals = kGgufLlamaGlobals,
    .norm_plus_one = true,
    .config = gemma3_gguf_config,
};

extern const FamilyDef kGemma3Family = {
    "gemma3",
    kTypes,
    kArchs,
    &kGgufGemma3,
    "sandwich RMSNorms with gain 1 + w, per-head q/k norms, embedding x sqrt(d), local/global RoPE bases, "
    "alternating sliding window (approximated: full attention)",
    "tests/fixtures/families/gemma3",
    false,
    nullptr,
    gemma3_defaults,
    gemma3_finish,
    gemma_sandwich_roles,
};

}  // namespace stk
