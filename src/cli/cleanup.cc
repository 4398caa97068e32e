#include "cli/cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "cli/cli.h"
#include "stk/stk.h"

namespace stk::cli {

namespace {

// Everything the handler needs, prepared before it can run (fixed buffers: no allocation there).
constexpr size_t kPath = 4096;
struct Armed {
    volatile sig_atomic_t on = 0;
    char command[32] = "";
    char dir[kPath] = "";
    char prefix[256] = "";
    bool created_dir = false;
    char json_int[1024] = "", json_term[1024] = "", json_hup[1024] = "", json_bus[1024] = "";
};
Armed g_armed;
char g_command[32] = "stk";

void put(const char *s) {
    size_t n = std::strlen(s);
    while (n) {
        ssize_t w = ::write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= size_t(w);
    }
}
void put_out(const char *s) {
    size_t n = std::strlen(s);
    while (n) {
        ssize_t w = ::write(1, s, n);
        if (w <= 0) return;
        s += w;
        n -= size_t(w);
    }
}

bool starts(const char *s, const char *p) { return std::strncmp(s, p, std::strlen(p)) == 0; }

// rm -r of `name` under the directory fd `at` (no symlink followed), async-signal-safe:
// getdents64 on a fixed buffer, depth bounded (a staging directory is two levels deep).
void remove_at(int at, const char *name, int depth) {
    if (::unlinkat(at, name, 0) == 0) return;
    int fd = ::openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    if (depth < 8) {
        alignas(8) char buf[4096];
        for (;;) {
            long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
            if (n <= 0) break;
            for (long off = 0; off < n;) {
                struct Dirent64 {
                    uint64_t ino;
                    int64_t off;
                    unsigned short reclen;
                    unsigned char type;
                    char name[1];
                };
                const Dirent64 *d = reinterpret_cast<const Dirent64 *>(buf + off);
                if (std::strcmp(d->name, ".") && std::strcmp(d->name, "..")) remove_at(fd, d->name, depth + 1);
                off += d->reclen;
            }
        }
    }
    ::close(fd);
    ::unlinkat(at, name, AT_REMOVEDIR);
}

// Removes the armed leftovers; returns how many entries matched.  Workers may still be adding
// files to a staging directory while it goes: a few passes.
int remove_leftovers() {
    int found = 0;
    int dfd = ::open(g_armed.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 0;
    for (int pass = 0; pass < 4; pass++) {
        int here = 0;
        ::lseek(dfd, 0, SEEK_SET);
        alignas(8) char buf[4096];
        char names[16][256];
        int n_names = 0;
        for (;;) {
            long n = ::syscall(SYS_getdents64, dfd, buf, sizeof buf);
            if (n <= 0) break;
            for (long off = 0; off < n;) {
                const char *name = buf + off + 19;  // linux_dirent64: ino 8, off 8, reclen 2, type 1
                unsigned short reclen;
                std::memcpy(&reclen, buf + off + 16, 2);
                if (g_armed.prefix[0] && starts(name, g_armed.prefix) && n_names < 16 && std::strlen(name) < 256) {
                    std::strcpy(names[n_names++], name);
                    here++;
                }
                off += reclen;
            }
        }
        for (int i = 0; i < n_names; i++) remove_at(dfd, names[i], 0);
        if (pass == 0) found = here;
        if (here == 0) break;
    }
    if (g_armed.created_dir) {
        ::unlinkat(dfd, STK_LOCK_FILE_NAME, 0);
        ::unlinkat(dfd, "CURRENT.tmp", 0);
        ::unlinkat(dfd, STK_GENERATIONS_DIR_NAME, AT_REMOVEDIR);  // only if empty
    }
    ::close(dfd);
    if (g_armed.created_dir) ::rmdir(g_armed.dir);  // only if empty
    return found;
}

void on_signal(int sig) {
    const char *what = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGBUS";
    int found = g_armed.on ? remove_leftovers() : 0;
    put("stk ");
    put(g_armed.on ? g_armed.command : g_command);
    if (sig == SIGBUS) {
        put(": a mapped file could not be read or written (SIGBUS): the file system is full (a sparse file could "
            "not get its pages) or a file was truncated by another process while mapped");
    } else {
        put(": interrupted (");
        put(what);
        put(")");
    }
    if (g_armed.on) {
        put(found ? "; removed what this run had staged in " : "; nothing of this run was left in ");
        put(g_armed.dir);
        if (found) put(std::strcmp(g_armed.command, "export") ? ": nothing was published" : ": no output file was written");
    }
    put("\n");
    if (g_armed.on) {
        const char *j = sig == SIGINT    ? g_armed.json_int
                        : sig == SIGTERM ? g_armed.json_term
                        : sig == SIGHUP  ? g_armed.json_hup
                                         : g_armed.json_bus;
        if (*j) put_out(j);
    }
    ::_exit(sig == SIGBUS ? kExitIo : 128 + sig);
}

void set_handler(int sig, void (*h)(int)) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sa.sa_flags = 0;
    ::sigaction(sig, &sa, nullptr);
}

void copy(char *dst, size_t cap, const std::string &s) {
    size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
    std::memcpy(dst, s.data(), n);
    dst[n] = 0;
}

}  // namespace

void install_fatal_signal_handlers(const char *command) {
    copy(g_command, sizeof g_command, command);
    set_handler(SIGBUS, on_signal);
    // A reader that left (`stk convert ... 2>&1 | head -5`) must not kill a run silently with its
    // staging directory left behind: the write fails with EPIPE instead, the line is lost, and
    // the run ends through its own paths (publish or clean up).  A file-size limit (ulimit -f)
    // likewise: EFBIG, reported by the write that hit it.
    set_handler(SIGPIPE, SIG_IGN);
    set_handler(SIGXFSZ, SIG_IGN);
}

Cleanup::Cleanup(const char *command, const std::string &dir, const std::string &prefix, bool created_dir, bool json) {
    copy(g_armed.command, sizeof g_armed.command, command);
    copy(g_armed.dir, sizeof g_armed.dir, dir.empty() ? "." : dir);
    copy(g_armed.prefix, sizeof g_armed.prefix, prefix);
    g_armed.created_dir = created_dir;
    auto js = [&](char *dst, int code, const char *why) {
        if (!json) {
            dst[0] = 0;
            return;
        }
        copy(dst, 1024,
             json_result(command, code, STK_E_IO, std::string(why) + "; what this run had staged in " + dir + " was removed")
                     .text() +
                 "\n");
    };
    js(g_armed.json_int, 128 + SIGINT, "interrupted (SIGINT)");
    js(g_armed.json_term, 128 + SIGTERM, "interrupted (SIGTERM)");
    js(g_armed.json_hup, 128 + SIGHUP, "interrupted (SIGHUP)");
    js(g_armed.json_bus, kExitIo, "a mapped file could not be read or written (SIGBUS): the file system is full");
    g_armed.on = 1;
    set_handler(SIGINT, on_signal);
    set_handler(SIGTERM, on_signal);
    set_handler(SIGHUP, on_signal);
}

Cleanup::~Cleanup() {
    set_handler(SIGINT, SIG_DFL);
    set_handler(SIGTERM, SIG_DFL);
    set_handler(SIGHUP, SIG_DFL);
    g_armed.on = 0;
}

void remove_created_root(const std::string &dir) {
    ::unlink((dir + "/" + STK_LOCK_FILE_NAME).c_str());
    ::rmdir((dir + "/" + STK_GENERATIONS_DIR_NAME).c_str());  // only if empty
    ::rmdir(dir.c_str());                                // only if empty
}

}  // namespace stk::cli
