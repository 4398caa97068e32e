// The versioned structs of stk.h (core/abi.h, libxkbcommon's abi-check.h rule) in both
// directions: an older caller's smaller struct is accepted (the fields it lacks read as zero and
// are never written), a newer caller's larger struct is accepted when the bytes this library does
// not know are zero (and zeroed when the library fills it), and refused when they are not.
// Then the job introspection calls (stk_job_get_info, stk_stage_get_info, stk_job_progress).
#include <cstddef>

#include "test_util.h"

#include "core/abi.h"
#include "core/test_fault.h"
#include "stk/stk.h"

// Two versions of one struct, as a library and its callers would see them across a release that
// appended two fields.  abi_of is found by argument-dependent lookup, as for stk.h's structs.
struct DemoV1 {
    size_t struct_size;
    uint32_t a;
};
struct DemoV2 {
    size_t struct_size;
    uint32_t a;
    uint32_t b;
    uint64_t c;
};
constexpr stk::AbiStruct abi_of(const DemoV1 *) { return {offsetof(DemoV1, a) + 4, "DemoV1"}; }
constexpr stk::AbiStruct abi_of(const DemoV2 *) { return {offsetof(DemoV2, a) + 4, "DemoV2"}; }

using namespace stk;
using namespace stk::test;

// A struct of `size` bytes inside a buffer poisoned past it: what lies beyond must stay untouched.
struct Poisoned {
    alignas(16) unsigned char bytes[256];
    explicit Poisoned(size_t size) {
        std::memset(bytes, 0xA5, sizeof bytes);
        std::memset(bytes, 0, size);
        std::memcpy(bytes, &size, sizeof size);
    }
    bool untouched_from(size_t at) const {
        for (size_t i = at; i < sizeof bytes; i++)
            if (bytes[i] != 0xA5) return false;
        return true;
    }
};

// An older caller (V1) and a newer library (V2).
static void older_caller(void **) {
    Poisoned in(sizeof(DemoV1));
    reinterpret_cast<DemoV1 *>(in.bytes)->a = 7;
    DemoV2 v = abi_read(reinterpret_cast<const DemoV2 *>(in.bytes));
    assert_int_equal(v.struct_size, sizeof(DemoV2));
    assert_int_equal(v.a, 7);
    assert_int_equal(v.b, 0);  // not read from the poison past the caller's struct
    assert_int_equal(v.c, 0);
    // Filling it: only the caller's 16 bytes are written.
    Poisoned out(sizeof(DemoV1));
    DemoV2 full{sizeof(DemoV2), 11, 22, 33};
    abi_write(reinterpret_cast<DemoV2 *>(out.bytes), full);
    assert_int_equal(reinterpret_cast<DemoV1 *>(out.bytes)->struct_size, sizeof(DemoV1));
    assert_int_equal(reinterpret_cast<DemoV1 *>(out.bytes)->a, 11);
    assert_true(out.untouched_from(sizeof(DemoV1)));
    // Smaller than the first version: refused.
    Poisoned tiny(4);
    std::memset(tiny.bytes, 0, 8);
    reinterpret_cast<DemoV2 *>(tiny.bytes)->struct_size = 4;
    std::string m = expect_error(STK_E_STRUCT_SIZE, [&] { abi_read(reinterpret_cast<const DemoV2 *>(tiny.bytes)); });
    assert_contains(m, "DemoV2.struct_size is 4");
}

// A newer caller (V2) and an older library (V1).
static void newer_caller(void **) {
    DemoV2 in{sizeof(DemoV2), 5, 0, 0};
    DemoV1 v = abi_read(reinterpret_cast<const DemoV1 *>(&in));
    assert_int_equal(v.struct_size, sizeof(DemoV1));
    assert_int_equal(v.a, 5);
    in.c = 1;  // a field this library does not know, set: refused, never ignored
    std::string m = expect_error(STK_E_STRUCT_SIZE, [&] { abi_read(reinterpret_cast<const DemoV1 *>(&in)); });
    assert_contains(m, "byte 16 of its 24");
    // Filling it: the fields the library does not know come back zero.
    DemoV2 out{sizeof(DemoV2), 0, 0xFFFFFFFFu, ~0ull};
    DemoV1 value;  // zeroed whole, padding too, as every library call site does
    std::memset(&value, 0, sizeof value);
    value.struct_size = sizeof(DemoV1);
    value.a = 9;
    abi_write(reinterpret_cast<DemoV1 *>(&out), value);
    assert_int_equal(out.struct_size, sizeof(DemoV2));
    assert_int_equal(out.a, 9);
    assert_int_equal(out.b, 0);
    assert_int_equal(out.c, 0);
    // Garbage, not a newer struct.
    in.struct_size = sizeof(DemoV1) + kAbiMaxGrowth + 1;
    m = expect_error(STK_E_STRUCT_SIZE, [&] { abi_check_out(reinterpret_cast<const DemoV1 *>(&in)); });
    assert_contains(m, "not a size of DemoV1");
}

