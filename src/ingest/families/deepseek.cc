// DeepSeek-V2 / V2-Lite (deepseek-ai/DeepSeek-V2-Lite) and DeepSeek-V3 / R1 (deepseek-ai/DeepSeek-V3):
// multi-head latent attention (MLA) and DeepSeekMoE.
//
// MLA stores low-rank factors: q = q_b(RMSNorm_qa(q_a x)) (or q_proj x), [kv; k_rot] =
// kv_a_proj_with_mqa x, [k_nope_h; v_h] = kv_b(RMSNorm_kva(kv)), k_rot shared by every head.  The
// stages read per-head W_Q, W_K, W_V, W_O composed from them (stages/attn_common.cc, WeightReader):
// each head's rotary rows first (de-interleaved), then the "nope" rows, padded with zero rows to
// head_dim = max(nope + rope, v); W_O padded with zero columns.  The RMSNorms between the factors
// fold in only their gain: their per-token 1 / rms is dropped (recorded, model_approximations).
//
// DeepSeekMoE: routed experts (moe_intermediate_size), n_shared_experts x moe_intermediate_size
// of shared expert, the first first_k_dense_replace layers dense, routed_scaling_factor, V2's
// softmax greedy / group_limited_greedy and V3's sigmoid + e_score_correction_bias group routing.
#include <cmath>

#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"
#include <cstdlib>

namespace stk {

static void deepseek_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    llama_bias_keys(c, m);
    if (m.qkv_bias || m.o_bias || m.mlp_bias)
        throw_error(STK_E_UNSUPPORTED,
                    "%s: DeepSeek MLA with \"attention_bias\" / \"mlp_bias\" true: biases on the low-rank factors are not "
                    "composed into W_Q / W_K / W_V; not converted",
                    c.source().c_str());
}

static uint32_t need_dim(const ConfigReader &c, const char *key, uint64_t lo) {
    return uint32_t(c.need({key}, lo, kMaxHeadDim * 16, key));
}

static double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

