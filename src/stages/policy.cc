// The failure policy of seed 1.4 (see policy.h and docs/decisions.md "Failure policy").
#include "stages/policy.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstring>

#include "format/array.h"
#include "format/manifest.h"

namespace stk {

void throw_breach(stk_status status, const char *bound, double value, double limit, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    throw BoundBreach(status, bound, value, limit, std::move(msg));
}

bool stage_is_optional(stk_stage id) {
    switch (id) {
        case STK_STAGE_TOKENIZER:
        case STK_STAGE_PRF:
        case STK_STAGE_OVERLAYS:
        case STK_STAGE_FFN_COLLAPSE:
        case STK_STAGE_MPHF_CUCKOO:
        case STK_STAGE_MEMORY_FIT:
        case STK_STAGE_BRIDGE_INIT: return true;
        default: return false;
    }
}

stk_stage stage_depends_on(stk_stage id) {
    switch (id) {
        case STK_STAGE_OVERLAYS: return STK_STAGE_PRF;              // reads prf_W.bin
        case STK_STAGE_MPHF_CUCKOO: return STK_STAGE_FFN_COLLAPSE;  // places ffn_collapse's entries
        default: return stk_stage(STK_STAGE_COUNT + 1);
    }
}

Feature stage_feature(int stage) {
    switch (stage) {
        case STK_STAGE_TOKENIZER: return kFeatureTokenizerFst;
        case STK_STAGE_PRF: return kFeaturePrf;
        case STK_STAGE_OVERLAYS: return kFeatureOverlays;
        case STK_STAGE_FFN_COLLAPSE: return kFeatureLinear;
        case STK_STAGE_MPHF_CUCKOO: return kFeatureMphfCuckoo;
        case STK_STAGE_MEMORY_FIT: return kFeatureMemory;
        case STK_STAGE_BRIDGE_INIT: return kFeatureBridge;
        default: return kFeatureNone;
    }
}

bool is_bound_breach(const Error &e) {
    if (dynamic_cast<const BoundBreach *>(&e)) return true;
    // Numeric exhaustion that escaped a stage's own remedy (seed 18.1's retries, the cuckoo
    // table's rebuilds) or a non-finite result.  Refusals of input use other statuses.
    switch (e.status()) {
        case STK_E_NONFINITE:
        case STK_E_MPHF_EXHAUSTED:
        case STK_E_TABLE_FULL: return true;
        default: return false;
    }
}

namespace {

std::string arrays_dir(const Job &job) { return std::string(job.out_dir) + "/" + kArraysDirName; }

std::vector<std::string> list_dir(const std::string &dir) {
    std::vector<std::string> names;
    DIR *d = ::opendir(dir.c_str());
    if (!d) return names;  // not created yet: nothing in it
    while (dirent *e = ::readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

// The disabled record must survive a full draft (manifest_emit derives the stage state from it).
void add_disabled_record(Job &job, stk_stage id, stk_status status, double value, double limit, const char *text) {
    ManifestDraft &d = job.manifest;
    if (d.n_records >= kMaxDraftRecords) d.n_records = kMaxDraftRecords - 1;
    draft_add_record(d, id, kRecordFeatureDisabled, stage_feature(id), status, finite_or_zero(value), finite_or_zero(limit), "%s",
                     text);
}

void mark_disabled(Job &job, stk_stage id, const char *canonical) {
    StageRecord &rec = job.stages[id];
    rec.done = true;
    rec.disabled = true;
    // Digest of a disabled stage: crc32c / sha256_low64 over "stk.policy.disabled" NUL, the
    // stage's name, NUL, and the record's reason text (docs/format.md "Failure policy").
    Sha256 sha;
    static const char kTag[] = "stk.policy.disabled";
    const char *name = find_stage(id)->name;
    uint32_t crc = crc32c(kTag, sizeof kTag);
    sha.update(kTag, sizeof kTag);
    crc = crc32c(name, std::strlen(name) + 1, crc);
    sha.update(name, std::strlen(name) + 1);
    crc = crc32c(canonical, std::strlen(canonical), crc);
    sha.update(canonical, std::strlen(canonical));
    rec.crc32c = crc;
    rec.sha256_low64 = sha.finish().low64();
}

void undo_stage(Job &job, const StageSnapshot &snap) {
    // Files the stage created under arrays/ (finished or not): removed.  Names only, never
    // outside the directory; a file that was there before the stage is kept.
    const std::string dir = arrays_dir(job);
    job.commits.drain();  // every file handed over is under its name (or the job fails here)
    for (const std::string &f : list_dir(dir))
        if (!std::binary_search(snap.files.begin(), snap.files.end(), f)) ::unlink((dir + "/" + f).c_str());
    job.n_arrays = snap.n_arrays;
    job.manifest.fields = snap.fields;
    job.manifest.p_gen = snap.p_gen;
    job.manifest.n_pgen = snap.n_pgen;
    job.tokenizer = snap.tokenizer;
    job.linear = snap.linear;
    job.arena.reset(snap.arena_mark);
}

}  // namespace

StageSnapshot policy_snapshot(Job &job) {
    StageSnapshot s;
    s.n_arrays = job.n_arrays;
    s.n_records = job.manifest.n_records;
    s.arena_mark = job.arena.mark();
    s.fields = job.manifest.fields;
    s.p_gen = job.manifest.p_gen;
    s.n_pgen = job.manifest.n_pgen;
    s.tokenizer = job.tokenizer;
    s.linear = job.linear;
    s.files = list_dir(arrays_dir(job));
    // Earlier stages' files still waiting for their commit are theirs too.
    for (const std::string &f : job.commits.handed_over()) s.files.push_back(base_of(f));
    std::sort(s.files.begin(), s.files.end());
    return s;
}

void policy_disable(Job &job, stk_stage id, const StageSnapshot &snap, const BoundBreach &b) {
    undo_stage(job, snap);
    char text[kManifestTextSize];
    std::snprintf(text, sizeof text, "%s disabled: %s: %.4g vs bound %.4g", find_stage(id)->name, b.bound(), b.value(),
                  b.limit());
    add_disabled_record(job, id, b.status(), b.value(), b.limit(), text);
    // The full message (it may name a tensor, a key) as a note beside the record.
    draft_add_record(job.manifest, id, kRecordNote, stage_feature(id), b.status(), 0, 0, "%s", b.what());
    mark_disabled(job, id, text);
}

void policy_disable(Job &job, stk_stage id, const StageSnapshot &snap, const Error &e) {
    if (auto *b = dynamic_cast<const BoundBreach *>(&e)) return policy_disable(job, id, snap, *b);
    policy_disable(job, id, snap, BoundBreach(e.status(), stk_status_str(e.status()), 0, 0, e.what()));
}

void policy_disable_dependent(Job &job, stk_stage id, stk_stage needed) {
    char text[kManifestTextSize];
    std::snprintf(text, sizeof text, "%s disabled: it needs %s, which was disabled", find_stage(id)->name,
                  find_stage(needed)->name);
    add_disabled_record(job, id, STK_E_STAGE_ORDER, 0, 0, text);
    mark_disabled(job, id, text);
}

bool stage_skipped_by_profile(stk_stage id) {
    return id >= STK_STAGE_PRF && id <= STK_STAGE_BRIDGE_INIT;
}

void policy_disable_by_profile(Job &job, stk_stage id) {
    char text[kManifestTextSize];
    std::snprintf(text, sizeof text, "%s not run: the faithful profile stores the model's own weights instead",
                  find_stage(id)->name);
    add_disabled_record(job, id, STK_E_NOT_IMPLEMENTED, 0, 0, text);
    mark_disabled(job, id, text);
}

void policy_note_header_repairs(Job &job, stk_stage id, uint64_t before) {
    uint64_t n = array_header_repairs() - before;
    if (n)
        draft_add_record(job.manifest, id, kRecordNote, stage_feature(id), STK_E_CHECKSUM, double(n), 0,
                         "18.5: %llu array header(s) failed their read-back CRC; recomputed, payloads not rewritten",
                         (unsigned long long)n);
}

}  // namespace stk
