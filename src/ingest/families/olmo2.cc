// OLMo 2 (allenai/OLMo-2-0425-1B): norms on the sublayer outputs only (post_attention_layernorm,
// post_feedforward_layernorm), RMS q_norm / k_norm over all heads at once.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void olmo2_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.norms_per_layer = 0;
    m.post_norms = true;
    m.qk_norm = QkNorm::Whole;
    llama_bias_keys(c, m);
}

static void olmo2_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    llama_ends_roles(p);
    p.norm(lp + "post_attention_layernorm", NormSlot::PostAttn);
    p.norm(lp + "post_feedforward_layernorm", NormSlot::PostFfn);
    qk_norm_roles(p, lp + "self_attn\\.");
    llama_qkvo_roles(p, lp);
    llama_mlp_roles(p, lp);
}

static const char *const kTypes[] = {"olmo2", nullptr};
static const char *const kArchs[] = {"Olmo2ForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kOlmo2GgufArchs[] = {"olmo2", nullptr};
extern const GgufFamily kGgufOlmo2 = {.archs = kOlmo2GgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals};

extern const FamilyDef kOlmo2Family = {
    "olmo2",
    kTypes,
    kArchs,
    &kGgufOlmo2,
    "post-sublayer RMSNorms only, q/k RMSNorms over all heads",
    "tests/fixtures/families/olmo2",
    false,
    nullptr,
    olmo2_defaults,
    nullptr,
    olmo2_roles,
};

}  // namespace stk
