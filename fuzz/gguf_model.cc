// Fuzz a GGUF read as the HuggingFace model it was converted from (ingest/gguf_model.h): the
// metadata turned into config.json, the architecture's renames, row fixes and gathers (DeepSeek's
// kv_b, InternLM2's wqkv, GraniteMoE's and gpt-oss's expert stacks, phi2's and starcoder's shapes),
// then every tensor converted to f32 in chunks, as parse_tensors reads it.  Accepted tensors must
// address bytes inside what the checkpoint maps; a refusal is an stk::Error.  The input goes
// through a memfd, as open_gguf_model maps a path.  Seeds: llama.cpp-converter fixtures (small
// ones in fuzz/corpus/gguf_model; the fuzz-replay test also replays all of tests/data/gguf).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "ingest/gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) break;
        done += size_t(n);
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        stk::GgufModel m = stk::open_gguf_model(path);
        std::vector<uint8_t> scratch;
        std::vector<float> out(4096);
        uint64_t budget = uint64_t(1) << 22;  // values converted per input, to keep runs fast
        for (const stk::TensorRef &t : m.checkpoint->tensors()) {
            const uint8_t *bytes = m.checkpoint->tensor_bytes(t, scratch);
            for (uint64_t first = 0; first < t.n_elements && budget > 0;) {
                uint64_t count = t.n_elements - first < out.size() ? t.n_elements - first : out.size();
                stk::convert_to_f32(t, bytes, first, count, out.data());
                first += count;
                budget -= count < budget ? count : budget;
            }
            m.checkpoint->release(t);
        }
    } catch (const stk::Error &) {
    }
    close(fd);
    return 0;
}
