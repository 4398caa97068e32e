// Verification of a published generation (seed 12.7, issue 2 items 4 and 6): a small generation
// written by the real stages (job_write_array + manifest_emit), then every single-bit flip of
// every array header, a sample of payload bits and every bit of the manifest detected with the
// status, file and offset; each bad input of issue 2 with its own status; `stk check` exit codes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "test_util.h"

#include "publish/verify.h"
#include "core/bytes.h"
#include "core/checksum.h"
#include "format/array.h"
#include "format/manifest.h"
#include "stages/outputs.h"
#include "stages/stages.h"

using namespace stk;

namespace {

// Test scaffolding lives until exit, reachable from a global that is never destroyed (leak
// checkers run after static destructors).
std::vector<const void *> &g_keep = *new std::vector<const void *>;
char *keep_str(const std::string &s) {
    char *p = strdup(s.c_str());
    g_keep.push_back(p);
    return p;
}

struct Gen {
    std::string dir;
    std::vector<std::string> names;
    std::vector<uint64_t> payload_bytes;
    uint64_t total = 0;
    Job *job = nullptr;
};

Job *new_job(const std::string &out) {
    Job *job = new Job();
    g_keep.push_back(job);
    job->in_dir = keep_str("unused-in");
    job->out_dir = keep_str(out);
    job->params.struct_size = sizeof job->params;
    job->params.in_dir = job->in_dir;
    job->params.out_dir = job->out_dir;
    job->params.r = 512;
    job->params.rv = 12;
    job->params.l_tok = 8;
    job->params.top_l = 12;
    job->params.threads = 1;
    job->arrays = new WrittenArray[kMaxArrays];
    g_keep.push_back(job->arrays);
    return job;
}

void payload(std::vector<uint8_t> &p, uint64_t seed) {
    uint64_t x = seed;
    for (uint8_t &b : p) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        b = uint8_t(x >> 56);
    }
}

// Four arrays from three stages; stages 5..8 not implemented; then manifest_emit and check.
Gen make_gen(const char *tag, uint32_t extra_arrays = 0, uint64_t extra_bytes = 0,
             const std::function<void(Job &)> &before_emit = nullptr) {
    Gen g;
    g.dir = test::make_temp_dir(tag) + "/out";
    Job *job = g.job = new_job(g.dir);
    for (int s = STK_STAGE_PARSE_TENSORS; s <= STK_STAGE_BRIDGE_INIT; s++) {
        job->stages[s].done = true;
        job->stages[s].not_implemented = s >= STK_STAGE_FFN_COLLAPSE;
    }
    auto put = [&](stk_stage st, StageDigest &d, const char *name, DType dt, uint32_t rank, std::vector<uint64_t> dims,
                   const void *data) {
        ArraySpec spec;
        spec.name = name, spec.dtype = dt, spec.rank = rank;
        std::copy(dims.begin(), dims.end(), spec.dims);
        ArrayHeader h = job_write_array(*job, st, d, spec, data);
        g.names.push_back(name);
        g.payload_bytes.push_back(h.byte_len);
        g.total += h.byte_len;
    };
    {
        StageDigest d;
        std::vector<uint8_t> p(300);
        payload(p, 1);
        put(STK_STAGE_TOKENIZER, d, "T_1.bin", DType::U8, 1, {300}, p.data());
        d.finish(job->stages[STK_STAGE_TOKENIZER]);
    }
    {
        StageDigest d;
        const float v[6] = {1.0f, -2.0f, 0.5f, 0.0f, 3.25f, -0.125f};
        put(STK_STAGE_PRF, d, "prf_W.bin", DType::F32, 2, {2, 3}, v);
        std::vector<uint8_t> p(4 * 5 * 6 * 2);
        payload(p, 2);
        put(STK_STAGE_PRF, d, "whitening_sig2.bin", DType::BF16, 3, {4, 5, 6}, p.data());
        d.finish(job->stages[STK_STAGE_PRF]);
    }
    {
        StageDigest d;
        std::vector<uint8_t> p(4000);
        payload(p, 3);
        put(STK_STAGE_OVERLAYS, d, "overlays_H.bin", DType::I32, 2, {10, 100}, p.data());
        for (uint32_t i = 0; i < extra_arrays; i++) {
            std::vector<uint8_t> q(extra_bytes);
            payload(q, 100 + i);
            std::string name = "extra_" + std::to_string(i) + ".bin";
            put(STK_STAGE_OVERLAYS, d, keep_str(name), DType::U8, 1, {extra_bytes}, q.data());
        }
        d.finish(job->stages[STK_STAGE_OVERLAYS]);
    }
    job->manifest.fields.tokenizer.vocab_size = 300;
    job->manifest.fields.prf.r = 512;
    job->stages[STK_STAGE_MANIFEST_EMIT].done = false;
    if (before_emit) before_emit(*job);
    manifest_emit_run(*job);
    job->stages[STK_STAGE_MANIFEST_EMIT].done = true;
    return g;
}

