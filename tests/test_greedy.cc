// The greedy encoder (src/tokenizer/greedy.h): the fast greedy_encode against the plain
// greedy_encode_reference on real text (GPT-2's vocabulary, tests/data/third_party), with and without the
// in-memory accelerator (attach_greedy_accel), for L_tok 1, 3, 8 and 12 (pieces over 8 bytes take
// the Dec guard); pinned ids; the residual flush at EOF; the residual id and the error without one.
#include <algorithm>

#include "core/mapped_file.h"
#include "tokenizer/fst_tables.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_greedy.h"
#include "tokenizer/vocab_io.h"

#include "test_util.h"  // last: cmocka's fail() macro

using namespace stk;

namespace {

const Vocab &gpt2() {
    static Vocab v = load_vocab_dir(test::third_party_data("gpt2/hf-dir"));
    return v;
}

std::vector<uint32_t> enc(const FstTables &t, const std::string &s, bool reference = false, GreedyStats *st = nullptr) {
    std::vector<uint32_t> ids(s.size());
    const uint8_t *p = reinterpret_cast<const uint8_t *>(s.data());
    size_t n =
        reference ? greedy_encode_reference(t, p, s.size(), ids.data(), st) : greedy_encode(t, p, s.size(), ids.data(), st);
    ids.resize(n);
    return ids;
}

std::string dec(const FstTables &t, const std::vector<uint32_t> &ids, size_t cap) {
    std::string out(cap, '\0');
    out.resize(fst_decode(t, ids.data(), ids.size(), reinterpret_cast<uint8_t *>(out.data()), cap));
    return out;
}

// Real English (the data README), every byte value, UTF-8 and digits.
std::string sample_text() {
    MappedFile f(test::third_party_data("README.md"));
    std::string s(reinterpret_cast<const char *>(f.data()), size_t(f.size()));
    for (int b = 0; b < 256; b++) s.push_back(char(b));
    s += "Gr\xc3\xbc\xc3\x9f"
         "e, \xe4\xb8\x96\xe7\x95\x8c! 1234567890 <|endoftext|>\n\n\tend";
    return s;
}

}  // namespace

static void fast_equals_reference_on_real_text(void **) {
    const std::string text = sample_text();
    assert_true(text.size() > 1000);
    for (uint32_t L : {1u, 3u, 8u, 12u}) {
        GreedyTables g(gpt2(), L);
        FstTables plain = *g.tables;  // the same tables without the accelerator
        plain.filter = nullptr;
        for (uint32_t n = 1; n <= L; n++) plain.t[n].words = nullptr;
        assert_non_null(g.tables->filter);
        GreedyStats s_ref, s_fast, s_plain;
        std::vector<uint32_t> ref = enc(*g.tables, text, true, &s_ref);
        std::vector<uint32_t> fast = enc(*g.tables, text, false, &s_fast);
        std::vector<uint32_t> slow = enc(plain, text, false, &s_plain);
        assert_int_equal(fast.size(), ref.size());
        assert_true(fast == ref);
        assert_true(slow == ref);
        assert_true(dec(*g.tables, fast, text.size()) == text);  // no residual: exact
        assert_int_equal(s_fast.residual_bytes, 0);
        assert_true(s_fast.max_probes_at <= L && s_ref.max_probes_at <= L);
        // the accelerator skips lengths that cannot match (and windows seen before): fewer probes
        assert_true(L == 1 ? s_fast.probes <= s_ref.probes : s_fast.probes < s_ref.probes);
        assert_true(s_plain.probes <= s_ref.probes);
        if (L == 1) assert_int_equal(fast.size(), text.size());
    }
}

