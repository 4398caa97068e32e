// Every family of the table against transformers itself: for each family whose fixture is under
// tests/fixtures/families/ (a tiny model written by transformers' save_pretrained, see
// generate.py there), one layer's attention output and FFN output as transformers computed them
// (reference.json) are rebuilt here from the tensors stk reads - in the roles, layouts and
// transposition stk assigns (materialize_f32) - and the description stk parses from config.json
// (activation, RoPE bases and dims, q/k norms and their gain offset, scale, soft-capping, sliding
// window, ALiBi, MoE routing).  A tensor read in the wrong role or layout, or a config key read
// wrong, moves the result far outside the tolerance.
#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "ingest/family.h"
#include "ingest/model.h"
#include "stages/attn_common.h"

#include "test_util.h"

using namespace stk;

namespace {

using Mat = std::vector<double>;  // row-major

struct Layer {
    const ModelDescription &d;
    int32_t layer;

    const PlanTensor *find(Role role, NormSlot slot = NormSlot::None, int32_t expert = kNoExpert) const {
        for (uint32_t i = 0; i < d.plan.n_tensors; i++) {
            const PlanTensor &t = d.plan.tensors[i];
            if (t.role == role && t.layer == layer && t.expert == expert && t.streamed && !t.buffer &&
                (slot == NormSlot::None || t.slot == slot))
                return &t;
        }
        return nullptr;
    }
    Mat read(const PlanTensor &t) const {
        const TensorRef &src = d.checkpoint->tensors()[t.source];
        std::vector<uint8_t> scratch;
        const uint8_t *bytes = d.checkpoint->tensor_bytes(src, scratch);
        std::vector<float> out(t.n_elements), row(d.plan.max_row_floats + 1);
        materialize_f32(t, src, bytes, out.data(), row.data());
        return Mat(out.begin(), out.end());
    }
    Mat get(Role role, NormSlot slot = NormSlot::None, int32_t expert = kNoExpert) const {
        const PlanTensor *t = find(role, slot, expert);
        return t ? read(*t) : Mat();
    }
    // What the attention stages read (WeightReader): MLA's composed W_Q / W_K / W_V / W_O.
    Mat stage(Role role) const {
        WeightReader rd(*d.checkpoint, d.plan);
        const PlanTensor *t = rd.find(role, layer);
        if (!t) return Mat();
        std::vector<float> out(t->n_elements), row(d.plan.max_row_floats + 1);
        rd.read(*t, out.data(), row.data());
        return Mat(out.begin(), out.end());
    }
};

// y[T, rows] = x[T, cols] W^T + b
Mat linear(const Mat &x, size_t T, const Mat &W, const Mat &b, size_t rows) {
    size_t cols = W.size() / rows;
    Mat y(T * rows);
    for (size_t t = 0; t < T; t++)
        for (size_t r = 0; r < rows; r++) {
            double acc = b.empty() ? 0 : b[r];
            for (size_t c = 0; c < cols; c++) acc += W[r * cols + c] * x[t * cols + c];
            y[t * rows + r] = acc;
        }
    return y;
}

double act(const std::string &a, double z) {
    if (a == "relu") return z > 0 ? z : 0;
    if (a == "relu2") return z > 0 ? z * z : 0;
    if (a == "silu" || a == "swish") return z / (1 + std::exp(-z));
    if (a == "quick_gelu") return z / (1 + std::exp(-1.702 * z));
    if (a == "gelu" || a == "gelu_python") return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    if (a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast")
        return 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
    fail_msg("activation '%s' is not modelled by this test", a.c_str());
    return 0;
}

// One FFN (dense or one expert) on x[T, d].
Mat ffn(const Layer &L, const ModelConfig &c, const Mat &x, size_t T, int32_t expert) {
    Mat w1 = L.get(Role::FFN_W1, NormSlot::None, expert), w2 = L.get(Role::FFN_W2, NormSlot::None, expert);
    Mat w3 = L.get(Role::FFN_W3, NormSlot::None, expert);
    Mat b1 = L.get(Role::FFN_B1, NormSlot::None, expert), b2 = L.get(Role::FFN_B2, NormSlot::None, expert);
    Mat b3 = L.get(Role::FFN_B3, NormSlot::None, expert);
    assert_false(w1.empty() || w2.empty());
    size_t f = w1.size() / c.d_model;
    Mat h = linear(x, T, w1, b1, f);
    if (c.ffn_kind == FfnKind::Gated) {
        assert_false(w3.empty());
        Mat u = linear(x, T, w3, b3, f);
        const double lim = c.swiglu_limit > 0 ? c.swiglu_limit : INFINITY;  // gpt-oss's clamped SwiGLU
        for (size_t i = 0; i < h.size(); i++)
            h[i] = act(c.activation, std::min(h[i], lim)) * (std::max(-lim, std::min(u[i], lim)) + c.gated_up_offset);
    } else {
        for (double &v : h) v = act(c.activation, v);
    }
    return linear(h, T, w2, b2, c.d_model);
}

Mat ffn_block(const Layer &L, const ModelConfig &c, const Mat &x, size_t T) {
    if (!c.layer_is_moe(uint32_t(L.layer))) return ffn(L, c, x, T, kNoExpert);
    const size_t E = c.n_experts, d = c.d_model;
    // ROUTER_B: DeepSeek-V3's bias joins the choice only; gpt-oss's is added to the logits.
    const bool choice_bias = !std::strcmp(c.router, "sigmoid_group_topk");
    assert_int_equal(c.router_bias, !L.get(Role::ROUTER_B).empty());
    Mat logits = linear(x, T, L.get(Role::ROUTER_GATE), choice_bias ? Mat() : L.get(Role::ROUTER_B), E);
    Mat y(T * d, 0.0);
    std::vector<Mat> outs(E);
    for (size_t e = 0; e < E; e++) outs[e] = ffn(L, c, x, T, int32_t(e));
    if (!std::strcmp(c.router, "sparsemixer")) {
        // PhiMoE in eval (transformers' sparsemixer): the best expert, weighted by its softmax over
        // the scores within 2 x jitter of it (relative to max(|s|, best)); then the same for the best
        // of the rest (the first masked out).
        const double band = 2 * c.router_jitter;
        for (size_t t = 0; t < T; t++) {
            const double *s = &logits[t * E];
            std::vector<bool> out(E, false);
            for (int pick = 0; pick < 2; pick++) {
                size_t best = E;
                for (size_t e = 0; e < E; e++)
                    if (!out[e] && (best == E || s[e] > s[best])) best = e;
                double sum = 0;
                for (size_t e = 0; e < E; e++) {
                    if (out[e]) continue;
                    double factor = std::max(std::fabs(s[e]), s[best]);
                    if ((s[best] - s[e]) / factor > band) continue;
                    sum += std::exp(s[e] - s[best]);
                }
                double w = 1 / sum;
                for (size_t j = 0; j < d; j++) y[t * d + j] += w * outs[best][t * d + j];
                out[best] = true;
            }
        }
        return y;
    }
    const bool sigmoid = !std::strcmp(c.router, "sigmoid_group_topk");
    Mat bias = choice_bias ? L.get(Role::ROUTER_B) : Mat();
    for (size_t t = 0; t < T; t++) {
        std::vector<double> p(E);
        double mx = -INFINITY, sum = 0;
        if (sigmoid) {
            for (size_t e = 0; e < E; e++) p[e] = 1 / (1 + std::exp(-logits[t * E + e]));
        } else {
            for (size_t e = 0; e < E; e++) mx = std::max(mx, logits[t * E + e]);
            for (size_t e = 0; e < E; e++) sum += p[e] = std::exp(logits[t * E + e] - mx);
            for (double &v : p) v /= sum;
        }
        // The choice: scores (+ V3's bias), only in the topk_group best groups (a group's score: its
        // best expert, V2; the sum of its best two, V3).
        std::vector<double> choice(p);
        if (!bias.empty())
            for (size_t e = 0; e < E; e++) choice[e] += bias[e];
        if (c.n_group > 1) {
            const size_t G = c.n_group, per = E / G;
            std::vector<double> gs(G);
            for (size_t g = 0; g < G; g++) {
                std::vector<double> v(choice.begin() + long(g * per), choice.begin() + long((g + 1) * per));
                std::sort(v.rbegin(), v.rend());
                gs[g] = sigmoid ? v[0] + (per > 1 ? v[1] : 0) : v[0];
            }
            std::vector<size_t> go(G);
            for (size_t g = 0; g < G; g++) go[g] = g;
            std::stable_sort(go.begin(), go.end(), [&](size_t a, size_t b) { return gs[a] > gs[b]; });
            for (size_t k = c.topk_group; k < G; k++)
                for (size_t e = go[k] * per; e < (go[k] + 1) * per; e++) choice[e] = sigmoid ? -INFINITY : 0;
        }
        std::vector<size_t> order(E);
        for (size_t e = 0; e < E; e++) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return choice[a] > choice[b]; });
        double top = 0;
        for (size_t k = 0; k < c.top_k; k++) top += p[order[k]];
        for (size_t k = 0; k < c.top_k; k++) {
            size_t e = order[k];
            double w = (c.norm_topk_prob ? p[e] / (top + (sigmoid ? 1e-20 : 0)) : p[e]) * c.routed_scaling;
            for (size_t j = 0; j < d; j++) y[t * d + j] += w * outs[e][t * d + j];
        }
    }
    if (c.shared_expert_ffn_dim) {
        Mat s = ffn(L, c, x, T, kSharedExpert);
        Mat g = c.shared_expert_gate ? linear(x, T, L.get(Role::SHARED_GATE), Mat(), 1) : Mat(T, INFINITY);
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < d; j++) y[t * d + j] += s[t * d + j] / (1 + std::exp(-g[t]));
    }
    return y;
}

