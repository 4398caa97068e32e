#include "cli/cli.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
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
        case STK_E_IO:
        case STK_E_NOT_FOUND: return kExitIo;
        default: return kExitFailed;
    }
}

const char *error_kind(int exit_code) {
    switch (exit_code) {
        case kExitOk: return nullptr;
        case kExitUsage: return "usage";
        case kExitNotImplemented: return "not_implemented";
        case kExitVerifyFailed: return "verify_failed";
        case kExitIo: return "io";
        default: return exit_code >= 128 ? "interrupted" : "failed";  // 128 + a signal (src/cli/cleanup.h)
    }
}

// ---- arguments ---------------------------------------------------------------------------

// Case, '-' and '_' do not matter: --Ltok, --ltok, --L_tok and --l-tok are one option.
static std::string normalize(const std::string &name) {
    std::string n;
    for (char c : name)
        if (c != '_' && c != '-') n += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return n;
}

// "--name" or "--name=value" -> normalized name; "" for anything else.
static std::string option_name(const std::string &tok) {
    if (tok.size() < 3 || tok.compare(0, 2, "--") != 0) return "";
    return normalize(tok.substr(2, tok.find('=') == std::string::npos ? std::string::npos : tok.find('=') - 2));
}

Args::Args(int argc, char **argv, int first) {
    for (int i = first; i < argc; i++) tokens_.push_back(argv[i]);
    consumed_.assign(tokens_.size(), false);
    json_ = find("json", 0) >= 0;
}

int Args::find(const char *name, size_t from) const {
    std::string want = normalize(name);
    for (size_t i = from; i < tokens_.size(); i++)
        if (!consumed_[i] && (option_name(tokens_[i]) == want || (want == "help" && tokens_[i] == "-h"))) return int(i);
    return -1;
}

bool Args::has(const char *name) const {
    std::string want = normalize(name);
    for (const std::string &t : tokens_)
        if (option_name(t) == want) return true;
    return false;
}

std::string Args::get(const char *name, const char *def) {
    std::string v = def ? def : "";
    int seen = 0;
    for (int i = find(name, 0); i >= 0; i = find(name, size_t(i) + 1)) {
        const std::string &t = tokens_[size_t(i)];
        consumed_[size_t(i)] = true;
        if (++seen == 2) errors_.push_back(std::string("--") + name + " is given more than once");
        size_t eq = t.find('=');
        if (eq != std::string::npos) {
            v = t.substr(eq + 1);
        } else if (size_t(i) + 1 < tokens_.size() && !consumed_[size_t(i) + 1]) {
            v = tokens_[size_t(i) + 1];
            consumed_[size_t(i) + 1] = true;
        } else {
            errors_.push_back(std::string("--") + name + " needs a value");
        }
    }
    return v;
}

uint32_t Args::get_u32(const char *name, uint32_t def) {
    if (!has(name)) return def;
    std::string v = get(name);
    char *end = nullptr;
    unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || *end || x > 0xFFFFFFFFull) {
        errors_.push_back(std::string("--") + name + " takes a whole number, not '" + v + "'");
        return def;
    }
    return uint32_t(x);
}

uint32_t Args::get_count(const char *name, uint32_t max) {
    if (!has(name)) return 0;
    std::string v = get(name);
    char *end = nullptr;
    unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] < '0' || v[0] > '9' || *end || x == 0 || x > max) {
        errors_.push_back(format("--%s takes 1..%u, not '%s'", name, max, v.c_str()));
        return 0;
    }
    return uint32_t(x);
}

bool Args::flag(const char *name) {
    bool seen = false;
    for (int i = find(name, 0); i >= 0; i = find(name, size_t(i) + 1)) {
        consumed_[size_t(i)] = true;
        seen = true;
        if (tokens_[size_t(i)].find('=') != std::string::npos) errors_.push_back(std::string("--") + name + " takes no value");
    }
    return seen;
}

bool Args::finish(const char *command, size_t max_positional) {
    for (size_t i = 0; i < tokens_.size(); i++) {
        if (consumed_[i]) continue;
        const std::string &t = tokens_[i];
        if (t.size() > 1 && t[0] == '-') {
            errors_.push_back("unknown option " + t);
        } else if (positional_.size() < max_positional) {
            positional_.push_back(t);
        } else {
            errors_.push_back("unexpected argument '" + t + "'");
        }
    }
    if (errors_.empty()) return true;
    std::string all;
    for (const std::string &e : errors_) all += (all.empty() ? "" : "; ") + e;
    report_usage(command, all, json_);
    return false;
}

// ---- JSON ----------------------------------------------------------------------------------

// Length of the valid UTF-8 sequence at s[i], 0 if the byte there does not start one.
static size_t utf8_len(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + len > n) return 0;
    if (s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
    return len;
}

