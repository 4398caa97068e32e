// InternLM2 / 2.5 (internlm/internlm2_5-7b-chat; trust_remote_code, not in transformers): the llama
// block under its own names (tok_embeddings, attention.wqkv / wo, feed_forward.w1 gate / w3 up /
// w2 down, attention_norm, ffn_norm, output) with the fused wqkv in the grouped layout its
// modeling_internlm2.py splits: per kv head, its q heads, then k, then v.  "bias" gives wqkv and wo
// biases.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void internlm2_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qkv_bias = m.o_bias = true;  // InternLM2Config's bias defaults to true
    bool b;
    if (c.boolean("bias", &b)) m.qkv_bias = m.o_bias = b;
    m.qkv_layout = QkvLayout::Grouped;
}

static void internlm2_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    p.add("model\\.tok_embeddings\\.weight", Role::EMB);
    p.norm(lp + "attention_norm", NormSlot::Attn);
    p.norm(lp + "ffn_norm", NormSlot::Ffn);
    p.add(lp + "attention\\.wqkv\\.weight", Role::QKV).layout = QkvLayout::Grouped;
    p.add(lp + "attention\\.wqkv\\.bias", Role::QKV_B).layout = QkvLayout::Grouped;
    p.linear(lp + "attention\\.wo", Role::O, Role::O_B);
    p.linear(lp + "feed_forward\\.w1", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "feed_forward\\.w3", Role::FFN_W3, Role::FFN_B3);
    p.linear(lp + "feed_forward\\.w2", Role::FFN_W2, Role::FFN_B2);
    p.norm("model\\.norm", NormSlot::Final);
    p.add("output\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"internlm2", nullptr};
static const char *const kArchs[] = {"InternLM2ForCausalLM", nullptr};
extern const GgufFamily kGgufInternlm2;  // its GGUF part (families/gguf_legacy.cc for now)

extern const FamilyDef kInternlm2Family = {
    "internlm2",
    kTypes,
    kArchs,
    &kGgufInternlm2,
    "llama block under InternLM2's names, fused wqkv in its grouped layout [per kv head: q heads, k, v] split",
    "tests/fixtures/families/internlm2",
    false,
    nullptr,
    internlm2_defaults,
    nullptr,
    internlm2_roles,
};

}  // namespace stk