// RMSNorm with gain offset + w over groups of n values.
void rms_groups(Mat &x, const Mat &w, size_t n, double eps, double offset) {
    for (size_t g = 0; g < x.size() / n; g++) {
        double ss = 0;
        for (size_t i = 0; i < n; i++) ss += x[g * n + i] * x[g * n + i];
        double r = 1 / std::sqrt(ss / double(n) + eps);
        for (size_t i = 0; i < n; i++) x[g * n + i] = x[g * n + i] * r * (offset + w[i]);
    }
}

// The angles come from rope_angles (checked against transformers' own in
// rope_scaling_matches_transformers below); cos and sin carry YaRN's attention factor.
void rope(Mat &x, size_t T, size_t heads, const ModelConfig &c, double theta) {
    const size_t hd = c.head_dim, rot = c.rotary_dim ? c.rotary_dim : hd, half = rot / 2;
    ModelConfig base = c;
    base.rope_theta = theta;
    std::vector<double> inv;
    assert_int_equal(rope_angles(base, inv, nullptr), half);
    const double gain = c.mla ? 1 : c.rope_attn_factor;  // MLA: folded into the composed W_Q, W_K
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < heads; h++) {
            double *v = &x[(t * heads + h) * hd];
            for (size_t i = 0; i < half; i++) {
                double a = double(t) * inv[i], cs = std::cos(a) * gain, sn = std::sin(a) * gain;
                size_t i0 = c.rope_interleaved ? 2 * i : i, i1 = c.rope_interleaved ? 2 * i + 1 : i + half;
                double x0 = v[i0], x1 = v[i1];
                v[i0] = x0 * cs - x1 * sn;
                v[i1] = x1 * cs + x0 * sn;
            }
        }
}

