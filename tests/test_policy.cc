// The failure policy (seed 1.4) and the troubleshooting rules 18.1, 18.2, 18.3, 18.5, each forced
// through the test-only fault slot (src/core/test_fault.h) or a test knob, with its record, the
// stage states, the arrays on disk and the manifest checked.  18.4 belongs to bridge_init.
#include <sys/wait.h>

#include <dirent.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/checksum.h"
#include "core/output_file.h"
#include "core/test_fault.h"
#include "format/array.h"
#include "format/manifest.h"
#include "runtime/generation.h"
#include "stages/ffn_collapse.h"
#include "stages/policy.h"
#include "linear_job.h"

using namespace stk;
using namespace stk::test;

namespace {

// Every stage through the C API (linear_job.h), with the greedy token tables written so that the
// tokenizer has arrays too.  tests/data/models/<model>, or a path.
// With `root`, into a generations root (STK_JOB_PUBLISH_ROOT: the arrays' commits wait on the
// job's commit thread, so a breach's undo meets earlier stages' files not yet under their names);
// the published generation's directory is returned.
std::string convert_all(const std::string &model, const char *tag, unsigned threads = 1, bool root = false) {
    const uint32_t flags = STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER | (root ? STK_JOB_PUBLISH_ROOT : 0u);
    return convert_model(model, threads, 0, tag, flags).out;
}

std::vector<uint8_t> file(const std::string &p) { return read_bytes(p); }

std::set<std::string> dir_names(const std::string &dir) {
    std::set<std::string> s;
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d))
            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) s.insert(e->d_name);
        closedir(d);
    }
    return s;
}

const ManifestRecord *record(const Manifest &m, int stage, RecordKind kind, const char *text) {
    for (const ManifestRecord &r : m.records)
        if (r.stage == stage && r.kind == kind && std::strstr(r.text, text)) return &r;
    return nullptr;
}

int count_records(const Manifest &m, int stage, const char *text) {
    int n = 0;
    for (const ManifestRecord &r : m.records)
        if (r.stage == stage && std::strstr(r.text, text)) n++;
    return n;
}

// The listed arrays are exactly the files under arrays/ (nothing half-written or orphaned).
void assert_arrays_dir_matches(const std::string &out, const Manifest &m) {
    std::set<std::string> listed;
    for (const ManifestArray &a : m.arrays) listed.insert(a.name);
    assert_true(dir_names(out + "/arrays") == listed);
}

struct Cmd {
    int code;
    std::string out;
};
Cmd run_stk(const std::string &args, const char *env = "") {
    const char *bin = std::getenv("STK_BIN");
    assert_non_null(bin);
    std::string cmd = std::string(env) + " " + bin + " " + args + " 2>&1";
    Cmd c{-1, ""};
    FILE *f = popen(cmd.c_str(), "r");
    assert_non_null(f);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) c.out.append(buf, n);
    int rc = pclose(f);
    c.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return c;
}

}  // namespace

// One generic breach per optional stage: the feature is disabled (state, record with the bound,
// the measured value and the stage), its arrays are gone from disk and manifest, the stages that
// need it are disabled with their own record, every other stage's arrays are byte-identical to a
// run without the fault, and the generation verifies.  Into a plain output directory and into a
// generations root (where the undo meets earlier stages' files still on the commit thread).
// tiny-gpt2 (bindings/testdata) has a tokenizer: with the uncertified flag every optional stage
// that exists writes arrays.
static std::string tiny_gpt2() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
}

