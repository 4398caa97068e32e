// stk convert --calibration (src/stages/calib_job.h): the job opens and checks the statistics
// (shape at stk_open, model digest after parse_tensors, exact status and message); without a
// calibration every stage digest stays as pinned (an old-size stk_job_params and a NULL field
// alike); with one, ffn_collapse keeps its keys and refits the values (checked against a plain
// Gaussian elimination of the file's own moments), the delta order and tau follow the new
// values, the manifest records what was fitted, and the bytes do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <sys/wait.h>

#include <hwy/targets.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "calib_writer.h"
#include "format/calib_stats.h"
#include "ingest/model.h"
#include "stages/calib_job.h"
#include "stages/ffn_collapse.h"
#include "stages/job.h"
#include "stk/stk.h"
#include "test_util.h"

struct stk_job : stk::Job {};

using namespace stk;
using namespace stk::test;

namespace {

struct Run {
    std::unique_ptr<uint8_t[]> mem;
    stk_job *job = nullptr;
    std::string out;
    stk_status open = STK_OK, failed = STK_OK;
    std::string error;
    // size_override: a struct_size other than today's (an older caller's).
    Run(const std::string &model, const char *calibration, uint32_t threads, stk_stage last, size_t size_override = 0) {
        out = make_temp_dir("calib") + "/out";
        stk_job_params p{};
        p.struct_size = size_override ? size_override : sizeof p;
        p.in_dir = model.c_str();
        p.out_dir = out.c_str();
        p.threads = threads;
        p.flags = STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
        if (!size_override) p.calibration = calibration;
        size_t n = 0;
        open = stk_job_arena_size(&p, &n);
        if (open != STK_OK) return;
        mem.reset(new uint8_t[n]);
        open = stk_open(&p, mem.get(), n, &job);
        if (open != STK_OK) {
            error = stk_last_error();
            return;
        }
        for (int s = STK_STAGE_PARSE_TENSORS; s <= int(last); s++) {
            stk_status st = stk_stage_run(job, stk_stage(s));
            if (st != STK_OK && st != STK_E_NOT_IMPLEMENTED) {
                failed = st;
                error = stk_last_error();
                return;
            }
        }
    }
    ~Run() { stk_close(job); }
    Job &j() { return *job; }
    bool has_record(const char *text) {
        for (uint32_t i = 0; i < j().manifest.n_records; i++)
            if (std::string(j().manifest.records[i].text).find(text) != std::string::npos) return true;
        return false;
    }
};

std::string model(const char *name) { return test_data(std::string("models/") + name); }

// The llama fixture's shape: 2 layers, d_model 64, 4 heads of 16 (d_v 64), 8 rotary pairs.
StatsSpec llama_spec(const Job &parsed, uint32_t sections) {
    StatsSpec s;
    s.model_crc = parsed.stages[STK_STAGE_PARSE_TENSORS].crc32c;
    s.model_sha = parsed.stages[STK_STAGE_PARSE_TENSORS].sha256_low64;
    s.n_layers = 2;
    s.d_model = 64;
    s.d_v = 64;
    s.n_pairs = 8;
    s.sections = sections;
    return s;
}

// Pinned: the llama fixture converted without data (default options, this test's flags), as
// main's `stk convert --json` printed them before --calibration existed.
struct Pin {
    stk_stage stage;
    uint32_t crc;
    uint64_t sha;
};
const Pin kLlamaPins[] = {
    {STK_STAGE_PARSE_TENSORS, 0x975b5e2d, 0xa678e4ee2ed614faull}, {STK_STAGE_TOKENIZER, 0xb1814d75, 0x4ec529d832aba351ull},
    {STK_STAGE_PRF, 0x757355e9, 0xc67cccde8177098dull},           {STK_STAGE_OVERLAYS, 0x084faef8, 0xca64d489060597eaull},
    {STK_STAGE_FFN_COLLAPSE, 0x1587c86a, 0x79d75855294f900full},  {STK_STAGE_MPHF_CUCKOO, 0x9144ebc3, 0x8c78b4a2106c99a1ull},
    {STK_STAGE_MEMORY_FIT, 0xdefcf203, 0x61dcd055453c946eull},    {STK_STAGE_BRIDGE_INIT, 0x81b58328, 0x8262cb4a9abdd757ull},
};

}  // namespace

