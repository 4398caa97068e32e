#include "ingest/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "core/checked.h"
#include "core/error.h"
#include "ingest/gguf_model.h"
#include "ingest/mxfp4.h"

namespace stk {

// ---------------------------------------------------------------------------------------------
// What the config implies.

std::vector<ExpectedTensor> expected_tensors(const ModelConfig &c) {
    std::vector<ExpectedTensor> out;
    if (c.family == kCustomFamily) return out;
    const uint64_t d = c.d_model, hd = c.head_dim, q = uint64_t(c.n_heads) * hd, kv = uint64_t(c.n_kv_heads) * hd;
    auto mat = [&](Role r, int32_t layer, int32_t expert, uint64_t rows, uint64_t cols) {
        out.push_back({r, NormSlot::None, layer, expert, 2, {rows, cols}});
    };
    auto vec = [&](Role r, NormSlot s, int32_t layer, int32_t expert, uint64_t n) {
        out.push_back({r, s, layer, expert, 1, {n, 0}});
    };
    auto norm_n = [&](NormSlot s, int32_t layer, uint64_t n) {
        vec(Role::LN_G, s, layer, kNoExpert, n);
        if (c.norm == NormKind::LayerNorm && c.norm_bias) vec(Role::LN_B, s, layer, kNoExpert, n);
    };
    auto norm = [&](NormSlot s, int32_t layer) { norm_n(s, layer, d); };
    auto ffn = [&](int32_t layer, int32_t expert, uint64_t f, bool bias) {  // bias: B1, B2 (and B3)
        mat(Role::FFN_W1, layer, expert, f, d);
        mat(Role::FFN_W2, layer, expert, d, f);
        if (c.ffn_kind == FfnKind::Gated) mat(Role::FFN_W3, layer, expert, f, d);
        if (bias) {
            vec(Role::FFN_B1, NormSlot::None, layer, expert, f);
            vec(Role::FFN_B2, NormSlot::None, layer, expert, d);
            if (c.ffn_kind == FfnKind::Gated) vec(Role::FFN_B3, NormSlot::None, layer, expert, f);
        }
    };
    mat(Role::EMB, kNoLayer, kNoExpert, c.vocab_size, d);
    if (c.positions == PosKind::Learned) mat(Role::POS_EMB, kNoLayer, kNoExpert, c.max_positions + c.pos_offset, d);
    if (c.emb_norm) norm(NormSlot::Emb, kNoLayer);
    for (uint32_t l = 0; l < c.n_layers; l++) {
        int32_t L = int32_t(l);
        if (c.norms_per_layer > 0) norm(NormSlot::Attn, L);
        if (c.norms_per_layer > 1) norm(NormSlot::Ffn, L);
        if (c.post_norms) {
            norm(NormSlot::PostAttn, L);
            norm(NormSlot::PostFfn, L);
        }
        if (c.qk_norm != QkNorm::None) {
            norm_n(NormSlot::QNorm, L, c.qk_norm == QkNorm::PerHead ? hd : q);
            norm_n(NormSlot::KNorm, L, c.qk_norm == QkNorm::PerHead ? hd : kv);
        }
        if (c.mla) {
            const uint64_t H = c.n_heads, qk = uint64_t(c.qk_nope_dim) + c.qk_rope_dim, kr = c.kv_lora_rank;
            if (c.q_lora_rank) {
                mat(Role::MLA_Q_A, L, kNoExpert, c.q_lora_rank, d);
                norm_n(NormSlot::QLora, L, c.q_lora_rank);
                mat(Role::MLA_Q_B, L, kNoExpert, H * qk, c.q_lora_rank);
            } else {
                mat(Role::Q, L, kNoExpert, H * qk, d);
            }
            mat(Role::MLA_KV_A, L, kNoExpert, kr + c.qk_rope_dim, d);
            norm_n(NormSlot::KvLora, L, kr);
            mat(Role::MLA_KV_B, L, kNoExpert, H * (uint64_t(c.qk_nope_dim) + c.v_head_dim), kr);
            mat(Role::O, L, kNoExpert, d, H * c.v_head_dim);
        } else {
            mat(Role::Q, L, kNoExpert, q, d);
            mat(Role::K, L, kNoExpert, kv, d);
            mat(Role::V, L, kNoExpert, kv, d);
            mat(Role::O, L, kNoExpert, d, q);
        }
        if (c.attn_sinks) vec(Role::ATTN_SINK, NormSlot::None, L, kNoExpert, c.n_heads);
        if (c.qkv_bias) {
            vec(Role::Q_B, NormSlot::None, L, kNoExpert, q);
            vec(Role::K_B, NormSlot::None, L, kNoExpert, kv);
            vec(Role::V_B, NormSlot::None, L, kNoExpert, kv);
        }
        if (c.o_bias) vec(Role::O_B, NormSlot::None, L, kNoExpert, d);
        if (c.layer_is_moe(l)) {
            mat(Role::ROUTER_GATE, L, kNoExpert, c.n_experts, d);
            if (c.router_bias) vec(Role::ROUTER_B, NormSlot::None, L, kNoExpert, c.n_experts);
            for (uint32_t e = 0; e < c.n_experts; e++) ffn(L, int32_t(e), c.moe_ffn_dim, c.expert_bias);
            if (c.shared_expert_ffn_dim) ffn(L, kSharedExpert, c.shared_expert_ffn_dim, false);
            if (c.shared_expert_gate) mat(Role::SHARED_GATE, L, kNoExpert, 1, d);
        } else {
            ffn(L, kNoExpert, c.ffn_dim, c.mlp_bias);
        }
    }
    norm(NormSlot::Final, kNoLayer);
    if (!c.tied_embeddings) mat(Role::LM_HEAD, kNoLayer, kNoExpert, c.vocab_size, d);
    if (c.lm_head_bias) vec(Role::LM_HEAD_B, NormSlot::None, kNoLayer, kNoExpert, c.vocab_size);
    return out;
}

uint64_t expected_param_count(const ModelConfig &cfg) {
    uint64_t total = 0;
    for (const ExpectedTensor &e : expected_tensors(cfg)) {
        uint64_t n = e.rank == 2 ? checked_mul(e.dims[0], e.dims[1], "parameter count") : e.dims[0];
        total = checked_add(total, n, "parameter count");
    }
    return total;
}

// ---------------------------------------------------------------------------------------------
// Mapping and validation.

namespace {

std::string shape_str(const std::vector<uint64_t> &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}
std::string dims_str(uint32_t rank, const uint64_t *d) {
    std::vector<uint64_t> v(d, d + rank);
    return shape_str(v);
}

std::string where(const PlanTensor &t) {
    std::string s = role_name(t.role);
    if (t.slot != NormSlot::None) s += std::string("(") + norm_slot_name(t.slot) + ")";
    if (t.layer >= 0) s += " of layer " + std::to_string(t.layer);
    if (t.expert >= 0) s += ", expert " + std::to_string(t.expert);
    if (t.expert == kSharedExpert) s += ", shared expert";
    return s;
}

uint8_t group_of(Role role, NormSlot slot, int32_t layer) {
    if (role == Role::LM_HEAD || role == Role::LM_HEAD_B) return 3;
    if ((role == Role::LN_G || role == Role::LN_B) && slot == NormSlot::Final) return 2;
    if (layer >= 0) return 1;
    return 0;
}

bool is_layer_role(Role r, NormSlot s) {
    switch (r) {
        case Role::EMB:
        case Role::POS_EMB:
        case Role::LM_HEAD:
        case Role::LM_HEAD_B: return false;
        case Role::LN_G:
        case Role::LN_B: return s != NormSlot::Final && s != NormSlot::Emb && s != NormSlot::None;
        default: return true;
    }
}

Role split_role(Role fused, uint8_t part) {
    static const Role w[3] = {Role::Q, Role::K, Role::V};
    static const Role b[3] = {Role::Q_B, Role::K_B, Role::V_B};
    return fused == Role::QKV ? w[part] : b[part];
}

// Phase 1 of analyze_model: the plan entries of source tensor i (a fused QKV gives three), its
// indices and geometry checked, the parameter counts of S kept.
struct MapState {
    std::vector<PlanTensor> plan;
    int32_t emb_index = -1;
    bool have_head = false;
};
void map_view(const ModelConfig &c, const std::string &cfg_src, const RoleRule &rule, Role role, const TensorRef &src,
              const std::vector<uint64_t> &shape, PlanTensor t, ModelPlan &S, MapState &st);
void map_tensor(const ModelConfig &c, const std::string &cfg_src, const RoleMapper &mapper, const TensorRef &src, uint32_t i,
                ModelPlan &S, MapState &st) {
    const bool known = c.family != kCustomFamily;
    RoleMatch m = mapper.match(src.name);
    PlanTensor t;
    t.name = src.name.c_str();
    t.source = i;
    t.layer = m.layer;
    t.expert = m.expert;
    if (m.role == Role::NONE || m.role == Role::BUFFER) {
        t.role = m.role;
        t.buffer = m.role == Role::BUFFER;
        if (t.buffer) S.n_buffers++;
        else {
            S.n_unmapped++;
            S.n_params = checked_add(S.n_params, src.n_elements, "parameter count");
        }
        st.plan.push_back(t);
        return;
    }
    const RoleRule &rule = mapper.rules()[size_t(m.rule)];
    t.slot = rule.slot;
    if ((m.role == Role::LN_G || m.role == Role::LN_B) && t.slot == NormSlot::None)
        t.slot = m.layer >= 0 ? NormSlot::Attn : NormSlot::Final;
    t.buffer = rule.buffer;
    t.transpose = rule.transpose;
    t.streamed = true;
    if (t.buffer) S.n_buffers++;
    else S.n_params = checked_add(S.n_params, src.n_elements, "parameter count");

    // Indices in range.
    if (t.layer != kNoLayer && (t.layer < 0 || uint32_t(t.layer) >= c.n_layers))
        throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s): layer index %d, but %s says %u layers", src.name.c_str(),
                    src.file.c_str(), t.layer, cfg_src.c_str(), c.n_layers);
    if (t.expert >= 0 && uint32_t(t.expert) >= c.n_experts)
        throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s): expert index %d, but %s says %u experts", src.name.c_str(),
                    src.file.c_str(), t.expert, cfg_src.c_str(), c.n_experts);
    if (known && is_layer_role(m.role == Role::QKV || m.role == Role::QKV_B ? Role::Q : m.role, t.slot) && t.layer < 0)
        throw_error(STK_E_PARAM_COUNT, "tensor '%s': role %s needs a layer index (a (?P<layer>...) group)", src.name.c_str(),
                    role_name(m.role));
    if (!rule.stacked) {
        map_view(c, cfg_src, rule, m.role, src, src.shape, t, S, st);
        return;
    }
    // Every expert along the first axis: one view per expert, each its contiguous slice.
    if (src.shape.size() < 2 || src.shape[0] != c.n_experts || t.expert != kNoExpert)
        throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s, offset %llu): shape %s; role %s stacks %u experts along its first axis",
                    src.name.c_str(), src.file.c_str(), (unsigned long long)src.file_offset, shape_str(src.shape).c_str(),
                    role_name(m.role), c.n_experts);
    const std::vector<uint64_t> slice(src.shape.begin() + 1, src.shape.end());
    const uint64_t slice_elems = src.n_elements / c.n_experts;
    for (uint32_t e = 0; e < c.n_experts; e++) {
        PlanTensor v = t;
        v.expert = int32_t(e);
        v.src_offset = slice_elems * e;
        map_view(c, cfg_src, rule, m.role, src, slice, v, S, st);
    }
}

