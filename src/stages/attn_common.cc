#include "stages/attn_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/prng.h"
#include "kernels/elementwise.h"
#include "kernels/linalg.h"
#include "kernels/random.h"

namespace stk {

AttnShape attn_shape(const ModelConfig &c) {
    AttnShape s;
    s.d_model = c.d_model;
    s.n_layers = c.n_layers;
    s.n_heads = c.n_heads;
    s.n_kv_heads = c.n_kv_heads ? c.n_kv_heads : c.n_heads;
    s.head_dim = c.head_dim;
    if (!s.d_model || !s.n_layers || !s.n_heads || !s.head_dim)
        throw_error(STK_E_BAD_JSON, "config: d_model %u, layers %u, heads %u, head_dim %u: the attention stages need all four",
                    s.d_model, s.n_layers, s.n_heads, s.head_dim);
    if (s.n_heads % s.n_kv_heads)
        throw_error(STK_E_BAD_JSON, "config: %u heads is not a multiple of %u key/value heads", s.n_heads, s.n_kv_heads);
    s.d_kv = uint64_t(s.n_kv_heads) * s.head_dim;
    s.d_v = uint64_t(s.n_heads) * s.head_dim;
    return s;
}

void check_attention_params(const stk_job_params &p, const AttnShape &s) {
    if (p.r < 8 || p.r > 4096 || (p.r & 1))
        throw_error(STK_E_INVALID_ARGUMENT, "r = %u: the PRF rank must be even and in [8, 4096]", p.r);
    uint64_t cap = std::min<uint64_t>({p.r, s.d_v, s.d_model});
    if (p.rv < 1 || p.rv > cap)
        throw_error(STK_E_INVALID_ARGUMENT, "rv = %u: the overlay rank must be in [1, min(r %u, d_v %llu, d_model %u)]", p.rv,
                    p.r, (unsigned long long)s.d_v, s.d_model);
}

WeightReader::WeightReader(const Checkpoint &ckpt, const ModelPlan &plan, unsigned threads)
    : plan_(plan), ckpt_(ckpt), threads_(threads ? threads : 1) {
    // The plan's source indices point into this checkpoint's tensor list.
    for (uint32_t i = 0; i < plan.n_tensors; i++)
        if (plan.tensors[i].source >= ckpt_.tensors().size())
            throw_error(STK_E_INTERNAL, "the plan names tensor %u; the checkpoint has %zu", plan.tensors[i].source,
                        ckpt_.tensors().size());
}

WeightReader::~WeightReader() = default;

const PlanTensor *WeightReader::find(Role role, int32_t layer) const {
    if (plan_.config.mla)
        for (uint32_t i = plan_.n_streamed; i < plan_.n_tensors; i++) {
            const PlanTensor &t = plan_.tensors[i];
            if (t.composed && t.role == role && t.layer == layer) return &t;
        }
    for (uint32_t i = 0; i < plan_.n_streamed; i++) {
        const PlanTensor &t = plan_.tensors[i];
        if (t.role == role && t.layer == layer && t.expert == kNoExpert) return &t;
    }
    return nullptr;
}

const PlanTensor &WeightReader::require(Role role, int32_t layer, uint64_t rows, uint64_t cols) const {
    const PlanTensor *t = find(role, layer);
    if (!t)
        throw_error(STK_E_PARAM_COUNT, "layer %d has no %s tensor: the attention stages need it", int(layer), role_name(role));
    if (t->rank != 2 || t->dims[0] != rows || t->dims[1] != cols)
        throw_error(STK_E_PARAM_COUNT, "tensor '%s' (%s, layer %d) has shape [%llu, %llu]; expected [%llu, %llu]", t->name,
                    role_name(role), int(layer), (unsigned long long)t->dims[0],
                    (unsigned long long)(t->rank == 2 ? t->dims[1] : 1), (unsigned long long)rows, (unsigned long long)cols);
    return *t;
}

void WeightReader::read(const PlanTensor &t, float *out, float *row_scratch) {
    if (t.composed) return compose_mla(t, out, row_scratch);
    const TensorRef &src = ckpt_.tensors()[t.source];
    const uint8_t *bytes = ckpt_.tensor_bytes(src, inflate_);
    materialize_f32(t, src, bytes, out, row_scratch);
    ckpt_.release(src);
}

const PlanTensor &WeightReader::factor(Role role, NormSlot slot, int32_t layer) const {
    for (uint32_t i = 0; i < plan_.n_streamed; i++) {
        const PlanTensor &t = plan_.tensors[i];
        if (t.role == role && t.slot == slot && t.layer == layer && t.expert == kNoExpert) return t;
    }
    throw_error(STK_E_PARAM_COUNT, "layer %d has no %s%s%s tensor: the MLA attention is composed from it", int(layer),
                role_name(role), slot == NormSlot::None ? "" : " ", norm_slot_name(slot));
}

void WeightReader::read_factor(Role role, NormSlot slot, int32_t layer, std::vector<float> &buf, float *row_scratch) {
    const PlanTensor &t = factor(role, slot, layer);
    buf.resize(size_t(t.n_elements));
    read(t, buf.data(), row_scratch);
}

// The layout the stages read (family deepseek, ingest/families/deepseek.cc): head h holds rows
// [h * hd, (h + 1) * hd): its rotary rows first - de-interleaved when the checkpoint pairs
// (2i, 2i + 1), so that RoPE pairs (i, i + rope / 2) as for every other family; q and k are
// permuted alike, so q . k is unchanged - times yarn's cos/sin factor, then the nope rows, then
// zero rows up to hd.  V: the v rows, then zeros; O: the stored columns of head h, then zero columns.
void WeightReader::compose_mla(const PlanTensor &t, float *out, float *row_scratch) {
    const ModelConfig &c = plan_.config;
    const uint64_t H = c.n_heads, hd = c.head_dim, nope = c.qk_nope_dim, rope = c.qk_rope_dim, vd = c.v_head_dim;
    const uint64_t d = c.d_model, kr = c.kv_lora_rank, qk = nope + rope, kvw = nope + vd;
    const int32_t l = t.layer;
    const float gain = float(c.mla_rope_gain);
    // Row p of the stored rotary block that composed rotary row j holds.
    auto rot_src = [&](uint64_t j) { return !c.mla_rope_interleaved ? j : j < rope / 2 ? 2 * j : 2 * (j - rope / 2) + 1; };
    auto zero_rows = [&](float *p, uint64_t rows) { std::memset(p, 0, size_t(rows * d) * sizeof(float)); };
    // diag(g) A for the latent RMSNorm's gain g (rows of A).
    auto fold_gain = [&](std::vector<float> &a, const std::vector<float> &g, uint64_t rows) {
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t j = 0; j < d; j++) a[size_t(r * d + j)] *= g[size_t(r)];
    };
    // out rows (m of them, stride d) = B[m, k] A[k, d] (row-major, B's rows ldb apart).
    auto gemm = [&](uint64_t m, uint64_t k, const float *B, uint64_t ldb, const float *A, float *C) {
        if (m == 0) return;
        kernels::sgemm(false, false, size_t(m), size_t(d), size_t(k), 1.0f, B, ptrdiff_t(ldb), 1, A, ptrdiff_t(d), 1, 0.0f, C,
                       ptrdiff_t(d), 1, threads_);
    };
    if (t.role == Role::O) {
        // The stored [d, H * vd] read into out, then spread in place from the end (each head's
        // columns move right, never over ones not yet moved): no scratch.
        read(factor(Role::O, NormSlot::None, l), out, row_scratch);
        for (uint64_t r = d; r-- > 0;)
            for (uint64_t h = H; h-- > 0;) {
                float *dst = out + r * H * hd + h * hd;
                std::memmove(dst, out + r * H * vd + h * vd, size_t(vd) * sizeof(float));
                std::memset(dst + vd, 0, size_t(hd - vd) * sizeof(float));
            }
        return;
    }
    if (t.role == Role::Q) {
        // Qfull[H * qk, d] = q_b diag(g) q_a, or the stored q_proj; head by head into tmp_.
        const bool lora = c.q_lora_rank != 0;
        const uint64_t qr = c.q_lora_rank;
        if (lora) {
            read_factor(Role::MLA_Q_A, NormSlot::None, l, fa_, row_scratch);
            read_factor(Role::LN_G, NormSlot::QLora, l, fg_, row_scratch);
            fold_gain(fa_, fg_, qr);
            read_factor(Role::MLA_Q_B, NormSlot::None, l, fb_, row_scratch);
        } else {
            read_factor(Role::Q, NormSlot::None, l, fb_, row_scratch);  // the stored q_proj (streamed)
        }
        tmp_.resize(size_t(qk * d));
        for (uint64_t h = 0; h < H; h++) {
            const float *head = lora ? nullptr : fb_.data() + h * qk * d;
            if (lora) {
                gemm(qk, qr, fb_.data() + h * qk * qr, qr, fa_.data(), tmp_.data());
                head = tmp_.data();
            }
            float *dst = out + h * hd * d;
            for (uint64_t j = 0; j < rope; j++) {
                const float *src = head + (nope + rot_src(j)) * d;
                for (uint64_t x = 0; x < d; x++) dst[j * d + x] = src[x] * gain;
            }
            std::memcpy(dst + rope * d, head, size_t(nope * d) * sizeof(float));
            zero_rows(dst + qk * d, hd - qk);
        }
        return;
    }
    // K and V: kv_b diag(g) kv_a[:kr], the shared rotary rows kv_a[kr:] in K.
    read_factor(Role::MLA_KV_A, NormSlot::None, l, fa_, row_scratch);
    read_factor(Role::LN_G, NormSlot::KvLora, l, fg_, row_scratch);
    read_factor(Role::MLA_KV_B, NormSlot::None, l, fb_, row_scratch);
    fold_gain(fa_, fg_, kr);
    for (uint64_t h = 0; h < H; h++) {
        float *dst = out + h * hd * d;
        const float *b = fb_.data() + h * kvw * kr;
        if (t.role == Role::K) {
            for (uint64_t j = 0; j < rope; j++) {
                const float *src = fa_.data() + (kr + rot_src(j)) * d;
                for (uint64_t x = 0; x < d; x++) dst[j * d + x] = src[x] * gain;
            }
            gemm(nope, kr, b, kr, fa_.data(), dst + rope * d);
            zero_rows(dst + qk * d, hd - qk);
        } else {
            gemm(vd, kr, b + nope * kr, kr, fa_.data(), dst);
            zero_rows(dst + vd * d, hd - vd);
        }
    }
}

