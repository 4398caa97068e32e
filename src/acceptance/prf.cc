// 16.1: the PRF estimator against the softmax kernel (docs/decisions.md "Acceptance 16.1").
//
// Gating: (a) the published prf_W is exactly what the stage's generator gives for the model's
// W_K (when the model directory is given); (b) the estimator law, over 1000 seeded redraws of
// the shipped generator (prf_rows, the stage's own code): for x, y with |x+y|_D^2 in {0.1, 0.5,
// 1}, the mean of phi(x).phi(y) is within 3 standard errors of exp(x^T D y) and its variance
// within 15 % of exp(2 x^T D y) (exp(|x+y|_D^2) - 1) / r.  A wrong normalisation (|x|^2 where
// |x|_D^2 belongs, or a missing sqrt(D)) fails (b).
// Reported: the model-scale figure: per layer, q/k/v through the layer's own W_Q/W_K/W_V from
// x = attention-norm gain * N(0, I), 32 keys, tau = sqrt(head_dim) * T for T in {1, 4, 16, 64},
// r in {256, 512, 1024} (nested draws), 100 trials per head, relative L2 of the attention
// output against exact softmax, averaged over heads and trials; never gating: 1e-2 is shown
// beside E|q+k|^2/tau, which says whether it is reachable.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "acceptance/acceptance.h"
#include "acceptance/runner.h"
#include "core/error.h"
#include "core/prng.h"
#include "format/array.h"
#include "format/manifest.h"
#include "kernels/random.h"
#include "stages/attn_common.h"

namespace stk {

namespace {

constexpr uint32_t kEstimatorTrials = 1000;
constexpr uint32_t kEstimatorDims = 64;  // the law depends on D only through x^T D y, |x+y|_D
constexpr uint32_t kScaleTrials = 100;
constexpr uint32_t kScaleKeys = 32;
constexpr uint64_t kAcceptanceSeed = 0x5354'4B5F'3136'2E31ull;  // "STK_16.1"

bool has_array(const Manifest &m, const char *name) {
    for (const ManifestArray &a : m.arrays)
        if (!std::strcmp(a.name, name)) return true;
    return false;
}

std::string fmt(const char *f, double a, double b = 0, double c = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, f, a, b, c);
    return buf;
}

void estimator_rows(const double *dfull, uint64_t dmodel, uint32_t r, const std::string &dsrc, std::vector<AcceptanceRow> &rows) {
    const uint32_t n = uint32_t(std::min<uint64_t>(dmodel, kEstimatorDims));
    std::vector<double> D(dfull, dfull + n), u(n), v(n), x(n), y(n), scratch(n);
    std::vector<float> W(size_t(r) * n);
    const double targets[3] = {0.1, 0.5, 1.0};
    for (int ti = 0; ti < 3; ti++) {
        const uint64_t vs = stream_seed(kAcceptanceSeed, kernels::kStreamAcceptancePrf, uint32_t(ti));
        kernels::gaussians(vs, 0, n, u.data());
        kernels::gaussians(vs, n, n, v.data());
        double s2 = 0;
        for (uint32_t j = 0; j < n; j++) s2 += (u[j] + v[j]) * (u[j] + v[j]) * D[j];
        const double c = std::sqrt(targets[ti] / s2);
        double xdy = 0, xx = 0, yy = 0;
        for (uint32_t j = 0; j < n; j++) {
            x[j] = c * u[j];
            y[j] = c * v[j];
            xdy += x[j] * D[j] * y[j];
            xx += x[j] * D[j] * x[j];
            yy += y[j] * D[j] * y[j];
        }
        const double exact = std::exp(xdy);
        const double var_formula = std::exp(2 * xdy) * (std::exp(targets[ti]) - 1) / r;
        double sum = 0, sum2 = 0;
        for (uint32_t t = 0; t < kEstimatorTrials; t++) {
            prf_rows(stream_seed(kAcceptanceSeed, kernels::kStreamAcceptancePrf, 1000 + t), D.data(), r, n, W.data(),
                     scratch.data());
            double est = 0;
            for (uint32_t i = 0; i < r; i++) {
                double wx = 0, wy = 0;
                for (uint32_t j = 0; j < n; j++) {
                    wx += double(W[size_t(i) * n + j]) * x[j];
                    wy += double(W[size_t(i) * n + j]) * y[j];
                }
                est += std::exp(wx - xx / 2) * std::exp(wy - yy / 2);
            }
            est /= r;
            sum += est;
            sum2 += est * est;
        }
        const double mean = sum / kEstimatorTrials;
        const double var = (sum2 - kEstimatorTrials * mean * mean) / (kEstimatorTrials - 1);
        const double se = std::sqrt(var / kEstimatorTrials);
        char def[256];
        std::snprintf(def, sizeof def,
                      "phi_D estimator of exp(x^T D y), |x+y|_D^2 = %.1f, r = %u, %u seeded redraws of prf_rows, D: %s",
                      targets[ti], r, kEstimatorTrials, dsrc.c_str());
        rows.push_back(acceptance_row(fmt("16.1 prf-estimator-mean |x+y|^2=%.1f", targets[ti]), def, std::fabs(mean - exact) / se,
                                      3, "<=", true,
                                      fmt("mean %.6g vs exp(x^T D y) %.6g (standard error %.3g)", mean, exact, se)));
        rows.push_back(acceptance_row(fmt("16.1 prf-estimator-var |x+y|^2=%.1f", targets[ti]), def,
                                      std::fabs(var / var_formula - 1), 0.15, "<=", true,
                                      fmt("variance %.4g vs formula %.4g", var, var_formula)));
    }
}

}  // namespace