// The plan entries of one view of a source (the whole tensor, or one expert's slice of shape
// `shape`): split fused layouts, logical shape.
void map_view(const ModelConfig &c, const std::string &cfg_src, const RoleRule &rule, Role role, const TensorRef &src,
              const std::vector<uint64_t> &shape, PlanTensor t, ModelPlan &S, MapState &st) {
    const uint64_t hd = c.head_dim;
    uint64_t view_elems = 1;
    for (uint64_t n : shape) view_elems *= n;  // a part of src.n_elements: no overflow
    // Source geometry.
    size_t rank = shape.size();
    if (rank > 2)
        throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s, offset %llu): shape %s; role %s needs a vector or a matrix",
                    src.name.c_str(), src.file.c_str(), (unsigned long long)src.file_offset, shape_str(src.shape).c_str(),
                    role_name(role));
    if (rank == 2) {
        t.src_rows = shape[0];
        t.src_cols = shape[1];
    } else {
        t.src_rows = rank == 1 ? shape[0] : 1;
        t.src_cols = 1;
    }
    if (t.transpose && rank != 2)
        throw_error(STK_E_PARAM_COUNT, "tensor '%s': shape %s cannot be transposed (role %s, a [in, out] matrix)",
                    src.name.c_str(), shape_str(src.shape).c_str(), role_name(role));

    if (role == Role::QKV || role == Role::QKV_B) {
        bool weight = role == Role::QKV;
        if ((weight && rank != 2) || (!weight && rank != 1))
            throw_error(STK_E_PARAM_COUNT, "tensor '%s': fused %s with shape %s", src.name.c_str(), role_name(role),
                        shape_str(src.shape).c_str());
        QkvLayout lay = rule.layout == QkvLayout::FromConfig ? c.qkv_layout : rule.layout;
        uint64_t total = (uint64_t(c.n_heads) + 2 * uint64_t(c.n_kv_heads)) * hd;
        uint64_t out_total = weight ? (t.transpose ? t.src_cols : t.src_rows) : t.src_rows;
        uint64_t in_dim = weight ? (t.transpose ? t.src_rows : t.src_cols) : 1;
        if (lay == QkvLayout::Separate || lay == QkvLayout::FromConfig)
            throw_error(STK_E_PARAM_COUNT, "tensor '%s': fused QKV but %s has no fused layout for %s", src.name.c_str(),
                        cfg_src.c_str(), c.model_type);
        if (lay == QkvLayout::PerHead && c.n_kv_heads != c.n_heads)
            throw_error(STK_E_PARAM_COUNT, "tensor '%s': per-head fused QKV needs kv heads == heads (%u != %u)", src.name.c_str(),
                        c.n_kv_heads, c.n_heads);
        if (out_total != total || (weight && in_dim != c.d_model))
            throw_error(STK_E_PARAM_COUNT,
                        "tensor '%s' (%s, offset %llu): fused QKV shape %s, but %s implies %llu outputs "
                        "((%u heads + 2 x %u kv heads) x %llu) over %u inputs%s",
                        src.name.c_str(), src.file.c_str(), (unsigned long long)src.file_offset, shape_str(src.shape).c_str(),
                        cfg_src.c_str(), (unsigned long long)total, c.n_heads, c.n_kv_heads, (unsigned long long)hd, c.d_model,
                        t.transpose ? " (stored [in, out])" : "");
        for (uint8_t p = 0; p < 3; p++) {
            PlanTensor s = t;
            s.role = split_role(role, p);
            s.layout = lay;
            s.part = p;
            s.head_dim = c.head_dim;
            s.q_heads = c.n_heads;
            s.kv_heads = c.n_kv_heads;
            uint64_t rows = (p == 0 ? uint64_t(c.n_heads) : uint64_t(c.n_kv_heads)) * hd;
            s.rank = weight ? 2 : 1;
            s.dims[0] = rows;
            s.dims[1] = weight ? in_dim : 0;
            s.n_elements = weight ? rows * in_dim : rows;
            st.plan.push_back(s);
        }
        return;
    }
    if (role == Role::FFN_W13 || role == Role::FFN_B13) {
        // [gate rows; up rows] (the Concat layout with one-row "heads"), or gate and up rows
        // alternating (Interleaved): W1 and W3, or their biases.
        const bool weight = role == Role::FFN_W13;
        const uint64_t out_total = t.transpose ? t.src_cols : t.src_rows, in_dim = t.transpose ? t.src_rows : t.src_cols;
        const uint64_t f = c.ffn_dim_for(t.expert);
        if (rank != (weight ? 2u : 1u) || out_total != 2 * f || (weight && in_dim != c.d_model))
            throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s, offset %llu): fused gate/up shape %s, but %s implies [2 x %llu%s]",
                        src.name.c_str(), src.file.c_str(), (unsigned long long)src.file_offset, shape_str(src.shape).c_str(),
                        cfg_src.c_str(), (unsigned long long)f, weight ? (", " + std::to_string(c.d_model)).c_str() : "");
        for (uint8_t p = 0; p < 2; p++) {
            PlanTensor s = t;
            s.role = weight ? (p == 0 ? Role::FFN_W1 : Role::FFN_W3) : (p == 0 ? Role::FFN_B1 : Role::FFN_B3);
            s.layout = rule.layout == QkvLayout::Interleaved ? QkvLayout::Interleaved : QkvLayout::Concat;
            s.part = p;
            s.head_dim = 1;
            s.q_heads = uint32_t(f);
            s.kv_heads = uint32_t(f);
            s.rank = weight ? 2 : 1;
            s.dims[0] = f;
            s.dims[1] = weight ? in_dim : 0;
            s.n_elements = weight ? f * in_dim : f;
            st.plan.push_back(s);
        }
        return;
    }
    t.role = role;
    if (rank == 2) {
        t.rank = 2;
        t.dims[0] = t.transpose ? t.src_cols : t.src_rows;
        t.dims[1] = t.transpose ? t.src_rows : t.src_cols;
    } else {
        t.rank = 1;
        t.dims[0] = t.src_rows;
    }
    t.n_elements = view_elems;
    if (t.role == Role::EMB && st.emb_index < 0) st.emb_index = int32_t(st.plan.size());
    if (t.role == Role::LM_HEAD) {
        st.have_head = true;
        // A stored copy of a tied head (torch.save of a whole state_dict): kept, not counted.
        if (c.tied_embeddings && !t.buffer) {
            t.buffer = true;
            S.n_params -= src.n_elements;
            S.n_buffers++;
        }
    }
    st.plan.push_back(t);
}

