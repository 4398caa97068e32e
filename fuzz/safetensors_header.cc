// Fuzz the safetensors header parser/validator.  Whatever it accepts must be exactly in bounds:
// every tensor's bytes inside the input, lengths equal to shape x dtype, and converting every
// element must not read past the end (the replay driver puts a guard page right after).
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ingest/checkpoint.h"
#include "ingest/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        stk::SafetensorsHeader h = stk::parse_safetensors(data, size, "fuzz.safetensors");
        uint64_t end = h.data_start;
        std::vector<float> out;
        for (const stk::TensorRef &t : h.tensors) {
            if (t.file_offset != end || t.n_bytes > size - t.file_offset) __builtin_trap();
            if (t.n_bytes != t.n_elements * stk::src_dtype_size(t.dtype)) __builtin_trap();
            end = t.file_offset + t.n_bytes;
            out.resize(t.n_elements);
            stk::convert_to_f32(t, data + t.file_offset, 0, t.n_elements, out.data());
        }
        if (end != size) __builtin_trap();
    } catch (const stk::Error &) {
    }
    return 0;
}
