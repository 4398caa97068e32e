// The forward of lm/forward.h: shared blocks (norms, RoPE, attention over the sinks + window
// ring, MLP, MoE) driven by the ModelConfig's facts; one buffer plan for sizing and allocation.
#include "lm/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "core/arena.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/parallel.h"
#include "ingest/rope.h"
#include "kernels/dot.h"
#include "kernels/linalg.h"

namespace stk::lm {

namespace {

enum class Act : uint8_t { Silu, Gelu, GeluTanh, Relu, Relu2, QuickGelu };

bool parse_act(const char *s, Act *a) {
    const std::string n = s;
    if (n == "silu" || n == "swish") *a = Act::Silu;
    else if (n == "gelu") *a = Act::Gelu;
    else if (n == "gelu_new" || n == "gelu_pytorch_tanh" || n == "gelu_fast") *a = Act::GeluTanh;
    else if (n == "relu") *a = Act::Relu;
    else if (n == "relu2") *a = Act::Relu2;
    else if (n == "quick_gelu") *a = Act::QuickGelu;
    else return false;
    return true;
}

inline float act(Act a, float x) {
    switch (a) {
        case Act::Silu: return x / (1.0f + std::exp(-x));
        case Act::Gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
        case Act::GeluTanh: return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
        case Act::Relu: return x > 0 ? x : 0.0f;
        case Act::Relu2: return x > 0 ? x * x : 0.0f;
        case Act::QuickGelu: return x / (1.0f + std::exp(-1.702f * x));
    }
    return x;
}

// Bytes of one row of a block-scaled view.
inline uint64_t block_row_bytes(const TensorView &v, BlockQType bq) { return v.cols / kBlockQElems * blockq_block_bytes(bq); }

inline float widen(const TensorView &v, uint64_t r, uint64_t c) {
    const uint64_t i = r * v.cols + c;
    BlockQType bq{};
    switch (v.dtype) {
        case WDType::F32: return static_cast<const float *>(v.data)[i];
        case WDType::BF16: return bf16_to_f32(static_cast<const uint16_t *>(v.data)[i]);
        case WDType::I8: return float(static_cast<const int8_t *>(v.data)[i]) * v.row_scale[r];
        case WDType::Q4_0:
        case WDType::Q8_0: {
            wdtype_block(v.dtype, &bq);
            float blk[kBlockQElems];
            const uint8_t *row = static_cast<const uint8_t *>(v.data) + r * block_row_bytes(v, bq);
            blockq_dequantize(bq, row + c / kBlockQElems * blockq_block_bytes(bq), kBlockQElems, blk);
            return blk[c % kBlockQElems];
        }
    }
    return 0;
}

// Element i of a vector view ([n, 1]).
inline float widen_elem(const TensorView &v, uint64_t i) { return widen(v, i, 0); }

// Row r of a view as f32 into out[cols].
void widen_row(const TensorView &v, uint64_t r, float *out) {
    if (v.dtype == WDType::F32) {
        std::memcpy(out, static_cast<const float *>(v.data) + r * v.cols, v.cols * sizeof(float));
    } else if (v.dtype == WDType::BF16) {
        const uint16_t *p = static_cast<const uint16_t *>(v.data) + r * v.cols;
        for (uint64_t c = 0; c < v.cols; c++) out[c] = bf16_to_f32(p[c]);
    } else if (BlockQType bq{}; wdtype_block(v.dtype, &bq)) {
        blockq_dequantize(bq, static_cast<const uint8_t *>(v.data) + r * block_row_bytes(v, bq), v.cols, out);
    } else {
        const int8_t *p = static_cast<const int8_t *>(v.data) + r * v.cols;
        const float s = v.row_scale[r];
        for (uint64_t c = 0; c < v.cols; c++) out[c] = float(p[c]) * s;
    }
}

// x . row r of W in a fixed order: f32 and bf16 rows kernels/dot.h's (16 partial sums, folded to
// 8, added pairwise); int8 rows 8 partial sums added pairwise; block types blockq_dot's.
float dot_row(const TensorView &w, uint64_t r, const float *x) {
    const uint64_t n = w.cols;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t c = 0;
    if (BlockQType bq{}; wdtype_block(w.dtype, &bq))
        return blockq_dot(bq, static_cast<const uint8_t *>(w.data) + r * block_row_bytes(w, bq), x, n);
    float y = 0;
    if (w.dtype == WDType::F32) {
        kernels::dot_rows_f32(static_cast<const float *>(w.data) + r * n, n, 1, x, n, &y);
        return y;
    }
    if (w.dtype == WDType::BF16) {
        kernels::dot_rows_bf16(static_cast<const uint16_t *>(w.data) + r * n, n, 1, x, n, &y);
        return y;
    }
    const int8_t *p = static_cast<const int8_t *>(w.data) + r * n;
    for (; c + 8 <= n; c += 8)
        for (int j = 0; j < 8; j++) acc[j] += float(p[c + j]) * x[c + j];
    for (; c < n; c++) acc[c & 7] += float(p[c]) * x[c];
    for (float &a : acc) a *= w.row_scale[r];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// y[r] = x . row r of W for r in [a, e): several rows per kernel call where the width allows.
void dot_rows(const TensorView &w, uint64_t a, uint64_t e, const float *x, float *y) {
    const uint64_t n = w.cols;
    if (a >= e) return;
    if (w.dtype == WDType::F32) return kernels::dot_rows_f32(static_cast<const float *>(w.data) + a * n, n, e - a, x, n, y + a);
    if (w.dtype == WDType::BF16) return kernels::dot_rows_bf16(static_cast<const uint16_t *>(w.data) + a * n, n, e - a, x, n, y + a);
    for (uint64_t r = a; r < e; r++) y[r] = dot_row(w, r, x);
}

constexpr uint64_t kWidenRows = 64;  // weight rows widened at once for a bf16 / int8 GEMM

struct LayerW {
    TensorView ln_attn_g, ln_attn_b, ln_ffn_g, ln_ffn_b, post_attn_g, post_attn_b, post_ffn_g, post_ffn_b;
    TensorView q_norm, k_norm;
    TensorView q, k, v, o, qb, kb, vb, ob;
    TensorView w1, w2, w3, b1, b2, b3;  // dense FFN
    TensorView qa, qa_norm, kva, kva_norm, kvb;  // MLA: q_a_proj (or none), kv_a_proj_with_mqa, kv_b_proj
    TensorView sinks;                            // one learned logit per head (gpt-oss)
    TensorView router, router_b;
    bool moe = false;
    std::vector<TensorView> e1, e2, e3, eb1, eb2, eb3;  // routed experts (and their biases)
    TensorView s1, s2, s3, sgate;        // shared expert and its gate
    bool sliding = false;
    int rope_class = 0;  // 0: global angles, 1: the local (sliding) base
};

// The RoPE inverse frequencies (ingest/rope.h) rounded to f32, as transformers' buffer holds
// them.  `local`: Gemma 3's sliding-layer base, never scaled.
std::vector<float> inv_freq(const ModelConfig &c, bool local) {
    std::vector<double> t;
    rope_angles(c, t, nullptr, local);
    return std::vector<float>(t.begin(), t.end());
}

}  // namespace

const char *policy_name(Policy p) {
    switch (p) {
        case Policy::Window: return "window";
        case Policy::Tova: return "tova";
        case Policy::H2o: return "h2o";
        case Policy::TovaHead: return "tova-head";
    }
    return "?";
}

std::string unsupported(const ModelConfig &c) {
    const std::string fam = c.model_type[0] ? c.model_type : family_name(c.family);
    auto no = [&](const std::string &why) { return "the LM runtime does not run " + fam + ": " + why; };
    Act a;
    if (c.n_experts) {
        const std::string r = c.router;
        if (r != "softmax_topk" && r != "softmax_group_topk" && r != "sigmoid_group_topk" && r != "sparsemixer")
            return no("router '" + r + "' is not computed");
        if (r == "sparsemixer" && c.top_k != 2) return no("the sparsemixer router with top_k " + std::to_string(c.top_k) + " (it picks 2)");
        if ((r == "softmax_group_topk" || r == "sigmoid_group_topk") && !(c.n_group && c.topk_group && c.n_experts % c.n_group == 0))
            return no("grouped routing without n_group / topk_group");
        if (c.n_group > 256) return no("more than 256 expert groups");
        if (r == "sigmoid_group_topk" && (c.n_experts / c.n_group < 2 || c.top_k > c.topk_group * (c.n_experts / c.n_group)))
            return no("sigmoid group routing with fewer than 2 experts a group or more picks than the groups hold");
    }
    if (c.mla && c.qk_nope_dim + c.qk_rope_dim == 0) return no("MLA without query/key width");
    if (!parse_act(c.activation, &a)) return no(std::string("activation '") + c.activation + "' is not computed");
    const std::string rs = c.rope_scaling_type;
    if (c.positions == PosKind::Rope && !(rs.empty() || rs == "default" || rs == "linear" || rs == "llama3" || rs == "yarn"))
        return no("rope_scaling '" + rs + "' is not computed yet");
    if (c.positions == PosKind::Rope && (c.rotary_dim ? c.rotary_dim : c.head_dim) % 2)
        return no("an odd rotary width");
    if (c.fp8_block[0]) return no("fp8 block-scaled weights are not read by the runtime yet");
    if (c.family == kCustomFamily) return no("custom role maps describe no forward");
    return "";
}

struct Sequence::Impl {
    const WeightSource &w;
    ModelConfig c;
    SeqOptions o;
    Act act_kind = Act::Silu;
    // Per head: khd the query/key width (the dot product), vhd the value width; qdim = nh * khd,
    // kdim = nkv * khd, vdim = nkv * vhd.  MLA: khd = nope + rope, vhd = v_head_dim, nkv = nh,
    // its rotary part the last n_pairs * 2 of each query/key head (rot_off = nope).
    uint32_t nh = 0, nkv = 0, khd = 0, vhd = 0, qdim = 0, kdim = 0, vdim = 0, n_pairs = 0, rot = 0, rot_off = 0, cap = 0;
    bool pair_interleaved = false;
    uint64_t d = 0, vocab = 0, ffn_max = 0;
    float scale = 1;
    TensorView emb, pos_emb, emb_norm_g, emb_norm_b, final_g, final_b, head, head_b;
    std::vector<LayerW> layers;
    std::vector<float> inv[2];
    std::vector<double> slopes;
    std::unique_ptr<WorkerPool> pool;

