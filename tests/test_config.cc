// config.json -> ModelConfig: every real config in tests/data/third_party/configs with its values, the
// parameter count each implies (checked against the published model sizes), and the refusals
// (encoder-decoder, unknown model_type, malformed values) with their messages.
// (Library headers before test_util.h: cmocka defines a fail() macro that <ios> collides with.)
#include <cmath>

#include "core/mapped_file.h"
#include "ingest/config.h"
#include "ingest/model.h"

#include "test_util.h"

using namespace stk;

static ParsedConfig load_shared(const char *file) {
    std::string path = test::third_party_data(std::string("configs/") + file);
    return parse_model_config(read_small_file(path, kMaxConfigBytes), path);
}

struct Want {
    const char *file;
    const char *family;
    uint32_t d, layers, heads, kv, head_dim;
    uint64_t vocab, ffn;
    FfnKind ffn_kind;
    const char *act;
    NormKind norm;
    double eps;
    PosKind pos;
    double theta;
    uint32_t rotary_dim;
    uint64_t max_pos;
    bool tied, parallel, qkv_bias;
    uint32_t experts, top_k;
    uint64_t moe_ffn, shared_ffn;
    uint64_t n_params;  // the published size of each model
};

// A table: clang-format would put one value per line.
// clang-format off
static const Want kWant[] = {
    {"bloom-3b.config.json", "bloom", 2560, 30, 32, 32, 80, 250880, 10240, FfnKind::Plain, "gelu_pytorch_tanh",
     NormKind::LayerNorm, 1e-5, PosKind::Alibi, 0, 0, 0, true, false, true, 0, 0, 0, 0, 3002557440ull},
    {"derived-gpt2.config.json", "gpt2", 768, 12, 12, 12, 64, 50257, 3072, FfnKind::Plain, "gelu_new",
     NormKind::LayerNorm, 1e-5, PosKind::Learned, 0, 0, 1024, true, false, true, 0, 0, 0, 0, 124439808ull},
    {"derived-llama2-7b.config.json", "llama", 4096, 32, 32, 32, 128, 32000, 11008, FfnKind::Gated, "silu",
     NormKind::RmsNorm, 1e-5, PosKind::Rope, 10000, 128, 2048, false, false, false, 0, 0, 0, 0, 6738415616ull},
    {"llama2-7b-chat.config.json", "llama", 4096, 32, 32, 32, 128, 32000, 11008, FfnKind::Gated, "silu",
     NormKind::RmsNorm, 1e-5, PosKind::Rope, 10000, 128, 4096, false, false, false, 0, 0, 0, 0, 6738415616ull},
    {"derived-llama3.1-8b.config.json", "llama", 4096, 32, 32, 8, 128, 128256, 14336, FfnKind::Gated, "silu",
     NormKind::RmsNorm, 1e-5, PosKind::Rope, 500000, 128, 131072, false, false, false, 0, 0, 0, 0, 8030261248ull},
    {"derived-mistral-7b-v0.1.config.json", "mistral", 4096, 32, 32, 8, 128, 32000, 14336, FfnKind::Gated,
     "silu", NormKind::RmsNorm, 1e-5, PosKind::Rope, 10000, 128, 32768, false, false, false, 0, 0, 0, 0,
     7241732096ull},
    {"derived-mistral-7b-v0.3.config.json", "mistral", 4096, 32, 32, 8, 128, 32768, 14336, FfnKind::Gated,
     "silu", NormKind::RmsNorm, 1e-5, PosKind::Rope, 1000000, 128, 32768, false, false, false, 0, 0, 0, 0,
     7248023552ull},
    {"derived-mixtral-8x7b-v0.1.config.json", "mixtral", 4096, 32, 32, 8, 128, 32000, 14336, FfnKind::Gated,
     "silu", NormKind::RmsNorm, 1e-5, PosKind::Rope, 1000000, 128, 32768, false, false, false, 8, 2, 14336, 0,
     46702792704ull},
    {"derived-qwen1.5-moe-a2.7b.config.json", "qwen2_moe", 2048, 24, 16, 16, 128, 151936, 5632, FfnKind::Gated,
     "silu", NormKind::RmsNorm, 1e-6, PosKind::Rope, 1000000, 128, 32768, false, false, true, 60, 4, 1408, 5632,
     14315784192ull},
    {"derived-qwen2-0.5b.config.json", "qwen2", 896, 24, 14, 2, 64, 151936, 4864, FfnKind::Gated, "silu",
     NormKind::RmsNorm, 1e-6, PosKind::Rope, 1000000, 64, 32768, true, false, true, 0, 0, 0, 0, 494032768ull},
    {"derived-redpajama-3b-gpt_neox.config.json", "gpt_neox", 2560, 32, 32, 32, 80, 50432, 10240, FfnKind::Plain,
     "gelu", NormKind::LayerNorm, 1e-5, PosKind::Rope, 10000, 80, 2048, false, false, true, 0, 0, 0, 0,
     2775864320ull},
    {"pythia-410m.config.json", "gpt_neox", 1024, 24, 16, 16, 64, 50304, 4096, FfnKind::Plain, "gelu",
     NormKind::LayerNorm, 1e-5, PosKind::Rope, 10000, 16, 2048, false, true, true, 0, 0, 0, 0, 405334016ull},
};
// clang-format on

