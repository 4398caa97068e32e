// GPT-2 (openai-community/gpt2): learned positions, LayerNorm, Conv1D weights stored [in, out],
// the fused c_attn as [Q; K; V].
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void gpt2_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.norm = NormKind::LayerNorm;
    m.positions = PosKind::Learned;
    m.qkv_layout = QkvLayout::Concat;
    set_activation(m, "gelu_new");
}

static void gpt2_roles(RoleRules &p, const ModelConfig &) {
    // Hub GPT-2 files name tensors "h.0..." (safetensors) or "transformer.h.0..." (some .bin).
    const std::string pre = "(?:transformer\\.)?";
    const std::string lp = pre + "h\\." STK_LAYER "\\.";
    p.add(pre + "wte\\.weight", Role::EMB);
    p.add(pre + "wpe\\.weight", Role::POS_EMB);
    p.norm(lp + "ln_1", NormSlot::Attn);
    p.norm(lp + "ln_2", NormSlot::Ffn);
    RoleRule &qkv = p.add(lp + "attn\\.c_attn\\.weight", Role::QKV);
    qkv.layout = QkvLayout::Concat;
    qkv.transpose = true;
    p.add(lp + "attn\\.c_attn\\.bias", Role::QKV_B).layout = QkvLayout::Concat;
    p.linear(lp + "attn\\.c_proj", Role::O, Role::O_B, true);
    p.linear(lp + "mlp\\.c_fc", Role::FFN_W1, Role::FFN_B1, true);
    p.linear(lp + "mlp\\.c_proj", Role::FFN_W2, Role::FFN_B2, true);
    p.add(lp + "attn\\.(?:bias|masked_bias)", Role::BUFFER);
    p.norm(pre + "ln_f", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"gpt2", nullptr};
static const char *const kArchs[] = {"GPT2LMHeadModel", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kGpt2Layer[] = {
    {"attn_norm", "h.{L}.ln_1"}, {"attn_qkv", "h.{L}.attn.c_attn"}, {"attn_output", "h.{L}.attn.c_proj"},
    {"ffn_norm", "h.{L}.ln_2"},  {"ffn_up", "h.{L}.mlp.c_fc"},      {"ffn_down", "h.{L}.mlp.c_proj"},
};
static const char *const kGpt2Transposed[] = {"attn_qkv", "attn_output", "ffn_up", "ffn_down", nullptr};
// GPT2Config spellings.  GPT2Model writes feed_forward_length = 4 x n_embd whatever n_inner is:
// n_inner from ffn_up.
static std::string gpt2_gguf_config(const GgufMeta &m) {
    GgufJson g;
    g.str("model_type", "gpt2");
    g.u("vocab_size", m.vocab);
    g.u("n_embd", m.d);
    g.u("n_layer", m.layers);
    g.u("n_head", m.heads);
    g.u("n_inner", m.ffn_width_from_tensors());
    const GgufTensorInfo *pos = m.tensor("position_embd.weight");
    if (pos && pos->shape.size() == 2) g.u("n_positions", pos->shape[0]);
    else if (const GgufValue *v = m.get("context_length")) g.u("n_positions", v->as_uint());
    if (const GgufValue *v = m.get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
    g.b("tie_word_embeddings", m.tied_head());
    return g.done();
}
static const char *const kGpt2GgufArchs[] = {"gpt2", nullptr};
extern const GgufFamily kGgufGpt2 = {
    .archs = kGpt2GgufArchs,
    .layer = kGpt2Layer,
    .globals = {"wte", "wpe", nullptr, "ln_f", "lm_head"},
    .transposed = kGpt2Transposed,
    .whole_config = gpt2_gguf_config,
};

extern const FamilyDef kGpt2Family = {
    "gpt2",
    kTypes,
    kArchs,
    &kGgufGpt2,
    "Conv1D weights transposed to [out, in]; fused c_attn split into Q, K, V; learned positions",
    "tests/data/models/gpt2",
    true,
    nullptr,
    gpt2_defaults,
    nullptr,
    gpt2_roles,
};

}  // namespace stk
