// Acceptance tests of seed 16 run against a published generation (`stk check --acceptance`).
//
// Each test contributes rows to one table.  A row is either gating (it can fail, and a failure
// makes `stk check --acceptance` exit non-zero) or reported (a figure a user needs, printed
// beside the gating rows so nobody mistakes an easy pass for the spec's claim; it never fails
// the run).  Where a spec threshold is not reachable under an honest definition, the reported row
// carries the spec's threshold and says so in its note; the table never moves to an easy point.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stk {

struct ModelDescription;  // src/ingest/model.h

struct AcceptanceRow {
    std::string test;        // the spec's number and a short name: "16.1 prf-estimator-mean"
    std::string definition;  // what exactly is measured, in one line (distribution, seed, trials)
    double value = 0;        // the measured value
    double threshold = 0;    // the bound it is held to (or the spec's bound, for a reported row)
    std::string comparison;  // "<=" or ">=": how value is held to threshold
    bool gating = false;     // true: a failure fails the run
    bool pass = false;       // value meets threshold under comparison
    std::string note;        // where it falls short and why, or "" (printed in the table)
    bool skipped = false;    // not measured (note says why): no value, no verdict, never fails
};

struct AcceptanceContext {
    std::string out_dir;    // the published generation (already verified by stk_verify)
    std::string model_dir;  // the checkpoint it was converted from ("" if not given: tests that
                            // need the weights report themselves as skipped in a note row)
    unsigned threads = 1;
    // --calibration STATS ("" if not given): checked against the manifest's recorded SHA-256 by
    // acceptance_check_model; the reruns convert with it.
    std::string calibration;
    // The checkpoint described once for every suite that reads it (acceptance_model fills it).
    mutable std::shared_ptr<const ModelDescription> model;
    // The caller's display (stk_acceptance_params.progress): the runner sets suite/suites/rows.
    void (*progress)(void *user, const char *step, uint32_t suite, uint32_t suites, uint32_t rows) = nullptr;
    void *progress_user = nullptr;
    mutable uint32_t suite = 0, suites = 0;
    mutable const std::vector<AcceptanceRow> *rows = nullptr;
};

// The SHA-256 (hex) of the calibration statistics the generation was fitted to, as its manifest
// records it ("calib sha256 HEX" note of parse_tensors); "" for a data-free generation.
std::string acceptance_calibration_sha256(const std::string &generation_dir);

// A row that compares a calibrated generation with what only a data-free conversion gives (the
// data-free generator, the exact collapse, a rerun without the statistics): not measured, its
// note saying "calibrated", the statistics' digest, and what would measure it.
AcceptanceRow acceptance_calibrated(const std::string &test, const std::string &definition, const std::string &sha256,
                                    const std::string &instead);

// Tells the caller's display what starts now (a suite's long step: a layer, a conversion).
void acceptance_progress(const AcceptanceContext &ctx, const std::string &step);

// model_dir described (config, mapped checkpoint, plan): on first use, then shared by the suites
// that run on this context.
const ModelDescription &acceptance_model(const AcceptanceContext &ctx);

// One acceptance suite per module; each appends its rows.  A suite whose module is not in the
// generation (its arrays absent, its feature disabled in the manifest) appends nothing.
void acceptance_prf(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows);     // 16.1
void acceptance_linear(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows);  // 16.2
void acceptance_memory(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows);  // 16.3
void acceptance_bridge(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows);  // 16.4

// 16.4's synthetic guard precheck (src/acceptance/bridge.cc): for each sampled token row of the
// published legs (qin, qout [v, h] i16, scales [v]), the ratio m / (sd_in + sd_out) of each of
// the K pairs of h synthetic hubs drawn from the row's own statistics; a pair passes at slack
// beta iff its ratio > beta.
struct BridgePrecheck {
    uint64_t rows = 0;
    std::vector<double> ratios;  // ascending; -inf for m <= 0
    double slack_limit = 0;      // pass_rate(beta) >= 0.9 iff beta < slack_limit
    double pass_rate(double slack) const;
};
BridgePrecheck bridge_guard_precheck(const int16_t *qin, const int16_t *qout, const float *s_in, const float *s_out, uint64_t v,
                                     uint32_t h, uint32_t k, uint64_t seed);
void acceptance_determinism(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows);  // 16.5

// 16.5's comparison of two generations converted from model_dir: arrays (payload sha256_low64),
// manifest bytes, replay snapshot; three gating rows and one reported, labelled `label`.
// `chained`: `a` names a predecessor `b` cannot have, so the manifests' last 64 bytes (prev_hash,
// curr_hash) are left out of the comparison.
void acceptance_compare_generations(const std::string &a, const std::string &b, const std::string &model_dir,
                                    const std::string &label, std::vector<AcceptanceRow> &rows, bool chained = false);

}  // namespace stk