static void every_shared_config_parses_with_its_values(void **) {
    for (const Want &w : kWant) {
        print_message("%s\n", w.file);
        ParsedConfig p = load_shared(w.file);
        const ModelConfig &m = p.config;
        assert_string_equal(family_name(m.family), w.family);
        assert_int_equal(m.d_model, w.d);
        assert_int_equal(m.n_layers, w.layers);
        assert_int_equal(m.n_heads, w.heads);
        assert_int_equal(m.n_kv_heads, w.kv);
        assert_int_equal(m.head_dim, w.head_dim);
        assert_int_equal(m.vocab_size, w.vocab);
        assert_int_equal(m.ffn_dim, w.ffn);
        assert_int_equal(int(m.ffn_kind), int(w.ffn_kind));
        assert_string_equal(m.activation, w.act);
        assert_int_equal(int(m.norm), int(w.norm));
        assert_true(m.norm_eps == w.eps);
        assert_int_equal(int(m.positions), int(w.pos));
        if (w.pos == PosKind::Rope) assert_true(m.rope_theta == w.theta);
        assert_int_equal(m.rotary_dim, w.rotary_dim);
        assert_int_equal(m.max_positions, w.max_pos);
        assert_int_equal(m.tied_embeddings, w.tied);
        assert_int_equal(m.parallel_attn, w.parallel);
        assert_int_equal(m.qkv_bias, w.qkv_bias);
        assert_int_equal(m.n_experts, w.experts);
        assert_int_equal(m.top_k, w.top_k);
        assert_int_equal(m.moe_ffn_dim, w.moe_ffn);
        assert_int_equal(m.shared_expert_ffn_dim, w.shared_ffn);
        assert_true(expected_param_count(m) == w.n_params);
        assert_true(p.user_rules.empty());
    }
}

static void details_per_family(void **) {
    ModelConfig l3 = load_shared("derived-llama3.1-8b.config.json").config;
    assert_string_equal(l3.rope_scaling_type, "llama3");
    assert_true(l3.rope_scaling_factor == 8.0);
    ModelConfig l2 = load_shared("derived-llama2-7b.config.json").config;
    assert_string_equal(l2.rope_scaling_type, "");  // "rope_scaling": null
    ModelConfig q = load_shared("derived-qwen1.5-moe-a2.7b.config.json").config;
    assert_true(q.shared_expert_gate);
    assert_false(q.norm_topk_prob);
    assert_string_equal(q.router, "softmax_topk");
    assert_true(q.layer_is_moe(0) && q.layer_is_moe(23));
    ModelConfig mx = load_shared("derived-mixtral-8x7b-v0.1.config.json").config;
    assert_true(mx.norm_topk_prob);
    assert_false(mx.shared_expert_gate);
    ModelConfig b = load_shared("bloom-3b.config.json").config;
    assert_true(b.emb_norm);
    assert_int_equal(int(b.qkv_layout), int(QkvLayout::PerHead));
    ModelConfig g = load_shared("derived-gpt2.config.json").config;
    assert_int_equal(int(g.qkv_layout), int(QkvLayout::Concat));
    assert_string_equal(g.model_type, "gpt2");
    ModelConfig r = load_shared("derived-redpajama-3b-gpt_neox.config.json").config;
    assert_false(r.parallel_attn);  // "use_parallel_residual": false
}