struct Result {
    stk_status status;
    std::string file;
    uint64_t offset;
    std::string message;
    stk_verify_report report;
};

Result verify(const std::string &dir) {
    Result r;
    std::memset(&r.report, 0, sizeof r.report);
    r.report.struct_size = sizeof r.report;
    r.status = stk_verify(dir.c_str(), &r.report);
    r.file = r.report.failed_file;
    r.offset = r.report.failed_offset;
    r.message = stk_last_error();
    return r;
}

// In place, one byte: thousands of flips stay cheap.
void flip(const std::string &path, uint64_t byte, int bit) {
    int fd = open(path.c_str(), O_RDWR);
    assert_true(fd >= 0);
    uint8_t v;
    assert_int_equal(pread(fd, &v, 1, off_t(byte)), 1);
    v ^= uint8_t(1u << bit);
    assert_int_equal(pwrite(fd, &v, 1, off_t(byte)), 1);
    close(fd);
}

// Rewrite an array's header through fn, keeping the header checksum valid (a "well-formed" lie).
void patch_header(const std::string &path, const std::function<void(uint8_t *)> &fn) {
    std::vector<uint8_t> b = test::read_bytes(path);
    fn(b.data());
    store_le<uint64_t>(&b[120], crc32c(b.data(), 120));
    test::write_bytes(path, b);
}

std::string arr(const Gen &g, int i) { return g.dir + "/arrays/" + g.names[i]; }

struct Run {
    int exit_code;
    std::string out;
};

Run run_stk(const std::string &args) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) {
        print_error("STK_BIN is not set\n");
        fail();
    }
    std::string cmd = std::string(bin) + " " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    assert_non_null(p);
    Run r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = pclose(p);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

}  // namespace