// Phase 2 (a family stk knows): every entry expected by the config, with its shape; every
// expected entry present; the parameter count equal.
void check_against_config(const ModelConfig &c, const std::string &cfg_src, const std::vector<PlanTensor> &plan,
                          const std::vector<TensorRef> &tensors, ModelPlan &S) {
    using Key = std::tuple<int, int, int32_t, int32_t>;
    std::map<Key, size_t> expected;
    std::vector<ExpectedTensor> exp = expected_tensors(c);
    for (size_t i = 0; i < exp.size(); i++) expected[Key(int(exp[i].role), int(exp[i].slot), exp[i].layer, exp[i].expert)] = i;
    std::vector<int64_t> seen(exp.size(), -1);
    for (size_t i = 0; i < plan.size(); i++) {
        const PlanTensor &t = plan[i];
        if (!t.streamed || t.tied) continue;
        if (t.role == Role::ROPE_ALPHA) {
            if (t.rank != 1 || (c.rotary_dim && t.dims[0] != c.rotary_dim / 2))
                throw_error(STK_E_PARAM_COUNT, "tensor '%s': rotary frequencies of shape %s, expected [%u]", t.name,
                            dims_str(t.rank, t.dims).c_str(), c.rotary_dim / 2);
            continue;
        }
        if (t.role == Role::LM_HEAD && c.tied_embeddings) continue;  // the stored tied copy
        auto it = expected.find(Key(int(t.role), int(t.slot), t.layer, t.expert));
        if (it == expected.end())
            throw_error(STK_E_PARAM_COUNT,
                        "tensor '%s' (%s) maps to %s, which %s does not describe (check its bias / MoE / tie "
                        "settings)",
                        t.name, tensors[t.source].file.c_str(), where(t).c_str(), cfg_src.c_str());
        const ExpectedTensor &e = exp[it->second];
        if (seen[it->second] >= 0)
            throw_error(STK_E_PARAM_COUNT, "tensors '%s' and '%s' both map to %s", plan[size_t(seen[it->second])].name, t.name,
                        where(t).c_str());
        seen[it->second] = int64_t(i);
        bool ok = e.rank == t.rank && e.dims[0] == t.dims[0] && (e.rank == 1 || e.dims[1] == t.dims[1]);
        // Scalars and [1, n] vs [n]: a vector role stored as [n] only.
        if (!ok)
            throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s, offset %llu): %s has shape %s%s, but %s implies %s", t.name,
                        tensors[t.source].file.c_str(), (unsigned long long)tensors[t.source].file_offset, where(t).c_str(),
                        dims_str(t.rank, t.dims).c_str(), t.transpose ? " (after transposing the stored [in, out])" : "",
                        cfg_src.c_str(), dims_str(e.rank, e.dims).c_str());
    }
    for (size_t i = 0; i < exp.size(); i++)
        if (seen[i] < 0) {
            PlanTensor probe;
            probe.role = exp[i].role;
            probe.slot = exp[i].slot;
            probe.layer = exp[i].layer;
            probe.expert = exp[i].expert;
            throw_error(STK_E_PARAM_COUNT, "%s describes %s %s, but no tensor of the checkpoint maps to it", cfg_src.c_str(),
                        where(probe).c_str(), dims_str(exp[i].rank, exp[i].dims).c_str());
        }
    S.n_params_expected = expected_param_count(c);
    if (S.n_params != S.n_params_expected) {
        std::string extra;
        for (const PlanTensor &t : plan)
            if (t.role == Role::NONE) {
                extra = std::string("; tensor '") + t.name + "' " + shape_str(tensors[t.source].shape) +
                        " matches no role pattern (mark it {\"role\": \"BUFFER\"} in stk_roles if it is not a "
                        "parameter)";
                break;
            }
        throw_error(STK_E_PARAM_COUNT, "the checkpoint holds %llu parameters, %s implies %llu%s", (unsigned long long)S.n_params,
                    cfg_src.c_str(), (unsigned long long)S.n_params_expected, extra.c_str());
    }
}

