// prf_build (seed 5, 12.2) against a plain double reference on every tiny model; determinism
// across threads and runs; parameter and model refusals; the 16.1 acceptance rows.
#include "attn_job.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sys/wait.h>

#include "acceptance/runner.h"
#include "core/mapped_file.h"
#include "core/prng.h"
#include "format/manifest.h"
#include "publish/generations.h"
#include "ingest/model.h"
#include "stages/attn_common.h"

using namespace stk;
using namespace stk::test;

#define PINNED_PRF_W 0x0f03a5b5dd485f4bull
#define PINNED_PRF_STAGE 0x6528e00069c404eeull  // stage digests: header_crc fed as zeros (docs/format.md)
#define PINNED_MEMORY_STAGE 0x61dcd055453c946eull

static const char *kModels[] = {"llama", "gpt2", "gpt_neox", "bloom", "mixtral", "qwen2_moe"};

// The stage's path (sqrt(d) once, draws scaled to f32 in the vectorised kernel; odd widths
// through the double buffer) gives prf_rows' bytes, for even and odd widths and any row split.
static void prf_rows_paths_agree(void **) {
    for (uint64_t cols : {7ull, 8ull, 64ull}) {
        const uint64_t r = 6;
        std::vector<double> d(cols), sd(cols), scratch(cols);
        for (uint64_t j = 0; j < cols; j++) {
            d[j] = 1e-3 + 0.05 * double(j % 5);
            sd[j] = std::sqrt(d[j]);
        }
        std::vector<float> a(r * cols), b(r * cols);
        prf_rows(prf_stream(9, 2), d.data(), r, cols, a.data(), scratch.data());
        prf_rows_range_sqrt(prf_stream(9, 2), sd.data(), 0, 4, cols, b.data(), scratch.data());
        prf_rows_range_sqrt(prf_stream(9, 2), sd.data(), 4, r, cols, b.data() + 4 * cols, scratch.data());
        assert_memory_equal(a.data(), b.data(), a.size() * 4);
    }
}

static void prf_matches_reference(void **) {
    for (const char *name : kModels) {
        const std::string dir = model_dir(name);
        AttnRun run(dir, 16, 4, 1, STK_STAGE_PRF);
        auto d = describe_model(dir);
        const ModelConfig &c = d->plan.config;
        const uint64_t L = c.n_layers, r = 16, dm = c.d_model, dv = uint64_t(c.n_heads) * c.head_dim;
        ArrayHeader h;
        std::vector<float> W = read_f32(run.path("prf_W.bin"), &h);
        assert_int_equal(h.rank, 3);
        assert_int_equal(h.dims[0], L);
        assert_int_equal(h.dims[1], r);
        assert_int_equal(h.dims[2], dm);
        const double tau = std::sqrt(double(c.head_dim));
        double worst_expected = 0, worst_err = 0;
        for (uint32_t l = 0; l < L; l++) {
            uint64_t rows, cols;
            std::vector<float> wk = model_tensor(*d, Role::K, int32_t(l), &rows, &cols);
            assert_int_equal(rows, uint64_t(c.n_kv_heads ? c.n_kv_heads : c.n_heads) * c.head_dim);
            assert_int_equal(cols, dm);
            std::vector<double> D(dm, 0.0);
            for (uint64_t j = 0; j < dm; j++) {
                double s = 0;
                for (uint64_t i = 0; i < rows; i++) s += double(wk[i * cols + j]) * double(wk[i * cols + j]);
                D[j] = std::max(s / double(rows), 1e-8);
            }
            double log_e = 0;
            for (uint64_t j = 0; j < dm; j++) log_e += -0.5 * std::log(1 - (D[j] / tau) * (D[j] / tau));
            worst_expected = std::max(worst_expected, std::exp(log_e));
            const uint64_t seed = stream_seed(0, 3, l);
            for (uint64_t i = 0; i < r; i++)
                for (uint64_t j = 0; j < dm; j++) {
                    double ref = ref_gaussian(seed, i * dm + j) * std::sqrt(D[j]);
                    double got = W[(l * r + i) * dm + j];
                    worst_err = std::max(worst_err, std::fabs(got - ref) / (std::fabs(ref) + 1e-30));
                }
        }
        if (worst_err > 1e-6) fail_msg("%s: prf_W differs from the reference by %g (relative)", name, worst_err);
        // Cold-start state.
        std::vector<float> mu = read_f32(run.path("whitening_mu.bin"), &h);
        assert_int_equal(h.dims[0], L);
        assert_int_equal(h.dims[1], r);
        for (float v : mu) assert_true(v == 0.0f);
        for (float v : read_f32(run.path("whitening_sig2.bin"))) assert_true(v == 1.0f);
        for (float v : read_f32(run.path("s_init.bin"))) assert_true(v == 0.0f);
        std::vector<float> R = read_f32(run.path("R_init.bin"), &h);
        assert_int_equal(h.dims[2], dv);
        assert_int_equal(R.size(), L * r * dv);
        for (float v : R) assert_true(v == 0.0f);
        // Manifest fields.
        const ManifestFields &f = run.j().manifest.fields;
        assert_int_equal(f.prf.r, 16);
        assert_true(f.prf.tau == tau);
        assert_true(f.prf.whitening_eps == 1e-8);
        const double floor_ref = std::max(1e-3, 5e-4 * worst_expected);
        if (std::fabs(f.denominator.beta_floor - floor_ref) > 1e-12 * floor_ref)
            fail_msg("%s: beta_floor %.17g, reference %.17g", name, f.denominator.beta_floor, floor_ref);
    }
}

