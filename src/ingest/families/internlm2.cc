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

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kInternlm2Layer[] = {
    {"attn_norm", "model.layers.{L}.attention_norm"}, {"ffn_norm", "model.layers.{L}.ffn_norm"},
    {"attn_output", "model.layers.{L}.attention.wo"}, {"ffn_gate", "model.layers.{L}.feed_forward.w1"},
    {"ffn_up", "model.layers.{L}.feed_forward.w3"},   {"ffn_down", "model.layers.{L}.feed_forward.w2"},
};
// wqkv, per kv head [its q heads; k; v], q / k rows permuted: a = heads, b = kv heads, c = head_dim.
static void internlm2_qkv_plan(GgufGatherPlan &g) {
    const ModelConfig &cfg = *g.cfg;
    const TensorRef &s0 = *g.src[0];
    const uint64_t hd = cfg.head_dim, q = uint64_t(cfg.n_heads) * hd, kv = uint64_t(cfg.n_kv_heads) * hd;
    g.dims.a = cfg.n_heads, g.dims.b = cfg.n_kv_heads, g.dims.c = hd;
    const uint64_t want[3] = {q, kv, kv};
    for (uint32_t k = 0; k < 3; k++)
        if (g.src[k]->shape.size() != 2 || g.src[k]->shape[0] != want[k] || g.src[k]->shape[1] != s0.shape.back())
            g.refuse(*g.src[k], "shape " + g.dims_of(*g.src[k]) + ", not the [" + std::to_string(want[k]) + ", d] the heads give");
    if (hd % 2 || g.dims.b == 0 || g.dims.a % g.dims.b) g.refuse(s0, "heads that LlamaModel.permute cannot have written");
    g.shape = {q + 2 * kv, s0.shape[1]};
}
static std::pair<uint32_t, uint64_t> internlm2_qkv_row(const GgufGatherDims &x, uint64_t r) {
    const uint64_t qpk = x.a / x.b, g = r / ((qpk + 2) * x.c), slot = (r / x.c) % (qpk + 2), w = r % x.c, half = x.c / 2;
    const uint64_t unperm = 2 * (w % half) + w / half;  // LlamaModel.permute undone
    if (slot < qpk) return {0, (g * qpk + slot) * x.c + unperm};
    if (slot == qpk) return {1, g * x.c + unperm};
    return {2, g * x.c + w};
}
static const GgufGather kInternlm2Qkv = {"model.layers.{L}.attention.wqkv.weight",
                                         {"attn_q.weight", "attn_k.weight", "attn_v.weight"},
                                         3,
                                         false,
                                         false,
                                         internlm2_qkv_plan,
                                         internlm2_qkv_row,
                                         nullptr};
static const GgufGather *const kInternlm2Gathers[] = {&kInternlm2Qkv, nullptr};
// InternLM2Model splits wqkv and cannot split a bias (it reshapes it as a matrix): none.
static void internlm2_gguf_config(const GgufMeta &, GgufJson &j) { j.b("bias", false); }
static const char *const kInternlm2GgufArchs[] = {"internlm2", nullptr};
extern const GgufFamily kGgufInternlm2 = {
    .archs = kInternlm2GgufArchs,
    .layer = kInternlm2Layer,
    .globals = {"model.tok_embeddings", nullptr, nullptr, "model.norm", "output"},
    .gathers = kInternlm2Gathers,
    .config = internlm2_gguf_config,
};

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
