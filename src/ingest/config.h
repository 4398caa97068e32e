// config.json normalised to one model description (seed 2.1; issue 3 item 3).
//
// HuggingFace families spell the same quantity many ways (hidden_size / n_embd / d_model, ...)
// and leave much implicit (GPT-2's n_inner = null means 4 * d_model; Bloom has ALiBi but says
// nothing about it).  parse_model_config() reads one family's spelling and defaults and fills a
// ModelConfig whose fields mean the same thing for every family.  ModelConfig is plain data
// (fixed arrays, no pointers): it is copied into the job's arena as part of the ModelPlan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ingest/roles.h"

namespace stk {

// A family is an index into the table of families (ingest/family.h, kFamilyDefs); 0 is
// "custom": an unknown model_type described by user role patterns ("stk_roles").
using FamilyId = uint16_t;
constexpr FamilyId kCustomFamily = 0;
const char *family_name(FamilyId f);

enum class FfnKind : uint8_t { Plain = 0, Gated = 1 };  // W2 act(W1 x) / W2 (act(W1 x) * W3 x)
enum class NormKind : uint8_t { LayerNorm = 0, RmsNorm = 1 };
enum class PosKind : uint8_t { None = 0, Learned = 1, Rope = 2, Alibi = 3 };
const char *ffn_kind_name(FfnKind k);
const char *norm_kind_name(NormKind k);
const char *pos_kind_name(PosKind k);

// Caps on what a config may declare: far above any released model, low enough that products
// of them stay inside 64 bits and every later allocation is bounded.
constexpr uint64_t kMaxDModel = 1u << 17;
constexpr uint64_t kMaxLayers = 1024;
constexpr uint64_t kMaxHeads = 4096;
constexpr uint64_t kMaxHeadDim = 4096;
constexpr uint64_t kMaxVocab = 1u << 24;
constexpr uint64_t kMaxFfn = 1u << 20;
constexpr uint64_t kMaxExperts = 1024;
constexpr uint64_t kMaxLayerExperts = 1u << 17;  // layers x experts (DeepSeek-V3: 61 x 256)
constexpr uint64_t kMaxPositions = 1ull << 24;
constexpr uint64_t kMaxConfigBytes = 4u << 20;  // config.json / stk_roles.json size cap
constexpr uint32_t kMaxDenseLayerList = 64;     // qwen2_moe mlp_only_layers entries kept

// How q/k are normalised before RoPE (Qwen3, Gemma 3, OLMo2, Cohere).
enum class QkNorm : uint8_t { None = 0, PerHead = 1, Whole = 2 };  // weight [head_dim] / [heads * head_dim]
const char *qk_norm_name(QkNorm k);

struct ModelConfig {
    char model_type[32] = {};  // as written in config.json (truncated to 31 bytes)
    FamilyId family = kCustomFamily;

    uint32_t d_model = 0;
    uint32_t n_layers = 0;
    uint32_t n_heads = 0;
    uint32_t n_kv_heads = 0;  // == n_heads without GQA/MQA
    uint32_t head_dim = 0;
    uint64_t vocab_size = 0;

    uint64_t ffn_dim = 0;  // dense FFN hidden size (intermediate_size / n_inner / 4*d)
    FfnKind ffn_kind = FfnKind::Plain;
    char activation[24] = {};  // "gelu_new", "silu", "gelu", ...

    NormKind norm = NormKind::LayerNorm;
    double norm_eps = 0;
    uint32_t norms_per_layer = 2;  // pre-norms: Falcon-7B style parallel blocks share one input norm
    bool post_norms = false;       // a norm on each sublayer's output too (Gemma 2/3 sandwich, OLMo2)
    double norm_offset = 0;        // the gain is offset + weight (Gemma stores w, multiplies by 1 + w)
    QkNorm qk_norm = QkNorm::None;
    double emb_multiplier = 1;  // the embedding is scaled by this (Gemma: sqrt(d_model))

