// A conversion job: the parameters, the caller's arena, what each finished stage recorded, and
// the hand-offs between stages.  Lives inside the arena (stk_open places it there).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/arena.h"
#include "core/output_file.h"
#include "format/array.h"
#include "format/manifest.h"
#include "stk/stk.h"

namespace stk {

struct StageRecord {
    bool done = false;
    bool not_implemented = false;  // ran, wrote nothing, feature disabled (recorded in manifest)
    bool disabled = false;         // seed 1.4: a bound breach (or a disabled dependency) disabled
                                   // it; its outputs were removed and a record says why
    uint32_t crc32c = 0;           // seed 15.2: per-stage crc32c and sha256_low64
    uint64_t sha256_low64 = 0;
};

struct ModelPlan;         // ingest: what parse_tensors found (src/ingest/plan.h)
struct ModelDescription;  // ingest: config + mapped checkpoint + layout (src/ingest/model.h)
struct TokenizerPlan;     // tokenizer stage inputs/outputs (src/tokenizer/plan.h)
struct LinearHandoff;     // ffn_collapse -> mphf_cuckoo (src/stages/ffn_collapse.h)
class CalibStats;         // --calibration's statistics, mapped and validated once (src/format/calib_stats.h)
struct Vocab;             // the tokenizer's vocabulary (src/tokenizer/vocab.h)

// An array some stage published under <out_dir>/arrays/.
struct WrittenArray {
    char name[64];
    stk_stage stage;
    ArrayHeader header;
};
constexpr uint32_t kMaxArrays = 4096;

struct Job {
    Job() = default;
    Job(const Job &) = delete;
    Job &operator=(const Job &) = delete;
    ~Job();  // releases `source` (the checkpoint mapping), `calib` and `vocab`: held outside the arena

    stk_job_params params{};  // strings below point into the arena
    // The model, described once per job (stk_open): config, the checkpoint's mapping and the
    // tensor layout.  Every stage reads tensors through it; nobody opens the checkpoint again.
    ModelDescription *source = nullptr;
    const char *in_dir = nullptr;
    const char *out_dir = nullptr;
    // params.calibration's statistics (null without --calibration), checked against the plan's
    // dimensions at stk_open and against the model's digest after parse_tensors.
    CalibStats *calib = nullptr;
    // The tokenizer's vocabulary, read once by stk_open (its sizing needs it) for the tokenizer
    // stage; released after that stage (null if there is no tokenizer file or it did not parse:
    // the stage then reads it and refuses it, naming the file).
    Vocab *vocab = nullptr;
    Arena arena;  // everything the job allocates after stk_open
    StageRecord stages[STK_STAGE_COUNT + 1];
    WrittenArray *arrays = nullptr;  // kMaxArrays slots in the arena
    uint32_t n_arrays = 0;
    ModelPlan *model = nullptr;
    TokenizerPlan *tokenizer = nullptr;
    LinearHandoff *linear = nullptr;
    ManifestDraft manifest;  // scalar fields, P_gen, records: what manifest_emit publishes

    // Publication into a generations root (STK_JOB_PUBLISH_ROOT, src/publish/generations.h):
    // out_dir is then the staging directory under `root`, and the check stage publishes it.
    const char *root = nullptr;
    int root_lock_fd = -1;
    const char *generation_dir = nullptr;  // ROOT/generations/<name> once published
    // The arrays' commits while the job writes into the staging directory (job_write_array; no
    // reader resolves those names): they wait for the disk on their own thread, drained where a
    // name must exist (a stage reading an earlier one's file, a breach's undo, manifest_emit).
    CommitQueue commits;
    bool repaired_current = false;         // publish_begin repaired a missing or dangling CURRENT
    bool rv_clamped = false;               // the default rv was clamped to the model (a manifest note)

    // Progress of the running stage, for a caller's display (stk convert on a terminal): units
    // done of total ("B" of tensor bytes, "layers", "FFNs").  Reset when a stage starts; a stage
    // that does not report leaves total at 0.  Written by the stage, read from another thread.
    std::atomic<uint64_t> work_done{0}, work_total{0};
    std::atomic<const char *> work_unit{""};
    // stk_job_cancel's flag (any thread, or a signal handler): stages stop at their next
    // progress point, later stages refuse to start, and nothing is published.
    std::atomic<bool> cancelled{false};
};

// Throws STK_E_CANCELLED once stk_job_cancel was called (on the stage's own thread only).
[[noreturn]] void throw_cancelled(const Job &job);
inline void job_cancel_point(const Job &job) {
    if (job.cancelled.load(std::memory_order_relaxed)) throw_cancelled(job);
}

// A stage announces its work once (total units of `unit`), then adds what it finished.
inline void job_work_begin(Job &job, uint64_t total, const char *unit) {
    job.work_done.store(0, std::memory_order_relaxed);
    job.work_unit.store(unit, std::memory_order_relaxed);
    job.work_total.store(total, std::memory_order_release);
}
inline void job_work_add(Job &job, uint64_t n) {
    job.work_done.fetch_add(n, std::memory_order_relaxed);
    job_cancel_point(job);  // every caller is on the stage's thread
}

// What a stage's arena sizing sees: the normalised parameters and the model described once.
struct JobInputs {
    const stk_job_params &params;
    const ModelDescription *model;  // null only in tests that run one stage by hand
    const Vocab *vocab = nullptr;   // the job's vocabulary (stk_open); null: sizing reads its pieces
};

struct ArrayPlan;

// One DAG stage: how much arena it needs for these inputs, how it runs, and what it publishes.
struct StageDef {
    stk_stage id;
    const char *name;                                      // the spec's name (15.2)
    void (*size)(const JobInputs &in, ArenaSizer &sizer);  // may be null: needs nothing
    void (*run)(Job &job);                                 // null: not implemented
    // Appends the arrays the stage publishes for these inputs (stages/plan.h, `stk convert
    // --dry-run`); null: the stage publishes none.
    void (*plan)(const JobInputs &in, ArrayPlan &plan);
};

// The fixed DAG in order (index 0 = STK_STAGE_PARSE_TENSORS).
const StageDef *stage_table();
const StageDef *find_stage(stk_stage id);

// Defaults of seed 15.1 / 14 applied to zero fields; validates ranges (STK_E_INVALID_ARGUMENT).
stk_job_params normalize_params(const stk_job_params &in);
// normalize_params, then the defaults that depend on the model: the default rv (12, when the
// caller left it 0) clamped to min(r, d_v, d_model) on a model narrower than that (*rv_clamped
// set; the job records it in the manifest).  A value the caller chose is never changed.
stk_job_params normalize_params_for(const stk_job_params &in, const ModelDescription &model, bool *rv_clamped = nullptr);

size_t job_arena_size(const stk_job_params &params);
// The same for a model already described (normalised params): `stk convert --dry-run` describes
// the model once and plans the arena and the arrays from that one description.
size_t job_arena_size_for(const JobInputs &in);
Job *job_open(const stk_job_params &params, void *arena, size_t bytes);
void job_run_stage(Job &job, stk_stage id);

}  // namespace stk
