// MPT (mosaicml/mpt-7b): ALiBi, the fused Wqkv as [Q; K; V], LayerNorm without bias (no_bias),
// no linear biases, plain gelu FFN up_proj / down_proj of expansion_ratio x d_model, tied head.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

static void mpt_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.positions = PosKind::Alibi;
    m.qkv_layout = QkvLayout::Concat;
    set_activation(m, "gelu");
    bool no_bias = true;
    c.boolean("no_bias", &no_bias);
    m.qkv_bias = m.o_bias = m.mlp_bias = m.norm_bias = !no_bias;
    simdjson::dom::object attn;
    if (c.object("attn_config", &attn)) {
        ConfigReader a(attn, c.source());
        bool alibi = true, qk_ln = false;
        double clip = 0;
        a.boolean("alibi", &alibi);
        a.boolean("qk_ln", &qk_ln);
        a.f64("clip_qkv", &clip);
        uint64_t bias_max = 8;
        a.u64("alibi_bias_max", &bias_max);
        if (!alibi || qk_ln || clip != 0 || bias_max != 8)
            throw_error(STK_E_UNSUPPORTED,
                        "%s: MPT attn_config other than alibi with alibi_bias_max 8, no qk_ln and no clip_qkv is not "
                        "converted",
                        c.source().c_str());
        double scale = 0;
        if (a.f64("softmax_scale", &scale)) m.attn_scale = scale;
    }
}

static void mpt_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    // transformers' MptMLP is 4 x d_model whatever expansion_ratio says; so is every released MPT.
    uint64_t r = 4;
    c.u64("expansion_ratio", &r);
    if (r != 4)
        throw_error(STK_E_UNSUPPORTED,
                    "%s: MPT with \"expansion_ratio\": %llu is not converted (transformers builds 4 x d_model)",
                    c.source().c_str(), (unsigned long long)r);
    m.ffn_dim = 4ull * m.d_model;
}

static void mpt_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "transformer\\.blocks\\." STK_LAYER "\\.";
    p.add("transformer\\.wte\\.weight", Role::EMB);
    p.norm(lp + "norm_1", NormSlot::Attn);
    p.norm(lp + "norm_2", NormSlot::Ffn);
    p.add(lp + "attn\\.Wqkv\\.weight", Role::QKV).layout = QkvLayout::Concat;
    p.add(lp + "attn\\.Wqkv\\.bias", Role::QKV_B).layout = QkvLayout::Concat;
    p.linear(lp + "attn\\.out_proj", Role::O, Role::O_B);
    p.linear(lp + "ffn\\.up_proj", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "ffn\\.down_proj", Role::FFN_W2, Role::FFN_B2);
    p.norm("transformer\\.norm_f", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"mpt", nullptr};
static const char *const kArchs[] = {"MptForCausalLM", nullptr};
extern const GgufFamily kGgufMpt;  // its GGUF part (families/gguf_legacy.cc for now)

extern const FamilyDef kMptFamily = {
    "mpt",
    kTypes,
    kArchs,
    &kGgufMpt,
    "ALiBi, fused Wqkv [Q; K; V], bias-free LayerNorm and linears",
    "tests/fixtures/families/mpt",
    true,
    nullptr,
    mpt_defaults,
    mpt_finish,
    mpt_roles,
};

}  // namespace stk
