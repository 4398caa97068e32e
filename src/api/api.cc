// The extern "C" surface: check arguments, call in, map exceptions to status + message.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/abi.h"
#include "core/error.h"
#include "format/array.h"
#include "format/manifest.h"
#include "ingest/faithful_names.h"
#include "publish/generations.h"
#include "publish/verify.h"
#include "stages/job.h"
#include "stk/stk.h"
#include "tokenizer/plan.h"

using namespace stk;

struct stk_job : Job {};

extern "C" {

STK_API const char *stk_status_str(stk_status s) {
    switch (s) {
        case STK_OK: return "STK_OK: success";
        case STK_E_INVALID_ARGUMENT: return "STK_E_INVALID_ARGUMENT: invalid argument";
        case STK_E_STRUCT_SIZE: return "STK_E_STRUCT_SIZE: struct_size too small";
        case STK_E_ARENA_TOO_SMALL: return "STK_E_ARENA_TOO_SMALL: arena too small";
        case STK_E_NOT_IMPLEMENTED: return "STK_E_NOT_IMPLEMENTED: not implemented";
        case STK_E_STAGE_ORDER: return "STK_E_STAGE_ORDER: stage run out of order";
        case STK_E_CANCELLED: return "STK_E_CANCELLED: cancelled";
        case STK_E_IO: return "STK_E_IO: I/O error";
        case STK_E_NOT_FOUND: return "STK_E_NOT_FOUND: file not found";
        case STK_E_OUTPUT_EXISTS: return "STK_E_OUTPUT_EXISTS: output already exists";
        case STK_E_TRUNCATED: return "STK_E_TRUNCATED: truncated file";
        case STK_E_BAD_MAGIC: return "STK_E_BAD_MAGIC: wrong magic";
        case STK_E_BAD_DTYPE: return "STK_E_BAD_DTYPE: unknown dtype";
        case STK_E_BAD_RANK: return "STK_E_BAD_RANK: bad rank";
        case STK_E_DIMS_OVERFLOW: return "STK_E_DIMS_OVERFLOW: dimensions overflow";
        case STK_E_SIZE_MISMATCH: return "STK_E_SIZE_MISMATCH: size mismatch";
        case STK_E_MISALIGNED: return "STK_E_MISALIGNED: misaligned payload";
        case STK_E_CHECKSUM: return "STK_E_CHECKSUM: checksum mismatch";
        case STK_E_MISSING_ARRAY: return "STK_E_MISSING_ARRAY: array missing";
        case STK_E_SCHEMA: return "STK_E_SCHEMA: unknown schema digest";
        case STK_E_BAD_HEADER: return "STK_E_BAD_HEADER: malformed header";
        case STK_E_CORRUPT: return "STK_E_CORRUPT: malformed data";
        case STK_E_UNSUPPORTED: return "STK_E_UNSUPPORTED: unsupported format";
        case STK_E_UNSAFE_PICKLE: return "STK_E_UNSAFE_PICKLE: pickle outside the allowlist";
        case STK_E_LFS_POINTER: return "STK_E_LFS_POINTER: Git LFS pointer instead of data";
        case STK_E_UNKNOWN_MODEL: return "STK_E_UNKNOWN_MODEL: unknown model type";
        case STK_E_BAD_JSON: return "STK_E_BAD_JSON: malformed JSON";
        case STK_E_NONFINITE: return "STK_E_NONFINITE: NaN or Inf weights";
        case STK_E_PARAM_COUNT: return "STK_E_PARAM_COUNT: parameter count mismatch";
        case STK_E_SP_REJECTED: return "STK_E_SP_REJECTED: vocabulary not uniquely decodable";
        case STK_E_MPHF_EXHAUSTED: return "STK_E_MPHF_EXHAUSTED: MPHF seed search exhausted";
        case STK_E_TABLE_FULL: return "STK_E_TABLE_FULL: hash table full";
        case STK_E_KEY_NOT_FOUND: return "STK_E_KEY_NOT_FOUND: key not found";
        case STK_E_NOMEM: return "STK_E_NOMEM: out of memory";
        case STK_E_INTERNAL: return "STK_E_INTERNAL: internal error";
    }
    return "STK_E_?: unknown status";
}

STK_API const char *stk_last_error(void) { return last_error(); }
STK_API uint32_t stk_version_number(void) { return STK_VERSION_NUMBER; }
STK_API const char *stk_version_string(void) { return STK_VERSION_STRING; }

STK_API const char *stk_stage_name(stk_stage stage) {
    const StageDef *d = find_stage(stage);
    return d ? d->name : nullptr;
}

STK_API stk_status stk_job_arena_size(const stk_job_params *params, size_t *out_bytes) {
    return guard([&] {
        if (!params || !out_bytes) throw_error(STK_E_INVALID_ARGUMENT, "stk_job_arena_size: NULL argument");
        *out_bytes = job_arena_size(*params);
    });
}

STK_API stk_status stk_open(const stk_job_params *params, void *arena, size_t arena_bytes, stk_job **out_job) {
    return guard([&] {
        if (!params || !out_job) throw_error(STK_E_INVALID_ARGUMENT, "stk_open: NULL argument");
        *out_job = nullptr;
        *out_job = static_cast<stk_job *>(job_open(*params, arena, arena_bytes));
    });
}

STK_API stk_status stk_stage_run(stk_job *job, stk_stage stage) {
    return guard([&] {
        if (!job) throw_error(STK_E_INVALID_ARGUMENT, "stk_stage_run: NULL job");
        job_run_stage(*job, stage);
    });
}

STK_API stk_status stk_stage_digest(const stk_job *job, stk_stage stage, uint32_t *crc, uint64_t *sha) {
    return guard([&] {
        if (!job || !crc || !sha) throw_error(STK_E_INVALID_ARGUMENT, "stk_stage_digest: NULL argument");
        if (!find_stage(stage)) throw_error(STK_E_INVALID_ARGUMENT, "unknown stage %d", int(stage));
        const StageRecord &r = job->stages[stage];
        if (!r.done) throw_error(STK_E_STAGE_ORDER, "stage %s has not run", stk_stage_name(stage));
        *crc = r.crc32c;
        *sha = r.sha256_low64;
    });
}

STK_API void stk_job_cancel(stk_job *job) {
    if (job) job->cancelled.store(true, std::memory_order_relaxed);
}

STK_API void stk_close(stk_job *job) {
    if (job) job->~stk_job();
}

STK_API stk_status stk_verify(const char *out_dir, stk_verify_report *report) {
    return guard([&] {
        if (!out_dir) throw_error(STK_E_INVALID_ARGUMENT, "stk_verify: NULL out_dir");
        if (report) abi_check_out(report);
        // Filled whole here, then copied into the caller's struct_size bytes (success or not).
        stk_verify_report full;
        std::memset(&full, 0, sizeof full);
        full.struct_size = sizeof full;
        try {
            verify_path(out_dir, &full, verify_default_threads());
        } catch (...) {
            if (report) abi_write(report, full);
            throw;
        }
        if (report) abi_write(report, full);
    });
}

STK_API stk_status stk_job_get_info(const stk_job *job, stk_job_info *out) {
    return guard([&] {
        if (!job || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_job_get_info: NULL argument");
        abi_check_out(out);
        stk_job_info info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (const TokenizerPlan *t = job->tokenizer) {
            switch (t->mode) {
                case TokenizerPlan::Mode::ABSENT: info.tokenizer_mode = STK_TOKENIZER_ABSENT; break;
                case TokenizerPlan::Mode::FST: info.tokenizer_mode = STK_TOKENIZER_FST; break;
                case TokenizerPlan::Mode::FST_UNCERTIFIED: info.tokenizer_mode = STK_TOKENIZER_FST_UNCERTIFIED; break;
                case TokenizerPlan::Mode::EXT: info.tokenizer_mode = STK_TOKENIZER_EXT; break;
            }
            info.tokenizer_certified_run = t->sp_ran ? 1 : 0;
            info.vocab_size = t->vocab_size;
            info.l_tok = t->l_tok;
            std::snprintf(info.tokenizer_reason, sizeof info.tokenizer_reason, "%.*s",
                          int(strnlen(t->invariant, sizeof t->invariant)), t->invariant);
        }
        abi_write(out, info);
    });
}

STK_API stk_status stk_stage_get_info(const stk_job *job, stk_stage stage, stk_stage_info *out) {
    return guard([&] {
        if (!job || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_stage_get_info: NULL argument");
        if (!find_stage(stage)) throw_error(STK_E_INVALID_ARGUMENT, "stk_stage_get_info: unknown stage %d", int(stage));
        abi_check_out(out);
        stk_stage_info info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        const StageRecord &r = job->stages[stage];
        if (r.not_implemented) {
            info.state = STK_STAGE_STATE_NOT_IMPLEMENTED;
        } else if (r.done) {
            info.state = r.disabled ? STK_STAGE_STATE_DISABLED : STK_STAGE_STATE_DONE;
            info.crc32c = r.crc32c;
            info.sha256_low64 = r.sha256_low64;
        }
        if (r.disabled) {
            // The policy's "feature disabled" record for this stage (src/stages/policy.cc).
            std::snprintf(info.reason, sizeof info.reason, "disabled");
            for (uint32_t i = 0; i < job->manifest.n_records; i++) {
                const ManifestRecord &rec = job->manifest.records[i];
                if (rec.stage == stage && rec.kind == kRecordFeatureDisabled) {
                    std::snprintf(info.reason, sizeof info.reason, "%.*s", int(strnlen(rec.text, sizeof rec.text)), rec.text);
                    break;
                }
            }
        }
        abi_write(out, info);
    });
}

STK_API stk_status stk_job_progress(const stk_job *job, uint64_t *out_done, uint64_t *out_total, const char **out_unit) {
    return guard([&] {
        if (!job || !out_done || !out_total || !out_unit) throw_error(STK_E_INVALID_ARGUMENT, "stk_job_progress: NULL argument");
        // Only the atomics: this runs on another thread while a stage writes the rest of the job.
        const uint64_t total = job->work_total.load(std::memory_order_acquire);
        const uint64_t done = job->work_done.load(std::memory_order_relaxed);
        *out_unit = job->work_unit.load(std::memory_order_relaxed);
        *out_total = total;
        *out_done = done < total ? done : total;
    });
}

STK_API stk_status stk_job_generation_dir(const stk_job *job, const char **out_dir) {
    return guard([&] {
        if (!job || !out_dir) throw_error(STK_E_INVALID_ARGUMENT, "stk_job_generation_dir: NULL argument");
        *out_dir = nullptr;
        if (!job->root) throw_error(STK_E_INVALID_ARGUMENT, "the job does not publish into a root (STK_JOB_PUBLISH_ROOT)");
        if (!job->generation_dir) throw_error(STK_E_STAGE_ORDER, "nothing published yet: the check stage publishes");
        *out_dir = job->generation_dir;
    });
}

}  // extern "C"

// The warnings of a job, in the order `stk convert` prints them: tokenizer fallbacks (from the
// tokenizer stage on), then, once the check stage published into a root, the clamped default rv,
// a repaired CURRENT and an empty generation.  The text is the library's, so the command and
// the bindings say the same (issue 32 item 13).
static std::vector<std::string> job_warnings(const Job &job) {
    std::vector<std::string> w;
    if (const TokenizerPlan *t = job.tokenizer) {
        if (t->mode == TokenizerPlan::Mode::EXT)
            w.push_back(
                "tokenizer in EXT mode: no token tables are written, so the generation cannot tokenize "
                "by itself (stk replay needs --in MODEL_DIR). " +
                std::string(t->sp_ran ? "Byte-level BPE vocabularies never pass Sardinas-Patterson; "
                                        "--allow-uncertified-tokenizer builds the tables anyway "
                                        "(recorded as uncertified: greedy ids may differ from BPE)"
                                      : "The vocabulary is not byte-level BPE (EXT wrapper)"));
        if (t->mode == TokenizerPlan::Mode::ABSENT)
            w.push_back("no tokenizer files in the model directory: the tokenizer feature is disabled");
        if (t->mode == TokenizerPlan::Mode::FST_UNCERTIFIED)
            w.push_back(
                "token tables built UNCERTIFIED (--allow-uncertified-tokenizer): greedy ids may differ "
                "from the model's BPE ids");
    }
    if (!job.generation_dir) return w;
    if (job.rv_clamped)
        w.push_back("--rv: the default 12 exceeds min(r, d_v, d_model) for this model: the overlay rank is " +
                    std::to_string(job.params.rv) + " (recorded in the manifest)");
    static const uint8_t zero[32] = {};
    const bool chained = std::memcmp(job.manifest.prev_hash, zero, 32) != 0;
    if (job.repaired_current)
        w.push_back(std::string(job.root) + "/" + kCurrentFileName +
                    " was missing or named a generation that is not there: " +
                    (!chained ? std::string("no generation in it verifies, so the new generation starts a new "
                                            "chain (previous none) and CURRENT now names it")
                              : "it was first pointed at the newest generation that verifies (" +
                                    hex32(job.manifest.prev_hash).substr(0, 16) + "...), and the new generation chains onto it"));
    const Manifest published = read_manifest(std::string(job.generation_dir) + "/" + kManifestFileName);
    // The faithful profile's block-scaled FFN (issue 37): a matrix whose rows are not whole blocks
    // of 32 was written bf16 instead; its dtype in the array table says so, and this names it.
    if (published.has_runtime && dtype_is_block(uint16_t(published.runtime.ffn_dtype)))
        for (const ManifestArray &a : published.arrays) {
            const FaithfulKind *k = nullptr;
            int32_t layer = 0;
            if (a.dtype != uint16_t(DType::BF16) || !parse_faithful_file_name(a.name, &k, &layer) ||
                (k->role != Role::FFN_W1 && k->role != Role::FFN_W2 && k->role != Role::FFN_W3))
                continue;
            w.push_back(std::string("--ffn ") + dtype_name(uint16_t(published.runtime.ffn_dtype)) + ": " + a.name +
                        " kept bf16: its rows of " + std::to_string(a.dims[a.rank - 1]) +
                        " values are not whole blocks of 32 (its dtype in the manifest's array table)");
        }
    if (published.arrays.empty())
        w.push_back(
            "the generation holds no arrays: every feature is disabled (stk check will verify the "
            "manifest alone)");
    return w;
}

extern "C" {

STK_API stk_status stk_job_warning_count(const stk_job *job, uint32_t *out_count) {
    return guard([&] {
        if (!job || !out_count) throw_error(STK_E_INVALID_ARGUMENT, "stk_job_warning_count: NULL argument");
        *out_count = uint32_t(job_warnings(*job).size());
    });
}

STK_API stk_status stk_job_warning_at(const stk_job *job, uint32_t index, char *out, size_t out_cap, size_t *out_len) {
    return guard([&] {
        if (!job || !out_len || (!out && out_cap)) throw_error(STK_E_INVALID_ARGUMENT, "stk_job_warning_at: NULL argument");
        const std::vector<std::string> w = job_warnings(*job);
        if (index >= w.size())
            throw_error(STK_E_INVALID_ARGUMENT, "stk_job_warning_at: index %u, but the job has %zu warnings", index, w.size());
        *out_len = w[index].size();
        if (out_cap <= w[index].size())
            throw_error(STK_E_INVALID_ARGUMENT, "stk_job_warning_at: warning %u needs %zu bytes, out_cap is %zu", index,
                        w[index].size() + 1, out_cap);
        std::memcpy(out, w[index].c_str(), w[index].size() + 1);
    });
}

STK_API stk_status stk_generation_remove(const char *root, const char *name) {
    return guard([&] {
        if (!root || !name) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_remove: NULL argument");
        int fd = lock_root(root);
        try {
            remove_generation(root, name, false);
        } catch (...) {
            unlock_root(fd);
            throw;
        }
        unlock_root(fd);
    });
}

}  // extern "C"