const uint8_t *WeightReader::stored_bytes(const PlanTensor &t) { return ckpt_.tensor_bytes(ckpt_.tensors()[t.source], inflate_); }

void WeightReader::release(const PlanTensor &t) { ckpt_.release(ckpt_.tensors()[t.source]); }

// ---- PRF --------------------------------------------------------------------------------------

double prf_tau(const AttnShape &s) { return std::sqrt(double(s.head_dim)); }

uint64_t prf_stream(uint64_t master_seed, uint32_t layer) { return stream_seed(master_seed, kernels::kStreamPrf, layer); }

void whitening_diagonal(const float *wk, uint64_t rows, uint64_t cols, double *d) {
    for (uint64_t j = 0; j < cols; j++) d[j] = 0;
    for (uint64_t i = 0; i < rows; i++) kernels::accumulate_squares(wk + i * cols, d, size_t(cols));
    for (uint64_t j = 0; j < cols; j++) {
        double m = d[j] / double(rows);
        d[j] = m > kWhiteningEps ? m : kWhiteningEps;
    }
}

void prf_rows_range(uint64_t stream, const double *d, uint64_t i0, uint64_t i1, uint64_t cols, float *out, double *scratch) {
    for (uint64_t i = i0; i < i1; i++) {
        kernels::gaussians(stream, i * cols, size_t(cols), scratch);
        kernels::scale_by_sqrt_to_f32(scratch, d, out + (i - i0) * cols, size_t(cols));
    }
}

