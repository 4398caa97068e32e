// What the tokenizer stage (tokenizer_build_or_wrap, seed 4) decided and built: read by
// manifest_emit (the manifest's tokenizer{} record and invariant records), by check (12.1) and by
// replay.  Lives in the job arena (Job::tokenizer); everything it points to too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tokenizer/fst_tables.h"
#include "tokenizer/proposals.h"
#include "tokenizer/sardinas_patterson.h"

namespace stk {

struct Job;
struct Vocab;

struct TokenizerPlan {
    enum class Mode : uint8_t {
        ABSENT = 0,           // no tokenizer file in the input: feature disabled (1.4, 17.3)
        FST = 1,              // byte-level BPE, SP certified: greedy tables built
        FST_UNCERTIFIED = 2,  // SP rejected, built anyway (STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER)
        EXT = 3,              // external tokenizer: no FST (not byte-level BPE, or SP rejected)
    };
    Mode mode = Mode::ABSENT;
    uint32_t l_tok = 0;  // manifest tokenizer.L_tok
    uint32_t vocab_size = 0;
    uint8_t vocab_model = 0;  // Vocab::Model
    // Sardinas-Patterson over the bytepieces (manifest tokenizer.sp_cert_digest)
    bool sp_ran = false;
    uint8_t sp_verdict = 0;  // SpResult::Verdict
    uint8_t sp_cert_digest[32] = {};
    uint64_t sp_work = 0;
    char sp_witness[64] = {};  // printable rendering of the witness ("ab"), truncated
    // Bytepieces and tables
    uint32_t n_bytepieces = 0;  // distinct non-special pieces of 1..L_tok bytes
    uint32_t pieces_per_length[hash::kMaxRollingLen + 1] = {};
    uint32_t duplicate_pieces = 0;  // ids whose bytes another (lower) id already has
    uint32_t rh_collisions = 0;     // pieces dropped because RH_n collided with another piece
    uint32_t mphf_retries = 0;      // 18.1: M += 5 % retries over all T_n
    uint32_t uncovered_bytes = 0;   // byte values with no single-byte token
    // 12.1 checks
    uint32_t max_probes_per_byte = 0;  // measured; must be <= L_tok
    uint64_t roundtrip_bytes = 0;      // seeded random bytes encoded and decoded
    bool roundtrip_ok = false;
    // Proposals C_t (manifest tokenizer.P_gen + the ids)
    Proposals proposals;
    // The tables as built (FST modes), for in-process use (replay, tests).
    FstTables *tables = nullptr;
    // Invariant record (seed 1.4): why a feature is disabled or uncertified; "" if none.
    char invariant[512] = {};
};

// Arena bytes the stage may need for tokenizer files of file_bytes bytes in total (a bound:
// pieces, their bytes and the vocabulary size are each bounded by the file bytes).
size_t tokenizer_arena_bytes(uint64_t file_bytes, uint32_t l_tok);
// The same from counts: n_tokens tokens of piece_bytes bytes in all (a bound: every length may
// hold every token).
size_t tokenizer_arena_bytes_for(uint64_t n_tokens, uint64_t piece_bytes, uint32_t l_tok);
// Exactly what the stage allocates for this vocabulary (its buffer list run against a sizer): what
// tokenizer_stage_size declares and what the stage checks before writing anything
// (STK_E_ARENA_TOO_SMALL, nothing written).
size_t tokenizer_arena_bytes_for(const Vocab &vocab, uint32_t l_tok);

// The stage body over a vocabulary already read (src/stages/tokenizer_stage.cc).  Writes the
// arrays, records the plan on job.tokenizer and returns it.
TokenizerPlan &tokenizer_stage_build(Job &job, const Vocab &vocab);

}  // namespace stk
