// load_vocab_dir and what the readers share: the byte-level spelling, id bookkeeping, merges.
#include "tokenizer/vocab_io.h"

#include "core/mapped_file.h"
#include "ingest/gguf_model.h"
#include "ingest/model_files.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab_internal.h"

namespace stk {

namespace detail {

bool byte_level_to_bytes(std::string_view s, std::string *out) {
    out->clear();
    const uint8_t *p = reinterpret_cast<const uint8_t *>(s.data()), *end = p + s.size();
    while (p < end) {
        uint32_t cp;
        p += tok::utf8_next(p, end, &cp);
        int b = tok::unicode_to_byte(cp);
        if (b < 0) return false;
        out->push_back(char(b));
    }
    return true;
}

std::string printable(std::string_view s) {
    std::string out;
    for (unsigned char c : s.substr(0, 64)) {
        if (c >= 0x20 && c != 0x7F && c != '\'') out += char(c);
        else out += format("\\x%02x", c);
    }
    if (s.size() > 64) out += "...";
    return out;
}

void VocabBuilder::add(std::string_view spelling, std::string piece, uint64_t id, const std::string &where) {
    if (id >= kMaxVocabSize)
        throw_error(STK_E_CORRUPT, "%s: %s: token id %llu is larger than the %u this reader accepts", v.source.c_str(),
                    where.c_str(), (unsigned long long)id, kMaxVocabSize);
    auto [it, fresh] = by_spelling.emplace(std::string(spelling), uint32_t(id));
    if (!fresh && it->second != id)
        throw_error(STK_E_CORRUPT, "%s: %s: token '%s' appears twice (ids %u and %llu)", v.source.c_str(), where.c_str(),
                    printable(spelling).c_str(), it->second, (unsigned long long)id);
    entries.push_back(Entry{uint32_t(id), std::move(piece), where});
}

void VocabBuilder::add_indexed(std::string_view spelling, std::string piece, uint64_t id, std::string_view where_prefix) {
    if (id >= kMaxVocabSize) return add(spelling, std::move(piece), id, std::string(where_prefix) + std::to_string(id) + "]");
    auto [it, fresh] = by_spelling.emplace(std::string(spelling), uint32_t(id));
    if (!fresh && it->second != id)
        throw_error(STK_E_CORRUPT, "%s: %.*s%llu]: token '%s' appears twice (ids %u and %llu)", v.source.c_str(),
                    int(where_prefix.size()), where_prefix.data(), (unsigned long long)id, printable(spelling).c_str(),
                    it->second, (unsigned long long)id);
    entries.push_back(Entry{uint32_t(id), std::move(piece), std::string(), where_prefix});
}

uint32_t VocabBuilder::id_of(std::string_view spelling, const std::string &where) const {
    auto it = by_spelling.find(spelling);
    if (it == by_spelling.end())
        throw_error(STK_E_CORRUPT, "%s: %s: '%s' is not in the vocabulary", v.source.c_str(), where.c_str(),
                    printable(spelling).c_str());
    return it->second;
}

void VocabBuilder::add_merge(std::string_view left, std::string_view right, std::string_view where_prefix, size_t index) {
    auto where = [&] { return std::string(where_prefix) + std::to_string(index); };
    auto l = by_spelling.find(left), r = by_spelling.find(right);
    if (l == by_spelling.end() || r == by_spelling.end()) {
        id_of(left, where());  // throws for the one missing
        id_of(right, where());
    }
    std::string joined;
    joined.reserve(left.size() + right.size());
    joined.append(left).append(right);
    auto it = by_spelling.find(joined);
    if (it == by_spelling.end())
        throw_error(STK_E_CORRUPT, "%s: %s: the merge of '%s' and '%s' gives '%s', which is not in the vocabulary",
                    v.source.c_str(), where().c_str(), printable(left).c_str(), printable(right).c_str(),
                    printable(joined).c_str());
    v.merges.emplace_back(l->second, r->second);
    v.merge_results.push_back(it->second);
}

Vocab VocabBuilder::finish() {
    if (entries.empty()) throw_error(STK_E_CORRUPT, "%s: the vocabulary is empty", v.source.c_str());
    // ids must be 0..n-1 without gaps, so n is at most the number of entries read: the tables
    // below are bounded by the file size whatever ids it claims.
    uint32_t max_id = 0;
    for (const Entry &e : entries) max_id = e.id > max_id ? e.id : max_id;
    if (size_t(max_id) >= entries.size())
        throw_error(STK_E_CORRUPT, "%s: token id %u but only %zu tokens: ids must be 0..n-1 without gaps", v.source.c_str(),
                    max_id, entries.size());
    std::vector<std::string> slots(size_t(max_id) + 1);
    std::vector<uint8_t> have(slots.size(), 0);
    for (Entry &e : entries) {
        if (have[e.id]) {
            if (slots[e.id] != e.piece)
                throw_error(STK_E_CORRUPT, "%s: %s: id %u is given to two different tokens ('%s' and '%s')", v.source.c_str(),
                            e.place().c_str(), e.id, printable(slots[e.id]).c_str(), printable(e.piece).c_str());
            continue;
        }
        have[e.id] = 1;
        slots[e.id] = std::move(e.piece);
    }
    for (size_t i = 0; i < slots.size(); i++)
        if (!have[i])
            throw_error(STK_E_CORRUPT, "%s: token id %zu is missing (ids must be 0..%zu without gaps)", v.source.c_str(), i,
                        slots.size() - 1);
    entries.clear();
    v.pieces = std::move(slots);
    size_t n = v.pieces.size();
    if (v.is_special.size() < n) v.is_special.resize(n, 0);
    if (!v.scores.empty() && v.scores.size() < n) v.scores.resize(n, 0.0f);  // added tokens past a Unigram list
    if (v.piece_types.size() < n) v.piece_types.resize(n, uint8_t(Vocab::PieceType::NORMAL));
    for (const auto &t : v.added_tokens)
        if (t.special) v.is_special[t.id] = 1;
    for (int id : {v.unk_id, v.bos_id, v.eos_id})
        if (id >= 0 && size_t(id) >= n)
            throw_error(STK_E_CORRUPT, "%s: special token id %d is outside the vocabulary of %zu", v.source.c_str(), id, n);
    for (uint32_t id : v.pipeline.prefix_ids)
        if (id >= n) throw_error(STK_E_CORRUPT, "%s: post-processor token id %u is outside the vocabulary", v.source.c_str(), id);
    for (uint32_t id : v.pipeline.suffix_ids)
        if (id >= n) throw_error(STK_E_CORRUPT, "%s: post-processor token id %u is outside the vocabulary", v.source.c_str(), id);
    return std::move(v);
}

}  // namespace detail

static std::string join(const std::string &dir, const char *name) {
    return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

Vocab load_vocab_dir(const std::string &model_dir) { return load_vocab(resolve_model_files(model_dir)); }

Vocab load_vocab(const ModelFiles &files, VocabRead what, unsigned threads) {
    if (files.is_gguf()) return load_gguf_vocab(files.gguf, what, threads);
    const std::string &model_dir = files.dir;
    auto has = [&](const char *n) { return files.has_tokenizer_file(n); };
    std::string p = join(model_dir, "tokenizer.json");
    if (has("tokenizer.json")) return load_tokenizer_json(p);
    std::string v = join(model_dir, "vocab.json"), m = join(model_dir, "merges.txt");
    if (has("vocab.json") && has("merges.txt")) return load_gpt2_vocab(v, m);
    std::string e = join(model_dir, "encoder.json"), b = join(model_dir, "vocab.bpe");
    if (has("encoder.json") && has("vocab.bpe")) return load_gpt2_vocab(e, b);
    std::string s = join(model_dir, "tokenizer.model");
    if (has("tokenizer.model")) return load_sentencepiece_model(s);
    if (has("vocab.json")) throw_error(STK_E_NOT_FOUND, "%s: vocab.json without merges.txt", model_dir.c_str());
    throw_error(STK_E_NOT_FOUND, "%s: no tokenizer.json, vocab.json + merges.txt or tokenizer.model", model_dir.c_str());
}

Vocab load_tokenizer_json(const std::string &path) {
    MappedFile f(path);
    if (f.size() > kMaxTokenizerFileBytes)
        throw_error(STK_E_SIZE_MISMATCH, "%s: %llu bytes, more than the %llu a tokenizer file may have", path.c_str(),
                    (unsigned long long)f.size(), (unsigned long long)kMaxTokenizerFileBytes);
    return parse_tokenizer_json(f.data(), size_t(f.size()), path);
}

Vocab load_gpt2_vocab(const std::string &vocab_json_path, const std::string &merges_path) {
    MappedFile v(vocab_json_path), m(merges_path);
    for (const MappedFile *f : {&v, &m})
        if (f->size() > kMaxTokenizerFileBytes)
            throw_error(STK_E_SIZE_MISMATCH, "%s: %llu bytes, more than the %llu a tokenizer file may have", f->path().c_str(),
                        (unsigned long long)f->size(), (unsigned long long)kMaxTokenizerFileBytes);
    return parse_gpt2_vocab(std::string_view(reinterpret_cast<const char *>(v.data()), size_t(v.size())),
                            std::string_view(reinterpret_cast<const char *>(m.data()), size_t(m.size())), vocab_json_path,
                            merges_path);
}

Vocab load_sentencepiece_model(const std::string &path) {
    MappedFile f(path);
    if (f.size() > kMaxTokenizerFileBytes)
        throw_error(STK_E_SIZE_MISMATCH, "%s: %llu bytes, more than the %llu a tokenizer file may have", path.c_str(),
                    (unsigned long long)f.size(), (unsigned long long)kMaxTokenizerFileBytes);
    return parse_sentencepiece_model(f.data(), size_t(f.size()), path);
}

}  // namespace stk
