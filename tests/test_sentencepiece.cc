// SentencePiece tokenizer.model: our protobuf reader + BPE with score-ranked merges against
// Google's sentencepiece library (tests/data/tokenizer/sp_*_reference.json, written by
// sp_reference.cc) and against the Llama reference ids (the tokenizer.json path must agree).
#include <simdjson.h>  // before cmocka, whose macros (fail, skip) clash with it

#include "test_util.h"

#include "tokenizer/bpe.h"
#include "tokenizer/vocab_io.h"

using namespace stk;

static std::vector<uint32_t> json_ids(const std::string &path, std::string *text = nullptr) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc = parser.load(path);
    std::vector<uint32_t> ids;
    for (auto x : doc["token_ids"].get_array()) ids.push_back(uint32_t(uint64_t(x)));
    if (text) *text = std::string(std::string_view(doc["text"]));
    return ids;
}

static std::string sp_text() {
    std::vector<uint8_t> b = test::read_bytes(test::test_data("tokenizer/sp_text.txt"));
    return std::string(b.begin(), b.end());
}

static void assert_ids_equal(const std::vector<uint32_t> &got, const std::vector<uint32_t> &want) {
    size_t n = std::min(got.size(), want.size());
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            print_error("first difference at token %zu: got %u, want %u\n", i, got[i], want[i]);
            fail();
        }
    assert_int_equal(got.size(), want.size());
}

static void llama2_model_reads(void **) {
    Vocab v = load_sentencepiece_model(test::third_party_data("sentencepiece/llama2.tokenizer.model"));
    assert_int_equal(v.size(), 32000);
    assert_true(v.model == Vocab::Model::BPE_SENTENCEPIECE);
    assert_true(v.byte_fallback);
    assert_int_equal(v.unk_id, 0);
    assert_int_equal(v.bos_id, 1);
    assert_int_equal(v.eos_id, 2);
    assert_int_equal(v.piece_types[0], int(Vocab::PieceType::UNKNOWN));
    assert_int_equal(v.piece_types[1], int(Vocab::PieceType::CONTROL));
    assert_int_equal(v.piece_types[3], int(Vocab::PieceType::BYTE));
    assert_int_equal(v.byte_piece_ids[0x0A], 13);
    assert_string_equal(v.pieces[13].c_str(), "\n");
    assert_string_equal(v.pieces[450].c_str(), "\xE2\x96\x81The");
    assert_true(v.scores[1000] == -741.0f);
    // merges derived from scores: as many as the HF tokenizer.json of the same model lists
    assert_int_equal(v.merges.size(), 61249);
    assert_true(v.merges_from_scores);
}

static void mistral_model_reads(void **) {
    Vocab v = load_sentencepiece_model(test::third_party_data("sentencepiece/mistral-v0.1.tokenizer.model"));
    assert_int_equal(v.size(), 32000);
    assert_true(v.model == Vocab::Model::BPE_SENTENCEPIECE);
    assert_true(v.byte_fallback);
    assert_int_equal(v.byte_piece_ids[0], 3);
    assert_string_equal(v.pieces[1000].c_str(), "\xD0\xBB\xD0\xB0");  // "ла"
    assert_true(v.scores[1000] == -741.0f);
    assert_int_equal(v.merges.size(), 58980);
    assert_int_equal(v.pipeline.prefix_ids.size(), 1);
    assert_int_equal(v.pipeline.prefix_ids[0], 1);
}

static void llama2_model_matches_reference(void **) {
    std::string text;
    std::vector<uint32_t> want = json_ids(test::third_party_data("tokenizer-json/reference_llama_encoded.json"), &text);
    Vocab v = load_sentencepiece_model(test::third_party_data("sentencepiece/llama2.tokenizer.model"));
    Tokenizer t(v);
    std::vector<uint32_t> ids;
    t.encode(text, ids);  // <s> first, as LlamaTokenizer
    assert_ids_equal(ids, want);
}

static void models_match_sentencepiece_library(void **) {
    std::string text = sp_text();
    const char *models[2][2] = {{"sentencepiece/llama2.tokenizer.model", "tokenizer/sp_llama2_reference.json"},
                                {"sentencepiece/mistral-v0.1.tokenizer.model", "tokenizer/sp_mistral_reference.json"}};
    for (auto &m : models) {
        Vocab v = load_sentencepiece_model(test::third_party_data(m[0]));
        Tokenizer t(v);
        std::vector<uint32_t> ids;
        t.encode(text, ids, false);
        assert_ids_equal(ids, json_ids(test::test_data(m[1])));
        assert_string_equal(t.decode(ids.data(), ids.size()).c_str(), text.c_str());
    }
}

static void model_and_tokenizer_json_agree(void **) {
    std::string text = sp_text();
    Vocab a = load_sentencepiece_model(test::third_party_data("sentencepiece/llama2.tokenizer.model"));
    Vocab b = load_tokenizer_json(test::third_party_data("tokenizer-json/llama2.tokenizer.json"));
    Tokenizer ta(a), tb(b);
    std::vector<uint32_t> ia, ib;
    // sentencepiece does not treat "<s>" in text as special, HF does: compare without it
    std::string plain = text.substr(0, text.find("<s>"));
    ta.encode(plain, ia);
    tb.encode(plain, ib);
    assert_true(ia.size() > 100);
    assert_ids_equal(ia, ib);
}

static void unigram_model_reads(void **) {
    Vocab v = load_sentencepiece_model(test::third_party_data("sentencepiece/unigram-test.model"));
    assert_int_equal(v.size(), 1000);
    assert_true(v.model == Vocab::Model::UNIGRAM);
    assert_string_equal(v.pieces[100].c_str(), "I");
    assert_true(v.scores[100] < -6.30f && v.scores[100] > -6.31f);
    assert_int_equal(v.merges.size(), 0);
    std::string msg = test::expect_error(STK_E_NOT_IMPLEMENTED, [&] { Tokenizer t(v); });
    assert_contains(msg, "unigram-test.model");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama2_model_reads),
        cmocka_unit_test(mistral_model_reads),
        cmocka_unit_test(llama2_model_matches_reference),
        cmocka_unit_test(models_match_sentencepiece_library),
        cmocka_unit_test(model_and_tokenizer_json_agree),
        cmocka_unit_test(unigram_model_reads),
    };
    return cmocka_run_group_tests_name("sentencepiece", tests, nullptr, nullptr);
}