void acceptance_prf(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows) {
    Manifest m = read_manifest(ctx.out_dir + "/" + kManifestFileName);
    if (!m.fields.prf.r || !has_array(m, "prf_W.bin")) return;
    ArrayReader prf(ctx.out_dir + "/arrays/prf_W.bin");
    const ArrayHeader &h = prf.header();
    if (h.rank != 3 || h.dtype != uint16_t(DType::F32))
        throw_error(STK_E_CORRUPT, "prf_W.bin: rank %u dtype %u, expected a [L, r, d_model] f32 array", h.rank, h.dtype);
    const uint64_t L = h.dims[0], r = h.dims[1], d = h.dims[2];

    if (ctx.model_dir.empty()) {
        std::vector<double> D(d);
        for (uint64_t j = 0; j < d; j++) D[j] = (j % 16 == 0) ? 6.4e-3 : 4e-4;  // weight-like, with outlier columns
        estimator_rows(D.data(), d, uint32_t(r), "synthetic 4e-4 with every 16th column 6.4e-3", rows);
        rows.push_back(acceptance_skipped("16.1 model-scale", "attention output through the published PRF on the model's weights",
                                          "needs the model directory (--model DIR)"));
        return;
    }

    const ModelDescription *desc = &acceptance_model(ctx);
    const ModelPlan &plan = desc->plan;
    const AttnShape s = attn_shape(plan.config);
    if (s.d_model != d || s.n_layers != L)
        throw_error(STK_E_INVALID_ARGUMENT, "%s is not the model of %s (d_model %u vs %llu)", ctx.model_dir.c_str(),
                    ctx.out_dir.c_str(), s.d_model, (unsigned long long)d);
    WeightReader reader(*desc->checkpoint, plan);
    std::vector<float> wk(size_t(s.d_kv * d)), wq(size_t(s.d_v * d)), wv(size_t(s.d_kv * d)),
        rows_scratch(size_t(plan.max_row_floats + 1));
    std::vector<double> D(d), grow(d);
    std::vector<float> regen(size_t(r * d));
    uint32_t mismatched = 0;
    std::vector<double> d0;
    for (uint32_t l = 0; l < L; l++) {
        acceptance_progress(ctx, "16.1 prf: prf_W of layer " + std::to_string(l + 1) + "/" + std::to_string(L));
        reader.read(reader.require(Role::K, int32_t(l), s.d_kv, d), wk.data(), rows_scratch.data());
        whitening_diagonal(wk.data(), s.d_kv, d, D.data());
        if (l == 0) d0 = D;
        prf_rows(prf_stream(0, l), D.data(), r, d, regen.data(), grow.data());
        if (std::memcmp(regen.data(), prf.payload() + size_t(l) * r * d * 4, size_t(r * d * 4))) mismatched++;
    }
    // A calibrated generation's whitener D was fitted to the statistics (prf_build), not taken
    // from W_K: the data-free generator is not its reference; 16.5 reruns the whole conversion.
    const std::string calib = acceptance_calibration_sha256(ctx.out_dir);
    if (!calib.empty())
        rows.push_back(acceptance_calibrated("16.1 prf_W-reproducible",
                                             "published prf_W == the generator on the model's W_K, every layer", calib,
                                             ctx.calibration.empty()
                                                 ? "give --calibration STATS: 16.5 published/rerun then compares prf_W "
                                                   "with a rerun on them"
                                                 : "16.5 published/rerun compares prf_W with a rerun on them"));
    else
        rows.push_back(acceptance_row("16.1 prf_W-reproducible",
                                      "published prf_W == the generator on the model's W_K, every layer", mismatched, 0, "<=",
                                      true, fmt("%.0f of %.0f layers differ", mismatched, double(L))));
    estimator_rows(d0.data(), d, uint32_t(r), "layer 0 whitening diagonal of the model", rows);

    // Model scale.
    const uint32_t hd = s.head_dim, kRmax = 1024;
    const uint32_t rs[3] = {256, 512, 1024};
    const double temps[4] = {1, 4, 16, 64};
    std::vector<double> gain(d), xs(size_t(kScaleKeys + 1) * d), q(hd), k(size_t(kScaleKeys) * hd), v(size_t(kScaleKeys) * hd),
        w(size_t(kRmax) * hd), aq(kRmax), ak(size_t(kRmax) * kScaleKeys), exact(hd), approx(hd), logits(kScaleKeys),
        kn(kScaleKeys), kw(kScaleKeys);
    for (uint32_t l = 0; l < L; l++) {
        acceptance_progress(ctx, "16.1 prf: model scale, layer " + std::to_string(l + 1) + "/" + std::to_string(L));
        reader.read(reader.require(Role::Q, int32_t(l), s.d_v, d), wq.data(), rows_scratch.data());
        reader.read(reader.require(Role::K, int32_t(l), s.d_kv, d), wk.data(), rows_scratch.data());
        reader.read(reader.require(Role::V, int32_t(l), s.d_kv, d), wv.data(), rows_scratch.data());
        std::fill(gain.begin(), gain.end(), 1.0);
        for (uint32_t i = 0; i < plan.n_streamed; i++) {
            const PlanTensor &t = plan.tensors[i];
            if (t.role == Role::LN_G && t.slot == NormSlot::Attn && t.layer == int32_t(l) && t.dims[0] == d) {
                std::vector<float> g(d);
                reader.read(t, g.data(), rows_scratch.data());
                for (uint64_t j = 0; j < d; j++) gain[j] = plan.config.norm_offset + g[j];  // Gemma: the gain is 1 + w
            }
        }
        double err[3][4] = {}, spread[4] = {};
        for (uint32_t head = 0; head < s.n_heads; head++) {
            const uint32_t kvh = head / (s.n_heads / s.n_kv_heads);
            for (uint32_t t = 0; t < kScaleTrials; t++) {
                const uint64_t seed =
                    stream_seed(kAcceptanceSeed, kernels::kStreamAcceptancePrf, 0x10000u + (l * 4096u + head) * 1024u + t);
                kernels::gaussians(seed, 0, xs.size(), xs.data());
                for (uint32_t kk = 0; kk <= kScaleKeys; kk++)
                    for (uint64_t j = 0; j < d; j++) xs[kk * d + j] *= gain[j];
                auto proj = [&](const std::vector<float> &W, uint32_t row0, const double *x, double *out) {
                    for (uint32_t i = 0; i < hd; i++) {
                        double acc = 0;
                        const float *wr = W.data() + uint64_t(row0 + i) * d;
                        for (uint64_t j = 0; j < d; j++) acc += double(wr[j]) * x[j];
                        out[i] = acc;
                    }
                };
                proj(wq, head * hd, xs.data(), q.data());
                for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                    proj(wk, kvh * hd, xs.data() + (kk + 1) * d, k.data() + kk * hd);
                    proj(wv, kvh * hd, xs.data() + (kk + 1) * d, v.data() + kk * hd);
                }
                kernels::gaussians(seed ^ 0xA5A5A5A5ull, 0, w.size(), w.data());
                // Projections once per trial; each temperature only rescales them.
                double qq = 0;
                for (uint32_t i = 0; i < hd; i++) qq += q[i] * q[i];
                for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                    double a = 0;
                    for (uint32_t i = 0; i < hd; i++) a += k[kk * hd + i] * k[kk * hd + i];
                    kn[kk] = a;
                }
                for (uint32_t f = 0; f < kRmax; f++) {
                    double dq = 0;
                    for (uint32_t i = 0; i < hd; i++) dq += w[f * hd + i] * q[i];
                    aq[f] = dq;
                    for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                        double dk = 0;
                        for (uint32_t i = 0; i < hd; i++) dk += w[f * hd + i] * k[kk * hd + i];
                        ak[size_t(f) * kScaleKeys + kk] = dk;
                    }
                }
                for (int ti = 0; ti < 4; ti++) {
                    const double tau = std::sqrt(double(hd)) * temps[ti];
                    // exact softmax
                    double mx = -INFINITY;
                    for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                        double dot = 0, s2 = 0;
                        for (uint32_t i = 0; i < hd; i++) {
                            dot += q[i] * k[kk * hd + i];
                            s2 += (q[i] + k[kk * hd + i]) * (q[i] + k[kk * hd + i]);
                        }
                        logits[kk] = dot / tau;
                        mx = std::max(mx, logits[kk]);
                        spread[ti] += s2 / tau;
                    }
                    double z = 0;
                    std::fill(exact.begin(), exact.end(), 0.0);
                    for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                        double e = std::exp(logits[kk] - mx);
                        z += e;
                        for (uint32_t i = 0; i < hd; i++) exact[i] += e * v[kk * hd + i];
                    }
                    for (uint32_t i = 0; i < hd; i++) exact[i] /= z;
                    // PRF: log of phi(q) phi(k) per feature, shifted by one maximum over all
                    // 1024 features (the ratio is shift-invariant), summed with the r = 256 and
                    // 512 estimates read off as prefixes of the same draw.
                    const double st = std::sqrt(tau);
                    double m2 = -INFINITY;
                    for (uint32_t f = 0; f < kRmax; f++)
                        for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                            double a = (aq[f] + ak[size_t(f) * kScaleKeys + kk]) / st - (qq + kn[kk]) / (2 * tau);
                            m2 = std::max(m2, a);
                        }
                    std::fill(kw.begin(), kw.end(), 0.0);
                    int ri = 0;
                    for (uint32_t f = 0; f < kRmax; f++) {
                        for (uint32_t kk = 0; kk < kScaleKeys; kk++)
                            kw[kk] += std::exp((aq[f] + ak[size_t(f) * kScaleKeys + kk]) / st - (qq + kn[kk]) / (2 * tau) - m2);
                        if (f + 1 != rs[ri]) continue;
                        double den = 0;
                        std::fill(approx.begin(), approx.end(), 0.0);
                        for (uint32_t kk = 0; kk < kScaleKeys; kk++) {
                            den += kw[kk];
                            for (uint32_t i = 0; i < hd; i++) approx[i] += kw[kk] * v[kk * hd + i];
                        }
                        double num = 0, nrm = 0;
                        for (uint32_t i = 0; i < hd; i++) {
                            double o = approx[i] / den;
                            num += (o - exact[i]) * (o - exact[i]);
                            nrm += exact[i] * exact[i];
                        }
                        err[ri][ti] += nrm > 0 ? std::sqrt(num / nrm) : 0;
                        ri++;
                    }
                }
            }
        }
        const double n_runs = double(s.n_heads) * kScaleTrials;
        for (int ti = 0; ti < 4; ti++) {
            const double e = spread[ti] / (n_runs * kScaleKeys);
            for (int ri = 0; ri < 3; ri++) {
                char test[96], def[256], note[256];
                std::snprintf(test, sizeof test, "16.1 model-scale L%u r=%u T=%g", l, rs[ri], temps[ti]);
                std::snprintf(def, sizeof def,
                              "rel L2 of attention output, q/k/v via the layer's W_Q/W_K/W_V, %u keys, tau=sqrt(hd)*T, "
                              "mean of %u heads x %u trials",
                              kScaleKeys, s.n_heads, kScaleTrials);
                const double theory = std::sqrt(0.6 * e / rs[ri]);
                std::snprintf(note, sizeof note, "E|q+k|^2/tau = %.3g; small-spread theory sqrt(0.6 E/r) = %.3g: 1e-2 %s", e,
                              theory, theory <= 1e-2 ? "reachable" : "not reachable at this scale (spec threshold shown)");
                rows.push_back(acceptance_row(test, def, err[ri][ti] / n_runs, 1e-2, "<=", false, note));
            }
        }
    }
}

}  // namespace stk
