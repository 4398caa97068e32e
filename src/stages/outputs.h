// What stages write: every array is recorded on the job (name, header, stage) so manifest_emit
// can list them, and every stage has a digest (seed 15.2).
#pragma once

#include <cstdint>
#include <string>

#include "core/checksum.h"
#include "format/array.h"
#include "stages/job.h"
#include "stages/plan.h"

namespace stk {

// A stage's digest stream: crc32c and sha256_low64 over, for each array the stage wrote in write
// order, its file name and a NUL and its 128-byte header (which holds the payload checksums);
// a stage that writes no array feeds its own canonical record instead (documented per stage).
class StageDigest {
public:
    void add(const void *data, size_t len);
    void add_array(const char *name, const ArrayHeader &h);
    void finish(StageRecord &rec);

private:
    uint32_t crc_ = 0;
    Sha256 sha_;
};

// Write one array (the name, dtype and dims its planner also reports) under
// <out_dir>/arrays/<name>, record it on the job, feed the stage digest.
ArrayHeader job_write_array(Job &job, stk_stage stage, StageDigest &digest, const ArraySpec &spec, const void *payload);

// Record an array written by other means (a streaming ArrayWriter).
void job_record_array(Job &job, stk_stage stage, StageDigest &digest, const char *name, const ArrayHeader &h);

}  // namespace stk
