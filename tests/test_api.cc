// The public C API (issue 2 item 2): status strings, version, struct_size and arena checks, the
// stage order, a not-implemented stage that writes nothing, and the DAG's tail through the API
// (manifest_emit + check + stk_verify).
#include <dirent.h>
#include <sys/stat.h>

#include "test_util.h"

#include "stages/job.h"
#include "stk/stk.h"

using namespace stk;

// A checkpoint directory the ingestion layer reads (safetensors, two shards, no tokenizer files).
static std::string model_dir() { return test::test_data("models/llama"); }

// Strings kept until exit (reachable, so leak checkers stay quiet).
static std::vector<std::string> g_strings{std::vector<std::string>(64)};
static size_t g_next_string = 0;
static const char *keep(const std::string &s) {
    if (g_next_string == g_strings.size()) fail_msg("raise g_strings");
    g_strings[g_next_string] = s;
    return g_strings[g_next_string++].c_str();
}

static stk_job_params params_for(const std::string &in, const std::string &out) {
    stk_job_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.in_dir = keep(in);
    p.out_dir = keep(out);
    return p;
}

static int entries(const std::string &dir) {
    DIR *d = opendir(dir.c_str());
    if (!d) return 0;  // does not exist: nothing written either
    int n = 0;
    while (dirent *e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void status_strings(void **) {
    struct {
        stk_status s;
        const char *str;
    } all[] = {
        {STK_OK, "STK_OK: success"},
        {STK_E_INVALID_ARGUMENT, "STK_E_INVALID_ARGUMENT: invalid argument"},
        {STK_E_STRUCT_SIZE, "STK_E_STRUCT_SIZE: struct_size too small"},
        {STK_E_ARENA_TOO_SMALL, "STK_E_ARENA_TOO_SMALL: arena too small"},
        {STK_E_NOT_IMPLEMENTED, "STK_E_NOT_IMPLEMENTED: not implemented"},
        {STK_E_STAGE_ORDER, "STK_E_STAGE_ORDER: stage run out of order"},
        {STK_E_CANCELLED, "STK_E_CANCELLED: cancelled"},
        {STK_E_IO, "STK_E_IO: I/O error"},
        {STK_E_NOT_FOUND, "STK_E_NOT_FOUND: file not found"},
        {STK_E_OUTPUT_EXISTS, "STK_E_OUTPUT_EXISTS: output already exists"},
        {STK_E_TRUNCATED, "STK_E_TRUNCATED: truncated file"},
        {STK_E_BAD_MAGIC, "STK_E_BAD_MAGIC: wrong magic"},
        {STK_E_BAD_DTYPE, "STK_E_BAD_DTYPE: unknown dtype"},
        {STK_E_BAD_RANK, "STK_E_BAD_RANK: bad rank"},
        {STK_E_DIMS_OVERFLOW, "STK_E_DIMS_OVERFLOW: dimensions overflow"},
        {STK_E_SIZE_MISMATCH, "STK_E_SIZE_MISMATCH: size mismatch"},
        {STK_E_MISALIGNED, "STK_E_MISALIGNED: misaligned payload"},
        {STK_E_CHECKSUM, "STK_E_CHECKSUM: checksum mismatch"},
        {STK_E_MISSING_ARRAY, "STK_E_MISSING_ARRAY: array missing"},
        {STK_E_SCHEMA, "STK_E_SCHEMA: unknown schema digest"},
        {STK_E_BAD_HEADER, "STK_E_BAD_HEADER: malformed header"},
        {STK_E_CORRUPT, "STK_E_CORRUPT: malformed data"},
        {STK_E_UNSUPPORTED, "STK_E_UNSUPPORTED: unsupported format"},
        {STK_E_UNSAFE_PICKLE, "STK_E_UNSAFE_PICKLE: pickle outside the allowlist"},
        {STK_E_LFS_POINTER, "STK_E_LFS_POINTER: Git LFS pointer instead of data"},
        {STK_E_UNKNOWN_MODEL, "STK_E_UNKNOWN_MODEL: unknown model type"},
        {STK_E_BAD_JSON, "STK_E_BAD_JSON: malformed JSON"},
        {STK_E_NONFINITE, "STK_E_NONFINITE: NaN or Inf weights"},
        {STK_E_PARAM_COUNT, "STK_E_PARAM_COUNT: parameter count mismatch"},
        {STK_E_SP_REJECTED, "STK_E_SP_REJECTED: vocabulary not uniquely decodable"},
        {STK_E_MPHF_EXHAUSTED, "STK_E_MPHF_EXHAUSTED: MPHF seed search exhausted"},
        {STK_E_TABLE_FULL, "STK_E_TABLE_FULL: hash table full"},
        {STK_E_KEY_NOT_FOUND, "STK_E_KEY_NOT_FOUND: key not found"},
        {STK_E_NOMEM, "STK_E_NOMEM: out of memory"},
        {STK_E_INTERNAL, "STK_E_INTERNAL: internal error"},
    };
    // Pinned values (the ABI): never renumbered.
    const int values[] = {0,  1,  2,  3,  4,  5,  6,  10, 11, 12, 20, 21, 22, 23, 24, 25, 26, 27,
                          28, 29, 30, 31, 40, 41, 42, 43, 44, 45, 46, 60, 61, 62, 63, 90, 99};
    assert_int_equal(sizeof all / sizeof all[0], sizeof values / sizeof values[0]);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        assert_int_equal(int(all[i].s), values[i]);
        assert_string_equal(stk_status_str(all[i].s), all[i].str);
    }
    // Every other value in 0..255 is "unknown", never NULL.
    for (int v = 0; v < 256; v++) {
        bool known = false;
        for (int k : values) known |= k == v;
        if (!known) assert_string_equal(stk_status_str(stk_status(v)), "STK_E_?: unknown status");
    }
    assert_string_equal(stk_status_str(stk_status(-1)), "STK_E_?: unknown status");
}

static void version_and_stage_names(void **) {
    assert_int_equal(stk_version_number(), STK_VERSION_NUMBER);
    assert_int_equal(STK_VERSION_NUMBER, STK_VERSION_MAJOR * 10000 + STK_VERSION_MINOR * 100 + STK_VERSION_PATCH);
    assert_string_equal(stk_version_string(), STK_VERSION_STRING);
    const char *names[] = {
        "parse_tensors", "tokenizer_build_or_wrap", "prf_build", "overlays_build", "ffn_collapse", "mphf_cuckoo", "memory_fit",
        "bridge_init",   "manifest_emit",           "check"};
    for (int i = 0; i < STK_STAGE_COUNT; i++) assert_string_equal(stk_stage_name(stk_stage(i + 1)), names[i]);
    assert_null(stk_stage_name(stk_stage(0)));
    assert_null(stk_stage_name(stk_stage(11)));
}

static void null_and_struct_size(void **) {
    size_t n = 0;
    assert_int_equal(stk_job_arena_size(nullptr, &n), STK_E_INVALID_ARGUMENT);
    assert_true(std::strlen(stk_last_error()) > 0);
    stk_job_params p = params_for(model_dir(), test::make_temp_dir("api-size") + "/out");
    assert_int_equal(stk_job_arena_size(&p, nullptr), STK_E_INVALID_ARGUMENT);
    p.struct_size = offsetof(stk_job_params, calibration) - 1;  // one byte short of the first version
    assert_int_equal(stk_job_arena_size(&p, &n), STK_E_STRUCT_SIZE);
    assert_contains(stk_last_error(), "struct_size");
    char arena[64];
    stk_job *job = reinterpret_cast<stk_job *>(1);
    assert_int_equal(stk_open(&p, arena, sizeof arena, &job), STK_E_STRUCT_SIZE);
    assert_null(job);  // cleared on failure
    p.struct_size = 0;
    assert_int_equal(stk_job_arena_size(&p, &n), STK_E_STRUCT_SIZE);
    p.struct_size = sizeof p;
    p.in_dir = "";
    assert_int_equal(stk_job_arena_size(&p, &n), STK_E_INVALID_ARGUMENT);
    assert_contains(stk_last_error(), "in_dir");
    // stk_verify's report.
    stk_verify_report r;
    std::memset(&r, 0, sizeof r);
    r.struct_size = sizeof r - 1;
    assert_int_equal(stk_verify("/nonexistent", &r), STK_E_STRUCT_SIZE);
    assert_int_equal(stk_verify(nullptr, nullptr), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_verify("/nonexistent-stk-dir", nullptr), STK_E_NOT_FOUND);
    assert_int_equal(stk_stage_run(nullptr, STK_STAGE_PRF), STK_E_INVALID_ARGUMENT);
    stk_close(nullptr);  // no-op
    // A successful call clears the message.
    assert_int_equal(stk_stage_run(nullptr, STK_STAGE_PRF), STK_E_INVALID_ARGUMENT);
    assert_true(std::strlen(stk_last_error()) > 0);
    stk_job_params ok = params_for(model_dir(), "/tmp/unused");
    assert_int_equal(stk_job_arena_size(&ok, &n), STK_OK);
    assert_string_equal(stk_last_error(), "");
}

static void arena_one_byte_short(void **) {
    std::string out = test::make_temp_dir("api-arena") + "/out";
    stk_job_params p = params_for(model_dir(), out);
    size_t need = 0;
    stk_status s = stk_job_arena_size(&p, &need);
    if (s != STK_OK) fail_msg("stk_job_arena_size(%s): %s", model_dir().c_str(), stk_last_error());
    assert_true(need > sizeof(Job));
    std::vector<uint8_t> arena(need);
    stk_job *job = nullptr;
    s = stk_open(&p, arena.data(), need - 1, &job);
    assert_int_equal(s, STK_E_ARENA_TOO_SMALL);
    assert_null(job);
    std::string msg = stk_last_error();
    assert_contains(msg, std::to_string(need - 1) + " bytes");
    assert_contains(msg, "needs " + std::to_string(need));
    assert_contains(msg, "stk_job_arena_size");
    // Exactly the size asked for: fine, at any alignment of the base.
    for (size_t shift : {size_t(0), size_t(1), size_t(7), size_t(33)}) {
        std::vector<uint8_t> a2(need + shift);
        assert_int_equal(stk_open(&p, a2.data() + shift, need, &job), STK_OK);
        assert_non_null(job);
        stk_close(job);
    }
    assert_int_equal(entries(out), 0);  // opening writes nothing
}

static stk_job *open_job(const std::string &out, std::vector<uint8_t> &arena) {
    stk_job_params p = params_for(model_dir(), out);
    size_t need = 0;
    if (stk_job_arena_size(&p, &need) != STK_OK) fail_msg("%s", stk_last_error());
    arena.resize(need);
    stk_job *job = nullptr;
    if (stk_open(&p, arena.data(), need, &job) != STK_OK) fail_msg("%s", stk_last_error());
    return job;
}

// stk_job is Job inside the library (src/api/api.cc): tests mark stages done without running them.
static Job &internals(stk_job *job) { return *reinterpret_cast<Job *>(job); }

static void not_implemented_stage_writes_nothing(void **) {
    std::string out = test::make_temp_dir("api-ni") + "/out";
    std::vector<uint8_t> arena;
    stk_job *job = open_job(out, arena);
    // Out of order first.
    assert_int_equal(stk_stage_run(job, STK_STAGE_PRF), STK_E_STAGE_ORDER);
    assert_contains(stk_last_error(), "needs parse_tensors");
    uint32_t crc;
    uint64_t sha;
    assert_int_equal(stk_stage_digest(job, STK_STAGE_PRF, &crc, &sha), STK_E_STAGE_ORDER);
    // The first stage that is still not implemented (stages that are implemented need a real
    // model and are covered by their own tests): everything before it marked done.
    int ni = STK_STAGE_PRF;
    while (ni <= STK_STAGE_BRIDGE_INIT && find_stage(stk_stage(ni))->run) ni++;
    if (ni > STK_STAGE_BRIDGE_INIT) {
        stk_close(job);
        return;
    }
    for (int s = STK_STAGE_PARSE_TENSORS; s < ni; s++) internals(job).stages[s].done = true;
    assert_int_equal(stk_stage_run(job, stk_stage(ni)), STK_E_NOT_IMPLEMENTED);
    assert_contains(stk_last_error(), (std::string(find_stage(stk_stage(ni))->name) + " is not implemented").c_str());
    assert_contains(stk_last_error(), "nothing written");
    assert_int_equal(entries(out), 0);
    // It counts as run (feature disabled): no second run, and the next stage may go.
    assert_int_equal(stk_stage_run(job, stk_stage(ni)), STK_E_STAGE_ORDER);
    assert_int_equal(stk_stage_run(job, stk_stage(0)), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_stage_run(job, stk_stage(11)), STK_E_INVALID_ARGUMENT);
    stk_close(job);
}

// The DAG's tail through the public API: stages 3..8 report not implemented, manifest_emit
// publishes a manifest recording them disabled, check verifies it, stk_verify agrees.
static void dag_tail_through_api(void **) {
    std::string out = test::make_temp_dir("api-dag") + "/out";
    std::vector<uint8_t> arena;
    stk_job *job = open_job(out, arena);
    internals(job).stages[STK_STAGE_PARSE_TENSORS].done = true;
    internals(job).stages[STK_STAGE_TOKENIZER].done = true;
    for (int s = STK_STAGE_PRF; s <= STK_STAGE_BRIDGE_INIT; s++) {
        if (find_stage(stk_stage(s))->run) {  // implemented: needs a real model (its own tests); recorded as not run here
            internals(job).stages[s].done = true;
            internals(job).stages[s].not_implemented = true;
            continue;
        }
        assert_int_equal(stk_stage_run(job, stk_stage(s)), STK_E_NOT_IMPLEMENTED);
    }
    assert_int_equal(entries(out), 0);
    assert_int_equal(stk_stage_run(job, STK_STAGE_CHECK), STK_E_STAGE_ORDER);
    if (stk_stage_run(job, STK_STAGE_MANIFEST_EMIT) != STK_OK) fail_msg("%s", stk_last_error());
    assert_int_equal(entries(out), 1);  // only the manifest: no arrays were written
    if (stk_stage_run(job, STK_STAGE_CHECK) != STK_OK) fail_msg("%s", stk_last_error());
    uint32_t crc = 0;
    uint64_t sha = 0;
    assert_int_equal(stk_stage_digest(job, STK_STAGE_CHECK, &crc, &sha), STK_OK);
    assert_true(crc != 0 || sha != 0);
    stk_verify_report r;
    std::memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    assert_int_equal(stk_verify(out.c_str(), &r), STK_OK);
    assert_int_equal(r.arrays_checked, 0);
    assert_string_equal(r.failed_file, "");
    stk_close(job);
    // A second job into the same directory is refused at open: outputs are write-once.
    stk_job_params p = params_for(model_dir(), out);
    stk_job *again = nullptr;
    assert_int_equal(stk_open(&p, arena.data(), arena.size(), &again), STK_E_OUTPUT_EXISTS);
    assert_null(again);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_strings),
        cmocka_unit_test(version_and_stage_names),
        cmocka_unit_test(null_and_struct_size),
        cmocka_unit_test(arena_one_byte_short),
        cmocka_unit_test(not_implemented_stage_writes_nothing),
        cmocka_unit_test(dag_tail_through_api),
    };
    return cmocka_run_group_tests_name("api", tests, nullptr, nullptr);
}
