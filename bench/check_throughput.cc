// `stk check` throughput (issue 2 item 7).  Writes an output directory of random arrays (about
// --gb GB, in --arrays files) with a real manifest, warms the page cache, then measures in one run:
//   floor  OpenSSL SHA-256 over the same number of bytes already in memory, on 1 thread and on as
//          many threads as stk check uses (the machine's SHA speed: stk check cannot beat it,
//          it also computes crc32c and reads through the page cache)
//   stk    `stk check --out DIR` (the real binary), wall time
//   peer   `sha256sum` over the same array files: one process (as a user would run it), and as
//          many processes as stk check has threads, each over its share of the files (the peer
//          with the parallelism stk uses); wall time to the last one's exit, CPU summed
// Each is the median of --runs runs, all in the same loop (page cache warm for every one).
//
//   ninja -C build bench/check_throughput src/cli/stk
//   build/bench/check_throughput --stk build/src/cli/stk --dir /tmp/stk-check-bench --gb 1.5
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/checksum.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "core/prng.h"
#include "format/array.h"
#include "format/manifest.h"

extern char **environ;

using namespace stk;
using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// CPU seconds (user + system) of the last child run: a measure that a loaded machine distorts less
// than wall time.
static double g_child_cpu = 0;

static double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

static int run(const std::vector<std::string> &argv, bool quiet) {
    std::vector<char *> a;
    for (const std::string &s : argv) a.push_back(const_cast<char *>(s.c_str()));
    a.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet) posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    if (posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) {
        std::perror(a[0]);
        std::exit(2);
    }
    posix_spawn_file_actions_destroy(&fa);
    int st = 0;
    rusage ru;
    wait4(pid, &st, 0, &ru);
    g_child_cpu = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Several processes at once; returns wall seconds until the last exits, their CPU summed in
// g_child_cpu.
static double time_parallel(const std::vector<std::vector<std::string>> &cmds) {
    auto t0 = Clock::now();
    std::vector<pid_t> pids;
    for (const auto &argv : cmds) {
        std::vector<char *> a;
        for (const std::string &s : argv) a.push_back(const_cast<char *>(s.c_str()));
        a.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        pid_t pid;
        if (posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) {
            std::perror(a[0]);
            std::exit(2);
        }
        posix_spawn_file_actions_destroy(&fa);
        pids.push_back(pid);
    }
    double cpu = 0;
    for (pid_t pid : pids) {
        int st = 0;
        rusage ru;
        wait4(pid, &st, 0, &ru);
        cpu += double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            std::fprintf(stderr, "%s failed\n", cmds[0][0].c_str());
            std::exit(1);
        }
    }
    g_child_cpu = cpu;
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

static double time_run(const std::vector<std::string> &argv) {
    auto t0 = Clock::now();
    int rc = run(argv, true);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc != 0) {
        std::fprintf(stderr, "%s exited %d\n", argv[0].c_str(), rc);
        std::exit(1);
    }
    return s;
}

