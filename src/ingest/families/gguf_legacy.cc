// TRANSITIONAL (issue 31): the families' GGUF parts, moved here out of ingest/gguf_model.cc as
// GgufFamily data and hooks; each moves on into its own family file, and this file goes.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ingest/family.h"
#include "ingest/gguf_family.h"
#include "ingest/mxfp4.h"

namespace stk {

// ---------------------------------------------------------------------------------------------
// Llama-named families.

static std::string llama_gguf_model_type(const GgufMeta &m) { return m.experts > 0 ? "mixtral" : "llama"; }
static const char *const kLlamaGgufArchs[] = {"llama", nullptr};
extern const GgufFamily kGgufLlama = {
    .archs = kLlamaGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufMixtralMoe,
    .permute_qk = true,
    .experts_key = "num_local_experts",
    .model_type = llama_gguf_model_type,
    .config = gguf_llama_bias_keys,
};

static const char *const kQwen2GgufArchs[] = {"qwen2", nullptr};
extern const GgufFamily kGgufQwen2 = {.archs = kQwen2GgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals};

// conversion/qwen.py: the shared-expert gate [1, d] stored as [d].
static const char *const kQwen2MoeGgufArchs[] = {"qwen2moe", nullptr};
static const char *const kQwen2MoeVectorRows[] = {"ffn_gate_inp_shexp", nullptr};
extern const GgufFamily kGgufQwen2Moe = {
    .archs = kQwen2MoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufQwen2MoeMoe,
    .vector_rows = kQwen2MoeVectorRows,
    .norm_topk_default = 0,  // Qwen2MoeConfig's default
};

static const char *const kQwen3GgufArchs[] = {"qwen3", nullptr};
extern const GgufFamily kGgufQwen3 = {.archs = kQwen3GgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals};

static const char *const kQwen3MoeGgufArchs[] = {"qwen3moe", nullptr};
extern const GgufFamily kGgufQwen3Moe = {
    .archs = kQwen3MoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufQwen2MoeMoe,
    .norm_topk_default = 1,
};

static const char *const kOlmo2GgufArchs[] = {"olmo2", nullptr};
extern const GgufFamily kGgufOlmo2 = {.archs = kOlmo2GgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals};

static const char *const kOlmoeGgufArchs[] = {"olmoe", nullptr};
extern const GgufFamily kGgufOlmoe = {
    .archs = kOlmoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufQwen2MoeMoe,
    .norm_topk_default = 0,  // OlmoeConfig's default
};

static const char *const kGemmaGgufArchs[] = {"gemma", nullptr};
extern const GgufFamily kGgufGemma = {
    .archs = kGemmaGgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals, .norm_plus_one = true};

// Gemma 2 / 3: soft-capping and the window read back; no key records query_pre_attn_scalar:
// llama.cpp scales by the head size, except for Gemma 2 27B (46 layers), where it takes hidden /
// heads (that model's 144).
static void gemma2_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    if (const GgufValue *v = m.get("final_logit_softcapping")) j.f("final_logit_softcapping", *v);
    if (const GgufValue *v = m.get("attn_logit_softcapping")) j.f("attn_logit_softcapping", *v);
    if (m.layers == 46 && m.heads) j.u("query_pre_attn_scalar", m.d / m.heads);
    else if (const GgufValue *v = m.get("attention.key_length")) j.u("query_pre_attn_scalar", v->as_uint());
}
static const char *const kGemma2GgufArchs[] = {"gemma2", nullptr};
extern const GgufFamily kGgufGemma2 = {
    .archs = kGemma2GgufArchs,
    .layer = kGgufGemma3Layer,
    .globals = kGgufLlamaGlobals,
    .norm_plus_one = true,
    .config = gemma2_gguf_config,
};

static void gemma3_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    if (const GgufValue *v = m.get("final_logit_softcapping")) j.f("final_logit_softcapping", *v);
    if (const GgufValue *v = m.get("attn_logit_softcapping")) j.f("attn_logit_softcapping", *v);
    if (const GgufValue *v = m.get("attention.key_length")) j.u("query_pre_attn_scalar", v->as_uint());
}
static const char *const kGemma3GgufArchs[] = {"gemma3", nullptr};
extern const GgufFamily kGgufGemma3 = {
    .archs = kGemma3GgufArchs,
    .layer = kGgufGemma3Layer,
    .globals = kGgufLlamaGlobals,
    .norm_plus_one = true,
    .config = gemma3_gguf_config,
};

static void stablelm_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("use_parallel_residual")) j.b("use_parallel_residual", v->boolean());
    j.b("use_qkv_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    // Per-head Q/K LayerNorms (StableLM 2 12B) are stacked as attn_q_norm / attn_k_norm, which
    // no rename maps: such a file is refused by that tensor's name.
}
static const char *const kStablelmGgufArchs[] = {"stablelm", nullptr};
extern const GgufFamily kGgufStablelm = {
    .archs = kStablelmGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .rotary_pct = true,
    .config = stablelm_gguf_config,
};