    // Arena buffers.
    float *x = nullptr, *h = nullptr, *h2 = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *att = nullptr, *tmp = nullptr;
    float *lat = nullptr, *lat2 = nullptr;  // MLA: [max_batch][max(q_lora, kv_lora + rope)], [max_batch][nh * (nope + v)]
    float *fa = nullptr, *fb = nullptr, *acc = nullptr, *gath = nullptr, *eout = nullptr, *rlog = nullptr, *rlog2 = nullptr, *wbuf = nullptr;
    float *scores = nullptr;  // [threads][cap + max_batch]
    float *cosb = nullptr, *sinb = nullptr;  // [2][max_batch][n_pairs]
    float *kring = nullptr, *vring = nullptr;  // [layers][cap][kdim], [layers][cap][vdim]
    float *logit = nullptr;
    // The probe (set_probe): the points asked, the callback.
    uint32_t probe_mask = 0;
    ProbeFn probe_fn = nullptr;
    void *probe_user = nullptr;
    int32_t *route = nullptr;  // [max_batch][top_k] expert ids
    float *route_w = nullptr;  // [max_batch][top_k]
    uint32_t *erows = nullptr;  // tokens routed to one expert
    // Scored policies (o.policy != Window): per layer, `tables` tables of cap slots (one, or one
    // per key/value head): the position each slot holds (-1: empty) and its score.
    uint32_t tables = 0, recent = 0;
    int64_t *kpos = nullptr;   // [layers][tables][cap]
    float *pscore = nullptr;   // [layers][tables][cap]
    float *wts = nullptr;      // [n_heads][cap]: one query's attention weights per slot
    uint64_t pos = 0;
    bool have_logits = false;

    Impl(const WeightSource &ws, const SeqOptions &opt) : w(ws), c(ws.config()), o(opt) {
        if (o.threads == 0) o.threads = 1;
        if (o.max_batch == 0) o.max_batch = 1;
        if (o.window == 0) throw_error(STK_E_INVALID_ARGUMENT, "%s: a window of 0 positions: the window holds at least the query's own", ws.describe().c_str());
        const std::string why = unsupported(c);
        if (!why.empty()) throw_error(STK_E_NOT_IMPLEMENTED, "%s: %s", ws.describe().c_str(), why.c_str());
        parse_act(c.activation, &act_kind);
        nh = c.n_heads, nkv = c.n_kv_heads ? c.n_kv_heads : c.n_heads, khd = vhd = c.head_dim;
        if (c.mla) nkv = nh, khd = c.qk_nope_dim + c.qk_rope_dim, vhd = c.v_head_dim;
        if (!nh || !khd || !vhd || nh % nkv)
            throw_error(STK_E_CORRUPT, "%s: %u heads over %u key/value heads of width %u", ws.describe().c_str(), nh, nkv, khd);
        qdim = nh * khd, kdim = nkv * khd, vdim = nkv * vhd;
        d = c.d_model, vocab = c.vocab_size;
        cap = uint32_t(checked_add(o.sinks, o.window, "sinks + window"));
        if (uint32_t(o.policy) >= kPolicyCount)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: retention policy %u: not one of window, tova, h2o, tova-head", ws.describe().c_str(),
                        uint32_t(o.policy));
        if (o.policy == Policy::H2o) {
            recent = o.recent ? o.recent : o.window / 2;
            if (recent >= o.window)
                throw_error(STK_E_INVALID_ARGUMENT, "%s: h2o keeps %u recent positions of a window of %u: the heavy hitters need at least one",
                            ws.describe().c_str(), recent, o.window);
        }
        scale = c.attn_scale > 0 ? float(c.attn_scale) : float(1.0 / std::sqrt(double(khd)));
        if (c.positions == PosKind::Rope) {
            rot = c.mla ? c.qk_rope_dim : c.rotary_dim ? c.rotary_dim : khd;
            rot_off = c.mla ? c.qk_nope_dim : 0;
            pair_interleaved = c.mla ? c.mla_rope_interleaved : c.rope_interleaved;
            n_pairs = rot / 2;
            inv[0] = inv_freq(c, false);
            inv[1] = c.rope_local_theta > 0 ? inv_freq(c, true) : inv[0];
        }
        if (c.positions == PosKind::Alibi) {
            slopes.resize(nh);
            alibi_slopes(nh, slopes.data());
        }
        resolve();
    }

    [[noreturn]] void missing(const char *what, int32_t layer, int32_t expert) const {
        throw_error(STK_E_CORRUPT, "%s: the forward needs %s of layer %d expert %d, which the weights do not hold", w.describe().c_str(), what,
                    layer, expert);
    }
    TensorView need(Role r, int32_t layer, uint64_t rows, uint64_t cols, int32_t expert = kNoExpert, NormSlot slot = NormSlot::None) {
        TensorView t = w.find(r, layer, expert, slot);
        if (!t) missing(role_name(r), layer, expert);
        if (t.rows != rows || t.cols != cols)
            throw_error(STK_E_CORRUPT, "%s: %s of layer %d expert %d is [%llu, %llu], the config implies [%llu, %llu]", w.describe().c_str(),
                        role_name(r), layer, expert, (unsigned long long)t.rows, (unsigned long long)t.cols, (unsigned long long)rows,
                        (unsigned long long)cols);
        return t;
    }
    TensorView opt(Role r, int32_t layer, uint64_t rows, uint64_t cols, int32_t expert = kNoExpert, NormSlot slot = NormSlot::None) {
        TensorView t = w.find(r, layer, expert, slot);
        if (t && (t.rows != rows || t.cols != cols))
            throw_error(STK_E_CORRUPT, "%s: %s (slot %s) of layer %d is [%llu, %llu], the config implies [%llu, %llu]", w.describe().c_str(),
                        role_name(r), norm_slot_name(slot), layer, (unsigned long long)t.rows, (unsigned long long)t.cols,
                        (unsigned long long)rows, (unsigned long long)cols);
        return t;
    }

