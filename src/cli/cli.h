// The stk command: shared pieces of the sub-commands (one file each, cmd_*.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stk/stk.h"

namespace stk::cli {

// Exit codes (documented in README.md, "Exit codes").  Pinned.
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

// A minimal long-option parser: "--name value", "--name=value" and boolean "--flag".
class Args {
public:
    Args(int argc, char **argv, int first);
    // Declares an option; returns its value (or def).  Unknown options are reported by finish().
    std::string get(const char *name, const char *def = nullptr);
    uint32_t get_u32(const char *name, uint32_t def);
    bool flag(const char *name);
    bool has(const char *name) const;
    // false (and a message on stderr) if an option was not recognised or a value was bad.
    bool finish(const char *command);
    const std::vector<std::string> &positional() const { return positional_; }

private:
    struct Opt {
        std::string name, value;
        bool has_value, used;
    };
    std::vector<Opt> opts_;
    std::vector<std::string> positional_;
    std::vector<std::string> errors_;
};

// Report a failed call: "stk COMMAND: <status string>: <stk_last_error()>" (or JSON) on stderr.
int report_failure(const char *command, stk_status s, bool json);

// JSON string escaping for --json output.
std::string json_escape(const std::string &s);

// Progress on stderr, only when stderr is a terminal.
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int cmd_convert(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_export(int argc, char **argv);

// stk inspect on a .lwt file (inspect_lwt.cc).
bool is_lwt_file(const std::string &path);
int inspect_lwt(const std::string &path, bool json);

}  // namespace stk::cli
