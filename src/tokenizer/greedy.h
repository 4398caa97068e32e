// The greedy encoder of seed 4.5 over the tokenizer tables: at each position try the lengths
// L_tok..1 (at most L_tok table probes per byte), accept the first candidate whose Dec bytes equal
// the input (the equality guard), never backtrack.  Near the end of the input only the lengths
// that fit are tried (the residual flush at EOF).  A byte that no token covers becomes the
// table's residual id (unk) when it has one, else STK_E_KEY_NOT_FOUND naming the offset.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tokenizer/fst_tables.h"

namespace stk {

struct GreedyStats {
    uint64_t probes = 0;          // table probes made (skipped lengths and memo hits make none)
    uint32_t max_probes_at = 0;   // most probes at one position (12.1: <= L_tok)
    uint64_t residual_bytes = 0;  // bytes emitted as the residual id
};

// Writes at most n ids to out (one per byte at worst); returns how many.  No heap allocation
// below 1 MiB of text; from 1 MiB, one 64 KiB memo for the call (see greedy.cc).
// Lengths that cannot match are skipped (a per-first-byte mask; with attach_greedy_accel also a
// filter, u64 guard words and a 16 KiB stack memo of 8-byte windows): the ids are those of
// greedy_encode_reference, fewer probes are made.  docs/decisions.md "greedy encoder speed (H)".
size_t greedy_encode(const FstTables &t, const uint8_t *text, size_t n, uint32_t *out, GreedyStats *stats = nullptr);

// The same algorithm written plainly (every non-empty table probed from L_tok down, memcmp
// guard): the oracle that tests and fuzz/fst_tables.cc compare greedy_encode's ids against.
size_t greedy_encode_reference(const FstTables &t, const uint8_t *text, size_t n, uint32_t *out, GreedyStats *stats = nullptr);

// Concatenates Dec[id]; returns the byte count (throws STK_E_INVALID_ARGUMENT past out_cap or for
// an id outside the table).
size_t fst_decode(const FstTables &t, const uint32_t *ids, size_t n, uint8_t *out, size_t out_cap);

}  // namespace stk
