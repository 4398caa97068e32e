// manifest_emit (seed 15.2): turns what the job recorded (arrays, stage digests, the draft the
// stages filled) into <out_dir>/sera_manifest.bin.  It runs last among the writers and the
// manifest appearing is the publication: a reader that sees it sees every array complete.
#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/output_file.h"
#include "format/manifest.h"
#include "kernels/numeric_mode.h"
#include "stages/policy.h"
#include "stages/stages.h"

namespace stk {

// seed_digest: SHA-256 of "stk-params" NUL, then LE u32 r, rv, l_tok, top_l, flags, then LE u64
// master_seed.  threads is left out on purpose: output bytes do not depend on it.
void params_seed_digest(const stk_job_params &p, uint64_t master_seed, uint8_t out[32]) {
    uint8_t rec[11 + 5 * 4 + 8];
    std::memcpy(rec, "stk-params", 11);
    uint32_t v[5] = {p.r, p.rv, p.l_tok, p.top_l, p.flags};
    for (int i = 0; i < 5; i++) store_le<uint32_t>(rec + 11 + 4 * i, v[i]);
    store_le<uint64_t>(rec + 31, master_seed);
    Sha256Digest d = sha256(rec, sizeof rec);
    std::memcpy(out, d.bytes, 32);
}

void manifest_emit_run(Job &job) {
    job.commits.drain();  // every array under its name and durable before the manifest names it
    ManifestDraft &draft = job.manifest;
    const std::string out_dir = job.out_dir;
    const std::string path = out_dir + "/" + kManifestFileName;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0)
        throw_error(STK_E_OUTPUT_EXISTS, "%s already exists: %s holds a published generation", path.c_str(), out_dir.c_str());

    ManifestFields fields = draft.fields;
    params_seed_digest(job.params, job.manifest.master_seed, fields.seed_digest);

    // Every draft record, then one "feature disabled" record per stage that did not run.
    std::vector<ManifestRecord> records(draft.records, draft.records + draft.n_records);
    {  // the numeric mode every array was computed in (issue 40)
        ManifestRecord r;
        r.stage = uint16_t(STK_STAGE_MANIFEST_EMIT);
        r.kind = kRecordNote;
        r.feature = kFeatureNone;
        std::snprintf(r.text, sizeof r.text, "%s", kernels::numeric_mode_name());
        records.push_back(r);
    }
    ManifestInput in;
    for (int id = 1; id <= STK_STAGE_COUNT; id++) {
        ManifestStage &s = in.stages[id - 1];
        const StageRecord &rec = job.stages[id];
        if (id == STK_STAGE_MANIFEST_EMIT) {
            s.state = kStageRan;  // its digest is curr_hash itself, which cannot be inside the file
        } else if (id == STK_STAGE_CHECK) {
            s.state = kStagePending;
        } else if (!rec.done || rec.not_implemented) {
            s.state = rec.done ? kStageNotImplemented : kStageFailed;
            ManifestRecord r;
            r.stage = uint16_t(id);
            r.kind = kRecordFeatureDisabled;
            r.feature = stage_feature(id);
            r.status = rec.done ? STK_E_NOT_IMPLEMENTED : STK_E_INTERNAL;
            std::snprintf(r.text, sizeof r.text, "%s %s: its feature is disabled (beta = 0 on that path)",
                          find_stage(stk_stage(id))->name, rec.done ? "is not implemented" : "did not finish");
            records.push_back(r);
        } else {
            s.state = kStageRan;
            for (uint32_t i = 0; i < draft.n_records; i++)
                if (draft.records[i].stage == id && draft.records[i].kind == kRecordFeatureDisabled) s.state = kStageDisabled;
            s.crc32c = rec.crc32c;
            s.sha256_low64 = rec.sha256_low64;
        }
    }
    if (records.size() > kManifestMaxRecords) records.resize(kManifestMaxRecords);

    // The array table, and a cheap last look that every listed file is there at its size before
    // we publish (stk check hashes them afterwards).
    std::vector<ManifestArray> arrays;
    arrays.reserve(job.n_arrays);
    for (uint32_t i = 0; i < job.n_arrays; i++) {
        const WrittenArray &w = job.arrays[i];
        arrays.push_back(manifest_array_from_header(w.name, uint16_t(w.stage), w.header));
        std::string ap = out_dir + "/" + kArraysDirName + "/" + w.name;
        if (::stat(ap.c_str(), &st) != 0)
            throw_error(STK_E_MISSING_ARRAY, "%s: array %s recorded by stage %s is missing; nothing published", ap.c_str(),
                        w.name, find_stage(w.stage)->name);
        if (uint64_t(st.st_size) != kArrayHeaderSize + w.header.byte_len)
            throw_error(STK_E_SIZE_MISMATCH, "%s: %llu bytes, expected %llu; nothing published", ap.c_str(),
                        (unsigned long long)st.st_size, (unsigned long long)(kArrayHeaderSize + w.header.byte_len));
    }

    in.fields = &fields;
    in.p_gen = draft.p_gen;
    in.n_pgen = draft.n_pgen;
    in.arrays = arrays.data();
    in.n_arrays = uint32_t(arrays.size());
    in.records = records.data();
    in.n_records = uint32_t(records.size());
    std::memcpy(in.prev_hash, draft.prev_hash, 32);
    if (draft.has_runtime) {
        in.runtime = &draft.runtime;
        in.runtime_layers = draft.runtime_layers;
    }

    make_dirs(out_dir);
    uint8_t curr[32];
    write_manifest(path, in, curr);
    StageRecord &self = job.stages[STK_STAGE_MANIFEST_EMIT];
    self.crc32c = crc32c(curr, 32);
    self.sha256_low64 = load_u64(curr);
}

}  // namespace stk
