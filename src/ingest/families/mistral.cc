// Mistral (mistralai/Mistral-7B-v0.1): the llama layout; sliding_window attention.
#include "ingest/family.h"

namespace stk {

static void mistral_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    llama_bias_keys(c, m);
}

static const char *const kTypes[] = {"mistral", nullptr};
static const char *const kArchs[] = {"MistralForCausalLM", nullptr};
static const char *const kNone[] = {nullptr};  // GGUF writes Mistral as "llama"

extern const FamilyDef kMistralFamily = {
    "mistral", kTypes, kArchs, kNone, "as llama", "", false, nullptr, mistral_defaults, nullptr, llama_roles,
};

}  // namespace stk
