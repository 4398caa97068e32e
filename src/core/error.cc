#include "core/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace stk {

std::string vformat(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    char small[256];
    int n = std::vsnprintf(small, sizeof small, fmt, copy);
    va_end(copy);
    if (n < 0) return std::string(fmt);
    if (static_cast<size_t>(n) < sizeof small) return std::string(small, static_cast<size_t>(n));
    std::string out(static_cast<size_t>(n), '\0');
    std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
    return out;
}

std::string format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

void throw_error(stk_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    throw Error(status, std::move(s));
}

void throw_at(stk_status status, const std::string &file, uint64_t offset, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string m = vformat(fmt, ap);
    va_end(ap);
    throw Error(status, format("%s: offset %llu: %s", file.c_str(), (unsigned long long)offset, m.c_str()), offset);
}

void fail_errno(const std::string &what) {
    int e = errno;
    throw Error(e == ENOENT ? STK_E_NOT_FOUND : STK_E_IO, what + ": " + std::strerror(e));
}

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string &message) { t_last_error = message; }
const char *last_error() { return t_last_error.c_str(); }

}  // namespace stk
