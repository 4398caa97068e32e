// The greedy encoder's tables (tokenizer/fst_tables.h) built in memory from a byte-level BPE
// vocabulary, as the tokenizer stage selects them (vocab_greedy.cc): for `stk tokenize --mode
// greedy` and the encode benchmark.  STK_E_UNSUPPORTED for other vocabularies (EXT mode).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "tokenizer/vocab.h"

namespace stk {

struct FstTables;

struct GreedyTables {
    GreedyTables(const Vocab &vocab, uint32_t l_tok);
    ~GreedyTables();
    std::unique_ptr<FstTables> tables;

private:
    std::vector<uint8_t> dec_blob;
    std::vector<uint64_t> accel;                    // attach_greedy_accel
    std::list<std::vector<uint8_t>> blobs, arenas;  // stable addresses
};

}  // namespace stk