// Phase 2 (a custom model): no shape model to check against; still, one tensor per role slot.
void check_one_per_slot(const std::vector<PlanTensor> &plan) {
    std::map<std::tuple<int, int, int32_t, int32_t>, const char *> seen;
    for (const PlanTensor &t : plan) {
        if (!t.streamed || t.tied) continue;
        auto key = std::make_tuple(int(t.role), int(t.slot), t.layer, t.expert);
        auto [it, fresh] = seen.emplace(key, t.name);
        if (!fresh) throw_error(STK_E_PARAM_COUNT, "tensors '%s' and '%s' both map to %s", it->second, t.name, where(t).c_str());
    }
}

// Phase 3: the stream order and its units (a group and layer each), with the sizes the stages
// need.
void order_into_units(std::vector<PlanTensor> &plan, ModelLayout &L) {
    ModelPlan &S = L.summary;
    // Stream order: (group, layer, role, slot, expert, part); the rest after it, by name.
    std::stable_sort(plan.begin(), plan.end(), [](const PlanTensor &a, const PlanTensor &b) {
        if (a.streamed != b.streamed) return a.streamed;
        if (!a.streamed) return std::strcmp(a.name, b.name) < 0;
        return std::make_tuple(a.group, a.layer, int(a.role), int(a.slot), a.expert, a.part) <
               std::make_tuple(b.group, b.layer, int(b.role), int(b.slot), b.expert, b.part);
    });
    for (uint32_t i = 0; i < plan.size(); i++) {
        PlanTensor &t = plan[i];
        if (!t.streamed) break;
        S.n_streamed++;
        if (L.units.empty() || L.units.back().group != t.group || L.units.back().layer != t.layer) {
            PlanUnit u;
            u.first = i;
            u.group = t.group;
            u.layer = t.layer;
            L.units.push_back(u);
        }
        PlanUnit &u = L.units.back();
        u.count++;
        t.unit = uint32_t(L.units.size() - 1);
        u.f32_bytes = checked_add(u.f32_bytes, align_up(checked_mul(t.n_elements, 4, "tensor bytes"), 64), "layer bytes");
        if (u.f32_bytes > S.max_unit_f32_bytes) S.max_unit_f32_bytes = u.f32_bytes;
        if (t.transpose && t.src_cols * kTransposeBlock > S.max_row_floats) S.max_row_floats = t.src_cols * kTransposeBlock;
    }
}