void prf_rows_range_sqrt(uint64_t stream, const double *sqrt_d, uint64_t i0, uint64_t i1, uint64_t cols, float *out,
                         double *scratch) {
    for (uint64_t i = i0; i < i1; i++) {
        float *row = out + (i - i0) * cols;
        if (cols % 2 == 0) {  // the row starts on a pair: draws and scaling in one pass
            kernels::scaled_gaussian_pairs(stream, i * cols / 2, size_t(cols / 2), sqrt_d, row);
        } else {
            kernels::gaussians(stream, i * cols, size_t(cols), scratch);
            for (uint64_t j = 0; j < cols; j++) row[j] = float(scratch[j] * sqrt_d[j]);
        }
    }
}

void prf_rows(uint64_t stream, const double *d, uint64_t r, uint64_t cols, float *out, double *scratch) {
    prf_rows_range(stream, d, 0, r, cols, out, scratch);
}

double expected_denominator(const double *d, uint64_t n, double tau) {
    double log_e = 0;
    for (uint64_t j = 0; j < n; j++) {
        double x = d[j] / tau;
        if (!(x < 1)) return INFINITY;
        log_e += -0.5 * std::log1p(-x * x);
    }
    return std::exp(log_e);
}

// ---- Positional memory ------------------------------------------------------------------------

