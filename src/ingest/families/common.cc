// What the family files share: the role-rule builder, the llama layout most families kept, the
// table lookups.
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

RoleRule &RoleRules::add(std::string pattern, Role role) {
    RoleRule r;
    r.pattern = std::move(pattern);
    r.role = role;
    r.priority = 1000000 + uint32_t(rules.size());  // after every user rule, in list order
    rules.push_back(r);
    return rules.back();
}

void RoleRules::norm(const std::string &stem, NormSlot slot) {
    add(stem + "\\.weight", Role::LN_G).slot = slot;
    add(stem + "\\.bias", Role::LN_B).slot = slot;
}

void RoleRules::linear(const std::string &stem, Role w, Role b, bool transpose) {
    add(stem + "\\.weight", w).transpose = transpose;
    add(stem + "\\.bias", b);
}

void llama_ends_roles(RoleRules &p) {
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    p.norm("model\\.norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

void llama_qkvo_roles(RoleRules &p, const std::string &lp) {
    p.linear(lp + "self_attn\\.q_proj", Role::Q, Role::Q_B);
    p.linear(lp + "self_attn\\.k_proj", Role::K, Role::K_B);
    p.linear(lp + "self_attn\\.v_proj", Role::V, Role::V_B);
    p.linear(lp + "self_attn\\.o_proj", Role::O, Role::O_B);
}

void llama_mlp_roles(RoleRules &p, const std::string &lp) {
    p.linear(lp + "mlp\\.gate_proj", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.up_proj", Role::FFN_W3, Role::FFN_B3);
    p.linear(lp + "mlp\\.down_proj", Role::FFN_W2, Role::FFN_B2);
}

void llama_attention_roles(RoleRules &p, const std::string &lp) {
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
    llama_qkvo_roles(p, lp);
}

void llama_layer_roles(RoleRules &p, const std::string &lp) {
    llama_attention_roles(p, lp);
    p.add(lp + "self_attn\\.rotary_emb\\.inv_freq", Role::ROPE_ALPHA).buffer = true;
    llama_mlp_roles(p, lp);
}

void qk_norm_roles(RoleRules &p, const std::string &ap) {
    p.norm(ap + "q_norm", NormSlot::QNorm);
    p.norm(ap + "k_norm", NormSlot::KNorm);
}

void moe_mlp_roles(RoleRules &p, const std::string &mp, const char *router, const char *w1, const char *w3, const char *w2) {
    p.add(mp + router + "\\.weight", Role::ROUTER_GATE);
    p.add(mp + "experts\\." STK_EXPERT "\\." + w1 + "\\.weight", Role::FFN_W1);
    p.add(mp + "experts\\." STK_EXPERT "\\." + w3 + "\\.weight", Role::FFN_W3);
    p.add(mp + "experts\\." STK_EXPERT "\\." + w2 + "\\.weight", Role::FFN_W2);
}

void llama_roles(RoleRules &p, const ModelConfig &) {
    llama_ends_roles(p);
    llama_layer_roles(p, "model\\.layers\\." STK_LAYER "\\.");
}

void llama_defaults(ModelConfig &m) {
    m.tied_embeddings = false;
    m.norm = NormKind::RmsNorm;
    m.positions = PosKind::Rope;
    m.ffn_kind = FfnKind::Gated;
    m.rope_theta = 10000.0;
    set_activation(m, "silu");
}

void llama_bias_keys(const ConfigReader &c, ModelConfig &m) {
    bool b = false;
    if (c.boolean("attention_bias", &b)) m.qkv_bias = m.o_bias = b;
    b = false;
    if (c.boolean("mlp_bias", &b)) m.mlp_bias = b;
}

void read_sliding_window_all(const ConfigReader &c, ModelConfig &m) {
    uint64_t v;
    if (c.u64("sliding_window", &v) && v > 0) {
        m.sliding_window = uint32_t(v < kMaxPositions ? v : kMaxPositions);
        for (uint32_t l = 0; l < m.n_layers; l++) m.sliding_layers[l / 8] |= uint8_t(1u << (l % 8));
    }
}

void read_sliding_layers(const ConfigReader &c, ModelConfig &m, uint32_t pattern) {
    std::memset(m.sliding_layers, 0, sizeof m.sliding_layers);
    simdjson::dom::array types;
    if (c.array("layer_types", &types)) {
        uint32_t l = 0;
        for (simdjson::dom::element e : types) {
            std::string_view s;
            if (e.get_string().get(s) || (s != "sliding_attention" && s != "full_attention"))
                throw_error(STK_E_BAD_JSON, "%s: \"layer_types\" entry %u is not \"sliding_attention\" or \"full_attention\"",
                            c.source().c_str(), l);
            if (l >= m.n_layers)
                throw_error(STK_E_BAD_JSON, "%s: \"layer_types\" lists more than the %u layers", c.source().c_str(), m.n_layers);
            if (s == "sliding_attention") m.sliding_layers[l / 8] |= uint8_t(1u << (l % 8));
            l++;
        }
        if (l != m.n_layers)
            throw_error(STK_E_BAD_JSON, "%s: \"layer_types\" lists %u layers, the config has %u", c.source().c_str(), l,
                        m.n_layers);
        return;
    }
    for (uint32_t l = 0; l < m.n_layers; l++)
        if (pattern == 0 || (l + 1) % pattern != 0) m.sliding_layers[l / 8] |= uint8_t(1u << (l % 8));
}

std::vector<std::string> model_approximations(const ModelConfig &c) {
    std::vector<std::string> out;
    char buf[128];
    auto add = [&](const char *fmt, auto... args) {
        std::snprintf(buf, sizeof buf, fmt, args...);
        out.emplace_back(buf);
    };
    uint32_t sliding = 0;
    for (uint32_t l = 0; l < c.n_layers; l++) sliding += c.layer_is_sliding(l) ? 1 : 0;
    if (c.sliding_window && sliding)
        add("approx: sliding window %u on %u of %u layers: the stages treat them as full attention", c.sliding_window, sliding,
            c.n_layers);
    if (c.rope_local_theta > 0 && sliding && c.rope_local_theta != c.rope_theta)
        add("approx: RoPE base %g of the sliding layers: memory_fit fits the global base %g", c.rope_local_theta, c.rope_theta);
    if (c.attn_softcap > 0)
        add("approx: attention logits soft-capped at %g (tanh): the stages use them uncapped", c.attn_softcap);
    if (c.final_softcap > 0) add("approx: output logits soft-capped at %g (tanh): the head is used uncapped", c.final_softcap);
    if (c.qk_norm != QkNorm::None)
        add("approx: q/k RMSNorm (%s) before attention: PRF and overlays use W_Q, W_K without it", qk_norm_name(c.qk_norm));
    if (c.emb_multiplier != 1)
        add("approx: embedding scaled by %g in the model: arrays use the stored embedding", c.emb_multiplier);
    if (c.logit_scale != 1) add("approx: logits scaled by %g in the model: the head is used unscaled", c.logit_scale);
    if (c.attn_sinks) add("approx: a learned sink logit per head joins each attention softmax: the stages use none");
    if (c.swiglu_limit > 0 || c.gated_up_offset != 0)
        add("approx: experts' SwiGLU clamped at %g with up + %g: the FFN arrays use the unclamped W1, W3, W2", c.swiglu_limit,
            c.gated_up_offset);
    if (c.rope_attn_factor != 1 && !c.mla)  // MLA folds it into the composed W_Q, W_K
        add("approx: YaRN scales cos and sin by %g (logits x %g): the arrays use unscaled q, k", c.rope_attn_factor,
            c.rope_attn_factor * c.rope_attn_factor);
    if (c.residual_multiplier != 1)
        add("approx: sublayer outputs scaled by %g before the residual add: not in the arrays", c.residual_multiplier);
    if (c.mla && (c.q_lora_rank || c.kv_lora_rank))
        add("approx: MLA latent RMSNorm%s: gains folded into W_%s, per-token 1/rms dropped", c.q_lora_rank ? "s" : "",
            c.q_lora_rank ? "Q/W_K/W_V" : "K/W_V (nope rows)");
    if (c.n_experts && c.n_group)
        add("approx: router %s (%u of %u groups, x%g): not modelled by the FFN stages", c.router, c.topk_group, c.n_group,
            c.routed_scaling);
    else if (c.n_experts && (std::strcmp(c.router, "softmax_topk") != 0 || c.routed_scaling != 1))
        add("approx: router %s (weights x%g): not modelled by the FFN stages", c.router, c.routed_scaling);
    return out;
}

static bool in_list(const char *const *list, const std::string &s) {
    for (; list && *list; list++)
        if (s == *list) return true;
    return false;
}

const FamilyDef &family_def(FamilyId id) {
    if (id >= kFamilyCount) throw_error(STK_E_INTERNAL, "family %u is not in the table of %u", unsigned(id), kFamilyCount);
    return *kFamilyDefs[id];
}

FamilyId family_by_model_type(const std::string &model_type) {
    for (uint32_t i = 1; i < kFamilyCount; i++)
        if (in_list(kFamilyDefs[i]->model_types, model_type)) return FamilyId(i);
    return kCustomFamily;
}

const char *const *family_gguf_archs(const FamilyDef &f) { return f.gguf ? f.gguf->archs : nullptr; }

FamilyId family_by_gguf_arch(const std::string &arch) {
    for (uint32_t i = 1; i < kFamilyCount; i++)
        if (in_list(family_gguf_archs(*kFamilyDefs[i]), arch)) return FamilyId(i);
    return kCustomFamily;
}

// The GGUF renames the Llama-named families share (their GGUF parts: ingest/gguf_family.h).
static const GgufRename kLlamaLayerNames[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
    // Qwen3 / OLMo2 / OLMoE q/k norms, OLMo2's post-sublayer norms (absent from Llama files)
    {"attn_q_norm", "model.layers.{L}.self_attn.q_norm"},
    {"attn_k_norm", "model.layers.{L}.self_attn.k_norm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"post_ffw_norm", "model.layers.{L}.post_feedforward_layernorm"},
};
const GgufRenames kGgufLlamaLayer = kLlamaLayerNames;
static const GgufRename kMixtralMoeNames[] = {
    {"ffn_gate_inp", "model.layers.{L}.block_sparse_moe.gate"},
    {"ffn_gate_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w1"},
    {"ffn_down_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w2"},
    {"ffn_up_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w3"},
};
const GgufRenames kGgufMixtralMoe = kMixtralMoeNames;
static const GgufRename kQwen2MoeMoeNames[] = {
    {"ffn_gate_inp", "model.layers.{L}.mlp.gate"},
    {"ffn_gate_exps", "model.layers.{L}.mlp.experts.{E}.gate_proj"},
    {"ffn_up_exps", "model.layers.{L}.mlp.experts.{E}.up_proj"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.{E}.down_proj"},
    {"ffn_gate_inp_shexp", "model.layers.{L}.mlp.shared_expert_gate"},
    {"ffn_gate_shexp", "model.layers.{L}.mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "model.layers.{L}.mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "model.layers.{L}.mlp.shared_expert.down_proj"},
};
const GgufRenames kGgufQwen2MoeMoe = kQwen2MoeMoeNames;
static const GgufRename kGemma3LayerNames[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"attn_q_norm", "model.layers.{L}.self_attn.q_norm"},
    {"attn_k_norm", "model.layers.{L}.self_attn.k_norm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_norm", "model.layers.{L}.pre_feedforward_layernorm"},
    {"post_ffw_norm", "model.layers.{L}.post_feedforward_layernorm"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
};
const GgufRenames kGgufGemma3Layer = kGemma3LayerNames;
const GgufGlobals kGgufLlamaGlobals = {"model.embed_tokens", nullptr, nullptr, "model.norm", "lm_head"};

void gguf_llama_bias_keys(const GgufMeta &m, GgufJson &j) {
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    j.b("mlp_bias", m.tensor("blk.0.ffn_up.bias") != nullptr);
}

FamilyId family_by_name(const std::string &name) {
    for (uint32_t i = 1; i < kFamilyCount; i++)
        if (name == kFamilyDefs[i]->name) return FamilyId(i);
    return kCustomFamily;
}

}  // namespace stk
