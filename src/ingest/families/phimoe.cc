// PhiMoE (microsoft/Phi-3.5-MoE-instruct): the llama attention names with Q/K/V/O biases,
// LayerNorms with biases, block_sparse_moe experts (w1 gate, w2 down, w3 up), an output bias and
// the sparsemixer router: in eval, the best expert, then the best of the rest, each weighted by
// its softmax over the scores within a jitter band of it (2 x router_jitter_noise) - not a
// softmax top-k, so the FFN stages do not model it (recorded, model_approximations).
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void phimoe_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    llama_defaults(m);
    m.norm = NormKind::LayerNorm;
    m.qkv_bias = m.o_bias = true;  // PhimoeConfig's attention_bias default is false; the hub model's is true
    llama_bias_keys(c, m);
    m.lm_head_bias = false;
    c.boolean("lm_head_bias", &m.lm_head_bias);
}

static void phimoe_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    if (m.n_experts == 0) throw_error(STK_E_BAD_JSON, "%s: phimoe config without \"num_local_experts\"", c.source().c_str());
    if (m.top_k != 2)
        throw_error(STK_E_UNSUPPORTED, "%s: phimoe's sparsemixer picks 2 experts; num_experts_per_tok is %u", c.source().c_str(),
                    m.top_k);
    copy_config_str(m.router, sizeof m.router, "sparsemixer");
    c.f64("router_jitter_noise", &m.router_jitter);
    if (!(m.router_jitter >= 0 && m.router_jitter < 1))
        throw_error(STK_E_BAD_JSON, "%s: router_jitter_noise %g is not in [0, 1)", c.source().c_str(), m.router_jitter);
    // A window at least as long as the context never binds; a shorter one is recorded.
    uint64_t w = 0;
    if (c.u64("sliding_window", &w) && w > 0 && (m.max_positions == 0 || w < m.max_positions)) {
        m.sliding_window = uint32_t(w < (1u << 31) ? w : (1u << 31));
        read_sliding_layers(c, m, 0);
    }
}

static void phimoe_roles(RoleRules &p, const ModelConfig &) {
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    const std::string lp = "model\\.layers\\." STK_LAYER "\\.";
    llama_attention_roles(p, lp);
    moe_mlp_roles(p, lp + "block_sparse_moe\\.", "gate", "w1", "w3", "w2");
    p.norm("model\\.norm", NormSlot::Final);
    p.linear("lm_head", Role::LM_HEAD, Role::LM_HEAD_B);
}

static const char *const kTypes[] = {"phimoe", nullptr};
static const char *const kArchs[] = {"PhimoeForCausalLM", "PhiMoEForCausalLM", nullptr};

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static void phimoe_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    j.b("lm_head_bias", m.tensor("output.bias") != nullptr);
}
static const char *const kPhimoeGgufArchs[] = {"phimoe", nullptr};
extern const GgufFamily kGgufPhimoe = {
    .archs = kPhimoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufMixtralMoe,
    .config = phimoe_gguf_config,
};

extern const FamilyDef kPhimoeFamily = {
    "phimoe",
    kTypes,
    kArchs,
    &kGgufPhimoe,
    "Q/K/V/O and output biases, LayerNorm, Mixtral-style experts; sparsemixer router recorded",
    "tests/fixtures/families/phimoe",
    false,
    nullptr,
    phimoe_defaults,
    phimoe_finish,
    phimoe_roles,
};

}  // namespace stk