static void falcon_variants(void **) {
    // Falcon-7B: multi-query, parallel attention with one norm, rotary, no biases.
    const char *f7 = R"({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
        "vocab_size": 65024, "multi_query": true, "parallel_attn": true, "new_decoder_architecture": false,
        "bias": false, "alibi": false, "layer_norm_epsilon": 1e-05})";
    ModelConfig m = parse_model_config(f7, "falcon7b/config.json").config;
    assert_string_equal(family_name(m.family), "falcon");
    assert_int_equal(m.n_kv_heads, 1);
    assert_int_equal(m.head_dim, 64);
    assert_int_equal(m.norms_per_layer, 1);
    assert_int_equal(int(m.qkv_layout), int(QkvLayout::Concat));
    assert_int_equal(int(m.positions), int(PosKind::Rope));
    assert_int_equal(m.ffn_dim, 4 * 4544);
    // Published size of Falcon-7B: 6,921,720,704.
    assert_true(expected_param_count(m) == 6921720704ull);
    // Falcon-40B: new decoder architecture, 8 kv groups, two norms.
    const char *f40 = R"({"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_hidden_layers": 60,
        "vocab_size": 65024, "num_kv_heads": 8, "new_decoder_architecture": true, "parallel_attn": true, "bias": false})";
    ModelConfig m40 = parse_model_config(f40, "falcon40b/config.json").config;
    assert_int_equal(m40.n_kv_heads, 8);
    assert_int_equal(int(m40.qkv_layout), int(QkvLayout::Grouped));
    assert_int_equal(m40.norms_per_layer, 2);
    assert_true(m40.tied_embeddings);  // FalconConfig's default
}

static void whisper_is_refused_as_encoder_decoder(void **) {
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [] { load_shared("whisper-large-v3.config.json"); });
    assert_contains(msg, "whisper-large-v3.config.json");
    assert_contains(msg, "encoder-decoder");
    assert_contains(msg, "whisper");
}

static void unknown_model_type_says_how_to_supply_roles(void **) {
    const char *cfg =
        R"({"model_type": "mamba_like", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10})";
    std::string msg = test::expect_error(STK_E_UNKNOWN_MODEL, [&] { parse_model_config(cfg, "phi/config.json"); });
    assert_contains(msg, "phi/config.json");
    assert_contains(msg, "'mamba_like'");
    assert_contains(msg, "stk_roles");
    assert_contains(msg, "stk_roles.json");
    assert_contains(msg, "gpt2, llama");
}

static void user_roles_in_config_and_roles_file(void **) {
    // A list keeps its order; an object is ordered by the pattern string (seed 3.2).
    const char *cfg = R"({"model_type": "tiny", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "vocab_size": 10, "rms_norm_eps": 1e-6,
        "stk_roles": [
          {"pattern": "blk\\.(?P<layer>[0-9]+)\\.qkv", "role": "QKV", "layout": "qkv_heads", "transpose": true},
          {"pattern": "blk\\.(?P<layer>[0-9]+)\\.up", "role": "FFN_W3"},
          {"pattern": "final_norm", "role": "LN_G", "norm": "final"}
        ]})";
    const std::string roles_file = R"({"zz\\.w": "EMB", "aa\\.w": "LM_HEAD"})";
    ParsedConfig p = parse_model_config(cfg, "tiny/config.json", &roles_file, "tiny/stk_roles.json");
    assert_int_equal(int(p.config.family), int(kCustomFamily));
    assert_int_equal(int(p.config.norm), int(NormKind::RmsNorm));
    assert_int_equal(int(p.config.ffn_kind), int(FfnKind::Gated));
    assert_int_equal(p.user_rules.size(), 5);
    assert_int_equal(int(p.user_rules[0].role), int(Role::QKV));
    assert_int_equal(int(p.user_rules[0].layout), int(QkvLayout::PerHead));
    assert_true(p.user_rules[0].transpose);
    assert_int_equal(int(p.user_rules[2].slot), int(NormSlot::Final));
    assert_int_equal(p.user_rules[0].priority, 0);
    assert_int_equal(p.user_rules[2].priority, 2);
    // The roles file's object entries come after config.json's list, sharing one priority.
    assert_int_equal(p.user_rules[3].priority, 3);
    assert_int_equal(p.user_rules[4].priority, 3);
}

