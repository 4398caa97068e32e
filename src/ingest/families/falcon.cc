// Falcon (tiiuae/falcon-7b, falcon-40b; the older RefinedWeb / RefinedWebModel types): parallel
// attention and FFN, fused query_key_value as multi-query [Q; K; V], per head, or grouped
// (new_decoder_architecture), RoPE or ALiBi.
#include <cmath>

#include "ingest/family.h"
#include "ingest/gguf_family.h"
#include <cstring>

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

// Its GGUF part (ingest/gguf_family.h): what llama.cpp's converter did, undone.
// new_decoder_architecture: gguf-py maps ln_mlp (the FFN's norm) to attn_norm and ln_attn to
// attn_norm_2 (llama.cpp's Falcon-40B graph: attn_norm_2 before attention, attn_norm before the FFN).
static const GgufRename kFalconLayer[] = {
    {"attn_norm", "transformer.h.{L}.input_layernorm"},
    {"attn_norm_2", "transformer.h.{L}.ln_attn"},
    {"attn_qkv", "transformer.h.{L}.self_attention.query_key_value"},
    {"attn_output", "transformer.h.{L}.self_attention.dense"},
    {"ffn_up", "transformer.h.{L}.mlp.dense_h_to_4h"},
    {"ffn_down", "transformer.h.{L}.mlp.dense_4h_to_h"},
};
static const char *falcon_gguf_layer_rename(const ModelConfig &c, const char *part) {
    return c.norms_per_layer == 2 && std::strcmp(part, "attn_norm") == 0 ? "transformer.h.{L}.ln_mlp" : nullptr;
}
static void falcon_gguf_config(const GgufMeta &m, GgufJson &j) {
    // 1 kv head without new_decoder_architecture is multi_query; ln_attn / ln_mlp (attn_norm_2)
    // mark the new architecture.
    const bool new_arch = m.tensor("blk.0.attn_norm_2.weight") != nullptr;
    j.b("new_decoder_architecture", new_arch);
    j.b("multi_query", !new_arch && m.kv == 1);
    j.u("num_kv_heads", m.kv);
    j.b("parallel_attn", true);
    j.b("bias", m.tensor("blk.0.attn_qkv.bias") != nullptr);
}
static const char *const kFalconGgufArchs[] = {"falcon", nullptr};
extern const GgufFamily kGgufFalcon = {
    .archs = kFalconGgufArchs,
    .layer = kFalconLayer,
    .globals = {"transformer.word_embeddings", nullptr, nullptr, "transformer.ln_f", "lm_head"},
    .fused_qkv = true,
    .kv_key = nullptr,
    .ffn_key = "ffn_hidden_size",
    .ffn_from_tensors = true,  // FalconModel writes feed_forward_length = 4 x hidden
    .config = falcon_gguf_config,
    .layer_rename = falcon_gguf_layer_rename,
};

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
