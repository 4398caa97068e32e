#include "test_util.h"

#include <sys/stat.h>
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

}  // namespace stk::test
