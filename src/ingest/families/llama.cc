// Llama 1/2/3.x (meta-llama/Llama-3.2-1B): RMSNorm, RoPE (llama3 rope_scaling), GQA, gated SiLU FFN.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void llama_family_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    llama_bias_keys(c, m);
}

static const char *const kTypes[] = {"llama", nullptr};
static const char *const kArchs[] = {"LlamaForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static std::string llama_gguf_model_type(const GgufMeta &m) { return m.experts > 0 ? "mixtral" : "llama"; }
static const char *const kLlamaGgufArchs[] = {"llama", nullptr};
extern const GgufFamily kGgufLlama = {
    .archs = kLlamaGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufMixtralMoe,
    .permute_qk = true,
    .experts_key = "num_local_experts",
    .model_type = llama_gguf_model_type,
    .config = gguf_llama_bias_keys,
};

extern const FamilyDef kLlamaFamily = {
    "llama",
    kTypes,
    kArchs,
    &kGgufLlama,
    "gated FFN (gate W1, down W2, up W3), RMSNorm, RoPE, GQA",
    "tests/data/models/llama",
    false,
    nullptr,
    llama_family_defaults,
    nullptr,
    llama_roles,
};

}  // namespace stk