// Gemma 3 text, as transformers 5 writes it (rope_parameters per layer type, layer_types) and as
// the hub's google/gemma-3-270m config.json says it (rope_theta, rope_local_base_freq, no
// layer_types: every 6th layer global).
static void gemma3_configs(void **) {
    std::string path = test::test_data("../fixtures/families/gemma3/config.json");
    ModelConfig m = parse_model_config(read_small_file(path, kMaxConfigBytes), path).config;
    assert_string_equal(family_name(m.family), "gemma3");
    assert_true(m.rope_theta == 1e6 && m.rope_local_theta == 1e4);
    assert_true(m.layer_is_sliding(0) && !m.layer_is_sliding(1));
    assert_true(m.norm_offset == 1.0 && m.post_norms && m.qk_norm == QkNorm::PerHead && m.tied_embeddings);
    assert_true(m.emb_multiplier == 8.0 && m.attn_scale == 0.25 && m.sliding_window == 4);
    assert_string_equal(m.activation, "gelu_pytorch_tanh");
    const char *hub = R"({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attn_logit_softcapping": null,
        "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 640,
        "intermediate_size": 2048, "max_position_embeddings": 32768, "model_type": "gemma3_text",
        "num_attention_heads": 4, "num_hidden_layers": 18, "num_key_value_heads": 1, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": null, "rope_theta": 1000000.0,
        "sliding_window": 512, "vocab_size": 262144})";
    m = parse_model_config(hub, "gemma-3-270m/config.json").config;
    assert_true(m.rope_theta == 1e6 && m.rope_local_theta == 1e4 && m.head_dim == 256 && m.n_kv_heads == 1);
    for (uint32_t l = 0; l < 18; l++) assert_int_equal(m.layer_is_sliding(l), (l + 1) % 6 != 0);
    // 268,098,176 parameters: google/gemma-3-270m's safetensors (tied head).
    assert_int_equal(expected_param_count(m), 268098176ull);
}

// openai/gpt-oss-20b's config.json as the hub ships it (MXFP4 experts): the parameter count of its
// checkpoint, 20,914,757,184 (the 3-D experts with their biases, router bias, attention sinks).
static void gpt_oss_hub_config(void **) {
    const char *hub = R"({"architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
        "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
        "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention",
        "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
        "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
        "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
        "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
        "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32,
        "output_router_logits": false, "pad_token_id": 199999, "quantization_config": {"modules_to_not_convert":
        ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4"}, "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0,
        "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
        "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
        "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true, "vocab_size": 201088})";
    ModelConfig m = parse_model_config(hub, "gpt-oss-20b/config.json").config;
    assert_true(m.mxfp4 && m.attn_sinks && m.router_bias && m.expert_bias && !m.rope_yarn_truncate);
    assert_true(m.swiglu_limit == 7.0 && m.gated_up_offset == 1.0 && m.sliding_window == 128 && m.norm_topk_prob);
    assert_true(std::fabs(m.rope_attn_factor - (0.1 * std::log(32.0) + 1)) < 1e-12);
    for (uint32_t l = 0; l < 24; l++) assert_int_equal(m.layer_is_sliding(l), l % 2 == 0);
    assert_int_equal(expected_param_count(m), 20914757184ull);
    std::string all;
    for (const std::string &a : model_approximations(m)) all += a + "\n";
    assert_contains(all, "approx: a learned sink logit per head");
    assert_contains(all, "approx: sliding window 128 on 12 of 24 layers");
    assert_contains(all, "approx: experts' SwiGLU clamped at 7 with up + 1");
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] {
        std::string t = hub;
        t.insert(1, "\"swiglu_alpha\": 2.0, ");
        parse_model_config(t, "x/config.json");
    });
    assert_contains(msg, "\"swiglu_alpha\" 2");
}

