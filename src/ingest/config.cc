#include "ingest/config.h"

#include <simdjson.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace stk {

const char *family_name(Family f) {
    switch (f) {
        case Family::Custom: return "custom";
        case Family::Gpt2: return "gpt2";
        case Family::Llama: return "llama";
        case Family::Mistral: return "mistral";
        case Family::Mixtral: return "mixtral";
        case Family::Qwen2: return "qwen2";
        case Family::Qwen2Moe: return "qwen2_moe";
        case Family::GptNeox: return "gpt_neox";
        case Family::Bloom: return "bloom";
        case Family::Falcon: return "falcon";
    }
    return "?";
}
const char *ffn_kind_name(FfnKind k) { return k == FfnKind::Gated ? "gated" : "plain"; }
const char *norm_kind_name(NormKind k) { return k == NormKind::RmsNorm ? "rmsnorm" : "layernorm"; }
const char *pos_kind_name(PosKind k) {
    switch (k) {
        case PosKind::None: return "none";
        case PosKind::Learned: return "learned";
        case PosKind::Rope: return "rope";
        case PosKind::Alibi: return "alibi";
    }
    return "?";
}

bool ModelConfig::layer_is_moe(uint32_t layer) const {
    if (n_experts == 0) return false;
    for (uint32_t i = 0; i < n_dense_layers; i++)
        if (dense_layers[i] == layer) return false;
    // qwen2_moe: a layer is sparse when (layer + 1) % decoder_sparse_step == 0.
    uint32_t step = moe_layer_step ? moe_layer_step : 1;
    return (layer + 1) % step == 0;
}

uint64_t ModelConfig::ffn_dim_for(int32_t expert) const {
    if (expert == kSharedExpert) return shared_expert_ffn_dim;
    if (expert >= 0) return moe_ffn_dim;
    return ffn_dim;
}

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// Typed access to config.json keys, every error naming the file and the key.
class Cfg {
public:
    Cfg(object obj, const std::string &source) : obj_(obj), source_(source) {}

    bool has(const char *key) const {
        element e;
        return !obj_.at_key(key).get(e) && !e.is_null();
    }

    // An unsigned integer (JSON integers, or floats with an integral value such as 1e4).
    bool u64(const char *key, uint64_t *out) const {
        element e;
        if (obj_.at_key(key).get(e) || e.is_null()) return false;
        uint64_t v;
        if (!e.get_uint64().get(v)) {
            *out = v;
            return true;
        }
        double d;
        if (!e.get_double().get(d) && d >= 0 && d < 18446744073709551616.0 && std::floor(d) == d) {
            *out = uint64_t(d);
            return true;
        }
        throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be a non-negative integer", source_.c_str(), key);
    }

    bool f64(const char *key, double *out) const {
        element e;
        if (obj_.at_key(key).get(e) || e.is_null()) return false;
        double d;
        if (e.get_double().get(d) || !std::isfinite(d))
            throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be a finite number", source_.c_str(), key);
        *out = d;
        return true;
    }

    bool boolean(const char *key, bool *out) const {
        element e;
        if (obj_.at_key(key).get(e) || e.is_null()) return false;
        bool b;
        if (e.get_bool().get(b)) throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be true or false", source_.c_str(), key);
        *out = b;
        return true;
    }

    bool str(const char *key, std::string *out) const {
        element e;
        if (obj_.at_key(key).get(e) || e.is_null()) return false;
        std::string_view s;
        if (e.get_string().get(s)) throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be a string", source_.c_str(), key);
        *out = std::string(s);
        return true;
    }

    // The first of several spellings that is present.
    bool u64_any(std::initializer_list<const char *> keys, uint64_t *out, const char **which = nullptr) const {
        for (const char *k : keys)
            if (u64(k, out)) {
                if (which) *which = k;
                return true;
            }
        return false;
    }
    bool f64_any(std::initializer_list<const char *> keys, double *out) const {
        for (const char *k : keys)
            if (f64(k, out)) return true;
        return false;
    }

    // A required value in [lo, hi].
    uint64_t need(std::initializer_list<const char *> keys, uint64_t lo, uint64_t hi, const char *what) const {
        uint64_t v;
        const char *which = nullptr;
        if (!u64_any(keys, &v, &which)) {
            std::string names;
            for (const char *k : keys) names += std::string(names.empty() ? "\"" : ", \"") + k + "\"";
            throw_error(STK_E_BAD_JSON, "%s: %s missing (looked for %s)", source_.c_str(), what, names.c_str());
        }
        check_range(which, v, lo, hi);
        return v;
    }

