#include "acceptance/runner.h"

#include <cmath>
#include <cstring>

#include <ftw.h>
#include <stdlib.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "format/calib_stats.h"
#include "format/manifest.h"
#include "ingest/model.h"
#include "stk/stk.h"

namespace stk {

const std::vector<AcceptanceSuite> &acceptance_suites() {
    static const std::vector<AcceptanceSuite> suites = {
        {"16.1 prf", acceptance_prf},       {"16.2 linear", acceptance_linear},           {"16.3 memory", acceptance_memory},
        {"16.4 bridge", acceptance_bridge}, {"16.5 determinism", acceptance_determinism},
    };
    return suites;
}

AcceptanceRow acceptance_row(const std::string &test, const std::string &definition, double value, double threshold,
                             const char *comparison, bool gating, const std::string &note) {
    AcceptanceRow r;
    r.test = test;
    r.definition = definition;
    r.value = value;
    r.threshold = threshold;
    r.comparison = comparison;
    r.gating = gating;
    if (!std::strcmp(comparison, "<=")) r.pass = value <= threshold;
    else if (!std::strcmp(comparison, ">=")) r.pass = value >= threshold;
    else if (!std::strcmp(comparison, "==")) r.pass = value == threshold;
    else r.pass = false;
    r.note = note;
    return r;
}

TempDir::TempDir(const char *prefix) {
    const char *t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/" + prefix + "-XXXXXX";
    std::vector<char> b(tmpl.begin(), tmpl.end());
    b.push_back(0);
    if (!mkdtemp(b.data())) fail_errno("cannot create a temporary directory " + tmpl);
    path = b.data();
}

TempDir::~TempDir() {
    nftw(
        path.c_str(), [](const char *p, const struct stat *, int, struct FTW *) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
}

AcceptanceRow acceptance_skipped(const std::string &test, const std::string &definition, const std::string &reason) {
    AcceptanceRow r;
    r.test = test;
    r.definition = definition;
    r.value = NAN;
    r.skipped = true;
    r.note = "skipped: " + reason;
    return r;
}

std::string acceptance_calibration_sha256(const std::string &generation_dir) {
    static const char kPrefix[] = "calib sha256 ";
    const Manifest m = read_manifest(generation_dir + "/" + kManifestFileName);
    for (const ManifestRecord &r : m.records) {
        const std::string text(r.text, strnlen(r.text, sizeof r.text));
        if (r.stage == STK_STAGE_PARSE_TENSORS && r.kind == kRecordNote && text.rfind(kPrefix, 0) == 0)
            return text.substr(sizeof kPrefix - 1, 64);
    }
    return "";
}

AcceptanceRow acceptance_calibrated(const std::string &test, const std::string &definition, const std::string &sha256,
                                    const std::string &instead) {
    AcceptanceRow r = acceptance_skipped(test, definition, "");
    r.note = "skipped: calibrated: the generation was fitted to calibration statistics (sha256 " + sha256.substr(0, 16) +
             "...), which this row's data-free reference does not see; " + instead;
    return r;
}

// --calibration STATS: the statistics the manifest records, read whole (CalibStats checks every
// byte and computes the SHA-256 the manifest records).
static void check_calibration(const AcceptanceContext &ctx) {
    const std::string recorded = acceptance_calibration_sha256(ctx.out_dir);
    if (ctx.calibration.empty()) return;
    if (recorded.empty())
        throw_error(STK_E_INVALID_ARGUMENT,
                    "--calibration %s: %s was converted without calibration statistics (its manifest records none); "
                    "leave --calibration out",
                    ctx.calibration.c_str(), ctx.out_dir.c_str());
    acceptance_progress(ctx, "--calibration: the statistics' SHA-256 against the manifest's");
    const CalibStats st(ctx.calibration);
    if (st.digest_hex() != recorded)
        throw_error(STK_E_INVALID_ARGUMENT,
                    "--calibration %s is not the statistics %s was fitted to: their SHA-256 is %s, the manifest records %s; "
                    "give the statistics file the generation was converted with",
                    ctx.calibration.c_str(), ctx.out_dir.c_str(), st.digest_hex().c_str(), recorded.c_str());
}

void acceptance_check_model(const AcceptanceContext &ctx) {
    check_calibration(ctx);
    if (ctx.model_dir.empty()) return;
    const Manifest m = read_manifest(ctx.out_dir + "/" + kManifestFileName);
    const ManifestStage &pub = m.stages[STK_STAGE_PARSE_TENSORS - 1];
    if (pub.state != kStageRan) return;  // nothing recorded to compare with
    acceptance_progress(ctx, "--model: its weights against the manifest's parse_tensors digest");
    TempDir tmp("stk-acceptance-model");
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = ctx.model_dir.c_str();
    const std::string out = tmp.path + "/out";
    p.out_dir = out.c_str();
    p.threads = ctx.threads ? ctx.threads : 1;
    p.flags = STK_JOB_ALLOW_NONFINITE;  // the digest does not depend on it; the check must not refuse
    size_t bytes = 0;
    stk_status s = stk_job_arena_size(&p, &bytes);
    if (s != STK_OK) throw_error(s, "--model %s: %s", ctx.model_dir.c_str(), stk_last_error());
    std::unique_ptr<void, void (*)(void *)> arena(std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
    if (!arena) throw_error(STK_E_NOMEM, "--model %s: cannot allocate a %zu-byte arena", ctx.model_dir.c_str(), bytes);
    stk_job *job = nullptr;
    s = stk_open(&p, arena.get(), bytes, &job);
    if (s != STK_OK) throw_error(s, "--model %s: %s", ctx.model_dir.c_str(), stk_last_error());
    std::unique_ptr<stk_job, void (*)(stk_job *)> hold(job, stk_close);
    s = stk_stage_run(job, STK_STAGE_PARSE_TENSORS);
    if (s != STK_OK) throw_error(s, "--model %s: %s", ctx.model_dir.c_str(), stk_last_error());
    uint32_t crc = 0;
    uint64_t low64 = 0;
    s = stk_stage_digest(job, STK_STAGE_PARSE_TENSORS, &crc, &low64);
    if (s != STK_OK) throw_error(s, "--model %s: %s", ctx.model_dir.c_str(), stk_last_error());
    if (crc != pub.crc32c || low64 != pub.sha256_low64)
        throw_error(STK_E_INVALID_ARGUMENT,
                    "--model %s is not the model %s was converted from: its weights' parse_tensors digest is crc32c "
                    "%08x sha256_low64 %016llx, the manifest records crc32c %08x sha256_low64 %016llx; give the "
                    "checkpoint the generation was made from",
                    ctx.model_dir.c_str(), ctx.out_dir.c_str(), crc, (unsigned long long)low64, pub.crc32c,
                    (unsigned long long)pub.sha256_low64);
}

const ModelDescription &acceptance_model(const AcceptanceContext &ctx) {
    if (!ctx.model) ctx.model = describe_model(ctx.model_dir);
    return *ctx.model;
}

void acceptance_progress(const AcceptanceContext &ctx, const std::string &step) {
    if (ctx.progress) ctx.progress(ctx.progress_user, step.c_str(), ctx.suite, ctx.suites, ctx.rows ? uint32_t(ctx.rows->size()) : 0);
}

std::vector<AcceptanceRow> run_acceptance(const AcceptanceContext &ctx) {
    std::vector<AcceptanceRow> rows;
    ctx.suites = uint32_t(acceptance_suites().size());
    ctx.rows = &rows;
    ctx.suite = 0;
    for (const AcceptanceSuite &s : acceptance_suites()) {
        ctx.suite++;
        acceptance_progress(ctx, s.name);
        try {
            s.run(ctx, rows);
        } catch (const Error &e) {
            rows.push_back(
                acceptance_row(std::string(s.name) + " error", "the suite could not run", NAN, 0, "==", true, e.what()));
        }
    }
    ctx.rows = nullptr;  // the vector is returned (moved) below
    return rows;
}

bool acceptance_passed(const std::vector<AcceptanceRow> &rows) {
    for (const AcceptanceRow &r : rows)
        if (r.gating && !r.pass) return false;
    return true;
}

void print_acceptance_table(std::FILE *out, const std::vector<AcceptanceRow> &rows) {
    std::fprintf(out, "%-44s %14s %3s %-12s %-8s %s\n", "test", "measured", "", "threshold", "verdict", "definition / note");
    for (const AcceptanceRow &r : rows) {
        if (r.skipped) {
            std::fprintf(out, "%-44s %14s %3s %-12s %-8s %s\n", r.test.c_str(), "-", "", "-", "skipped", r.definition.c_str());
        } else {
            const char *verdict = r.gating ? (r.pass ? "PASS" : "FAIL") : (r.pass ? "(meets)" : "(misses)");
            std::fprintf(out, "%-44s %14.6g %3s %-12.6g %-8s %s\n", r.test.c_str(), r.value, r.comparison.c_str(), r.threshold,
                         verdict, r.definition.c_str());
        }
        if (!r.note.empty()) std::fprintf(out, "%-44s %14s %3s %-12s %-8s   note: %s\n", "", "", "", "", "", r.note.c_str());
    }
    size_t g = 0, gp = 0, sk = 0;
    for (const AcceptanceRow &r : rows) {
        sk += r.skipped;
        if (r.gating) {
            g++;
            gp += r.pass;
        }
    }
    std::fprintf(out, "%zu gating rows, %zu passed; %zu reported rows (never fail the run)", g, gp, rows.size() - g - sk);
    if (sk) std::fprintf(out, "; %zu skipped", sk);
    std::fputc('\n', out);
}

namespace {
std::string jstr(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += char(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += char(c);
        }
    }
    return o + "\"";
}
std::string jnum(double v) {
    if (!std::isfinite(v)) return "null";
    char b[40];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}
}  // namespace

std::string acceptance_json(const std::vector<AcceptanceRow> &rows) {
    std::string o = std::string("{\"passed\": ") + (acceptance_passed(rows) ? "true" : "false") + ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); i++) {
        const AcceptanceRow &r = rows[i];
        if (i) o += ", ";
        o += "{\"test\": " + jstr(r.test) + ", \"definition\": " + jstr(r.definition) + ", \"value\": " + jnum(r.value) +
             ", \"threshold\": " + jnum(r.threshold) + ", \"comparison\": " + jstr(r.comparison) +
             ", \"gating\": " + (r.gating ? "true" : "false") + ", \"pass\": " + (r.pass ? "true" : "false") +
             ", \"skipped\": " + (r.skipped ? "true" : "false") + ", \"note\": " + jstr(r.note) + "}";
    }
    return o + "]}";
}

}  // namespace stk
