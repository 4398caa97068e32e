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
extern const GgufFamily kGgufLlama;  // its GGUF part (families/gguf_legacy.cc for now)

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