// MLA: the per-head W_Q, W_K, W_V, W_O the attention stages read, one entry each per layer,
// composed on read from the layer's factors (stages/attn_common.cc).  Each names its main factor
// (q_b_proj or q_proj, kv_b_proj, o_proj) for messages.
void add_mla_composed(const ModelConfig &c, std::vector<PlanTensor> &plan) {
    const uint64_t d = c.d_model, w = uint64_t(c.n_heads) * c.head_dim;
    std::vector<int64_t> main_q(c.n_layers, -1), main_kv(c.n_layers, -1), main_o(c.n_layers, -1);
    for (size_t i = 0; i < plan.size(); i++) {
        const PlanTensor &t = plan[i];
        if (!t.streamed || t.layer < 0 || t.expert != kNoExpert) continue;
        if (t.role == Role::MLA_Q_B || t.role == Role::Q) main_q[size_t(t.layer)] = int64_t(i);
        if (t.role == Role::MLA_KV_B) main_kv[size_t(t.layer)] = int64_t(i);
        if (t.role == Role::O) main_o[size_t(t.layer)] = int64_t(i);
    }
    for (uint32_t l = 0; l < c.n_layers; l++) {
        const Role roles[4] = {Role::Q, Role::K, Role::V, Role::O};
        const int64_t from[4] = {main_q[l], main_kv[l], main_kv[l], main_o[l]};
        for (int k = 0; k < 4; k++) {
            if (from[k] < 0) throw_error(STK_E_INTERNAL, "MLA layer %u: a factor of %s is missing", l, role_name(roles[k]));
            PlanTensor t;
            t.name = plan[size_t(from[k])].name;
            t.source = plan[size_t(from[k])].source;
            t.role = roles[k];
            t.layer = int32_t(l);
            t.composed = true;
            t.buffer = true;
            t.group = 1;
            t.rank = 2;
            t.dims[0] = k == 3 ? d : w;
            t.dims[1] = k == 3 ? w : d;
            t.n_elements = w * d;
            plan.push_back(t);
        }
    }
}

}  // namespace

