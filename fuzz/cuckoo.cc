// Fuzz the cuckoo table.  First byte even: the rest is a serialized table: load it (validation),
// then look up keys taken from the input; probes never exceed d*b + S + 1.  First byte odd: the
// rest is (u64 key, u32 value) pairs: build with small parameters chosen by the first byte, then
// every key must be found with its value, also after serialize + load.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"
#include "hash/cuckoo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    try {
        if ((data[0] & 1) == 0) {
            stk::CuckooTable t = stk::CuckooTable::load(p, n, "fuzz.cuckoo");
            for (size_t i = 0; i + 8 <= n && i < 4096; i += 8) {
                uint32_t v, probes;
                t.find(stk::load_u64(p + i), &v, &probes);
                if (probes > t.d * t.b + t.stash + 1) __builtin_trap();
            }
        } else {
            size_t m = n / 12;
            std::vector<uint64_t> keys(m);
            std::vector<uint32_t> vals(m);
            for (size_t i = 0; i < m; i++) {
                keys[i] = stk::load_u64(p + 12 * i);
                vals[i] = stk::load_u32(p + 12 * i + 8);
            }
            stk::CuckooParams cp;
            cp.d = 1 + (data[0] >> 1) % 3;
            cp.b = 1 + (data[0] >> 3) % 4;
            cp.stash = (data[0] >> 5) % 4;
            cp.load = 0.5 + 0.1 * ((data[0] >> 1) % 5);
            std::vector<uint8_t> mem(stk::cuckoo_build_arena_size(m, cp));
            stk::Arena arena(mem.data(), mem.size());
            stk::CuckooReport rep;
            stk::CuckooTable t = stk::cuckoo_build(keys.data(), vals.data(), m, cp, arena, &rep);
            std::vector<uint8_t> blob(t.serialized_size());
            t.serialize(blob.data());
            stk::CuckooTable u = stk::CuckooTable::load(blob.data(), blob.size(), "fuzz.cuckoo");
            for (size_t i = 0; i < m; i++) {
                uint32_t v1 = 0, v2 = 0;
                if (!t.find(keys[i], &v1) || !u.find(keys[i], &v2) || v1 != vals[i] || v2 != vals[i]) __builtin_trap();
            }
        }
    } catch (const stk::Error &) {
    }
    return 0;
}
