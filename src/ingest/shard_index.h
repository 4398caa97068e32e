// HuggingFace sharded-checkpoint indexes: the weight_map of model.safetensors.index.json or
// pytorch_model.bin.index.json, parsed and validated (the fuzz target shard_index runs it).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace stk {

// (tensor, shard file) pairs, sorted by tensor name, validated: exactly one "weight_map" object,
// string values that are plain file names in the index's directory, unique tensor names, not
// empty.  `path` names the file in errors.
std::vector<std::pair<std::string, std::string>> parse_shard_index(const std::string &json, const std::string &path);

}  // namespace stk
