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

// Run them all against ctx.  A suite that throws contributes one failing gating row naming it.
std::vector<AcceptanceRow> run_acceptance(const AcceptanceContext &ctx);

// True if every gating row passed.
bool acceptance_passed(const std::vector<AcceptanceRow> &rows);

// The table: test | measured | comparison threshold | verdict | definition / note.
void print_acceptance_table(std::FILE *out, const std::vector<AcceptanceRow> &rows);
// One JSON object: {"passed": bool, "rows": [{test, definition, value, threshold, comparison,
// gating, pass, note}, ...]} (non-finite values as null).
std::string acceptance_json(const std::vector<AcceptanceRow> &rows);

// Helpers for the suites: a row, pass computed from value, threshold and comparison.
AcceptanceRow acceptance_row(const std::string &test, const std::string &definition, double value, double threshold,
                             const char *comparison, bool gating, const std::string &note = std::string());

}  // namespace stk
