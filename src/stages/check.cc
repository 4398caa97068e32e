// check (seed 15.2, 12.7): verify the generation manifest_emit just published, exactly as
// `stk check` and stk_verify do.  Its digest: crc32c and sha256_low64 over the canonical record
// curr_hash[32] | LE u32 arrays_checked | LE u64 bytes_checked.  For a job publishing into a
// generations root, it then publishes the verified staging directory (publish_job.cc).
#include <cstring>
#include <string>

#include "publish/verify.h"
#include "core/bytes.h"
#include "core/error.h"
#include "format/manifest.h"
#include "stages/outputs.h"
#include "stages/stages.h"

namespace stk {

void check_stage_run(Job &job) {
    stk_verify_report report;
    std::memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    verify_generation(job.out_dir, &report, job.params.threads);
    Manifest m = read_manifest(std::string(job.out_dir) + "/" + kManifestFileName);
    uint8_t rec[32 + 4 + 8];
    std::memcpy(rec, m.curr_hash, 32);
    store_le<uint32_t>(rec + 32, report.arrays_checked);
    store_le<uint64_t>(rec + 36, report.bytes_checked);
    StageDigest d;
    d.add(rec, sizeof rec);
    d.finish(job.stages[STK_STAGE_CHECK]);
    publish_job(job);  // a generations root: verified, so publish (no-op for a plain out_dir)
}

}  // namespace stk
