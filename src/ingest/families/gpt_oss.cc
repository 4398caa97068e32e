// gpt-oss (openai/gpt-oss-20b, -120b): llama-named attention with biases and one learned sink
// logit per head, a sliding window on every other layer, YaRN RoPE; experts stored stacked as
// 3-D tensors (gate_up_proj [E, d, 2f] stored [in, out] with gate and up columns alternating,
// down_proj [E, f, d], their biases [E, 2f] / [E, d]), or on the hub as MXFP4 blocks
// (gate_up_proj_blocks [E, 2f, d/32, 16] + _scales, stored [out, in]: ingest/mxfp4.h); a router
// with a bias; the clamped SwiGLU (up + 1) * gate * sigmoid(1.702 gate).
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"
#include "ingest/mxfp4.h"

namespace stk {

static void gpt_oss_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.qkv_bias = m.o_bias = true;  // GptOssConfig.attention_bias defaults to true
    llama_bias_keys(c, m);
    m.rope_theta = 150000.0;
    m.sliding_window = 128;
    m.attn_sinks = true;
    m.router_bias = true;
    m.expert_bias = true;
    m.swiglu_limit = 7.0;
    m.gated_up_offset = 1.0;
    set_activation(m, "quick_gelu");  // gate * sigmoid(1.702 gate), transformers' quick_gelu
}

static void gpt_oss_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: gpt_oss config without \"num_local_experts\"", c.source().c_str());
    m.norm_topk_prob = true;          // softmax over the top-k logits
    set_activation(m, "quick_gelu");  // hidden_act "silu" is not what the experts apply
    double alpha = 1.702;
    if (c.f64("swiglu_alpha", &alpha) && alpha != 1.702)
        throw_error(STK_E_UNSUPPORTED, "%s: \"swiglu_alpha\" %g: stk knows gpt-oss's SwiGLU with alpha 1.702 only",
                    c.source().c_str(), alpha);
    if (c.present("swiglu_limit") && !c.f64("swiglu_limit", &m.swiglu_limit)) m.swiglu_limit = 0;
    uint64_t v;
    if (c.u64("sliding_window", &v)) m.sliding_window = uint32_t(v < kMaxPositions ? v : kMaxPositions);
    else if (c.present("sliding_window")) m.sliding_window = 0;
    read_sliding_layers(c, m, 2);  // no layer_types: sliding, full, sliding, ...
}

static void gpt_oss_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.", ep = lp + "mlp\\.experts\\.";
    llama_ends_roles(p);
    llama_attention_roles(p, lp);
    p.add(lp + "self_attn\\.sinks", Role::ATTN_SINK);
    p.linear(lp + "mlp\\.router", Role::ROUTER_GATE, Role::ROUTER_B);
    RoleRule &gu = p.add(ep + "gate_up_proj", Role::FFN_W13);
    gu.stacked = gu.transpose = true;
    gu.layout = QkvLayout::Interleaved;
    RoleRule &gb = p.add(ep + "gate_up_proj_bias", Role::FFN_B13);
    gb.stacked = true;
    gb.layout = QkvLayout::Interleaved;
    RoleRule &dn = p.add(ep + "down_proj", Role::FFN_W2);
    dn.stacked = dn.transpose = true;
    p.add(ep + "down_proj_bias", Role::FFN_B2).stacked = true;
    // MXFP4 (ingest/mxfp4.h): the blocks stand for the dequantised weight, stored [out, in].
    RoleRule &gq = p.add(ep + "gate_up_proj_blocks", Role::FFN_W13);
    gq.stacked = true;
    gq.layout = QkvLayout::Interleaved;
    p.add(ep + "down_proj_blocks", Role::FFN_W2).stacked = true;
}

