// Sardinas-Patterson: the minimal witness of small codes (values, parses, digests), a prefix
// code and a suffix code certified, the real GPT-2 vocabulary rejected with a 2-byte witness,
// and the work cap giving UNDECIDED.
#include "gpt2_pieces.h"  // simdjson before cmocka's `fail` macro
#include "test_util.h"

#include "core/checksum.h"
#include "tokenizer/sardinas_patterson.h"

using namespace stk;

struct Code {
    std::vector<uint8_t> blob;
    std::vector<uint64_t> off{0};
    std::vector<std::string> words;
    explicit Code(const std::vector<std::string> &w) : words(w) {
        for (const std::string &s : w) {
            blob.insert(blob.end(), s.begin(), s.end());
            off.push_back(blob.size());
        }
    }
};

struct Run {
    std::vector<uint8_t> mem;
    Arena arena;
    SpResult r;
    Run(const Code &c, uint64_t cap = kSpDefaultWorkCap)
        : mem(sp_arena_size(c.words.size(), c.blob.size(), cap)), arena(mem.data(), mem.size()) {
        r = sardinas_patterson(c.blob.data(), c.off.data(), uint32_t(c.words.size()), arena, cap);
    }
    std::string witness() const { return std::string(reinterpret_cast<const char *>(r.witness), r.witness_len); }
    std::string spell(const uint32_t *ids, uint32_t n, const Code &c) const {
        std::string s;
        for (uint32_t i = 0; i < n; i++) s += c.words[ids[i]];
        return s;
    }
};

static std::string hex(const Sha256Digest &d) {
    static const char *x = "0123456789abcdef";
    std::string s;
    for (uint8_t b : d.bytes) s += x[b >> 4], s += x[b & 15];
    return s;
}

static void witness_a_b_ab(void **) {
    Code c({"a", "b", "ab"});
    Run run(c);
    assert_int_equal(run.r.verdict, SpResult::AMBIGUOUS);
    assert_string_equal(run.witness().c_str(), "ab");
    // [ab] and [a][b]
    assert_int_equal(run.r.n_a, 1);
    assert_int_equal(run.r.parse_a[0], 2);
    assert_int_equal(run.r.n_b, 2);
    assert_int_equal(run.r.parse_b[0], 0);
    assert_int_equal(run.r.parse_b[1], 1);
    // sp_cert_digest = SHA-256(01 'a' 'b')
    const uint8_t rec[3] = {1, 'a', 'b'};
    assert_memory_equal(run.r.digest.bytes, sha256(rec, 3).bytes, 32);
    assert_string_equal(hex(run.r.digest).c_str(), "170404e05440f45062c423052d5adcfb2c9d546ecfcb2022d6c34af474dbaf18");
}

static void witness_needs_two_rounds(void **) {
    // "aba" = [a][ba] = [ab][a]: no codeword is a proper prefix of a one-step tail; the dangling
    // suffix "b" must be carried one round.
    Code c({"a", "ab", "ba"});
    Run run(c);
    assert_int_equal(run.r.verdict, SpResult::AMBIGUOUS);
    assert_string_equal(run.witness().c_str(), "aba");
    assert_string_equal(run.spell(run.r.parse_a, run.r.n_a, c).c_str(), "aba");
    assert_string_equal(run.spell(run.r.parse_b, run.r.n_b, c).c_str(), "aba");
    assert_int_equal(run.r.n_a + run.r.n_b, 4);
    // A shortest witness, not the first found: {0, 01, 10}... "010" = [0][10] = [01][0].
    Code d({"01", "10", "0", "11011", "1101"});
    Run rd(d);
    assert_int_equal(rd.r.verdict, SpResult::AMBIGUOUS);
    assert_int_equal(rd.r.witness_len, 3);
    assert_string_equal(rd.witness().c_str(), "010");
}

static void prefix_and_suffix_codes_certified(void **) {
    Code c({"0", "10", "11"});
    Run run(c);
    assert_int_equal(run.r.verdict, SpResult::UNIQUELY_DECODABLE);
    const uint8_t zero = 0;
    assert_memory_equal(run.r.digest.bytes, sha256(&zero, 1).bytes, 32);
    assert_int_equal(run.r.witness_len, 0);
    assert_string_equal(hex(run.r.digest).c_str(), "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
    // {0, 01, 11}: not a prefix code, but a suffix code, hence uniquely decodable; SP must visit
    // the dangling suffixes "1", and the cycle "1" -> "1" ends without epsilon.
    Code s({"0", "01", "11"});
    Run rs(s);
    assert_int_equal(rs.r.verdict, SpResult::UNIQUELY_DECODABLE);
    assert_true(rs.r.states >= 1);
}

static void duplicates_are_ambiguous(void **) {
    Code c({"xyz", "q", "xyz"});
    Run run(c);
    assert_int_equal(run.r.verdict, SpResult::AMBIGUOUS);
    assert_string_equal(run.witness().c_str(), "xyz");
    assert_int_equal(run.r.n_a, 1);
    assert_int_equal(run.r.n_b, 1);
    assert_true(run.r.parse_a[0] != run.r.parse_b[0]);
}

static void gpt2_rejected_with_two_byte_witness(void **) {
    std::vector<std::string> pieces = test::gpt2_pieces();
    std::vector<std::string> upto8;
    for (const std::string &p : pieces)
        if (p.size() <= 8) upto8.push_back(p);
    Code c(upto8);
    Run run(c);
    assert_int_equal(run.r.verdict, SpResult::AMBIGUOUS);
    assert_int_equal(run.r.witness_len, 2);
    // Both parses spell it; one is the 2-byte token, the other its two single bytes.
    assert_string_equal(run.spell(run.r.parse_a, run.r.n_a, c).c_str(), run.witness().c_str());
    assert_string_equal(run.spell(run.r.parse_b, run.r.n_b, c).c_str(), run.witness().c_str());
    assert_int_equal(run.r.n_a, 1);
    assert_int_equal(run.r.n_b, 2);
    // Deterministic: the first 2-byte piece in bytewise order is "\n\n" (GPT-2 id 628).
    assert_string_equal(run.witness().c_str(), "\n\n");
    assert_string_equal(hex(run.r.digest).c_str(), "378aaa1244040f6d17819741242426799e721759cd935cf1676f7ab9c946a4e7");
}

static void work_cap_undecided(void **) {
    Code c({"0", "01", "11"});
    Run run(c, 1);
    assert_int_equal(run.r.verdict, SpResult::UNDECIDED);
    const uint8_t two = 2;
    assert_memory_equal(run.r.digest.bytes, sha256(&two, 1).bytes, 32);
    test::expect_error(STK_E_INVALID_ARGUMENT, [] {
        Code e({"a", ""});
        Run r(e);
    });
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(witness_a_b_ab),
        cmocka_unit_test(witness_needs_two_rounds),
        cmocka_unit_test(prefix_and_suffix_codes_certified),
        cmocka_unit_test(duplicates_are_ambiguous),
        cmocka_unit_test(gpt2_rejected_with_two_byte_witness),
        cmocka_unit_test(work_cap_undecided),
    };
    return cmocka_run_group_tests_name("sp", tests, nullptr, nullptr);
}
