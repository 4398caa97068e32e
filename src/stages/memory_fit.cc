// memory_fit (seed 8, 12.5, 18.3; docs/format.md "memory_fit arrays"; docs/decisions.md
// "Positional memory").
//
//   RoPE:    the spec's AR(2): poles rho e^{+-i theta_bar}, rho = 0.995, theta_bar the mean of
//            the rotary angles (rope_theta, rotary_dim, linear rope_scaling); ARMA mode, p = 2,
//            q = 0, one section {b0 = 1, b1 = 0, a1 = 2 rho cos theta_bar, a2 = -rho^2}.
//            With STK_JOB_MEMORY_FIT_LSQ (stk convert --memory-fit lsq): the RoPE kernel the
//            weights imply (rope_energy_kernel, 16.3's surrogate), t < 512, fitted by fit_sos
//            (at most 6 sections), SOS mode like ALiBi (docs/decisions.md "Fidelity on real
//            models": the AR(2) is far from that kernel on real models).
//   ALiBi:   the head-averaged attention factor h(t) = mean_h exp(-slope_h t), t < 512, fitted
//            by fit_sos (at most 6 sections); SOS mode, p = 2, q = 1.
//   Learned: h(t) = mean_i <P_i, P_{i+t}> / mean_i |P_i|^2 over the position embedding rows
//            (the position-position score of a 1-token shift, averaged over positions), fitted
//            the same way with at most min(6, (n - 1) / 4) sections.
// 12.5 inside the stage: every pole radius < 1, the DF-II-T states of a 4096-step impulse
// response bounded (< 1e6) in double, the single f32 reduction site (runtime/memory_step.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/output_file.h"
#include "format/array.h"
#include "format/calib_stats.h"
#include "stages/attn_common.h"
#include "stages/calib_fit.h"
#include "stages/outputs.h"
#include "stages/plan.h"
#include "stages/policy.h"
#include "stages/stages.h"

