// OPT (facebook/opt-125m): learned positions whose table starts 2 rows before position 0
// (OPTLearnedPositionalEmbedding), pre-norm LayerNorms, biases everywhere, ReLU FFN fc1 / fc2,
// tied head.  opt-350m's post-norm blocks and project_in / project_out are refused by name.
#include "core/error.h"
#include "ingest/family.h"

namespace stk {

static void opt_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.positions = PosKind::Learned;
    m.pos_offset = 2;
    set_activation(m, "relu");
    bool b = true;
    if (c.boolean("enable_bias", &b)) m.qkv_bias = m.o_bias = m.mlp_bias = b;
    bool before = true;
    c.boolean("do_layer_norm_before", &before);
    uint64_t proj = 0, d = 0;
    c.u64("word_embed_proj_dim", &proj);
    c.u64("hidden_size", &d);
    if (!before || (proj && proj != d))
        throw_error(STK_E_UNSUPPORTED,
                    "%s: OPT with \"do_layer_norm_before\": false or \"word_embed_proj_dim\" != \"hidden_size\" (opt-350m's "
                    "post-norm blocks and project_in / project_out) is not converted",
                    c.source().c_str());
}

static void opt_roles(RoleRules &p, const ModelConfig &) {
    const std::string pre = "(?:model\\.)?decoder\\.";
    const std::string lp = pre + "layers\\." STK_LAYER "\\.";
    p.add(pre + "embed_tokens\\.weight", Role::EMB);
    p.add(pre + "embed_positions\\.weight", Role::POS_EMB);
    p.norm(lp + "self_attn_layer_norm", NormSlot::Attn);
    p.norm(lp + "final_layer_norm", NormSlot::Ffn);
    p.linear(lp + "self_attn\\.q_proj", Role::Q, Role::Q_B);
    p.linear(lp + "self_attn\\.k_proj", Role::K, Role::K_B);
    p.linear(lp + "self_attn\\.v_proj", Role::V, Role::V_B);
    p.linear(lp + "self_attn\\.out_proj", Role::O, Role::O_B);
    p.linear(lp + "fc1", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "fc2", Role::FFN_W2, Role::FFN_B2);
    p.norm(pre + "final_layer_norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

static const char *const kTypes[] = {"opt", nullptr};
static const char *const kArchs[] = {"OPTForCausalLM", nullptr};

extern const FamilyDef kOptFamily = {
    "opt",
    kTypes,
    kArchs,
    nullptr,  // no GGUF part: llama.cpp's converter has no class for it
    "learned positions offset by 2, LayerNorm, ReLU FFN, biases",
    "tests/fixtures/families/opt",
    false,
    nullptr,
    opt_defaults,
    nullptr,
    opt_roles,
};

}  // namespace stk