    void resolve() {
        emb = need(Role::EMB, kNoLayer, vocab, d);
        if (c.positions == PosKind::Learned) {
            pos_emb = w.find(Role::POS_EMB);
            if (!pos_emb || pos_emb.cols != d) missing("POS_EMB", kNoLayer, kNoExpert);
        }
        emb_norm_g = opt(Role::LN_G, kNoLayer, d, 1, kNoExpert, NormSlot::Emb);
        emb_norm_b = opt(Role::LN_B, kNoLayer, d, 1, kNoExpert, NormSlot::Emb);
        final_g = opt(Role::LN_G, kNoLayer, d, 1, kNoExpert, NormSlot::Final);
        final_b = opt(Role::LN_B, kNoLayer, d, 1, kNoExpert, NormSlot::Final);
        head = opt(Role::LM_HEAD, kNoLayer, vocab, d);
        if (!head) head = emb;
        head_b = opt(Role::LM_HEAD_B, kNoLayer, vocab, 1);
        layers.resize(c.n_layers);
        ffn_max = 1;
        for (uint32_t l = 0; l < c.n_layers; l++) {
            LayerW &L = layers[l];
            const int32_t li = int32_t(l);
            L.ln_attn_g = opt(Role::LN_G, li, d, 1, kNoExpert, NormSlot::Attn);
            L.ln_attn_b = opt(Role::LN_B, li, d, 1, kNoExpert, NormSlot::Attn);
            L.ln_ffn_g = opt(Role::LN_G, li, d, 1, kNoExpert, NormSlot::Ffn);
            L.ln_ffn_b = opt(Role::LN_B, li, d, 1, kNoExpert, NormSlot::Ffn);
            L.post_attn_g = opt(Role::LN_G, li, d, 1, kNoExpert, NormSlot::PostAttn);
            L.post_attn_b = opt(Role::LN_B, li, d, 1, kNoExpert, NormSlot::PostAttn);
            L.post_ffn_g = opt(Role::LN_G, li, d, 1, kNoExpert, NormSlot::PostFfn);
            L.post_ffn_b = opt(Role::LN_B, li, d, 1, kNoExpert, NormSlot::PostFfn);
            if (c.qk_norm == QkNorm::PerHead) {
                L.q_norm = need(Role::LN_G, li, khd, 1, kNoExpert, NormSlot::QNorm);
                L.k_norm = need(Role::LN_G, li, khd, 1, kNoExpert, NormSlot::KNorm);
            } else if (c.qk_norm == QkNorm::Whole) {
                L.q_norm = need(Role::LN_G, li, qdim, 1, kNoExpert, NormSlot::QNorm);
                L.k_norm = need(Role::LN_G, li, kdim, 1, kNoExpert, NormSlot::KNorm);
            }
            if (c.mla) {
                const uint64_t kvl = c.kv_lora_rank;
                if (c.q_lora_rank) {
                    L.qa = need(Role::MLA_Q_A, li, c.q_lora_rank, d);
                    L.qa_norm = need(Role::LN_G, li, c.q_lora_rank, 1, kNoExpert, NormSlot::QLora);
                    L.q = need(Role::MLA_Q_B, li, qdim, c.q_lora_rank);
                } else {
                    L.q = need(Role::Q, li, qdim, d);
                }
                L.kva = need(Role::MLA_KV_A, li, kvl + c.qk_rope_dim, d);
                L.kva_norm = need(Role::LN_G, li, kvl, 1, kNoExpert, NormSlot::KvLora);
                L.kvb = need(Role::MLA_KV_B, li, uint64_t(nh) * (c.qk_nope_dim + c.v_head_dim), kvl);
                L.o = need(Role::O, li, d, uint64_t(nh) * vhd);
            } else {
                L.q = need(Role::Q, li, qdim, d);
                L.k = need(Role::K, li, kdim, d);
                L.v = need(Role::V, li, vdim, d);
                L.o = need(Role::O, li, d, qdim);
                L.qb = opt(Role::Q_B, li, qdim, 1);
                L.kb = opt(Role::K_B, li, kdim, 1);
                L.vb = opt(Role::V_B, li, vdim, 1);
            }
            L.ob = opt(Role::O_B, li, d, 1);
            if (c.attn_sinks) L.sinks = need(Role::ATTN_SINK, li, nh, 1);
            L.sliding = c.sliding_window > 0 && c.layer_is_sliding(l);
            L.rope_class = (L.sliding && c.rope_local_theta > 0) ? 1 : 0;
            const bool gated = c.ffn_kind == FfnKind::Gated;
            L.moe = c.n_experts > 0 && c.layer_is_moe(l);
            if (!L.moe) {
                const uint64_t f = c.ffn_dim;
                ffn_max = std::max(ffn_max, f);
                L.w1 = need(Role::FFN_W1, li, f, d);
                L.w2 = need(Role::FFN_W2, li, d, f);
                if (gated) L.w3 = need(Role::FFN_W3, li, f, d);
                L.b1 = opt(Role::FFN_B1, li, f, 1);
                L.b2 = opt(Role::FFN_B2, li, d, 1);
                L.b3 = opt(Role::FFN_B3, li, f, 1);
            } else {
                const uint64_t f = c.moe_ffn_dim;
                ffn_max = std::max(ffn_max, f);
                L.router = need(Role::ROUTER_GATE, li, c.n_experts, d);
                if (c.router_bias) L.router_b = need(Role::ROUTER_B, li, c.n_experts, 1);
                for (uint32_t e = 0; e < c.n_experts; e++) {
                    const int32_t ei = int32_t(e);
                    L.e1.push_back(need(Role::FFN_W1, li, f, d, ei));
                    L.e2.push_back(need(Role::FFN_W2, li, d, f, ei));
                    L.e3.push_back(gated ? need(Role::FFN_W3, li, f, d, ei) : TensorView{});
                    L.eb1.push_back(c.expert_bias ? need(Role::FFN_B1, li, f, 1, ei) : TensorView{});
                    L.eb2.push_back(c.expert_bias ? need(Role::FFN_B2, li, d, 1, ei) : TensorView{});
                    L.eb3.push_back(c.expert_bias && gated ? need(Role::FFN_B3, li, f, 1, ei) : TensorView{});
                }
                if (c.shared_expert_ffn_dim) {
                    const uint64_t fs = c.shared_expert_ffn_dim;
                    ffn_max = std::max(ffn_max, fs);
                    L.s1 = need(Role::FFN_W1, li, fs, d, kSharedExpert);
                    L.s2 = need(Role::FFN_W2, li, d, fs, kSharedExpert);
                    if (gated) L.s3 = need(Role::FFN_W3, li, fs, d, kSharedExpert);
                    if (c.shared_expert_gate) L.sgate = need(Role::SHARED_GATE, li, 1, d);
                }
            }
        }
    }

