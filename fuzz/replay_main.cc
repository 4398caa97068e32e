// Regression driver: feeds every file of the corpus folders given on the command line to
// LLVMFuzzerTestOneInput, with each input copied flush against an unmapped guard page so that
// any read past its end faults at once (the libdeflate trick).
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static std::vector<uint8_t> read_file(const std::string &path) {
    std::vector<uint8_t> out;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return out;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    return out;
}

static void run_guarded(const std::vector<uint8_t> &input) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t body = (input.size() + page - 1) / page * page;
    if (body == 0) body = page;
    auto *base = static_cast<uint8_t *>(mmap(nullptr, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) {
        std::perror("mmap");
        std::exit(2);
    }
    mprotect(base + body, page, PROT_NONE);
    uint8_t *start = base + body - input.size();
    if (!input.empty()) std::memcpy(start, input.data(), input.size());
    mprotect(base, body, PROT_READ);  // inputs are read-only, as under libFuzzer
    LLVMFuzzerTestOneInput(start, input.size());
    munmap(base, body + page);
}

int main(int argc, char **argv) {
    size_t count = 0;
    for (int i = 1; i < argc; i++) {
        std::vector<std::string> files;
        if (DIR *d = opendir(argv[i])) {
            while (dirent *e = readdir(d))
                if (e->d_name[0] != '.') files.push_back(std::string(argv[i]) + "/" + e->d_name);
            closedir(d);
        } else {
            files.push_back(argv[i]);
        }
        std::sort(files.begin(), files.end());
        for (const std::string &f : files) {
            run_guarded(read_file(f));
            count++;
        }
    }
    // Also the empty input and every one-byte input: cheap, and the classic edge cases.
    run_guarded({});
    for (int b = 0; b < 256; b++) run_guarded({uint8_t(b)});
    std::printf("%zu passed, 0 failed\n", count + 257);
    return count > 0 ? 0 : 1;
}