// Quantised checkpoints stk does not dequantise, and architectures it does not convert yet, are
// refused by name before any tensor is read.
static void refusals_name_what(void **) {
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [] { load_shared("gpt2-gptq.config.json"); });
    assert_contains(msg, "quantization_config");
    assert_contains(msg, "gptq");
    msg = test::expect_error(STK_E_UNSUPPORTED, [] {
        parse_model_config(R"({"model_type": "llama", "quantization_config": {"load_in_4bit": true}})", "x/config.json");
    });
    assert_contains(msg, "bitsandbytes");
    // Block-scaled fp8 is read (its block size kept); a static activation scheme is refused.
    const std::string fp8 = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10, "intermediate_size": 8, "quantization_config": {"activation_scheme": "SCHEME", "fmt": "e4m3",
            "quant_method": "fp8", "weight_block_size": [128, 64]}})";
    auto with = [&](const char *scheme) {
        std::string t = fp8;
        return t.replace(t.find("SCHEME"), 6, scheme);
    };
    ModelConfig q = parse_model_config(with("dynamic"), "x/config.json").config;
    assert_int_equal(q.fp8_block[0], 128);
    assert_int_equal(q.fp8_block[1], 64);
    msg = test::expect_error(STK_E_UNSUPPORTED, [&] { parse_model_config(with("static"), "x/config.json"); });
    assert_contains(msg, "activation_scheme 'static'");
    msg = test::expect_error(STK_E_UNSUPPORTED, [] {
        parse_model_config(R"({"model_type": "llama", "quantization_config": {"quant_method": "awq", "bits": 4}})",
                           "x/config.json");
    });
    assert_contains(msg, "\"quantization_config\" says quant_method 'awq'");
    // MLA with biases on the low-rank factors: not composed, refused by name.
    msg = test::expect_error(STK_E_UNSUPPORTED, [] {
        parse_model_config(R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10, "intermediate_size": 8, "attention_bias": true, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 4, "v_head_dim": 8})",
                           "x/config.json");
    });
    assert_contains(msg, "x/config.json");
    assert_contains(msg, "attention_bias");
}

static void malformed_values_are_named(void **) {
    std::string msg =
        test::expect_error(STK_E_BAD_JSON, [] { parse_model_config("{\"model_type\": \"gpt2\",", "x/config.json"); });
    assert_contains(msg, "x/config.json");
    msg = test::expect_error(STK_E_BAD_JSON,
                             [] { parse_model_config(R"({"model_type": "llama", "hidden_size": "4096"})", "x/config.json"); });
    assert_contains(msg, "\"hidden_size\" must be a non-negative integer");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        parse_model_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 3,
            "vocab_size": 10, "intermediate_size": 8})",
                           "x/config.json");
    });
    assert_contains(msg, "not a multiple of the 3 heads");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        parse_model_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 99999, "num_attention_heads": 4,
            "vocab_size": 10, "intermediate_size": 8})",
                           "x/config.json");
    });
    assert_contains(msg, "\"num_hidden_layers\" = 99999 is outside [1, 1024]");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        parse_model_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 3, "vocab_size": 10, "intermediate_size": 8})",
                           "x/config.json");
    });
    assert_contains(msg, "3 key/value heads do not divide the 4 attention heads");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        parse_model_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10, "intermediate_size": 8, "rms_norm_eps": 0})",
                           "x/config.json");
    });
    assert_contains(msg, "norm epsilon 0 is not in (0, 1)");
}

static void bad_role_rules(void **) {
    std::string msg =
        test::expect_error(STK_E_BAD_JSON, [] { parse_role_rules_json(R"([{"pattern": "a", "role": "QQ"}])", "r.json"); });
    assert_contains(msg, "unknown role 'QQ'");
    msg = test::expect_error(STK_E_BAD_JSON, [] { parse_role_rules_json(R"([{"pattern": "a", "role": "QKV"}])", "r.json"); });
    assert_contains(msg, "needs \"layout\"");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        std::vector<RoleRule> rules = parse_role_rules_json(R"([{"pattern": "a(", "role": "Q"}])", "r.json");
        RoleMapper m(rules, {}, "r.json");
    });
    assert_contains(msg, "'a('");
    assert_contains(msg, "r.json");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_shared_config_parses_with_its_values),
        cmocka_unit_test(details_per_family),
        cmocka_unit_test(falcon_variants),
        cmocka_unit_test(whisper_is_refused_as_encoder_decoder),
        cmocka_unit_test(unknown_model_type_says_how_to_supply_roles),
        cmocka_unit_test(user_roles_in_config_and_roles_file),
        cmocka_unit_test(gemma3_configs),
        cmocka_unit_test(gpt_oss_hub_config),
        cmocka_unit_test(refusals_name_what),
        cmocka_unit_test(malformed_values_are_named),
        cmocka_unit_test(bad_role_rules),
    };
    return cmocka_run_group_tests_name("config", tests, nullptr, nullptr);
}
