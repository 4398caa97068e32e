#include "tokenizer/bpe.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "tokenizer/pretokenize.h"

namespace stk {

// ---------------------------------------------------------------------------------------------
// U64Map

void U64Map::reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap <<= 1;  // load <= 0.5: short probe runs
    slots_.assign(cap, Slot{kEmpty, 0});
    mask_ = cap - 1;
    count_ = 0;
}

bool U64Map::insert(uint64_t key, uint64_t value) {
    size_t i = size_t(hash(key)) & mask_;
    for (;;) {
        Slot &s = slots_[i];
        if (s.key == key) return false;
        if (s.key == kEmpty) {
            s.key = key;
            s.value = value;
            count_++;
            return true;
        }
        i = (i + 1) & mask_;
    }
}

// ---------------------------------------------------------------------------------------------
// construction

namespace {

constexpr size_t kCacheMinSlots = 1u << 10;  // powers of two: grows by doubling at load 1/2
constexpr size_t kCacheMaxSlots = 1u << 16;  // then cleared when half full
constexpr size_t kCacheMaxKey = 64;          // longer words are not cached
constexpr size_t kScanMax = 48;              // words up to this many symbols: O(n^2) scan

inline uint64_t pack_char(const uint8_t *p, int len) {
    uint64_t k = 0;
    std::memcpy(&k, p, size_t(len));
    return k | (uint64_t(len) << 40);
}

inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

}  // namespace

Tokenizer::Tokenizer(const Vocab &vocab) : v_(vocab), byte_level_(vocab.model == Vocab::Model::BPE_BYTE_LEVEL) {
    if (v_.model == Vocab::Model::UNIGRAM)
        throw_error(STK_E_NOT_IMPLEMENTED, "%s: encoding with a Unigram model is not implemented", v_.source.c_str());
    if (!v_.pipeline.unsupported.empty()) throw_error(STK_E_UNSUPPORTED, "%s", v_.pipeline.unsupported.c_str());
    const uint32_t n = v_.size();
    if (v_.merges.size() != v_.merge_results.size())
        throw_error(STK_E_INTERNAL, "%s: merges and merge_results differ in length", v_.source.c_str());

    // merge priorities
    merges_.reserve(v_.merges.size());
    std::vector<uint32_t> score_rank;
    if (v_.merges_from_scores) {
        // dense rank of the result's score, higher first: equal scores tie, and ties go leftmost
        // (sentencepiece's SymbolPairComparator)
        std::vector<float> distinct;
        for (uint32_t r : v_.merge_results) distinct.push_back(v_.scores.at(r));
        std::sort(distinct.begin(), distinct.end(), [](float a, float b) { return a > b; });
        distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
        score_rank.reserve(v_.merges.size());
        for (uint32_t r : v_.merge_results) {
            float s = v_.scores[r];
            score_rank.push_back(
                uint32_t(std::lower_bound(distinct.begin(), distinct.end(), s, [](float a, float b) { return a > b; }) -
                         distinct.begin()));
        }
    }
    for (size_t i = 0; i < v_.merges.size(); i++) {
        auto [a, b] = v_.merges[i];
        uint32_t res = v_.merge_results[i];
        if (a >= n || b >= n || res >= n)
            throw_error(STK_E_CORRUPT, "%s: merge %zu names an id outside the vocabulary", v_.source.c_str(), i);
        uint64_t rank = v_.merges_from_scores ? score_rank[i] : i;
        merges_.insert((uint64_t(a) << 32) | b, (rank << 32) | res);  // first (best) wins on duplicates
    }

    for (int &b : byte_id_) b = -1;
    std::vector<uint8_t> is_byte_piece(n, 0);
    for (int b = 0; b < 256; b++)
        if (v_.byte_piece_ids[b] >= 0 && uint32_t(v_.byte_piece_ids[b]) < n) is_byte_piece[v_.byte_piece_ids[b]] = 1;
    if (byte_level_) {
        for (uint32_t id = 0; id < n; id++) {
            const std::string &p = v_.pieces[id];
            if (p.size() == 1 && byte_id_[uint8_t(p[0])] < 0 && !v_.special(id)) byte_id_[uint8_t(p[0])] = int32_t(id);
        }
        // Some vocabularies (GPT-NeoX) lack bytes that never occur in valid UTF-8 (0xC0, 0xF5..):
        // such a byte in the input becomes <unk> if there is one, else an error (byte_id_ = -1).
        for (int b = 0; b < 256; b++)
            if (byte_id_[b] < 0 && v_.unk_id >= 0) byte_id_[b] = v_.unk_id;
        if (v_.ignore_merges) {  // the first id of a spelling wins; special tokens are matched before
            whole_.reserve(n);
            for (uint32_t id = 0; id < n; id++)
                if (!v_.special(id) && !v_.pieces[id].empty()) whole_.emplace(v_.pieces[id], id);
        }
    } else {
        chars_.reserve(n);
        for (uint32_t id = 0; id < n; id++) {
            if (is_byte_piece[id]) continue;
            if (id < v_.piece_types.size()) {
                uint8_t t = v_.piece_types[id];
                if (t == uint8_t(Vocab::PieceType::CONTROL) || t == uint8_t(Vocab::PieceType::UNKNOWN) ||
                    t == uint8_t(Vocab::PieceType::BYTE))
                    continue;
            }
            const std::string &p = v_.pieces[id];
            if (p.empty() || p.size() > 4) continue;
            uint32_t cp;
            const uint8_t *s = reinterpret_cast<const uint8_t *>(p.data());
            int len = tok::utf8_next(s, s + p.size(), &cp);
            if (size_t(len) != p.size()) continue;
            chars_.insert(pack_char(s, len), id);
        }
    }

    added_by_byte_.resize(256);
    for (const auto &t : v_.added_tokens) {
        if (t.content.empty() || t.id >= n) continue;
        added_by_byte_[uint8_t(t.content[0])].push_back(t);
        has_added_ = true;
    }
    for (auto &list : added_by_byte_)
        std::stable_sort(list.begin(), list.end(),
                         [](const auto &a, const auto &b) { return a.content.size() > b.content.size(); });

    cache_.assign(kCacheMinSlots, CacheSlot{0, 0, 0, 0, 0});
}

