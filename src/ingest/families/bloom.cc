// BLOOM (bigscience/bloom-560m): ALiBi, a LayerNorm after the embedding, fused query_key_value per head.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void bloom_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.positions = PosKind::Alibi;
    m.emb_norm = true;
    m.qkv_layout = QkvLayout::PerHead;
    set_activation(m, "gelu_pytorch_tanh");  // bloom_gelu_forward: the tanh approximation
}

void bloom_roles(RoleRules &p, const ModelConfig &) {
    const std::string pre = "(?:transformer\\.)?";
    const std::string lp = pre + "h\\." STK_LAYER "\\.";
    p.add(pre + "word_embeddings\\.weight", Role::EMB);
    p.norm(pre + "word_embeddings_layernorm", NormSlot::Emb);
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "ln_attn", NormSlot::Attn);  // Falcon new_decoder_architecture
    p.norm(lp + "ln_mlp", NormSlot::Ffn);
    p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
    p.add(lp + "self_attention\\.query_key_value\\.weight", Role::QKV).layout = QkvLayout::FromConfig;
    p.add(lp + "self_attention\\.query_key_value\\.bias", Role::QKV_B).layout = QkvLayout::FromConfig;
    p.linear(lp + "self_attention\\.dense", Role::O, Role::O_B);
    p.linear(lp + "mlp\\.dense_h_to_4h", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.dense_4h_to_h", Role::FFN_W2, Role::FFN_B2);
    p.add(lp + "self_attention\\.rotary_emb\\.inv_freq", Role::ROPE_ALPHA).buffer = true;
    p.norm(pre + "ln_f", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"bloom", nullptr};
static const char *const kArchs[] = {"BloomForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
// BLOOM under transformers' names today (BloomForCausalLM's save_pretrained: transformer.h.N...;
// the hub's older checkpoints have bare h.N..., which the family reads too: docs/decisions.md).
static const GgufRename kBloomLayer[] = {
    {"attn_norm", "transformer.h.{L}.input_layernorm"},
    {"attn_qkv", "transformer.h.{L}.self_attention.query_key_value"},
    {"attn_output", "transformer.h.{L}.self_attention.dense"},
    {"ffn_norm", "transformer.h.{L}.post_attention_layernorm"},
    {"ffn_up", "transformer.h.{L}.mlp.dense_h_to_4h"},
    {"ffn_down", "transformer.h.{L}.mlp.dense_4h_to_h"},
};
static void bloom_gguf_config(const GgufMeta &m, GgufJson &j) {
    // BloomModel writes seq_length, or n_embed where the config has none (transformers' BloomConfig
    // has none: ALiBi has no length): that placeholder is no context length.
    if (const GgufValue *v = m.get("context_length"); v && v->as_uint() != m.d) j.u("seq_length", v->as_uint());
    j.u("n_head", m.heads);
}
static const char *const kBloomGgufArchs[] = {"bloom", nullptr};
extern const GgufFamily kGgufBloom = {
    .archs = kBloomGgufArchs,
    .layer = kBloomLayer,
    .globals = {"transformer.word_embeddings", nullptr, "transformer.word_embeddings_layernorm", "transformer.ln_f",
                "lm_head"},
    .fused_qkv = true,
    .kv_key = nullptr,
    .context_key = nullptr,
    .config = bloom_gguf_config,
};

extern const FamilyDef kBloomFamily = {
    "bloom",
    kTypes,
    kArchs,
    &kGgufBloom,
    "fused query_key_value (per head), embedding LayerNorm, ALiBi",
    "tests/data/models/bloom",
    true,
    nullptr,
    bloom_defaults,
    nullptr,
    bloom_roles,
};

}  // namespace stk
