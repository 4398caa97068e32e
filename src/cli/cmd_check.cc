// stk check --out DIR [--json]: verify a published generation (spec 12.7) through stk_verify.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "stk/stk.h"
#include "stk/stk_acceptance.h"

namespace stk::cli {

static const char kCheckHelp[] =
    "usage: stk check --out DIR [--json] [--acceptance [--model DIR] [--calibration STATS]]\n"
    "       stk check DIR [--json] [--acceptance [--model DIR] [--calibration STATS]]\n"
    "\n"
    "Verify a generations root (its current generation, and the prev_hash/curr_hash chain of the\n"
    "generations present, followed back from CURRENT) or one generation directory: the\n"
    "manifest (magic, schema digest, sizes, every\n"
    "bounded field, curr_hash) and every array it lists (header, header checksum, payload crc32c\n"
    "and sha256_low64, agreement with the manifest's table).  Verifies every array and reports\n"
    "every failure, the first in manifest order first, naming the file and byte offset; a payload\n"
    "that fails its checksum is located to the byte when another generation of the root holds\n"
    "the same array intact.\n"
    "\n"
    "  --out DIR   a generations root (holds CURRENT and generations/) or a generation\n"
    "              directory (holds sera_manifest.bin and arrays/); or give it as the only argument\n"
    "  --json      one JSON object on stdout instead of the summary (docs/cli.md)\n"
    "  --acceptance  after verifying, run the spec's acceptance tests that the generation's\n"
    "              stages support (16.1 PRF, 16.2 linear, 16.3 memory, 16.4 bridge, 16.5\n"
    "              determinism: two fresh conversions of --model at threads 1 and 2) and print a\n"
    "              table: test, measured value, threshold, verdict, definition.  Gating rows can\n"
    "              fail the run;\n"
    "              reported rows show model-scale figures beside the spec's threshold and never\n"
    "              fail it (docs/decisions.md, \"Acceptance\", defines every row)\n"
    "  --model DIR the checkpoint the generation was converted from: the model-scale rows and\n"
    "              the 16.3 surrogate and 16.5 need it (without it they say skipped).  A model\n"
    "              whose weights are not the generation's source (their parse_tensors digest\n"
    "              differs from the manifest's) is refused before any row runs\n"
    "  --calibration STATS  the statistics a `convert --calibration` generation was fitted to: their\n"
    "              SHA-256 must be the one the manifest records (refused otherwise, and for a\n"
    "              data-free generation); 16.5's reruns then convert with them.  Without it, on a\n"
    "              calibrated generation, the rows whose reference is data-free (16.1\n"
    "              prf_W-reproducible, 16.2's dictionary rows, 16.5 published/rerun) say skipped:\n"
    "              calibrated, never FAIL\n"
    "\n"
    "exit codes: 0 verified (and every gating acceptance row passed), 1 an acceptance row\n"
    "failed, --model is not the generation's source or --calibration not its statistics,\n"
    "2 usage, 4 verification failed,\n"
    "5 no such directory / I/O error\n";

// Statuses 20..39 are about the bytes of the generation: "verification failed".
static int check_exit_code(stk_status s) {
    if (s >= STK_E_TRUNCATED && s <= 39) return kExitVerifyFailed;
    return exit_code_for(s);
}

// For a damaged array of a root's generation (rel = "generations/NAME/arrays/X.bin"): the first
// byte where it differs from an intact copy in another generation (stk_locate_damage).
static bool locate_damage(const std::string &out, const std::string &rel, uint64_t *at, std::string *witness) {
    char who[128];
    if (stk_locate_damage(out.c_str(), rel.c_str(), at, who, sizeof who) != STK_OK) return false;
    *witness = who;
    return true;
}

// On a terminal: "stk check: [2/5] 16.2 linear: FFN 3/30  12 rows  41 s" on stderr as the
// acceptance run goes (a model-scale run takes minutes), cleared before the table.
static void acceptance_ticker(void *user, const char *step, uint32_t suite, uint32_t suites, uint32_t rows) {
    const auto *t0 = static_cast<const std::chrono::steady_clock::time_point *>(user);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - *t0).count();
    if (suite == 0) progress("stk check: %s  %.0f s", step, s);
    else progress("stk check: [%u/%u] %s  %u rows  %.0f s", suite, suites, step, rows, s);
}

