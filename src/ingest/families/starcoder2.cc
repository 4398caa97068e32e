// StarCoder2 (bigcode/starcoder2-3b): LayerNorm with bias, biases everywhere (use_bias), plain gelu
// (tanh) FFN c_fc / c_proj, GQA, a sliding window on every layer.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void starcoder2_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.norm = NormKind::LayerNorm;
    m.ffn_kind = FfnKind::Plain;
    m.tied_embeddings = true;
    m.qkv_bias = true;
    c.boolean("use_bias", &m.qkv_bias);
    m.o_bias = m.mlp_bias = m.qkv_bias;
    set_activation(m, "gelu_pytorch_tanh");
}

static void starcoder2_finish(const ConfigReader &c, const std::string &, ModelConfig &m) { read_sliding_window_all(c, m); }

static void starcoder2_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    llama_attention_roles(p, lp);
    p.linear(lp + "mlp\\.c_fc", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.c_proj", Role::FFN_W2, Role::FFN_B2);
    p.norm("model\\.norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"starcoder2", nullptr};
static const char *const kArchs[] = {"Starcoder2ForCausalLM", nullptr};
extern const GgufFamily kGgufStarcoder2;  // its GGUF part (families/gguf_legacy.cc for now)

extern const FamilyDef kStarcoder2Family = {
    "starcoder2",
    kTypes,
    kArchs,
    &kGgufStarcoder2,
    "LayerNorm, biases, plain gelu FFN, GQA, sliding window (approximated: full attention)",
    "tests/fixtures/families/starcoder2",
    false,
    nullptr,
    starcoder2_defaults,
    starcoder2_finish,
    starcoder2_roles,
};

}  // namespace stk