static void no_calibration_keeps_every_digest(void **) {
    const size_t old_size = offsetof(stk_job_params, calibration);
    Run a(model("llama"), nullptr, 1, STK_STAGE_BRIDGE_INIT);
    Run b(model("llama"), nullptr, 1, STK_STAGE_BRIDGE_INIT, old_size);
    if (a.failed || b.failed || a.open || b.open) fail_msg("%s", (a.error + b.error).c_str());
    for (const Pin &p : kLlamaPins) {
        assert_int_equal(a.j().stages[p.stage].crc32c, p.crc);
        assert_int_equal(a.j().stages[p.stage].sha256_low64, p.sha);
        assert_int_equal(b.j().stages[p.stage].crc32c, p.crc);
        assert_int_equal(b.j().stages[p.stage].sha256_low64, p.sha);
    }
    assert_int_equal(a.j().manifest.n_records, b.j().manifest.n_records);
    assert_false(a.has_record("calib"));
}

// Issue 40: the digests above under every Highway target this CPU runs (the dispatch mocked down
// to each in turn).  Targets with FMA (AVX2, AVX-512) give the pinned bytes; a dispatch left
// without one (SSE4, SSSE3, scalar: the sketch passes would round apart) is refused at stk_open
// with STK_E_UNSUPPORTED, before anything is written.
static void every_highway_target_keeps_every_digest(void **) {
    int fma_targets = 0, refused = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        const bool fma = (target & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) != 0;
        Run a(model("llama"), nullptr, 2, STK_STAGE_BRIDGE_INIT);
        hwy::SetSupportedTargetsForTest(0);
        if (!fma) {
            if (a.open != STK_E_UNSUPPORTED) fail_msg("target %s: stk_open gave %d, not STK_E_UNSUPPORTED", hwy::TargetName(target), a.open);
            if (a.error.find("no AVX2 + FMA") == std::string::npos) fail_msg("target %s: %s", hwy::TargetName(target), a.error.c_str());
            assert_false(file_exists(a.out));
            refused++;
            continue;
        }
        if (a.failed || a.open) fail_msg("target %s: %s", hwy::TargetName(target), a.error.c_str());
        for (const Pin &p : kLlamaPins)
            if (a.j().stages[p.stage].crc32c != p.crc || a.j().stages[p.stage].sha256_low64 != p.sha)
                fail_msg("target %s: stage %s crc32c %08x, pinned %08x", hwy::TargetName(target), stk_stage_name(p.stage),
                         a.j().stages[p.stage].crc32c, p.crc);
        fma_targets++;
    }
    print_message("Highway targets: %d with FMA gave the pinned digests, %d without were refused\n", fma_targets, refused);
    assert_true(fma_targets >= 1);
}