static void cohere_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("logit_scale")) j.f("logit_scale", *v);
    // Command R+'s per-head Q/K LayerNorms: the family refuses use_qk_norm by name.
    j.b("use_qk_norm", m.tensor("blk.0.attn_q_norm.weight") != nullptr);
    gguf_llama_bias_keys(m, j);
}
static const char *const kCohereGgufArchs[] = {"command-r", nullptr};
extern const GgufFamily kGgufCohere = {
    .archs = kCohereGgufArchs, .layer = kGgufLlamaLayer, .globals = kGgufLlamaGlobals, .config = cohere_gguf_config};

static const char *const kArceeGgufArchs[] = {"arcee", nullptr};
extern const GgufFamily kGgufArcee = {.archs = kArceeGgufArchs,
                                      .layer = kGgufLlamaLayer,
                                      .globals = kGgufLlamaGlobals,
                                      .permute_qk = true,
                                      .config = gguf_llama_bias_keys};

// ---------------------------------------------------------------------------------------------
// GPT-2.

static const GgufRename kGpt2Layer[] = {
    {"attn_norm", "h.{L}.ln_1"}, {"attn_qkv", "h.{L}.attn.c_attn"}, {"attn_output", "h.{L}.attn.c_proj"},
    {"ffn_norm", "h.{L}.ln_2"},  {"ffn_up", "h.{L}.mlp.c_fc"},      {"ffn_down", "h.{L}.mlp.c_proj"},
};
static const char *const kGpt2Transposed[] = {"attn_qkv", "attn_output", "ffn_up", "ffn_down", nullptr};
// GPT2Config spellings.  GPT2Model writes feed_forward_length = 4 x n_embd whatever n_inner is:
// n_inner from ffn_up.
static std::string gpt2_gguf_config(const GgufMeta &m) {
    GgufJson g;
    g.str("model_type", "gpt2");
    g.u("vocab_size", m.vocab);
    g.u("n_embd", m.d);
    g.u("n_layer", m.layers);
    g.u("n_head", m.heads);
    g.u("n_inner", m.ffn_width_from_tensors());
    const GgufTensorInfo *pos = m.tensor("position_embd.weight");
    if (pos && pos->shape.size() == 2) g.u("n_positions", pos->shape[0]);
    else if (const GgufValue *v = m.get("context_length")) g.u("n_positions", v->as_uint());
    if (const GgufValue *v = m.get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
    g.b("tie_word_embeddings", m.tied_head());
    return g.done();
}
static const char *const kGpt2GgufArchs[] = {"gpt2", nullptr};
extern const GgufFamily kGgufGpt2 = {
    .archs = kGpt2GgufArchs,
    .layer = kGpt2Layer,
    .globals = {"wte", "wpe", nullptr, "ln_f", "lm_head"},
    .transposed = kGpt2Transposed,
    .head_copy = true,  // GPT2Model before mid-2025: "GPT2 output is tied to (same as) wte"
    .whole_config = gpt2_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// GPT-NeoX, BLOOM, Falcon: fused QKV regrouped [Q; K; V].

static const GgufRename kNeoxLayer[] = {
    {"attn_norm", "gpt_neox.layers.{L}.input_layernorm"},   {"attn_qkv", "gpt_neox.layers.{L}.attention.query_key_value"},
    {"attn_output", "gpt_neox.layers.{L}.attention.dense"}, {"ffn_norm", "gpt_neox.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "gpt_neox.layers.{L}.mlp.dense_h_to_4h"},    {"ffn_down", "gpt_neox.layers.{L}.mlp.dense_4h_to_h"},
};
static void neox_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("use_parallel_residual")) j.b("use_parallel_residual", v->boolean());
}
static const char *const kNeoxGgufArchs[] = {"gptneox", nullptr};
extern const GgufFamily kGgufGptNeox = {
    .archs = kNeoxGgufArchs,
    .layer = kNeoxLayer,
    .globals = {"gpt_neox.embed_in", nullptr, nullptr, "gpt_neox.final_layer_norm", "embed_out"},
    .fused_qkv = true,
    .rotary_pct = true,
    .config = neox_gguf_config,
};

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

// ---------------------------------------------------------------------------------------------
// DeepSeek-V2 / V3 (llama.cpp's "deepseek2", conversion/deepseek.py DeepseekV2Model).

static const GgufRename kDeepseekLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_q_a", "model.layers.{L}.self_attn.q_a_proj"},
    {"attn_q_a_norm", "model.layers.{L}.self_attn.q_a_layernorm"},
    {"attn_q_b", "model.layers.{L}.self_attn.q_b_proj"},
    {"attn_kv_a_mqa", "model.layers.{L}.self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "model.layers.{L}.self_attn.kv_a_layernorm"},
    {"attn_kv_b", "model.layers.{L}.self_attn.kv_b_proj"},  // converters before attn_k_b / attn_v_b
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
    {"ffn_gate_inp", "model.layers.{L}.mlp.gate"},
    {"exp_probs_b", "model.layers.{L}.mlp.gate.e_score_correction_bias$"},
    {"ffn_gate_shexp", "model.layers.{L}.mlp.shared_experts.gate_proj"},
    {"ffn_up_shexp", "model.layers.{L}.mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "model.layers.{L}.mlp.shared_experts.down_proj"},
};
static const GgufRename kDeepseekMoeNames[] = {
    {"ffn_gate_exps", "model.layers.{L}.mlp.experts.{E}.gate_proj"},
    {"ffn_up_exps", "model.layers.{L}.mlp.experts.{E}.up_proj"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.{E}.down_proj"},
};
static const GgufRenames kDeepseekMoe = kDeepseekMoeNames;

// kv_b_proj [H (nope + v), kv_lora] = per head [k_b^T; v_b]: a = heads, b = nope, c = v, e = kv_lora.
static void deepseek_kv_b_plan(GgufGatherPlan &g) {
    const ModelConfig &cfg = *g.cfg;
    const TensorRef &s0 = *g.src[0], &s1 = *g.src[1];
    GgufGatherDims &x = g.dims;
    x.a = cfg.n_heads, x.b = cfg.qk_nope_dim, x.c = cfg.v_head_dim, x.e = cfg.kv_lora_rank;
    if (s0.shape != std::vector<uint64_t>{x.a, x.e, x.b})
        g.refuse(s0, "shape " + g.dims_of(s0) + ", not [heads, kv_lora_rank, qk_nope_head_dim] = [" + std::to_string(x.a) +
                         ", " + std::to_string(x.e) + ", " + std::to_string(x.b) + "]");
    if (s1.shape != std::vector<uint64_t>{x.a, x.c, x.e})
        g.refuse(s1, "shape " + g.dims_of(s1) + ", not [heads, v_head_dim, kv_lora_rank] = [" + std::to_string(x.a) + ", " +
                         std::to_string(x.c) + ", " + std::to_string(x.e) + "]");
    g.elements = true;
    g.shape = {x.a * (x.b + x.c), x.e};
}
static std::pair<uint32_t, uint64_t> deepseek_kv_b_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t r = i / x.e, col = i % x.e, h = r / (x.b + x.c), j = r % (x.b + x.c);
    if (j < x.b) return {0, (h * x.e + col) * x.b + j};  // k_b stored [H, kv_lora, nope]
    return {1, (h * x.c + (j - x.b)) * x.e + col};       // v_b stored [H, v, kv_lora]
}
static const GgufGather kDeepseekKvB = {"model.layers.{L}.self_attn.kv_b_proj.weight",
                                        {"attn_k_b.weight", "attn_v_b.weight", ""},
                                        2,
                                        false,
                                        true,  // older converters' attn_kv_b beside them is read whole
                                        deepseek_kv_b_plan,
                                        nullptr,
                                        deepseek_kv_b_element};
static const GgufGather *const kDeepseekGathers[] = {&kDeepseekKvB, nullptr};

// DeepseekV2Model writes f32(0.1 x mscale_all_dim); llama.cpp then takes mscale = mscale_all_dim
// (the hub's V2 / V3 configs have the two equal), so the yarn factor on cos / sin is 1.  The
// config's decimal back: the shortest whose f32(0.1 x it) is the stored value (0.707, not 0.70699996).
static void deepseek_gguf_rope_scaling(const GgufMeta &m, std::string &rs) {
    const GgufValue *v = m.get("rope.scaling.yarn_log_multiplier");
    if (!v) return;
    const float stored = v->type() == GgufType::F32 ? v->f32() : float(v->as_float());
    std::string t = format("%.17g", double(stored) / 0.1);
    for (int digits = 1; digits <= 17; digits++) {
        std::string c = format("%.*g", digits, double(stored) / 0.1);
        if (float(0.1 * std::strtod(c.c_str(), nullptr)) == stored) {
            t = c;
            break;
        }
    }
    rs += ", \"mscale_all_dim\": " + t + ", \"mscale\": " + t;
}

// MLA written as MQA (head_count_kv 1, key_length kv_lora_rank + rope) and the real dimensions as
// *_mla keys; V3 differs by its sigmoid gating (expert_gating_func 2) and the router's score bias.
// Converters before the *_mla keys (those that stored attn_kv_b whole) wrote key_length = nope +
// rope and value_length = v.
extern const GgufFamily kGgufDeepseek2;
static std::string deepseek2_gguf_config(const GgufMeta &m) {
    const std::string &path = m.path, &arch = m.arch;
    const uint64_t d = m.d, layers = m.layers, heads = m.heads, vocab = m.vocab;
    auto get = [&](const char *k) { return m.get(k); };
    auto need = [&](const char *k) -> uint64_t {
        const GgufValue *v = get(k);
        if (!v) throw_error(STK_E_CORRUPT, "%s: metadata key %s.%s is missing (DeepSeek MLA)", path.c_str(), arch.c_str(), k);
        return v->as_uint();
    };
    const uint64_t rope = need("rope.dimension_count");
    uint64_t qk, v;
    if (get("attention.key_length_mla")) qk = need("attention.key_length_mla"), v = need("attention.value_length_mla");
    else qk = need("attention.key_length"), v = need("attention.value_length");
    if (qk <= rope)
        throw_error(STK_E_CORRUPT, "%s: DeepSeek MLA key length %llu is not more than its rotary part %llu", path.c_str(),
                    (unsigned long long)qk, (unsigned long long)rope);
    const GgufValue *gating = get("expert_gating_func");
    const bool v3 = (gating && gating->as_uint() == 2) || m.tensor("blk.0.exp_probs_b.bias") ||
                    m.tensor((format("blk.%llu.exp_probs_b.bias", (unsigned long long)(layers ? layers - 1 : 0))).c_str());
    GgufJson j;
    j.str("model_type", v3 ? "deepseek_v3" : "deepseek_v2");
    j.u("vocab_size", vocab);
    j.u("hidden_size", d);
    j.u("num_hidden_layers", layers);
    j.u("num_attention_heads", heads);
    j.u("num_key_value_heads", heads);  // MLA: one kv head per head (the GGUF's 1 is llama.cpp's MQA form)
    if (const GgufValue *x = get("feed_forward_length")) j.u("intermediate_size", x->as_uint());
    if (const GgufValue *x = get("context_length")) j.u("max_position_embeddings", x->as_uint());
    if (const GgufValue *x = get("attention.layer_norm_rms_epsilon")) j.f("rms_norm_eps", *x);
    if (const GgufValue *x = get("rope.freq_base")) j.f("rope_theta", *x);
    if (std::string rs = gguf_rope_scaling_json(m, kGgufDeepseek2); !rs.empty()) j.raw("rope_scaling", rs);
    if (const GgufValue *x = get("attention.q_lora_rank")) j.u("q_lora_rank", x->as_uint());
    j.u("kv_lora_rank", need("attention.kv_lora_rank"));
    j.u("qk_rope_head_dim", rope);
    j.u("qk_nope_head_dim", qk - rope);
    j.u("v_head_dim", v);
    if (const GgufValue *x = get("expert_count"); x && x->as_uint() > 0) {
        j.u("n_routed_experts", x->as_uint());
        j.u("num_experts_per_tok", need("expert_used_count"));
        j.u("moe_intermediate_size", need("expert_feed_forward_length"));
        if (const GgufValue *y = get("expert_shared_count")) j.u("n_shared_experts", y->as_uint());
        if (const GgufValue *y = get("leading_dense_block_count")) j.u("first_k_dense_replace", y->as_uint());
        if (const GgufValue *y = get("expert_weights_scale")) j.f("routed_scaling_factor", *y);
        const GgufValue *norm = get("expert_weights_norm");
        j.b("norm_topk_prob", norm && norm->boolean());
        const GgufValue *groups = get("expert_group_count"), *used = get("expert_group_used_count");
        if (groups) j.u("n_group", groups->as_uint());
        else if (v3) j.u("n_group", 1);  // converters before the group keys: llama.cpp runs one group
        if (used) j.u("topk_group", used->as_uint());
        else if (v3 && !groups) j.u("topk_group", 1);
        // The router: V3's "noaux_tc"; V2's greedy, or group_limited_greedy when it has groups.
        j.str("topk_method", v3 ? "noaux_tc" : groups && groups->as_uint() > 1 ? "group_limited_greedy" : "greedy");
    }
    j.b("tie_word_embeddings", m.tensor("output.weight") == nullptr);
    j.b("attention_bias", false);
    return j.done();
}

static const char *const kDeepseekGgufArchs[] = {"deepseek2", nullptr};
extern const GgufFamily kGgufDeepseek2 = {
    .archs = kDeepseekGgufArchs,
    .layer = kDeepseekLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kDeepseekMoe,
    .gathers = kDeepseekGathers,
    .whole_config = deepseek2_gguf_config,
    .rope_scaling = deepseek_gguf_rope_scaling,
};

// ---------------------------------------------------------------------------------------------
// PhiMoE (conversion/phi.py PhiMoeModel): Mixtral's expert names.

static void phimoe_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    j.b("lm_head_bias", m.tensor("output.bias") != nullptr);
}
static const char *const kPhimoeGgufArchs[] = {"phimoe", nullptr};
extern const GgufFamily kGgufPhimoe = {
    .archs = kPhimoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGgufMixtralMoe,
    .config = phimoe_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// Granite, GraniteMoE (conversion/granite.py: LlamaModel's permute; GraniteMoeModel splits
// input_linear into gate / up stacks).

static const GgufRename kGraniteMoeNames[] = {
    {"ffn_gate_inp", "model.layers.{L}.block_sparse_moe.router.layer"},
    {"ffn_down_exps", "model.layers.{L}.block_sparse_moe.output_linear"},  // [E, D, F] as HF stores it
};
static const GgufRenames kGraniteMoe = kGraniteMoeNames;
// input_linear [E, 2F, D] = per expert [gate_e; up_e]: a = experts, b = F, c = D.
static void granite_gate_up_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 3 || g.src[1]->shape != s0.shape)
        g.refuse(*g.src[1], "gate and up expert stacks of shapes " + g.dims_of(s0) + " and " + g.dims_of(*g.src[1]) +
                                ", not two equal [experts, rows, cols]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1], g.dims.c = s0.shape[2];
    g.shape = {g.dims.a, 2 * g.dims.b, g.dims.c};
}
static std::pair<uint32_t, uint64_t> granite_gate_up_row(const GgufGatherDims &x, uint64_t r) {
    const uint64_t ex = r / (2 * x.b), j = r % (2 * x.b);
    return j < x.b ? std::pair<uint32_t, uint64_t>{0, ex * x.b + j} : std::pair<uint32_t, uint64_t>{1, ex * x.b + j - x.b};
}
static const GgufGather kGraniteGateUp = {"model.layers.{L}.block_sparse_moe.input_linear.weight",
                                          {"ffn_gate_exps.weight", "ffn_up_exps.weight", ""},
                                          2,
                                          false,
                                          false,
                                          granite_gate_up_plan,
                                          granite_gate_up_row,
                                          nullptr};
static const GgufGather *const kGraniteGathers[] = {&kGraniteGateUp, nullptr};
// GraniteModel writes the multipliers under llama.cpp's *_scale names (only when non-zero).
static void granite_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.scale")) j.f("attention_multiplier", *v);
    if (const GgufValue *v = m.get("embedding_scale")) j.f("embedding_multiplier", *v);
    if (const GgufValue *v = m.get("residual_scale")) j.f("residual_multiplier", *v);
    if (const GgufValue *v = m.get("logit_scale")) j.f("logits_scaling", *v);
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
}
static const char *const kGraniteGgufArchs[] = {"granite", nullptr};
extern const GgufFamily kGgufGranite = {
    .archs = kGraniteGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGraniteMoe,
    .gathers = kGraniteGathers,
    .permute_qk = true,
    .config = granite_gguf_config,
};
static const char *const kGranitemoeGgufArchs[] = {"granitemoe", nullptr};
extern const GgufFamily kGgufGranitemoe = {
    .archs = kGranitemoeGgufArchs,
    .layer = kGgufLlamaLayer,
    .globals = kGgufLlamaGlobals,
    .moe = &kGraniteMoe,
    .gathers = kGraniteGathers,
    .permute_qk = true,
    .config = granite_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// gpt-oss (conversion/gpt_oss.py GptOssModel).

static const GgufRename kGptOssLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"attn_sinks", "model.layers.{L}.self_attn.sinks$"},
    {"ffn_gate_inp", "model.layers.{L}.mlp.router"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.down_proj_bias$"},  // the .bias; .weight is a gather
};
// gate_up_proj [E, D, 2F]: [in, out], gate / up columns alternating; as the hub ships MXFP4 rows
// [E, 2F, D]: a = experts, b = F, c = D.
static void gpt_oss_gate_up_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 3 || g.src[1]->shape != s0.shape)
        g.refuse(*g.src[1], "gate and up expert stacks of shapes " + g.dims_of(s0) + " and " + g.dims_of(*g.src[1]) +
                                ", not two equal [experts, rows, cols]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1], g.dims.c = s0.shape[2];
    if (g.mxfp4) {
        g.mxfp4_rows = true;
        g.shape = {g.dims.a, 2 * g.dims.b, g.dims.c};
    } else {
        g.elements = true;
        g.shape = {g.dims.a, g.dims.c, 2 * g.dims.b};
    }
}
static std::pair<uint32_t, uint64_t> gpt_oss_gate_up_row(const GgufGatherDims &x, uint64_t r) {
    const uint64_t ex = r / (2 * x.b), n = r % (2 * x.b);
    return {uint32_t(n % 2), ex * x.b + n / 2};
}
static std::pair<uint32_t, uint64_t> gpt_oss_gate_up_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t ex = i / (x.c * 2 * x.b), d = (i / (2 * x.b)) % x.c, n = i % (2 * x.b);
    return {uint32_t(n % 2), (ex * x.b + n / 2) * x.c + d};
}
// gate_up_proj_bias [E, 2F]: gate / up alternating; b = F.
static void gpt_oss_gate_up_bias_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 2 || g.src[1]->shape != s0.shape)
        g.refuse(*g.src[1], "gate and up expert biases of shapes " + g.dims_of(s0) + " and " + g.dims_of(*g.src[1]) +
                                ", not two equal [experts, rows]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1];
    g.elements = true;
    g.shape = {g.dims.a, 2 * g.dims.b};
}
static std::pair<uint32_t, uint64_t> gpt_oss_gate_up_bias_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t ex = i / (2 * x.b), n = i % (2 * x.b);
    return {uint32_t(n % 2), ex * x.b + n / 2};
}
// down_proj [E, F, D]: the stored [E, D, F] transposed (MXFP4: the stored rows as they are); b = D, c = F.
static void gpt_oss_down_plan(GgufGatherPlan &g) {
    const TensorRef &s0 = *g.src[0];
    if (s0.shape.size() != 3) g.refuse(s0, "shape " + g.dims_of(s0) + ", not [experts, d, F]");
    g.dims.a = s0.shape[0], g.dims.b = s0.shape[1], g.dims.c = s0.shape[2];
    if (g.mxfp4) {
        g.mxfp4_rows = true;
        g.shape = s0.shape;
    } else {
        g.elements = true;
        g.shape = {g.dims.a, g.dims.c, g.dims.b};
    }
}
static std::pair<uint32_t, uint64_t> gpt_oss_down_element(const GgufGatherDims &x, uint64_t i) {
    const uint64_t ex = i / (x.c * x.b), f = (i / x.b) % x.c, d = i % x.b;
    return {0, (ex * x.b + d) * x.c + f};
}
static const GgufGather kGptOssGateUp = {"model.layers.{L}.mlp.experts.gate_up_proj",
                                         {"ffn_gate_exps.weight", "ffn_up_exps.weight", ""},
                                         2,
                                         true,
                                         false,
                                         gpt_oss_gate_up_plan,
                                         gpt_oss_gate_up_row,
                                         gpt_oss_gate_up_element};
