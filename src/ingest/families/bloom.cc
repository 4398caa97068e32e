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
extern const GgufFamily kGgufBloom;  // its GGUF part (families/gguf_legacy.cc for now)

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
