// Qwen2 / Qwen2.5 (Qwen/Qwen2.5-0.5B): the llama layout with Q/K/V biases.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void qwen2_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qkv_bias = true;
}

static const char *const kTypes[] = {"qwen2", nullptr};
static const char *const kArchs[] = {"Qwen2ForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kQwen2GgufArchs[] = {"qwen2", nullptr};
extern const GgufFamily kGgufQwen2 = {.archs = kQwen2GgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals};

extern const FamilyDef kQwen2Family = {
    "qwen2", kTypes,         kArchs,  &kGgufQwen2,       "as llama, with Q/K/V biases", "tests/fixtures/families/qwen2", false,
    nullptr, qwen2_defaults, nullptr, llama_roles,
};

}  // namespace stk
