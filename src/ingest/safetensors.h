// safetensors: an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data
// buffer.  Validation is at least as strict as the reference crate (docs/decisions.md,
// "Ingestion readers: safetensors strictness").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ingest/checkpoint.h"
#include "ingest/source.h"

namespace stk {

constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;  // the crate's MAX_HEADER_SIZE

struct SafetensorsHeader {
    uint64_t data_start = 0;                                    // 8 + N: file offset of the data buffer
    std::vector<TensorRef> tensors;                             // in data order; file_offset absolute
    std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__, in file order
};

// Parse and validate the header of a whole safetensors file held in [data, data+size) (only the
// first 8 + N bytes are read; the size is needed for the exact-length check).  `path` names the
// file in errors.
SafetensorsHeader parse_safetensors(const uint8_t *data, uint64_t size, const std::string &path);

// A mapped safetensors file as a Source.
std::unique_ptr<Source> open_safetensors(const std::string &path);

}  // namespace stk