static void deepseek_finish(const ConfigReader &c, const std::string &model_type, ModelConfig &m) {
    const std::string &src = c.source();
    m.mla = true;
    m.q_lora_rank = c.has("q_lora_rank") ? need_dim(c, "q_lora_rank", 1) : 0;
    m.kv_lora_rank = need_dim(c, "kv_lora_rank", 1);
    m.qk_nope_dim = uint32_t(c.need({"qk_nope_head_dim"}, 0, kMaxHeadDim, "qk_nope_head_dim"));
    m.qk_rope_dim = uint32_t(c.need({"qk_rope_head_dim"}, 2, kMaxHeadDim, "qk_rope_head_dim"));
    m.v_head_dim = uint32_t(c.need({"v_head_dim"}, 1, kMaxHeadDim, "v_head_dim"));
    if (m.qk_rope_dim % 2) throw_error(STK_E_BAD_JSON, "%s: qk_rope_head_dim %u is odd", src.c_str(), m.qk_rope_dim);
    if (m.n_kv_heads != m.n_heads)
        throw_error(STK_E_BAD_JSON, "%s: MLA with %u key/value heads for %u heads: kv_b_proj makes one per head", src.c_str(),
                    m.n_kv_heads, m.n_heads);
    const uint32_t qk = m.qk_nope_dim + m.qk_rope_dim;
    m.head_dim = qk > m.v_head_dim ? qk : m.v_head_dim;
    if (m.head_dim > kMaxHeadDim) c.check_range("qk_nope_head_dim", m.head_dim, 1, kMaxHeadDim);
    m.rotary_dim = m.qk_rope_dim;  // transformers' RoPE runs over head_dim = qk_rope_head_dim
    m.rope_interleaved = false;    // the composed rows are de-interleaved
    bool inter = true;             // V2 rotates complex pairs; V3 unless rope_interleave is false
    if (model_type == "deepseek_v3") c.boolean("rope_interleave", &inter);
    m.mla_rope_interleaved = inter;

    // The scale: qk^-1/2, times mscale(factor, mscale_all_dim)^2 under a scaled RoPE (yarn_apply_mscale).
    m.attn_scale = 1 / std::sqrt(double(qk));
    simdjson::dom::object rs;
    if (c.object("rope_scaling", &rs) || c.object("rope_parameters", &rs)) {
        ConfigReader r(rs, src);
        std::string type;
        double all = 0, ms = 0, af = 0;
        if ((r.str("rope_type", &type) || r.str("type", &type)) && type != "default" && m.rope_scaling_factor > 0) {
            if (r.f64("mscale_all_dim", &all) && all != 0) {
                double k = yarn_mscale(m.rope_scaling_factor, all);
                m.attn_scale *= k * k;
            }
            // yarn's cos/sin factor multiplies the rotary part of q and k: folded into those rows.
            if (type == "yarn") {
                if (!r.f64("attention_factor", &af)) {
                    r.f64("mscale", &ms);
                    af = ms != 0 && all != 0 ? yarn_mscale(m.rope_scaling_factor, ms) / yarn_mscale(m.rope_scaling_factor, all)
                                             : yarn_mscale(m.rope_scaling_factor, 1);
                }
                m.mla_rope_gain = af;
            }
        }
    }

    uint64_t v;
    if (c.u64("n_routed_experts", &v) && v > 0) {
        c.check_range("n_routed_experts", v, 1, kMaxExperts);
        m.n_experts = uint32_t(v);
        m.top_k = uint32_t(c.need({"num_experts_per_tok"}, 1, m.n_experts, "num_experts_per_tok"));
        m.moe_ffn_dim = c.need({"moe_intermediate_size"}, 1, kMaxFfn, "moe_intermediate_size");
        uint64_t shared = 0;
        if (c.u64("n_shared_experts", &shared) && shared > 0) {
            c.check_range("n_shared_experts", shared, 1, kMaxFfn / m.moe_ffn_dim);
            m.shared_expert_ffn_dim = m.moe_ffn_dim * shared;
        }
        if (c.u64("first_k_dense_replace", &v)) m.first_moe_layer = uint32_t(v < m.n_layers ? v : m.n_layers);
        m.norm_topk_prob = false;
        c.boolean("norm_topk_prob", &m.norm_topk_prob);
        m.routed_scaling = 1;
        c.f64("routed_scaling_factor", &m.routed_scaling);
        if (!(m.routed_scaling > 0 && m.routed_scaling < 1e6))
            throw_error(STK_E_BAD_JSON, "%s: routed_scaling_factor %g is not positive", src.c_str(), m.routed_scaling);
        std::string method = model_type == "deepseek_v3" ? "noaux_tc" : "greedy";
        c.str("topk_method", &method);
        const bool grouped = method != "greedy";
        if (grouped) {
            m.n_group = uint32_t(c.need({"n_group"}, 1, m.n_experts, "n_group"));
            m.topk_group = uint32_t(c.need({"topk_group"}, 1, m.n_group, "topk_group"));
            if (m.n_experts % m.n_group)
                throw_error(STK_E_BAD_JSON, "%s: %u experts do not split into n_group %u groups", src.c_str(), m.n_experts,
                            m.n_group);
        }
        if (model_type == "deepseek_v3") {
            m.router_bias = true;
            copy_config_str(m.router, sizeof m.router, "sigmoid_group_topk");
        } else if (method == "greedy" || method == "group_limited_greedy") {
            copy_config_str(m.router, sizeof m.router, grouped ? "softmax_group_topk" : "softmax_topk");
        } else {
            throw_error(STK_E_UNSUPPORTED, "%s: DeepSeek-V2 topk_method '%s' is not one transformers implements", src.c_str(),
                        method.c_str());
        }
    }
    // V3's multi-token-prediction layers (model.layers.<n_layers>...) are not part of the causal
    // model (transformers skips them on load): stk lists them as buffers.
    if (c.u64("num_nextn_predict_layers", &v) && v > 0) m.n_mtp_layers = uint32_t(v < 8 ? v : 8);
}

