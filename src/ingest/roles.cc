#include "ingest/roles.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ingest/config.h"

namespace stk {

static const char *const kRoleNames[kRoleCount] = {
    "EMB", "Q", "K", "V", "O", "FFN_W1", "FFN_W2", "FFN_B1", "FFN_B2", "LN_G", "LN_B", "ROUTER_GATE",
    "ROPE_ALPHA", "FFN_W3", "FFN_B3", "Q_B", "K_B", "V_B", "O_B", "POS_EMB", "LM_HEAD", "SHARED_GATE",
    "QKV", "QKV_B", "BUFFER", "NONE",
};

const char *role_name(Role r) {
    int i = int(r);
    return i >= 0 && i < kRoleCount ? kRoleNames[i] : "?";
}

bool parse_role_name(const std::string &s, Role *out) {
    for (int i = 0; i < kRoleCount; i++)
        if (s == kRoleNames[i]) {
            *out = Role(i);
            return true;
        }
    return false;
}

const char *norm_slot_name(NormSlot s) {
    switch (s) {
        case NormSlot::None: return "";
        case NormSlot::Attn: return "attn";
        case NormSlot::Ffn: return "ffn";
        case NormSlot::Final: return "final";
        case NormSlot::Emb: return "emb";
    }
    return "?";
}

const char *qkv_layout_name(QkvLayout l) {
    switch (l) {
        case QkvLayout::Separate: return "separate";
        case QkvLayout::Concat: return "qkv_concat";
        case QkvLayout::PerHead: return "qkv_heads";
        case QkvLayout::Grouped: return "qkv_grouped";
        case QkvLayout::FromConfig: return "config";
    }
    return "?";
}

// ---------------------------------------------------------------------------------------------
// Presets.  Every pattern is anchored (whole-name match).  L = layer group, E = expert group.

#define L "(?P<layer>[0-9]+)"
#define E "(?P<expert>[0-9]+)"

namespace {
struct PresetBuilder {
    std::vector<RoleRule> rules;
    RoleRule &add(std::string pattern, Role role) {
        RoleRule r;
        r.pattern = std::move(pattern);
        r.role = role;
        r.priority = 1000000 + uint32_t(rules.size());  // after every user rule, in list order
        rules.push_back(r);
        return rules.back();
    }
    void norm(const std::string &stem, NormSlot slot) {  // stem.weight -> LN_G, stem.bias -> LN_B
        add(stem + "\\.weight", Role::LN_G).slot = slot;
        add(stem + "\\.bias", Role::LN_B).slot = slot;
    }
    void linear(const std::string &stem, Role w, Role b, bool transpose = false) {
        add(stem + "\\.weight", w).transpose = transpose;
        add(stem + "\\.bias", b);
    }
};
}  // namespace

static void llama_like(PresetBuilder &p, const ModelConfig &cfg) {
    const std::string lp = "model\\.layers\\." L "\\.";
    p.add("model\\.embed_tokens\\.weight", Role::EMB);
    p.norm(lp + "input_layernorm", NormSlot::Attn);
    p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
    p.linear(lp + "self_attn\\.q_proj", Role::Q, Role::Q_B);
    p.linear(lp + "self_attn\\.k_proj", Role::K, Role::K_B);
    p.linear(lp + "self_attn\\.v_proj", Role::V, Role::V_B);
    p.linear(lp + "self_attn\\.o_proj", Role::O, Role::O_B);
    p.add(lp + "self_attn\\.rotary_emb\\.inv_freq", Role::ROPE_ALPHA).buffer = true;
    // Dense FFN (also qwen2_moe's dense layers).
    p.linear(lp + "mlp\\.gate_proj", Role::FFN_W1, Role::FFN_B1);
    p.linear(lp + "mlp\\.up_proj", Role::FFN_W3, Role::FFN_B3);
    p.linear(lp + "mlp\\.down_proj", Role::FFN_W2, Role::FFN_B2);
    if (cfg.family == Family::Mixtral) {
        p.add(lp + "block_sparse_moe\\.gate\\.weight", Role::ROUTER_GATE);
        p.add(lp + "block_sparse_moe\\.experts\\." E "\\.w1\\.weight", Role::FFN_W1);
        p.add(lp + "block_sparse_moe\\.experts\\." E "\\.w2\\.weight", Role::FFN_W2);
        p.add(lp + "block_sparse_moe\\.experts\\." E "\\.w3\\.weight", Role::FFN_W3);
    }
    if (cfg.family == Family::Qwen2Moe) {
        p.add(lp + "mlp\\.gate\\.weight", Role::ROUTER_GATE);
        p.add(lp + "mlp\\.experts\\." E "\\.gate_proj\\.weight", Role::FFN_W1);
        p.add(lp + "mlp\\.experts\\." E "\\.up_proj\\.weight", Role::FFN_W3);
        p.add(lp + "mlp\\.experts\\." E "\\.down_proj\\.weight", Role::FFN_W2);
        p.add(lp + "mlp\\.shared_expert\\.gate_proj\\.weight", Role::FFN_W1).shared = true;
        p.add(lp + "mlp\\.shared_expert\\.up_proj\\.weight", Role::FFN_W3).shared = true;
        p.add(lp + "mlp\\.shared_expert\\.down_proj\\.weight", Role::FFN_W2).shared = true;
        p.add(lp + "mlp\\.shared_expert_gate\\.weight", Role::SHARED_GATE);
    }
    p.norm("model\\.norm", NormSlot::Final);
    p.add("lm_head\\.weight", Role::LM_HEAD);
}

std::vector<RoleRule> preset_rules(const ModelConfig &cfg) {
    PresetBuilder p;
    switch (cfg.family) {
        case Family::Custom: break;
        case Family::Gpt2: {
            // Hub GPT-2 files name tensors "h.0..." (safetensors) or "transformer.h.0..." (some .bin).
            const std::string pre = "(?:transformer\\.)?";
            const std::string lp = pre + "h\\." L "\\.";
            p.add(pre + "wte\\.weight", Role::EMB);
            p.add(pre + "wpe\\.weight", Role::POS_EMB);
            p.norm(lp + "ln_1", NormSlot::Attn);
            p.norm(lp + "ln_2", NormSlot::Ffn);
            RoleRule &qkv = p.add(lp + "attn\\.c_attn\\.weight", Role::QKV);
            qkv.layout = QkvLayout::Concat;
            qkv.transpose = true;
            p.add(lp + "attn\\.c_attn\\.bias", Role::QKV_B).layout = QkvLayout::Concat;
            p.linear(lp + "attn\\.c_proj", Role::O, Role::O_B, true);
            p.linear(lp + "mlp\\.c_fc", Role::FFN_W1, Role::FFN_B1, true);
            p.linear(lp + "mlp\\.c_proj", Role::FFN_W2, Role::FFN_B2, true);
            p.add(lp + "attn\\.(?:bias|masked_bias)", Role::BUFFER);
            p.norm(pre + "ln_f", NormSlot::Final);
            p.add("lm_head\\.weight", Role::LM_HEAD);
            break;
        }
        case Family::Llama:
        case Family::Mistral:
        case Family::Mixtral:
        case Family::Qwen2:
        case Family::Qwen2Moe: llama_like(p, cfg); break;
        case Family::GptNeox: {
            const std::string lp = "gpt_neox\\.layers\\." L "\\.";
            p.add("gpt_neox\\.embed_in\\.weight", Role::EMB);
            p.norm(lp + "input_layernorm", NormSlot::Attn);
            p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
            p.add(lp + "attention\\.query_key_value\\.weight", Role::QKV).layout = QkvLayout::FromConfig;
            p.add(lp + "attention\\.query_key_value\\.bias", Role::QKV_B).layout = QkvLayout::FromConfig;
            p.linear(lp + "attention\\.dense", Role::O, Role::O_B);
            p.linear(lp + "mlp\\.dense_h_to_4h", Role::FFN_W1, Role::FFN_B1);
            p.linear(lp + "mlp\\.dense_4h_to_h", Role::FFN_W2, Role::FFN_B2);
            p.add(lp + "attention\\.(?:bias|masked_bias)", Role::BUFFER);
            p.add(lp + "attention\\.rotary_emb\\.inv_freq", Role::ROPE_ALPHA).buffer = true;
            p.norm("gpt_neox\\.final_layer_norm", NormSlot::Final);
            p.add("embed_out\\.weight", Role::LM_HEAD);
            break;
        }
        case Family::Bloom:
        case Family::Falcon: {
            const std::string pre = "(?:transformer\\.)?";
            const std::string lp = pre + "h\\." L "\\.";
            p.add(pre + "word_embeddings\\.weight", Role::EMB);
            p.norm(pre + "word_embeddings_layernorm", NormSlot::Emb);
            p.norm(lp + "input_layernorm", NormSlot::Attn);
            p.norm(lp + "ln_attn", NormSlot::Attn);  // Falcon new_decoder_architecture
            p.norm(lp + "ln_mlp", NormSlot::Ffn);
            p.norm(lp + "post_attention_layernorm", NormSlot::Ffn);
            p.add(lp + "self_attention\\.query_key_value\\.weight", Role::QKV).layout = QkvLayout::FromConfig;
            p.add(lp + "self_attention\\.query_key_value\\.bias", Role::QKV_B).layout = QkvLayout::FromConfig;
            p.linear(lp + "self_attention\\.dense", Role::O, Role::O_B);
            p.linear(lp + "mlp\\.dense_h_to_4h", Role::FFN_W1, Role::FFN_B1);
            p.linear(lp + "mlp\\.dense_4h_to_h", Role::FFN_W2, Role::FFN_B2);
            p.add(lp + "self_attention\\.rotary_emb\\.inv_freq", Role::ROPE_ALPHA).buffer = true;
            p.norm(pre + "ln_f", NormSlot::Final);
            p.add("lm_head\\.weight", Role::LM_HEAD);
            break;
        }
    }
    return p.rules;
}

#undef L
#undef E

// ---------------------------------------------------------------------------------------------

constexpr int kMaxGroups = 15;

struct RoleMapper::Compiled {
    std::unique_ptr<RE2> re;
    int layer_group = -1;   // capture index or -1
    int expert_group = -1;
    int n_groups = 0;
};

RoleMapper::RoleMapper(const std::vector<RoleRule> &user, const std::vector<RoleRule> &preset,
                       const std::string &source) {
    rules_ = user;
    rules_.insert(rules_.end(), preset.begin(), preset.end());
    // 3.2: first match wins; the order is (priority, pattern bytes); a stable sort keeps equal
    // (priority, pattern) pairs - the same rule twice - in the order given.
    std::stable_sort(rules_.begin(), rules_.end(), [](const RoleRule &a, const RoleRule &b) {
        if (a.priority != b.priority) return a.priority < b.priority;
        return a.pattern < b.pattern;
    });
    RE2::Options opt;
    opt.set_log_errors(false);
    opt.set_max_mem(8 << 20);  // bounded program size for hostile patterns
    for (const RoleRule &r : rules_) {
        auto c = std::make_unique<Compiled>();
        c->re = std::make_unique<RE2>(r.pattern, opt);
        if (!c->re->ok())
            throw_error(STK_E_BAD_JSON, "%s: role pattern '%s' is not a valid RE2 regular expression: %s", source.c_str(),
                        r.pattern.c_str(), c->re->error().c_str());
        c->n_groups = c->re->NumberOfCapturingGroups();
        if (c->n_groups > kMaxGroups)
            throw_error(STK_E_BAD_JSON, "%s: role pattern '%s' has %d capture groups, at most %d", source.c_str(),
                        r.pattern.c_str(), c->n_groups, kMaxGroups);
        const auto &named = c->re->NamedCapturingGroups();
        for (const auto &kv : named) {
            if (kv.first == "layer") c->layer_group = kv.second;
            else if (kv.first == "expert") c->expert_group = kv.second;
        }
        compiled_.push_back(std::move(c));
    }
}

RoleMapper::~RoleMapper() = default;

// A decimal capture as an index; names with absurd indices are refused later by the range checks
// (an index that does not fit is reported as INT32_MAX).
static int32_t parse_index(const re2::StringPiece &s) {
    if (s.data() == nullptr || s.empty()) return kNoLayer;
    uint64_t v = 0;
    for (char ch : s) {
        if (ch < '0' || ch > '9') return INT32_MAX;
        v = v * 10 + uint64_t(ch - '0');
        if (v > uint64_t(INT32_MAX)) return INT32_MAX;
    }
    return int32_t(v);
}

RoleMatch RoleMapper::match(const std::string &name) const {
    re2::StringPiece groups[kMaxGroups + 1];
    for (size_t i = 0; i < rules_.size(); i++) {
        const Compiled &c = *compiled_[i];
        if (!c.re->Match(name, 0, name.size(), RE2::ANCHOR_BOTH, groups, c.n_groups + 1)) continue;
        RoleMatch m;
        m.role = rules_[i].role;
        m.rule = int(i);
        if (c.layer_group > 0) m.layer = parse_index(groups[c.layer_group]);
        if (rules_[i].shared) m.expert = kSharedExpert;
        else if (c.expert_group > 0) m.expert = parse_index(groups[c.expert_group]);
        return m;
    }
    return RoleMatch{};
}

}  // namespace stk
