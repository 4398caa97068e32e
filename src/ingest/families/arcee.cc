// Arcee AFM (arcee-ai/AFM-4.5B): the llama attention with a plain (ungated) FFN up_proj / down_proj
// and the ReLU^2 activation; RoPE with yarn scaling on the long-context checkpoints.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void arcee_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.ffn_kind = FfnKind::Plain;
    set_activation(m, "relu2");
    llama_bias_keys(c, m);
}

static void arcee_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    llama_ends_roles(p);
    llama_attention_roles(p, lp);
    p.linear(lp + "mlp\\.up_proj", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.down_proj", Role::FFN_W2, Role::FFN_B2);
}

static const char *const kTypes[] = {"arcee", nullptr};
static const char *const kArchs[] = {"ArceeForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const char *const kArceeGgufArchs[] = {"arcee", nullptr};
extern const GgufFamily kGgufArcee = {.archs = kArceeGgufArchs,
                                      .layer = kGgufLlamaLayer,
                                      .globals = kGgufLlamaGlobals,
                                      .permute_qk = true,
                                      .config = gguf_llama_bias_keys};

extern const FamilyDef kArceeFamily = {
    "arcee",
    kTypes,
    kArchs,
    &kGgufArcee,
    "llama attention, plain ReLU^2 FFN (up_proj, down_proj)",
    "tests/fixtures/families/arcee",
    false,
    nullptr,
    arcee_defaults,
    nullptr,
    arcee_roles,
};

}  // namespace stk
