// A published generation mapped read-only for O(1) lookups (stk_generation_open / stk_lookup).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "format/array.h"
#include "format/manifest.h"
#include "hash/cuckoo.h"
#include "hash/mphf.h"
#include "stk/stk.h"
#include "tokenizer/fst_tables.h"

namespace stk {
struct RefrunModel;  // runtime/refrun.h
}

struct stk_generation {
    std::string dir;
    // The manifest read at open (after verification), and each array stk_generation_array_at
    // mapped so far (mapped and verified on first use, then kept until close).
    stk::Manifest manifest;
    mutable std::mutex views_mu;
    mutable std::vector<std::unique_ptr<stk::ArrayReader>> views;  // one slot per manifest array
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
    uint64_t linear_count = 0;                // C
    const uint8_t *linear_keys = nullptr;     // [C] u64 LE
    const uint8_t *linear_weights = nullptr;  // [C] f32 LE
    // The bridge's hub bitsets (absent when the generation has no bridge_hubs.bin: HUB lookups
    // then answer STK_E_MISSING_ARRAY).  A view into the mapped array, validated at open.
    bool has_bridge = false;
    std::unique_ptr<stk::ArrayReader> br_hubs, br_qdin;
    const uint8_t *bridge_hubs = nullptr;  // [tokens + contexts, w] u64 LE
    uint64_t bridge_tokens = 0;            // token rows (bridge_qDin.bin's rows)
    uint32_t bridge_contexts = 0, bridge_w = 0;
    // The reference runtime's view of the arrays (runtime/refrun.h), built on first use.
    mutable std::mutex refrun_mu;
    mutable std::shared_ptr<const stk::RefrunModel> refrun;
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

// Maps bridge_hubs.bin and bridge_qDin.bin (its row count is the vocabulary) into g (called by
// map_generation when bridge_hubs.bin exists; bridge_qDin.bin absent: STK_E_MISSING_ARRAY).
void map_bridge(stk_generation &g);

// Attaches the hub bitsets from bridge_hubs.bin's payload: `rows` rows of w u64 words, the first
// `tokens` of them token rows, the rest context rows.  Validates (STK_E_CORRUPT naming the
// array): w in {2, 3}, len == rows * w * 8, 0 < tokens < rows, rows - tokens a power of two
// <= 65536, every row with 1 or 2 bits set.  The memory must outlive g.
void attach_bridge(stk_generation &g, const uint8_t *hubs, size_t len, uint64_t rows, uint32_t w, uint64_t tokens);

// HUB: the hub bitset of token `token` in context `context`: token row | context row, w words
// into out[0..w).  False if either id is out of range.  O(1), thread-safe (read-only).
bool bridge_hub_bitset(const stk_generation &g, uint32_t token, uint32_t context, uint64_t *out);

// Array `index` of the manifest, mapped and verified against its entry on first use (thread-safe).
void generation_array(const stk_generation &g, uint32_t index, stk_array_view &out);

// One lookup (the body of stk_lookup).
void generation_lookup(const stk_generation &g, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                       size_t value_cap, size_t *value_len);

}  // namespace stk