static void breach_in_each_optional_stage(void **) {
    const std::string plain = convert_all(tiny_gpt2(), "pol-plain");
    const Manifest pm = read_manifest(plain + "/sera_manifest.bin");
    struct Case {
        stk_stage stage;
        stk_stage dependent;  // disabled with it (STK_STAGE_COUNT + 1: none)
    };
    const stk_stage none = stk_stage(STK_STAGE_COUNT + 1);
    const Case cases[] = {{STK_STAGE_TOKENIZER, none},   {STK_STAGE_PRF, STK_STAGE_OVERLAYS},
                          {STK_STAGE_OVERLAYS, none},    {STK_STAGE_FFN_COLLAPSE, STK_STAGE_MPHF_CUCKOO},
                          {STK_STAGE_MPHF_CUCKOO, none}, {STK_STAGE_MEMORY_FIT, none}};
    for (const Case &c : cases)
        for (bool root : {false, true}) {
            const char *name = find_stage(c.stage)->name;
            // The stage wrote arrays in the plain run, so removing them is tested.
            bool had_arrays = false;
            for (const ManifestArray &a : pm.arrays) had_arrays |= a.stage == c.stage;
            assert_true(had_arrays);
            set_test_fault((std::string("breach:") + name).c_str());
            const std::string out = convert_all(tiny_gpt2(), "pol-breach", 1, root);
            set_test_fault("");
            const Manifest m = read_manifest(out + "/sera_manifest.bin");
            assert_int_equal(m.stages[c.stage - 1].state, kStageDisabled);
            const ManifestRecord *r = record(m, c.stage, kRecordFeatureDisabled, "disabled: test fault");
            if (!r) print_error("%s: no disabled record\n", name);
            assert_non_null(r);
            assert_int_equal(r->feature, stage_feature(c.stage));
            assert_int_equal(r->status, STK_E_INTERNAL);
            assert_true(r->value == 1.0 && r->bound == 0.0);
            assert_contains(r->text, name);
            for (const ManifestArray &a : m.arrays) {
                assert_int_not_equal(a.stage, c.stage);
                assert_int_not_equal(a.stage, c.dependent);
            }
            if (c.dependent != none) {
                assert_int_equal(m.stages[c.dependent - 1].state, kStageDisabled);
                const ManifestRecord *d = record(m, c.dependent, kRecordFeatureDisabled, "which was disabled");
                assert_non_null(d);
                assert_contains(d->text, name);
            }
            assert_arrays_dir_matches(out, m);
            // Everything else as without the fault.
            for (const ManifestArray &a : pm.arrays) {
                if (a.stage == c.stage || a.stage == c.dependent) continue;
                if (file(plain + "/arrays/" + a.name) != file(out + "/arrays/" + a.name))
                    print_error("%s: %s differs\n", name, a.name);
                assert_true(file(plain + "/arrays/" + a.name) == file(out + "/arrays/" + a.name));
            }
            stk_verify_report rep{};
            rep.struct_size = sizeof rep;
            assert_int_equal(stk_verify(out.c_str(), &rep), STK_OK);
        }
}

// The same through `stk convert`: exit 0, the feature printed as disabled with its reason (text
// and JSON), and `stk check` passes on the generation.
static void convert_cli_completes_with_a_breach(void **) {
    const std::string model = test_data("models/llama");
    std::string out = make_temp_dir("pol-cli") + "/out";
    Cmd c = run_stk("convert --in '" + model + "' --out '" + out + "' --partial", "STK_TEST_FAULT=breach:memory_fit");
    if (c.code != 0) print_error("%s\n", c.out.c_str());
    assert_int_equal(c.code, 0);
    assert_contains(c.out, "memory_fit               DISABLED");
    assert_contains(c.out, "policy      memory: memory_fit disabled: test fault");
    assert_int_equal(run_stk("check --out '" + out + "'").code, 0);
    std::string out2 = make_temp_dir("pol-cli-json") + "/out";
    Cmd j = run_stk("convert --in '" + model + "' --out '" + out2 + "' --partial --json", "STK_TEST_FAULT=breach:prf_build");
    assert_int_equal(j.code, 0);
    assert_contains(j.out, "\"policy_disabled\": [{\"feature\": \"prf\", \"reason\": \"prf_build disabled: test fault");
    assert_contains(j.out, "{\"feature\": \"overlays\", \"reason\": \"overlays_build disabled: it needs prf_build");
    assert_contains(j.out, "\"status\": \"disabled\"");
    assert_int_equal(run_stk("check --out '" + out2 + "'").code, 0);
    // Without the fault nothing is disabled by the policy.
    std::string out3 = make_temp_dir("pol-cli-plain") + "/out";
    Cmd p = run_stk("convert --in '" + model + "' --out '" + out3 + "' --partial --json");
    assert_int_equal(p.code, 0);
    assert_contains(p.out, "\"policy_disabled\": []");
}

