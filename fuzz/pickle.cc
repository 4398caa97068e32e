// Fuzz the allowlist unpickler on raw data.pkl streams and legacy-format files: it must refuse or accept without
// executing anything, crashing, or using memory beyond a bound of the input size.
#include <cstdint>

#include "core/error.h"
#include "ingest/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        stk::PickleResult r = stk::unpickle_state_dict(data, size, "fuzz.pkl");
        for (const stk::PickledTensor &t : r.tensors) {
            if (t.storage >= r.storages.size()) __builtin_trap();
            if (t.shape.size() != t.stride.size()) __builtin_trap();
        }
    } catch (const stk::Error &) {
    }
    // The same bytes as a legacy torch file (five pickles, then storage records).
    try {
        stk::LegacyLayout l = stk::unpickle_legacy(data, size, "fuzz.pt");
        if (l.data_start > size) __builtin_trap();
    } catch (const stk::Error &) {
    }
    return 0;
}