    // One buffer plan: sized (arena_size) and allocated (the constructor) by the same code.
    void buffers(Buffers &b) {
        const uint64_t B = o.max_batch, T = o.threads;
        x = b.array<float>(B * d);
        h = b.array<float>(B * d);
        h2 = b.array<float>(B * d);
        q = b.array<float>(B * qdim);
        k = b.array<float>(B * kdim);
        v = b.array<float>(B * vdim);
        if (c.mla) {
            lat = b.array<float>(B * std::max<uint64_t>(c.q_lora_rank, uint64_t(c.kv_lora_rank) + c.qk_rope_dim));
            lat2 = b.array<float>(B * uint64_t(nh) * (c.qk_nope_dim + c.v_head_dim));
        }
        att = b.array<float>(B * uint64_t(nh) * vhd);
        tmp = b.array<float>(B * d);
        fa = b.array<float>(B * ffn_max);
        fb = b.array<float>(B * ffn_max);
        acc = b.array<float>(B * d);
        gath = b.array<float>(B * d);
        eout = b.array<float>(B * d);
        rlog = b.array<float>(B * std::max<uint64_t>(c.n_experts, 1));
        rlog2 = b.array<float>(std::max<uint64_t>(c.n_experts, 1));
        route = b.array<int32_t>(B * std::max<uint32_t>(c.top_k, 1));
        route_w = b.array<float>(B * std::max<uint32_t>(c.top_k, 1));
        erows = b.array<uint32_t>(B);
        uint64_t widest = std::max<uint64_t>(d, ffn_max);
        widest = std::max<uint64_t>(widest, std::max<uint64_t>(qdim, uint64_t(nh) * vhd));
        if (c.mla) widest = std::max<uint64_t>(widest, std::max<uint64_t>(c.q_lora_rank, c.kv_lora_rank));
        wbuf = b.array<float>(kWidenRows * widest);
        scores = b.array<float>(T * (uint64_t(cap) + B));
        cosb = b.array<float>(2 * B * std::max<uint32_t>(n_pairs, 1));
        sinb = b.array<float>(2 * B * std::max<uint32_t>(n_pairs, 1));
        const uint64_t ring = checked_mul(uint64_t(c.n_layers), cap, "KV ring");
        kring = b.array<float>(checked_mul(ring, kdim, "KV ring"));
        vring = b.array<float>(checked_mul(ring, vdim, "KV ring"));
        if (o.policy != Policy::Window) {
            tables = o.policy == Policy::TovaHead ? nkv : 1;
            const uint64_t slots = checked_mul(checked_mul(uint64_t(c.n_layers), tables, "policy slots"), cap, "policy slots");
            kpos = b.array<int64_t>(slots);
            pscore = b.array<float>(slots);
            wts = b.array<float>(checked_mul(uint64_t(nh), cap, "attention weights"));
        }
        logit = b.array<float>(vocab);
    }

    // ---- shared blocks -------------------------------------------------------------------------

    void run(uint64_t items, const std::function<void(uint64_t, uint64_t)> &fn) {
        // Items split in contiguous ranges by worker index only: the results do not depend on timing.
        const unsigned T = pool->size();
        if (T == 1 || items < 2) return fn(0, items);
        pool->run([&](unsigned wi) {
            const uint64_t a = items * wi / T, e = items * (wi + 1) / T;
            if (a < e) fn(a, e);
        });
    }

    // Y[n, out] (row stride ldy) = X[n, in] (row stride ldx, 0: in) W^T (+ bias).
    void linear(const float *X, uint64_t n, const TensorView &W, const TensorView &bias, float *Y, uint64_t ldy, uint64_t ldx = 0) {
        const uint64_t in = W.cols, out = W.rows;
        if (!ldx) ldx = in;
        if (n == 1) {
            run(out, [&](uint64_t a, uint64_t e) { dot_rows(W, a, e, X, Y); });
        } else if (W.dtype == WDType::F32) {
            kernels::sgemm(false, true, n, out, in, 1.0f, X, ptrdiff_t(ldx), 1, static_cast<const float *>(W.data), ptrdiff_t(in), 1, 0.0f,
                           Y, ptrdiff_t(ldy), 1, o.threads);
        } else {
            for (uint64_t r0 = 0; r0 < out; r0 += kWidenRows) {
                const uint64_t nr = std::min(kWidenRows, out - r0);
                run(nr, [&](uint64_t a, uint64_t e) {
                    for (uint64_t r = a; r < e; r++) widen_row(W, r0 + r, wbuf + r * in);
                });
                kernels::sgemm(false, true, n, nr, in, 1.0f, X, ptrdiff_t(ldx), 1, wbuf, ptrdiff_t(in), 1, 0.0f, Y + r0, ptrdiff_t(ldy), 1,
                               o.threads);
            }
        }
        if (bias)
            for (uint64_t i = 0; i < n; i++)
                for (uint64_t r = 0; r < out; r++) Y[i * ldy + r] += widen_elem(bias, r);
    }

    // One token through several matrices that read the same input: y_i = W_i x (+ b_i), the rows
    // of all of them one range split over the workers (one dispatch instead of one each).
    struct Gemv {
        const TensorView &w, &b;
        float *y;
    };
    void gemv(const float *X, std::initializer_list<Gemv> js) {
        uint64_t total = 0;
        for (const Gemv &j : js) total += j.w.rows;
        run(total, [&](uint64_t a, uint64_t e) {
            uint64_t base = 0;
            for (const Gemv &j : js) {
                const uint64_t lo = std::max(a, base), hi = std::min(e, base + j.w.rows);
                if (lo < hi) dot_rows(j.w, lo - base, hi - base, X, j.y);
                base += j.w.rows;
            }
        });
        for (const Gemv &j : js)
            if (j.b)
                for (uint64_t r = 0; r < j.w.rows; r++) j.y[r] += widen_elem(j.b, r);
    }

    // y = norm(x) over n elements (gain g, bias b optional; the config's kind, eps and offset).
    void norm(const float *xin, float *y, uint64_t n, const TensorView &g, const TensorView &b) const {
        const double eps = c.norm_eps;
        const float off = float(c.norm_offset);
        if (c.norm == NormKind::RmsNorm) {
            double ss = 0;
            for (uint64_t i = 0; i < n; i++) ss += double(xin[i]) * double(xin[i]);
            const float r = float(1.0 / std::sqrt(ss / double(n) + eps));
            for (uint64_t i = 0; i < n; i++) y[i] = xin[i] * r * (g ? off + widen_elem(g, i) : 1.0f);
        } else {
            double s = 0;
            for (uint64_t i = 0; i < n; i++) s += xin[i];
            const double mean = s / double(n);
            double var = 0;
            for (uint64_t i = 0; i < n; i++) var += (xin[i] - mean) * (xin[i] - mean);
            const float r = float(1.0 / std::sqrt(var / double(n) + eps));
            const float m = float(mean);
            for (uint64_t i = 0; i < n; i++) y[i] = (xin[i] - m) * r * (g ? off + widen_elem(g, i) : 1.0f) + (b ? widen_elem(b, i) : 0.0f);
        }
    }

    void rope(float *vec, const float *cs, const float *sn) const {
        vec += rot_off;
        if (pair_interleaved) {
            for (uint32_t i = 0; i < n_pairs; i++) {
                const float a = vec[2 * i], b = vec[2 * i + 1];
                vec[2 * i] = a * cs[i] - b * sn[i];
                vec[2 * i + 1] = b * cs[i] + a * sn[i];
            }
        } else {
            for (uint32_t i = 0; i < n_pairs; i++) {
                const float a = vec[i], b = vec[i + n_pairs];
                vec[i] = a * cs[i] - b * sn[i];
                vec[i + n_pairs] = b * cs[i] + a * sn[i];
            }
        }
    }

    uint64_t slot(uint64_t p) const { return p < o.sinks ? p : o.sinks + (p - o.sinks) % o.window; }

    // The probe at point `pt` of layer l over the chunk's n rows of `width` floats (`heads` heads).
    void probe(uint32_t l, Point pt, float *data, uint64_t n, uint64_t width, uint32_t heads = 1) {
        if (!((probe_mask >> uint32_t(pt)) & 1u)) return;
        const LayerW &L = layers[l];
        ProbeData p;
        p.layer = l;
        p.point = pt;
        p.position = pos;
        p.n = n;
        p.width = width;
        p.data = data;
        p.writable = pt == Point::AttnOut || pt == Point::AttnProj || pt == Point::FfnOut;
        p.flags = (L.moe ? kProbeMoe : 0) | (L.sliding ? kProbeSliding : 0) | (pair_interleaved ? kProbeInterleaved : 0);
        p.heads = heads;
        p.head_width = uint32_t(width / heads);
        if (pt == Point::QPre || pt == Point::KPre || pt == Point::Q || pt == Point::K) {
            p.rot_offset = rot_off;
            p.rot_pairs = n_pairs;
        }
        if (probe_fn(probe_user, p) != 0)
            throw_error(STK_E_CANCELLED, "feed: the probe stopped the forward at layer %u, point %u, position %llu", l, uint32_t(pt),
                        (unsigned long long)pos);
    }

    // ---- one chunk of n tokens at positions pos .. pos + n - 1 -----------------------------------