static const GgufGather kGptOssGateUpBias = {"model.layers.{L}.mlp.experts.gate_up_proj_bias",
                                             {"ffn_gate_exps.bias", "ffn_up_exps.bias", ""},
                                             2,
                                             false,
                                             false,
                                             gpt_oss_gate_up_bias_plan,
                                             nullptr,
                                             gpt_oss_gate_up_bias_element};
static const GgufGather kGptOssDown = {"model.layers.{L}.mlp.experts.down_proj",
                                       {"ffn_down_exps.weight", "", ""},
                                       1,
                                       true,
                                       false,
                                       gpt_oss_down_plan,
                                       nullptr,
                                       gpt_oss_down_element};
static const GgufGather *const kGptOssGathers[] = {&kGptOssGateUp, &kGptOssGateUpBias, &kGptOssDown, nullptr};
static void gpt_oss_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    j.b("attention_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
    // The experts as the hub ships them (MXFP4 blocks) or dequantised (a bf16 checkpoint's
    // conversion): the checkpoint presents the matching HF layout.
    const GgufTensorInfo *g = m.tensor("blk.0.ffn_gate_exps.weight");
    if (g && g->type == kGgmlMxfp4) j.raw("quantization_config", "{\"quant_method\": \"mxfp4\"}");
}
// gpt-oss's YaRN keeps the correction range unrounded (its config says "truncate": false).
static void gpt_oss_gguf_rope_scaling(const GgufMeta &, std::string &rs) { rs += ", \"truncate\": false"; }
static const char *const kGptOssGgufArchs[] = {"gpt-oss", nullptr};
extern const GgufFamily kGgufGptOss = {
    .archs = kGptOssGgufArchs,
    .layer = kGptOssLayer,
    .globals = kGgufLlamaGlobals,
    .gathers = kGptOssGathers,
    .config = gpt_oss_gguf_config,
    .rope_scaling = gpt_oss_gguf_rope_scaling,
};

