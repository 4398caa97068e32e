// Fuzz the .lwt reader (format/lwt.cc) and the unpacking of what it accepts.  Structure is checked
// with the CRC pass skipped (so mutations reach the index and size checks), then once with it.
// For an accepted file, every tensor is unpacked and re-packed with its stored scale: the bytes
// must come back identical (the load -> save promise), except f16/bf16 NaN payloads, which the
// writer only ever emits quiet; block-scaled tensors re-encoded under their stored block scales,
// every block but those of scale +-0 (whose codes decode to 0 whatever they are).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "format/lowbit.h"
#include "format/lwt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        stk::LwtFile f(data, size, "fuzz.lwt", false);
        std::vector<float> v;
        std::vector<uint8_t> again;
        for (const stk::LwtTensor &t : f.tensors()) {
            if (t.n_elements > (uint64_t(8) * size + 8)) __builtin_trap();  // sizes are bounded by the input
            v.resize(size_t(t.n_elements));
            try {
                f.read_f32(t, v.data());
            } catch (const stk::Error &) {
                continue;  // an invalid field or padding bits: refused, fine
            }
            bool nan = false;
            for (float x : v) nan |= std::isnan(x);
            if (nan && (t.dtype == stk::LwtDType::F16 || t.dtype == stk::LwtDType::BF16)) continue;
            again.assign(size_t(t.size_bytes), 0);
            if (stk::lwt_dtype_is_blocked(t.dtype)) {
                const stk::BlockQType b = stk::lwt_blockq(t.dtype);
                const uint64_t blocks = t.n_elements / stk::kBlockQElems, bb = stk::blockq_block_bytes(b);
                std::vector<uint16_t> d(static_cast<size_t>(blocks));
                for (uint64_t k = 0; k < blocks; k++) d[k] = stk::blockq_scale_bits(b, f.tensor_data(t), k);
                stk::blockq_quantize_scaled(b, v.data(), t.n_elements, d.data(), again.data());
                for (uint64_t k = 0; k < blocks; k++)
                    if ((d[k] & 0x7fff) && std::memcmp(again.data() + k * bb, f.tensor_data(t) + k * bb, size_t(bb)) != 0)
                        __builtin_trap();
                continue;
            }
            stk::lwt_pack(t.dtype, v.data(), t.n_elements, t.quant, again.data());
            if (t.size_bytes && std::memcmp(again.data(), f.tensor_data(t), size_t(t.size_bytes)) != 0) __builtin_trap();
        }
        stk::LwtFile g(data, size, "fuzz.lwt", true);
        (void)g;
    } catch (const stk::Error &) {
    }
    return 0;
}