    void chunk(const int32_t *tok, uint64_t n, float *all_logits) {
        const uint64_t p0 = pos;
        // Embedding (+ learned positions, + the embedding's norm).
        for (uint64_t i = 0; i < n; i++) {
            float *xi = x + i * d;
            widen_row(emb, uint64_t(tok[i]), xi);
            if (c.emb_multiplier != 1) {
                const float m = float(c.emb_multiplier);
                for (uint64_t j = 0; j < d; j++) xi[j] *= m;
            }
            if (pos_emb) {
                const uint64_t pr = p0 + i + c.pos_offset;
                for (uint64_t j = 0; j < d; j++) xi[j] += widen(pos_emb, pr, j);
            }
            if (emb_norm_g) norm(xi, xi, d, emb_norm_g, emb_norm_b);
        }
        // Rotary tables of the chunk's positions: angle = f32(position) * f32(inv_freq), as
        // transformers' f32 matmul computes it, then cos / sin.
        for (int cl = 0; cl < 2 && n_pairs; cl++)
            for (uint64_t i = 0; i < n; i++)
                for (uint32_t j = 0; j < n_pairs; j++) {
                    const float ang = float(p0 + i) * inv[cl][j];
                    const float af = float(c.rope_attn_factor);
                    cosb[(cl * o.max_batch + i) * n_pairs + j] = float(std::cos(double(ang))) * af;
                    sinb[(cl * o.max_batch + i) * n_pairs + j] = float(std::sin(double(ang))) * af;
                }
        const float rm = float(c.residual_multiplier);
        for (uint32_t l = 0; l < c.n_layers; l++) {
            const LayerW &L = layers[l];
            for (uint64_t i = 0; i < n; i++) {
                if (L.ln_attn_g) norm(x + i * d, h + i * d, d, L.ln_attn_g, L.ln_attn_b);
                else std::memcpy(h + i * d, x + i * d, d * sizeof(float));
            }
            probe(l, Point::AttnIn, h, n, d);
            attention(l, L, n, p0);  // tmp = attention output (after O)
            if (L.post_attn_g)
                for (uint64_t i = 0; i < n; i++) norm(tmp + i * d, tmp + i * d, d, L.post_attn_g, L.post_attn_b);
            if (c.parallel_attn) {
                // Attention and FFN read the same residual input; the FFN's own norm or the shared one.
                for (uint64_t i = 0; i < n; i++) {
                    if (L.ln_ffn_g) norm(x + i * d, h2 + i * d, d, L.ln_ffn_g, L.ln_ffn_b);
                    else std::memcpy(h2 + i * d, h + i * d, d * sizeof(float));
                }
                probe(l, Point::FfnIn, h2, n, d);
                ffn(L, h2, n, acc);
                probe(l, Point::FfnOut, acc, n, d);
                for (uint64_t i = 0; i < n * d; i++) x[i] = x[i] + (rm * tmp[i] + rm * acc[i]);
            } else {
                for (uint64_t i = 0; i < n * d; i++) x[i] += rm * tmp[i];
                for (uint64_t i = 0; i < n; i++) {
                    if (L.ln_ffn_g) norm(x + i * d, h2 + i * d, d, L.ln_ffn_g, L.ln_ffn_b);
                    else std::memcpy(h2 + i * d, x + i * d, d * sizeof(float));
                }
                probe(l, Point::FfnIn, h2, n, d);
                ffn(L, h2, n, acc);
                probe(l, Point::FfnOut, acc, n, d);
                if (L.post_ffn_g)
                    for (uint64_t i = 0; i < n; i++) norm(acc + i * d, acc + i * d, d, L.post_ffn_g, L.post_ffn_b);
                for (uint64_t i = 0; i < n * d; i++) x[i] += rm * acc[i];
            }
        }
        // Final norm and head: every row when asked for all, the last one otherwise.
        const uint64_t first = all_logits ? 0 : n - 1;
        for (uint64_t i = first; i < n; i++) {
            if (final_g) norm(x + i * d, h + i * d, d, final_g, final_b);
            else std::memcpy(h + i * d, x + i * d, d * sizeof(float));
        }
        if (all_logits) {
            linear(h, n, head, head_b, all_logits, vocab);
            for (uint64_t i = 0; i < n; i++) finish_logits(all_logits + i * vocab);
            std::memcpy(logit, all_logits + (n - 1) * vocab, vocab * sizeof(float));
        } else {
            linear(h + (n - 1) * d, 1, head, head_b, logit, vocab);
            finish_logits(logit);
        }
        pos += n;
        have_logits = true;
    }

    void finish_logits(float *lg) const {
        if (c.logit_scale != 1) {
            const float s = float(c.logit_scale);
            for (uint64_t j = 0; j < vocab; j++) lg[j] *= s;
        }
        if (c.final_softcap > 0) {
            const float cap_ = float(c.final_softcap);
            for (uint64_t j = 0; j < vocab; j++) lg[j] = std::tanh(lg[j] / cap_) * cap_;
        }
    }

    // MLA (DeepSeek-V2/V3): the keys and values of each head expanded from the latent, as
    // transformers computes them: q = q_b(RMSNorm(q_a h)) (or q_proj h), [c; k_rot] = kv_a h,
    // [k_nope_h; v_h] = kv_b(RMSNorm(c)), K_h = [k_nope_h; k_rot] (k_rot shared, rotated below).
    void mla_project(const LayerW &L, uint64_t n) {
        const uint64_t ql = c.q_lora_rank, kvl = c.kv_lora_rank, nope = c.qk_nope_dim, rp = c.qk_rope_dim;
        if (ql) {
            linear(h, n, L.qa, {}, lat, ql);
            for (uint64_t i = 0; i < n; i++) norm(lat + i * ql, lat + i * ql, ql, L.qa_norm, {});
            linear(lat, n, L.q, {}, q, qdim);
        } else {
            linear(h, n, L.q, {}, q, qdim);
        }
        const uint64_t kw = kvl + rp, bw = nope + vhd;
        linear(h, n, L.kva, {}, lat, kw);
        for (uint64_t i = 0; i < n; i++) norm(lat + i * kw, lat + i * kw, kvl, L.kva_norm, {});
        linear(lat, n, L.kvb, {}, lat2, uint64_t(nh) * bw, kw);
        for (uint64_t i = 0; i < n; i++)
            for (uint32_t hh = 0; hh < nh; hh++) {
                const float *src = lat2 + i * nh * bw + hh * bw;
                float *kh = k + i * kdim + uint64_t(hh) * khd;
                std::memcpy(kh, src, nope * sizeof(float));
                std::memcpy(kh + nope, lat + i * kw + kvl, rp * sizeof(float));
                std::memcpy(v + i * vdim + uint64_t(hh) * vhd, src + nope, vhd * sizeof(float));
            }
    }

