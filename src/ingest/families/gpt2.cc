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
extern const GgufFamily kGgufGpt2;  // its GGUF part (families/gguf_legacy.cc for now)

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
