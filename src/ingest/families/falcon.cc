// Falcon (tiiuae/falcon-7b, falcon-40b; the older RefinedWeb / RefinedWebModel types): parallel
// attention and FFN, fused query_key_value as multi-query [Q; K; V], per head, or grouped
// (new_decoder_architecture), RoPE or ALiBi.
#include <cmath>

#include "ingest/family.h"
#include "ingest/gguf_family.h"

namespace stk {

namespace {

struct FalconArch {
    bool multi_query = false, new_arch = false;
};

FalconArch falcon_arch(const ConfigReader &c, const std::string &model_type) {
    FalconArch a;
    c.boolean("multi_query", &a.multi_query);
    c.boolean("new_decoder_architecture", &a.new_arch);
    if (model_type == "RefinedWeb") a.new_arch = true;
    if (model_type == "RefinedWebModel") a.multi_query = true;
    return a;
}

void falcon_kv_heads(const ConfigReader &c, const std::string &model_type, ModelConfig &m) {
    FalconArch a = falcon_arch(c, model_type);
    uint64_t v;
    if (a.multi_query) m.n_kv_heads = 1;
    if (a.new_arch && c.u64_any({"num_kv_heads", "n_head_kv"}, &v)) m.n_kv_heads = uint32_t(v < kMaxHeads ? v : kMaxHeads + 1);
}

void falcon_defaults(const ConfigReader &c, const std::string &model_type, ModelConfig &m) {
    FalconArch a = falcon_arch(c, model_type);
    bool bias = false, alibi = false;
    c.boolean("bias", &bias);
    c.boolean("alibi", &alibi);
    m.qkv_bias = m.o_bias = m.mlp_bias = bias;
    m.positions = alibi ? PosKind::Alibi : PosKind::Rope;
    // FalconAttention adds the ALiBi bias before multiplying by head_dim^-1/2 (Bloom adds it after).
    if (alibi) m.alibi_scale = 1.0 / std::sqrt(double(m.head_dim));
    m.rope_theta = 10000.0;
    m.qkv_layout = a.new_arch ? QkvLayout::Grouped : a.multi_query ? QkvLayout::Concat : QkvLayout::PerHead;
    set_activation(m, "gelu");
    m.parallel_attn = true;
    c.boolean("parallel_attn", &m.parallel_attn);
    m.norms_per_layer = (m.parallel_attn && !a.new_arch) ? 1 : 2;
}

const char *const kTypes[] = {"falcon", "RefinedWeb", "RefinedWebModel", nullptr};
const char *const kArchs[] = {"FalconForCausalLM", "RWForCausalLM", nullptr};

}  // namespace

extern const GgufFamily kGgufFalcon;  // its GGUF part (families/gguf_legacy.cc for now)

void bloom_roles(RoleRules &p, const ModelConfig &m);

extern const FamilyDef kFalconFamily = {
    "falcon",
    kTypes,
    kArchs,
    &kGgufFalcon,
    "fused query_key_value (multi-query or grouped)",
    "tests/fixtures/families/falcon",
    true,
    falcon_kv_heads,
    falcon_defaults,
    nullptr,
    bloom_roles,
};

}  // namespace stk
