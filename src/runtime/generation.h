// A published generation mapped read-only for O(1) lookups (stk_generation_open / stk_lookup).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/array.h"
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
};

namespace stk {

// Maps <dir>/arrays/tokenizer_fst.bin and T_1..T_Ltok.bin: array headers and payload checksums
// verified (ArrayReader), table structures validated.  stk_generation_open first verifies the
// whole generation (manifest included) with verify_generation, then calls this.
std::unique_ptr<stk_generation> map_generation(const std::string &dir);

// One lookup (the body of stk_lookup).
void generation_lookup(const stk_generation &g, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                       size_t value_cap, size_t *value_len);

}  // namespace stk
