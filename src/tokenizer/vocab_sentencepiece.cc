// SentencePiece's tokenizer.model (a serialized ModelProto) through our own bounded protobuf
// wire-format reader (protobuf_wire.h): pieces, scores, types, trainer_spec (model_type,
// byte_fallback, unk/bos/eos ids) and normalizer_spec (add_dummy_prefix, remove_extra_whitespaces,
// escape_whitespaces, precompiled_charsmap).  Field numbers are sentencepiece_model.proto's.
#include <algorithm>
#include <unordered_map>

#include "tokenizer/protobuf_wire.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab_internal.h"
#include "tokenizer/vocab_io.h"

namespace stk {

using detail::printable;

namespace {

constexpr size_t kMaxMergedPieceBytes = 256;

struct TrainerSpec {
    int32_t model_type = 1;  // UNIGRAM
    bool byte_fallback = false;
    bool treat_whitespace_as_suffix = false;
    int32_t unk_id = 0, bos_id = 1, eos_id = 2;
};

struct NormalizerSpec {
    std::string name;
    uint64_t charsmap_size = 0;
    bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

}  // namespace

Vocab parse_sentencepiece_model(const uint8_t *data, size_t size, const std::string &name) {
    detail::VocabBuilder b;
    b.v.source = name;
    TrainerSpec ts;
    NormalizerSpec ns;
    bool have_normalizer = false;
    pb::Reader top(data, size, 0, name);
    pb::Field f;
    uint32_t n = 0;
    while (top.next(f)) {
        if (f.number == 1) {  // repeated SentencePiece pieces
            top.expect(f, 2, "SentencePiece");
            pb::Reader pr(f.data, f.size, top.payload_offset(f), name);
            pb::Field g;
            std::string_view piece;
            bool have_piece = false;
            float score = 0;
            int32_t type = 1;
            while (pr.next(g)) {
                if (g.number == 1) {
                    piece = pr.as_bytes(g, "SentencePiece.piece");
                    have_piece = true;
                } else if (g.number == 2) score = pr.as_float(g, "SentencePiece.score");
                else if (g.number == 3) type = pr.as_int32(g, "SentencePiece.type");
            }
            std::string where = format("piece %u at byte offset %llu", n, (unsigned long long)f.offset);
            if (!have_piece || piece.empty()) throw_error(STK_E_CORRUPT, "%s: %s has no text", name.c_str(), where.c_str());
            if (type < 1 || type > 6)
                throw_error(STK_E_CORRUPT, "%s: %s ('%s') has unknown type %d", name.c_str(), where.c_str(),
                            printable(piece).c_str(), type);
            std::string bytes(piece);
            if (type == int32_t(Vocab::PieceType::BYTE)) {
                unsigned v = 0;
                if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>' || !isxdigit((unsigned char)piece[3]) ||
                    !isxdigit((unsigned char)piece[4]))
                    throw_error(STK_E_CORRUPT, "%s: %s: BYTE piece '%s' is not <0xNN>", name.c_str(), where.c_str(),
                                printable(piece).c_str());
                v = unsigned(std::stoul(std::string(piece.substr(3, 2)), nullptr, 16));
                bytes.assign(1, char(v));
                b.v.byte_piece_ids[v] = int32_t(n);
            }
            b.add(piece, std::move(bytes), n, where);
            b.v.scores.push_back(score);
            b.v.piece_types.push_back(uint8_t(type));
            b.v.is_special.push_back(type == 2 || type == 3);
            if (n == kMaxVocabSize - 1) throw_error(STK_E_CORRUPT, "%s: more than %u pieces", name.c_str(), kMaxVocabSize);
            n++;
        } else if (f.number == 2) {  // TrainerSpec
            top.expect(f, 2, "trainer_spec");
            pb::Reader tr(f.data, f.size, top.payload_offset(f), name);
            pb::Field g;
            while (tr.next(g)) {
                switch (g.number) {
                    case 3: ts.model_type = tr.as_int32(g, "trainer_spec.model_type"); break;
                    case 24: ts.treat_whitespace_as_suffix = tr.as_bool(g, "trainer_spec.treat_whitespace_as_suffix"); break;
                    case 35: ts.byte_fallback = tr.as_bool(g, "trainer_spec.byte_fallback"); break;
                    case 40: ts.unk_id = tr.as_int32(g, "trainer_spec.unk_id"); break;
                    case 41: ts.bos_id = tr.as_int32(g, "trainer_spec.bos_id"); break;
                    case 42: ts.eos_id = tr.as_int32(g, "trainer_spec.eos_id"); break;
                    default: break;
                }
            }
        } else if (f.number == 3) {  // NormalizerSpec
            top.expect(f, 2, "normalizer_spec");
            have_normalizer = true;
            pb::Reader nr(f.data, f.size, top.payload_offset(f), name);
            pb::Field g;
            while (nr.next(g)) {
                switch (g.number) {
                    case 1: ns.name = std::string(nr.as_bytes(g, "normalizer_spec.name")); break;
                    case 2: ns.charsmap_size = nr.as_bytes(g, "normalizer_spec.precompiled_charsmap").size(); break;
                    case 3: ns.add_dummy_prefix = nr.as_bool(g, "normalizer_spec.add_dummy_prefix"); break;
                    case 4: ns.remove_extra_whitespaces = nr.as_bool(g, "normalizer_spec.remove_extra_whitespaces"); break;
                    case 5: ns.escape_whitespaces = nr.as_bool(g, "normalizer_spec.escape_whitespaces"); break;
                    default: break;
                }
            }
        }
        // 4 self_test_data, 5 denormalizer_spec, unknown fields: skipped (already bounds-checked)
    }
    if (n == 0) throw_error(STK_E_CORRUPT, "%s: no pieces (not a SentencePiece model?)", name.c_str());

