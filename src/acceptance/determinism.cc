// Acceptance 16.5, deterministic replay: two full conversions of the model (threads 1 and 2)
// give the same sha256_low64 for every array, the same manifest bytes, and the same replay
// diagnostics; the published generation is compared with them too when its parameters can be
// recovered from its seed_digest.  docs/decisions.md "Acceptance 16.5".
#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "acceptance/runner.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "format/array.h"
#include "format/manifest.h"
#include "runtime/replay.h"
#include "stages/stages.h"
#include "stk/stk.h"

namespace stk {

namespace {

constexpr const char *kPrompt = "Hello.";  // seed 15.1's replay prompt

std::vector<uint8_t> read_all(const std::string &path) {
    MappedFile f(path);
    return std::vector<uint8_t>(f.data(), f.data() + f.size());
}

// A full conversion (every stage; not-implemented ones skipped, as `stk convert --partial`).
// Returns the generation directory: `out` itself, or with STK_JOB_PUBLISH_ROOT (every `stk
// convert` sets it: the flag is part of seed_digest) the generation published into the root `out`.
std::string convert(const std::string &model_dir, const std::string &out, stk_job_params p, unsigned threads) {
    p.struct_size = sizeof p;
    p.in_dir = model_dir.c_str();
    p.out_dir = out.c_str();
    p.threads = threads;
    size_t bytes = 0;
    stk_status s = stk_job_arena_size(&p, &bytes);
    if (s != STK_OK) throw_error(s, "16.5: %s", stk_last_error());
    std::unique_ptr<void, void (*)(void *)> arena(std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
    if (!arena) throw_error(STK_E_NOMEM, "16.5: cannot allocate a %zu-byte arena", bytes);
    stk_job *job = nullptr;
    s = stk_open(&p, arena.get(), bytes, &job);
    if (s != STK_OK) throw_error(s, "16.5: %s", stk_last_error());
    std::unique_ptr<stk_job, void (*)(stk_job *)> hold(job, stk_close);
    for (int i = 1; i <= STK_STAGE_COUNT; i++) {
        s = stk_stage_run(job, stk_stage(i));
        if (s != STK_OK && s != STK_E_NOT_IMPLEMENTED)
            throw_error(s, "16.5: conversion at threads %u, stage %s: %s", threads, stk_stage_name(stk_stage(i)),
                        stk_last_error());
    }
    if (!(p.flags & STK_JOB_PUBLISH_ROOT)) return out;
    const char *dir = nullptr;
    s = stk_job_generation_dir(job, &dir);
    if (s != STK_OK) throw_error(s, "16.5: %s", stk_last_error());
    return dir;
}

// The parameters of a published generation: its seed_digest over (r, rv, l_tok, top_l, flags,
// master seed 0) searched over top_l 1..256, l_tok 1..64 and every combination of the four
// flags (STK_JOB_PUBLISH_ROOT included: `stk convert` always sets it), with r and r_v from the
// manifest (their defaults when prf / overlays were not produced).
bool recover_params(const Manifest &m, stk_job_params *out) {
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.r = m.fields.prf.r ? m.fields.prf.r : 512;
    p.rv = m.fields.overlays.r_v ? m.fields.overlays.r_v : 12;
    for (uint32_t flags = 0; flags < 16; flags++)
        for (uint32_t l_tok = 1; l_tok <= 64; l_tok++)
            for (uint32_t top_l = 1; top_l <= 256; top_l++) {
                p.flags = flags;
                p.l_tok = l_tok;
                p.top_l = top_l;
                uint8_t d[32];
                params_seed_digest(p, 0, d);
                if (std::memcmp(d, m.fields.seed_digest, 32) == 0) {
                    *out = p;
                    return true;
                }
            }
    return false;
}

}  // namespace

void acceptance_compare_generations(const std::string &a, const std::string &b, const std::string &model_dir,
                                    const std::string &label, std::vector<AcceptanceRow> &rows, bool chained) {
    const Manifest ma = read_manifest(a + "/" + kManifestFileName), mb = read_manifest(b + "/" + kManifestFileName);
    // Every array's sha256_low64 computed from the file's payload (not taken from a manifest).
    auto low64 = [](const std::string &path) {
        std::vector<uint8_t> f = read_all(path);
        if (f.size() < kArrayHeaderSize) throw_error(STK_E_TRUNCATED, "%s: shorter than an array header", path.c_str());
        return sha256(f.data() + kArrayHeaderSize, f.size() - kArrayHeaderSize).low64();
    };
    std::map<std::string, uint64_t> hb;
    for (const ManifestArray &x : mb.arrays) hb[x.name] = low64(b + "/arrays/" + x.name);
    size_t differ = 0, compared = 0;
    std::string names;
    for (const ManifestArray &x : ma.arrays) {
        compared++;
        auto it = hb.find(x.name);
        if (it == hb.end() || it->second != low64(a + "/arrays/" + x.name)) {
            differ++;
            names += std::string(names.empty() ? "" : ", ") + x.name;
        }
        if (it != hb.end()) hb.erase(it);
    }
    for (const auto &left : hb) {
        differ++;
        names += std::string(names.empty() ? "" : ", ") + left.first + " (only in the second)";
    }
    rows.push_back(acceptance_row(
        "16.5 arrays identical (" + label + ")",
        "arrays whose payload sha256_low64 differs, of " + std::to_string(compared) + " compared (computed from the files)",
        double(differ), 0, "<=", true, names.empty() ? "" : "differ: " + names));
    rows.push_back(acceptance_row("16.5 arrays compared (" + label + ")", "arrays in the first generation", double(compared), 1,
                                  ">=", false));
    // The manifests: every byte (nothing in them depends on the thread count or the time).  A
    // generation chained in its root names its predecessor (prev_hash, and so curr_hash) where a
    // rerun into a fresh root names none: then the 64 hash bytes at the end are left out.
    std::vector<uint8_t> fa = read_all(a + "/" + kManifestFileName), fb = read_all(b + "/" + kManifestFileName);
    const size_t tail = chained ? 64 : 0;
    if (fa.size() < tail || fb.size() < tail) throw_error(STK_E_TRUNCATED, "16.5: a manifest shorter than its hashes");
    const size_t na = fa.size() - tail, nb = fb.size() - tail;
    size_t bytes_differ = na > nb ? na - nb : nb - na;
    for (size_t i = 0; i < std::min(na, nb); i++) bytes_differ += fa[i] != fb[i];
    rows.push_back(acceptance_row("16.5 manifest identical (" + label + ")",
                                  chained ? "bytes of sera_manifest.bin before prev_hash that differ (the published one is "
                                            "chained: prev_hash and curr_hash name its root's chain)"
                                          : "bytes of sera_manifest.bin that differ (curr_hash included)",
                                  double(bytes_differ), 0, "<=", true));
    // The replay diagnostics snapshot of the same prompt.
    // A generation that does not verify (a doctored array) cannot be replayed: a failing row.
    std::string sa, sb;
    try {
        sa = replay_snapshot(a, kPrompt, model_dir);
        sb = replay_snapshot(b, kPrompt, model_dir);
    } catch (const Error &e) {
        rows.push_back(acceptance_row("16.5 replay identical (" + label + ")", "the replay snapshot of both generations", NAN, 0,
                                      "<=", true, std::string("replay failed: ") + e.what()));
        return;
    }
    size_t la = 0, lines_differ = 0;
    for (size_t pa = 0, pb = 0; pa < sa.size() || pb < sb.size(); la++) {
        size_t ea = sa.find('\n', pa), eb = sb.find('\n', pb);
        if (ea == std::string::npos) ea = sa.size();
        if (eb == std::string::npos) eb = sb.size();
        lines_differ += sa.compare(pa, ea - pa, sb, pb, eb - pb) != 0;
        pa = std::min(sa.size(), ea + 1);
        pb = std::min(sb.size(), eb + 1);
    }
    size_t dg = sa.rfind("state digest ");
    rows.push_back(
        acceptance_row("16.5 replay identical (" + label + ")",
                       std::string("lines of the replay snapshot of \"") + kPrompt + "\" that differ, of " + std::to_string(la),
                       double(lines_differ), 0, "<=", true,
                       dg == std::string::npos ? "" : sa.substr(dg, std::min<size_t>(29, sa.size() - dg)) + "..."));
}

void acceptance_determinism(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows) {
    if (ctx.model_dir.empty()) {
        rows.push_back(
            acceptance_skipped("16.5 determinism", "two fresh conversions of the model, compared", "needs --model DIR"));
        return;
    }
    const Manifest pub = read_manifest(ctx.out_dir + "/" + kManifestFileName);
    stk_job_params p{};
    const bool recovered = recover_params(pub, &p);
    if (!recovered) {
        p = stk_job_params{};
        p.struct_size = sizeof p;
    }
    // A calibrated generation reruns on its statistics (acceptance_check_model verified them
    // against the manifest's SHA-256); without them the reruns are data-free, so they are compared
    // with each other only, never with the published generation.
    const std::string calib = acceptance_calibration_sha256(ctx.out_dir);
    const bool data_free_rerun = !calib.empty() && ctx.calibration.empty();
    if (!calib.empty() && !ctx.calibration.empty()) p.calibration = ctx.calibration.c_str();
    const char *with = data_free_rerun ? " (data-free)" : !calib.empty() ? " on the calibration statistics" : "";
    TempDir tmp("stk-acceptance-16.5");
    acceptance_progress(ctx, std::string("16.5 determinism: a fresh conversion at threads 1") + with);
    const std::string one = convert(ctx.model_dir, tmp.path + "/threads1", p, 1);
    acceptance_progress(ctx, std::string("16.5 determinism: a fresh conversion at threads 2") + with);
    const std::string two = convert(ctx.model_dir, tmp.path + "/threads2", p, 2);
    acceptance_progress(ctx, "16.5 determinism: comparing the generations and their replays");
    acceptance_compare_generations(one, two, ctx.model_dir,
                                   data_free_rerun ? "threads 1/2, data-free" : !calib.empty() ? "threads 1/2, calibrated" : "threads 1/2",
                                   rows);
    static const uint8_t zeros[32] = {};
    if (data_free_rerun)
        rows.push_back(acceptance_calibrated("16.5 published/rerun", "the published generation against a rerun", calib,
                                             "give --calibration STATS to rerun on them"));
    else if (recovered)
        acceptance_compare_generations(ctx.out_dir, one, ctx.model_dir, "published/rerun", rows,
                                       std::memcmp(pub.prev_hash, zeros, 32) != 0);
    else
        rows.push_back(acceptance_skipped("16.5 published/rerun", "the published generation against a rerun",
                                          "its parameters are not recoverable from seed_digest"));
}

}  // namespace stk
