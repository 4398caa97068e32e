#include "ingest/faithful_names.h"

#include <cstdio>
#include <cstring>

namespace stk {

namespace {

constexpr ExpertClass D = ExpertClass::Dense, S = ExpertClass::Shared, R = ExpertClass::Routed;
constexpr NormSlot N = NormSlot::None;

const FaithfulKind kKinds[] = {
    {"tok_emb", Role::EMB, N, D},
    {"pos_emb", Role::POS_EMB, N, D},
    {"head", Role::LM_HEAD, N, D},
    {"head_b", Role::LM_HEAD_B, N, D},
    {"attn_q", Role::Q, N, D},
    {"attn_k", Role::K, N, D},
    {"attn_v", Role::V, N, D},
    {"attn_o", Role::O, N, D},
    {"attn_q_b", Role::Q_B, N, D},
    {"attn_k_b", Role::K_B, N, D},
    {"attn_v_b", Role::V_B, N, D},
    {"attn_o_b", Role::O_B, N, D},
    {"attn_sink", Role::ATTN_SINK, N, D},
    {"mla_q_a", Role::MLA_Q_A, N, D},
    {"mla_q_b", Role::MLA_Q_B, N, D},
    {"mla_kv_a", Role::MLA_KV_A, N, D},
    {"mla_kv_b", Role::MLA_KV_B, N, D},
    {"ffn_w1", Role::FFN_W1, N, D},
    {"ffn_w2", Role::FFN_W2, N, D},
    {"ffn_w3", Role::FFN_W3, N, D},
    {"ffn_b1", Role::FFN_B1, N, D},
    {"ffn_b2", Role::FFN_B2, N, D},
    {"ffn_b3", Role::FFN_B3, N, D},
    {"shared_w1", Role::FFN_W1, N, S},
    {"shared_w2", Role::FFN_W2, N, S},
    {"shared_w3", Role::FFN_W3, N, S},
    {"shared_b1", Role::FFN_B1, N, S},
    {"shared_b2", Role::FFN_B2, N, S},
    {"shared_b3", Role::FFN_B3, N, S},
    {"experts_w1", Role::FFN_W1, N, R},
    {"experts_w2", Role::FFN_W2, N, R},
    {"experts_w3", Role::FFN_W3, N, R},
    {"experts_b1", Role::FFN_B1, N, R},
    {"experts_b2", Role::FFN_B2, N, R},
    {"experts_b3", Role::FFN_B3, N, R},
    {"router", Role::ROUTER_GATE, N, D},
    {"router_b", Role::ROUTER_B, N, D},
    {"shared_gate", Role::SHARED_GATE, N, D},
    {"attn_norm.w", Role::LN_G, NormSlot::Attn, D},
    {"attn_norm.b", Role::LN_B, NormSlot::Attn, D},
    {"ffn_norm.w", Role::LN_G, NormSlot::Ffn, D},
    {"ffn_norm.b", Role::LN_B, NormSlot::Ffn, D},
    {"final_norm.w", Role::LN_G, NormSlot::Final, D},
    {"final_norm.b", Role::LN_B, NormSlot::Final, D},
    {"emb_norm.w", Role::LN_G, NormSlot::Emb, D},
    {"emb_norm.b", Role::LN_B, NormSlot::Emb, D},
    {"post_attn_norm.w", Role::LN_G, NormSlot::PostAttn, D},
    {"post_attn_norm.b", Role::LN_B, NormSlot::PostAttn, D},
    {"post_ffn_norm.w", Role::LN_G, NormSlot::PostFfn, D},
    {"post_ffn_norm.b", Role::LN_B, NormSlot::PostFfn, D},
    {"q_norm.w", Role::LN_G, NormSlot::QNorm, D},
    {"q_norm.b", Role::LN_B, NormSlot::QNorm, D},
    {"k_norm.w", Role::LN_G, NormSlot::KNorm, D},
    {"k_norm.b", Role::LN_B, NormSlot::KNorm, D},
    {"q_a_norm.w", Role::LN_G, NormSlot::QLora, D},
    {"q_a_norm.b", Role::LN_B, NormSlot::QLora, D},
    {"kv_a_norm.w", Role::LN_G, NormSlot::KvLora, D},
    {"kv_a_norm.b", Role::LN_B, NormSlot::KvLora, D},
};

}  // namespace

const FaithfulKind *faithful_kind_of(Role role, NormSlot slot, ExpertClass expert) {
    const bool norm = role == Role::LN_G || role == Role::LN_B;
    const bool ffn = role == Role::FFN_W1 || role == Role::FFN_W2 || role == Role::FFN_W3 || role == Role::FFN_B1 ||
                     role == Role::FFN_B2 || role == Role::FFN_B3;
    for (const FaithfulKind &k : kKinds)
        if (k.role == role && (!norm || k.slot == slot) && (!ffn || k.expert == expert)) return &k;
    return nullptr;
}

const FaithfulKind *faithful_kind_named(std::string_view name) {
    for (const FaithfulKind &k : kKinds)
        if (name == k.name) return &k;
    return nullptr;
}

std::string faithful_file_name(const FaithfulKind &k, int32_t layer) {
    if (layer < 0) return std::string(k.name) + ".bin";
    char buf[64];
    std::snprintf(buf, sizeof buf, "L%04d.%s.bin", int(layer), k.name);
    return buf;
}

bool parse_faithful_file_name(std::string_view file, const FaithfulKind **kind, int32_t *layer) {
    if (file.size() < 5 || file.substr(file.size() - 4) != ".bin") return false;
    std::string_view stem = file.substr(0, file.size() - 4);
    int32_t l = kNoLayer;
    if (stem.size() > 6 && stem[0] == 'L' && stem[5] == '.') {
        l = 0;
        for (int i = 1; i <= 4; i++) {
            if (stem[i] < '0' || stem[i] > '9') return false;
            l = l * 10 + (stem[i] - '0');
        }
        stem = stem.substr(6);
    }
    const FaithfulKind *k = faithful_kind_named(stem);
    if (!k) return false;
    *kind = k;
    *layer = l;
    return true;
}

}  // namespace stk
