// core: checksums against published vectors, checked arithmetic, arena bounds, PRNG.
#include "test_util.h"

#include <vector>

#include "core/arena.h"
#include "core/checked.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/prng.h"

using namespace stk;

static void crc32c_known_vectors(void **) {
    // RFC 3720 B.4 and the common check value.
    assert_int_equal(crc32c("123456789", 9), 0xE3069283u);
    uint8_t zeros[32] = {0};
    assert_int_equal(crc32c(zeros, 32), 0x8A9136AAu);
    uint8_t ones[32];
    memset(ones, 0xFF, 32);
    assert_int_equal(crc32c(ones, 32), 0x62A8AB43u);
    assert_int_equal(crc32c("", 0), 0u);
    // Incremental equals one-shot.
    assert_int_equal(crc32c("6789", 4, crc32c("12345", 5)), 0xE3069283u);
}

static void sha256_known_vectors(void **) {
    // FIPS 180-2 "abc": ba7816bf 8f01cfea ...
    Sha256Digest d = sha256("abc", 3);
    assert_int_equal(d.bytes[0], 0xba);
    assert_int_equal(d.bytes[31], 0xad);
    assert_true(d.low64() == 0xeacf018fbf1678baull);
    PayloadSums s = payload_sums("abc", 3);
    assert_true(s.sha256_low64 == 0xeacf018fbf1678baull);
    assert_int_equal(s.crc32c, crc32c("abc", 3));
}

static void checked_arithmetic(void **) {
    assert_true(checked_mul(1ull << 31, 1ull << 32, "x") == 1ull << 63);
    std::string m = test::expect_error(STK_E_DIMS_OVERFLOW, [] { checked_mul(1ull << 32, 1ull << 32, "dims of T"); });
    assert_contains(m, "dims of T");
    test::expect_error(STK_E_DIMS_OVERFLOW, [] { checked_add(~0ull, 1, "len"); });
}

static void arena_bounds(void **) {
    alignas(64) static unsigned char buf[256];
    Arena a(buf, sizeof buf);
    void *p = a.alloc(100, 64);
    assert_true(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    assert_int_equal(a.used(), 100);
    a.alloc(28, 64);  // 128..156
    test::expect_error(STK_E_ARENA_TOO_SMALL, [&] { a.alloc(101, 64); });
    size_t m = a.mark();
    a.alloc(100, 1);
    a.reset(m);
    assert_int_equal(a.used(), m);
}

static void splitmix64_reference(void **) {
    // Reference stream of splitmix64 seeded with 0 (Vigna's splitmix64.c).
    uint64_t s = 0;
    assert_true(splitmix64_next(&s) == 0xE220A8397B1DCDAFull);
    assert_true(splitmix64_next(&s) == 0x6E789E6AA1B965F4ull);
    assert_true(splitmix64_next(&s) == 0x06C45D188009454Full);
}

// escape_bytes: what a message quotes from an input file, one line, every byte readable.
static void escape_bytes_quotes_input(void **) {
    using namespace std::string_literals;
    assert_string_equal(escape_bytes("general.architecture").c_str(), "general.architecture");
    assert_string_equal(escape_bytes("a\x0c\0\0\0b\x7f\\"s).c_str(), "a\\x0c\\x00\\x00\\x00b\\x7f\\\\");
    // Well-formed UTF-8 stays (U+0120 as GPT-2 stores a space, U+2581, U+1F600); C1 controls,
    // overlong forms, surrogates, a cut sequence and stray bytes are escaped.
    assert_string_equal(escape_bytes("\xc4\xa0the \xe2\x96\x81x \xf0\x9f\x98\x80").c_str(), "\xc4\xa0the \xe2\x96\x81x \xf0\x9f\x98\x80");
    assert_string_equal(escape_bytes("\xc2\x85|\xc0\xaf|\xed\xa0\x80|\xe2\x96|\xff").c_str(),
                        "\\xc2\\x85|\\xc0\\xaf|\\xed\\xa0\\x80|\\xe2\\x96|\\xff");
    assert_string_equal(escape_bytes("abcdef", 3).c_str(), "abc...");
    assert_string_equal(escape_bytes("ab\xe2\x96\x81", 3).c_str(), "ab\\xe2...");  // a sequence cut by the bound
}

// payload_sums with a window: the same sums as without, and done() told every byte once, in order,
// in pieces of at least the window (the last may be shorter).
static void payload_sums_windows(void **) {
    std::vector<uint8_t> b(3 * 256 * 1024 + 1000);
    for (size_t i = 0; i < b.size(); i++) b[i] = uint8_t(i * 131 + (i >> 9));
    const PayloadSums whole = payload_sums(b.data(), b.size());
    for (size_t window : {size_t(1), size_t(256 * 1024), size_t(600 * 1024), size_t(1) << 30}) {
        size_t next = 0, calls = 0;
        PayloadSums s = payload_sums(b.data(), b.size(), window, [&](size_t off, size_t len) {
            assert_int_equal(off, next);
            assert_true(len >= window || off + len == b.size());
            next = off + len;
            calls++;
        });
        assert_int_equal(s.crc32c, whole.crc32c);
        assert_true(s.sha256_low64 == whole.sha256_low64);
        assert_int_equal(next, b.size());
        assert_int_equal(calls, window == 1 ? 4u : window == 256 * 1024 ? 4u : window == 600 * 1024 ? 2u : 1u);
    }
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32c_known_vectors), cmocka_unit_test(sha256_known_vectors), cmocka_unit_test(checked_arithmetic),
        cmocka_unit_test(arena_bounds),         cmocka_unit_test(splitmix64_reference), cmocka_unit_test(escape_bytes_quotes_input),
        cmocka_unit_test(payload_sums_windows),
    };
    return cmocka_run_group_tests_name("core", tests, nullptr, nullptr);
}