static void refusals_name_file_field_and_digests(void **) {
    Run parsed(model("llama"), nullptr, 1, STK_STAGE_PARSE_TENSORS);
    const std::string dir = make_temp_dir("calib-refuse");
    // Another shape: d_v 32 instead of 64.
    StatsSpec s = llama_spec(parsed.j(), kCalibFfn);
    s.d_v = 32;
    s.sections = kCalibFfn;
    const std::string wrong_dims = dir + "/dims.stats";
    write_stats(wrong_dims, s);
    Run a(model("llama"), wrong_dims.c_str(), 1, STK_STAGE_PARSE_TENSORS);
    assert_int_equal(a.open, STK_E_INVALID_ARGUMENT);
    assert_string_equal(a.error.c_str(),
                        ("calibration statistics " + wrong_dims +
                         ": d_v is 32, this model's is 64 (statistics of another model's shape)")
                            .c_str());
    assert_false(file_exists(a.out));  // refused before the output directory exists
    // Another model: the digest's crc32c off by one.
    StatsSpec t = llama_spec(parsed.j(), kCalibFfn);
    t.model_crc ^= 1;
    const std::string other = dir + "/other.stats";
    write_stats(other, t);
    Run b(model("llama"), other.c_str(), 1, STK_STAGE_FFN_COLLAPSE);
    assert_int_equal(b.open, STK_OK);
    assert_int_equal(b.failed, STK_E_INVALID_ARGUMENT);
    char want[512];
    std::snprintf(want, sizeof want,
                  "calibration statistics %s were made from another model: their model digest is crc32c %08x "
                  "sha256_low64 %016llx, this model's is crc32c %08x sha256_low64 %016llx",
                  other.c_str(), t.model_crc, (unsigned long long)t.model_sha, t.model_crc ^ 1,
                  (unsigned long long)t.model_sha);
    assert_string_equal(b.error.c_str(), want);
    assert_false(b.j().stages[STK_STAGE_PARSE_TENSORS].done);
    // A corrupt file is refused by the reader at stk_open.
    std::vector<uint8_t> bytes = read_bytes(other);
    bytes[200] ^= 0x40;
    const std::string corrupt = dir + "/corrupt.stats";
    write_bytes(corrupt, bytes);
    Run c(model("llama"), corrupt.c_str(), 1, STK_STAGE_PARSE_TENSORS);
    assert_int_equal(c.open, STK_E_CHECKSUM);
}

// Solves (A + lambda I) x = b by Gaussian elimination with partial pivoting (k x k, row-major).
static std::vector<double> gauss(std::vector<double> a, std::vector<double> b, size_t k) {
    for (size_t c = 0; c < k; c++) {
        size_t p = c;
        for (size_t r = c + 1; r < k; r++)
            if (std::fabs(a[r * k + c]) > std::fabs(a[p * k + c])) p = r;
        for (size_t q = 0; q < k; q++) std::swap(a[c * k + q], a[p * k + q]);
        std::swap(b[c], b[p]);
        for (size_t r = c + 1; r < k; r++) {
            const double f = a[r * k + c] / a[c * k + c];
            for (size_t q = c; q < k; q++) a[r * k + q] -= f * a[c * k + q];
            b[r] -= f * b[c];
        }
    }
    std::vector<double> x(k);
    for (size_t c = k; c-- > 0;) {
        double s = b[c];
        for (size_t q = c + 1; q < k; q++) s -= a[c * k + q] * x[q];
        x[c] = s / a[c * k + c];
    }
    return x;
}

