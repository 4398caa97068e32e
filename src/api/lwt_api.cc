// The extern "C" surface of .lwt files: export (HF -> .lwt) and read-only access.
#include <cstddef>
#include <cstring>

#include "core/abi.h"
#include "core/error.h"
#include "export/lwt_export.h"
#include "format/lwt.h"
#include "stk/stk.h"

using namespace stk;

struct stk_lwt {
    stk_lwt(const char *path, bool verify_crc) : file(path, verify_crc) {}
    LwtFile file;
};

namespace {

void fill(const stk_lwt *lwt, const LwtTensor &t, stk_lwt_tensor *out) {
    stk_lwt_tensor v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    std::memcpy(v.name, t.name.data(), t.name.size());  // < 128 bytes: the reader checked
    v.dtype = uint32_t(t.dtype);
    v.ndim = t.ndim;
    for (uint32_t d = 0; d < 8; d++) v.shape[d] = t.shape[d];
    v.n_elements = t.n_elements;
    v.size_bytes = t.size_bytes;
    v.scale = t.quant.scale;
    v.zero_point = t.quant.zero_point;
    v.data = lwt->file.tensor_data(t);
    v.offset = t.offset;
    abi_write(out, v);
}

void check_tensor_struct(const stk_lwt_tensor *out, const char *fn) {
    if (!out) throw_error(STK_E_INVALID_ARGUMENT, "%s: NULL argument", fn);
    abi_check_out(out);
}

}  // namespace

