// HF tokenizers' tokenizer.json: models BPE (merges as "a b" strings or [a, b] pairs,
// byte_fallback) and Unigram (read only); added_tokens; the normalizers, pre-tokenizers and
// post-processors listed in docs/decisions.md.  What is read but cannot be encoded is recorded in
// Vocab::pipeline.unsupported, so the vocabulary still serves the tokenizer stage.
#include <simdjson.h>

#include "tokenizer/vocab_internal.h"
#include "tokenizer/vocab_io.h"

namespace stk {

using detail::printable;
using namespace simdjson;

namespace {

struct Ctx {
    const std::string &file;
    Vocab::Pipeline &pl;
    void unsupported(const std::string &what) {
        if (pl.unsupported.empty()) pl.unsupported = file + ": " + what;
    }
};

[[noreturn]] void bad(const std::string &file, const char *path, const char *what) {
    throw_error(STK_E_BAD_JSON, "%s: %s: %s", file.c_str(), path, what);
}

std::string_view get_str(dom::element e, const char *key, const std::string &file, const char *path, bool required = true) {
    std::string_view s;
    dom::element v;
    if (e[key].get(v) != SUCCESS || v.is_null()) {
        if (required) bad(file, path, format("missing string field \"%s\"", key).c_str());
        return {};
    }
    if (v.get_string().get(s) != SUCCESS) bad(file, path, format("field \"%s\" is not a string", key).c_str());
    return s;
}

bool get_bool(dom::element e, const char *key, bool def) {
    bool b;
    if (e[key].get_bool().get(b) == SUCCESS) return b;
    return def;
}

void read_normalizer(dom::element n, Ctx &c, const char *path, int depth) {
    if (n.is_null()) return;
    if (depth > 4) bad(c.file, path, "normalizers nested too deeply");
    std::string_view type = get_str(n, "type", c.file, path);
    using Op = Vocab::NormalizerOp;
    if (type == "Sequence") {
        dom::array list;
        if (n["normalizers"].get_array().get(list) != SUCCESS) bad(c.file, path, "Sequence without a \"normalizers\" array");
        for (dom::element x : list) read_normalizer(x, c, path, depth + 1);
    } else if (type == "NFC") {
        c.pl.normalizers.push_back({Op::NFC, {}, {}});
    } else if (type == "NFD") {
        c.pl.normalizers.push_back({Op::NFD, {}, {}});
    } else if (type == "NFKC") {
        c.pl.normalizers.push_back({Op::NFKC, {}, {}});
    } else if (type == "NFKD") {
        c.pl.normalizers.push_back({Op::NFKD, {}, {}});
    } else if (type == "Prepend") {
        c.pl.normalizers.push_back({Op::PREPEND, std::string(get_str(n, "prepend", c.file, path)), {}});
    } else if (type == "Replace") {
        std::string_view from, to = get_str(n, "content", c.file, path);
        if (n["pattern"]["String"].get_string().get(from) != SUCCESS) {
            c.unsupported("normalizer Replace with a Regex pattern is not supported");
            return;
        }
        if (from.empty()) bad(c.file, path, "Replace with an empty pattern");
        c.pl.normalizers.push_back({Op::REPLACE, std::string(from), std::string(to)});
    } else {
        c.unsupported(format("normalizer %s is not supported", std::string(type).c_str()));
    }
}

void read_metaspace(dom::element p, Ctx &c, const char *path) {
    c.pl.pre_tokenizer = Vocab::PreTokenizer::METASPACE;
    std::string_view rep = get_str(p, "replacement", c.file, path);
    if (rep.empty()) bad(c.file, path, "Metaspace with an empty replacement");
    c.pl.metaspace_replacement = std::string(rep);
    std::string_view scheme = get_str(p, "prepend_scheme", c.file, path, false);
    if (scheme.empty()) c.pl.metaspace_prepend = get_bool(p, "add_prefix_space", true) ? 1 : 0;
    else if (scheme == "always") c.pl.metaspace_prepend = 1;
    else if (scheme == "never") c.pl.metaspace_prepend = 0;
    else if (scheme == "first") c.pl.metaspace_prepend = 2;
    else bad(c.file, path, "Metaspace prepend_scheme is not always/first/never");
    c.pl.metaspace_split = get_bool(p, "split", true);
    c.pl.strip_leading_space_on_decode = c.pl.metaspace_prepend != 0;
}

// Sequence [Split (a known regex, Isolated), ByteLevel (use_regex false)]: how Llama 3, Qwen2,
// GPT-4o-style and Tekken tokenizer.json files write their split.  false: not that shape.
bool read_split_then_byte_level(dom::element split, dom::element bl, Ctx &c, const char *path) {
    if (get_str(split, "type", c.file, path) != "Split" || get_str(bl, "type", c.file, path) != "ByteLevel") return false;
    std::string_view regex, behavior = get_str(split, "behavior", c.file, path, false);
    c.pl.pre_tokenizer = Vocab::PreTokenizer::BYTE_LEVEL;  // the model kind depends on it
    if (split["pattern"]["Regex"].get_string().get(regex) != SUCCESS) {
        c.unsupported("pre-tokenizer Split with a String pattern is not supported");
    } else if (!tok::split_for_regex(regex, &c.pl.byte_level_split)) {
        c.unsupported(
            format("pre-tokenizer Split with the regex '%s' is not supported (stk implements the splits of "
                   "GPT-2, Llama 3, Qwen2, Qwen3.5, GPT-4o and Tekken)",
                   printable(regex).c_str()));
    } else if (behavior != "Isolated" || get_bool(split, "invert", false)) {
        c.unsupported("pre-tokenizer Split other than behavior Isolated, invert false is not supported");
    } else if (get_bool(bl, "use_regex", true) || get_bool(bl, "add_prefix_space", false)) {
        c.unsupported("ByteLevel after a Split with use_regex or add_prefix_space is not supported");
    }
    c.pl.byte_level_regex = true;
    c.pl.byte_level_add_prefix_space = false;
    return true;
}

void read_pre_tokenizer(dom::element p, Ctx &c, const char *path, int depth = 0) {
    if (p.is_null()) return;
    if (depth > 4) bad(c.file, path, "pre-tokenizers nested too deeply");
    std::string_view type = get_str(p, "type", c.file, path);
    if (type == "ByteLevel") {
        c.pl.pre_tokenizer = Vocab::PreTokenizer::BYTE_LEVEL;
        c.pl.byte_level_regex = get_bool(p, "use_regex", true);
        c.pl.byte_level_add_prefix_space = get_bool(p, "add_prefix_space", false);
    } else if (type == "Metaspace") {
        read_metaspace(p, c, path);
    } else if (type == "Sequence") {
        dom::array list;
        if (p["pretokenizers"].get_array().get(list) != SUCCESS) bad(c.file, path, "Sequence without a \"pretokenizers\" array");
        if (list.size() == 1) return read_pre_tokenizer(list.at(0).value_unsafe(), c, path, depth + 1);
        if (list.size() == 2 && read_split_then_byte_level(list.at(0).value_unsafe(), list.at(1).value_unsafe(), c, path)) return;
        // Read what there is (the model kind depends on it), refuse to encode.
        for (dom::element x : list) {
            std::string_view t = get_str(x, "type", c.file, path);
            if (t == "ByteLevel") c.pl.pre_tokenizer = Vocab::PreTokenizer::BYTE_LEVEL;
            if (t == "Metaspace") read_metaspace(x, c, path);
        }
        c.unsupported("a Sequence of several pre-tokenizers is not supported");
    } else {
        c.unsupported(format("pre-tokenizer %s is not supported", std::string(type).c_str()));
    }
}

// TemplateProcessing's "single" template -> ids before and after the text.
void read_template(dom::element p, Ctx &c, const detail::VocabBuilder &b, const char *path) {
    dom::array single;
    if (p["single"].get_array().get(single) != SUCCESS) bad(c.file, path, "TemplateProcessing without a \"single\" array");
    if (single.size() > 64) bad(c.file, path, "TemplateProcessing template longer than 64 items");
    bool after = false;
    for (dom::element item : single) {
        dom::element x;
        if (item["Sequence"].get(x) == SUCCESS) {
            after = true;
            continue;
        }
        if (item["SpecialToken"].get(x) != SUCCESS) bad(c.file, path, "template item is neither Sequence nor SpecialToken");
        std::string_view name = get_str(x, "id", c.file, path);
        dom::array ids;
        if (p["special_tokens"][name]["ids"].get_array().get(ids) != SUCCESS)
            bad(c.file, path, format("special token '%s' of the template has no ids", printable(name).c_str()).c_str());
        if (ids.size() > 64) bad(c.file, path, "special token with more than 64 ids");
        for (dom::element id : ids) {
            uint64_t v;
            if (id.get_uint64().get(v) != SUCCESS || v >= kMaxVocabSize) bad(c.file, path, "special token id is not a valid id");
            (after ? c.pl.suffix_ids : c.pl.prefix_ids).push_back(uint32_t(v));
        }
    }
    (void)b;
}

void read_post_processor(dom::element p, Ctx &c, const detail::VocabBuilder &b, const char *path, int depth) {
    if (p.is_null()) return;
    if (depth > 4) bad(c.file, path, "post-processors nested too deeply");
    std::string_view type = get_str(p, "type", c.file, path);
    if (type == "ByteLevel") return;  // offsets only
    if (type == "TemplateProcessing") return read_template(p, c, b, path);
    if (type == "Sequence") {
        dom::array list;
        if (p["processors"].get_array().get(list) != SUCCESS) bad(c.file, path, "Sequence without a \"processors\" array");
        for (dom::element x : list) read_post_processor(x, c, b, path, depth + 1);
        return;
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
        uint64_t cls, sep;
        if (p["cls"].at(1).get_uint64().get(cls) != SUCCESS || p["sep"].at(1).get_uint64().get(sep) != SUCCESS ||
            cls >= kMaxVocabSize || sep >= kMaxVocabSize)
            bad(c.file, path, "cls / sep are not [token, id] pairs");
        c.pl.prefix_ids.push_back(uint32_t(cls));
        c.pl.suffix_ids.push_back(uint32_t(sep));
        return;
    }
    c.unsupported(format("post-processor %s is not supported", std::string(type).c_str()));
}

}  // namespace

Vocab parse_tokenizer_json(const uint8_t *data, size_t size, const std::string &name) {
    detail::VocabBuilder b;
    b.v.source = name;
    Ctx c{name, b.v.pipeline};
    dom::parser parser;
    padded_string json(reinterpret_cast<const char *>(data), size);
    dom::element doc;
    if (auto err = parser.parse(json).get(doc))
        throw_error(STK_E_BAD_JSON, "%s: not valid JSON (%s)", name.c_str(), error_message(err));
    if (!doc.is_object()) bad(name, "/", "the top level is not an object");
    dom::element model;
    if (doc["model"].get(model) != SUCCESS || !model.is_object()) bad(name, "/model", "missing or not an object");

    dom::element pre;
    if (doc["pre_tokenizer"].get(pre) == SUCCESS) read_pre_tokenizer(pre, c, "/pre_tokenizer");
    dom::element norm;
    if (doc["normalizer"].get(norm) == SUCCESS) read_normalizer(norm, c, "/normalizer", 0);
    for (const auto &op : b.v.pipeline.normalizers)
        if (op.kind == Vocab::NormalizerOp::PREPEND) b.v.pipeline.strip_leading_space_on_decode = true;

    std::string_view type = get_str(model, "type", name, "/model", false);
    dom::element vocab;
    if (model["vocab"].get(vocab) != SUCCESS) bad(name, "/model", "missing \"vocab\"");
    if (type.empty()) type = vocab.is_array() ? "Unigram" : "BPE";  // older files omit the type

    if (type == "BPE") {
        bool byte_level = b.v.pipeline.pre_tokenizer == Vocab::PreTokenizer::BYTE_LEVEL;
        b.v.model = byte_level ? Vocab::Model::BPE_BYTE_LEVEL : Vocab::Model::BPE_SENTENCEPIECE;
        b.v.byte_fallback = get_bool(model, "byte_fallback", false);
        dom::object obj;
        if (vocab.get_object().get(obj) != SUCCESS) bad(name, "/model/vocab", "not an object of token -> id");
        b.by_spelling.reserve(obj.size());  // no rehash while 50k+ tokens go in (bounded by the file)
        b.entries.reserve(obj.size());
        std::string bytes;
        for (auto [key, value] : obj) {
            uint64_t id;
            if (value.get_uint64().get(id) != SUCCESS)
                throw_error(STK_E_BAD_JSON, "%s: /model/vocab: token '%s': the id is not a non-negative integer", name.c_str(),
                            printable(key).c_str());
            if (byte_level) {
                if (!detail::byte_level_to_bytes(key, &bytes))
                    throw_error(STK_E_CORRUPT, "%s: /model/vocab: token '%s' (id %llu) is not in the byte-level spelling",
                                name.c_str(), printable(key).c_str(), (unsigned long long)id);
            } else {
                bytes.assign(key);
                // "<0xNN>" byte pieces stand for the byte NN
                if (key.size() == 6 && key.substr(0, 3) == "<0x" && key[5] == '>' && isxdigit((unsigned char)key[3]) &&
                    isxdigit((unsigned char)key[4]) && id < kMaxVocabSize) {
                    int byte = int(std::stoul(std::string(key.substr(3, 2)), nullptr, 16));
                    bytes.assign(1, char(byte));
                    b.v.byte_piece_ids[byte] = int32_t(id);
                }
            }
            b.add(key, bytes, id, "/model/vocab");
        }
        std::string_view unk = get_str(model, "unk_token", name, "/model", false);
        if (!unk.empty()) b.v.unk_id = int32_t(b.id_of(unk, "/model/unk_token"));
        std::string_view pre_s = get_str(model, "continuing_subword_prefix", name, "/model", false);
        std::string_view suf_s = get_str(model, "end_of_word_suffix", name, "/model", false);
        if (!pre_s.empty() || !suf_s.empty())
            c.unsupported("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
        // ignore_merges (Llama 3's tokenizer.json): a pre-token found whole in the vocabulary is that
        // token.  Byte-level only: there a piece's bytes spell exactly one vocabulary key.
        b.v.ignore_merges = get_bool(model, "ignore_merges", false);
        if (b.v.ignore_merges && !byte_level) c.unsupported("BPE ignore_merges without a ByteLevel pre-tokenizer is not supported");
        dom::element dropout;
        if (model["dropout"].get(dropout) == SUCCESS && !dropout.is_null()) c.unsupported("BPE dropout is not supported");

        dom::array merges;
        if (model["merges"].get_array().get(merges) != SUCCESS) bad(name, "/model", "missing \"merges\" array");
        size_t i = 0;
        for (dom::element m : merges) {
            std::string_view l, r;
            if (m.is_string()) {
                std::string_view s = m.get_string().value_unsafe();
                size_t sp = s.find(' ');
                if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
                    throw_error(STK_E_CORRUPT, "%s: /model/merges/%zu: '%s' is not two tokens separated by one space",
                                name.c_str(), i, printable(s).c_str());
                l = s.substr(0, sp);
                r = s.substr(sp + 1);
            } else {
                dom::array pair;
                if (m.get_array().get(pair) != SUCCESS || pair.size() != 2 || pair.at(0).get_string().get(l) != SUCCESS ||
                    pair.at(1).get_string().get(r) != SUCCESS)
                    throw_error(STK_E_BAD_JSON, "%s: /model/merges/%zu: neither \"a b\" nor [\"a\", \"b\"]", name.c_str(), i);
            }
            b.add_merge(l, r, "/model/merges/", i);
            i++;
        }
    } else if (type == "Unigram") {
        b.v.model = Vocab::Model::UNIGRAM;
        b.v.byte_fallback = get_bool(model, "byte_fallback", false);
        dom::array list;
        if (vocab.get_array().get(list) != SUCCESS) bad(name, "/model/vocab", "not an array of [token, score]");
        size_t i = 0;
        for (dom::element e : list) {
            dom::array pair;
            std::string_view piece;
            double score;
            if (e.get_array().get(pair) != SUCCESS || pair.size() != 2 || pair.at(0).get_string().get(piece) != SUCCESS ||
                pair.at(1).get_double().get(score) != SUCCESS)
                throw_error(STK_E_BAD_JSON, "%s: /model/vocab/%zu: not a [token, score] pair", name.c_str(), i);
            b.add(piece, std::string(piece), i, "/model/vocab");
            b.v.scores.push_back(float(score));
            i++;
        }
        int64_t unk;
        if (model["unk_id"].get_int64().get(unk) == SUCCESS) {
            if (unk < 0 || uint64_t(unk) >= i) bad(name, "/model/unk_id", "outside the vocabulary");
            b.v.unk_id = int32_t(unk);
        }
        b.v.pipeline.unsupported.clear();
        c.unsupported("encoding with a Unigram model is not implemented (the vocabulary is read for the tokenizer stage)");
    } else {
        throw_error(STK_E_UNSUPPORTED, "%s: /model/type: tokenizer model '%s' is not supported (BPE and Unigram are)",
                    name.c_str(), printable(type).c_str());
    }

    dom::array added;
    if (doc["added_tokens"].get_array().get(added) == SUCCESS) {
        size_t i = 0;
        for (dom::element t : added) {
            uint64_t id;
            std::string_view content;
            if (t["id"].get_uint64().get(id) != SUCCESS || t["content"].get_string().get(content) != SUCCESS || content.empty())
                throw_error(STK_E_BAD_JSON, "%s: /added_tokens/%zu: needs an \"id\" and a non-empty \"content\"", name.c_str(),
                            i);
            if (id >= kMaxVocabSize)
                throw_error(STK_E_CORRUPT, "%s: /added_tokens/%zu: id %llu too large", name.c_str(), i, (unsigned long long)id);
            bool special = get_bool(t, "special", false);
            // The piece of an added token is its text as is (never byte-level spelled).
            b.add(content, std::string(content), id, format("/added_tokens/%zu", i));
            b.v.added_tokens.push_back({std::string(content), uint32_t(id), special});
            i++;
        }
    }
    for (const auto &t : b.v.added_tokens) {
        if (t.content == "<s>" || t.content == "<|begin_of_text|>" || t.content == "<bos>") b.v.bos_id = int32_t(t.id);
        if (t.content == "</s>" || t.content == "<|end_of_text|>" || t.content == "<eos>" || t.content == "<|endoftext|>")
            b.v.eos_id = int32_t(t.id);
    }
    dom::element post;
    if (doc["post_processor"].get(post) == SUCCESS) read_post_processor(post, c, b, "/post_processor", 0);
    return b.finish();
}

}  // namespace stk
