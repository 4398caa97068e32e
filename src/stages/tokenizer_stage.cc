// tokenizer_build_or_wrap (seed 4.1-4.6, 12.1; spec-notes 10): bytepieces of 1..L_tok bytes,
// Sardinas-Patterson over them, then either the greedy tables (tokenizer_fst.bin + T_1..T_Ltok)
// or the EXT wrapper (no FST, an invariant record saying why), and the proposals C_t in every
// mode.  Everything the stage keeps lives in the job arena; docs/decisions.md ("Decisions:
// hashing and the tokenizer stage") gives the reasons.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/prng.h"
#include "format/manifest.h"
#include "hash/rolling_hash.h"
#include "ingest/gguf.h"
#include "ingest/gguf_model.h"
#include "ingest/model.h"
#include "ingest/model_files.h"
#include "stages/policy.h"
#include "stages/outputs.h"
#include "stages/plan.h"
#include "stages/stages.h"
#include "tokenizer/greedy.h"
#include "tokenizer/plan.h"
#include "tokenizer/vocab_io.h"

namespace stk {

namespace {

// The files the tokenizer may read are listed once, in ingest/model_files.h (kTokenizerFileNames).

// The model's files as the job resolved them (stk_open), or, in a test that runs a stage by hand
// without a described model, resolved here.
ModelFiles files_of(const ModelDescription *model, const char *dir) { return model ? model->files : resolve_model_files(dir); }

uint64_t tokenizer_file_bytes(const ModelFiles &files, bool *any) {
    uint64_t total = 0;
    *any = false;
    // A GGUF: the tokenizer is part of its metadata, which the tensor data follows.
    if (files.is_gguf()) {
        GgufFile f(files.gguf);
        *any = f.find("tokenizer.ggml.tokens") != nullptr;
        total = f.file(0).size();
        for (const GgufTensorInfo &t : f.tensors())
            if (t.file_index == 0 && t.data_offset < total) total = t.data_offset;
        return total;
    }
    *any = !files.tokenizer.empty();
    return files.tokenizer_bytes;
}

constexpr uint32_t kMaxMphfRetries = 8;                           // 18.1: M grows by 5 % at most 8 times (x1.48)
constexpr size_t kRoundTripBytes = 64 * 1024;                     // 12.1: seeded random bytes through encode/decode
constexpr uint64_t kTokenizerSaltMaster = 0x544F4B454E495A45ull;  // "TOKENIZE"
constexpr uint32_t kTokenizerModule = 2;                          // seed 10.4 stream module id

uint64_t table_salt(uint32_t n) { return stream_seed(kTokenizerSaltMaster, kTokenizerModule, n); }

// T_n's MPHF parameters at an attempt: 18.1 grows M by 5 % per exhausted seed search.
MphfParams table_params(uint32_t n, uint32_t attempt) { return mphf_params_at(table_salt(n), attempt); }

// The arrays the stage publishes, in write order (the writer and the planner use these dims).
ArraySpec dec_spec(uint64_t dec_size) { return {"tokenizer_fst.bin", DType::U8, {dec_size}}; }
ArraySpec token_table_spec(uint32_t n, uint64_t table_size) {
    return {"T_" + std::to_string(n) + ".bin", DType::U8, {table_size}};
}
// The largest T_n blob over `keys` keys: TokenTable::serialized_size at the last 18.1 attempt.
uint64_t token_table_bound(uint32_t n, uint64_t keys) {
    return kTokHeaderSize + mphf_serialized_size_bound(keys, table_params(n, kMaxMphfRetries)) + 4 * keys;
}

void render_witness(const uint8_t *w, uint32_t len, char *out, size_t cap) {
    size_t at = 0;
    for (uint32_t i = 0; i < len && at + 5 < cap; i++) {
        uint8_t c = w[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') out[at++] = char(c);
        else at += size_t(std::snprintf(out + at, cap - at, "\\x%02x", c));
    }
    out[at] = 0;
}

struct KeyId {
    uint64_t key;
    uint32_t id;
};

// ---- The stage's buffers, declared once ------------------------------------------------------
// Sized by tokenizer_stage_size (through tokenizer_arena_bytes_for) and allocated by
// tokenizer_stage_build from the same counts.  The phases that follow each other (Sardinas-
// Patterson, then one T_n at a time, then the 12.1 round trip) share one scratch region, reset
// between them; what the stage keeps (plan, proposals, candidates, Dec, every T_n) is outside it.
struct TokSizes {
    uint64_t V = 0, B = 0;                         // tokens; their piece bytes
    uint32_t L = 0;                                // L_tok
    uint64_t keys[hash::kMaxRollingLen + 1] = {};  // at most this many T_n keys (bytepieces of n bytes)
};
// From the vocabulary itself (what the stage will meet).
TokSizes tok_sizes(const Vocab &v, uint32_t L) {
    TokSizes z;
    z.V = v.size();
    z.L = L;
    for (uint32_t id = 0; id < z.V; id++) {
        const size_t n = v.pieces[id].size();
        z.B += n;
        if (n >= 1 && n <= L && n <= hash::kMaxRollingLen && !v.special(id)) z.keys[n]++;
    }
    return z;
}
// From counts alone (a file not read yet): every length may hold every token.
TokSizes tok_sizes_bound(uint64_t V, uint64_t B, uint32_t L) {
    TokSizes z;
    z.V = V;
    z.B = B;
    z.L = L;
    for (uint32_t n = 1; n <= L && n <= hash::kMaxRollingLen; n++) z.keys[n] = V;
    return z;
}

struct SpScratch {  // Sardinas-Patterson over the bytepieces
    uint64_t *off;
    uint8_t *blob;
    Arena sp;
};
SpScratch sp_scratch(const TokSizes &z, Buffers &b) {
    SpScratch o;
    o.off = b.array<uint64_t>(z.V + 1);                 // bytepiece offsets
    o.blob = static_cast<uint8_t *>(b.bytes(z.B + 1));  // bytepiece bytes
    o.sp = b.region(sp_arena_size(z.V, z.B));
    return o;
}
struct TableScratch {  // one T_n: its keys, the MPHF build (largest 18.1 attempt), the ids
    KeyId *kid;
    uint64_t *keys;
    Arena mphf;
    uint32_t *ids;
};
TableScratch table_scratch(uint32_t n, uint64_t k, Buffers &b) {
    TableScratch o;
    const uint64_t k1 = k ? k : 1;
    o.kid = b.array<KeyId>(k1);
    o.keys = b.array<uint64_t>(k1);
    o.mphf = b.region(mphf_build_arena_size(k, table_params(n, kMaxMphfRetries)));
    o.ids = b.array<uint32_t>(k1);
    return o;
}
struct RoundTrip {  // 12.1: seeded bytes, their ids, the bytes decoded back
    uint8_t *text, *back;
    uint32_t *ids;
};
RoundTrip round_trip(Buffers &b) {
    RoundTrip o;
    o.text = static_cast<uint8_t *>(b.bytes(kRoundTripBytes));
    o.ids = b.array<uint32_t>(kRoundTripBytes);
    o.back = static_cast<uint8_t *>(b.bytes(kRoundTripBytes));
    return o;
}
// The scratch region: the largest of the phases.
uint64_t scratch_bytes(const TokSizes &z) {
    auto bytes_of = [](auto &&declare) {
        ArenaSizer s;
        Buffers b(s);
        declare(b);
        return uint64_t(s.total());
    };
    uint64_t most = bytes_of([&](Buffers &b) { sp_scratch(z, b); });
    most = std::max(most, bytes_of([&](Buffers &b) { round_trip(b); }));
    for (uint32_t n = 1; n <= z.L && n <= hash::kMaxRollingLen; n++)
        most = std::max(most, bytes_of([&](Buffers &b) { table_scratch(n, z.keys[n], b); }));
    return most;
}

struct TokBuffers {
    TokenizerPlan *plan;
    Arena proposals;  // build_proposals: the P_gen ids (kept) and its scratch
    uint32_t *cand;   // bytepiece candidates, sorted
    FstTables *tables;
    uint8_t *dec_blob;                          // tokenizer_fst.bin
    uint64_t dec_cap;                           // its bytes
    uint8_t *t_blob[hash::kMaxRollingLen + 1];  // T_n.bin, each at its 18.1 bound
    Arena scratch;                              // the phases above, one at a time
};
TokBuffers tok_buffers(const TokSizes &z, Buffers &b) {
    TokBuffers o{};
    o.plan = b.array<TokenizerPlan>(1);
    o.proposals = b.region(proposals_arena_size(uint32_t(std::min<uint64_t>(z.V, 0xFFFFFFFFu)), kDefaultPGen));
    o.cand = b.array<uint32_t>(z.V ? z.V : 1);
    o.tables = b.array<FstTables>(1);
    o.dec_cap = DecTable::serialized_size(uint32_t(std::min<uint64_t>(z.V, 0xFFFFFFFFu)), z.B);
    o.dec_blob = static_cast<uint8_t *>(b.bytes(o.dec_cap));
    for (uint32_t n = 1; n <= z.L && n <= hash::kMaxRollingLen; n++)
        o.t_blob[n] = static_cast<uint8_t *>(b.bytes(token_table_bound(n, z.keys[n])));
    o.scratch = b.region(scratch_bytes(z));
    return o;
}

size_t arena_bytes_of(const TokSizes &z) {
    ArenaSizer s;
    Buffers b(s);
    tok_buffers(z, b);
    return s.total();
}

// The stage's own canonical record, fed to its digest after its arrays (all modes): mode u8,
// L_tok u32, SP verdict u8, sp_cert_digest[32], P_gen u32, the P_gen ids u32 (all LE).
void digest_record(StageDigest &d, const TokenizerPlan &p) {
    uint8_t head[1 + 4 + 1 + 32 + 4];
    head[0] = uint8_t(p.mode);
    store_le<uint32_t>(head + 1, p.l_tok);
    head[5] = p.sp_verdict;
    std::memcpy(head + 6, p.sp_cert_digest, 32);
    store_le<uint32_t>(head + 38, p.proposals.count);
    d.add(head, sizeof head);
    for (uint32_t i = 0; i < p.proposals.count; i++) {
        uint8_t b[4];
        store_le<uint32_t>(b, p.proposals.ids[i]);
        d.add(b, 4);
    }
}

// The manifest's tokenizer{} record, P_gen and the stage's records (the draft manifest_emit
// publishes).  Record texts are at most 95 characters: the full invariant stays on the plan.
void fill_manifest(Job &job, const TokenizerPlan &p) {
    ManifestDraft &d = job.manifest;
    auto &t = d.fields.tokenizer;
    t.mode = uint32_t(p.mode);
    t.l_tok = p.l_tok;
    t.vocab_size = p.vocab_size;
    t.s_norm = p.n_bytepieces;
    uint32_t longest = 0;
    for (uint32_t n = 1; n <= hash::kMaxRollingLen; n++)
        if (p.pieces_per_length[n]) longest = n;
    t.l_norm = longest;
    t.unicode_policy = p.mode == TokenizerPlan::Mode::ABSENT ? 0 : p.vocab_model == uint8_t(Vocab::Model::BPE_BYTE_LEVEL) ? 1 : 2;
    std::memcpy(t.sp_cert_digest, p.sp_cert_digest, 32);
    d.p_gen = p.proposals.ids;
    d.n_pgen = p.proposals.count;
    const stk_stage st = STK_STAGE_TOKENIZER;
    switch (p.mode) {
        case TokenizerPlan::Mode::ABSENT:
            draft_add_record(d, st, kRecordFeatureDisabled, kFeatureTokenizerFst, STK_E_NOT_FOUND, 0, 0,
                             "no tokenizer file in the input: tokenizer disabled");
            break;
        case TokenizerPlan::Mode::EXT:
            if (p.sp_ran)
                draft_add_record(d, st, kRecordFeatureDisabled, kFeatureTokenizerFst, STK_E_SP_REJECTED, p.sp_verdict, 0,
                                 "Sardinas-Patterson rejects the bytepieces, witness \"%.40s\": no token tables, EXT mode",
                                 p.sp_witness);
            else
                draft_add_record(d, st, kRecordFeatureDisabled, kFeatureTokenizerFst, STK_E_UNSUPPORTED, p.vocab_model, 0,
                                 "not byte-level BPE: no token tables, EXT mode (the model's own tokenizer)");
            break;
        case TokenizerPlan::Mode::FST_UNCERTIFIED:
            draft_add_record(d, st, kRecordNote, kFeatureTokenizerFst, STK_E_SP_REJECTED, p.sp_verdict, 0,
                             "FST UNCERTIFIED (flag): SP witness \"%.40s\"; greedy ids may differ from BPE", p.sp_witness);
            break;
        case TokenizerPlan::Mode::FST:
            draft_add_record(d, st, kRecordInvariantPass, kFeatureTokenizerFst, STK_OK, 0, 0,
                             "Sardinas-Patterson: bytepieces uniquely decodable");
            break;
    }
    if (p.tables) {
        draft_add_record(d, st, kRecordInvariantPass, kFeatureTokenizerFst, STK_OK, p.max_probes_per_byte, p.l_tok,
                         "12.1 probes per byte <= L_tok");
        draft_add_record(d, st, kRecordInvariantPass, kFeatureTokenizerFst, STK_OK, double(p.roundtrip_bytes), 0,
                         "12.1 Greedy==Decode on seeded random bytes");
        if (p.mphf_retries)
            draft_add_record(d, st, kRecordNote, kFeatureTokenizerFst, STK_E_MPHF_EXHAUSTED, p.mphf_retries, 8,
                             "18.1: MPHF seed search exhausted, M += 5 %% and retried");
        if (p.rh_collisions)
            draft_add_record(d, st, kRecordNote, kFeatureTokenizerFst, STK_OK, p.rh_collisions, 0,
                             "RH_n collisions: pieces dropped from T_n (Dec guard keeps lookups exact)");
        if (p.uncovered_bytes)
            draft_add_record(d, st, kRecordNote, kFeatureTokenizerFst, STK_OK, p.uncovered_bytes, 0,
                             "byte values without a single-byte token: greedy emits unk for them");
    }
}

const char *model_name(Vocab::Model m) {
    switch (m) {
        case Vocab::Model::BPE_BYTE_LEVEL: return "byte-level BPE";
        case Vocab::Model::BPE_SENTENCEPIECE: return "SentencePiece BPE";
        case Vocab::Model::UNIGRAM: return "Unigram";
    }
    return "?";
}

}  // namespace

size_t tokenizer_arena_bytes_for(uint64_t V, uint64_t B, uint32_t l_tok) { return arena_bytes_of(tok_sizes_bound(V, B, l_tok)); }

size_t tokenizer_arena_bytes_for(const Vocab &vocab, uint32_t l_tok) { return arena_bytes_of(tok_sizes(vocab, l_tok)); }

size_t tokenizer_arena_bytes(uint64_t file_bytes, uint32_t l_tok) {
    // Every vocabulary entry takes at least 4 bytes of any supported file; piece bytes never
    // exceed the file bytes that spell them (escapes and byte-to-unicode only shrink).
    return tokenizer_arena_bytes_for(file_bytes / 4 + 256, file_bytes + 256, l_tok);
}

void tokenizer_stage_size(const JobInputs &in, ArenaSizer &s) {
    const stk_job_params &p = in.params;
    bool any = false;
    const ModelFiles files = files_of(in.model, p.in_dir);
    uint64_t bytes = tokenizer_file_bytes(files, &any);
    s.add(sizeof(TokenizerPlan), alignof(TokenizerPlan));
    if (!any) return;
    // What the stage needs is set by the vocabulary (tokens, piece bytes), not by the file's
    // size: a 50 MB tokenizer file of a 50k vocabulary (merges, whitespace, added_tokens) would
    // otherwise plan gigabytes.  The job's vocabulary (stk_open read it), else its pieces read
    // now (no merges: stk_job_arena_size); a file that does not parse keeps the file-size bound
    // (the stage then refuses it, naming the file).
    if (in.vocab) return s.add(tokenizer_arena_bytes_for(*in.vocab, p.l_tok));
    size_t need = 0;
    if (guard([&] { need = tokenizer_arena_bytes_for(load_vocab(files, VocabRead::PIECES), p.l_tok); }) != STK_OK)
        need = tokenizer_arena_bytes(bytes, p.l_tok);
    s.add(need);
}

Vocab *tokenizer_stage_read_vocab(const JobInputs &in) {
    bool any = false;
    const ModelFiles files = files_of(in.model, in.params.in_dir);
    tokenizer_file_bytes(files, &any);
    std::unique_ptr<Vocab> v;
    if (any) guard([&] { v = std::make_unique<Vocab>(load_vocab(files, VocabRead::WHOLE, in.params.threads)); });
    return v.release();
}

TokenizerPlan &tokenizer_stage_build(Job &job, const Vocab &vocab) {
    Arena &A = job.arena;
    const uint32_t V = vocab.size(), L = job.params.l_tok;
    const char *src = vocab.source.c_str();
    if (L == 0 || L > hash::kMaxRollingLen) throw_error(STK_E_INVALID_ARGUMENT, "Ltok = %u: outside 1..64", L);
    const TokSizes z = tok_sizes(vocab, L);
    {
        // Refuse now, before any array is written, if the arena cannot hold the stage.
        size_t need = arena_bytes_of(z);
        if (A.remaining() < need)
            throw_error(STK_E_ARENA_TOO_SMALL,
                        "%s: the tokenizer stage needs %zu arena bytes for %u tokens (%llu bytes), %zu are left", src, need, V,
                        (unsigned long long)z.B, A.remaining());
    }
    Buffers alloc(A);
    TokBuffers buf = tok_buffers(z, alloc);
    TokenizerPlan *plan = buf.plan;
    job.tokenizer = plan;
    plan->l_tok = L;
    plan->vocab_size = V;
    plan->vocab_model = uint8_t(vocab.model);
    if (V == 0) throw_error(STK_E_CORRUPT, "%s: the vocabulary has no tokens", src);
    StageDigest digest;
    plan->proposals = build_proposals(vocab, kDefaultPGen, buf.proposals);

    auto finish = [&]() -> TokenizerPlan & {
        fill_manifest(job, *plan);
        digest_record(digest, *plan);
        digest.finish(job.stages[STK_STAGE_TOKENIZER]);
        return *plan;
    };
    if (vocab.model != Vocab::Model::BPE_BYTE_LEVEL) {
        plan->mode = TokenizerPlan::Mode::EXT;
        std::snprintf(plan->invariant, sizeof plan->invariant,
                      "tokenizer: %s is %s, not byte-level BPE: EXT mode (the model's own tokenizer), no token tables built; "
                      "the proposal ids (p_gen: up to 256 likely first tokens, by merge rank or piece score) are "
                      "still written",
                      src, model_name(vocab.model));
        return finish();
    }

    // Bytepieces: distinct non-special pieces of 1..L bytes, sorted by (length, bytes, id) so
    // that equal bytes keep their lowest id.
    uint32_t *cand = buf.cand;
    uint32_t nc = 0;
    for (uint32_t id = 0; id < V; id++) {
        size_t len = vocab.pieces[id].size();
        if (len >= 1 && len <= L && !vocab.special(id)) cand[nc++] = id;
    }
    std::sort(cand, cand + nc, [&](uint32_t a, uint32_t b) {
        const std::string &x = vocab.pieces[a], &y = vocab.pieces[b];
        if (x.size() != y.size()) return x.size() < y.size();
        int c = std::memcmp(x.data(), y.data(), x.size());
        return c ? c < 0 : a < b;
    });
    uint32_t nb = 0;
    for (uint32_t i = 0; i < nc; i++) {
        if (nb && vocab.pieces[cand[nb - 1]] == vocab.pieces[cand[i]]) {
            plan->duplicate_pieces++;
            continue;
        }
        cand[nb++] = cand[i];
    }
    plan->n_bytepieces = nb;
    bool covered[256] = {};
    for (uint32_t i = 0; i < nb; i++) {
        const std::string &p = vocab.pieces[cand[i]];
        plan->pieces_per_length[p.size()]++;
        if (p.size() == 1) covered[uint8_t(p[0])] = true;
    }
    for (bool c : covered) plan->uncovered_bytes += !c;

    // Sardinas-Patterson over the bytepieces (4.2).
    {
        buf.scratch.reset(0);
        Buffers scratch(buf.scratch);
        SpScratch sc = sp_scratch(z, scratch);
        uint64_t *off = sc.off;
        uint8_t *blob = sc.blob;
        for (uint32_t i = 0; i < nb; i++) {
            const std::string &p = vocab.pieces[cand[i]];
            std::memcpy(blob + off[i], p.data(), p.size());
            off[i + 1] = off[i] + p.size();
        }
        SpResult r = sardinas_patterson(blob, off, nb, sc.sp);
        plan->sp_ran = true;
        plan->sp_verdict = r.verdict;
        plan->sp_work = r.work;
        std::memcpy(plan->sp_cert_digest, r.digest.bytes, 32);
        render_witness(r.witness, r.witness_len, plan->sp_witness, sizeof plan->sp_witness);
        if (r.verdict != SpResult::UNIQUELY_DECODABLE) {
            char parses[200] = {};
            if (r.verdict == SpResult::AMBIGUOUS) {
                std::string a, b;
                for (uint32_t i = 0; i < r.n_a && i < 8; i++) a += (i ? "," : "") + std::to_string(cand[r.parse_a[i]]);
                for (uint32_t i = 0; i < r.n_b && i < 8; i++) b += (i ? "," : "") + std::to_string(cand[r.parse_b[i]]);
                std::snprintf(parses, sizeof parses, "\"%s\" = ids [%s] = ids [%s]", plan->sp_witness, a.c_str(), b.c_str());
            } else {
                std::snprintf(parses, sizeof parses, "undecided after %llu steps (work cap)", (unsigned long long)r.work);
            }
            bool build = job.params.flags & STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
            plan->mode = build ? TokenizerPlan::Mode::FST_UNCERTIFIED : TokenizerPlan::Mode::EXT;
            std::snprintf(plan->invariant, sizeof plan->invariant,
                          build ? "tokenizer: Sardinas-Patterson rejects the %u bytepieces of %s: %s; greedy FST built anyway "
                                  "(--allow-uncertified-tokenizer), UNCERTIFIED: its ids may differ from BPE"
                                : "tokenizer: Sardinas-Patterson rejects the %u bytepieces of %s: %s; no token tables built, "
                                  "EXT mode; --allow-uncertified-tokenizer builds the greedy encoder anyway",
                          nb, src, parses);
        } else {
            plan->mode = TokenizerPlan::Mode::FST;
        }
    }
    if (plan->mode == TokenizerPlan::Mode::EXT) return finish();

    // Dec: every id's bytes (tokenizer_fst.bin).
    FstTables *tables = buf.tables;
    plan->tables = tables;
    uint64_t total = 0;
    size_t dec_size = dec_size_for(vocab.pieces, &total, src);
    if (dec_size > buf.dec_cap)
        throw_error(STK_E_INTERNAL, "%s: tokenizer_fst.bin takes %zu bytes, over its bound %llu", src, dec_size,
                    (unsigned long long)buf.dec_cap);
    uint8_t *dec_blob = buf.dec_blob;
    tables->dec =
        build_dec(vocab.pieces, L, plan->mode == TokenizerPlan::Mode::FST ? kDecFlagCertified : kDecFlagUncertified,
                  vocab.unk_id >= 0 && uint32_t(vocab.unk_id) < V ? vocab.unk_id : -1, dec_blob, dec_size, "tokenizer_fst.bin");
    const ArraySpec dec_out = dec_spec(dec_size);
    job_write_array(job, STK_STAGE_TOKENIZER, digest, dec_out, dec_blob);

    // T_1..T_L over the MPHF, keyed by RH_n; 18.1 on exhausted seed search.
    uint32_t first = 0;
    for (uint32_t n = 1; n <= L; n++) {
        uint32_t k = 0;
        while (first + k < nb && vocab.pieces[cand[first + k]].size() == n) k++;
        buf.scratch.reset(0);
        Buffers scratch(buf.scratch);
        TableScratch sc = table_scratch(n, z.keys[n], scratch);
        if (k > z.keys[n]) throw_error(STK_E_INTERNAL, "%s: %u bytepieces of %u bytes, more than counted", src, k, n);
        KeyId *kid = sc.kid;
        for (uint32_t i = 0; i < k; i++) {
            const std::string &p = vocab.pieces[cand[first + i]];
            kid[i] = {hash::rolling_hash(reinterpret_cast<const uint8_t *>(p.data()), n), cand[first + i]};
        }
        first += k;
        std::sort(kid, kid + k, [](const KeyId &a, const KeyId &b) { return a.key != b.key ? a.key < b.key : a.id < b.id; });
        uint32_t kk = 0;
        for (uint32_t i = 0; i < k; i++) {
            if (kk && kid[kk - 1].key == kid[i].key) {
                plan->rh_collisions++;  // distinct bytes, same RH_n: the lower id keeps the slot
                continue;
            }
            kid[kk++] = kid[i];
        }
        uint64_t *keys = sc.keys;
        for (uint32_t i = 0; i < kk; i++) keys[i] = kid[i].key;
        Mphf f;
        for (uint32_t attempt = 0;; attempt++) {
            sc.mphf.reset(0);
            try {
                f = mphf_build_u64(keys, kk, table_params(n, attempt), sc.mphf);  // 18.1: M += 5 % per attempt
                break;
            } catch (const Error &e) {
                if (e.status() != STK_E_MPHF_EXHAUSTED || attempt == kMaxMphfRetries) throw;
                plan->mphf_retries++;  // rerun only this structure
            }
        }
        uint32_t *ids = sc.ids;
        for (uint32_t i = 0; i < kk; i++) ids[f.index_u64(kid[i].key)] = kid[i].id;
        size_t tsize = TokenTable::serialized_size(f);
        if (tsize > token_table_bound(n, z.keys[n]))
            throw_error(STK_E_INTERNAL, "%s: T_%u takes %zu bytes, over its bound", src, n, tsize);
        uint8_t *blob = buf.t_blob[n];
        serialize_token_table(n, f, ids, blob);
        const ArraySpec t_out = token_table_spec(n, tsize);
        tables->t[n] = TokenTable::load(blob, tsize, n, tables->dec, t_out.name.c_str());
        job_write_array(job, STK_STAGE_TOKENIZER, digest, t_out, blob);
    }

    // 12.1: probe bound and Greedy == Decode on seeded random bytes (drawn from the bytes that
    // have a single-byte token, so that decoding is exact).
    {
        buf.scratch.reset(0);
        Buffers scratch(buf.scratch);
        uint8_t alphabet[256];
        uint32_t na = 0;
        for (int b = 0; b < 256; b++)
            if (covered[b]) alphabet[na++] = uint8_t(b);
        if (na > 0) {
            const RoundTrip rt = round_trip(scratch);
            uint8_t *text = rt.text, *back = rt.back;
            uint32_t *ids = rt.ids;
            uint64_t state = stream_seed(kTokenizerSaltMaster, kTokenizerModule, 0xFFFF);
            for (size_t i = 0; i < kRoundTripBytes; i++) text[i] = alphabet[hash::fastrange(splitmix64_next(&state), na)];
            GreedyStats gs;
            size_t nt = greedy_encode(*tables, text, kRoundTripBytes, ids, &gs);
            size_t nback = fst_decode(*tables, ids, nt, back, kRoundTripBytes);
            plan->max_probes_per_byte = gs.max_probes_at;
            plan->roundtrip_bytes = kRoundTripBytes;
            plan->roundtrip_ok = nback == kRoundTripBytes && std::memcmp(back, text, kRoundTripBytes) == 0;
            if (gs.max_probes_at > L || !plan->roundtrip_ok)
                throw_breach(STK_E_INTERNAL, "12.1 probes <= L_tok, Greedy == Decode", gs.max_probes_at, L,
                             "tokenizer 12.1 check failed: %u probes at one byte (L_tok %u), round trip %s", gs.max_probes_at, L,
                             plan->roundtrip_ok ? "ok" : "differs");
        }
    }
    if (plan->uncovered_bytes && !plan->invariant[0])
        std::snprintf(
            plan->invariant, sizeof plan->invariant,
            "tokenizer: %u byte values have no single-byte token in %s: the greedy encoder emits the unk id %d for them",
            plan->uncovered_bytes, src, tables->dec.residual_id);
    return finish();
}

void tokenizer_stage_plan(const JobInputs &in, ArrayPlan &plan) {
    const uint32_t L = in.params.l_tok;
    const stk_stage st = STK_STAGE_TOKENIZER;
    bool any = false;
    const ModelFiles files = files_of(in.model, in.params.in_dir);
    tokenizer_file_bytes(files, &any);
    if (!any) {
        plan.add(st, dec_spec(0));
        plan.disable_stage(st,
                           "tokenizer disabled: no tokenizer file (tokenizer.json, vocab.json + merges.txt, "
                           "tokenizer.model, or tokenizer.ggml.* keys in a GGUF) in the model");
        return;
    }
    const Vocab vocab = load_vocab(files);
    uint64_t total = 0;
    plan.add(st, dec_spec(dec_size_for(vocab.pieces, &total, vocab.source.c_str())));
    // Bytepieces as the stage takes them: distinct non-special pieces of 1..L bytes.  Per length,
    // their count bounds T_n's keys (RH_n collisions can only drop some).  Ordered: the witness
    // below is the first in byte order, the same on every platform.
    std::vector<std::set<std::string>> by_len(size_t(L) + 1);
    for (uint32_t id = 0; id < vocab.size(); id++) {
        const std::string &p = vocab.pieces[id];
        if (p.size() >= 1 && p.size() <= L && !vocab.special(id)) by_len[p.size()].insert(p);
    }
    for (uint32_t n = 1; n <= L; n++)
        plan.add(st, token_table_spec(n, token_table_bound(n, by_len[n].size())), false,
                 "the MPHF's size depends on the keys: bound at the last 18.1 retry (M x 1.05^8)");
    const bool flag = in.params.flags & STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
    if (vocab.model != Vocab::Model::BPE_BYTE_LEVEL) {
        plan.disable_stage(st, std::string("EXT mode: ") + model_name(vocab.model) +
                                   " is not byte-level BPE: EXT mode (the model's own tokenizer), no token tables");
        return;
    }
    // A piece of 2+ bytes whose bytes are all single-byte pieces has two parses: Sardinas-
    // Patterson rejects the set for certain (byte-level BPE vocabularies always have one).
    std::string witness;
    for (uint32_t n = 2; n <= L && witness.empty(); n++)
        for (const std::string &p : by_len[n]) {
            bool split = true;
            for (char c : p) split = split && by_len[1].count(std::string(1, c));
            if (split) {
                witness = p;
                break;
            }
        }
    char shown[64];
    render_witness(reinterpret_cast<const uint8_t *>(witness.data()), uint32_t(witness.size()), shown, sizeof shown);
    if (!witness.empty() && !flag) {
        plan.disable_stage(st, std::string("EXT mode: Sardinas-Patterson rejects the bytepieces (\"") + shown +
                                   "\" is also its single bytes): no token tables; --allow-uncertified-tokenizer builds them "
                                   "(recorded as uncertified)");
        return;
    }
    for (PlannedArray &a : plan.arrays) {
        if (a.stage != st) continue;
        if (!witness.empty()) {
            if (a.reason.empty()) a.reason = "built uncertified (--allow-uncertified-tokenizer)";
        } else if (!flag) {
            a.presence = PlanPresence::Optional;
            a.reason = "written if Sardinas-Patterson certifies the bytepieces when the stage runs (else EXT mode)" +
                       (a.reason.empty() ? std::string("") : "; " + a.reason);
        }
    }
}

void tokenizer_stage_run(Job &job) {
    bool any = false;
    const ModelFiles files = files_of(job.source, job.in_dir);
    tokenizer_file_bytes(files, &any);
    if (!any) {
        // Optional input (2.1): no tokenizer, feature disabled, recorded (1.4).
        TokenizerPlan *plan = new (job.arena.alloc(sizeof(TokenizerPlan), alignof(TokenizerPlan))) TokenizerPlan();
        job.tokenizer = plan;
        plan->l_tok = job.params.l_tok;
        std::snprintf(plan->invariant, sizeof plan->invariant,
                      "tokenizer: no tokenizer file (tokenizer.json, vocab.json + merges.txt, tokenizer.model, or a GGUF's "
                      "tokenizer.ggml.* keys) in %s: "
                      "tokenizer disabled",
                      job.in_dir);
        fill_manifest(job, *plan);
        StageDigest digest;
        digest_record(digest, *plan);
        digest.finish(job.stages[STK_STAGE_TOKENIZER]);
        return;
    }
    // The vocabulary stk_open read for the job (freed after the stage); else read now.
    if (job.vocab) return void(tokenizer_stage_build(job, *job.vocab));
    Vocab vocab = load_vocab(files);
    tokenizer_stage_build(job, vocab);
}

}  // namespace stk