// ---------------------------------------------------------------------------------------------
// InternLM2 (conversion/internlm.py InternLM2Model: wqkv split into permuted q / k and v).

static const GgufRename kInternlm2Layer[] = {
    {"attn_norm", "model.layers.{L}.attention_norm"}, {"ffn_norm", "model.layers.{L}.ffn_norm"},
    {"attn_output", "model.layers.{L}.attention.wo"}, {"ffn_gate", "model.layers.{L}.feed_forward.w1"},
    {"ffn_up", "model.layers.{L}.feed_forward.w3"},   {"ffn_down", "model.layers.{L}.feed_forward.w2"},
};
// wqkv, per kv head [its q heads; k; v], q / k rows permuted: a = heads, b = kv heads, c = head_dim.
static void internlm2_qkv_plan(GgufGatherPlan &g) {
    const ModelConfig &cfg = *g.cfg;
    const TensorRef &s0 = *g.src[0];
    const uint64_t hd = cfg.head_dim, q = uint64_t(cfg.n_heads) * hd, kv = uint64_t(cfg.n_kv_heads) * hd;
    g.dims.a = cfg.n_heads, g.dims.b = cfg.n_kv_heads, g.dims.c = hd;
    const uint64_t want[3] = {q, kv, kv};
    for (uint32_t k = 0; k < 3; k++)
        if (g.src[k]->shape.size() != 2 || g.src[k]->shape[0] != want[k] || g.src[k]->shape[1] != s0.shape.back())
            g.refuse(*g.src[k], "shape " + g.dims_of(*g.src[k]) + ", not the [" + std::to_string(want[k]) + ", d] the heads give");
    if (hd % 2 || g.dims.b == 0 || g.dims.a % g.dims.b) g.refuse(s0, "heads that LlamaModel.permute cannot have written");
    g.shape = {q + 2 * kv, s0.shape[1]};
}
static std::pair<uint32_t, uint64_t> internlm2_qkv_row(const GgufGatherDims &x, uint64_t r) {
    const uint64_t qpk = x.a / x.b, g = r / ((qpk + 2) * x.c), slot = (r / x.c) % (qpk + 2), w = r % x.c, half = x.c / 2;
    const uint64_t unperm = 2 * (w % half) + w / half;  // LlamaModel.permute undone
    if (slot < qpk) return {0, (g * qpk + slot) * x.c + unperm};
    if (slot == qpk) return {1, g * x.c + unperm};
    return {2, g * x.c + w};
}
static const GgufGather kInternlm2Qkv = {"model.layers.{L}.attention.wqkv.weight",
                                         {"attn_q.weight", "attn_k.weight", "attn_v.weight"},
                                         3,
                                         false,
                                         false,
                                         internlm2_qkv_plan,
                                         internlm2_qkv_row,
                                         nullptr};