static const char *const kTypes[] = {"gpt_oss", nullptr};
static const char *const kArchs[] = {"GptOssForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kGptOssLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"attn_sinks", "model.layers.{L}.self_attn.sinks$"},
    {"ffn_gate_inp", "model.layers.{L}.mlp.router"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.down_proj_bias$"},  // the .bias; .weight is a gather
};
// gate_up_proj [E, D, 2F]: [in, out], gate / up columns alternating; as the hub ships MXFP4 rows
// [E, 2F, D]: a = experts, b = F, c = D.
static void gpt_oss_gate_up_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 3 || g.src[1]->shape != s0.shape)
        g.refuse(*g.src[1], "gate and up expert stacks of shapes " + g.dims_of(s0) + " and " + g.dims_of(*g.src[1]) +
                                ", not two equal [experts, rows, cols]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1], g.dims.c = s0.shape[2];
    if (g.mxfp4) {
        g.mxfp4_rows = true;
        g.shape = {g.dims.a, 2 * g.dims.b, g.dims.c};
    } else {
        g.elements = true;
        g.shape = {g.dims.a, g.dims.c, 2 * g.dims.b};
    }
}
static std::pair<uint32_t, uint64_t> gpt_oss_gate_up_row(const GgufGatherDims &x, uint64_t r) {
    const uint64_t ex = r / (2 * x.b), n = r % (2 * x.b);
    return {uint32_t(n % 2), ex * x.b + n / 2};
}
static std::pair<uint32_t, uint64_t> gpt_oss_gate_up_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t ex = i / (x.c * 2 * x.b), d = (i / (2 * x.b)) % x.c, n = i % (2 * x.b);
    return {uint32_t(n % 2), (ex * x.b + n / 2) * x.c + d};
}
// gate_up_proj_bias [E, 2F]: gate / up alternating; b = F.
static void gpt_oss_gate_up_bias_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 2 || g.src[1]->shape != s0.shape)
        g.refuse(*g.src[1], "gate and up expert biases of shapes " + g.dims_of(s0) + " and " + g.dims_of(*g.src[1]) +
                                ", not two equal [experts, rows]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1];
    g.elements = true;
    g.shape = {g.dims.a, 2 * g.dims.b};
}
static std::pair<uint32_t, uint64_t> gpt_oss_gate_up_bias_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t ex = i / (2 * x.b), n = i % (2 * x.b);
    return {uint32_t(n % 2), ex * x.b + n / 2};
}
// down_proj [E, F, D]: the stored [E, D, F] transposed (MXFP4: the stored rows as they are); b = D, c = F.
static void gpt_oss_down_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 3) g.refuse(s0, "shape " + g.dims_of(s0) + ", not [experts, d, F]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1], g.dims.c = s0.shape[2];
    if (g.mxfp4) {
        g.mxfp4_rows = true;
        g.shape = s0.shape;
    } else {
        g.elements = true;
        g.shape = {g.dims.a, g.dims.c, g.dims.b};
    }
}
static std::pair<uint32_t, uint64_t> gpt_oss_down_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t ex = i / (x.c * x.b), f = (i / x.b) % x.c, d = i % x.b;
    return {0, (ex * x.b + d) * x.c + f};
}
static const GgufGather kGptOssGateUp = {"model.layers.{L}.mlp.experts.gate_up_proj",
                                         {"ffn_gate_exps.weight", "ffn_up_exps.weight", ""},
                                         2,
                                         true,
                                         false,
                                         gpt_oss_gate_up_plan,
                                         gpt_oss_gate_up_row,
                                         gpt_oss_gate_up_element};
static const GgufGather kGptOssGateUpBias = {"model.layers.{L}.mlp.experts.gate_up_proj_bias",
                                             {"ffn_gate_exps.bias", "ffn_up_exps.bias", ""},
                                             2,
                                             false,
                                             false,
                                             gpt_oss_gate_up_bias_plan,
                                             nullptr,
                                             gpt_oss_gate_up_bias_element};
static const GgufGather kGptOssDown = {"model.layers.{L}.mlp.experts.down_proj",
                                       {"ffn_down_exps.weight", "", ""},
                                       1,
                                       true,
                                       false,
                                       gpt_oss_down_plan,
                                       nullptr,
                                       gpt_oss_down_element};
static const GgufGather *const kGptOssGathers[] = {&kGptOssGateUp, &kGptOssGateUpBias, &kGptOssDown, nullptr};
static void gpt_oss_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    // The experts as the hub ships them (MXFP4 blocks) or dequantised (a bf16 checkpoint's
    // conversion): the checkpoint presents the matching HF layout.
    const GgufTensorInfo *g = m.tensor("blk.0.ffn_gate_exps.weight");
    if (g && g->type == kGgmlMxfp4) j.raw("quantization_config", "{\"quant_method\": \"mxfp4\"}");
}
// gpt-oss's YaRN keeps the correction range unrounded (its config says "truncate": false).
static void gpt_oss_gguf_rope_scaling(const GgufMeta &, std::string &rs) { rs += ", \"truncate\": false"; }
static const char *const kGptOssGgufArchs[] = {"gpt-oss", nullptr};
extern const GgufFamily kGgufGptOss = {
    .archs = kGptOssGgufArchs,
    .layer = kGptOssLayer,
    .globals = kGgufLlamaGlobals,
    .gathers = kGptOssGathers,
    .config = gpt_oss_gguf_config,
    .rope_scaling = gpt_oss_gguf_rope_scaling,
};

extern const FamilyDef kGptOssFamily = {
    "gpt_oss",
    kTypes,
    kArchs,
    &kGgufGptOss,
    "MoE with stacked 3-D experts (MXFP4 blocks dequantised exactly), router bias; attention sinks, "
    "sliding window on every other layer, clamped SwiGLU (approximated: plain attention, no clamp), YaRN",
    "tests/fixtures/families/gpt_oss",
    false,
    nullptr,
    gpt_oss_defaults,
    gpt_oss_finish,
    gpt_oss_roles,
};

}  // namespace stk