static void ffn_values_refit_on_the_moments(void **) {
    Run parsed(model("llama"), nullptr, 1, STK_STAGE_FFN_COLLAPSE);
    const std::string path = make_temp_dir("calib-ffn") + "/ffn.stats";
    const std::vector<uint8_t> file = write_stats(path, llama_spec(parsed.j(), kCalibFfn));
    Run cal(model("llama"), path.c_str(), 1, STK_STAGE_FFN_COLLAPSE);
    if (cal.open || cal.failed) fail_msg("%s", cal.error.c_str());
    const LinearHandoff &h0 = *parsed.j().linear, &h = *cal.j().linear;
    // Keys: the base identical and in the same order; the delta the same count.
    assert_int_equal(h.n_base, h0.n_base);
    assert_int_equal(h.n_delta, h0.n_delta);
    assert_memory_equal(h.base_keys, h0.base_keys, h.n_base * 8);
    assert_true(cal.j().stages[STK_STAGE_FFN_COLLAPSE].sha256_low64 != parsed.j().stages[STK_STAGE_FFN_COLLAPSE].sha256_low64);
    // The delta: per (unit, sign, column) the same keys, ordered by the new |value|.
    std::map<uint64_t, float> val;  // key -> value (calibrated)
    for (uint64_t e = 0; e < h.n_base; e++) val[h.base_keys[e]] = h.base_vals[e];
    float lo = INFINITY, hi = 0;
    for (uint64_t e = 0; e < h.n_delta; e++) {
        float v;
        std::memcpy(&v, &h.delta_vals[e], 4);
        val[h.delta_keys[e]] = v;
        lo = std::min(lo, std::fabs(v));
        hi = std::max(hi, std::fabs(v));
        if (e > 0 && (h.delta_keys[e] & ~uint64_t(0xFFFFFF000000ull)) == (h.delta_keys[e - 1] & ~uint64_t(0xFFFFFF000000ull))) {
            float u;
            std::memcpy(&u, &h.delta_vals[e - 1], 4);
            assert_true(std::fabs(u) >= std::fabs(v));
        }
    }
    assert_true(h.tau_low == lo && h.tau_high == hi);
    std::vector<uint64_t> k0(h0.delta_keys, h0.delta_keys + h0.n_delta), k1(h.delta_keys, h.delta_keys + h.n_delta);
    std::sort(k0.begin(), k0.end());
    std::sort(k1.begin(), k1.end());
    assert_true(k0 == k1);
    // Values: each output's entries solved from the file's moments (payload per layer: G packed
    // of order 2d, X [2d, d], yy [d]), lambda 1e-4 times the mean of G's diagonal over them.
    const uint64_t d = 64, n = 128, g_len = n * (n + 1) / 2, layer_len = g_len + n * d + d;
    const double *pay = reinterpret_cast<const double *>(file.data() + 128 + 16 * 2);
    double worst = 0;
    for (uint32_t u = 0; u < 2; u++) {
        const double *G = pay + u * layer_len, *X = G + g_len;
        std::map<uint64_t, std::vector<uint64_t>> by_out;  // output -> keys, in z order
        for (const auto &kv : val)
            if (linear_key_unit(kv.first) == u) by_out[linear_key_out(kv.first)].push_back(kv.first);
        assert_int_equal(by_out.size(), d);
        for (const auto &o : by_out) {
            const size_t k = o.second.size();
            std::vector<uint64_t> zs(k);
            for (size_t q = 0; q < k; q++) zs[q] = linear_key_sign(o.second[q]) * d + linear_key_in(o.second[q]);
            std::vector<double> A(k * k), b(k);
            double diag = 0;
            for (size_t q = 0; q < k; q++) diag += G[calib_packed_index(n, zs[q], zs[q])];
            for (size_t a = 0; a < k; a++) {
                for (size_t c = 0; c < k; c++) A[a * k + c] = G[calib_packed_index(n, zs[a], zs[c])];
                A[a * k + a] += 1e-4 * diag / double(k);
                b[a] = X[zs[a] * d + o.first];
            }
            const std::vector<double> x = gauss(A, b, k);
            for (size_t q = 0; q < k; q++) {
                const double got = val[o.second[q]], err = std::fabs(got - x[q]) / std::max(1.0, std::fabs(x[q]));
                worst = std::max(worst, err);
            }
        }
    }
    std::printf("ffn refit: worst |value - reference| / max(1, |reference|) = %.3g\n", worst);
    assert_true(worst < 1e-5);  // f32 values of a double solve
    assert_true(cal.has_record("calibrated values: 2 of 2 layers fitted"));
    assert_true(cal.has_record("calibrated FFN L0: rel L2 on the moments"));
    assert_true(cal.has_record("calib sha256 "));
}

