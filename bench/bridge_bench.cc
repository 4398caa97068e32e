// bridge_init against the floor of reading the tensors it needs.
//
//   bridge_bench MODEL_DIR [runs=3] [threads=1]
//
// Per run: a fresh job; parse_tensors and the tokenizer stage untimed; the stages between them
// and bridge_init are marked done without running (bridge_init reads only the checkpoint), then
// bridge_init is timed alone.  The floor: reading the token embedding, the output embedding
// (untied) and every router to f32 from the page cache with the same reader, timed in the same
// process right before.  Prints medians and the ratio stage / floor.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "acceptance/acceptance.h"
#include "core/arena.h"
#include "format/array.h"
#include "stages/bridge_init.h"
#include "stages/attn_common.h"
#include "stages/job.h"
#include "stages/stages.h"
#include "stk/stk.h"

using namespace stk;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bridge_bench MODEL_DIR [runs] [threads]\n");
        return 2;
    }
    const std::string dir = argv[1];
    const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
    const uint32_t threads = argc > 3 ? uint32_t(std::atoi(argv[3])) : 1;
    auto desc = describe_model(dir);
    const ModelPlan &plan = desc->plan;
    std::vector<const PlanTensor *> reads;
    uint64_t most = 1;
    for (uint32_t i = 0; i < plan.n_streamed; i++) {
        const PlanTensor &t = plan.tensors[i];
        if ((t.role == Role::EMB && t.layer == kNoLayer) || (t.role == Role::LM_HEAD && !t.tied) || t.role == Role::ROUTER_GATE) {
            reads.push_back(&t);
            most = std::max(most, t.n_elements);
        }
    }
    std::vector<float> buf(most), rows(plan.max_row_floats + 1);
    std::vector<double> t_floor, t_bridge;
    for (int run = 0; run < runs + 1; run++) {  // run 0 warms the page cache and is dropped
        WeightReader reader(*desc->checkpoint, plan);
        auto t0 = Clock::now();
        for (const PlanTensor *t : reads) reader.read(*t, buf.data(), rows.data());
        const double tf = since(t0);

        char tmpl[] = "/tmp/bridge_bench_XXXXXX";
        std::string out = std::string(mkdtemp(tmpl)) + "/out";
        stk_job_params p{};
        p.struct_size = sizeof p;
        p.in_dir = dir.c_str();
        p.out_dir = out.c_str();
        p.threads = threads;
        const size_t n = job_arena_size(p);  // every stage's share; pages the others would use stay untouched
        std::unique_ptr<uint8_t[]> mem(new uint8_t[n]);
        Job *job = job_open(p, mem.get(), n);
        job_run_stage(*job, STK_STAGE_PARSE_TENSORS);
        try {
            job_run_stage(*job, STK_STAGE_TOKENIZER);
        } catch (...) {
        }
        for (int st = STK_STAGE_PRF; st < STK_STAGE_BRIDGE_INIT; st++) job->stages[st].done = true;
        t0 = Clock::now();
        job_run_stage(*job, STK_STAGE_BRIDGE_INIT);
        const double tb = since(t0);
        if (run == runs)  // the stage's records of the last run: hubs, Q8.8 clipping, guard counts
            for (uint32_t i = 0; i < job->manifest.n_records; i++) {
                const ManifestRecord &r = job->manifest.records[i];
                if (r.stage == STK_STAGE_BRIDGE_INIT)
                    std::printf("record: value %.6g bound %.6g  %s\n", r.value, r.bound, r.text);
            }
        if (run == runs) {  // 16.4 on the published legs of the last run
            const std::string arr = out + "/arrays/";
            ArrayReader qi(arr + "bridge_qDin.bin"), qo(arr + "bridge_qDout.bin"), si(arr + "bridge_qDin_scale.bin"),
                so(arr + "bridge_qDout_scale.bin");
            t0 = Clock::now();
            const BridgePrecheck pc = bridge_guard_precheck(
                reinterpret_cast<const int16_t *>(qi.payload()), reinterpret_cast<const int16_t *>(qo.payload()),
                reinterpret_cast<const float *>(si.payload()), reinterpret_cast<const float *>(so.payload()), qi.header().dims[0],
                uint32_t(qi.header().dims[1]), kBridgeK, 0x16'04);
            std::printf(
                "16.4: %llu rows, pass-rate %.4f at slack %g, %.4f at 2x, %.4f at 4x; 0.9 holds below slack %.4g (%.2f s)\n",
                (unsigned long long)pc.rows, pc.pass_rate(kBridgeGuardSlack), kBridgeGuardSlack,
                pc.pass_rate(2 * kBridgeGuardSlack), pc.pass_rate(4 * kBridgeGuardSlack), pc.slack_limit, since(t0));
        }
        job->~Job();
        std::system(("rm -rf " + out.substr(0, out.size() - 4)).c_str());
        if (run == 0) continue;
        t_floor.push_back(tf);
        t_bridge.push_back(tb);
    }
    double la[3];
    getloadavg(la, 3);
    std::printf("model %s: vocab x d_model %llu x %u, %zu tensors read; threads %u, %d runs (medians), load %.2f\n", dir.c_str(),
                (unsigned long long)reads[0]->dims[0], plan.config.d_model, reads.size(), threads, runs, la[0]);
    std::printf("floor: read the embedding(s) and routers to f32 %.3f s\n", median(t_floor));
    std::printf("bridge_init %.3f s = %.2fx the floor\n", median(t_bridge), median(t_bridge) / median(t_floor));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("peak RSS of the process: %.1f MB\n", ru.ru_maxrss / 1e3);
    return 0;
}