    PosKind positions = PosKind::None;
    double rope_theta = 0;            // RoPE base (rope_theta / rotary_emb_base)
    uint32_t rotary_dim = 0;          // rotated dims per head (NeoX rotary_pct < 1 rotates a part)
    char rope_scaling_type[24] = {};  // "" none; "linear", "dynamic", "yarn", "llama3", ...
    double rope_scaling_factor = 0;
    uint64_t rope_original_max = 0;                              // original_max_position_embeddings (llama3, yarn, longrope)
    double rope_low_freq_factor = 0, rope_high_freq_factor = 0;  // llama3
    double rope_beta_fast = 0, rope_beta_slow = 0;               // yarn (0: 32 and 1)
    bool rope_yarn_truncate = true;                              // yarn: correction range rounded to whole dims
    double rope_attn_factor = 1;                                 // yarn: cos and sin are scaled by this (mscale)
    uint32_t n_rope_long_factor = 0;                             // longrope long_factor (one per rotary pair)
    float rope_long_factor[256] = {};
    uint64_t max_positions = 0;                   // max_position_embeddings / n_positions (0: not stated)
    double rope_local_theta = 0;                  // RoPE base of the sliding-window layers (Gemma 3; 0: rope_theta)
    uint32_t sliding_window = 0;                  // tokens a sliding-window layer sees (0: none)
    uint8_t sliding_layers[kMaxLayers / 8] = {};  // bit l: layer l attends through the window
    double attn_softcap = 0;                      // tanh soft-capping of attention logits (Gemma 2; 0: none)
    double final_softcap = 0;                     // of the output logits
    double attn_scale = 0;           // the attention logits' scale (Gemma: query_pre_attn_scalar^-1/2; 0: head_dim^-1/2)
    double logit_scale = 1;          // the output logits are multiplied by this (Cohere logit_scale, Granite 1/logits_scaling)
    double residual_multiplier = 1;  // each sublayer's output is scaled by this before the residual add (Granite)
    bool rope_interleaved = false;   // RoPE rotates pairs (2i, 2i+1) (GPT-J, Cohere), not (i, i + rotary_dim / 2)
    double alibi_scale = 1;          // the ALiBi bias is scaled with the logits (Falcon-RW: head_dim^-1/2)
    bool attn_sinks = false;         // one learned logit per head joins each softmax (gpt-oss; ATTN_SINK)

    // Multi-head latent attention (DeepSeek-V2/V3; mla false: none).  head_dim is then the stages'
    // per-head width max(qk_nope + qk_rope, v_head_dim): the composed W_Q / W_K put each head's
    // rotary part first (de-interleaved), W_V / W_O are padded with zero rows / columns to it.
    bool mla = false;
    bool mla_rope_interleaved = false;  // the stored rotary rows pair (2i, 2i+1) (V2; V3 rope_interleave)
    uint32_t q_lora_rank = 0;           // 0: q_proj, no low-rank query
    uint32_t kv_lora_rank = 0;
    uint32_t qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
    double mla_rope_gain = 1;   // yarn's cos/sin factor on the rotary rows (folded into W_Q, W_K)
    uint32_t n_mtp_layers = 0;  // V3 num_nextn_predict_layers: extra layers after the model, listed as buffers

    // Mixture of experts (n_experts == 0: dense).
    uint32_t n_experts = 0;
    uint32_t top_k = 0;
    uint64_t moe_ffn_dim = 0;            // per expert
    uint64_t shared_expert_ffn_dim = 0;  // qwen2_moe shared expert (0: none)
    bool shared_expert_gate = false;     // qwen2_moe: sigmoid gate on the shared expert
    bool norm_topk_prob = false;         // renormalise the top-k router weights
    bool expert_bias = false;            // routed experts carry FFN biases (gpt-oss)
    double swiglu_limit = 0;             // gpt-oss: gate clamped to <= limit, up to [-limit, limit] (0: none)
    double gated_up_offset = 0;          // gpt-oss: act(gate) * (up + offset)
    char router[24] = {};                // "softmax_topk"
    uint32_t moe_layer_step = 1;         // qwen2_moe decoder_sparse_step
    uint32_t n_dense_layers = 0;         // qwen2_moe mlp_only_layers (the first kMaxDenseLayerList)
    uint32_t first_moe_layer = 0;        // DeepSeek first_k_dense_replace: layers before it are dense
    double routed_scaling = 1;           // DeepSeek routed_scaling_factor: routed experts' weights x this
    uint32_t n_group = 0, topk_group = 0;  // DeepSeek group-limited routing (0: none)
    double router_jitter = 0;              // PhiMoE sparsemixer's router_jitter_noise (its band is 2x this)
    bool router_bias = false;              // Role::ROUTER_B: DeepSeek-V3 e_score_correction_bias, gpt-oss router.bias
    uint32_t dense_layers[kMaxDenseLayerList] = {};

