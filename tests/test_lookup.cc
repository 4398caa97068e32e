// stk_lookup over generations built in the test by the tokenizer stage: bytes -> id and
// id -> bytes through the C API, every GPT-2 piece, the error statuses, a corrupted table
// refused at open, LINEAR absent (no linear arrays), HUB not implemented yet.
#include "gpt2_pieces.h"  // simdjson before cmocka's `fail` macro
#include "test_util.h"

#include "core/bytes.h"
#include "runtime/generation.h"
#include "tokenizer/vocab_io.h"
#include "tokenizer_job.h"

using namespace stk;
using stk::test::TestJob;

static Vocab small_vocab() {
    Vocab v;
    v.model = Vocab::Model::BPE_BYTE_LEVEL;
    for (int b = 0; b < 256; b++) v.pieces.push_back(std::string(1, char(b)));
    for (const char *s : {"ab", "abc", "hello", " the", "he", "exactly8", "ninebytes"}) v.pieces.push_back(s);
    v.is_special.assign(v.pieces.size(), 0);
    v.source = "small";
    return v;
}

static std::string built_generation(const Vocab &v, uint32_t flags) {
    TestJob tj("/nonexistent-in", flags, 1 << 16);
    tokenizer_stage_build(*tj.job, v);
    return tj.out;
}

static stk_status token_id(const stk_generation *g, const std::string &s, uint32_t *id) {
    uint8_t out[4];
    size_t len = 0;
    stk_status st = stk_lookup(g, STK_LOOKUP_TOKEN_ID, s.data(), s.size(), out, sizeof out, &len);
    if (st == STK_OK) {
        assert_int_equal(len, 4);
        *id = load_u32(out);
    }
    return st;
}

static void token_lookups(void **) {
    std::string dir = built_generation(small_vocab(), STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER);
    std::unique_ptr<stk_generation> g = map_generation(dir);
    assert_true(g->has_tokenizer);
    uint32_t id = 0;
    assert_int_equal(token_id(g.get(), "hello", &id), STK_OK);
    assert_int_equal(id, 258);
    assert_int_equal(token_id(g.get(), "exactly8", &id), STK_OK);
    assert_int_equal(id, 261);
    assert_int_equal(token_id(g.get(), std::string(1, '\0'), &id), STK_OK);
    assert_int_equal(id, 0);
    assert_int_equal(token_id(g.get(), "hellp", &id), STK_E_KEY_NOT_FOUND);
    assert_int_equal(token_id(g.get(), "ninebytes", &id), STK_E_KEY_NOT_FOUND);  // longer than L_tok
    assert_contains(stk_last_error(), "1..8 bytes");
    assert_int_equal(token_id(g.get(), "", &id), STK_E_KEY_NOT_FOUND);
    // id -> bytes
    char buf[16];
    size_t len = 0;
    uint32_t key = 257;
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_TOKEN_BYTES, &key, 4, buf, sizeof buf, &len), STK_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "abc", 3);
    key = 262;  // "ninebytes": not in T_n, but every id decodes
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_TOKEN_BYTES, &key, 4, buf, sizeof buf, &len), STK_OK);
    assert_int_equal(len, 9);
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_TOKEN_BYTES, &key, 4, buf, 4, &len), STK_E_INVALID_ARGUMENT);
    assert_int_equal(len, 9);  // says how much is needed
    key = 263;
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_TOKEN_BYTES, &key, 4, buf, sizeof buf, &len), STK_E_KEY_NOT_FOUND);
    assert_contains(stk_last_error(), "token id 263 outside the 263 tokens");
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_TOKEN_BYTES, &key, 3, buf, sizeof buf, &len), STK_E_INVALID_ARGUMENT);
    uint64_t lk = 1;
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_LINEAR, &lk, 8, buf, sizeof buf, &len), STK_E_MISSING_ARRAY);
    assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_HUB, &lk, 8, buf, sizeof buf, &len), STK_E_MISSING_ARRAY);
    assert_contains(stk_last_error(), "bridge_hubs.bin is absent");
    assert_int_equal(stk_lookup(nullptr, STK_LOOKUP_TOKEN_ID, "a", 1, buf, sizeof buf, &len), STK_E_INVALID_ARGUMENT);
}

static void ext_generation_has_no_tables(void **) {
    std::string dir = built_generation(small_vocab(), 0);  // SP rejects: EXT, nothing written
    std::unique_ptr<stk_generation> g = map_generation(dir);
    assert_false(g->has_tokenizer);
    uint32_t id;
    assert_int_equal(token_id(g.get(), "hello", &id), STK_E_MISSING_ARRAY);
    assert_contains(stk_last_error(), "tokenizer_fst.bin is absent");
}

static void corrupted_table_refused(void **) {
    std::string dir = built_generation(small_vocab(), STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER);
    std::string p = dir + "/arrays/T_5.bin";
    std::vector<uint8_t> b = test::read_bytes(p);
    b[128 + 70] ^= 0x10;  // a pilot byte of the MPHF
    test::write_bytes(p, b);
    std::string m = test::expect_error(STK_E_CHECKSUM, [&] { map_generation(dir); });
    assert_contains(m, "T_5.bin");
    // Without a manifest the generation is not published: the C API refuses to open it.
    stk_generation *g = reinterpret_cast<stk_generation *>(1);
    assert_true(stk_generation_open(dir.c_str(), &g) != STK_OK);
    assert_null(g);
}

static void every_gpt2_piece(void **) {
    std::string hf = test::third_party_data("gpt2/hf-dir");
    Vocab v = load_vocab_dir(hf);
    TestJob tj(hf, STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER, 0);
    tokenizer_stage_build(*tj.job, v);
    std::unique_ptr<stk_generation> g = map_generation(tj.out);
    std::vector<std::string> pieces = test::gpt2_pieces();  // the independent reader
    size_t found = 0, long_pieces = 0;
    for (uint32_t id = 0; id < pieces.size(); id++) {
        char buf[256];
        size_t len;
        assert_int_equal(stk_lookup(g.get(), STK_LOOKUP_TOKEN_BYTES, &id, 4, buf, sizeof buf, &len), STK_OK);
        assert_int_equal(len, pieces[id].size());
        assert_memory_equal(buf, pieces[id].data(), len);
        uint32_t got;
        if (pieces[id].size() > 8) {
            long_pieces++;
            continue;
        }
        assert_int_equal(token_id(g.get(), pieces[id], &got), STK_OK);
        assert_int_equal(got, id);
        found++;
    }
    // <|endoftext|> (13 bytes, special) counts among the long pieces.
    assert_int_equal(found + long_pieces, 50257);
    assert_int_equal(found, 39333);  // GPT-2 pieces of 1..8 bytes (counted in Python from encoder.json)
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_lookups),
        cmocka_unit_test(ext_generation_has_no_tables),
        cmocka_unit_test(corrupted_table_refused),
        cmocka_unit_test(every_gpt2_piece),
    };
    return cmocka_run_group_tests_name("lookup", tests, nullptr, nullptr);
}
