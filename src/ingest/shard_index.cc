// HuggingFace sharded-checkpoint indexes (model.safetensors.index.json,
// pytorch_model.bin.index.json): {"metadata": {...}, "weight_map": {tensor: shard file}}.
#include "ingest/shard_index.h"

#include <simdjson.h>

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "ingest/source.h"

namespace stk {

std::vector<std::pair<std::string, std::string>> parse_shard_index(const std::string &json, const std::string &path) {
    using namespace simdjson;
    dom::parser parser;
    dom::element doc;
    auto err = parser.parse(json.data(), json.size(), true).get(doc);
    if (err) throw_error(STK_E_BAD_JSON, "%s: not valid JSON: %s", path.c_str(), error_message(err));
    dom::object root, wm;
    if (doc.get_object().get(root)) throw_error(STK_E_BAD_JSON, "%s: not a JSON object", path.c_str());
    size_t n_wm = 0;
    for (auto f : root)
        if (f.key == "weight_map") n_wm++;
    if (n_wm != 1) throw_error(STK_E_BAD_JSON, "%s: expected exactly one \"weight_map\" object, found %zu", path.c_str(), n_wm);
    if (root["weight_map"].get_object().get(wm)) throw_error(STK_E_BAD_JSON, "%s: \"weight_map\" is not an object", path.c_str());
    std::vector<std::pair<std::string, std::string>> out;
    for (auto f : wm) {
        std::string_view shard;
        if (f.value.get_string().get(shard))
            throw_error(STK_E_BAD_JSON, "%s: weight_map entry '%s' is not a file name string", path.c_str(),
                        printable(f.key).c_str());
        std::string s(shard);
        if (!is_plain_file_name(s))
            throw_error(STK_E_CORRUPT, "%s: weight_map entry '%s' names '%s', which is not a plain file name in this directory",
                        path.c_str(), printable(f.key).c_str(), printable(shard).c_str());
        out.emplace_back(std::string(f.key), std::move(s));
    }
    std::sort(out.begin(), out.end());
    for (size_t i = 1; i < out.size(); i++)
        if (out[i].first == out[i - 1].first)
            throw_error(STK_E_CORRUPT, "%s: tensor '%s' appears twice in weight_map", path.c_str(),
                        printable(out[i].first).c_str());
    if (out.empty()) throw_error(STK_E_CORRUPT, "%s: weight_map is empty", path.c_str());
    return out;
}

}  // namespace stk
