// GPT-J (EleutherAI/gpt-j-6b): attention and FFN in parallel under ln_1, RoPE on the first
// rotary_dim dims of each head rotating interleaved pairs, no attention biases, output bias.
#include "ingest/family.h"

namespace stk {

static void gptj_defaults(const ConfigReader &, const std::string &, ModelConfig &m) {
    m.tied_embeddings = false;
    m.parallel_attn = true;
    m.norms_per_layer = 1;
    m.mlp_bias = true;
    m.lm_head_bias = true;
    m.positions = PosKind::Rope;
    m.rope_theta = 10000.0;
    m.rope_interleaved = true;
    set_activation(m, "gelu_new");
}

static void gptj_finish(const ConfigReader &c, const std::string &, ModelConfig &m) {
    uint64_t v;
    if (c.u64("rotary_dim", &v)) {
        c.check_range("rotary_dim", v, 2, m.head_dim);
        m.rotary_dim = uint32_t(v);
    }
}

static void gptj_roles(RoleRules &p, const ModelConfig &) {
    const std::string lp = "transformer\\.h\\." STK_LAYER "\\.";
    p.add("transformer\\.wte\\.weight", Role::EMB);
    p.norm(lp + "ln_1", NormSlot::Attn);
    p.add(lp + "attn\\.q_proj\\.weight", Role::Q);
    p.add(lp + "attn\\.k_proj\\.weight", Role::K);
    p.add(lp + "attn\\.v_proj\\.weight", Role::V);
    p.add(lp + "attn\\.out_proj\\.weight", Role::O);
    p.add(lp + "attn\\.(?:bias|masked_bias)", Role::BUFFER);
    p.linear(lp + "mlp\\.fc_in", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.fc_out", Role::FFN_W2, Role::FFN_B2);
    p.norm("transformer\\.ln_f", NormSlot::Final);
    p.linear("lm_head", Role::LM_HEAD, Role::LM_HEAD_B);
}

static const char *const kTypes[] = {"gptj", nullptr};
static const char *const kArchs[] = {"GPTJForCausalLM", nullptr};
// llama.cpp writes this family as GGUF architecture "gptj"; stk has no GGUF part for it yet, so
// no GGUF architecture is listed (a "gptj" GGUF is refused by name).

extern const FamilyDef kGptjFamily = {
    "gptj",
    kTypes,
    kArchs,
    nullptr,  // no GGUF part: llama.cpp's converter has no class for it
    "parallel block, interleaved RoPE on rotary_dim, output bias",
    "tests/fixtures/families/gptj",
    true,
    nullptr,
    gptj_defaults,
    gptj_finish,
    gptj_roles,
};

}  // namespace stk
