// Small text helpers of the CLI's own (printf into a string, fixed-width hex): what the
// commands print, so they live here rather than in the library.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

namespace stk::cli {

inline std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string strf(const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string s(n > 0 ? size_t(n) : 0, '\0');
    if (n > 0) std::vsnprintf(s.data(), size_t(n) + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

inline std::string hex8(uint32_t v) { return strf("%08x", v); }
inline std::string hex16(uint64_t v) { return strf("%016llx", (unsigned long long)v); }
// Lower-case hex of a digest's bytes.
inline std::string hex_digest(const uint8_t *d, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string s(2 * n, '0');
    for (size_t i = 0; i < n; i++) {
        s[2 * i] = digits[d[i] >> 4];
        s[2 * i + 1] = digits[d[i] & 15];
    }
    return s;
}

}  // namespace stk::cli