static void deepseek_roles(RoleRules &p, const ModelConfig &m) {
    for (uint32_t i = 0; i < m.n_mtp_layers; i++)
        p.add("model\\.layers\\." + std::to_string(m.n_layers + i) + "\\..*", Role::BUFFER);
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.", ap = lp + "self_attn\\.", mp = lp + "mlp\\.";
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
    p.add(ap + "q_proj\\.weight", Role::Q);
    p.add(ap + "q_a_proj\\.weight", Role::MLA_Q_A);
    p.norm(ap + "q_a_layernorm", NormSlot::QLora);
    p.add(ap + "q_b_proj\\.weight", Role::MLA_Q_B);
    p.add(ap + "kv_a_proj_with_mqa\\.weight", Role::MLA_KV_A);
    p.norm(ap + "kv_a_layernorm", NormSlot::KvLora);
    p.add(ap + "kv_b_proj\\.weight", Role::MLA_KV_B);
    p.add(ap + "o_proj\\.weight", Role::O);
    p.add(mp + "gate_proj\\.weight", Role::FFN_W1);
    p.add(mp + "up_proj\\.weight", Role::FFN_W3);
    p.add(mp + "down_proj\\.weight", Role::FFN_W2);
    moe_mlp_roles(p, mp, "gate", "gate_proj", "up_proj", "down_proj");
    p.add(mp + "gate\\.e_score_correction_bias", Role::ROUTER_B);
    p.add(mp + "shared_experts\\.gate_proj\\.weight", Role::FFN_W1).shared = true;
    p.add(mp + "shared_experts\\.up_proj\\.weight", Role::FFN_W3).shared = true;
    p.add(mp + "shared_experts\\.down_proj\\.weight", Role::FFN_W2).shared = true;
    p.norm("model\\.norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kV2Types[] = {"deepseek_v2", nullptr};
static const char *const kV2Archs[] = {"DeepseekV2ForCausalLM", nullptr};
static const char *const kV3Types[] = {"deepseek_v3", nullptr};
static const char *const kV3Archs[] = {"DeepseekV3ForCausalLM", nullptr};
// llama.cpp writes V2 and V3 as one architecture; the GGUF part below tells them apart by the gating.

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kDeepseekLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_q_a", "model.layers.{L}.self_attn.q_a_proj"},
    {"attn_q_a_norm", "model.layers.{L}.self_attn.q_a_layernorm"},
    {"attn_q_b", "model.layers.{L}.self_attn.q_b_proj"},
    {"attn_kv_a_mqa", "model.layers.{L}.self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "model.layers.{L}.self_attn.kv_a_layernorm"},
    {"attn_kv_b", "model.layers.{L}.self_attn.kv_b_proj"},  // converters before attn_k_b / attn_v_b
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
    {"ffn_gate_inp", "model.layers.{L}.mlp.gate"},
    {"exp_probs_b", "model.layers.{L}.mlp.gate.e_score_correction_bias$"},
    {"ffn_gate_shexp", "model.layers.{L}.mlp.shared_experts.gate_proj"},
    {"ffn_up_shexp", "model.layers.{L}.mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "model.layers.{L}.mlp.shared_experts.down_proj"},
};
static const GgufRename kDeepseekMoeNames[] = {
    {"ffn_gate_exps", "model.layers.{L}.mlp.experts.{E}.gate_proj"},
    {"ffn_up_exps", "model.layers.{L}.mlp.experts.{E}.up_proj"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.{E}.down_proj"},
};
static const GgufRenames kDeepseekMoe = kDeepseekMoeNames;

// kv_b_proj [H (nope + v), kv_lora] = per head [k_b^T; v_b]: a = heads, b = nope, c = v, e = kv_lora.
static void deepseek_kv_b_plan(GgufGatherPlan &g) {
    const ModelConfig &cfg = *g.cfg;
    const TensorRef &s0 = *g.src[0], &s1 = *g.src[1];
    GgufGatherDims &x = g.dims;
    x.a = cfg.n_heads, x.b = cfg.qk_nope_dim, x.c = cfg.v_head_dim, x.e = cfg.kv_lora_rank;
    if (s0.shape != std::vector<uint64_t>{x.a, x.e, x.b})
        g.refuse(s0, "shape " + g.dims_of(s0) + ", not [heads, kv_lora_rank, qk_nope_head_dim] = [" + std::to_string(x.a) +
                         ", " + std::to_string(x.e) + ", " + std::to_string(x.b) + "]");
    if (s1.shape != std::vector<uint64_t>{x.a, x.c, x.e})
        g.refuse(s1, "shape " + g.dims_of(s1) + ", not [heads, v_head_dim, kv_lora_rank] = [" + std::to_string(x.a) + ", " +
                         std::to_string(x.c) + ", " + std::to_string(x.e) + "]");
    g.elements = true;
    g.shape = {x.a * (x.b + x.c), x.e};
}
static std::pair<uint32_t, uint64_t> deepseek_kv_b_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t r = i / x.e, col = i % x.e, h = r / (x.b + x.c), j = r % (x.b + x.c);
    if (j < x.b) return {0, (h * x.e + col) * x.b + j};  // k_b stored [H, kv_lora, nope]
    return {1, (h * x.c + (j - x.b)) * x.e + col};       // v_b stored [H, v, kv_lora]
}
static const GgufGather kDeepseekKvB = {"model.layers.{L}.self_attn.kv_b_proj.weight",
                                        {"attn_k_b.weight", "attn_v_b.weight", ""},
                                        2,
                                        false,
                                        true,  // older converters' attn_kv_b beside them is read whole
                                        deepseek_kv_b_plan,
                                        nullptr,
                                        deepseek_kv_b_element};
static const GgufGather *const kDeepseekGathers[] = {&kDeepseekKvB, nullptr};

// DeepseekV2Model writes f32(0.1 x mscale_all_dim); llama.cpp then takes mscale = mscale_all_dim
// (the hub's V2 / V3 configs have the two equal), so the yarn factor on cos / sin is 1.  The
// config's decimal back: the shortest whose f32(0.1 x it) is the stored value (0.707, not 0.70699996).
static void deepseek_gguf_rope_scaling(const GgufMeta &m, std::string &rs) {
    const GgufValue *v = m.get("rope.scaling.yarn_log_multiplier");
    if (!v) return;
    const float stored = v->type() == GgufType::F32 ? v->f32() : float(v->as_float());
    std::string t = format("%.17g", double(stored) / 0.1);
    for (int digits = 1; digits <= 17; digits++) {
        std::string c = format("%.*g", digits, double(stored) / 0.1);
        if (float(0.1 * std::strtod(c.c_str(), nullptr)) == stored) {
            t = c;
            break;
        }
    }
    rs += ", \"mscale_all_dim\": " + t + ", \"mscale\": " + t;
}

// MLA written as MQA (head_count_kv 1, key_length kv_lora_rank + rope) and the real dimensions as
// *_mla keys; V3 differs by its sigmoid gating (expert_gating_func 2) and the router's score bias.
// Converters before the *_mla keys (those that stored attn_kv_b whole) wrote key_length = nope +
// rope and value_length = v.
extern const GgufFamily kGgufDeepseek2;
static std::string deepseek2_gguf_config(const GgufMeta &m) {
    const std::string &path = m.path, &arch = m.arch;
    const uint64_t d = m.d, layers = m.layers, heads = m.heads, vocab = m.vocab;
    auto get = [&](const char *k) { return m.get(k); };
    auto need = [&](const char *k) -> uint64_t {
        const GgufValue *v = get(k);
        if (!v) throw_error(STK_E_CORRUPT, "%s: metadata key %s.%s is missing (DeepSeek MLA)", path.c_str(), arch.c_str(), k);
        return v->as_uint();
    };
    const uint64_t rope = need("rope.dimension_count");
    uint64_t qk, v;
    if (get("attention.key_length_mla")) qk = need("attention.key_length_mla"), v = need("attention.value_length_mla");
    else qk = need("attention.key_length"), v = need("attention.value_length");
    if (qk <= rope)
        throw_error(STK_E_CORRUPT, "%s: DeepSeek MLA key length %llu is not more than its rotary part %llu", path.c_str(),
                    (unsigned long long)qk, (unsigned long long)rope);
    const GgufValue *gating = get("expert_gating_func");
    const bool v3 = (gating && gating->as_uint() == 2) || m.tensor("blk.0.exp_probs_b.bias") ||
                    m.tensor((format("blk.%llu.exp_probs_b.bias", (unsigned long long)(layers ? layers - 1 : 0))).c_str());
    GgufJson j;
    j.str("model_type", v3 ? "deepseek_v3" : "deepseek_v2");
    j.u("vocab_size", vocab);
    j.u("hidden_size", d);
    j.u("num_hidden_layers", layers);
    j.u("num_attention_heads", heads);
    j.u("num_key_value_heads", heads);  // MLA: one kv head per head (the GGUF's 1 is llama.cpp's MQA form)
    if (const GgufValue *x = get("feed_forward_length")) j.u("intermediate_size", x->as_uint());
    if (const GgufValue *x = get("context_length")) j.u("max_position_embeddings", x->as_uint());
    if (const GgufValue *x = get("attention.layer_norm_rms_epsilon")) j.f("rms_norm_eps", *x);
    if (const GgufValue *x = get("rope.freq_base")) j.f("rope_theta", *x);
    if (std::string rs = gguf_rope_scaling_json(m, kGgufDeepseek2); !rs.empty()) j.raw("rope_scaling", rs);
    if (const GgufValue *x = get("attention.q_lora_rank")) j.u("q_lora_rank", x->as_uint());
    j.u("kv_lora_rank", need("attention.kv_lora_rank"));
    j.u("qk_rope_head_dim", rope);
    j.u("qk_nope_head_dim", qk - rope);
    j.u("v_head_dim", v);
    if (const GgufValue *x = get("expert_count"); x && x->as_uint() > 0) {
        j.u("n_routed_experts", x->as_uint());
        j.u("num_experts_per_tok", need("expert_used_count"));
        j.u("moe_intermediate_size", need("expert_feed_forward_length"));
        if (const GgufValue *y = get("expert_shared_count")) j.u("n_shared_experts", y->as_uint());
        if (const GgufValue *y = get("leading_dense_block_count")) j.u("first_k_dense_replace", y->as_uint());
        if (const GgufValue *y = get("expert_weights_scale")) j.f("routed_scaling_factor", *y);
        const GgufValue *norm = get("expert_weights_norm");
        j.b("norm_topk_prob", norm && norm->boolean());
        const GgufValue *groups = get("expert_group_count"), *used = get("expert_group_used_count");
        if (groups) j.u("n_group", groups->as_uint());
        else if (v3) j.u("n_group", 1);  // converters before the group keys: llama.cpp runs one group
        if (used) j.u("topk_group", used->as_uint());
        else if (v3 && !groups) j.u("topk_group", 1);
        // The router: V3's "noaux_tc"; V2's greedy, or group_limited_greedy when it has groups.
        j.str("topk_method", v3 ? "noaux_tc" : groups && groups->as_uint() > 1 ? "group_limited_greedy" : "greedy");
    }
    j.b("tie_word_embeddings", m.tensor("output.weight") == nullptr);
    j.b("attention_bias", false);
    return j.done();
}

static const char *const kDeepseekGgufArchs[] = {"deepseek2", nullptr};
extern const GgufFamily kGgufDeepseek2 = {
    .archs = kDeepseekGgufArchs,
    .layer = kDeepseekLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kDeepseekMoe,
    .gathers = kDeepseekGathers,
    .whole_config = deepseek2_gguf_config,
    .rope_scaling = deepseek_gguf_rope_scaling,
};

extern const FamilyDef kDeepseekV2Family = {
    "deepseek_v2",
    kV2Types,
    kV2Archs,
    &kGgufDeepseek2,
    "MLA composed into per-head W_Q/W_K/W_V (norm gains folded), DeepSeekMoE softmax routing",
    "tests/fixtures/families/deepseek_v2",
    false,
    nullptr,
    deepseek_defaults,
    deepseek_finish,
    deepseek_roles,
};

extern const FamilyDef kDeepseekV3Family = {
    "deepseek_v3",
    kV3Types,
    kV3Archs,
    &kGgufDeepseek2,
    "MLA composed into per-head W_Q/W_K/W_V (norm gains folded), sigmoid group routing",
    "tests/fixtures/families/deepseek_v3",
    false,
    nullptr,
    deepseek_defaults,
    deepseek_finish,
    deepseek_roles,
};

}  // namespace stk
