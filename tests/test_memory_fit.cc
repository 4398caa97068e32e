// memory_fit (seed 8, 12.5) and the runtime step: the spec's AR(2) exactly for RoPE models,
// the SOS fit against the exact ALiBi response, the learned-position fit's recorded error
// recomputed plainly, fit_sos on a known response, the DF-II-T step against plain recursion,
// and the 16.3 acceptance rows.
#include "attn_job.h"

#include <algorithm>
#include <cmath>

#include "acceptance/runner.h"
#include "format/manifest.h"
#include "runtime/memory_step.h"
#include "stages/attn_common.h"

using namespace stk;
using namespace stk::test;

// Plain recursion of a parallel bank (direct form, not DF-II-T): y_k[t] = b0 u[t] + b1 u[t-1]
// + a1 y_k[t-1] + a2 y_k[t-2], impulse input.
static std::vector<double> plain_impulse(const std::vector<double> &c, size_t n) {
    std::vector<double> y(n, 0.0);
    for (size_t k = 0; k < c.size() / 4; k++) {
        double b0 = c[4 * k], b1 = c[4 * k + 1], a1 = c[4 * k + 2], a2 = c[4 * k + 3], y1 = 0, y2 = 0;
        for (size_t t = 0; t < n; t++) {
            double v = (t == 0 ? b0 : 0) + (t == 1 ? b1 : 0) + a1 * y1 + a2 * y2;
            y[t] += v;
            y2 = y1;
            y1 = v;
        }
    }
    return y;
}

static void rope_models_get_the_spec_ar2(void **) {
    struct Case {
        const char *model;
        double theta;
        unsigned rot;
    } cases[] = {{"llama", 1e4, 16}, {"mixtral", 1e6, 8}, {"qwen2_moe", 1e6, 8}, {"gpt_neox", 1e4, 2}};
    for (const Case &cs : cases) {
        AttnRun run(model_dir(cs.model), 16, 4, 1, STK_STAGE_MEMORY_FIT);
        double mean = 0;
        for (unsigned i = 0; i < cs.rot / 2; i++) mean += std::pow(cs.theta, -2.0 * i / cs.rot);
        mean /= cs.rot / 2;
        ArrayHeader h;
        std::vector<double> c = read_f64(run.path("memory_coeff.bin"), &h);
        assert_int_equal(h.rank, 2);
        assert_int_equal(h.dims[0], 1);
        assert_int_equal(h.dims[1], 4);
        assert_true(c[0] == 1.0 && c[1] == 0.0);
        if (std::fabs(c[2] - 2 * 0.995 * std::cos(mean)) > 1e-15 || c[3] != -0.995 * 0.995)
            fail_msg("%s: a1 %.17g a2 %.17g, expected %.17g %.17g", cs.model, c[2], c[3], 2 * 0.995 * std::cos(mean),
                     -0.995 * 0.995);
        std::vector<double> z = read_f64(run.path("delaybuf_init.bin"), &h);
        assert_int_equal(h.dims[0], 1);
        assert_int_equal(h.dims[1], 2);
        for (double v : z) assert_true(v == 0.0);
        const ManifestFields &f = run.j().manifest.fields;
        assert_int_equal(f.memory.mode, 2);
        assert_int_equal(f.memory.p, 2);
        assert_int_equal(f.memory.q, 0);
        assert_int_equal(f.memory.l, 1);
        assert_int_equal(f.memory.t_phi, 2);
        assert_int_equal(f.memory.k, 1);
        assert_true(std::fabs(f.memory.pole_radius_min - 0.995) < 1e-12);
    }
}

static void alibi_fit_matches_exact_response(void **) {
    AttnRun run(model_dir("bloom"), 16, 4, 1, STK_STAGE_MEMORY_FIT);
    ArrayHeader h;
    std::vector<double> c = read_f64(run.path("memory_coeff.bin"), &h);
    assert_true(h.dims[0] >= 1 && h.dims[0] <= 6);
    // 4 heads: slopes 2^-2, 2^-4, 2^-6, 2^-8 (BLOOM / the ALiBi paper).
    const size_t n = 512;
    std::vector<double> y = plain_impulse(c, n);
    double err = 0, nrm = 0;
    for (size_t t = 0; t < n; t++) {
        double ref = 0;
        for (int k = 1; k <= 4; k++) ref += std::exp(-std::pow(2.0, -2.0 * k) * double(t));
        ref /= 4;
        err += (y[t] - ref) * (y[t] - ref);
        nrm += ref * ref;
    }
    if (std::sqrt(err / nrm) > 1e-6) fail_msg("ALiBi fit relative L2 %g", std::sqrt(err / nrm));
    const ManifestFields &f = run.j().manifest.fields;
    assert_int_equal(f.memory.mode, 1);
    assert_int_equal(f.memory.q, 1);
    assert_int_equal(f.memory.l, h.dims[0]);
    // Every pole inside the unit circle; the smallest is the fastest head, exp(-1/4).
    assert_true(std::fabs(f.memory.pole_radius_min - std::exp(-0.25)) < 1e-6);
}