// The real structs through the C API.
static void api_structs(void **) {
    // stk_export_params: its first version really was 32 bytes (no `threads`): accepted, one
    // thread, nothing past byte 32 read (the poison would be 0xA5A5A5A5 threads: refused).
    std::string dir = make_temp_dir("abi-export");
    std::string in = test_data("models/gpt2"), out = dir + "/v1.lwt";
    static_assert(sizeof(void *) != 8 || offsetof(stk_export_params, threads) == 32);
    Poisoned v1(offsetof(stk_export_params, threads));
    auto *p = reinterpret_cast<stk_export_params *>(v1.bytes);
    p->in_dir = in.c_str();
    p->out_path = out.c_str();
    p->dtype = STK_LWT_I8;
    if (stk_export_lwt(p, nullptr) != STK_OK) fail_msg("%s", stk_last_error());
    assert_true(read_bytes(out).size() > 0);
    // stk_export_report, a newer caller's: 16 more bytes, zeroed by the library.
    struct {
        stk_export_report r;
        uint64_t newer[2];
    } rep;
    std::memset(&rep, 0xA5, sizeof rep);
    rep.r.struct_size = sizeof rep;
    stk_export_params q{};
    q.struct_size = sizeof q;
    q.in_dir = in.c_str();
    std::string out2 = dir + "/v2.lwt";
    q.out_path = out2.c_str();
    q.dtype = STK_LWT_I8;
    if (stk_export_lwt(&q, &rep.r) != STK_OK) fail_msg("%s", stk_last_error());
    assert_int_equal(rep.r.struct_size, sizeof rep);
    assert_int_equal(rep.r.tensors, 28);
    assert_int_equal(rep.newer[0], 0);
    assert_int_equal(rep.newer[1], 0);
    assert_true(read_bytes(out2) == read_bytes(out));

    // stk_job_params, a newer caller's: zero tail accepted, a set field refused naming the byte.
    struct {
        stk_job_params p;
        uint64_t newer[2];
    } jp;
    std::memset(&jp, 0, sizeof jp);
    jp.p.struct_size = sizeof jp;
    std::string model = test_data("models/llama");
    jp.p.in_dir = model.c_str();
    std::string jout = make_temp_dir("abi-job") + "/out";
    jp.p.out_dir = jout.c_str();
    size_t bytes = 0;
    if (stk_job_arena_size(&jp.p, &bytes) != STK_OK) fail_msg("%s", stk_last_error());
    assert_true(bytes > 0);
    jp.newer[1] = 1;
    assert_int_equal(stk_job_arena_size(&jp.p, &bytes), STK_E_STRUCT_SIZE);
    assert_contains(stk_last_error(), "stk_job_params: byte 80 of its 88 is not zero");  // 72 bytes since policy, recent

    // stk_verify_report, a newer caller's: the tail zeroed, also on failure.
    struct {
        stk_verify_report r;
        uint64_t newer;
    } vr;
    std::memset(&vr, 0xA5, sizeof vr);
    vr.r.struct_size = sizeof vr;
    assert_int_equal(stk_verify("/nonexistent-stk-abi", &vr.r), STK_E_NOT_FOUND);
    assert_string_equal(vr.r.failed_file, "sera_manifest.bin");
    assert_int_equal(vr.newer, 0);
    assert_int_equal(vr.r.struct_size, sizeof vr);
    // Smaller than its first version: refused before any work.
    stk_verify_report small{};
    small.struct_size = offsetof(stk_verify_report, failed_offset);
    assert_int_equal(stk_verify("/nonexistent-stk-abi", &small), STK_E_STRUCT_SIZE);
    assert_contains(stk_last_error(), "stk_verify_report.struct_size");
}

