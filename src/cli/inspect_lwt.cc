// stk inspect on a .lwt file: header, every tensor (name, dtype, shape, bytes, scale) and whether
// the data section's CRC32 matches the header.  Structural errors are refused as the reader
// refuses them; a CRC mismatch is reported (exit 4), not hidden.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "format/lwt.h"

namespace stk::cli {

bool is_lwt_file(const std::string &path) {
    // A regular file named *.lwt goes to the .lwt reader even with a wrong magic (refused there).
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ".lwt") == 0 && file_exists(path)) return true;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char magic[8] = {};
    size_t n = std::fread(magic, 1, 8, f);
    std::fclose(f);
    return n == 8 && std::memcmp(magic, kLwtMagic, 8) == 0;
}

static std::string shape_str(const LwtTensor &t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.ndim; d++) s += (d ? ", " : "") + std::to_string(t.shape[d]);
    return s + "]";
}

int inspect_lwt(const std::string &path, bool json) {
    std::unique_ptr<LwtFile> f;
    stk_status s = guard([&] { f = std::make_unique<LwtFile>(path, false); });
    if (s != STK_OK) return report_failure("inspect", s, json);
    const LwtHeader &h = f->header();
    uint32_t crc = f->computed_crc32();
    bool crc_ok = crc == h.data_crc32;
    if (json) {
        std::vector<std::string> tensors;
        for (const LwtTensor &t : f->tensors()) {
            Json j;
            j.str("name", t.name).str("dtype", lwt_dtype_name(t.dtype)).raw("shape", shape_str(t));
            j.unum("offset", t.offset).unum("size_bytes", t.size_bytes).real("scale", double(t.quant.scale));
            tensors.push_back(j.unum("zero_point", t.quant.zero_point).text());
        }
        int code = crc_ok ? kExitOk : kExitVerifyFailed;
        // The header as stored; a line break can only be whitespace there (JSON strings escape
        // them), so blanking them keeps the object on one line.
        std::string header(f->header_json());
        for (char &c : header)
            if (c == '\n' || c == '\r') c = ' ';
        std::string msg =
            crc_ok ? format(".lwt version %u: %" PRIu64 " tensors, %" PRIu64 " parameters", h.version, h.tensor_count,
                            h.parameter_count)
                   : format("%s: CRC32 of the data section is %08x, the header says %08x", path.c_str(), crc, h.data_crc32);
        json_result("inspect", code, crc_ok ? STK_OK : STK_E_CHECKSUM, msg)
            .str("kind", "lwt")
            .str("file", path)
            .unum("file_bytes", f->file_size())
            .unum("version", h.version)
            .unum("entry_bytes", h.entry_bytes)
            .raw("header", header)
            .unum("data_offset", f->data_offset())
            .str("crc32_computed", format("%08x", crc))
            .boolean("crc_ok", crc_ok)
            .raw("tensors", json_array(tensors))
            .print();
    } else {
        std::printf("file            %s (%" PRIu64 " bytes, .lwt version %u%s)\n", path.c_str(), f->file_size(), h.version,
                    h.version == 1 && h.entry_bytes != kLwtEntryBytesV1 ? ", 224-byte entries: the layout before version 2" : "");
        std::printf("model type      %s\n", h.model_type.c_str());
        std::string cfg;
        for (auto &c : h.config) cfg += (cfg.empty() ? "" : ", ") + c.first + " " + std::to_string(c.second);
        std::printf("config          %s\n", cfg.c_str());
        std::printf("dtype           %s (matrices), byte order little\n", h.dtype.c_str());
        std::printf("tensors         %" PRIu64 ", %" PRIu64 " parameters%s\n", h.tensor_count, h.parameter_count,
                    h.tied_lm_head ? ", lm_head tied to the token embedding (not stored)" : "");
        std::printf("data            %" PRIu64 " bytes at offset %" PRIu64 "\n", h.total_bytes, f->data_offset());
        std::printf("crc32           %08x %s (header says %08x)\n\n", crc, crc_ok ? "OK" : "MISMATCH", h.data_crc32);
        std::printf("%-44s %-9s %-16s %12s %12s %s\n", "tensor", "dtype", "shape", "offset", "bytes", "scale/zero");
        for (const LwtTensor &t : f->tensors()) {
            std::string q = lwt_dtype_is_float(t.dtype) ? "-" : format("%.9g/%u", double(t.quant.scale), t.quant.zero_point);
            std::printf("%-44s %-9s %-16s %12" PRIu64 " %12" PRIu64 " %s\n", t.name.c_str(), lwt_dtype_name(t.dtype),
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