static void learned_fit_error_recorded_honestly(void **) {
    const std::string dir = model_dir("gpt2");
    AttnRun run(dir, 16, 4, 1, STK_STAGE_MEMORY_FIT);
    std::vector<double> c = read_f64(run.path("memory_coeff.bin"));
    auto d = describe_model(dir);
    uint64_t np, dm;
    std::vector<float> P = model_tensor(*d, Role::POS_EMB, kNoLayer, &np, &dm);
    std::vector<double> ref(np);
    for (uint64_t s = 0; s < np; s++) {
        double acc = 0;
        for (uint64_t i = 0; i + s < np; i++)
            for (uint64_t j = 0; j < dm; j++) acc += double(P[i * dm + j]) * P[(i + s) * dm + j];
        ref[s] = acc / double(np - s);
    }
    for (uint64_t s = np; s-- > 0;) ref[s] /= ref[0];
    std::vector<double> y = plain_impulse(c, np);
    double err = 0, nrm = 0;
    for (uint64_t t = 0; t < np; t++) {
        err += (y[t] - ref[t]) * (y[t] - ref[t]);
        nrm += ref[t] * ref[t];
    }
    const double rel = std::sqrt(err / nrm);
    bool found = false;
    for (uint32_t i = 0; i < run.j().manifest.n_records; i++) {
        const ManifestRecord &r = run.j().manifest.records[i];
        if (r.stage == STK_STAGE_MEMORY_FIT && r.kind == kRecordNote && std::string(r.text).rfind("learned", 0) == 0) {
            found = true;
            if (std::fabs(r.value - rel) > 1e-9) fail_msg("recorded %.12g, recomputed %.12g", r.value, rel);
        }
    }
    assert_true(found);
    assert_true(rel < 1.0);  // better than predicting zero
}

static void fit_sos_recovers_known_response(void **) {
    // h = AR(2) at 0.9 e^{+-0.3i} with numerator (1, -0.4) plus AR(1) at 0.5.
    const size_t n = 200;
    std::vector<double> c = {1.0, -0.4, 2 * 0.9 * std::cos(0.3), -0.81, 0.7, 0.0, 0.5, 0.0};
    std::vector<double> h = plain_impulse(c, n);
    std::vector<double> work(fit_sos_workspace(n));
    SosFit f = fit_sos(h.data(), n, 6, work.data(), work.size());
    assert_true(f.rel_l2 < 1e-8);
    assert_true(f.max_radius >= 0.9 - 1e-6 && f.max_radius < 1);  // (an order above 3 may add a pole of no weight)
    // An unstable response is brought inside by 18.3 (scalings recorded, radii < 1).
    std::vector<double> grow(64);
    for (size_t t = 0; t < grow.size(); t++) grow[t] = std::pow(1.05, double(t));
    SosFit g = fit_sos(grow.data(), grow.size(), 2, work.data(), work.size());
    assert_true(g.n_sections >= 1);
    assert_true(g.max_radius < 1);
    assert_true(g.scale_steps > 0 || g.clamped > 0);
}

static void runtime_step_matches_plain_recursion(void **) {
    std::vector<double> c = {0.3, 0.1, 1.2, -0.5, -0.7, 0.25, 0.4, 0.0, 1.0, 0.0, 2 * 0.995 * std::cos(0.1), -0.990025};
    SosSection sec[3];
    for (int k = 0; k < 3; k++) sec[k] = SosSection{c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]};
    const size_t n = 1000;
    std::vector<double> ref = plain_impulse(c, n), got(n);
    double max_state = 0;
    memory_impulse_response(sec, 3, n, got.data(), &max_state);
    for (size_t t = 0; t < n; t++) assert_true(std::fabs(got[t] - ref[t]) <= 1e-12 * (1 + std::fabs(ref[t])));
    assert_true(std::isfinite(max_state));
    // memory_step_f32 rounds once: equal to float() of the f64 step.
    SosState a[3] = {}, b[3] = {};
    for (int t = 0; t < 50; t++) {
        float u = float(std::sin(0.37 * t));
        float y32 = memory_step_f32(sec, a, 3, u);
        double y64 = memory_step(sec, b, 3, double(u));
        assert_true(y32 == float(y64));
    }
    double hi, lo;
    memory_pole_radii(sec, 3, &hi, &lo);
    assert_true(std::fabs(hi - 0.995) < 1e-12);
}

