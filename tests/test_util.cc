#include "test_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ftw.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace stk::test {

static std::mutex temp_dirs_mu;
static std::vector<std::string> *temp_dirs;  // leaked on purpose: read by the atexit handler

static void remove_temp_dirs() {
    if (std::getenv("STK_KEEP_TEST_DIRS")) return;
    std::lock_guard<std::mutex> lock(temp_dirs_mu);
    if (!temp_dirs) return;
    // <filesystem> cannot be used here: cmocka's fail() macro breaks its headers.
    auto remove_one = [](const char *path, const struct stat *, int, struct FTW *) { return std::remove(path); };
    for (const std::string &d : *temp_dirs) nftw(d.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
    temp_dirs->clear();
}

std::string make_temp_dir(const char *tag) {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/stk-test-" + tag + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
        print_error("mkdtemp failed\n");
        fail();
    }
    {
        std::lock_guard<std::mutex> lock(temp_dirs_mu);
        if (!temp_dirs) {
            temp_dirs = new std::vector<std::string>();
            std::atexit(remove_temp_dirs);
        }
        temp_dirs->push_back(buf.data());
    }
    return std::string(buf.data());
}

void write_bytes(const std::string &path, const std::vector<uint8_t> &bytes) {
    FILE *f = std::fopen(path.c_str(), "wb");
    assert_non_null(f);
    if (!bytes.empty()) assert_int_equal(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
}

std::vector<uint8_t> read_bytes(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
        print_error("cannot open %s\n", path.c_str());
        fail();
    }
    std::vector<uint8_t> out;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    return out;
}

static std::string file_text(const std::string &path) {
    std::vector<uint8_t> b = read_bytes(path);
    return std::string(b.begin(), b.end());
}

StkRun run_stk(const std::vector<std::string> &args) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) fail_msg("STK_BIN is not set (run under meson test)");
    static std::string dir;  // one capture directory per test process
    if (dir.empty()) dir = make_temp_dir("stk-io");
    const std::string o = dir + "/stdout", e = dir + "/stderr";
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = ::open(o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = ::open(e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = ::open("/dev/null", O_RDONLY);
        dup2(fo, 1), dup2(fe, 2), dup2(fi, 0);
        std::vector<char *> argv{const_cast<char *>(bin)};
        for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(bin, argv.data());
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    StkRun r;
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = file_text(o);
    r.err = file_text(e);
    return r;
}

}  // namespace stk::test
