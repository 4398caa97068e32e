// parse_tensors streaming benchmark: one measurement per process (peak RSS is per process).
//
//   parse_tensors_bench stk   DIR [threads]   run stage parse_tensors through the C API
//   parse_tensors_bench floor DIR             mmap every weight file, sum its bytes as u64 words,
//                                             drop the pages behind the cursor (MADV_DONTNEED)
//   parse_tensors_bench digest BYTES          SHA-256 over BYTES already in memory, one thread
//                                             (the stage digest's own cost: a second floor)
//
// Prints one JSON line: wall seconds, peak RSS (getrusage ru_maxrss), bytes, and for `stk` the
// arena size, the largest stream unit in f32 and the stage digest.  bench/parse_bench.py runs
// both several times, warm page cache, and reports medians (docs/benchmarks.md).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "ingest/model.h"
#include "stages/job.h"
#include "stk/stk.h"

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static long peak_rss_bytes() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss * 1024L;
}

static int run_floor(const std::string &dir) {
    std::vector<std::string> files;
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 12 && (n.rfind(".safetensors") == n.size() - 12 || n.rfind(".bin") == n.size() - 4))
                files.push_back(dir + "/" + n);
        }
        closedir(d);
    }
    std::sort(files.begin(), files.end());
    double t0 = now();
    uint64_t sum = 0, bytes = 0;
    const size_t chunk = 64u << 20;
    for (const std::string &f : files) {
        int fd = open(f.c_str(), O_RDONLY);
        struct stat st;
        fstat(fd, &st);
        size_t n = size_t(st.st_size);
        auto *p = static_cast<const uint8_t *>(mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0));
        close(fd);
        for (size_t off = 0; off < n; off += chunk) {
            size_t len = std::min(chunk, n - off);
            const uint64_t *w = reinterpret_cast<const uint64_t *>(p + off);
            for (size_t i = 0; i < len / 8; i++) sum += w[i];
            madvise(const_cast<uint8_t *>(p) + off, len, MADV_DONTNEED);
        }
        munmap(const_cast<uint8_t *>(p), n);
        bytes += n;
    }
    double t1 = now();
    std::printf("{\"mode\": \"floor\", \"wall_s\": %.3f, \"peak_rss\": %ld, \"bytes\": %llu, \"sum\": %llu}\n", t1 - t0,
                peak_rss_bytes(), (unsigned long long)bytes, (unsigned long long)sum);
    return 0;
}

static int run_stk(const std::string &dir, uint32_t threads) {
    std::string out = "/tmp/stk-bench-parse-out";
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = dir.c_str();
    p.out_dir = out.c_str();
    p.threads = threads;
    double t0 = now();
    size_t need = 0;
    if (stk_job_arena_size(&p, &need) != STK_OK) {
        std::fprintf(stderr, "arena size: %s\n", stk_last_error());
        return 1;
    }
    // Anonymous mapping: only the pages the job touches become resident.
    void *arena = mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stk_job *job = nullptr;
    if (stk_open(&p, arena, need, &job) != STK_OK || stk_stage_run(job, STK_STAGE_PARSE_TENSORS) != STK_OK) {
        std::fprintf(stderr, "parse_tensors: %s\n", stk_last_error());
        return 1;
    }
    double t1 = now();
    uint32_t crc;
    uint64_t sha;
    stk_stage_digest(job, STK_STAGE_PARSE_TENSORS, &crc, &sha);
    const stk::ModelPlan *plan = reinterpret_cast<const stk::Job *>(job)->model;
    std::printf(
        "{\"mode\": \"stk\", \"wall_s\": %.3f, \"peak_rss\": %ld, \"bytes\": %llu, \"arena\": %zu, "
        "\"max_layer_f32\": %llu, \"n_params\": %llu, \"tensors\": %u, \"f32_bytes\": %llu, "
        "\"digest\": \"%08x/%016llx\"}\n",
        t1 - t0, peak_rss_bytes(), (unsigned long long)plan->checkpoint_bytes, need, (unsigned long long)plan->max_unit_f32_bytes,
        (unsigned long long)plan->n_params, plan->n_streamed, (unsigned long long)(plan->streamed_elements * 4), crc,
        (unsigned long long)sha);
    stk_close(job);
    munmap(arena, need);
    return 0;
}

static int run_digest(uint64_t bytes) {
    std::vector<float> buf((64u << 20) / 4);
    for (size_t i = 0; i < buf.size(); i++) buf[i] = float(i % 1000) * 0.001f;
    double t0 = now();
    stk::Sha256 sha;
    uint32_t crc = 0;
    for (uint64_t done = 0; done < bytes;) {
        size_t n = size_t(std::min<uint64_t>(bytes - done, buf.size() * 4));
        sha.update(buf.data(), n);
        done += n;
    }
    uint64_t low = sha.finish().low64();
    std::printf("{\"mode\": \"digest\", \"wall_s\": %.3f, \"bytes\": %llu, \"crc\": %u, \"sha\": %llu}\n", now() - t0,
                (unsigned long long)bytes, crc, (unsigned long long)low);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s stk|floor DIR [threads] | digest BYTES\n", argv[0]);
        return 2;
    }
    std::string mode = argv[1], dir = argv[2];
    if (mode == "floor") return run_floor(dir);
    if (mode == "digest") return run_digest(std::strtoull(dir.c_str(), nullptr, 10));
    if (mode == "stk") return run_stk(dir, argc > 3 ? uint32_t(std::atoi(argv[3])) : 1);
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
}
