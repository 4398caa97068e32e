#include "acceptance/runner.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ingest/model.h"

namespace stk {

const std::vector<AcceptanceSuite> &acceptance_suites() {
    static const std::vector<AcceptanceSuite> suites = {
        {"16.1 prf", acceptance_prf},
        {"16.2 linear", acceptance_linear},
        {"16.3 memory", acceptance_memory},
        {"16.4 bridge", acceptance_bridge},
        {"16.5 determinism", acceptance_determinism},
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

const ModelDescription &acceptance_model(const AcceptanceContext &ctx) {
    if (!ctx.model) ctx.model = describe_model(ctx.model_dir);
    return *ctx.model;
}

std::vector<AcceptanceRow> run_acceptance(const AcceptanceContext &ctx) {
    std::vector<AcceptanceRow> rows;
    for (const AcceptanceSuite &s : acceptance_suites()) {
        try {
            s.run(ctx, rows);
        } catch (const Error &e) {
            rows.push_back(acceptance_row(std::string(s.name) + " error", "the suite could not run", NAN, 0, "==", true,
                                          e.what()));
        }
    }
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
        const char *verdict = r.gating ? (r.pass ? "PASS" : "FAIL") : (r.pass ? "(meets)" : "(misses)");
        std::fprintf(out, "%-44s %14.6g %3s %-12.6g %-8s %s\n", r.test.c_str(), r.value, r.comparison.c_str(), r.threshold,
                     verdict, r.definition.c_str());
        if (!r.note.empty()) std::fprintf(out, "%-44s %14s %3s %-12s %-8s   note: %s\n", "", "", "", "", "", r.note.c_str());
    }
    size_t g = 0, gp = 0;
    for (const AcceptanceRow &r : rows)
        if (r.gating) {
            g++;
            gp += r.pass;
        }
    std::fprintf(out, "%zu gating rows, %zu passed; %zu reported rows (never fail the run)\n", g, gp, rows.size() - g);
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
             ", \"note\": " + jstr(r.note) + "}";
    }
    return o + "]}";
}

}  // namespace stk