std::string json_escape(const std::string &str) {
    const unsigned char *s = reinterpret_cast<const unsigned char *>(str.data());
    size_t n = str.size();
    std::string out = "\"";
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = utf8_len(s, n, i);
        if (len == 0) {
            out += "\\ufffd";
            i++;
            continue;
        }
        if (len > 1) {
            out.append(reinterpret_cast<const char *>(s + i), len);
            i += len;
            continue;
        }
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
        i++;
    }
    return out + "\"";
}

namespace {
const char *const kPolicyNames[] = {"window", "tova", "h2o", "tova-head"};  // STK_SEQ_POLICY_* order
static_assert(STK_SEQ_POLICY_TOVA_HEAD + 1 == sizeof kPolicyNames / sizeof *kPolicyNames, "every policy named");
}  // namespace

bool policy_number(const std::string &name, uint32_t *out) {
    for (uint32_t i = 0; i < sizeof kPolicyNames / sizeof *kPolicyNames; i++)
        if (name == kPolicyNames[i]) {
            *out = i;
            return true;
        }
    return false;
}

const char *policy_label(uint32_t policy) {
    return policy < sizeof kPolicyNames / sizeof *kPolicyNames ? kPolicyNames[policy] : "?";
}

const char *ffn_dtype_label(uint32_t dtype) { return dtype == 5 ? "int8" : stk_dtype_name(dtype); }

std::string hex_bytes(const std::string &s) {
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
    return out;
}

std::string hex_hash(const uint8_t h[32]) { return hex_bytes(std::string(reinterpret_cast<const char *>(h), 32)); }

std::string format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list again;
    va_copy(again, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string out(n > 0 ? size_t(n) : 0, '\0');
    if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, again);
    va_end(again);
    return out;
}

void Json::key(const char *k) {
    if (!body_.empty()) body_ += ", ";
    body_ += json_escape(k) + ": ";
}
Json &Json::str(const char *k, const std::string &v) {
    key(k);
    body_ += json_escape(v);
    return *this;
}
Json &Json::str_or_null(const char *k, const char *v) {
    key(k);
    body_ += v && *v ? json_escape(v) : "null";
    return *this;
}
Json &Json::num(const char *k, long long v) {
    key(k);
    body_ += std::to_string(v);
    return *this;
}
Json &Json::unum(const char *k, unsigned long long v) {
    key(k);
    body_ += std::to_string(v);
    return *this;
}
Json &Json::real(const char *k, double v) {
    key(k);
    if (!std::isfinite(v)) {
        body_ += "null";
        return *this;
    }
    char buf[40];
    auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as v
    body_.append(buf, r.ptr);
    return *this;
}
Json &Json::boolean(const char *k, bool v) {
    key(k);
    body_ += v ? "true" : "false";
    return *this;
}
Json &Json::null(const char *k) {
    key(k);
    body_ += "null";
    return *this;
}
Json &Json::raw(const char *k, const std::string &json) {
    key(k);
    body_ += json;
    return *this;
}
void Json::print() const {
    std::string t = text() + "\n";
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
}

std::string json_array(const std::vector<std::string> &items) {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); i++) s += (i ? ", " : "") + items[i];
    return s + "]";
}

// "STK_E_NOT_FOUND: file not found" -> "STK_E_NOT_FOUND".
static std::string status_name(stk_status s) {
    std::string t = stk_status_str(s);
    size_t colon = t.find(':');
    return colon == std::string::npos ? t : t.substr(0, colon);
}

Json json_result(const char *command, int exit_code, stk_status status, const std::string &message) {
    Json j;
    j.str("command", command)
        .boolean("ok", exit_code == kExitOk)
        .num("exit_code", exit_code)
        .str("status", status_name(status))
        .num("status_code", int(status))
        .str_or_null("error", error_kind(exit_code))
        .str("message", message);
    return j;
}

int report_failure(const char *command, stk_status s, bool json) {
    int code = exit_code_for(s);
    std::string msg = stk_last_error();
    if (json) json_result(command, code, s, msg).print();
    std::fprintf(stderr, "stk %s: %s: %s\n", command, stk_status_str(s), msg.c_str());
    return code;
}

int report_error(const char *command, stk_status s, const std::string &message, bool json) {
    int code = exit_code_for(s);
    if (json) json_result(command, code, s, message).print();
    std::fprintf(stderr, "stk %s: %s: %s\n", command, stk_status_str(s), message.c_str());
    return code;
}

int report_usage(const char *command, const std::string &message, bool json) {
    if (json) json_result(*command ? command : "stk", kExitUsage, STK_E_INVALID_ARGUMENT, message).print();
    if (*command) std::fprintf(stderr, "stk %s: %s (see stk %s --help)\n", command, message.c_str(), command);
    else std::fprintf(stderr, "stk: %s (see stk --help)\n", message.c_str());
    return kExitUsage;
}

