// Gemma 2 (google/gemma-2-2b): Gemma's norms and scaling with sandwich norms, attention logits
// soft-capped by attn_logit_softcapping and output logits by final_logit_softcapping, the scale
// query_pre_attn_scalar^-1/2, a sliding window on every other layer.
#include <cmath>

#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void gemma2_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.tied_embeddings = true;
    m.norm_offset = 1.0;
    m.post_norms = true;
    m.sliding_window = 4096;
    m.attn_scale = 1.0 / 16;  // query_pre_attn_scalar 256
    m.attn_softcap = 50;
    m.final_softcap = 30;
    set_activation(m, "gelu_pytorch_tanh");
}

static void gemma2_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.emb_multiplier = std::sqrt(double(m.d_model));
    llama_bias_keys(c, m);
    uint64_t v;
    if (c.u64("sliding_window", &v)) m.sliding_window = uint32_t(v < kMaxPositions ? v : kMaxPositions);
    if (c.u64("query_pre_attn_scalar", &v) && v > 0) m.attn_scale = 1.0 / std::sqrt(double(v));
    if (c.present("attn_logit_softcapping") && !c.f64("attn_logit_softcapping", &m.attn_softcap)) m.attn_softcap = 0;
    if (c.present("final_logit_softcapping") && !c.f64("final_logit_softcapping", &m.final_softcap)) m.final_softcap = 0;
    read_sliding_layers(c, m, 2);
}

static const char *const kTypes[] = {"gemma2", nullptr};
static const char *const kArchs[] = {"Gemma2ForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
// Gemma 2 / 3: soft-capping and the window read back; no key records query_pre_attn_scalar:
// llama.cpp scales by the head size, except for Gemma 2 27B (46 layers), where it takes hidden /
// heads (that model's 144).
static void gemma2_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    if (const GgufValue *v = m.get("final_logit_softcapping")) j.f("final_logit_softcapping", *v);
    if (const GgufValue *v = m.get("attn_logit_softcapping")) j.f("attn_logit_softcapping", *v);
    if (m.layers == 46 && m.heads) j.u("query_pre_attn_scalar", m.d / m.heads);
    else if (const GgufValue *v = m.get("attention.key_length")) j.u("query_pre_attn_scalar", v->as_uint());
}
static const char *const kGemma2GgufArchs[] = {"gemma2", nullptr};
extern const GgufFamily kGgufGemma2 = {
    .archs = kGemma2GgufArchs,
    .layer = kGgufGemma3Layer,
    .globals = kGgufLlamaGlobals,
    .norm_plus_one = true,
    .config = gemma2_gguf_config,
};

extern const FamilyDef kGemma2Family = {
    "gemma2",
    kTypes,
    kArchs,
    &kGgufGemma2,
    "Gemma with sandwich norms, tanh soft-capping of attention and output logits (approximated: uncapped), "
    "sliding window on every other layer (approximated: full attention)",
    "tests/fixtures/families/gemma2",
    false,
    nullptr,
    gemma2_defaults,
    gemma2_finish,
    gemma_sandwich_roles,
};

}  // namespace stk
