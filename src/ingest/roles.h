// Tensor roles (seed 3.1-3.3): an ordered list of regular expressions (RE2: linear time, no
// backtracking blow-up on hostile names) maps each tensor name to a role tag, a layer index and
// an expert index.  First matching rule wins; rules are ordered by (priority, pattern string
// bytewise), so patterns given as a JSON object - whose key order means nothing - resolve ties
// by the lexical order of the pattern (3.2).  No match: the tensor has no role (3.2 "absence =>
// role omitted").  Full grammar: docs/decisions.md, "Decisions: model description and roles".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stk {

struct ModelConfig;

// The spec's 13 tags first, in the spec's order (the order parse_tensors visits a layer in),
// then the extensions real checkpoints need (documented in docs/decisions.md).
// A table: clang-format would put one value per line.
// clang-format off
enum class Role : uint8_t {
    EMB = 0, Q, K, V, O, FFN_W1, FFN_W2, FFN_B1, FFN_B2, LN_G, LN_B, ROUTER_GATE, ROPE_ALPHA,
    // extensions
    FFN_W3,       // the "up" matrix of a gated FFN (W1 is the gate, W2 the down projection)
    FFN_B3,
    Q_B, K_B, V_B, O_B,  // attention biases
    POS_EMB,      // learned absolute position embeddings
    LM_HEAD,      // output projection (tied to EMB when absent and the config says so)
    SHARED_GATE,  // qwen2_moe shared_expert_gate
    LM_HEAD_B,    // output projection bias (Phi-2, GPT-J)
    // multi-head latent attention (DeepSeek-V2/V3): the stored low-rank factors; the stages read
    // per-head Q, K, V (and a padded O) composed from them (PlanTensor::composed)
    MLA_Q_A,      // q_a_proj [q_lora_rank, d]
    MLA_Q_B,      // q_b_proj [heads * (nope + rope), q_lora_rank]
    MLA_KV_A,     // kv_a_proj_with_mqa [kv_lora_rank + rope, d]
    MLA_KV_B,     // kv_b_proj [heads * (nope + v), kv_lora_rank]
    ROUTER_B,     // a per-expert router bias: for the choice only (DeepSeek-V3), added to the logits (gpt-oss)
    ATTN_SINK,    // one learned logit per head added to each softmax (gpt-oss attention sinks)
    // only in rules: split into Q/K/V (or Q_B/K_B/V_B) by the rule's layout
    QKV, QKV_B,
    FFN_W13,      // only in rules: a fused [gate; up] matrix (Phi-3 gate_up_proj) split into FFN_W1, FFN_W3
    FFN_B13,      // only in rules: its fused bias, split into FFN_B1, FFN_B3
    BUFFER,       // not a parameter (attn.bias masks, masked_bias): skipped, not counted
    NONE,         // matched no rule
};
// clang-format on
constexpr int kRoleCount = int(Role::NONE) + 1;
const char *role_name(Role r);
bool parse_role_name(const std::string &s, Role *out);

// Which norm of a block an LN_G / LN_B is.
// Attn / Ffn: the norm before each sublayer; PostAttn / PostFfn: on each sublayer's output
// (Gemma 2/3 sandwich, OLMo2); QNorm / KNorm: on the queries and keys (Qwen3, Gemma 3, OLMo2).
enum class NormSlot : uint8_t {
    None = 0,
    Attn = 1,
    Ffn = 2,
    Final = 3,
    Emb = 4,
    PostAttn = 5,
    PostFfn = 6,
    QNorm = 7,
    KNorm = 8,
    QLora = 9,   // MLA q_a_layernorm (between q_a_proj and q_b_proj)
    KvLora = 10  // MLA kv_a_layernorm (between kv_a_proj_with_mqa and kv_b_proj)
};
const char *norm_slot_name(NormSlot s);

// Layout of a fused query_key_value tensor's output rows.
enum class QkvLayout : uint8_t {
    Separate = 0,  // not fused
    Concat,        // [Q rows; K rows; V rows]            (GPT-2 c_attn, Falcon multi-query)
    PerHead,       // [heads, 3, head_dim]                 (GPT-NeoX, Bloom, Falcon-RW)
    Grouped,       // [kv_heads, q_per_kv + 2, head_dim]   (Falcon new_decoder_architecture)
    Interleaved,   // FFN_W13 only: [gate 0, up 0, gate 1, up 1, ...] (gpt-oss gate_up_proj)
    FromConfig,    // presets: use ModelConfig::qkv_layout
};
const char *qkv_layout_name(QkvLayout l);

constexpr int32_t kNoLayer = -1;
constexpr int32_t kNoExpert = -1;
constexpr int32_t kSharedExpert = -2;

struct RoleRule {
    std::string pattern;  // RE2 syntax, must match the WHOLE name; groups (?P<layer>..) and
                          // (?P<expert>..) give the indices
    Role role = Role::NONE;
    NormSlot slot = NormSlot::None;
    QkvLayout layout = QkvLayout::Separate;  // for QKV / QKV_B
    bool transpose = false;                  // stored [in, out] (GPT-2 Conv1D): transposed to [out, in]
    bool shared = false;                     // the MoE shared expert (expert index kSharedExpert)
    bool buffer = false;                     // a role-bearing buffer (rotary inv_freq): not a parameter
    bool stacked = false;                    // every expert's tensor along the first axis (gpt-oss [E, ...]):
                                             // one plan entry per expert, each a view of its slice
    uint32_t priority = 0;                   // order key before the pattern string
};

struct RoleMatch {
    Role role = Role::NONE;
    int32_t layer = kNoLayer;
    int32_t expert = kNoExpert;
    int rule = -1;  // index into RoleMapper::rules()
};

// Built-in presets: the rules of the config's family (ingest/family.h; empty for custom models).
std::vector<RoleRule> preset_rules(const ModelConfig &cfg);

class RoleMapper {
public:
    // user rules first (their own priorities), then the preset; compiled once.  A pattern that
    // RE2 refuses is STK_E_BAD_JSON naming the pattern and `source`.
    RoleMapper(const std::vector<RoleRule> &user, const std::vector<RoleRule> &preset, const std::string &source);
    ~RoleMapper();
    RoleMapper(const RoleMapper &) = delete;
    RoleMapper &operator=(const RoleMapper &) = delete;

    RoleMatch match(const std::string &name) const;
    const std::vector<RoleRule> &rules() const { return rules_; }

private:
    struct Compiled;
    std::vector<RoleRule> rules_;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace stk