std::string wrap(const std::string &text, size_t indent, size_t width, size_t first_column) {
    if (first_column == size_t(-1)) first_column = indent;
    std::string out, line;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t sp = text.find(' ', pos);
        std::string word = text.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
        pos = sp == std::string::npos ? text.size() : sp + 1;
        size_t lead = out.empty() ? first_column : indent;
        if (!line.empty() && lead + line.size() + 1 + word.size() > width) {
            out += (out.empty() ? "" : "\n" + std::string(indent, ' ')) + line;
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    if (!line.empty()) out += (out.empty() ? "" : "\n" + std::string(indent, ' ')) + line;
    return out;
}

std::string human_bytes(uint64_t n) {
    static const char *kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) return std::to_string(n) + " B";
    double v = double(n);
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[u]);
    return buf;
}

// ---- --in ------------------------------------------------------------------------------------

static bool is_dir(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

static std::vector<std::string> list_dirs(const std::string &dir) {
    std::vector<std::string> out;
    if (DIR *d = ::opendir(dir.c_str())) {
        while (struct dirent *e = ::readdir(d))
            if (e->d_name[0] != '.' && is_dir(dir + "/" + e->d_name)) out.push_back(e->d_name);
        ::closedir(d);
    }
    return out;
}

stk_status gguf_model_path(const std::string &path, std::string *gguf) {
    char buf[4096];
    size_t len = 0;
    stk_status s = stk_model_gguf_path(path.c_str(), buf, sizeof buf, &len);
    if (s == STK_OK) *gguf = buf;
    return s;
}

// A HuggingFace cache repo folder (models--org--name): refs/main names the snapshot, else the
// only one.
static stk_status cache_snapshot(const std::string &in, const std::string &dir, std::string *out, std::string *error) {
    std::string rev;
    if (FILE *f = std::fopen((dir + "/refs/main").c_str(), "r")) {
        char buf[128] = {};
        if (std::fgets(buf, sizeof buf, f)) rev = buf;
        std::fclose(f);
        while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r' || rev.back() == ' ')) rev.pop_back();
    }
    std::vector<std::string> snaps = list_dirs(dir + "/snapshots");
    if (rev.empty() || rev.find('/') != std::string::npos || !is_dir(dir + "/snapshots/" + rev)) {
        if (snaps.size() != 1) {
            *error = format(
                "--in %s is a HuggingFace cache folder with %zu snapshots and no usable refs/main; name "
                "one: --in %s/snapshots/<revision>",
                in.c_str(), snaps.size(), dir.c_str());
            return STK_E_NOT_FOUND;
        }
        rev = snaps[0];
    }
    *out = dir + "/snapshots/" + rev;
    return STK_OK;
}

stk_status resolve_model_path(const std::string &in, std::string *out, std::string *error) {
    struct stat st;
    if (::stat(in.c_str(), &st) != 0) {
        *error = format("--in %s: no such file or directory", in.c_str());
        return STK_E_NOT_FOUND;
    }
    if (!S_ISDIR(st.st_mode)) {
        // A GGUF holds the whole model (weights, config, tokenizer): the file itself.
        std::string gguf;
        if (stk_status s = gguf_model_path(in, &gguf); s != STK_OK) {
            *error = stk_last_error();
            return s;
        }
        // A single checkpoint file: the model is the directory around it.
        size_t slash = in.find_last_of('/');
        // (The caller names what it misses there: config.json, the tokenizer files.)
        *out = !gguf.empty() ? in : slash == std::string::npos ? "." : slash == 0 ? "/" : in.substr(0, slash);
        return STK_OK;
    }
    std::string dir = in;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!file_exists_plain(dir + "/config.json") && is_dir(dir + "/snapshots")) return cache_snapshot(in, dir, out, error);
    *out = dir;
    return STK_OK;
}

int resolve_model_arg(const char *command, const std::string &in, bool json, std::string *dir) {
    std::string message;
    stk_status s = resolve_model_path(in, dir, &message);
    if (s == STK_OK) return kExitOk;
    const int code = exit_code_for(s);
    if (json) json_result(command, code, s, message).print();
    std::fprintf(stderr, "stk %s: %s: %s\n", command, stk_status_str(s), message.c_str());
    return code;
}

stk_status root_generations(stk_status (*list)(const char *, stk_generation_list **), const std::string &root,
                            std::vector<Generation> *out) {
    stk_generation_list *l = nullptr;
    stk_status s = list(root.c_str(), &l);
    uint32_t n = 0;
    if (s == STK_OK) s = stk_generation_list_count(l, &n);
    for (stk_generation_entry &e : read_entries(stk_generation_list_at, l, n, &s)) {
        Generation g;
        g.error = e.error ? e.error : "";
        e.error = nullptr;
        g.e = e;
        out->push_back(std::move(g));
    }
    stk_generation_list_close(l);
    return s;
}

bool file_exists_plain(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
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