namespace stk {

namespace {

constexpr size_t kAlibiSamples = 512;
constexpr size_t kMaxLearnedSamples = 2048;
constexpr size_t kStateSteps = 4096;
constexpr double kStateBound = 1e6;

struct MemSizes {
    PosKind kind = PosKind::None;
    bool rope_lsq = false;    // RoPE fitted by least squares (STK_JOB_MEMORY_FIT_LSQ)
    bool rope_calib = false;  // --calibration on a RoPE model: the activations' kernel may be fitted
    uint64_t n_pos = 0, d = 0, samples = 0, row_floats = 1, d_v = 0, d_kv = 0;
};

MemSizes mem_sizes(const ModelPlan &plan, const stk_job_params &params) {
    MemSizes z;
    const ModelConfig &c = plan.config;
    z.kind = c.positions;
    z.rope_lsq = z.kind == PosKind::Rope && (params.flags & STK_JOB_MEMORY_FIT_LSQ);
    z.rope_calib = z.kind == PosKind::Rope && params.calibration != nullptr;
    z.d = c.d_model;
    z.row_floats = plan.max_row_floats ? plan.max_row_floats : 1;
    if (z.kind == PosKind::Rope && !(c.rope_theta > 1))
        throw_error(STK_E_BAD_JSON, "config: rope_theta %g must be > 1", c.rope_theta);
    if (z.kind == PosKind::Rope && (c.head_dim < 2 || (c.rotary_dim ? c.rotary_dim : c.head_dim) < 2))
        throw_error(STK_E_BAD_JSON, "config: head_dim %u / rotary_dim %u leave no rotary pair", c.head_dim, c.rotary_dim);
    if (z.kind == PosKind::Alibi) z.samples = kAlibiSamples;
    if (z.rope_calib) z.samples = kAlibiSamples;
    if (z.rope_lsq) {
        const AttnShape s = attn_shape(c);
        z.samples = kAlibiSamples;  // the same 512-step window 16.3 scores
        z.d_v = s.d_v;
        z.d_kv = s.d_kv;
    }
    if (z.kind == PosKind::Learned) {
        for (uint32_t i = 0; i < plan.n_streamed; i++)
            if (plan.tensors[i].role == Role::POS_EMB) z.n_pos = plan.tensors[i].dims[0];
        z.samples = std::min<uint64_t>(z.n_pos, kMaxLearnedSamples);
    }
    return z;
}

// The arrays the stage publishes for a fit of n sections, in write order (the writer and the
// planner use these dims).
struct MemArrays {
    ArraySpec coeff, delaybuf;
};
MemArrays mem_arrays(uint64_t n_sections) {
    return {{"memory_coeff.bin", DType::F64, {n_sections, 4}}, {"delaybuf_init.bin", DType::F64, {n_sections, 2}}};
}

// Sections the fit may keep: RoPE's AR(2) is one; fit_sos keeps at most this many otherwise.
uint32_t mem_max_sections(const MemSizes &z) {
    if (z.kind == PosKind::Rope && !z.rope_lsq && !z.rope_calib) return 1;
    if (z.kind == PosKind::Learned) return uint32_t(std::min<uint64_t>(kMaxSections, z.samples ? (z.samples - 1) / 4 : 0));
    return kMaxSections;
}

// The stage writes nothing when there is nothing to fit (seed 17.3).
bool mem_nothing_to_fit(const MemSizes &z) { return z.kind == PosKind::None || (z.kind == PosKind::Learned && z.samples < 5); }

// Seed 18.3 on the bank the stage is about to publish: while a pole lies on or outside the unit
// circle, multiply every section's AR coefficients (a1, a2) by 0.95, at most 3 times, each
// scaling recorded; still unstable after 3 -> a bound breach (the policy disables memory).
// Scaling (a1, a2) by c moves a complex pair's radius from rho to rho sqrt(c).
void apply_18_3(Job &job, SosFit &fit) {
    double max_r, min_r;
    memory_pole_radii(fit.sections, fit.n_sections, &max_r, &min_r);
    for (uint32_t step = 1; max_r >= 1 && step <= 3; step++) {
        const double before = max_r;
        for (uint32_t k = 0; k < fit.n_sections; k++) {
            fit.sections[k].a1 *= 0.95;
            fit.sections[k].a2 *= 0.95;
        }
        memory_pole_radii(fit.sections, fit.n_sections, &max_r, &min_r);
        draft_add_record(job.manifest, STK_STAGE_MEMORY_FIT, kRecordNote, kFeatureMemory, STK_OK, max_r, before,
                         "18.3 scaling %u of 3: AR coeffs x0.95, largest pole radius %.6f -> %.6f (value)", step, before, max_r);
    }
    if (!(max_r < 1))
        throw_breach(STK_E_INTERNAL, "12.5 pole radii < 1 after 3 x 18.3", max_r, 1,
                     "memory_fit: the largest pole radius is %.6f after three 18.3 scalings by 0.95", max_r);
}

// The stage's buffers, declared once: sized in memory_fit_size, allocated in memory_fit_run.
struct MemBuffers {
    double *h, *work;
    double *target;     // --calibration on RoPE: the activations' kernel, for the cosine record
    float *pos, *rows;  // learned position tables only
    float *wq, *wk;     // one layer's W_Q and W_K: RoPE least squares only
};
MemBuffers mem_buffers(const MemSizes &z, Buffers &b) {
    MemBuffers o{};
    o.h = b.array<double>(std::max<uint64_t>(z.samples, kStateSteps));
    o.work = b.array<double>(fit_sos_workspace(size_t(z.samples ? z.samples : 1)));
    o.target = z.rope_calib ? b.array<double>(z.samples) : nullptr;
    if (z.kind == PosKind::Learned) {
        o.pos = b.array<float>(z.n_pos * z.d);
        o.rows = b.array<float>(z.row_floats);
    }
    if (z.rope_lsq) {
        o.wq = b.array<float>(z.d_v * z.d);
        o.wk = b.array<float>(z.d_kv * z.d);
        o.rows = b.array<float>(z.row_floats);
    }
    return o;
}

}  // namespace

void memory_fit_size(const JobInputs &in, ArenaSizer &s) {
    const ModelDescription *d = in.model;
    Buffers b(s);
    mem_buffers(mem_sizes(d->plan, in.params), b);
}

void memory_fit_plan(const JobInputs &in, ArrayPlan &plan) {
    const MemSizes z = mem_sizes(in.model->plan, in.params);
    const uint64_t n = mem_max_sections(z);
    const MemArrays a = mem_arrays(std::max<uint64_t>(n, 1));
    const bool exact = z.kind == PosKind::Rope && !z.rope_lsq && !z.rope_calib;
    const std::string why =
        exact ? ""
              : std::string("at most ") + std::to_string(n) + " sections: fit_sos keeps those the " +
                    (z.rope_lsq || z.rope_calib ? std::string("RoPE kernel") : std::string(pos_kind_name(z.kind)) + " response") + " needs";
    plan.add(STK_STAGE_MEMORY_FIT, a.coeff, exact, why);
    plan.add(STK_STAGE_MEMORY_FIT, a.delaybuf, exact, why);
    if (mem_nothing_to_fit(z))
        plan.disable_stage(STK_STAGE_MEMORY_FIT, std::string("memory disabled: no positional encoding the stage fits (") +
                                                     pos_kind_name(z.kind) +
                                                     (z.kind == PosKind::Learned ? ", < 5 positions)" : ")"));
}

void memory_fit_run(Job &job) {
    if (!job.model) throw_error(STK_E_STAGE_ORDER, "memory_fit needs parse_tensors' plan");
    const ModelPlan &plan = *job.model;
    const ModelConfig &cfg = plan.config;
    const MemSizes z = mem_sizes(plan, job.params);
    ManifestDraft &m = job.manifest;
    StageDigest digest;

    if (mem_nothing_to_fit(z)) {
        // Nothing to fit: the module is off (seed 17.3), said in a record.  The digest is over
        // the canonical record "stk.memory_fit.none" NUL.
        static const char kNone[] = "stk.memory_fit.none";
        digest.add(kNone, sizeof kNone);
        draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordFeatureDisabled, kFeatureMemory, STK_E_UNSUPPORTED, 0, 0,
                         "memory disabled: the model has no positional encoding the stage fits (%s)", pos_kind_name(z.kind));
        digest.finish(job.stages[STK_STAGE_MEMORY_FIT]);
        return;
    }