static const GgufGather *const kInternlm2Gathers[] = {&kInternlm2Qkv, nullptr};
// InternLM2Model splits wqkv and cannot split a bias (it reshapes it as a matrix): none.
static void internlm2_gguf_config(const GgufMeta &, GgufJson &j) { j.b("bias", false); }
static const char *const kInternlm2GgufArchs[] = {"internlm2", nullptr};
extern const GgufFamily kGgufInternlm2 = {
    .archs = kInternlm2GgufArchs,
    .layer = kInternlm2Layer,
    .globals = {"model.tok_embeddings", nullptr, nullptr, "model.norm", "output"},
    .gathers = kInternlm2Gathers,
    .config = internlm2_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// Phi-3 (conversion/phi.py Phi3MiniModel: qkv_proj and gate_up_proj kept fused as attn_qkv /
// ffn_up, renamed as they are: HF keeps them fused too).

static const GgufRename kPhi3Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},    {"attn_qkv", "model.layers.{L}.self_attn.qkv_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"}, {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "model.layers.{L}.mlp.gate_up_proj"},      {"ffn_down", "model.layers.{L}.mlp.down_proj"},
};
static void phi3_gguf_config(const GgufMeta &m, GgufJson &j) {
    if (const GgufValue *v = m.get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
    if (const GgufValue *v = m.get("rope.scaling.original_context_length")) j.u("original_max_position_embeddings", v->as_uint());
}
static const char *const kPhi3GgufArchs[] = {"phi3", nullptr};
extern const GgufFamily kGgufPhi3 = {
    .archs = kPhi3GgufArchs,
    .layer = kPhi3Layer,
    .globals = kGgufLlamaGlobals,
    .rotary_pct = true,
    .config = phi3_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// StarCoder2 (conversion/starcoder.py StarCoder2Model: TextModel's, no permute; c_fc / c_proj as
// ffn_up / ffn_down).

static const GgufRename kStarcoder2Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "model.layers.{L}.mlp.c_fc"},
    {"ffn_down", "model.layers.{L}.mlp.c_proj"},
};
static void starcoder2_gguf_config(const GgufMeta &m, GgufJson &j) {
    j.b("use_bias", m.tensor("blk.0.attn_q.bias") != nullptr);
}
static const char *const kStarcoder2GgufArchs[] = {"starcoder2", nullptr};
extern const GgufFamily kGgufStarcoder2 = {
    .archs = kStarcoder2GgufArchs,
    .layer = kStarcoder2Layer,
    .globals = kGgufLlamaGlobals,
    .config = starcoder2_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// Phi-2 (conversion/phi.py Phi2Model: q / k / v separate, no permute; its feed_forward_length and
// head_count_kv are not the model's: read from the tensors).

static const GgufRename kPhi2Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.dense"},
    {"ffn_up", "model.layers.{L}.mlp.fc1"},
    {"ffn_down", "model.layers.{L}.mlp.fc2"},
};
// Phi2Model writes head_count_kv = heads whatever the model has: attn_k's rows.
static void phi2_gguf_kv_heads(const GgufMeta &m, uint64_t *kv) {
    if (const GgufTensorInfo *k = m.tensor("blk.0.attn_k.weight"); k && k->shape.size() == 2 && m.heads && m.d % m.heads == 0)
        *kv = k->shape[0] / (m.d / m.heads);
}
static const char *const kPhi2GgufArchs[] = {"phi2", nullptr};
extern const GgufFamily kGgufPhi2 = {
    .archs = kPhi2GgufArchs,
    .layer = kPhi2Layer,
    .globals = {"model.embed_tokens", nullptr, nullptr, "model.final_layernorm", "lm_head"},
    .ffn_from_tensors = true,  // Phi2Model writes feed_forward_length = 4 x hidden
    .rotary_pct = true,
    .kv_heads = phi2_gguf_kv_heads,
};