extern "C" {

STK_API stk_status stk_export_lwt(const stk_export_params *params, stk_export_report *report) {
    return guard([&] {
        if (!params) throw_error(STK_E_INVALID_ARGUMENT, "stk_export_lwt: NULL argument");
        // Callers built before `threads` was added pass the first version's sizeof (32: dtype and
        // the tail padding `reserved` now names): threads reads 0, one thread.
        static_assert(sizeof(void *) != 8 || offsetof(stk_export_params, threads) == 32,
                      "the first version of stk_export_params: 32 bytes on LP64");
        const stk_export_params p = abi_read(params);
        if (!p.in_dir || !p.out_path) throw_error(STK_E_INVALID_ARGUMENT, "stk_export_lwt: NULL argument");
        if (report) abi_check_out(report);
        uint32_t dt = p.dtype ? p.dtype : uint32_t(STK_LWT_F32);
        if (!lwt_dtype_valid(dt)) throw_error(STK_E_INVALID_ARGUMENT, "stk_export_lwt: dtype %u is not an stk_lwt_dtype", dt);
        LwtExportOptions opt;
        opt.in = p.in_dir;
        opt.out = p.out_path;
        opt.dtype = LwtDType(dt);
        opt.threads = p.threads ? p.threads : 1;
        if (opt.threads > kLwtExportMaxThreads)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_export_lwt: threads %u is more than %u", opt.threads, kLwtExportMaxThreads);
        LwtExportResult r = export_lwt(opt);
        if (report) {
            stk_export_report v;
            std::memset(&v, 0, sizeof v);
            v.struct_size = sizeof v;
            v.tensors = r.tensors;
            v.parameters = r.parameters;
            v.file_bytes = r.file_bytes;
            v.data_crc32 = r.data_crc32;
            v.tied_lm_head = r.tied_lm_head ? 1 : 0;
            abi_write(report, v);
        }
    });
}

STK_API stk_status stk_lwt_open(const char *path, stk_lwt **out_lwt) {
    return guard([&] {
        if (!path || !out_lwt) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_open: NULL argument");
        *out_lwt = nullptr;
        *out_lwt = new stk_lwt(path, true);
    });
}

STK_API stk_status stk_lwt_open_flags(const char *path, uint32_t flags, stk_lwt **out_lwt) {
    return guard([&] {
        if (!path || !out_lwt) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_open_flags: NULL argument");
        *out_lwt = nullptr;
        if (flags & ~STK_LWT_OPEN_NO_CRC) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_open_flags: unknown flags 0x%x", flags);
        *out_lwt = new stk_lwt(path, (flags & STK_LWT_OPEN_NO_CRC) == 0);
    });
}

STK_API stk_status stk_lwt_get_header(const stk_lwt *lwt, stk_lwt_header *out) {
    return guard([&] {
        if (!lwt || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_get_header: NULL argument");
        abi_check_out(out);
        const LwtHeader &h = lwt->file.header();
        stk_lwt_header v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.version = h.version;
        v.entry_bytes = uint32_t(h.entry_bytes);
        v.old_layout = h.version == 1 && h.entry_bytes != kLwtEntryBytesV1 ? 1 : 0;
        v.tied_lm_head = h.tied_lm_head ? 1 : 0;
        v.model_type = h.model_type.c_str();
        v.dtype = h.dtype.c_str();
        v.tensor_count = h.tensor_count;
        v.parameter_count = h.parameter_count;
        v.data_bytes = h.total_bytes;
        v.data_offset = lwt->file.data_offset();
        v.file_bytes = lwt->file.file_size();
        v.data_crc32 = h.data_crc32;
        v.crc32_computed = lwt->file.computed_crc32();  // computed once, then kept
        v.n_config = uint32_t(h.config.size());
        abi_write(out, v);
    });
}

STK_API stk_status stk_lwt_config_at(const stk_lwt *lwt, uint32_t index, const char **out_key, uint64_t *out_value) {
    return guard([&] {
        if (!lwt || !out_key || !out_value) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_config_at: NULL argument");
        const auto &config = lwt->file.header().config;
        if (index >= config.size())
            throw_error(STK_E_INVALID_ARGUMENT, "%s: config index %u, the header has %zu", lwt->file.name().c_str(), index,
                        config.size());
        *out_key = config[index].first.c_str();
        *out_value = config[index].second;
    });
}

STK_API void stk_lwt_close(stk_lwt *lwt) { delete lwt; }

STK_API stk_status stk_lwt_info(const stk_lwt *lwt, uint32_t *out_tensor_count, const char **out_header_json,
                                size_t *out_header_len) {
    return guard([&] {
        if (!lwt) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_info: NULL handle");
        if (out_tensor_count) *out_tensor_count = uint32_t(lwt->file.tensors().size());
        if (out_header_json) *out_header_json = lwt->file.header_json().data();
        if (out_header_len) *out_header_len = lwt->file.header_json().size();
    });
}

STK_API stk_status stk_lwt_tensor_at(const stk_lwt *lwt, uint32_t index, stk_lwt_tensor *out) {
    return guard([&] {
        if (!lwt) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_tensor_at: NULL handle");
        check_tensor_struct(out, "stk_lwt_tensor_at");
        if (index >= lwt->file.tensors().size())
            throw_error(STK_E_INVALID_ARGUMENT, "%s: tensor index %u, the file has %zu", lwt->file.name().c_str(), index,
                        lwt->file.tensors().size());
        fill(lwt, lwt->file.tensors()[index], out);
    });
}

STK_API stk_status stk_lwt_find(const stk_lwt *lwt, const char *name, stk_lwt_tensor *out) {
    return guard([&] {
        if (!lwt || !name) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_find: NULL argument");
        check_tensor_struct(out, "stk_lwt_find");
        const LwtTensor *t = lwt->file.find(name);
        if (!t) throw_error(STK_E_KEY_NOT_FOUND, "%s: no tensor named '%s'", lwt->file.name().c_str(), name);
        fill(lwt, *t, out);
    });
}

STK_API stk_status stk_lwt_read_f32(const stk_lwt *lwt, const char *name, float *out, size_t out_count) {
    return guard([&] {
        if (!lwt || !name || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_read_f32: NULL argument");
        const LwtTensor *t = lwt->file.find(name);
        if (!t) throw_error(STK_E_KEY_NOT_FOUND, "%s: no tensor named '%s'", lwt->file.name().c_str(), name);
        if (out_count < t->n_elements)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: tensor '%s' has %llu elements, the buffer holds %zu",
                        lwt->file.name().c_str(), name, (unsigned long long)t->n_elements, out_count);
        lwt->file.read_f32(*t, out);
    });
}

}  // extern "C"
