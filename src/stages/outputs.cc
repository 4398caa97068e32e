#include "stages/outputs.h"

#include <cstring>

#include "core/error.h"
#include "core/output_file.h"

namespace stk {

void StageDigest::add(const void *data, size_t len) {
    crc_ = crc32c(data, len, crc_);
    sha_.update(data, len);
}

void StageDigest::add_array(const char *name, const ArrayHeader &h) {
    add(name, std::strlen(name) + 1);
    uint8_t bytes[kArrayHeaderSize];
    encode_array_header(h, bytes);
    // header_crc (bytes 120..127) is fed as zeros: it is a function of the bytes before it, and a
    // CRC over bytes that end with their own CRC is a constant (the CRC residue), which made every
    // stage's crc32c the same value whatever it wrote.
    std::memset(bytes + 120, 0, 8);
    add(bytes, sizeof bytes);
}

void StageDigest::finish(StageRecord &rec) {
    rec.crc32c = crc_;
    rec.sha256_low64 = sha_.finish().low64();
}

void job_record_array(Job &job, stk_stage stage, StageDigest &digest, const char *name, const ArrayHeader &h) {
    if (job.n_arrays >= kMaxArrays) throw_error(STK_E_INTERNAL, "more than %u arrays in one generation", kMaxArrays);
    if (std::strlen(name) >= sizeof(WrittenArray::name)) throw_error(STK_E_INTERNAL, "array name too long: %s", name);
    WrittenArray &w = job.arrays[job.n_arrays++];
    std::memset(w.name, 0, sizeof w.name);
    std::memcpy(w.name, name, std::strlen(name));
    w.stage = stage;
    w.header = h;
    digest.add_array(name, h);
}

ArrayHeader job_write_array(Job &job, stk_stage stage, StageDigest &digest, const ArraySpec &spec, const void *payload) {
    std::string dir = std::string(job.out_dir) + "/arrays";
    make_dirs(dir);
    // Into a staging directory (a job publishing into a root), the commit waits on job.commits'
    // thread; into a plain output directory the file is committed before this returns.
    ArrayHeader h = write_array(dir + "/" + spec.name, spec.dtype, spec.rank, spec.dims, payload,
                                kFlagRowMajor | kFlagAligned64, job.params.threads, job.root ? &job.commits : nullptr);
    job_record_array(job, stage, digest, spec.name.c_str(), h);
    return h;
}

}  // namespace stk
