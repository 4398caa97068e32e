// MPT (mosaicml/mpt-7b): ALiBi, the fused Wqkv as [Q; K; V], LayerNorm without bias (no_bias),
// no linear biases, plain gelu FFN up_proj / down_proj of expansion_ratio x d_model, tied head.
#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"
#include <cmath>

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

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
static const GgufRename kMptLayer[] = {
    {"attn_norm", "transformer.blocks.{L}.norm_1"},          {"attn_qkv", "transformer.blocks.{L}.attn.Wqkv"},
    {"attn_output", "transformer.blocks.{L}.attn.out_proj"}, {"ffn_norm", "transformer.blocks.{L}.norm_2"},
    {"ffn_up", "transformer.blocks.{L}.ffn.up_proj"},        {"ffn_down", "transformer.blocks.{L}.ffn.down_proj"},
};
// MptConfig spellings; the ALiBi bias maximum and clip_qkv under attn_config (the family refuses
// any but the released models' alibi 8, no clip).
static std::string mpt_gguf_config(const GgufMeta &m) {
    GgufJson g;
    g.str("model_type", "mpt");
    g.u("vocab_size", m.vocab);
    g.u("d_model", m.d);
    g.u("n_layers", m.layers);
    g.u("n_heads", m.heads);
    if (const GgufValue *v = m.get("context_length")) g.u("max_seq_len", v->as_uint());
    if (const GgufValue *v = m.get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
    g.b("no_bias", m.tensor("blk.0.attn_qkv.bias") == nullptr);
    GgufJson a;
    const GgufValue *bias_max = m.get("attention.max_alibi_bias");
    a.b("alibi", bias_max && bias_max->as_float() > 0);
    if (bias_max && bias_max->as_float() > 0) {
        const double bm = bias_max->as_float();
        if (bm != std::floor(bm) || bm > 1e6)
            throw_error(STK_E_UNSUPPORTED, "%s: metadata key %s is %g, not the whole number MPT's alibi_bias_max is",
                        m.path.c_str(), m.key("attention.max_alibi_bias").c_str(), bm);
        a.u("alibi_bias_max", uint64_t(bm));
    }
    if (const GgufValue *v = m.get("attention.clamp_kqv")) a.f("clip_qkv", *v);
    if (m.kv != m.heads) a.u("kv_n_heads", m.kv);
    g.raw("attn_config", a.done());
    g.b("tie_word_embeddings", m.tied_head());
    return g.done();
}
static const char *const kMptGgufArchs[] = {"mpt", nullptr};
extern const GgufFamily kGgufMpt = {
    .archs = kMptGgufArchs,
    .layer = kMptLayer,
    .globals = {"transformer.wte", nullptr, nullptr, "transformer.norm_f", "lm_head"},
    .whole_config = mpt_gguf_config,
};

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