static void good_generation_verifies(void **) {
    Gen g = make_gen("good");
    Result r = verify(g.dir);
    if (r.status != STK_OK) fail_msg("%s", r.message.c_str());
    assert_int_equal(r.report.arrays_checked, 4);
    assert_int_equal(r.report.bytes_checked, 300 + 24 + 240 + 4000);
    assert_string_equal(r.report.failed_file, "");
    Manifest m = read_manifest(g.dir + "/sera_manifest.bin");
    assert_int_equal(m.arrays.size(), 4);
    assert_string_equal(m.arrays[1].name, "prf_W.bin");
    assert_int_equal(m.arrays[1].stage, STK_STAGE_PRF);
    assert_int_equal(m.arrays[1].crc32c, 0x0bd5ab40u);
    assert_true(m.arrays[1].sha256_low64 == 0xe352c2b2a05b2a7cull);
    assert_int_equal(m.stages[STK_STAGE_PRF - 1].state, kStageRan);
    assert_int_equal(m.stages[STK_STAGE_PRF - 1].crc32c, g.job->stages[STK_STAGE_PRF].crc32c);
    assert_true(m.stages[STK_STAGE_PRF - 1].sha256_low64 == g.job->stages[STK_STAGE_PRF].sha256_low64);
    assert_int_equal(m.stages[STK_STAGE_FFN_COLLAPSE - 1].state, kStageNotImplemented);
    assert_int_equal(m.stages[STK_STAGE_MANIFEST_EMIT - 1].state, kStageRan);
    assert_int_equal(m.stages[STK_STAGE_CHECK - 1].state, kStagePending);
    // manifest_emit's note naming the numeric mode (issue 40), then one "feature disabled" record
    // for each stage that does not exist yet (5..8).
    assert_int_equal(m.records.size(), 1 + 4);
    assert_int_equal(m.records[0].stage, STK_STAGE_MANIFEST_EMIT);
    assert_int_equal(m.records[0].kind, kRecordNote);
    assert_string_equal(m.records[0].text,
                        "numeric mode 1: BLIS 0.9 haswell context (AVX2+FMA), reference LAPACK+BLAS, Highway FMA");
    assert_int_equal(m.records[1].stage, STK_STAGE_FFN_COLLAPSE);
    assert_int_equal(m.records[1].kind, kRecordFeatureDisabled);
    assert_int_equal(m.records[1].feature, kFeatureLinear);
    assert_int_equal(m.records[1].status, STK_E_NOT_IMPLEMENTED);
    assert_contains(m.records[1].text, "ffn_collapse is not implemented");
    assert_int_equal(m.records[4].feature, kFeatureBridge);
    // seed_digest: SHA-256 of "stk-params\0" + LE u32 r, rv, l_tok, top_l, flags + LE u64 seed.
    uint8_t rec[39] = "stk-params";
    uint32_t v[5] = {512, 12, 8, 12, 0};
    std::memcpy(rec + 11, v, 20);
    std::memset(rec + 31, 0, 8);
    assert_memory_equal(m.fields.seed_digest, sha256(rec, 39).bytes, 32);
    // manifest_emit's stage digest is the curr_hash; check's covers the verification it did.
    assert_true(g.job->stages[STK_STAGE_MANIFEST_EMIT].sha256_low64 == load_u64(m.curr_hash));
    check_stage_run(*g.job);
    uint8_t crec[44];
    std::memcpy(crec, m.curr_hash, 32);
    store_le<uint32_t>(crec + 32, 4);
    store_le<uint64_t>(crec + 36, 4564);
    assert_int_equal(g.job->stages[STK_STAGE_CHECK].crc32c, crc32c(crec, 44));
    assert_true(g.job->stages[STK_STAGE_CHECK].sha256_low64 == sha256(crec, 44).low64());
    // Write-once: a second manifest_emit into the same directory is refused.
    g.job->stages[STK_STAGE_MANIFEST_EMIT].done = false;
    test::expect_error(STK_E_OUTPUT_EXISTS, [&] { manifest_emit_run(*g.job); });
}

// What stages put in job.manifest (fields, P_gen, records, prev_hash) is what gets published.
static void draft_reaches_manifest(void **) {
    static const uint32_t pgen[3] = {5, 299, 0};
    uint8_t prev[32];
    for (int i = 0; i < 32; i++) prev[i] = uint8_t(i + 1);
    Gen g = make_gen("draft", 0, 0, [&](Job &job) {
        ManifestDraft &d = job.manifest;
        d.fields.abi_flags = kAbiFma;
        d.fields.tokenizer.mode = 2;
        d.fields.tokenizer.l_tok = 8;
        d.fields.prf.tau = 64.0;
        d.fields.memory.mode = 2;
        d.fields.memory.pole_radius_min = 0.995;
        d.fields.linear.c = 1234567;
        d.p_gen = pgen;
        d.n_pgen = 3;
        d.master_seed = 42;
        std::memcpy(d.prev_hash, prev, 32);
        draft_add_record(d, STK_STAGE_PRF, kRecordFeatureDisabled, kFeatureO0Route, STK_E_NONFINITE, 3.5, 1.0,
                         "guard margin %d negative: O(0) route disabled", -2);
        draft_add_record(d, STK_STAGE_TOKENIZER, kRecordInvariantPass, kFeatureTokenizerFst, STK_OK, 8, 8, "probes <= L_tok");
    });
    assert_int_equal(verify(g.dir).status, STK_OK);
    Manifest m = read_manifest(g.dir + "/sera_manifest.bin");
    assert_int_equal(m.fields.abi_flags, kAbiFma);
    assert_int_equal(m.fields.tokenizer.mode, 2);
    assert_true(m.fields.prf.tau == 64.0);
    assert_true(m.fields.memory.pole_radius_min == 0.995);
    assert_true(m.fields.linear.c == 1234567);
    assert_int_equal(m.p_gen.size(), 3);
    assert_int_equal(m.p_gen[1], 299);
    assert_memory_equal(m.prev_hash, prev, 32);
    // Stage records first, in order, then the numeric-mode note, then one per not-implemented
    // stage (5..8).
    assert_int_equal(m.records.size(), 2 + 1 + 4);
    assert_int_equal(m.records[0].stage, STK_STAGE_PRF);
    assert_int_equal(m.records[0].feature, kFeatureO0Route);
    assert_int_equal(m.records[0].status, STK_E_NONFINITE);
    assert_true(m.records[0].value == 3.5 && m.records[0].bound == 1.0);
    assert_string_equal(m.records[0].text, "guard margin -2 negative: O(0) route disabled");
    assert_int_equal(m.records[1].kind, kRecordInvariantPass);
    assert_int_equal(m.records[2].stage, STK_STAGE_MANIFEST_EMIT);
    assert_int_equal(m.records[3].stage, STK_STAGE_FFN_COLLAPSE);
    // A stage that disabled a feature is recorded as such; one with only a pass record ran.
    assert_int_equal(m.stages[STK_STAGE_PRF - 1].state, kStageDisabled);
    assert_int_equal(m.stages[STK_STAGE_TOKENIZER - 1].state, kStageRan);
    // seed_digest covers the master seed.
    uint8_t rec[39] = "stk-params";
    uint32_t v[5] = {512, 12, 8, 12, 0};
    std::memcpy(rec + 11, v, 20);
    uint64_t seed = 42;
    std::memcpy(rec + 31, &seed, 8);
    assert_memory_equal(m.fields.seed_digest, sha256(rec, 39).bytes, 32);
    // A P_gen id outside the vocabulary is refused before anything is published.
    static const uint32_t bad_pgen[1] = {300};
    std::string out = test::make_temp_dir("draft-bad") + "/out";
    Job *job = new_job(out);
    for (int s = 1; s <= STK_STAGE_BRIDGE_INIT; s++) job->stages[s].done = true;
    job->manifest.fields.tokenizer.vocab_size = 300;
    job->manifest.p_gen = bad_pgen;
    job->manifest.n_pgen = 1;
    std::string msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { manifest_emit_run(*job); });
    assert_contains(msg, "P_gen[0] = 300");
    struct stat st;
    assert_int_not_equal(stat((out + "/sera_manifest.bin").c_str(), &st), 0);
}