// A refused input still stops the job: errors that are not bound breaches are not absorbed.
static void refusals_are_not_breaches(void **) {
    assert_false(is_bound_breach(Error(STK_E_CORRUPT, "x")));
    assert_false(is_bound_breach(Error(STK_E_IO, "x")));
    assert_false(is_bound_breach(Error(STK_E_ARENA_TOO_SMALL, "x")));
    assert_false(is_bound_breach(Error(STK_E_INTERNAL, "x")));
    assert_false(is_bound_breach(Error(STK_E_PARAM_COUNT, "x")));
    assert_true(is_bound_breach(Error(STK_E_NONFINITE, "x")));
    assert_true(is_bound_breach(Error(STK_E_MPHF_EXHAUSTED, "x")));
    assert_true(is_bound_breach(Error(STK_E_TABLE_FULL, "x")));
    assert_true(is_bound_breach(BoundBreach(STK_E_INTERNAL, "b", 1, 0, "x")));
    for (int s = 1; s <= STK_STAGE_COUNT; s++)
        assert_int_equal(stage_is_optional(stk_stage(s)),
                         s != STK_STAGE_PARSE_TENSORS && s != STK_STAGE_MANIFEST_EMIT && s != STK_STAGE_CHECK);
    // A breach in a stage that is not optional stops the job with its status.
    std::string out = make_temp_dir("pol-req") + "/out";
    std::string in = test_data("models/llama");
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_dir = out.c_str();
    size_t bytes = 0;
    assert_int_equal(stk_job_arena_size(&p, &bytes), STK_OK);
    void *arena = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    stk_job *job = nullptr;
    assert_int_equal(stk_open(&p, arena, bytes, &job), STK_OK);
    set_test_fault("breach:parse_tensors");
    assert_int_equal(stk_stage_run(job, STK_STAGE_PARSE_TENSORS), STK_E_INTERNAL);
    set_test_fault("");
    stk_close(job);
    std::free(arena);
}

// 18.1 within its retries (extends test_ffn_collapse's check): M grows twice, only the MPHF's
// arrays change, every other array is byte-identical, the stage is not disabled, and every
// linear value a reader looks up is the same (the replay of the dictionary is identical).
static void rule_18_1_grows_m_only(void **) {
    const std::string plain = convert_all(tiny_gpt2(), "pol-181p");
    g_linear_test_pilot_cap = 1;
    g_linear_test_pilot_cap_attempts = 2;
    const std::string out = convert_all(tiny_gpt2(), "pol-181g");
    g_linear_test_pilot_cap = 0;
    g_linear_test_pilot_cap_attempts = 0;
    const Manifest m = read_manifest(out + "/sera_manifest.bin"), pm = read_manifest(plain + "/sera_manifest.bin");
    assert_int_equal(m.stages[STK_STAGE_MPHF_CUCKOO - 1].state, kStageRan);
    const ManifestRecord *r = record(m, STK_STAGE_MPHF_CUCKOO, kRecordNote, "18.1: MPHF seed search exhausted 2 time(s)");
    assert_non_null(r);
    assert_int_equal(r->status, STK_E_MPHF_EXHAUSTED);
    assert_true(r->value == 2.0 && r->bound == 8.0);
    assert_int_equal(m.arrays.size(), pm.arrays.size());
    for (const ManifestArray &a : pm.arrays) {
        bool placed = !std::strcmp(a.name, "linear_mphf.bin") || !std::strcmp(a.name, "linear_keys.bin") ||
                      !std::strcmp(a.name, "linear_weights.bin");
        if (!placed) assert_true(file(plain + "/arrays/" + a.name) == file(out + "/arrays/" + a.name));
    }
    assert_false(file(plain + "/arrays/linear_mphf.bin") == file(out + "/arrays/linear_mphf.bin"));
    for (int s = 1; s <= STK_STAGE_COUNT; s++)
        if (s != STK_STAGE_MPHF_CUCKOO && s != STK_STAGE_MANIFEST_EMIT && s != STK_STAGE_CHECK)
            assert_int_equal(m.stages[s - 1].sha256_low64, pm.stages[s - 1].sha256_low64);
    // Every base and delta key reads the same value through both dictionaries.
    stk_generation *ga = nullptr, *gb = nullptr;
    assert_int_equal(stk_generation_open(plain.c_str(), &ga), STK_OK);
    assert_int_equal(stk_generation_open(out.c_str(), &gb), STK_OK);
    for (uint64_t row = 0; row < ga->linear_count; row++) {
        uint8_t k[8], va[4], vb[4];
        std::memcpy(k, ga->linear_keys + 8 * row, 8);
        size_t la = 0, lb = 0;
        assert_int_equal(stk_lookup(ga, STK_LOOKUP_LINEAR, k, 8, va, 4, &la), STK_OK);
        assert_int_equal(stk_lookup(gb, STK_LOOKUP_LINEAR, k, 8, vb, 4, &lb), STK_OK);
        assert_memory_equal(va, vb, 4);
    }
    stk_generation_close(ga);
    stk_generation_close(gb);
}

