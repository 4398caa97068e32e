// Granite 3 (ibm-granite/granite-3.1-2b-instruct): the llama layout with multipliers on the
// embedding (embedding_multiplier), the attention logits (attention_multiplier replaces
// 1/sqrt(head_dim)), the residual branches (residual_multiplier) and the logits (1/logits_scaling).
// GraniteMoE (ibm-granite/granite-3.1-1b-a400m-instruct): the same with experts stored as 3-D
// block_sparse_moe.input_linear [E, 2F, D] ([gate; up] per expert) and output_linear [E, D, F],
// viewed one expert at a time (RoleRule::stacked), and a softmax over the top-k router logits
// (= softmax top-k renormalised: exact).
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void granite_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.tied_embeddings = true;
    llama_bias_keys(c, m);
    c.f64("embedding_multiplier", &m.emb_multiplier);
    c.f64("attention_multiplier", &m.attn_scale);
    c.f64("residual_multiplier", &m.residual_multiplier);
    double ls = 1;
    if (c.f64("logits_scaling", &ls) && ls != 0) m.logit_scale = 1 / ls;
}

static void granitemoe_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: granitemoe config without \"num_local_experts\"", c.source().c_str());
    m.norm_topk_prob = true;  // softmax over the top-k logits
}

static void granitemoe_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.", mp = lp + "block_sparse_moe\\.";
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    llama_attention_roles(p, lp);
    p.add(mp + "router\\.layer\\.weight", Role::ROUTER_GATE);
    p.add(mp + "router\\.weight", Role::ROUTER_GATE);  // transformers >= 5's own names
    p.add(mp + "input_linear\\.weight", Role::FFN_W13).stacked = true;
    p.add(mp + "experts\\.gate_up_proj", Role::FFN_W13).stacked = true;
    p.add(mp + "output_linear\\.weight", Role::FFN_W2).stacked = true;
    p.add(mp + "experts\\.down_proj", Role::FFN_W2).stacked = true;
    p.norm("model\\.norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"granite", nullptr};
static const char *const kArchs[] = {"GraniteForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kGraniteMoeNames[] = {
    {"ffn_gate_inp", "model.layers.{L}.block_sparse_moe.router.layer"},
    {"ffn_down_exps", "model.layers.{L}.block_sparse_moe.output_linear"},  // [E, D, F] as HF stores it
};
static const GgufRenames kGraniteMoe = kGraniteMoeNames;
// input_linear [E, 2F, D] = per expert [gate_e; up_e]: a = experts, b = F, c = D.
static void granite_gate_up_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 3 || g.src[1]->shape != s0.shape)
        g.refuse(*g.src[1], "gate and up expert stacks of shapes " + g.dims_of(s0) + " and " + g.dims_of(*g.src[1]) +
                                ", not two equal [experts, rows, cols]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1], g.dims.c = s0.shape[2];
    g.shape = {g.dims.a, 2 * g.dims.b, g.dims.c};
}
static std::pair<uint32_t, uint64_t> granite_gate_up_row(const GgufGatherDims &x, uint64_t r) {
    const uint64_t ex = r / (2 * x.b), j = r % (2 * x.b);
    return j < x.b ? std::pair<uint32_t, uint64_t>{0, ex * x.b + j} : std::pair<uint32_t, uint64_t>{1, ex * x.b + j - x.b};
}
static const GgufGather kGraniteGateUp = {"model.layers.{L}.block_sparse_moe.input_linear.weight",
                                          {"ffn_gate_exps.weight", "ffn_up_exps.weight", ""},
                                          2,
                                          false,
                                          false,
                                          granite_gate_up_plan,
                                          granite_gate_up_row,
                                          nullptr};
static const GgufGather *const kGraniteGathers[] = {&kGraniteGateUp, nullptr};
// GraniteModel writes the multipliers under llama.cpp's *_scale names (only when non-zero).
static void granite_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.scale")) j.f("attention_multiplier", *v);
    if (const GgufValue *v = m.get("embedding_scale")) j.f("embedding_multiplier", *v);
    if (const GgufValue *v = m.get("residual_scale")) j.f("residual_multiplier", *v);
    if (const GgufValue *v = m.get("logit_scale")) j.f("logits_scaling", *v);
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
}
static const char *const kGraniteGgufArchs[] = {"granite", nullptr};
extern const GgufFamily kGgufGranite = {
    .archs = kGraniteGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGraniteMoe,
    .gathers = kGraniteGathers,
    .permute_qk = true,
    .config = granite_gguf_config,
};
static const char *const kGranitemoeGgufArchs[] = {"granitemoe", nullptr};
extern const GgufFamily kGgufGranitemoe = {
    .archs = kGranitemoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGraniteMoe,
    .gathers = kGraniteGathers,
    .permute_qk = true,
    .config = granite_gguf_config,
};

extern const FamilyDef kGraniteFamily = {
    "granite",
    kTypes,
    kArchs,
    &kGgufGranite,
    "llama layout with embedding, attention, residual and logit multipliers",
    "tests/fixtures/families/granite",
    false,
    nullptr,
    granite_defaults,
    nullptr,
    llama_roles,
};

static const char *const kMoeTypes[] = {"granitemoe", nullptr};
static const char *const kMoeArchs[] = {"GraniteMoeForCausalLM", nullptr};

extern const FamilyDef kGranitemoeFamily = {
    "granitemoe",
    kMoeTypes,
    kMoeArchs,
    &kGgufGranitemoe,
    "Granite with 3-D stacked experts viewed per expert, softmax over the top-k logits",
    "tests/fixtures/families/granitemoe",
    false,
    nullptr,
    granite_defaults,
    granitemoe_finish,
    granitemoe_roles,
};

}  // namespace stk
