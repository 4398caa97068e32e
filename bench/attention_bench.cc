// prf_build, overlays_build and memory_fit against the floor of reading the tensors they need.
//
//   attention_bench MODEL_DIR [runs=5] [threads=1] [r=512] [rv=12] [through_overlays=0]
//
// through_overlays = 1 stops each job after overlays_build (memory_fit needs ffn_collapse and
// mphf_cuckoo to have run, minutes on the 7B shape).
//
// Per run: a fresh job through the public API; parse_tensors and the tokenizer stage untimed;
// then each attention stage timed alone.  The floor: reading every layer's W_K (prf_build's
// input) and W_O (overlays_build's) to f32 from the page cache with the same reader, timed in
// the same process right before.  Prints medians, the ratio stage / floor, and the arena bytes
// each stage reserves against one layer's matrices.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "stages/attn_common.h"
#include "stages/job.h"
#include "stages/stages.h"
#include "stk/stk.h"

using namespace stk;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// CPU seconds of the whole process (all threads): on a loaded machine wall time measures the
// other tenants too; CPU time measures the work.
static double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: attention_bench MODEL_DIR [runs] [threads] [r] [rv] [through_overlays]\n");
        return 2;
    }
    const std::string dir = argv[1];
    const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
    const uint32_t threads = argc > 3 ? uint32_t(std::atoi(argv[3])) : 1;
    const uint32_t r = argc > 4 ? uint32_t(std::atoi(argv[4])) : 512, rv = argc > 5 ? uint32_t(std::atoi(argv[5])) : 12;
    const bool through_overlays = argc > 6 && std::atoi(argv[6]) != 0;
    const int last_stage = through_overlays ? STK_STAGE_OVERLAYS : STK_STAGE_MEMORY_FIT;

    auto desc = describe_model(dir);
    const AttnShape s = attn_shape(desc->plan.config);
    std::vector<float> buf(size_t(std::max(s.d_kv, s.d_v) * s.d_model)), rows(size_t(desc->plan.max_row_floats + 1));
    std::vector<double> t_k, t_o, t_prf, t_ov, t_mem, c_k, c_o, c_prf, c_ov;
    for (int run = 0; run < runs + 1; run++) {  // run 0 warms the page cache and is dropped
        WeightReader reader(*desc->checkpoint, desc->plan);
        auto t0 = Clock::now();
        double c0 = cpu_now();
        for (uint32_t l = 0; l < s.n_layers; l++)
            reader.read(reader.require(Role::K, l, s.d_kv, s.d_model), buf.data(), rows.data());
        double tk = since(t0), ck = cpu_now() - c0;
        t0 = Clock::now();
        c0 = cpu_now();
        for (uint32_t l = 0; l < s.n_layers; l++)
            reader.read(reader.require(Role::O, l, s.d_model, s.d_v), buf.data(), rows.data());
        double to = since(t0), co = cpu_now() - c0;

        char tmpl[] = "/tmp/attn_bench_XXXXXX";
        std::string out = std::string(mkdtemp(tmpl)) + "/out";
        stk_job_params p{};
        p.struct_size = sizeof p;
        p.in_dir = dir.c_str();
        p.out_dir = out.c_str();
        p.r = r;
        p.rv = rv;
        p.threads = threads;
        size_t n = 0;
        if (stk_job_arena_size(&p, &n) != STK_OK) {
            std::fprintf(stderr, "%s\n", stk_last_error());
            return 1;
        }
        std::unique_ptr<uint8_t[]> mem(new uint8_t[n]);
        stk_job *job = nullptr;
        stk_open(&p, mem.get(), n, &job);
        double ts[STK_STAGE_COUNT + 1] = {}, cs[STK_STAGE_COUNT + 1] = {};
        for (int st = STK_STAGE_PARSE_TENSORS; st <= last_stage; st++) {
            t0 = Clock::now();
            c0 = cpu_now();
            stk_status status = stk_stage_run(job, stk_stage(st));
            ts[st] = since(t0);
            cs[st] = cpu_now() - c0;
            if (status != STK_OK && status != STK_E_NOT_IMPLEMENTED) {
                std::fprintf(stderr, "stage %d: %s\n", st, stk_last_error());
                return 1;
            }
        }
        stk_close(job);
        std::system(("rm -rf " + out.substr(0, out.size() - 4)).c_str());
        if (run == 0) continue;
        t_k.push_back(tk);
        t_o.push_back(to);
        t_prf.push_back(ts[STK_STAGE_PRF]);
        t_ov.push_back(ts[STK_STAGE_OVERLAYS]);
        t_mem.push_back(ts[STK_STAGE_MEMORY_FIT]);
        c_k.push_back(ck);
        c_o.push_back(co);
        c_prf.push_back(cs[STK_STAGE_PRF]);
        c_ov.push_back(cs[STK_STAGE_OVERLAYS]);
    }
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = dir.c_str();
    p.out_dir = "/nonexistent";
    p.r = r;
    p.rv = rv;
    p.threads = threads;
    p = normalize_params(p);
    ArenaSizer a1, a2, a3;
    auto model = describe_model(dir);
    const JobInputs in{p, model.get()};
    prf_build_size(in, a1);
    overlays_build_size(in, a2);
    memory_fit_size(in, a3);
    const double layer_mb = double(s.d_v * s.d_model * 4) / 1e6;
    double la[3];
    getloadavg(la, 3);
    std::printf("model %s: d_model %u, %u layers, d_kv %llu, d_v %llu; r %u, rv %u, threads %u, %d runs (medians), load %.2f\n",
                dir.c_str(), s.d_model, s.n_layers, (unsigned long long)s.d_kv, (unsigned long long)s.d_v, r, rv, threads, runs,
                la[0]);
    std::printf("floor: read W_K of every layer %.4f s, W_O %.4f s\n", median(t_k), median(t_o));
    std::printf("prf_build      %.4f s  = %.2fx the W_K floor   arena %.1f MB\n", median(t_prf), median(t_prf) / median(t_k),
                a1.total() / 1e6);
    std::printf("overlays_build %.4f s  = %.2fx the W_O floor   arena %.1f MB\n", median(t_ov), median(t_ov) / median(t_o),
                a2.total() / 1e6);
    std::printf("CPU seconds (all threads): floor W_K %.4f, W_O %.4f; prf_build %.4f (%.2fx), overlays_build %.4f (%.2fx)\n",
                median(c_k), median(c_o), median(c_prf), median(c_prf) / median(c_k), median(c_ov), median(c_ov) / median(c_o));
    std::printf("memory_fit     %.4f s                           arena %.3f MB\n", median(t_mem), a3.total() / 1e6);
    std::printf("one layer's W_O in f32: %.1f MB\n", layer_mb);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("peak RSS of the process: %.1f MB (includes the job arena, which the caller allocates whole)\n",
                ru.ru_maxrss / 1e3);
    return 0;
}
