// GPT-BigCode / StarCoder (bigcode/gpt_bigcode-santacoder, starcoderbase-1b): the GPT-2 layout in
// nn.Linear (stored [out, in]) with multi-query attention: c_attn is [Q; K; V] with one K/V head.
#include "ingest/family.h"
#include "ingest/gguf_family.h"
#include "core/error.h"

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

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kStarcoderLayer[] = {
    {"attn_norm", "transformer.h.{L}.ln_1"},          {"attn_qkv", "transformer.h.{L}.attn.c_attn"},
    {"attn_output", "transformer.h.{L}.attn.c_proj"}, {"ffn_norm", "transformer.h.{L}.ln_2"},
    {"ffn_up", "transformer.h.{L}.mlp.c_fc"},         {"ffn_down", "transformer.h.{L}.mlp.c_proj"},
};
// GPTBigCodeConfig spellings.  StarCoderModel writes feed_forward_length = 4 x hidden and
// head_count_kv = 1 whatever the model has: the FFN width from ffn_up, multi-query from attn_qkv's
// rows (d + 2 head_dim: one K/V head; 3d: one per head).
static std::string gpt_bigcode_gguf_config(const GgufMeta &m) {
    const std::string &path = m.path;
    const uint64_t d = m.d, heads = m.heads;
    const GgufTensorInfo *up = m.tensor("blk.0.ffn_up.weight"), *qkv = m.tensor("blk.0.attn_qkv.weight");
    if (!up || up->shape.size() != 2 || !qkv || qkv->shape.size() != 2 || !heads || d % heads)
        throw_error(STK_E_CORRUPT,
                    "%s: no 2-D blk.0.ffn_up.weight / blk.0.attn_qkv.weight: the FFN width or "
                    "the K/V heads are unknown",
                    path.c_str());
    const uint64_t hd = d / heads;
    if (qkv->shape[0] != d + 2 * hd && qkv->shape[0] != 3 * d)
        throw_error(STK_E_CORRUPT,
                    "%s: GGUF tensor 'blk.0.attn_qkv.weight' (offset %llu): %llu rows, neither "
                    "multi-query (%llu) nor one K/V per head (%llu)",
                    path.c_str(), (unsigned long long)qkv->data_offset, (unsigned long long)qkv->shape[0],
                    (unsigned long long)(d + 2 * hd), (unsigned long long)(3 * d));
    GgufJson g;
    g.str("model_type", "gpt_bigcode");
    g.u("vocab_size", m.vocab);
    g.u("n_embd", d);
    g.u("n_layer", m.layers);
    g.u("n_head", heads);
    g.u("n_inner", up->shape[0]);
    g.b("multi_query", qkv->shape[0] == d + 2 * hd);
    const GgufTensorInfo *pos = m.tensor("position_embd.weight");
    if (pos && pos->shape.size() == 2) g.u("n_positions", pos->shape[0]);
    else if (const GgufValue *v = m.get("context_length")) g.u("n_positions", v->as_uint());
    if (const GgufValue *v = m.get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
    g.b("tie_word_embeddings", m.tied_head());
    return g.done();
}
static const char *const kStarcoderGgufArchs[] = {"starcoder", nullptr};
extern const GgufFamily kGgufGptBigcode = {
    .archs = kStarcoderGgufArchs,
    .layer = kStarcoderLayer,
    .globals = {"transformer.wte", "transformer.wpe", nullptr, "transformer.ln_f", "lm_head"},
    .whole_config = gpt_bigcode_gguf_config,
};

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