void rope_energy_kernel(WeightReader &reader, const AttnShape &s, const std::vector<double> &theta, size_t n, float *wq,
                        float *wk, float *row_scratch, double *h) {
    const size_t half = theta.size();  // pair i = rows (i, i + rotary_dim / 2) of a head block
    std::vector<double> e(half, 0.0);
    auto row2 = [&](const float *W, uint64_t row) {
        double a = 0;
        for (uint64_t j = 0; j < s.d_model; j++) a += double(W[row * s.d_model + j]) * double(W[row * s.d_model + j]);
        return a;
    };
    for (uint32_t l = 0; l < s.n_layers; l++) {
        reader.read(reader.require(Role::Q, int32_t(l), s.d_v, s.d_model), wq, row_scratch);
        reader.read(reader.require(Role::K, int32_t(l), s.d_kv, s.d_model), wk, row_scratch);
        for (uint32_t head = 0; head < s.n_heads; head++) {
            const uint32_t kvh = head / (s.n_heads / s.n_kv_heads);
            for (size_t i = 0; i < half; i++) {
                double qn = row2(wq, uint64_t(head) * s.head_dim + i) + row2(wq, uint64_t(head) * s.head_dim + i + half);
                double kn = row2(wk, uint64_t(kvh) * s.head_dim + i) + row2(wk, uint64_t(kvh) * s.head_dim + i + half);
                e[i] += std::sqrt(qn * kn);
            }
        }
    }
    double et = 0;
    for (double x : e) et += x;
    for (size_t t = 0; t < n; t++) {
        double acc = 0;
        for (size_t i = 0; i < half; i++) acc += e[i] * std::cos(theta[i] * double(t));
        h[t] = et > 0 ? acc / et : 0;
    }
}

size_t fit_sos_workspace(size_t n) {
    const size_t m = 2 * kMaxSections;
    size_t lp = n * m + n + kernels::lstsq_workspace(n, m);
    size_t roots = m * m + 2 * m + kernels::gen_eig_workspace(m);
    size_t num = n * m + n + kernels::lstsq_workspace(n, m) + n * 2;
    return lp + roots + num + 64;
}

namespace {

struct Root {
    double re, im;
};

// Group roots into sections: each complex pair (im > 0 representative) one section; real roots
// by value descending, paired; an odd one left is a first-order section.
uint32_t sections_from_roots(Root *roots, uint32_t m, SosSection *out) {
    std::sort(roots, roots + m, [](const Root &a, const Root &b) {
        bool ca = a.im != 0, cb = b.im != 0;
        if (ca != cb) return ca;  // complex first
        if (a.re != b.re) return a.re > b.re;
        return a.im > b.im;
    });
    uint32_t k = 0, i = 0;
    for (; i < m && roots[i].im != 0; i++) {
        if (roots[i].im < 0) continue;  // the conjugate's section is made from the positive one
        out[k].a1 = 2 * roots[i].re;
        out[k].a2 = -(roots[i].re * roots[i].re + roots[i].im * roots[i].im);
        k++;
    }
    for (; i + 1 < m; i += 2, k++) {
        out[k].a1 = roots[i].re + roots[i + 1].re;
        out[k].a2 = -roots[i].re * roots[i + 1].re;
    }
    if (i < m) {
        out[k].a1 = roots[i].re;
        out[k].a2 = 0;
        k++;
    }
    return k;
}

// Impulse response of 1 / (1 - a1 z^-1 - a2 z^-2).
void denominator_response(const SosSection &s, size_t n, double *g) {
    for (size_t t = 0; t < n; t++) {
        double v = t == 0 ? 1.0 : 0.0;
        if (t >= 1) v += s.a1 * g[t - 1];
        if (t >= 2) v += s.a2 * g[t - 2];
        g[t] = v;
    }
}

}  // namespace

