// Errors inside libstk: an exception that carries a pinned stk_status and a message naming
// the file / tensor / offset.  The C API (src/api) catches it and turns it into the status plus
// stk_last_error().  Nothing else in the library prints or aborts.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "stk/stk.h"

namespace stk {

class Error : public std::runtime_error {
public:
    static constexpr uint64_t kNoOffset = ~0ull;
    Error(stk_status status, std::string message, uint64_t offset = kNoOffset)
        : std::runtime_error(std::move(message)), status_(status), offset_(offset) {}
    stk_status status() const noexcept { return status_; }
    // The byte offset inside the file named first in the message, where the reader knows it
    // (verification reports it as stk_verify_report.failed_offset).
    bool has_offset() const noexcept { return offset_ != kNoOffset; }
    uint64_t offset() const noexcept { return offset_; }

private:
    stk_status status_;
    uint64_t offset_;
};

// printf-style formatting into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vformat(const char *fmt, va_list ap);

// Bytes from an input file (a name, a key, a token) made fit to quote in a one-line message: printable
// ASCII and well-formed UTF-8 (code points from U+00A0) as they are, a backslash as "\\", every
// other byte (controls, DEL, C1 controls, bytes of malformed UTF-8) as "\xNN"; at most max_bytes
// input bytes, then "...".  Every message that quotes input bytes goes through it.
std::string escape_bytes(std::string_view s, size_t max_bytes = 200);

// Throw stk::Error(status, formatted message).  (Not "fail": cmocka owns that macro.)
[[noreturn]] void throw_error(stk_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Throw stk::Error(status, "<file>: offset <offset>: <formatted message>") that carries the offset.
[[noreturn]] void throw_at(stk_status status, const std::string &file, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Throw STK_E_IO with strerror(errno) appended.
[[noreturn]] void fail_errno(const std::string &what);

// The calling thread's last error message (what stk_last_error returns).
void set_last_error(const std::string &message);
const char *last_error();

// Run fn; map stk::Error / std::bad_alloc / anything else to a status and the thread's message.
template <class Fn>
stk_status guard(Fn &&fn) noexcept {
    try {
        set_last_error(std::string());
        fn();
        return STK_OK;
    } catch (const Error &e) {
        set_last_error(e.what());
        return e.status();
    } catch (const std::bad_alloc &) {
        set_last_error("out of memory");
        return STK_E_NOMEM;
    } catch (const std::exception &e) {
        set_last_error(std::string("internal error: ") + e.what());
        return STK_E_INTERNAL;
    } catch (...) {
        set_last_error("internal error: unknown exception");
        return STK_E_INTERNAL;
    }
}

}  // namespace stk