// Texts of 1 MiB and more take the larger memo (64 KiB on the heap): same ids as the reference.
static void long_text_equals_reference(void **) {
    const std::string unit = sample_text();
    std::string text;
    for (uint32_t i = 0; text.size() < (size_t(1) << 20) + 4096; i++) text += unit + std::to_string(i * 7919u) + " ";
    GreedyTables g(gpt2(), 8);
    GreedyStats s_ref, s_fast;
    std::vector<uint32_t> ref = enc(*g.tables, text, true, &s_ref);
    std::vector<uint32_t> fast = enc(*g.tables, text, false, &s_fast);
    assert_true(ref.size() > text.size() / 8);
    assert_true(fast == ref);
    assert_true(dec(*g.tables, fast, text.size()) == text);
    assert_true(s_fast.probes < s_ref.probes / 2);  // the memo answers most repeated windows
}

static void pinned_ids(void **) {
    GreedyTables g(gpt2(), 8);
    // whole words of <= 8 bytes are one piece each ("Hello" 15496, " world" 995, "," 11, " I" 314,
    // "'m" 1101, " here" 994, "." 13)
    std::vector<uint32_t> want = {15496, 995, 11, 314, 1101, 994, 13};
    assert_true(enc(*g.tables, "Hello world, I'm here.") == want);
    // "\n\n" is one piece (628), as Sardinas-Patterson's witness for GPT-2 says
    assert_true(enc(*g.tables, "\n\n") == std::vector<uint32_t>{628});
    assert_true(enc(*g.tables, "").empty());
    // GPT-2's ids of these words (each a piece of <= 8 bytes, so greedy and BPE agree)
    want = {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13};
    assert_true(enc(*g.tables, "The quick brown fox jumps over the lazy dog.") == want);
}

static void residual_flush_at_eof(void **) {
    GreedyTables g(gpt2(), 8);
    // every prefix of a text: the last token is the longest piece that still fits
    const std::string text = "Hello world, internationalization; ";
    for (size_t n = 0; n <= text.size(); n++) {
        std::string s = text.substr(0, n);
        std::vector<uint32_t> ids = enc(*g.tables, s);
        assert_true(ids == enc(*g.tables, s, true));
        assert_true(dec(*g.tables, ids, s.size() + 1) == s);
    }
    // the text ends inside " world": " wor" (0x20 'w' 'o' 'r') is one piece of 4 bytes
    std::vector<uint32_t> ids = enc(*g.tables, "Hello wor");
    assert_int_equal(ids.size(), 2);
    assert_int_equal(ids[0], 15496);
    uint32_t len;
    g.tables->dec.piece(ids[1], &len);
    assert_int_equal(len, 4);
}

// A tiny vocabulary without the byte 'x': the residual id (unk), or the error naming the offset.
static void residual_id_and_error(void **) {
    Vocab v;
    v.model = Vocab::Model::BPE_BYTE_LEVEL;
    v.pieces = {"a", "b", "ab", "abab", "<unk>", "ba"};
    v.is_special = {0, 0, 0, 0, 1, 0};
    v.unk_id = 4;
    v.source = "tiny";
    for (int i = 0; i < 256; i++) v.byte_piece_ids[i] = -1;
    GreedyTables g(v, 4);
    GreedyStats st;
    std::vector<uint32_t> ids = enc(*g.tables, "ababxabba", false, &st);
    std::vector<uint32_t> want = {3, 4, 2, 5};  // abab, <unk> for x, ab, ba
    assert_true(ids == want);
    assert_true(enc(*g.tables, "ababxabba", true) == want);
    assert_int_equal(st.residual_bytes, 1);

    v.unk_id = -1;
    GreedyTables h(v, 4);
    std::string msg = test::expect_error(STK_E_KEY_NOT_FOUND, [&] { enc(*h.tables, "ababxab"); });
    assert_contains(msg, "0x78");
    assert_contains(msg, "offset 4");
    msg = test::expect_error(STK_E_KEY_NOT_FOUND, [&] { enc(*h.tables, "ababxab", true); });
    assert_contains(msg, "offset 4");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fast_equals_reference_on_real_text),
        cmocka_unit_test(long_text_equals_reference),
        cmocka_unit_test(pinned_ids),
        cmocka_unit_test(residual_flush_at_eof),
        cmocka_unit_test(residual_id_and_error),
    };
    return cmocka_run_group_tests_name("greedy", tests, nullptr, nullptr);
}