    Arena &arena = job.arena;
    size_t mark = arena.mark();
    Buffers alloc(arena);
    const MemBuffers buf = mem_buffers(z, alloc);
    double *h = buf.h, *work = buf.work;
    const size_t work_len = fit_sos_workspace(size_t(z.samples ? z.samples : 1));

    // --calibration with the activations' RoPE pair energies: their kernel is the target.
    bool calib_rope = false;
    uint32_t calib_layers = 0;
    if (z.rope_calib && job.calib)
        for (uint32_t l = 0; l < job.calib->n_layers(); l++) calib_rope |= (job.calib->layer(l).sections & kCalibRopePairs) != 0;
    SosFit fit;
    uint32_t mode = 0, p = 2, q = 0;
    if (z.kind == PosKind::Rope && !z.rope_lsq && !calib_rope) {
        std::vector<double> theta;  // at most head_dim / 2 angles, before the stage's loops
        std::string note;
        uint32_t n = rope_angles(cfg, theta, &note);
        double mean = 0;
        for (uint32_t i = 0; i < n; i++) mean += theta[i];
        mean /= double(n);
        fit.n_sections = 1;
        // Test faults (src/core/test_fault.h): poles outside the unit circle, to force 18.3.
        const double rho = test_fault("memory_unstable") ? 1.05 : test_fault("memory_unstable_hard") ? 1.2 : kRopeRho;
        fit.sections[0] = SosSection{1.0, 0.0, 2 * rho * std::cos(mean), -rho * rho};
        mode = 2;
        q = 0;
        draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordNote, kFeatureMemory, STK_OK, mean, 0,
                         "RoPE: AR(2) rho %.3f at the mean angle %.6g rad of %u rotary pairs (theta %g)", kRopeRho, mean, n,
                         cfg.rope_theta);
        if (!note.empty())
            draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordNote, kFeatureMemory, STK_OK, cfg.rope_scaling_factor, 0, "%s",
                             note.c_str());
    } else {
        const size_t n = size_t(z.samples);
        uint32_t max_sections = mem_max_sections(z);
        if (calib_rope) {
            std::vector<double> theta;  // at most head_dim / 2 angles
            std::string note;
            const uint32_t np = rope_angles(cfg, theta, &note);
            std::vector<const double *> e(job.calib->n_layers());  // per layer (the angles are the model's, every layer)
            for (uint32_t l = 0; l < job.calib->n_layers(); l++)
                e[l] = (job.calib->layer(l).sections & kCalibRopePairs) ? job.calib->layer(l).rope_pairs : nullptr;
            calib_layers = calib_rope_kernel(e.data(), uint32_t(e.size()), theta.data(), np, n, h);
            std::memcpy(buf.target, h, n * sizeof(double));
            if (!(h[0] > 0)) throw_error(STK_E_UNSUPPORTED, "memory_fit: the calibration's RoPE pair energies are all zero");
        } else if (z.rope_lsq) {
            std::vector<double> theta;  // at most head_dim / 2 angles
            std::string note;
            rope_angles(cfg, theta, &note);
            WeightReader reader(*job.source->checkpoint, plan);
            rope_energy_kernel(reader, attn_shape(cfg), theta, n, buf.wq, buf.wk, buf.rows, h);
            if (!note.empty())
                draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordNote, kFeatureMemory, STK_OK, cfg.rope_scaling_factor, 0, "%s",
                                 note.c_str());
        } else if (z.kind == PosKind::Alibi) {
            std::vector<double> slopes(cfg.n_heads);
            alibi_slopes(cfg.n_heads, slopes.data());
            for (double &s : slopes) s *= cfg.alibi_scale;
            for (size_t t = 0; t < n; t++) {
                double acc = 0;
                for (uint32_t hh = 0; hh < cfg.n_heads; hh++) acc += std::exp(-slopes[hh] * double(t));
                h[t] = acc / cfg.n_heads;
            }
        } else {
            float *pos = buf.pos, *rows = buf.rows;
            WeightReader reader(*job.source->checkpoint, plan);
            const PlanTensor *t = reader.find(Role::POS_EMB, kNoLayer);
            if (!t || t->rank != 2 || t->dims[1] != z.d)
                throw_error(STK_E_PARAM_COUNT, "the learned position embedding is missing or not [n_positions, %llu]",
                            (unsigned long long)z.d);
            reader.read(*t, pos, rows);
            for (size_t s = 0; s < n; s++) {
                double acc = 0;
                for (uint64_t i = 0; i + s < z.n_pos; i++)
                    for (uint64_t j = 0; j < z.d; j++) acc += double(pos[i * z.d + j]) * double(pos[(i + s) * z.d + j]);
                h[s] = acc / double(z.n_pos - s);
            }
            double h0 = h[0];
            if (!(h0 > 0)) throw_error(STK_E_UNSUPPORTED, "the position embedding is all zeros: nothing to fit");
            for (size_t s = 0; s < n; s++) h[s] /= h0;
        }
        fit = fit_sos(h, n, max_sections, work, work_len);
        if (!fit.n_sections)
            throw_breach(STK_E_UNSUPPORTED, "8.2 a stable SOS fit exists", 0, 1, "memory_fit: no stable fit of the %s response",
                         pos_kind_name(z.kind));
        mode = 1;
        q = 1;
        draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordNote, kFeatureMemory, STK_OK, fit.rel_l2, 0,
                         "%s: %u sections fit h(t), t < %zu, relative L2 %.3g (18.3 scalings %u, clamped %u)",
                         calib_rope ? "RoPE (lsq, activations' kernel)"
                         : z.rope_lsq ? "RoPE (least squares of the weights' kernel)"
                                      : pos_kind_name(z.kind),
                         fit.n_sections, n,
                         fit.rel_l2, fit.scale_steps, fit.clamped);
    }

    apply_18_3(job, fit);

    // 12.5: poles inside the unit circle, bounded double states, one reduction site.
    double max_r, min_r, max_state;
    memory_pole_radii(fit.sections, fit.n_sections, &max_r, &min_r);
    memory_impulse_response(fit.sections, fit.n_sections, kStateSteps, h, &max_state);
    const bool poles_ok = max_r < 1, states_ok = std::isfinite(max_state) && max_state < kStateBound;
    if (calib_rope) {
        const double c = calib_cosine(h, buf.target, z.samples);
        draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordNote, kFeatureMemory, STK_OK, c, 0.98,
                         "calibrated: bank vs the activations' RoPE kernel (%u layers): cosine over %llu steps (value)",
                         calib_layers, (unsigned long long)z.samples);
    }
    draft_add_record(m, STK_STAGE_MEMORY_FIT, poles_ok ? kRecordInvariantPass : kRecordInvariantFail, kFeatureMemory,
                     poles_ok ? STK_OK : STK_E_INTERNAL, max_r, 1, "12.5 pole radii < 1 (value: the largest)");
    draft_add_record(m, STK_STAGE_MEMORY_FIT, states_ok ? kRecordInvariantPass : kRecordInvariantFail, kFeatureMemory,
                     states_ok ? STK_OK : STK_E_NONFINITE, std::isfinite(max_state) ? max_state : 0, kStateBound,
                     "12.5 DF-II-T states bounded in double over a %zu-step impulse", kStateSteps);
    draft_add_record(m, STK_STAGE_MEMORY_FIT, kRecordInvariantPass, kFeatureMemory, STK_OK, 1, 1,
                     "12.5 single reduction site: Kahan sum in f64, one rounding to f32 (memory_step)");

    const std::string dir = std::string(job.out_dir) + "/" + kArraysDirName;
    make_dirs(dir);
    double coeff[kMaxSections * 4], zeros[kMaxSections * 2] = {};
    for (uint32_t k = 0; k < fit.n_sections; k++) {
        coeff[4 * k + 0] = fit.sections[k].b0;
        coeff[4 * k + 1] = fit.sections[k].b1;
        coeff[4 * k + 2] = fit.sections[k].a1;
        coeff[4 * k + 3] = fit.sections[k].a2;
    }
    const MemArrays out = mem_arrays(fit.n_sections);
    job_write_array(job, STK_STAGE_MEMORY_FIT, digest, out.coeff, coeff);
    job_write_array(job, STK_STAGE_MEMORY_FIT, digest, out.delaybuf, zeros);

    ManifestFields &f = m.fields;
    f.memory.mode = mode;
    f.memory.p = p;
    f.memory.q = q;
    f.memory.l = fit.n_sections;
    f.memory.t_phi = 2;
    f.memory.k = fit.n_sections;
    f.memory.pole_radius_min = min_r;
    if (!poles_ok || !states_ok)
        throw_breach(poles_ok ? STK_E_NONFINITE : STK_E_INTERNAL,
                     poles_ok ? "12.5 DF-II-T states bounded" : "12.5 pole radii < 1",
                     poles_ok ? (std::isfinite(max_state) ? max_state : 0) : max_r, poles_ok ? kStateBound : 1,
                     "memory_fit: 12.5 failed (largest pole radius %.6f, max state %g)", max_r, max_state);
    digest.finish(job.stages[STK_STAGE_MEMORY_FIT]);
    arena.reset(mark);
}

}  // namespace stk
