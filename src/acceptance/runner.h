// `stk check --acceptance`: the list of acceptance suites, and the table they print.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "acceptance/acceptance.h"

namespace stk {

struct AcceptanceSuite {
    const char *name;  // "16.1 prf"
    void (*run)(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows);
};

// Every suite this build has, in the spec's order.
const std::vector<AcceptanceSuite> &acceptance_suites();

// Refuses (STK_E_INVALID_ARGUMENT) a --model whose weights are not the ones the generation was
// converted from: its parse_tensors digest (the content of every tensor, docs/format.md) against
// the one the manifest's stage table records.  Reads the weights once, writes nothing.
void acceptance_check_model(const AcceptanceContext &ctx);

// Run them all against ctx.  A suite that throws contributes one failing gating row naming it.
std::vector<AcceptanceRow> run_acceptance(const AcceptanceContext &ctx);

// True if every gating row passed.
bool acceptance_passed(const std::vector<AcceptanceRow> &rows);

// The table: test | measured | comparison threshold | verdict | definition / note.
void print_acceptance_table(std::FILE *out, const std::vector<AcceptanceRow> &rows);
// One JSON object: {"passed": bool, "rows": [{test, definition, value, threshold, comparison,
// gating, pass, skipped, note}, ...]} (non-finite values as null; a skipped row has value null).
std::string acceptance_json(const std::vector<AcceptanceRow> &rows);

// A temporary directory ($TMPDIR or /tmp, PREFIX-XXXXXX) removed with its contents when the
// holder goes.
struct TempDir {
    std::string path;
    explicit TempDir(const char *prefix);
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
};

// Helpers for the suites: a row, pass computed from value, threshold and comparison.
AcceptanceRow acceptance_row(const std::string &test, const std::string &definition, double value, double threshold,
                             const char *comparison, bool gating, const std::string &note = std::string());
// A row that was not measured: printed "skipped" with the reason, never a value or a verdict.
AcceptanceRow acceptance_skipped(const std::string &test, const std::string &definition, const std::string &reason);

}  // namespace stk
