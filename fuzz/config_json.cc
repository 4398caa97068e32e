// Fuzz config.json parsing and the role mapping behind it: parse_model_config (simdjson DOM,
// every key's type and range, "stk_roles" rules), RoleMapper (RE2 compilation of user patterns,
// capture groups, index parsing) over a pool of real tensor names of every family, and
// analyze_model's validation over a small synthetic checkpoint.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "ingest/config.h"
#include "ingest/model.h"
#include "ingest/roles.h"

namespace {

// A table: clang-format would put one value per line.
// clang-format off
const char *const kNames[] = {
    "wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias",
    "h.0.attn.c_proj.weight", "h.0.attn.bias", "h.0.attn.masked_bias", "h.0.mlp.c_fc.weight", "h.1.mlp.c_proj.weight",
    "transformer.h.1.ln_2.bias", "ln_f.weight", "lm_head.weight", "model.embed_tokens.weight",
    "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
    "model.layers.1.self_attn.v_proj.bias", "model.layers.1.self_attn.o_proj.weight",
    "model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.0.mlp.gate_proj.weight",
    "model.layers.1.mlp.down_proj.weight", "model.layers.0.block_sparse_moe.gate.weight",
    "model.layers.0.block_sparse_moe.experts.1.w1.weight", "model.layers.1.mlp.experts.0.up_proj.weight",
    "model.layers.1.mlp.shared_expert.down_proj.weight", "model.layers.1.mlp.shared_expert_gate.weight",
    "model.layers.99999999999.input_layernorm.weight", "model.norm.weight", "gpt_neox.embed_in.weight",
    "gpt_neox.layers.0.attention.query_key_value.weight", "gpt_neox.layers.1.attention.query_key_value.bias",
    "gpt_neox.final_layer_norm.bias", "embed_out.weight", "word_embeddings.weight",
    "word_embeddings_layernorm.weight", "h.1.self_attention.query_key_value.weight", "transformer.h.0.ln_mlp.weight",
    "", "x",
};
// clang-format on

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        std::string text(reinterpret_cast<const char *>(data), size);
        stk::ParsedConfig cfg = stk::parse_model_config(text, "fuzz/config.json");
        const stk::ModelConfig &c = cfg.config;
        stk::RoleMapper mapper(cfg.user_rules, stk::preset_rules(c), cfg.source);
        std::vector<stk::TensorRef> tensors;
        for (const char *n : kNames) {
            stk::RoleMatch m = mapper.match(n);
            if (m.role != stk::Role::NONE && m.rule < 0) __builtin_trap();
            stk::TensorRef t;
            t.name = n;
            t.dtype = stk::SrcDType::F32;
            // Small shapes derived from the config: most combinations are refused, which is the point.
            uint64_t d = c.d_model, h = (uint64_t(c.n_heads) + 2 * c.n_kv_heads) * c.head_dim;
            if (m.role == stk::Role::QKV) t.shape = {h, d};
            else if (m.role == stk::Role::QKV_B) t.shape = {h};
            else if (m.role == stk::Role::LN_G || m.role == stk::Role::LN_B) t.shape = {d};
            else t.shape = {c.vocab_size < 64 ? c.vocab_size : 64, d};
            t.n_elements = 1;
            for (uint64_t x : t.shape) t.n_elements *= x;
            t.n_bytes = t.n_elements * 4;
            t.file = "fuzz.safetensors";
            tensors.push_back(t);
        }
        // expected_tensors() is linear in layers x experts: keep each run short.
        if (uint64_t(c.n_layers) * (c.n_experts + 1) <= 4096) {
            stk::ModelLayout L = stk::analyze_model(cfg, tensors);
            for (const stk::PlanTensor &t : L.tensors)
                if (t.streamed && (t.unit >= L.units.size() || t.role == stk::Role::QKV)) __builtin_trap();
            (void)stk::expected_param_count(c);
        }
    } catch (const stk::Error &) {
    }
    return 0;
}