// Every array of the three stages: same bytes at threads 1 and 2 and on a second run; digests pinned.
static void deterministic_across_threads_and_runs(void **) {
    const char *arrays[] = {"prf_W.bin",      "whitening_mu.bin", "whitening_sig2.bin",  "R_init.bin",       "s_init.bin",
                            "overlays_H.bin", "overlays_U.bin",   "overlays_DeltaW.bin", "memory_coeff.bin", "delaybuf_init.bin"};
    for (const char *name : {"llama", "bloom"}) {
        AttnRun a(model_dir(name), 64, 8, 1, STK_STAGE_MEMORY_FIT);
        AttnRun b(model_dir(name), 64, 8, 2, STK_STAGE_MEMORY_FIT);
        AttnRun c(model_dir(name), 64, 8, 1, STK_STAGE_MEMORY_FIT);
        for (const char *arr : arrays) {
            auto x = read_bytes(a.path(arr)), y = read_bytes(b.path(arr)), z = read_bytes(c.path(arr));
            if (x != y || x != z) fail_msg("%s: %s differs between threads 1 / 2 / a second run", name, arr);
        }
        for (stk_stage s : {STK_STAGE_PRF, STK_STAGE_OVERLAYS, STK_STAGE_MEMORY_FIT}) {
            assert_int_equal(a.j().stages[s].sha256_low64, b.j().stages[s].sha256_low64);
            assert_int_equal(a.j().stages[s].crc32c, c.j().stages[s].crc32c);
        }
    }
    // Pinned: llama, r = 64, rv = 8 (the pinned log / sin / cos of src/kernels/random.cc; docs/decisions.md "PRF").
    AttnRun a(model_dir("llama"), 64, 8, 1, STK_STAGE_MEMORY_FIT);
    ArrayReader w(a.path("prf_W.bin"));
    std::printf("pinned prf_W sha256_low64 %016llx, stage %016llx / %016llx / %016llx\n",
                (unsigned long long)w.header().sha256_low64, (unsigned long long)a.j().stages[STK_STAGE_PRF].sha256_low64,
                (unsigned long long)a.j().stages[STK_STAGE_OVERLAYS].sha256_low64,
                (unsigned long long)a.j().stages[STK_STAGE_MEMORY_FIT].sha256_low64);
    assert_int_equal(w.header().sha256_low64, PINNED_PRF_W);
    assert_int_equal(a.j().stages[STK_STAGE_PRF].sha256_low64, PINNED_PRF_STAGE);
    assert_int_equal(a.j().stages[STK_STAGE_MEMORY_FIT].sha256_low64, PINNED_MEMORY_STAGE);
}

