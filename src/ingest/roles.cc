#include "ingest/roles.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ingest/family.h"

namespace stk {

static const char *const kRoleNames[kRoleCount] = {
    "EMB",      "Q",         "K",           "V",           "O",         "FFN_W1",  "FFN_W2",  "FFN_B1",   "FFN_B2",
    "LN_G",     "LN_B",      "ROUTER_GATE", "ROPE_ALPHA",  "FFN_W3",    "FFN_B3",  "Q_B",     "K_B",      "V_B",
    "O_B",      "POS_EMB",   "LM_HEAD",     "SHARED_GATE", "LM_HEAD_B", "MLA_Q_A", "MLA_Q_B", "MLA_KV_A", "MLA_KV_B",
    "ROUTER_B", "ATTN_SINK", "QKV",         "QKV_B",       "FFN_W13",   "FFN_B13", "BUFFER",  "NONE",
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
        case NormSlot::PostAttn: return "post_attn";
        case NormSlot::PostFfn: return "post_ffn";
        case NormSlot::QNorm: return "q_norm";
        case NormSlot::KNorm: return "k_norm";
        case NormSlot::QLora: return "q_lora";
        case NormSlot::KvLora: return "kv_lora";
    }
    return "?";
}

const char *qkv_layout_name(QkvLayout l) {
    switch (l) {
        case QkvLayout::Separate: return "separate";
        case QkvLayout::Concat: return "qkv_concat";
        case QkvLayout::PerHead: return "qkv_heads";
        case QkvLayout::Grouped: return "qkv_grouped";
        case QkvLayout::Interleaved: return "interleaved";
        case QkvLayout::FromConfig: return "config";
    }
    return "?";
}

std::vector<RoleRule> preset_rules(const ModelConfig &cfg) {
    RoleRules r;
    // Block-scaled fp8: the scales are folded into their weights when read (attach_fp8_scales).
    if (cfg.fp8_block[0]) r.add(".*\\.weight_scale_inv", Role::BUFFER);
    family_def(cfg.family).roles(r, cfg);
    return r.rules;
}

// ---------------------------------------------------------------------------------------------

constexpr int kMaxGroups = 15;

struct RoleMapper::Compiled {
    std::unique_ptr<RE2> re;
    int layer_group = -1;  // capture index or -1
    int expert_group = -1;
    int n_groups = 0;
};

RoleMapper::RoleMapper(const std::vector<RoleRule> &user, const std::vector<RoleRule> &preset, const std::string &source) {
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