    // quantization_config quant_method "fp8" (DeepSeek-V3, Qwen3-FP8): F8 weights with
    // <name>_scale_inv block scales of fp8_block[0] x fp8_block[1] (0: not block-scaled fp8).
    uint32_t fp8_block[2] = {0, 0};

    bool tied_embeddings = false;  // lm_head shares the token embedding
    bool parallel_attn = false;    // attention and FFN read the same input (NeoX, Falcon)
    bool qkv_bias = false;
    bool o_bias = false;
    bool mlp_bias = false;
    bool emb_norm = false;                       // Bloom: LayerNorm right after the embedding
    bool norm_bias = true;                       // LayerNorms carry a bias (MPT no_bias, Cohere, OLMo: none)
    bool lm_head_bias = false;                   // the output projection has a bias (Phi-2, GPT-J)
    uint32_t pos_offset = 0;                     // learned position table rows before position 0 (OPT: 2)
    QkvLayout qkv_layout = QkvLayout::Separate;  // how a fused query_key_value is laid out
    bool mxfp4 = false;                          // quantization_config "mxfp4": NAME_blocks + NAME_scales (ingest/mxfp4.h)

    bool layer_is_sliding(uint32_t layer) const { return layer < kMaxLayers && (sliding_layers[layer / 8] >> (layer % 8)) & 1; }
    // True if layer i routes through experts (qwen2_moe may keep some layers dense).
    bool layer_is_moe(uint32_t layer) const;
    // FFN hidden size of an expert index (-1 dense, -2 shared, >= 0 routed).
    uint64_t ffn_dim_for(int32_t expert) const;
};

// What config.json (and an optional stk_roles.json beside it) said: the description and the
// user's role patterns (tried before the family preset).
struct ParsedConfig {
    ModelConfig config;
    std::vector<RoleRule> user_rules;
    std::string source;  // file name for messages
};

// Parse config.json text.  `source` names the file in messages.  Errors: STK_E_BAD_JSON (syntax,
// wrong types), STK_E_UNKNOWN_MODEL (no preset and no "stk_roles"), STK_E_UNSUPPORTED
// (encoder-decoder models such as whisper), STK_E_INVALID_ARGUMENT never.
ParsedConfig parse_model_config(const std::string &json_text, const std::string &source,
                                const std::string *roles_file_text = nullptr, const std::string &roles_source = std::string());

// What the spec's arrays cannot represent of this model and what stk does instead (soft-capping,
// sliding windows, per-layer RoPE bases, q/k norms, multipliers): one short line each (at most 95
// characters: a manifest record).  Empty for the families whose every feature is represented.
std::vector<std::string> model_approximations(const ModelConfig &c);

// <dir>/config.json plus <dir>/stk_roles.json if present; each at most kMaxConfigBytes.
ParsedConfig load_model_config(const std::string &dir);
// The same from the resolved files (ingest/model_files.h): raises the refusal kept there, else
// reads files.config (and files.roles when present) without probing the directory again.
struct ModelFiles;
ParsedConfig load_model_config(const ModelFiles &files);

// Parse a role-pattern list: a JSON array of {"pattern", "role", ...} objects, or an object
// {pattern: role}, or {"stk_roles": either}.  Used for "stk_roles" and stk_roles.json.
std::vector<RoleRule> parse_role_rules_json(const std::string &json_text, const std::string &source);

}  // namespace stk
