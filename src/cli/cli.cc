#include "cli/cli.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stk::cli {

int exit_code_for(stk_status s) {
    switch (s) {
        case STK_OK: return kExitOk;
        case STK_E_INVALID_ARGUMENT: return kExitUsage;
        case STK_E_NOT_IMPLEMENTED: return kExitNotImplemented;
        case STK_E_IO: case STK_E_NOT_FOUND: return kExitIo;
        default: return kExitFailed;
    }
}

Args::Args(int argc, char **argv, int first) {
    for (int i = first; i < argc; i++) {
        std::string a = argv[i];
        if (a.rfind("--", 0) == 0 && a.size() > 2) {
            Opt o{a.substr(2), "", false, false};
            size_t eq = o.name.find('=');
            if (eq != std::string::npos) {
                o.value = o.name.substr(eq + 1);
                o.name = o.name.substr(0, eq);
                o.has_value = true;
            } else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) {
                o.value = argv[++i];
                o.has_value = true;
            }
            opts_.push_back(o);
        } else {
            positional_.push_back(a);
        }
    }
}

bool Args::has(const char *name) const {
    for (const Opt &o : opts_)
        if (o.name == name) return true;
    return false;
}

std::string Args::get(const char *name, const char *def) {
    std::string v = def ? def : "";
    for (Opt &o : opts_)
        if (o.name == name) {
            o.used = true;
            if (!o.has_value) errors_.push_back(std::string("--") + name + " needs a value");
            v = o.value;
        }
    return v;
}

uint32_t Args::get_u32(const char *name, uint32_t def) {
    if (!has(name)) return def;
    std::string v = get(name);
    char *end = nullptr;
    unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end || x > 0xFFFFFFFFull) {
        errors_.push_back(std::string("--") + name + " takes a whole number, not '" + v + "'");
        return def;
    }
    return uint32_t(x);
}

bool Args::flag(const char *name) {
    bool seen = false;
    for (Opt &o : opts_)
        if (o.name == name) {
            o.used = true;
            seen = true;
            if (o.has_value) {  // a boolean flag swallowed the next word: give it back
                positional_.push_back(o.value);
                o.has_value = false;
            }
        }
    return seen;
}

bool Args::finish(const char *command) {
    for (const Opt &o : opts_)
        if (!o.used) errors_.push_back("unknown option --" + o.name);
    for (const std::string &e : errors_) std::fprintf(stderr, "stk %s: %s (see stk %s --help)\n", command, e.c_str(), command);
    return errors_.empty();
}

std::string json_escape(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + "\"";
}

int report_failure(const char *command, stk_status s, bool json) {
    if (json)
        std::printf("{\"ok\": false, \"status\": %d, \"error\": %s, \"message\": %s}\n", int(s),
                    json_escape(stk_status_str(s)).c_str(), json_escape(stk_last_error()).c_str());
    std::fprintf(stderr, "stk %s: %s: %s\n", command, stk_status_str(s), stk_last_error());
    return exit_code_for(s);
}

void progress(const char *fmt, ...) {
    static const bool tty = ::isatty(2);
    if (!tty) return;
    va_list ap;
    va_start(ap, fmt);
    std::fputs("\r\033[K", stderr);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
}

}  // namespace stk::cli