// ---------------------------------------------------------------------------------------------
// BPE over syms_

void Tokenizer::bpe(std::vector<uint32_t> &out) {
    size_t n = syms_.size();
    if (n == 0) return;
    if (n == 1) {
        out.push_back(syms_[0]);
        return;
    }
    if (n <= kScanMax) bpe_scan(out);
    else bpe_heap(out);
}

// Short words: repeatedly merge the lowest-rank pair, leftmost on ties (what HF's heap and
// tiktoken's loop both compute).
void Tokenizer::bpe_scan(std::vector<uint32_t> &out) {
    uint32_t id[kScanMax], rank[kScanMax], res[kScanMax];
    size_t m = syms_.size();
    std::memcpy(id, syms_.data(), m * sizeof(uint32_t));
    for (size_t i = 0; i + 1 < m; i++) {
        uint64_t r = merge_of(id[i], id[i + 1]);
        rank[i] = r == U64Map::kEmpty ? UINT32_MAX : uint32_t(r >> 32);
        res[i] = uint32_t(r);
    }
    for (;;) {
        uint32_t best = UINT32_MAX;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] < best) {
                best = rank[i];
                bi = i;
            }
        if (best == UINT32_MAX) break;
        id[bi] = res[bi];
        // drop symbol bi+1 and pair bi
        std::memmove(id + bi + 1, id + bi + 2, (m - bi - 2) * sizeof(uint32_t));
        std::memmove(rank + bi, rank + bi + 1, (m - bi - 2) * sizeof(uint32_t));
        std::memmove(res + bi, res + bi + 1, (m - bi - 2) * sizeof(uint32_t));
        m--;
        if (bi > 0) {
            uint64_t r = merge_of(id[bi - 1], id[bi]);
            rank[bi - 1] = r == U64Map::kEmpty ? UINT32_MAX : uint32_t(r >> 32);
            res[bi - 1] = uint32_t(r);
        }
        if (bi + 1 < m) {
            uint64_t r = merge_of(id[bi], id[bi + 1]);
            rank[bi] = r == U64Map::kEmpty ? UINT32_MAX : uint32_t(r >> 32);
            res[bi] = uint32_t(r);
        }
    }
    out.insert(out.end(), id, id + m);
}

