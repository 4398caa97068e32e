// Test-only: print what stk's GGUF reader sees, for tests/gguf_reference.py to compare with
// gguf-py.
//   gguf_dump info FILE...        one JSON object: version, alignment, metadata (file order;
//                                 strings as hex, floats exact), tensors (ggml ne, shape, type,
//                                 offsets, file index)
//   gguf_dump dequant FILE [OUT]  every tensor through the checkpoint reader as f32: its SHA-256
//                                 (and OUT/INDEX.f32 when OUT is given)
// Exit 1 with the error on stderr ("STATUS message") when the reader refuses.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/error.h"
#include "ingest/checkpoint.h"
#include "ingest/gguf.h"

using namespace stk;

namespace {

void hex(std::string_view s) {
    for (unsigned char c : s) std::printf("%02x", c);
}

void number(double v) {
    if (std::isnan(v)) std::printf("\"nan\"");
    else if (std::isinf(v)) std::printf(v > 0 ? "\"inf\"" : "\"-inf\"");
    else std::printf("%.17g", v);
}

void value(const GgufValue &v) {
    switch (v.type()) {
        case GgufType::U8: std::printf("%u", v.u8()); break;
        case GgufType::I8: std::printf("%d", v.i8()); break;
        case GgufType::U16: std::printf("%u", v.u16()); break;
        case GgufType::I16: std::printf("%d", v.i16()); break;
        case GgufType::U32: std::printf("%u", v.u32()); break;
        case GgufType::I32: std::printf("%d", v.i32()); break;
        case GgufType::U64: std::printf("%" PRIu64, v.u64()); break;
        case GgufType::I64: std::printf("%" PRId64, v.i64()); break;
        case GgufType::F32: number(v.f32()); break;
        case GgufType::F64: number(v.f64()); break;
        case GgufType::BOOL: std::printf(v.boolean() ? "true" : "false"); break;
        case GgufType::STRING:
            std::printf("\"");
            hex(v.str());
            std::printf("\"");
            break;
        case GgufType::ARRAY:
            std::printf("{\"elem\": \"%s\", \"items\": [", gguf_type_name(v.elem_type()));
            for (uint64_t i = 0; i < v.size(); i++) {
                if (i) std::printf(", ");
                value(v.at(i));
            }
            std::printf("]}");
            break;
    }
}

int info(const std::vector<std::string> &paths) {
    std::unique_ptr<GgufFile> g = paths.size() == 1 ? std::make_unique<GgufFile>(paths[0]) : std::make_unique<GgufFile>(paths);
    std::printf("{\"version\": %u, \"alignment\": %" PRIu64 ", \"files\": %zu, \"metadata\": [", g->version(), g->alignment(),
                g->file_count());
    bool first = true;
    for (const GgufKV &kv : g->metadata()) {
        std::printf("%s\n{\"key\": \"", first ? "" : ",");
        first = false;
        hex(kv.key);
        std::printf("\", \"type\": \"%s\", \"value\": ", gguf_type_name(kv.value.type()));
        value(kv.value);
        std::printf("}");
    }
    std::printf("],\n\"tensors\": [");
    first = true;
    for (const GgufTensorInfo &t : g->tensors()) {
        std::printf("%s\n{\"name\": \"", first ? "" : ",");
        first = false;
        hex(t.name);
        std::printf("\", \"type\": %u, \"type_name\": \"%s\", \"ne\": [", t.type, ggml_type_name(t.type).c_str());
        for (uint32_t j = 0; j < t.n_dims; j++) std::printf("%s%" PRIu64, j ? ", " : "", t.ne[j]);
        std::printf("], \"shape\": [");
        for (size_t j = 0; j < t.shape.size(); j++) std::printf("%s%" PRIu64, j ? ", " : "", t.shape[j]);
        std::printf("], \"n_elements\": %" PRIu64 ", \"n_bytes\": %" PRIu64 ", \"file\": %u, \"offset\": %" PRIu64 "}",
                    t.n_elements, t.n_bytes, t.file_index, t.data_offset);
    }
    std::printf("]}\n");
    return 0;
}

int dequant(const std::string &path, const std::string &out) {
    auto ck = open_checkpoint(path);
    std::vector<uint8_t> scratch;
    std::vector<float> f32;
    std::printf("{\"format\": \"%s\", \"tensors\": [", ck->format());
    bool first = true;
    for (const TensorRef &t : ck->tensors()) {
        const uint8_t *b = ck->tensor_bytes(t, scratch);
        f32.resize(t.n_elements);
        convert_to_f32(t, b, 0, t.n_elements, f32.data());
        Sha256Digest h = sha256(f32.data(), f32.size() * 4);
        std::printf("%s\n{\"name\": \"", first ? "" : ",");
        first = false;
        hex(t.name);
        std::printf("\", \"dtype\": \"%s\", \"shape\": [", src_dtype_name(t.dtype));
        for (size_t j = 0; j < t.shape.size(); j++) std::printf("%s%" PRIu64, j ? ", " : "", t.shape[j]);
        std::printf("], \"sha256\": \"");
        hex(std::string_view(reinterpret_cast<const char *>(h.bytes), 32));
        std::printf("\"");
        if (!out.empty()) {
            std::string file = out + "/" + std::to_string(&t - ck->tensors().data()) + ".f32";
            FILE *f = std::fopen(file.c_str(), "wb");
            if (!f || std::fwrite(f32.data(), 4, f32.size(), f) != f32.size() || std::fclose(f) != 0) {
                std::fprintf(stderr, "cannot write %s\n", file.c_str());
                return 2;
            }
            std::printf(", \"file\": \"%s\"", file.c_str());
        }
        std::printf("}");
        ck->release(t);
    }
    std::printf("]}\n");
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: gguf_dump info FILE... | gguf_dump dequant FILE [OUTDIR]\n");
        return 2;
    }
    try {
        std::string cmd = argv[1];
        if (cmd == "info") return info(std::vector<std::string>(argv + 2, argv + argc));
        if (cmd == "dequant" && (argc == 3 || argc == 4)) return dequant(argv[2], argc == 4 ? argv[3] : "");
        std::fprintf(stderr, "unknown command %s\n", argv[1]);
        return 2;
    } catch (const Error &e) {
        std::fprintf(stderr, "%s %s\n", stk_status_str(e.status()), e.what());
        return 1;
    }
}
