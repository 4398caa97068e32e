#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "core/abi.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "ingest/model.h"
#include "format/calib_stats.h"
#include "kernels/numeric_mode.h"
#include "stages/attn_common.h"
#include "stages/calib_job.h"
#include "stages/faithful.h"
#include "stages/job.h"
#include "stages/policy.h"
#include "stages/stages.h"
#include "tokenizer/vocab.h"

namespace stk {

// The DAG of seed 15.2.  A null run is a stage that is not implemented: it writes nothing and
// says so (STK_E_NOT_IMPLEMENTED); the manifest records the feature as disabled.
static const StageDef kStages[STK_STAGE_COUNT] = {
    {STK_STAGE_PARSE_TENSORS, "parse_tensors", parse_tensors_size, parse_tensors_run, faithful_plan},
    {STK_STAGE_TOKENIZER, "tokenizer_build_or_wrap", tokenizer_stage_size, tokenizer_stage_run, tokenizer_stage_plan},
    {STK_STAGE_PRF, "prf_build", prf_build_size, prf_build_run, prf_build_plan},
    {STK_STAGE_OVERLAYS, "overlays_build", overlays_build_size, overlays_build_run, overlays_build_plan},
    {STK_STAGE_FFN_COLLAPSE, "ffn_collapse", ffn_collapse_size, ffn_collapse_run, ffn_collapse_plan},
    {STK_STAGE_MPHF_CUCKOO, "mphf_cuckoo", mphf_cuckoo_size, mphf_cuckoo_run, mphf_cuckoo_plan},
    {STK_STAGE_MEMORY_FIT, "memory_fit", memory_fit_size, memory_fit_run, memory_fit_plan},
    {STK_STAGE_BRIDGE_INIT, "bridge_init", bridge_init_size, bridge_init_run, bridge_init_plan},
    {STK_STAGE_MANIFEST_EMIT, "manifest_emit", nullptr, manifest_emit_run, nullptr},
    {STK_STAGE_CHECK, "check", nullptr, check_stage_run, nullptr},
};

const StageDef *stage_table() { return kStages; }

const StageDef *find_stage(stk_stage id) {
    int i = int(id) - 1;
    return i >= 0 && i < STK_STAGE_COUNT ? &kStages[i] : nullptr;
}

stk_job_params normalize_params(const stk_job_params &in) {
    stk_job_params p = abi_read(&in);  // an older caller's struct: the fields it lacks are zero
    if (!p.in_dir || !*p.in_dir) throw_error(STK_E_INVALID_ARGUMENT, "in_dir is empty");
    if (!p.out_dir || !*p.out_dir) throw_error(STK_E_INVALID_ARGUMENT, "out_dir is empty");
    if (!p.r) p.r = 512;
    if (!p.rv) p.rv = 12;
    if (!p.l_tok) p.l_tok = 8;
    if (!p.top_l) p.top_l = 12;
    if (!p.threads) p.threads = 1;
    if (p.r > 4096) throw_error(STK_E_INVALID_ARGUMENT, "r = %u: at most 4096", p.r);
    if (p.rv > 64) throw_error(STK_E_INVALID_ARGUMENT, "rv = %u: at most 64", p.rv);
    if (p.l_tok > 64) throw_error(STK_E_INVALID_ARGUMENT, "Ltok = %u: at most 64", p.l_tok);
    if (p.top_l > 256) throw_error(STK_E_INVALID_ARGUMENT, "topL = %u: at most 256", p.top_l);
    if (p.threads > 1024) throw_error(STK_E_INVALID_ARGUMENT, "threads = %u: at most 1024", p.threads);
    if (p.calibration && !*p.calibration) throw_error(STK_E_INVALID_ARGUMENT, "calibration is an empty path (NULL: none)");
    if (p.flags & ~uint32_t(STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER | STK_JOB_ALLOW_NONFINITE | STK_JOB_PUBLISH_ROOT |
                            STK_JOB_MEMORY_FIT_LSQ | STK_JOB_PROFILE_FAITHFUL | STK_JOB_FAITHFUL_FFN_INT8 |
                            STK_JOB_FAITHFUL_FFN_Q4_0 | STK_JOB_FAITHFUL_FFN_Q8_0 | STK_JOB_FAITHFUL_FFN_BF16))
        throw_error(STK_E_INVALID_ARGUMENT, "unknown job flags 0x%x", p.flags);
    const uint32_t ffn_flags = p.flags & (STK_JOB_FAITHFUL_FFN_INT8 | STK_JOB_FAITHFUL_FFN_Q4_0 | STK_JOB_FAITHFUL_FFN_Q8_0 |
                                          STK_JOB_FAITHFUL_FFN_BF16);
    if (ffn_flags & (ffn_flags - 1))
        throw_error(STK_E_INVALID_ARGUMENT, "job flags 0x%x: at most one FFN element type (STK_JOB_FAITHFUL_FFN_*)", p.flags);
    // The faithful profile's own parameters mean nothing elsewhere: refused, never ignored.
    if (p.flags & STK_JOB_PROFILE_FAITHFUL) {
        if (!p.sinks) p.sinks = 4;
        if (!p.window) p.window = 252;
        if (!ffn_flags) p.flags |= STK_JOB_FAITHFUL_FFN_Q8_0;  // the default (issue 37): the same bytes as asking for it
        if (p.sinks > 65536) throw_error(STK_E_INVALID_ARGUMENT, "sinks = %u: at most 65536", p.sinks);
        if (p.window > (1u << 24)) throw_error(STK_E_INVALID_ARGUMENT, "window = %u: at most 16777216", p.window);
        if (const std::string why = runtime_policy_problem(p.policy, p.recent, p.window); !why.empty())
            throw_error(STK_E_INVALID_ARGUMENT, "%s", why.c_str());
        if (p.calibration)
            throw_error(STK_E_INVALID_ARGUMENT, "calibration: the faithful profile stores the model's own weights (nothing to fit)");
    } else {
        if (ffn_flags)
            throw_error(STK_E_INVALID_ARGUMENT, "STK_JOB_FAITHFUL_FFN_* (--ffn int8|q4_0|q8_0) needs the faithful profile");
        if (p.sinks || p.window)
            throw_error(STK_E_INVALID_ARGUMENT, "sinks / window (%u / %u) need the faithful profile", p.sinks, p.window);
        if (p.policy || p.recent)
            throw_error(STK_E_INVALID_ARGUMENT, "policy / recent (%u / %u) need the faithful profile", p.policy, p.recent);
    }
    return p;
}

stk_job_params normalize_params_for(const stk_job_params &in, const ModelDescription &model, bool *rv_clamped) {
    stk_job_params p = normalize_params(in);
    if (rv_clamped) *rv_clamped = false;
    if (in.rv != 0) return p;  // the caller's choice: checked, never changed
    AttnShape s;
    if (guard([&] { s = attn_shape(model.plan.config); }) != STK_OK) return p;  // no attention: nothing to clamp to
    const uint64_t cap = std::min<uint64_t>({p.r, s.d_v, s.d_model});
    if (cap >= 1 && p.rv > cap) {
        p.rv = uint32_t(cap);
        if (rv_clamped) *rv_clamped = true;
    }
    return p;
}

Job::~Job() {
    commits.close();  // before publish_release removes an unpublished staging directory
    delete vocab;
    delete source;
    delete calib;
    publish_release(*this);
}

static void size_job(const JobInputs &in, ArenaSizer &s) {
    s.add(sizeof(Job), alignof(Job));
    s.add(std::strlen(in.params.in_dir) + 1, 1);
    s.add(std::strlen(in.params.out_dir) + 1, 1);
    if (in.params.calibration) s.add(std::strlen(in.params.calibration) + 1, 1);
    if (in.params.flags & STK_JOB_PUBLISH_ROOT) s.add(kPublishPathSlack * 2 + 2 * std::strlen(in.params.out_dir), 1);
    s.add_array<WrittenArray>(kMaxArrays);
    for (const StageDef &st : kStages)
        if (st.size && !(job_is_faithful(in.params) && stage_skipped_by_profile(st.id))) st.size(in, s);
}

size_t job_arena_size(const stk_job_params &params) {
    stk_job_params p = normalize_params(params);
    auto model = describe_model(p.in_dir);
    p = normalize_params_for(params, *model);
    return job_arena_size_for(JobInputs{p, model.get()});
}

size_t job_arena_size_for(const JobInputs &in) {
    ArenaSizer s;
    size_job(in, s);
    return s.total();
}

static const char *arena_strdup(Arena &a, const char *s) {
    size_t n = std::strlen(s) + 1;
    char *d = static_cast<char *>(a.alloc(n, 1));
    std::memcpy(d, s, n);
    return d;
}

Job *job_open(const stk_job_params &params, void *arena, size_t bytes) {
    stk_job_params p = normalize_params(params);
    if (!arena) throw_error(STK_E_INVALID_ARGUMENT, "arena is NULL");
    // Outputs are write-once: a directory that already holds a generation is never reused
    // (checked before the model is read: the cheapest refusal first).
    std::string manifest = std::string(p.out_dir) + "/sera_manifest.bin";
    if ((p.flags & STK_JOB_PUBLISH_ROOT) && file_exists(manifest))
        throw_error(STK_E_OUTPUT_EXISTS,
                    "%s holds a single generation (%s), not a generations root; publish into a new "
                    "directory",
                    p.out_dir, manifest.c_str());
    if (file_exists(manifest))
        throw_error(STK_E_OUTPUT_EXISTS, "%s already holds a published generation (%s); write to another directory", p.out_dir,
                    manifest.c_str());
    // The numeric stages' bytes are pinned to one mode (kernels/numeric_mode.h): a CPU that cannot
    // run it is refused before the model is read, not after minutes of work.
    kernels::require_numeric_mode();
    std::unique_ptr<ModelDescription> model = describe_model(p.in_dir);
    bool rv_clamped = false;
    p = normalize_params_for(params, *model, &rv_clamped);
    // The vocabulary, read whole once: the tokenizer stage's sizing and its run both use it.
    std::unique_ptr<Vocab> vocab(tokenizer_stage_read_vocab(JobInputs{p, model.get()}));
    // The arena must hold what every stage said it needs: refuse now, not half-way through.
    ArenaSizer s;
    size_job(JobInputs{p, model.get(), vocab.get()}, s);
    if (s.total() > bytes)
        throw_error(STK_E_ARENA_TOO_SMALL, "arena of %zu bytes; this job needs %zu (ask stk_job_arena_size)", bytes, s.total());
    Arena a(arena, bytes);
    Job *job = new (a.alloc(sizeof(Job), alignof(Job))) Job();
    job->vocab = vocab.release();
    job->arena = a;
    job->params = p;
    job->in_dir = arena_strdup(job->arena, p.in_dir);
    job->out_dir = arena_strdup(job->arena, p.out_dir);
    job->params.in_dir = job->in_dir;
    job->params.out_dir = job->out_dir;
    if (p.calibration) job->params.calibration = arena_strdup(job->arena, p.calibration);
    job->arrays = job->arena.alloc_array<WrittenArray>(kMaxArrays);
    job->source = model.release();
    job->rv_clamped = rv_clamped;
    if (rv_clamped)
        draft_add_record(job->manifest, STK_STAGE_OVERLAYS, kRecordNote, kFeatureOverlays, STK_OK, double(p.rv), 12.0,
                         "rv clamped: the default 12 exceeds min(r, d_v, d_model) = %u for this model", p.rv);
    try {
        calib_open(*job, *job->source);  // before any output exists: a refused STATS leaves nothing
        make_dirs(p.out_dir);  // only once the job is accepted: a refused open leaves nothing behind
        if (p.flags & STK_JOB_PUBLISH_ROOT) publish_begin(*job);
    } catch (...) {
        job->~Job();
        throw;
    }
    return job;
}

// A stage's peak arena use must stay within what its *_size declared (zstd's
// ZSTD_cwksp_estimated_space_within_bounds): a stage that allocates more than it sized works here
// only by eating another stage's share, and would run out on some other model.
static void check_arena_within_size(const Job &job, const StageDef &st, size_t used_before) {
    if (!st.size || !job.source) return;
    ArenaSizer declared;
    st.size(JobInputs{job.params, job.source, job.vocab}, declared);
    const size_t used = job.arena.peak() - used_before;
    // Test fault arena_undersized:<stage>: the check as if the stage had declared nothing.
    const size_t bound = test_fault((std::string("arena_undersized:") + st.name).c_str()) ? 0 : declared.total();
    if (used > bound)
        throw_error(STK_E_INTERNAL,
                    "stage %s used %zu arena bytes, more than the %zu its sizing declares (a bug in the "
                    "stage's buffer list; please report)",
                    st.name, used, bound);
}

// The arena pages a stage used above what it keeps go back to the kernel (MADV_DONTNEED: they read
// as zeros when a later stage touches them again).  Without this, every page any stage ever touched
// stays resident to the end: the 7B convert's check stage ran on top of ffn_collapse's 0.9 GiB of
// dead scratch.  The bytes above the arena's top are dead by definition (Arena::reset).
static void release_stage_scratch(Arena &arena) {
    const size_t used = arena.used(), peak = arena.peak();
    if (peak <= used) return;
    const uintptr_t top = reinterpret_cast<uintptr_t>(arena.alloc(0, 1));  // base + used: allocates nothing
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t from = (top + page - 1) / page * page, to = (top + (peak - used)) / page * page;
    if (to > from) ::madvise(reinterpret_cast<void *>(from), size_t(to - from), MADV_DONTNEED);
}

void throw_cancelled(const Job &job) {
    throw_error(STK_E_CANCELLED, "%s: the job was cancelled (stk_job_cancel); nothing was published",
                job.root ? job.root : job.out_dir);
}

void job_run_stage(Job &job, stk_stage id) {
    const StageDef *st = find_stage(id);
    if (!st) throw_error(STK_E_INVALID_ARGUMENT, "unknown stage %d", int(id));
    job_cancel_point(job);
    for (int prev = STK_STAGE_PARSE_TENSORS; prev < int(id); prev++)
        if (!job.stages[prev].done)
            throw_error(STK_E_STAGE_ORDER, "stage %s needs %s to run first", st->name, find_stage(stk_stage(prev))->name);
    if (job.stages[id].done) throw_error(STK_E_STAGE_ORDER, "stage %s already ran", st->name);
    job_work_begin(job, 0, "");
    if (!st->run) {
        job.stages[id].done = true;
        job.stages[id].not_implemented = true;
        throw_error(STK_E_NOT_IMPLEMENTED, "stage %s is not implemented: nothing written, its feature is disabled", st->name);
    }
    // The faithful profile does not run the spec's numeric stages (docs/decisions.md, "Faithful
    // profile"): each is recorded disabled, with the reason, and writes nothing.
    if (job_is_faithful(job.params) && stage_skipped_by_profile(id)) {
        policy_disable_by_profile(job, id);
        return;
    }
    // Seed 1.4: an optional stage whose input stage was disabled is disabled too (recorded).
    const stk_stage needed = stage_depends_on(id);
    if (needed <= STK_STAGE_COUNT && job.stages[needed].disabled) {
        policy_disable_dependent(job, id, needed);
        return;
    }
    StageSnapshot snap;
    if (stage_is_optional(id)) snap = policy_snapshot(job);
    const uint64_t header_repairs = array_header_repairs();
    const size_t used_before = job.arena.used();
    job.arena.reset_peak();
    try {
        st->run(job);
        check_arena_within_size(job, *st, used_before);
        if (id == STK_STAGE_TOKENIZER) delete job.vocab, job.vocab = nullptr;  // its stage done and checked
        release_stage_scratch(job.arena);
        if (test_fault((std::string("breach:") + st->name).c_str()))
            throw_breach(STK_E_INTERNAL, "test fault", 1, 0, "STK_TEST_FAULT=breach:%s", st->name);
    } catch (const Error &e) {
        // A stage that finds it cannot do its work (a feature it does not implement for this
        // input) is recorded like a missing stage: done, nothing written, feature disabled.
        if (e.status() == STK_E_NOT_IMPLEMENTED) {
            job.stages[id].done = true;
            job.stages[id].not_implemented = true;
        } else if (stage_is_optional(id) && is_bound_breach(e)) {
            // Seed 1.4: the optional feature is disabled, its outputs removed, the job goes on.
            policy_disable(job, id, snap, e);
            return;
        }
        throw;
    }
    policy_note_header_repairs(job, id, header_repairs);
    job.stages[id].done = true;
}

}  // namespace stk