ModelLayout analyze_model(const ParsedConfig &pc, const std::vector<TensorRef> &tensors) {
    const ModelConfig &c = pc.config;
    const std::string &cfg_src = pc.source;
    RoleMapper mapper(pc.user_rules, preset_rules(c), cfg_src);
    ModelLayout L;
    ModelPlan &S = L.summary;
    S.config = c;
    S.n_source_tensors = uint32_t(tensors.size());
    if (tensors.size() > (1u << 24)) throw_error(STK_E_CORRUPT, "%zu tensors: too many", tensors.size());

    MapState st;
    for (uint32_t i = 0; i < tensors.size(); i++) map_tensor(c, cfg_src, mapper, tensors[i], i, S, st);
    std::vector<PlanTensor> &plan = st.plan;
    if (c.tied_embeddings && !st.have_head && st.emb_index >= 0) {
        PlanTensor h = plan[size_t(st.emb_index)];
        h.role = Role::LM_HEAD;
        h.tied = true;
        h.buffer = true;
        plan.push_back(h);
    }
    for (PlanTensor &t : plan) t.group = group_of(t.role, t.slot, t.layer);

    if (c.family != kCustomFamily) check_against_config(c, cfg_src, plan, tensors, S);
    else check_one_per_slot(plan);
    if (c.mla) add_mla_composed(c, plan);
    order_into_units(plan, L);
    L.tensors = std::move(plan);
    S.n_tensors = uint32_t(L.tensors.size());
    S.n_units = uint32_t(L.units.size());
    return L;
}

