// 16.3: the positional memory against the model's own positional response (docs/decisions.md
// "Acceptance 16.3").
//
// Surrogate h(t), t < 512 (fewer for a short learned table):
//   RoPE:    sum_i e_i cos(theta_i t) / sum_i e_i, e_i = sum over layers and heads of
//            |W_Q pair i| |W_K pair i| (Frobenius norms of the two rows of rotary pair i in the
//            head's query block and its key/value head's key block): the energy each pair
//            carries in W_Q^T W_K.
//   ALiBi:   mean_h exp(-slope_h t) (exact: each head an AR(1) pole).
//   Learned: mean_i <P_i, P_{i+t}> / mean_i |P_i|^2 (what memory_fit fits).
// Candidates: the published bank (memory_coeff.bin through the runtime's memory_step), a
// least-squares fit (fit_sos, <= 6 sections, fitted to the window it is scored on: the first 32
// steps for the 32-step figures, all 512 for the others; for RoPE, where the spec's AR(2) is
// published),
// and the baselines constant 1 and 0.995^t.  Cosine and relative L2 at 32 and 512 steps.
// Gating: the fit beats both baselines (cosine at 32, relative L2 at 512); where the published
// bank is that fit (ALiBi, learned) the spec's 0.97 at 32 steps gates too.  For RoPE the spec's
// AR(2) is reported beside its threshold, never gating (it scores below a constant).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "acceptance/acceptance.h"
#include "acceptance/runner.h"
#include "core/error.h"
#include "format/array.h"
#include "format/manifest.h"
#include "stages/attn_common.h"