static void acceptance_memory_rows(void **) {
    for (const char *name : {"llama", "bloom", "gpt2"}) {
        AttnRun run(model_dir(name), 16, 4, 1, STK_STAGE_CHECK);
        AcceptanceContext ctx;
        ctx.out_dir = run.out;
        ctx.model_dir = model_dir(name);
        std::vector<AcceptanceRow> rows;
        acceptance_memory(ctx, rows);
        int gating = 0;
        for (const AcceptanceRow &r : rows) {
            assert_true(std::isfinite(r.value));
            if (!r.gating) continue;
            gating++;
            if (!r.pass) fail_msg("%s: %s %g %s %g", name, r.test.c_str(), r.value, r.comparison.c_str(), r.threshold);
        }
        const bool rope = std::string(name) == "llama";
        assert_int_equal(gating, rope ? 2 : 3);  // + the spec's 0.97 where the published bank is the fit
        // 4 rows per candidate + 2 gating comparisons; gpt2's learned table has 32 positions, so
        // its 32-step window is its whole window and is printed once (2 rows per candidate).
        const bool short_table = std::string(name) == "gpt2";
        assert_int_equal(rows.size(), rope ? 18 : short_table ? 8 : 14);
        for (size_t i = 0; i < rows.size(); i++)
            for (size_t j = i + 1; j < rows.size(); j++)
                if (rows[i].test == rows[j].test) fail_msg("%s: row %s printed twice", name, rows[i].test.c_str());
        if (rope) {
            // The spec's AR(2) is reported, and a constant beats it (the reason it is not gating).
            double ar2 = NAN, cst = NAN;
            for (const AcceptanceRow &r : rows) {
                if (r.test == "16.3 cos@32 published-spec-AR(2)") ar2 = r.value;
                if (r.test == "16.3 cos@32 baseline-constant") cst = r.value;
            }
            assert_true(ar2 < cst);
        }
    }
}

// --memory-fit lsq (STK_JOB_MEMORY_FIT_LSQ): the RoPE bank is fit_sos of the weights' RoPE
// kernel (the 16.3 surrogate), published in SOS mode; 16.3 then reports it as the published bank,
// with the same score as its own least-squares fit of the 512-step window, and far above the
// spec's AR(2) of the default conversion.
static void rope_lsq_fits_the_weights_kernel(void **) {
    auto row_value = [](const std::vector<AcceptanceRow> &rows, const std::string &test) -> double {
        for (const AcceptanceRow &r : rows)
            if (r.test == test) return r.value;
        fail_msg("no row %s", test.c_str());
        return NAN;
    };
    std::vector<AcceptanceRow> spec_rows, lsq_rows;
    {
        AttnRun run(model_dir("llama"), 16, 4, 1, STK_STAGE_CHECK);
        AcceptanceContext ctx;
        ctx.out_dir = run.out;
        ctx.model_dir = model_dir("llama");
        acceptance_memory(ctx, spec_rows);
    }
    AttnRun run(model_dir("llama"), 16, 4, 1, STK_STAGE_CHECK, STK_JOB_MEMORY_FIT_LSQ);
    const ManifestFields &f = run.j().manifest.fields;
    assert_int_equal(f.memory.mode, 1);
    assert_int_equal(f.memory.q, 1);
    ArrayHeader h;
    std::vector<double> c = read_f64(run.path("memory_coeff.bin"), &h);
    assert_int_equal(h.dims[1], 4);
    assert_true(h.dims[0] >= 1 && h.dims[0] <= 6);
    assert_int_equal(f.memory.l, h.dims[0]);
    AcceptanceContext ctx;
    ctx.out_dir = run.out;
    ctx.model_dir = model_dir("llama");
    acceptance_memory(ctx, lsq_rows);
    const double pub512 = row_value(lsq_rows, "16.3 cos@512 published-lsq-SOS-fit");
    const double fit512 = row_value(lsq_rows, "16.3 cos@512 least-squares-SOS-fit");
    const double ar2_512 = row_value(spec_rows, "16.3 cos@512 published-spec-AR(2)");
    if (std::fabs(pub512 - fit512) > 1e-12) fail_msg("published %.17g vs 16.3's own fit %.17g", pub512, fit512);
    // (the fixture: 8 rotary pairs at base 1e4, six sections reach cosine 0.946 over 512 steps)
    if (!(pub512 > 0.9 && pub512 > ar2_512 + 0.5)) fail_msg("lsq cos@512 %g, spec AR(2) %g", pub512, ar2_512);
    const double l2 = row_value(lsq_rows, "16.3 relL2@512 published-lsq-SOS-fit");
    const double l2_cst = row_value(lsq_rows, "16.3 relL2@512 baseline-constant");
    if (!(l2 < l2_cst)) fail_msg("lsq relL2@512 %g vs the constant's %g", l2, l2_cst);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rope_models_get_the_spec_ar2),         cmocka_unit_test(alibi_fit_matches_exact_response),
        cmocka_unit_test(learned_fit_error_recorded_honestly),  cmocka_unit_test(fit_sos_recovers_known_response),
        cmocka_unit_test(runtime_step_matches_plain_recursion), cmocka_unit_test(acceptance_memory_rows),
        cmocka_unit_test(rope_lsq_fits_the_weights_kernel),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
