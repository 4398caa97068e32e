// Fuzz the sharded-checkpoint index parser (model.safetensors.index.json and
// pytorch_model.bin.index.json: {"metadata": {...}, "weight_map": {tensor: shard}}).  Whatever it
// accepts must be sorted by tensor name without duplicates and name shard files without path
// components.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "ingest/shard_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        auto map = stk::parse_shard_index(std::string(reinterpret_cast<const char *>(data), size), "fuzz.index.json");
        for (size_t i = 0; i < map.size(); i++) {
            const std::string &shard = map[i].second;
            if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") __builtin_trap();
            if (i && !(map[i - 1].first < map[i].first)) __builtin_trap();
        }
    } catch (const stk::Error &) {
    }
    return 0;
}