namespace stk {

namespace {

constexpr size_t kWindow = 512;

struct Scores {
    double cos32, l2_32, cos512, l2_512;
};

Scores score(const std::vector<double> &h, const std::vector<double> &ref) {
    auto at = [&](size_t w, double *cos, double *l2) {
        w = std::min(w, ref.size());
        double hr = 0, hh = 0, rr = 0, dd = 0;
        for (size_t t = 0; t < w; t++) {
            hr += h[t] * ref[t];
            hh += h[t] * h[t];
            rr += ref[t] * ref[t];
            dd += (h[t] - ref[t]) * (h[t] - ref[t]);
        }
        *cos = hh > 0 && rr > 0 ? hr / std::sqrt(hh * rr) : 0;
        *l2 = rr > 0 ? std::sqrt(dd / rr) : INFINITY;
    };
    Scores s;
    at(32, &s.cos32, &s.l2_32);
    at(kWindow, &s.cos512, &s.l2_512);
    return s;
}

}  // namespace

void acceptance_memory(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows) {
    Manifest m = read_manifest(ctx.out_dir + "/" + kManifestFileName);
    bool present = false;
    for (const ManifestArray &a : m.arrays) present |= !std::strcmp(a.name, "memory_coeff.bin");
    if (!m.fields.memory.mode || !present) return;
    ArrayReader coeff(ctx.out_dir + "/arrays/memory_coeff.bin");
    const ArrayHeader &h = coeff.header();
    if (h.rank != 2 || h.dims[1] != 4 || h.dtype != uint16_t(DType::F64) || h.dims[0] < 1 || h.dims[0] > kMaxSections)
        throw_error(STK_E_CORRUPT, "memory_coeff.bin: expected [L <= 6, 4] f64");
    SosSection bank[kMaxSections];
    const uint32_t n_sec = uint32_t(h.dims[0]);
    for (uint32_t k = 0; k < n_sec; k++) {
        double c[4];
        std::memcpy(c, coeff.payload() + k * 32, 32);
        bank[k] = SosSection{c[0], c[1], c[2], c[3]};
    }
    if (ctx.model_dir.empty()) {
        rows.push_back(acceptance_skipped("16.3 memory", "the published bank against the model's positional response",
                                          "needs the model directory (--model DIR) for the surrogate"));
        return;
    }
    const ModelDescription *desc = &acceptance_model(ctx);
    const ModelConfig &cfg = desc->plan.config;
    std::vector<double> sur;
    std::string what;
    if (cfg.positions == PosKind::Rope) {
        std::vector<double> theta;
        std::string note;
        const uint32_t n = rope_angles(cfg, theta, &note);
        (void)n;
        const AttnShape s = attn_shape(cfg);
        WeightReader reader(*desc->checkpoint, desc->plan);
        std::vector<float> wq(size_t(s.d_v * s.d_model)), wk(size_t(s.d_kv * s.d_model)),
            scratch(size_t(desc->plan.max_row_floats + 1));
        sur.assign(kWindow, 0.0);
        rope_energy_kernel(reader, s, theta, kWindow, wq.data(), wk.data(), scratch.data(), sur.data());
        what = "RoPE energy-weighted surrogate sum_i e_i cos(theta_i t)";
    } else if (cfg.positions == PosKind::Alibi) {
        std::vector<double> slopes(cfg.n_heads);
        alibi_slopes(cfg.n_heads, slopes.data());
        for (double &s : slopes) s *= cfg.alibi_scale;
        sur.assign(kWindow, 0.0);
        for (size_t t = 0; t < kWindow; t++) {
            for (double sl : slopes) sur[t] += std::exp(-sl * double(t));
            sur[t] /= cfg.n_heads;
        }
        what = "ALiBi head average mean_h exp(-slope_h t)";
    } else if (cfg.positions == PosKind::Learned) {
        WeightReader reader(*desc->checkpoint, desc->plan);
        const PlanTensor *t = reader.find(Role::POS_EMB, kNoLayer);
        if (!t) throw_error(STK_E_PARAM_COUNT, "no position embedding in %s", ctx.model_dir.c_str());
        const uint64_t np = t->dims[0], d = t->dims[1];
        std::vector<float> P(size_t(np * d)), scratch(size_t(desc->plan.max_row_floats + 1));
        reader.read(*t, P.data(), scratch.data());
        const size_t n = size_t(std::min<uint64_t>(np, kWindow));
        sur.assign(n, 0.0);
        for (size_t s = 0; s < n; s++) {
            double acc = 0;
            for (uint64_t i = 0; i + s < np; i++)
                for (uint64_t j = 0; j < d; j++) acc += double(P[i * d + j]) * double(P[(i + s) * d + j]);
            sur[s] = acc / double(np - s);
        }
        const double h0 = sur[0];
        for (double &x : sur) x /= h0;
        what = "learned positions mean_i <P_i, P_i+t> / mean |P_i|^2";
    } else {
        return;
    }
    const size_t n = sur.size();
    std::vector<double> pub(n), cst(n, 1.0), rho(n), fit(n);
    memory_impulse_response(bank, n_sec, n, pub.data(), nullptr);
    for (size_t t = 0; t < n; t++) rho[t] = std::pow(kRopeRho, double(t));
    // The least-squares fit is made for the window it is judged on: one fit of the first 32
    // steps (scored at 32), one of all n (scored at 512).
    std::vector<double> work(fit_sos_workspace(n)), fit32(n);
    const size_t n32 = std::min<size_t>(n, 32);
    SosFit f = fit_sos(sur.data(), n, uint32_t(std::min<size_t>(kMaxSections, (n - 1) / 4)), work.data(), work.size());
    memory_impulse_response(f.sections, f.n_sections, n, fit.data(), nullptr);
    SosFit f32 = fit_sos(sur.data(), n32, uint32_t(std::min<size_t>(kMaxSections, (n32 - 1) / 4)), work.data(), work.size());
    memory_impulse_response(f32.sections, f32.n_sections, n, fit32.data(), nullptr);
    const bool rope = cfg.positions == PosKind::Rope;
    const Scores sp = score(pub, sur), sc = score(cst, sur), sr = score(rho, sur);
    Scores sf = score(rope ? fit : pub, sur);
    if (rope) {
        const Scores s32 = score(fit32, sur);
        sf.cos32 = s32.cos32;
        sf.l2_32 = s32.l2_32;
    }
    char def[256];
    const size_t w512 = std::min(n, kWindow);
    auto add4 = [&](const char *name, const Scores &s, bool gate_cos) {
        std::snprintf(def, sizeof def, "%s impulse response vs %s", name, what.c_str());
        rows.push_back(
            acceptance_row(std::string("16.3 cos@32 ") + name, def, s.cos32, 0.97, ">=", gate_cos,
                           gate_cos ? "" : "spec threshold; reported (a constant scores " + std::to_string(sc.cos32) + ")"));
        rows.push_back(acceptance_row(std::string("16.3 relL2@32 ") + name, def, s.l2_32, sc.l2_32, "<=", false,
                                      "threshold: the constant baseline's relative L2"));
        if (w512 <= 32) return;  // a short learned table: the long window is the 32-step one, already printed
        rows.push_back(
            acceptance_row(std::string("16.3 cos@") + std::to_string(w512) + " " + name, def, s.cos512, 0.97, ">=", false, ""));
        rows.push_back(acceptance_row(std::string("16.3 relL2@") + std::to_string(w512) + " " + name, def, s.l2_512, sc.l2_512,
                                      "<=", false, "threshold: the constant baseline's relative L2"));
    };
    // RoPE publishes the spec's AR(2) (mode 2) unless converted with --memory-fit lsq (a fit, mode
    // 1); that fit is reported, not gated: it is fitted to 512 steps, not to the 32 gated here.
    const bool spec_ar2 = rope && m.fields.memory.mode == 2;
    add4(rope && !spec_ar2 ? "published-lsq-SOS-fit" : spec_ar2 ? "published-spec-AR(2)" : "published-SOS-fit", sp, !rope);
    if (rope) add4("least-squares-SOS-fit", sf, false);
    add4("baseline-constant", sc, false);
    add4("baseline-rho^t", sr, false);
    const char *fname = rope ? "least-squares fit" : "published fit";
    std::snprintf(def, sizeof def, "%s cosine@32 minus the better baseline's (constant, 0.995^t)", fname);
    rows.push_back(
        acceptance_row("16.3 fit-beats-baselines cos@32", def, sf.cos32 - std::max(sc.cos32, sr.cos32), 0, ">=", true, ""));
    std::snprintf(def, sizeof def, "%s relative L2@%zu over the better baseline's", fname, w512);
    rows.push_back(
        acceptance_row("16.3 fit-beats-baselines relL2", def, sf.l2_512 / std::min(sc.l2_512, sr.l2_512), 1, "<=", true, ""));
}

}  // namespace stk
