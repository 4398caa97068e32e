// stk convert: run the DAG of seed 15.2 over a checkpoint directory inside one arena.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk convert --in DIR --out DIR [options]\n"
    "\n"
    "Project the HuggingFace checkpoint in --in (config.json, safetensors or pytorch_model.bin,\n"
    "tokenizer files) into Sera arrays under --out/arrays and publish --out/sera_manifest.bin.\n"
    "\n"
    "  --in DIR        model directory (or a single checkpoint file)\n"
    "  --out DIR       output directory; must not already hold a generation\n"
    "  --r N           PRF rank (default 512)\n"
    "  --rv N          overlay rank (default 12)\n"
    "  --Ltok N        longest token piece in bytes (default 8)\n"
    "  --topL N        FFN top-L (default 12)\n"
    "  --threads N     worker threads (default 1); the output bytes do not depend on it\n"
    "  --partial       publish even if some stages are not implemented yet (they are recorded\n"
    "                  as disabled in the manifest); without it such a run exits with code 3\n"
    "  --allow-uncertified-tokenizer   build the greedy tokenizer tables even when\n"
    "                  Sardinas-Patterson rejects the vocabulary (recorded as uncertified)\n"
    "  --allow-nonfinite   accept NaN/Inf weights (counted and recorded) instead of refusing\n"
    "  --json          print a JSON report on stdout\n"
    "\n"
    "exit codes: 0 ok, 1 input refused or a stage failed, 2 usage, 3 a stage is not implemented\n"
    "(without --partial), 5 file system error\n";

struct StageResult {
    stk_stage stage;
    stk_status status;
    std::string message;
    double seconds;
    uint32_t crc = 0;
    uint64_t sha = 0;
};

int cmd_convert(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    stk_job_params p{};
    p.struct_size = sizeof p;
    std::string in = args.get("in"), out = args.get("out");
    p.r = args.get_u32("r", 0);
    p.rv = args.get_u32("rv", 0);
    p.l_tok = args.get_u32("Ltok", 0);
    p.top_l = args.get_u32("topL", 0);
    p.threads = args.get_u32("threads", 0);
    bool partial = args.flag("partial");
    bool json = args.flag("json");
    if (args.flag("allow-uncertified-tokenizer")) p.flags |= STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
    if (args.flag("allow-nonfinite")) p.flags |= STK_JOB_ALLOW_NONFINITE;
    if (!args.finish("convert")) return kExitUsage;
    if (in.empty() || out.empty()) {
        std::fprintf(stderr, "stk convert: --in and --out are required (see stk convert --help)\n");
        return kExitUsage;
    }
    p.in_dir = in.c_str();
    p.out_dir = out.c_str();

    size_t arena_bytes = 0;
    stk_status s = stk_job_arena_size(&p, &arena_bytes);
    if (s != STK_OK) return report_failure("convert", s, json);
    void *arena = std::aligned_alloc(64, (arena_bytes + 63) / 64 * 64);
    if (!arena) {
        std::fprintf(stderr, "stk convert: cannot allocate the %zu-byte arena\n", arena_bytes);
        return kExitFailed;
    }
    stk_job *job = nullptr;
    s = stk_open(&p, arena, arena_bytes, &job);
    if (s != STK_OK) {
        std::free(arena);
        return report_failure("convert", s, json);
    }

    std::vector<StageResult> results;
    int exit_code = kExitOk;
    bool missing = false;
    for (int i = 1; i <= STK_STAGE_COUNT; i++) {
        stk_stage st = stk_stage(i);
        // Without --partial, nothing is published when a stage is missing: stop before the manifest.
        if (st == STK_STAGE_MANIFEST_EMIT && missing && !partial) break;
        progress("stk convert: %s ...", stk_stage_name(st));
        auto t0 = std::chrono::steady_clock::now();
        s = stk_stage_run(job, st);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        StageResult r{st, s, s == STK_OK ? "" : stk_last_error(), secs};
        if (s == STK_OK) stk_stage_digest(job, st, &r.crc, &r.sha);
        results.push_back(r);
        progress("%s", "");
        if (s == STK_E_NOT_IMPLEMENTED) {
            missing = true;
            std::fprintf(stderr, "stk convert: NOT IMPLEMENTED: stage %s: nothing written, feature disabled\n",
                         stk_stage_name(st));
            continue;
        }
        if (s != STK_OK) {
            std::fprintf(stderr, "stk convert: stage %s failed: %s: %s\n", stk_stage_name(st), stk_status_str(s),
                         r.message.c_str());
            exit_code = exit_code_for(s);
            break;
        }
        if (!json)
            std::fprintf(stderr, "stk convert: %-24s ok  %8.3f s  crc32c %08x  sha256_low64 %016llx\n",
                         stk_stage_name(st), secs, r.crc, (unsigned long long)r.sha);
    }
    if (exit_code == kExitOk && missing && !partial) {
        std::fprintf(stderr,
                     "stk convert: some stages are not implemented; nothing was published (no manifest).\n"
                     "             Use --partial to publish a generation with those features disabled.\n");
        exit_code = kExitNotImplemented;
    }
    if (json) {
        std::printf("{\"ok\": %s, \"exit_code\": %d, \"out\": %s, \"arena_bytes\": %zu, \"stages\": [",
                    exit_code == kExitOk ? "true" : "false", exit_code, json_escape(out).c_str(), arena_bytes);
        for (size_t i = 0; i < results.size(); i++) {
            const StageResult &r = results[i];
            char digest[64];
            std::snprintf(digest, sizeof digest, "\"crc32c\": \"%08x\", \"sha256_low64\": \"%016llx\"", r.crc,
                          (unsigned long long)r.sha);
            std::printf("%s{\"stage\": %s, \"status\": %s, \"seconds\": %.6f, %s, \"message\": %s}", i ? ", " : "",
                        json_escape(stk_stage_name(r.stage)).c_str(),
                        json_escape(r.status == STK_OK ? "ok"
                                    : r.status == STK_E_NOT_IMPLEMENTED ? "not_implemented"
                                                                        : stk_status_str(r.status))
                            .c_str(),
                        r.seconds, digest, json_escape(r.message).c_str());
        }
        std::printf("]}\n");
    }
    stk_close(job);
    std::free(arena);
    return exit_code;
}

}  // namespace stk::cli