static void calibrated_bytes_same_at_any_thread_count(void **) {
    Run parsed(model("llama"), nullptr, 1, STK_STAGE_PARSE_TENSORS);
    const std::string path = make_temp_dir("calib-threads") + "/all.stats";
    write_stats(path, llama_spec(parsed.j(), kCalibAllSections));
    Run a(model("llama"), path.c_str(), 1, STK_STAGE_BRIDGE_INIT);
    Run b(model("llama"), path.c_str(), 2, STK_STAGE_BRIDGE_INIT);
    if (a.open || a.failed || b.open || b.failed) fail_msg("%s / %s", a.error.c_str(), b.error.c_str());
    for (int s = STK_STAGE_PARSE_TENSORS; s <= STK_STAGE_BRIDGE_INIT; s++) {
        assert_int_equal(a.j().stages[s].crc32c, b.j().stages[s].crc32c);
        assert_int_equal(a.j().stages[s].sha256_low64, b.j().stages[s].sha256_low64);
    }
    // Everything the calibration does not touch keeps its pinned bytes.
    for (const Pin &p : kLlamaPins)
        if (p.stage == STK_STAGE_PARSE_TENSORS || p.stage == STK_STAGE_TOKENIZER)
            assert_int_equal(a.j().stages[p.stage].sha256_low64, p.sha);
    assert_true(a.has_record("calibrated whitener: "));
    assert_true(a.has_record("calibrated: bank vs the activations' RoPE kernel (2 layers)"));
    assert_true(a.has_record("calibrated U: "));
    for (uint32_t i = 0; i < a.j().manifest.n_records; i++)
        std::printf("record: %s [value %.6g bound %.6g]\n", a.j().manifest.records[i].text, a.j().manifest.records[i].value,
                    a.j().manifest.records[i].bound);
}

// The command line on a second family (gpt2: no RoPE, so n_pairs 0 and no rope section; FFN
// biases): convert --calibration publishes, and stk check verifies the generation.
static void cli_convert_calibrated_then_check(void **) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) fail_msg("STK_BIN is not set");
    Run parsed(model("gpt2"), nullptr, 1, STK_STAGE_PARSE_TENSORS);
    if (parsed.open || parsed.failed) fail_msg("%s", parsed.error.c_str());
    const CalibShape sh = calib_shape_of(parsed.j().model->config);
    assert_int_equal(sh.n_pairs, 0);
    StatsSpec s;
    s.model_crc = parsed.j().stages[STK_STAGE_PARSE_TENSORS].crc32c;
    s.model_sha = parsed.j().stages[STK_STAGE_PARSE_TENSORS].sha256_low64;
    s.n_layers = sh.n_layers;
    s.d_model = sh.d_model;
    s.d_v = sh.d_v;
    s.sections = kCalibFfn | kCalibPrfPairs | kCalibAttnOut;
    const std::string dir = make_temp_dir("calib-cli"), stats = dir + "/gpt2.stats", root = dir + "/root";
    write_stats(stats, s);
    const std::string conv = std::string(bin) + " convert --in " + model("gpt2") + " --out " + root +
                             " --partial --r 16 --rv 4 --calibration " + stats + " >" + dir + "/log 2>&1";
    if (std::system(conv.c_str()) != 0) fail_msg("%s failed", conv.c_str());
    const std::string check = std::string(bin) + " check --out " + root + " >>" + dir + "/log 2>&1";
    assert_int_equal(std::system(check.c_str()), 0);
    // Statistics of another shape: exit 2 (invalid argument), nothing published.
    s.d_model += 1;
    write_stats(stats, s);
    const std::string bad = std::string(bin) + " convert --in " + model("gpt2") + " --out " + dir + "/root2 --partial --r 16 " +
                            "--rv 4 --calibration " + stats + " >" + dir + "/log2 2>&1";
    const int rc = std::system(bad.c_str());
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) != 0);
    const std::vector<uint8_t> log = read_bytes(dir + "/log2");
    assert_true(std::string(log.begin(), log.end()).find("d_model is") != std::string::npos);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_calibration_keeps_every_digest),
        cmocka_unit_test(every_highway_target_keeps_every_digest),
        cmocka_unit_test(refusals_name_file_field_and_digests),
        cmocka_unit_test(ffn_values_refit_on_the_moments),
        cmocka_unit_test(calibrated_bytes_same_at_any_thread_count),
        cmocka_unit_test(cli_convert_calibrated_then_check),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
