// Generator proposals C_t (seed 4.6): P_gen token ids, most useful first, recorded in the
// manifest.  From the merge ranks when the vocabulary has merges (a BPE merge learned earlier was
// more frequent in the training corpus: its result id comes first), else from the SentencePiece
// scores (higher first, ties by id), else splitmix64 over the id space.  Special / control
// tokens are never proposed.  Deterministic: depends on the vocabulary only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/arena.h"
#include "tokenizer/vocab.h"

namespace stk {

constexpr uint32_t kDefaultPGen = 256;

enum class ProposalSource : uint8_t { MERGES = 0, SCORES = 1, SPLITMIX64 = 2 };

struct Proposals {
    const uint32_t *ids = nullptr;  // [count], in the arena
    uint32_t count = 0;             // P_gen = min(requested, proposable ids)
    ProposalSource source = ProposalSource::SPLITMIX64;
};

size_t proposals_arena_size(uint32_t vocab_size, uint32_t p_gen);
Proposals build_proposals(const Vocab &v, uint32_t p_gen, Arena &arena);

}  // namespace stk
