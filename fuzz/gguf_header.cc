// Fuzz the GGUF parser (header, every metadata value, tensor infos) and the dequantisers behind
// it.  Whatever it accepts must be in bounds: every tensor aligned, after the previous one, its
// bytes inside the input and equal to its elements x its type's block size; every supported
// type then dequantises (the replay driver puts a guard page right after the input) to the same
// bytes through the dispatched kernels and the scalar reference (NaN payloads aside).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "format/ggml_dequant.h"
#include "ingest/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        uint64_t alignment = 0;
        std::vector<stk::GgufTensorInfo> ts = stk::gguf_validate(data, size, "fuzz.gguf", &alignment);
        uint64_t prev_end = 0;
        std::vector<float> a, b;
        for (const stk::GgufTensorInfo &t : ts) {
            const stk::GgmlTypeInfo *ti = stk::ggml_type_info(t.type);
            if (!ti || t.n_dims > 4 || t.data_offset % alignment != 0 || t.data_offset < prev_end) __builtin_trap();
            if (t.n_bytes > size || t.data_offset > size - t.n_bytes) __builtin_trap();
            if (t.n_elements % ti->block != 0 || t.n_bytes != t.n_elements / ti->block * ti->block_bytes) __builtin_trap();
            prev_end = t.data_offset + t.n_bytes;
            if (!stk::ggml::ggml_dequant_supported(t.type) || t.n_elements == 0) continue;
            const uint64_t n_blocks = t.n_elements / ti->block;
            a.assign(t.n_elements, 0.0f);
            b.assign(t.n_elements, 1.0f);
            stk::ggml::ggml_dequantize(t.type, data + t.data_offset, n_blocks, a.data());
            stk::ggml::ggml_dequantize_reference(t.type, data + t.data_offset, n_blocks, b.data());
            if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0) {
                // Bit-exact, except that a NaN's payload is not pinned when a block's scales are
                // NaN (which operand's NaN an x86 add returns depends on the instruction order).
                for (size_t i = 0; i < a.size(); i++) {
                    uint32_t x, y;
                    std::memcpy(&x, &a[i], 4);
                    std::memcpy(&y, &b[i], 4);
                    if (x != y && !(a[i] != a[i] && b[i] != b[i])) {
                        std::fprintf(stderr, "%s element %zu: kernels %08x, reference %08x\n", ti->name, i, x, y);
                        __builtin_trap();
                    }
                }
            }
        }
    } catch (const stk::Error &) {
    }
    return 0;
}
