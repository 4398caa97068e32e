// vocab.json + merges.txt (HF GPT-2 directories) and the official encoder.json + vocab.bpe: the
// GPT-2 byte-level spelling, keys raw UTF-8 or \uXXXX-escaped (simdjson unescapes both).
#include <simdjson.h>

#include "tokenizer/vocab_internal.h"
#include "tokenizer/vocab_io.h"

namespace stk {

using detail::printable;

namespace detail {
// Reads the merges.txt lines into b; shared with nothing else but kept apart for clarity.
static void read_merges_txt(VocabBuilder &b, std::string_view text, const std::string &name) {
    size_t pos = 0, line_no = 0;
    const std::string where_prefix = name + " line ";  // once, not per merge
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        size_t end = nl == std::string_view::npos ? text.size() : nl;
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        if (line_no == 1 && line.rfind("#version", 0) == 0) continue;  // "#version: 0.2"
        size_t sp = line.find(' ');
        if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string_view::npos)
            throw_error(STK_E_CORRUPT, "%s: line %zu: a merge is two tokens separated by one space, not '%s'", name.c_str(),
                        line_no, printable(line).c_str());
        b.add_merge(line.substr(0, sp), line.substr(sp + 1), where_prefix, line_no);
    }
}
}  // namespace detail

Vocab parse_gpt2_vocab(std::string_view vocab_json, std::string_view merges_txt, const std::string &vocab_name,
                       const std::string &merges_name) {
    using namespace simdjson;
    detail::VocabBuilder b;
    b.v.source = vocab_name;
    b.v.model = Vocab::Model::BPE_BYTE_LEVEL;
    b.v.pipeline.pre_tokenizer = Vocab::PreTokenizer::BYTE_LEVEL;

    dom::parser parser;
    padded_string json(vocab_json.data(), vocab_json.size());
    dom::object obj;
    if (auto err = parser.parse(json).get(obj))
        throw_error(STK_E_BAD_JSON, "%s: not a JSON object of token -> id (%s)", vocab_name.c_str(), error_message(err));
    std::string bytes;
    for (auto [key, value] : obj) {
        int64_t id;
        if (value.get_int64().get(id) != SUCCESS || id < 0)
            throw_error(STK_E_BAD_JSON, "%s: token '%s': the id is not a non-negative integer", vocab_name.c_str(),
                        printable(key).c_str());
        if (!detail::byte_level_to_bytes(key, &bytes))
            throw_error(STK_E_CORRUPT, "%s: token '%s' (id %lld) is not in GPT-2's byte-level spelling", vocab_name.c_str(),
                        printable(key).c_str(), (long long)id);
        b.add(key, bytes, uint64_t(id), "vocabulary");
    }
    // merges.txt errors name merges.txt
    std::string saved = b.v.source;
    b.v.source = merges_name;
    detail::read_merges_txt(b, merges_txt, merges_name);
    b.v.source = saved;
    // GPT-2's one special token, when present.
    auto it = b.by_spelling.find("<|endoftext|>");
    if (it != b.by_spelling.end()) {
        b.v.added_tokens.push_back({"<|endoftext|>", it->second, true});
        b.v.eos_id = b.v.bos_id = int32_t(it->second);
    }
    return b.finish();
}

}  // namespace stk
