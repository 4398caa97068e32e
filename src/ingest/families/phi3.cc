// Phi-3 / Phi-3.5 / Phi-4-mini (microsoft/Phi-3-mini-4k-instruct): the fused qkv_proj as [Q; K; V]
// and the fused gate_up_proj as [gate; up], RMSNorm, gated SiLU, longrope scaling,
// partial_rotary_factor (Phi-4-mini).
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void phi3_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qkv_layout = QkvLayout::Concat;
    llama_bias_keys(c, m);
}

static void phi3_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    llama_ends_roles(p);
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
    p.add(lp + "self_attn\\.qkv_proj\\.weight", Role::QKV).layout = QkvLayout::Concat;
    p.add(lp + "self_attn\\.qkv_proj\\.bias", Role::QKV_B).layout = QkvLayout::Concat;
    p.linear(lp + "self_attn\\.o_proj", Role::O, Role::O_B);
    p.add(lp + "mlp\\.gate_up_proj\\.weight", Role::FFN_W13);
    p.linear(lp + "mlp\\.down_proj", Role::FFN_W2, Role::FFN_B2);
}

static const char *const kTypes[] = {"phi3", nullptr};
static const char *const kArchs[] = {"Phi3ForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kPhi3Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},    {"attn_qkv", "model.layers.{L}.self_attn.qkv_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"}, {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "model.layers.{L}.mlp.gate_up_proj"},      {"ffn_down", "model.layers.{L}.mlp.down_proj"},
};
static void phi3_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    if (const GgufValue *v = m.get("rope.scaling.original_context_length")) j.u("original_max_position_embeddings", v->as_uint());
}
static const char *const kPhi3GgufArchs[] = {"phi3", nullptr};
extern const GgufFamily kGgufPhi3 = {
    .archs = kPhi3GgufArchs,
    .layer = kPhi3Layer,
    .globals = kGgufLlamaGlobals,
    .rotary_pct = true,
    .config = phi3_gguf_config,
};

extern const FamilyDef kPhi3Family = {
    "phi3",
    kTypes,
    kArchs,
    &kGgufPhi3,
    "fused qkv_proj [Q; K; V] and gate_up_proj [gate; up] split, RMSNorm, longrope",
    "tests/fixtures/families/phi3",
    false,
    nullptr,
    phi3_defaults,
    nullptr,
    phi3_roles,
};

}  // namespace stk
