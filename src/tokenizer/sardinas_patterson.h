// Sardinas-Patterson (seed 4.2): is a set of byte strings uniquely decodable?  The dangling
// suffixes of the classic S_1, S_2, ... construction are explored as a shortest-path search
// (Dijkstra, cost = length of the text parsed so far), so the first time the empty suffix
// (epsilon) is reached, the two parses that reach it spell a SHORTEST ambiguous string: the
// minimal witness.  Ties are broken by a fixed order (codewords sorted bytewise), so the witness
// and its digest are deterministic.  Work (edges examined) is capped: past the cap the verdict is
// UNDECIDED, never a guess.  Everything lives in the caller's arena.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/arena.h"
#include "core/checksum.h"

namespace stk {

struct SpResult {
    enum Verdict : uint8_t { UNIQUELY_DECODABLE = 0, AMBIGUOUS = 1, UNDECIDED = 2 };
    Verdict verdict = UNIQUELY_DECODABLE;
    // AMBIGUOUS: a shortest string with two parses; parse_a / parse_b are codeword indices
    // (positions in the caller's list) whose concatenations both spell the witness.
    const uint8_t *witness = nullptr;
    uint32_t witness_len = 0;
    const uint32_t *parse_a = nullptr, *parse_b = nullptr;
    uint32_t n_a = 0, n_b = 0;
    // sp_cert_digest = SHA-256(verdict byte || witness bytes): for a uniquely decodable code
    // SHA-256(0x00); for {a, b, ab}: SHA-256(01 61 62).
    Sha256Digest digest{};
    uint64_t work = 0;    // edges examined
    uint32_t states = 0;  // distinct dangling suffixes met
};

constexpr uint64_t kSpDefaultWorkCap = uint64_t(1) << 21;

// Arena bytes for n codewords of total_bytes bytes (scratch + the witness it keeps).
size_t sp_arena_size(uint64_t n, uint64_t total_bytes, uint64_t work_cap = kSpDefaultWorkCap);

// Codeword i = blob[offsets[i], offsets[i+1]), non-empty.  Two equal codewords are an ambiguity
// (the witness is that codeword).
SpResult sardinas_patterson(const uint8_t *blob, const uint64_t *offsets, uint32_t n, Arena &arena,
                            uint64_t work_cap = kSpDefaultWorkCap);

}  // namespace stk