static void every_header_bit_flip_detected(void **) {
    Gen g = make_gen("hdrflip");
    for (size_t a = 0; a < g.names.size(); a++) {
        std::string p = arr(g, int(a));
        for (int byte = 0; byte < 128; byte++)
            for (int bit = 0; bit < 8; bit++) {
                flip(p, byte, bit);
                Result r = verify(g.dir);
                flip(p, byte, bit);
                stk_status want = byte < 4 ? STK_E_BAD_MAGIC : STK_E_CHECKSUM;
                uint64_t off = byte < 4 ? 0 : 120;
                if (r.status != want || r.file != "arrays/" + g.names[a] || r.offset != off)
                    fail_msg("%s byte %d bit %d: %s at %s:%llu (%s)", g.names[a].c_str(), byte, bit, stk_status_str(r.status),
                             r.file.c_str(), (unsigned long long)r.offset, r.message.c_str());
                assert_int_equal(r.report.arrays_checked, a);
            }
    }
    assert_int_equal(verify(g.dir).status, STK_OK);
}

static void payload_bit_flips_detected(void **) {
    Gen g = make_gen("payflip");
    for (size_t a = 0; a < g.names.size(); a++) {
        std::string p = arr(g, int(a));
        uint64_t len = g.payload_bytes[a];
        // Every bit of small payloads, a stride of bits through the others, always the last bit.
        uint64_t stride = len * 8 <= 2048 ? 1 : 13;
        for (uint64_t b = 0; b < len * 8; b += stride) {
            for (uint64_t bit : {b, len * 8 - 1}) {
                flip(p, 128 + bit / 8, int(bit % 8));
                Result r = verify(g.dir);
                flip(p, 128 + bit / 8, int(bit % 8));
                if (r.status != STK_E_CHECKSUM || r.file != "arrays/" + g.names[a] || r.offset != 128)
                    fail_msg("%s payload bit %llu: %s at %s:%llu", g.names[a].c_str(), (unsigned long long)bit,
                             stk_status_str(r.status), r.file.c_str(), (unsigned long long)r.offset);
                assert_contains(r.message, g.names[a]);
            }
        }
    }
}