    void attention(uint32_t l, const LayerW &L, uint64_t n, uint64_t p0) {
        if (c.mla) {
            mla_project(L, n);
        } else if (n == 1) {
            gemv(h, {{L.q, L.qb, q}, {L.k, L.kb, k}, {L.v, L.vb, v}});
        } else {
            linear(h, n, L.q, L.qb, q, qdim);
            linear(h, n, L.k, L.kb, k, kdim);
            linear(h, n, L.v, L.vb, v, vdim);
        }
        const uint32_t hd = khd;
        for (uint64_t i = 0; i < n; i++) {
            float *qi = q + i * qdim, *ki = k + i * kdim;
            if (c.qk_norm == QkNorm::PerHead) {
                for (uint32_t hh = 0; hh < nh; hh++) norm(qi + hh * hd, qi + hh * hd, hd, L.q_norm, {});
                for (uint32_t hh = 0; hh < nkv; hh++) norm(ki + hh * hd, ki + hh * hd, hd, L.k_norm, {});
            } else if (c.qk_norm == QkNorm::Whole) {
                norm(qi, qi, qdim, L.q_norm, {});
                norm(ki, ki, kdim, L.k_norm, {});
            }
        }
        probe(l, Point::QPre, q, n, qdim, nh);
        probe(l, Point::KPre, k, n, kdim, nkv);
        for (uint64_t i = 0; i < n; i++) {
            float *qi = q + i * qdim, *ki = k + i * kdim;
            if (n_pairs) {
                const float *cs = cosb + (L.rope_class * o.max_batch + i) * n_pairs;
                const float *sn = sinb + (L.rope_class * o.max_batch + i) * n_pairs;
                for (uint32_t hh = 0; hh < nh; hh++) rope(qi + hh * hd, cs, sn);
                for (uint32_t hh = 0; hh < nkv; hh++) rope(ki + hh * hd, cs, sn);
            }
        }
        probe(l, Point::Q, q, n, qdim, nh);
        probe(l, Point::K, k, n, kdim, nkv);
        probe(l, Point::V, v, n, vdim, nkv);
        if (o.policy != Policy::Window) {
            attend_kept(l, L, n, p0);
            project(l, L, n);
            return;
        }
        float *kr = kring + uint64_t(l) * cap * kdim, *vr = vring + uint64_t(l) * cap * vdim;
        const uint32_t group = nh / nkv;
        const uint64_t sw = L.sliding ? c.sliding_window : 0;
        const float softcap = float(c.attn_softcap);
        const uint64_t stride = uint64_t(cap) + o.max_batch;
        // Items (token, head) in contiguous ranges per worker; each its own score row.
        const unsigned T = pool->size();
        auto body = [&](unsigned wi, uint64_t a, uint64_t e) {
            float *sc = scores + wi * stride;
            for (uint64_t it = a; it < e; it++) {
                const uint64_t i = it / nh;
                const uint32_t hh = uint32_t(it % nh), kh = hh / group;
                const uint64_t p = p0 + i;
                const float *qv = q + i * qdim + uint64_t(hh) * hd;
                const float sink = L.sinks ? widen_elem(L.sinks, hh) : 0.0f;
                // The visible keys, in position order: the sinks, then the window.
                const uint64_t s_end = std::min<uint64_t>(o.sinks, p + 1);
                uint64_t w_begin = p + 1 >= o.window ? p + 1 - o.window : 0;
                if (w_begin < s_end) w_begin = s_end;
                uint64_t lo = 0;
                if (sw && p + 1 > sw) lo = p + 1 - sw;  // the layer's own window: p - k < sw
                uint64_t m = 0;
                float mx = -INFINITY;
                auto key = [&](uint64_t kp, const float **kv, const float **vv) {
                    if (kp >= p0) {
                        *kv = k + (kp - p0) * kdim + uint64_t(kh) * hd;
                        *vv = v + (kp - p0) * vdim + uint64_t(kh) * vhd;
                    } else {
                        *kv = kr + slot(kp) * kdim + uint64_t(kh) * hd;
                        *vv = vr + slot(kp) * vdim + uint64_t(kh) * vhd;
                    }
                };
                // The scores of positions [a, b) in order: q . key (kernels/dot.h's order) over runs
                // of keys consecutive in memory (the sinks, the ring up to its wrap, the chunk's
                // rows), one kernel call each; then scale, softcap and ALiBi per key.
                auto run_end = [&](uint64_t kp, uint64_t b) {  // keys/values of [kp, end) are consecutive rows
                    if (kp >= p0) return b;
                    const uint64_t e = std::min(b, p0);
                    return kp < o.sinks ? std::min<uint64_t>(e, o.sinks) : std::min<uint64_t>(e, kp + (cap - slot(kp)));
                };
                auto scores_of = [&](uint64_t a, uint64_t b) {
                    const uint64_t m0 = m;
                    for (uint64_t kp = a; kp < b;) {
                        const float *kv, *vv;
                        key(kp, &kv, &vv);
                        const uint64_t e = run_end(kp, b);
                        kernels::dot_rows_f32(kv, kdim, e - kp, qv, hd, sc + m);
                        m += e - kp;
                        kp = e;
                    }
                    for (uint64_t j = m0; j < m; j++) {
                        float s = sc[j] * scale;
                        if (softcap > 0) s = std::tanh(s / softcap) * softcap;
                        if (!slopes.empty()) s += float(c.alibi_scale * slopes[hh] * (double(a + (j - m0)) - double(p)));
                        sc[j] = s;
                        mx = std::max(mx, s);
                    }
                };
                if (lo < s_end) scores_of(lo, s_end);
                if (std::max(lo, w_begin) <= p) scores_of(std::max(lo, w_begin), p + 1);
                // A learned sink logit joins the softmax and takes its share of the mass (gpt-oss).
                if (L.sinks) mx = std::max(mx, sink);
                float sum = 0;
                for (uint64_t j = 0; j < m; j++) {
                    sc[j] = std::exp(sc[j] - mx);
                    sum += sc[j];
                }
                if (L.sinks) sum += std::exp(sink - mx);
                float *out = att + (i * nh + hh) * vhd;
                std::fill(out, out + vhd, 0.0f);
                for (uint64_t j = 0; j < m; j++) sc[j] = sc[j] / sum;  // the weights
                uint64_t jj = 0;
                auto accum = [&](uint64_t a, uint64_t b) {  // out += weight * value, in position order
                    for (uint64_t kp = a; kp < b;) {
                        const float *kv, *vv;
                        key(kp, &kv, &vv);
                        const uint64_t e = run_end(kp, b);
                        kernels::axpy_rows_f32(sc + jj, vv, vdim, e - kp, out, vhd);
                        jj += e - kp;
                        kp = e;
                    }
                };
                accum(lo, s_end);
                accum(std::max(lo, w_begin), p + 1);
            }
        };
        const uint64_t items = n * nh;
        if (T == 1 || items < 2) body(0, 0, items);
        else
            pool->run([&](unsigned wi) {
                const uint64_t a = items * wi / T, e = items * (wi + 1) / T;
                if (a < e) body(wi, a, e);
            });
        // The chunk's keys and values into the ring, in position order (a later one overwrites
        // the slot of the one W positions before it).
        for (uint64_t i = 0; i < n; i++) {
            const uint64_t s = slot(p0 + i);
            std::memcpy(kr + s * kdim, k + i * kdim, kdim * sizeof(float));
            std::memcpy(vr + s * vdim, v + i * vdim, vdim * sizeof(float));
        }
        project(l, L, n);
    }

    // tmp = W_O att (+ bias), with the probes around it.
    void project(uint32_t l, const LayerW &L, uint64_t n) {
        probe(l, Point::AttnOut, att, n, uint64_t(nh) * vhd, nh);
        linear(att, n, L.o, L.ob, tmp, d);
        probe(l, Point::AttnProj, tmp, n, d);
    }

    // The k largest of v[0..E) (ties: the lower index) into idx, in descending order.
    static void top_k(const float *v, uint32_t E, uint32_t K, int32_t *idx) {
        for (uint32_t j = 0; j < K; j++) {
            int32_t best = -1;
            for (uint32_t e = 0; e < E; e++) {
                bool taken = false;
                for (uint32_t t = 0; t < j; t++) taken |= idx[t] == int32_t(e);
                if (!taken && (best < 0 || v[e] > v[best])) best = int32_t(e);
            }
            idx[j] = best;
        }
    }

    static void softmax_inplace(float *r, uint32_t E) {
        float mx = -INFINITY;
        for (uint32_t e = 0; e < E; e++) mx = std::max(mx, r[e]);
        float s = 0;
        for (uint32_t e = 0; e < E; e++) s += (r[e] = std::exp(r[e] - mx));
        for (uint32_t e = 0; e < E; e++) r[e] /= s;
    }

    // DeepSeek's group-limited routing: the scores v[E] of every group but the topk_group best by
    // group_score[n_group] set to `fill`.
    void keep_top_groups(float *v, const float *group_score, float fill) const {
        const uint32_t G = c.n_group, per = c.n_experts / G;
        int32_t sel[256];
        top_k(group_score, G, c.topk_group, sel);
        for (uint32_t g = 0; g < G; g++) {
            bool keep = false;
            for (uint32_t t = 0; t < c.topk_group; t++) keep |= sel[t] == int32_t(g);
            if (!keep) std::fill(v + g * per, v + (g + 1) * per, fill);
        }
    }