// MLA: the per-token 1 / rms of the latent RMSNorms, which the composed W_Q / W_K / W_V leave out
// (q: every row; k: the nope rows; v: every row), from the stored factors.
void mla_rms(const Layer &L, const ModelConfig &c, const Mat &x, size_t T, Mat &q, Mat &k, Mat &v) {
    const size_t H = c.n_heads, hd = c.head_dim, rope = c.qk_rope_dim, kr = c.kv_lora_rank;
    auto inv_rms = [&](const Mat &W, size_t rows, size_t n) {
        Mat y = linear(x, T, W, Mat(), rows), r(T);
        for (size_t t = 0; t < T; t++) {
            double ss = 0;
            for (size_t i = 0; i < n; i++) ss += y[t * rows + i] * y[t * rows + i];
            r[t] = 1 / std::sqrt(ss / double(n) + 1e-6);  // DeepseekV2RMSNorm's default eps
        }
        return r;
    };
    Mat rq = c.q_lora_rank ? inv_rms(L.get(Role::MLA_Q_A), c.q_lora_rank, c.q_lora_rank) : Mat(T, 1.0);
    Mat rk = inv_rms(L.get(Role::MLA_KV_A), kr + rope, kr);
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < H; h++)
            for (size_t j = 0; j < hd; j++) {
                q[(t * H + h) * hd + j] *= rq[t];
                if (j >= rope) k[(t * H + h) * hd + j] *= rk[t];
                v[(t * H + h) * hd + j] *= rk[t];
            }
}

