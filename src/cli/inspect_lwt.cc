// stk inspect on a .lwt file: header, every tensor (name, dtype, shape, bytes, scale) and whether
// the data section's CRC32 matches the header.  Structural errors are refused as the reader
// refuses them; a CRC mismatch is reported (exit 4), not hidden.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace stk::cli {

bool is_lwt_file(const std::string &path) {
    // A regular file named *.lwt goes to the .lwt reader even with a wrong magic (refused there).
    uint32_t kind = STK_PATH_OTHER;
    return stk_path_kind_of(path.c_str(), &kind) == STK_OK && kind == STK_PATH_LWT;
}

static std::string shape_str(const stk_lwt_tensor &t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.ndim; d++) s += (d ? ", " : "") + std::to_string(t.shape[d]);
    return s + "]";
}

int inspect_lwt(const std::string &path, bool json) {
    stk_lwt *lwt = nullptr;
    stk_status s = stk_lwt_open_flags(path.c_str(), STK_LWT_OPEN_NO_CRC, &lwt);
    if (s != STK_OK) return report_failure("inspect", s, json);
    std::unique_ptr<stk_lwt, void (*)(stk_lwt *)> hold(lwt, stk_lwt_close);
    stk_lwt_header h = {};
    h.struct_size = sizeof h;
    const char *header_json = nullptr;
    size_t header_len = 0;
    uint32_t n_tensors = 0;
    s = stk_lwt_get_header(lwt, &h);
    if (s == STK_OK) s = stk_lwt_info(lwt, &n_tensors, &header_json, &header_len);
    const std::vector<stk_lwt_tensor> tensors = read_entries(stk_lwt_tensor_at, lwt, n_tensors, &s);
    if (s != STK_OK) return report_failure("inspect", s, json);
    uint32_t crc = h.crc32_computed;
    bool crc_ok = crc == h.data_crc32;
    if (json) {
        std::vector<std::string> items;
        for (const stk_lwt_tensor &t : tensors) {
            Json j;
            j.str("name", t.name).str("dtype", stk_lwt_dtype_name(t.dtype)).raw("shape", shape_str(t));
            j.unum("offset", t.offset).unum("size_bytes", t.size_bytes).real("scale", double(t.scale));
            items.push_back(j.unum("zero_point", t.zero_point).text());
        }
        int code = crc_ok ? kExitOk : kExitVerifyFailed;
        // The header as stored; a line break can only be whitespace there (JSON strings escape
        // them), so blanking them keeps the object on one line.
        std::string header(header_json, header_len);
        for (char &c : header)
            if (c == '\n' || c == '\r') c = ' ';
        std::string msg =
            crc_ok ? format(".lwt version %u: %" PRIu64 " tensors, %" PRIu64 " parameters", h.version, h.tensor_count,
                            h.parameter_count)
                   : format("%s: CRC32 of the data section is %08x, the header says %08x", path.c_str(), crc, h.data_crc32);
        json_result("inspect", code, crc_ok ? STK_OK : STK_E_CHECKSUM, msg)
            .str("kind", "lwt")
            .str("file", path)
            .unum("file_bytes", h.file_bytes)
            .unum("version", h.version)
            .unum("entry_bytes", h.entry_bytes)
            .raw("header", header)
            .unum("data_offset", h.data_offset)
            .str("crc32_computed", hex8(crc))
            .boolean("crc_ok", crc_ok)
            .raw("tensors", json_array(items))
            .print();
    } else {
        std::printf("file            %s (%" PRIu64 " bytes, .lwt version %u%s)\n", path.c_str(), h.file_bytes, h.version,
                    h.old_layout ? ", 224-byte entries: the layout before version 2" : "");
        std::printf("model type      %s\n", h.model_type);
        std::string cfg;
        for (uint32_t i = 0; i < h.n_config; i++) {
            const char *key = nullptr;
            uint64_t value = 0;
            if (stk_lwt_config_at(lwt, i, &key, &value) != STK_OK) break;  // i < n_config: cannot fail
            cfg += (cfg.empty() ? "" : ", ") + std::string(key) + " " + std::to_string(value);
        }
        std::printf("config          %s\n", cfg.c_str());
        std::printf("dtype           %s (matrices), byte order little\n", h.dtype);
        std::printf("tensors         %" PRIu64 ", %" PRIu64 " parameters%s\n", h.tensor_count, h.parameter_count,
                    h.tied_lm_head ? ", lm_head tied to the token embedding (not stored)" : "");
        std::printf("data            %" PRIu64 " bytes at offset %" PRIu64 "\n", h.data_bytes, h.data_offset);
        std::printf("crc32           %08x %s (header says %08x)\n\n", crc, crc_ok ? "OK" : "MISMATCH", h.data_crc32);
        std::printf("%-44s %-9s %-16s %12s %12s %s\n", "tensor", "dtype", "shape", "offset", "bytes", "scale/zero");
        for (const stk_lwt_tensor &t : tensors) {
            std::string q = stk_lwt_dtype_is_float(t.dtype)                             ? "-"
                            : t.dtype == STK_LWT_Q4_0 || t.dtype == STK_LWT_Q8_0 ? "per block"
                                                                                  : format("%.9g/%u", double(t.scale), t.zero_point);
            std::printf("%-44s %-9s %-16s %12" PRIu64 " %12" PRIu64 " %s\n", t.name, stk_lwt_dtype_name(t.dtype),
                        shape_str(t).c_str(), t.offset, t.size_bytes, q.c_str());
        }
    }
    if (!crc_ok) {
        std::fprintf(stderr, "stk inspect: %s: CRC32 of the data section is %08x, the header says %08x\n", path.c_str(), crc,
                     h.data_crc32);
        return kExitVerifyFailed;
    }
    return kExitOk;
}

}  // namespace stk::cli