    // One token's experts and weights from its router logits r[E] (overwritten), as transformers'
    // routers compute them in eval mode.
    void route_token(const LayerW &L, float *r, int32_t *ri, float *rw) const {
        const uint32_t E = c.n_experts, K = c.top_k;
        const std::string kind = c.router;
        if (kind == "sparsemixer") {
            // PhiMoE in eval: the best expert, weighted by the softmax over the scores within the
            // jitter band of it; then the best of the rest, the same way (the first masked out).
            const float band = float(2 * c.router_jitter);
            float *masked = rlog2;
            for (uint32_t pick = 0; pick < 2; pick++) {
                int32_t best = -1;
                for (uint32_t e = 0; e < E; e++)
                    if ((pick == 0 || int32_t(e) != ri[0]) && (best < 0 || r[e] > r[best])) best = int32_t(e);
                const float m = r[best];
                for (uint32_t e = 0; e < E; e++) {
                    const float factor = std::max(std::fabs(r[e]), m);
                    const bool out = (pick == 1 && int32_t(e) == ri[0]) || (m - r[e]) / factor > band;
                    masked[e] = out ? -INFINITY : r[e];
                }
                softmax_inplace(masked, E);
                ri[pick] = best;
                rw[pick] = masked[best];
            }
            return;
        }
        if (kind == "sigmoid_group_topk") {
            // DeepSeek-V3: sigmoid scores; the choice adds the correction bias, keeps the topk_group
            // groups of the largest two-best sums, then the top k; weights the plain scores.
            const uint32_t G = c.n_group, per = E / G;
            float *choice = rlog2;
            for (uint32_t e = 0; e < E; e++) {
                r[e] = 1.0f / (1.0f + std::exp(-r[e]));
                choice[e] = r[e] + widen_elem(L.router_b, e);
            }
            float gs[256];
            int32_t two[2];
            for (uint32_t g = 0; g < G; g++) {
                top_k(choice + g * per, per, 2, two);
                gs[g] = choice[g * per + two[0]] + choice[g * per + two[1]];
            }
            keep_top_groups(choice, gs, -INFINITY);
            top_k(choice, E, K, ri);
            for (uint32_t j = 0; j < K; j++) rw[j] = r[ri[j]];
            if (c.norm_topk_prob) {
                float t = 0;
                for (uint32_t j = 0; j < K; j++) t += rw[j];
                for (uint32_t j = 0; j < K; j++) rw[j] /= t + 1e-20f;
            }
        } else {
            // softmax over all experts (a router bias added to the logits first: gpt-oss), the top k,
            // renormalised if asked; DeepSeek-V2's group_limited_greedy first zeroes all but the
            // topk_group groups of the largest best score.
            if (L.router_b)
                for (uint32_t e = 0; e < E; e++) r[e] += widen_elem(L.router_b, e);
            softmax_inplace(r, E);
            if (kind == "softmax_group_topk") {
                const uint32_t G = c.n_group, per = E / G;
                float gs[256];
                for (uint32_t g = 0; g < G; g++) gs[g] = *std::max_element(r + g * per, r + (g + 1) * per);
                keep_top_groups(r, gs, 0.0f);
            }
            top_k(r, E, K, ri);
            for (uint32_t j = 0; j < K; j++) rw[j] = r[ri[j]];
            if (c.norm_topk_prob) {
                float t = 0;
                for (uint32_t j = 0; j < K; j++) t += rw[j];
                for (uint32_t j = 0; j < K; j++) rw[j] /= t;
            }
        }
        if (c.routed_scaling != 1)
            for (uint32_t j = 0; j < K; j++) rw[j] *= float(c.routed_scaling);
    }

    // The slot a scored policy frees for position p (>= S, W non-sink positions held): see
    // forward.h's Policy.  kt / st: one table's positions and scores.
    uint64_t victim(const int64_t *kt, const float *st, uint64_t p, uint64_t sw) const {
        uint64_t best = cap;
        auto older = [&](uint64_t s) { return best == cap || kt[s] < kt[best]; };
        if (sw) {
            for (uint64_t s = o.sinks; s < cap; s++)
                if (p - uint64_t(kt[s]) >= sw && older(s)) best = s;
            if (best != cap) return best;
        }
        for (uint64_t s = o.sinks; s < cap; s++) {
            if (o.policy == Policy::H2o && uint64_t(kt[s]) + recent >= p) continue;  // among the recent: kept
            if (best == cap || st[s] < st[best] || (st[s] == st[best] && kt[s] < kt[best])) best = s;
        }
        if (best == cap)  // nothing outside the recent part (not reached while recent < W)
            for (uint64_t s = o.sinks; s < cap; s++)
                if (older(s)) best = s;
        return best;
    }

    // Attention of the chunk's n tokens (q, k, v computed) under a scored policy, token after
    // token: evict, write the token's key and value, attend over the held slots (heads in
    // parallel), then the slots' scores from this query's weights (heads summed in order).
    void attend_kept(uint32_t l, const LayerW &L, uint64_t n, uint64_t p0) {
        float *kr = kring + uint64_t(l) * cap * kdim, *vr = vring + uint64_t(l) * cap * vdim;
        const uint32_t group = nh / nkv;
        const uint64_t sw = L.sliding ? c.sliding_window : 0;
        const float softcap = float(c.attn_softcap);
        int64_t *kp = kpos + uint64_t(l) * tables * cap;
        float *ps = pscore + uint64_t(l) * tables * cap;
        for (uint64_t i = 0; i < n; i++) {
            const uint64_t p = p0 + i;
            for (uint32_t t = 0; t < tables; t++) {
                int64_t *kt = kp + uint64_t(t) * cap;
                float *st = ps + uint64_t(t) * cap;
                const uint64_t s = p < cap ? p : victim(kt, st, p, sw);  // slots fill in position order
                kt[s] = int64_t(p);
                st[s] = 0;
                const uint32_t h0 = tables == 1 ? 0 : t, h1 = tables == 1 ? nkv : t + 1;
                for (uint32_t kh = h0; kh < h1; kh++) {
                    std::memcpy(kr + s * kdim + uint64_t(kh) * khd, k + i * kdim + uint64_t(kh) * khd, khd * sizeof(float));
                    std::memcpy(vr + s * vdim + uint64_t(kh) * vhd, v + i * vdim + uint64_t(kh) * vhd, vhd * sizeof(float));
                }
            }
            const uint64_t used = std::min<uint64_t>(p + 1, cap);
            run(nh, [&](uint64_t a, uint64_t e) {
                for (uint64_t hh = a; hh < e; hh++) {
                    const uint32_t kh = uint32_t(hh) / group;
                    const int64_t *kt = kp + uint64_t(tables == 1 ? 0 : kh) * cap;
                    float *wr = wts + hh * cap;
                    const float *qv = q + i * qdim + hh * khd;
                    float mx = -INFINITY;
                    kernels::dot_rows_f32(kr + uint64_t(kh) * khd, kdim, used, qv, khd, wr);  // q . key per slot
                    for (uint64_t s = 0; s < used; s++) {
                        const uint64_t kpp = uint64_t(kt[s]);
                        if (sw && p - kpp >= sw) {
                            wr[s] = -INFINITY;
                            continue;
                        }
                        float sc = wr[s] * scale;
                        if (softcap > 0) sc = std::tanh(sc / softcap) * softcap;
                        if (!slopes.empty()) sc += float(c.alibi_scale * slopes[hh] * (double(kpp) - double(p)));
                        wr[s] = sc;
                        mx = std::max(mx, sc);
                    }
                    float sum = 0;
                    for (uint64_t s = 0; s < used; s++) {
                        wr[s] = wr[s] == -INFINITY ? 0.0f : std::exp(wr[s] - mx);
                        sum += wr[s];
                    }
                    float *out = att + (i * nh + hh) * vhd;
                    std::fill(out, out + vhd, 0.0f);
                    for (uint64_t s = 0; s < used; s++) wr[s] /= sum;
                    // A masked slot's weight 0 adds +0 to a sum that started at +0: the bytes of
                    // skipping it.
                    kernels::axpy_rows_f32(wr, vr + uint64_t(kh) * vhd, vdim, used, out, vhd);
                }
            });
            for (uint32_t t = 0; t < tables; t++) {
                float *st = ps + uint64_t(t) * cap;
                const uint32_t a = tables == 1 ? 0 : t * group, e = tables == 1 ? nh : (t + 1) * group;
                for (uint64_t s = 0; s < used; s++) {
                    float m = 0;
                    for (uint32_t hh = a; hh < e; hh++) m += wts[uint64_t(hh) * cap + s];
                    m /= float(e - a);
                    st[s] = o.policy == Policy::H2o ? st[s] + m : m;
                }
            }
        }
    }