// exact_mla: apply the per-token 1 / rms the composed MLA matrices leave out (false: what the
// stages' matrices alone compute).
Mat attention(const Layer &L, const ModelConfig &c, const Mat &x, size_t T, bool exact_mla = true) {
    const size_t H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, d = c.d_model;
    auto w = [&](Role r) { return c.mla ? L.stage(r) : L.get(r); };
    Mat q = linear(x, T, w(Role::Q), L.get(Role::Q_B), H * hd);
    Mat k = linear(x, T, w(Role::K), L.get(Role::K_B), KV * hd);
    Mat v = linear(x, T, w(Role::V), L.get(Role::V_B), KV * hd);
    if (c.mla && exact_mla) mla_rms(L, c, x, T, q, k, v);
    if (c.qk_norm != QkNorm::None) {
        Mat qn = L.get(Role::LN_G, NormSlot::QNorm), kn = L.get(Role::LN_G, NormSlot::KNorm);
        assert_false(qn.empty() || kn.empty());
        rms_groups(q, qn, c.qk_norm == QkNorm::PerHead ? hd : H * hd, c.norm_eps, c.norm_offset);
        rms_groups(k, kn, c.qk_norm == QkNorm::PerHead ? hd : KV * hd, c.norm_eps, c.norm_offset);
    }
    const bool sliding = c.sliding_window && c.layer_is_sliding(uint32_t(L.layer));
    if (c.positions == PosKind::Rope) {
        double theta = sliding && c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
        rope(q, T, H, c, theta);
        rope(k, T, KV, c, theta);
    }
    std::vector<double> slopes(H);
    if (c.positions == PosKind::Alibi) {
        // BLOOM's / the ALiBi paper's slopes
        uint32_t cp = 1;
        while (cp * 2 <= H) cp *= 2;
        double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(cp)) - 3)));
        for (uint32_t i = 0; i < cp; i++) slopes[i] = std::pow(base, double(i + 1));
        double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(double(2 * cp)) - 3)));
        for (uint32_t i = 0; i < H - cp; i++) slopes[cp + i] = std::pow(extra, double(2 * i + 1));
        for (double &s : slopes) s *= c.alibi_scale;
    }
    const double scale = c.attn_scale > 0 ? c.attn_scale : 1 / std::sqrt(double(hd));
    const Mat sinks = L.get(Role::ATTN_SINK);  // gpt-oss: one more logit per head in each softmax
    assert_int_equal(c.attn_sinks, !sinks.empty());
    Mat ctx(T * H * hd, 0.0);
    for (size_t h = 0; h < H; h++) {
        const size_t g = h / (H / KV);
        for (size_t i = 0; i < T; i++) {
            std::vector<double> s(i + 1, -INFINITY);
            double mx = -INFINITY;
            for (size_t j = 0; j <= i; j++) {
                if (sliding && i - j >= c.sliding_window) continue;
                double a = 0;
                for (size_t e = 0; e < hd; e++) a += q[(i * H + h) * hd + e] * k[(j * KV + g) * hd + e];
                a *= scale;
                if (c.attn_softcap > 0) a = c.attn_softcap * std::tanh(a / c.attn_softcap);
                if (c.positions == PosKind::Alibi) a += slopes[h] * (double(j) - double(i));
                s[j] = a;
                mx = std::max(mx, a);
            }
            if (!sinks.empty()) mx = std::max(mx, sinks[h]);
            double sum = sinks.empty() ? 0 : std::exp(sinks[h] - mx);
            for (size_t j = 0; j <= i; j++) sum += s[j] = std::isinf(s[j]) ? 0 : std::exp(s[j] - mx);
            for (size_t j = 0; j <= i; j++)
                for (size_t e = 0; e < hd; e++) ctx[(i * H + h) * hd + e] += s[j] / sum * v[(j * KV + g) * hd + e];
        }
    }
    return linear(ctx, T, w(Role::O), L.get(Role::O_B), d);
}