// --acceptance on the verified generation `dir`: the table (or the JSON object), and the verdict
// as the exit code.
static int run_acceptance_rows(const std::string &out, const std::string &dir, const std::string &model,
                               const std::string &calibration, const char *line, const stk_verify_report &report, bool json) {
    stk_acceptance_params ap{};
    ap.struct_size = sizeof ap;
    ap.generation_dir = dir.c_str();
    ap.model_dir = model.c_str();
    ap.calibration = calibration.empty() ? nullptr : calibration.c_str();
    ap.threads = 1;  // the suites run single-threaded (their figures are seeded, not timed)
    auto t0 = std::chrono::steady_clock::now();
    ap.progress = acceptance_ticker;  // progress() prints only on a terminal
    ap.progress_user = &t0;
    // A --model that is not the generation's source (or --calibration not its statistics) would
    // fail rows for the wrong reason.
    // Refused before any row runs: exit 1 (the input was refused), not a usage error.
    stk_status st = stk_acceptance_check_model(&ap);
    progress("%s", "");
    if (st == STK_E_INVALID_ARGUMENT) {
        if (json) json_result("check", kExitFailed, st, stk_last_error()).str("out", out).print();
        std::fprintf(stderr, "stk check: %s\n", stk_last_error());
        return kExitFailed;
    }
    if (st != STK_OK) return report_failure("check", st, json);
    stk_acceptance *result = nullptr;
    uint32_t rows = 0, passed = 0;
    const char *table = nullptr, *table_json = nullptr;
    st = stk_acceptance_run(&ap, &result);
    progress("%s", "");  // the ticker's line cleared
    if (st == STK_OK) st = stk_acceptance_summary(result, &rows, &passed);
    if (st == STK_OK) st = stk_acceptance_table(result, &table);
    if (st == STK_OK) st = stk_acceptance_json(result, &table_json);
    if (st != STK_OK) {
        stk_acceptance_close(result);
        return report_failure("check", st, json);
    }
    int code = passed ? kExitOk : kExitFailed;
    if (json) {
        json_result("check", code, STK_OK,  // verified; the verdict is the exit code and "ok"
                    std::string(line) + (passed ? "; acceptance passed" : "; acceptance FAILED (a gating row failed)"))
            .str("out", out)
            .unum("arrays", report.arrays_checked)
            .unum("bytes", report.bytes_checked)
            .raw("acceptance", table_json)
            .print();
    } else {
        std::printf("stk check: %s\n", line);
        std::fputs(table, stdout);
        std::printf("stk check: acceptance %s\n", passed ? "PASSED (every gating row)" : "FAILED (a gating row failed)");
    }
    stk_acceptance_close(result);
    return code;
}

