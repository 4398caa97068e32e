// Shared by the round-trip targets: a byte cursor over the fuzz input (reads past the end give
// zeros) and a private scratch directory for the files a target writes (on /dev/shm when there
// is one, so the writers' fsync costs nothing), removed at exit.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fuzz {

struct Cursor {
    const uint8_t *p;
    size_t n, at = 0;
    Cursor(const uint8_t *data, size_t size) : p(data), n(size) {}
    uint8_t u8() { return at < n ? p[at++] : 0; }
    uint64_t bytes(int k) {  // k little-endian bytes
        uint64_t v = 0;
        for (int i = 0; i < k; i++) v |= uint64_t(u8()) << (8 * i);
        return v;
    }
    size_t left() const { return n - at; }
};

inline std::vector<uint8_t> slurp(const std::string &path) {
    std::vector<uint8_t> out;
    if (FILE *f = std::fopen(path.c_str(), "rb")) {
        uint8_t buf[65536];
        size_t k;
        while ((k = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + k);
        std::fclose(f);
    }
    return out;
}

inline const std::string &scratch_dir() {
    static std::string dir = [] {
        std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
        std::string d = base + "/stk-fuzz-XXXXXX";
        if (!mkdtemp(&d[0])) std::abort();
        static std::string keep = d;
        std::atexit([] { rmdir(keep.c_str()); });
        return d;
    }();
    return dir;
}

}  // namespace fuzz