Mat json_mat(simdjson::dom::element e, size_t *rows) {
    Mat m;
    *rows = 0;
    for (simdjson::dom::element row : e.get_array()) {
        (*rows)++;
        for (simdjson::dom::element v : row.get_array()) m.push_back(double(v));
    }
    return m;
}

// max |a - b| / max |b|
double rel_err(const Mat &a, const Mat &b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) {
        num = std::max(num, std::fabs(a[i] - b[i]));
        den = std::max(den, std::fabs(b[i]));
    }
    return num / (den > 0 ? den : 1);
}

constexpr double kTol = 2e-4;  // float32 sums in transformers vs double here

void check_family(const FamilyDef &f, const char *fixture = nullptr) {
    if (!fixture) fixture = f.fixture;
    const std::string dir = test::test_data(std::string("../") + (fixture + std::strlen("tests/")));
    std::unique_ptr<ModelDescription> d = describe_model(dir);
    const ModelConfig &c = d->plan.config;
    assert_string_equal(family_name(c.family), f.name);
    std::string text = read_small_file(dir + "/reference.json", 4 << 20);
    simdjson::dom::parser parser;
    simdjson::dom::element root = parser.parse(text);
    int checked = 0;
    for (simdjson::dom::element rec : root["layers"].get_array()) {
        Layer L{*d, int32_t(int64_t(rec["layer"]))};
        size_t T = 0, T2 = 0;
        Mat ain = json_mat(rec["attn_in"], &T), aout = json_mat(rec["attn_out"], &T2);
        Mat got = attention(L, c, ain, T);
        double e = rel_err(got, aout);
        print_message("%s layer %d attention: max rel error %.2e\n", f.name, L.layer, e);
        if (!(e < kTol)) fail_msg("%s layer %d: attention differs from transformers' (%.3g)", f.name, L.layer, e);
        if (c.mla)  // the recorded approximation: the stages' composed matrices without the latent 1 / rms
            print_message("%s layer %d attention from the composed W_Q/W_K/W_V/W_O alone: max rel error %.2e\n", f.name, L.layer,
                          rel_err(attention(L, c, ain, T, false), aout));
        Mat fin = json_mat(rec["ffn_in"], &T), fout = json_mat(rec["ffn_out"], &T2);
        got = ffn_block(L, c, fin, T);
        e = rel_err(got, fout);
        print_message("%s layer %d FFN: max rel error %.2e\n", f.name, L.layer, e);
        if (!(e < kTol)) fail_msg("%s layer %d: FFN differs from transformers' (%.3g)", f.name, L.layer, e);
        checked++;
    }
    assert_true(checked > 0);
}

void every_family_matches_transformers(void **) {
    int n = 0;
    for (uint32_t i = 1; i < kFamilyCount; i++) {
        const FamilyDef &f = *kFamilyDefs[i];
        if (std::strncmp(f.fixture, "tests/fixtures/families/", 24) != 0) continue;
        check_family(f);
        n++;
    }
    // The same family as the hub ships it: gpt-oss's experts in MXFP4 blocks, loaded by transformers
    // through its own dequantisation (Mxfp4Config(dequantize=True)).
    check_family(family_def(family_by_name("gpt_oss")), "tests/fixtures/families/gpt_oss_mxfp4");
    // Falcon's older RW layout (per-head fused QKV, ALiBi, sequential block) beside the new decoder.
    check_family(family_def(family_by_name("falcon")), "tests/fixtures/families/falcon_rw");
    print_message("%d families checked against transformers\n", n);
    assert_true(n > 0);
}