    // Dense or expert MLP: out[n, d] = W2 act(W1 x (+b1)) [* (W3 x (+b3))] (+b2).
    void mlp(const float *in, uint64_t n, const TensorView &w1, const TensorView &b1, const TensorView &w3, const TensorView &b3,
             const TensorView &w2, const TensorView &b2, float *out) {
        const uint64_t f = w1.rows;
        if (n == 1 && w3) gemv(in, {{w1, b1, fa}, {w3, b3, fb}});  // gate and up: one dispatch
        else linear(in, n, w1, b1, fa, f);
        if (w3 && c.swiglu_limit > 0) {
            // gpt-oss: the gate clamped above, the up part both ways, then act(gate) * (up + offset).
            if (n > 1) linear(in, n, w3, b3, fb, f);
            const float lim = float(c.swiglu_limit), off = float(c.gated_up_offset);
            for (uint64_t i = 0; i < n * f; i++)
                fa[i] = act(act_kind, std::min(fa[i], lim)) * (std::min(std::max(fb[i], -lim), lim) + off);
        } else if (w3) {
            if (n > 1) linear(in, n, w3, b3, fb, f);
            for (uint64_t i = 0; i < n * f; i++) fa[i] = act(act_kind, fa[i]) * fb[i];
        } else {
            for (uint64_t i = 0; i < n * f; i++) fa[i] = act(act_kind, fa[i]);
        }
        linear(fa, n, w2, b2, out, d);
    }

    void ffn(const LayerW &L, const float *in, uint64_t n, float *out) {
        if (!L.moe) return mlp(in, n, L.w1, L.b1, L.w3, L.b3, L.w2, L.b2, out);
        const uint32_t E = c.n_experts, K = c.top_k;
        linear(in, n, L.router, {}, rlog, E);
        for (uint64_t i = 0; i < n; i++) route_token(L, rlog + i * E, route + i * K, route_w + i * K);
        std::fill(out, out + n * d, 0.0f);
        // Experts in index order; each takes the rows routed to it (one GEMM), adds weight x output.
        for (uint32_t e = 0; e < E; e++) {
            uint64_t m = 0;
            for (uint64_t i = 0; i < n; i++)
                for (uint32_t j = 0; j < K; j++)
                    if (route[i * K + j] == int32_t(e)) erows[m++] = uint32_t(i);
            if (!m) continue;
            for (uint64_t r = 0; r < m; r++) std::memcpy(gath + r * d, in + uint64_t(erows[r]) * d, d * sizeof(float));
            mlp(gath, m, L.e1[e], L.eb1[e], L.e3[e], L.eb3[e], L.e2[e], L.eb2[e], eout);
            for (uint64_t r = 0; r < m; r++) {
                const uint64_t i = erows[r];
                float wgt = 0;
                for (uint32_t j = 0; j < K; j++)
                    if (route[i * K + j] == int32_t(e)) wgt = route_w[i * K + j];
                for (uint64_t jd = 0; jd < d; jd++) out[i * d + jd] += wgt * eout[r * d + jd];
            }
        }
        if (L.s1) {
            mlp(in, n, L.s1, {}, L.s3, {}, L.s2, {}, eout);
            for (uint64_t i = 0; i < n; i++) {
                float g = 1;
                if (L.sgate) g = 1.0f / (1.0f + std::exp(-dot_row(L.sgate, 0, in + i * d)));
                for (uint64_t jd = 0; jd < d; jd++) out[i * d + jd] += g * eout[i * d + jd];
            }
        }
    }
};

size_t arena_size(const WeightSource &w, const SeqOptions &o) {
    Sequence::Impl im(w, o);
    ArenaSizer s;
    Buffers b(s);
    im.buffers(b);
    return s.total();
}

Sequence::Sequence(const WeightSource &w, const SeqOptions &o, void *arena, size_t arena_bytes) : impl_(std::make_unique<Impl>(w, o)) {
    Arena a(arena, arena_bytes);
    Buffers b(a);
    impl_->buffers(b);
    impl_->pool = std::make_unique<WorkerPool>(impl_->o.threads);
    reset();
}

Sequence::~Sequence() = default;

void Sequence::feed(const int32_t *tokens, size_t n, float *all_logits) {
    Impl &im = *impl_;
    if (n && !tokens) throw_error(STK_E_INVALID_ARGUMENT, "feed: %zu tokens at a null pointer", n);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || uint64_t(tokens[i]) >= im.vocab)
            throw_error(STK_E_INVALID_ARGUMENT, "feed: token %zu is %d, outside the vocabulary of %llu", i, tokens[i],
                        (unsigned long long)im.vocab);
    if (im.pos_emb && im.pos + n + im.c.pos_offset > im.pos_emb.rows)
        throw_error(STK_E_INVALID_ARGUMENT, "feed: positions up to %llu, past the %llu the model learned",
                    (unsigned long long)(im.pos + n), (unsigned long long)(im.pos_emb.rows - im.c.pos_offset));
    for (size_t i = 0; i < n; i += im.o.max_batch) {
        const size_t m = std::min<size_t>(im.o.max_batch, n - i);
        im.chunk(tokens + i, m, all_logits ? all_logits + i * im.vocab : nullptr);
    }
}

const float *Sequence::logits() const { return impl_->logit; }

void Sequence::set_probe(uint32_t mask, ProbeFn fn, void *user) {
    if (mask >> kPointCount) throw_error(STK_E_INVALID_ARGUMENT, "set_probe: points 0x%x: bits past the last point (%u)", mask, kPointCount - 1);
    Impl &im = *impl_;
    im.probe_fn = fn;
    im.probe_user = user;
    im.probe_mask = fn ? mask : 0;
}

void Sequence::attn_project(uint32_t layer, const float *x, uint64_t n, float *y) {
    Impl &im = *impl_;
    if (layer >= im.c.n_layers) throw_error(STK_E_INVALID_ARGUMENT, "attn_project: layer %u of %u", layer, im.c.n_layers);
    if (n && (!x || !y)) throw_error(STK_E_INVALID_ARGUMENT, "attn_project: %llu rows at a null pointer", (unsigned long long)n);
    if (n) im.linear(x, n, im.layers[layer].o, im.layers[layer].ob, y, im.d);
}
uint64_t Sequence::vocab() const { return impl_->vocab; }
uint64_t Sequence::position() const { return impl_->pos; }

void Sequence::reset() {
    Impl &im = *impl_;
    im.pos = 0;
    im.have_logits = false;
    std::fill(im.logit, im.logit + im.vocab, 0.0f);
    if (im.kpos) {
        const uint64_t slots = uint64_t(im.c.n_layers) * im.tables * im.cap;
        std::fill(im.kpos, im.kpos + slots, int64_t(-1));
        std::fill(im.pscore, im.pscore + slots, 0.0f);
    }
}

size_t Sequence::kept(uint32_t layer, uint32_t kv_head, uint64_t *out, size_t cap) const {
    const Impl &im = *impl_;
    if (layer >= im.c.n_layers) throw_error(STK_E_INVALID_ARGUMENT, "kept: layer %u of %u", layer, im.c.n_layers);
    if (kv_head >= im.nkv) throw_error(STK_E_INVALID_ARGUMENT, "kept: key/value head %u of %u", kv_head, im.nkv);
    std::vector<uint64_t> ps;  // a test's query, not the per-token path
    if (!im.kpos) {
        for (uint64_t p = 0; p < std::min<uint64_t>(im.o.sinks, im.pos); p++) ps.push_back(p);
        const uint64_t a = std::max<uint64_t>(im.o.sinks, im.pos > im.o.window ? im.pos - im.o.window : 0);
        for (uint64_t p = a; p < im.pos; p++) ps.push_back(p);
    } else {
        const int64_t *kt = im.kpos + (uint64_t(layer) * im.tables + (im.tables == 1 ? 0 : kv_head)) * im.cap;
        for (uint64_t s = 0; s < im.cap; s++)
            if (kt[s] >= 0) ps.push_back(uint64_t(kt[s]));
        std::sort(ps.begin(), ps.end());
    }
    if (out)
        for (size_t i = 0; i < std::min(cap, ps.size()); i++) out[i] = ps[i];
    return ps.size();
}

}  // namespace stk::lm