// Long words (Llama's whole-text word): a min-heap of candidate merges over a linked list,
// stale entries skipped on pop, as HF's Word::merge_all.
void Tokenizer::bpe_heap(std::vector<uint32_t> &out) {
    size_t n = syms_.size();
    nodes_.resize(n);
    for (size_t i = 0; i < n; i++) nodes_[i] = Node{syms_[i], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};
    auto later = [](const HeapItem &a, const HeapItem &b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
    heap_.clear();
    for (size_t i = 0; i + 1 < n; i++) {
        uint64_t r = merge_of(syms_[i], syms_[i + 1]);
        if (r != U64Map::kEmpty) heap_.push_back({uint32_t(r >> 32), uint32_t(i), uint32_t(r)});
    }
    std::make_heap(heap_.begin(), heap_.end(), later);
    const uint32_t kDead = UINT32_MAX;
    while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), later);
        HeapItem top = heap_.back();
        heap_.pop_back();
        Node &L = nodes_[top.pos];
        if (L.id == kDead || L.next < 0) continue;
        Node &R = nodes_[size_t(L.next)];
        uint64_t cur = merge_of(L.id, R.id);
        if (cur == U64Map::kEmpty || uint32_t(cur) != top.result || uint32_t(cur >> 32) != top.rank) continue;
        L.id = top.result;
        int32_t nn = R.next;
        R.id = kDead;
        L.next = nn;
        if (nn >= 0) nodes_[size_t(nn)].prev = int32_t(top.pos);
        if (L.prev >= 0) {
            uint64_t r = merge_of(nodes_[size_t(L.prev)].id, L.id);
            if (r != U64Map::kEmpty) {
                heap_.push_back({uint32_t(r >> 32), uint32_t(L.prev), uint32_t(r)});
                std::push_heap(heap_.begin(), heap_.end(), later);
            }
        }
        if (nn >= 0) {
            uint64_t r = merge_of(L.id, nodes_[size_t(nn)].id);
            if (r != U64Map::kEmpty) {
                heap_.push_back({uint32_t(r >> 32), top.pos, uint32_t(r)});
                std::push_heap(heap_.begin(), heap_.end(), later);
            }
        }
    }
    for (int32_t i = 0; i >= 0; i = nodes_[size_t(i)].next) out.push_back(nodes_[size_t(i)].id);
}

// ---------------------------------------------------------------------------------------------
// words

void Tokenizer::missing_byte(uint8_t b) const {
    throw_error(STK_E_INVALID_ARGUMENT,
                "%s: the input holds the byte 0x%02x, which this byte-level vocabulary has no token "
                "for (it never occurs in valid UTF-8) and there is no <unk>",
                v_.source.c_str(), b);
}

void Tokenizer::symbols_of(std::string_view word) {
    syms_.clear();
    const uint8_t *s = reinterpret_cast<const uint8_t *>(word.data()), *end = s + word.size();
    if (byte_level_) {
        for (const uint8_t *p = s; p < end; p++) {
            if (byte_id_[*p] < 0) missing_byte(*p);
            syms_.push_back(uint32_t(byte_id_[*p]));
        }
        return;
    }
    bool last_unk = false;
    for (const uint8_t *p = s; p < end;) {
        uint32_t cp;
        int len = tok::utf8_next(p, end, &cp);
        uint64_t id = cp == tok::kInvalid ? U64Map::kEmpty : chars_.get(pack_char(p, len));
        if (id != U64Map::kEmpty) {
            syms_.push_back(uint32_t(id));
            last_unk = false;
        } else if (v_.byte_fallback && [&] {
                       for (int k = 0; k < len; k++)
                           if (v_.byte_piece_ids[p[k]] < 0) return false;
                       return true;
                   }()) {
            for (int k = 0; k < len; k++) syms_.push_back(uint32_t(v_.byte_piece_ids[p[k]]));
            last_unk = false;
        } else {
            if (v_.unk_id < 0)
                throw_error(STK_E_INVALID_ARGUMENT,
                            "%s: the character at byte %zu of a word is not in the vocabulary, "
                            "which has neither byte fallback nor <unk>",
                            v_.source.c_str(), size_t(p - s));
            if (!last_unk) syms_.push_back(uint32_t(v_.unk_id));  // fuse_unk
            last_unk = true;
        }
        p += len;
    }
}