    Vocab &v = b.v;
    v.byte_fallback = ts.byte_fallback;
    auto id_or_none = [&](int32_t id, const char *what) -> int32_t {
        if (id < 0) return -1;
        if (uint32_t(id) >= n)
            throw_error(STK_E_CORRUPT, "%s: trainer_spec.%s = %d is outside the %u pieces", name.c_str(), what, id, n);
        return id;
    };
    v.unk_id = id_or_none(ts.unk_id, "unk_id");
    v.bos_id = id_or_none(ts.bos_id, "bos_id");
    v.eos_id = id_or_none(ts.eos_id, "eos_id");

    Vocab::Pipeline &pl = v.pipeline;
    auto unsupported = [&](const std::string &what) {
        if (pl.unsupported.empty()) pl.unsupported = name + ": " + what;
    };
    using Op = Vocab::NormalizerOp;
    (void)have_normalizer;
    if (ns.charsmap_size != 0)
        unsupported(format("normalizer_spec '%s' has a precompiled charsmap (%llu bytes), which is not supported",
                           ns.name.c_str(), (unsigned long long)ns.charsmap_size));
    if (ts.treat_whitespace_as_suffix) unsupported("treat_whitespace_as_suffix is not supported");
    if (ns.remove_extra_whitespaces) pl.normalizers.push_back({Op::SP_REMOVE_EXTRA_SPACES, {}, {}});
    const char *marker = "\xE2\x96\x81";
    if (ns.add_dummy_prefix) {
        pl.normalizers.push_back({Op::PREPEND, ns.escape_whitespaces ? marker : " ", {}});
        pl.strip_leading_space_on_decode = true;
    }
    if (ns.escape_whitespaces) pl.normalizers.push_back({Op::REPLACE, " ", marker});
    // Llama's convention (LlamaTokenizer add_bos_token): <s> first.
    if (v.bos_id >= 0) pl.prefix_ids.push_back(uint32_t(v.bos_id));

    for (uint32_t id = 0; id < n; id++)
        if (v.piece_types[id] == uint8_t(Vocab::PieceType::USER_DEFINED))
            v.added_tokens.push_back({b.entries[id].piece, id, false});

    if (ts.model_type == 2) {  // BPE: merges from scores, as HF's SentencePieceExtractor
        v.model = Vocab::Model::BPE_SENTENCEPIECE;
        v.merges_from_scores = true;
        struct M {
            float score;
            uint32_t result, left, right;
        };
        std::vector<M> ms;
        for (uint32_t id = 0; id < n; id++) {
            uint8_t t = v.piece_types[id];
            if (t != uint8_t(Vocab::PieceType::NORMAL)) continue;
            const std::string &p = b.entries[id].piece;
            // Pieces are short (sentencepiece's max_sentencepiece_length defaults to 16
            // characters); a longer one is never a merge result here, which keeps this loop
            // linear in the file size whatever a hostile file holds.
            if (p.size() > kMaxMergedPieceBytes) continue;
            // every split at a character boundary into two mergeable pieces
            const std::string_view ps = p;
            detail::for_each_split(ps, [&](size_t i) {
                auto l = b.by_spelling.find(ps.substr(0, i)), r = b.by_spelling.find(ps.substr(i));
                if (l == b.by_spelling.end() || r == b.by_spelling.end()) return;
                uint8_t lt = v.piece_types[l->second], rt = v.piece_types[r->second];
                if ((lt != 1 && lt != 4) || (rt != 1 && rt != 4)) return;
                ms.push_back({b.v.scores[id], id, l->second, r->second});
            });
        }
        std::sort(ms.begin(), ms.end(), [](const M &a, const M &c) {
            if (a.score != c.score) return a.score > c.score;
            if (a.result != c.result) return a.result < c.result;
            return a.left < c.left;
        });
        for (const M &m : ms) {
            v.merges.emplace_back(m.left, m.right);
            v.merge_results.push_back(m.result);
        }
    } else if (ts.model_type == 1) {
        v.model = Vocab::Model::UNIGRAM;
        pl.unsupported.clear();
        unsupported("encoding with a Unigram model is not implemented (the vocabulary is read for the tokenizer stage)");
    } else {
        v.model = Vocab::Model::BPE_SENTENCEPIECE;
        unsupported(format("trainer_spec.model_type %d (WORD/CHAR) is not supported", ts.model_type));
    }
    return b.finish();
}

}  // namespace stk