int cmd_check(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kCheckHelp, stdout);
        return kExitOk;
    }
    std::string out = args.get("out");
    std::string model = args.get("model");
    std::string calibration = args.get("calibration");
    bool json = args.flag("json");
    bool acceptance = args.flag("acceptance");
    if (!args.finish("check", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!out.empty())
            return report_usage("check", "the directory is given twice (--out and '" + args.positional()[0] + "')", json);
        out = args.positional()[0];
    }
    if (!acceptance && !model.empty()) return report_usage("check", "--model goes with --acceptance", json);
    if (!acceptance && !calibration.empty()) return report_usage("check", "--calibration goes with --acceptance", json);
    if (out.empty()) return report_usage("check", "--out DIR is required", json);

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
        const std::string msg = stk_last_error();  // before locate_damage, which may set another
        // One checksum covers a whole payload; where another generation of the root holds the same
        // array (same digests) intact, a byte comparison names the damaged block.
        uint64_t damaged_at = 0;
        std::string witness;
        const bool located =
            s == STK_E_CHECKSUM && report.failed_file[0] && locate_damage(out, report.failed_file, &damaged_at, &witness);
        if (located) report.failed_offset = damaged_at;
        if (json)
            json_result("check", code, s, msg)
                .str("out", out)
                .str("file", report.failed_file)
                .unum("offset", report.failed_offset)
                .unum("arrays_verified", report.arrays_checked)
                .print();
        std::fprintf(stderr, "stk check: %s: %s\n", stk_status_str(s), msg.c_str());
        if (located)
            std::fprintf(stderr,
                         "stk check: the first damaged byte is at offset %llu (4 KiB block %llu at %llu): compared "
                         "with the identical array of generation %s\n",
                         (unsigned long long)damaged_at, (unsigned long long)(damaged_at / 4096),
                         (unsigned long long)(damaged_at / 4096 * 4096), witness.c_str());
        if (report.failed_file[0])
            std::fprintf(stderr, "stk check: FAILED at %s/%s, offset %llu (%u arrays verified before it)\n", out.c_str(),
                         report.failed_file, (unsigned long long)report.failed_offset, report.arrays_checked);
        return code;
    }
    // A root: the chain of generations, from CURRENT back through prev_hash.
    std::vector<Generation> chain;  // newest first
    uint32_t kind = STK_PATH_OTHER;
    const bool root = stk_path_kind_of(out.c_str(), &kind) == STK_OK && kind == STK_PATH_ROOT;
    if (root) {
        s = root_generations(stk_root_chain, out, &chain);
        if (s != STK_OK) {
            int code = check_exit_code(s);
            if (json) json_result("check", code, s, stk_last_error()).str("out", out).str("file", STK_CURRENT_FILE_NAME).print();
            std::fprintf(stderr, "stk check: %s: chain: %s\n", stk_status_str(s), stk_last_error());
            return code;
        }
    }
    std::string chain_text;
    if (root) {
        chain_text = "; current generation " + std::string(chain.front().e.name) + ", chain of " + std::to_string(chain.size()) +
                     " generation" + (chain.size() == 1 ? "" : "s") + " linked back from CURRENT";
        static const uint8_t zero[32] = {};
        if (std::memcmp(chain.back().e.prev_hash, zero, 32) != 0) chain_text += " (the oldest names a removed predecessor)";
    }
    std::vector<std::string> chain_names;
    for (const Generation &g : chain) chain_names.push_back(json_escape(g.e.name));
    char line[1024];
    std::snprintf(line, sizeof line, "%s: OK, manifest and %u arrays verified, %llu bytes (%s) in %.3f s (%.2f GB/s)",
                  out.c_str(), report.arrays_checked, (unsigned long long)report.bytes_checked,
                  human_bytes(report.bytes_checked).c_str(), secs, gbps);
    // The profile (docs/format.md "Runtime block"): a faithful generation says so, with its window.
    std::string profile = "default";
    {
        stk_manifest *mf = nullptr;
        stk_manifest_info mi = {};
        mi.struct_size = sizeof mi;
        const std::string gen = root ? out + "/" + STK_GENERATIONS_DIR_NAME + "/" + chain.front().e.name : out;
        if (stk_manifest_open(gen.c_str(), &mf) == STK_OK && stk_manifest_get_info(mf, &mi) == STK_OK && mi.profile == 1)
            profile = "faithful";
        if (profile == "faithful")
            chain_text += "; profile faithful (" + std::to_string(mi.runtime_sinks) + " sinks + " +
                          std::to_string(mi.runtime_window) + " window, FFN " + ffn_dtype_label(mi.runtime_ffn_dtype) +
                          ", policy " + policy_label(mi.runtime_policy) + ")";
        stk_manifest_close(mf);
    }
    std::string full_line = std::string(line) + chain_text;
    std::snprintf(line, sizeof line, "%s", full_line.c_str());
    if (acceptance)
        return run_acceptance_rows(out, root ? out + "/" + STK_GENERATIONS_DIR_NAME + "/" + chain.front().e.name : out, model,
                                   calibration, line, report, json);
    if (json) {
        json_result("check", kExitOk, STK_OK, line)
            .str("out", out)
            .unum("arrays", report.arrays_checked)
            .unum("bytes", report.bytes_checked)
            .real("seconds", secs)
            .real("gb_per_s", gbps)
            .boolean("root", root)
            .str("profile", profile)
            .str_or_null("generation", root ? chain.front().e.name : nullptr)
            .raw("chain", json_array(chain_names))
            .print();
    } else {
        std::printf("stk check: %s\n", line);
        if (report.arrays_checked == 0)
            std::printf(
                "stk check: note: the generation holds no arrays (every feature disabled); only the manifest "
                "was verified\n");
    }
    return kExitOk;
}

}  // namespace stk::cli
