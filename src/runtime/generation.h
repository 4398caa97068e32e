// A published generation mapped read-only for O(1) lookups (stk_generation_open / stk_lookup).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/array.h"
#include "hash/cuckoo.h"
#include "hash/mphf.h"
#include "stk/stk.h"
#include "tokenizer/fst_tables.h"

struct stk_generation {
    std::string dir;
    // Tokenizer tables (absent when the generation has no tokenizer_fst.bin: EXT mode or no
    // tokenizer; token lookups then answer STK_E_MISSING_ARRAY).
    bool has_tokenizer = false;
    std::unique_ptr<stk::ArrayReader> fst;
    std::vector<std::unique_ptr<stk::ArrayReader>> tables;  // T_1..T_Ltok
    stk::FstTables tok;
    std::vector<uint64_t> greedy_accel;  // attach_greedy_accel's memory for tok
    // The linear dictionary (absent when the generation has no linear_mphf.bin: LINEAR lookups
    // then answer STK_E_MISSING_ARRAY).  Views into the mapped arrays, validated at open.
    bool has_linear = false;
    std::unique_ptr<stk::ArrayReader> lin_mphf, lin_keys, lin_weights, lin_delta;
    stk::Mphf linear_mphf;
    stk::CuckooTable linear_delta;
    uint64_t linear_count = 0;  // C
    const uint8_t *linear_keys = nullptr;     // [C] u64 LE
    const uint8_t *linear_weights = nullptr;  // [C] f32 LE
};

namespace stk {

// Maps <dir>/arrays/tokenizer_fst.bin and T_1..T_Ltok.bin: array headers and payload checksums
// verified (ArrayReader), table structures validated.  stk_generation_open first verifies the
// whole generation (manifest included) with verify_generation, then calls this.
std::unique_ptr<stk_generation> map_generation(const std::string &dir);

// Maps the four linear arrays into g (called by map_generation when linear_mphf.bin exists).
void map_linear(stk_generation &g);

// Attaches the linear dictionary from its arrays' payloads (what map_linear does once the array
// headers and checksums are verified): validates the MPHF and the cuckoo table (STK_E_CORRUPT /
// STK_E_TRUNCATED naming the array) and that the MPHF covers exactly C keys.  The memory must
// outlive g.  After it, no key can make linear_find read outside these payloads.
void attach_linear(stk_generation &g, const uint8_t *mphf, size_t mphf_len, const uint8_t *keys, const uint8_t *weights,
                   uint64_t c, const uint8_t *delta, size_t delta_len);

// LINEAR: key -> f32 value: the base entry if the MPHF's slot holds this key, else the delta
// entry; false if neither (an entry the truncation dropped: its value is 0).  *probes counts
// slots compared (1 + at most d*b + S + 1).  Thread-safe (read-only).
bool linear_find(const stk_generation &g, uint64_t key, float *value, uint32_t *probes);

// One lookup (the body of stk_lookup).
void generation_lookup(const stk_generation &g, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                       size_t value_cap, size_t *value_len);

}  // namespace stk
