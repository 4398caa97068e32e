// Tokenizer file readers: every tokenizer file in tests/data/third_party parses with the right sizes,
// merge counts and known pieces; each kind of malformed input is refused with a status and a
// message naming the file and the line / JSON path / byte offset.
#include <sys/stat.h>

#include "test_util.h"

#include "core/mapped_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab_io.h"

using namespace stk;

static std::string g_dir;

static void gpt2_files(void **) {
    // raw UTF-8 (hf-dir/vocab.json) and \u-escaped (the official encoder.json) keys
    Vocab a = load_gpt2_vocab(test::third_party_data("gpt2/hf-dir/vocab.json"), test::third_party_data("gpt2/hf-dir/merges.txt"));
    Vocab b = load_gpt2_vocab(test::third_party_data("gpt2/encoder.json"), test::third_party_data("gpt2/vocab.bpe"));
    for (const Vocab *v : {&a, &b}) {
        assert_true(v->model == Vocab::Model::BPE_BYTE_LEVEL);
        assert_int_equal(v->size(), 50257);
        assert_int_equal(v->merges.size(), 50000);
        assert_string_equal(v->pieces[220].c_str(), " ");
        assert_string_equal(v->pieces[198].c_str(), "\n");
        assert_string_equal(v->pieces[15496].c_str(), "Hello");
        assert_string_equal(v->pieces[262].c_str(), " the");
        assert_string_equal(v->pieces[50256].c_str(), "<|endoftext|>");
        assert_int_equal(v->is_special[50256], 1);
        assert_int_equal(v->is_special[262], 0);
        // rank 0: "Ġ t" -> " t" (id 256)
        assert_int_equal(v->merges[0].first, 220);
        assert_int_equal(v->merges[0].second, 83);
        assert_int_equal(v->merge_results[0], 256);
    }
    assert_true(a.pieces == b.pieces);
    assert_true(a.merges == b.merges);
}

static void tokenizer_json_files(void **) {
    Vocab g = load_tokenizer_json(test::third_party_data("gpt2/hf-dir/tokenizer.json"));
    assert_int_equal(g.size(), 50257);
    assert_int_equal(g.merges.size(), 50000);
    assert_true(g.model == Vocab::Model::BPE_BYTE_LEVEL);

    Vocab l = load_tokenizer_json(test::third_party_data("tokenizer-json/llama2.tokenizer.json"));
    assert_true(l.model == Vocab::Model::BPE_SENTENCEPIECE);
    assert_int_equal(l.size(), 32000);
    assert_int_equal(l.merges.size(), 61249);
    assert_true(l.byte_fallback);
    assert_int_equal(l.unk_id, 0);
    assert_int_equal(l.byte_piece_ids[0], 3);
    assert_int_equal(l.byte_piece_ids[255], 258);
    assert_string_equal(l.pieces[450].c_str(), "\xE2\x96\x81The");
    assert_int_equal(l.pipeline.prefix_ids.size(), 1);
    assert_int_equal(l.pipeline.prefix_ids[0], 1);
    assert_int_equal(l.pipeline.normalizers.size(), 2);
    assert_int_equal(l.is_special[1], 1);

    // pythia: merges as [a, b] pairs, NFC normalizer, 26 added tokens (ids up to 50277)
    Vocab p = load_tokenizer_json(test::third_party_data("tokenizer-json/pythia-410m.tokenizer.json"));
    assert_true(p.model == Vocab::Model::BPE_BYTE_LEVEL);
    assert_int_equal(p.size(), 50278);
    assert_int_equal(p.merges.size(), 50009);
    assert_int_equal(p.added_tokens.size(), 26);
    assert_string_equal(p.pieces[0].c_str(), "<|endoftext|>");
    assert_int_equal(p.pieces[50254].size(), 24);  // 24 spaces
    assert_true(p.pipeline.normalizers.size() == 1 && p.pipeline.normalizers[0].kind == Vocab::NormalizerOp::NFC);

    // t5-small: Unigram, read only
    Vocab t = load_tokenizer_json(test::third_party_data("tokenizer-json/t5-small.tokenizer.json"));
    assert_true(t.model == Vocab::Model::UNIGRAM);
    assert_int_equal(t.size(), 32100);
    assert_int_equal(t.unk_id, 2);
    assert_string_equal(t.pieces[100].c_str(), "\xE2\x96\x81This");
    assert_true(t.scores[3] < -2.01f && t.scores[3] > -2.02f);
    assert_string_equal(t.pieces[32099].c_str(), "<extra_id_0>");
    assert_int_equal(t.pipeline.suffix_ids.size(), 1);
    assert_int_equal(t.pipeline.suffix_ids[0], 1);
}

