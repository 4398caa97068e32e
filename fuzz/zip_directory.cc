// Fuzz the zip reader and, through it, the whole torch checkpoint path: central directory,
// local headers, inflate, data.pkl through the allowlist unpickler, storage and view checks.
// Every accepted tensor is converted in full: its view must lie inside its storage.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ingest/checkpoint.h"
#include "ingest/torch_zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        std::vector<stk::ZipEntry> entries = stk::parse_zip_directory(data, size, "fuzz.zip");
        std::vector<uint8_t> scratch;
        for (const stk::ZipEntry &e : entries) {
            if (e.data_offset > size || e.compressed_size > size - e.data_offset) __builtin_trap();
            try {
                stk::zip_entry_bytes(data, e, scratch, "fuzz.zip");
            } catch (const stk::Error &) {
            }
        }
        auto src = stk::open_torch_zip_memory(data, size, "fuzz.zip");
        std::vector<float> out;
        for (const stk::TensorRef &t : src->tensors()) {
            if (t.n_elements > (uint64_t(1) << 24)) continue;  // a huge stride-0 view: valid, too slow to walk
            const uint8_t *b = src->bytes(t, scratch);
            out.resize(t.n_elements);
            stk::convert_to_f32(t, b, 0, t.n_elements, out.data());
        }
    } catch (const stk::Error &) {
    }
    return 0;
}