static void every_manifest_bit_flip_detected(void **) {
    Gen g = make_gen("manflip");
    std::string p = g.dir + "/sera_manifest.bin";
    std::vector<uint8_t> orig = test::read_bytes(p);
    uint64_t size = orig.size();
    for (uint64_t byte = 0; byte < size; byte++)
        for (int bit = 0; bit < 8; bit++) {
            flip(p, byte, bit);
            Result r = verify(g.dir);
            flip(p, byte, bit);
            bool ok_place;
            if (byte < 4) ok_place = r.status == STK_E_BAD_MAGIC && r.offset == 0;
            else if (byte < 8) ok_place = r.status == STK_E_CORRUPT && r.offset == 4;
            else if (byte < 40) ok_place = r.status == STK_E_SCHEMA && r.offset == 8;
            else if (byte < 56)  // a count: out of bounds, or the file is then too short / too long
                ok_place = (r.status == STK_E_CORRUPT && r.offset == (byte & ~3ull)) ||
                           (r.status == STK_E_TRUNCATED && r.offset == size) || r.status == STK_E_SIZE_MISMATCH;
            else ok_place = r.status == STK_E_CHECKSUM && r.offset == size - 32;
            if (!ok_place || r.file != "sera_manifest.bin")
                fail_msg("manifest byte %llu bit %d: %s at %s:%llu (%s)", (unsigned long long)byte, bit, stk_status_str(r.status),
                         r.file.c_str(), (unsigned long long)r.offset, r.message.c_str());
            assert_int_equal(r.report.arrays_checked, 0);
        }
    assert_true(test::read_bytes(p) == orig);
    assert_int_equal(verify(g.dir).status, STK_OK);
}

// Issue 2: each bad input, its own status, with the file and offset.
// Issue 2: each bad input, its own test and its own status, with the file and offset.
struct BadCase {
    const char *what;
    stk_status status;
    uint64_t offset;
    std::function<void(const std::string &)> damage;
} const kBadCases[] = {
    {"truncated file", STK_E_TRUNCATED, 128 + 100,
     [](const std::string &p) { assert_int_equal(truncate(p.c_str(), 128 + 100), 0); }},
    {"wrong magic", STK_E_BAD_MAGIC, 0, [](const std::string &p) { patch_header(p, [](uint8_t *h) { h[0] = 'X'; }); }},
    {"unknown dtype", STK_E_BAD_DTYPE, 4,
     [](const std::string &p) { patch_header(p, [](uint8_t *h) { store_le<uint16_t>(h + 4, 12); }); }},
    {"rank > 5", STK_E_BAD_RANK, 6,
     [](const std::string &p) { patch_header(p, [](uint8_t *h) { store_le<uint16_t>(h + 6, 6); }); }},
    {"dims overflow", STK_E_DIMS_OVERFLOW, 16,
     [](const std::string &p) {
         patch_header(p, [](uint8_t *h) {
             store_le<uint16_t>(h + 6, 2);
             store_le<uint64_t>(h + 8, 1ull << 62);
             store_le<uint64_t>(h + 16, 8);
         });
     }},
    {"byte_len disagrees with dims", STK_E_SIZE_MISMATCH, 48,
     [](const std::string &p) { patch_header(p, [](uint8_t *h) { store_le<uint64_t>(h + 48, 299); }); }},
    {"misaligned payload", STK_E_MISALIGNED, 72,
     [](const std::string &p) { patch_header(p, [](uint8_t *h) { store_le<uint32_t>(h + 72, kFlagRowMajor); }); }},
    {"checksum mismatch", STK_E_CHECKSUM, 128, [](const std::string &p) { flip(p, 128 + 17, 3); }},
    {"manifest naming a missing array", STK_E_MISSING_ARRAY, 0,
     [](const std::string &p) { assert_int_equal(unlink(p.c_str()), 0); }},
    {"header disagrees with the manifest (checksums)", STK_E_CHECKSUM, 56,
     [](const std::string &p) { patch_header(p, [](uint8_t *h) { store_le<uint64_t>(h + 56, 0x12345678); }); }},
    {"header disagrees with the manifest (shape)", STK_E_SIZE_MISMATCH, 6,
     [](const std::string &p) {
         patch_header(p, [](uint8_t *h) {
             store_le<uint16_t>(h + 6, 2);
             store_le<uint64_t>(h + 8, 3);
             store_le<uint64_t>(h + 16, 100);
         });
     }},
    {"trailing bytes", STK_E_SIZE_MISMATCH, 128 + 300,
     [](const std::string &p) {
         std::vector<uint8_t> b = test::read_bytes(p);
         b.push_back(0);
         test::write_bytes(p, b);
     }},
};

