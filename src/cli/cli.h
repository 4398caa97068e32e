// The stk command: shared pieces of the sub-commands (one file each, cmd_*.cc): argument
// parsing, the JSON result object every command prints with --json (docs/cli.md), --in / --out
// resolution, human-readable sizes, progress.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stk/stk.h"

namespace stk::cli {

// Exit codes (documented in README.md, "Exit codes", and docs/cli.md).  Pinned.
enum ExitCode : int {
    kExitOk = 0,
    kExitFailed = 1,          // the input was refused or the operation failed (message on stderr)
    kExitUsage = 2,           // bad command line
    kExitNotImplemented = 3,  // a stage or feature that does not exist yet
    kExitVerifyFailed = 4,    // stk check found a corrupted or inconsistent output
    kExitIo = 5,              // the file system failed (missing file, permission, disk full)
};

// Map a failing status to the exit code above.
int exit_code_for(stk_status s);
// The JSON "error" word of an exit code: null for 0, else "failed", "usage", "not_implemented",
// "verify_failed", "io".
const char *error_kind(int exit_code);

// A long-option parser.  Option names compare ignoring case, '-' and '_' (so --Ltok, --ltok and
// --L_tok are one option), as "--name value", "--name=value" or boolean "--flag".  An option
// given twice is a usage error.
// A command declares its options (get / get_u32 / flag), then calls finish(), which turns every
// undeclared option ("--bogus", "-q") and every positional argument past max_positional into a
// usage error.  Declare value options before boolean flags: a value may look like a flag.
class Args {
public:
    Args(int argc, char **argv, int first);
    // Declares an option taking a value; returns its value (or def).
    std::string get(const char *name, const char *def = nullptr);
    uint32_t get_u32(const char *name, uint32_t def);
    // A count in 1..max: 0 when the option is absent (the library's default), a usage error for
    // 0 or above max ("--threads takes 1..1024").
    uint32_t get_count(const char *name, uint32_t max);
    bool flag(const char *name);  // "--help" also answers to "-h"
    bool has(const char *name) const;
    // false after printing the usage error (stderr, and the JSON object on stdout when --json
    // was given) if an option was unknown, a value bad, or a positional argument too many.
    bool finish(const char *command, size_t max_positional = 0);
    const std::vector<std::string> &positional() const { return positional_; }
    bool json_requested() const { return json_; }

private:
    int find(const char *name, size_t from) const;
    std::vector<std::string> tokens_;
    std::vector<bool> consumed_;
    std::vector<std::string> positional_;
    std::vector<std::string> errors_;
    bool json_ = false;
};

// One JSON object, keys in the order added, printed on one line.  Strings are escaped so that
// the output is valid JSON whatever the bytes: bytes that are not UTF-8 become U+FFFD (commands
// that print raw bytes add a "hex" field beside the string).
class Json {
public:
    Json &str(const char *key, const std::string &v);
    Json &str_or_null(const char *key, const char *v);  // null when v is null or empty
    Json &num(const char *key, long long v);
    Json &unum(const char *key, unsigned long long v);
    Json &real(const char *key, double v);  // non-finite -> null
    Json &boolean(const char *key, bool v);
    Json &null(const char *key);
    Json &raw(const char *key, const std::string &json);  // an already-encoded value
    std::string text() const { return "{" + body_ + "}"; }
    void print() const;  // text() and a newline on stdout

private:
    void key(const char *k);
    std::string body_;
};
// A JSON array of already-encoded values.
std::string json_array(const std::vector<std::string> &items);

// The keys every command's JSON object starts with (docs/cli.md): command, ok, exit_code,
// status (stk status name), status_code, error (null or error_kind), message.
Json json_result(const char *command, int exit_code, stk_status status, const std::string &message);

// Report a failed library call: "stk COMMAND: <status string>: <stk_last_error()>" on stderr
// and, with json, the result object on stdout.  Returns the exit code.
int report_failure(const char *command, stk_status s, bool json);
// The same for a refusal the command itself decided: `message` in place of stk_last_error().
int report_error(const char *command, stk_status s, const std::string &message, bool json);
// A usage error: the message (and "see stk COMMAND --help") on stderr, the result object with
// "error": "usage" on stdout when json.  Returns kExitUsage.
int report_usage(const char *command, const std::string &message, bool json);

// The retention policies by name (window, tova, h2o, tova-head: STK_SEQ_POLICY_*; docs/decisions.md
// "Retention policies"): false for another name.  policy_label: the name of a number ("?" past them).
bool policy_number(const std::string &name, uint32_t *out);
const char *policy_label(uint32_t policy);
// A faithful runtime block's FFN dtype code as a word: stk_dtype_name's, "int8" for I8 (the .lwt
// int8 packing with one scale per matrix).
const char *ffn_dtype_label(uint32_t dtype);

// JSON string escaping (quotes included); invalid UTF-8 bytes become U+FFFD.
std::string json_escape(const std::string &s);
// Lower-case hex of bytes.
std::string hex_bytes(const std::string &s);
// Lower-case hex of a 32-byte hash (curr_hash, prev_hash): 64 digits.
std::string hex_hash(const uint8_t h[32]);
// printf into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// A crc32c (8 digits) and the low 64 bits of a SHA-256 (16 digits), as the manifest shows them.
inline std::string hex8(uint32_t v) { return format("%08x", v); }
inline std::string hex16(uint64_t v) { return format("%016llx", (unsigned long long)v); }
// text broken at spaces into lines that end by column `width`; every line after the first starts
// with indent spaces; the first starts at first_column (default: indent, i.e. the caller printed a
// label of that width).  For long messages on a terminal.
std::string wrap(const std::string &text, size_t indent, size_t width = 100, size_t first_column = size_t(-1));
// "512 B", "1.5 KiB", "3.20 GiB".
std::string human_bytes(uint64_t n);

// --in as the help says it: a model directory; a single file in one (a checkpoint, a tokenizer
// file: its directory is used, with config.json and the tokenizer files beside it); a GGUF file (itself: it
// holds the config and the tokenizer); a HuggingFace cache folder
// models--org--name (its snapshot: refs/main, or the only one).  On failure returns the status
// (STK_E_NOT_FOUND naming exactly what is missing) with the message in *error.
stk_status resolve_model_path(const std::string &in, std::string *dir, std::string *error);
// The GGUF file `path` names, or "" (stk_model_gguf_path; the message in stk_last_error()).
stk_status gguf_model_path(const std::string &path, std::string *gguf);
// resolve_model_path, a failure reported as report_failure does ("stk COMMAND: STATUS: message" on
// stderr, the result object on stdout with json): kExitOk, or the exit code.
int resolve_model_arg(const char *command, const std::string &in, bool json, std::string *dir);
// Entries 0..n-1 of a list behind a handle, each a versioned struct that at(i, &v) fills (its
// struct_size set first).  Reads while *s is STK_OK and leaves the first failure in *s for the
// caller to report.
template <class T, class At>
std::vector<T> read_entries(uint64_t n, stk_status *s, At &&at) {
    std::vector<T> out;
    for (uint64_t i = 0; *s == STK_OK && i < n; i++) {
        T v = {};
        v.struct_size = sizeof v;
        *s = at(i, &v);
        out.push_back(v);
    }
    return out;
}
// The same over an stk_*_at function indexed from 0 (stk_manifest_array_at, stk_replay_token_at...).
template <class Handle, class Index, class T>
std::vector<T> read_entries(stk_status (*at)(const Handle *, Index, T *), const Handle *h, uint64_t n, stk_status *s) {
    return read_entries<T>(n, s, [&](uint64_t i, T *v) { return at(h, Index(i), v); });
}

// One generation of a root as stk_root_list / stk_root_chain give it, with its error text copied:
// e.error is NULL (it pointed into the list, which is closed).
struct Generation {
    stk_generation_entry e{};
    std::string error;  // "" when the generation has none
};
// The generations that `list` (stk_root_list or stk_root_chain) gives for root, in its order.
stk_status root_generations(stk_status (*list)(const char *, stk_generation_list **), const std::string &root,
                            std::vector<Generation> *out);

// A regular file (or a link to one) exists at path.
bool file_exists_plain(const std::string &path);

// Progress on stderr, only when stderr is a terminal.
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int cmd_convert(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);  // cmd_generate.cc
int cmd_list_models(int argc, char **argv);  // stk --list-models
int cmd_export(int argc, char **argv);
int cmd_generations(int argc, char **argv);  // cmd_generations.cc

// stk inspect on a .lwt file (inspect_lwt.cc).
bool is_lwt_file(const std::string &path);
int inspect_lwt(const std::string &path, bool json);

}  // namespace stk::cli