static void pythia_encodes(void **) {
    // No reference file for pythia: ids checked against HF tokenizers (Node `tokenizers` 0.23,
    // bench/node) on this sentence.
    Vocab p = load_tokenizer_json(test::third_party_data("tokenizer-json/pythia-410m.tokenizer.json"));
    Tokenizer t(p);
    std::vector<uint32_t> ids;
    t.encode("Hello world, caf\xC3\xA9!", ids);
    std::vector<uint32_t> want = {12092, 1533, 13, 36241, 2};
    assert_true(ids == want);
}

static void directory_picking(void **) {
    Vocab v = load_vocab_dir(test::third_party_data("gpt2/hf-dir"));
    assert_contains(v.source, "tokenizer.json");
    std::string d = g_dir + "/only-model";
    assert_int_equal(mkdir(d.c_str(), 0755), 0);
    std::string msg = test::expect_error(STK_E_NOT_FOUND, [&] { load_vocab_dir(d); });
    assert_contains(msg, "only-model");
    std::vector<uint8_t> sp = test::read_bytes(test::third_party_data("sentencepiece/llama2.tokenizer.model"));
    test::write_bytes(d + "/tokenizer.model", sp);
    Vocab s = load_vocab_dir(d);
    assert_int_equal(s.size(), 32000);
}

// --- malformed inputs ---------------------------------------------------------------------

static Vocab gpt2_from(const std::string &vocab, const std::string &merges) {
    return parse_gpt2_vocab(vocab, merges, "v.json", "m.txt");
}

static void gpt2_malformed(void **) {
    std::string msg;
    msg = test::expect_error(STK_E_BAD_JSON, [] { gpt2_from("{\"a\": 0,", ""); });
    assert_contains(msg, "v.json");
    msg = test::expect_error(STK_E_BAD_JSON, [] { gpt2_from("{\"a\": -1}", ""); });
    assert_contains(msg, "'a'");
    msg = test::expect_error(STK_E_BAD_JSON, [] { gpt2_from("{\"a\": \"0\"}", ""); });
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{\"a b\": 0}", ""); });  // ' ' is spelled Ġ
    assert_contains(msg, "byte-level");
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{\"a\": 0, \"b\": 2}", ""); });
    assert_contains(msg, "without gaps");
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{\"a\": 0, \"b\": 0}", ""); });
    assert_contains(msg, "id 0 is given to two different tokens");
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{\"a\": 0, \"b\": 1, \"ab\": 2}", "#version: 0.2\na b c\n"); });
    assert_contains(msg, "m.txt: line 2");
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{\"a\": 0, \"b\": 1, \"ab\": 2}", "a b\na x\n"); });
    assert_contains(msg, "m.txt line 2");
    assert_contains(msg, "'x' is not in the vocabulary");
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{\"a\": 0, \"b\": 1}", "a b\n"); });
    assert_contains(msg, "'ab', which is not in the vocabulary");
    msg = test::expect_error(STK_E_CORRUPT, [] { gpt2_from("{}", ""); });
    assert_contains(msg, "empty");
    // well-formed small vocabulary, CRLF merges
    Vocab v = gpt2_from("{\"a\": 0, \"b\": 1, \"ab\": 2}", "#version: 0.2\r\na b\r\n");
    assert_int_equal(v.merges.size(), 1);
    assert_int_equal(v.merge_results[0], 2);
    // a byte without a token (and no <unk>) is refused when it occurs, naming the byte
    Tokenizer t(v);
    std::vector<uint32_t> ids;
    t.encode("abba", ids);
    std::vector<uint32_t> want = {2, 1, 0};
    assert_true(ids == want);
    msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { t.encode("abc", ids); });
    assert_contains(msg, "byte 0x63");
}

static Vocab tj(const std::string &s) {
    return parse_tokenizer_json(reinterpret_cast<const uint8_t *>(s.data()), s.size(), "t.json");
}