static void bad_input(void **state) {
    const BadCase &c = *static_cast<const BadCase *>(*state);
    Gen g = make_gen("bad");
    c.damage(arr(g, 0));  // T_1.bin: u8 [300]
    Result r = verify(g.dir);
    if (r.status != c.status || r.file != "arrays/T_1.bin" || r.offset != c.offset)
        fail_msg("%s: got %s at %s:%llu (%s)", c.what, stk_status_str(r.status), r.file.c_str(), (unsigned long long)r.offset,
                 r.message.c_str());
    assert_contains(r.message, "T_1.bin");
    assert_int_equal(r.report.arrays_checked, 0);
}

static void bad_inputs_have_distinct_statuses(void **) {
    // The nine inputs of issue 2 (the first nine cases) have nine distinct statuses.
    std::vector<stk_status> first9;
    for (int i = 0; i < 9; i++) first9.push_back(kBadCases[i].status);
    std::sort(first9.begin(), first9.end());
    assert_true(std::unique(first9.begin(), first9.end()) == first9.end());
}

static void missing_manifest_and_unpublished(void **) {
    std::string empty = test::make_temp_dir("nomanifest");
    Result r = verify(empty);
    assert_int_equal(r.status, STK_E_NOT_FOUND);
    assert_string_equal(r.file.c_str(), "sera_manifest.bin");
    assert_contains(r.message, "no published generation");
    // manifest_emit refuses to publish when a recorded array is gone: nothing appears.
    std::string out = test::make_temp_dir("unpublished") + "/out";
    Job *job = new_job(out);
    for (int s = 1; s <= STK_STAGE_BRIDGE_INIT; s++) job->stages[s].done = true;
    StageDigest d;
    uint8_t p[16] = {1, 2, 3};
    uint64_t dims[1] = {16};
    job_write_array(*job, STK_STAGE_PRF, d, ArraySpec("a.bin", DType::U8, {dims[0]}), p);
    assert_int_equal(unlink((out + "/arrays/a.bin").c_str()), 0);
    std::string msg = test::expect_error(STK_E_MISSING_ARRAY, [&] { manifest_emit_run(*job); });
    assert_contains(msg, "a.bin");
    struct stat st;
    assert_int_not_equal(stat((out + "/sera_manifest.bin").c_str(), &st), 0);
}

static void first_failure_is_deterministic(void **) {
    // 40 arrays of 300 KiB: enough bytes that verification runs on threads.
    Gen g = make_gen("many", 40, 300 * 1024);
    Result ok = verify(g.dir);
    assert_int_equal(ok.status, STK_OK);
    assert_int_equal(ok.report.arrays_checked, 44);
    flip(arr(g, 9), 128 + 5000, 1);  // extra_5
    flip(arr(g, 34), 128 + 7, 0);    // extra_30
    for (int i = 0; i < 10; i++) {
        Result r = verify(g.dir);
        assert_int_equal(r.status, STK_E_CHECKSUM);
        assert_string_equal(r.file.c_str(), "arrays/extra_5.bin");
        assert_int_equal(r.report.arrays_checked, 9);
        assert_int_equal(r.report.bytes_checked, 300 + 24 + 240 + 4000 + 5 * 300 * 1024);
    }
}

