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

std::string escape_bytes(std::string_view s, size_t max_bytes) {
    std::string out;
    const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
    for (size_t i = 0; i < n;) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7F) {
            out += c == '\\' ? "\\\\" : std::string(1, char(c));
            i++;
            continue;
        }
        // A well-formed UTF-8 sequence (shortest form, no surrogate, at most U+10FFFF), kept
        // whole unless it is a C1 control (U+0080..U+009F).
        size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        bool ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) {
            const unsigned char b = static_cast<unsigned char>(s[i + k]);
            ok = (b & 0xC0) == 0x80;
            cp = cp << 6 | (b & 0x3F);
        }
        ok = ok && cp >= 0xA0 && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
             !(cp >= 0xD800 && cp <= 0xDFFF);
        if (ok) {
            out.append(s.data() + i, len);
            i += len;
            continue;
        }
        out += format("\\x%02x", c);
        i++;
    }
    if (s.size() > max_bytes) out += "...";
    return out;
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
