// stk_manifest_*: a generation's manifest decoded (format/manifest.h) for front ends that show
// it (stk convert's summary, stk inspect, stk check), without reading the arrays.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/abi.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/output_file.h"
#include "format/manifest.h"
#include "publish/generations.h"
#include "stk/stk.h"

using namespace stk;

struct stk_manifest {
    Manifest m;
    uint64_t payload_bytes = 0;
    std::string dir, path;  // the generation directory and the manifest file read
    bool published = false;
};

namespace {

// A directory: a root's CURRENT generation or the generation itself; anything else: the file.
std::string manifest_path(const char *path) {
    struct stat st;
    if (::stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return resolve_generation(path) + "/" + kManifestFileName;
    return path;
}

// Published: the generation sits in a root's generations/ (stk publishes only what the check
// stage verified).
bool is_published(const std::string &dir) {
    const std::string parent = dir_of(dir);
    return base_of(parent) == kGenerationsDirName && is_generations_root(dir_of(parent));
}

}  // namespace

extern "C" {

STK_API stk_status stk_manifest_open(const char *path, stk_manifest **out_manifest) {
    return guard([&] {
        if (!path || !out_manifest) throw_error(STK_E_INVALID_ARGUMENT, "stk_manifest_open: NULL argument");
        *out_manifest = nullptr;
        auto h = std::make_unique<stk_manifest>();
        h->path = manifest_path(path);
        h->dir = dir_of(h->path);
        h->published = is_published(h->dir);
        h->m = read_manifest(h->path);
        for (const ManifestArray &a : h->m.arrays) h->payload_bytes = checked_add(h->payload_bytes, a.byte_len, "payload bytes");
        *out_manifest = h.release();
    });
}

STK_API void stk_manifest_close(stk_manifest *manifest) { delete manifest; }

STK_API stk_status stk_manifest_get_info(const stk_manifest *manifest, stk_manifest_info *out) {
    return guard([&] {
        if (!manifest || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_manifest_get_info: NULL argument");
        abi_check_out(out);
        const Manifest &m = manifest->m;
        const auto &t = m.fields.tokenizer;
        stk_manifest_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        std::memcpy(v.curr_hash, m.curr_hash, 32);
        std::memcpy(v.prev_hash, m.prev_hash, 32);
        std::memcpy(v.schema_sha256, m.schema_sha256, 32);
        v.array_count = uint32_t(m.arrays.size());
        v.record_count = uint32_t(m.records.size());
        v.pgen_count = uint32_t(m.p_gen.size());
        v.abi_flags = m.fields.abi_flags;
        v.payload_bytes = manifest->payload_bytes;
        v.tokenizer_mode = t.mode, v.tokenizer_l_tok = t.l_tok, v.tokenizer_s_norm = t.s_norm, v.tokenizer_l_norm = t.l_norm;
        v.tokenizer_vocab_size = t.vocab_size, v.tokenizer_unicode_policy = t.unicode_policy;
        std::memcpy(v.tokenizer_sp_cert_digest, t.sp_cert_digest, 32);
        v.dir = manifest->dir.c_str();
        v.manifest_path = manifest->path.c_str();
        v.published = manifest->published ? 1 : 0;
        v.first = 1;
        for (uint8_t b : m.prev_hash) v.first = v.first && b == 0;
        v.prf_r = m.fields.prf.r;
        v.overlays_rv = m.fields.overlays.r_v;
        if (m.has_runtime) {
            v.profile = m.runtime.profile;
            v.runtime_sinks = m.runtime.sinks, v.runtime_window = m.runtime.window, v.runtime_ffn_dtype = m.runtime.ffn_dtype;
            v.runtime_policy = m.runtime.policy, v.runtime_recent = m.runtime.recent;
        }
        abi_write(out, v);
    });
}

STK_API stk_status stk_manifest_array_at(const stk_manifest *manifest, uint32_t index, stk_manifest_array *out) {
    return guard([&] {
        if (!manifest || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_manifest_array_at: NULL argument");
        abi_check_out(out);
        const auto &arrays = manifest->m.arrays;
        if (index >= arrays.size())
            throw_error(STK_E_KEY_NOT_FOUND, "stk_manifest_array_at: index %u, the manifest lists %zu arrays", index,
                        arrays.size());
        const ManifestArray &a = arrays[index];
        stk_manifest_array v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        std::snprintf(v.name, sizeof v.name, "%.*s", int(strnlen(a.name, sizeof a.name)), a.name);
        v.stage = a.stage, v.dtype = a.dtype, v.rank = a.rank, v.flags = a.flags;
        std::memcpy(v.dims, a.dims, sizeof v.dims);
        v.byte_len = a.byte_len, v.sha256_low64 = a.sha256_low64, v.crc32c = a.crc32c;
        abi_write(out, v);
    });
}

STK_API stk_status stk_manifest_record_at(const stk_manifest *manifest, uint32_t index, stk_manifest_record *out) {
    return guard([&] {
        if (!manifest || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_manifest_record_at: NULL argument");
        abi_check_out(out);
        const auto &records = manifest->m.records;
        if (index >= records.size())
            throw_error(STK_E_KEY_NOT_FOUND, "stk_manifest_record_at: index %u, the manifest holds %zu records", index,
                        records.size());
        const ManifestRecord &r = records[index];
        stk_manifest_record v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.stage = r.stage, v.kind = r.kind, v.feature = r.feature, v.status = r.status;
        v.value = r.value, v.bound = r.bound;
        std::snprintf(v.text, sizeof v.text, "%.*s", int(strnlen(r.text, sizeof r.text)), r.text);
        abi_write(out, v);
    });
}

STK_API stk_status stk_manifest_stage_at(const stk_manifest *manifest, stk_stage stage, stk_manifest_stage *out) {
    return guard([&] {
        if (!manifest || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_manifest_stage_at: NULL argument");
        if (int(stage) < 1 || int(stage) > int(kManifestStages))
            throw_error(STK_E_INVALID_ARGUMENT, "stk_manifest_stage_at: unknown stage %d", int(stage));
        abi_check_out(out);
        const ManifestStage &s = manifest->m.stages[int(stage) - 1];
        stk_manifest_stage v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.state = s.state, v.crc32c = s.crc32c, v.sha256_low64 = s.sha256_low64;
        abi_write(out, v);
    });
}

}  // extern "C"
