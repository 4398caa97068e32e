// Qwen3 (Qwen/Qwen3-0.6B): the llama layout with per-head RMS q_norm / k_norm before RoPE.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void qwen3_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qk_norm = QkNorm::PerHead;
    llama_bias_keys(c, m);
}

static void qwen3_roles(RoleRules &p, const ModelConfig &m) {
    llama_roles(p, m);
    qk_norm_roles(p, "model\\.layers\\." STK_LAYER "\\.self_attn\\.");
}

static const char *const kTypes[] = {"qwen3", nullptr};
static const char *const kArchs[] = {"Qwen3ForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kQwen3GgufArchs[] = {"qwen3", nullptr};
extern const GgufFamily kGgufQwen3 = {.archs = kQwen3GgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals};

extern const FamilyDef kQwen3Family = {
    "qwen3", kTypes,         kArchs,  &kGgufQwen3,       "as llama, with per-head q/k RMSNorms", "tests/fixtures/families/qwen3", false,
    nullptr, qwen3_defaults, nullptr, qwen3_roles,
};

}  // namespace stk