std::unique_ptr<ModelDescription> describe_model(const std::string &dir) { return describe_model(resolve_model_files(dir)); }

std::unique_ptr<ModelDescription> describe_model(ModelFiles files) {
    auto d = std::make_unique<ModelDescription>();
    d->files = std::move(files);
    if (d->files.is_gguf()) {
        GgufModel g = open_gguf_model(d->files.gguf);
        d->parsed = std::move(g.parsed);
        d->checkpoint = std::move(g.checkpoint);
    } else {
        d->parsed = load_model_config(d->files);
        d->checkpoint = open_checkpoint(d->files);
        const ModelConfig &c = d->parsed.config;
        if (c.fp8_block[0]) attach_fp8_scales(*d->checkpoint, c.fp8_block[0], c.fp8_block[1]);
        if (d->parsed.config.mxfp4) d->checkpoint = wrap_mxfp4(std::move(d->checkpoint));
    }
    d->layout = analyze_model(d->parsed, d->checkpoint->tensors());
    d->plan = d->layout.summary;
    std::snprintf(d->plan.format, sizeof d->plan.format, "%s", d->checkpoint->format());
    d->plan.checkpoint_bytes = d->checkpoint->file_bytes();
    d->plan.tensors = d->layout.tensors.data();
    d->plan.units = d->layout.units.data();
    return d;
}

// ---------------------------------------------------------------------------------------------
// The plan in the arena.

void plan_arena_size(const ModelDescription &d, ArenaSizer &s) {
    s.add(sizeof(ModelPlan), alignof(ModelPlan));
    s.add_array<PlanTensor>(d.layout.tensors.size());
    s.add_array<PlanUnit>(d.layout.units.size());
    for (const PlanTensor &t : d.layout.tensors) s.add(std::strlen(t.name) + 1, 1);
    const ModelConfig &c = d.plan.config;
    if (c.n_experts) s.add_array<uint32_t>(size_t(c.n_layers) * c.n_experts);
}

ModelPlan *copy_plan_to_arena(const ModelDescription &d, Arena &a) {
    ModelPlan *p = new (a.alloc(sizeof(ModelPlan), alignof(ModelPlan))) ModelPlan(d.plan);
    p->tensors = a.alloc_array<PlanTensor>(d.layout.tensors.size());
    p->units = a.alloc_array<PlanUnit>(d.layout.units.size());
    for (size_t i = 0; i < d.layout.tensors.size(); i++) {
        p->tensors[i] = d.layout.tensors[i];
        size_t n = std::strlen(d.layout.tensors[i].name) + 1;
        char *name = static_cast<char *>(a.alloc(n, 1));
        std::memcpy(name, d.layout.tensors[i].name, n);
        p->tensors[i].name = name;
    }
    for (size_t i = 0; i < d.layout.units.size(); i++) p->units[i] = d.layout.units[i];
    const ModelConfig &c = p->config;
    p->expert_order = c.n_experts ? a.alloc_array<uint32_t>(size_t(c.n_layers) * c.n_experts) : nullptr;
    return p;
}

