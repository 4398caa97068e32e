// The tokenizer stage (seed 4.1-4.6, 12.1): the default rule (SP rejects -> EXT, invariant
// record with the witness), the uncertified build on request, a certified vocabulary, the
// arrays it writes (loaded back and checked), greedy ids, round trips, the real GPT-2 and
// Llama 2 tokenizers, proposals, and identical digests across runs.
#include "gpt2_pieces.h"  // simdjson before cmocka's `fail` macro
#include "test_util.h"

#include <sys/stat.h>

#include <memory>

#include "format/array.h"
#include "stages/job.h"
#include "stages/stages.h"
#include "tokenizer/greedy.h"
#include "tokenizer/plan.h"
#include "tokenizer/vocab_io.h"
#include "tokenizer_job.h"

using namespace stk;
using stk::test::TestJob;

namespace {

bool exists(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

// 256 single bytes, then the given multi-byte pieces (ids 256, 257, ...).
Vocab byte_vocab(const std::vector<std::string> &extra) {
    Vocab v;
    v.model = Vocab::Model::BPE_BYTE_LEVEL;
    for (int b = 0; b < 256; b++) v.pieces.push_back(std::string(1, char(b)));
    for (const std::string &s : extra) v.pieces.push_back(s);
    v.is_special.assign(v.pieces.size(), 0);
    v.source = "test-vocab";
    return v;
}

std::vector<uint32_t> encode(const FstTables &t, const std::string &s) {
    std::vector<uint32_t> ids(s.size() + 1);
    size_t n = greedy_encode(t, reinterpret_cast<const uint8_t *>(s.data()), s.size(), ids.data());
    ids.resize(n);
    return ids;
}

}  // namespace

static void default_rule_ext_with_witness(void **) {
    Vocab v = byte_vocab({"ab", "abc", "hello", " the"});
    TestJob tj("/nonexistent-in", 0, 4096);
    TokenizerPlan &p = tokenizer_stage_build(*tj.job, v);
    assert_int_equal(int(p.mode), int(TokenizerPlan::Mode::EXT));
    assert_int_equal(p.sp_verdict, SpResult::AMBIGUOUS);
    assert_string_equal(p.sp_witness, "ab");
    assert_contains(p.invariant, "\"ab\" = ids [256] = ids [97,98]");
    assert_contains(p.invariant, "no token tables built, EXT mode");
    assert_contains(p.invariant, "--allow-uncertified-tokenizer");
    assert_int_equal(p.n_bytepieces, 260);
    assert_int_equal(p.pieces_per_length[1], 256);
    assert_int_equal(p.pieces_per_length[5], 1);
    assert_false(exists(tj.out + "/arrays"));  // nothing written
    assert_true(p.tables == nullptr);
    // Proposals: no merges, no scores -> splitmix64 over the 260 ids: 256 distinct ids.
    assert_int_equal(p.proposals.count, 256);
    assert_int_equal(int(p.proposals.source), int(ProposalSource::SPLITMIX64));
    std::vector<uint8_t> seen(260, 0);
    for (uint32_t i = 0; i < p.proposals.count; i++) {
        assert_true(p.proposals.ids[i] < 260);
        assert_int_equal(seen[p.proposals.ids[i]]++, 0);
    }
    assert_true(tj.job->stages[STK_STAGE_TOKENIZER].sha256_low64 != 0);
    // The manifest draft: tokenizer{} and a feature-disabled record naming the witness.
    const ManifestDraft &d = tj.job->manifest;
    assert_int_equal(d.fields.tokenizer.mode, 3);
    assert_int_equal(d.fields.tokenizer.l_tok, 8);
    assert_int_equal(d.fields.tokenizer.s_norm, 260);
    assert_int_equal(d.fields.tokenizer.l_norm, 5);
    assert_int_equal(d.fields.tokenizer.vocab_size, 260);
    assert_int_equal(d.fields.tokenizer.unicode_policy, 1);
    assert_memory_equal(d.fields.tokenizer.sp_cert_digest, p.sp_cert_digest, 32);
    assert_int_equal(d.n_pgen, 256);
    assert_int_equal(d.n_records, 1);
    assert_int_equal(d.records[0].kind, kRecordFeatureDisabled);
    assert_int_equal(d.records[0].status, STK_E_SP_REJECTED);
    assert_int_equal(d.records[0].feature, kFeatureTokenizerFst);
    assert_contains(d.records[0].text, "witness \"ab\"");
}

static void uncertified_build_writes_tables(void **) {
    Vocab v = byte_vocab({"ab", "abc", "hello", " the", "he"});
    v.merges = {{104, 101}, {97, 98}, {256, 99}};  // "he", "ab", "abc"
    v.merge_results = {260, 256, 257};
    TestJob tj("/nonexistent-in", STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER, 4096);
    TokenizerPlan &p = tokenizer_stage_build(*tj.job, v);
    assert_int_equal(int(p.mode), int(TokenizerPlan::Mode::FST_UNCERTIFIED));
    assert_contains(p.invariant, "UNCERTIFIED");
    assert_true(p.roundtrip_ok);
    assert_int_equal(p.roundtrip_bytes, 65536);
    assert_true(p.max_probes_per_byte <= 8 && p.max_probes_per_byte >= 1);
    assert_int_equal(p.uncovered_bytes, 0);
    // Proposals from merge ranks first: 260, 256, 257, then splitmix64 fill.
    assert_int_equal(int(p.proposals.source), int(ProposalSource::MERGES));
    assert_int_equal(p.proposals.ids[0], 260);
    assert_int_equal(p.proposals.ids[1], 256);
    assert_int_equal(p.proposals.ids[2], 257);
    // Greedy longest match with the Dec guard, no backtracking.
    std::vector<uint32_t> ids = encode(*p.tables, "hello the abcab!");
    std::vector<uint32_t> want = {258, 259, 32, 257, 256, 33};
    assert_int_equal(ids.size(), want.size());
    assert_memory_equal(ids.data(), want.data(), 4 * want.size());
    // The arrays: tokenizer_fst.bin and T_1..T_8, valid Sera arrays, loadable, same lookups.
    assert_int_equal(tj.job->n_arrays, 9);
    assert_string_equal(tj.job->arrays[0].name, "tokenizer_fst.bin");
    assert_string_equal(tj.job->arrays[8].name, "T_8.bin");
    ArrayReader fst(tj.array("tokenizer_fst.bin"));
    assert_int_equal(fst.header().dtype, uint16_t(DType::U8));
    FstTables t;
    t.dec = DecTable::load(fst.payload(), fst.payload_size(), "tokenizer_fst.bin");
    assert_int_equal(t.dec.n_tokens, 261);
    assert_int_equal(t.dec.l_tok, 8);
    assert_int_equal(t.dec.flags, kDecFlagUncertified);
    assert_int_equal(t.dec.n_bytes, 256 + 2 + 3 + 5 + 4 + 2);
    assert_int_equal(fst.payload_size(), 64 + 4 * 262 + 272);
    std::vector<std::unique_ptr<ArrayReader>> keep;
    for (uint32_t n = 1; n <= 8; n++) {
        std::string name = "T_" + std::to_string(n) + ".bin";
        keep.emplace_back(new ArrayReader(tj.array(name.c_str())));
        t.t[n] = TokenTable::load(keep.back()->payload(), keep.back()->payload_size(), n, t.dec, name.c_str());
    }
    assert_int_equal(t.t[1].n_keys(), 256);
    assert_int_equal(t.t[2].n_keys(), 2);
    assert_int_equal(t.t[3].n_keys(), 1);
    assert_int_equal(t.t[4].n_keys(), 1);
    assert_int_equal(t.t[6].n_keys(), 0);
    assert_int_equal(keep[5]->payload_size(), 64 + 64);  // empty T_6: header + empty MPHF
    assert_int_equal(t.find(reinterpret_cast<const uint8_t *>("hello"), 5), 258);
    assert_int_equal(t.find(reinterpret_cast<const uint8_t *>("hellp"), 5), -1);
    std::vector<uint32_t> ids2 = encode(t, "hello the abcab!");
    assert_memory_equal(ids2.data(), want.data(), 4 * want.size());
    // Decode is exact.
    uint8_t back[64];
    size_t nb = fst_decode(t, ids2.data(), ids2.size(), back, sizeof back);
    assert_int_equal(nb, 16);
    assert_memory_equal(back, "hello the abcab!", 16);
}

static void certified_prefix_code(void **) {
    // {0, 10, 11} plus pieces over other bytes: a prefix code, SP certifies it.
    Vocab v;
    v.model = Vocab::Model::BPE_BYTE_LEVEL;
    v.pieces = {"0", "10", "11", "xyz"};
    v.is_special = {0, 0, 0, 0};
    v.unk_id = 3;
    v.source = "prefix-code";
    TestJob tj("/nonexistent-in", 0, 1024);
    TokenizerPlan &p = tokenizer_stage_build(*tj.job, v);
    assert_int_equal(int(p.mode), int(TokenizerPlan::Mode::FST));
    assert_int_equal(p.sp_verdict, SpResult::UNIQUELY_DECODABLE);
    const uint8_t zero = 0;
    assert_memory_equal(p.sp_cert_digest, sha256(&zero, 1).bytes, 32);
    assert_int_equal(p.uncovered_bytes, 255);  // only '0' has a single-byte token
    assert_contains(p.invariant, "255 byte values have no single-byte token");
    assert_true(p.roundtrip_ok);  // over the covered alphabet {'0'}
    std::vector<uint32_t> ids = encode(*p.tables, "0100110xyz1");
    // 0 | 10 | 0 | 11 | 0 | xyz | '1' has no token -> unk (3)
    std::vector<uint32_t> want = {0, 1, 0, 2, 0, 3, 3};
    assert_int_equal(ids.size(), want.size());
    assert_memory_equal(ids.data(), want.data(), 4 * want.size());
    assert_int_equal(tj.job->n_arrays, 9);
    ArrayReader fst(tj.array("tokenizer_fst.bin"));
    assert_int_equal(DecTable::load(fst.payload(), fst.payload_size(), "x").flags, kDecFlagCertified);
    // No unk: an uncovered byte is an error naming its offset.
    v.unk_id = -1;
    TestJob tj2("/nonexistent-in", 0, 1024);
    TokenizerPlan &p2 = tokenizer_stage_build(*tj2.job, v);
    std::string m = test::expect_error(STK_E_KEY_NOT_FOUND, [&] { encode(*p2.tables, "00a"); });
    assert_contains(m, "byte 0x61 at offset 2");
}

static void gpt2_real_vocabulary(void **) {
    std::string dir = test::third_party_data("gpt2/hf-dir");
    Vocab v = load_vocab_dir(dir);
    assert_int_equal(v.size(), 50257);
    uint64_t digests[2];
    for (int run = 0; run < 2; run++) {
        TestJob tj(dir, STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER, 0);
        TokenizerPlan &p = tokenizer_stage_build(*tj.job, v);
        assert_int_equal(int(p.mode), int(TokenizerPlan::Mode::FST_UNCERTIFIED));
        assert_string_equal(p.sp_witness, "\\x0a\\x0a");  // "\n\n" = [628] = [198][198]
        assert_contains(p.invariant, "ids [628] = ids [198,198]");
        assert_int_equal(p.pieces_per_length[1], 256);
        assert_int_equal(p.uncovered_bytes, 0);
        assert_int_equal(p.duplicate_pieces, 0);
        assert_int_equal(p.rh_collisions, 0);
        assert_true(p.roundtrip_ok);
        assert_true(p.max_probes_per_byte <= 8);
        assert_int_equal(int(p.proposals.source), int(ProposalSource::MERGES));
        assert_int_equal(p.proposals.count, 256);
        assert_int_equal(p.proposals.ids[0], 256);  // the first merge, "Ġ t" -> "Ġt" (id 256)
        assert_int_equal(p.proposals.ids[1], 257);  // "Ġ a" -> "Ġa"
        std::vector<uint32_t> ids = encode(*p.tables, "Hello world");
        std::vector<uint32_t> want = {15496, 995};
        assert_int_equal(ids.size(), 2);
        assert_memory_equal(ids.data(), want.data(), 8);
        digests[run] = tj.job->stages[STK_STAGE_TOKENIZER].sha256_low64;
        const ManifestDraft &d = tj.job->manifest;
        assert_int_equal(d.fields.tokenizer.mode, 2);
        assert_int_equal(d.fields.tokenizer.s_norm, 39333);  // GPT-2 pieces of 1..8 bytes
        assert_int_equal(d.fields.tokenizer.l_norm, 8);
        assert_int_equal(d.n_records, 3);  // uncertified note, two 12.1 passes
        assert_int_equal(d.records[1].kind, kRecordInvariantPass);
        assert_true(d.records[1].value <= d.records[1].bound);
    }
    assert_true(digests[0] == digests[1]);
}

static void gpt2_default_is_ext(void **) {
    std::string dir = test::third_party_data("gpt2/hf-dir");
    TestJob tj(dir, 0, 0);
    tj.job->stages[STK_STAGE_PARSE_TENSORS].done = true;  // parse_tensors belongs to ingestion
    job_run_stage(*tj.job, STK_STAGE_TOKENIZER);
    TokenizerPlan &p = *tj.job->tokenizer;
    assert_int_equal(int(p.mode), int(TokenizerPlan::Mode::EXT));
    assert_contains(p.invariant, "Sardinas-Patterson rejects the");
    assert_false(exists(tj.out + "/arrays"));
}

static void sentencepiece_is_ext(void **) {
    std::string dir = test::make_temp_dir("spdir");
    std::vector<uint8_t> model = test::read_bytes(test::third_party_data("sentencepiece/llama2.tokenizer.model"));
    test::write_bytes(dir + "/tokenizer.model", model);
    TestJob tj(dir, STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER, 0);
    tj.job->stages[STK_STAGE_PARSE_TENSORS].done = true;
    job_run_stage(*tj.job, STK_STAGE_TOKENIZER);
    TokenizerPlan &p = *tj.job->tokenizer;
    assert_int_equal(int(p.mode), int(TokenizerPlan::Mode::EXT));
    assert_int_equal(p.vocab_size, 32000);
    assert_contains(p.invariant, "not byte-level BPE");
    assert_false(p.sp_ran);
    assert_int_equal(p.proposals.count, 256);
    assert_false(exists(tj.out + "/arrays"));
}

static void arena_too_small_writes_nothing(void **) {
    Vocab v = byte_vocab({"ab", "abc"});
    // in_dir has no tokenizer files: the job reserves only the plan, so the stage must refuse
    // up front - before tokenizer_fst.bin or any T_n exists.
    TestJob tj("/nonexistent-in", STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER, 0);
    tj.job->arena.alloc(tj.job->arena.remaining() - 4096, 1);  // leave 4 KiB
    std::string m = test::expect_error(STK_E_ARENA_TOO_SMALL, [&] { tokenizer_stage_build(*tj.job, v); });
    assert_contains(m, "test-vocab: the tokenizer stage needs");
    assert_false(exists(tj.out + "/arrays"));
    assert_int_equal(tj.job->n_arrays, 0);
}

static void absent_tokenizer(void **) {
    std::string dir = test::make_temp_dir("notok");
    TestJob tj(dir, 0, 0);
    tj.job->stages[STK_STAGE_PARSE_TENSORS].done = true;
    job_run_stage(*tj.job, STK_STAGE_TOKENIZER);
    assert_int_equal(int(tj.job->tokenizer->mode), int(TokenizerPlan::Mode::ABSENT));
    assert_contains(tj.job->tokenizer->invariant, "no tokenizer file");
    assert_true(tj.job->stages[STK_STAGE_TOKENIZER].done);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_rule_ext_with_witness),
        cmocka_unit_test(uncertified_build_writes_tables),
        cmocka_unit_test(certified_prefix_code),
        cmocka_unit_test(gpt2_real_vocabulary),
        cmocka_unit_test(gpt2_default_is_ext),
        cmocka_unit_test(sentencepiece_is_ext),
        cmocka_unit_test(arena_too_small_writes_nothing),
        cmocka_unit_test(absent_tokenizer),
    };
    return cmocka_run_group_tests_name("tokenizer_stage", tests, nullptr, nullptr);
}
