// Shared helpers of the cmocka test programs.
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
extern "C" {
#include <cmocka.h>
}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace stk::test {

// tests/data/third_party (real files written by other projects; provenance and licences in its
// README.md) and tests/data (our generated fixtures).
inline std::string third_party_data(const std::string &rel) {
    const char *d = std::getenv("STK_THIRD_PARTY_DATA");
    return std::string(d ? d : "tests/data/third_party") + "/" + rel;
}
inline std::string test_data(const std::string &rel) {
    const char *d = std::getenv("STK_TEST_DATA");
    return std::string(d ? d : "tests/data") + "/" + rel;
}

// A fresh empty directory under $TMPDIR, removed with everything in it when the test process
// exits (set STK_KEEP_TEST_DIRS=1 to keep them for debugging).
std::string make_temp_dir(const char *tag);
void write_bytes(const std::string &path, const std::vector<uint8_t> &bytes);
std::vector<uint8_t> read_bytes(const std::string &path);

// The built stk ($STK_BIN, set by meson test) run with args (no shell, stdin /dev/null), stdout and
// stderr captured apart.
struct StkRun {
    int exit_code = -1;  // -1: killed by a signal
    std::string out, err;
};
StkRun run_stk(const std::vector<std::string> &args);

// Runs fn, which must throw stk::Error with `status`; returns the message (for substring checks).
inline std::string expect_error(stk_status status, const std::function<void()> &fn) {
    try {
        fn();
    } catch (const stk::Error &e) {
        if (e.status() != status) {
            print_error("expected %s, got %s: %s\n", stk_status_str(status), stk_status_str(e.status()), e.what());
            fail();
        }
        return e.what();
    }
    print_error("expected %s, nothing was thrown\n", stk_status_str(status));
    fail();
    return {};
}

// Asserts that haystack contains needle, printing both otherwise.
#define assert_contains(haystack, needle)                                                   \
  do {                                                                                      \
    std::string h_ = (haystack);                                                            \
    if (h_.find(needle) == std::string::npos) {                                             \
      print_error("'%s' does not contain '%s'\n", h_.c_str(), std::string(needle).c_str()); \
      fail();                                                                               \
    }                                                                                       \
  } while (0)

}  // namespace stk::test
