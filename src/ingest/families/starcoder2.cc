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

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kStarcoder2Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "model.layers.{L}.mlp.c_fc"},
    {"ffn_down", "model.layers.{L}.mlp.c_proj"},
};
static void starcoder2_gguf_config(const GgufMeta &m, GgufJson &j) {
    j.b("use_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
}
static const char *const kStarcoder2GgufArchs[] = {"starcoder2", nullptr};
extern const GgufFamily kGgufStarcoder2 = {
    .archs = kStarcoder2GgufArchs,
    .layer = kStarcoder2Layer,
    .globals = kGgufLlamaGlobals,
    .config = starcoder2_gguf_config,
};

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
