// Phi-1 / 1.5 / 2 (microsoft/phi-2): attention and FFN in parallel under one LayerNorm, partial
// rotary (partial_rotary_factor 0.4), biases everywhere, plain gelu_new FFN, output bias.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void phi_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.tied_embeddings = false;
    m.parallel_attn = true;
    m.norms_per_layer = 1;
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.lm_head_bias = true;
    m.positions = PosKind::Rope;
    m.rope_theta = 10000.0;
    set_activation(m, "gelu_new");
    bool qk_ln = false;
    if (c.boolean("qk_layernorm", &qk_ln) && qk_ln)
        throw_error(STK_E_UNSUPPORTED, "%s: phi with \"qk_layernorm\": true is not converted (no released model uses it)",
                    c.source().c_str());
}

static void phi_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.linear(lp + "self_attn\\.q_proj", Role::Q, Role::Q_B);
    p.linear(lp + "self_attn\\.k_proj", Role::K, Role::K_B);
    p.linear(lp + "self_attn\\.v_proj", Role::V, Role::V_B);
    p.linear(lp + "self_attn\\.dense", Role::O, Role::O_B);
    p.linear(lp + "mlp\\.fc1", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.fc2", Role::FFN_W2, Role::FFN_B2);
    p.norm("model\\.final_layernorm", NormSlot::Final);
    p.linear("lm_head", Role::LM_HEAD, Role::LM_HEAD_B);
}

static const char *const kTypes[] = {"phi", nullptr};
static const char *const kArchs[] = {"PhiForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kPhi2Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.dense"},
    {"ffn_up", "model.layers.{L}.mlp.fc1"},
    {"ffn_down", "model.layers.{L}.mlp.fc2"},
};
// Phi2Model writes head_count_kv = heads whatever the model has: attn_k's rows.
static void phi2_gguf_kv_heads(const GgufMeta &m, uint64_t *kv) {
    if (const GgufTensorInfo *k = m.tensor("blk.0.attn_k.weight"); k && k->shape.size() == 2 && m.heads && m.d % m.heads == 0)
        *kv = k->shape[0] / (m.d / m.heads);
}
static const char *const kPhi2GgufArchs[] = {"phi2", nullptr};
extern const GgufFamily kGgufPhi2 = {
    .archs = kPhi2GgufArchs,
    .layer = kPhi2Layer,
    .globals = {"model.embed_tokens", nullptr, nullptr, "model.final_layernorm", "lm_head"},
    .ffn_from_tensors = true,  // Phi2Model writes feed_forward_length = 4 x hidden
    .rotary_pct = true,
    .kv_heads = phi2_gguf_kv_heads,
};

extern const FamilyDef kPhiFamily = {
    "phi",
    kTypes,
    kArchs,
    &kGgufPhi2,
    "parallel block under one LayerNorm, partial rotary, biases, output bias",
    "tests/fixtures/families/phi",
    true,
    nullptr,
    phi_defaults,
    nullptr,
    phi_roles,
};

}  // namespace stk
