// GPT-NeoX / Pythia (EleutherAI/pythia-410m): fused query_key_value laid out per head, parallel
// attention and FFN (use_parallel_residual), partial rotary (rotary_pct), LayerNorm.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void neox_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.tied_embeddings = false;
    m.parallel_attn = true;
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.positions = PosKind::Rope;
    m.rope_theta = 10000.0;
    m.qkv_layout = QkvLayout::PerHead;
    set_activation(m, "gelu");
    c.boolean("use_parallel_residual", &m.parallel_attn);
    bool b = true;
    if (c.boolean("attention_bias", &b)) m.qkv_bias = m.o_bias = b;
}

static void neox_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "gpt_neox\\.layers\\." STK_LAYER "\\.";
    p.add("gpt_neox\\.embed_in\\.weight", Role::EMB);
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
    p.add(lp + "attention\\.query_key_value\\.weight", Role::QKV).layout = QkvLayout::FromConfig;
    p.add(lp + "attention\\.query_key_value\\.bias", Role::QKV_B).layout = QkvLayout::FromConfig;
    p.linear(lp + "attention\\.dense", Role::O, Role::O_B);
    p.linear(lp + "mlp\\.dense_h_to_4h", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.dense_4h_to_h", Role::FFN_W2, Role::FFN_B2);
    p.add(lp + "attention\\.(?:bias|masked_bias)", Role::BUFFER);
    p.add(lp + "attention\\.rotary_emb\\.inv_freq", Role::ROPE_ALPHA).buffer = true;
    p.norm("gpt_neox\\.final_layer_norm", NormSlot::Final);
    p.add("embed_out\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"gpt_neox", nullptr};
static const char *const kArchs[] = {"GPTNeoXForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kNeoxLayer[] = {
    {"attn_norm", "gpt_neox.layers.{L}.input_layernorm"},   {"attn_qkv", "gpt_neox.layers.{L}.attention.query_key_value"},
    {"attn_output", "gpt_neox.layers.{L}.attention.dense"}, {"ffn_norm", "gpt_neox.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "gpt_neox.layers.{L}.mlp.dense_h_to_4h"},    {"ffn_down", "gpt_neox.layers.{L}.mlp.dense_4h_to_h"},
};
static void neox_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("use_parallel_residual")) j.b("use_parallel_residual", v->boolean());
}
static const char *const kNeoxGgufArchs[] = {"gptneox", nullptr};
extern const GgufFamily kGgufGptNeox = {
    .archs = kNeoxGgufArchs,
    .layer = kNeoxLayer,
    .globals = {"gpt_neox.embed_in", nullptr, nullptr, "gpt_neox.final_layer_norm", "embed_out"},
    .fused_qkv = true,
    .rotary_pct = true,
    .config = neox_gguf_config,
};

extern const FamilyDef kGptNeoxFamily = {
    "gpt_neox",
    kTypes,
    kArchs,
    &kGgufGptNeox,
    "fused query_key_value (per head), parallel attention",
    "tests/data/models/gpt_neox",
    true,
    nullptr,
    neox_defaults,
    nullptr,
    neox_roles,
};

}  // namespace stk
