// prf_build (seed 5, 12.2; docs/format.md "prf_build arrays"; docs/decisions.md "PRF").
//
// Per layer, in layer order: read W_K (all n_kv_heads * head_dim rows), the diagonal
// pre-whitener d[j] = max(mean_i W_K[i, j]^2, 1e-8), then prf_W[l] = G * diag(sqrt(d)) with G
// the r x d_model standard Gaussians of the layer's stream.  Cold-start state: whitening_mu = 0,
// whitening_sig2 = 1, R_init = 0, s_init = 0 (no key seen yet).  beta_floor = max(1e-3, 5e-4 *
// the largest expected one-key denominator over layers); the denominator schedule (per layer:
// the expected denominator and the floor) is digested into lambda_star_digest.
//
// Memory: one layer's W_K and one layer's prf_W (f32), streamed to the file layer by layer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/bytes.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/output_file.h"
#include "core/parallel.h"
#include "format/array.h"
#include "format/calib_stats.h"
#include "stages/calib_fit.h"
#include "stages/attn_common.h"
#include "stages/outputs.h"
#include "stages/plan.h"
#include "stages/policy.h"
#include "stages/stages.h"

namespace stk {

namespace {

struct PrfSizes {
    AttnShape s;
    uint64_t r, row_floats, threads;
    bool calib;  // --calibration: the whitener fit's system too
};

PrfSizes prf_sizes(const stk_job_params &p, const ModelPlan &plan) {
    PrfSizes z;
    z.s = attn_shape(plan.config);
    check_attention_params(p, z.s);
    z.r = p.r;
    z.row_floats = plan.max_row_floats ? plan.max_row_floats : 1;
    z.threads = std::min<uint64_t>(p.threads, z.r);  // normalised: >= 1
    z.calib = p.calibration != nullptr;
    return z;
}

// The stage's buffers, declared once: sized in prf_build_size, allocated in prf_build_run.
struct PrfBuffers {
    float *wk, *row_scratch, *prf, *row;
    double *diag, *sqrt_diag, *grow, *expected;
    double *fit_work, *d_free, *r2, *r2_free;  // --calibration only (null without)
};
PrfBuffers prf_buffers(const PrfSizes &z, Buffers &b) {
    const uint64_t d = z.s.d_model;
    PrfBuffers o;
    o.wk = b.array<float>(z.s.d_kv * d);                       // W_K
    o.row_scratch = b.array<float>(z.row_floats);              // transpose scratch
    o.diag = b.array<double>(d);                               // whitening diagonal
    o.sqrt_diag = b.array<double>(d);                          // its square roots
    o.grow = b.array<double>(d * z.threads);                   // a Gaussian row per thread
    o.prf = b.array<float>(z.r * d);                           // prf_W of one layer
    o.row = b.array<float>(std::max<uint64_t>(z.r, z.s.d_v));  // a row of zeros / ones
    o.expected = b.array<double>(z.s.n_layers);                // expected denominators
    o.fit_work = o.d_free = o.r2 = o.r2_free = nullptr;
    if (z.calib) {
        o.fit_work = b.array<double>(d * d + 3 * d);  // the fit's d x d system and its vectors
        o.d_free = b.array<double>(d);            // the data-free diagonal, for comparison
        o.r2 = b.array<double>(z.s.n_layers);     // per layer R^2 of the fit (-inf: not fitted)
        o.r2_free = b.array<double>(z.s.n_layers);
    }
    return o;
}

constexpr char kScheduleMagic[] = "stk.denominator.v1";

// The arrays the stage publishes, in write order (the writer and the planner use these dims).
struct PrfArrays {
    ArraySpec w, mu, sig2, r_init, s_init;
};
PrfArrays prf_arrays(const PrfSizes &z) {
    const uint64_t L = z.s.n_layers, r = z.r;
    return {{"prf_W.bin", DType::F32, {L, r, z.s.d_model}},
            {"whitening_mu.bin", DType::F32, {L, r}},
            {"whitening_sig2.bin", DType::F32, {L, r}},
            {"R_init.bin", DType::F32, {L, r, z.s.d_v}},
            {"s_init.bin", DType::F32, {L, r}}};
}

// --calibration: what the whitener fit did, for the manifest.
struct PrfFitNotes {
    uint32_t fitted = 0, missing = 0, no_gain = 0, clamped_low = 0, clamped_high = 0;
};
// The largest fitted D_j, as a share of tau: (1 - 0.25)^(-1/2) = 1.155 per such entry in the
// expected denominator (5.5), which must stay finite (D_j < tau).
constexpr double kCalibPrfUpperShare = 0.5;
// The calibrated expected denominator at most (beta_floor = 5e-4 of it stays inside the manifest's
// bound of 1e9).
constexpr double kCalibMaxExpected = 1e12;

// Layer l's whitener fitted to its kCalibPrfPairs moments (calib_fit.h), replacing the data-free
// diag when its R^2 on the moments is higher; kept (and said so) where it is not.
void prf_calibrate_layer(Job &job, uint32_t l, uint64_t d, double tau, const PrfBuffers &buf, PrfFitNotes &notes) {
    buf.r2[l] = buf.r2_free[l] = -INFINITY;
    const CalibLayer &cl = job.calib->layer(l);
    if (!(cl.sections & kCalibPrfPairs)) {
        notes.missing++;
        return;
    }
    std::memcpy(buf.d_free, buf.diag, size_t(d) * sizeof(double));
    const CalibPrfFit f =
        calib_prf_fit(cl.prf_m, cl.prf_b, cl.prf_l, d, tau, kCalibPrfUpperShare * tau, buf.d_free, buf.sqrt_diag, buf.fit_work);
    buf.r2[l] = f.r2;
    buf.r2_free[l] = f.r2_free;
    notes.clamped_low += f.negative;
    notes.clamped_high += f.high;
    if (!(f.r2 > f.r2_free)) {
        notes.no_gain++;
        return;  // the data-free diagonal stays
    }
    std::memcpy(buf.diag, buf.sqrt_diag, size_t(d) * sizeof(double));  // sqrt_diag is recomputed from diag next
    notes.fitted++;
}

void prf_calib_records(Job &job, uint32_t L, const PrfBuffers &buf, const PrfFitNotes &n) {
    ManifestDraft &m = job.manifest;
    draft_add_record(m, STK_STAGE_PRF, kRecordNote, kFeaturePrf, STK_OK, double(n.fitted), double(L),
                     "calibrated whitener: %u of %u layers fitted (value); %u without moments, %u kept (no R^2 gain)",
                     n.fitted, L, n.missing, n.no_gain);
    if (n.clamped_low || n.clamped_high)
        draft_add_record(m, STK_STAGE_PRF, kRecordNote, kFeaturePrf, STK_OK, double(n.clamped_low + n.clamped_high), 0,
                         "calibrated whitener: %u entries at the bound 1e-8, %u at tau/2 (D kept inside [1e-8, tau/2])",
                         n.clamped_low, n.clamped_high);
    uint32_t with = 0;
    for (uint32_t l = 0; l < L; l++) with += std::isfinite(buf.r2[l]);
    if (with > 16) return;  // per layer only for small models (the record list is bounded)
    for (uint32_t l = 0; l < L; l++)
        if (std::isfinite(buf.r2[l]))
            draft_add_record(m, STK_STAGE_PRF, kRecordNote, kFeaturePrf, STK_OK, buf.r2[l], buf.r2_free[l],
                             "calibrated whitener L%u: R^2 on the moments %.4f (value), data-free %.4f (bound)%s", l, buf.r2[l],
                             buf.r2_free[l], buf.r2[l] > buf.r2_free[l] ? "" : "; kept data-free");
}

}  // namespace

void prf_build_size(const JobInputs &in, ArenaSizer &s) {
    const stk_job_params &p = in.params;
    const ModelDescription *d = in.model;
    Buffers b(s);
    prf_buffers(prf_sizes(p, d->plan), b);
}

void prf_build_plan(const JobInputs &in, ArrayPlan &plan) {
    const PrfArrays a = prf_arrays(prf_sizes(in.params, in.model->plan));
    for (const ArraySpec *x : {&a.w, &a.mu, &a.sig2, &a.r_init, &a.s_init}) plan.add(STK_STAGE_PRF, *x);
}

void prf_build_run(Job &job) {
    if (!job.model) throw_error(STK_E_STAGE_ORDER, "prf_build needs parse_tensors' plan");
    const ModelPlan &plan = *job.model;
    const PrfSizes z = prf_sizes(job.params, plan);
    const AttnShape &s = z.s;
    const uint64_t d = s.d_model, r = z.r, L = s.n_layers;
    const double tau = prf_tau(s);

    Arena &arena = job.arena;
    size_t mark = arena.mark();
    Buffers alloc(arena);
    const PrfBuffers buf = prf_buffers(z, alloc);
    float *wk = buf.wk, *row_scratch = buf.row_scratch, *prf = buf.prf, *row = buf.row;
    double *diag = buf.diag, *sqrt_diag = buf.sqrt_diag, *grow = buf.grow, *expected = buf.expected;

    WeightReader reader(*job.source->checkpoint, plan, job.params.threads);
    // Every layer's W_K first: a missing or misshapen tensor is refused before a byte is written.
    for (uint32_t l = 0; l < L; l++) reader.require(Role::K, int32_t(l), s.d_kv, d);

    const std::string dir = std::string(job.out_dir) + "/" + kArraysDirName;
    make_dirs(dir);
    StageDigest digest;
    const PrfArrays out = prf_arrays(z);
    ArrayWriter w(dir, out.w);
    PrfFitNotes fit_notes;
    job_work_begin(job, L, "layers");
    for (uint32_t l = 0; l < L; l++, job_work_add(job, 1)) {
        const PlanTensor &t = reader.require(Role::K, int32_t(l), s.d_kv, d);
        reader.read(t, wk, row_scratch);
        whitening_diagonal(wk, s.d_kv, d, diag);
        if (job.calib) prf_calibrate_layer(job, l, d, tau, buf, fit_notes);
        expected[l] = expected_denominator(diag, d, tau);
        if (job.calib && buf.r2[l] > buf.r2_free[l]) {
            // A fitted D: the Gaussian-input expectation above no longer describes the kernel (D up
            // to tau/2 on hundreds of entries gives 1.155^d_model); the calibration pairs' own
            // logits do, E[exp(l)] for a log-normal l, which the fitted kernel approximates.
            const double *el = job.calib->layer(l).prf_l;
            const double var = std::max(0.0, el[1] - el[0] * el[0]);
            expected[l] = std::min(std::exp(el[0] + 0.5 * var), kCalibMaxExpected);
        }
        // 5.5 needs a finite expectation (D_j < tau at any sane scale); an infinite one is a
        // bound breach (seed 1.4: prf and the overlays built on it are disabled), not a clamp.
        if (!std::isfinite(expected[l]))
            throw_breach(STK_E_UNSUPPORTED, "5.5 finite expected denominator", double(l), tau,
                         "layer %u: tensor '%s': a whitening diagonal entry reaches tau = %g, so the expected PRF "
                         "denominator is infinite (W_K entries of magnitude ~sqrt(tau))",
                         l, t.name, tau);
        // Rows split between threads: draw k of the stream is addressed directly, so the bytes
        // do not depend on the split.
        for (uint64_t j = 0; j < d; j++) sqrt_diag[j] = std::sqrt(diag[j]);
        const uint64_t stream = prf_stream(job.manifest.master_seed, l), per = (r + z.threads - 1) / z.threads;
        auto rows_of = [&](uint64_t t) {
            const uint64_t i0 = std::min(r, t * per), i1 = std::min(r, i0 + per);
            prf_rows_range_sqrt(stream, sqrt_diag, i0, i1, d, prf + i0 * d, grow + t * d);
        };
        run_workers(unsigned(z.threads), [&](unsigned t) { rows_of(t); });  // per layer, outside the per-row loop
        w.append(prf, size_t(r * d * 4));
    }
    ArrayHeader prf_h = w.finish();
    job_record_array(job, STK_STAGE_PRF, digest, out.w.name.c_str(), prf_h);

    // Cold-start state, one [L, n] array each, written as rows of a constant (zeros as a hole in
    // the file: R_init is 256 MiB of them on a 7B model at r = 512).
    auto constant_array = [&](const ArraySpec &spec, uint64_t row_len, uint64_t rows, float value) {
        for (uint64_t j = 0; j < row_len; j++) row[j] = value;
        ArrayWriter a(dir, spec);
        if (value == 0.0f && !std::signbit(value)) a.append_zeros(rows * row_len * 4);
        else
            for (uint64_t i = 0; i < rows; i++) a.append(row, size_t(row_len * 4));
        job_record_array(job, STK_STAGE_PRF, digest, spec.name.c_str(), a.finish());
    };
    constant_array(out.mu, r, L, 0.0f);
    constant_array(out.sig2, r, L, 1.0f);
    constant_array(out.r_init, s.d_v, L * r, 0.0f);
    constant_array(out.s_init, r, L, 0.0f);

    // 5.5: the floor from the largest expected one-key denominator.
    double worst = 0;
    for (uint32_t l = 0; l < L; l++) worst = std::max(worst, expected[l]);
    const double beta_floor = std::max(1e-3, 5e-4 * worst);
    // The schedule digest: magic NUL, LE u32 L, then per layer LE f64 expected, LE f64 floor.
    Sha256 sh;
    sh.update(kScheduleMagic, sizeof kScheduleMagic);
    uint8_t b[16];
    store_le<uint32_t>(b, uint32_t(L));
    sh.update(b, 4);
    for (uint32_t l = 0; l < L; l++) {
        uint64_t e, f;
        std::memcpy(&e, &expected[l], 8);
        std::memcpy(&f, &beta_floor, 8);
        store_le<uint64_t>(b, e);
        store_le<uint64_t>(b + 8, f);
        sh.update(b, 16);
    }
    Sha256Digest sched = sh.finish();

    ManifestFields &f = job.manifest.fields;
    f.prf.r = uint32_t(r);
    f.prf.tau = tau;
    f.prf.whitening_eps = kWhiteningEps;
    f.prf.clip_c = 0;  // no clipping of the exponent (docs/decisions.md "PRF")
    f.denominator.beta_floor = beta_floor;
    std::memcpy(f.denominator.lambda_star_digest, sched.bytes, 32);

    // 12.2, inside the stage.
    ManifestDraft &m = job.manifest;
    draft_add_record(m, STK_STAGE_PRF, kRecordInvariantPass, kFeaturePrf, STK_OK, 0, 0,
                     "12.2 prf_W sha256_low64 %016llx crc32c %08x recorded", (unsigned long long)prf_h.sha256_low64,
                     prf_h.crc32c);
    draft_add_record(m, STK_STAGE_PRF, kRecordInvariantPass, kFeaturePrf, STK_OK, 1.0, kWhiteningEps,
                     "12.2 whitening_sig2 >= eps (min 1 over %llu entries)", (unsigned long long)(L * r));
    draft_add_record(m, STK_STAGE_PRF, beta_floor > 0 ? kRecordInvariantPass : kRecordInvariantFail, kFeaturePrf, STK_OK,
                     beta_floor, 0, "12.2 beta_floor > 0 (max expected one-key denominator %.6g)", worst);
    if (job.calib) prf_calib_records(job, uint32_t(L), buf, fit_notes);
    digest.finish(job.stages[STK_STAGE_PRF]);
    arena.reset(mark);
}

}  // namespace stk
