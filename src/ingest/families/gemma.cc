// Gemma (google/gemma-2b): RMSNorm with gain 1 + w, the embedding x sqrt(d), gated gelu in its tanh
// form (the legacy hidden_act 'gelu' means it too, as GemmaConfig says), tied head.
#include <cmath>

#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void gemma_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.tied_embeddings = true;
    m.norm_offset = 1.0;
    set_activation(m, "gelu_pytorch_tanh");
}

static void gemma_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.emb_multiplier = std::sqrt(double(m.d_model));
    llama_bias_keys(c, m);
    if (std::string(m.activation) == "gelu") set_activation(m, "gelu_pytorch_tanh");
}

static const char *const kTypes[] = {"gemma", nullptr};
static const char *const kArchs[] = {"GemmaForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kGemmaGgufArchs[] = {"gemma", nullptr};
extern const GgufFamily kGgufGemma = {
    .archs = kGemmaGgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals, .norm_plus_one = true};

extern const FamilyDef kGemmaFamily = {
    "gemma",
    kTypes,
    kArchs,
    &kGgufGemma,
    "as llama, with RMSNorm gain 1 + w, embedding x sqrt(d), gelu (tanh) gate, tied head",
    "tests/fixtures/families/gemma",
    false,
    nullptr,
    gemma_defaults,
    gemma_finish,
    llama_roles,
};

}  // namespace stk