static stk_status arena_status(const std::string &in, const std::string &out, uint32_t r, uint32_t rv) {
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_dir = out.c_str();
    p.r = r;
    p.rv = rv;
    size_t n = 0;
    return stk_job_arena_size(&p, &n);
}

static void copy_model_with_config(const std::string &from, const std::string &to, const std::string &find,
                                   const std::string &repl) {
    make_dirs(to);
    auto cfg = read_bytes(from + "/config.json");
    std::string s(cfg.begin(), cfg.end());
    size_t at = s.find(find);
    assert_true(at != std::string::npos);
    s.replace(at, find.size(), repl);
    write_bytes(to + "/config.json", std::vector<uint8_t>(s.begin(), s.end()));
    auto w = read_bytes(from + "/model.safetensors");
    write_bytes(to + "/model.safetensors", w);
}

static void bad_params_and_configs_refused(void **) {
    const std::string tmp = make_temp_dir("attn_bad");
    const std::string llama = model_dir("llama_f32");
    // r odd / too small, rv above d_model: refused when the job is sized, nothing created.
    assert_int_equal(arena_status(llama, tmp + "/o1", 7, 4), STK_E_INVALID_ARGUMENT);
    assert_int_equal(arena_status(llama, tmp + "/o1", 4, 2), STK_E_INVALID_ARGUMENT);
    assert_int_equal(arena_status(llama, tmp + "/o1", 16, 17), STK_E_INVALID_ARGUMENT);
    assert_int_equal(arena_status(llama, tmp + "/o1", 64, 65), STK_E_INVALID_ARGUMENT);
    assert_true(std::string(stk_last_error()).find("rv = 65") != std::string::npos);
    assert_false(file_exists(tmp + "/o1"));
    // rope_theta <= 0.
    copy_model_with_config(llama, tmp + "/theta", "\"rope_theta\": 10000.0", "\"rope_theta\": -1.0");
    assert_int_equal(arena_status(tmp + "/theta", tmp + "/o2", 16, 4), STK_E_BAD_JSON);
    assert_true(std::string(stk_last_error()).find("rope_theta") != std::string::npos);
    // W_K not of the expected shape (config says 4 key/value heads, the tensor has 2): refused,
    // naming the tensor.
    copy_model_with_config(llama, tmp + "/gqa", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4");
    assert_int_equal(arena_status(tmp + "/gqa", tmp + "/o3", 16, 4), STK_E_PARAM_COUNT);
    assert_true(std::string(stk_last_error()).find("k_proj") != std::string::npos);
    // head_dim not dividing d_model (no explicit head_dim).
    copy_model_with_config(llama, tmp + "/heads", "\"num_attention_heads\": 4", "\"num_attention_heads\": 5");
    assert_int_equal(arena_status(tmp + "/heads", tmp + "/o4", 16, 4), STK_E_BAD_JSON);
    assert_true(std::string(stk_last_error()).find("multiple") != std::string::npos);
    assert_false(file_exists(tmp + "/o2"));
    assert_false(file_exists(tmp + "/o3"));
    assert_false(file_exists(tmp + "/o4"));
}

// 16.1 on a published llama generation: every gating row passes; the rows are there.
static void acceptance_prf_rows(void **) {
    AttnRun run(model_dir("llama"), 64, 8, 1, STK_STAGE_CHECK);
    AcceptanceContext ctx;
    ctx.out_dir = run.out;
    ctx.model_dir = model_dir("llama");
    std::vector<AcceptanceRow> rows;
    acceptance_prf(ctx, rows);
    size_t gating = 0, model_scale = 0;
    for (const AcceptanceRow &r : rows) {
        if (r.gating) {
            gating++;
            if (!r.pass)
                fail_msg("%s: %g %s %g (%s)", r.test.c_str(), r.value, r.comparison.c_str(), r.threshold, r.note.c_str());
        }
        if (r.test.find("model-scale") != std::string::npos) {
            model_scale++;
            assert_false(r.gating);
            assert_true(std::isfinite(r.value) && r.value > 0);
        }
    }
    assert_int_equal(gating, 7);            // reproducible + 3 x (mean, variance)
    assert_int_equal(model_scale, 2 * 12);  // 2 layers x 3 r x 4 temperatures
    // Without the model: the estimator rows on the synthetic diagonal, model scale skipped.
    ctx.model_dir.clear();
    rows.clear();
    acceptance_prf(ctx, rows);
    assert_int_equal(rows.size(), 7);
    assert_true(acceptance_passed(rows));
    assert_true(acceptance_json(rows).find("\"passed\": true") == 1);
    // One failing gating row fails the whole table; a missing reported figure does not.
    rows.push_back(acceptance_row("x", "a reported row that misses", 2, 1, "<=", false));
    assert_true(acceptance_passed(rows));
    rows.push_back(acceptance_row("y", "a gating row that fails", 2, 1, "<=", true));
    assert_false(acceptance_passed(rows));
    assert_true(acceptance_json(rows).find("\"passed\": false") == 1);
}

// The CLI: stk convert --partial publishes, stk check --acceptance --json prints the table and
// exits 0 when every gating row passes.
static void cli_convert_check_acceptance(void **) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) fail_msg("STK_BIN is not set");
    const std::string out = make_temp_dir("attn_cli") + "/out", model = model_dir("bloom");
    std::string cmd = std::string(bin) + " convert --in " + model + " --out " + out + " --partial --r 16 --rv 4 >/dev/null 2>&1";
    assert_int_equal(std::system(cmd.c_str()), 0);
    const std::string gen = resolve_generation(out);  // out is a generations root: its current one
    for (const char *a : {"prf_W.bin", "overlays_U.bin", "memory_coeff.bin"}) assert_true(file_exists(gen + "/arrays/" + a));
    // The published manifest carries the fields and the stage states.
    Manifest m = read_manifest(gen + "/" + kManifestFileName);
    assert_int_equal(m.fields.prf.r, 16);
    assert_true(m.fields.denominator.beta_floor >= 1e-3);
    assert_int_equal(m.fields.overlays.r_v, 4);
    assert_int_equal(m.fields.memory.mode, 1);
    for (stk_stage st : {STK_STAGE_PRF, STK_STAGE_OVERLAYS, STK_STAGE_MEMORY_FIT}) {
        assert_int_equal(m.stages[st - 1].state, kStageRan);
        assert_true(m.stages[st - 1].crc32c != 0 || m.stages[st - 1].sha256_low64 != 0);
    }
    cmd = std::string(bin) + " check --out " + out + " --acceptance --model " + model + " --json 2>/dev/null";
    FILE *f = popen(cmd.c_str(), "r");
    assert_non_null(f);
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    int status = pclose(f);
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(text.find("\"acceptance\": {\"passed\": true") != std::string::npos);
    assert_true(text.find("16.1 prf-estimator-mean") != std::string::npos);
    assert_true(text.find("16.3 fit-beats-baselines") != std::string::npos);
    // --model without --acceptance is a usage error.
    cmd = std::string(bin) + " check --out " + out + " --model " + model + " >/dev/null 2>&1";
    assert_int_equal(WEXITSTATUS(std::system(cmd.c_str())), 2);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prf_rows_paths_agree),
        cmocka_unit_test(prf_matches_reference),
        cmocka_unit_test(deterministic_across_threads_and_runs),
        cmocka_unit_test(bad_params_and_configs_refused),
        cmocka_unit_test(acceptance_prf_rows),
        cmocka_unit_test(cli_convert_check_acceptance),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