// 18.1 beyond its retries: every attempt's pilot search exhausted -> the linear dictionary is
// disabled (status STK_E_MPHF_EXHAUSTED), ffn_collapse's outputs stay, the conversion completes.
static void rule_18_1_exhausted_retries_disable_linear(void **) {
    g_linear_test_pilot_cap = 1;
    g_linear_test_pilot_cap_attempts = 1000;
    const std::string out = convert_all("llama", "pol-181");
    g_linear_test_pilot_cap = 0;
    g_linear_test_pilot_cap_attempts = 0;
    const Manifest m = read_manifest(out + "/sera_manifest.bin");
    assert_int_equal(m.stages[STK_STAGE_MPHF_CUCKOO - 1].state, kStageDisabled);
    assert_int_equal(m.stages[STK_STAGE_FFN_COLLAPSE - 1].state, kStageRan);
    const ManifestRecord *r = record(m, STK_STAGE_MPHF_CUCKOO, kRecordFeatureDisabled, "mphf_cuckoo disabled");
    assert_non_null(r);
    assert_int_equal(r->status, STK_E_MPHF_EXHAUSTED);
    for (const char *a : {"linear_mphf.bin", "linear_keys.bin", "linear_weights.bin", "cuckoo_delta.bin"})
        assert_false(file_exists(out + "/arrays/" + a));
    assert_arrays_dir_matches(out, m);
    assert_int_equal(stk_verify(out.c_str(), nullptr), STK_OK);
}

// 18.2: a QR output that fails 1e-6 is rerun (stabilized, to 1e-12); the record says so and the
// arrays are the ones a clean run writes (to f32 rounding); the feature stays enabled.
static void rule_18_2_qr_rerun(void **) {
    const std::string plain = convert_all("llama", "pol-182p");
    set_test_fault("overlays_ortho");
    const std::string out = convert_all("llama", "pol-182");
    set_test_fault("");
    const Manifest m = read_manifest(out + "/sera_manifest.bin");
    assert_int_equal(m.stages[STK_STAGE_OVERLAYS - 1].state, kStageRan);
    const ManifestRecord *r = record(m, STK_STAGE_OVERLAYS, kRecordNote, "18.2: 1 QR output(s) failed 1e-6");
    assert_non_null(r);
    assert_true(r->value <= 1e-12 && r->bound == 1e-12);
    const ManifestRecord *c = record(m, STK_STAGE_OVERLAYS, kRecordInvariantPass, "(18.2 reruns: 1)");
    assert_non_null(c);
    assert_true(c->value <= 1e-6);
    assert_null(record(read_manifest(plain + "/sera_manifest.bin"), STK_STAGE_OVERLAYS, kRecordNote, "18.2"));
    std::vector<uint8_t> a = file(plain + "/arrays/overlays_H.bin"), b = file(out + "/arrays/overlays_H.bin");
    assert_int_equal(a.size(), b.size());
    for (size_t i = 128; i + 4 <= a.size(); i += 4) {
        float x, y;
        std::memcpy(&x, &a[i], 4);
        std::memcpy(&y, &b[i], 4);
        assert_true(std::fabs(x - y) <= 1e-6f);
    }
    // Other stages untouched.
    assert_true(file(plain + "/arrays/prf_W.bin") == file(out + "/arrays/prf_W.bin"));
    assert_true(file(plain + "/arrays/memory_coeff.bin") == file(out + "/arrays/memory_coeff.bin"));
}

static double max_pole_radius(const std::string &coeff_path) {
    std::vector<uint8_t> b = file(coeff_path);
    double worst = 0;
    for (size_t off = 128; off + 32 <= b.size(); off += 32) {
        double c[4];
        std::memcpy(c, &b[off], 32);
        // z^2 - a1 z - a2: complex pair radius sqrt(-a2); real roots otherwise.
        double disc = c[2] * c[2] + 4 * c[3];
        double rad = disc < 0 ? std::sqrt(-c[3])
                              : std::max(std::fabs((c[2] + std::sqrt(disc)) / 2), std::fabs((c[2] - std::sqrt(disc)) / 2));
        worst = std::max(worst, rad);
    }
    return worst;
}