// memory_fit's RoPE angles against transformers' own initialisers (rope_reference.json): llama3
// (Llama 3.1), yarn (Qwen2.5; gpt-oss's untruncated yarn), linear, longrope at the full context (Phi-3 128k).
void rope_scaling_matches_transformers(void **) {
    const std::string path = test::test_data("../fixtures/families/rope_reference.json");
    std::string text = read_small_file(path, 1 << 20);
    simdjson::dom::parser parser;
    simdjson::dom::element root = parser.parse(text);
    int n = 0;
    for (auto kv : root.get_object()) {
        std::string cfg = simdjson::minify(kv.value["config"]);
        // The reference configs name no vocabulary or layers: the ones the parse needs.
        cfg.insert(1, "\"vocab_size\": 256, \"num_hidden_layers\": 2, \"intermediate_size\": 64, ");
        ModelConfig c = parse_model_config(cfg, std::string(kv.key)).config;
        std::vector<double> theta;
        std::string note;
        uint32_t m = rope_angles(c, theta, &note);
        std::vector<double> want;
        for (simdjson::dom::element v : kv.value["inv_freq"].get_array()) want.push_back(double(v));
        assert_int_equal(m, want.size());
        double worst = 0;
        for (uint32_t i = 0; i < m; i++) worst = std::max(worst, std::fabs(theta[i] - want[i]) / want[i]);
        print_message("%.*s: %u angles, max rel error %.2e%s%s\n", int(kv.key.size()), kv.key.data(), m, worst,
                      note.empty() ? "" : "; note: ", note.c_str());
        if (!(worst < 1e-6))
            fail_msg("%.*s: RoPE angles differ from transformers' (%.3g)", int(kv.key.size()), kv.key.data(), worst);
        n++;
    }
    assert_int_equal(n, 5);
}

// DeepSeek-V3 as the hub ships it: block-scaled fp8 matrices (tests/fixtures/fp8/generate.py
// quantises the deepseek_v3 fixture).  Same parameters as the bf16 model (the scales are buffers),
// q_a_proj read bytes-equal to transformers' dequantisation, the MLA composition runs on it.
void fp8_deepseek_v3_model(void **) {
    std::unique_ptr<ModelDescription> q = describe_model(test::test_data("../fixtures/fp8/deepseek_v3"));
    std::unique_ptr<ModelDescription> b = describe_model(test::test_data("../fixtures/families/deepseek_v3"));
    assert_int_equal(q->plan.config.fp8_block[0], 128);
    assert_int_equal(q->plan.n_params, b->plan.n_params);
    assert_int_equal(q->plan.n_params, q->plan.n_params_expected);
    assert_true(q->plan.n_buffers > b->plan.n_buffers);
    Layer L{*q, 1};
    Mat got = L.get(Role::MLA_Q_A);
    auto ref = open_checkpoint(test::test_data("../fixtures/fp8/deepseek_v3/reference.safetensors"));
    const TensorRef &r = ref->tensors().at(0);
    std::vector<uint8_t> scratch;
    std::vector<float> want(r.n_elements);
    convert_to_f32(r, ref->tensor_bytes(r, scratch), 0, r.n_elements, want.data());
    assert_int_equal(got.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) assert_true(float(got[i]) == want[i]);
    Mat k = L.stage(Role::K);
    assert_int_equal(k.size(), uint64_t(q->plan.config.n_heads) * q->plan.config.head_dim * q->plan.config.d_model);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_family_matches_transformers),
        cmocka_unit_test(rope_scaling_matches_transformers),
        cmocka_unit_test(fp8_deepseek_v3_model),
    };
    return cmocka_run_group_tests_name("families", tests, nullptr, nullptr);
}