int main(int argc, char **argv) {
    std::string stk_bin = "stk", dir = "/tmp/stk-check-bench";
    double gb = 1.5;
    int n_arrays = 24, runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--stk") stk_bin = v;
        else if (k == "--dir") dir = v;
        else if (k == "--gb") gb = std::atof(v.c_str());
        else if (k == "--arrays") n_arrays = std::atoi(v.c_str());
        else if (k == "--runs") runs = std::atoi(v.c_str());
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    try {
        const uint64_t per = uint64_t(gb * 1e9 / n_arrays) / 4096 * 4096;  // f32 elements: multiple of 4
        std::string out = dir + "/out";
        std::vector<std::string> files;
        if (!file_exists(out + "/sera_manifest.bin")) {
            make_dirs(out + "/arrays");
            std::vector<ManifestArray> entries;
            std::vector<uint8_t> buf(static_cast<size_t>(per));
            uint64_t x = 0x5EED;
            for (int a = 0; a < n_arrays; a++) {
                for (size_t i = 0; i + 8 <= buf.size(); i += 8) {
                    uint64_t r = splitmix64_next(&x);
                    std::memcpy(&buf[i], &r, 8);
                }
                char name[64];
                std::snprintf(name, sizeof name, "bench_%02d.bin", a);
                uint64_t dims[2] = {per / 4 / 1024, 1024};
                ArrayHeader h = write_array(out + "/arrays/" + name, DType::F32, 2, dims, buf.data());
                entries.push_back(manifest_array_from_header(name, STK_STAGE_PRF, h));
            }
            ManifestFields fields;
            ManifestInput in;
            in.fields = &fields;
            in.arrays = entries.data();
            in.n_arrays = uint32_t(entries.size());
            for (int i = 0; i < 9; i++) in.stages[i].state = kStageRan;
            write_manifest(out + "/sera_manifest.bin", in, nullptr);
        }
        Manifest m = read_manifest(out + "/sera_manifest.bin");
        uint64_t total = 0;
        for (const ManifestArray &a : m.arrays) {
            files.push_back(out + "/arrays/" + a.name);
            total += a.byte_len;
        }

        // Warm the page cache: one full verification.
        run({stk_bin, "check", "--out", out}, true);

        // Floor: SHA-256 in memory over `total` bytes (a 64 MiB buffer hashed repeatedly).
        unsigned hw = std::thread::hardware_concurrency();
        unsigned threads = std::min(8u, std::max(1u, hw));
        threads = std::min<unsigned>(threads, unsigned(m.arrays.size()));
        std::vector<uint8_t> mem(64u << 20);
        for (size_t i = 0; i < mem.size(); i++) mem[i] = uint8_t(i * 131 + 7);
        auto sha_pass = [&](uint64_t bytes) {
            Sha256 h;
            for (uint64_t done = 0; done < bytes; done += mem.size())
                h.update(mem.data(), size_t(std::min<uint64_t>(mem.size(), bytes - done)));
            volatile uint8_t sink = h.finish().bytes[0];
            (void)sink;
        };
        std::vector<std::vector<std::string>> shares(threads, std::vector<std::string>{"sha256sum"});
        for (size_t i = 0; i < files.size(); i++) shares[i % threads].push_back(files[i]);
        std::vector<double> floor1, floorN, stk, peer, peerN, crcs, cpu_floor, cpu_stk, cpu_peer, cpu_peerN;
        for (int r = 0; r < runs; r++) {
            auto t0 = Clock::now();
            double c0 = cpu_now();
            sha_pass(total);
            floor1.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            cpu_floor.push_back(cpu_now() - c0);
            t0 = Clock::now();
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; t++) pool.emplace_back([&] { sha_pass(total / threads); });
            for (auto &t : pool) t.join();
            floorN.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            t0 = Clock::now();
            uint32_t c = 0;
            for (uint64_t done = 0; done < total; done += mem.size()) c = crc32c(mem.data(), mem.size(), c);
            crcs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            stk.push_back(time_run({stk_bin, "check", "--out", out}));
            cpu_stk.push_back(g_child_cpu);
            std::vector<std::string> cmd = {"sha256sum"};
            cmd.insert(cmd.end(), files.begin(), files.end());
            peer.push_back(time_run(cmd));
            cpu_peer.push_back(g_child_cpu);
            peerN.push_back(time_parallel(shares));
            cpu_peerN.push_back(g_child_cpu);
        }
        auto gbps = [&](double s) { return double(total) / s / 1e9; };
        std::printf("payload: %u arrays, %.3f GB; %d runs, medians; stk check uses %u threads (%u cores)\n",
                    unsigned(m.arrays.size()), double(total) / 1e9, runs, threads, hw);
        std::printf("| what | seconds | GB/s | vs floor (%u thr) |\n|---|---:|---:|---:|\n", threads);
        std::printf("| floor: OpenSSL SHA-256 in memory, 1 thread | %.3f | %.2f | |\n", median(floor1), gbps(median(floor1)));
        std::printf("| floor: OpenSSL SHA-256 in memory, %u threads | %.3f | %.2f | 1.00 |\n", threads, median(floorN),
                    gbps(median(floorN)));
        std::printf("| crc32c (isa-l) in memory, 1 thread | %.3f | %.2f | |\n", median(crcs), gbps(median(crcs)));
        std::printf("| **stk check** (manifest + every array: header, crc32c, SHA-256) | %.3f | %.2f | %.2f |\n", median(stk),
                    gbps(median(stk)), median(floorN) / median(stk));
        std::printf("| peer: sha256sum over the same files (1 process, its default) | %.3f | %.2f | %.2f |\n", median(peer),
                    gbps(median(peer)), median(floorN) / median(peer));
        std::printf("| peer: %u sha256sum processes, files shared out (stk's parallelism) | %.3f | %.2f | %.2f |\n", threads,
                    median(peerN), gbps(median(peerN)), median(floorN) / median(peerN));
        std::printf("\nCPU seconds (user + system; less sensitive to a loaded machine):\n");
        std::printf("| what | CPU s | GB per CPU-second | vs floor |\n|---|---:|---:|---:|\n");
        std::printf("| floor: OpenSSL SHA-256 in memory | %.3f | %.2f | 1.00 |\n", median(cpu_floor), gbps(median(cpu_floor)));
        std::printf("| **stk check** | %.3f | %.2f | %.2f |\n", median(cpu_stk), gbps(median(cpu_stk)),
                    median(cpu_floor) / median(cpu_stk));
        std::printf("| peer: sha256sum, 1 process | %.3f | %.2f | %.2f |\n", median(cpu_peer), gbps(median(cpu_peer)),
                    median(cpu_floor) / median(cpu_peer));
        std::printf("| peer: sha256sum, %u processes | %.3f | %.2f | %.2f |\n", threads, median(cpu_peerN),
                    gbps(median(cpu_peerN)), median(cpu_floor) / median(cpu_peerN));
    } catch (const Error &e) {
        std::fprintf(stderr, "check_throughput: %s\n", e.what());
        return 1;
    }
    return 0;
}