void Tokenizer::encode_word(std::string_view word, std::vector<uint32_t> &out, bool cacheable) {
    if (word.empty()) return;
    if (!whole_.empty()) {  // ignore_merges: HF BPE looks the pre-token up before merging
        auto it = whole_.find(word);
        if (it != whole_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    if (byte_level_ && word.size() == 1) {
        if (byte_id_[uint8_t(word[0])] < 0) missing_byte(uint8_t(word[0]));
        out.push_back(uint32_t(byte_id_[uint8_t(word[0])]));
        return;
    }
    cacheable = cacheable && word.size() <= kCacheMaxKey;
    uint64_t h = 0;
    size_t slot = 0;
    if (cacheable) {
        h = hash_bytes(reinterpret_cast<const uint8_t *>(word.data()), word.size());
        slot = size_t(h) & (cache_.size() - 1);
        for (;;) {
            const CacheSlot &c = cache_[slot];
            if (c.key_len == 0) break;
            if (c.hash == h && c.key_len == word.size() &&
                std::memcmp(cache_keys_.data() + c.key_off, word.data(), word.size()) == 0) {
                hits_++;
                out.insert(out.end(), cache_vals_.begin() + c.val_off, cache_vals_.begin() + c.val_off + c.val_len);
                return;
            }
            slot = (slot + 1) & (cache_.size() - 1);
        }
    }
    misses_++;
    size_t before = out.size();
    symbols_of(word);
    bpe(out);
    if (!cacheable) return;
    if (cache_count_ + 1 > cache_.size() / 2) {
        if (cache_.size() < kCacheMaxSlots) {  // grow: re-insert every entry into twice the slots
            std::vector<CacheSlot> old(cache_.size() * 2, CacheSlot{0, 0, 0, 0, 0});
            old.swap(cache_);
            for (const CacheSlot &c : old) {
                if (c.key_len == 0) continue;
                size_t i = size_t(c.hash) & (cache_.size() - 1);
                while (cache_[i].key_len != 0) i = (i + 1) & (cache_.size() - 1);
                cache_[i] = c;
            }
        } else {  // full: start over (deterministic, output unaffected)
            std::fill(cache_.begin(), cache_.end(), CacheSlot{0, 0, 0, 0, 0});
            cache_keys_.clear();
            cache_vals_.clear();
            cache_count_ = 0;
        }
        slot = size_t(h) & (cache_.size() - 1);
        while (cache_[slot].key_len != 0) slot = (slot + 1) & (cache_.size() - 1);
    }
    CacheSlot c{h, uint32_t(cache_keys_.size()), uint32_t(word.size()), uint32_t(cache_vals_.size()),
                uint32_t(out.size() - before)};
    cache_keys_.append(word);
    cache_vals_.insert(cache_vals_.end(), out.begin() + before, out.end());
    cache_[slot] = c;
    cache_count_++;
}

// ---------------------------------------------------------------------------------------------
// normalizers and pre-tokenizers

static void replace_all(const std::string &in, std::string_view from, std::string_view to, std::string &out) {
    out.clear();
    size_t pos = 0;
    for (;;) {
        size_t hit = in.find(from, pos);
        if (hit == std::string::npos) break;
        out.append(in, pos, hit - pos).append(to);
        pos = hit + from.size();
    }
    out.append(in, pos, std::string::npos);
}

static bool is_ascii(std::string_view s) {
    for (unsigned char c : s)
        if (c >= 0x80) return false;
    return true;
}

std::string_view Tokenizer::normalize(std::string_view seg) {
    const auto &ops = v_.pipeline.normalizers;
    if (ops.empty()) return seg;
    norm_a_.assign(seg);
    using Op = Vocab::NormalizerOp;
    for (const Op &op : ops) {
        switch (op.kind) {
            case Op::NFC:
            case Op::NFD:
            case Op::NFKC:
            case Op::NFKD: {
                if (is_ascii(norm_a_)) break;  // every normal form of ASCII is itself
                int opts = UTF8PROC_STABLE;
                if (op.kind == Op::NFC) opts |= UTF8PROC_COMPOSE;
                if (op.kind == Op::NFD) opts |= UTF8PROC_DECOMPOSE;
                if (op.kind == Op::NFKC) opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
                if (op.kind == Op::NFKD) opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
                utf8proc_uint8_t *res = nullptr;
                utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(norm_a_.data()),
                                                    utf8proc_ssize_t(norm_a_.size()), &res, utf8proc_option_t(opts));
                if (len < 0) {
                    std::free(res);
                    throw_error(STK_E_INVALID_ARGUMENT, "%s: text is not valid UTF-8 (%s), which the Unicode normalizer needs",
                                v_.source.c_str(), utf8proc_errmsg(len));
                }
                norm_a_.assign(reinterpret_cast<const char *>(res), size_t(len));
                std::free(res);
                break;
            }
            case Op::PREPEND:
                if (!norm_a_.empty()) norm_a_.insert(0, op.a);
                break;
            case Op::REPLACE:
                if (norm_a_.find(op.a) != std::string::npos) {
                    replace_all(norm_a_, op.a, op.b, norm_b_);
                    norm_a_.swap(norm_b_);
                }
                break;
            case Op::SP_REMOVE_EXTRA_SPACES: {
                norm_b_.clear();
                bool space = true;  // drops leading spaces
                for (char c : norm_a_) {
                    if (c == ' ') {
                        if (!space) norm_b_.push_back(' ');
                        space = true;
                    } else {
                        norm_b_.push_back(c);
                        space = false;
                    }
                }
                if (!norm_b_.empty() && norm_b_.back() == ' ') norm_b_.pop_back();
                norm_a_.swap(norm_b_);
                break;
            }
        }
    }
    return norm_a_;
}

void Tokenizer::encode_segment(std::string_view seg, bool first_segment, std::vector<uint32_t> &out) {
    if (seg.empty()) return;
    std::string_view text = normalize(seg);
    const Vocab::Pipeline &pl = v_.pipeline;
    switch (pl.pre_tokenizer) {
        case Vocab::PreTokenizer::NONE: encode_word(text, out, false); return;
        case Vocab::PreTokenizer::BYTE_LEVEL: {
            if (pl.byte_level_add_prefix_space && !text.empty() && text[0] != ' ') {
                word_buf_.assign(1, ' ');
                word_buf_.append(text);
                text = word_buf_;
            }
            if (!pl.byte_level_regex) {
                encode_word(text, out, false);
                return;
            }
            const uint8_t *s = reinterpret_cast<const uint8_t *>(text.data());
            size_t n = text.size();
            if (pl.byte_level_split == tok::Split::GPT2) {  // the common case, called directly
                for (size_t i = 0; i < n;) {
                    size_t e = tok::gpt2_pretoken_end(s, n, i);
                    encode_word(text.substr(i, e - i), out, true);
                    i = e;
                }
                return;
            }
            for (size_t i = 0; i < n;) {
                size_t e = tok::pretoken_end(pl.byte_level_split, s, n, i);
                encode_word(text.substr(i, e - i), out, true);
                i = e;
            }
            return;
        }
        case Vocab::PreTokenizer::METASPACE: {
            const std::string &rep = pl.metaspace_replacement;
            std::string &buf = word_buf_;
            buf.clear();
            bool prepend = pl.metaspace_prepend == 1 || (pl.metaspace_prepend == 2 && first_segment);
            if (prepend && text.substr(0, rep.size()) != rep && !(text.size() && text[0] == ' ')) buf.append(rep);
            for (char c : text) {
                if (c == ' ') buf.append(rep);
                else buf.push_back(c);
            }
            std::string_view all = buf;
            if (!pl.metaspace_split) {
                encode_word(all, out, false);
                return;
            }
            size_t start = 0;
            for (;;) {
                size_t next = all.find(rep, start + 1);
                if (start == 0 && all.substr(0, rep.size()) != rep) next = all.find(rep, 0);
                if (next == std::string_view::npos || next == 0) {
                    encode_word(all.substr(start), out, true);
                    return;
                }
                encode_word(all.substr(start, next - start), out, true);
                start = next;
            }
        }
    }
}

void Tokenizer::encode(std::string_view text, std::vector<uint32_t> &out, bool add_special) {
    if (add_special) out.insert(out.end(), v_.pipeline.prefix_ids.begin(), v_.pipeline.prefix_ids.end());
    if (!has_added_) {
        encode_segment(text, true, out);
    } else {
        size_t seg = 0;
        bool first = true;
        for (size_t i = 0; i < text.size();) {
            const auto &cands = added_by_byte_[uint8_t(text[i])];
            const Vocab::AddedToken *hit = nullptr;
            for (const auto &t : cands)
                if (text.compare(i, t.content.size(), t.content) == 0) {
                    hit = &t;
                    break;
                }
            if (!hit) {
                i++;
                continue;
            }
            encode_segment(text.substr(seg, i - seg), first, out);
            first = false;
            out.push_back(hit->id);
            i += hit->content.size();
            seg = i;
        }
        encode_segment(text.substr(seg), first, out);
    }
    if (add_special) out.insert(out.end(), v_.pipeline.suffix_ids.begin(), v_.pipeline.suffix_ids.end());
}

std::string Tokenizer::decode(const uint32_t *ids, size_t n, bool skip_special) const {
    std::string out;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= v_.size())
            throw_error(STK_E_INVALID_ARGUMENT, "%s: id %u at position %zu is outside the vocabulary of %u", v_.source.c_str(),
                        ids[i], i, v_.size());
        if (skip_special && v_.special(ids[i])) continue;
        out += v_.pieces[ids[i]];
    }
    if (byte_level_) return out;
    const std::string &rep = v_.pipeline.metaspace_replacement;
    std::string spaced;
    replace_all(out, rep, " ", spaced);
    if (v_.pipeline.strip_leading_space_on_decode && !spaced.empty() && spaced[0] == ' ') spaced.erase(0, 1);
    return spaced;
}

}  // namespace stk