static void tokenizer_json_malformed(void **) {
    std::string msg;
    msg = test::expect_error(STK_E_BAD_JSON, [] { tj("[1,2"); });
    assert_contains(msg, "t.json: not valid JSON");
    msg = test::expect_error(STK_E_BAD_JSON, [] { tj("{}"); });
    assert_contains(msg, "/model");
    msg = test::expect_error(STK_E_UNSUPPORTED, [] { tj(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})"); });
    assert_contains(msg, "WordPiece");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        tj(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", ["a"]]}})");
    });
    assert_contains(msg, "/model/merges/1");
    msg = test::expect_error(STK_E_CORRUPT,
                             [] { tj(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a  b"]}})"); });
    assert_contains(msg, "/model/merges/0");
    msg = test::expect_error(STK_E_BAD_JSON, [] {
        tj(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"id": 1}]})");
    });
    assert_contains(msg, "/added_tokens/0");
    msg = test::expect_error(STK_E_BAD_JSON, [] { tj(R"({"model": {"type": "Unigram", "vocab": [["a", 0.5], ["b"]]}})"); });
    assert_contains(msg, "/model/vocab/1");
    // read, but encoding refused with the reason
    Vocab v = tj(
        R"({"normalizer": {"type": "Lowercase"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
    assert_int_equal(v.size(), 3);
    msg = test::expect_error(STK_E_UNSUPPORTED, [&] { Tokenizer t(v); });
    assert_contains(msg, "normalizer Lowercase is not supported");
    // a tiny SentencePiece-style BPE that does encode: Metaspace, merges as pairs
    Vocab m = tj(R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
                    "model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4, "ab": 5, "\u2581ab": 6},
                              "merges": [["a", "b"], ["\u2581", "ab"], ["\u2581", "a"]]}})");
    Tokenizer t(m);
    std::vector<uint32_t> ids;
    t.encode("ab a abc", ids);
    std::vector<uint32_t> want = {6, 4, 6, 0};  // "▁ab" "▁a" "▁ab" <unk>
    assert_true(ids == want);
}

static std::vector<uint8_t> sp_bytes() {
    return test::read_bytes(test::third_party_data("sentencepiece/llama2.tokenizer.model"));
}
static Vocab spm(const std::vector<uint8_t> &b) { return parse_sentencepiece_model(b.data(), b.size(), "x.model"); }

static void sentencepiece_malformed(void **) {
    std::vector<uint8_t> good = sp_bytes();
    std::string msg;
    // truncated in the middle of a piece: the message names the offset
    std::vector<uint8_t> cut(good.begin(), good.begin() + 1001);
    msg = test::expect_error(STK_E_TRUNCATED, [&] { spm(cut); });
    assert_contains(msg, "x.model: byte offset");
    msg = test::expect_error(STK_E_CORRUPT, [] { spm({}); });
    assert_contains(msg, "no pieces");
    msg = test::expect_error(STK_E_CORRUPT, [] { spm({0x0B}); });  // wire type 3 (group)
    assert_contains(msg, "wire type 3");
    msg = test::expect_error(STK_E_CORRUPT, [] {
        spm({0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01});
    });
    assert_contains(msg, "byte offset");
    // a piece with wire type 0 where a message is expected
    msg = test::expect_error(STK_E_CORRUPT, [] { spm({0x08, 0x01}); });
    assert_contains(msg, "SentencePiece (field 1) has wire type 0");
    // piece type 9
    msg = test::expect_error(STK_E_CORRUPT, [] { spm({0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x09}); });
    assert_contains(msg, "unknown type 9");
    // a BYTE piece that is not <0xNN>
    msg = test::expect_error(STK_E_CORRUPT, [] { spm({0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x06}); });
    assert_contains(msg, "not <0xNN>");
    // length beyond the message
    msg = test::expect_error(STK_E_TRUNCATED, [] { spm({0x0A, 0x7F, 0x0A}); });
    assert_contains(msg, "byte offset 0: field 1 claims 127 bytes");
    // a minimal valid model: one normal piece, unk_id = -1 / bos_id = -1 / eos_id = -1
    Vocab v = spm({0x0A, 0x05, 0x0A, 0x01, 'a',  0x18, 0x01, 0x12, 0x26, 0x18, 0x02, 0xC0, 0x02, 0xFF, 0xFF, 0xFF,
                   0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0xC8, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                   0xFF, 0xFF, 0x01, 0xD0, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01});
    assert_int_equal(v.size(), 1);
    assert_int_equal(v.unk_id, -1);
    assert_true(v.model == Vocab::Model::BPE_SENTENCEPIECE);
    // unk_id beyond the pieces
    msg = test::expect_error(STK_E_CORRUPT, [] { spm({0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x01, 0x12, 0x03, 0xC0, 0x02, 0x05}); });
    assert_contains(msg, "unk_id = 5");
}

int main() {
    g_dir = test::make_temp_dir("vocab");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_files),
        cmocka_unit_test(tokenizer_json_files),
        cmocka_unit_test(pythia_encodes),
        cmocka_unit_test(directory_picking),
        cmocka_unit_test(gpt2_malformed),
        cmocka_unit_test(tokenizer_json_malformed),
        cmocka_unit_test(sentencepiece_malformed),
    };
    return cmocka_run_group_tests_name("vocab", tests, nullptr, nullptr);
}