// ---------------------------------------------------------------------------------------------
// GPT-BigCode (conversion/starcoder.py StarCoderModel: nn.Linear names renamed, c_attn kept whole).

static const GgufRename kStarcoderLayer[] = {
    {"attn_norm", "transformer.h.{L}.ln_1"},          {"attn_qkv", "transformer.h.{L}.attn.c_attn"},
    {"attn_output", "transformer.h.{L}.attn.c_proj"}, {"ffn_norm", "transformer.h.{L}.ln_2"},
    {"ffn_up", "transformer.h.{L}.mlp.c_fc"},         {"ffn_down", "transformer.h.{L}.mlp.c_proj"},
};
// GPTBigCodeConfig spellings.  StarCoderModel writes feed_forward_length = 4 x hidden and
// head_count_kv = 1 whatever the model has: the FFN width from ffn_up, multi-query from attn_qkv's
// rows (d + 2 head_dim: one K/V head; 3d: one per head).
static std::string gpt_bigcode_gguf_config(const GgufMeta &m) {
    const std::string &path = m.path;
    const uint64_t d = m.d, heads = m.heads;
    const GgufTensorInfo *up = m.tensor("blk.0.ffn_up.weight"), *qkv = m.tensor("blk.0.attn_qkv.weight");
    if (!up || up->shape.size() != 2 || !qkv || qkv->shape.size() != 2 || !heads || d % heads)
        throw_error(STK_E_CORRUPT,
                    "%s: no 2-D blk.0.ffn_up.weight / blk.0.attn_qkv.weight: the FFN width or "
                    "the K/V heads are unknown",
                    path.c_str());
    const uint64_t hd = d / heads;
    if (qkv->shape[0] != d + 2 * hd && qkv->shape[0] != 3 * d)
        throw_error(STK_E_CORRUPT,
                    "%s: GGUF tensor 'blk.0.attn_qkv.weight' (offset %llu): %llu rows, neither "
                    "multi-query (%llu) nor one K/V per head (%llu)",
                    path.c_str(), (unsigned long long)qkv->data_offset, (unsigned long long)qkv->shape[0],
                    (unsigned long long)(d + 2 * hd), (unsigned long long)(3 * d));
    GgufJson g;
    g.str("model_type", "gpt_bigcode");
    g.u("vocab_size", m.vocab);
    g.u("n_embd", d);
    g.u("n_layer", m.layers);
    g.u("n_head", heads);
    g.u("n_inner", up->shape[0]);
    g.b("multi_query", qkv->shape[0] == d + 2 * hd);
    const GgufTensorInfo *pos = m.tensor("position_embd.weight");
    if (pos && pos->shape.size() == 2) g.u("n_positions", pos->shape[0]);
    else if (const GgufValue *v = m.get("context_length")) g.u("n_positions", v->as_uint());
    if (const GgufValue *v = m.get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
    g.b("tie_word_embeddings", m.tied_head());
    return g.done();
}
static const char *const kStarcoderGgufArchs[] = {"starcoder", nullptr};
extern const GgufFamily kGgufGptBigcode = {
    .archs = kStarcoderGgufArchs,
    .layer = kStarcoderLayer,
    .globals = {"transformer.wte", "transformer.wpe", nullptr, "transformer.ln_f", "lm_head"},
    .whole_config = gpt_bigcode_gguf_config,
};

// ---------------------------------------------------------------------------------------------
// MPT (conversion/mpt.py MPTModel: Wqkv kept whole as attn_qkv, renamed only).

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

}  // namespace stk
