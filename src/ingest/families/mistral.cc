// Mistral (mistralai/Mistral-7B-v0.1): the llama layout; sliding_window attention on every layer
// (v0.1; later versions set it null).
#include "ingest/family.h"

namespace stk {

static void mistral_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    llama_bias_keys(c, m);
}

static void mistral_finish(const ConfigReader &c, const std::string &, ModelConfig &m) { read_sliding_window_all(c, m); }

static const char *const kTypes[] = {"mistral", nullptr};
static const char *const kArchs[] = {"MistralForCausalLM", nullptr};

extern const FamilyDef kMistralFamily = {
    "mistral",
    kTypes,
    kArchs,
    nullptr,  // no GGUF part: GGUF writes Mistral as "llama" (the llama family's)
    "as llama; sliding_window on every layer (Mistral-7B-v0.1; approximated: full attention)",
    "tests/fixtures/families/mistral",
    false,
    nullptr,
    mistral_defaults,
    mistral_finish,
    llama_roles,
};

}  // namespace stk