static void stk_check_command(void **) {
    Gen g = make_gen("cli");
    Run ok = run_stk("check --out " + g.dir);
    if (ok.exit_code != 0) fail_msg("exit %d: %s", ok.exit_code, ok.out.c_str());
    assert_contains(ok.out, "4 arrays");
    assert_contains(ok.out, "4564 bytes");
    Run js = run_stk("check --json --out " + g.dir);
    assert_int_equal(js.exit_code, 0);
    assert_contains(js.out, "\"ok\": true");
    assert_contains(js.out, "\"arrays\": 4");
    assert_contains(js.out, "\"bytes\": 4564");
    // Corrupted payload: exit 4, the file and offset on stderr.
    flip(arr(g, 2), 128 + 3, 5);
    Run bad = run_stk("check --out " + g.dir);
    assert_int_equal(bad.exit_code, 4);
    assert_contains(bad.out, "STK_E_CHECKSUM");
    assert_contains(bad.out, "arrays/whitening_sig2.bin");
    assert_contains(bad.out, "offset 128");
    Run badj = run_stk("check --json --out " + g.dir);
    assert_int_equal(badj.exit_code, 4);
    assert_contains(badj.out, "\"ok\": false");
    assert_contains(badj.out, "\"file\": \"arrays/whitening_sig2.bin\"");
    assert_contains(badj.out, "\"offset\": 128");
    flip(arr(g, 2), 128 + 3, 5);
    // Header bit and manifest bit: exit 4 as well.
    flip(arr(g, 1), 40, 0);
    Run hdr = run_stk("check --out " + g.dir);
    assert_int_equal(hdr.exit_code, 4);
    assert_contains(hdr.out, "arrays/prf_W.bin");
    assert_contains(hdr.out, "offset 120");
    flip(arr(g, 1), 40, 0);
    flip(g.dir + "/sera_manifest.bin", 600, 2);
    Run man = run_stk("check --out " + g.dir);
    assert_int_equal(man.exit_code, 4);
    assert_contains(man.out, "sera_manifest.bin");
    flip(g.dir + "/sera_manifest.bin", 600, 2);
    // Missing array: exit 4.
    assert_int_equal(unlink(arr(g, 3).c_str()), 0);
    Run miss = run_stk("check --out " + g.dir);
    assert_int_equal(miss.exit_code, 4);
    assert_contains(miss.out, "STK_E_MISSING_ARRAY");
    assert_contains(miss.out, "overlays_H.bin");
    // Usage.
    assert_int_equal(run_stk("check").exit_code, 2);
    assert_int_equal(run_stk("check --out " + g.dir + " --bogus").exit_code, 2);
    Run help = run_stk("check --help");
    assert_int_equal(help.exit_code, 0);
    assert_contains(help.out, "--out DIR");
    assert_contains(help.out, "--json");
}

// A stage digest's crc32c must depend on what the stage wrote.  Fed with header_crc as stored,
// every stream ended with a CRC of what preceded it and the CRC residue made the result one
// constant (0x7326b17f) for every stage of every model.
static void stage_crc_depends_on_the_arrays(void **) {
    auto digest_of = [](uint32_t payload_crc, const char *name) {
        ArrayHeader h;
        h.dtype = 2;
        h.rank = 1;
        h.dims[0] = 4;
        h.byte_len = 16;
        h.crc32c = payload_crc;
        h.sha256_low64 = 0x1122334455667788ull;
        StageDigest d;
        d.add_array(name, h);
        StageRecord r;
        d.finish(r);
        return r;
    };
    StageRecord a = digest_of(0x0bd5ab40u, "a.bin"), b = digest_of(0x0bd5ab41u, "a.bin"), c = digest_of(0x0bd5ab40u, "b.bin");
    assert_int_not_equal(a.crc32c, b.crc32c);
    assert_int_not_equal(a.crc32c, c.crc32c);
    assert_int_not_equal(a.crc32c, 0x7326b17fu);
    assert_true(a.sha256_low64 != b.sha256_low64);
}

int main() {
    std::vector<CMUnitTest> tests = {
        cmocka_unit_test(good_generation_verifies),
        cmocka_unit_test(draft_reaches_manifest),
        cmocka_unit_test(every_header_bit_flip_detected),
        cmocka_unit_test(payload_bit_flips_detected),
        cmocka_unit_test(every_manifest_bit_flip_detected),
        cmocka_unit_test(bad_inputs_have_distinct_statuses),
        cmocka_unit_test(missing_manifest_and_unpublished),
        cmocka_unit_test(first_failure_is_deterministic),
        cmocka_unit_test(stk_check_command),
        cmocka_unit_test(stage_crc_depends_on_the_arrays),
    };
    std::vector<std::string> names;
    for (const BadCase &c : kBadCases) names.push_back(std::string("bad input: ") + c.what);
    for (size_t i = 0; i < names.size(); i++)
        tests.push_back(CMUnitTest{names[i].c_str(), bad_input, nullptr, nullptr, const_cast<BadCase *>(&kBadCases[i])});
    return _cmocka_run_group_tests("check", tests.data(), tests.size(), nullptr, nullptr);
}
