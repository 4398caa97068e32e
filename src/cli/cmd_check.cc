// stk check --out DIR [--json]: verify a published generation (seed 12.7) through stk_verify.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "acceptance/runner.h"
#include "cli/cli.h"
#include "core/error.h"

namespace stk::cli {

static const char kCheckHelp[] =
    "usage: stk check --out DIR [--json] [--acceptance [--model DIR]]\n"
    "\n"
    "Verify a published output directory: the manifest (magic, schema digest, sizes, every\n"
    "bounded field, curr_hash) and every array it lists (header, header checksum, payload crc32c\n"
    "and sha256_low64, agreement with the manifest's table).  Stops at the first failure in\n"
    "manifest order and names the file and byte offset.\n"
    "\n"
    "  --out DIR   the output directory (holds sera_manifest.bin and arrays/)\n"
    "  --json      one JSON object on stdout instead of the summary\n"
    "  --acceptance  after verifying, run the acceptance tests of seed 16 the generation's\n"
    "              stages support (16.1 PRF, 16.3 memory) and print a table: test, measured\n"
    "              value, threshold, verdict, definition.  Gating rows can fail the run; reported\n"
    "              rows show model-scale figures beside the spec's threshold and never fail it\n"
    "              (docs/decisions.md, \"Acceptance\", defines every row)\n"
    "  --model DIR the checkpoint the generation was converted from: the model-scale rows and\n"
    "              the 16.3 surrogate need its weights (without it they say skipped)\n"
    "\n"
    "exit codes: 0 verified (and every gating acceptance row passed), 1 an acceptance row\n"
    "failed, 2 usage, 4 verification failed, 5 no such directory / I/O error\n";

// Statuses 20..39 are about the bytes of the generation: "verification failed".
static int check_exit_code(stk_status s) {
    if (s >= STK_E_TRUNCATED && s <= 39) return kExitVerifyFailed;
    return exit_code_for(s);
}

int cmd_check(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help") || args.flag("h")) {
        std::fputs(kCheckHelp, stdout);
        return kExitOk;
    }
    std::string out = args.get("out");
    bool json = args.flag("json");
    bool acceptance = args.flag("acceptance");
    std::string model = args.get("model");
    if (!args.finish("check")) return kExitUsage;
    if (!acceptance && !model.empty()) {
        std::fprintf(stderr, "stk check: --model goes with --acceptance\n");
        return kExitUsage;
    }
    if (out.empty() || !args.positional().empty()) {
        std::fprintf(stderr, "stk check: --out DIR is required (see stk check --help)\n");
        return kExitUsage;
    }

    progress("stk check: verifying %s ...", out.c_str());
    stk_verify_report report;
    std::memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    auto t0 = std::chrono::steady_clock::now();
    stk_status s = stk_verify(out.c_str(), &report);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress("%s", "");
    double gbps = secs > 0 ? double(report.bytes_checked) / secs / 1e9 : 0.0;

    if (s != STK_OK) {
        int code = check_exit_code(s);
        if (json) {
            std::printf(
                "{\"ok\": false, \"status\": %d, \"error\": %s, \"message\": %s, \"file\": %s, \"offset\": %llu, "
                "\"arrays_verified\": %u, \"exit_code\": %d}\n",
                int(s), json_escape(stk_status_str(s)).c_str(), json_escape(stk_last_error()).c_str(),
                json_escape(report.failed_file).c_str(), (unsigned long long)report.failed_offset, report.arrays_checked, code);
        }
        std::fprintf(stderr, "stk check: %s: %s\n", stk_status_str(s), stk_last_error());
        if (report.failed_file[0])
            std::fprintf(stderr, "stk check: FAILED at %s/%s, offset %llu (%u arrays verified before it)\n", out.c_str(),
                         report.failed_file, (unsigned long long)report.failed_offset, report.arrays_checked);
        return code;
    }
    if (acceptance) {
        AcceptanceContext ctx;
        ctx.out_dir = out;
        ctx.model_dir = model;
        ctx.threads = 1;  // the suites run single-threaded (their figures are seeded, not timed)
        std::vector<AcceptanceRow> rows;
        try {
            rows = run_acceptance(ctx);
        } catch (const Error &e) {
            std::fprintf(stderr, "stk check: acceptance: %s\n", e.what());
            return exit_code_for(e.status());
        }
        bool passed = acceptance_passed(rows);
        if (json) {
            std::printf("{\"ok\": true, \"out\": %s, \"arrays\": %u, \"bytes\": %llu, \"acceptance\": %s}\n",
                        json_escape(out).c_str(), report.arrays_checked, (unsigned long long)report.bytes_checked,
                        acceptance_json(rows).c_str());
        } else {
            std::printf("stk check: %s: OK, manifest and %u arrays verified\n", out.c_str(), report.arrays_checked);
            print_acceptance_table(stdout, rows);
            std::printf("stk check: acceptance %s\n", passed ? "PASSED (every gating row)" : "FAILED (a gating row failed)");
        }
        return passed ? kExitOk : kExitFailed;
    }
    if (json) {
        std::printf("{\"ok\": true, \"out\": %s, \"arrays\": %u, \"bytes\": %llu, \"seconds\": %.6f, \"gb_per_s\": %.3f}\n",
                    json_escape(out).c_str(), report.arrays_checked, (unsigned long long)report.bytes_checked, secs, gbps);
    } else {
        std::printf("stk check: %s: OK, manifest and %u arrays verified, %llu bytes in %.3f s (%.2f GB/s)\n", out.c_str(),
                    report.arrays_checked, (unsigned long long)report.bytes_checked, secs, gbps);
    }
    return kExitOk;
}

}  // namespace stk::cli