    void check_range(const char *key, uint64_t v, uint64_t lo, uint64_t hi) const {
        if (v < lo || v > hi)
            throw_error(STK_E_BAD_JSON, "%s: \"%s\" = %llu is outside [%llu, %llu]", source_.c_str(), key,
                        (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi);
    }

    object obj() const { return obj_; }
    const std::string &source() const { return source_; }

private:
    object obj_;
    const std::string &source_;
};

void copy_str(char *dst, size_t cap, const std::string &s) {
    size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
    std::memcpy(dst, s.data(), n);
    dst[n] = 0;
}

struct FamilyName {
    const char *model_type;
    Family family;
};
const FamilyName kFamilies[] = {
    {"gpt2", Family::Gpt2},       {"llama", Family::Llama},          {"mistral", Family::Mistral},
    {"mixtral", Family::Mixtral}, {"qwen2", Family::Qwen2},          {"qwen2_moe", Family::Qwen2Moe},
    {"gpt_neox", Family::GptNeox}, {"bloom", Family::Bloom},         {"falcon", Family::Falcon},
    {"RefinedWeb", Family::Falcon}, {"RefinedWebModel", Family::Falcon},
};

std::string known_types() {
    std::string s;
    for (const FamilyName &f : kFamilies) s += std::string(s.empty() ? "" : ", ") + f.model_type;
    return s;
}

simdjson::dom::element parse_json(simdjson::dom::parser &parser, const std::string &text, const std::string &source) {
    if (text.size() > kMaxConfigBytes)
        throw_error(STK_E_BAD_JSON, "%s: %zu bytes, more than the %llu a config may have", source.c_str(), text.size(),
                    (unsigned long long)kMaxConfigBytes);
    simdjson::dom::element root;
    auto err = parser.parse(text).get(root);  // copies into a padded buffer; validates UTF-8
    if (err) throw_error(STK_E_BAD_JSON, "%s: not valid JSON: %s", source.c_str(), simdjson::error_message(err));
    return root;
}

std::vector<RoleRule> rules_from_element(element v, const std::string &source) {
    std::vector<RoleRule> out;
    auto role_of = [&](std::string_view s, const std::string &pattern) {
        Role r;
        if (!parse_role_name(std::string(s), &r) || r == Role::NONE)
            throw_error(STK_E_BAD_JSON,
                        "%s: role pattern '%s': unknown role '%.*s' (roles: EMB Q K V O FFN_W1 FFN_W2 FFN_W3 FFN_B1 "
                        "FFN_B2 FFN_B3 LN_G LN_B ROUTER_GATE ROPE_ALPHA Q_B K_B V_B O_B POS_EMB LM_HEAD SHARED_GATE "
                        "QKV QKV_B BUFFER)",
                        source.c_str(), pattern.c_str(), int(s.size()), s.data());
        return r;
    };
    object obj;
    simdjson::dom::array arr;
    if (!v.get_object().get(obj)) {
        // {pattern: role}: key order carries no meaning in JSON, so all share one priority and
        // the lexical order of the pattern decides (seed 3.2).
        for (auto kv : obj) {
            std::string_view role;
            std::string pattern(kv.key);
            if (kv.value.get_string().get(role))
                throw_error(STK_E_BAD_JSON, "%s: role pattern '%s': the value must be a role name string", source.c_str(),
                            pattern.c_str());
            RoleRule r;
            r.pattern = pattern;
            r.role = role_of(role, pattern);
            r.priority = 0;
            if (r.role == Role::QKV || r.role == Role::QKV_B)
                throw_error(STK_E_BAD_JSON, "%s: role pattern '%s': QKV needs a \"layout\"; use the list form",
                            source.c_str(), pattern.c_str());
            out.push_back(r);
        }
    } else if (!v.get_array().get(arr)) {
        uint32_t index = 0;
        for (element item : arr) {
            object o;
            if (item.get_object().get(o))
                throw_error(STK_E_BAD_JSON, "%s: role rule %u is not an object {\"pattern\", \"role\", ...}", source.c_str(),
                            index);
            Cfg c(o, source);
            RoleRule r;
            std::string role, layout, norm;
            if (!c.str("pattern", &r.pattern) || !c.str("role", &role))
                throw_error(STK_E_BAD_JSON, "%s: role rule %u needs \"pattern\" and \"role\" strings", source.c_str(), index);
            r.role = role_of(role, r.pattern);
            c.boolean("transpose", &r.transpose);
            c.boolean("shared_expert", &r.shared);
            c.boolean("buffer", &r.buffer);
            if (c.str("layout", &layout)) {
                if (layout == "qkv_concat") r.layout = QkvLayout::Concat;
                else if (layout == "qkv_heads") r.layout = QkvLayout::PerHead;
                else if (layout == "qkv_grouped") r.layout = QkvLayout::Grouped;
                else
                    throw_error(STK_E_BAD_JSON, "%s: role pattern '%s': layout '%s' is not qkv_concat, qkv_heads or qkv_grouped",
                                source.c_str(), r.pattern.c_str(), layout.c_str());
            }
            if ((r.role == Role::QKV || r.role == Role::QKV_B) && r.layout == QkvLayout::Separate)
                throw_error(STK_E_BAD_JSON, "%s: role pattern '%s': a fused QKV rule needs \"layout\"", source.c_str(),
                            r.pattern.c_str());
            if (c.str("norm", &norm)) {
                if (norm == "attn") r.slot = NormSlot::Attn;
                else if (norm == "ffn") r.slot = NormSlot::Ffn;
                else if (norm == "final") r.slot = NormSlot::Final;
                else if (norm == "emb") r.slot = NormSlot::Emb;
                else
                    throw_error(STK_E_BAD_JSON, "%s: role pattern '%s': norm '%s' is not attn, ffn, final or emb",
                                source.c_str(), r.pattern.c_str(), norm.c_str());
            }
            r.priority = index++;
            out.push_back(r);
        }
    } else {
        throw_error(STK_E_BAD_JSON, "%s: \"stk_roles\" must be a list of {\"pattern\", \"role\"} objects or an object "
                    "{pattern: role}", source.c_str());
    }
    if (out.size() > 4096) throw_error(STK_E_BAD_JSON, "%s: %zu role rules, at most 4096", source.c_str(), out.size());
    return out;
}

}  // namespace

