// What a command leaves behind when it stops early, and the signals that stop it.
//
// convert and export write into places they own for the duration of the run: the staging
// directory ROOT/.staging-<pid>-<n>/ (convert) and the temporary file DIR/.<name>.tmp.<pid>
// (export, and every write-once file).  The library removes them when a job fails or closes;
// a signal does not reach that code, so the tool does it here:
//   - SIGINT, SIGTERM, SIGHUP while a run is armed: the leftovers of this process are removed
//     (entries of `dir` whose names start with `prefix`; a root this run created goes too if it
//     is empty afterwards), "interrupted (SIGINT)" is printed, and the process exits with 128 +
//     the signal number (130 for Ctrl-C, 143 for SIGTERM; docs/cli.md).
//   - SIGPIPE and SIGXFSZ, any command: ignored, so that a closed pipe on stdout / stderr
//     (`| head`) or a file-size limit makes a write fail (EPIPE, EFBIG) instead of killing the
//     process with its staging directory left behind; the run ends through its own paths.
//   - SIGBUS, any command: a mapped file could not be paged in (a file system that ran out of
//     space under a sparse file, or a file truncated by another process while mapped).  The
//     same cleanup, a message saying so, and exit code 5 (file system error), never a core dump.
// The handler uses only async-signal-safe calls (open, getdents64, unlinkat, write, _exit):
// paths are prepared when the run is armed.
#pragma once

#include <string>

namespace stk::cli {

// Installs the SIGBUS handler and ignores SIGPIPE / SIGXFSZ (every command) once; main() calls it first.
void install_fatal_signal_handlers(const char *command);

// While a Cleanup lives, SIGINT / SIGTERM / SIGHUP remove this process's leftovers in `dir`
// (names starting with `prefix`) and exit; `created_dir`: this run created `dir` (a new root):
// its LOCK and an empty generations/ are removed and `dir` itself if then empty.  `json`: the
// message is also printed as the one JSON object on stdout.  Destroying it restores the default
// actions.
class Cleanup {
public:
    Cleanup(const char *command, const std::string &dir, const std::string &prefix, bool created_dir, bool json);
    ~Cleanup();
    Cleanup(const Cleanup &) = delete;
    Cleanup &operator=(const Cleanup &) = delete;
};

// After a failed run that created the root `dir`: removes its LOCK, an empty generations/ and
// `dir` if it is then empty (a refused model leaves no empty root behind).
void remove_created_root(const std::string &dir);

}  // namespace stk::cli