SosFit fit_sos(const double *h, size_t n, uint32_t max_sections, double *work, size_t work_len) {
    if (work_len < fit_sos_workspace(n)) throw_error(STK_E_INTERNAL, "fit_sos: workspace too small");
    if (max_sections > kMaxSections) max_sections = kMaxSections;
    double norm = 0;
    for (size_t t = 0; t < n; t++) norm += h[t] * h[t];
    norm = std::sqrt(norm);
    SosFit best;
    best.rel_l2 = INFINITY;
    if (!(norm > 0) || n < 4) return best;

    for (uint32_t order = 2; order <= 2 * max_sections; order += 2) {
        // Linear prediction needs n - order >= order equations; the numerators 2K <= n.
        if (n < 2 * size_t(order) + 1) break;
        double *w = work;
        const size_t rows = n - order;
        double *A = w;
        w += rows * order;
        double *b = w;
        w += n;
        for (size_t t = 0; t < rows; t++) {
            for (uint32_t i = 0; i < order; i++) A[i * rows + t] = h[order + t - 1 - i];
            b[t] = h[order + t];
        }
        size_t lw = kernels::lstsq_workspace(rows, order);
        double *lwk = w;
        w += lw;
        kernels::least_squares(rows, order, A, rows, b, lwk, lw);
        bool ok = kernels::all_finite(b, order);
        if (!ok) continue;
        // Companion matrix of z^m - c1 z^{m-1} - ... - cm.
        double *C = w;
        w += order * order;
        double *wr = w;
        w += order;
        double *wi = w;
        w += order;
        for (uint32_t i = 0; i < order * order; i++) C[i] = 0;
        for (uint32_t j = 0; j < order; j++) C[j * order + 0] = b[j];       // first row
        for (uint32_t i = 1; i < order; i++) C[(i - 1) * order + i] = 1.0;  // sub-diagonal
        size_t ew = kernels::gen_eig_workspace(order);
        kernels::general_eigenvalues(order, C, order, wr, wi, w, ew);
        w += ew;
        Root roots[2 * kMaxSections];
        for (uint32_t i = 0; i < order; i++) roots[i] = Root{wr[i], wi[i]};
        SosFit fit;
        fit.n_sections = sections_from_roots(roots, order, fit.sections);
        // 18.3: scale an unstable section's AR coefficients by 0.95, at most 3 times; a pole
        // still outside is moved to radius 0.999 (counted).
        for (uint32_t k = 0; k < fit.n_sections; k++) {
            SosSection &s = fit.sections[k];
            for (int step = 0; step < 4; step++) {
                double hi, lo;
                memory_pole_radii(&s, 1, &hi, &lo);
                if (hi < 1) break;
                if (step == 3) {
                    fit.clamped++;
                    if (s.a2 == 0) {
                        s.a1 = s.a1 > 0 ? 0.999 : -0.999;
                    } else if (s.a1 * s.a1 + 4 * s.a2 < 0) {
                        double r = std::sqrt(-s.a2), c = s.a1 / (2 * r);
                        s.a1 = 2 * 0.999 * c;
                        s.a2 = -0.999 * 0.999;
                    } else {  // two real poles: clamp each
                        double sq = std::sqrt(s.a1 * s.a1 + 4 * s.a2);
                        double p1 = std::clamp((s.a1 + sq) / 2, -0.999, 0.999), p2 = std::clamp((s.a1 - sq) / 2, -0.999, 0.999);
                        s.a1 = p1 + p2;
                        s.a2 = -p1 * p2;
                    }
                    break;
                }
                s.a1 *= 0.95;
                s.a2 *= 0.95;
                fit.scale_steps++;
            }
        }
        // Numerators: least squares over the basis g_k[t], g_k[t-1].
        const uint32_t K = fit.n_sections, unknowns = 2 * K;
        double *B = w;
        w += n * unknowns;
        double *rhs = w;
        w += n;
        double *g = w;
        w += n;
        for (uint32_t k = 0; k < K; k++) {
            denominator_response(fit.sections[k], n, g);
            for (size_t t = 0; t < n; t++) {
                B[(2 * k) * n + t] = g[t];
                B[(2 * k + 1) * n + t] = t ? g[t - 1] : 0.0;
            }
        }
        for (size_t t = 0; t < n; t++) rhs[t] = h[t];
        size_t lw2 = kernels::lstsq_workspace(n, unknowns);
        kernels::least_squares(n, unknowns, B, n, rhs, w, lw2);
        if (!kernels::all_finite(rhs, unknowns)) continue;
        for (uint32_t k = 0; k < K; k++) {
            fit.sections[k].b0 = rhs[2 * k];
            fit.sections[k].b1 = rhs[2 * k + 1];
        }
        // Error of the fitted bank, run through the runtime's own step.
        double *y = g;
        memory_impulse_response(fit.sections, K, n, y, nullptr);
        double err = 0;
        for (size_t t = 0; t < n; t++) err += (y[t] - h[t]) * (y[t] - h[t]);
        fit.rel_l2 = std::sqrt(err) / norm;
        if (!std::isfinite(fit.rel_l2)) continue;
        memory_pole_radii(fit.sections, K, &fit.max_radius, &fit.min_radius);
        if (fit.rel_l2 < best.rel_l2) best = fit;
        if (best.rel_l2 <= 1e-4) break;
    }
    return best;
}

}  // namespace stk