// stk_job_get_info / stk_stage_get_info / stk_job_progress on the tiny GPT-2: its byte-level BPE
// fails the unique-decodability test, so the tokenizer ends in EXT mode; prf_build is forced to
// breach a bound, so it is disabled with the policy's reason.
static void job_introspection(void **) {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    std::string model = std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
    std::string out = make_temp_dir("abi-info") + "/out";
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = model.c_str();
    p.out_dir = out.c_str();
    size_t bytes = 0;
    if (stk_job_arena_size(&p, &bytes) != STK_OK) fail_msg("%s", stk_last_error());
    std::vector<uint8_t> arena(bytes);
    stk_job *job = nullptr;
    if (stk_open(&p, arena.data(), arena.size(), &job) != STK_OK) fail_msg("%s", stk_last_error());
    stk_job_info info{};
    info.struct_size = sizeof info;
    assert_int_equal(stk_job_get_info(job, &info), STK_OK);
    assert_int_equal(info.tokenizer_mode, STK_TOKENIZER_NOT_RUN);
    stk_stage_info si{};
    si.struct_size = sizeof si;
    assert_int_equal(stk_stage_get_info(job, STK_STAGE_PARSE_TENSORS, &si), STK_OK);
    assert_int_equal(si.state, STK_STAGE_STATE_PENDING);
    set_test_fault("breach:prf_build");
    for (stk_stage s : {STK_STAGE_PARSE_TENSORS, STK_STAGE_TOKENIZER, STK_STAGE_PRF})
        if (stk_stage_run(job, s) != STK_OK) fail_msg("%s: %s", stk_stage_name(s), stk_last_error());
    set_test_fault(nullptr);
    uint64_t done = 0, total = 0;
    const char *unit = nullptr;
    assert_int_equal(stk_job_progress(job, &done, &total, &unit), STK_OK);
    assert_non_null(unit);
    assert_true(done <= total);
    assert_int_equal(stk_stage_get_info(job, STK_STAGE_PARSE_TENSORS, &si), STK_OK);
    assert_int_equal(si.state, STK_STAGE_STATE_DONE);
    uint32_t crc = 0;
    uint64_t sha = 0;
    assert_int_equal(stk_stage_digest(job, STK_STAGE_PARSE_TENSORS, &crc, &sha), STK_OK);
    assert_int_equal(si.crc32c, crc);
    assert_int_equal(si.sha256_low64, sha);
    assert_string_equal(si.reason, "");
    assert_int_equal(stk_stage_get_info(job, STK_STAGE_PRF, &si), STK_OK);
    assert_int_equal(si.state, STK_STAGE_STATE_DISABLED);
    assert_contains(si.reason, "prf_build disabled");
    assert_int_equal(stk_stage_get_info(job, STK_STAGE_OVERLAYS, &si), STK_OK);
    assert_int_equal(si.state, STK_STAGE_STATE_PENDING);
    assert_int_equal(stk_stage_get_info(job, stk_stage(0), &si), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_job_get_info(job, &info), STK_OK);
    assert_int_equal(info.tokenizer_mode, STK_TOKENIZER_EXT);
    assert_int_equal(info.tokenizer_certified_run, 1);
    assert_int_equal(info.vocab_size, 261);  // vocab.json and config.json: 256 bytes, 4 merges, <|endoftext|>
    assert_contains(info.tokenizer_reason, "Sardinas-Patterson");
    info.struct_size = 8;  // before its first field: refused
    assert_int_equal(stk_job_get_info(job, &info), STK_E_STRUCT_SIZE);
    stk_close(job);
}

// job_run_stage's check of a stage's peak arena use against its declared size: forced to see a
// declaration of 0 bytes, prf_build (which allocates its buffers) stops the job as a bug.
static void arena_peak_within_declared(void **) {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    std::string model = std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
    std::string out = make_temp_dir("abi-peak") + "/out";
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = model.c_str();
    p.out_dir = out.c_str();
    size_t bytes = 0;
    if (stk_job_arena_size(&p, &bytes) != STK_OK) fail_msg("%s", stk_last_error());
    std::vector<uint8_t> arena(bytes);
    stk_job *job = nullptr;
    if (stk_open(&p, arena.data(), arena.size(), &job) != STK_OK) fail_msg("%s", stk_last_error());
    for (stk_stage s : {STK_STAGE_PARSE_TENSORS, STK_STAGE_TOKENIZER})  // within their sizes
        if (stk_stage_run(job, s) != STK_OK) fail_msg("%s: %s", stk_stage_name(s), stk_last_error());
    set_test_fault("arena_undersized:prf_build");
    assert_int_equal(stk_stage_run(job, STK_STAGE_PRF), STK_E_INTERNAL);
    set_test_fault(nullptr);
    assert_contains(stk_last_error(), "stage prf_build used ");
    assert_contains(stk_last_error(), "more than the 0 its sizing declares");
    stk_close(job);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(older_caller),
        cmocka_unit_test(newer_caller),
        cmocka_unit_test(api_structs),
        cmocka_unit_test(job_introspection),
        cmocka_unit_test(arena_peak_within_declared),
    };
    return cmocka_run_group_tests_name("abi", tests, nullptr, nullptr);
}