std::vector<RoleRule> parse_role_rules_json(const std::string &json_text, const std::string &source) {
    simdjson::dom::parser parser;
    element root = parse_json(parser, json_text, source);
    object obj;
    element inner;
    if (!root.get_object().get(obj) && !obj.at_key("stk_roles").get(inner)) return rules_from_element(inner, source);
    return rules_from_element(root, source);
}

ParsedConfig parse_model_config(const std::string &json_text, const std::string &source,
                                const std::string *roles_file_text, const std::string &roles_source) {
    ParsedConfig out;
    out.source = source;
    simdjson::dom::parser parser;
    element root = parse_json(parser, json_text, source);
    object obj;
    if (root.get_object().get(obj)) throw_error(STK_E_BAD_JSON, "%s: the top level must be a JSON object", source.c_str());
    Cfg c(obj, source);
    ModelConfig &m = out.config;

    std::string model_type;
    if (!c.str("model_type", &model_type))
        throw_error(STK_E_BAD_JSON, "%s: \"model_type\" missing: stk needs it to pick the tensor role preset", source.c_str());
    copy_str(m.model_type, sizeof m.model_type, model_type);

    bool enc_dec = false;
    c.boolean("is_encoder_decoder", &enc_dec);
    if (enc_dec || model_type == "whisper" || model_type == "t5" || model_type == "bart")
        throw_error(STK_E_UNSUPPORTED,
                    "%s: model_type '%s' is an encoder-decoder model; stk projects decoder-only causal language "
                    "models (the spec's single residual stream, one token embedding, one head) and does not convert it",
                    source.c_str(), model_type.c_str());

    element roles;
    if (!obj.at_key("stk_roles").get(roles) && !roles.is_null()) out.user_rules = rules_from_element(roles, source);
    if (roles_file_text) {
        std::vector<RoleRule> more = parse_role_rules_json(*roles_file_text, roles_source);
        // stk_roles.json comes after config.json's own list.
        uint32_t base = uint32_t(out.user_rules.size());
        for (RoleRule &r : more) r.priority += base;
        out.user_rules.insert(out.user_rules.end(), more.begin(), more.end());
    }

    m.family = Family::Custom;
    for (const FamilyName &f : kFamilies)
        if (model_type == f.model_type) m.family = f.family;
    if (m.family == Family::Custom && out.user_rules.empty())
        throw_error(STK_E_UNKNOWN_MODEL,
                    "%s: model_type '%s' has no built-in role preset (presets: %s). Supply role patterns: add "
                    "\"stk_roles\": [{\"pattern\": \"model\\\\.layers\\\\.(?P<layer>[0-9]+)\\\\.attn\\\\.q\\\\.weight\", "
                    "\"role\": \"Q\"}, ...] to config.json, or put that list in stk_roles.json beside it "
                    "(docs/decisions.md, \"Decisions: model description and roles\")",
                    source.c_str(), model_type.c_str(), known_types().c_str());

    if (m.family == Family::Custom)
        for (const RoleRule &r : out.user_rules)
            if (r.role == Role::FFN_W3) m.ffn_kind = FfnKind::Gated;

    // Shapes.
    m.d_model = uint32_t(c.need({"hidden_size", "n_embd", "d_model"}, 1, kMaxDModel, "the model width"));
    m.n_layers = uint32_t(c.need({"num_hidden_layers", "n_layer", "num_layers"}, 1, kMaxLayers, "the layer count"));
    m.n_heads = uint32_t(c.need({"num_attention_heads", "n_head", "num_heads"}, 1, kMaxHeads, "the head count"));
    m.vocab_size = c.need({"vocab_size"}, 1, kMaxVocab, "the vocabulary size");
    uint64_t v;
    if (c.u64("head_dim", &v)) {
        c.check_range("head_dim", v, 1, kMaxHeadDim);
        m.head_dim = uint32_t(v);
    } else {
        if (m.d_model % m.n_heads)
            throw_error(STK_E_BAD_JSON, "%s: the width %u is not a multiple of the %u heads (and no \"head_dim\")",
                        source.c_str(), m.d_model, m.n_heads);
        m.head_dim = m.d_model / m.n_heads;
    }
    m.n_kv_heads = m.n_heads;
    bool multi_query = false, new_arch = false;
    if (m.family == Family::Falcon) {
        c.boolean("multi_query", &multi_query);
        c.boolean("new_decoder_architecture", &new_arch);
        if (model_type == "RefinedWeb") new_arch = true;
        if (model_type == "RefinedWebModel") multi_query = true;
        if (multi_query) m.n_kv_heads = 1;
        if (new_arch && c.u64_any({"num_kv_heads", "n_head_kv"}, &v)) m.n_kv_heads = uint32_t(v < kMaxHeads ? v : kMaxHeads + 1);
    } else if (c.u64_any({"num_key_value_heads", "num_kv_heads"}, &v)) {
        m.n_kv_heads = uint32_t(v < kMaxHeads ? v : kMaxHeads + 1);
    }
    if (m.n_kv_heads == 0 || m.n_kv_heads > m.n_heads || m.n_heads % m.n_kv_heads)
        throw_error(STK_E_BAD_JSON, "%s: %u key/value heads do not divide the %u attention heads", source.c_str(),
                    m.n_kv_heads, m.n_heads);

    // Defaults per family (the HF PretrainedConfig subclass defaults).
    std::string act;
    bool tie = true, parallel = false;
    switch (m.family) {
        case Family::Gpt2:
            m.qkv_bias = m.o_bias = m.mlp_bias = true;
            m.norm = NormKind::LayerNorm;
            m.positions = PosKind::Learned;
            m.qkv_layout = QkvLayout::Concat;
            act = "gelu_new";
            break;
        case Family::Llama:
        case Family::Mistral:
        case Family::Mixtral:
        case Family::Qwen2:
        case Family::Qwen2Moe:
            tie = false;
            m.norm = NormKind::RmsNorm;
            m.positions = PosKind::Rope;
            m.ffn_kind = FfnKind::Gated;
            m.rope_theta = 10000.0;
            m.qkv_bias = m.family == Family::Qwen2 || m.family == Family::Qwen2Moe;
            act = "silu";
            break;
        case Family::GptNeox:
            tie = false;
            parallel = true;
            m.qkv_bias = m.o_bias = m.mlp_bias = true;
            m.positions = PosKind::Rope;
            m.rope_theta = 10000.0;
            m.qkv_layout = QkvLayout::PerHead;
            act = "gelu";
            break;
        case Family::Bloom:
            m.qkv_bias = m.o_bias = m.mlp_bias = true;
            m.positions = PosKind::Alibi;
            m.emb_norm = true;
            m.qkv_layout = QkvLayout::PerHead;
            act = "gelu_pytorch_tanh";  // bloom_gelu_forward: the tanh approximation
            break;
        case Family::Falcon: {
            parallel = true;
            bool bias = false, alibi = false;
            c.boolean("bias", &bias);
            c.boolean("alibi", &alibi);
            m.qkv_bias = m.o_bias = m.mlp_bias = bias;
            m.positions = alibi ? PosKind::Alibi : PosKind::Rope;
            m.rope_theta = 10000.0;
            m.qkv_layout = new_arch ? QkvLayout::Grouped : multi_query ? QkvLayout::Concat : QkvLayout::PerHead;
            act = "gelu";
            break;
        }
        case Family::Custom:
            // Unknown architectures: what the keys say, nothing assumed.
            m.norm = c.has("rms_norm_eps") ? NormKind::RmsNorm : NormKind::LayerNorm;
            m.positions = c.has("rope_theta") ? PosKind::Rope : PosKind::None;
            m.rope_theta = 10000.0;
            break;
    }
    c.boolean("tie_word_embeddings", &tie);
    m.tied_embeddings = tie;
    if (m.family == Family::GptNeox) c.boolean("use_parallel_residual", &parallel);
    if (m.family == Family::Falcon) c.boolean("parallel_attn", &parallel);
    m.parallel_attn = parallel;
    if (m.family == Family::Falcon) m.norms_per_layer = (parallel && !new_arch) ? 1 : 2;
    if (m.family == Family::Llama || m.family == Family::Mistral || m.family == Family::Mixtral) {
        bool b = false;
        if (c.boolean("attention_bias", &b)) m.qkv_bias = m.o_bias = b;
        b = false;
        if (c.boolean("mlp_bias", &b)) m.mlp_bias = b;
    }
    if (m.family == Family::GptNeox) {
        bool b = true;
        if (c.boolean("attention_bias", &b)) m.qkv_bias = m.o_bias = b;
    }
    std::string a;
    if (c.str("hidden_act", &a) || c.str("activation_function", &a) || c.str("activation", &a)) act = a;
    copy_str(m.activation, sizeof m.activation, act);

    // FFN size.
    uint64_t four_d = uint64_t(m.d_model) * 4;
    if (c.u64_any({"intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"}, &v)) m.ffn_dim = v;
    else if (m.family == Family::Gpt2 || m.family == Family::Bloom || m.family == Family::Falcon ||
             m.family == Family::GptNeox)
        m.ffn_dim = four_d;  // n_inner: null means 4 * n_embd
    else if (m.family != Family::Custom)
        throw_error(STK_E_BAD_JSON, "%s: \"intermediate_size\" missing", source.c_str());
    if (m.ffn_dim > kMaxFfn) c.check_range("intermediate_size", m.ffn_dim, 1, kMaxFfn);

    // Norm.
    if (!c.f64_any({"rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", "norm_epsilon"}, &m.norm_eps))
        m.norm_eps = 1e-5;
    if (!(m.norm_eps > 0 && m.norm_eps < 1))
        throw_error(STK_E_BAD_JSON, "%s: norm epsilon %g is not in (0, 1)", source.c_str(), m.norm_eps);

    // Positions.
    if (c.u64_any({"max_position_embeddings", "n_positions", "seq_length", "max_seq_len"}, &v)) {
        if (v > kMaxPositions) c.check_range("max_position_embeddings", v, 0, kMaxPositions);
        m.max_positions = v;
    }
    if (m.positions == PosKind::Learned && m.max_positions == 0)
        throw_error(STK_E_BAD_JSON, "%s: learned positions need \"n_positions\" / \"max_position_embeddings\"",
                    source.c_str());
    if (m.positions == PosKind::Rope) {
        c.f64_any({"rope_theta", "rotary_emb_base", "rope_base"}, &m.rope_theta);
        if (!(m.rope_theta > 1.0))
            throw_error(STK_E_BAD_JSON, "%s: rope_theta %g must be > 1", source.c_str(), m.rope_theta);
        double pct = 1.0;
        c.f64_any({"rotary_pct", "partial_rotary_factor"}, &pct);
        if (!(pct > 0 && pct <= 1)) throw_error(STK_E_BAD_JSON, "%s: rotary_pct %g is not in (0, 1]", source.c_str(), pct);
        m.rotary_dim = uint32_t(double(m.head_dim) * pct);  // HF: int(head_size * rotary_pct)
        element rs;
        object rso;
        if (!obj.at_key("rope_scaling").get(rs) && !rs.is_null()) {
            if (rs.get_object().get(rso))
                throw_error(STK_E_BAD_JSON, "%s: \"rope_scaling\" must be an object or null", source.c_str());
            Cfg r(rso, source);
            std::string type;
            if (!r.str("rope_type", &type) && !r.str("type", &type))
                throw_error(STK_E_BAD_JSON, "%s: \"rope_scaling\" has no \"rope_type\"", source.c_str());
            copy_str(m.rope_scaling_type, sizeof m.rope_scaling_type, type);
            r.f64("factor", &m.rope_scaling_factor);
        }
    }

    // Mixture of experts.
    if (c.u64_any({"num_local_experts", "num_experts"}, &v) && v > 0) {
        c.check_range("num_experts", v, 1, kMaxExperts);
        m.n_experts = uint32_t(v);
        if (!c.u64("num_experts_per_tok", &v))
            throw_error(STK_E_BAD_JSON, "%s: an MoE config needs \"num_experts_per_tok\"", source.c_str());
        c.check_range("num_experts_per_tok", v, 1, m.n_experts);
        m.top_k = uint32_t(v);
        copy_str(m.router, sizeof m.router, "softmax_topk");
        m.moe_ffn_dim = m.ffn_dim;
        if (c.u64("moe_intermediate_size", &v)) {
            c.check_range("moe_intermediate_size", v, 1, kMaxFfn);
            m.moe_ffn_dim = v;
        }
        if (c.u64("shared_expert_intermediate_size", &v) && v > 0) {
            c.check_range("shared_expert_intermediate_size", v, 1, kMaxFfn);
            m.shared_expert_ffn_dim = v;
            m.shared_expert_gate = m.family == Family::Qwen2Moe;
        }
        c.boolean("norm_topk_prob", &m.norm_topk_prob);
        if (m.family == Family::Mixtral) m.norm_topk_prob = true;  // Mixtral renormalises the top-k
        if (c.u64("decoder_sparse_step", &v)) {
            c.check_range("decoder_sparse_step", v, 1, kMaxLayers);
            m.moe_layer_step = uint32_t(v);
        }
        simdjson::dom::array dense;
        element de;
        if (!obj.at_key("mlp_only_layers").get(de) && !de.is_null()) {
            if (de.get_array().get(dense))
                throw_error(STK_E_BAD_JSON, "%s: \"mlp_only_layers\" must be a list of layer indices", source.c_str());
            for (element x : dense) {
                uint64_t li;
                if (x.get_uint64().get(li) || li >= m.n_layers)
                    throw_error(STK_E_BAD_JSON, "%s: \"mlp_only_layers\" holds something that is not a layer index < %u",
                                source.c_str(), m.n_layers);
                if (m.n_dense_layers >= kMaxDenseLayerList)
                    throw_error(STK_E_BAD_JSON, "%s: \"mlp_only_layers\" lists more than %u layers", source.c_str(),
                                kMaxDenseLayerList);
                m.dense_layers[m.n_dense_layers++] = uint32_t(li);
            }
        }
    }
    if (uint64_t(m.n_layers) * m.n_experts > kMaxLayerExperts)
        throw_error(STK_E_BAD_JSON, "%s: %u layers x %u experts is more than the %llu expert matrices stk plans for",
                    source.c_str(), m.n_layers, m.n_experts, (unsigned long long)kMaxLayerExperts);
    if (m.family == Family::Mixtral && m.n_experts == 0)
        throw_error(STK_E_BAD_JSON, "%s: mixtral config without \"num_local_experts\"", source.c_str());
    if (m.family == Family::Qwen2Moe && m.n_experts == 0)
        throw_error(STK_E_BAD_JSON, "%s: qwen2_moe config without \"num_experts\"", source.c_str());
    if (m.qkv_layout == QkvLayout::PerHead && m.n_kv_heads != m.n_heads)
        throw_error(STK_E_BAD_JSON, "%s: %s fuses QKV per head, which needs as many key/value heads as heads (%u != %u)",
                    source.c_str(), model_type.c_str(), m.n_kv_heads, m.n_heads);
    return out;
}

ParsedConfig load_model_config(const std::string &dir) {
    std::string path = dir + "/config.json";
    if (!file_exists(path))
        throw_error(STK_E_NOT_FOUND, "%s: missing: stk reads the model's shapes and type from config.json", path.c_str());
    std::string text = read_small_file(path, kMaxConfigBytes);
    std::string roles_path = dir + "/stk_roles.json";
    if (file_exists(roles_path)) {
        std::string roles = read_small_file(roles_path, kMaxConfigBytes);
        return parse_model_config(text, path, &roles, roles_path);
    }
    return parse_model_config(text, path);
}

}  // namespace stk
