// GPT-BigCode / StarCoder (bigcode/gpt_bigcode-santacoder, starcoderbase-1b): the GPT-2 layout in
// nn.Linear (stored [out, in]) with multi-query attention: c_attn is [Q; K; V] with one K/V head.
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void bigcode_kv_heads(const ConfigReader &c, const std::string &, ModelConfig &m) {
    bool mq = true;
    c.boolean("multi_query", &mq);
    m.n_kv_heads = mq ? 1 : m.n_heads;
}

static void bigcode_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.positions = PosKind::Learned;
    m.qkv_layout = QkvLayout::Concat;
    set_activation(m, "gelu_pytorch_tanh");
}

static void bigcode_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "transformer\\.h\\." STK_LAYER "\\.";
    p.add("transformer\\.wte\\.weight", Role::EMB);
    p.add("transformer\\.wpe\\.weight", Role::POS_EMB);
    p.norm(lp + "ln_1", NormSlot::Attn);
    p.norm(lp + "ln_2", NormSlot::Ffn);
    p.add(lp + "attn\\.c_attn\\.weight", Role::QKV).layout = QkvLayout::Concat;
    p.add(lp + "attn\\.c_attn\\.bias", Role::QKV_B).layout = QkvLayout::Concat;
    p.linear(lp + "attn\\.c_proj", Role::O, Role::O_B);
    p.linear(lp + "mlp\\.c_fc", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.c_proj", Role::FFN_W2, Role::FFN_B2);
    p.add(lp + "attn\\.(?:bias|masked_bias)", Role::BUFFER);
    p.norm("transformer\\.ln_f", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"gpt_bigcode", nullptr};
static const char *const kArchs[] = {"GPTBigCodeForCausalLM", nullptr};
extern const GgufFamily kGgufGptBigcode;  // its GGUF part (families/gguf_legacy.cc for now)

extern const FamilyDef kGptBigcodeFamily = {
    "gpt_bigcode",
    kTypes,
    kArchs,
    &kGgufGptBigcode,
    "GPT-2 layout in nn.Linear, multi-query fused c_attn [Q; K; V]",
    "tests/fixtures/families/gpt_bigcode",
    true,
    bigcode_kv_heads,
    bigcode_defaults,
    nullptr,
    bigcode_roles,
};

}  // namespace stk