// 18.3: poles at 1.05 -> two scalings by 0.95 (1.05 -> 1.0234 -> 0.9975), each recorded, then
// accepted; poles at 1.2 -> three scalings leave 1.111: a breach, memory disabled, no arrays.
static void rule_18_3_pole_scaling(void **) {
    set_test_fault("memory_unstable");
    const std::string out = convert_all("llama", "pol-183");
    set_test_fault("");
    Manifest m = read_manifest(out + "/sera_manifest.bin");
    assert_int_equal(m.stages[STK_STAGE_MEMORY_FIT - 1].state, kStageRan);
    assert_int_equal(count_records(m, STK_STAGE_MEMORY_FIT, "18.3 scaling "), 2);
    const ManifestRecord *s1 = record(m, STK_STAGE_MEMORY_FIT, kRecordNote, "18.3 scaling 1 of 3");
    const ManifestRecord *s2 = record(m, STK_STAGE_MEMORY_FIT, kRecordNote, "18.3 scaling 2 of 3");
    assert_non_null(s1);
    assert_non_null(s2);
    assert_true(std::fabs(s1->bound - 1.05) < 1e-12 && std::fabs(s1->value - 1.05 * std::sqrt(0.95)) < 1e-12);
    assert_true(std::fabs(s2->value - 1.05 * 0.95) < 1e-12);
    double rad = max_pole_radius(out + "/arrays/memory_coeff.bin");
    assert_true(std::fabs(rad - 1.05 * 0.95) < 1e-12 && rad < 1);
    assert_non_null(record(m, STK_STAGE_MEMORY_FIT, kRecordInvariantPass, "12.5 pole radii < 1"));

    set_test_fault("memory_unstable_hard");
    const std::string hard = convert_all("llama", "pol-183h");
    set_test_fault("");
    m = read_manifest(hard + "/sera_manifest.bin");
    assert_int_equal(m.stages[STK_STAGE_MEMORY_FIT - 1].state, kStageDisabled);
    assert_int_equal(count_records(m, STK_STAGE_MEMORY_FIT, "18.3 scaling "), 3);
    const ManifestRecord *r = record(m, STK_STAGE_MEMORY_FIT, kRecordFeatureDisabled, "12.5 pole radii < 1 after 3 x 18.3");
    assert_non_null(r);
    assert_true(std::fabs(r->value - 1.2 * std::pow(0.95, 1.5)) < 1e-12 && r->bound == 1.0);
    assert_false(file_exists(hard + "/arrays/memory_coeff.bin"));
    assert_false(file_exists(hard + "/arrays/delaybuf_init.bin"));
    assert_true(m.fields.memory.mode == 0 && m.fields.memory.k == 0);
    assert_arrays_dir_matches(hard, m);
    assert_int_equal(stk_verify(hard.c_str(), nullptr), STK_OK);
}

// 18.5: a header corrupted between its write and the read-back is recomputed; the payload is
// written exactly once (bytes handed to the file: 128 reserved + payload + 128 header, then with
// the fault its 1 corrupting byte + 128 for the recomputed header) and reads back intact; the
// repair is counted.
static void rule_18_5_header_recomputed(void **) {
    std::string dir = make_temp_dir("pol-185");
    std::vector<float> payload(1000);
    for (size_t i = 0; i < payload.size(); i++) payload[i] = float(i) * 0.25f - 3.0f;
    const uint64_t dims[1] = {payload.size()};
    for (int faulted = 0; faulted < 2; faulted++) {
        std::string path = dir + "/a" + std::to_string(faulted) + ".bin";
        uint64_t before = array_header_repairs();
        if (faulted) set_test_fault("array_header_crc");
        ArrayWriter w(path, DType::F32, 1, dims);
        w.append(payload.data(), payload.size() * 4);
        ArrayHeader h = w.finish();
        set_test_fault("");
        assert_int_equal(array_header_repairs() - before, uint64_t(faulted));
        assert_int_equal(w.bytes_written(), 128 + payload.size() * 4 + 128 + 129 * uint64_t(faulted));
        ArrayReader r(path);  // verifies header CRC and payload checksums
        assert_int_equal(r.header().crc32c, h.crc32c);
        assert_memory_equal(r.payload(), payload.data(), payload.size() * 4);
    }
    assert_true(file(dir + "/a0.bin") == file(dir + "/a1.bin"));
    // Inside a conversion: the stage that wrote the array carries an 18.5 note; it verifies.
    set_test_fault("array_header_crc");
    const std::string out = convert_all("llama", "pol-185c");
    set_test_fault("");
    const Manifest m = read_manifest(out + "/sera_manifest.bin");
    bool found = false;
    for (const ManifestRecord &rec : m.records)
        if (std::strstr(rec.text, "18.5: 1 array header(s)")) {
            found = true;
            assert_int_equal(rec.status, STK_E_CHECKSUM);
            assert_true(rec.value == 1.0);
        }
    assert_true(found);
    assert_int_equal(stk_verify(out.c_str(), nullptr), STK_OK);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refusals_are_not_breaches),
        cmocka_unit_test(breach_in_each_optional_stage),
        cmocka_unit_test(convert_cli_completes_with_a_breach),
        cmocka_unit_test(rule_18_1_grows_m_only),
        cmocka_unit_test(rule_18_1_exhausted_retries_disable_linear),
        cmocka_unit_test(rule_18_2_qr_rerun),
        cmocka_unit_test(rule_18_3_pole_scaling),
        cmocka_unit_test(rule_18_5_header_recomputed),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
