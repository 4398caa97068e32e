// gpt-oss (openai/gpt-oss-20b, -120b): llama-named attention with biases and one learned sink
// logit per head, a sliding window on every other layer, YaRN RoPE; experts stored stacked as
// 3-D tensors (gate_up_proj [E, d, 2f] stored [in, out] with gate and up columns alternating,
// down_proj [E, f, d], their biases [E, 2f] / [E, d]), or on the hub as MXFP4 blocks
// (gate_up_proj_blocks [E, 2f, d/32, 16] + _scales, stored [out, in]: ingest/mxfp4.h); a router
// with a bias; the clamped SwiGLU (up + 1) * gate * sigmoid(1.702 gate).
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

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
extern const GgufFamily kGgufGptOss;  // its GGUF part (families/gguf_legacy.cc for now)

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