// ---------------------------------------------------------------------------------------------
// f32 materialisation.

// Row of the fused source's output axis that holds logical row r of this part.
static inline uint64_t fused_row(const PlanTensor &t, uint64_t r) {
    const uint64_t hd = t.head_dim;
    switch (t.layout) {
        case QkvLayout::Concat: {
            uint64_t q = uint64_t(t.q_heads) * hd, kv = uint64_t(t.kv_heads) * hd;
            return (t.part == 0 ? 0 : t.part == 1 ? q : q + kv) + r;
        }
        case QkvLayout::PerHead: return ((r / hd) * 3 + t.part) * hd + r % hd;
        case QkvLayout::Interleaved: return 2 * r + t.part;
        case QkvLayout::Grouped: {
            uint64_t qpk = t.q_heads / t.kv_heads, head = r / hd, j = r % hd;
            if (t.part == 0) return ((head / qpk) * (qpk + 2) + head % qpk) * hd + j;
            return (head * (qpk + 2) + qpk + (t.part - 1)) * hd + j;
        }
        default: return r;
    }
}

// How many logical rows from r on map to consecutive source rows.
static inline uint64_t fused_run(const PlanTensor &t, uint64_t r, uint64_t rows) {
    if (t.layout == QkvLayout::Concat || t.layout == QkvLayout::Separate) return rows - r;
    if (t.layout == QkvLayout::Interleaved) return 1;
    return t.head_dim - r % t.head_dim;
}

void order_experts_by_router_norm(const float *router, uint32_t n_experts, uint64_t cols, double *norm, uint32_t *order) {
    for (uint32_t e = 0; e < n_experts; e++) {
        double sum = 0;
        const float *row = router + uint64_t(e) * cols;
        for (uint64_t j = 0; j < cols; j++) sum += double(row[j]) * double(row[j]);
        norm[e] = std::sqrt(sum);
        order[e] = e;
    }
    std::sort(order, order + n_experts, [&](uint32_t a, uint32_t b) { return norm[a] != norm[b] ? norm[a] > norm[b] : a < b; });
}

void materialize_f32_rows(const PlanTensor &t, const TensorRef &src, const uint8_t *bytes, uint64_t r0, uint64_t r1, float *out) {
    if (t.transpose || r1 > t.dims[0] || r0 > r1)
        throw_error(STK_E_INTERNAL, "materialize_f32_rows: '%s' rows [%llu, %llu) of %llu%s", t.name, (unsigned long long)r0,
                    (unsigned long long)r1, (unsigned long long)t.dims[0], t.transpose ? ", stored transposed" : "");
    const uint64_t cols = t.rank == 2 ? t.dims[1] : 1;
    for (uint64_t r = r0; r < r1;) {
        const uint64_t run = std::min(fused_run(t, r, t.dims[0]), r1 - r);
        convert_to_f32(src, bytes, t.src_offset + fused_row(t, r) * cols, run * cols, out + r * cols);
        r += run;
    }
}

void materialize_f32(const PlanTensor &t, const TensorRef &src, const uint8_t *bytes, float *out, float *row_scratch) {
    const uint64_t rows = t.dims[0], base = t.src_offset;
    if (!t.transpose) {
        if (t.layout == QkvLayout::Separate) {
            convert_to_f32(src, bytes, base, t.n_elements, out);
            return;
        }
        return materialize_f32_rows(t, src, bytes, 0, rows, out);
    }
    // Stored [in, out]: convert a block of stored rows (input features c0..c0+B-1, all outputs)
    // and write each result row's B consecutive columns: contiguous writes, reads within a
    // scratch block that stays in cache.
    const uint64_t in = t.dims[1], width = t.src_cols;
    for (uint64_t c0 = 0; c0 < in; c0 += kTransposeBlock) {
        const uint64_t nb = in - c0 < kTransposeBlock ? in - c0 : kTransposeBlock;
        convert_to_f32(src, bytes, base + c0 * width, nb * width, row_scratch);
        for (uint64_t r = 0; r < rows; r++) {
            const uint64_t sr = t.layout == QkvLayout::Separate ? r : fused_row(t, r);
            float *dst = out + r * in + c0;
            for (uint64_t k = 0; k < nb; k++) dst[k] = row_scratch[k * width + sr];
        }
    }
}

}  // namespace stk
