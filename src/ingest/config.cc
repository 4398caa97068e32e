#include "ingest/config.h"
#include "ingest/model_files.h"

#include <sys/stat.h>

#include <simdjson.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "ingest/family.h"

namespace stk {

const char *family_name(FamilyId f) { return family_def(f).name; }
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
const char *qk_norm_name(QkNorm k) {
    switch (k) {
        case QkNorm::None: return "none";
        case QkNorm::PerHead: return "per_head";
        case QkNorm::Whole: return "whole";
    }
    return "?";
}

bool ModelConfig::layer_is_moe(uint32_t layer) const {
    if (n_experts == 0 || layer < first_moe_layer) return false;
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

// ---- ConfigReader -----------------------------------------------------------------------------

using simdjson::dom::element;
using simdjson::dom::object;

bool ConfigReader::has(const char *key) const {
    element e;
    return !obj_.at_key(key).get(e) && !e.is_null();
}

bool ConfigReader::present(const char *key) const {
    element e;
    return !obj_.at_key(key).get(e);
}

bool ConfigReader::u64(const char *key, uint64_t *out) const {
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

bool ConfigReader::f64(const char *key, double *out) const {
    element e;
    if (obj_.at_key(key).get(e) || e.is_null()) return false;
    double d;
    if (e.get_double().get(d) || !std::isfinite(d))
        throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be a finite number", source_.c_str(), key);
    *out = d;
    return true;
}

bool ConfigReader::boolean(const char *key, bool *out) const {
    element e;
    if (obj_.at_key(key).get(e) || e.is_null()) return false;
    bool b;
    if (e.get_bool().get(b)) throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be true or false", source_.c_str(), key);
    *out = b;
    return true;
}

bool ConfigReader::str(const char *key, std::string *out) const {
    element e;
    if (obj_.at_key(key).get(e) || e.is_null()) return false;
    std::string_view s;
    if (e.get_string().get(s)) throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be a string", source_.c_str(), key);
    *out = std::string(s);
    return true;
}

bool ConfigReader::u64_any(std::initializer_list<const char *> keys, uint64_t *out, const char **which) const {
    for (const char *k : keys)
        if (u64(k, out)) {
            if (which) *which = k;
            return true;
        }
    return false;
}

bool ConfigReader::f64_any(std::initializer_list<const char *> keys, double *out) const {
    for (const char *k : keys)
        if (f64(k, out)) return true;
    return false;
}

uint64_t ConfigReader::need(std::initializer_list<const char *> keys, uint64_t lo, uint64_t hi, const char *what) const {
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

void ConfigReader::check_range(const char *key, uint64_t v, uint64_t lo, uint64_t hi) const {
    if (v < lo || v > hi)
        throw_error(STK_E_BAD_JSON, "%s: \"%s\" = %llu is outside [%llu, %llu]", source_.c_str(), key, (unsigned long long)v,
                    (unsigned long long)lo, (unsigned long long)hi);
}

bool ConfigReader::object(const char *key, simdjson::dom::object *out) const {
    element e;
    if (obj_.at_key(key).get(e) || e.is_null()) return false;
    if (e.get_object().get(*out)) throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be an object or null", source_.c_str(), key);
    return true;
}

bool ConfigReader::array(const char *key, simdjson::dom::array *out) const {
    element e;
    if (obj_.at_key(key).get(e) || e.is_null()) return false;
    if (e.get_array().get(*out)) throw_error(STK_E_BAD_JSON, "%s: \"%s\" must be a list or null", source_.c_str(), key);
    return true;
}

void copy_config_str(char *dst, size_t cap, const std::string &s) {
    size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
    std::memcpy(dst, s.data(), n);
    dst[n] = 0;
}

void set_activation(ModelConfig &m, const char *act) { copy_config_str(m.activation, sizeof m.activation, act); }

namespace {

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
                        "LM_HEAD_B ROUTER_B ATTN_SINK QKV QKV_B FFN_W13 FFN_B13 BUFFER)",
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
                throw_error(STK_E_BAD_JSON, "%s: role pattern '%s': QKV needs a \"layout\"; use the list form", source.c_str(),
                            pattern.c_str());
            out.push_back(r);
        }
    } else if (!v.get_array().get(arr)) {
        uint32_t index = 0;
        for (element item : arr) {
            object o;
            if (item.get_object().get(o))
                throw_error(STK_E_BAD_JSON, "%s: role rule %u is not an object {\"pattern\", \"role\", ...}", source.c_str(),
                            index);
            ConfigReader c(o, source);
            RoleRule r;
            std::string role, layout, norm;
            if (!c.str("pattern", &r.pattern) || !c.str("role", &role))
                throw_error(STK_E_BAD_JSON, "%s: role rule %u needs \"pattern\" and \"role\" strings", source.c_str(), index);
            r.role = role_of(role, r.pattern);
            c.boolean("transpose", &r.transpose);
            c.boolean("shared_expert", &r.shared);
            c.boolean("buffer", &r.buffer);
            c.boolean("stacked_experts", &r.stacked);
            if (c.str("layout", &layout)) {
                if (layout == "qkv_concat") r.layout = QkvLayout::Concat;
                else if (layout == "qkv_heads") r.layout = QkvLayout::PerHead;
                else if (layout == "qkv_grouped") r.layout = QkvLayout::Grouped;
                else if (layout == "interleaved") r.layout = QkvLayout::Interleaved;
                else
                    throw_error(STK_E_BAD_JSON,
                                "%s: role pattern '%s': layout '%s' is not qkv_concat, qkv_heads, qkv_grouped or interleaved",
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
                else if (norm == "post_attn") r.slot = NormSlot::PostAttn;
                else if (norm == "post_ffn") r.slot = NormSlot::PostFfn;
                else if (norm == "q_norm") r.slot = NormSlot::QNorm;
                else if (norm == "k_norm") r.slot = NormSlot::KNorm;
                else
                    throw_error(
                        STK_E_BAD_JSON,
                        "%s: role pattern '%s': norm '%s' is not attn, ffn, final, emb, post_attn, post_ffn, q_norm or k_norm",
                        source.c_str(), r.pattern.c_str(), norm.c_str());
            }
            r.priority = index++;
            out.push_back(r);
        }
    } else {
        throw_error(STK_E_BAD_JSON,
                    "%s: \"stk_roles\" must be a list of {\"pattern\", \"role\"} objects or an object "
                    "{pattern: role}",
                    source.c_str());
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

// ---- The driver -------------------------------------------------------------------------------
// parse_model_config runs these steps in order over one config (the shape of libxkbcommon's
// compile_file_fns[]); each reads what every family spells alike and asks the family's FamilyDef
// (ingest/family.h) for the rest.

namespace {

struct Ctx {
    const ConfigReader &c;
    const std::string &model_type;
    const FamilyDef &def;
    ParsedConfig &out;
    ModelConfig &m;
    const std::string &source;
};

std::string known_types() {
    std::string s;
    for (uint32_t i = 1; i < kFamilyCount; i++)
        for (const char *const *t = kFamilyDefs[i]->model_types; *t; t++) s += std::string(s.empty() ? "" : ", ") + *t;
    return s;
}

// quantization_config: only what is dequantised exactly may pass: block-scaled fp8 (dynamic
// activations, e4m3 weights, a weight_block_size), read into m.fp8_block; MXFP4 (ingest/mxfp4.h).
void refuse_quantized(const ConfigReader &c, const std::string &source, ModelConfig &m) {
    object q;
    if (!c.object("quantization_config", &q)) return;
    ConfigReader r(q, source);
    std::string method;
    r.str("quant_method", &method);
    if (method == "fp8") {
        std::string act = "dynamic", fmt = "e4m3";
        r.str("activation_scheme", &act);
        r.str("fmt", &fmt);
        simdjson::dom::array bs;
        uint64_t b[2] = {0, 0};
        int n = 0;
        if (r.array("weight_block_size", &bs))
            for (element e : bs) {
                uint64_t v = 0;
                if (n >= 2 || e.get_uint64().get(v) || v == 0 || v > (1u << 20)) {
                    n = 3;
                    break;
                }
                b[n++] = v;
            }
        if (act != "dynamic" || fmt != "e4m3" || n != 2)
            throw_error(STK_E_UNSUPPORTED,
                        "%s: \"quantization_config\" fp8 with activation_scheme '%s', fmt '%s' and %s weight_block_size: stk "
                        "dequantises block-scaled fp8 only (dynamic activations, e4m3, a [rows, cols] block size)",
                        source.c_str(), act.c_str(), fmt.c_str(), n == 2 ? "a" : "no valid");
        m.fp8_block[0] = uint32_t(b[0]);
        m.fp8_block[1] = uint32_t(b[1]);
        return;
    }
    if (method == "mxfp4") {
        m.mxfp4 = true;
        return;
    }
    if (method.empty()) {
        bool b4 = false, b8 = false;
        r.boolean("load_in_4bit", &b4);
        r.boolean("load_in_8bit", &b8);
        if (b4 || b8) method = "bitsandbytes";
    }
    throw_error(STK_E_UNSUPPORTED,
                "%s: \"quantization_config\" says quant_method '%s': stk reads float checkpoints (F32, F16, BF16, GGUF "
                "blocks, block-scaled fp8, MXFP4) and does not dequantise GPTQ, AWQ, bitsandbytes or other packed formats; "
                "convert the unquantised model",
                source.c_str(), method.empty() ? "(none)" : method.c_str());
}

void step_family(Ctx &x) {
    refuse_quantized(x.c, x.source, x.m);
    if (x.m.family == kCustomFamily && x.out.user_rules.empty())
        throw_error(STK_E_UNKNOWN_MODEL,
                    "%s: model_type '%s' has no built-in role preset (presets: %s). Supply role patterns: add "
                    "\"stk_roles\": [{\"pattern\": \"model\\\\.layers\\\\.(?P<layer>[0-9]+)\\\\.attn\\\\.q\\\\.weight\", "
                    "\"role\": \"Q\"}, ...] to config.json, or put that list in stk_roles.json beside it "
                    "(docs/decisions.md, \"Decisions: model description and roles\")",
                    x.source.c_str(), x.model_type.c_str(), known_types().c_str());
}

void step_shapes(Ctx &x) {
    const ConfigReader &c = x.c;
    ModelConfig &m = x.m;
    m.d_model = uint32_t(c.need({"hidden_size", "n_embd", "d_model"}, 1, kMaxDModel, "the model width"));
    m.n_layers = uint32_t(c.need({"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, 1, kMaxLayers, "the layer count"));
    m.n_heads = uint32_t(c.need({"num_attention_heads", "n_head", "num_heads", "n_heads"}, 1, kMaxHeads, "the head count"));
    m.vocab_size = c.need({"vocab_size"}, 1, kMaxVocab, "the vocabulary size");
    uint64_t v;
    if (c.u64("head_dim", &v)) {
        c.check_range("head_dim", v, 1, kMaxHeadDim);
        m.head_dim = uint32_t(v);
    } else {
        if (m.d_model % m.n_heads)
            throw_error(STK_E_BAD_JSON, "%s: the width %u is not a multiple of the %u heads (and no \"head_dim\")",
                        x.source.c_str(), m.d_model, m.n_heads);
        m.head_dim = m.d_model / m.n_heads;
    }
}

void step_kv_heads(Ctx &x) {
    ModelConfig &m = x.m;
    m.n_kv_heads = m.n_heads;
    uint64_t v;
    if (x.def.kv_heads) x.def.kv_heads(x.c, x.model_type, m);
    else if (x.c.u64_any({"num_key_value_heads", "num_kv_heads"}, &v)) m.n_kv_heads = uint32_t(v < kMaxHeads ? v : kMaxHeads + 1);
    if (m.n_kv_heads == 0 || m.n_kv_heads > m.n_heads || m.n_heads % m.n_kv_heads)
        throw_error(STK_E_BAD_JSON, "%s: %u key/value heads do not divide the %u attention heads", x.source.c_str(), m.n_kv_heads,
                    m.n_heads);
}

// The HF config class defaults, then the keys every family spells alike.
void step_defaults(Ctx &x) {
    ModelConfig &m = x.m;
    m.tied_embeddings = true;  // PretrainedConfig's tie_word_embeddings default
    if (x.def.defaults) x.def.defaults(x.c, x.model_type, m);
    x.c.boolean("tie_word_embeddings", &m.tied_embeddings);
    std::string a;
    if (x.c.str("hidden_act", &a) || x.c.str("hidden_activation", &a) || x.c.str("activation_function", &a) ||
        x.c.str("activation", &a))
        copy_config_str(m.activation, sizeof m.activation, a);
}

void step_ffn(Ctx &x) {
    ModelConfig &m = x.m;
    uint64_t v;
    if (x.c.u64_any({"intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"}, &v)) m.ffn_dim = v;
    else if (x.def.ffn_default_4x) m.ffn_dim = uint64_t(m.d_model) * 4;  // n_inner: null means 4 * n_embd
    else if (m.family != kCustomFamily) throw_error(STK_E_BAD_JSON, "%s: \"intermediate_size\" missing", x.source.c_str());
    if (m.ffn_dim > kMaxFfn) x.c.check_range("intermediate_size", m.ffn_dim, 1, kMaxFfn);
}

void step_norm(Ctx &x) {
    ModelConfig &m = x.m;
    if (!x.c.f64_any({"rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", "norm_epsilon"}, &m.norm_eps)) m.norm_eps = 1e-5;
    if (!(m.norm_eps > 0 && m.norm_eps < 1))
        throw_error(STK_E_BAD_JSON, "%s: norm epsilon %g is not in (0, 1)", x.source.c_str(), m.norm_eps);
}

void step_positions(Ctx &x) {
    const ConfigReader &c = x.c;
    ModelConfig &m = x.m;
    const std::string &source = x.source;
    uint64_t v;
    if (c.u64_any({"max_position_embeddings", "n_positions", "seq_length", "max_seq_len"}, &v)) {
        if (v > kMaxPositions) c.check_range("max_position_embeddings", v, 0, kMaxPositions);
        m.max_positions = v;
    }
    if (m.positions == PosKind::Learned && m.max_positions == 0)
        throw_error(STK_E_BAD_JSON, "%s: learned positions need \"n_positions\" / \"max_position_embeddings\"", source.c_str());
    if (m.positions != PosKind::Rope) return;
    // transformers >= 5 writes "rope_parameters" instead of rope_theta / rope_scaling: flat, or one
    // object per layer type (Gemma: "full_attention", "sliding_attention").
    object params, full, sliding;
    bool have_params = c.object("rope_parameters", &params);
    bool per_type = false;
    if (have_params) {
        ConfigReader p(params, source);
        bool f = p.object("full_attention", &full), s = p.object("sliding_attention", &sliding);
        per_type = f || s;
        if (!f) full = params;
        if (!s) sliding = full;
    }
    if (!c.f64_any({"rope_theta", "rotary_emb_base", "rope_base"}, &m.rope_theta) && have_params)
        ConfigReader(full, source).f64("rope_theta", &m.rope_theta);
    if (!(m.rope_theta > 1.0)) throw_error(STK_E_BAD_JSON, "%s: rope_theta %g must be > 1", source.c_str(), m.rope_theta);
    if (!c.f64("rope_local_base_freq", &m.rope_local_theta) && per_type)
        ConfigReader(sliding, source).f64("rope_theta", &m.rope_local_theta);
    if (m.rope_local_theta != 0 && !(m.rope_local_theta > 1.0))
        throw_error(STK_E_BAD_JSON, "%s: rope_local_base_freq %g must be > 1", source.c_str(), m.rope_local_theta);
    double pct = 1.0;
    if (!c.f64_any({"rotary_pct", "partial_rotary_factor"}, &pct) && have_params)
        ConfigReader(full, source).f64("partial_rotary_factor", &pct);
    if (!(pct > 0 && pct <= 1)) throw_error(STK_E_BAD_JSON, "%s: rotary_pct %g is not in (0, 1]", source.c_str(), pct);
    m.rotary_dim = uint32_t(double(m.head_dim) * pct);  // HF: int(head_size * rotary_pct)
    object rso;
    bool scaled = c.object("rope_scaling", &rso);
    if (!scaled && have_params) {
        std::string t;
        ConfigReader f(full, source);
        if ((f.str("rope_type", &t) || f.str("type", &t)) && t != "default") {
            rso = full;
            scaled = true;
        }
    }
    if (scaled) {
        ConfigReader r(rso, source);
        std::string type;
        if (!r.str("rope_type", &type) && !r.str("type", &type))
            throw_error(STK_E_BAD_JSON, "%s: \"rope_scaling\" has no \"rope_type\"", source.c_str());
        copy_config_str(m.rope_scaling_type, sizeof m.rope_scaling_type, type);
        r.f64("factor", &m.rope_scaling_factor);
        uint64_t om = 0;
        if (r.u64("original_max_position_embeddings", &om) || c.u64("original_max_position_embeddings", &om))
            m.rope_original_max = om < kMaxPositions ? om : kMaxPositions;
        r.f64("low_freq_factor", &m.rope_low_freq_factor);
        r.f64("high_freq_factor", &m.rope_high_freq_factor);
        r.f64("beta_fast", &m.rope_beta_fast);
        r.f64("beta_slow", &m.rope_beta_slow);
        if (type == "yarn") {
            r.boolean("truncate", &m.rope_yarn_truncate);
            // transformers' attention_factor: given, else 0.1 ln(factor) + 1 (as a ratio of two
            // such terms when mscale and mscale_all_dim are both given).
            double af = 0, ms = 0, ms_all = 0, f = m.rope_scaling_factor;
            auto mscale = [&](double k) { return f <= 1 ? 1.0 : 0.1 * k * std::log(f) + 1.0; };
            if (r.f64("attention_factor", &af)) m.rope_attn_factor = af;
            else if (r.f64("mscale", &ms) && r.f64("mscale_all_dim", &ms_all) && ms != 0 && ms_all != 0)
                m.rope_attn_factor = mscale(ms) / mscale(ms_all);
            else m.rope_attn_factor = mscale(1);
            if (!(m.rope_attn_factor > 0 && m.rope_attn_factor < 1e3))
                throw_error(STK_E_BAD_JSON, "%s: yarn attention factor %g is not in (0, 1000)", source.c_str(),
                            m.rope_attn_factor);
        }
        simdjson::dom::array lf;
        if (type == "longrope" && r.array("long_factor", &lf)) {
            for (element e : lf) {
                double v;
                if (e.get_double().get(v) || !(v > 0) || m.n_rope_long_factor >= 256)
                    throw_error(STK_E_BAD_JSON, "%s: \"rope_scaling\".long_factor must hold at most 256 positive numbers",
                                source.c_str());
                m.rope_long_factor[m.n_rope_long_factor++] = float(v);
            }
        }
    }
}

void step_experts(Ctx &x) {
    const ConfigReader &c = x.c;
    ModelConfig &m = x.m;
    const std::string &source = x.source;
    uint64_t v;
    if (c.u64_any({"num_local_experts", "num_experts"}, &v) && v > 0) {
        c.check_range("num_experts", v, 1, kMaxExperts);
        m.n_experts = uint32_t(v);
        if (!c.u64("num_experts_per_tok", &v))
            throw_error(STK_E_BAD_JSON, "%s: an MoE config needs \"num_experts_per_tok\"", source.c_str());
        c.check_range("num_experts_per_tok", v, 1, m.n_experts);
        m.top_k = uint32_t(v);
        copy_config_str(m.router, sizeof m.router, "softmax_topk");
        m.moe_ffn_dim = m.ffn_dim;
        if (c.u64("moe_intermediate_size", &v)) {
            c.check_range("moe_intermediate_size", v, 1, kMaxFfn);
            m.moe_ffn_dim = v;
        }
        if (c.u64("shared_expert_intermediate_size", &v) && v > 0) {
            c.check_range("shared_expert_intermediate_size", v, 1, kMaxFfn);
            m.shared_expert_ffn_dim = v;
        }
        c.boolean("norm_topk_prob", &m.norm_topk_prob);
        if (c.u64("decoder_sparse_step", &v)) {
            c.check_range("decoder_sparse_step", v, 1, kMaxLayers);
            m.moe_layer_step = uint32_t(v);
        }
        simdjson::dom::array dense;
        if (c.array("mlp_only_layers", &dense)) {
            for (element e : dense) {
                uint64_t li;
                if (e.get_uint64().get(li) || li >= m.n_layers)
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
}

void step_finish(Ctx &x) {
    if (x.def.finish) x.def.finish(x.c, x.model_type, x.m);
    if (x.m.qkv_layout == QkvLayout::PerHead && x.m.n_kv_heads != x.m.n_heads)
        throw_error(STK_E_BAD_JSON, "%s: %s fuses QKV per head, which needs as many key/value heads as heads (%u != %u)",
                    x.source.c_str(), x.model_type.c_str(), x.m.n_kv_heads, x.m.n_heads);
}

void (*const kConfigSteps[])(Ctx &) = {
    step_family, step_shapes, step_kv_heads, step_defaults, step_ffn, step_norm, step_positions, step_experts, step_finish,
};

}  // namespace

ParsedConfig parse_model_config(const std::string &json_text, const std::string &source, const std::string *roles_file_text,
                                const std::string &roles_source) {
    ParsedConfig out;
    out.source = source;
    simdjson::dom::parser parser;
    element root = parse_json(parser, json_text, source);
    object obj;
    if (root.get_object().get(obj)) throw_error(STK_E_BAD_JSON, "%s: the top level must be a JSON object", source.c_str());
    ConfigReader c(obj, source);
    ModelConfig &m = out.config;

    std::string model_type;
    if (!c.str("model_type", &model_type))
        throw_error(STK_E_BAD_JSON, "%s: \"model_type\" missing: stk needs it to pick the tensor role preset", source.c_str());
    copy_config_str(m.model_type, sizeof m.model_type, model_type);

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

    m.family = family_by_model_type(model_type);
    if (m.family == kCustomFamily)
        for (const RoleRule &r : out.user_rules)
            if (r.role == Role::FFN_W3) m.ffn_kind = FfnKind::Gated;
    Ctx x{c, model_type, family_def(m.family), out, m, source};
    for (auto step : kConfigSteps) step(x);
    return out;
}

ParsedConfig load_model_config(const ModelFiles &files) {
    if (files.config_refusal) std::rethrow_exception(files.config_refusal);
    std::string text = read_small_file(files.config, kMaxConfigBytes);
    if (!files.roles.empty()) {
        std::string roles = read_small_file(files.roles, kMaxConfigBytes);
        return parse_model_config(text, files.config, &roles, files.roles);
    }
    return parse_model_config(text, files.config);
}

ParsedConfig load_model_config(const std::string &dir) {
    std::string path = dir + "/config.json";
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) throw_error(STK_E_NOT_FOUND, "%s: no such model directory", dir.c_str());
    if (!S_ISDIR(st.st_mode))
        throw_error(STK_E_NOT_FOUND, "%s: not a directory (the model directory holds config.json and the weights)", dir.c_str());
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
