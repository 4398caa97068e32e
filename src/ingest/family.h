// The table of model families (issue 20): everything stk knows about one HuggingFace
// architecture lives in one FamilyDef, in src/ingest/families/<family>.cc.  parse_model_config
// (config.cc) is a driver over the table: it finds the family by config.json's model_type, reads
// what every family spells alike, and calls the family's hooks for the rest; the role presets
// (roles.cc), `stk --list-models` and the GGUF reader (general.architecture) read the same table.
//
// Adding a family: one file in src/ingest/families/ defining a FamilyDef (and, for GGUF input,
// its GgufFamily: ingest/gguf_family.h), one line in families/table.cc, one fixture
// (tests/fixtures/families/).
#pragma once

#include <simdjson.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "ingest/config.h"
#include "ingest/roles.h"

namespace stk {

struct GgufFamily;  // ingest/gguf_family.h

// Typed access to config.json keys, every error naming the file and the key.
class ConfigReader {
public:
    ConfigReader(simdjson::dom::object obj, const std::string &source) : obj_(obj), source_(source) {}

    bool has(const char *key) const;      // present and not null
    bool present(const char *key) const;  // present, null or not
    // An unsigned integer (JSON integers, or floats with an integral value such as 1e4).
    bool u64(const char *key, uint64_t *out) const;
    bool f64(const char *key, double *out) const;
    bool boolean(const char *key, bool *out) const;
    bool str(const char *key, std::string *out) const;
    // The first of several spellings that is present.
    bool u64_any(std::initializer_list<const char *> keys, uint64_t *out, const char **which = nullptr) const;
    bool f64_any(std::initializer_list<const char *> keys, double *out) const;
    // A required value in [lo, hi].
    uint64_t need(std::initializer_list<const char *> keys, uint64_t lo, uint64_t hi, const char *what) const;
    void check_range(const char *key, uint64_t v, uint64_t lo, uint64_t hi) const;
    // A nested object (rope_scaling, quantization_config); false when absent or null.
    bool object(const char *key, simdjson::dom::object *out) const;
    // A JSON array (layer_types, mlp_only_layers); false when absent or null.
    bool array(const char *key, simdjson::dom::array *out) const;

    simdjson::dom::object obj() const { return obj_; }
    const std::string &source() const { return source_; }

private:
    simdjson::dom::object obj_;
    const std::string &source_;
};

// Builds a family's role rules.  Every pattern is anchored (whole-name match); use the LAYER and
// EXPERT groups below for the indices.
#define STK_LAYER "(?P<layer>[0-9]+)"
#define STK_EXPERT "(?P<expert>[0-9]+)"
struct RoleRules {
    std::vector<RoleRule> rules;
    RoleRule &add(std::string pattern, Role role);
    void norm(const std::string &stem, NormSlot slot);  // stem.weight -> LN_G, stem.bias -> LN_B
    void linear(const std::string &stem, Role w, Role b, bool transpose = false);
};

// What one family knows.  The hooks run in this order inside parse_model_config, after the
// shapes (d_model, layers, heads, vocab, head_dim) are read:
//   kv_heads (optional; default: num_key_value_heads / num_kv_heads),
//   defaults (the HF config class defaults: norm, positions, biases, activation, tie, layout),
//   then the generic reads (tie_word_embeddings, hidden_act, FFN size, norm eps, positions and
//   rope_scaling, experts), then finish (optional: family keys that depend on those).
struct FamilyDef {
    const char *name;                  // stk's name (--list-models, inspect)
    const char *const *model_types;    // config.json "model_type" values, null-terminated
    const char *const *architectures;  // config.json "architectures" entries, null-terminated
    const GgufFamily *gguf;            // its GGUF part (architectures, renames, fixes), or nullptr
    const char *summary;               // one line for --list-models: layout, what is exact
    const char *fixture;               // the test model it is checked on (a repository path)
    bool ffn_default_4x;               // no intermediate_size: 4 * d_model (GPT-2's n_inner = null)
    void (*kv_heads)(const ConfigReader &c, const std::string &model_type, ModelConfig &m);
    void (*defaults)(const ConfigReader &c, const std::string &model_type, ModelConfig &m);
    void (*finish)(const ConfigReader &c, const std::string &model_type, ModelConfig &m);
    void (*roles)(RoleRules &r, const ModelConfig &m);
};

// The table, in --list-models order; kFamilyDefs[0] is "custom" (user role patterns only).
extern const FamilyDef *const kFamilyDefs[];
extern const uint32_t kFamilyCount;

const FamilyDef &family_def(FamilyId id);
// The family whose model_types hold `model_type`; kCustomFamily when none.
FamilyId family_by_model_type(const std::string &model_type);
// The GGUF general.architecture values a family reads (its GGUF part's), null-terminated; nullptr when none.
const char *const *family_gguf_archs(const FamilyDef &f);
// The family whose GGUF part lists `arch` (GGUF general.architecture); kCustomFamily when none.
FamilyId family_by_gguf_arch(const std::string &arch);
// The family named `name` (FamilyDef::name); kCustomFamily when none.
FamilyId family_by_name(const std::string &name);

// Helpers the family files share.
void copy_config_str(char *dst, size_t cap, const std::string &s);
void set_activation(ModelConfig &m, const char *act);
// The llama layout of tensor names (model.layers.N.self_attn.q_proj, mlp.gate_proj, ...), shared
// by the families that kept it.
// model.embed_tokens (EMB), model.norm (final), lm_head.
void llama_ends_roles(RoleRules &r);
// self_attn.q_proj / k_proj / v_proj / o_proj (weights and biases) under prefix `lp`.
void llama_qkvo_roles(RoleRules &r, const std::string &lp);
// mlp.gate_proj (W1), up_proj (W3), down_proj (W2) under prefix `lp`.
void llama_mlp_roles(RoleRules &r, const std::string &lp);
// The two norms and q/k/v/o of a Llama-style layer under prefix `lp` (no FFN).
void llama_attention_roles(RoleRules &r, const std::string &lp);
void llama_layer_roles(RoleRules &r, const std::string &lp);
void llama_roles(RoleRules &r, const ModelConfig &m);
// LlamaConfig's defaults: RMSNorm, RoPE base 10000, gated SiLU FFN, untied head, no biases.
void llama_defaults(ModelConfig &m);
// attention_bias / mlp_bias as LlamaConfig reads them.
void llama_bias_keys(const ConfigReader &c, ModelConfig &m);
// "sliding_window" (when set and > 0) on every layer (Mistral-7B-v0.1, Starcoder2).
void read_sliding_window_all(const ConfigReader &c, ModelConfig &m);
// Layers that attend through a sliding window: layer_types ("sliding_attention" /
// "full_attention"), else every layer but each `pattern`-th (Gemma 3's sliding_window_pattern).
void read_sliding_layers(const ConfigReader &c, ModelConfig &m, uint32_t pattern);
// self_attn.q_norm / k_norm under `attn_prefix` (Qwen3, OLMo2, OLMoE).
void qk_norm_roles(RoleRules &r, const std::string &attn_prefix);
// Routed experts under `mlp_prefix`: <router>.weight, experts.E.<w1|w3|w2>.weight.
void moe_mlp_roles(RoleRules &r, const std::string &mlp_prefix, const char *router, const char *w1, const char *w3,
                   const char *w2);
// Gemma 2 / 3: the llama names with four norms per layer and q/k norms.
void gemma_sandwich_roles(RoleRules &r, const ModelConfig &m);

}  // namespace stk
